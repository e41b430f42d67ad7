"""The first page's claim, checked through the code the page shows: all five agree."""

from pathlib import Path

import numpy as np
import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import load_comparisons, run_framework_parts
from rosetta_utils.frameworks import is_installed
from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, assert_a_failed_proof_stops_the_page

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "five_frameworks_one_computation.md"


@pytest.fixture(scope="module")
def results():
    """What each framework's part computed, each in its own process as the build runs it."""
    return run_framework_parts(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(results):
    """The page's comparison cells, run on what each framework's part computed."""
    return load_comparisons(PAGE, results)


def test_a_wrong_gradient_stops_the_page(results):
    framework = AVAILABLE[-1]
    computed = dict(results[framework]["computed"])
    computed["grad_input"] = np.asarray(computed["grad_input"])[::-1]
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"computed": computed},
                                         r"the dense layer against float64 failed for .*DIFFERS")


@pytest.mark.parametrize("framework", AVAILABLE)
def test_dense_layer_matches_the_float64_reference(comparison, framework):
    differences = comparison["differences"][framework]
    assert set(differences) == {"product", "y", "grad_weight", "grad_bias", "grad_input"}
    for quantity, difference in differences.items():
        assert difference <= 1e-4, f"{framework} {quantity} differs by {difference}"
    assert comparison["verdict"](max(differences.values()), comparison["TOLERANCE"]) == "agrees"
    assert comparison["runs"][framework].seconds > 0


def test_the_verdict_fails_a_wrong_gradient(comparison):
    """The check is not vacuous: a reversed input gradient is far off, and the verdict says so."""
    computed = dict(comparison["runs"][AVAILABLE[0]].computed)
    computed["grad_input"] = computed["grad_input"][::-1]
    differences = comparison["max_differences"](computed)
    assert differences["grad_input"] > 1e-2
    assert comparison["verdict"](max(differences.values()), comparison["TOLERANCE"]).startswith("DIFFERS")


def test_each_part_reports_where_it_ran(comparison):
    for framework, run in comparison["runs"].items():
        assert run.environment["device"] in ("cpu",) or run.environment["device"].startswith(("cuda", "gpu"))
        assert np.isfinite(run.seconds)
