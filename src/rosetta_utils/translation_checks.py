"""Checking a translation table's rows: every framework against one float64 reference.

A translation-table page computes, for each concept (a dense layer, Adam's
update, "same" padding ...), the same thing in every framework from the same
inputs and weights, and a float64 numpy reference in a shared cell. Each
framework part leaves what it computed as one dict keyed by concept (its
``tab_results``); a comparison cell hands them to :func:`check_concepts`,
which measures each framework's largest absolute error against the reference
and stops the build when a row that claims an exact translation disagrees,
naming the page, the concept and the framework.

A framework without the concept leaves a string (why it has none) instead of
arrays; a concept whose translation is inherently approximate is listed in
``approximate`` and only reported, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .equivalence import max_abs_difference

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

    @property
    def verdict(self) -> str:
        if self.error is None:
            return f"none: {self.note}" if self.note else "none"
        if not self.exact:
            return f"approximate ({self.error:.2g})"
        return "exact" if self.error <= self.tolerance else f"DIFFERS ({self.error:.3g} > {self.tolerance:g})"


def _outputs_of(run: Any) -> Mapping[str, Any]:
    values = run.get("outputs") if isinstance(run, Mapping) else getattr(run, "outputs", None)
    if not isinstance(values, Mapping):
        raise TranslationMismatch("a framework part left no 'outputs' dict (concept -> arrays)")
    return values


def check_concepts(
    page: str,
    runs: Mapping[str, Any],
    references: Mapping[str, Any],
    tolerances: Mapping[str, float] | None = None,
    approximate: Iterable[str] = (),
    raise_on_mismatch: bool = True,
) -> list[RowCheck]:
    """One :class:`RowCheck` per concept and framework, in the order of ``references``.

    ``runs`` maps a framework to its tab results (a mapping or a ``TabRun``),
    whose ``outputs`` maps a concept to an array, a dict or tuple of arrays (the
    same structure as the reference), or a string saying why the framework has
    none. ``tolerances`` overrides :data:`FLOAT32_TOLERANCE` per concept. A
    framework that leaves a concept out entirely is a mismatch: its cell must
    say why instead. With ``raise_on_mismatch`` (the build), the first exact row
    that disagrees raises :class:`TranslationMismatch`.
    """
    tolerances = dict(tolerances or {})
    approximate = set(approximate)
    unknown = (set(tolerances) | approximate) - set(references)
    if unknown:
        raise ValueError(f"{page}: tolerances or approximate rows for concepts without a reference: {sorted(unknown)}")
    checks = []
    for concept, expected in references.items():
        bound = tolerances.get(concept, FLOAT32_TOLERANCE)
        exact = concept not in approximate
        for framework, run in runs.items():
            outputs = _outputs_of(run)
            if concept not in outputs:
                raise TranslationMismatch(f"{page}: concept {concept!r}: the {framework} part left no result "
                                          "(a framework without it must leave a string saying why)")
            got = outputs[concept]
            if isinstance(got, str):
                checks.append(RowCheck(concept, framework, None, bound, exact, got))
                continue
            try:
                error = max_abs_difference(_as_mapping(got), _as_mapping(expected))
            except (TypeError, ValueError) as problem:
                raise TranslationMismatch(f"{page}: concept {concept!r}, framework {framework}: "
                                          f"its result does not match the reference's structure: {problem}") from None
            check = RowCheck(concept, framework, error, bound, exact)
            if raise_on_mismatch and check.verdict.startswith("DIFFERS"):
                raise TranslationMismatch(f"{page}: concept {concept!r}, framework {framework}: "
                                          f"claimed exact, but max abs error {error:.3g} > {bound:g}")
            checks.append(check)
    return checks


def _as_mapping(value: Any) -> Any:
    """Tuples and lists of arrays compare element by element, like a dict keyed by position."""
    if isinstance(value, (tuple, list)):
        return {str(index): item for index, item in enumerate(value)}
    return value


def check_table(checks: Iterable[RowCheck], frameworks: Iterable[str]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one row per concept, one column per framework, each cell the
    framework's verdict with its max abs error (for :func:`rosetta_utils.tables.show_table`)."""
    frameworks = list(frameworks)
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
        rows.append(row)
    return ["concept", *frameworks], rows


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
