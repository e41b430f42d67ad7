"""The translation table "Layers of 2026": normalisation, activations and attention run in
all five frameworks, each concept's output and input gradients checked against a float64
reference on its grid of cases; a wrong translation stops the page, naming the concept,
the framework and, on a grid, the case."""

import copy
import inspect
from pathlib import Path

import numpy as np
import pytest

from page_checks import parts_as_built
from rosetta_book.chapter import load_comparisons
from rosetta_utils import FRAMEWORKS
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming, page_with

PAGE = Path(__file__).parents[1] / "book" / "tables" / "transformer_layers.md"
PAGE_NAME = "tables/transformer_layers.md"
PROMISED_CONCEPTS = 15
#: Each framework's documented default epsilon of its layer norm (the page's conditions).
DEFAULT_EPS = {"pytorch": 1e-5, "tensorflow": 1e-3, "jax": 1e-6, "mxnet": 1e-5, "chainer": 1e-6}


@pytest.fixture(scope="module")
def parts():
    yield from parts_as_built(PAGE, FRAMEWORKS)


@pytest.fixture(scope="module")
def comparison(parts):
    return load_comparisons(PAGE, parts)


def test_each_default_layer_norm_is_exact_at_its_own_default_epsilon_only(comparison):
    cases = comparison["grids"]["layer_norm_default_eps"]
    checks = {c.framework: c for c in comparison["checks"] if c.concept == "layer_norm_default_eps"}
    for framework, eps in DEFAULT_EPS.items():
        check = checks[framework]
        assert [case.eps for case in cases if case.holds(check.condition)] == [eps], framework
        assert check.exact and check.error <= check.tolerance and check.outside, check.verdict


def test_the_traps_show_in_the_results(comparison):
    references = comparison["references"]
    # the two GELUs differ by far more than float32's rounding
    assert np.abs(references["gelu_exact"][0] - references["gelu_tanh"][0]).max() > 1e-4
    # the bottom-right causal mask is the top-left one only where the lengths are equal
    for case in comparison["grids"]["attention_causal_lower_right"]:
        top_left = np.tril(np.ones((case.q_len, case.k_len), bool))
        assert np.array_equal(case.keep, top_left) == (case.q_len == case.k_len), case


def test_the_defaults_the_prose_names_are_the_installed_ones():
    """The GELU row's trap: the same name, another form by default."""
    import jax
    import keras
    import torch

    assert torch.nn.GELU().approximate == "none"
    assert inspect.signature(keras.activations.gelu).parameters["approximate"].default is False
    assert inspect.signature(keras.ops.gelu).parameters["approximate"].default is True
    assert inspect.signature(jax.nn.gelu).parameters["approximate"].default is True


def test_weights_moved_without_their_transpose_stop_the_page(parts, comparison):
    """PyTorch's (out, in) projection blocks reshaped into Keras's (E, heads, head_dim)
    kernels without the transpose: the multi-head row claims exact and differs."""
    import keras

    E, w_in, b_in, w_out, b_out = (comparison[name] for name in ("E", "w_in", "b_in", "w_out", "b_out"))
    broken = copy.deepcopy(parts)
    results = broken["tensorflow"]["outputs"]["multi_head_attention"]
    for number, case in enumerate(comparison["grids"]["multi_head_attention"]):
        h, d = case.heads, E // case.heads
        mha = keras.layers.MultiHeadAttention(num_heads=h, key_dim=d)
        mha.build(case.query.shape, case.value.shape, case.key.shape)
        weights = []
        for w, b in zip(np.split(w_in, 3), np.split(b_in, 3)):
            weights += [w.reshape(E, h, d), b.reshape(h, d)]  # no w.T
        mha.set_weights([*weights, w_out.reshape(h, d, E), b_out])
        mask = np.broadcast_to(case.keep[:, None, :], (case.batch, case.q_len, case.k_len))
        y = mha(case.query, case.value, key=case.key, attention_mask=mask)
        results[number] = (np.asarray(y), *results[number][1:])
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "multi_head_attention", "tensorflow")


def test_a_wrong_result_on_one_case_inside_a_condition_stops_the_page_naming_it(parts, comparison):
    """Keras's default layer norm is exact where eps == 1e-3; on that one case it is given
    PyTorch's default layer's result (eps 1e-5): the page stops naming the case."""
    broken = copy.deepcopy(parts)
    cases = comparison["grids"]["layer_norm_default_eps"]
    inside = next(number for number, case in enumerate(cases) if case.eps == 1e-3)
    pytorch = parts["pytorch"]["outputs"]["layer_norm_default_eps"][inside]
    broken["tensorflow"]["outputs"]["layer_norm_default_eps"][inside] = pytorch
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "layer_norm_default_eps", "tensorflow",
                                 case="eps 0.001")


def test_without_its_condition_the_default_epsilon_row_stops_the_page(parts, tmp_path):
    """Keras's condition removed: its cases at PyTorch's and Flax's defaults, where its
    default layer differs, are now claimed exact."""
    condition = '    "tensorflow": "eps == 1e-3",\n'
    page = page_with(PAGE, tmp_path, condition, "")
    assert_the_page_stops_naming(page, parts, PAGE_NAME, "layer_norm_default_eps", "tensorflow",
                                 case="eps 1e-06")


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(comparison):
    assert_every_concept_checked(comparison["checks"], PROMISED_CONCEPTS)


def test_pytorchs_layer_and_function_read_a_boolean_mask_oppositely(comparison):
    """The layer-mask row's trap, from the checks: the same boolean array means "ignore"
    to PyTorch's layer and "attend" to Keras's and Flax's layers, and PyTorch's function
    reads its key-padding mask as "attend" on every case."""
    checks = {(c.concept, c.framework): c for c in comparison["checks"]}
    for framework, reading in (("pytorch", "ignore"), ("tensorflow", "attend"), ("jax", "attend")):
        check = checks["attention_layer_mask", framework]
        assert check.condition == f"true_means == '{reading}'", check.verdict
        assert check.exact and check.error <= check.tolerance and check.outside, check.verdict
    function = checks["attention_padding", "pytorch"]
    assert function.condition is None and function.error <= function.tolerance, function.verdict
    layer_vs_keras = {p.other: p for p in checks["attention_layer_mask", "pytorch"].against}["tensorflow"]
    assert layer_vs_keras.differs == layer_vs_keras.cases == 4, layer_vs_keras
