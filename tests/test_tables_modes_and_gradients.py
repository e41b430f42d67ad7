"""The modes-and-gradients translation table, checked through the code the page shows.

Each framework's part runs in its own process as in the book build; the
page's comparison cell checks every concept against its float64 reference,
on the grids the page states, and stops where a translation fails inside its
framework's condition or holds outside it. The tests count what it checked,
see that the bfloat16 row measures something real (and that MXNet's and
Chainer's rounding in float32 is the arithmetic of a real bfloat16 product),
break translations on purpose (a batch-norm running mean computed for real
with PyTorch's momentum 0.9, on one case of the grid; a fresh PyTorch dropout
that inferred) and see the page stop naming page, concept, framework and
case, and remove or flip a stated condition and see the page stop too.
"""

from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS
from page_checks import parts_as_built, smoke_offline
from rosetta_book.chapter import load_chapter, load_comparisons
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming, page_with

PAGE = Path(__file__).parents[1] / "book" / "tables" / "modes_and_gradients.md"
PAGE_NAME = "tables/modes_and_gradients.md"
PROMISED_CONCEPTS = 13
#: What a freshly built layer does when called with no mode set, as the page's prose says.
PLAIN_CALL_MODES = {"pytorch": "train", "tensorflow": "infer", "jax": "train", "mxnet": "infer",
                    "chainer": "train"}
#: The running variance each framework moves towards, as the page's prose says.
RUNNING_VARIANCES = {"pytorch": "unbiased", "tensorflow": "biased", "jax": "biased", "mxnet": "biased",
                     "chainer": "unbiased"}


@pytest.fixture(scope="module")
def results():
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def page(results):
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        return load_comparisons(PAGE, results)


def changed(results, framework, concept, value):
    """``results`` where ``framework`` left ``value`` for ``concept``."""
    wrong = {name: dict(values) for name, values in results.items()}
    outputs = dict(wrong[framework]["outputs"])
    outputs[concept] = value
    wrong[framework]["outputs"] = outputs
    return wrong


def test_every_concept_is_checked_in_every_framework(page):
    checks = page["checks"]
    assert_every_concept_checked(checks, PROMISED_CONCEPTS, AVAILABLE)
    assert page["APPROXIMATE"] == ["bfloat16_matmul"]
    grids = page["grids"]
    assert {case.batch for case in grids["batchnorm_train"]} == {1, 8}  # a batch of one, and more
    assert {case.steps for case in grids["batchnorm_train"]} == {1, 3}  # several running-mean steps
    assert 0.0 in {case.rate for case in grids["dropout_train"]}
    assert all(2 <= len(cases) <= 12 for cases in grids.values())


def test_the_conditions_state_each_frameworks_default(page):
    """The grid's mode axis holds the reference of each documented default: each framework's
    condition names the one its plain call computes (PyTorch's, in training, not on a batch of one)."""
    conditions = page["conditions"]
    for framework, mode in PLAIN_CALL_MODES.items():
        assert conditions["dropout_default"][framework] == f'mode == "{mode}"'
        expected = f'mode == "{mode}"' + (" and batch > 1" if framework == "pytorch" else "")
        assert conditions["batchnorm_default"][framework] == expected
    for framework, variance in RUNNING_VARIANCES.items():
        assert conditions["batchnorm_running_var"][framework] == f'variance == "{variance}"'
    for check in page["checks"]:
        if check.concept in ("dropout_default", "batchnorm_default", "batchnorm_running_var"):
            assert check.condition and check.outside, check  # holds inside, differs outside


def test_the_measured_difference_is_real(page, results):
    errors = {(c.concept, c.framework): c.error for c in page["checks"]}
    for framework in AVAILABLE:
        assert 1e-4 < errors["bfloat16_matmul", framework] < 0.5
    if {"pytorch", "mxnet", "chainer"} <= set(AVAILABLE):
        autocast = results["pytorch"]["outputs"]["bfloat16_matmul"]
        for framework in ("mxnet", "chainer"):  # rounded in float32: within one bfloat16 step of a real product
            rounded = results[framework]["outputs"]["bfloat16_matmul"]
            assert np.all(np.abs(rounded - autocast) <= 2.0**-7 * np.abs(autocast)), framework


def test_a_wrong_momentum_convention_on_one_case_stops_the_page_naming_it(page, results):
    """PyTorch's batch norm run for real with momentum=0.9 (the others' decay) on the grid's
    case of eight samples and three steps, inside PyTorch's condition `batch > 1`: the running
    mean moves nine times as far, and the page stops naming that case."""
    if "pytorch" not in IN_PROCESS:
        pytest.skip("PyTorch does not import in this environment")
    import torch

    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        tab = load_chapter(PAGE, "pytorch", until="The running variance")
    cases = tab["grids"]["batchnorm_train"]
    number = next(n for n, case in enumerate(cases) if case.batch == 8 and case.steps == 3)
    model = torch.nn.BatchNorm1d(3, eps=tab["EPS"], momentum=0.9)
    for x in cases[number].xs:
        y = model(torch.from_numpy(x))
    right = results["pytorch"]["outputs"]["batchnorm_train"]
    wrong = list(right)
    wrong[number] = (y.detach().numpy(), model.running_mean.numpy())
    assert np.allclose(wrong[number][0], right[number][0], atol=1e-5)  # only the running mean is wrong
    assert_the_page_stops_naming(PAGE, changed(results, "pytorch", "batchnorm_train", wrong), PAGE_NAME,
                                 "batchnorm_train", "pytorch", case="batch 8, steps 3")


def test_a_fresh_pytorch_dropout_that_inferred_stops_the_page(page, results):
    """PyTorch's plain call leaving what inference leaves ({1}) is caught inside its condition."""
    cases = page["grids"]["dropout_default"]
    inferred = [np.array([1.0]) for case in cases]
    assert_the_page_stops_naming(PAGE, changed(results, "pytorch", "dropout_default", inferred), PAGE_NAME,
                                 "dropout_default", "pytorch", case="mode train, rate 0.5")


def test_without_its_condition_pytorch_batch_of_one_stops_the_page(results, tmp_path):
    """PyTorch refuses a batch of one while training: drop the condition `batch > 1` and the
    failing case is inside, so the page stops naming it."""
    copy = page_with(PAGE, tmp_path, 'conditions["batchnorm_train"] = {"pytorch": "batch > 1"}',
                     'conditions["batchnorm_train"] = {}')
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        assert_the_page_stops_naming(copy, results, PAGE_NAME, "batchnorm_train", "pytorch",
                                     case="batch 1, steps 1")


def test_a_wrong_default_in_a_condition_stops_the_page(results, tmp_path):
    """Keras's plain call infers: a condition claiming it trains fails on its own cases."""
    line = 'conditions["batchnorm_train"] = {"pytorch": "batch > 1"}'
    copy = page_with(PAGE, tmp_path, line, line + '\nconditions["dropout_default"]["tensorflow"] = \'mode == "train"\'')
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        assert_the_page_stops_naming(copy, results, PAGE_NAME, "dropout_default", "tensorflow",
                                     case="mode train, rate 0.5")


@pytest.mark.legacy
def test_mxnet_multiplies_bfloat16_as_its_tab_rounds_it(offline_smoke):
    """MXNet's `dot` refuses bfloat16; where oneDNN has a bfloat16 kernel (an AVX-512 CPU),
    its bfloat16 dense product equals the tab's float32 product of rounded values."""
    if "mxnet" not in IN_PROCESS:
        pytest.skip("MXNet does not import in this environment")
    tab = load_chapter(PAGE, "mxnet")
    mx, bfloat16 = tab["mx"], tab["bfloat16"]
    a = mx.nd.amp_cast(mx.nd.array(tab["a_np"]), dtype=bfloat16)
    weight = mx.nd.amp_cast(mx.nd.array(np.ascontiguousarray(tab["b_np"].T)), dtype=bfloat16)
    with pytest.raises(mx.MXNetError, match="dot only supports"):
        mx.nd.dot(a, weight, transpose_b=True).wait_to_read()
    try:
        y = mx.nd.FullyConnected(a, weight, no_bias=True, num_hidden=8)
        y = mx.nd.amp_cast(y, dtype="float32").asnumpy()
    except mx.MXNetError as error:
        pytest.skip(f"no oneDNN bfloat16 kernel on this CPU: {str(error).splitlines()[-1]}")
    rounded = tab["outputs"]["bfloat16_matmul"]
    assert np.all(np.abs(y - rounded) <= 2.0**-7 * np.abs(rounded))
