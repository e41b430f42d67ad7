"""Checking a translation table's rows: every framework against one float64 reference,
over a grid of cases that crosses each condition's boundary.

A translation-table page computes, for each concept (a dense layer, Adam's
update, "same" padding ...), the same thing in every framework from the same
inputs and weights, and a float64 numpy reference in a shared cell. Each
framework part leaves what it computed as one dict keyed by concept (its
``tab_results``); a comparison cell hands them to :func:`check_concepts`,
which measures each framework's largest absolute error against the reference
and stops the build when a row that claims an exact translation disagrees,
naming the page, the concept, the framework and, on a grid, the case.

A concept may be checked on a **grid**: :func:`grid` makes the cases (every
combination of the values given for each parameter: odd and even sizes,
strides below, at and above the window, batch 1 and more), the reference and
every framework leave one result per case, in the grid's order. A translation
that holds only under a **condition** says so per framework
(``conditions={"conv_same_stride2": {"pytorch": "size % 2 == 0"}}``, a Python
expression over the case's parameters): inside it every case must be exact,
and outside it at least one case must differ, so the condition is neither
broken nor needless; a failing case inside, or a condition the grid shows to
be needless, stops the build naming page, concept, framework and case.

A framework without the concept leaves a string (why it has none) instead of
results; a translation that is inherently approximate is listed in
``approximate`` (a concept for every framework, or ``{concept: [frameworks]}``)
and only reported, never raised: exactness is per concept and framework.

Every check also compares its framework with each other framework directly,
case by case (:class:`PairDifference`): where the two agree within the row's
bound, where both compute and differ, and where one raises while the other
computes (a part that raises on a case leaves an empty array for it). The
porting checklist ranks a pair's traps by it (``rosetta_proof.checklist``).
A row listed in ``initial`` measures what a freshly made layer starts from
(its initial weights): a difference there goes once weights are moved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from rosetta_utils.cases import Case, grid_axes
from rosetta_utils.differences import max_abs_difference

from .equivalence import count_gated

#: The bound for an exact translation in float32.
FLOAT32_TOLERANCE = 1e-5


class TranslationMismatch(AssertionError):
    """A row that claims an exact translation, and a framework whose result disagrees."""


@dataclass(frozen=True)
class RowCheck:
    concept: str
    framework: str
    error: float | None  # None: the framework has no such concept (see ``note``)
    tolerance: float
    exact: bool
    note: str = ""
    cases: int = 1  # how many cases were checked
    condition: str | None = None  # where the translation holds; None: on every case
    worst: str = ""  # the case of the largest error (inside the condition)
    outside: str = ""  # a case outside the condition where it differs, with its error
    unit: str = ""  # what an approximate row's difference counts (e.g. "bits"), if not a value
    against: tuple["PairDifference", ...] = ()  # this framework against each other one
    initial: bool = False  # the row measures a new layer's initial weights

    def counted(self) -> str:
        """An approximate row's difference in its unit ("differs by 32 bits"); "" without one."""
        if not self.unit or self.error is None:
            return ""
        return "the same" if self.error == 0 else f"differs by {self.error:g} {self.unit}"

    @property
    def verdict(self) -> str:
        if self.error is None:
            return f"none: {self.note}" if self.note else "none"
        if not self.exact:
            return self.counted() or f"approximate ({self.error:.2g})"
        if not self.error <= self.tolerance:  # NaN too
            return f"DIFFERS ({self.error:.3g} > {self.tolerance:g}{f' at {self.worst}' if self.worst else ''})"
        if self.condition:
            return f"exact where {self.condition}; outside it differs ({self.outside})"
        return "exact"


@dataclass(frozen=True)
class PairDifference:
    """One framework's results against another's on the same cases of a row: how many
    cases there are, on how many both compute and differ by more than the row's bound
    (and the largest such difference), on how many one raises where the other computes
    (``raised_by``: which of the two), and one case of each, for a reader to try."""

    other: str
    cases: int
    differs: int = 0
    largest: float = 0.0
    differs_at: str = ""
    raises: int = 0
    raised_by: tuple[str, ...] = ()
    raises_at: str = ""
    #: How the cases that differ differ: "values" (both finite, same shapes), "NaN" (one
    #: has NaN where the other does not), "shape" (another shape or structure), and
    #: "dtype" where their arrays' dtypes differ too.
    differs_in: tuple[str, ...] = ()
    #: The largest difference among the cases that differ in values only.
    largest_value: float = 0.0
    #: The cases on which the two agree within the bound but give arrays of another dtype
    #: (an index as int32 against int64, a float32 index), and the first of them.
    dtype_only: int = 0
    dtype_only_at: str = ""
    #: The first pair of dtypes that differ (this framework's, the other's), or ().
    dtypes: tuple[str, ...] = ()


def _raised(result: Any) -> bool:
    """A part's result for a case on which its call raised: an empty array, or a tuple,
    list or dict of nothing else (a call that returns several arrays)."""
    if isinstance(result, np.ndarray):
        return result.size == 0
    if isinstance(result, (tuple, list)):
        return bool(result) and all(_raised(item) for item in result)
    if isinstance(result, Mapping):
        return bool(result) and all(_raised(item) for item in result.values())
    return False


def _dtypes_of(value: Any) -> list[str | None]:
    """The dtype of each array in ``value`` (nested tuples, lists and dicts, in order), and
    None for what is no array (a Python number, a string)."""
    if isinstance(value, Mapping):
        return [dtype for key in sorted(value, key=str) for dtype in _dtypes_of(value[key])]
    if isinstance(value, (tuple, list)):
        return [dtype for item in value for dtype in _dtypes_of(item)]
    return [str(value.dtype) if isinstance(value, (np.ndarray, np.generic)) else None]


def _other_dtype(mine: Any, yours: Any) -> tuple[str, str] | None:
    """The first two arrays, one of each result, whose dtypes differ; None where every
    array of one has the dtype of the other's at the same place."""
    first, second = _dtypes_of(mine), _dtypes_of(yours)
    if len(first) != len(second):
        return None  # another structure: the values' comparison says so
    return next(((a, b) for a, b in zip(first, second) if a and b and a != b), None)


def compare_pair(framework: str, other: str, got: Any, theirs: Any, cases: Sequence[Case] | None,
                 bound: float) -> PairDifference:
    """``framework``'s results against ``other``'s, case by case (one result off a grid)."""
    pairs = [(got, theirs)] if cases is None else list(zip(got, theirs))
    names = [""] if cases is None else [str(case) for case in cases]
    differs, raises, largest, differs_at, raises_at, raised_by = 0, 0, 0.0, "", "", set()
    kinds, largest_value, dtype_only, dtype_only_at, dtypes = set(), 0.0, 0, "", ()
    for name, (mine, yours) in zip(names, pairs):
        if _raised(mine) or _raised(yours):
            if _raised(mine) != _raised(yours):
                raises += 1
                raised_by.add(framework if _raised(mine) else other)
                raises_at = raises_at or name
            continue
        try:
            difference = max_abs_difference(_as_mapping(mine), _as_mapping(yours))
        except (ValueError, TypeError):
            difference = math.inf  # another shape or structure
        other_dtype = _other_dtype(mine, yours)
        dtypes = dtypes or other_dtype or ()
        if not difference <= bound:  # NaN too
            differs += 1
            largest = max(largest, _size(difference))
            differs_at = differs_at or name
            kind = "NaN" if math.isnan(difference) else "shape" if math.isinf(difference) else "values"
            kinds.update([kind, "dtype"] if other_dtype else [kind])
            if kind == "values":
                largest_value = max(largest_value, difference)
        elif other_dtype:
            dtype_only += 1
            dtype_only_at = dtype_only_at or name
    return PairDifference(other, len(pairs), differs, largest, differs_at, raises, tuple(sorted(raised_by)),
                          raises_at, tuple(sorted(kinds)), largest_value, dtype_only, dtype_only_at, dtypes)


def _outputs_of(run: Any) -> Mapping[str, Any]:
    values = run.get("outputs") if isinstance(run, Mapping) else getattr(run, "outputs", None)
    if not isinstance(values, Mapping):
        raise TranslationMismatch("a framework part left no 'outputs' dict (concept -> arrays)")
    return values


def _approximate_pairs(approximate: Iterable[str] | Mapping[str, Iterable[str]]) -> dict[str, set[str] | None]:
    """``{concept: frameworks}``, ``None`` meaning every framework."""
    if isinstance(approximate, Mapping):
        return {concept: set(frameworks) for concept, frameworks in approximate.items()}
    return {concept: None for concept in approximate}


def _errors(page: str, concept: str, framework: str, got: Any, expected: Any,
            cases: Sequence[Case] | None) -> list[float]:
    """The max abs error of each case (one, off a grid)."""
    where = f"{page}: concept {concept!r}, framework {framework}"
    if cases is None:
        pairs = [(got, expected)]
    else:
        for name, value in (("its result", got), ("the reference", expected)):
            if not isinstance(value, (list, tuple)) or len(value) != len(cases):
                size = len(value) if isinstance(value, (list, tuple)) else type(value).__name__
                raise TranslationMismatch(f"{where}: {name} must be one entry per case of its grid "
                                          f"({len(cases)}), not {size}")
        pairs = list(zip(got, expected))
    errors = []
    for number, (result, reference) in enumerate(pairs):
        try:
            error = max_abs_difference(_as_mapping(result), _as_mapping(reference))
            errors.append(error)  # NaN stays NaN: never within a bound (see _size)
        except ValueError as problem:
            if cases is None:
                raise TranslationMismatch(f"{where}: its result does not match the reference's structure: "
                                          f"{problem}") from None
            errors.append(math.inf)  # another shape on this case: it differs, the condition says where
        except TypeError as problem:
            raise TranslationMismatch(f"{where}: its result does not match the reference's structure: "
                                      f"{problem}") from None
    return errors


def _error_text(error: float) -> str:
    if math.isnan(error):
        return "NaN"
    return "another shape" if math.isinf(error) else f"{error:.2g}"


def _size(error: float) -> float:
    """An error to rank cases by: NaN ranks above every number, as another shape does."""
    return math.inf if math.isnan(error) else error


def _check_on_grid(page: str, concept: str, framework: str, errors: list[float], cases: Sequence[Case] | None,
                   condition: str | None, bound: float, exact: bool, raise_on_mismatch: bool) -> RowCheck:
    where = f"{page}: concept {concept!r}, framework {framework}"
    if cases is None:
        return RowCheck(concept, framework, errors[0], bound, exact)
    inside = [n for n, case in enumerate(cases) if condition is None or case.holds(condition)]
    outside = [n for n in range(len(cases)) if n not in inside]
    if not inside:
        raise TranslationMismatch(f"{where}: no case of its grid meets its condition {condition!r}")
    worst = max(inside, key=lambda n: _size(errors[n]))
    check = RowCheck(concept, framework, errors[worst], bound, exact, cases=len(cases), condition=condition,
                     worst=str(cases[worst]))
    if not exact:
        return check
    if _size(errors[worst]) > bound:
        if raise_on_mismatch:
            stated = f" where {condition}" if condition else ""
            raise TranslationMismatch(f"{where}: claimed exact{stated}, but at the case {cases[worst]} the "
                                      f"max abs error is {_error_text(errors[worst])} > {bound:g}")
        return check
    if condition is None:
        return check
    failing = [n for n in outside if _size(errors[n]) > bound]
    if not failing:
        raise TranslationMismatch(
            f"{where}: the row states the condition {condition!r}, but its grid shows the translation "
            f"holding outside it too ({len(outside)} cases, all within {bound:g}): drop the condition, "
            "or add the case where it fails")
    example = max(failing, key=lambda n: _size(errors[n]))
    return RowCheck(concept, framework, errors[worst], bound, exact, cases=len(cases), condition=condition,
                    worst=str(cases[worst]), outside=f"{_error_text(errors[example])} at {cases[example]}")


def check_concepts(
    page: str,
    runs: Mapping[str, Any],
    references: Mapping[str, Any],
    tolerances: Mapping[str, float] | None = None,
    approximate: Iterable[str] | Mapping[str, Iterable[str]] = (),
    raise_on_mismatch: bool = True,
    grids: Mapping[str, Sequence[Case]] | None = None,
    conditions: Mapping[str, Mapping[str, str]] | None = None,
    units: Mapping[str, str] | None = None,
    initial: Iterable[str] = (),
) -> list[RowCheck]:
    """One :class:`RowCheck` per concept and framework, in the order of ``references``.

    ``runs`` maps a framework to its tab results (a mapping or a ``TabRun``),
    whose ``outputs`` maps a concept to an array, a dict or tuple of arrays (the
    same structure as the reference), a list of those (one per case, for a
    concept in ``grids``) or a string saying why the framework has none.
    ``tolerances`` overrides :data:`FLOAT32_TOLERANCE` per concept;
    ``conditions`` gives, per concept on a grid, the frameworks whose
    translation holds only where an expression over the case is true. A
    framework that leaves a concept out entirely is a mismatch: its cell must
    say why instead. With ``raise_on_mismatch`` (the build), an exact row that
    disagrees inside its condition raises :class:`TranslationMismatch`; a
    needless condition always does. ``units`` names what an approximate row's
    difference counts where it is no measured value (a dtype's bits), so that
    its verdict says "differs by 32 bits" rather than a bare number.
    ``initial`` lists the rows that measure a new layer's initial weights.
    Every check carries its framework against each other one
    (:class:`PairDifference`, within the row's bound).
    """
    tolerances = dict(tolerances or {})
    units = dict(units or {})
    approximate_pairs = _approximate_pairs(approximate)
    grids = dict(grids or {})
    conditions = {concept: dict(by_framework) for concept, by_framework in (conditions or {}).items()}
    initial = set(initial)
    unknown = ((set(tolerances) | set(approximate_pairs) | set(grids) | set(conditions) | set(units) | initial)
               - set(references))
    if unknown:
        raise ValueError(f"{page}: tolerances, approximate rows, grids, conditions, units or initial rows "
                         f"for concepts without a reference: {sorted(unknown)}")
    exact_with_unit = set(units) - set(approximate_pairs)
    if exact_with_unit:
        raise ValueError(f"{page}: units for rows that are not approximate: {sorted(exact_with_unit)}")
    off_grid = set(conditions) - set(grids)
    if off_grid:
        raise ValueError(f"{page}: conditions for concepts checked on no grid: {sorted(off_grid)}")
    checks = []
    for concept, expected in references.items():
        bound = tolerances.get(concept, FLOAT32_TOLERANCE)
        approximate_for = approximate_pairs.get(concept, set())
        first = len(checks)
        for framework, run in runs.items():
            exact = not (concept in approximate_pairs and (approximate_for is None or framework in approximate_for))
            outputs = _outputs_of(run)
            if concept not in outputs:
                raise TranslationMismatch(f"{page}: concept {concept!r}: the {framework} part left no result "
                                          "(a framework without it must leave a string saying why)")
            got = outputs[concept]
            if isinstance(got, str):
                checks.append(RowCheck(concept, framework, None, bound, exact, got))
                continue
            cases = grids.get(concept)
            condition = conditions.get(concept, {}).get(framework)
            if condition is not None and not exact:
                raise ValueError(f"{page}: concept {concept!r}, framework {framework}: an approximate row "
                                 "states no condition")
            errors = _errors(page, concept, framework, got, expected, cases)
            check = _check_on_grid(page, concept, framework, errors, cases, condition, bound, exact,
                                   raise_on_mismatch)
            if not exact and concept in units:
                check = replace(check, unit=units[concept])
            if raise_on_mismatch and exact:  # an exact row that differs stops the build
                count_gated(1)
                if check.verdict.startswith("DIFFERS"):
                    raise TranslationMismatch(f"{page}: concept {concept!r}, framework {framework}: "
                                              f"claimed exact, but max abs error {check.error:.3g} > {bound:g}")
            checks.append(check)
        checks[first:] = _with_pairs(checks[first:], runs, concept, grids.get(concept), bound, concept in initial)
    return checks


def _with_pairs(checks: list[RowCheck], runs: Mapping[str, Any], concept: str, cases: Sequence[Case] | None,
                bound: float, initial: bool) -> list[RowCheck]:
    """A concept's checks, each with its framework against every other that computed it."""
    measured = [check.framework for check in checks if check.error is not None]
    results = {framework: _outputs_of(runs[framework])[concept] for framework in measured}
    return [replace(check, initial=initial, against=tuple(
        compare_pair(check.framework, other, results[check.framework], results[other], cases, bound)
        for other in measured if other != check.framework) if check.error is not None else ())
        for check in checks]


def _as_mapping(value: Any) -> Any:
    """Tuples and lists of arrays compare element by element, like a dict keyed by position."""
    if isinstance(value, (tuple, list)):
        return {str(index): item for index, item in enumerate(value)}
    return value


def check_table(checks: Iterable[RowCheck], frameworks: Iterable[str],
                grids: Mapping[str, Sequence[Case]] | None = None) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one row per concept, one column per framework, each cell the
    framework's verdict with its max abs error, and what the row was checked on (a grid's
    parameters, or one case) (for :func:`rosetta_proof.tables.show_table`)."""
    frameworks = list(frameworks)
    grids = grids or {}
    by_concept: dict[str, dict[str, RowCheck]] = {}
    for check in checks:
        by_concept.setdefault(check.concept, {})[check.framework] = check
    rows = []
    for concept, cells in by_concept.items():
        row = [concept]
        for framework in frameworks:
            check = cells.get(framework)
            if check is None:
                row.append("not run")
            elif check.error is None:
                row.append(check.verdict)
            else:
                row.append(f"{check.verdict}, {check.error:.1e}" if check.exact else check.verdict)
        row.append(grid_axes(grids[concept]) if concept in grids else "one case")
        rows.append(row)
    return ["concept", *frameworks, "checked on"], rows


def numeric_shares(checks: Iterable[RowCheck]) -> dict[str, float]:
    """Per framework, the share of the page's concepts that it measured against the
    reference (for the others it left a reason, or nothing)."""
    checks = list(checks)
    concepts = {check.concept for check in checks}
    frameworks = list(dict.fromkeys(check.framework for check in checks))
    measured = {framework: {c.concept for c in checks if c.framework == framework and c.error is not None}
                for framework in frameworks}
    return {framework: len(measured[framework]) / len(concepts) for framework in frameworks}


def shares_line(checks: Iterable[RowCheck]) -> str:
    """``"checked numerically: pytorch 100%, tensorflow 96%, ..."``, for a page's output."""
    return "checked numerically: " + ", ".join(f"{fw} {share:.0%}" for fw, share in numeric_shares(checks).items())
