"""The built porting checklist (ROSETTA_BOOK_HTML, after `make test`'s smoke build): it
lists the traps of the translation tables, and every line's link lands on its row."""

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup

HTML = os.environ.get("ROSETTA_BOOK_HTML")
pytestmark = pytest.mark.skipif(not HTML, reason="run by `make test` after building the book")


def test_every_checklist_link_lands_on_its_row():
    page = Path(HTML) / "book" / "porting_checklist.html"
    soup = BeautifulSoup(page.read_text(), "html.parser")
    lines = soup.select(".rosetta-checklist-line")
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
    soup = BeautifulSoup((Path(HTML) / "book" / "porting_checklist.html").read_text(), "html.parser")
    blocks = soup.select(".rosetta-checklist-block")
    assert len(blocks) == 20  # five frameworks, each direction of each pair
    for block in blocks:
        first = block.find("ol").select(".rosetta-checklist-line")
        assert len(first) <= 10, block["data-from"] + " to " + block["data-to"]
        assert {line["data-cost"] for line in first} <= {"silent", "condition"}
        rest = [line["data-cost"] for line in block.select("ul > .rosetta-checklist-line")]
        assert rest == sorted(rest, key=["silent", "condition", "error", "noise", "weights"].index)
    opening = soup.select_one('[data-from="pytorch"][data-to="tensorflow"] ol').get_text()
    assert "Batch normalisation" in opening  # momentum and epsilon, whose defaults differ
