"""The translation table "Tensors and dtypes": every concept runs in all five frameworks
and is checked against its float64 reference; a wrong translation stops the page."""

import copy
from pathlib import Path

import pytest

from conftest import parts_as_built
from rosetta_utils import FRAMEWORKS
from rosetta_utils.chapter import ChapterError, load_comparisons
from rosetta_utils.translation_checks import TranslationMismatch
from translation_table_checks import assert_every_concept_checked, compact_table, names_never_run

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
    with pytest.raises(ChapterError) as failure:
        load_comparisons(PAGE, broken)
    assert isinstance(failure.value.__cause__, TranslationMismatch)
    message = str(failure.value.__cause__)
    assert PAGE_NAME in message and "'var_unbiased'" in message and "framework pytorch" in message


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(comparison):
    assert_every_concept_checked(comparison["checks"], PROMISED_CONCEPTS)


def test_every_name_in_the_compact_table_runs_in_its_frameworks_cells():
    assert not names_never_run(PAGE), "table names no cell of the page runs"


def test_the_table_check_catches_a_name_the_page_never_runs(tmp_path):
    name = compact_table(PAGE)["pytorch"][0]
    (tmp_path / "page.md").write_text(PAGE.read_text().replace(f"`{name}`", "`torch.never_run`", 1))
    assert names_never_run(tmp_path / "page.md") == ["pytorch: torch.never_run"]
