"""The porting checklist: what the tables record, which rows matter for a pair of
frameworks, and the HTML the page shows (its links and the frameworks each line is for)."""

import json

import numpy as np
import pytest

from rosetta_proof.checklist import (ChecklistError, checklist_html, checklist_lines, for_pair, load_tables,
                                     names_framework, record_table)
from rosetta_proof.translation_checks import check_concepts
from rosetta_utils.cases import grid

CASES = grid(size=(4, 5))
CALLS = {
    "plain": {"title": "Plain", "label": "tables-t-plain", "traps": [],
              "calls": {"pytorch": [{"text": "nn.Plain()"}], "jax": [{"text": "nnx.Plain()"}]}},
    "named": {"title": "Named", "label": "tables-t-named",
              "traps": ["Trap: Flax's `nnx.Named` pads at the end."],
              "calls": {"pytorch": [{"text": "nn.Named()"}], "jax": [{"text": "nnx.Named()"}]}},
    "odd": {"title": "Odd sizes", "label": "tables-t-odd", "traps": [],
            "calls": {"pytorch": [{"text": "nn.Odd()"}], "jax": "none"}},
}


def checks():
    reference = {"plain": np.ones(2), "named": np.ones(2), "odd": [np.arange(c.size) * 1.0 for c in CASES]}
    runs = {"pytorch": {"outputs": {"plain": np.ones(2), "named": np.ones(2),
                                    "odd": [np.arange(c.size) * 1.0 + (c.size == 5) for c in CASES]}},
            "jax": {"outputs": {"plain": np.ones(2), "named": np.ones(2), "odd": "no such layer"}}}
    return check_concepts("tables/t.md", runs, reference, grids={"odd": CASES},
                          conditions={"odd": {"pytorch": "size == 4"}})


@pytest.fixture
def tables(tmp_path):
    path = record_table("tables/t.md", "Tiny", checks(), CALLS, folder=tmp_path)
    assert path == tmp_path / "tables" / "t.json"
    return load_tables(tmp_path)


def test_a_row_matters_where_it_is_not_plainly_exact_or_its_trap_names_the_framework(tables):
    lines = checklist_lines(tables)
    assert [line.title for line in lines] == ["Named", "Odd sizes"]  # "Plain" is exact everywhere
    named, odd = lines
    assert named.frameworks == {"jax"}  # its trap names Flax
    assert odd.frameworks == {"pytorch", "jax"}  # a condition in PyTorch, none in JAX
    assert odd.cells["pytorch"].startswith("`nn.Odd()`: exact where size == 4")
    assert odd.cells["jax"] == "none: no such layer"
    assert [line.title for line in for_pair(lines, "pytorch", "tensorflow")] == ["Odd sizes"]
    assert [line.title for line in for_pair(lines, "jax", "mxnet")] == ["Named", "Odd sizes"]


def test_the_html_links_each_line_to_its_row_and_says_whom_it_concerns(tables):
    page = checklist_html(checklist_lines(tables))  # the page's path from the book's folder
    assert '<a href="tables/t.html#tables-t-named">Named</a>' in page
    assert 'data-frameworks="jax"' in page and 'data-frameworks="jax pytorch"' in page
    assert "<code>nnx.Named</code>" in page and '<select name="from">' in page


def test_prose_names_a_framework_by_any_of_its_names():
    assert names_framework("Keras pads at the end", "tensorflow")
    assert names_framework("`tf.pad` lists pairs", "tensorflow")
    assert names_framework("Gluon's trainer", "mxnet") and not names_framework("Gluon's trainer", "chainer")


def test_a_record_that_is_not_a_table_is_refused_naming_it(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "broken.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(ChecklistError, match="broken.json: not a table record"):
        load_tables(tmp_path)


def test_calls_without_checks_are_refused(tmp_path):
    with pytest.raises(ChecklistError, match="concept 'extra' has calls but no checks"):
        record_table("tables/t.md", "Tiny", checks(), {**CALLS, "extra": CALLS["plain"]}, folder=tmp_path)
