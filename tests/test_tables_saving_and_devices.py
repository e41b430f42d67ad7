"""The saving-and-devices translation table, checked through the code the page shows.

Each framework's part runs in its own process as in the book build; the
page's comparison cell checks every round trip against the saved weights
(tolerance zero) and the float64 reference. The tests count what it checked,
break the weight round trip on purpose (weights that went through float16, as
`model.half()` before saving would leave them, a single flipped bit, and a
resumed run that restored the weights but not the optimizer state) and
see the check name it, and make sure the compact table names only APIs and
file endings that the tabs use.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, parts_as_built, smoke_offline
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import ChapterError, load_chapter, load_comparisons
from rosetta_utils.frameworks import is_installed
from translation_table_checks import SHARE_FLOOR
from rosetta_utils.translation_checks import TranslationMismatch, check_concepts, numeric_shares

PAGE = Path(__file__).parents[1] / "book" / "tables" / "saving_and_devices.md"
PAGE_NAME = "tables/saving_and_devices.md"
PROMISED_CONCEPTS = 5
SUFFIXES = {"pytorch": ".pt", "tensorflow": ".weights.h5", "jax": ".msgpack", "mxnet": ".params",
            "chainer": ".npz"}


@pytest.fixture(scope="module")
def results():
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def page(results):
    return load_comparisons(PAGE, results)


def with_weights(results, framework, weights):
    wrong = {fw: dict(values) for fw, values in results.items()}
    wrong[framework]["outputs"] = dict(wrong[framework]["outputs"], weights_roundtrip=weights)
    return wrong


def test_every_concept_is_checked_in_every_framework(page):
    checks = page["checks"]
    concepts = {check.concept for check in checks}
    assert len(concepts) >= PROMISED_CONCEPTS
    for concept in concepts:
        assert {c.framework for c in checks if c.concept == concept} == set(AVAILABLE)
    assert all(check.verdict == "exact" for check in checks if check.error is not None)
    assert all(c.error == 0.0 for c in checks if c.concept == "weights_roundtrip")
    assert min(numeric_shares(checks).values()) >= SHARE_FLOOR, numeric_shares(checks)


def test_each_part_wrote_its_format_and_moved_to_the_cpu(results):
    for framework in AVAILABLE:
        names = [name for name, size in results[framework]["files"]]
        assert any(name.endswith(SUFFIXES[framework]) for name in names), (framework, names)
        assert all(size > 0 for _, size in results[framework]["files"])
        device = results[framework]["devices"]["device_move"]
        assert "cpu" in device.lower() or device == "@numpy", (framework, device)  # Chainer's CPU


def test_a_lossy_or_changed_weight_is_caught_naming_page_concept_and_framework(page, results):
    framework = AVAILABLE[0]
    weight, bias = results[framework]["outputs"]["weights_roundtrip"]
    through_half = (weight.astype(np.float16).astype(np.float32), bias)
    assert 0 < np.abs(through_half[0] - weight).max() < 1e-2
    with pytest.raises(TranslationMismatch, match=rf"{PAGE_NAME}: concept 'weights_roundtrip', framework {framework}"):
        check_concepts(PAGE_NAME, with_weights(results, framework, through_half), page["references"],
                       tolerances=page["TOLERANCES"])
    one_bit = weight.copy()
    one_bit[0, 0] = np.nextafter(one_bit[0, 0], np.float32(np.inf))
    with pytest.raises(ChapterError, match=rf"concept 'weights_roundtrip', framework {framework}"):
        load_comparisons(PAGE, with_weights(results, framework, (one_bit, bias)))



def test_resuming_without_the_optimizer_state_is_caught(page, results):
    """The page's PyTorch checkpoint restored into the weights only, with a fresh Adam: its
    third step is a first step again (bias correction and moments restart)."""
    if "pytorch" not in AVAILABLE:
        pytest.skip("PyTorch is not installed")
    import torch

    patch = pytest.MonkeyPatch()
    smoke_offline(patch)
    try:
        tab = load_chapter(PAGE, "pytorch", until="Devices")
    finally:
        patch.undo()
    resumed = tab["make_model"]()
    resumed.load_state_dict(tab["checkpoint"]["model"])
    tab["adam_step"](resumed, torch.optim.Adam(resumed.parameters(), lr=tab["LR"]))
    wrong = {fw: dict(values) for fw, values in results.items()}
    wrong["pytorch"]["outputs"] = dict(
        wrong["pytorch"]["outputs"],
        optimizer_state=(resumed.weight.detach().numpy(), resumed.bias.detach().numpy()))
    with pytest.raises(TranslationMismatch, match=rf"{PAGE_NAME}: concept 'optimizer_state', framework pytorch"):
        check_concepts(PAGE_NAME, wrong, page["references"], tolerances=page["TOLERANCES"])
