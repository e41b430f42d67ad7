"""Prose a reader takes away: said once, and summed up from what ran.

- A paragraph of more than 200 characters stands on one page only (say it once
  and link to it).
- Every chapter and lesson ends with a Summary section whose findings come from
  cells: its prose types no number (names such as float32, CIFAR-10 or
  ResNet-50 are names, not numbers), and it has a cell that computes them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = sorted((ROOT / "book").rglob("*.md"))
SUMMARISED = sorted([*(ROOT / "book" / "chapters").glob("*.md"), *(ROOT / "book" / "lessons").glob("*.md")])
CELL = re.compile(r"^```\{code-cell\}.*?^```[ \t]*$", re.M | re.S)
#: A number standing on its own: 3, 0.5, 1e-5, 49,984, 12%; not part of a name (float32, CIFAR-10).
NUMBER = re.compile(r"(?<![\w.\-/])[-+]?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?%?(?![\w\-/])")


def paragraphs(text: str) -> list[str]:
    """The page's prose paragraphs (no front matter, code cells, directives or labels)."""
    text = re.sub(r"^---\n.*?\n---\n", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", CELL.sub("", text), flags=re.S)
    found = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.splitlines() if not line.startswith(("+++", ":", "(", "#"))]
        if lines:
            found.append(re.sub(r"\s+", " ", " ".join(lines)))
    return found


def repeated_paragraphs(pages: dict[str, str], longer_than: int = 200) -> dict[str, list[str]]:
    where = defaultdict(set)
    for name, text in pages.items():
        for paragraph in paragraphs(text):
            if len(paragraph) > longer_than:
                where[paragraph].add(name)
    return {paragraph: sorted(names) for paragraph, names in where.items() if len(names) > 1}


def summary_section(text: str) -> str | None:
    """The page's last section if it is headed Summary, else None."""
    headings = list(re.finditer(r"^## (.+)$", text, re.M))
    if not headings or headings[-1].group(1).strip() != "Summary":
        return None
    return text[headings[-1].end():]


def typed_numbers(section: str) -> list[str]:
    """Numbers typed into a section's prose (inline code spans are left out)."""
    prose = " ".join(re.sub(r"`[^`]*`", "", paragraph) for paragraph in paragraphs(section))
    return NUMBER.findall(prose)


def test_no_long_paragraph_is_said_on_two_pages():
    assert repeated_paragraphs({str(path.relative_to(ROOT)): path.read_text() for path in PAGES}) == {}


def test_a_paragraph_said_twice_is_caught():
    said = "A paragraph long enough to count, " * 8
    assert list(repeated_paragraphs({"a.md": f"# A\n\n{said}\n", "b.md": f"# B\n\nOther.\n\n{said}\n"}).values()) \
        == [["a.md", "b.md"]]


@pytest.mark.parametrize("path", SUMMARISED, ids=lambda path: path.stem)
def test_every_chapter_and_lesson_ends_with_a_computed_summary(path):
    section = summary_section(path.read_text())
    assert section is not None, f"{path.name}: its last section is not '## Summary'"
    assert CELL.search(section), f"{path.name}: its Summary has no cell that computes its findings"
    assert typed_numbers(section) == [], f"{path.name}: numbers typed into its Summary's prose"


def test_a_typed_number_in_a_summary_is_caught():
    page = "# P\n\n## Summary\n\nThe step took 1.8 s, 12% of it in float32 on CIFAR-10.\n\n```{code-cell} ipython3\nx\n```\n"
    assert typed_numbers(summary_section(page)) == ["1.8", "12%"]
    assert typed_numbers("\n\nResNet-50 in float32 and bfloat16, `1e-5` in code.\n") == []
