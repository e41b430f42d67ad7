"""The compact table a translation-table page opens with, made from the code that ran.

One row per concept, one column per framework. Each cell is that framework's
decisive call, as its tab writes it (the build reads it from the page:
:mod:`rosetta_book.decisive_calls`, which leaves it in :data:`CALLS_FILE`
beside the parts' results), followed by the verdict of its check (exact, with
the condition it holds under; approximate, with the measured error; or none,
with the framework's reason). Each row links to its concept's section and
says what its check ran on. Nothing in the table is typed by hand.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS
from .tab_results import RESULTS_FOLDER_VARIABLE

#: The file, in the results folder, where the build leaves each concept's decisive calls.
CALLS_FILE = "decisive-calls.json"
#: The marker of a framework that has no such API.
NONE = "none"


class CompactTableError(ValueError):
    """A compact table that cannot be made as its checks and calls say."""


def load_calls(folder: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The decisive calls the build read from this page (see the module's note)."""
    folder = folder or os.environ.get(RESULTS_FOLDER_VARIABLE)
    if not folder:
        raise CompactTableError(f"no results folder: {RESULTS_FOLDER_VARIABLE} is not set (the build sets it)")
    path = Path(folder) / CALLS_FILE
    if not path.is_file():
        raise CompactTableError(f"{path}: the build left no decisive calls for this page")
    return json.loads(path.read_text())


def _code(text: str) -> str:
    """A Markdown code span that survives a table cell."""
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}"


def _calls(named: Sequence[Mapping[str, Any]]) -> str:
    return " then ".join(_code(call["text"]) for call in named)


def _short(check: Any) -> str:
    """The verdict as a compact cell says it."""
    if check.error is None:
        return f"none: {check.note}" if check.note else "none"
    if not check.exact:
        return check.counted() or f"approximate ({check.error:.1g})"
    if check.condition:
        return f"exact where {_code(check.condition)}; else differs ({check.outside})"
    return "exact"


def compact_rows(checks: Iterable[Any], calls: Mapping[str, Mapping[str, Any]],
                 frameworks: Sequence[str], checked_on: Mapping[str, str] | None = None
                 ) -> tuple[list[str], list[list[str]]]:
    """Headers and Markdown rows: per concept its linked title, per framework its calls and
    verdict, and what it was checked on. A concept whose framework checked something no
    call names (or names a call it has no result for) is refused."""
    by_concept: dict[str, dict[str, Any]] = {}
    for check in checks:
        by_concept.setdefault(check.concept, {})[check.framework] = check
    missing = [concept for concept in by_concept if concept not in calls]
    if missing:
        raise CompactTableError(f"no decisive calls for the concepts {missing}")
    checked_on = checked_on or {}
    rows = []
    for concept, entry in calls.items():
        if concept not in by_concept:
            raise CompactTableError(f"concept {concept!r} has decisive calls but was not checked")
        title = entry["title"]
        row = [f"{{ref}}`{title} <{entry['label']}>`" if entry.get("label") else title]
        for framework in frameworks:
            check = by_concept[concept].get(framework)
            named = entry["calls"].get(framework)
            if named is None:
                raise CompactTableError(f"concept {concept!r}, framework {framework}: no decisive call")
            if check is None:  # a framework this build did not execute: its code, unchecked
                row.append(("" if named == NONE else _calls(named) + ": ") + "not checked in this build")
                continue
            if (named == NONE) != (check.error is None):
                raise CompactTableError(
                    f"concept {concept!r}, framework {framework}: the decisive call is {named!r} but the "
                    + ("part left no result" if check.error is None else "part computed a result"))
            row.append(("" if named == NONE else _calls(named) + ": ") + _short(check))
        row.append(checked_on.get(concept, "one case"))
        rows.append(row)
    headers = ["concept", *(FRAMEWORK_TITLES[name] for name in frameworks), "checked on"]
    return headers, rows


def compact_markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The rows as a Markdown table (cells are already Markdown)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell.replace("\n", " ") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def compact_table(checks: Iterable[Any], grids: Mapping[str, Sequence[Any]] | None = None) -> Any:
    """The page's compact table, displayable (Markdown): its checks, with the decisive calls
    the build left (:func:`load_calls`), a column for every framework with code on the page
    (checked or not in this build), and each grid's parameters."""
    from IPython.display import Markdown

    from rosetta_utils.cases import grid_axes

    calls = load_calls()
    present = {framework for entry in calls.values() for framework in entry["calls"]}
    frameworks = [framework for framework in FRAMEWORKS if framework in present]
    checked_on = {concept: grid_axes(cases) for concept, cases in (grids or {}).items()}
    return Markdown(compact_markdown(*compact_rows(checks, calls, frameworks, checked_on)))
