"""The translation table "Tensors and dtypes": every concept runs in all five frameworks
and is checked against its float64 reference; a wrong translation stops the page."""

import copy
from pathlib import Path

import pytest

from conftest import parts_as_built
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import load_comparisons
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming

PAGE = Path(__file__).parents[1] / "book" / "tables" / "tensors_and_dtypes.md"
PAGE_NAME = "tables/tensors_and_dtypes.md"
PROMISED_CONCEPTS = 23


@pytest.fixture(scope="module")
def parts():
    yield from parts_as_built(PAGE, FRAMEWORKS)


@pytest.fixture(scope="module")
def comparison(parts):
    return load_comparisons(PAGE, parts)




def test_the_traps_show_in_the_results(comparison):
    runs = comparison["runs"]
    assert isinstance(runs["tensorflow"].outputs["share"], str)
    assert runs["pytorch"].outputs["share"][0] == 100.0
    by_key = {(c.concept, c.framework): c for c in comparison["checks"]}
    assert by_key["default_dtypes", "pytorch"].error == 0
    assert by_key["default_dtypes", "jax"].error == 32  # int32, not int64
    assert not by_key["random", "pytorch"].exact


def test_a_wrong_variance_convention_stops_the_page(parts, comparison):
    """PyTorch's unbiased default, replaced by a biased variance as a careless translation
    of tf.math.reduce_variance would give: the row claims exact, so the page fails."""
    broken = copy.deepcopy(parts)
    x = comparison["x_np"]
    broken["pytorch"]["outputs"]["var_unbiased"] = x.var(axis=-1)  # ddof=0
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "var_unbiased", "pytorch")


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(comparison):
    assert_every_concept_checked(comparison["checks"], PROMISED_CONCEPTS)
