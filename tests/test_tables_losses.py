"""The losses translation table, checked through the code the page shows.

Each framework's part runs in its own process as in the book build, and the
page's comparison cell checks every concept on every case of its grid
against its float64 reference. The tests below count what it checked, read
each framework's default reduction off the generated table and off the
gradients, and break translations on purpose to see the page stop, naming
concept, framework and case: Huber's delta read as smooth L1's beta, a
Gluon tab that averages where its default sums (one case inside its
condition), and a condition taken away, so that a case where the
translation differs falls inside it.
"""

import copy
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE
from page_checks import parts_as_built
from rosetta_book.chapter import load_comparisons
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming, page_with

PAGE = Path(__file__).parents[1] / "book" / "tables" / "losses.md"
PAGE_NAME = "tables/losses.md"
PROMISED_CONCEPTS = 16


@pytest.fixture(scope="module")
def results():
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def page(results):
    return load_comparisons(PAGE, results)


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(page):
    assert_every_concept_checked(page["checks"], PROMISED_CONCEPTS, AVAILABLE)
    grids = page["grids"]
    assert set(grids) == set(page["references"])  # every row on a grid of cases
    for concept in ("ce_logits", "ce_sum", "ce_none", "reduction_grad", "default_grad", "nll"):
        assert {case.batch for case in grids[concept]} == {1, 4}, concept


def test_each_framework_default_reduction_is_read_off_the_table_and_the_gradients(page, results):
    """PyTorch, Keras, Optax's usual .mean() and Chainer give the mean's gradient, Gluon the
    sum's: N times as large at a batch of N, the same at a batch of 1."""
    row = next(line for line in page["compact"].data.splitlines() if "tables-losses-default-gradient" in line)
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert [cell.count("exact where `reduction == 'sum'`") for cell in cells[1:6]] == [0, 0, 0, 1, 0], row
    assert sum("exact where `reduction == 'mean'`" in cell for cell in cells[1:6]) == 4, row
    for case, pytorch, mxnet in zip(page["grids"]["default_grad"], results["pytorch"]["outputs"]["default_grad"],
                                    results["mxnet"]["outputs"]["default_grad"]):
        np.testing.assert_allclose(mxnet, case.batch * pytorch, rtol=0, atol=1e-5)
    assert {check.framework: check.condition for check in page["checks"] if check.concept == "ce_probs"} == {
        "pytorch": None, "tensorflow": "gap < 16", "jax": None, "mxnet": None, "chainer": None}


def test_a_wrong_convention_is_caught_naming_page_concept_framework_and_case(results):
    """Huber computed as PyTorch's smooth L1 with beta = delta: the same at a threshold of 1,
    half as large at 2, so the page names a case with threshold 2."""
    broken = copy.deepcopy(results)
    broken["pytorch"]["outputs"]["huber"] = broken["pytorch"]["outputs"]["smooth_l1"]
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "huber", "pytorch", case="threshold 2.0, largest_error 4.0")


def test_one_case_broken_inside_a_condition_stops_the_page_naming_it(page, results):
    """A Gluon tab that averaged its default loss (gradient / N) on the one case where its
    stated default, the sum, differs from the mean: batch 4, inside 'reduction == sum'."""
    broken = copy.deepcopy(results)
    cases = page["grids"]["default_grad"]
    index = next(n for n, case in enumerate(cases) if case.batch == 4 and case.reduction == "sum")
    gradients = list(broken["mxnet"]["outputs"]["default_grad"])
    gradients[index] = gradients[index] / 4
    broken["mxnet"]["outputs"]["default_grad"] = gradients
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "default_grad", "mxnet", case="batch 4, reduction sum")


@pytest.mark.parametrize("concept, framework, stated, removed, case", [
    ("ce_probs", "tensorflow", 'conditions["ce_probs"] = {"tensorflow": "gap < 16"}\n',
     'conditions["ce_probs"] = {}\n', "gap 30"),
    ("default_grad", "mxnet", '    "mxnet": "reduction == \'sum\'",\n', "", "batch 4, reduction mean"),
])
def test_a_condition_removed_stops_the_page_at_the_case_outside_it(tmp_path, results, concept, framework, stated,
                                                                   removed, case):
    """Without its condition, the case where the translation differs (Keras's probabilities
    clipped at 1e-7; Gluon's summed gradient against the mean) is inside, and the page stops."""
    assert_the_page_stops_naming(page_with(PAGE, tmp_path, stated, removed), results, PAGE_NAME, concept, framework, case=case)


def test_a_label_outside_the_classes_raises_or_is_read_as_the_row_says(page, results):
    """The five behaviours on labels -1 and 5, as the tabs met them: PyTorch and Keras raise
    (an empty result), Chainer leaves a -1 out and raises on 5, Optax and Gluon compute."""
    cases = [case.label for case in page["grids"]["label_range"]]
    raised = {framework: [np.size(result) == 0 for result in results[framework]["outputs"]["label_range"]]
              for framework in AVAILABLE}
    expected = {"pytorch": [False, True, True], "tensorflow": [False, True, True], "jax": [False] * 3,
                "mxnet": [False] * 3, "chainer": [False, False, True]}
    assert cases == [2, -1, 5]
    assert raised == {framework: expected[framework] for framework in AVAILABLE}
    if "chainer" in AVAILABLE:  # -1 left out: the mean of the other three samples
        case = page["grids"]["label_range"][1]
        kept = np.delete(np.arange(4), 1)
        log_p = case.logits - np.log(np.exp(case.logits.astype(np.float64)).sum(axis=1, keepdims=True))
        expected_mean = -log_p[kept, case.labels[kept]].mean()
        np.testing.assert_allclose(results["chainer"]["outputs"]["label_range"][1], expected_mean, rtol=1e-5)
