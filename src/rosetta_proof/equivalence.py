"""Comparing what the frameworks computed: one difference measure, one verdict, one table.

Every page that proves its translations equivalent compares arrays (or dicts
of arrays) with :func:`rosetta_utils.differences.max_abs_difference`, turns a difference into a verdict
with :func:`verdict`, and lays the rows out with :func:`equivalence_table`,
so a failing translation reads the same on every page. Then :func:`require`
stops the page, and so the build, when any verdict failed: a page never shows
a failed proof as a finding.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from rosetta_utils.differences import UNIT_ROUNDOFF  # noqa: F401 - the pages import it from here

#: Verdicts that pass: a check that held, and the row every other is compared with.
AGREES, REFERENCE = "agrees", "reference"


class VerdictFailed(AssertionError):
    """A correctness check of a page failed; raised in a page's cell, it stops the build."""


#: How many verdicts this process has gated so far (:func:`require`, and
#: :func:`rosetta_proof.translation_checks.check_concepts` for the tables' rows): the
#: build reads it after a page's comparisons and counts them per page.
_GATED = [0]
#: The checks :func:`require` gated in this process, in order: what a record of the
#: numbers they checked carries (:func:`rosetta_proof.records.record_result`).
_CHECKS: list[dict[str, Any]] = []


def count_gated(verdicts: int) -> None:
    """Add ``verdicts`` verdicts that a gate checked (a failing one stops the page)."""
    _GATED[0] += verdicts


def gated_count() -> int:
    """How many verdicts this process has gated (see :func:`count_gated`)."""
    return _GATED[0]


def forget_checks() -> None:
    """Start a new page's comparisons: what :func:`gated_checks` returns is gated after this
    (a page's comparison kernel starts with none; an in-process run of them calls this)."""
    _CHECKS.clear()


def gated_checks() -> list[dict[str, Any]]:
    """Every check :func:`require` gated in this process: ``{"check", "verdicts",
    "passed"}``, in order."""
    return [dict(check, verdicts=dict(check["verdicts"])) for check in _CHECKS]


def require(verdicts: Mapping[str, str], check: str, passing: Sequence[str] = (AGREES, REFERENCE)) -> None:
    """Stop the page unless every verdict passed. ``verdicts`` maps what was checked (a
    framework, a row) to its verdict, whose text names the quantity, the measured value
    and the bound (``"logits: DIFFERS (0.002 > 0.0001)"``); ``check`` says what was
    checked. The error names each failing item with its verdict."""
    count_gated(len(verdicts))
    failing = {str(name): str(text) for name, text in verdicts.items() if text not in passing}
    _CHECKS.append({"check": str(check), "verdicts": {str(k): str(v) for k, v in verdicts.items()},
                    "passed": not failing})
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


def verdicts_by_check(checks: list[Mapping[str, Any]]) -> dict[str, Any]:
    """``{check: {item: verdict}}`` of :func:`gated_checks`-shaped checks, for a record (a
    check gated again gets " (2)", ...)."""
    verdicts: dict[str, Any] = {}
    for check in checks:
        name, number = check["check"], 2
        while name in verdicts:
            name, number = f"{check['check']} ({number})", number + 1
        verdicts[name] = check["verdicts"]
    return verdicts


def tensor_ratios(
    first: Mapping[str, Any], second: Mapping[str, Any], relative: float, floors: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Per tensor of two mappings of arrays with the same names: ``max|first − second|``
    over that tensor's own bound, ``relative · max|second| + floors[name]`` (see
    :func:`bound_ratios`). NaN where either holds a NaN."""
    from rosetta_utils.differences import max_abs_difference

    if set(first) != set(second):
        raise ValueError(f"the two sets of arrays differ in names: {sorted(set(first) ^ set(second))}")
    differences = {name: max_abs_difference(first[name], second[name]) for name in second}
    scales = {name: float(np.max(np.abs(np.asarray(second[name], np.float64)), initial=0.0)) for name in second}
    return bound_ratios(differences, scales, relative, floors)


def bound_ratios(
    differences: Mapping[str, float], scales: Mapping[str, float], relative: float,
    floors: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Per tensor: its largest difference over its own bound, ``relative · scales[name] +
    floors[name]`` (the floor: what float32 rounding alone allows where the tensor's
    scale says nothing, e.g. the rounding of the weights an update was taken from). Each
    tensor is held to its own scale, so a small tensor's error is never diluted by the
    largest value of another. A ratio of at most 1 is within the bound."""
    if set(differences) != set(scales):
        raise ValueError(f"differences and scales name different tensors: {sorted(set(differences) ^ set(scales))}")
    ratios = {}
    for name, difference in differences.items():
        bound = relative * float(scales[name]) + float((floors or {}).get(name, 0.0))
        if bound <= 0:
            ratios[name] = 0.0 if difference == 0 else float("inf")
        else:
            ratios[name] = float(difference) / bound
    return ratios


def worst_tensor(ratios: Mapping[str, float]) -> tuple[str, float]:
    """The tensor of :func:`tensor_ratios` furthest from agreement (a NaN first), and its ratio."""
    if not ratios:
        raise ValueError("no tensors to compare")
    name = max(ratios, key=lambda key: (np.isnan(ratios[key]), ratios[key]))
    return name, ratios[name]


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
