"""Every translation table's compact table is generated from the code that ran: no row is
typed by hand, the page shows the glued table, and every decisive call it shows executed
in its framework's part (traced line by line); a call that never runs is caught."""

from pathlib import Path

import pytest

from conftest import IN_PROCESS_PARAMS
from translation_table_checks import GLUED_TABLE, calls_never_executed, rows_typed_by_hand

TABLE_PAGES = sorted((Path(__file__).parents[1] / "book" / "tables").glob("*.md"))


@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda page: page.stem)
def test_the_compact_table_is_generated_not_typed(page):
    assert rows_typed_by_hand(page) == 0
    assert page.read_text().count(GLUED_TABLE) == 1


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda page: page.stem)
def test_every_decisive_call_shown_was_executed(page, framework, offline_smoke):
    assert calls_never_executed(page, framework) == []


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
