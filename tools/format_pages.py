"""Format the code cells of the book's MyST pages with ruff (the width the code box shows).

    python tools/format_pages.py [--check] [PAGE.md ...]     (default: every page under book/)

Each ``{code-cell}`` block's code (not its ``:tags:`` option lines) goes through
``ruff format`` with the project's settings (``[tool.ruff]`` in pyproject.toml);
the page's prose and front matter are left exactly as they are. ``--check``
changes nothing, lists the cells that are not formatted (page and line) and
exits 1 if there are any; ``make test`` runs it through tests/test_page_format.py.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELL = re.compile(r"^(?P<open>```\{code-cell\}[^\n]*\n)(?P<body>.*?)^(?P<close>```)[ \t]*$", re.M | re.S)
OPTION = re.compile(r"^:[\w-]+:")


class FormatError(RuntimeError):
    """ruff could not format a cell (a syntax error, say): names page and line."""


def ruff_command() -> list[str]:
    local = Path(sys.executable).with_name("ruff")
    found = str(local) if local.exists() else shutil.which("ruff")
    if not found:
        raise FormatError("ruff is not installed: pip install ruff (the test extra has it)")
    return [found, "format", "--quiet", "--stdin-filename", str(ROOT / "book" / "cell.py"), "-"]


def format_code(code: str, where: str) -> str:
    done = subprocess.run(ruff_command(), input=code, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise FormatError(f"{where}: ruff cannot format this cell: {done.stderr.strip()}")
    return done.stdout


def split_options(body: str) -> tuple[str, str]:
    """The cell's option lines (``:tags: [...]``) and its code."""
    lines = body.splitlines(keepends=True)
    count = 0
    while count < len(lines) and OPTION.match(lines[count]):
        count += 1
    return "".join(lines[:count]), "".join(lines[count:])


def format_page(text: str, name: str) -> tuple[str, list[int]]:
    """The page with every code cell formatted, and the lines of the cells that changed."""
    changed: list[int] = []
    pieces, position = [], 0
    for match in CELL.finditer(text):
        options, code = split_options(match.group("body"))
        line = text.count("\n", 0, match.start()) + 1
        formatted = format_code(code, f"{name}:{line}") if code.strip() else code
        if formatted != code:
            changed.append(line)
        pieces.append(text[position:match.start("body")] + options + formatted)
        position = match.end("body")
    pieces.append(text[position:])
    return "".join(pieces), changed


def pages(arguments: list[str]) -> list[Path]:
    if arguments:
        return [Path(argument) for argument in arguments]
    return sorted(path for path in (ROOT / "book").rglob("*.md") if "```{code-cell}" in path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a cell is not formatted")
    parser.add_argument("pages", nargs="*")
    arguments = parser.parse_args(argv)
    unformatted = []
    for path in pages(arguments.pages):
        text = path.read_text(encoding="utf-8")
        formatted, changed = format_page(text, str(path))
        unformatted += [f"{path}:{line}" for line in changed]
        if changed and not arguments.check:
            path.write_text(formatted, encoding="utf-8")
    if arguments.check and unformatted:
        print("code cells not formatted (run python tools/format_pages.py):", *unformatted, sep="\n  ")
        return 1
    print(f"{len(unformatted)} cells {'to format' if arguments.check else 'formatted'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
