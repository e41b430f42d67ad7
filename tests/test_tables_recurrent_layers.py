"""The translation table "Recurrent layers": every GRU and LSTM concept runs in all five
frameworks against a float64 numpy reference; a wrong gate order stops the page."""

import copy
import re
from pathlib import Path

import numpy as np
import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_utils.chapter import ChapterError, load_comparisons, run_framework_parts
from rosetta_utils.page import Page, cell_role
from rosetta_utils.translation_checks import TranslationMismatch, numeric_share

PAGE = Path(__file__).parents[1] / "book" / "tables" / "recurrent_layers.md"
PAGE_NAME = "tables/recurrent_layers.md"
PROMISED_CONCEPTS = 10


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
    # Flax's GRU cell cannot hold b_hn; only Keras and Chainer compute the RB family
    assert isinstance(outputs["jax"]["gru_sequence"], str)
    assert not isinstance(outputs["jax"]["gru_plain"], str)
    assert [fw for fw in FRAMEWORKS if not isinstance(outputs[fw]["gru_reset_before"], str)] == [
        "tensorflow", "chainer"]
    by_key = {(c.concept, c.framework): c for c in comparison["checks"]}
    assert by_key["lstm_forget_bias", "tensorflow"].error == 0  # Keras starts at 1
    assert by_key["lstm_forget_bias", "jax"].error == 1  # Flax at 0


def test_a_wrong_gate_order_stops_the_page(parts, comparison):
    """An LSTM loaded as Chainer's docstring describes it (output gate before the cell
    input): the function a framework then computes, and the row claims exact."""
    broken = copy.deepcopy(parts)
    ns = comparison
    swapped = {name: np.concatenate([np.split(array, 4)[gate] for gate in (0, 1, 3, 2)])
               for name, array in ns["W_lstm"].items()}
    y, (h, c) = ns["sequence"](ns["lstm_step"], ns["x_np"], (ns["zeros"], ns["zeros"]), swapped)
    broken["chainer"]["outputs"]["lstm_sequence"] = (y, h, c)
    with pytest.raises(ChapterError) as failure:
        load_comparisons(PAGE, broken)
    assert isinstance(failure.value.__cause__, TranslationMismatch)
    message = str(failure.value.__cause__)
    assert PAGE_NAME in message and "'lstm_sequence'" in message and "framework chainer" in message


def test_every_name_in_the_compact_table_runs_in_its_frameworks_cells():
    page = Page.read(PAGE)
    missing = []
    for framework, names in compact_table(PAGE).items():
        code = "\n".join(cell.source for cell in page.notebook.cells
                         if cell.cell_type == "code" and cell_role(cell) == framework)
        missing += [f"{framework}: {name}" for name in names if name not in code]
    assert not missing, "table names no cell of the page runs:\n" + "\n".join(missing)


def test_the_table_check_catches_a_name_the_page_never_runs(tmp_path):
    text = PAGE.read_text().replace("`nn.GRUCell`", "`nn.RNNCell`", 1)
    (tmp_path / "page.md").write_text(text)
    names = compact_table(tmp_path / "page.md")
    page = Page.read(tmp_path / "page.md")
    code = "\n".join(cell.source for cell in page.notebook.cells
                     if cell.cell_type == "code" and cell_role(cell) == "pytorch")
    assert "nn.RNNCell" in names["pytorch"] and "nn.RNNCell" not in code
    assert np.all([name in code for name in names["pytorch"] if name != "nn.RNNCell"])
