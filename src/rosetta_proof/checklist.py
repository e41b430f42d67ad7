"""The porting checklist: the traps the translation tables check, ranked for a pair of frameworks.

Each translation-table page's checks cell records what it checked
(:func:`record_table`) into this build's results folder, ``tables/<page>.json``:
per concept its title and label, the sentences of its prose that name a trap,
and per framework the decisive calls, the verdict and the framework's results
against each other framework's, case by case. The checklist page, executed
after every other page, reads those records (:func:`load_tables`) and ranks,
for each direction of each pair, what every row costs a port
(:func:`trap_cost`, :data:`COSTS`): results that differ silently on every case
checked, on some cases, the same values in another dtype, an error or a
missing call, the same results as the
table writes them where the prose names a trap, or initial weights that
differ; and the aligned defaults that differ between the two (their records,
:func:`record_aligned`, from :mod:`rosetta_proof.defaults`). A pair's list
opens with its few worst silent traps, one line each with the fix; every line
links to its row.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS
from .records import build_results_dir

#: The folder of the tables' records, under this build's results.
TABLES_FOLDER = "tables"
#: The folder of their aligned defaults (:func:`record_aligned`), beside it.
DEFAULTS_FOLDER = "tables-defaults"
#: How prose names each framework (a trap that says "Keras" names TensorFlow's column).
#: How the tables' prose names each framework (a porting trap that says "Keras" is
#: TensorFlow's), where its title alone does not say it all; any other framework goes by
#: its title, without what the parentheses add (:func:`names_framework`).
NAMES = {"pytorch": ("PyTorch", "torch"), "tensorflow": ("TensorFlow", "Keras", "tf."),
         "jax": ("JAX", "Flax", "XLA", "nnx", "optax", "jnp"), "mxnet": ("MXNet", "Gluon"), "chainer": ("Chainer",)}


class ChecklistError(ValueError):
    """Table records that cannot make a checklist; names the file or the concept."""


def _verdict(check: Any) -> dict[str, Any]:
    return {"error": check.error, "exact": check.exact, "condition": check.condition,
            "outside": check.outside, "note": check.note, "verdict": check.verdict,
            "unit": check.unit, "against": [asdict(pair) for pair in check.against]}


def record_table(page: str, title: str, checks: Iterable[Any], calls: Mapping[str, Mapping[str, Any]],
                 folder: Path | None = None) -> Path:
    """Write a table page's checked rows for the checklist; returns the file written.
    ``page`` is the page's path in the book (``tables/layers.md``), ``calls`` what
    :func:`rosetta_proof.compact_table.load_calls` returns."""
    checks = list(checks)
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
            "initial": any(check.initial for check in checks if check.concept == concept),
            "frameworks": {framework: {**verdict, "calls": [] if named.get(framework) in (None, "none")
                                       else [call["text"] for call in named[framework]]}
                           for framework, verdict in by_concept[concept].items()},
        })
    target = (folder or build_results_dir()) / TABLES_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{Path(page).stem}.json"
    path.write_text(json.dumps({"page": page, "title": title, "rows": rows}, indent=1, default=float))
    return path


def record_aligned(page: str, aligned: Iterable[Any], calls: Mapping[str, Mapping[str, Any]],
                    folder: Path | None = None) -> Path:
    """Write a table page's aligned defaults (:func:`rosetta_proof.defaults.aligned_defaults`)
    for the checklist, each with its row's title and label; returns the file written."""
    items = [{"concept": item.concept, "meaning": item.meaning, "title": calls[item.concept]["title"],
              "label": calls[item.concept].get("label"), "shown": item.shown, "values": item.values,
              "verdict": item.verdict} for item in aligned]
    target = (folder or build_results_dir()) / DEFAULTS_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{Path(page).stem}.json"
    path.write_text(json.dumps({"page": page, "aligned": items}, indent=1))
    return path


def load_tables(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every table page's record of this build, in the order of their file names, each with
    its aligned defaults (``aligned``, empty where the page recorded none)."""
    source = (folder or build_results_dir()) / TABLES_FOLDER
    tables = []
    for path in sorted(source.glob("*.json")):
        try:
            table = json.loads(path.read_text())
            table["rows"], table["page"], table["title"]
            defaults = path.parent.parent / DEFAULTS_FOLDER / path.name
            table["aligned"] = json.loads(defaults.read_text())["aligned"] if defaults.is_file() else []
        except (ValueError, KeyError, TypeError) as error:
            raise ChecklistError(f"{path}: not a table record ({type(error).__name__}: {error})") from None
        tables.append(table)
    return tables


def names_framework(text: str, framework: str) -> bool:
    """Whether ``text`` names ``framework`` (by any of its :data:`NAMES`, or by its title)."""
    names = NAMES.get(framework) or (FRAMEWORK_TITLES[framework].split(" (")[0],)
    return any(re.search(rf"(?<![\w.]){re.escape(name)}", text) for name in names)


#: What a trap costs a port, worst first: the groups of a pair's list, in order.
COSTS = {
    "silent": "Silently different results, on every case checked",
    "condition": "Silently different results, on some cases",
    "defaults": "A default that differs: silent wherever a call leaves it unsaid",
    "dtype": "The same values in another dtype: silent until an index or a sum needs the other",
    "error": "An error, or no such call, where the other computes",
    "noise": "The same within the row's bound as the table writes it; its prose names a trap",
    "weights": "Different initial weights: gone once the weights are moved",
}
#: At most this many silent traps open a pair's list.
FIRST = 10


@dataclass(frozen=True)
class Trap:
    """One row of a table as it matters for porting from one framework to another."""

    cost: str  # a key of COSTS, from the row's checks
    topic: str
    page: str
    title: str
    label: str | None
    detail: str  # what the checks found for the pair, in words
    fix: str  # the target framework's calls, as its tab writes them
    traps: tuple[str, ...] = ()
    cells: dict[str, str] = field(default_factory=dict)  # framework -> calls and verdict
    share: float = 0.0  # of the cases checked on which the two differ
    largest: float = 0.0  # the largest difference where both compute


def _cell(entry: Mapping[str, Any]) -> str:
    calls = " then ".join(f"`{call}`" for call in entry["calls"])
    return f"{calls}: {entry['verdict']}" if calls else entry["verdict"]


def _dtypes(pair: Mapping[str, Any], source: str, target: str) -> str:
    """The first two dtypes that differ, each with its framework."""
    mine, theirs = pair["dtypes"]
    return f"{FRAMEWORK_TITLES[source]} {mine}, {FRAMEWORK_TITLES[target]} {theirs}"


def _by(pair: Mapping[str, Any], source: str, target: str, unit: str = "") -> str:
    """How the cases that differ differ, from the pair's record: by how much where both
    give finite values of one shape, "with NaN" where one gives NaN and the other a
    number, "in shape" where their shapes or structures differ, "in dtype" (which two)
    where their arrays' dtypes differ too."""
    found = []
    if "values" in pair["differs_in"]:
        largest = pair["largest_value"]
        found.append(f"by {largest:g} {unit}" if unit else f"by up to {largest:.2g}")
    words = {"NaN": "with NaN in one of the two", "shape": "in shape"}
    found += [words[kind] for kind in pair["differs_in"] if kind in words]
    if "dtype" in pair["differs_in"]:
        found.append(f"in dtype ({_dtypes(pair, source, target)})")
    return ", and ".join(found)


def trap_cost(row: Mapping[str, Any], source: str, target: str) -> tuple[str, str] | None:
    """What porting ``row``'s concept from ``source`` to ``target`` costs, and the
    finding in words; ``None`` where the two agree on every case and no trap names
    either. The cost comes from the row's checks of the two against each other
    (:class:`rosetta_proof.translation_checks.PairDifference`), not from its prose."""
    entries = row["frameworks"]
    if source not in entries or target not in entries:
        return None
    mine, theirs = entries[source], entries[target]
    if mine["error"] is None or theirs["error"] is None:
        if mine["error"] is None and theirs["error"] is None:
            return None
        lacking = source if mine["error"] is None else target
        return "error", f"{FRAMEWORK_TITLES[lacking]} has no such call"
    if row.get("initial"):
        return "weights", "each framework draws its own initial weights"
    pair = next((p for p in mine.get("against", []) if p["other"] == target), None)
    if pair is None:
        raise ChecklistError(f"{row['title']}: {source} was not compared with {target}")
    by = _by(pair, source, target, mine.get("unit", ""))
    if pair["differs"] == pair["cases"]:
        shown = f" ({pair['cases']})" if pair["cases"] > 1 else ""
        return "silent", f"differs on every case checked{shown}, {by}"
    if pair["differs"]:
        return "condition", (f"differs on {pair['differs']} of {pair['cases']} cases "
                             f"(e.g. {pair['differs_at']}), {by}")
    if pair.get("dtype_only"):
        where = "every case checked" if pair["dtype_only"] == pair["cases"] else \
            f"{pair['dtype_only']} of {pair['cases']} cases (e.g. {pair['dtype_only_at']})"
        return "dtype", f"the same values in another dtype on {where}: {_dtypes(pair, source, target)}"
    if pair["raises"]:
        who = " and ".join(FRAMEWORK_TITLES[name] for name in pair["raised_by"])
        return "error", f"{who} raises on {pair['raises']} of {pair['cases']} cases (e.g. {pair['raises_at']})"
    named = any(names_framework(trap, name) for trap in row["traps"] for name in (source, target))
    conditional = any(entry["condition"] or not entry["exact"] for entry in (mine, theirs))
    if named or conditional:
        return "noise", f"the same on all {pair['cases']} cases checked" if pair["cases"] > 1 else \
            "the same on the case checked"
    return None


def pair_traps(tables: Iterable[Mapping[str, Any]], source: str, target: str) -> list[Trap]:
    """The traps of porting from ``source`` to ``target``, ranked: by cost (:data:`COSTS`'
    order), then by the share of cases that differ and the size of the difference, then
    in table order. Rows of one section (a running mean and a running variance) make one
    trap, at the cost of the worst of them."""
    found: dict[tuple[str, str], Trap] = {}
    order = list(COSTS)
    for table in tables:
        for row in table["rows"]:
            classified = trap_cost(row, source, target)
            if classified is None:
                continue
            cost, detail = classified
            pair = next((p for p in row["frameworks"][source].get("against", []) if p["other"] == target), {})
            share = pair.get("differs", 0) / pair["cases"] if pair.get("cases") else 0.0
            entry = row["frameworks"][target]
            fix = " then ".join(f"`{call}`" for call in entry["calls"]) or entry["verdict"]
            trap = Trap(cost, table["title"], table["page"], row["title"], row["label"], detail, fix,
                        tuple(row["traps"]), {fw: _cell(row["frameworks"][fw]) for fw in (source, target)},
                        share, pair.get("largest", 0.0))
            key = (table["page"], row["label"] or row["concept"])
            if key not in found or order.index(cost) < order.index(found[key].cost):
                found[key] = trap
        for item in table.get("aligned", ()):
            trap = default_trap(table, item, source, target)
            if trap is not None:
                found[(table["page"], f"{item['concept']}: {item['meaning']}")] = trap
    ranked = sorted(enumerate(found.values()),
                    key=lambda item: (order.index(item[1].cost), -item[1].share, -item[1].largest, item[0]))
    return [trap for _, trap in ranked]


def default_trap(table: Mapping[str, Any], item: Mapping[str, Any], source: str, target: str) -> Trap | None:
    """An aligned default (:func:`record_aligned`) whose value differs between ``source``
    and ``target`` (one of them lacking the parameter counts), as a trap of the pair; None
    where the two agree or either was not run."""
    values = item["values"]
    if source not in values or target not in values or values[source] == values[target]:
        return None
    detail = (f"{item['meaning']}: {FRAMEWORK_TITLES[source]} {item['shown'][source]}, {FRAMEWORK_TITLES[target]} "
              f"{item['shown'][target]} ({item['verdict']})")
    named = re.match(r"`([^`]+)`", item["shown"][target])
    fix = f"set `{named.group(1)}` in the call, never leave it to the default" if named else ""
    return Trap("defaults", table["title"], table["page"], item["title"], item["label"], detail, fix,
                cells={framework: item["shown"][framework] for framework in (source, target)})


def first_traps(traps: Iterable[Trap]) -> list[Trap]:
    """The silent traps a pair's list opens with: at most :data:`FIRST`, worst first."""
    return [trap for trap in traps if trap.cost in ("silent", "condition")][:FIRST]


def _code(text: str) -> str:
    """Prose with Markdown code spans, as HTML."""
    parts = re.split(r"(`[^`]+`)", text)
    return "".join(f"<code>{html.escape(part[1:-1])}</code>" if part.startswith("`") else html.escape(part)
                   for part in parts)


def _link(trap: Trap, link_prefix: str) -> str:
    page = Path(trap.page).with_suffix(".html").as_posix()
    target = f"{link_prefix}{page}" + (f"#{trap.label}" if trap.label else "")
    return f'<a href="{html.escape(target)}">{html.escape(trap.title)}</a>'


def _line(trap: Trap, source: str, target: str, link_prefix: str, full: bool) -> str:
    fix = f" {html.escape(FRAMEWORK_TITLES[target])}: {_code(trap.fix)}" if trap.fix else ""
    text = f"{_link(trap, link_prefix)} ({html.escape(trap.topic)}): {_code(trap.detail)}.{fix}"
    if full:  # the prose of its trap, and both frameworks' calls and verdicts where they differ
        prose = " ".join(_code(text) for text in trap.traps)
        cells = "".join(f'<li data-framework="{fw}"><b>{html.escape(FRAMEWORK_TITLES[fw])}</b>: {_code(cell)}</li>'
                        for fw, cell in trap.cells.items())
        text += f" {prose}" if prose else ""
        text += f'<ul class="rosetta-checklist-cells">{cells}</ul>' if trap.cost != "noise" else ""
    return (f'<li class="rosetta-checklist-line" data-cost="{trap.cost}" '
            f'data-frameworks="{" ".join(sorted({source, target}))}">{text}</li>')


def checklist_html(tables: Iterable[Mapping[str, Any]], link_prefix: str = "") -> str:
    """The checklist as HTML: two framework choosers and, for every pair of frameworks in
    either direction, its ranked list (:func:`pair_traps`): the silent traps first, one
    line each with the target's fix, then every trap grouped by cost, each with its prose,
    both frameworks' calls and verdicts, and a link to its row. The book's script shows the
    chosen pair's list (``?from=pytorch&to=jax`` chooses in the URL)."""
    tables = list(tables)
    options = "".join(f'<option value="{fw}">{html.escape(FRAMEWORK_TITLES[fw])}</option>' for fw in FRAMEWORKS)
    out = ['<div class="rosetta-checklist">',
           '<p class="rosetta-checklist-pair">From <select name="from">' + options + '</select> to '
           '<select name="to">' + options + '</select> <span class="rosetta-checklist-count"></span></p>']
    for source in FRAMEWORKS:
        for target in FRAMEWORKS:
            if source == target:
                continue
            traps = pair_traps(tables, source, target)
            first = first_traps(traps)
            rest = traps[len(first):]
            out.append(f'<section class="rosetta-checklist-block" data-from="{source}" data-to="{target}">')
            out.append(f"<h3>Silent traps first</h3><ol>"
                       + "".join(_line(trap, source, target, link_prefix, False) for trap in first) + "</ol>")
            for cost, heading in COSTS.items():
                group = [trap for trap in rest if trap.cost == cost]
                if group:
                    out.append(f"<h3>{html.escape(heading)}</h3><ul>"
                               + "".join(_line(trap, source, target, link_prefix, True) for trap in group)
                               + "</ul>")
            out.append("</section>")
    out.append("</div>")
    return "\n".join(out)
