"""The translation table "Tensors and dtypes": every concept runs in all five frameworks
and is checked against its float64 reference, on a grid where a parameter matters; a wrong
translation (on one case of a grid, too) or a wrong condition stops the page."""

import copy
from pathlib import Path

import numpy as np
import pytest

from page_checks import parts_as_built
from rosetta_book.chapter import load_comparisons
from rosetta_utils import FRAMEWORKS
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming, page_with

PAGE = Path(__file__).parents[1] / "book" / "tables" / "tensors_and_dtypes.md"
PAGE_NAME = "tables/tensors_and_dtypes.md"
PROMISED_CONCEPTS = 29


@pytest.fixture(scope="module")
def parts():
    yield from parts_as_built(PAGE, FRAMEWORKS)


@pytest.fixture(scope="module")
def comparison(parts):
    return load_comparisons(PAGE, parts)


def test_the_traps_show_in_the_results(comparison):
    runs = comparison["runs"]
    by_key = {(c.concept, c.framework): c for c in comparison["checks"]}
    # sharing, on an aligned buffer and one 4 bytes past it: JAX copies the second
    assert [float(out[0]) for out in runs["tensorflow"].outputs["share"]] == [100.0, 100.0]
    assert [float(out[0]) for out in runs["jax"].outputs["share"]] == [100.0, 0.0]
    assert by_key["share", "jax"].condition == "aligned"
    assert by_key["share", "mxnet"].condition is None
    assert by_key["default_dtypes", "pytorch"].error == 0
    assert by_key["default_dtypes", "jax"].error == 32  # int32, not int64
    assert not by_key["random", "pytorch"].exact
    # numpy reflects past the far end (JAX and Chainer follow); PyTorch refuses the width
    assert by_key["pad_reflect", "jax"].condition is None
    assert by_key["pad_reflect", "pytorch"].outside.startswith("another shape at size 3, width 3")
    assert by_key["pad_symmetric", "tensorflow"].outside.startswith("another shape at size 3, width 4")
    # ties: TensorFlow and JAX keep the lower index first, PyTorch does not
    assert by_key["top_k", "tensorflow"].condition is None
    assert by_key["top_k", "pytorch"].outside.endswith("ties True")
    assert by_key["cumsum", "mxnet"].outside == "another shape at axis -1"


def test_every_framework_checks_every_concept_numerically(comparison):
    checks = comparison["checks"]
    assert not [(c.concept, c.framework) for c in checks if c.error is None]


def test_a_wrong_variance_convention_stops_the_page(parts, comparison):
    """PyTorch's unbiased default, replaced by a biased variance as a careless translation
    of tf.math.reduce_variance would give: the row claims exact, so the page fails."""
    broken = copy.deepcopy(parts)
    x = comparison["x_np"]
    broken["pytorch"]["outputs"]["var_unbiased"] = [x.var(axis=case.axis)  # ddof=0
                                                    for case in comparison["grids"]["var_unbiased"]]
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "var_unbiased", "pytorch")


def test_a_wrong_mode_on_one_case_inside_the_condition_stops_the_page_naming_it(parts, comparison):
    """PyTorch's reflect padding holds where width < size; on one case inside (size 4,
    width 3) a symmetric pad, what a wrong mode name gives (the same shape), stops the page
    naming that case."""
    cases = comparison["grids"]["pad_reflect"]
    number = next(n for n, case in enumerate(cases) if (case.size, case.width) == (4, 3))
    assert cases[number].width < cases[number].size
    broken = copy.deepcopy(parts)
    widths = ((0, 0), (0, 0), (3, 3))
    broken["pytorch"]["outputs"]["pad_reflect"][number] = np.pad(cases[number].x, widths, mode="symmetric")
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "pad_reflect", "pytorch", case="size 4, width 3")


@pytest.mark.parametrize("concept, framework, old, new, case", [
    ("top_k", "pytorch", 'conditions["top_k"] = {"pytorch": "not ties", "mxnet": "not ties"}',
     'conditions["top_k"] = {"mxnet": "not ties"}', "n 20, k 3, ties True"),
    ("share", "jax", 'conditions["share"] = {"jax": "aligned"}', 'conditions["share"] = {}', "aligned False"),
])
def test_a_condition_removed_stops_the_page_at_the_case_outside_it(tmp_path, parts, concept, framework, old,
                                                                    new, case):
    """Without its condition, the case where the translation differs is inside: the page
    stops naming it."""
    assert_the_page_stops_naming(page_with(PAGE, tmp_path, old, new), parts, PAGE_NAME, concept, framework, case=case)


def test_a_needless_condition_stops_the_page(tmp_path, parts):
    """JAX keeps the lower index of ties first: a condition that says it holds only without
    ties is contradicted by the grid, and the page stops."""
    path = page_with(PAGE, tmp_path, 'conditions["top_k"] = {"pytorch": "not ties", "mxnet": "not ties"}',
                     'conditions["top_k"] = {"pytorch": "not ties", "mxnet": "not ties", "jax": "not ties"}')
    assert_the_page_stops_naming(path, parts, PAGE_NAME, "top_k", "jax")


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(comparison):
    assert_every_concept_checked(comparison["checks"], PROMISED_CONCEPTS)


def test_the_unbiased_variance_row_says_what_the_installed_mxnet_computes_with_ddof():
    """Issue 51: the row said MXNet needs the factor n / (n - 1) by hand, true only of
    `mx.nd`: the installed MXNet's `mx.np.var` and `mx.np.std` take `ddof=1`. Measured in
    MXNet's own environment, and the row must say so."""
    import subprocess

    from frameworks_under_test import AVAILABLE
    from rosetta_book.environments import python_for

    if "mxnet" not in AVAILABLE:
        pytest.skip("MXNet is not selected")
    code = (
        "import numpy as np\n"
        "np.bool = bool\n"
        "import mxnet as mx\n"
        "x = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)\n"
        "for axis in (0, -1):\n"
        "    var = mx.np.var(mx.np.array(x), axis=axis, ddof=1).asnumpy()\n"
        "    std = mx.np.std(mx.np.array(x), axis=axis, ddof=1).asnumpy()\n"
        "    assert np.allclose(var, x.astype(np.float64).var(axis=axis, ddof=1), rtol=1e-5), axis\n"
        "    assert np.allclose(std, x.astype(np.float64).std(axis=axis, ddof=1), rtol=1e-5), axis\n"
        "print('unbiased')\n"
    )
    done = subprocess.run([python_for("mxnet"), "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "unbiased", done.stderr[-2000:]
    text = PAGE.read_text(encoding="utf-8")
    row = text[text.index("(tables-tensors-var-unbiased)="):]
    prose = " ".join(row[:row.index("```")].split())
    assert "MXNet's NumPy interface takes `ddof=1`" in prose, prose
    assert "TensorFlow, MXNet and Chainer need" not in prose, prose
