"""Every translation table's compact table names only APIs its framework's cells run, and
the check catches a name the page never runs."""

from pathlib import Path

import pytest

from translation_table_checks import compact_table, names_never_run

TABLE_PAGES = sorted((Path(__file__).parents[1] / "book" / "tables").glob("*.md"))


@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda page: page.stem)
def test_every_name_in_the_compact_table_runs_in_its_frameworks_cells(page):
    assert not names_never_run(page), "the table names APIs the tabs never run"


@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda page: page.stem)
def test_the_table_check_catches_a_name_the_page_never_runs(page, tmp_path):
    name = next(name for name in compact_table(page)["pytorch"] if name != "none")
    (tmp_path / "page.md").write_text(page.read_text().replace(f"`{name}`", "`torch.never_run`", 1))
    assert names_never_run(tmp_path / "page.md") == ["pytorch: torch.never_run"]
