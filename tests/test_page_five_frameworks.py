"""The first page's claim, checked through the code the page shows: all five agree."""

from pathlib import Path

import numpy as np
import pytest

from rosetta_book.chapter import load_comparisons, run_framework_parts
from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import is_installed
from frameworks_under_test import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS
from page_checks import assert_a_failed_proof_stops_the_page

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


# ---- the Summary ----------------------------------------------------------------------

def float64_dense(x, weight, bias):
    """The dense layer and its gradients for loss = ½ Σ y², in float64, written here."""
    x, weight, bias = (np.asarray(a, np.float64) for a in (x, weight, bias))
    y = x @ weight.T + bias
    return {"product": x @ weight.T, "y": y, "grad_weight": y.T @ x, "grad_bias": y.sum(axis=0),
            "grad_input": y @ weight}


def test_the_summary_states_what_the_parts_computed(results, comparison):
    """Every number the Summary gives is the runs' own: each framework's largest difference
    from a float64 reference computed here, and each framework's time."""
    summary = "\n".join(comparison["SUMMARY"])
    expected = float64_dense(comparison["x_np"], comparison["weight_np"], comparison["bias_np"])
    largest = {fw: max(float(np.max(np.abs(np.asarray(run["computed"][name], np.float64) - value)))
                       for name, value in expected.items())
               for fw, run in results.items()}
    for framework, difference in largest.items():
        assert f"{framework} {difference:.2g}" in summary, framework
        assert f"{framework} {results[framework]['seconds'] * 1e3:.3f} ms" in summary, framework
    assert f"the largest difference is {max(largest.values()):.2g}" in summary
    assert f"all {len(results)} frameworks" in summary


def test_the_summary_follows_the_runs(results, comparison):
    """Run the comparisons on one changed time and one gradient moved 9e-5 off the
    reference (within the bound, beyond float32 rounding): the Summary says so."""
    framework = AVAILABLE[0]
    changed = {name: dict(values) for name, values in results.items()}
    changed[framework]["seconds"] = 1.2345
    reference = float64_dense(comparison["x_np"], comparison["weight_np"], comparison["bias_np"])
    changed[framework]["computed"] = {**changed[framework]["computed"],
                                      "grad_bias": reference["grad_bias"] + 9e-5}
    summary = "\n".join(load_comparisons(PAGE, changed)["SUMMARY"])
    assert f"{framework} 1234.500 ms" in summary
    assert f"the slowest ({framework})" in summary
    assert f"the largest difference is 9e-05 ({framework}, `grad_bias`)" in summary
