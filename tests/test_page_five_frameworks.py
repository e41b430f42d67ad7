"""The first page's claim, checked through the code the page shows: all five agree."""

from pathlib import Path

import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_utils.chapter import load_chapter
from rosetta_utils.frameworks import is_installed

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "five_frameworks_one_computation.md"


@pytest.mark.parametrize("framework", [name for name in FRAMEWORKS if is_installed(name)])
def test_dense_layer_matches_the_float64_reference(framework):
    page = load_chapter(PAGE, framework)
    assert set(page["outputs"]) == {framework}, "only this framework's tab may have run"
    differences = page["differences"][framework]
    assert set(differences) == {"product", "y", "grad_weight", "grad_bias", "grad_input"}
    for quantity, difference in differences.items():
        assert difference <= 1e-4, f"{framework} {quantity} differs by {difference}"
    assert page["timings"][framework].median > 0


def test_the_reference_catches_a_wrong_gradient():
    """The comparison is not vacuous: a transposed weight gradient is far off."""
    page = load_chapter(PAGE, "pytorch")
    wrong = dict(page["outputs"]["pytorch"], grad_input=page["outputs"]["pytorch"]["grad_input"][::-1])
    assert page["max_differences"](wrong)["grad_input"] > 1e-2
