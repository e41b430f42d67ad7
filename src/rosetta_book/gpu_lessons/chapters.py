"""The chapters the GPU lessons measure, loaded through the chapter loader: each page's
framework part up to the section where the benchmark stops (its Setup, Data and Model:
the sizes, the data, the builder), never a copy of its code."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Callable, Iterable

from ..bench.tasks import TASKS
from ..chapter import load_chapter

#: The chapters each lesson needs.
NEEDS = {"autotuning": ("cifar10", "resnet50"), "precision": ("cifar10", "resnet50"),
         "layouts": ("cifar10", "resnet50"), "fused-rnn": ("imdb",)}


def load_chapters(book: Path, framework: str, jobs: Iterable[str], only: Iterable[str] | None = None
                  ) -> dict[str, dict[str, Any]]:
    """``{network: namespace}`` for the chapters ``jobs`` need (``only`` narrows them), each
    loaded up to its benchmark's stopping section. All are loaded before anything is
    measured: a page's Setup sets the framework's switches (e.g. ``cudnn.benchmark``)."""
    networks = [name for name in ("cifar10", "resnet50", "imdb") if any(name in NEEDS[job] for job in jobs)]
    if only is not None:
        networks = [name for name in networks if name in set(only)]
    return {name: load_chapter(book / Path(TASKS[name].page).relative_to("book"), framework,
                               until=TASKS[name].stop_before) for name in networks}


def first_batch(network: str, namespace: dict[str, Any], limit: int | None = None) -> tuple[Any, ...]:
    """The page's own first batch (:meth:`rosetta_book.bench.tasks.Task.inputs`); ``limit``
    keeps its first examples only (a rehearsal on a CPU, never on the GPU)."""
    inputs = TASKS[network].inputs(namespace)
    if limit is None:
        return inputs
    return tuple(tuple(part[:limit] for part in item) if isinstance(item, tuple) else item[:limit]
                 for item in inputs)


def default_of(builder: Callable[..., Any], option: str) -> Any:
    """The default of one of a page builder's options: the page's configuration."""
    parameter = inspect.signature(builder).parameters.get(option)
    if parameter is None or parameter.default is inspect.Parameter.empty:
        raise ValueError(f"the page's {builder.__name__} has no option {option!r} with a default")
    return parameter.default


def data_label(namespace: dict[str, Any], real: str) -> str:
    """``real`` (e.g. ``"CIFAR-10"``) or ``"synthetic stand-in"``, from the page's data set."""
    return "synthetic stand-in" if namespace["data"].synthetic else real
