"""The built chapter on finding where a port goes wrong (ROSETTA_BOOK_HTML, after `make
test`'s smoke build): a reader sees both proofs, the sixty directed pairs and the matrix
of planted traps, each row with its verdict, and the line that counts them."""

import os
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

HTML = os.environ.get("ROSETTA_BOOK_HTML")
pytestmark = pytest.mark.skipif(not HTML, reason="run by `make test` after building the book")


def test_the_page_shows_the_pairs_and_the_trap_matrix_with_their_verdicts():
    soup = BeautifulSoup((Path(HTML) / "book" / "chapters" / "finding_divergence.html").read_text(),
                         "html.parser")
    tables = {}
    for table in soup.find_all("table"):
        rows = [[cell.get_text(strip=True) for cell in row.find_all(["th", "td"])] for row in table.find_all("tr")]
        tables[rows[0][0]] = rows
    assert {"pair", "trap"} <= set(tables), list(tables)
    for name, rows in tables.items():
        if name in ("pair", "trap"):
            assert rows[0][-1] == "verdict" and len(rows) > 1, name
            assert {row[-1] for row in rows[1:]} == {"agrees"}, name
    assert "planted traps found at the right layer:" in soup.get_text()
