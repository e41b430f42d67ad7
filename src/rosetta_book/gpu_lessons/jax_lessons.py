"""The GPU lessons' JAX measurements, in a process of their own (see the package).

The process's XLA flags carry the autotuning level it measures
(``--xla_gpu_autotune_level``, set by :mod:`rosetta_book.gpu_lessons.__main__`
before JAX starts). Every network, step and input is the chapters' (:mod:`.chapters`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rosetta_utils.backends.jax import float32_precision

from .chapters import data_label, first_batch, load_chapters
from .measure import convolution_layouts, describe_layouts, time_calls

DATA = {"cifar10": "CIFAR-10", "resnet50": "CIFAR-10 at 224 pixels", "imdb": "IMDB"}


def versions() -> dict[str, str]:
    import flax
    import jaxlib

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "flax": flax.__version__}


def wait(result: Any) -> None:
    """JAX dispatches asynchronously: a timed call ends when its result is ready."""
    jax.block_until_ready(result)


def device_name(array: jax.Array) -> str:
    """The GPU's name as the array's device reports it, or ``"cpu"``."""
    device = min(array.devices(), key=lambda found: found.id)
    return "cpu" if device.platform == "cpu" else device.device_kind


def _parameters(model: Any) -> dict[str, np.ndarray]:
    leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
    return {f"parameter{index}": np.asarray(leaf) for index, leaf in enumerate(leaves)}


class Measurer:
    """One process's measurements: the chapters, the timing rule and where results go."""

    def __init__(self, sink: Any, chapters: dict[str, dict[str, Any]], setting: str, repeats: int, warmup: int,
                 limit: int | None = None):
        self.sink, self.chapters, self.setting, self.limit = sink, chapters, setting, limit
        self.timing = {"repeats": repeats, "warmup": warmup}

    def autotuning(self) -> None:
        """Each network's first call (tracing, compiling and XLA's autotuning included) and
        steady call at this process's autotuning level, and the arrays a second run of the
        same level must reproduce bit for bit."""
        flags = os.environ.get("XLA_FLAGS", "")
        namespace = self.chapters["cifar10"]
        model, train_step, to_device = namespace["make_training"]()
        images, labels = first_batch("cifar10", namespace, self.limit)
        x, y = to_device(images, labels)
        model.train()
        losses = []

        def step() -> jax.Array:
            losses.append(train_step(x, y))
            return losses[-1]

        timed, loss = time_calls(step, wait, **self.timing)
        arrays = {"losses": np.asarray(jnp.stack(losses)), **_parameters(model)}
        self.sink.add("lesson-autotuning", device_name(loss),
                      {"network": "cifar10", "batch": len(labels), "setting": self.setting,
                       "step": "training step (nnx.jit)", "xla_flags": flags, "float32": float32_precision(),
                       "data": data_label(namespace, DATA["cifar10"])},
                      {**timed.metrics(first=True), "steps": len(losses)}, arrays)
        namespace = self.chapters["resnet50"]
        model, extract_features = namespace["make_resnet50"]()
        namespace["load_weights"](model, namespace["weights"])
        (images,) = first_batch("resnet50", namespace, self.limit)
        on_device = jnp.asarray(images)  # the page's extract_features takes it from there
        timed, features = time_calls(lambda: extract_features(on_device), wait, **self.timing)
        self.sink.add("lesson-autotuning", device_name(features),
                      {"network": "resnet50", "batch": len(images), "setting": self.setting,
                       "step": "forward pass (nnx.jit)", "xla_flags": flags, "float32": float32_precision(),
                       "data": data_label(namespace, DATA["resnet50"])},
                      timed.metrics(first=True), {"features": np.asarray(features)})

    def layouts(self) -> None:
        """The memory layout XLA chose for the ResNet-50 page's convolutions, read from the
        compiled HLO of its forward pass, and that pass's time."""
        namespace = self.chapters["resnet50"]
        model, _ = namespace["make_resnet50"](jit=False)
        namespace["load_weights"](model, namespace["weights"])
        graphdef, state = nnx.split(model)
        forward = jax.jit(lambda state, x: nnx.merge(graphdef, state)(x))
        (images,) = first_batch("resnet50", namespace, self.limit)
        x = jnp.asarray(images.transpose(0, 2, 3, 1))  # Flax's NHWC, as the page feeds its model
        compiled = forward.lower(state, x).compile()
        chosen = describe_layouts(convolution_layouts(compiled.as_text()))
        timed, features = time_calls(lambda: compiled(state, x), wait, **self.timing)
        self.sink.add("lesson-layouts", device_name(features),
                      {"network": "resnet50", "batch": len(images), "setting": "XLA's choice",
                       "dtype": "float32", "xla_layout": chosen, "step": "forward pass (jax.jit)",
                       "read_from": "the compiled HLO: each convolution's input, its order in memory",
                       "float32": float32_precision(), "data": data_label(namespace, DATA["resnet50"])},
                      timed.metrics())

    def fused_rnn(self) -> None:
        """The IMDB page's training step: ``nnx.RNN``, a ``lax.scan`` over its GRU cell,
        compiled by XLA (JAX has no fused GRU kernel)."""
        namespace = self.chapters["imdb"]
        inputs, labels = first_batch("imdb", namespace, self.limit)
        model, train_step, to_device = namespace["make_training"]()
        x, y = to_device(inputs, labels)
        model.train()
        timed, loss = time_calls(lambda: train_step(x, y), wait, **self.timing)
        self.sink.add("lesson-fused-rnn", device_name(loss),
                      {"network": "imdb", "batch": len(labels), "setting": "nnx scan",
                       "kernel": namespace["gru_kernel"], "steps_per_review": int(namespace["MAXLEN"]),
                       "step": "training step (nnx.jit)", "float32": float32_precision(),
                       "data": data_label(namespace, DATA["imdb"])},
                      timed.metrics())


def run(sink: Any, book: Path, jobs: list[str], setting: str, repeats: int, warmup: int,
        limit: int | None = None) -> None:
    """Load the chapters ``jobs`` need, then measure each job in turn."""
    chapters = load_chapters(book, "jax", jobs)
    measurer = Measurer(sink, chapters, setting, repeats, warmup, limit)
    for job in jobs:
        getattr(measurer, job.replace("-", "_"))()
