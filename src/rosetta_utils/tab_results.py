"""What each framework's part of a page leaves for the page's comparison cells.

Each framework part of a page runs on its own (the download a reader takes
away, a fresh process in the build). The comparisons that follow need some of
its values: a parameter count, logits, weights after one step, epoch times.
The page lists those names in its front matter (``tab_results: [...]``);
after a framework part ran, :func:`collect_tab_results` takes them from its
namespace (plain data only: numbers, strings, numpy arrays and containers of
them, so nothing of the framework travels), together with a report of where
the framework ran, and :func:`save_tab_results` writes them to one file per
framework. The comparison cells read them back with :func:`load_tab_results`.

The book build and the chapter loader (tests, benchmarks) both go through
these functions, so a comparison sees the same values in both.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from . import FRAMEWORKS

#: The environment variable naming the folder of the saved results.
RESULTS_FOLDER_VARIABLE = "ROSETTA_TAB_RESULTS"
_SUFFIX = ".tab-results.pickle"


class TabResultError(RuntimeError):
    """A framework part that does not leave what its page's comparisons read."""


def _plain(value: Any, where: str) -> Any:
    """``value`` if it is plain data (numpy arrays become copies), else a clear error."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    for plain_type in (bool, int, float, str):  # subclasses, e.g. torch's version string
        if isinstance(value, plain_type):
            return plain_type(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TabResultError(f"{where} is a numpy array of Python objects; give it a numeric dtype")
        return np.array(value, copy=True)
    if isinstance(value, (list, tuple)):
        items = [_plain(item, f"{where}[{index}]") for index, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, Mapping):
        plain = {}
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool, tuple)):
                raise TabResultError(f"{where} has a key of type {type(key).__name__}; use strings")
            plain[key] = _plain(item, f"{where}[{key!r}]")
        return plain
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    raise TabResultError(
        f"{where} is a {kind}, not plain data: convert it to a number, a string or a "
        "numpy array in the tab, so that comparing it needs no framework"
    )


def collect_tab_results(
    namespace: Mapping[str, Any], names: Iterable[str], framework: str, page: str = "the page"
) -> dict[str, Any]:
    """The values of ``names`` in a framework part's namespace, checked to be plain data,
    plus ``environment``: the framework's versions, threads, and the device of an array the
    part made."""
    from .envreport import report_framework

    results: dict[str, Any] = {}
    for name in names:
        if name not in namespace:
            raise TabResultError(
                f"{page}: the {framework} part never defines {name!r}, which the page's "
                "front matter lists under tab_results"
            )
        results[name] = _plain(namespace[name], f"{page}: the {framework} part's {name!r}")
    report = report_framework(framework, namespace)
    results["environment"] = _plain({
        "versions": dict(report.versions), "device": report.device, "threads": report.threads,
        "float32": report.float32,
        "line": report.line(),
    }, f"{page}: the {framework} part's environment")
    return results


def save_tab_results(results: Mapping[str, Any], folder: str | Path, framework: str) -> Path:
    """Write one framework's results into ``folder``; returns the file."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{framework}{_SUFFIX}"
    partial = target.with_suffix(".partial")
    with open(partial, "wb") as handle:
        pickle.dump(dict(results), handle, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(partial, target)
    return target


def save_namespace_results(namespace: Mapping[str, Any], names: Iterable[str], framework: str,
                           page: str, folder: str | Path) -> Path:
    """:func:`collect_tab_results` then :func:`save_tab_results`: what runs after a part."""
    return save_tab_results(collect_tab_results(namespace, names, framework, page), folder, framework)


class TabRun(Mapping[str, Any]):
    """One framework's results: ``run["test_accuracy"]`` or ``run.test_accuracy``."""

    def __init__(self, framework: str, values: Mapping[str, Any]):
        self.framework = framework
        self._values = dict(values)

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(
                f"the {self.framework} part left no result named {name!r} (it left: "
                f"{', '.join(sorted(self._values))}); list it under tab_results in the front matter"
            ) from None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as error:
            raise AttributeError(error.args[0]) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"TabRun({self.framework!r}, {sorted(self._values)})"

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)


def load_tab_results(folder: str | Path | None = None) -> dict[str, TabRun]:
    """``{framework: TabRun}`` for every framework part that ran, in the book's tab order.

    Reads the folder named by ``ROSETTA_TAB_RESULTS``, which the book build (and
    the chapter loader's :func:`rosetta_utils.chapter.load_comparisons`) set
    for the comparison cells.
    """
    if folder is None:
        configured = os.environ.get(RESULTS_FOLDER_VARIABLE)
        if not configured:
            raise TabResultError(
                "load_tab_results() reads what each framework's part of the page saved; it runs "
                "in the book build or through rosetta_utils.chapter.load_comparisons, which set "
                f"{RESULTS_FOLDER_VARIABLE}"
            )
        folder = configured
    folder = Path(folder)
    if not folder.is_dir():
        raise TabResultError(f"{RESULTS_FOLDER_VARIABLE}={folder}: no such folder")
    runs = {}
    for framework in FRAMEWORKS:
        path = folder / f"{framework}{_SUFFIX}"
        if path.is_file():
            with open(path, "rb") as handle:
                runs[framework] = TabRun(framework, pickle.load(handle))
    return runs


def where_and_precision(run: Any) -> str:
    """A timing table's cell: where a part ran and how it computed float32 there
    (its framework's defaults, e.g. ``cpu, TF32 allowed``)."""
    environment = run["environment"] if isinstance(run, Mapping) else run.environment
    return f"{environment['device']}, {environment.get('float32') or 'float32 not reported'}"
