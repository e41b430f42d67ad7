"""The porting checklist's pairs of frameworks, one file each beside its page.

The checklist (rosetta_proof.checklist) ranks the traps of the translation tables for each
of the twenty directed pairs of frameworks; a reader reads one. The built page carries the
pair it opens with (PyTorch to TensorFlow) and, for each other pair, an empty block that
names its file; the checklist's script (``_static/rosetta-checklist.js``) loads a pair's
file when a reader chooses it. A file is a script that hands its list to the page, so the
checklist works where the site is opened from disk (``file://``) as well as served. The
build's Sphinx extension splits the page at its end.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

#: The checklist's page in the built site, and the folder its pairs' files go to.
PAGE = "book/porting_checklist.html"
PAIRS_FOLDER = "book/porting_checklist"
#: The pair the page opens with (the checklist script's default), kept in the page.
OPENING = ("pytorch", "tensorflow")
#: A block as rosetta_proof.checklist writes it, or as this module leaves it (data-src).
BLOCK = re.compile(r'<section class="rosetta-checklist-block" data-from="(?P<source>\w+)" '
                   r'data-to="(?P<target>\w+)"(?: data-src="(?P<src>[^"]*)")?>(?P<body>.*?)</section>', re.DOTALL)
#: What a pair's file calls (the checklist script defines it).
LOADER = "rosettaChecklistBlock"


class ChecklistPagesError(Exception):
    """The built checklist cannot be split or read: the message names the file."""


def pair_file(source: str, target: str) -> str:
    """A pair's file, relative to the site's root."""
    return f"{PAIRS_FOLDER}/{source}-{target}.js"


def _script(source: str, target: str, body: str) -> str:
    return f"{LOADER}({json.dumps(source)}, {json.dumps(target)}, {json.dumps(body)});\n"


def _read_script(path: Path) -> tuple[str, str, str]:
    text = path.read_text(encoding="utf-8").strip()
    if not (text.startswith(LOADER + "(") and text.endswith(");")):
        raise ChecklistPagesError(f"{path}: not a checklist pair's file ({LOADER}(...);)")
    source, target, body = json.loads("[" + text[len(LOADER) + 1:-2] + "]")
    return source, target, body


def split_checklist(site: Path) -> int:
    """Move every pair but the opening one out of the built checklist page into its own
    file. A page already split (an incremental build that did not write it again) is left
    as it is. Returns the number of pairs the page now loads from files."""
    site = Path(site)
    page = site / PAGE
    if not page.is_file():
        return 0
    text = page.read_text(encoding="utf-8")
    blocks = list(BLOCK.finditer(text))
    if any("<section" in block["body"] for block in blocks):
        raise ChecklistPagesError(f"{page}: a pair's block holds a section of its own; cannot split it")
    moved, files = 0, {}
    for block in blocks:
        source, target = block["source"], block["target"]
        if (source, target) == OPENING:
            continue
        moved += 1
        if block["src"] is None:  # written by this build: its list goes to its file
            files[pair_file(source, target)] = _script(source, target, block["body"])
        elif not (site / pair_file(source, target)).is_file():
            raise ChecklistPagesError(f"{page}: the pair {source} to {target} names {block['src']}, "
                                      "which is missing; build the book again")
    if not files:
        return moved
    (site / PAIRS_FOLDER).mkdir(parents=True, exist_ok=True)
    for name, script in files.items():
        (site / name).write_text(script, encoding="utf-8")

    def emptied(block: re.Match) -> str:
        source, target = block["source"], block["target"]
        if (source, target) == OPENING or block["src"] is not None:
            return block[0]
        src = os.path.relpath(site / pair_file(source, target), page.parent)
        return (f'<section class="rosetta-checklist-block" data-from="{source}" data-to="{target}" '
                f'data-src="{src}"></section>')

    fresh = page.with_suffix(".html.new")
    fresh.write_text(BLOCK.sub(emptied, text), encoding="utf-8")
    fresh.replace(page)  # the page changes only once every pair's file is written
    return moved


def checklist_blocks(site: Path) -> dict[tuple[str, str], str]:
    """Every pair's list as HTML, from the page or from the pair's file."""
    site = Path(site)
    page = site / PAGE
    if not page.is_file():
        return {}
    blocks = {}
    for block in BLOCK.finditer(page.read_text(encoding="utf-8")):
        pair = (block["source"], block["target"])
        if block["src"] is None:
            blocks[pair] = block["body"]
            continue
        path = site / pair_file(*pair)
        if not path.is_file():
            raise ChecklistPagesError(f"{page}: the pair {pair[0]} to {pair[1]} names {block['src']}, which is missing")
        source, target, body = _read_script(path)
        if (source, target) != pair:
            raise ChecklistPagesError(f"{path}: holds the pair {source} to {target}, not {pair[0]} to {pair[1]}")
        blocks[pair] = body
    return blocks
