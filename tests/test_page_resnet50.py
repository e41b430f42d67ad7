"""The ResNet-50 page's claims, checked through the code it shows (the chapter loader).

Each framework's page runs up to its Timing section (Setup, Data, Model,
Training, Evaluation, Equivalence) in the smoke profile, offline.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import run_page_offline
from rosetta_utils import FRAMEWORKS
from rosetta_utils.chapter import load_chapter
from rosetta_utils.frameworks import is_installed

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "resnet50_features.md"
INSTALLED = [name for name in FRAMEWORKS if is_installed(name)]
TORCHVISION_PARAMETERS = 23_508_032  # ResNet-50 without its classifier


@pytest.fixture(scope="module")
def runs():
    return run_page_offline(PAGE, INSTALLED, (
        "variant_facts", "parameter_counts", "conv_bias_counts", "equivalence", "inference_checks",
        "relative_difference", "shipped_features",
    ))


@pytest.mark.parametrize("framework", INSTALLED)
def test_every_framework_builds_v1_with_torchvisions_parameters(runs, framework):
    run = runs[framework]
    assert run["variant_facts"][framework]["stride in"] == "1x1"
    assert run["parameter_counts"][framework] - run["conv_bias_counts"][framework] == TORCHVISION_PARAMETERS


def test_the_shipped_models_differ_where_the_page_says():
    """Read from the objects: Keras's and Chainer's epsilons are not PyTorch's 1e-5."""
    facts = {}
    for framework in ("tensorflow", "chainer"):
        if framework in INSTALLED:
            facts[framework] = load_chapter(PAGE, framework, until="The same network in all five")["variant_facts"][framework]
    if "tensorflow" in facts:
        assert facts["tensorflow"]["batch-norm epsilon"] == pytest.approx(1.001e-5)
    if "chainer" in facts:
        assert facts["chainer"]["batch-norm epsilon"] == pytest.approx(2e-5)
        assert "pad" not in facts["chainer"]["stem padding"].split("max-pool")[1]


@pytest.mark.parametrize("framework", INSTALLED)
def test_transplanted_weights_give_pytorchs_features(runs, framework):
    if "pytorch" not in runs:
        pytest.skip("PyTorch is the yardstick")
    ours, reference = runs[framework]["equivalence"][framework], runs["pytorch"]["equivalence"]["pytorch"]
    assert ours.shape == (4, 2048)
    assert runs[framework]["relative_difference"](ours, reference) <= 1e-3


def test_chainers_own_max_pool_computes_a_different_function(runs):
    if "chainer" not in runs:
        pytest.skip("needs Chainer")
    adapted = runs["chainer"]["equivalence"]["chainer"]
    assert runs["chainer"]["relative_difference"](runs["chainer"]["shipped_features"], adapted) > 1e-2


@pytest.mark.parametrize("framework", INSTALLED)
def test_inference_runs_in_test_mode_without_a_graph(runs, framework):
    checks = runs[framework]["inference_checks"][framework]
    assert checks["alone vs in a batch"] <= 1e-4, "batch norm must use its running statistics"
    assert checks["graph kept"] is False
