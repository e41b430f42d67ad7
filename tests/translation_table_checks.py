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


def executed_lines(path: Path, framework: str) -> set[tuple[str, int]]:
    """Run ``framework``'s part of the page in this process, as the chapter loader does, and
    return every (cell, line) of the page's code that executed: cells are compiled under
    the name ``page:line`` (:meth:`rosetta_book.page.Page.where`)."""
    from rosetta_book.chapter import load_chapter

    prefix = f"{path.resolve()}:"
    seen: set[tuple[str, int]] = set()

    def local(frame, event, arg):
        if event == "line":
            seen.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(prefix) else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        load_chapter(path, framework)
    finally:
        sys.settrace(previous)
    return seen


def calls_never_executed(path: Path, framework: str) -> list[str]:
    """The decisive calls of ``framework`` that the compact table would show and that its part
    never executed, as ``"concept: call (page:line)"``."""
    from rosetta_book.decisive_calls import decisive_calls
    from rosetta_book.page import Page

    page = Page.read(path.resolve())
    seen = executed_lines(path, framework)
    missing = []
    for concept, entry in decisive_calls(page).items():
        calls = entry["calls"].get(framework)
        for call in calls if isinstance(calls, list) else []:
            if (page.where(call.cell), call.line) not in seen:
                missing.append(f"{concept}: {call.text} ({page.where(call.cell)} line {call.line})")
    return missing


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
