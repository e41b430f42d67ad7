"""The CIFAR-10 page's claims, checked through the code it shows (the chapter loader).

Each framework's page runs up to its Timing section (Setup, Data, Model,
Training, Evaluation, Equivalence) in the smoke profile, offline.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import assert_trained_and_tested, equivalence_table_rows, run_page_offline
from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import is_installed
from rosetta_utils.transplant import max_abs_difference

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "cifar10_cnn.md"
INSTALLED = [name for name in FRAMEWORKS if is_installed(name)]


@pytest.fixture(scope="module")
def runs():
    """What each framework's run of the page produced (the big arrays left behind)."""
    return run_page_offline(PAGE, INSTALLED, (
        "parameter_counts", "equivalence", "initial_weights", "epoch_seconds", "test_accuracy",
        "EPOCHS", "DATA_NOTE", "equivalence_rows",
    ), derive=lambda page: {"synthetic": page["data"].synthetic})


@pytest.mark.parametrize("framework", INSTALLED)
def test_every_framework_builds_the_reference_parameter_count(runs, framework):
    assert runs[framework]["parameter_counts"] == {framework: 3_441_592}


@pytest.mark.parametrize("framework", INSTALLED)
def test_transplanted_weights_give_pytorchs_logits_and_step(runs, framework):
    if "pytorch" not in runs:
        pytest.skip("PyTorch is the yardstick")
    ours, reference = runs[framework]["equivalence"][framework], runs["pytorch"]["equivalence"]["pytorch"]
    assert np.max(np.abs(ours["logits"] - reference["logits"])) <= 1e-4
    assert max_abs_difference(ours["weights"], reference["weights"]) <= 1e-4
    initial = runs[framework]["initial_weights"]
    moved = max_abs_difference(reference["weights"], initial)
    assert moved > 1e-4, "the step must move the weights by more than the tolerance"
    update_diff = max(
        np.max(np.abs((ours["weights"][n] - initial[n]) - (reference["weights"][n] - initial[n]))) for n in initial
    )
    assert update_diff <= 1e-3 * moved, "the updates (gradients times learning rate) must agree to 0.1%"


def test_the_pages_table_reports_the_same_differences(runs):
    if "pytorch" not in runs:
        pytest.skip("PyTorch is the yardstick")
    rows = equivalence_table_rows(runs)
    for framework, parameters, logits_diff, weights_diff, update_diff in rows:
        assert parameters == 3_441_592 and logits_diff <= 1e-4 and weights_diff <= 1e-4 and update_diff <= 1e-3


@pytest.mark.parametrize("framework", INSTALLED)
def test_every_framework_trained_and_was_tested(runs, framework):
    run = runs[framework]
    assert_trained_and_tested(run, framework)
