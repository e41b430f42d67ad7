"""The built porting checklist (ROSETTA_BOOK_HTML, after `make test`'s smoke build): it
lists the traps of the translation tables, and every line's link lands on its row."""

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup

from rosetta_proof.checklist import COSTS

HTML = os.environ.get("ROSETTA_BOOK_HTML")
pytestmark = pytest.mark.skipif(not HTML, reason="run by `make test` after building the book")


def blocks() -> dict[tuple[str, str], BeautifulSoup]:
    """Every pair's list, from the page or its file beside it (rosetta_book.checklist_pages)."""
    from rosetta_book.checklist_pages import checklist_blocks

    return {pair: BeautifulSoup(body, "html.parser") for pair, body in checklist_blocks(Path(HTML)).items()}


def test_the_page_carries_one_pair_and_loads_the_others_from_files():
    page = Path(HTML) / "book" / "porting_checklist.html"
    assert page.stat().st_size < 400_000, f"{page}: {page.stat().st_size} bytes"
    soup = BeautifulSoup(page.read_text(), "html.parser")
    filled = [(b["data-from"], b["data-to"]) for b in soup.select(".rosetta-checklist-block") if not b.get("data-src")]
    assert filled == [("pytorch", "tensorflow")]
    for block in soup.select(".rosetta-checklist-block[data-src]"):
        assert (page.parent / block["data-src"]).is_file(), block["data-src"]


def test_every_checklist_link_lands_on_its_row():
    page = Path(HTML) / "book" / "porting_checklist.html"
    lines = [line for soup in blocks().values() for line in soup.select(".rosetta-checklist-line")]
    assert len(lines) >= 20, f"only {len(lines)} lines"
    targets = {}
    for line in lines:
        assert line["data-frameworks"].split(), line
        link = line.find("a")
        address = urlsplit(link["href"])
        target = (page.parent / address.path).resolve()
        assert target.is_file(), link["href"]
        if target not in targets:  # each page's anchors, read once
            soup_of_target = BeautifulSoup(target.read_text(), "html.parser")
            targets[target] = {tag["id"] for tag in soup_of_target.find_all(id=True)}
        assert address.fragment and address.fragment in targets[target], link["href"]
    assert {path.name for path in targets} >= {"layers.html", "losses.html", "optimizers.html"}


def test_every_pair_opens_with_at_most_ten_silent_traps():
    lists = blocks()
    assert len(lists) == 20  # five frameworks, each direction of each pair
    for (source, target), block in lists.items():
        first = block.find("ol").select(".rosetta-checklist-line")
        assert len(first) <= 10, source + " to " + target
        assert {line["data-cost"] for line in first} <= {"silent", "condition"}
        rest = [line["data-cost"] for line in block.select("ul > .rosetta-checklist-line")]
        assert rest == sorted(rest, key=list(COSTS).index)
    opening = lists[("pytorch", "tensorflow")].find("ol").get_text()
    assert "Batch normalisation" in opening  # momentum and epsilon, whose defaults differ
