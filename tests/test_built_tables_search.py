"""The site's search finds every API name of every translation table on its page.

Each page under book/tables/ opens with a compact table whose cells hold the call each tab
marks as its translation (`nnx.Conv(...)`, `L.Convolution2D(...)`). A reader types such a
name into the search box. The site's index (rosetta_book.search_index) holds one record
per section, the overview table left out (it would match every query): so every name
must be in the text of a record of its page, the row whose tab makes the call; and, typed
into the search page in headless Chromium, a sample of the names brings up a section of
their page among the results (a name several pages use may rank another page first).

It reads the site named by ROSETTA_BOOK_HTML and skips without one (`make test` sets it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
TABLE_PAGES = sorted((ROOT / "book" / "tables").glob("*.md"))
HTML = os.environ.get("ROSETTA_BOOK_HTML")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: How many names the browser types (spread over the pages; the records test reads all).
SAMPLE = 10

needs_site = pytest.mark.skipif(not HTML, reason="run by `make test` after building the book (ROSETTA_BOOK_HTML)")


def compact_table_names(path: Path) -> list[str]:
    """The API names of a page's compact table: the callable of every decisive call its tabs
    mark (the build shows each call in the table; a reader searches for the callable)."""
    from rosetta_book.decisive_calls import decisive_calls
    from rosetta_book.page import Page

    names = []
    for entry in decisive_calls(Page.read(path)).values():
        for calls in entry["calls"].values():
            for call in calls if isinstance(calls, list) else []:
                names.append(call.text.split("(")[0].split("=")[0])
    return list(dict.fromkeys(names))


def test_the_tables_have_names_to_search_for():
    assert TABLE_PAGES, "no pages under book/tables/"
    for page in TABLE_PAGES:
        assert compact_table_names(page), f"{page.name}: no compact table with API names"


def missing_names(records, url: str, names: list[str]) -> list[str]:
    """The names whose words (identifiers: `lstm.bias_ih_l0[h:2 * h].fill_` is `lstm`,
    `bias_ih_l0`, `h`, `fill_`) are not all in the text of the records of the page `url`,
    as the index reads it."""
    from bs4 import BeautifulSoup

    text = " ".join(BeautifulSoup(r.html, "html.parser").get_text(" ") for r in records
                    if r.url.startswith(url + "#"))
    held = set(WORD.findall(text))
    return [name for name in names if not set(WORD.findall(name)) <= held]


@pytest.fixture(scope="module")
def records():
    from rosetta_book.search_index import site_records

    return site_records(Path(HTML))


@needs_site
@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda page: page.stem)
def test_every_name_of_a_table_is_in_a_record_of_its_page(records, page):
    url = f"book/tables/{page.stem}.html"
    assert any(r.url.startswith(url + "#") for r in records), f"{url} has no record (is it in _toc.yml?)"
    missing = missing_names(records, url, compact_table_names(page))
    assert not missing, f"no record of {url} holds these names: {missing}"


def test_a_name_no_record_holds_is_reported():
    from rosetta_book.search_index import page_records

    page = ("<article class='bd-article'><section id='layers'><h1>Layers</h1><section id='dense'><h2>Dense</h2>"
            "<div class='cell tag_pytorch'><pre><span class='n'>nn</span><span class='o'>.</span>"
            "<span class='n'>Linear</span>(4, 5)</pre></div></section></section></article>")
    records = page_records(page, "book/tables/layers.html")
    assert missing_names(records, "book/tables/layers.html", ["nn.Linear", "L.EmbedID"]) == ["L.EmbedID"]


@needs_site
def test_a_sample_of_the_names_typed_into_the_search_page_finds_their_page():
    from rosetta_book.bench import search

    if search.browser_missing():
        pytest.skip(search.browser_missing())
    names = [(page, name) for page in TABLE_PAGES for name in compact_table_names(page)]
    sample = names[:: max(1, len(names) // SAMPLE)][:SAMPLE]
    misses = []
    with search.serve_site(Path(HTML)) as base, search.open_browser() as driver:
        for page, name in sample:
            found = search.search(driver, base, name)
            pages = [link.page for link in found["links"]]  # a name several pages use may rank another first
            if f"book/tables/{page.stem}.html" not in pages:
                misses.append(f"{name} ({page.stem}): the results are on {sorted(set(pages))}")
    assert not misses, "\n".join(misses)
