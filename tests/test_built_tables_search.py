"""The built site's search finds every API name of every translation table on its page.

Each page under book/tables/ opens with a compact table whose cells hold the call each tab
marks as its translation (`nnx.Conv(...)`, `L.Convolution2D(...)`). A reader types such a name into the site's
search box; Sphinx's searchtools.js splits the query into words (on everything that is
not a letter, digit or underscore), drops stop words and pure numbers, stems each word
with the language's stemmer and looks each up in the index `searchindex.js`. This test
does the same with Sphinx's own stemmer and stop words (its indexer splits text into the
same words of letters, digits and underscores) and requires the table's page among the documents of every word.

It reads the site named by ROSETTA_BOOK_HTML (the folder holding searchindex.js) and
skips without one; the lead runs it against a real build. The fixture tests below run
always: they show that the check passes on an index that holds every name and reports
the name an index lacks.
"""

from __future__ import annotations

import json
import os
import re
from importlib import import_module
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
TABLE_PAGES = sorted((ROOT / "book" / "tables").glob("*.md"))
HTML_VARIABLE = "ROSETTA_BOOK_HTML"
PREFIX, SUFFIX = "Search.setIndex(", ")"


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


def search_language(html: Path | None = None):
    """Sphinx's search language of the site (documentation_options.js), English by default."""
    from sphinx.search import languages

    code = "en"
    options = html / "_static" / "documentation_options.js" if html else None
    if options and options.is_file():
        found = re.search(r"LANGUAGE:\s*'([^']*)'", options.read_text(encoding="utf-8"))
        if found and found.group(1) in languages:
            code = found.group(1)
    kind = languages[code]
    if isinstance(kind, str):
        module, _, name = kind.rpartition(".")
        kind = getattr(import_module(module), name)
    return kind({})


def query_terms(name: str, language) -> list[str]:
    """What searchtools.js searches for when the name is typed: split as its splitQuery
    (Python's \\W+), lower case, without stop words and pure numbers, stemmed."""
    terms = []
    for word in re.split(r"\W+", name.strip()):
        lower = word.lower()
        if not word or lower in language.stopwords or re.fullmatch(r"\d+", word):
            continue
        terms.append(language.stem(lower).lower())
    return list(dict.fromkeys(terms))


def load_index(path: Path) -> dict:
    text = path.read_text(encoding="utf-8").strip()
    if not (text.startswith(PREFIX) and text.endswith(SUFFIX)):
        raise ValueError(f"{path}: not a Sphinx search index (Search.setIndex({{...}}))")
    return json.loads(text[len(PREFIX):-len(SUFFIX)])


def documents(index: dict, term: str) -> set[int]:
    """The documents searchtools.js finds for one term: exact matches in the text and
    title terms, and for terms longer than two characters that are not a text term,
    every term containing it (its partial matches)."""
    found: set[int] = set()
    for table in (index.get("terms", {}), index.get("titleterms", {})):
        hits = table.get(term)
        if hits is not None:
            found |= {hits} if isinstance(hits, int) else set(hits)
        if len(term) > 2 and term not in index.get("terms", {}):
            for other, hits in table.items():
                if term in other:
                    found |= {hits} if isinstance(hits, int) else set(hits)
    return found


def missing_names(index: dict, docname: str, names: list[str], language) -> list[str]:
    """The names whose search does not return the page ``docname``: the page must be among
    the documents of every term. (searchtools.js is laxer: it also shows a page that
    matches as many terms as the query has terms longer than two characters.)"""
    document = index["docnames"].index(docname)
    missing = []
    for name in names:
        terms = query_terms(name, language)
        if not terms:
            continue  # an operator such as `+`: there is nothing to search for
        matched = [term for term in terms if document in documents(index, term)]
        if matched != terms:
            missing.append(f"{name} (terms {terms}, found on the page: {matched})")
    return missing


def test_the_tables_have_names_to_search_for():
    assert TABLE_PAGES, "no pages under book/tables/"
    for page in TABLE_PAGES:
        assert compact_table_names(page), f"{page.name}: no compact table with API names"


@pytest.fixture(scope="module")
def built_index():
    folder = os.environ.get(HTML_VARIABLE)
    if not folder:
        pytest.skip(f"set {HTML_VARIABLE} to a built site's folder (holding searchindex.js) to check its search")
    html = Path(folder)
    if not (html / "searchindex.js").is_file():
        pytest.fail(f"{HTML_VARIABLE}={folder}: no searchindex.js there; build the site first")
    return html, load_index(html / "searchindex.js")


@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda page: page.stem)
def test_the_sites_search_finds_every_name_of_the_table_on_its_page(built_index, page):
    html, index = built_index
    docname = f"book/tables/{page.stem}"
    assert docname in index["docnames"], f"{docname} is not in the built site (is it in _toc.yml?)"
    missing = missing_names(index, docname, compact_table_names(page), search_language(html))
    assert not missing, f"the site's search does not find these names on {docname}:\n" + "\n".join(missing)


# --- The check itself, on fixture indexes made from the tables ------------------------

def fixture_index(page: Path, language, leave_out: str | None = None) -> dict:
    """An index in which the page holds every word of its table's names, except the
    words of ``leave_out`` that no other name uses."""
    names = compact_table_names(page)
    kept = {term for name in names if name != leave_out for term in query_terms(name, language)}
    removed = set(query_terms(leave_out, language)) - kept if leave_out else set()
    terms = {term: 1 for term in kept - removed}  # document 1: the page
    return {"docnames": ["index", f"tables/{page.stem}"], "terms": terms, "titleterms": {}}


def test_splitting_and_stemming_follow_sphinx():
    language = search_language()
    assert query_terms("nnx.Conv", language) == ["nnx", "conv"]
    assert query_terms("L.Convolution2D", language) == ["l", language.stem("convolution2d")]
    assert query_terms("padding=((1, 2), (0, 1))", language) == ["pad"]  # numbers dropped, stemmed
    assert language.split("nnx.Conv") == ["nnx", "Conv"]  # the indexer splits text the same way


def test_an_index_with_every_name_passes():
    language = search_language()
    for page in TABLE_PAGES:
        index = fixture_index(page, language)
        assert missing_names(index, f"tables/{page.stem}", compact_table_names(page), language) == []


def test_an_index_without_a_name_reports_it(tmp_path):
    language = search_language()
    page = ROOT / "book" / "tables" / "layers.md"
    assert "L.EmbedID" in compact_table_names(page)  # no other name's term contains "embedid"
    index = fixture_index(page, language, leave_out="L.EmbedID")
    path = tmp_path / "searchindex.js"
    path.write_text(PREFIX + json.dumps(index) + SUFFIX)  # as Sphinx writes it
    missing = missing_names(load_index(path), "tables/layers", compact_table_names(page), language)
    assert len(missing) == 1 and missing[0].startswith("L.EmbedID")


def test_a_page_missing_from_the_site_or_a_broken_index_is_an_error(tmp_path):
    path = tmp_path / "searchindex.js"
    path.write_text("var index = {}")
    with pytest.raises(ValueError, match="not a Sphinx search index"):
        load_index(path)
    index = {"docnames": ["index"], "terms": {}, "titleterms": {}}
    with pytest.raises(ValueError):
        missing_names(index, "tables/layers", ["nn.Linear"], search_language())
