"""The translation table "Layers": every concept runs in all five frameworks, its output
and gradients checked against a float64 reference; a wrong translation stops the page."""

import copy
import re
from pathlib import Path

import numpy as np
import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_utils.chapter import ChapterError, load_comparisons, run_framework_parts
from rosetta_utils.page import Page, cell_role
from rosetta_utils.translation_checks import TranslationMismatch, numeric_share

PAGE = Path(__file__).parents[1] / "book" / "tables" / "layers.md"
PAGE_NAME = "tables/layers.md"
PROMISED_CONCEPTS = 24


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
    with pytest.raises(ChapterError) as failure:
        load_comparisons(PAGE, broken)
    assert isinstance(failure.value.__cause__, TranslationMismatch)
    message = str(failure.value.__cause__)
    assert PAGE_NAME in message and "'bn_running_mean'" in message and "framework pytorch" in message


def test_every_name_in_the_compact_table_runs_in_its_frameworks_cells():
    page = Page.read(PAGE)
    missing = []
    for framework, names in compact_table(PAGE).items():
        code = "\n".join(cell.source for cell in page.notebook.cells
                         if cell.cell_type == "code" and cell_role(cell) == framework)
        missing += [f"{framework}: {name}" for name in names if name not in code]
    assert not missing, "table names no cell of the page runs:\n" + "\n".join(missing)


def test_the_table_check_catches_a_name_the_page_never_runs(tmp_path):
    text = PAGE.read_text().replace("`nn.Conv1d`", "`nn.Conv3d`", 1)
    (tmp_path / "page.md").write_text(text)
    names = compact_table(tmp_path / "page.md")
    page = Page.read(tmp_path / "page.md")
    code = "\n".join(cell.source for cell in page.notebook.cells
                     if cell.cell_type == "code" and cell_role(cell) == "pytorch")
    assert "nn.Conv3d" in names["pytorch"] and "nn.Conv3d" not in code
    assert np.all([name in code for name in names["pytorch"] if name != "nn.Conv3d"])
