"""The book's tasks: one registry entry each.

A task is a chapter that the benchmark times, the Results page reports and the
checkpoint command moves between frameworks: CIFAR-10's VGG-style network,
ResNet-50's features, IMDB's GRU classifier. Its entry holds its name (the
records' ``task``), its page, the unit of its rate, and the book's name for its
model (``python -m rosetta_utils.checkpoints <model> ...``). The benchmark's
definition of a task (``rosetta_book.bench.tasks.TASKS``), the models' layouts
(``rosetta_utils.checkpoints``) and the units of the Results page each list the
same names, and a test holds them to this registry (DEVELOPERS.md, "Adding a
framework or a task"); ``make bench`` runs every task here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskEntry:
    #: The records' and the benchmark's name of the task.
    name: str
    #: Its page, from the project's root.
    page: str
    #: What its rate counts, per second.
    unit: str
    #: The book's name of its model in the checkpoint command.
    model: str


#: The book's tasks, in the order of their chapters.
TASK_REGISTRY = {task.name: task for task in (
    TaskEntry("cifar10", "book/chapters/cifar10_cnn.md", "images/s", "cifar10"),
    TaskEntry("resnet50", "book/chapters/resnet50_features.md", "images/s", "resnet50"),
    TaskEntry("imdb", "book/chapters/imdb_gru.md", "reviews/s", "imdb"),
)}
