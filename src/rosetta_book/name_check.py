"""Find the names a framework's part of a page reads but never defines.

Each framework's part (its download) must run on its own. A cell that reads a
name made only by another framework's cells, or by a comparison cell, would
work nowhere but in a kernel that ran the whole page. :func:`undefined_names`
runs pyflakes over the part's code cells joined in page order and reports
every name read before anything binds it, with the page line of its cell.
The build refuses such a page (:func:`check_page`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .page import Page, PageError
from .python_source import parse

#: Names a Jupyter kernel defines for every notebook.
KERNEL_BUILTINS = ("display", "get_ipython")


@dataclass(frozen=True)
class UndefinedName:
    page: str
    line: int  # the page line of the cell that reads it
    framework: str
    name: str

    def __str__(self) -> str:
        return (f"{self.page}:{self.line}: the {self.framework} part reads {self.name!r}, which neither "
                "its own cells nor the shared cells define before it (a download would fail here)")


def undefined_names(page: Page, framework: str) -> list[UndefinedName]:
    """Every name ``framework``'s part reads before binding it, in page order."""
    from pyflakes import checker, messages

    cells = page.code_cells(page.framework_part(framework))
    code, starts = [], []  # starts[k]: (first joined line of cell k, its page index)
    line = 1
    for index, source in cells:
        starts.append((line, index))
        code.append(source.rstrip("\n") + "\n")
        line += source.rstrip("\n").count("\n") + 1
    joined = "".join(code)
    try:
        tree = parse(joined, filename=str(page.path))
    except SyntaxError as error:
        cell = max((start for start in starts if start[0] <= (error.lineno or 1)), default=(1, 0))
        raise SyntaxError(f"{page.where(cell[1])}: {error.msg}") from None
    found = []
    borrowed = tuple(name for _, _, name in page.borrowings)  # the names the part's opening cell sets
    for message in checker.Checker(tree, filename=str(page.path), builtins=KERNEL_BUILTINS + borrowed).messages:
        if isinstance(message, messages.UndefinedName):
            cell = max(start for start in starts if start[0] <= message.lineno)
            found.append(UndefinedName(str(page.path), page.line(cell[1]), framework, message.message_args[0]))
    return found


def check_page(page: Page) -> None:
    """Refuse a page that breaks a convention (:meth:`Page.check`), whose concepts lack a
    decisive call (:func:`rosetta_book.decisive_calls.decisive_calls`) or whose framework
    part reads a name it never defines: a :class:`PageError` naming every such name."""
    from .decisive_calls import decisive_calls

    page.check()
    decisive_calls(page)
    try:
        problems = [str(found) for framework in page.tagged_frameworks()
                    for found in undefined_names(page, framework)]
    except SyntaxError as error:
        raise PageError(str(error)) from None
    if problems:
        raise PageError("\n".join(problems))
