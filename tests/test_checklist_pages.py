"""The built checklist split into one file per pair (rosetta_book.checklist_pages): the page
keeps its opening pair, every other pair's list moves to a script beside it that reads
back the same, a second run changes nothing, and a missing file is named."""

from __future__ import annotations

import pytest

from rosetta_book.checklist_pages import (
    OPENING,
    PAGE,
    ChecklistPagesError,
    checklist_blocks,
    pair_file,
    split_checklist,
)

PAIRS = [("pytorch", "tensorflow"), ("pytorch", "jax"), ("jax", "pytorch")]


def block(source: str, target: str) -> str:
    return (f'<section class="rosetta-checklist-block" data-from="{source}" data-to="{target}">'
            f'<h3>Silent traps first</h3><ol><li class="rosetta-checklist-line">'
            f'<a href="tables/layers.html#tables-layers-dense">Dense</a> {source} to {target}: “ünïcode” '
            f'</li></ol></section>')


def write_page(site):
    page = site / PAGE
    page.parent.mkdir(parents=True)
    page.write_text('<html><body><div class="rosetta-checklist"><p>choose</p>'
                    + "".join(block(*pair) for pair in PAIRS) + "</div><footer>end</footer></body></html>",
                    encoding="utf-8")
    return page


def test_the_page_keeps_its_opening_pair_and_the_others_read_back_the_same(tmp_path):
    page = write_page(tmp_path)
    before = checklist_blocks(tmp_path)
    assert split_checklist(tmp_path) == 2
    text = page.read_text(encoding="utf-8")
    assert text.count("rosetta-checklist-line") == 1 and "<footer>end</footer>" in text
    assert 'data-src="porting_checklist/pytorch-jax.js"></section>' in text
    assert (tmp_path / pair_file("jax", "pytorch")).is_file()
    assert checklist_blocks(tmp_path) == before and OPENING in before
    assert split_checklist(tmp_path) == 2 and page.read_text(encoding="utf-8") == text  # once is enough


def test_a_pairs_missing_file_is_named(tmp_path):
    write_page(tmp_path)
    split_checklist(tmp_path)
    (tmp_path / pair_file("pytorch", "jax")).unlink()
    with pytest.raises(ChecklistPagesError, match="pytorch to jax names porting_checklist/pytorch-jax.js"):
        checklist_blocks(tmp_path)
    with pytest.raises(ChecklistPagesError, match="missing; build the book again"):
        split_checklist(tmp_path)


def test_a_file_that_is_no_pairs_list_is_named(tmp_path):
    write_page(tmp_path)
    split_checklist(tmp_path)
    (tmp_path / pair_file("jax", "pytorch")).write_text("alert(1)")
    with pytest.raises(ChecklistPagesError, match="not a checklist pair's file"):
        checklist_blocks(tmp_path)


def test_a_site_without_the_checklist_has_nothing_to_split(tmp_path):
    assert split_checklist(tmp_path) == 0 and checklist_blocks(tmp_path) == {}
