"""The built site in a real browser: headless Chromium (the distribution's chromium and
chromedriver, through Selenium) at 1280x900, with every host but 127.0.0.1 blocked.

Run by `make test` after the smoke build (ROSETTA_BOOK_HTML names the site; `make test`
installs chromium when it is missing and it may). Without a browser these tests are
skipped with the reason. Each check is a function that returns its problems, and each is
seen failing on a deliberately broken page of its own (a long code line, a clipped
table, a script from a CDN).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from rosetta_book.bench.search import (
    browser_missing,
    chrome_options,
    serve_site,
)
from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS

HTML = os.environ.get("ROSETTA_BOOK_HTML")
#: At most this share of a page's code blocks may scroll (a line that cannot be broken).
SCROLLING_CODE_SHARE = 0.0  # none: the book's code is formatted to the box's 79 columns


pytestmark = pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")


@pytest.fixture(scope="module")
def serve():
    """Serve folders on 127.0.0.1 (a free port); returns a function folder -> base URL."""
    with contextlib.ExitStack() as servers:
        yield lambda folder: servers.enter_context(serve_site(Path(folder)))


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = chrome_options()  # the network blocked: any host but this machine's fails to resolve
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


# --- the checks: each returns a list of problems ------------------------------------------

def requests_to_other_hosts(driver) -> list[str]:
    """Every request the page made to a host other than 127.0.0.1 (from Chrome's log)."""
    found = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            host = urlsplit(url).hostname
            if urlsplit(url).scheme in ("http", "https", "ws", "wss") and host not in ("127.0.0.1", None):
                found.append(url)
    return found


SCROLLING_BLOCKS = """
const blocks = [...document.querySelectorAll('div.highlight pre')]
  .filter(pre => pre.offsetParent !== null && !pre.closest('.cell_output'));
return {total: blocks.length,
        scrolling: blocks.filter(pre => pre.scrollWidth > pre.clientWidth + 1)
          .map(pre => pre.innerText.split('\\n').reduce((a, b) => a.length >= b.length ? a : b))};
"""

CLIPPED_TABLES = """
const article = document.querySelector('article') || document.body;
const right = article.getBoundingClientRect().right;
return [...document.querySelectorAll('table')].filter(t => t.offsetParent !== null).flatMap(t => {
  const style = getComputedStyle(t), parent = getComputedStyle(t.parentElement);
  const wide = t.scrollWidth > t.clientWidth + 1;
  const scrolls = ['auto', 'scroll'].includes(style.overflowX) ||
                  (['auto', 'scroll'].includes(parent.overflowX) && t.parentElement.scrollWidth > 0);
  const sticksOut = t.getBoundingClientRect().right > right + 1 && !scrolls;
  return (wide && !scrolls) || sticksOut ? [t.innerText.slice(0, 60)] : [];
});
"""


def clipped_code(driver) -> list[str]:
    """Code blocks that need horizontal scrolling, if more than the allowed share do."""
    found = driver.execute_script(SCROLLING_BLOCKS)
    if found["total"] and len(found["scrolling"]) / found["total"] > SCROLLING_CODE_SHARE:
        return [f"{len(found['scrolling'])} of {found['total']} code blocks scroll, e.g. "
                f"{found['scrolling'][0][:90]!r}"]
    return []


RAW_TEX = """
const walker = document.createTreeWalker(document.querySelector('article') || document.body,
                                         NodeFilter.SHOW_TEXT);
const found = [];
while (walker.nextNode()) {
  const node = walker.currentNode, parent = node.parentElement;
  if (!parent || parent.closest('code, pre, script, style, mjx-container, .math') ||
      parent.offsetParent === null) { continue; }
  const match = node.textContent.match(/\\$[^$\\s]([^$]{0,120}[^$\\s])?\\$|\\\\(odot|sigma|tanh|frac|quad)\\b/);
  if (match) { found.push(match[0].slice(0, 40)); }
}
return found;
"""


def raw_tex(driver) -> list[str]:
    """TeX left as text outside code: a $...$ that MathJax never saw, or a bare command."""
    return [f"raw TeX: {text!r}" for text in driver.execute_script(RAW_TEX)]


def clipped_tables(driver) -> list[str]:
    return [f"table cut off: {text!r}" for text in driver.execute_script(CLIPPED_TABLES)]


def wrapped_tab_labels(driver) -> list[str]:
    """Tab sets whose labels do not fit on one row (a label wrapped to a second row)."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('.sd-tab-set')].filter(set => set.offsetParent !== null)"
        ".map(set => [...set.querySelectorAll(':scope > label')].map(l => [l.innerText, l.offsetTop]));")
    return [f"tab labels on {len({top for _, top in labels})} rows: {[name for name, _ in labels]}"
            for labels in rows if len({top for _, top in labels}) > 1]


def unrendered_maths(driver) -> list[str]:
    """Maths the page holds that MathJax did not typeset (it shows as raw TeX)."""
    driver.execute_script("return window.MathJax && MathJax.startup && MathJax.startup.promise")
    raw = driver.execute_script(
        "return [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container'))"
        ".map(e => e.textContent.slice(0, 40));")
    return [f"raw TeX: {text!r}" for text in raw]


def selected_tabs(driver) -> list[str]:
    """The framework selected in each synced tab set of the page."""
    return driver.execute_script(
        "return [...document.querySelectorAll('.sd-tab-set')].map(set => {"
        " const input = set.querySelector(':scope > input:checked');"
        " const label = input && set.querySelector(`:scope > label[for='${input.id}']`);"
        " return label ? label.dataset.syncId : null; }).filter(x => x);")


# --- helpers --------------------------------------------------------------------------------

def built_pages() -> list[str]:
    site = Path(HTML)
    return sorted(str(path.relative_to(site)) for path in site.glob("book/**/*.html"))


def load(driver, url: str) -> None:
    driver.get_log("performance")  # forget earlier pages' requests
    driver.get(url)
    driver.execute_script("return document.fonts && document.fonts.ready")


def wait_for_maths(driver) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.execute_script(
        "return !window.MathJax || !MathJax.startup || MathJax.startup.document === undefined ||"
        " document.querySelectorAll('.math').length === document.querySelectorAll('mjx-container').length"
        " || document.querySelectorAll('mjx-container').length > 0"))


@pytest.fixture(scope="module")
def site(serve):
    if not HTML:
        pytest.skip("run by `make test` after building the book (ROSETTA_BOOK_HTML)")
    return serve(Path(HTML))


# --- the built site --------------------------------------------------------------------------

#: Selects a framework's tab in every tab set of the page, as a reader's click does.
SELECT_FRAMEWORK = """
document.querySelectorAll(`.sd-tab-set > label[data-sync-id='${arguments[0]}']`).forEach(l => l.click());
"""
#: Shows every tab's content at once (each laid out at the width it has when selected).
SHOW_EVERY_TAB = """
const style = document.createElement('style');
style.textContent = '.sd-tab-set > .sd-tab-content { display: block !important; }';
document.head.appendChild(style);
"""


def test_no_page_requests_another_host_and_nothing_is_clipped(browser, site):
    """Each page loaded once: its requests; each framework's tab labels on one row, with that
    framework selected; then, with every tab's content shown at once, no code, table or
    maths of any framework clipped or left as raw TeX."""
    problems = []
    for page in built_pages():
        load(browser, f"{site}{page}")
        problems += [f"{page}: request to another host {url}" for url in requests_to_other_hosts(browser)]
        if browser.execute_script("return document.querySelector('.sd-tab-set')"):
            for framework in FRAMEWORKS:
                browser.execute_script(SELECT_FRAMEWORK, framework)
                problems += [f"{page} ({framework}): {p}" for p in wrapped_tab_labels(browser)]
            browser.execute_script(SHOW_EVERY_TAB)
        found = clipped_code(browser) + clipped_tables(browser) + raw_tex(browser)
        problems += [f"{page}: {p}" for p in found]
    assert not problems, "\n".join(problems)


def test_maths_is_rendered_with_the_network_blocked(browser, site):
    pages = [page for page in built_pages() if 'class="math' in (Path(HTML) / page).read_text()]
    assert pages, "no page of the book has maths to check"
    for page in pages:
        load(browser, site + page)
        wait_for_maths(browser)
        assert not unrendered_maths(browser), page


def test_the_framework_parameter_and_a_click_select_every_tab_set_across_pages(browser, site):
    from selenium.webdriver.common.by import By

    chapters = [page for page in built_pages() if "/chapters/" in page]
    first, second = chapters[0], chapters[1]
    load(browser, f"{site}{first}?framework=mxnet")
    tabs = selected_tabs(browser)
    assert tabs and set(tabs) == {"mxnet"}, tabs
    label = browser.find_element(By.CSS_SELECTOR, ".sd-tab-set > label[data-sync-id='jax']")
    browser.execute_script("arguments[0].scrollIntoView(); arguments[0].click();", label)
    assert set(selected_tabs(browser)) == {"jax"}
    load(browser, site + second)  # the choice follows the reader to the next page
    assert set(selected_tabs(browser)) == {"jax"}


def test_the_copy_button_copies_exactly_the_code(browser, site):
    from selenium.webdriver.common.by import By

    chapter = next(page for page in built_pages() if "/chapters/" in page)
    load(browser, f"{site}{chapter}?framework=pytorch")
    # What the button hands to the clipboard, by either route it may take.
    browser.execute_script(
        "window.copied = null;"
        "navigator.clipboard.writeText = text => { window.copied = text; return Promise.resolve(); };"
        "document.execCommand = command => { if (command === 'copy') window.copied ="
        " (document.activeElement && document.activeElement.value) || String(getSelection());"
        " return true; };")
    block = next(element for element in browser.find_elements(By.CSS_SELECTOR, "div.highlight")
                 if element.is_displayed())
    code = browser.execute_script("return arguments[0].querySelector('pre').innerText;", block)
    button = block.find_element(By.CSS_SELECTOR, "button.copybtn")
    browser.execute_script("arguments[0].click();", button)
    copied = browser.execute_script("return window.copied;")
    assert copied is not None, "the copy button copied nothing"
    assert copied.strip() == code.strip()


def test_every_download_link_answers_with_its_file(site):
    from bs4 import BeautifulSoup

    checked = 0
    for page in built_pages():
        soup = BeautifulSoup((Path(HTML) / page).read_text(), "html.parser")
        for link in soup.select(".rosetta-downloads a[href]"):
            url = urllib.request.urljoin(site + page, link["href"])
            with urllib.request.urlopen(url, timeout=30) as answer:
                body = answer.read()
            assert answer.status == 200 and body, url
            if url.endswith(".ipynb"):
                assert json.loads(body)["cells"], url
            checked += 1
    assert checked >= 2 * 5 * 6, f"only {checked} download links found"


# --- each check fails on a deliberately broken page ---------------------------------------

BROKEN_PAGES = {
    "long_code.html": "<article><div class='highlight' style='width:300px'><pre style='overflow-x:auto'>"
                      + "x = " + "1 + " * 80 + "1</pre></div></article>",
    "clipped_table.html": "<article style='width:300px'><div style='overflow:hidden;width:300px'>"
                          "<table style='width:900px'><tr>" + "<td>wide cell</td>" * 20
                          + "</tr></table></div></article>",
    "cdn_script.html": "<article><script src='https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js'>"
                       "</script><p>hello</p></article>",
    "wrapped_tabs.html": "<div class='sd-tab-set' style='width:200px'>" + "".join(
        f"<input type='radio' id='t{n}' name='s'><label for='t{n}' style='display:inline-block;width:90px'>"
        f"Framework {n}</label>" for n in range(5)) + "</div>",
    "raw_maths.html": "<article><span class='math notranslate nohighlight'>\\(a^2 + b^2\\)</span></article>",
    # the long line in the second tab, hidden as sphinx-design hides an unselected tab
    "long_code_in_a_tab.html": "<article><div class='sd-tab-set'>"
                               "<input type='radio' id='a' name='s' checked><label for='a'>One</label>"
                               "<div class='sd-tab-content'><div class='highlight'><pre>x = 1</pre></div></div>"
                               "<input type='radio' id='b' name='s'><label for='b'>Two</label>"
                               "<div class='sd-tab-content' style='display:none'><div class='highlight' "
                               "style='width:300px'><pre style='overflow-x:auto'>" + "y = " + "2 + " * 80
                               + "2</pre></div></div></div></article>",
}


@pytest.fixture(scope="module")
def broken_site(serve, tmp_path_factory):
    folder = tmp_path_factory.mktemp("broken-site")
    for name, body in BROKEN_PAGES.items():
        (folder / name).write_text(f"<!doctype html><html><body>{body}</body></html>")
    return serve(folder)


def test_a_long_code_line_is_caught(browser, broken_site):
    load(browser, broken_site + "long_code.html")
    assert clipped_code(browser) and "1 + 1" in clipped_code(browser)[0]


def test_a_long_code_line_in_a_tab_not_selected_is_caught_once_every_tab_shows(browser, broken_site):
    load(browser, broken_site + "long_code_in_a_tab.html")
    assert clipped_code(browser) == []  # hidden, as the page opens
    browser.execute_script(SHOW_EVERY_TAB)
    assert clipped_code(browser) and "2 + 2" in clipped_code(browser)[0]


def test_a_clipped_table_is_caught(browser, broken_site):
    load(browser, broken_site + "clipped_table.html")
    problems = clipped_tables(browser)
    assert len(problems) == 1 and problems[0].startswith("table cut off: 'wide cell")


def test_a_script_from_a_cdn_is_caught(browser, broken_site):
    load(browser, broken_site + "cdn_script.html")
    assert requests_to_other_hosts(browser) == ["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"]


def test_maths_left_as_raw_tex_is_caught(browser, broken_site):
    load(browser, broken_site + "raw_maths.html")
    assert unrendered_maths(browser) == ["raw TeX: '\\\\(a^2 + b^2\\\\)'"]


def test_tab_labels_wrapping_to_a_second_row_are_caught(browser, broken_site):
    load(browser, broken_site + "wrapped_tabs.html")
    assert wrapped_tab_labels(browser) and "rows" in wrapped_tab_labels(browser)[0]


# --- issue 24: what a reader takes away ------------------------------------------------------

COMPACT_COLUMNS = """
const table = document.querySelector('.rosetta-compact-table table');
if (!table) { return null; }
table.scrollIntoView();
return [...table.querySelectorAll('thead th')].map(th => {
  const box = th.getBoundingClientRect();
  return [th.innerText.trim(), box.left, box.right];
});
"""


def test_every_compact_table_shows_its_five_framework_columns_in_the_window(browser, site):
    """At 1280×900, whichever framework's tab is chosen, every column of a compact table
    (the concept, the five frameworks, what it was checked on) lies inside the window."""
    width = browser.execute_script("return window.innerWidth")
    problems = []
    pages = [page for page in built_pages() if page.startswith("book/tables/")]
    assert pages, "no translation tables were built"
    for page in pages:
        for framework in FRAMEWORKS:
            load(browser, f"{site}{page}?framework={framework}")
            columns = browser.execute_script(COMPACT_COLUMNS)
            if columns is None:
                problems.append(f"{page}: no compact table")
                break
            titles = [title for title, _, _ in columns]
            if not all(any(FRAMEWORK_TITLES[name] in title for title in titles) for name in FRAMEWORKS):
                problems.append(f"{page}: columns {titles}")
            problems += [f"{page} ({framework}): column {title!r} spans {left:.0f}-{right:.0f} px of {width}"
                         for title, left, right in columns if left < 0 or right > width + 1]
    assert not problems, problems


WIDE_TABLES = """
return [...document.querySelectorAll('article table')].filter(t => t.offsetParent !== null)
  .filter(t => t.scrollWidth > t.clientWidth + 1)
  .map(t => [t.innerText.slice(0, 60), t.scrollWidth, t.clientWidth]);
"""


def test_every_appendix_table_fits_the_text_column(browser, site):
    """At 1280×900 every table of the appendix shows all its columns: none hides some of
    them behind a sideways scroll (the Results overview gives a rate's device, profile and
    date the rate's own cell, not columns of their own)."""
    pages = [page for page in built_pages() if page.startswith("book/appendix/")]
    assert pages, "no appendix was built"
    problems = []
    for page in pages:
        load(browser, site + page)
        problems += [f"{page}: table {text!r} is {wide} px wide in a {shown} px box"
                     for text, wide, shown in browser.execute_script(WIDE_TABLES)]
    assert not problems, "\n".join(problems)


CHECKLIST_STATE = """
const list = document.querySelector('.rosetta-checklist');
const shown = [...list.querySelectorAll('.rosetta-checklist-line')].filter(l => !l.closest('section').hidden);
return {pair: [list.querySelector('select[name="from"]').value, list.querySelector('select[name="to"]').value],
        shown: shown.map(l => l.dataset.frameworks.split(' ')),
        first: shown.filter(l => l.parentElement.tagName === 'OL').map(l => l.dataset.cost),
        cells: shown.flatMap(l => [...l.querySelectorAll('li[data-framework]')]).map(c => c.dataset.framework),
        count: list.querySelector('.rosetta-checklist-count').textContent,
        blocks: [...list.querySelectorAll('section')].filter(b => !b.hidden).length,
        total: list.querySelectorAll('.rosetta-checklist-line').length};
"""


def checklist_state(browser) -> dict:
    """The checklist's state once the chosen pair's list is shown (a pair other than the
    page's opening one loads from its own file)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30, poll_frequency=0.05).until(lambda d: "loading" not in d.execute_script(
        "return document.querySelector('.rosetta-checklist-count').textContent"))
    return browser.execute_script(CHECKLIST_STATE)


def test_the_checklist_shows_the_ranked_list_of_the_pair_chosen(browser, site):
    load(browser, f"{site}book/porting_checklist.html?from=mxnet&to=chainer")
    state = checklist_state(browser)
    assert state["pair"] == ["mxnet", "chainer"] and state["total"] > 0 and state["blocks"] == 1
    assert state["shown"] and all(set(line) == {"mxnet", "chainer"} for line in state["shown"])
    assert set(state["cells"]) == {"mxnet", "chainer"}
    assert len(state["first"]) <= 10 and set(state["first"]) <= {"silent", "condition"}
    assert state["count"] == f"{len(state['shown'])} traps, {len(state['first'])} of them silent first"
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("css selector", '.rosetta-checklist select[name="to"]')).select_by_value("jax")
    changed = checklist_state(browser)
    assert changed["pair"] == ["mxnet", "jax"] and "to=jax" in browser.current_url
    assert changed["shown"] and all(set(line) == {"mxnet", "jax"} for line in changed["shown"])
    Select(browser.find_element("css selector", '.rosetta-checklist select[name="to"]')).select_by_value("mxnet")
    same = checklist_state(browser)
    assert same["blocks"] == 0 and same["count"] == "choose two different frameworks"
