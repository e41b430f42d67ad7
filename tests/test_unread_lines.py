"""Lines of a download that nothing after them reads (rosetta_book.unread_lines)."""

from __future__ import annotations

from pathlib import Path

from rosetta_book.unread_lines import download_unread, unread_statements

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([*ROOT.glob("book/chapters/*.md"), *ROOT.glob("book/lessons/*.md"), *ROOT.glob("book/tables/*.md")])


def names(sources):
    return [statement.names for statement in unread_statements(sources)]


def test_a_name_read_later_is_not_counted_and_one_never_read_is():
    assert names(["x = 1\ny = 2", "print(x)"]) == [("y",)]


def test_a_name_read_only_before_its_binding_is_counted():
    assert names(["print(1)\nx = 2"]) == [("x",)]


def test_a_function_defined_earlier_reads_a_name_bound_later():
    assert names(["def f():\n    return LIMIT", "LIMIT = 3", "f()"]) == []


def test_loops_and_blocks_count_their_own_names_read_inside_and_underscores_never():
    assert names(["for i in range(3):\n    print(i)", "for _ in range(2):\n    pass"]) == []
    assert names(["for i in range(3):\n    total = i"]) == [("total",)]


def test_unused_imports_count_and_a_statement_spans_its_lines():
    found = unread_statements(["import json\nimport os\nvalue = dict(\n    a=1,\n)", "print(os.sep)"])
    assert [(s.names, s.lines) for s in found] == [(("json",), 1), (("value",), 3)]


def test_magics_and_invalid_cells_do_not_stop_the_count():
    assert names(["%matplotlib inline\nx = 1", "this is not python", "print(x)"]) == []


def test_no_download_binds_a_name_nothing_after_it_reads():
    """Every download runs its task top to bottom with no line whose result it never uses;
    what only the comparison reads sits in its optional last part, where it is printed."""
    from rosetta_book.page import Page

    found = {}
    for path in PAGES:
        page = Page.read(path)
        for framework in page.frameworks:
            for statement in download_unread(page, framework):
                found.setdefault(f"{page.name}-{framework}", []).append(
                    f"[{statement.section}] line {statement.line}: {', '.join(statement.names)}")
    assert not found, "\n".join(f"{name}: {'; '.join(lines)}" for name, lines in found.items())


def test_a_for_comparison_cell_that_prints_what_it_binds_counts_nothing(write_page):
    """The optional last part's cells print what they compute: nothing in them is unread."""
    from tiny_pages import code_cell, myst_page
    from rosetta_book.page import Page

    text = myst_page("Last", code_cell("y = 1\nprint(y)", "pytorch"),
                     code_cell("kept = y + 1\nprint(kept)", "pytorch, for-comparison"),
                     front_matter_extra="frameworks: [pytorch]\n")
    assert download_unread(Page.read(write_page("last.md", text)), "pytorch") == []
    silent = text.replace("kept = y + 1\nprint(kept)", "kept = y + 1")
    assert [s.names for s in download_unread(Page.read(write_page("silent.md", silent)), "pytorch")] == [("kept",)]
