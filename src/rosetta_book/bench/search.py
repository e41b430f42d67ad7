"""How often the built site's search lands a reader on the answer to a porting question.

    python -m rosetta_book.bench.search --site _build/html [--questions tests/search_questions.json]
        [--sample N] [--seed S] [--json out.json]

Readers use the book as a translation guide: they type a question in their own words and
expect to land on the table row or section that answers it. The questions
(``tests/search_questions.json``) are written as readers ask them, each with a short form
of at most three words and the anchors that answer it: a MyST label of the book
(``tables-layers-max-pool-ceil``) or ``PAGE.html#section``.

The command serves the built site on 127.0.0.1 (a thread of its own), opens headless
Chromium through Selenium with every other host blocked, and asks every question in both
forms as a reader's query does: it loads the site's search page, ``search.html?q=...``,
waits until the page's script (``_static/rosetta-search.js``, searching the index that
``rosetta_book.search_index`` builds) has written its summary line (which it does after
the last result) and reads the results' links. A question LANDS when one of the
first three links points at an answer: the answer's page, with a fragment that is the
answer's anchor or an id of the section it labels (Sphinx links a title it found to its
section's id; a MyST label is a span of its own inside that section). A link to the right
page without a fragment opens the page at its top: that does not land, and is counted on
its own. The time runs, on the page's own clock, from the search page's navigation start
(the reader pressing Enter) to the results list being complete, after one warm-up query
that fills the browser's cache, as any later search of a reader finds it.

It prints, per form, how many questions land, how many have the answer's page among the
first three, the median time with its quartiles, and the worst misses with what came
first. It measures and gates nothing: it exits 0 whatever it found, 2 on bad input (no
built site, a question file that does not parse, an answer that is no anchor of any page
of the site, each named) and 3 without a browser.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import re
import shutil
import statistics
import sys
import threading
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote_plus, unquote, urlsplit

from ..environments import ROOT

DEFAULT_QUESTIONS = ROOT / "tests" / "search_questions.json"
FORMS = ("question", "short")
FIELDS = ("question", "short", "answers", "why")
TOP = 3
WIDTH, HEIGHT = 1280, 900
#: Seconds a search may take before it counts as never finishing.
SEARCH_TIMEOUT = 30.0
WARM_UP_QUERY = "batch norm"

SECTION = re.compile(r'<section\b[^>]*?\bid="([^"]+)"[^>]*>\s*((?:<span id="[^"]+"></span>\s*)*)')
SPAN_ID = re.compile(r'<span id="([^"]+)"></span>')
ANY_ID = re.compile(r'\bid="([^"]+)"')

#: Runs in every page the browser opens: notes, on the page's clock (milliseconds from its
#: navigation start), when the first result appears and when the summary line is written.
OBSERVER = """
window.__rosettaSearch = {first: null, done: null};
document.addEventListener('DOMContentLoaded', () => {
  const out = document.getElementById('search-results');
  if (!out) { return; }
  const note = () => {
    const mark = window.__rosettaSearch;
    if (mark.first === null && out.querySelector('ul.search > li')) { mark.first = performance.now(); }
    const status = out.querySelector('.search-summary');
    if (mark.done === null && status && status.textContent.trim()) {
      mark.done = performance.now();
      if (mark.first === null) { mark.first = mark.done; }
    }
  };
  new MutationObserver(note).observe(out, {childList: true, subtree: true, characterData: true});
});
"""

RESULTS = """
return [...document.querySelectorAll('#search-results ul.search > li > a')]
  .map(a => [a.textContent.trim(), a.href]);
"""


class BadInput(Exception):
    """The site, the question file or an answer cannot be measured: the message says which."""


class BrowserMissing(Exception):
    """No Selenium, Chromium or chromedriver on this machine."""


@dataclass(frozen=True)
class Anchor:
    """A place an answer names: its page (relative to the site) and the ids that reach it."""

    page: str
    ids: frozenset[str]


@dataclass(frozen=True)
class Link:
    title: str
    page: str
    fragment: str

    def __str__(self) -> str:
        return f"{self.title} ({self.page}{'#' + self.fragment if self.fragment else ''})"


# --- input ----------------------------------------------------------------------------------

def load_questions(path: Path) -> list[dict]:
    """The question file's entries, each with its question, short form, answers and why."""
    try:
        questions = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise BadInput(f"{path}: cannot read the question file ({error})") from error
    except json.JSONDecodeError as error:
        raise BadInput(f"{path}: the question file does not parse ({error})") from error
    if not isinstance(questions, list) or not questions:
        raise BadInput(f"{path}: expected a list of questions")
    for number, entry in enumerate(questions):
        if not isinstance(entry, dict):
            raise BadInput(f"{path}: entry {number} is not an object")
        missing = [field for field in FIELDS if not entry.get(field)]
        if missing:
            raise BadInput(f"{path}: entry {number} ({entry.get('question')!r}) has no {', '.join(missing)}")
        if not isinstance(entry["answers"], list) or not all(isinstance(a, str) for a in entry["answers"]):
            raise BadInput(f"{path}: entry {number} ({entry['question']!r}): answers must be a list of strings")
    return questions


def check_site(site: Path) -> Path:
    site = Path(site)
    for name in ("search.html", "pagefind/pagefind.js"):
        if not (site / name).is_file():
            raise BadInput(f"{site}: no {name}: not a built site (the folder `make book` prints)")
    return site


def page_ids(html: str) -> dict[str, frozenset[str]]:
    """Every id of a built page, each with the ids that reach the same place: a section's
    own id and the labels' spans at its start."""
    places = {name: frozenset({name}) for name in ANY_ID.findall(html)}
    for found in SECTION.finditer(html):
        together = frozenset({found.group(1), *SPAN_ID.findall(found.group(2))})
        for name in together:
            places[name] = together
    return places


def site_ids(site: Path) -> dict[str, dict[str, frozenset[str]]]:
    """The ids of every page of a built site, by the page's path relative to it."""
    pages = {}
    for path in sorted(site.rglob("*.html")):
        relative = path.relative_to(site)
        if any(part.startswith("_") for part in relative.parts):
            continue
        pages[relative.as_posix()] = page_ids(path.read_text(encoding="utf-8", errors="replace"))
    return pages


def resolve(answer: str, pages: dict[str, dict[str, frozenset[str]]]) -> list[Anchor]:
    """The places an answer names: ``PAGE.html#id`` on that page; a label on the pages that
    hold it (a label is unique in the book; where another page uses the same id for
    something else, the section the label opens is preferred)."""
    if "#" in answer:
        page, _, anchor = answer.partition("#")
        page = page.lstrip("/")
        if page not in pages:
            raise BadInput(f"answer {answer!r}: the site has no page {page!r}")
        if anchor not in pages[page]:
            raise BadInput(f"answer {answer!r}: {page} has no anchor {anchor!r}")
        return [Anchor(page, pages[page][anchor])]
    found = [Anchor(page, ids[answer]) for page, ids in pages.items() if answer in ids]
    if not found:
        raise BadInput(f"answer {answer!r}: no page of the site has this anchor")
    labelled = [anchor for anchor in found if len(anchor.ids) > 1]
    return labelled or found


def resolve_all(questions: list[dict], site: Path) -> list[list[Anchor]]:
    pages = site_ids(site)
    resolved, problems = [], []
    for entry in questions:
        anchors = []
        for answer in entry["answers"]:
            try:
                anchors += resolve(answer, pages)
            except BadInput as error:
                problems.append(f"{entry['question']!r}: {error}")
        resolved.append(anchors)
    if problems:
        raise BadInput("answers that are no anchor of the site:\n  " + "\n  ".join(problems))
    return resolved


def sample(questions: list[dict], count: int | None, seed: int = 0) -> list[dict]:
    if count is None or count >= len(questions):
        return list(questions)
    return random.Random(seed).sample(questions, count)


# --- judging a search's links ---------------------------------------------------------------

def to_link(title: str, href: str, base: str) -> Link:
    """A result's link as the site's page path and fragment."""
    url, root = urlsplit(href), urlsplit(base)
    path = unquote(url.path)
    path = path[len(root.path):] if path.startswith(root.path) else path.lstrip("/")
    return Link(" ".join(title.split()), path, unquote(url.fragment))


def lands(link: Link, anchors: list[Anchor]) -> bool:
    return any(link.page == anchor.page and link.fragment in anchor.ids for anchor in anchors)


def judge(links: list[Link], anchors: list[Anchor], top: int = TOP) -> dict:
    """What a reader finds among the first ``top`` links: the answer (``landed``), the
    answer's page anywhere on it (``right_page``), or only that page's top (``page_top``);
    and the rank of the first link to an answer among all results (None: none)."""
    pages = {anchor.page for anchor in anchors}
    first = links[:top]
    landed = any(lands(link, anchors) for link in first)
    rank = next((number for number, link in enumerate(links, 1) if lands(link, anchors)), None)
    return {
        "landed": landed,
        "right_page": any(link.page in pages for link in first),
        "page_top": not landed and any(link.page in pages and not link.fragment for link in first),
        "rank": rank,
    }


# --- the browser ------------------------------------------------------------------------------

class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve_site(site: Path):
    """The site served on 127.0.0.1 at a free port, from a thread; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    for program in ("chromium", "chromedriver"):
        if not shutil.which(program):
            return f"no {program} on this machine"
    return None


def chrome_options():
    """Headless Chromium's options at 1280x900 with every host but 127.0.0.1 blocked: any
    other host fails to resolve, so a page that reaches out shows it."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}",
                     "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        options.add_argument(argument)
    return options


@contextlib.contextmanager
def open_browser():
    """Headless Chromium through Selenium (:func:`chrome_options`), with the observer that
    times searches installed in every page it opens."""
    reason = browser_missing()
    if reason:
        raise BrowserMissing(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=chrome_options())
    try:
        driver.set_page_load_timeout(60)
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": OBSERVER})
        yield driver
    finally:
        driver.quit()


def search(driver, base: str, query: str, timeout: float = SEARCH_TIMEOUT) -> dict:
    """One query as a reader makes it: the search page with ``?q=``, until the results list
    is complete. Returns its links and the seconds to the first result and to the last
    (None for both where the search never finished)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base}search.html?q={quote_plus(query)}")
    try:
        marks = WebDriverWait(driver, timeout, poll_frequency=0.02).until(
            lambda d: (d.execute_script("return window.__rosettaSearch && window.__rosettaSearch.done !== null"
                                        " ? window.__rosettaSearch : null")))
    except TimeoutException:
        return {"links": [], "first_s": None, "done_s": None}
    links = [to_link(title, href, base) for title, href in driver.execute_script(RESULTS)]
    return {"links": links, "first_s": round(marks["first"] / 1000, 4),
            "done_s": round(marks["done"] / 1000, 4)}


# --- the benchmark ----------------------------------------------------------------------------

def quartiles(values: list[float]) -> tuple[float, float, float] | None:
    if not values:
        return None
    if len(values) == 1:
        return (values[0],) * 3
    low, median, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, median, high


def form_figures(rows: list[dict], form: str) -> dict:
    """One form's figures over the questions asked."""
    mine = [row["asked"][form] for row in rows]
    times = [entry["done_s"] for entry in mine if entry["done_s"] is not None]
    firsts = [entry["first_s"] for entry in mine if entry["first_s"] is not None]
    return {
        "asked": len(mine),
        "landed": sum(entry["landed"] for entry in mine),
        "right_page": sum(entry["right_page"] for entry in mine),
        "page_top": sum(entry["page_top"] for entry in mine),
        "no_results": sum(not entry["links"] and entry["done_s"] is not None for entry in mine),
        "any_section": sum(any(link.fragment for link in entry["links"]) for entry in mine),
        "unfinished": sum(entry["done_s"] is None for entry in mine),
        "seconds": times,
        "quartiles_s": quartiles(times),
        "median_first_result_s": statistics.median(firsts) if firsts else None,
    }


def ask_questions(site: Path, questions: list[dict], *, driver=None, base: str | None = None,
            warm_up: bool = True) -> dict:
    """Ask every question in both forms on the built site and judge what comes back.
    Opens its own server and browser unless given them (``driver`` and ``base``)."""
    site = check_site(site)
    anchors = resolve_all(questions, site)
    with contextlib.ExitStack() as stack:
        if base is None:
            base = stack.enter_context(serve_site(site))
        if driver is None:
            driver = stack.enter_context(open_browser())
        if warm_up:
            search(driver, base, WARM_UP_QUERY)
        rows = []
        for entry, places in zip(questions, anchors):
            row = {"question": entry["question"], "short": entry["short"], "answers": entry["answers"],
                   "why": entry["why"], "asked": {}}
            for form in FORMS:
                found = search(driver, base, entry[form])
                row["asked"][form] = {"query": entry[form], **found, **judge(found["links"], places),
                                      "results": len(found["links"])}
            rows.append(row)
    return {"site": str(site), "questions": len(questions), "top": TOP, "rows": rows,
            "forms": {form: form_figures(rows, form) for form in FORMS}}


def worst_misses(rows: list[dict], form: str, count: int = 10) -> list[tuple[dict, dict]]:
    """The misses of a form, worst first: the answer nowhere among the results and its page
    not in the first three, then its page there but only its top, then by how far down the
    answer came; in the question file's order otherwise."""
    misses = [(row, row["asked"][form]) for row in rows if not row["asked"][form]["landed"]]
    misses.sort(key=lambda pair: (pair[1]["rank"] is not None, pair[1]["right_page"], -(pair[1]["rank"] or 0)))
    return misses[:count]


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def report_text(report: dict, misses: int = 10) -> str:
    lines = [(f"Search on {report['site']}: {report['questions']} reader questions, each asked in two forms "
              "(the question as written, and its short form of at most three words).")]
    for form in FORMS:
        figures = report["forms"][form]
        asked = figures["asked"]
        lines += ["", f"== {'the question as a reader writes it' if form == 'question' else 'the short form'} =="]
        lines.append(f"landing on the answer in the top {TOP}: {figures['landed']} of {asked} "
                     f"({percent(figures['landed'], asked)})")
        lines.append(f"right page in the top {TOP} (any place on it): {figures['right_page']} of {asked}")
        lines.append(f"right page in the top {TOP}, but only its top (no section): {figures['page_top']} of {asked}")
        lines.append(f"results that link any section at all: {figures['any_section']} of {asked}")
        lines.append(f"no result at all: {figures['no_results']} of {asked}"
                     + (f"; never finished: {figures['unfinished']}" if figures["unfinished"] else ""))
        if figures["quartiles_s"]:
            low, median, high = figures["quartiles_s"]
            lines.append(f"median time to the complete results: {1000 * median:.0f} ms "
                         f"(quartiles {1000 * low:.0f}-{1000 * high:.0f} ms; first result shown after "
                         f"{1000 * figures['median_first_result_s']:.0f} ms, median)")
        worst = worst_misses(report["rows"], form, misses)
        if worst:
            lines.append("worst misses (question -> what came first):")
        for row, entry in worst:
            first = str(entry["links"][0]) if entry["links"] else "no result"
            where = (f"answer at rank {entry['rank']} of {entry['results']}" if entry["rank"]
                     else f"answer not among the {entry['results']} results")
            lines.append(f"  - {entry['query']!r} -> {first} [{where}]")
    return "\n".join(lines)


def to_json(report: dict) -> dict:
    """The report as plain data: every link as title, page and fragment."""
    rows = [{**row, "asked": {form: {**entry, "links": [vars(link) for link in entry["links"]]}
                              for form, entry in row["asked"].items()}} for row in report["rows"]]
    return {**report, "rows": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.bench.search",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, required=True, help="the built site (the folder with search.html)")
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--sample", type=int, default=None, help="ask only N questions, drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="the draw of --sample")
    parser.add_argument("--json", type=Path, default=None, help="write every question's results here")
    args = parser.parse_args(argv)
    try:
        check_site(args.site)
        questions = sample(load_questions(args.questions), args.sample, args.seed)
        report = ask_questions(args.site, questions)
    except BadInput as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BrowserMissing as error:
        print(f"error: no browser to search with: {error}", file=sys.stderr)
        return 3
    print(report_text(report))
    if args.json:
        args.json.write_text(json.dumps(to_json(report), indent=1), encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
