"""Lines of a download that bind names nothing after them reads.

A framework's download (:mod:`rosetta_book.downloads`) should run its task top
to bottom with no code whose results the download never uses. What only the
page's comparison across frameworks reads (the page's ``tab_results``, taken
from the part's namespace after it ran) is such code: inside the download,
nothing reads it. :func:`unread_statements` finds every top-level statement
of a download's code that binds names (an assignment, a ``for`` or ``with``
target, a function or class definition, an import) none of which any later
statement reads, nor any function or class body anywhere in the download (a
function defined earlier may read a name bound later). A statement that binds
nothing (a call, a ``print``) is never counted, nor a name that starts with an
underscore (``for _ in range(3)``: Python's way of saying a name is not read).

``python -m rosetta_book.unread_lines PAGE [FRAMEWORK ...]`` prints them, with a
count per download.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .python_source import bound_names, code_of, definition_bodies, parse, read_names


@dataclass(frozen=True)
class UnreadStatement:
    """A top-level statement whose bound names nothing downstream reads."""

    cell: int  # index of the download's cell
    section: str | None  # the page's section it sits in
    line: int  # first line in that cell (1-based)
    lines: int  # how many lines it spans
    names: tuple[str, ...]
    text: str  # its first line


def unread_statements(sources: list[str]) -> list[UnreadStatement]:
    """The top-level statements of ``sources`` (a download's code cells, in order) whose
    bound names nothing downstream reads (see the module docstring). A cell that is not
    valid Python is skipped."""
    statements: list[tuple[int, ast.stmt, list[str]]] = []
    for cell, source in enumerate(sources):
        try:
            tree = parse(code_of(source))
        except SyntaxError:
            continue
        lines = source.splitlines()
        statements += [(cell, statement, lines) for statement in tree.body]
    in_bodies: set[str] = set()
    for _, statement, _ in statements:
        for body in definition_bodies(statement):
            in_bodies |= read_names(body)
    # Walking backwards, the names read by every statement after the current one.
    read_later: set[str] = set()
    found = []
    for cell, statement, lines in reversed(statements):
        bound = bound_names(statement)
        if not isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom)):
            bound -= read_names(statement)  # a loop's or a block's own names, read inside it
        bound = {name for name in bound if not name.startswith("_")}  # said to be unread
        if bound and not bound & (read_later | in_bodies):
            end = getattr(statement, "end_lineno", statement.lineno) or statement.lineno
            first = statement.lineno
            if getattr(statement, "decorator_list", None):
                first = min(decorator.lineno for decorator in statement.decorator_list)
            found.append(UnreadStatement(cell, None, first, end - first + 1, tuple(sorted(bound)),
                                         lines[first - 1].strip() if first - 1 < len(lines) else ""))
        read_later |= read_names(statement)
    return found[::-1]


def download_unread(page: Any, framework: str) -> list[UnreadStatement]:
    """:func:`unread_statements` of ``framework``'s download of ``page`` (its cells as a
    reader gets them, opening included)."""
    import dataclasses

    from .downloads import download_notebook_with_origins

    notebook, origins = download_notebook_with_origins(page, framework)
    found = unread_statements([cell.source if cell.cell_type == "code" else "" for cell in notebook.cells])
    return [dataclasses.replace(statement, section=None if origins[statement.cell] is None
                                else page.section_of(origins[statement.cell])) for statement in found]


def main(argv: list[str] | None = None) -> int:
    from .page import Page

    parser = argparse.ArgumentParser(prog="python -m rosetta_book.unread_lines",
                                     description="Print the lines of a page's downloads that nothing after them reads.")
    parser.add_argument("pages", type=Path, nargs="+")
    parser.add_argument("--frameworks", default="", help="comma-separated (default: every framework the page has)")
    parser.add_argument("--quiet", action="store_true", help="counts only")
    args = parser.parse_args(argv)
    total = 0
    for path in args.pages:
        page = Page.read(path)
        frameworks = [name for name in args.frameworks.split(",") if name] or list(page.frameworks)
        for framework in frameworks:
            found = download_unread(page, framework)
            count = sum(statement.lines for statement in found)
            total += count
            print(f"{page.name}-{framework}: {count} lines in {len(found)} statements")
            if not args.quiet:
                for statement in found:
                    print(f"  [{statement.section}] cell {statement.cell} line {statement.line} ({statement.lines}): "
                          f"{', '.join(statement.names)}: {statement.text[:80]}")
    print(f"total: {total} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
