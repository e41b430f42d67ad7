"""Every page's code is formatted to the width the code box shows (ruff, line length 79)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import format_pages  # noqa: E402


def test_every_code_cell_of_the_book_is_formatted():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "format_pages.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_finds_a_cell_that_is_not_formatted_and_leaves_prose_alone():
    page = ("---\nkernelspec:\n  name: python3\n---\n# T\n\nSome   prose  stays.\n\n"
            "```{code-cell} ipython3\n:tags: [pytorch]\nx = dict(a = 1,b=2)\n```\n")
    formatted, changed = format_pages.format_page(page, "t.md")
    assert changed == [9]
    assert "x = dict(a=1, b=2)\n" in formatted and ":tags: [pytorch]\n" in formatted
    assert "Some   prose  stays." in formatted
    again, changed_again = format_pages.format_page(formatted, "t.md")
    assert again == formatted and changed_again == []


def test_a_long_line_is_wrapped_to_the_code_box():
    call = "result = some_function(" + ", ".join(f"argument_{n}" for n in range(12)) + ")\n"
    page = f"# T\n\n```{{code-cell}} ipython3\n{call}```\n"
    formatted, _ = format_pages.format_page(page, "t.md")
    assert max(len(line) for line in formatted.splitlines()) <= 79


def fenced_lines(page_text):
    """The lines of a page's plain fenced blocks (shell commands, file
    listings): code the box shows but neither ruff nor a kernel reads."""
    from markdown_it import MarkdownIt

    for token in MarkdownIt("commonmark").parse(page_text):
        if token.type == "fence" and not token.info.startswith("{"):
            yield from token.content.splitlines()


def test_every_plain_fenced_block_fits_the_code_box():
    long = [f"{page.relative_to(ROOT)}: {line}"
            for page in sorted((ROOT / "book").rglob("*.md"))
            for line in fenced_lines(page.read_text())
            if len(line) > 79]
    assert not long, "lines wider than the code box (79):\n" + "\n".join(long)


def test_the_fenced_check_reads_plain_blocks_and_leaves_cells_to_ruff():
    page = ("# T\n\n```\n" + "x" * 80 + "\n```\n\n```{code-cell} ipython3\n"
            + "y" * 90 + "\n```\n")
    assert [len(line) for line in fenced_lines(page)] == [80]
