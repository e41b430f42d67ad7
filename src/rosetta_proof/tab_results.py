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

The file is a numpy ``.npz`` archive read with ``allow_pickle=False``: every
array in it, plus one JSON document that lays out the structure (numbers,
strings, lists, tuples, dicts, and where each array goes). It is plain data,
so it crosses environments: a part run on numpy 1.26 (MXNet, Chainer) is read
by comparisons on numpy 2, and a value that is not plain data stops the part,
naming page, framework and name.

The book build and the chapter loader (tests, benchmarks) both go through
these functions, so a comparison sees the same values in both.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from rosetta_utils import FRAMEWORKS

#: The environment variable naming the folder of the saved results.
RESULTS_FOLDER_VARIABLE = "ROSETTA_TAB_RESULTS"
_SUFFIX = ".tab-results.npz"
#: The archive member holding the structure (JSON); the arrays are ``a0``, ``a1``, ...
_STRUCTURE = "structure"


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
    namespace: Mapping[str, Any], names: Iterable[str], framework: str, page: str = "the page",
    callees: Iterable[str] = (),
) -> dict[str, Any]:
    """The values of ``names`` in a framework part's namespace, checked to be plain data,
    plus ``environment``: the framework's versions, threads, and the device of an array the
    part made; and where ``callees`` names the callables of a translation table's decisive
    calls, their signatures as this process's release has them (:mod:`rosetta_proof.defaults`)."""
    from .framework_report import report_framework

    results: dict[str, Any] = {}
    for name in names:
        if name not in namespace:
            raise TabResultError(
                f"{page}: the {framework} part never defines {name!r}, which the page's "
                "front matter lists under tab_results"
            )
        results[name] = _plain(namespace[name], f"{page}: the {framework} part's {name!r}")
    callees = tuple(callees)
    if callees:  # a translation table's part: the defaults of the calls its rows name
        from .defaults import DEFAULTS_RESULT, read_signatures

        results[DEFAULTS_RESULT] = _plain(read_signatures(namespace, callees), f"{page}: the {framework} part's defaults")
    report = report_framework(framework, namespace)
    results["environment"] = _plain({
        "versions": dict(report.versions), "device": report.device, "threads": report.threads,
        "float32": report.float32,
        "line": report.line(),
    }, f"{page}: the {framework} part's environment")
    return results


def _encode(value: Any, arrays: list[np.ndarray]) -> Any:
    """``value`` (plain data) as JSON, with each numpy array replaced by its index in ``arrays``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if np.isfinite(value) else {"float": repr(value)}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufcSU":
            raise TabResultError(f"an array of dtype {value.dtype} is not plain data")
        arrays.append(value)
        return {"array": len(arrays) - 1}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, arrays) for item in value]
        return items if isinstance(value, list) else {"tuple": items}
    if isinstance(value, Mapping):
        return {"dict": [[_encode(key, arrays), _encode(item, arrays)] for key, item in value.items()]}
    raise TabResultError(f"a {type(value).__name__} is not plain data")


def _decode(value: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    if isinstance(value, list):
        return [_decode(item, arrays) for item in value]
    if not isinstance(value, dict):
        return value
    (kind, content), = value.items()
    if kind == "array":
        return arrays[f"a{content}"]
    if kind == "float":
        return float(content)
    if kind == "tuple":
        return tuple(_decode(item, arrays) for item in content)
    return {_decode_key(key, arrays): _decode(item, arrays) for key, item in content}


def _decode_key(key: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    decoded = _decode(key, arrays)
    return tuple(decoded) if isinstance(decoded, list) else decoded


def save_tab_results(results: Mapping[str, Any], folder: str | Path, framework: str) -> Path:
    """Write one framework's results into ``folder`` as plain data; returns the file.

    The file is written under a temporary name and renamed, so a part that
    stops half-way leaves no file that looks complete.
    """
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}")
    arrays: list[np.ndarray] = []
    structure = {}
    for name, value in results.items():
        try:
            structure[name] = _encode(_plain(value, f"the {framework} part's {name!r}"), arrays)
        except TabResultError as error:
            raise TabResultError(f"the {framework} part's {name!r} cannot cross to the comparisons: "
                                 f"{error}") from None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = results_file(folder, framework)
    partial = folder / f"{framework}.partial"
    members = {f"a{index}": array for index, array in enumerate(arrays)}
    members[_STRUCTURE] = np.array(json.dumps(structure, allow_nan=False))
    with open(partial, "wb") as handle:  # straight to the file: no second copy in memory
        np.savez(handle, **members)
    os.replace(partial, target)
    return target


def results_file(folder: str | Path, framework: str) -> Path:
    """Where ``framework``'s part leaves its results in ``folder``."""
    return Path(folder) / f"{framework}{_SUFFIX}"


def read_tab_results(path: str | Path) -> dict[str, Any]:
    """One saved framework's results, read without unpickling anything."""
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files if name != _STRUCTURE}
        structure = json.loads(str(archive[_STRUCTURE]))
    return {name: _decode(value, arrays) for name, value in structure.items()}


def save_namespace_results(namespace: Mapping[str, Any], names: Iterable[str], framework: str,
                           page: str, folder: str | Path, callees: Iterable[str] = ()) -> Path:
    """:func:`collect_tab_results` then :func:`save_tab_results`: what runs after a part."""
    return save_tab_results(collect_tab_results(namespace, names, framework, page, callees), folder, framework)


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
    the chapter loader's :func:`rosetta_book.chapter.load_comparisons`) set
    for the comparison cells.
    """
    if folder is None:
        configured = os.environ.get(RESULTS_FOLDER_VARIABLE)
        if not configured:
            raise TabResultError(
                "load_tab_results() reads what each framework's part of the page saved; it runs "
                "in the book build or through rosetta_book.chapter.load_comparisons, which set "
                f"{RESULTS_FOLDER_VARIABLE}"
            )
        folder = configured
    folder = Path(folder)
    if not folder.is_dir():
        raise TabResultError(f"{RESULTS_FOLDER_VARIABLE}={folder}: no such folder")
    runs = {}
    for framework in FRAMEWORKS:
        path = results_file(folder, framework)
        if path.is_file():
            runs[framework] = TabRun(framework, read_tab_results(path))
    return runs


def where_and_precision(run: Any) -> str:
    """A timing table's cell: where a part ran, how it computed float32 there (its
    framework's defaults) and with which releases, e.g. ``cpu, TF32 allowed; torch
    2.14.1, numpy 2.5.5, Python 3.12.1``."""
    environment = run["environment"] if isinstance(run, Mapping) else run.environment
    versions = ", ".join(f"{name} {version}" for name, version in environment.get("versions", {}).items())
    float32 = environment.get("float32") or "float32 not reported"
    return f"{environment['device']}, {float32}; {versions or 'versions not reported'}"
