"""The porting checklist: the traps the translation tables check, for a pair of frameworks.

Each translation-table page's checks cell records what it checked
(:func:`record_table`) into this build's results folder, ``tables/<page>.json``:
per concept its title and label, the sentences of its prose that name a trap,
and per framework the decisive calls and the verdict. The checklist page,
executed after every other page, reads those records (:func:`load_tables`)
and lists, grouped by table, each concept that matters for a framework: one
whose translation there is not plainly exact (it holds under a condition,
approximately, or not at all) or whose trap names that framework. A reader
picks two frameworks and sees the lines that matter for either, each linked
to its row.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS
from rosetta_utils.frameworks import REGISTRY
from .records import build_results_dir

#: The folder of the tables' records, under this build's results.
TABLES_FOLDER = "tables"
#: How prose names each framework (a trap that says "Keras" names TensorFlow's column).
NAMES = {name: framework.names_in_prose for name, framework in REGISTRY.items()}


class ChecklistError(ValueError):
    """Table records that cannot make a checklist; names the file or the concept."""


def _verdict(check: Any) -> dict[str, Any]:
    return {"error": check.error, "exact": check.exact, "condition": check.condition,
            "outside": check.outside, "note": check.note, "verdict": check.verdict}


def record_table(page: str, title: str, checks: Iterable[Any], calls: Mapping[str, Mapping[str, Any]],
                 folder: Path | None = None) -> Path:
    """Write a table page's checked rows for the checklist; returns the file written.
    ``page`` is the page's path in the book (``tables/layers.md``), ``calls`` what
    :func:`rosetta_proof.compact_table.load_calls` returns."""
    by_concept: dict[str, dict[str, Any]] = {}
    for check in checks:
        by_concept.setdefault(check.concept, {})[check.framework] = _verdict(check)
    rows = []
    for concept, entry in calls.items():
        if concept not in by_concept:
            raise ChecklistError(f"{page}: concept {concept!r} has calls but no checks")
        named = entry["calls"]
        rows.append({
            "concept": concept, "title": entry["title"], "label": entry.get("label"),
            "traps": list(entry.get("traps", [])),
            "frameworks": {framework: {**verdict, "calls": [] if named.get(framework) in (None, "none")
                                       else [call["text"] for call in named[framework]]}
                           for framework, verdict in by_concept[concept].items()},
        })
    target = (folder or build_results_dir()) / TABLES_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{Path(page).stem}.json"
    path.write_text(json.dumps({"page": page, "title": title, "rows": rows}, indent=1, default=float))
    return path


def load_tables(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every table page's record of this build, in the order of their file names."""
    source = (folder or build_results_dir()) / TABLES_FOLDER
    tables = []
    for path in sorted(source.glob("*.json")):
        try:
            table = json.loads(path.read_text())
            table["rows"], table["page"], table["title"]
        except (ValueError, KeyError, TypeError) as error:
            raise ChecklistError(f"{path}: not a table record ({type(error).__name__}: {error})") from None
        tables.append(table)
    return tables


def names_framework(text: str, framework: str) -> bool:
    """Whether ``text`` names ``framework`` (by any of its :data:`NAMES`)."""
    return any(re.search(rf"(?<![\w.]){re.escape(name)}", text) for name in NAMES[framework])


@dataclass(frozen=True)
class Line:
    topic: str
    page: str
    title: str
    label: str | None
    traps: tuple[str, ...]
    cells: dict[str, str] = field(default_factory=dict)  # framework -> calls and verdict
    frameworks: frozenset[str] = frozenset()  # the frameworks it matters for


def _cell(entry: Mapping[str, Any]) -> str:
    calls = " then ".join(f"`{call}`" for call in entry["calls"])
    return f"{calls}: {entry['verdict']}" if calls else entry["verdict"]


def checklist_lines(tables: Iterable[Mapping[str, Any]]) -> list[Line]:
    """One line per concept that matters for at least one framework (rows of one section,
    such as a running mean and variance, share their section's trap and line)."""
    lines = []
    for table in tables:
        seen: set[str] = set()
        for row in table["rows"]:
            key = row["label"] or row["concept"]
            entries = row["frameworks"]
            plain = {fw for fw, entry in entries.items()
                     if entry["error"] is not None and entry["exact"] and not entry["condition"]}
            matters = {fw for fw in entries if fw not in plain}
            matters |= {fw for fw in entries for trap in row["traps"] if names_framework(trap, fw)}
            if not matters:
                continue
            if key in seen:  # the section's line is there: add this row's frameworks to it
                previous = next(n for n, line in enumerate(lines) if line.page == table["page"]
                                and (line.label or line.title) == key)
                old = lines[previous]
                lines[previous] = Line(old.topic, old.page, old.title, old.label, old.traps,
                                       {**old.cells, **{fw: old.cells.get(fw, "") + "; " + _cell(e)
                                                        for fw, e in entries.items()}},
                                       old.frameworks | matters)
                continue
            seen.add(key)
            lines.append(Line(table["title"], table["page"], row["title"], row["label"], tuple(row["traps"]),
                              {fw: _cell(entry) for fw, entry in entries.items()}, frozenset(matters)))
    return lines


def for_pair(lines: Iterable[Line], first: str, second: str) -> list[Line]:
    """The lines that matter when moving code between ``first`` and ``second``."""
    return [line for line in lines if {first, second} & line.frameworks]


def _code(text: str) -> str:
    """Prose with Markdown code spans, as HTML."""
    parts = re.split(r"(`[^`]+`)", text)
    return "".join(f"<code>{html.escape(part[1:-1])}</code>" if part.startswith("`") else html.escape(part)
                   for part in parts)


def checklist_html(lines: Iterable[Line], link_prefix: str = "") -> str:
    """The checklist as HTML: two framework choosers and, per topic, one item per line
    with its trap, each framework's call and verdict, and a link to its row; every item
    names the frameworks it matters for (``data-frameworks``), which the book's script
    uses to show a chosen pair's lines (``?from=pytorch&to=jax`` chooses in the URL)."""
    lines = list(lines)
    options = "".join(f'<option value="{fw}">{html.escape(FRAMEWORK_TITLES[fw])}</option>' for fw in FRAMEWORKS)
    out = ['<div class="rosetta-checklist">',
           '<p class="rosetta-checklist-pair">From <select name="from">' + options + '</select> to '
           '<select name="to">' + options + '</select> <span class="rosetta-checklist-count"></span></p>']
    topic = None
    for line in lines:
        if line.topic != topic:
            if topic is not None:
                out.append("</ul>")
            topic = line.topic
            out.append(f"<h3>{html.escape(topic)}</h3><ul>")
        page = Path(line.page).with_suffix(".html").as_posix()
        target = f"{link_prefix}{page}" + (f"#{line.label}" if line.label else "")
        traps = " ".join(_code(trap) for trap in line.traps) or "Not plainly exact in every framework."
        cells = "".join(
            f'<li data-framework="{fw}"><b>{html.escape(FRAMEWORK_TITLES[fw])}</b>: {_code(text)}</li>'
            for fw, text in line.cells.items())
        out.append(f'<li class="rosetta-checklist-line" data-frameworks="{" ".join(sorted(line.frameworks))}">'
                   f'<a href="{html.escape(target)}">{html.escape(line.title)}</a>: {traps}'
                   f'<ul class="rosetta-checklist-cells">{cells}</ul></li>')
    if topic is not None:
        out.append("</ul>")
    out.append("</div>")
    return "\n".join(out)
