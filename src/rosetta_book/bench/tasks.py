"""What the benchmark times for each task: the page, its builder, and each framework's
alternatives to the configuration the page recommends.

A page's builder (``make_training`` for the training tasks, ``make_resnet50``
for feature extraction) takes the options below as keyword arguments; its
defaults are the configuration the page shows, the one it recommends for the
device it runs on. The benchmark calls that same builder with each
alternative's arguments, so an alternative is the page's code with other
options, never a copy of it. The page's own configuration is found among the
alternatives by comparing them with the builder's defaults.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

Alternatives = Mapping[str, Mapping[str, Mapping[str, Any]]]  # framework -> name -> builder options


@dataclass(frozen=True)
class Task:
    name: str
    page: str  # relative to the project root
    builder: str  # the name of the page's builder in each framework part
    training: bool  # a training step (3 forward passes of work) rather than inference
    alternatives: Alternatives = field(default_factory=dict)
    stop_before: str = "Training"  # the section before which the benchmark stops loading the page

    def inputs(self, namespace: Mapping[str, Any]) -> tuple[Any, ...]:
        """The page's own first batch: ``(inputs, labels)`` for a training step, ``(images,)``
        for feature extraction; sizes come from the page (its BATCH, its data)."""
        if self.name == "resnet50":
            return (namespace["images"][: namespace["BATCH"]],)
        batch = namespace["epoch_batches"](1)[0]
        data = namespace["data"]
        if self.name == "imdb":  # the page's to_device takes (token ids, valid lengths)
            return (data.x_train[batch], data.len_train[batch]), data.y_train[batch]
        return data.x_train[batch], data.y_train[batch]


TASKS = {
    "cifar10": Task("cifar10", "book/chapters/cifar10_cnn.md", "make_training", True, {
        "pytorch": {"NCHW": {"channels_last": False}, "NHWC (channels_last)": {"channels_last": True}},
        "tensorflow": {"XLA off": {"jit_compile": False}, "XLA on": {"jit_compile": True}},
        "jax": {"no jit": {"jit": False}, "jit": {"jit": True}},
        "mxnet": {"imperative": {"hybridize": False}, "hybridized": {"hybridize": True}},
        "chainer": {"numpy (only path)": {}},
    }),
    "imdb": Task("imdb", "book/chapters/imdb_gru.md", "make_training", True, {
        "pytorch": {
            "nn.GRU batch-first, gather": {"fused": True, "batch_first": True, "readout": "gather"},
            "nn.GRU time-major, gather": {"fused": True, "batch_first": False, "readout": "gather"},
            "nn.GRU batch-first, packed": {"fused": True, "batch_first": True, "readout": "packed"},
            "GRUCell loop, time-major": {"fused": False, "batch_first": False, "readout": "gather"},
        },
        "tensorflow": {
            "GRU with mask, XLA off": {"readout": "mask", "jit_compile": False},
            "GRU with mask, XLA on": {"readout": "mask", "jit_compile": True},
            "GRU sequences, gather, XLA off": {"readout": "gather", "jit_compile": False},
            "GRU sequences, gather, XLA on": {"readout": "gather", "jit_compile": True},
        },
        "jax": {
            "nnx.RNN seq_lengths, jit": {"readout": "seq_lengths", "time_major": False, "jit": True},
            "nnx.RNN gather, jit": {"readout": "gather", "time_major": False, "jit": True},
            "nnx.RNN time-major, gather, jit": {"readout": "gather", "time_major": True, "jit": True},
            "nnx.RNN seq_lengths, no jit": {"readout": "seq_lengths", "time_major": False, "jit": False},
        },
        "mxnet": {
            "fused GRU TNC, hybridized": {"fused": True, "layout": "TNC", "hybridize": True},
            "fused GRU NTC, hybridized": {"fused": True, "layout": "NTC", "hybridize": True},
            "fused GRU TNC, imperative": {"fused": True, "layout": "TNC", "hybridize": False},
            "GRUCell unroll TNC, hybridized": {"fused": False, "layout": "TNC", "hybridize": True},
        },
        "chainer": {"NStepGRU on a list of reviews (only path)": {}},
    }),
    "resnet50": Task("resnet50", "book/chapters/resnet50_features.md", "make_resnet50", False, {
        "pytorch": {
            "NCHW, eager": {"channels_last": False, "compile": False, "freeze": False},
            "NHWC, eager": {"channels_last": True, "compile": False, "freeze": False},
            "NHWC, torch.compile": {"channels_last": True, "compile": True, "freeze": False},
            "NHWC, torch.compile, frozen": {"channels_last": True, "compile": True, "freeze": True},
        },
        "tensorflow": {
            "NHWC, XLA off": {"jit_compile": False, "data_format": "channels_last"},
            "NHWC, XLA on": {"jit_compile": True, "data_format": "channels_last"},
            "NCHW, XLA off": {"jit_compile": False, "data_format": "channels_first"},
        },
        "jax": {"no jit": {"jit": False}, "jit": {"jit": True}},
        "mxnet": {
            "imperative": {"hybridize": False, "fuse": False},
            "hybridized": {"hybridize": True, "fuse": False},
            "hybridized, oneDNN fusion": {"hybridize": True, "fuse": True},
        },
        "chainer": {"numpy (only path)": {}},
    }, stop_before="Evaluation"),  # the page has no training; its first calls are in Evaluation
}


def page_configuration(builder: Callable[..., Any], alternatives: Mapping[str, Mapping[str, Any]],
                       where: str = "the page") -> str:
    """The name of the alternative whose options are the builder's defaults (the page's)."""
    try:
        parameters = inspect.signature(builder).parameters
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: cannot read the builder's defaults ({error})") from None
    defaults = {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}
    for name, options in alternatives.items():
        unknown = [key for key in options if key not in parameters]
        if unknown:
            raise ValueError(f"{where}: the builder takes no option {', '.join(map(repr, unknown))} "
                             f"(alternative {name!r}); its parameters: {', '.join(parameters)}")
        if all(key in defaults and defaults[key] == value for key, value in options.items()):
            return name
    shown = {key: defaults.get(key) for options in alternatives.values() for key in options}
    raise ValueError(f"{where}: the builder's defaults {shown} are none of the benchmark's alternatives "
                     f"({', '.join(alternatives)})")
