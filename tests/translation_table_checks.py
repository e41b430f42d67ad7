"""What every translation-table page's test checks, once: its compact table is generated
(no row typed by hand), each decisive call it shows ran in the part that computed the
concept, and each concept ran in every framework and was checked numerically."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from rosetta_proof.translation_checks import numeric_shares
from rosetta_utils import FRAMEWORKS

#: The share of a page's concepts each framework must check numerically (issue 20's target).
SHARE_FLOOR = 0.95

#: A hand-typed compact row: a Markdown table row whose second cell is code.
TYPED_ROW = re.compile(r"^\| [^|]+ \| `", re.M)
#: Where a table page shows its generated compact table.
GLUED_TABLE = "```{glue:md} compact_table\n:format: myst\n```"


def rows_typed_by_hand(path: Path) -> int:
    return len(TYPED_ROW.findall(path.read_text()))


def _argument_pairs(call) -> list[tuple[str, object]]:
    """``(the argument as the code writes it, the value the compact cell shows)`` for each
    argument of a decisive call (and of the calls in its arguments) that the cell shows as a
    value where the code names it."""
    import ast

    def parsed(text):
        return ast.parse(f"_({text})" if re.match(r"^\w+=", text) else text, mode="eval").body

    found = {}

    def pair(code, shown):
        if not (isinstance(code, ast.Call) and isinstance(shown, ast.Call)):
            return
        kept = {k.arg: k.value for k in shown.keywords}
        written = list(zip(code.args, shown.args)) + [(k.value, kept[k.arg]) for k in code.keywords if k.arg in kept]
        for mine, theirs in [(code.func, shown.func), *written]:
            if ast.unparse(mine) != ast.unparse(theirs):
                try:
                    value = ast.literal_eval(theirs)
                except ValueError:
                    value = None  # shown by a name or an expression, not a value
                else:
                    found.setdefault((ast.unparse(mine), repr(value)), (ast.unparse(mine), value))
            pair(mine, theirs)

    pair(parsed(call.source), parsed(call.text))
    return list(found.values())


def shown_calls(page, framework: str):
    """``(concept, call)`` for each decisive call of ``framework`` the page's compact table shows."""
    from rosetta_book.decisive_calls import decisive_calls

    for concept, entry in decisive_calls(page).items():
        calls = entry["calls"].get(framework)
        for call in calls if isinstance(calls, list) else []:
            yield concept, call


def traced_run(path: Path, framework: str) -> tuple[set[tuple[str, int]], dict]:
    """Run ``framework``'s part of the page in this process, as the chapter loader does, and
    return every (cell, line) of the page's code that executed (cells are compiled under
    the name ``page:line``, :meth:`rosetta_book.page.Page.where`), and, for each decisive
    call whose compact cell shows an argument as a value, the values that argument took
    where the call's line ran: ``{(cell, line, argument): [values]}``."""
    from rosetta_book.chapter import load_chapter
    from rosetta_book.page import Page

    page = Page.read(path.resolve())
    watched: dict[tuple[str, int], list[str]] = {}
    for _, call in shown_calls(page, framework):
        for code, _ in _argument_pairs(call):
            watched.setdefault((page.where(call.cell), call.line), []).append(code)
    prefix = f"{path.resolve()}:"
    seen: set[tuple[str, int]] = set()
    values: dict = {}

    def local(frame, event, arg):
        if event == "line":
            where = (frame.f_code.co_filename, frame.f_lineno)
            seen.add(where)
            for code in watched.get(where, ()):
                # A cell's top level reads its names from its globals: asking that frame for its
                # locals would write them back over a comprehension's own (Python 3.12 inlines
                # comprehensions), so only a function's frame lends its locals.
                names = frame.f_globals if frame.f_code.co_name == "<module>" else frame.f_locals
                try:
                    value = eval(code, frame.f_globals, names)  # noqa: S307 - the page's own names
                except Exception:  # a name this frame does not have yet (a lambda's argument)
                    continue
                values.setdefault((*where, code), []).append(value)
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(prefix) else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        load_chapter(path, framework)
    finally:
        sys.settrace(previous)
    return seen, values


def calls_never_executed(path: Path, framework: str, traced=None) -> list[str]:
    """The decisive calls of ``framework`` that the compact table would show and that its part
    never executed, as ``"concept: call (page:line)"``."""
    from rosetta_book.page import Page

    page = Page.read(path.resolve())
    seen, _ = traced or traced_run(path, framework)
    return [f"{concept}: {call.text} ({page.where(call.cell)} line {call.line})"
            for concept, call in shown_calls(page, framework) if (page.where(call.cell), call.line) not in seen]


def arguments_not_shown_as_run(path: Path, framework: str, traced=None) -> list[str]:
    """The arguments a compact cell shows as a value that the traced execution did not give
    the call (never evaluated there, or another value), as ``"concept: argument: ..."``."""
    import numpy as np

    from rosetta_book.page import Page

    page = Page.read(path.resolve())
    _, values = traced or traced_run(path, framework)
    wrong = []
    for concept, call in shown_calls(page, framework):
        for code, shown in _argument_pairs(call):
            taken = values.get((page.where(call.cell), call.line, code), [])
            if not taken:
                wrong.append(f"{concept}: {code} (shown as {shown!r}): never evaluated where the call ran")
            elif any(not np.array_equal(np.asarray(value, dtype=object), np.asarray(shown, dtype=object))
                     for value in taken):
                wrong.append(f"{concept}: {code} (shown as {shown!r}) ran as {taken[0]!r}")
    return wrong


def page_with(page: Path, folder: Path, old: str, new: str) -> Path:
    """A copy of ``page`` in ``folder`` where ``old`` (found exactly once) reads ``new``: a
    test's way to change one line of a table page (a condition, a call) and run it."""
    text = page.read_text()
    assert text.count(old) == 1, f"{page.name}: {old!r} is not on the page exactly once"
    path = folder / page.name
    path.write_text(text.replace(old, new))
    return path


def assert_every_concept_checked(checks, promised: int, frameworks=FRAMEWORKS) -> None:
    """At least ``promised`` concepts, each run in every framework, SHARE_FLOOR of them checked
    numerically in each framework, and every exact row within its bound."""
    concepts = {check.concept for check in checks}
    assert len(concepts) >= promised, f"{len(concepts)} concepts, {promised} promised"
    for concept in concepts:
        assert sorted(c.framework for c in checks if c.concept == concept) == sorted(frameworks), concept
    assert min(numeric_shares(checks).values()) >= SHARE_FLOOR, numeric_shares(checks)
    exact = [c for c in checks if c.exact and c.error is not None]
    assert exact and all(c.error <= c.tolerance for c in exact)


def assert_the_page_stops_naming(page: Path, broken_results, page_name: str, concept: str, framework: str,
                                 case: str | None = None) -> None:
    """The page's comparisons, run on ``broken_results``, stop with the TranslationMismatch
    that names the page, the concept, the framework (and the grid's case, if given)."""
    import pytest

    from rosetta_book.chapter import ChapterError, load_comparisons
    from rosetta_proof.translation_checks import TranslationMismatch

    with pytest.raises(ChapterError) as failure:
        load_comparisons(page, broken_results)
    assert isinstance(failure.value.__cause__, TranslationMismatch), failure.value
    message = str(failure.value.__cause__)
    assert page_name in message and f"'{concept}'" in message and f"framework {framework}" in message, message
    if case is not None:
        assert f"case {case}" in message, message
