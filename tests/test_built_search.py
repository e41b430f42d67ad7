"""The built site's search page in headless Chromium: its from/to choice narrows the results
to the table rows the porting checklist lists for that pair, every result opens its
section, nothing it loads comes from another host, and a table row it lands on links to
its line of the page's overview table and back.

Needs the built site (ROSETTA_BOOK_HTML, as `make test` sets it) and a browser; skipped
without either, saying why. How the index is cut into records is tested without a site
(tests/test_search_index.py)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote_plus

import pytest

from rosetta_book.bench import search
from rosetta_book.checklist_pages import checklist_blocks
from rosetta_book.search_index import checklist_pairs

HTML = os.environ.get("ROSETTA_BOOK_HTML")

pytestmark = [
    pytest.mark.skipif(not HTML, reason="run by `make test` after building the book (ROSETTA_BOOK_HTML)"),
    pytest.mark.skipif(search.browser_missing() is not None, reason=search.browser_missing() or ""),
]


@pytest.fixture(scope="module")
def browser():
    with search.serve_site(Path(HTML)) as base, search.open_browser() as driver:
        yield driver, base


def ask(browser, query: str, **pair) -> tuple[list[search.Link], str]:
    """The search page's links and summary line for a query (and a pair of frameworks)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver, base = browser
    extra = "".join(f"&{key}={value}" for key, value in pair.items())
    driver.get(f"{base}search.html?q={quote_plus(query)}{extra}")
    summary = WebDriverWait(driver, search.SEARCH_TIMEOUT, poll_frequency=0.02).until(
        lambda d: d.execute_script("const s = document.querySelector('#search-results .search-summary');"
                                   " return s && s.textContent"))
    links = [search.to_link(title, href, base) for title, href in driver.execute_script(search.RESULTS)]
    return links, summary


def test_the_pair_filter_keeps_only_rows_the_checklist_lists_for_that_pair(browser):
    rows = checklist_pairs(checklist_blocks(Path(HTML)))
    everything, _ = ask(browser, "padding")
    narrowed, summary = ask(browser, "padding", **{"from": "pytorch", "to": "jax"})
    assert narrowed and "differ from PyTorch to JAX (Flax)" in summary
    assert len(narrowed) <= len(everything)
    for link in narrowed:
        assert "pytorch>jax" in rows.get(f"{link.page}#{link.fragment}", []), link
    assert any(f"{link.page}#{link.fragment}" not in rows for link in everything)  # chapters, too


def test_every_result_opens_a_section_and_nothing_comes_from_another_host(browser):
    links, summary = ask(browser, "batch norm momentum")
    assert links and "sections match" in summary
    assert all(link.fragment for link in links), links
    driver, base = browser
    loaded = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert any("pagefind" in url for url in loaded)
    assert all(url.startswith(base) for url in loaded), [url for url in loaded if not url.startswith(base)]


def test_a_row_search_lands_on_links_to_its_overview_line_and_back(browser):
    driver, base = browser
    driver.get(f"{base}book/tables/layers.html#tables-layers-conv-valid")
    back = driver.execute_script(
        "const a = document.querySelector('#conv-2-d-valid-no-padding .rosetta-overview-link'); return a && a.hash")
    assert back == "#overview-tables-layers-conv-valid"
    driver.execute_script("document.querySelector('#conv-2-d-valid-no-padding .rosetta-overview-link').click()")
    top, height, forth = driver.execute_script(
        "const row = document.getElementById('overview-tables-layers-conv-valid');"
        " return [row.getBoundingClientRect().top, window.innerHeight, row.querySelector('a').hash]")
    assert 0 <= top < height and forth == "#tables-layers-conv-valid"


def test_opened_from_disk_the_search_page_says_how_to_serve_the_site(browser):
    from selenium.webdriver.support.ui import WebDriverWait

    driver, _ = browser
    driver.get((Path(HTML).resolve() / "search.html").as_uri() + "?q=padding")
    said = WebDriverWait(driver, search.SEARCH_TIMEOUT, poll_frequency=0.05).until(lambda d: d.execute_script(
        "const s = document.querySelector('#search-results .search-summary'); return s && s.textContent"))
    assert "python -m http.server" in said, said
