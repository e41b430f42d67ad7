"""``python -m rosetta_book.record_defaults [PAGE ...]`` (``make record-defaults``): record
in the repository the defaults the translation tables' parts read from the installed
releases (:mod:`rosetta_proof.defaults`), after a pin in ``environments/`` moved.

Each table page's parts are taken from the book build's cache where it executed them
(``ROSETTA_BUILD_CACHE``, default ``_build/.jupyter_cache``), else run here, each in its
own environment. The record's diff is what the new releases changed for porting; the
test that holds every build to the record (``tests/test_tables_defaults.py``) passes
again once it is committed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rosetta_proof.defaults import record_defaults
from rosetta_utils.frameworks import selected_frameworks

from .chapter import BUILD_CACHE_VARIABLE, run_framework_parts
from .environments import ROOT

#: The translation tables: the pages whose decisive calls the record holds.
TABLE_PAGES = sorted((ROOT / "book" / "tables").glob("*.md"))


def main(argv: list[str]) -> int:
    pages = [Path(page).resolve() for page in argv] or TABLE_PAGES
    os.environ.setdefault(BUILD_CACHE_VARIABLE, str(ROOT / "_build" / ".jupyter_cache"))
    for page in pages:
        if page.parent != ROOT / "book" / "tables":
            print(f"{page}: not a translation table (book/tables/*.md)", file=sys.stderr)
            return 2
        runs = run_framework_parts(page, selected_frameworks(), at_once=2)
        path = record_defaults(f"tables/{page.name}", runs)
        print(f"{path.relative_to(ROOT)}: {', '.join(runs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
