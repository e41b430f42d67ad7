"""The initialisers-and-defaults page, checked through the code it shows.

Each framework's part runs in its own process as in the book build; the
page's comparison cells check every measured initialiser against its
documented formula, every default (batch norm, Adam, dropout, max pooling)
by what the layer or optimiser does on a grid of the default's candidate
values, and the read batch-norm defaults against the layers. The tests
below compare the defaults table and the page's conditions with the
installed frameworks, show that a value typed into a tab, a misread
formula, a wrong result on one case of a grid and a condition taken away
stop the page, and count what the page checked.
"""

import math
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS
from page_checks import parts_as_built
from rosetta_book.chapter import ChapterError, load_comparisons
from rosetta_utils.cases import Case
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming, page_with

PAGE = Path(__file__).parents[1] / "book" / "tables" / "initializers_and_defaults.md"
PAGE_NAME = "tables/initializers_and_defaults.md"
PROMISED_CONCEPTS = 10
INITIALISERS = {"init_dense", "init_conv", "init_embedding", "init_gru_input", "init_gru_recurrent"}
DEFAULTS = {"batch_norm", "adam", "max_pool"}


@pytest.fixture(scope="module")
def results():
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def page(results):
    return load_comparisons(PAGE, results)


def changed(results, framework, name, key, value):
    """A copy of the parts' results with one value of one framework's dict replaced."""
    wrong = {fw: dict(values) for fw, values in results.items()}
    wrong[framework][name] = dict(wrong[framework][name], **{key: value})
    return wrong


def test_every_concept_is_checked_in_every_framework_and_agrees(page):
    checks = page["checks"]
    assert_every_concept_checked(checks, PROMISED_CONCEPTS, AVAILABLE)
    assert INITIALISERS | DEFAULTS | {"dropout_rate", "dropout_scale"} == {c.concept for c in checks}
    assert set(page["STATISTICAL"]) == INITIALISERS | {"dropout_rate"}
    for check in checks:
        if check.concept in page["STATISTICAL"]:
            assert not check.exact and check.error <= page["STATISTICAL_TOLERANCE"], check
        else:
            assert check.exact and check.error <= check.tolerance, check
            assert (check.condition is not None) == (check.concept in DEFAULTS), check
    assert all(row[-1] == "agrees" for row in page["measured_rows"])
    assert all(row[4] == row[7] == "agrees" for row in page["probe_rows"])
    assert all(2 <= len(cases) <= 12 for cases in page["grids"].values())


def test_the_table_lays_out_what_each_part_read(page, results):
    for framework in AVAILABLE:
        assert page["runs"][framework].defaults == results[framework]["defaults"]
    assert page["NAMES"] == list(results[AVAILABLE[0]]["defaults"])
    for framework in AVAILABLE:
        assert list(results[framework]["defaults"]) == page["NAMES"]


def test_the_conditions_name_the_defaults_each_part_read(page, results):
    """The conditions are typed in the page's shared cell: each must hold at the defaults
    the installed framework declares (read by its part), and at no other candidate."""
    conditions, grids = page["conditions"], page["grids"]
    for framework in AVAILABLE:
        read = results[framework]["defaults"]
        epsilon = read["Adam epsilon"]
        holding = {(case.eps, case.eps_on) for case in grids["adam"] if case.holds(conditions["adam"][framework])}
        assert {eps for eps, _ in holding} == {epsilon}, (framework, holding, epsilon)
        weight = round(page["expected_new_batch_weight"](framework, read["batch-norm momentum"]), 9)
        norm = Case(new_weight=weight, eps=read["batch-norm epsilon"])
        assert norm.holds(conditions["batch_norm"][framework]), (framework, weight, read["batch-norm epsilon"])


def test_pytorchs_defaults_are_the_installed_ones(results):
    if "pytorch" not in IN_PROCESS:
        pytest.skip("PyTorch is not installed in this environment")
    import torch

    read = results["pytorch"]["defaults"]
    norm = torch.nn.BatchNorm1d(3)
    adam = torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    assert (read["batch-norm momentum"], read["batch-norm epsilon"]) == (norm.momentum, norm.eps)
    assert read["Adam learning rate"] == adam.defaults["lr"] and read["Adam epsilon"] == adam.defaults["eps"]
    assert tuple(read["Adam betas"]) == tuple(adam.defaults["betas"])
    assert read["dropout rate"] == torch.nn.Dropout().p
    assert torch.nn.Conv2d(1, 1, 1).padding == (read["conv padding"],) * 2
    assert read["max-pool ceil mode"] == torch.nn.MaxPool2d(2).ceil_mode
    assert read["conv kernel layout"] == "OIHW"
    assert read["dense weight initialiser"] == "kaiming_uniform_(a=math.sqrt(5))"
    measured = results["pytorch"]["outputs"]["batch_norm"][0]
    assert measured["new-batch weight"] == pytest.approx(norm.momentum, abs=1e-6)


def test_keras_defaults_are_the_installed_ones(results):
    if "tensorflow" not in IN_PROCESS:
        pytest.skip("TensorFlow is not installed in this environment")
    import keras

    read = results["tensorflow"]["defaults"]
    norm, adam = keras.layers.BatchNormalization(), keras.optimizers.Adam()
    assert (read["batch-norm momentum"], read["batch-norm epsilon"]) == (norm.momentum, norm.epsilon)
    assert read["Adam epsilon"] == adam.epsilon and tuple(read["Adam betas"]) == (adam.beta_1, adam.beta_2)
    assert read["dense weight initialiser"] == type(keras.layers.Dense(1).kernel_initializer).__name__


@pytest.mark.legacy
def test_chainer_defaults_are_the_installed_ones(results):
    if "chainer" not in IN_PROCESS:
        pytest.skip("Chainer is not installed in this environment (the legacy one has it)")
    import _distutils_hack

    _distutils_hack.remove_shim()
    import chainer
    import chainer.links as L

    read = results["chainer"]["defaults"]
    norm, adam = L.BatchNormalization(3), chainer.optimizers.Adam().hyperparam
    assert (read["batch-norm momentum"], read["batch-norm epsilon"]) == (norm.decay, norm.eps)
    assert (read["Adam learning rate"], read["Adam epsilon"]) == (adam.alpha, adam.eps)


def test_a_value_typed_into_a_tab_is_caught_by_the_layers(results):
    """PyTorch's momentum typed as the 0.9 that the other frameworks' convention uses, or
    Chainer's epsilon typed as PyTorch's: the batch-norm layers disagree and the page stops."""
    if "pytorch" in AVAILABLE:
        wrong = changed(results, "pytorch", "defaults", "batch-norm momentum", 0.9)
        with pytest.raises(ChapterError, match=r"batch-norm defaults against the layers failed for pytorch "
                                               r"momentum: pytorch momentum: DIFFERS"):
            load_comparisons(PAGE, wrong)
    if "chainer" in AVAILABLE:
        wrong = changed(results, "chainer", "defaults", "batch-norm epsilon", 1e-5)
        with pytest.raises(ChapterError, match=r"failed for chainer epsilon: chainer epsilon: DIFFERS"):
            load_comparisons(PAGE, wrong)


def test_a_misread_initialiser_formula_is_caught(results):
    """Gluon's dense layer documented as Glorot-uniform (what Keras uses) instead of its
    fixed Uniform(0.07): the measured std is then off by 8% and more, far more than
    sampling error."""
    if "mxnet" not in AVAILABLE:
        pytest.skip("MXNet is not installed")
    fan_ins = (64, 1024)
    ratios = []
    for fan_in, measured_over_uniform in zip(fan_ins, results["mxnet"]["outputs"]["init_dense"]):
        glorot_std = math.sqrt(6 / (fan_in + 512)) / math.sqrt(3)
        ratios.append(np.array(float(measured_over_uniform) * (0.07 / math.sqrt(3)) / glorot_std))
    assert min(abs(ratio - 1) for ratio in ratios) > 0.05  # sampling error at these sizes: under 1%
    wrong = changed(results, "mxnet", "outputs", "init_dense", ratios)
    with pytest.raises(ChapterError, match=r"measured initialisers and dropout rates failed for init_dense in mxnet"):
        load_comparisons(PAGE, wrong)


def test_a_rate_read_as_the_probability_of_keeping_is_caught(results):
    framework = AVAILABLE[0]
    kept = [np.array(1 - float(fraction)) for fraction in results[framework]["outputs"]["dropout_rate"]]
    wrong = changed(results, framework, "outputs", "dropout_rate", kept)
    with pytest.raises(ChapterError, match=rf"failed for dropout_rate in {framework}"):
        load_comparisons(PAGE, wrong)


def test_one_wrong_case_inside_a_condition_stops_the_page_naming_it(page, results):
    """PyTorch's Adam, on one case inside its condition, with Keras's epsilon (1e-7) instead
    of its own: the page stops and names that case."""
    if "pytorch" not in AVAILABLE:
        pytest.skip("PyTorch is not installed")
    cases = [str(case) for case in page["grids"]["adam"]]
    inside = "eps 1e-08, eps_on v_hat, steps 3"
    index = cases.index(inside)
    assert page["grids"]["adam"][index].holds(page["conditions"]["adam"]["pytorch"])
    broken = list(results["pytorch"]["outputs"]["adam"])
    broken[index] = page["adam64"](page["ADAM_W"], page["ADAM_GRAD"], 3, 1e-7, "v_hat").astype(np.float32)
    wrong = changed(results, "pytorch", "outputs", "adam", broken)
    assert_the_page_stops_naming(PAGE, wrong, PAGE_NAME, "adam", "pytorch", case=inside)


def test_a_condition_taken_away_stops_the_page(results, tmp_path):
    """Chainer's max pooling without its condition: the cases where it strides by 1 or
    rounds down on an odd size, outside the condition until now, are inside, and differ."""
    if "chainer" not in AVAILABLE:
        pytest.skip("Chainer is not installed")
    line = "    \"chainer\": \"stride == 2 and rounding == 'ceil'\",\n"
    copy = page_with(PAGE, tmp_path, line, "")
    assert_the_page_stops_naming(copy, results, PAGE_NAME, "max_pool", "chainer",
                                 case="stride 1, rounding floor, size 6")
