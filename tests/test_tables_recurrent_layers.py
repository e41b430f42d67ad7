"""The translation table "Recurrent layers": every GRU and LSTM concept runs in all five
frameworks against a float64 numpy reference, on grids of batch sizes, steps and hidden
sizes; a wrong gate order, or Chainer's L.LSTM weights copied in blocks instead of
interleaved, stops the page naming the case."""

import copy
import re
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import TEST_ENVIRONMENT
from page_checks import parts_as_built
from rosetta_book.chapter import load_comparisons
from rosetta_proof.translation_checks import FLOAT32_TOLERANCE, check_concepts
from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import is_installed
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming

PAGE = Path(__file__).parents[1] / "book" / "tables" / "recurrent_layers.md"
PAGE_NAME = "tables/recurrent_layers.md"
PROMISED_CONCEPTS = 12


@pytest.fixture(scope="module")
def parts():
    yield from parts_as_built(PAGE, FRAMEWORKS)


@pytest.fixture(scope="module")
def comparison(parts):
    return load_comparisons(PAGE, parts)


def blocks_as_f_lstm_reads_them(weights):
    """The PyTorch-layout weights (gates i, f, g, o) that Chainer's F.lstm computes with when
    an L.LSTM's rows were reordered to a, i, f, o but copied in blocks: F.lstm reads row
    4j + k as gate k of unit j (chainer/functions/rnn/lstm.py, _extract_gates)."""
    def read(array):
        i, f, g, o = np.split(array, 4)
        rows = np.concatenate([g, i, f, o])  # what the porter copied
        return np.concatenate([rows[k::4] for k in (1, 2, 0, 3)])  # F.lstm's i, f, a, o

    bias = read(weights["bias_ih"] + weights["bias_hh"])  # L.LSTM has one bias, upward.b
    return {"weight_ih": read(weights["weight_ih"]), "weight_hh": read(weights["weight_hh"]),
            "bias_ih": bias, "bias_hh": np.zeros_like(bias)}


def chainer_lstm_cell_from_blocks(ns):
    """Per case of the lstm_cell grid, what Chainer computes from block-copied weights."""
    results = []
    for case in ns["grids"]["lstm_cell"]:
        y, (h, c) = ns["sequence"](ns["lstm_step"], case.x, (case.h0, case.c0),
                                   blocks_as_f_lstm_reads_them(case.w))
        results.append((y, h, c))
    return results


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(comparison):
    assert_every_concept_checked(comparison["checks"], PROMISED_CONCEPTS)
    assert len(comparison["grids"]) == PROMISED_CONCEPTS - 1  # all but "GRU without b_hn"
    compact = comparison["compact"].data
    assert compact.count("\n") == PROMISED_CONCEPTS + 1 and "none:" not in compact


def test_the_traps_show_in_the_results_and_the_compact_table(comparison):
    outputs = {framework: run.outputs for framework, run in comparison["runs"].items()}
    # Flax's GRU cell holds b_hn once its dense_h has a bias; the RB GRU is written out
    # from dense layers where a framework has only LBR layers: every framework computes all
    for framework in FRAMEWORKS:
        assert not any(isinstance(value, str) for value in outputs[framework].values()), framework
    # the last output step is the backward direction's final state only for one step
    for case in comparison["grids"]["lstm_final_state"]:
        forward, (y_backward, (h_backward, _)) = comparison["both_directions"](case)
        gap = np.abs(y_backward[:, -1] - h_backward).max()
        assert (gap == 0) == (case.steps == 1), (str(case), gap)
    # the compact table shows the calls that carry each layout
    compact = comparison["compact"].data
    for call in ("np.stack([g, i, f, o], axis=1)", "mx.init.LSTMBias(forget_bias=1.0)",
                 "unit_forget_bias=True", "h_n.view(1, 2, len(x), 4)",
                 "nnx.Linear(4, 12, use_bias=True, rngs=nnx.Rngs(1))", "self.hn(r * h)"):
        assert f"`{call}`" in compact, call
    assert "hidden 1, 4" in compact and "batch 1, 3 · steps 1, 4" in compact


def test_a_wrong_gate_order_stops_the_page(parts, comparison):
    """An LSTM loaded as Chainer's docstring describes it (output gate before the cell
    input): the function a framework then computes, and the row claims exact."""
    broken = copy.deepcopy(parts)
    ns = comparison
    swapped = {name: np.concatenate([np.split(array, 4)[gate] for gate in (0, 1, 3, 2)])
               for name, array in ns["W_lstm"].items()}
    results = []
    for case in ns["grids"]["lstm_sequence"]:
        zero = ns["zero"](case)
        y, (h, c) = ns["sequence"](ns["lstm_step"], case.x, (zero, zero), swapped)
        results.append((y, h, c))
    broken["chainer"]["outputs"]["lstm_sequence"] = results
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "lstm_sequence", "chainer")


def test_one_broken_case_stops_the_page_naming_it(parts, comparison):
    """Chainer's L.LSTM loaded in blocks on one case of the grid only (4 hidden units): the
    row holds on every case (it states no condition), so that case stops the page."""
    broken = copy.deepcopy(parts)
    cases = comparison["grids"]["lstm_cell"]
    wrong = chainer_lstm_cell_from_blocks(comparison)
    number = [str(case) for case in cases].index("batch 1, steps 4, hidden 4")
    broken["chainer"]["outputs"]["lstm_cell"][number] = wrong[number]
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "lstm_cell", "chainer",
                                 case="batch 1, steps 4, hidden 4")


def test_block_copied_lstm_weights_hold_only_for_one_hidden_unit(comparison):
    """The trap the Chainer tab avoids, as the condition it would need: exact where
    hidden == 1, differing outside; without the condition the row stops at hidden 4."""
    ns = comparison
    references = {"lstm_cell": ns["references"]["lstm_cell"]}
    runs = {"chainer": {"outputs": {"lstm_cell": chainer_lstm_cell_from_blocks(ns)}}}
    grids = {"lstm_cell": ns["grids"]["lstm_cell"]}
    [check] = check_concepts(PAGE_NAME, runs, references, grids=grids,
                             conditions={"lstm_cell": {"chainer": "hidden == 1"}})
    assert check.error <= FLOAT32_TOLERANCE and "hidden 4" in check.outside, check.verdict
    with pytest.raises(AssertionError, match=r"framework chainer: claimed exact, but at the case batch \d, "
                                             r"steps \d, hidden 4"):
        check_concepts(PAGE_NAME, runs, references, grids=grids)


@pytest.mark.legacy
def test_chainer_reads_lstm_gates_interleaved_per_unit():
    """In Chainer itself: L.LSTM with its rows copied in a, i, f, o blocks computes what
    the test's emulation of F.lstm says (so exact at hidden 1 only), and the page's
    interleaved copy is exact on every case."""
    if TEST_ENVIRONMENT != "legacy" or not is_installed("chainer"):
        pytest.skip("Chainer is not installed in this environment (the legacy one has it)")
    from rosetta_book.chapter import load_chapter

    ns = load_chapter(PAGE, "chainer")
    cases = ns["grids"]["lstm_cell"]
    page = [ns["lstm_cell"](case) for case in cases]
    emulated = chainer_lstm_cell_from_blocks(ns)

    def blocks(array):
        i, f, g, o = np.split(array, 4)
        return np.concatenate([g, i, f, o])

    ns["interleave"] = blocks  # the loader, as a porter who reordered only
    copied = [ns["lstm_cell"](case) for case in cases]
    for case, ours, theirs, reference, emulation in zip(cases, page, copied, ns["references"]["lstm_cell"],
                                                        emulated):
        error = max(np.abs(a - b).max() for a, b in zip(ours, reference))
        assert error <= FLOAT32_TOLERANCE, (str(case), error)
        assert max(np.abs(a - b).max() for a, b in zip(theirs, emulation)) <= FLOAT32_TOLERANCE, str(case)
        wrong = max(np.abs(a - b).max() for a, b in zip(theirs, reference))
        assert (wrong <= FLOAT32_TOLERANCE) == (case.hidden == 1), (str(case), wrong)


def test_the_storage_table_is_written_from_what_each_tabs_layers_hold(comparison):
    """Fifteen rows (a GRU, an LSTM and an LSTM cell per framework), each naming every
    parameter its layer holds, with the shapes in the sizes' names; a layer's storage
    changed in one part changes its row."""
    runs, rows = comparison["runs"], comparison["storage_rows"]
    assert len(rows) == 3 * len(FRAMEWORKS)
    for (layer, order, stored, computes), framework in zip(rows, FRAMEWORKS * 3):
        name = layer.split("`")[1]
        assert order == comparison["GATE_ORDERS"][name]
        for parameter in runs[framework].stored[name]:
            assert f"`{parameter}`" in stored or "`.." in stored, (name, parameter, stored)
        assert "(" in stored and not re.search(r"[(, ](3|4|12|16)[,)]", stored), stored  # I, H, 3H, 4H
    pytorch_gru = comparison["stored_parameters"](runs["pytorch"].stored["nn.GRU"], comparison["SIZES"])
    assert pytorch_gru == "`weight_ih_l0` (3H, I), `weight_hh_l0` (3H, H), `bias_ih_l0`, `bias_hh_l0` (3H)"
    changed = dict(runs["pytorch"].stored["nn.GRU"], weight_ih_l0=(4 * 4, 3))
    assert "`weight_ih_l0` (4H, I)" in comparison["stored_parameters"](changed, comparison["SIZES"])
    assert [row[-1] for row in rows[:5]] == ["$W x$", "$x K$", "$x K$", "$W x$", "$W x$"]
