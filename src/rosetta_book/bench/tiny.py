"""A tiny benchmark task that runs through the benchmark's real processes in a few seconds.

``TINY`` times a few numpy operations instead of a page (its :meth:`~TinyTask.load`
returns a namespace, as the chapter loader would), so that the tests can run the
parent (:func:`rosetta_book.bench.run.run_task`) and its processes
(:mod:`rosetta_book.bench.worker`) end to end, process environments included:
``run_task("rosetta_book.bench.tiny:TINY", ("pytorch",), ...)``. Its step returns the
value of ``OMP_NUM_THREADS`` that its process sees (0: unset), so a test can tell
that an alternative's environment reached its process. Only the matrix products of
the peak import the framework; the tiny steps need none.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping

import numpy as np

from .tasks import Alternative, Task

#: FLOP of one example's forward pass, as a page would declare it.
#: The tiny tasks' steps return what the tests read (a process's thread setting), not a
#: result to compare configurations by: every configuration counts as computing the page's.
NOT_COMPARED = float("inf")
FLOP_PER_ITEM = 2 * 8 * 8


def make_training(size=8, scale=1.0, die_after=None, unsupported=False):
    """A stand-in for a page's builder: ``(model, train_step, to_device)``. With
    ``die_after``, the step kills its own process (SIGKILL, as the kernel's out-of-memory
    killer would) on the call after that many; ``unsupported``, its first call raises, as
    TensorFlow's channels-first convolution does on a CPU without oneDNN."""
    weights = np.full((size, size), scale, dtype=np.float32)
    calls = []

    def train_step(x, y):
        if unsupported:
            raise RuntimeError("The Conv2D op currently only supports the NHWC tensor format on the CPU.\n"
                               "\t [[{{node conv2d}}]] (a stand-in's message)")
        calls.append(1)
        if die_after is not None and len(calls) > die_after:
            os.kill(os.getpid(), signal.SIGKILL)
        (x @ weights).sum()
        return float(os.environ.get("OMP_NUM_THREADS", "0"))

    return weights, train_step, lambda inputs, labels: (inputs, labels)


@dataclass(frozen=True)
class TinyTask(Task):
    def load(self, framework: str, root: Path) -> dict[str, Any]:
        data = SimpleNamespace(x_train=np.ones((4, 8), np.float32), y_train=np.zeros(4, np.int64),
                               source="synthetic (the benchmark's tiny test task)")
        return {"make_training": make_training, "data": data, "epoch_batches": lambda epoch: [np.arange(4)]}

    def flops_per_item(self, namespace: Mapping[str, Any]) -> int:
        return FLOP_PER_ITEM

    def synchronize(self, framework: str) -> Callable[[Any], None]:
        return lambda value=None: None  # numpy is synchronous


TINY = TinyTask("tiny", "(no page)", "make_training", True, {
    "pytorch": {
        "page": Alternative({}, "the builder's defaults"),
        "scale 2": Alternative({"scale": 2.0}, "another option"),
        "page, 1 thread": Alternative({}, "another process environment", env={"OMP_NUM_THREADS": "1"}),
        "not possible": Alternative(why="a setting not timed", dropped="not possible here"),
    },
    # a second framework, for the runs that time frameworks in turn (JAX: the current environment)
    "jax": {"page": Alternative({}, "the builder's defaults")},
}, same_result=NOT_COMPARED)

#: The same, with an option its builder does not take: its process reports the error.
BROKEN = TinyTask("tiny-broken", "(no page)", "make_training", True, {
    "pytorch": {"page": Alternative({}, "the builder's defaults"),
                "unknown option": Alternative({"nope": 1}, "an option the builder does not take")},
}, same_result=NOT_COMPARED)

#: The same, with a configuration this machine cannot run: it is reported failed, the others timed.
UNSUPPORTED = TinyTask("tiny-unsupported", "(no page)", "make_training", True, {
    "pytorch": {"page": Alternative({}, "the builder's defaults"),
                "channels first": Alternative({"unsupported": True}, "a layout this CPU's kernels refuse"),
                "scale 2": Alternative({"scale": 2.0}, "another option")},
}, same_result=NOT_COMPARED)

#: The same, whose process is killed once the rounds begin (after its warm-up calls).
KILLED = TinyTask("tiny-killed", "(no page)", "make_training", True, {
    "pytorch": {"page": Alternative({}, "the builder's defaults"),
                "dies": Alternative({"die_after": 3}, "killed at its first timed call")},
}, same_result=NOT_COMPARED)


def make_features(width=4):
    """A stand-in for a feature extractor's builder: ``(model, extract)``, a PyTorch model of
    two convolutions (imported here: only this task's processes need PyTorch)."""
    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(width, width, 1)).eval()

    def extract(images):
        with torch.inference_mode():
            return model(torch.from_numpy(images)).mean((2, 3))

    return model, extract


@dataclass(frozen=True)
class TinyFeatureTask(TinyTask):
    def load(self, framework: str, root: Path) -> dict[str, Any]:
        data = SimpleNamespace(source="synthetic (the benchmark's tiny test task)")
        return {"make_features": make_features, "data": data,
                "images": np.ones((2, 3, 8, 8), np.float32), "BATCH": 2}

    def inputs(self, namespace: Mapping[str, Any], batch_factor: float = 1.0) -> tuple[Any, ...]:
        return (namespace["images"][:round(namespace["BATCH"] * batch_factor)],)


#: Feature extraction with a probe of its model's convolutions (two, on 2 images of 8 x 8:
#: 3->4 3x3 and 4->4 1x1).
TINY_FEATURES = TinyFeatureTask("tiny-features", "(no page)", "make_features", False, {
    "pytorch": {"page": Alternative({}, "the builder's defaults"),
                "wider": Alternative({"width": 8}, "another option")},
}, convolutions=True, same_result=NOT_COMPARED)
TINY_FEATURE_FLOPS = 2 * 2 * 8 * 8 * 4 * (3 * 9 + 4)
