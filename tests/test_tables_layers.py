"""The translation table "Layers": every concept runs in all five frameworks, its output
and gradients checked against a float64 reference; a wrong translation stops the page."""

import copy
from pathlib import Path

import numpy as np
import pytest

from conftest import parts_as_built
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import load_comparisons
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming

PAGE = Path(__file__).parents[1] / "book" / "tables" / "layers.md"
PAGE_NAME = "tables/layers.md"
PROMISED_CONCEPTS = 24


@pytest.fixture(scope="module")
def parts():
    yield from parts_as_built(PAGE, FRAMEWORKS)


@pytest.fixture(scope="module")
def comparison(parts):
    return load_comparisons(PAGE, parts)




def test_the_traps_show_in_the_results(comparison):
    outputs = {framework: run.outputs for framework, run in comparison["runs"].items()}
    # one running-variance row per estimator, each framework in exactly one of them
    for framework in FRAMEWORKS:
        rows = [outputs[framework]["bn_running_var_unbiased"], outputs[framework]["bn_running_var_biased"]]
        assert sum(isinstance(row, str) for row in rows) == 1, framework
    assert isinstance(outputs["pytorch"]["bn_running_var_biased"], str)
    assert isinstance(outputs["tensorflow"]["bn_running_var_unbiased"], str)
    assert "avg_pool_excluded" in comparison["references"]
    references = comparison["references"]
    same, padded = references["conv_same_stride2"][0], references["conv_pad_stride2"][0]
    assert np.abs(same - padded).max() > 1.0  # asymmetric "same" is not padding=1


def test_a_wrong_momentum_convention_stops_the_page(parts, comparison):
    """Keras's momentum=0.9 copied into PyTorch's BatchNorm1d: the running mean then moves
    90 % of the way to the batch mean instead of 10 %, and the row claims exact."""
    import torch

    broken = copy.deepcopy(parts)
    bn = torch.nn.BatchNorm1d(3, momentum=0.9)
    bn(torch.from_numpy(comparison["x_bn"]))
    broken["pytorch"]["outputs"]["bn_running_mean"] = bn.running_mean.detach().numpy()
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "bn_running_mean", "pytorch")


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(comparison):
    assert_every_concept_checked(comparison["checks"], PROMISED_CONCEPTS)
