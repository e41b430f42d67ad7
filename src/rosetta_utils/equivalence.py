"""Comparing what the frameworks computed: one difference measure, one verdict, one table.

Every page that proves its translations equivalent compares arrays (or dicts
of arrays) with :func:`max_abs_difference`, turns a difference into a verdict
with :func:`verdict`, and lays the rows out with :func:`equivalence_table`,
so a failing translation reads the same on every page. Then :func:`require`
stops the page, and so the build, when any verdict failed: a page never shows
a failed proof as a finding.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np


def max_abs_difference(first: Any, second: Any) -> float:
    """The largest absolute difference between two arrays, or between two mappings of
    arrays with the same keys (the largest over all of them); NaN where either holds a
    NaN that the other does not match, so that no verdict takes it for agreement."""
    if isinstance(first, Mapping) or isinstance(second, Mapping):
        if not (isinstance(first, Mapping) and isinstance(second, Mapping)):
            raise TypeError("compare a mapping of arrays with another mapping of arrays")
        if set(first) != set(second):
            raise ValueError(f"the two sets of arrays differ in names: {sorted(set(first) ^ set(second))}")
        differences = [max_abs_difference(first[name], second[name]) for name in first]
        if any(np.isnan(difference) for difference in differences):
            return float("nan")  # max() would drop a NaN that is not first
        return max(differences, default=0.0)
    a, b = np.asarray(first), np.asarray(second)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} and {b.shape}")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


#: Verdicts that pass: a check that held, and the row every other is compared with.
AGREES, REFERENCE = "agrees", "reference"


class VerdictFailed(AssertionError):
    """A correctness check of a page failed; raised in a page's cell, it stops the build."""


def require(verdicts: Mapping[str, str], check: str, passing: Sequence[str] = (AGREES, REFERENCE)) -> None:
    """Stop the page unless every verdict passed. ``verdicts`` maps what was checked (a
    framework, a row) to its verdict, whose text names the quantity, the measured value
    and the bound (``"logits: DIFFERS (0.002 > 0.0001)"``); ``check`` says what was
    checked. The error names each failing item with its verdict."""
    failing = {str(name): str(text) for name, text in verdicts.items() if text not in passing}
    if failing:
        raise VerdictFailed(f"{check} failed for {', '.join(failing)}: "
                            + "; ".join(f"{name}: {text}" for name, text in failing.items()))


def verdicts_of(headers: Sequence[str], rows: Sequence[Sequence[Any]], column: str = "verdict") -> dict[str, str]:
    """``{first cell: verdict}`` of a table's rows, for :func:`require`."""
    if column not in headers:
        raise ValueError(f"the table has no {column!r} column: {list(headers)}")
    index = list(headers).index(column)
    return {str(row[0]): str(row[index]) for row in rows}


def verdict(difference: float, tolerance: float) -> str:
    """``"agrees"`` when ``difference`` is within ``tolerance``, else a line that says by how much."""
    if not np.isfinite(difference) or difference > tolerance:
        return f"DIFFERS ({difference:.3g} > {tolerance:g})"
    return AGREES


def equivalence_table(
    runs: Mapping[str, Any],
    columns: Mapping[str, Callable[[Any, Any], float]],
    tolerances: Mapping[str, float],
    reference: str = "pytorch",
) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows comparing every framework's run with the ``reference`` run.

    ``columns`` maps a column's title to ``difference(run, reference_run)``;
    ``tolerances`` gives the bound of each column that is checked. The last
    column is the verdict: "agrees", or which column differs and by how much.
    The reference's own row is compared with nothing: its checked columns and
    its verdict read "reference" (its other columns, such as a parameter
    count, are computed as for every row).
    """
    if reference not in runs:
        raise ValueError(f"no {reference} run to compare with: the table needs the reference framework")
    headers = ["framework", *columns, "verdict"]
    rows = []
    for framework, run in runs.items():
        if framework == reference:
            rows.append([framework, *(REFERENCE if title in tolerances else difference(run, run)
                                      for title, difference in columns.items()), REFERENCE])
            continue
        values = {title: difference(run, runs[reference]) for title, difference in columns.items()}
        failing = [f"{title}: {verdict(values[title], bound)}" for title, bound in tolerances.items()
                   if verdict(values[title], bound) != "agrees"]
        rows.append([framework, *values.values(), "; ".join(failing) or "agrees"])
    return headers, rows


def failures(rows: Sequence[Sequence[Any]]) -> list[str]:
    """The frameworks of :func:`equivalence_table` rows whose verdict is not "agrees"
    (nor "reference")."""
    return [row[0] for row in rows if row[-1] not in (AGREES, REFERENCE)]
