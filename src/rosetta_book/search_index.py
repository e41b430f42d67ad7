"""The built site's search index: one record per section, so a search lands on the answer.

Readers use the book as a translation guide: a question ("flax conv padding") is answered
by one row of a table page or one section of a chapter, not by a page of forty rows. This
module cuts every built page into its sections (a section's heading, its prose, its tabs'
code and what those print, without the sections nested in it) and indexes each as a
record of its own with Pagefind, whose static index and search run in the reader's
browser: nothing leaves the site. A record's address is its section's anchor (the MyST
label where the section has one), so every result opens the page where the answer is.

What serves only the comparison stays out of the records: the build banner, the
downloads' notes, a table page's overview table, cells not tagged with a framework (the
comparison cells, folded on the page), the contents lists, permalinks and the
checklist's own lists. Identifiers are indexed whole and by their
parts (`ignore_index` also as "ignore index", `nn.LayerNorm` also as "layer norm").

A table row that the porting checklist lists for a pair of frameworks (their cells
differ) carries that pair as the record's `pair` filter ("pytorch>jax"), which the search
page's from/to choice narrows to.

    python -m rosetta_book.search_index _build/html     # what the build does at its end
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bs4 import BeautifulSoup, Tag

from .checklist_pages import checklist_blocks

#: The folder of the site that holds the index and Pagefind's search code.
INDEX_FOLDER = "pagefind"
#: The part of a built page that holds its text (the theme's article).
ARTICLE = "article.bd-article"
#: What a record leaves out: the build banner, the downloads' notes, a table page's
#: overview (every row's line: it would match every query), cells not tagged with a
#: framework (the comparison's), contents lists, permalinks and the checklist's lists.
LEFT_OUT = (".rosetta-banner", ".rosetta-downloads", ".rosetta-ran-on", ".rosetta-compact-table",
            "div.cell.tag_comparison", "div.toctree-wrapper", "nav", "a.headerlink", ".rosetta-checklist",
            "script", "style", "input")
#: What a word in a tab's code counts for, against 1 for a word of prose.
CODE_WEIGHT = "0.3"
HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
#: An identifier worth indexing by its parts: snake_case, dotted or CamelCase.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


class SearchIndexError(Exception):
    """The site cannot be indexed: the message names the page or the folder."""


@dataclass
class Record:
    """One section of a built page, as the index holds it."""

    url: str  # relative to the site's root, with the section's anchor
    title: str
    page: str  # the page's title
    html: str  # the section's own content, as indexed
    pairs: list[str] = field(default_factory=list)

    def document(self) -> str:
        """The record as the small HTML document Pagefind indexes: its heading weighs
        more than its prose; page title and pairs are metadata and filters."""
        filters = "".join(f'<span data-pagefind-filter="pair:{html.escape(pair)}"></span>'
                          for pair in self.pairs)
        parts = identifier_parts(BeautifulSoup(self.html, "html.parser").get_text(" "))
        extra = f'<p data-pagefind-weight="0.5">{html.escape(parts)}</p>' if parts else ""
        meta = "".join(f'<span data-pagefind-meta="{key}[data-value]" data-value="{html.escape(value)}"></span>'
                       for key, value in (("url", self.url), ("title", self.title), ("page", self.page)))
        return (f'<html lang="en"><head><title>{html.escape(self.title)}</title></head><body>'
                f"<main data-pagefind-body>{meta}{self.html}{extra}{filters}</main></body></html>")


def identifier_parts(text: str) -> str:
    """The parts of the text's compound identifiers, each identifier's parts once:
    `ignore_index` gives "ignore index ignore_index", `nn.BatchNorm2d` "nn batch norm 2 d
    batchnorm2d batchnorm"; a name of three dotted parts or more also gives its shorter
    dotted names, as readers write them: `torch.nn.Linear` "nn.linear" too."""
    seen, out = set(), []
    for name in IDENTIFIER.findall(text):
        pieces = [piece for piece in re.split(r"[._]+", name) if piece]
        words = [part.lower() for piece in pieces for part in CAMEL.findall(piece)]
        if len(words) < 2 or name in seen:
            continue  # a plain word is indexed as it is
        seen.add(name)
        glued = [re.sub(r"\d.*$", "", piece).lower() for piece in pieces]  # BatchNorm2d: batchnorm
        dotted = name.lower().split(".")
        shorter = [".".join(dotted[start:]) for start in range(1, len(dotted) - 1)]
        out.append(" ".join(dict.fromkeys(word for word in words + [p.lower() for p in pieces] + glued + shorter
                                          if word)))
    return " · ".join(out)


def _heading(section: Tag) -> Tag | None:
    for child in section.children:
        if isinstance(child, Tag) and child.name in HEADINGS:
            return child
        if isinstance(child, Tag) and child.name not in ("span",):
            return None
    return None


def _anchor(section: Tag) -> str:
    """The section's label (a span with an id just before its heading) where it has
    one, else the section's own id."""
    for child in section.children:
        if isinstance(child, Tag) and child.name == "span" and child.get("id"):
            return child["id"]
        if isinstance(child, Tag):
            break
    return section["id"]


def page_records(text: str, url: str) -> list[Record]:
    """Every section of one built page with a heading, as records: `url` is the page's
    path relative to the site's root."""
    soup = BeautifulSoup(text, "html.parser")
    article = soup.select_one(ARTICLE)
    if article is None:
        raise SearchIndexError(f"{url}: no {ARTICLE} (not a page of this book's theme)")
    for node in article.select(", ".join(LEFT_OUT)):
        node.decompose()
    for cell in article.select("div.cell"):  # a cell no framework's tab shows is the comparison's
        if not any(name.startswith("tag_") for name in cell.get("class", [])):
            cell.decompose()
        else:  # a tab's code and what it prints weigh less than the section's prose
            cell["data-pagefind-weight"] = CODE_WEIGHT
    sections = [s for s in article.find_all("section") if s.get("id") and _heading(s) is not None]
    if not sections:
        return []
    page_title = _heading(sections[0]).get_text(" ", strip=True)
    records = []
    for section in sections:
        title = _heading(section).get_text(" ", strip=True)
        own = [str(child) for child in section.children if not (isinstance(child, Tag) and child.name == "section")]
        body = "".join(own)
        if not BeautifulSoup(body, "html.parser").get_text(" ", strip=True):
            continue
        records.append(Record(f"{url}#{_anchor(section)}", title, page_title, body))
    return records


def checklist_pairs(blocks: dict[tuple[str, str], str]) -> dict[str, list[str]]:
    """From the checklist's lists (each pair's HTML, rosetta_book.checklist_pages): each
    table row's anchor (page#label) with the pairs of frameworks ("pytorch>jax") whose
    cells differ there."""
    pairs: dict[str, list[str]] = {}
    for (source, target), body in blocks.items():
        for link in BeautifulSoup(body, "html.parser").select(".rosetta-checklist-line a[href]"):
            pairs.setdefault("book/" + link["href"].split("?")[0], []).append(f"{source}>{target}")
    return pairs


def site_records(site: Path) -> list[Record]:
    """The records of every page of a built site (the folders Sphinx keeps its own files
    in left out), the checklist's pairs attached to the rows they name."""
    site = Path(site)
    if not (site / "index.html").is_file():
        raise SearchIndexError(f"{site}: no index.html: not a built site")
    records = []
    for path in sorted(site.rglob("*.html")):
        relative = path.relative_to(site)
        if any(part.startswith("_") for part in relative.parts) or relative.parts[0] == INDEX_FOLDER:
            continue
        if relative.name in ("search.html", "genindex.html"):
            continue
        text = path.read_text(encoding="utf-8")
        if 'class="bd-article' not in text:
            continue  # a redirect or a download's page: nothing a reader searches
        records += page_records(text, relative.as_posix())
    pairs = checklist_pairs(checklist_blocks(site))
    for record in records:
        record.pairs = sorted(set(pairs.get(record.url, [])))
    return records


def build_index(site: Path) -> int:
    """Index every section of a built site into `site/pagefind/`, replacing the index
    there only once the new one is complete. Returns the number of records."""
    site = Path(site)
    records = site_records(site)
    if not records:
        raise SearchIndexError(f"{site}: no page with sections to index")
    fresh, pages = site / f".{INDEX_FOLDER}-new", site / f".{INDEX_FOLDER}-records"
    for folder in (fresh, pages):
        shutil.rmtree(folder, ignore_errors=True)
    pages.mkdir()
    try:  # each record a small page of its own; Pagefind's indexer reads them all at once
        for number, record in enumerate(records):
            (pages / f"{number:05d}.html").write_text(record.document(), encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "pagefind", "--site", str(pages), "--output-path",
                               str(fresh.resolve())], check=False, capture_output=True, text=True)
    except OSError as error:
        raise SearchIndexError(f"cannot run Pagefind ({error})") from error
    finally:
        shutil.rmtree(pages, ignore_errors=True)
    if done.returncode != 0 or not (fresh / "pagefind.js").is_file():
        shutil.rmtree(fresh, ignore_errors=True)
        raise SearchIndexError(f"Pagefind failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    shutil.rmtree(site / INDEX_FOLDER, ignore_errors=True)
    fresh.rename(site / INDEX_FOLDER)
    return len(records)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m rosetta_book.search_index SITE_FOLDER", file=sys.stderr)
        return 2
    try:
        count = build_index(Path(argv[0]))
    except SearchIndexError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"indexed {count} sections into {Path(argv[0]) / INDEX_FOLDER}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
