"""The chapter loader: run exactly the code a page shows, one framework part at a time.

``load_chapter(path, framework)`` runs the code cells of the page's
``framework`` part (its shared cells and that framework's cells, the same
cells as the framework's download, see :mod:`rosetta_book.page`) in page
order, in a fresh namespace, and returns that namespace. Tests and benchmarks
call the page's own functions through it, so the code they check is the code
readers see; nothing is copied into the package.

``load_comparisons(path, results)`` then runs the page's shared and
comparison cells on what the framework parts left (see
:mod:`rosetta_proof.tab_results`), exactly as the book build does after the
framework parts ran.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from .decisive_calls import write_decisive_calls
from .environments import require_python
from .one_framework import environment
from .page import Page, PageError
from rosetta_proof import epilogue
from rosetta_proof.equivalence import forget_checks
from rosetta_proof.tab_results import RESULTS_FOLDER_VARIABLE, collect_tab_results, load_tab_results, save_tab_results


class ChapterError(RuntimeError):
    """A page that cannot be loaded, or a cell of it that failed; names page and line."""


@contextlib.contextmanager
def _registered(module: types.ModuleType) -> Iterator[None]:
    """Put ``module`` in ``sys.modules`` while the page runs, as a kernel's ``__main__`` is:
    ``dataclasses``, ``typing`` and ``pickle`` look classes' modules up there."""
    previous = sys.modules.get(module.__name__)
    sys.modules[module.__name__] = module
    try:
        yield
    finally:
        if previous is None:
            del sys.modules[module.__name__]
        else:
            sys.modules[module.__name__] = previous


@contextlib.contextmanager
def _working_directory(folder: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _read(path: str | Path) -> Page:
    try:
        return Page.read(Path(path).resolve())
    except PageError as error:
        raise ChapterError(str(error)) from None


def _run_cells(page: Page, indexes: Iterable[int], what: str, opening: str | None = None) -> dict[str, Any]:
    module = types.ModuleType("__chapter__")
    module.__file__ = str(page.path)
    namespace: dict[str, Any] = module.__dict__
    cells = page.code_cells(indexes)
    if opening is not None:  # the borrowed code the part opens with (Page.borrowed_cell)
        cells.insert(0, (None, opening))
    with _working_directory(page.path.parent), _registered(module):
        for index, source in cells:
            where = f"{page.path} (front matter 'borrows')" if index is None else page.where(index)
            if any(text.lstrip().startswith(("%", "!")) for text in source.splitlines()):
                raise ChapterError(
                    f"{where}: IPython magics and shell escapes cannot run in the "
                    "chapter loader; write the cell in plain Python"
                )
            try:
                exec(compile(source, where, "exec"), namespace)  # noqa: S102 - the page's own code
            except Exception as error:
                section = None if index is None else page.section_of(index)
                in_section = f" (section {section!r})" if section else ""
                raise ChapterError(f"{where}: the {what} failed in this cell{in_section}: "
                                   f"{type(error).__name__}: {error}") from error
    return namespace


def load_chapter(path: str | Path, framework: str, until: str | None = None) -> dict[str, Any]:
    """Execute the code of a page's ``framework`` part; return the namespace.

    ``until`` names a section heading (e.g. ``"Training"``) before which to
    stop, so that a benchmark can take a page's model without training it.
    Cells run in the page's own folder, as in the book build. A cell that
    raises becomes a :class:`ChapterError` naming the page and the cell's
    line, with the original exception chained.
    """
    page = _read(path)
    try:
        indexes = page.framework_part(framework, until)
        opening = page.borrowed_cell(framework)
    except PageError as error:
        raise ChapterError(str(error)) from None
    return _run_cells(page, indexes, f"{framework} part", opening)


def tab_results_of(path: str | Path, framework: str, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """What the page's comparisons read from ``framework``'s part, taken from its namespace."""
    from .page_execution import part_request

    request = part_request(_read(path), framework, "")  # what the part's epilogue saves, not saved here
    return collect_tab_results(namespace, request["names"], framework, page=request["page"],
                               callees=request["callees"])


#: Names the folder of a book build's execution caches (``_build/.jupyter_cache``): where
#: that build already executed a part with the same code, profile and helpers, the loader
#: takes its results from there instead of running the part again (``make test`` runs the
#: unit tests after the smoke build).
BUILD_CACHE_VARIABLE = "ROSETTA_BUILD_CACHE"


def _from_the_build(page: Page, framework: str) -> dict[str, Any] | None:
    base = os.environ.get(BUILD_CACHE_VARIABLE)
    if not base:
        return None
    from .page_execution import framework_parts_cache, take_from_cache

    folder = framework_parts_cache(base)
    if not folder.is_dir():
        return None
    from jupyter_cache import get_cache

    with tempfile.TemporaryDirectory(prefix="rosetta-part-") as results:
        if take_from_cache(page, framework, Path(results), get_cache(folder)) is None:
            return None
        return load_tab_results(results)[framework].as_dict()


#: Held by :func:`run_framework_part` for all it does in this process, so that the threads
#: of :func:`run_framework_parts` overlap only in waiting for their processes: CPython 3.11
#: (the legacy frameworks' Python) keeps one ``ast`` recursion count per interpreter, and
#: any two parses at once can fail (:mod:`rosetta_book.python_source`), including those
#: the standard library and the cache's libraries make on their own (``inspect.signature``).
_ONE_THREAD = threading.Lock()


def run_framework_part(path: str | Path, framework: str, timeout: float | None = None) -> dict[str, Any]:
    """Run ``framework``'s part of the page in a fresh Python process, where every other
    framework's import fails, as in the book build; return its tab results. Where
    ``ROSETTA_BUILD_CACHE`` names a build that executed the same code under the same
    conditions, its results are taken from there (see :data:`BUILD_CACHE_VARIABLE`)."""
    with _ONE_THREAD:
        page = _read(path)
        page.check_framework(framework)
        built = _from_the_build(page, framework)
    if built is not None:
        return built
    with tempfile.TemporaryDirectory(prefix="rosetta-part-") as folder:
        command = [require_python(framework), "-m", "rosetta_book.chapter", str(page.path), framework, folder]
        try:
            env = environment(framework, temporary=Path(folder) / "temporary")  # removed with the folder
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ChapterError(f"{page.path}: the {framework} part ran longer than {timeout} s") from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            reason = next((line for line in reversed(lines) if "ChapterError" in line), "\n".join(lines[-20:]))
            raise ChapterError(f"the {framework} part of {page.path} failed in its own process: {reason}")
        with _ONE_THREAD:
            return load_tab_results(folder)[framework].as_dict()


def run_framework_parts(path: str | Path, frameworks: Iterable[str], timeout: float | None = None,
                        at_once: int = 1) -> dict[str, dict[str, Any]]:
    """:func:`run_framework_part` for each framework, ``at_once`` processes at a time (for
    callers that time nothing; the book's timed pages run one; see
    :func:`rosetta_book.page_execution.run_parts`): ``{framework: tab results}`` in
    ``frameworks``' order. The first part that fails stops the others from starting."""
    from .page_execution import run_parts

    frameworks = list(frameworks)
    results = run_parts(lambda framework: run_framework_part(path, framework, timeout), frameworks, at_once)
    return dict(zip(frameworks, results))


def load_comparisons(path: str | Path, results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Run the page's shared and comparison cells on ``results`` (``{framework:
    tab results}``, as :func:`run_framework_parts` returns); return the namespace."""
    page = _read(path)
    with tempfile.TemporaryDirectory(prefix="rosetta-tab-results-") as folder:
        for framework, values in results.items():
            save_tab_results(values, folder, framework)
        try:
            write_decisive_calls(page, folder)
        except PageError as error:
            raise ChapterError(str(error)) from None
        forget_checks()  # the records these cells write carry this page's checks only
        with _environment(RESULTS_FOLDER_VARIABLE, folder):
            return _run_cells(page, page.comparison_part(), "comparison")


def _main(argv: list[str]) -> int:
    """``python -m rosetta_book.chapter PAGE FRAMEWORK FOLDER``: run one framework part and
    save its tab results into FOLDER (what :func:`run_framework_part` starts)."""
    if len(argv) != 3:
        print("usage: python -m rosetta_book.chapter PAGE FRAMEWORK FOLDER", file=sys.stderr)
        return 2
    path, framework, folder = argv
    namespace = load_chapter(path, framework)
    from .page_execution import part_request

    epilogue.run_epilogue(namespace, part_request(_read(path), framework, folder))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
