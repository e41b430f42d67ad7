"""The built site's search page in headless Chromium: its from/to choice narrows the results
to the table rows the porting checklist lists for that pair, every result opens its
section, and nothing it loads comes from another host.

Needs the built site (ROSETTA_BOOK_HTML, as `make test` sets it) and a browser; skipped
without either, saying why. How the index is cut into records is tested without a site
(tests/test_search_index.py)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote_plus

import pytest

from rosetta_book.bench import search
from rosetta_book.search_index import CHECKLIST, checklist_pairs

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
    rows = checklist_pairs((Path(HTML) / CHECKLIST).read_text(encoding="utf-8"))
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
