"""The divergence command's links to the translation tables come from the tables: each page's
front matter names the causes its rows check (rosetta_book.table_links), and the reader's
library carries them as data (rosetta_utils.divergence_rows)."""

import pytest

from rosetta_book.table_links import MODULE, TableLinkError, divergence_rows, module_source
from rosetta_utils.divergence import CAUSES, EVIDENCE, row_page
from tiny_pages import myst_page


def test_the_readers_library_carries_what_the_tables_say():
    assert MODULE.read_text() == module_source(divergence_rows()), "run python -m rosetta_book.table_links"


def test_every_cause_has_rows_and_every_row_its_page():
    rows = divergence_rows()
    assert set(rows) == set(EVIDENCE)
    for cause, linked in rows.items():
        assert CAUSES[cause] == (EVIDENCE[cause], tuple(label for label, _ in linked))
        for label, page in linked:
            assert row_page(label) == page and label.startswith("tables-")


def table(folder, name, causes, labels):
    extra = "divergence_causes:\n" + "".join(f"  {cause}: [{', '.join(rows)}]\n" for cause, rows in causes.items())
    text = myst_page("T", *(f"({label})=\n## {label}\n" for label in labels), front_matter_extra=extra)
    (folder / f"{name}.md").write_text(text)


def test_a_cause_or_a_row_the_table_cannot_back_is_refused_naming_the_page(tmp_path):
    table(tmp_path, "t", {"padding": ["tables-t-a"], "bias": ["tables-t-b"]}, ["tables-t-a", "tables-t-b"])
    assert divergence_rows(tmp_path) == {"padding": (("tables-t-a", "tables/t"),),
                                         "bias": (("tables-t-b", "tables/t"),)}
    table(tmp_path, "u", {"gravity": ["tables-u-a"]}, ["tables-u-a"])
    with pytest.raises(TableLinkError, match=r"u\.md: divergence_causes names the cause 'gravity'"):
        divergence_rows(tmp_path)
    table(tmp_path, "u", {"padding": ["tables-u-gone"]}, ["tables-u-a"])
    with pytest.raises(TableLinkError, match=r"u\.md: divergence_causes\['padding'\] names rows the page does "
                                             r"not label: tables-u-gone"):
        divergence_rows(tmp_path)
