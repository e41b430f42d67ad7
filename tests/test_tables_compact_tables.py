"""Every translation table's compact table is generated from the code that ran: no row is
typed by hand, the page shows the glued table, and every decisive call it shows executed
in its framework's part (traced line by line) with the values it shows for its arguments;
a call that never runs, and a value the call never took, are caught."""

from pathlib import Path

import pytest

from frameworks_under_test import IN_PROCESS_PARAMS
from translation_table_checks import (GLUED_TABLE, arguments_not_shown_as_run, calls_never_executed,
                                     rows_typed_by_hand, traced_run)

TABLE_PAGES = sorted((Path(__file__).parents[1] / "book" / "tables").glob("*.md"))


@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda page: page.stem)
def test_the_compact_table_is_generated_not_typed(page):
    assert rows_typed_by_hand(page) == 0
    assert page.read_text().count(GLUED_TABLE) == 1


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda page: page.stem)
def test_every_decisive_call_shown_ran_with_the_arguments_it_shows(page, framework, offline_smoke):
    traced = traced_run(page, framework)
    assert calls_never_executed(page, framework, traced) == []
    assert arguments_not_shown_as_run(page, framework, traced) == []


def test_a_decisive_call_that_never_runs_is_caught(tmp_path, offline_smoke):
    """A call in a branch the part never takes is in the code, but not executed."""
    page = Path(__file__).parents[1] / "book" / "tables" / "layers.md"
    text = page.read_text()
    marker = ":decisive: nn.Linear\n"
    assert marker in text
    text = text.replace(marker, ":decisive: nn.Bilinear\n" + "if False:\n    nn.Bilinear(4, 4, 5)\n", 1)
    (tmp_path / "layers.md").write_text(text)
    assert [line.split(" (")[0] for line in calls_never_executed(tmp_path / "layers.md", "pytorch")] == [
        "dense: nn.Bilinear(4, 4, 5)"]


def test_a_value_shown_that_the_call_never_took_is_caught(tmp_path, offline_smoke):
    """A cell binds ``scale = 2`` and then adds one: the compact cell shows the binding's 2,
    the call ran with 3."""
    from tiny_pages import code_cell, myst_page

    def page(extra):
        return myst_page(
            "Tiny table",
            code_cell("import numpy as np\nfrom rosetta_utils.cases import grid\nreferences, grids = {}, {}\n"),
            "(tiny-double)=\n## Double\n",
            code_cell('grids["double"] = grid(n=(2, 3))\n'
                      'references["double"] = [np.arange(c.n) * 2.0 for c in grids["double"]]\n'),
            code_cell("outputs = {}\n\n\ndef double(case):\n    scale = 2\n" + extra +
                      "    return np.multiply(np.arange(case.n), scale)\n\n\n"
                      'outputs["double"] = [double(c) for c in grids["double"]]', "pytorch")
            .replace(":tags: [pytorch]\n", ":tags: [pytorch]\n:decisive: np.multiply\n"),
            front_matter_extra="frameworks: [pytorch]\ntab_results: [outputs]\n",
        )

    right = tmp_path / "right.md"
    right.write_text(page(""))
    assert arguments_not_shown_as_run(right, "pytorch") == []
    wrong = tmp_path / "wrong.md"
    wrong.write_text(page("    scale += 1\n"))
    assert arguments_not_shown_as_run(wrong, "pytorch") == ["double: scale (shown as 2) ran as 3"]
