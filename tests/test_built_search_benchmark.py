"""The search benchmark (rosetta_book.bench.search) on the built site: it asks a sample of
the reader questions in headless Chromium and returns, for each form, a landing count
and a time per query; and a question made of a row's own heading, typed as the heading
reads, lands on that row.

The benchmark needs the built site (ROSETTA_BOOK_HTML, as `make test` sets it) and a
browser (Selenium, chromium and chromedriver); without either these tests are skipped,
saying why. The tests of how it reads a page's anchors and judges links run always.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from rosetta_book.bench import search

HTML = os.environ.get("ROSETTA_BOOK_HTML")
ROOT = Path(__file__).parents[1]
SAMPLE = 5
#: The planted question: the heading under this label, as the page writes it.
PLANTED_LABEL = "tables-optimizers-rmsprop-centered"
PLANTED_PAGE = ROOT / "book" / "tables" / "optimizers.md"

needs_site = pytest.mark.skipif(not HTML, reason="run by `make test` after building the book (ROSETTA_BOOK_HTML)")
needs_browser = pytest.mark.skipif(search.browser_missing() is not None, reason=search.browser_missing() or "")


def heading_under(label: str, page: Path) -> str:
    lines = page.read_text(encoding="utf-8").splitlines()
    at = lines.index(f"({label})=")
    return re.sub(r"^#+\s*", "", lines[at + 1]).replace("`", "")


@pytest.fixture(scope="module")
def report():
    questions = search.sample(search.load_questions(search.DEFAULT_QUESTIONS), SAMPLE, seed=0)
    heading = heading_under(PLANTED_LABEL, PLANTED_PAGE)
    planted = {"question": heading, "short": heading, "answers": [PLANTED_LABEL],
               "why": "planted: the row's own heading, typed as it reads"}
    return search.ask_questions(Path(HTML), [*questions, planted])


@needs_site
@needs_browser
def test_each_form_has_a_landing_count_and_a_time_per_query_and_every_result_an_anchor(report):
    asked = SAMPLE + 1
    for form in search.FORMS:
        figures = report["forms"][form]
        assert figures["asked"] == asked, figures
        assert 0 <= figures["landed"] <= figures["right_page"] <= asked, figures
        assert figures["unfinished"] == 0, figures
        assert len(figures["seconds"]) == asked and all(0 < s < search.SEARCH_TIMEOUT for s in figures["seconds"])
        low, median, high = figures["quartiles_s"]
        assert low <= median <= high
        assert figures["any_section"] == asked and figures["page_top"] == 0, figures
    for row in report["rows"]:  # every result opens its page where the answer is
        for form in search.FORMS:
            assert all(link.fragment for link in row["asked"][form]["links"]), row["asked"][form]["links"]
    text = search.report_text(report)
    assert f"landing on the answer in the top {search.TOP}: " in text
    assert f"right page in the top {search.TOP} (any place on it): " in text
    json.dumps(search.to_json(report))


@needs_site
@needs_browser
def test_a_question_made_of_a_rows_own_heading_lands_on_it(report):
    planted = report["rows"][-1]["asked"]["question"]
    assert planted["landed"], [str(link) for link in planted["links"][:search.TOP]]


# --- how it reads anchors and judges links (no site, no browser) ----------------------------

PAGE = """<section id="layers"><h1>Layers</h1>
<section id="max-pool-ceil-mode">
<span id="tables-layers-max-pool-ceil"></span><h3>Max pool, ceil mode</h3>
<div id="cell-1"></div></section></section>"""


def test_a_label_reaches_its_section_by_either_id():
    ids = search.page_ids(PAGE)
    assert ids["tables-layers-max-pool-ceil"] == {"max-pool-ceil-mode", "tables-layers-max-pool-ceil"}
    assert ids["max-pool-ceil-mode"] == ids["tables-layers-max-pool-ceil"]
    assert ids["cell-1"] == {"cell-1"}


def test_links_land_on_the_section_not_on_the_page_top():
    pages = {"book/tables/layers.html": search.page_ids(PAGE)}
    anchors = search.resolve("tables-layers-max-pool-ceil", pages)
    base = "http://127.0.0.1:8000/"
    top = search.to_link("Layers", base + "book/tables/layers.html", base)
    section = search.to_link("Layers > Max pool", base + "book/tables/layers.html#max-pool-ceil-mode", base)
    other = search.to_link("Losses", base + "book/tables/losses.html#max-pool-ceil-mode", base)
    assert search.judge([top, other, section], anchors) == {
        "landed": True, "right_page": True, "page_top": False, "rank": 3}
    assert search.judge([top, other], anchors) == {
        "landed": False, "right_page": True, "page_top": True, "rank": None}
    assert search.judge([other, other, other, section], anchors)["rank"] == 4
    assert not search.judge([other, other, other, section], anchors)["landed"]


def test_an_answer_the_site_lacks_is_named():
    pages = {"book/tables/layers.html": search.page_ids(PAGE)}
    with pytest.raises(search.BadInput, match="tables-layers-nothing"):
        search.resolve("tables-layers-nothing", pages)
    with pytest.raises(search.BadInput, match="has no anchor 'gone'"):
        search.resolve("book/tables/layers.html#gone", pages)


def test_bad_input_exits_two_and_says_why(tmp_path, capsys):
    assert search.main(["--site", str(tmp_path)]) == 2
    assert "no search.html" in capsys.readouterr().err
    (tmp_path / "search.html").write_text("<html></html>")
    (tmp_path / "pagefind").mkdir()
    (tmp_path / "pagefind" / "pagefind.js").write_text("export {}")
    broken = tmp_path / "questions.json"
    broken.write_text("[{")
    assert search.main(["--site", str(tmp_path), "--questions", str(broken)]) == 2
    assert "does not parse" in capsys.readouterr().err
    (tmp_path / "page.html").write_text(PAGE)
    broken.write_text(json.dumps([{"question": "q", "short": "s", "answers": ["nowhere"], "why": "w"}]))
    assert search.main(["--site", str(tmp_path), "--questions", str(broken)]) == 2
    assert "'nowhere': no page of the site has this anchor" in capsys.readouterr().err
