"""The site's search index (rosetta_book.search_index): every section of a built page is a
record of its own, addressed by its anchor, without what serves only the comparison; the
checklist's pairs become filters; Pagefind writes the index, and a failure leaves the
index already there untouched."""

from __future__ import annotations

import gzip
import json

import pytest

from rosetta_book import search_index
from rosetta_book.search_index import (
    SearchIndexError,
    build_index,
    checklist_pairs,
    identifier_parts,
    page_records,
)

PAGE = """<html><body><nav>Contents: Layers, Losses</nav><main><article class="bd-article">
<section id="layers"><h1>Layers<a class="headerlink" href="#layers">#</a></h1>
<p class="rosetta-banner">This build: smoke profile, synthetic stand-ins.</p>
<div class="sd-tab-set rosetta-downloads"><p>Download the PyTorch part of this page</p></div>
<div class="rosetta-compact-table"><table><tr><td>torch.nn.MaxPool2d(ceil_mode=True)</td></tr></table></div>
<p>Every row runs the five frameworks' layers on the same inputs.</p>
<section id="max-pool-ceil-mode">
<span id="tables-layers-max-pool-ceil"></span><h3>Max pool, ceil mode<a class="headerlink" href="#max-pool-ceil-mode">#</a></h3>
<p>Trap: only PyTorch keeps a partial last window.</p>
<div class="cell tag_pytorch"><pre>pool = nn.MaxPool2d(2, ceil_mode=True)</pre></div>
<div class="cell"><pre>grids["ceil"] = grid(size=(5, 6))</pre></div>
<div class="cell tag_comparison"><pre>check_grid(grids)</pre></div>
</section>
<section id="dense"><h2>Dense</h2><p>Keras stores the kernel as (in, out).</p></section>
</section></article></main></body></html>"""

CHECKLIST = """<html><body><main><article class="bd-article"><section id="porting-checklist">
<h1>Porting checklist</h1><p>Choose two frameworks.</p>
<div class="rosetta-checklist">
<section class="rosetta-checklist-block" data-from="pytorch" data-to="jax"><h3>Silent traps first</h3><ol>
<li class="rosetta-checklist-line"><a href="tables/layers.html#tables-layers-max-pool-ceil">Max pool</a></li></ol>
</section>
<section class="rosetta-checklist-block" data-from="jax" data-to="pytorch"><ol>
<li class="rosetta-checklist-line"><a href="tables/layers.html#tables-layers-max-pool-ceil">Max pool</a></li></ol>
</section></div></section></article></main></body></html>"""


def text(record) -> str:
    from bs4 import BeautifulSoup

    return BeautifulSoup(record.html, "html.parser").get_text(" ", strip=True)


def test_each_section_is_a_record_at_its_label_without_the_comparison():
    page, row, dense = page_records(PAGE, "book/tables/layers.html")
    assert [r.url for r in (page, row, dense)] == ["book/tables/layers.html#layers",
                                                   "book/tables/layers.html#tables-layers-max-pool-ceil",
                                                   "book/tables/layers.html#dense"]
    assert (row.title, row.page) == ("Max pool, ceil mode", "Layers")
    assert "Trap: only PyTorch keeps a partial last window." in text(row)
    assert "nn.MaxPool2d(2, ceil_mode=True)" in text(row)  # a tab's code is the reader's
    for left_out in ("grids[", "check_grid", "#"):
        assert left_out not in text(row)
    assert text(page) == "Layers Every row runs the five frameworks' layers on the same inputs."
    assert 'data-pagefind-weight="0.3"' in row.html  # a tab's code weighs less than prose
    assert "Keras stores" not in text(page) and "Trap" not in text(page)  # each section once


def test_identifiers_are_indexed_by_their_parts_too():
    assert identifier_parts("nn.BatchNorm2d and ignore_index, but not padding") == (
        "nn batch norm 2 d batchnorm2d batchnorm · ignore index")
    assert identifier_parts("plain words only") == ""
    assert identifier_parts("torch.nn.functional.relu").endswith("nn.functional.relu functional.relu")


def test_the_checklist_pairs_become_each_rows_filter():
    line = ('<h3>Silent traps first</h3><ol><li class="rosetta-checklist-line">'
            '<a href="tables/layers.html#tables-layers-max-pool-ceil">Max pool</a></li></ol>')
    pairs = checklist_pairs({("pytorch", "jax"): line, ("jax", "pytorch"): line, ("jax", "mxnet"): "<ol></ol>"})
    assert pairs == {"book/tables/layers.html#tables-layers-max-pool-ceil": ["pytorch>jax", "jax>pytorch"]}


def write_site(folder, page=PAGE):
    (folder / "book" / "tables").mkdir(parents=True)
    (folder / "index.html").write_text('<html><body><article class="bd-article"></article></body></html>')
    (folder / "book" / "tables" / "layers.html").write_text(page)
    (folder / "book" / "porting_checklist.html").write_text(CHECKLIST)
    (folder / "_static").mkdir()
    (folder / "_static" / "theme.html").write_text(PAGE)  # Sphinx's own files are no pages


def fragments(index_folder):
    """The records Pagefind wrote, read back from its fragment files."""
    found = []
    for path in sorted((index_folder / "fragment").glob("*.pf_fragment")):
        raw = gzip.decompress(path.read_bytes())
        found.append(json.loads(raw[raw.index(b"{"):]))
    return found


def test_the_index_holds_one_record_per_section_with_its_anchor_and_filter(tmp_path):
    write_site(tmp_path)
    assert build_index(tmp_path) == 4  # three sections of the page, the checklist's own
    written = fragments(tmp_path / "pagefind")
    assert sorted(f["meta"]["url"] for f in written) == [
        "book/porting_checklist.html#porting-checklist", "book/tables/layers.html#dense",
        "book/tables/layers.html#layers", "book/tables/layers.html#tables-layers-max-pool-ceil"]
    row = next(f for f in written if f["meta"]["url"].endswith("max-pool-ceil"))
    assert row["meta"]["title"] == "Max pool, ceil mode" and row["meta"]["page"] == "Layers"
    assert sorted(row["filters"]["pair"]) == ["jax>pytorch", "pytorch>jax"]
    assert "Silent traps first" not in json.dumps(written)  # the checklist's lists are the tables' rows
    assert (tmp_path / "pagefind" / "pagefind.js").is_file() and not list(tmp_path.glob(".pagefind*"))


def test_a_folder_that_is_no_site_is_named_and_an_index_already_there_survives(tmp_path, monkeypatch):
    with pytest.raises(SearchIndexError, match="no index.html: not a built site"):
        build_index(tmp_path)
    write_site(tmp_path)
    build_index(tmp_path)
    before = sorted(p.name for p in (tmp_path / "pagefind").rglob("*"))
    monkeypatch.setattr(search_index.sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(SearchIndexError, match="Pagefind"):
        build_index(tmp_path)
    assert sorted(p.name for p in (tmp_path / "pagefind").rglob("*")) == before
    assert not list(tmp_path.glob(".pagefind*"))


def test_a_page_outside_the_theme_is_refused_by_name():
    with pytest.raises(SearchIndexError, match="odd.html: no article.bd-article"):
        page_records("<html><body><p>hi</p></body></html>", "odd.html")


def test_the_command_exits_two_on_a_folder_that_is_no_site(tmp_path, capsys):
    assert search_index.main([str(tmp_path)]) == 2
    assert "not a built site" in capsys.readouterr().err
