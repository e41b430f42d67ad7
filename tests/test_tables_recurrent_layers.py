"""The translation table "Recurrent layers": every GRU and LSTM concept runs in all five
frameworks against a float64 numpy reference; a wrong gate order stops the page."""

import copy
from pathlib import Path

import numpy as np
import pytest

from conftest import parts_as_built
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import load_comparisons
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming

PAGE = Path(__file__).parents[1] / "book" / "tables" / "recurrent_layers.md"
PAGE_NAME = "tables/recurrent_layers.md"
PROMISED_CONCEPTS = 10


@pytest.fixture(scope="module")
def parts():
    yield from parts_as_built(PAGE, FRAMEWORKS)


@pytest.fixture(scope="module")
def comparison(parts):
    return load_comparisons(PAGE, parts)




def test_the_traps_show_in_the_results(comparison):
    outputs = {framework: run.outputs for framework, run in comparison["runs"].items()}
    # Flax's GRU cell cannot hold b_hn; only Keras and Chainer compute the RB family
    assert isinstance(outputs["jax"]["gru_sequence"], str)
    assert not isinstance(outputs["jax"]["gru_plain"], str)
    assert [fw for fw in FRAMEWORKS if not isinstance(outputs[fw]["gru_reset_before"], str)] == [
        "tensorflow", "chainer"]
    by_key = {(c.concept, c.framework): c for c in comparison["checks"]}
    assert by_key["lstm_forget_bias", "tensorflow"].error == 0  # Keras starts at 1
    assert by_key["lstm_forget_bias", "jax"].error == 1  # Flax at 0


def test_a_wrong_gate_order_stops_the_page(parts, comparison):
    """An LSTM loaded as Chainer's docstring describes it (output gate before the cell
    input): the function a framework then computes, and the row claims exact."""
    broken = copy.deepcopy(parts)
    ns = comparison
    swapped = {name: np.concatenate([np.split(array, 4)[gate] for gate in (0, 1, 3, 2)])
               for name, array in ns["W_lstm"].items()}
    y, (h, c) = ns["sequence"](ns["lstm_step"], ns["x_np"], (ns["zeros"], ns["zeros"]), swapped)
    broken["chainer"]["outputs"]["lstm_sequence"] = (y, h, c)
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "lstm_sequence", "chainer")


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(comparison):
    assert_every_concept_checked(comparison["checks"], PROMISED_CONCEPTS)
