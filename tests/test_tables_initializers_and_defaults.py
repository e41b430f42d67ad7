"""The initialisers-and-defaults page, checked through the code it shows.

Each framework's part runs in its own process as in the book build; the
page's comparison cells check every measured initialiser against its
documented formula and every batch-norm default against a probe layer. The
tests below compare the defaults table with the installed frameworks (in
this process for PyTorch, Keras and Chainer), show that a value typed into a
tab or a misread formula stops the page, and make sure the compact table
names only APIs that the tabs run.
"""

import math
from pathlib import Path

import numpy as np
import pytest

from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, parts_as_built
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import ChapterError, load_comparisons
from rosetta_utils.frameworks import is_installed
from rosetta_utils.translation_checks import numeric_shares

PAGE = Path(__file__).parents[1] / "book" / "tables" / "initializers_and_defaults.md"
INITIALISERS = {"init_dense", "init_conv", "init_embedding", "init_gru_input", "init_gru_recurrent"}


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


def test_every_initialiser_is_measured_in_every_framework_and_agrees(page):
    checks = page["checks"]
    assert {check.concept for check in checks} == INITIALISERS
    for concept in INITIALISERS:
        assert {c.framework for c in checks if c.concept == concept} == set(AVAILABLE)
    assert set(numeric_shares(checks).values()) == {1.0}
    assert all(row[-1] == "agrees" for row in page["init_rows"])
    assert not page["init_failures"] and not page["probe_failures"]


def test_the_table_lays_out_what_each_part_read(page, results):
    for framework in AVAILABLE:
        assert page["runs"][framework].defaults == results[framework]["defaults"]
    assert page["NAMES"] == list(results[AVAILABLE[0]]["defaults"])
    for framework in AVAILABLE:
        assert list(results[framework]["defaults"]) == page["NAMES"]


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
    assert results["pytorch"]["probes"]["batch-norm new-batch weight"] == pytest.approx(norm.momentum, abs=1e-6)


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


def test_a_value_typed_into_a_tab_is_caught_by_its_probe(results):
    """PyTorch's momentum typed as the 0.9 that the other frameworks' convention uses, or
    Chainer's epsilon typed as PyTorch's: the probe layers disagree and the page stops."""
    if "pytorch" in AVAILABLE:
        wrong = changed(results, "pytorch", "defaults", "batch-norm momentum", 0.9)
        with pytest.raises(ChapterError, match=r"a default disagrees with its probe: pytorch: momentum DIFFERS"):
            load_comparisons(PAGE, wrong)
    if "chainer" in AVAILABLE:
        wrong = changed(results, "chainer", "defaults", "batch-norm epsilon", 1e-5)
        with pytest.raises(ChapterError, match=r"chainer: momentum agrees, epsilon DIFFERS"):
            load_comparisons(PAGE, wrong)


def test_a_misread_initialiser_formula_is_caught(results):
    """Gluon's dense layer documented as Glorot-uniform (what Keras uses) instead of its
    fixed Uniform(0.07): the measured std is then off by 8%, far more than sampling error."""
    if "mxnet" not in AVAILABLE:
        pytest.skip("MXNet is not installed")
    measured_over_uniform = float(results["mxnet"]["outputs"]["init_dense"])
    glorot_std = math.sqrt(6 / (512 + 512)) / math.sqrt(3)
    ratio = measured_over_uniform * (0.07 / math.sqrt(3)) / glorot_std
    assert abs(ratio - 1) > 0.05  # sampling error at this size is about 0.3%
    wrong = changed(results, "mxnet", "outputs", "init_dense", np.array(ratio))
    with pytest.raises(ChapterError, match=r"documented initialiser disagrees.*init_dense in mxnet"):
        load_comparisons(PAGE, wrong)
