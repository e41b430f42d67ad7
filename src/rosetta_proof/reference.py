"""The 2018 reference's published figures, and the chart that sets a run beside them.

The reference is the public repository ilkarman/DeepLearningFrameworks
("Comparing deep learning frameworks: a Rosetta Stone approach", 2018-03-14).
Its figures are theirs, on their GPUs (K80 and P100, CUDA 8/9, cuDNN 6/7;
single unseeded runs, no warm-up in training timings, some "P100" cells run
on a V100). The book shows them only beside its own runs, labelled as theirs.
Where a task has several of their notebooks per framework, the closest to the
book's tab is kept: Keras on TensorFlow for the TensorFlow tab (Keras 3),
Gluon for MXNet where they published it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

REFERENCE_NAME = "ilkarman/DeepLearningFrameworks (2018)"
REFERENCE_URL = "https://github.com/ilkarman/DeepLearningFrameworks"
GPUS = ("K80", "P100")


@dataclass(frozen=True)
class PublishedTimes:
    """One task's published times: seconds on each GPU per framework (None: not published)."""

    task: str
    what: str  # what the seconds measure
    seconds: Mapping[str, tuple[float | None, float | None]]
    items: int  # images or reviews the seconds cover
    notes: str

    def items_per_second(self, framework: str) -> tuple[float | None, float | None]:
        pair = self.seconds.get(framework, (None, None))
        return tuple(None if s is None else self.items / s for s in pair)  # type: ignore[return-value]


CIFAR10 = PublishedTimes(
    "cifar10", "10 epochs of training, 49,984 images each",
    {"pytorch": (169, 51), "tensorflow": (241, 76), "mxnet": (152, 57), "chainer": (162, 69)},
    items=10 * 49_984,
    notes="TensorFlow: their Keras-on-TensorFlow figure (their low-level TensorFlow notebook took "
          "173/57 s); MXNet: Gluon; JAX did not exist in their comparison.",
)
IMDB = PublishedTimes(
    "imdb", "3 epochs of training, 24,960 reviews each",
    {"pytorch": (31, 16), "tensorflow": (35, 26), "mxnet": (29, 24)},
    items=3 * 24_960,
    notes="TensorFlow: their Keras-on-TensorFlow figure (low-level TensorFlow: 30/22 s); MXNet: the "
          "symbolic Module API (no Gluon time was published); no Chainer or JAX figure.",
)
RESNET50 = PublishedTimes(
    "resnet50", "seconds per 1,000 images of feature extraction, batch 32",
    {"pytorch": (7.7, 1.9), "tensorflow": (10.2, 2.9), "mxnet": (None, 1.7), "chainer": (9.3, 2.7)},
    items=1000,
    notes="TensorFlow: their Keras-on-TensorFlow figure (raw TensorFlow: 6.5/1.8 s); MXNet: Gluon "
          "(no K80 figure); JAX did not exist in their comparison.",
)
PUBLISHED = {times.task: times for times in (CIFAR10, IMDB, RESNET50)}


def plot_against_reference(task: str, ours: Mapping[str, float], label: str, ylabel: str, title: str,
                           *, per_item: bool = True):
    """A bar chart of ``ours`` (per framework) beside the reference's K80 and P100 bars,
    on a log scale; ``per_item`` compares items per second, else seconds per item batch
    as published. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt
    import numpy as np

    times = PUBLISHED[task]
    frameworks: Sequence[str] = list(ours)
    if per_item:
        theirs = [[times.items_per_second(fw)[gpu] or 0 for fw in frameworks] for gpu in (0, 1)]
    else:
        theirs = [[times.seconds.get(fw, (None, None))[gpu] or 0 for fw in frameworks] for gpu in (0, 1)]
    positions = np.arange(len(frameworks))
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.bar(positions - 0.27, [ours[fw] for fw in frameworks], 0.27, label=label)
    for offset, gpu, values in ((0.0, GPUS[0], theirs[0]), (0.27, GPUS[1], theirs[1])):
        ax.bar(positions + offset, values, 0.27, label=f"reference, {gpu} (theirs, 2018)")
    ax.set_xticks(positions, frameworks)
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    fig.tight_layout()
    return fig
