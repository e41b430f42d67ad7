"""The translation table "Tensors and dtypes": every concept runs in all five frameworks
and is checked against its float64 reference; a wrong translation stops the page."""

import copy
import re
from pathlib import Path

import numpy as np
import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_utils.chapter import ChapterError, load_comparisons, run_framework_parts
from rosetta_utils.page import Page, cell_role
from rosetta_utils.translation_checks import TranslationMismatch, numeric_share

PAGE = Path(__file__).parents[1] / "book" / "tables" / "tensors_and_dtypes.md"
PAGE_NAME = "tables/tensors_and_dtypes.md"
PROMISED_CONCEPTS = 23


@pytest.fixture(scope="module")
def parts():
    from conftest import smoke_offline

    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        yield run_framework_parts(PAGE, FRAMEWORKS)


@pytest.fixture(scope="module")
def comparison(parts):
    return load_comparisons(PAGE, parts)


def compact_table(path):
    """{framework: [API names]} from the Markdown table the page opens with (the first)."""
    text = path.read_text().splitlines()
    first = next(index for index, line in enumerate(text) if line.startswith("|"))
    lines = []
    for line in text[first:]:
        if not line.startswith("|"):
            break
        lines.append(line)
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["concept", "PyTorch", "TensorFlow", "JAX", "MXNet", "Chainer"]
    names = {framework: [] for framework in FRAMEWORKS}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for framework, cell in zip(FRAMEWORKS, cells[1:]):
            names[framework] += re.findall(r"`([^`]+)`", cell)
    return names


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(comparison):
    checks, references = comparison["checks"], comparison["references"]
    assert len(references) >= PROMISED_CONCEPTS
    for concept in references:
        assert sorted(c.framework for c in checks if c.concept == concept) == sorted(FRAMEWORKS)
    assert numeric_share(checks) >= 0.95
    exact = [c for c in checks if c.exact and c.error is not None]
    assert exact and all(c.error <= c.tolerance for c in exact)


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


def test_every_name_in_the_compact_table_runs_in_its_frameworks_cells():
    page = Page.read(PAGE)
    missing = []
    for framework, names in compact_table(PAGE).items():
        code = "\n".join(cell.source for cell in page.notebook.cells
                         if cell.cell_type == "code" and cell_role(cell) == framework)
        missing += [f"{framework}: {name}" for name in names if name not in code]
    assert not missing, "table names no cell of the page runs:\n" + "\n".join(missing)


def test_the_table_check_catches_a_name_the_page_never_runs(tmp_path):
    text = PAGE.read_text().replace("`torch.cumsum`", "`torch.cummax`", 1)
    (tmp_path / "page.md").write_text(text)
    names = compact_table(tmp_path / "page.md")
    page = Page.read(tmp_path / "page.md")
    code = "\n".join(cell.source for cell in page.notebook.cells
                     if cell.cell_type == "code" and cell_role(cell) == "pytorch")
    assert "torch.cummax" in names["pytorch"] and "torch.cummax" not in code
    assert np.all([name in code for name in names["pytorch"] if name != "torch.cummax"])
