"""The chapter loader: run exactly the code a page shows, for one framework.

``load_chapter(path, framework)`` reads a MyST notebook page with MyST-NB's
own reader (the one the book build uses), executes its untagged code cells and
the cells tagged with ``framework``, in page order, in a fresh namespace, and
returns that namespace. Tests call the page's functions through it, so the
code they check is the code readers see; nothing is copied into the package.

Names bound in the framework's cells stay private to them, as in the book's
kernel (:mod:`rosetta_utils.tab_namespaces`): an untagged cell sees only the
shared names, so a page that passes here cannot fail in the build because
an untagged cell reads a tab's variable. The returned namespace has the
framework's names laid over the shared ones.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from pathlib import Path
from typing import Any, Iterator

from . import FRAMEWORKS
from .frameworks import check_framework
from .tab_namespaces import FrameworkNamespaces, source_digest


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


def read_page(path: str | Path) -> Any:
    """Parse a MyST markdown page into a notebook (cells carry ``source_map`` line numbers)."""
    from myst_nb.core.read import read_myst_markdown_notebook

    path = Path(path)
    if not path.is_file():
        raise ChapterError(f"{path}: no such page")
    return read_myst_markdown_notebook(path.read_text(encoding="utf-8"), add_source_map=True, path=path)


def cell_frameworks(cell: Any) -> list[str]:
    """The framework tags of a cell (``[]`` for a cell every framework runs)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return [tag for tag in tags if tag in FRAMEWORKS]


def _headings(cell: Any) -> list[str]:
    return [line.lstrip("#").strip() for line in cell.source.splitlines() if line.startswith("#")]


def code_cells_for(notebook: Any, framework: str, until: str | None = None) -> list[tuple[int, str, bool]]:
    """``(line, source, tagged)`` of the code cells a framework runs: untagged plus its own
    (``tagged``), up to (not including) the section whose heading is ``until``."""
    check_framework(framework)
    source_map = notebook.metadata.get("source_map", [])
    chosen = []
    found_until = until is None
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown" and until is not None and until in _headings(cell):
            found_until = True
            break
        if cell.cell_type != "code":
            continue
        tagged = cell_frameworks(cell)
        if tagged and framework not in tagged:
            continue
        line = source_map[index] + 1 if index < len(source_map) else 0
        chosen.append((line, cell.source, bool(tagged)))
    if not found_until:
        raise ChapterError(f"the page has no section headed {until!r}")
    return chosen


def load_chapter(path: str | Path, framework: str, until: str | None = None) -> dict[str, Any]:
    """Execute a page's untagged cells and ``framework``'s cells; return the namespace.

    ``until`` names a section heading (e.g. ``"Training"``) before which to
    stop, so that a benchmark can take a page's model without training it.

    Cells run in the page's own folder, as they do in the book build. A cell
    that raises becomes a :class:`ChapterError` naming the page and the
    cell's line, with the original exception chained.
    """
    check_framework(framework)
    path = Path(path).resolve()
    notebook = read_page(path)
    module = types.ModuleType("__chapter__")
    module.__file__ = str(path)
    namespace: dict[str, Any] = module.__dict__
    with _working_directory(path.parent), _registered(module):
        try:
            cells = code_cells_for(notebook, framework, until)
        except ChapterError as error:
            raise ChapterError(f"{path}: {error}") from None
        layers = FrameworkNamespaces(namespace, [(framework if tagged else None, source_digest(source))
                                                 for _, source, tagged in cells])
        for line, source, _ in cells:
            if any(text.lstrip().startswith(("%", "!")) for text in source.splitlines()):
                raise ChapterError(
                    f"{path}:{line}: IPython magics and shell escapes cannot run in the "
                    "chapter loader; write the cell in plain Python"
                )
            layers.enter(source)
            try:
                code = compile(source, f"{path}:{line}", "exec")
                exec(code, namespace)  # noqa: S102 - running the page's own code is the point
            except Exception as error:
                raise ChapterError(
                    f"{path}:{line}: the {framework} run failed in this cell: "
                    f"{type(error).__name__}: {error}"
                ) from error
            finally:
                layers.leave()
    namespace.update(layers.private.get(framework, {}))
    return namespace
