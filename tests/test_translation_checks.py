"""The translation-table checker: exact rows that disagree stop the build, naming page,
concept and framework; approximate rows and missing features are reported."""

import numpy as np
import pytest

from rosetta_proof.translation_checks import TranslationMismatch, check_concepts, check_table, numeric_shares
from rosetta_utils.cases import grid, grid_axes

REFERENCES = {"dense": np.array([1.0, 2.0]), "pool": (np.zeros(2), np.ones(2))}


def runs_with(**changes):
    runs = {framework: {"outputs": {"dense": np.array([1.0, 2.0], np.float32),
                                    "pool": (np.zeros(2), np.ones(2))}}
            for framework in ("pytorch", "jax")}
    for framework, outputs in changes.items():
        runs[framework]["outputs"].update(outputs)
    return runs


def test_agreeing_rows_are_exact():
    checks = check_concepts("tables/layers.md", runs_with(), REFERENCES)
    assert [check.verdict for check in checks] == ["exact"] * 4
    headers, rows = check_table(checks, ["pytorch", "jax"])
    assert headers == ["concept", "pytorch", "jax", "checked on"] and rows[0][1].startswith("exact")
    assert rows[0][-1] == "one case"
    assert set(numeric_shares(checks).values()) == {1.0}


def test_an_exact_row_that_disagrees_names_page_concept_and_framework():
    broken = runs_with(jax={"dense": np.array([1.0, 2.1])})
    with pytest.raises(TranslationMismatch, match=r"tables/layers.md: concept 'dense', framework jax.*0.1"):
        check_concepts("tables/layers.md", broken, REFERENCES)
    checks = check_concepts("tables/layers.md", broken, REFERENCES, raise_on_mismatch=False)
    assert checks[1].verdict.startswith("DIFFERS")


def test_approximate_rows_and_missing_features_are_reported_not_raised():
    runs = runs_with(jax={"dense": np.array([1.0, 2.1]), "pool": "no ceil mode in this API"})
    checks = check_concepts("p", runs, REFERENCES, approximate=["dense"])
    assert checks[1].verdict == "approximate (0.1)"
    assert checks[3].verdict == "none: no ceil mode in this API"
    shares = numeric_shares(checks)  # per framework: JAX measured one concept fewer
    assert shares["pytorch"] == 1.0 and shares["jax"] == 0.5


def test_an_approximate_row_that_counts_bits_says_so_not_a_bare_number():
    runs = runs_with(jax={"dense": np.array([1.0, 34.0])})
    checks = check_concepts("p", runs, REFERENCES, approximate=["dense"], units={"dense": "bits"})
    assert [checks[0].verdict, checks[1].verdict] == ["the same", "differs by 32 bits"]
    from rosetta_proof.compact_table import _short
    assert _short(checks[1]) == "differs by 32 bits"
    with pytest.raises(ValueError, match="units for rows that are not approximate"):
        check_concepts("p", runs, REFERENCES, units={"dense": "bits"})


def test_a_framework_that_leaves_a_concept_out_or_the_wrong_shape_is_a_mismatch():
    runs = runs_with()
    del runs["jax"]["outputs"]["pool"]
    with pytest.raises(TranslationMismatch, match="jax part left no result"):
        check_concepts("p", runs, REFERENCES)
    with pytest.raises(TranslationMismatch, match="structure"):
        check_concepts("p", runs_with(jax={"dense": np.zeros(3)}), REFERENCES)
    with pytest.raises(TranslationMismatch, match="structure"):
        check_concepts("p", runs_with(jax={"pool": (np.zeros(2),)}), REFERENCES)


# Grids and conditions: a case per combination, a condition per framework.

CASES = grid(size=(4, 5), stride=(1, 2))


def doubled(case):
    return np.arange(case.size) * 2.0


def grid_runs(**per_framework):
    """Every framework right on every case, except those given: a function of the case."""
    runs = {framework: {"outputs": {"double": [doubled(case) for case in CASES]}} for framework in ("pytorch", "jax")}
    for framework, compute in per_framework.items():
        runs[framework]["outputs"]["double"] = [compute(case) for case in CASES]
    return runs


REFERENCE = {"double": [doubled(case) for case in CASES]}


def test_a_grid_is_every_combination_and_says_what_it_covers():
    assert [str(case) for case in CASES] == ["size 4, stride 1", "size 4, stride 2", "size 5, stride 1",
                                             "size 5, stride 2"]
    assert grid_axes(CASES) == "size 4, 5 · stride 1, 2 (4 cases)"
    with pytest.raises(ValueError, match="sequence of values"):
        grid(size=4)


def test_a_row_exact_on_its_whole_grid():
    checks = check_concepts("p", grid_runs(), REFERENCE, grids={"double": CASES})
    assert [c.verdict for c in checks] == ["exact", "exact"] and checks[0].cases == 4


def test_a_failing_case_stops_the_page_naming_it():
    wrong_on_odd = lambda case: doubled(case) + case.size % 2  # noqa: E731
    with pytest.raises(TranslationMismatch, match=r"concept 'double', framework jax: claimed exact, but at the "
                                                  r"case size 5, stride 1 the max abs error is 1 > 1e-05"):
        check_concepts("p", grid_runs(jax=wrong_on_odd), REFERENCE, grids={"double": CASES})


def test_a_condition_holds_inside_and_fails_outside():
    wrong_on_odd = lambda case: doubled(case) + case.size % 2  # noqa: E731
    checks = check_concepts("p", grid_runs(jax=wrong_on_odd), REFERENCE, grids={"double": CASES},
                            conditions={"double": {"jax": "size % 2 == 0"}})
    jax = checks[1]
    assert jax.verdict == "exact where size % 2 == 0; outside it differs (1 at size 5, stride 1)"
    assert checks[0].verdict == "exact"  # the condition is JAX's alone


def test_a_case_of_another_shape_differs_outside_its_condition_and_stops_the_page_inside():
    """On a grid, a case whose result has another shape, or fewer arrays (a tab cannot take
    the gradient of an output of another shape), differs."""
    shorter_on_odd = lambda case: doubled(case)[: 4]  # noqa: E731
    pair = lambda case: (doubled(case), doubled(case))  # noqa: E731
    output_alone = lambda case: pair(case) if case.size == 4 else (doubled(case),)  # noqa: E731
    checks = check_concepts("p", grid_runs(pytorch=pair, jax=output_alone), {"double": [pair(c) for c in CASES]},
                            grids={"double": CASES}, conditions={"double": {"jax": "size == 4"}})
    assert "another shape at size 5" in checks[1].verdict
    checks = check_concepts("p", grid_runs(jax=shorter_on_odd), REFERENCE, grids={"double": CASES},
                            conditions={"double": {"jax": "size == 4"}})
    assert "another shape at size 5" in checks[1].verdict
    with pytest.raises(TranslationMismatch, match="at the case size 5, stride 1 .* another shape"):
        check_concepts("p", grid_runs(jax=shorter_on_odd), REFERENCE, grids={"double": CASES})


def test_a_needless_condition_stops_the_page():
    with pytest.raises(TranslationMismatch, match=r"states the condition 'stride == 1', but its grid shows the "
                                                  r"translation holding outside it too"):
        check_concepts("p", grid_runs(), REFERENCE, grids={"double": CASES},
                       conditions={"double": {"pytorch": "stride == 1"}})


def test_a_condition_no_case_meets_or_that_cannot_be_read_is_refused():
    with pytest.raises(TranslationMismatch, match="no case of its grid meets"):
        check_concepts("p", grid_runs(), REFERENCE, grids={"double": CASES}, conditions={"double": {"jax": "size > 9"}})
    with pytest.raises(ValueError, match="cannot be evaluated"):
        check_concepts("p", grid_runs(), REFERENCE, grids={"double": CASES}, conditions={"double": {"jax": "kernel > 1"}})


def test_derived_values_are_for_conditions_not_for_the_grid_axes():
    cases = grid(size=(4, 5))
    for case in cases:
        case.derive(odd=case.size % 2)
    assert cases[1].holds("odd == 1") and str(cases[1]) == "size 5"
    assert grid_axes(cases) == "size 4, 5 (2 cases)"


def test_exactness_is_per_concept_and_framework():
    off = lambda case: doubled(case) + 0.01  # noqa: E731
    checks = check_concepts("p", grid_runs(jax=off), REFERENCE, grids={"double": CASES},
                            approximate={"double": ["jax"]})
    assert [c.verdict for c in checks] == ["exact", "approximate (0.01)"]
    with pytest.raises(TranslationMismatch, match="framework pytorch"):
        check_concepts("p", grid_runs(pytorch=off), REFERENCE, grids={"double": CASES},
                       approximate={"double": ["jax"]})


def test_a_grid_result_that_is_not_one_entry_per_case_is_refused():
    runs = grid_runs()
    runs["jax"]["outputs"]["double"] = runs["jax"]["outputs"]["double"][:3]
    with pytest.raises(TranslationMismatch, match=r"one entry per case of its grid \(4\), not 3"):
        check_concepts("p", runs, REFERENCE, grids={"double": CASES})


def test_a_nan_result_is_never_exact():
    runs = runs_with(jax={"dense": np.array([1.0, np.nan])})
    with pytest.raises(TranslationMismatch, match="framework jax"):
        check_concepts("p", runs, REFERENCES)
    on_grid = grid_runs(jax=lambda case: doubled(case) * np.nan)
    with pytest.raises(TranslationMismatch, match="framework jax: .* the max abs error is NaN"):
        check_concepts("p", on_grid, REFERENCE, grids={"double": CASES})
    nan_on_odd = grid_runs(jax=lambda case: doubled(case) * (np.nan if case.size % 2 else 1))
    checks = check_concepts("p", nan_on_odd, REFERENCE, grids={"double": CASES},
                            conditions={"double": {"jax": "size % 2 == 0"}})
    assert checks[1].outside == "NaN at size 5, stride 1"
