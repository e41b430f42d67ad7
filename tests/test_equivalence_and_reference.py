"""The comparison helpers every page uses, and the reference's published figures."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from rosetta_proof.equivalence import equivalence_table, failures, verdict
from rosetta_proof.reference import CIFAR10, PUBLISHED, plot_against_reference
from rosetta_utils.differences import max_abs_difference
from rosetta_utils.timing import steady_epoch_seconds


def test_max_abs_difference_of_arrays_and_of_named_arrays():
    assert max_abs_difference(np.zeros(3), np.array([0, -2.0, 1])) == 2.0
    assert max_abs_difference({"a": np.zeros(1), "b": np.ones(2)}, {"a": np.ones(1) * 3, "b": np.ones(2)}) == 3.0
    with pytest.raises(ValueError, match="differ in names"):
        max_abs_difference({"a": np.zeros(1)}, {"b": np.zeros(1)})
    with pytest.raises(ValueError, match="shapes differ"):
        max_abs_difference({"a": np.zeros(1)}, {"a": np.zeros(2)})
    with pytest.raises(TypeError):
        max_abs_difference({"a": np.zeros(1)}, np.zeros(1))


def test_a_verdict_fails_a_difference_beyond_the_tolerance_and_a_nan():
    assert verdict(1e-6, 1e-5) == "agrees"
    assert verdict(2e-5, 1e-5) == "DIFFERS (2e-05 > 1e-05)"
    assert verdict(float("nan"), 1e-5).startswith("DIFFERS")


def test_the_equivalence_table_names_the_column_that_differs():
    runs = {"pytorch": np.zeros(2), "jax": np.zeros(2), "mxnet": np.array([0, 0.5])}
    headers, rows = equivalence_table(runs, {"outputs": max_abs_difference}, {"outputs": 1e-4})
    assert headers == ["framework", "outputs", "verdict"]
    assert rows[2] == ["mxnet", 0.5, "outputs: DIFFERS (0.5 > 0.0001)"]
    assert failures(rows) == ["mxnet"]
    with pytest.raises(ValueError, match="no pytorch run"):
        equivalence_table({"jax": np.zeros(1)}, {"outputs": max_abs_difference}, {})


def test_steady_epoch_time_skips_the_compiling_first_epoch():
    assert steady_epoch_seconds([9.0, 2.0, 3.0]) == 2.0
    assert steady_epoch_seconds([4.0]) == 4.0
    with pytest.raises(ValueError, match="no epoch"):
        steady_epoch_seconds([])


def test_the_reference_figures_are_theirs_as_published():
    assert CIFAR10.seconds["pytorch"] == (169, 51) and CIFAR10.items == 499_840
    assert CIFAR10.items_per_second("jax") == (None, None)
    assert PUBLISHED["resnet50"].seconds["mxnet"] == (None, 1.7)


def test_the_chart_sets_ours_beside_their_two_gpus():
    figure = plot_against_reference("cifar10", {"pytorch": 300.0, "jax": 200.0}, "this run", "images/s", "title")
    (axes,) = figure.axes
    heights = [round(bar.get_height(), 1) for bar in axes.patches]
    assert heights == [300.0, 200.0, round(499_840 / 169, 1), 0.0, round(499_840 / 51, 1), 0.0]
    assert [text.get_text() for text in axes.get_legend().get_texts()] == [
        "this run", "reference, K80 (theirs, 2018)", "reference, P100 (theirs, 2018)"]


def test_a_nan_anywhere_in_a_mapping_is_a_difference():
    from rosetta_proof.equivalence import verdict
    from rosetta_utils.differences import max_abs_difference

    same = {"value": np.ones(2), "gradient": np.ones(2)}
    nan_gradient = {"value": np.ones(2), "gradient": np.array([1.0, np.nan])}
    assert np.isnan(max_abs_difference(nan_gradient, same))
    assert verdict(max_abs_difference(nan_gradient, same), 1e-5).startswith("DIFFERS")


def test_each_tensor_is_held_to_its_own_scale():
    """A tensor whose values are a thousandth of another's is judged against its own: 3%
    off there fails, though it is far below the large tensor's bound."""
    from rosetta_proof.equivalence import tensor_ratios, worst_tensor

    reference = {"large": np.full(4, 1.0), "small": np.full(2, 1e-3)}
    close = {"large": reference["large"] * (1 + 1e-4), "small": reference["small"] * (1 + 1e-4)}
    ratios = tensor_ratios(close, reference, relative=1e-3)
    assert worst_tensor(ratios)[1] == pytest.approx(0.1)
    planted = dict(close, small=reference["small"] * 1.03)
    assert worst_tensor(tensor_ratios(planted, reference, relative=1e-3)) == ("small", pytest.approx(30))


def test_a_floor_covers_rounding_where_the_scale_says_nothing():
    from rosetta_proof.equivalence import bound_ratios

    ratios = bound_ratios({"still": 1e-9, "moved": 2e-9}, {"still": 0.0, "moved": 1e-3}, relative=1e-3,
                          floors={"still": 2e-9, "moved": 0.0})
    assert ratios == {"still": pytest.approx(0.5), "moved": pytest.approx(2e-3)}
    assert bound_ratios({"w": 1e-12}, {"w": 0.0}, relative=1e-3) == {"w": float("inf")}
    assert bound_ratios({"w": 0.0}, {"w": 0.0}, relative=1e-3) == {"w": 0.0}
    with pytest.raises(ValueError, match="different tensors"):
        bound_ratios({"a": 0.0}, {"b": 1.0}, relative=1e-3)


def test_the_same_nan_or_infinity_at_the_same_place_is_agreement():
    """Both results NaN (or the same infinity) at one place agree there; a NaN against a
    number is still NaN, an infinity against a number infinite."""
    assert max_abs_difference(np.array([np.nan, 1.0, np.inf]), np.array([np.nan, 1.5, np.inf])) == 0.5
    assert np.isnan(max_abs_difference(np.array([np.nan, 1.0]), np.array([2.0, 1.0])))
    assert max_abs_difference(np.array([-np.inf, 1.0]), np.array([np.inf, 1.0])) == np.inf
