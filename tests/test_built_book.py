"""Reads the HTML that `make test` built (ROSETTA_BOOK_HTML): every page, every tab set.

Run by `make test` after the smoke build of the whole book. Outside that
(ROSETTA_BOOK_HTML unset) these tests are skipped; with it set, a missing or
broken build fails them.
"""

import os
import re
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS
from rosetta_utils.frameworks import selected_frameworks

ROOT = Path(__file__).parents[1]
HTML = os.environ.get("ROSETTA_BOOK_HTML")
pytestmark = pytest.mark.skipif(not HTML, reason="run by `make test` after building the book")


def toc_pages():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        pages += [chapter["file"] for chapter in part["chapters"]]
    return pages


def executed_pages():
    """Pages with code cells: the chapters and appendix pages, not the introduction."""
    return [page for page in toc_pages() if "```{code-cell}" in (ROOT / f"{page}.md").read_text()]


def soup_of(page):
    path = Path(HTML) / f"{page}.html"
    assert path.is_file(), f"{path} was not built"
    return BeautifulSoup(path.read_text(), "html.parser")


@pytest.mark.parametrize("page", toc_pages())
def test_every_page_of_the_table_of_contents_was_built(page):
    assert soup_of(page).select_one("main") is not None


@pytest.mark.parametrize("page", executed_pages())
def test_every_tab_set_holds_all_five_with_code_and_output(page):
    tab_sets = soup_of(page).select("div.sd-tab-set.rosetta-framework-tabs")
    assert tab_sets, f"{page} has no framework tab set"
    for number, tab_set in enumerate(tab_sets, start=1):
        labels = [label.get("data-sync-id") for label in tab_set.select("label.sd-tab-label")]
        assert labels == list(FRAMEWORKS), f"{page}, tab set {number}: {labels}"
        for name, content in zip(FRAMEWORKS, tab_set.select("div.sd-tab-content")):
            where = f"{page}, tab set {number}, {name}"
            assert content.select("div.cell_input"), f"{where}: no code"
            if name in selected_frameworks():
                outputs = [o.get_text().strip() for o in content.select("div.cell_output")]
                assert any(outputs), f"{where}: no output"


@pytest.mark.parametrize("page", executed_pages())
def test_no_cell_raised(page):
    soup = soup_of(page)
    assert not soup.select("div.output.traceback, div.output.error"), f"{page} shows an error output"
    assert "Traceback (most recent call last)" not in soup.get_text()


@pytest.mark.parametrize("page", executed_pages())
def test_profile_and_each_frameworks_device_are_shown(page):
    text = soup_of(page).get_text()
    assert re.search(r"Profile: (smoke|full)", text), f"{page} does not say which profile ran"
    for name in selected_frameworks():
        title = re.escape(FRAMEWORK_TITLES[name])
        assert re.search(rf"{title}: .+ on (cpu|gpu|cuda)\S*", text), f"{page}: no device line for {name}"
