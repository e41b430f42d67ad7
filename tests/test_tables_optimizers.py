"""The optimizers translation table, checked through the code the page shows.

Each framework's part runs in its own process as in the book build, the
page's comparison cell checks every concept's parameters after a few steps
against a float64 re-implementation of the update rule, and the tests below
count what it checked, break one translation on purpose (RMSprop run with
PyTorch's default decay 0.99 where the row says 0.9) and see the check name
it, and make sure the compact table names only APIs that the tabs run.
"""

from pathlib import Path

import pytest

from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, parts_as_built, smoke_offline
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import ChapterError, load_chapter, load_comparisons
from rosetta_utils.frameworks import is_installed
from translation_table_checks import SHARE_FLOOR
from rosetta_utils.translation_checks import TranslationMismatch, check_concepts, numeric_shares

PAGE = Path(__file__).parents[1] / "book" / "tables" / "optimizers.md"
PAGE_NAME = "tables/optimizers.md"
PROMISED_CONCEPTS = 15


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
    assert all(check.verdict == "exact" for check in checks
               if check.concept not in approximate and check.error is not None)
    assert len(approximate) <= 4
    assert min(numeric_shares(checks).values()) >= SHARE_FLOOR, numeric_shares(checks)


def test_the_measured_differences_are_real_and_the_exact_frameworks_exact(page):
    """Epsilon outside the corrected root (PyTorch, Optax) against the paper's epsilon-hat
    (Keras, MXNet, Chainer); MXNet's schedules counting from 1; Chainer's Nesterov rule."""
    errors = {(c.concept, c.framework): c.error for c in page["checks"]}
    for framework in ("tensorflow", "mxnet", "chainer"):
        assert errors["adam_large_eps", framework] > 1e-2
    for framework in ("pytorch", "jax"):
        assert errors["adam_large_eps", framework] <= 1e-5
    assert errors["nesterov", "chainer"] > 1e-2
    assert errors["cosine", "mxnet"] > 1e-2 and errors["warmup_cosine", "mxnet"] > 1e-2
    for concept in ("nesterov", "cosine", "warmup_cosine"):
        others = [errors[concept, f] for f in ("pytorch", "tensorflow", "jax")]
        assert max(others) <= 1e-5


def test_a_wrong_convention_is_caught_naming_page_concept_and_framework(page, results):
    """RMSprop trained for real by the page's PyTorch train(), with torch's default
    alpha=0.99 instead of the row's 0.9 (Keras's rho, Optax's decay)."""
    import torch

    patch = pytest.MonkeyPatch()
    smoke_offline(patch)
    try:
        tab = load_chapter(PAGE, "pytorch", until="RMSprop")
    finally:
        patch.undo()
    default_decay = tab["train"](lambda params: torch.optim.RMSprop(params, lr=tab["LR"], eps=tab["EPS"]))
    wrong = {framework: dict(values) for framework, values in results.items()}
    outputs = dict(wrong["pytorch"]["outputs"])
    outputs["rmsprop"] = default_decay
    wrong["pytorch"]["outputs"] = outputs
    with pytest.raises(TranslationMismatch, match=r"tables/optimizers.md: concept 'rmsprop', framework pytorch"):
        check_concepts(PAGE_NAME, wrong, page["references"], tolerances=page["TOLERANCES"],
                       approximate=page["APPROXIMATE"])
    with pytest.raises(ChapterError, match=r"TranslationMismatch.*concept 'rmsprop', framework pytorch"):
        load_comparisons(PAGE, wrong)
