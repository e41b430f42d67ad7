"""What the benchmark times for each task: the page, its builder, and every setting tried.

A page's builder (``make_training`` for the training tasks, ``make_resnet50``
for feature extraction) takes the options below as keyword arguments; its
defaults are the configuration the page shows. The benchmark calls that same
builder with each alternative's options, so an alternative is the page's code
with other options, never a copy of it; the page's own configuration is the
alternative whose options are the builder's defaults and which needs no
process environment of its own.

Some settings are read once, when a framework starts (thread counts, oneDNN
switches, MXNet's engine and graph backend, Chainer's type checks): an
alternative names them in ``env`` and runs in a process of its own with those
variables set (:mod:`rosetta_book.bench.run`); its ``options`` are usually
the page's own (``{}``: the builder's defaults).

Every setting tried is listed with what it tries (``why``). A setting that
is not timed says why in ``dropped``: it computes something else, or it is
not possible here. A setting the page's builder cannot take yet is added to
the builder as an option (its default the page's choice) and timed like any
other.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from rosetta_proof.record_tables import SECOND_PROCESS
from rosetta_proof.tasks import TASK_REGISTRY

#: The frameworks every task lists, in the book's order.


@dataclass(frozen=True)
class Alternative:
    """One way to run a page's model: builder options, process environment, and why."""

    options: Mapping[str, Any] = field(default_factory=dict)
    why: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    dropped: str | None = None  # why it is not timed; None: it is
    # feature extraction only: the page's batch times this (the same work per image,
    # in other batch sizes); never the page's configuration unless 1
    batch_factor: float = 1.0


Alternatives = Mapping[str, Mapping[str, Alternative]]  # framework -> name -> alternative


@dataclass(frozen=True)
class Task:
    name: str
    page: str  # relative to the project root
    builder: str  # the name of the page's builder in each framework part
    training: bool  # a training step (3 forward passes of work) rather than inference
    alternatives: Alternatives = field(default_factory=dict)
    stop_before: str = "Training"  # the section before which the benchmark stops loading the page
    # per framework: what stops it short of a target, when the search found nothing better
    limits: Mapping[str, str] = field(default_factory=dict)
    # why the frameworks are timed one after another (each framework's processes alone on
    # the machine, its configurations taking turns among themselves); "": all at once
    in_turn: str = ""
    # whether the page's process also times the page model's convolutions alone
    # (rosetta_book.bench.convolutions), to tell its kernels from the layers between them
    convolutions: bool = False
    # a configuration whose first result (a training step's loss; the norm of the first
    # image's features) differs from the page configuration's by more than this (relative)
    # computes something else: reported so, never the fastest
    same_result: float | None = None

    def load(self, framework: str, root: Path) -> dict[str, Any]:
        """The page's ``framework`` part up to :attr:`stop_before` (its Setup, Data and
        Model), run through the chapter loader: the builder, the data, the sizes."""
        from ..chapter import load_chapter

        return load_chapter(root / self.page, framework, until=self.stop_before)

    def flops_per_item(self, namespace: Mapping[str, Any]) -> int:
        """Model FLOP of one example's forward pass, from the page's declared sizes."""
        from .flops import model_flops_per_image

        return model_flops_per_image(self.name, namespace)

    def synchronize(self, framework: str) -> Callable[[Any], None]:
        """What waits for ``framework`` to finish the work queued (asynchronous dispatch)."""
        from rosetta_utils.backends import backend

        return backend(framework).synchronize

    def inputs(self, namespace: Mapping[str, Any], batch_factor: float = 1.0) -> tuple[Any, ...]:
        """The page's own first batch: ``(inputs, labels)`` for a training step, ``(images,)``
        for feature extraction; sizes come from the page (its BATCH, its data).
        ``batch_factor`` scales the page's batch (feature extraction only)."""
        if self.name == "resnet50":
            size = round(namespace["BATCH"] * batch_factor)
            images = namespace["images"]
            if not 0 < size <= len(images):
                raise ValueError(f"{self.page}: a batch of {size} ({batch_factor} x BATCH) needs 1 to "
                                 f"{len(images)} images, the page's")
            return (images[:size],)
        if batch_factor != 1.0:
            raise ValueError(f"{self.name}: only feature extraction times other batch sizes")
        batch = namespace["epoch_batches"](1)[0]
        data = namespace["data"]
        if self.name == "imdb":  # the page's to_device takes (token ids, valid lengths)
            return (data.x_train[batch], data.len_train[batch]), data.y_train[batch]
        return data.x_train[batch], data.y_train[batch]


@dataclass(frozen=True)
class Setting:
    """A process environment an alternative runs in, and why it might be faster."""

    env: Mapping[str, str]
    why: str

    def alternative(self, options: Mapping[str, Any] | None = None) -> Alternative:
        """The page's model built with ``options``, run in this setting's environment."""
        return Alternative(dict(options or {}), self.why, env=self.env)


ONE_THREAD = Setting({"OMP_NUM_THREADS": "1"}, "one OpenMP thread: a small step's kernels may not pay for the "
                     "second core's start and synchronisation")
#: TensorFlow's own thread pools (read at start): one operation at a time, each on every core.
TF_ONE_INTEROP = Setting({"TF_NUM_INTEROP_THREADS": "1"}, "one inter-op thread: operations run one after "
                         "another, each using both cores, instead of competing for them")
TF_NO_ONEDNN = Setting({"TF_ENABLE_ONEDNN_OPTS": "0"},
                       "TensorFlow's Eigen kernels instead of oneDNN's (TF_ENABLE_ONEDNN_OPTS=0)")
XLA_ONE_THREAD = Setting({"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"},
                         "XLA's CPU code on one thread (its documented flags for the thread pool)")
MX_NAIVE = Setting({"MXNET_ENGINE_TYPE": "NaiveEngine"}, "MXNet's synchronous engine: no dependency scheduling "
                   "between operators, which costs most on many small ones")
#: MXNet's own default engine, for a page that chose the synchronous one.
MX_THREADED = Setting({"MXNET_ENGINE_TYPE": "ThreadedEnginePerDevice"},
                      "MXNet's default engine (threaded, dependency scheduling), which the page leaves for "
                      "the synchronous NaiveEngine")
MX_SUBGRAPH = Setting({"MXNET_SUBGRAPH_BACKEND": "MKLDNN"},
                      "oneDNN's graph fusion of the hybridized graph, switched on for every graph")
CHAINER_NO_CHECK = Setting({"CHAINER_TYPE_CHECK": "0"},
                           "Chainer without its per-call type checks (documented as a speed setting)")
CHAINER_IDEEP_WHY = ("not possible here: Chainer's oneDNN path (chainer.config.use_ideep='auto') needs "
                     "the ideep4py package, which no package index here offers for Python 3.11")
#: Why a framework whose fastest setting is one it reads when it starts stops short of a target.
MX_LIMIT = ("MXNet's settings beyond the page's are environment variables it reads when it starts (its "
            "engine, oneDNN's graph fusion); a tab sets one in its code (os.environ.setdefault, before the "
            "import) only where this benchmark finds it faster clear of the spread, as the IMDB page's engine")
CHAINER_LIMIT = ("Chainer's settings beyond the page's are numpy's BLAS threads (an environment variable read "
                 "when numpy loads) and its type checks (chainer.config.type_check = False, which also drops "
                 "the checks that catch a reader's shape errors); the tabs leave a reader's process environment "
                 "alone and keep the checks, and Chainer's oneDNN path (iDeep) cannot be installed here")
JAX_LIMIT = ("JAX's thread settings are XLA flags (XLA_FLAGS) that it reads when it starts; the tabs leave a "
             "reader's process environment alone rather than set variables in their code, so the page runs "
             "with JAX's defaults and a reader sets these in the shell")
TF_IMDB_LIMIT = ("the tab leaves XLA off: on a GPU Keras runs this GRU on cuDNN, which it will not compile "
                 "with XLA (see the chapter's Model section), and the tab runs one way on a CPU and a GPU")
#: The page's configuration again, in a process of its own (SECOND_PROCESS): what two processes
#: running the same code differ by (in trials here, Chainer's CIFAR-10 step ran 1.15 to 1.33x
#: faster in a second process than in the page's), which a setting timed in a process of its
#: own must beat before the difference is the setting's.
SECOND_PROCESS_ENV = {"ROSETTA_BENCH_SECOND_PROCESS": "1"}  # a variable nothing reads
SECOND_PROCESS_WHY = ("the page's configuration in a process of its own: how far two processes running "
                      "the same code differ")


def _with_second_process(alternatives: Alternatives) -> dict[str, dict[str, Alternative]]:
    """``alternatives`` with :data:`SECOND_PROCESS` added for every framework that times a
    setting in a process of its own, so that a process's difference can be told from a setting's."""
    return {framework: {**mine, **({SECOND_PROCESS: Alternative({}, SECOND_PROCESS_WHY, env=SECOND_PROCESS_ENV)}
                                   if any(a.env and not a.dropped for a in mine.values()) else {})}
            for framework, mine in alternatives.items()}


HALF_BATCH_WHY = "the page's configuration on half the page's batch (the same work per image)"
DOUBLE_BATCH_WHY = "the page's configuration on twice the page's batch (the same work per image)"

TASKS = {
    "cifar10": Task("cifar10", TASK_REGISTRY["cifar10"].page, "make_training", True, {
        "pytorch": {
            "NHWC (channels_last)": Alternative({"channels_last": True}, "oneDNN's native layout"),
            "NCHW": Alternative({"channels_last": False}, "PyTorch's default layout"),
            "NHWC, 1 thread": ONE_THREAD.alternative({"channels_last": True}),
            "NHWC, fused SGD": Alternative({"channels_last": True, "fused_optimizer": True},
                                           "torch.optim's fused update: one kernel for every parameter"),
            "NHWC, torch.compile": Alternative({"channels_last": True, "compile": True},
                                               "the forward and backward passes compiled by Inductor"),
        },
        "tensorflow": {
            "XLA off": Alternative({"jit_compile": False}, "TensorFlow's own kernels (oneDNN)"),
            "XLA on": Alternative({"jit_compile": True}, "the step compiled by XLA"),
            "XLA off, 1 inter-op thread": TF_ONE_INTEROP.alternative({"jit_compile": False}),
            "XLA off, without oneDNN": TF_NO_ONEDNN.alternative({"jit_compile": False}),
        },
        "jax": {
            "jit": Alternative({"jit": True}, "the step compiled by XLA"),
            "no jit": Alternative({"jit": False}, "operation by operation"),
            "jit, 1 thread": XLA_ONE_THREAD.alternative({"jit": True}),
            "jit, donated buffers": Alternative({"jit": True, "donate": True},
                                                "the parameters and momenta updated in place, no copy"),
        },
        "mxnet": {
            "hybridized": Alternative({"hybridize": True},
                                      "a static graph, allocated and shaped once (static_alloc, static_shape)"),
            "imperative": Alternative({"hybridize": False}, "operator by operator"),
            "hybridized, 1 thread": ONE_THREAD.alternative({"hybridize": True}),
            "hybridized, NaiveEngine": MX_NAIVE.alternative({"hybridize": True}),
            "hybridized, oneDNN fusion": MX_SUBGRAPH.alternative({"hybridize": True}),
        },
        "chainer": {
            "numpy (only path)": Alternative({}, "Chainer's one CPU path (numpy)"),
            "numpy, 1 thread": ONE_THREAD.alternative(),
            "numpy, no type checks": CHAINER_NO_CHECK.alternative(),
            "iDeep (oneDNN)": Alternative(why="oneDNN's convolutions", dropped=CHAINER_IDEEP_WHY),
        },
    }, limits={"jax": JAX_LIMIT, "mxnet": MX_LIMIT, "chainer": CHAINER_LIMIT},
        # dropout draws other masks in another layout or compiled graph, which moves a fresh
        # network's first loss (ln 10) by a few tenths of a percent; a wrong loss, far more
        same_result=1e-2),
    "imdb": Task("imdb", TASK_REGISTRY["imdb"].page, "make_training", True, {
        "pytorch": {
            "nn.GRU time-major, gather, fused Adam": Alternative(
                {"fused": True, "batch_first": False, "readout": "gather", "fused_optimizer": True},
                "nn.GRU's own layout; torch.optim's fused Adam: one kernel for every parameter"),
            "nn.GRU time-major, gather, Adam's loop": Alternative(
                {"fused": True, "batch_first": False, "readout": "gather", "fused_optimizer": False},
                "torch.optim's Adam as it runs by default on a CPU: a loop over the parameters"),
            "nn.GRU batch-first, gather": Alternative(
                {"fused": True, "batch_first": True, "readout": "gather"}, "no transpose of the ids"),
            "nn.GRU batch-first, packed": Alternative(
                {"fused": True, "batch_first": True, "readout": "packed"}, "the kernel skips the padding"),
            "GRUCell loop, time-major": Alternative(
                {"fused": False, "batch_first": False, "readout": "gather"}, "a Python loop over the cell"),
            "nn.GRU time-major, gather, fused Adam, 1 thread": ONE_THREAD.alternative(),
            "step 150 readout": Alternative(
                why="no gather", dropped="other computation: reads the state after the padding"),
        },
        "tensorflow": {
            "GRU with mask, XLA off": Alternative({"readout": "mask", "jit_compile": False},
                                                  "Keras's masked GRU, TensorFlow's kernels"),
            "GRU with mask, XLA on": Alternative({"readout": "mask", "jit_compile": True},
                                                 "the masked step compiled by XLA"),
            "GRU sequences, gather, XLA off": Alternative({"readout": "gather", "jit_compile": False},
                                                          "every step's state, the last valid one gathered"),
            "GRU sequences, gather, XLA on": Alternative({"readout": "gather", "jit_compile": True},
                                                         "the gathering step compiled by XLA"),
            "GRU with mask, 1 inter-op thread": TF_ONE_INTEROP.alternative(),
            "GRU with mask, without oneDNN": TF_NO_ONEDNN.alternative(),
        },
        "jax": {
            "nnx.RNN seq_lengths, jit": Alternative(
                {"readout": "seq_lengths", "time_major": False, "jit": True}, "nnx.RNN stops at each length"),
            "nnx.RNN gather, jit": Alternative({"readout": "gather", "time_major": False, "jit": True},
                                               "every state, the last valid one gathered"),
            "nnx.RNN time-major, gather, jit": Alternative(
                {"readout": "gather", "time_major": True, "jit": True}, "the scan over the leading axis"),
            "nnx.RNN seq_lengths, no jit": Alternative(
                {"readout": "seq_lengths", "time_major": False, "jit": False}, "operation by operation"),
            "nnx.RNN seq_lengths, jit, 1 thread": XLA_ONE_THREAD.alternative(),
            "nnx.RNN seq_lengths, jit, donated buffers": Alternative(
                {"readout": "seq_lengths", "time_major": False, "jit": True, "donate": True},
                "the parameters and Adam's moments updated in place, no copy"),
        },
        "mxnet": {
            "fused GRU TNC, static shapes": Alternative(
                {"fused": True, "layout": "TNC", "hybridize": True, "static_shape": True},
                "the fused GRU in a static graph planned once for the batch's shape (static_alloc, "
                "static_shape)"),
            "fused GRU TNC, hybridized": Alternative(
                {"fused": True, "layout": "TNC", "hybridize": True, "static_shape": False},
                "the fused GRU in a static graph that re-infers shapes at each call (static_alloc)"),
            "fused GRU NTC, static shapes": Alternative({"fused": True, "layout": "NTC", "hybridize": True},
                                                        "batch-major input"),
            "fused GRU TNC, imperative": Alternative({"fused": True, "layout": "TNC", "hybridize": False},
                                                     "operator by operator"),
            "GRUCell unroll TNC, static shapes": Alternative({"fused": False, "layout": "TNC", "hybridize": True},
                                                             "the cell unrolled into the graph"),
            "fused GRU TNC, static shapes, 1 thread": ONE_THREAD.alternative(),
            "fused GRU TNC, static shapes, threaded engine": MX_THREADED.alternative(),
            "fused GRU TNC, static shapes, oneDNN fusion": MX_SUBGRAPH.alternative(),
        },
        "chainer": {
            "NStepGRU on a list of reviews (only path)": Alternative({}, "Chainer's one path to this GRU"),
            "NStepGRU, 1 thread": ONE_THREAD.alternative(),
            "NStepGRU, no type checks": CHAINER_NO_CHECK.alternative(),
        },
    }, limits={"tensorflow": TF_IMDB_LIMIT, "jax": JAX_LIMIT, "mxnet": MX_LIMIT,
                "chainer": CHAINER_LIMIT},
        same_result=1e-4),  # no random draws in a step: float32's reordering alone
    "resnet50": Task("resnet50", TASK_REGISTRY["resnet50"].page, "make_resnet50", False, {
        "pytorch": {
            "NHWC, torch.compile": Alternative({"channels_last": True, "compile": True, "freeze": False},
                                               "Inductor's code in oneDNN's layout"),
            "NCHW, eager": Alternative({"channels_last": False, "compile": False, "freeze": False},
                                       "PyTorch's default"),
            "NHWC, eager": Alternative({"channels_last": True, "compile": False, "freeze": False},
                                       "oneDNN's layout, no compiler"),
            "NHWC, torch.compile, frozen": Alternative({"channels_last": True, "compile": True, "freeze": True},
                                                       "weights folded in as constants (Inductor's freezing)"),
            "NHWC, torch.compile, 1 thread": ONE_THREAD.alternative(),
            "NHWC, torch.compile, half batch": Alternative({}, HALF_BATCH_WHY, batch_factor=0.5),
            "NHWC, torch.compile, double batch": Alternative({}, DOUBLE_BATCH_WHY, batch_factor=2.0),
        },
        "tensorflow": {
            "NHWC, XLA off": Alternative({"jit_compile": False, "data_format": "channels_last"},
                                         "TensorFlow's oneDNN kernels"),
            "NHWC, XLA on": Alternative({"jit_compile": True, "data_format": "channels_last"},
                                        "compiled by XLA"),
            "NCHW, XLA off": Alternative({"jit_compile": False, "data_format": "channels_first"},
                                         "the channels-first layout"),
            "NHWC, XLA off, 1 inter-op thread": TF_ONE_INTEROP.alternative(),
            "NHWC, XLA off, without oneDNN": TF_NO_ONEDNN.alternative(),
            "NHWC, XLA off, half batch": Alternative({}, HALF_BATCH_WHY, batch_factor=0.5),
            "NHWC, XLA off, double batch": Alternative({}, DOUBLE_BATCH_WHY, batch_factor=2.0),
        },
        "jax": {
            "jit": Alternative({"jit": True}, "compiled by XLA"),
            "no jit": Alternative({"jit": False}, "operation by operation"),
            "jit, 1 thread": XLA_ONE_THREAD.alternative(),
            "jit, half batch": Alternative({}, HALF_BATCH_WHY, batch_factor=0.5),
            "jit, double batch": Alternative({}, DOUBLE_BATCH_WHY, batch_factor=2.0),
        },
        "mxnet": {
            "hybridized, oneDNN fusion": Alternative({"hybridize": True, "fuse": True},
                                                     "oneDNN's fused convolutions, static graph"),
            "hybridized": Alternative({"hybridize": True, "fuse": False}, "a static graph"),
            "imperative": Alternative({"hybridize": False, "fuse": False}, "operator by operator"),
            "hybridized, oneDNN fusion, NaiveEngine": MX_NAIVE.alternative(),
            "hybridized, oneDNN fusion, half batch": Alternative({}, HALF_BATCH_WHY, batch_factor=0.5),
            "hybridized, oneDNN fusion, double batch": Alternative({}, DOUBLE_BATCH_WHY, batch_factor=2.0),
        },
        "chainer": {
            "numpy (only path)": Alternative({}, "Chainer's one CPU path (numpy)"),
            "numpy, no type checks": CHAINER_NO_CHECK.alternative(),
            "iDeep (oneDNN)": Alternative(why="oneDNN's convolutions", dropped=CHAINER_IDEEP_WHY),
        },
    }, stop_before="Evaluation", limits={"jax": JAX_LIMIT, "mxnet": MX_LIMIT, "chainer": CHAINER_LIMIT},  # no training: the first calls are in Evaluation
        in_turn="all five frameworks' processes at once (a ResNet-50 in each, one of them 4.3 GB resident) "
                "outgrew the 2-core machine's 24 GB: the out-of-memory killer ended one",
        convolutions=True,
        same_result=1e-3),  # the chapter's own bound on features
}

#: Every task also times its page's configuration in a second process (see SECOND_PROCESS).
TASKS = {name: replace(task, alternatives=_with_second_process(task.alternatives)) for name, task in TASKS.items()}


def resolve_task(spec: str | Task) -> Task:
    """A task by its name in :data:`TASKS`, or ``"module:attribute"`` naming a :class:`Task`
    elsewhere (the tests' tiny task, which the benchmark's processes import by that name)."""
    if isinstance(spec, Task):
        return spec
    if spec in TASKS:
        return TASKS[spec]
    module, _, attribute = spec.partition(":")
    if not attribute:
        raise KeyError(f"no benchmark task {spec!r}: expected one of {', '.join(TASKS)} or 'module:attribute'")
    task = getattr(importlib.import_module(module), attribute)
    if not isinstance(task, Task):
        raise TypeError(f"{spec} is not a benchmark Task")
    return task


def page_configuration(builder: Callable[..., Any], alternatives: Mapping[str, Alternative],
                       where: str = "the page") -> str:
    """The name of the alternative whose options are the builder's defaults and which needs
    no process environment of its own: the page's configuration."""
    try:
        parameters = inspect.signature(builder).parameters
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: cannot read the builder's defaults ({error})") from None
    defaults = {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}
    timed = {name: alternative for name, alternative in alternatives.items() if not alternative.dropped}
    for name, alternative in timed.items():
        unknown = [key for key in alternative.options if key not in parameters]
        if unknown:
            raise ValueError(f"{where}: the builder takes no option {', '.join(map(repr, unknown))} "
                             f"(alternative {name!r}); its parameters: {', '.join(parameters)}")
    for name, alternative in timed.items():
        if alternative.env or alternative.batch_factor != 1.0:
            continue
        if all(key in defaults and defaults[key] == value for key, value in alternative.options.items()):
            return name
    shown = {key: defaults.get(key) for alternative in timed.values() for key in alternative.options}
    raise ValueError(f"{where}: the builder's defaults {shown} are none of the benchmark's alternatives "
                     f"({', '.join(timed)})")
