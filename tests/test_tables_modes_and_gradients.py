"""The modes-and-gradients translation table, checked through the code the page shows.

Each framework's part runs in its own process as in the book build; the
page's comparison cell checks every concept against its float64 reference.
The tests count what it checked, see that the two measured-difference rows
measure something real, break one translation on purpose (a batch-norm
running mean computed for real with PyTorch's momentum 0.9, the decay
convention of the other frameworks read as PyTorch's) and see the check name
it, and make sure the compact table names only APIs that the tabs run.
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

PAGE = Path(__file__).parents[1] / "book" / "tables" / "modes_and_gradients.md"
PAGE_NAME = "tables/modes_and_gradients.md"
PROMISED_CONCEPTS = 10


@pytest.fixture(scope="module")
def results():
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def page(results):
    return load_comparisons(PAGE, results)


def test_every_concept_is_checked_in_every_framework(page):
    checks = page["checks"]
    concepts = {check.concept for check in checks}
    assert len(concepts) >= PROMISED_CONCEPTS
    for concept in concepts:
        assert {c.framework for c in checks if c.concept == concept} == set(AVAILABLE)
    approximate = set(page["APPROXIMATE"])
    assert approximate == {"batchnorm_running_var", "bfloat16_matmul"}
    assert all(check.verdict == "exact" for check in checks
               if check.concept not in approximate and check.error is not None)
    assert min(numeric_shares(checks).values()) >= SHARE_FLOOR, numeric_shares(checks)


def test_the_measured_differences_are_real(page):
    errors = {(c.concept, c.framework): c.error for c in page["checks"]}
    for framework in ("pytorch", "chainer"):
        assert errors["batchnorm_running_var", framework] <= 1e-5  # unbiased, like the reference
    for framework in ("tensorflow", "jax", "mxnet"):
        assert errors["batchnorm_running_var", framework] > 1e-3  # biased
    for framework in ("pytorch", "tensorflow", "jax"):
        assert 1e-4 < errors["bfloat16_matmul", framework] < 0.5
    assert errors["bfloat16_matmul", "mxnet"] is None and errors["bfloat16_matmul", "chainer"] is None


def test_a_wrong_momentum_convention_is_caught_naming_page_concept_and_framework(page, results):
    """PyTorch's batch norm run for real with momentum=0.9 (the others' decay) moves the
    running mean nine times as far as the row's 0.1 new-batch weight."""
    if "pytorch" not in AVAILABLE:
        pytest.skip("PyTorch is not installed")
    import torch

    patch = pytest.MonkeyPatch()
    smoke_offline(patch)
    try:
        tab = load_chapter(PAGE, "pytorch", until="Training and inference modes")
    finally:
        patch.undo()
    model = torch.nn.BatchNorm1d(3, eps=tab["EPS"], momentum=0.9)
    y = model(torch.from_numpy(tab["x_np"])).detach().numpy()
    wrong = {framework: dict(values) for framework, values in results.items()}
    outputs = dict(wrong["pytorch"]["outputs"])
    outputs["batchnorm_train"] = (y, model.running_mean.numpy())
    wrong["pytorch"]["outputs"] = outputs
    assert np.allclose(y, results["pytorch"]["outputs"]["batchnorm_train"][0])  # only the mean is wrong
    with pytest.raises(TranslationMismatch, match=rf"{PAGE_NAME}: concept 'batchnorm_train', framework pytorch"):
        check_concepts(PAGE_NAME, wrong, page["references"], approximate=page["APPROXIMATE"])
    with pytest.raises(ChapterError, match=r"TranslationMismatch.*concept 'batchnorm_train', framework pytorch"):
        load_comparisons(PAGE, wrong)
