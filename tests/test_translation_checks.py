"""The translation-table checker: exact rows that disagree stop the build, naming page,
concept and framework; approximate rows and missing features are reported."""

import numpy as np
import pytest

from rosetta_utils.translation_checks import TranslationMismatch, check_concepts, check_table, numeric_shares

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
    assert headers == ["concept", "pytorch", "jax"] and rows[0][1].startswith("exact")
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


def test_a_framework_that_leaves_a_concept_out_or_the_wrong_shape_is_a_mismatch():
    runs = runs_with()
    del runs["jax"]["outputs"]["pool"]
    with pytest.raises(TranslationMismatch, match="jax part left no result"):
        check_concepts("p", runs, REFERENCES)
    with pytest.raises(TranslationMismatch, match="structure"):
        check_concepts("p", runs_with(jax={"dense": np.zeros(3)}), REFERENCES)
