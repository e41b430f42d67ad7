"""Reads the HTML that `make test` built (ROSETTA_BOOK_HTML): every page, every tab set.

Run by `make test` after the smoke build of the whole book. Outside that
(ROSETTA_BOOK_HTML unset) these tests are skipped; with it set, a missing or
broken build fails them.
"""

import functools
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


@functools.lru_cache(maxsize=None)
def soup_of(page):
    """The built page, parsed once for all the tests that read it (none changes it)."""
    path = Path(HTML) / f"{page}.html"
    assert path.is_file(), f"{path} was not built"
    return BeautifulSoup(path.read_text(), "html.parser")


@pytest.mark.parametrize("page", toc_pages())
def test_every_page_of_the_table_of_contents_was_built(page):
    assert soup_of(page).select_one("main") is not None


@pytest.mark.parametrize("page", executed_pages())
def test_every_tab_set_holds_all_five_with_code(page):
    tab_sets = soup_of(page).select("div.sd-tab-set.rosetta-framework-tabs")
    assert bool(tab_sets) == bool(tab_pages_frameworks(page)), f"{page}: tab sets and framework cells disagree"
    for number, tab_set in enumerate(tab_sets, start=1):
        labels = [label.get("data-sync-id") for label in tab_set.select("label.sd-tab-label")]
        assert labels == list(FRAMEWORKS), f"{page}, tab set {number}: {labels}"
        for name, content in zip(FRAMEWORKS, tab_set.select("div.sd-tab-content")):
            assert content.select("div.cell_input"), f"{page}, tab set {number}, {name}: no code"


@pytest.mark.parametrize("page", [page for page in executed_pages() if "/tables/" not in page])
def test_every_selected_framework_shows_its_output(page):
    """A part runs whole or stops the build; here, each selected framework's tabs show what it
    printed somewhere on the page, and no left-out framework shows output. (A translation
    table's snippets print nothing: their results show in the page's check table.)"""
    soup = soup_of(page)
    printed = {name: False for name in FRAMEWORKS}
    for tab_set in soup.select("div.sd-tab-set.rosetta-framework-tabs"):
        labels = [label.get("data-sync-id") for label in tab_set.select("label.sd-tab-label")]
        for name, content in zip(labels, tab_set.select("div.sd-tab-content")):
            printed[name] |= any(o.get_text().strip() for o in content.select("div.cell_output"))
    for name in tab_pages_frameworks(page):
        assert printed[name] == (name in selected_frameworks()), f"{page}: {name} printed {printed[name]}"


@pytest.mark.parametrize("page", executed_pages())
def test_no_cell_raised(page):
    soup = soup_of(page)
    assert not soup.select("div.output.traceback, div.output.error"), f"{page} shows an error output"
    assert "Traceback (most recent call last)" not in soup.get_text()


@pytest.mark.parametrize("page", executed_pages())
def test_the_profile_and_where_each_part_ran_are_shown(page):
    soup = soup_of(page)
    assert re.search(r"(smoke|full) profile", soup.select_one("p.rosetta-banner").get_text()), \
        f"{page} does not say which profile ran"
    if not tab_pages_frameworks(page):
        return
    downloads = soup.select_one("div.rosetta-downloads")
    assert downloads is not None, f"{page}: no download line under the title"
    labels = [label.get("data-sync-id") for label in downloads.select("label.sd-tab-label")]
    contents = downloads.select("div.sd-tab-content")
    ran = dict(zip(labels, (content.get_text(" ", strip=True) for content in contents)))
    for name in selected_frameworks():
        if name in ran:
            # A device read from an array the part made, or a plain statement that it made none.
            assert re.search(r"This build ran it (on (cpu|gpu|cuda)\S*|\(.*it made no \w+ array)", ran[name]), \
                f"{page}: {name}: {ran[name]}"


def tab_pages_frameworks(page):
    """The frameworks a page declares, if it has framework cells (else an empty list)."""
    from rosetta_book.page import Page

    parsed = Page.read(ROOT / f"{page}.md")
    return list(parsed.frameworks) if parsed.tagged_frameworks() else []


@pytest.mark.parametrize("page", executed_pages())
def test_every_part_downloads_from_the_site_as_the_page_shows_it(page):
    """Each download link answers with a file, and the notebook's code is the page's."""
    import nbformat

    from rosetta_book.page import SHARED, Page, cell_role, is_for_comparison

    frameworks = tab_pages_frameworks(page)
    if not frameworks:
        return
    soup = soup_of(page)
    links = [a["href"] for a in soup.select("div.rosetta-downloads a.rosetta-download")]
    assert len(links) == 2 * len(frameworks), f"{page}: {links}"
    parsed = Page.read(ROOT / f"{page}.md")
    for framework in frameworks:
        notebook_link = next(link for link in links if link.endswith(f"-{framework}.ipynb"))
        target = (Path(HTML) / page).parent / notebook_link
        assert target.is_file(), f"{page}: {notebook_link} is not in the site"
        assert target.with_suffix(".py").is_file(), f"{page}: no script beside {notebook_link}"
        code = [cell.source for cell in nbformat.read(target, as_version=4).cells if cell.cell_type == "code"]
        mine = [cell for cell in parsed.notebook.cells
                if cell.cell_type == "code" and cell_role(cell) in (SHARED, framework)]
        # the for-comparison cells last: the download's optional last part
        expected = ([cell.source for cell in mine if not is_for_comparison(cell)]
                    + [cell.source for cell in mine if is_for_comparison(cell)])
        assert "find_spec(_module)" in code[0], f"{page}: the {framework} download lacks its check of what it needs"
        borrowed = parsed.borrowed_cell(framework)  # the other page's code it borrows, if any
        opening = 1 + (borrowed is not None)
        assert code[1:opening] == ([borrowed] if borrowed else []), f"{page}: the borrowed code is not served"
        assert code[opening:] == expected, f"{page}: the served {framework} notebook is not the page's {framework} part"


def test_the_build_report_lists_every_part_of_every_executed_page():
    text = soup_of("book/appendix/build_report").select_one("table.rosetta-execution-table").get_text(" ")
    for page in executed_pages():
        for framework in tab_pages_frameworks(page):
            if framework in selected_frameworks():
                assert f"{page} {framework}" in " ".join(text.split()), f"{page} {framework} missing"


@pytest.mark.parametrize("page", toc_pages())
def test_every_page_says_what_build_it_is_under_its_title(page):
    banner = soup_of(page).select_one("p.rosetta-banner")
    assert banner is not None, f"{page} has no build line"
    text = banner.get_text(" ", strip=True)
    for fact in ("profile", "data:", "ResNet-50:", "ran:"):
        assert fact in text, f"{page}: the build line lacks {fact!r}: {text}"


@pytest.mark.parametrize("page", executed_pages())
def test_comparison_code_is_folded_under_a_caption_and_the_tasks_code_is_not(page):
    """Comparison cells and the for-comparison tab sets are folded; a task's own tabs never."""
    from rosetta_book.sphinx_extension import FOR_COMPARISON_CAPTION

    soup = soup_of(page)
    for folded in soup.select("details.rosetta-comparison"):
        assert folded.summary and folded.summary.get_text(strip=True), f"{page}: a fold without a caption"
        assert not folded.find_parent(class_="sd-tab-set"), f"{page}: comparison code inside a tab"
    for tab_code in soup.select(".sd-tab-set div.highlight"):
        fold = tab_code.find_parent("details")
        assert fold is None or fold.summary.get_text(strip=True) == FOR_COMPARISON_CAPTION, (
            f"{page}: a framework's task code is folded away")


NATIVE_LOG = re.compile(r"^(?:[IWEF]\d{4} \d\d:\d\d:\d\d|WARNING: All log messages|\S+Warning: )", re.M)


@pytest.mark.parametrize("page", executed_pages())
def test_outputs_carry_no_native_log_lines_or_library_warnings(page):
    found = [match.group(0) for output in soup_of(page).select("div.cell_output")
             for match in NATIVE_LOG.finditer(output.get_text())]
    assert not found, f"{page}: {found[:5]}"
