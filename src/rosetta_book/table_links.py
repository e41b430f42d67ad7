"""The divergence command's links to the translation tables, taken from the tables.

Each table page says in its front matter which of the command's causes its rows
check (``divergence_causes: {padding: [tables-layers-conv-same-stride2, ...]}``,
each row by its label). The command ships in the reader's library, which never
reads the book's pages, so the links are written into it as a module of data,
:mod:`rosetta_utils.divergence_rows`; a test holds that module to the tables.

``python -m rosetta_book.table_links`` writes it again after a table's causes
change; ``--check`` exits 1 where it is out of date.
"""

from __future__ import annotations

import argparse
import pprint
import re
import sys
from pathlib import Path

from .environments import ROOT
from .page import Page

TABLES = ROOT / "book" / "tables"
MODULE = ROOT / "src" / "rosetta_utils" / "divergence_rows.py"
FRONT_MATTER_KEY = "divergence_causes"

_HEADER = '''"""Which translation-table rows check each of the divergence command's causes:
``{cause: ((row label, table page), ...)}``.

Written by ``python -m rosetta_book.table_links`` from the tables' front matter
(``divergence_causes``); edit the tables, not this file.
"""

'''


class TableLinkError(ValueError):
    """A table's ``divergence_causes`` that names an unknown cause or a row it lacks."""


def divergence_rows(tables: Path = TABLES) -> dict[str, tuple[tuple[str, str], ...]]:
    """Every cause's rows, from each table page's front matter: the pages in name order,
    each page's rows in its own order. A cause the command does not know, or a label the
    page does not define, is refused naming the page."""
    from rosetta_utils.divergence import EVIDENCE

    rows: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(tables.glob("*.md")):
        causes = Page.read(path).notebook.metadata.get(FRONT_MATTER_KEY) or {}
        if not isinstance(causes, dict):
            raise TableLinkError(f"{path}: {FRONT_MATTER_KEY} must map each cause to a list of row labels")
        labels = set(re.findall(r"^\(([\w-]+)\)=$", path.read_text(), flags=re.MULTILINE))
        for cause, named in causes.items():
            if cause not in EVIDENCE:
                raise TableLinkError(f"{path}: {FRONT_MATTER_KEY} names the cause {cause!r}, which the divergence "
                                     f"command does not know (rosetta_utils.divergence.EVIDENCE: {', '.join(EVIDENCE)})")
            missing = [label for label in named if label not in labels]
            if missing:
                raise TableLinkError(f"{path}: {FRONT_MATTER_KEY}[{cause!r}] names rows the page does not label: "
                                     f"{', '.join(missing)}")
            rows.setdefault(cause, []).extend((label, f"tables/{path.stem}") for label in named)
    return {cause: tuple(rows[cause]) for cause in EVIDENCE if cause in rows}


def module_source(rows: dict[str, tuple[tuple[str, str], ...]]) -> str:
    """The source of :mod:`rosetta_utils.divergence_rows` for ``rows``."""
    return _HEADER + "ROWS = " + pprint.pformat(rows, width=110, sort_dicts=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.table_links", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the module is out of date")
    args = parser.parse_args(argv)
    source = module_source(divergence_rows())
    current = MODULE.read_text() if MODULE.exists() else ""
    if args.check:
        if current != source:
            print(f"{MODULE} is out of date: run python -m rosetta_book.table_links", file=sys.stderr)
            return 1
        return 0
    if current != source:
        MODULE.write_text(source)
        print(f"wrote {MODULE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
