"""The porting checklist: what the tables record, what each row costs a port between two
frameworks (from the row's own checks), the ranking, and the HTML the page shows."""

import json

import numpy as np
import pytest

from rosetta_proof.checklist import (COSTS, FIRST, ChecklistError, checklist_html, first_traps, trap_cost,
                                     load_tables, names_framework, pair_traps, record_table)
from rosetta_proof.translation_checks import check_concepts, compare_pair
from rosetta_utils.cases import grid

CASES = grid(size=(4, 5, 6))
CONCEPTS = ("plain", "named", "odd", "shifted", "raises", "drawn")


def calls(concept, title, traps=(), jax="nnx.Call()"):
    return {"title": title, "label": f"tables-t-{concept}", "traps": list(traps),
            "calls": {"pytorch": [{"text": f"nn.{title.split()[0]}()"}], "tensorflow": [{"text": "layers.Call()"}],
                      "jax": "none" if jax is None else [{"text": jax}]}}


CALLS = {
    "plain": calls("plain", "Plain"),
    "named": calls("named", "Named", ["Trap: Flax's `nnx.Named` pads at the end."]),
    "odd": calls("odd", "Odd sizes", jax=None),
    "shifted": calls("shifted", "Shifted"),
    "raises": calls("raises", "Raises"),
    "drawn": calls("drawn", "Drawn"),
}


def results(changes=None):
    """Every framework's results, each equal to the reference unless ``changes`` says
    otherwise: ``{(concept, framework): function of the case's result and the case}``."""
    reference = {"plain": np.ones(2), "named": np.ones(2), "drawn": np.ones(1),
                 **{name: [np.arange(c.size) * 1.0 for c in CASES] for name in ("odd", "shifted", "raises")}}
    changes, runs = changes or {}, {}
    for framework in ("pytorch", "tensorflow", "jax"):
        outputs = {}
        for concept, expected in reference.items():
            change = changes.get((concept, framework))
            if isinstance(expected, list):
                outputs[concept] = [change(value, case) if change else value for value, case in zip(expected, CASES)]
            else:
                outputs[concept] = change(expected, None) if change else expected
        runs[framework] = {"outputs": outputs}
    return runs, reference


PLANTED = {
    ("odd", "pytorch"): lambda value, case: value + (case.size == 5),  # PyTorch differs on odd sizes
    ("odd", "jax"): lambda value, case: "no such layer",
    ("shifted", "tensorflow"): lambda value, case: value + 0.5,  # Keras differs everywhere
    ("raises", "tensorflow"): lambda value, case: np.empty(0) if case.size == 6 else value,
}


def record(tmp_path, changes=None):
    runs, reference = results({**PLANTED, **(changes or {})})
    runs["jax"]["outputs"]["odd"] = "no such layer"
    checks = check_concepts("tables/t.md", runs, reference, grids={n: CASES for n in ("odd", "shifted", "raises")},
                            conditions={"odd": {"pytorch": "size != 5"}},
                            approximate={"shifted": ["tensorflow"], "drawn": ["pytorch", "tensorflow", "jax"],
                                         "raises": ["tensorflow"]},
                            initial=["drawn"], raise_on_mismatch=False)
    path = record_table("tables/t.md", "Tiny", checks, CALLS, folder=tmp_path)
    assert path == tmp_path / "tables" / "t.json"
    return load_tables(tmp_path)


@pytest.fixture
def tables(tmp_path):
    return record(tmp_path)


def costs(tables, source, target):
    return {trap.title: trap.cost for trap in pair_traps(tables, source, target)}


def test_each_row_costs_what_its_checks_show_for_the_pair(tables):
    assert costs(tables, "pytorch", "tensorflow") == {
        "Shifted": "silent", "Odd sizes": "condition", "Raises": "error", "Drawn": "weights"}
    # "Plain" agrees everywhere and no trap names either: not listed
    assert costs(tables, "pytorch", "jax") == {"Odd sizes": "error", "Named": "noise", "Drawn": "weights"}
    (row,) = [r for r in tables[0]["rows"] if r["concept"] == "odd"]
    assert trap_cost(row, "pytorch", "tensorflow") == (
        "condition", "differs on 1 of 3 cases (e.g. size 5), by up to 1")
    (row,) = [r for r in tables[0]["rows"] if r["concept"] == "raises"]
    assert trap_cost(row, "tensorflow", "pytorch") == ("error", "TensorFlow (Keras 3) raises on 1 of 3 cases (e.g. size 6)")


def test_changing_a_rows_results_changes_its_cost(tmp_path):
    assert "Plain" not in costs(record(tmp_path / "a"), "pytorch", "tensorflow")
    one = record(tmp_path / "b", {("shifted", "tensorflow"): lambda value, case: value + (case.size == 4)})
    assert costs(one, "pytorch", "tensorflow")["Shifted"] == "condition"
    every = record(tmp_path / "c", {("plain", "tensorflow"): lambda value, case: value * 2})
    assert costs(every, "pytorch", "tensorflow")["Plain"] == "silent"
    within = record(tmp_path / "d", {("plain", "tensorflow"): lambda value, case: value + 1e-7})
    assert "Plain" not in costs(within, "pytorch", "tensorflow")  # inside the row's bound


def test_the_ranking_puts_silent_traps_first_and_keeps_at_most_ten(tables):
    traps = pair_traps(tables, "pytorch", "tensorflow")
    assert [trap.cost for trap in traps] == ["silent", "condition", "error", "weights"]
    assert [trap.title for trap in first_traps(traps)] == ["Shifted", "Odd sizes"]
    assert traps[0].fix == "`layers.Call()`"  # the target's call, as its tab writes it
    many = [traps[0]] * (FIRST + 3)
    assert len(first_traps(many)) == FIRST
    assert list(COSTS)[:2] == ["silent", "condition"]


def test_the_html_has_a_ranked_list_per_direction_linking_each_line_to_its_row(tables):
    page = checklist_html(tables)  # the page's path from the book's folder
    assert page.count('class="rosetta-checklist-block"') == 20  # five frameworks, both directions
    block = page.split('data-from="pytorch" data-to="tensorflow">')[1].split("</section>")[0]
    first = block.split("<ol>")[1].split("</ol>")[0]
    assert first.count("<li") == 2 and '<a href="tables/t.html#tables-t-shifted">Shifted</a>' in first
    assert "TensorFlow (Keras 3): <code>layers.Call()</code>" in first
    assert "<h3>An error, or no such call, where the other computes</h3>" in block
    assert 'data-frameworks="pytorch tensorflow"' in block and '<select name="from">' in page
    assert "<code>nnx.Named</code>" in page.split('data-from="pytorch" data-to="jax">')[1]


def test_prose_names_a_framework_by_any_of_its_names():
    assert names_framework("Keras pads at the end", "tensorflow")
    assert names_framework("`tf.pad` lists pairs", "tensorflow")
    assert names_framework("Gluon's trainer", "mxnet") and not names_framework("Gluon's trainer", "chainer")


def test_a_framework_the_names_do_not_list_goes_by_its_title(monkeypatch):
    from rosetta_proof import checklist

    monkeypatch.setitem(checklist.FRAMEWORK_TITLES, "npnet", "NpNet (numpy)")
    assert names_framework("NpNet pads at the end", "npnet") and not names_framework("numpy pads", "npnet")


def test_a_record_that_is_not_a_table_is_refused_naming_it(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "broken.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(ChecklistError, match="broken.json: not a table record"):
        load_tables(tmp_path)


def test_calls_without_checks_are_refused(tmp_path):
    runs, reference = results()
    checks = check_concepts("tables/t.md", runs, {"plain": reference["plain"]})
    with pytest.raises(ChecklistError, match="concept 'extra' has calls but no checks"):
        record_table("tables/t.md", "Tiny", checks, {"plain": CALLS["plain"], "extra": CALLS["plain"]},
                     folder=tmp_path)


def test_a_call_that_raises_is_an_error_even_where_it_returns_several_arrays(tmp_path):
    """A tab that returns two arrays leaves two empty ones where its call raised (the
    batch-norm-while-training row at batch 1 in PyTorch): the pair is an error, raised by
    that framework, never a silent difference "in shape"."""
    reference = [(np.arange(c.size) * 1.0, np.ones(1)) for c in CASES]
    refused = [(np.empty(0), np.empty(0)) if c.size == 6 else pair for c, pair in zip(CASES, reference)]
    runs = {"pytorch": {"outputs": {"raises": refused}}, "tensorflow": {"outputs": {"raises": reference}},
            "jax": {"outputs": {"raises": reference}}}
    checks = check_concepts("tables/t.md", runs, {"raises": reference}, grids={"raises": CASES},
                            conditions={"raises": {"pytorch": "size != 6"}})
    record_table("tables/t.md", "Tiny", checks, {"raises": CALLS["raises"]}, folder=tmp_path)
    (row,) = load_tables(tmp_path)[0]["rows"]
    assert trap_cost(row, "tensorflow", "pytorch") == ("error", "PyTorch raises on 1 of 3 cases (e.g. size 6)")


@pytest.mark.parametrize("change, said", [
    (lambda value, case: value * 2, "by up to 5"),
    (lambda value, case: np.where(value > 2, np.nan, value), "with NaN in one of the two"),
    (lambda value, case: value[:-1], "in shape"),
    (lambda value, case: (value * 2).astype(np.float32),
     "by up to 5, and in dtype (PyTorch float64, TensorFlow (Keras 3) float32)"),
])
def test_a_difference_is_labelled_by_what_differs(tmp_path, change, said):
    tables = record(tmp_path, {("shifted", "tensorflow"): change})
    (row,) = [r for r in tables[0]["rows"] if r["concept"] == "shifted"]
    assert trap_cost(row, "pytorch", "tensorflow") == ("silent", f"differs on every case checked (3), {said}")


def test_the_same_values_in_another_dtype_are_a_trap_of_their_own(tmp_path):
    """MXNet's argmax gives its indices as float32 where the others give integers: equal
    values, another dtype. A Python number beside an array is no dtype difference."""
    every = record(tmp_path / "a", {("plain", "tensorflow"): lambda value, case: value.astype(np.float32)})
    (row,) = [r for r in every[0]["rows"] if r["concept"] == "plain"]
    assert trap_cost(row, "pytorch", "tensorflow") == (
        "dtype", "the same values in another dtype on every case checked: PyTorch float64, "
                 "TensorFlow (Keras 3) float32")
    assert costs(every, "pytorch", "tensorflow")["Plain"] == "dtype"
    assert "Plain" not in costs(every, "pytorch", "jax")
    some = record(tmp_path / "b", {("raises", "jax"):
                                   lambda value, case: value.astype(np.int32) if case.size == 4 else value})
    (row,) = [r for r in some[0]["rows"] if r["concept"] == "raises"]
    assert trap_cost(row, "jax", "pytorch") == (
        "dtype", "the same values in another dtype on 1 of 3 cases (e.g. size 4): JAX (Flax) int32, PyTorch float64")
    number = compare_pair("pytorch", "tensorflow", {"loss": 2.0, "grad": np.ones(2)},
                          {"loss": np.float32(2.0), "grad": np.ones(2)}, None, 1e-5)
    assert (number.differs, number.dtype_only, number.dtypes) == (0, 0, ())


def test_an_aligned_default_that_differs_for_the_pair_is_a_trap_of_its_own(tmp_path):
    """The aligned defaults a table page records (rosetta_proof.defaults) join its checked
    rows: one trap per pair whose defaults differ, after the silent ones, with the target's
    parameter to spell out; none where the two agree."""
    from rosetta_proof.checklist import record_aligned
    from rosetta_proof.defaults import AlignedDefault

    tables = record(tmp_path)
    shown = {"pytorch": "`momentum`=0.1 (as 1 - x: 0.9)", "tensorflow": "`momentum`=0.99", "jax": "`momentum`=0.99",
             "mxnet": "absent: no such parameter"}
    values = {"pytorch": "0.9", "tensorflow": "0.99", "jax": "0.99", "mxnet": "absent: no such parameter"}
    aligned = [AlignedDefault("plain", "running average's weight", shown, "differs: checked by the row plain",
                              True, True, values)]
    calls = {"plain": {"title": "Plain", "label": "tiny-plain"}}
    record_aligned("tables/t.md", aligned, calls, tmp_path)
    (table,) = load_tables(tmp_path)
    assert table["aligned"][0]["values"] == values
    traps = pair_traps([table], "pytorch", "tensorflow")
    (default,) = [trap for trap in traps if trap.cost == "defaults"]
    assert [trap.cost for trap in traps] == ["silent", "condition", "defaults", "error", "weights"]
    assert list(COSTS).index("defaults") < list(COSTS).index("dtype") < list(COSTS).index("error")
    assert default.title == "Plain" and default.label == "tiny-plain"
    assert default.detail.startswith("running average's weight: PyTorch `momentum`=0.1 (as 1 - x: 0.9), "
                                     "TensorFlow (Keras 3) `momentum`=0.99 (differs: checked by the row plain)")
    assert default.fix == "set `momentum` in the call, never leave it to the default"
    assert default not in first_traps(traps)
    assert not [trap for trap in pair_traps([table], "tensorflow", "jax") if trap.cost == "defaults"]
    (lacking,) = [trap for trap in pair_traps([table], "pytorch", "mxnet") if trap.cost == "defaults"]
    assert lacking.fix == ""  # nothing to spell out where the target has no such parameter
    assert 'data-cost="defaults"' in checklist_html([table])
