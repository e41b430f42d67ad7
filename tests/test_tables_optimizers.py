"""The optimizers translation table, checked through the code the page shows.

Each framework's part runs in its own process as in the book build, and the
page's comparison cell checks every concept's parameters, on every case of its
grid (one step and several, momentum and weight decay off and on, clipped and
unclipped gradients, batch 1 and 4), against a float64 re-implementation of
the update rule. The tests below count what it checked, see the traps the
conditions state (Keras's decoupled weight decay under momentum, PyTorch's
cosine past its end, the momentum forms under a schedule, epsilon's place in
Adam), break translations on purpose (RMSprop with PyTorch's default decay,
PyTorch's scheduler stepped before its optimizer on one case, Gluon's
``trainer.step(1)`` on a summed loss) and remove stated conditions, and see
the page stop naming concept, framework and case.
"""

import copy
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE
from page_checks import parts_as_built, smoke_offline
from rosetta_book.chapter import load_chapter, load_comparisons
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming, page_with

PAGE = Path(__file__).parents[1] / "book" / "tables" / "optimizers.md"
PAGE_NAME = "tables/optimizers.md"
PROMISED_CONCEPTS = 18


@pytest.fixture(scope="module")
def results():
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def page(results):
    return load_comparisons(PAGE, results)


@pytest.fixture(scope="module")
def pytorch_tab():
    """The page's PyTorch part, run in this process up to its checks."""
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        return load_chapter(PAGE, "pytorch", until="The checks")


def checks_of(page):
    return {(check.concept, check.framework): check for check in page["checks"]}


def test_every_concept_is_checked_in_every_framework(page):
    assert_every_concept_checked(page["checks"], PROMISED_CONCEPTS, AVAILABLE)
    assert page["APPROXIMATE"] == {"nesterov": ["chainer"]}
    assert all(len(cases) >= 2 for cases in page["grids"].values())
    assert set(page["grids"]) == set(page["references"])


def test_the_stated_conditions_hold_inside_and_fail_outside(page):
    """Each condition's cell says where it holds and names a failing case outside it."""
    checks = checks_of(page)
    expected = {
        ("momentum", "tensorflow"): "steps 4, momentum 0.9, decay 0.5",
        ("momentum", "mxnet"): "steps 4, momentum 0.9, decay 0.5",
        ("momentum", "chainer"): "steps 4, momentum 0.9, decay 0.5",
        ("sgd_weight_decay", "tensorflow"): "momentum 0.9, wd 0.1, steps 3",
        ("adam_large_eps", "tensorflow"): "eps 0.1",
        ("cosine", "pytorch"): "steps 9",
        ("clip_norm_variables", "tensorflow"): "per global",
        **{("clip_norm_variables", f): "per variable" for f in ("pytorch", "jax", "mxnet", "chainer")},
    }
    for key, outside in expected.items():
        assert checks[key].condition and outside in checks[key].outside, (key, checks[key].verdict)
    stated = {key for key, check in checks.items() if check.condition}
    assert stated == set(expected) | {("adam_large_eps", "mxnet"), ("adam_large_eps", "chainer")}
    assert checks["nesterov", "chainer"].error > 1e-2  # a different recurrence, measured


def test_gluon_divides_by_the_batch_size_and_a_sum_steps_further(page):
    """The summed-loss step and the mean-loss step agree at batch 1 and part at batch 4;
    every framework, Gluon through trainer.step(1) and trainer.step(batch_size), makes both."""
    cases, references = page["grids"]["batch_size"], page["references"]["batch_size"]
    for case, reference in zip(cases, references):
        apart = np.abs(reference["summed"] - reference["mean"]).max()
        assert (apart > 1e-2) if case.batch > 1 else (apart == 0.0), (case, apart)
    assert all(checks_of(page)["batch_size", framework].verdict == "exact" for framework in AVAILABLE)


def test_a_wrong_convention_is_caught_naming_page_concept_and_framework(results, pytorch_tab):
    """RMSprop trained for real by the page's PyTorch train(), with torch's default
    alpha=0.99 instead of the row's 0.9 (Keras's rho, Optax's decay)."""
    import torch

    tab = pytorch_tab
    broken = copy.deepcopy(results)
    broken["pytorch"]["outputs"]["rmsprop"] = [
        tab["train"](lambda params: torch.optim.RMSprop(params, lr=tab["LR"], eps=tab["EPS"]), case.steps)
        for case in tab["grids"]["rmsprop"]]
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "rmsprop", "pytorch", case="steps 4")


def test_one_case_broken_inside_a_condition_stops_the_page_naming_it(results, pytorch_tab):
    """PyTorch's cosine holds where steps <= decay_steps + 1; its scheduler stepped once
    before the first optimizer step (the schedule then runs one step ahead, as MXNet's
    does by default) breaks the six-step case, which is inside the condition."""
    import torch

    tab = pytorch_tab
    cases = tab["grids"]["cosine"]
    six = next(n for n, case in enumerate(cases) if case.steps == 6)

    def one_step_ahead(optimizer):
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, tab["DECAY"])
        scheduler.step()
        return scheduler

    broken = copy.deepcopy(results)
    with pytest.warns(UserWarning, match="lr_scheduler.step()"):
        broken["pytorch"]["outputs"]["cosine"][six] = tab["train"](
            lambda params: torch.optim.SGD(params, lr=tab["LR"]), 6, one_step_ahead)
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "cosine", "pytorch", case="steps 6")


def test_gluon_stepping_by_one_on_a_summed_loss_stops_the_page(results):
    """Gluon's loop with trainer.step(1) where the others take the mean: the batch-4 cases
    step four times too far."""
    broken = copy.deepcopy(results)
    broken["mxnet"]["outputs"]["batch_size"] = [
        {"summed": steps["summed"], "mean": steps["summed"]} for steps in results["mxnet"]["outputs"]["batch_size"]]
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "batch_size", "mxnet")


@pytest.mark.parametrize("concept, line, framework, case", [
    ("sgd_weight_decay", 'conditions["sgd_weight_decay"] = {"tensorflow": "momentum == 0"}\n', "tensorflow",
     "momentum 0.9, wd 0.1, steps 3"),
    ("cosine", 'conditions["cosine"] = {"pytorch": "steps <= decay_steps + 1"}\n', "pytorch", "steps 9"),
])
def test_a_removed_condition_stops_the_page_at_the_case_outside_it(tmp_path, results, concept, line, framework,
                                                                  case):
    """Without its condition, the failing case the grid found outside it is inside: Keras's
    decoupled decay under momentum, PyTorch's cosine climbing again past its end."""
    copy_of_page = page_with(PAGE, tmp_path, line, "")
    assert_the_page_stops_naming(copy_of_page, results, PAGE_NAME, concept, framework, case=case)
