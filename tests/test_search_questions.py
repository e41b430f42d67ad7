"""The reader questions the search benchmark asks (tests/search_questions.json), read
without a built site: enough of them, each complete, in the reader's words rather than a
table's, and each answer a place the book's sources hold.

A question is written as a reader asks it in an issue tracker; its short form is what
the same reader types into a search box (at most three words). Neither may be a heading
of the translation tables, and the question may not contain a heading of three or more
words, word for word: a question that names its answer's heading measures nothing.
An answer is a MyST label of the book (a `(label)=` line) or `PAGE.html#section`, the
id docutils gives a section of `PAGE.md` (its heading, made an id).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
QUESTIONS = ROOT / "tests" / "search_questions.json"
#: Questions about rows the first file never names, written after the search's scoring was
#: chosen on the first: asked apart, they show how far that choice carries.
HELD_OUT = ROOT / "tests" / "search_questions_held_out.json"
BOOK = ROOT / "book"
FIELDS = ("question", "short", "answers", "why")
LABEL = re.compile(r"^\((?P<label>[^()\s]+)\)=\s*$")
HEADING = re.compile(r"^(?P<level>#{1,6})\s+(?P<text>.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})")


def prose_lines(path: Path) -> list[str]:
    """The lines of a MyST page outside its code fences (a fence closes only on a line of
    its own character alone, at least as long, so nested fences stay inside)."""
    lines, fence = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if fence is None:
            found = FENCE.match(line)
            if found:
                fence = found.group("fence")
            else:
                lines.append(line)
        elif set(line.strip()) == {fence[0]} and len(line.strip()) >= len(fence):
            fence = None
    return lines


def headings(path: Path) -> list[str]:
    """The text of every heading of a page, as a reader sees it (inline code marks dropped)."""
    return [HEADING.match(line).group("text").replace("`", "")
            for line in prose_lines(path) if HEADING.match(line)]


def labels() -> set[str]:
    return {LABEL.match(line).group("label") for path in BOOK.rglob("*.md")
            for line in prose_lines(path) if LABEL.match(line)}


def section_ids(path: Path) -> set[str]:
    from docutils.nodes import make_id

    return {make_id(text) for text in headings(path)}


def words(text: str) -> str:
    """Lower case, every run of characters that is not a letter or digit one space."""
    return " ".join(re.findall(r"[^\W_]+", text.lower()))


def table_headings() -> list[str]:
    return sorted({words(text) for path in sorted((BOOK / "tables").glob("*.md")) for text in headings(path)}
                  - {""})


def load() -> list[dict]:
    return json.loads(QUESTIONS.read_text(encoding="utf-8"))


def load_all() -> list[dict]:
    return load() + json.loads(HELD_OUT.read_text(encoding="utf-8"))


def test_the_held_out_questions_ask_about_rows_the_first_file_never_names():
    held_out = json.loads(HELD_OUT.read_text(encoding="utf-8"))
    assert len(held_out) >= 20
    named = {answer for entry in load() for answer in entry["answers"]}
    assert not [entry["question"] for entry in held_out if set(entry["answers"]) & named]


def test_the_file_holds_at_least_forty_complete_questions():
    questions = load()
    assert isinstance(questions, list) and len(questions) >= 40, len(questions)
    for number, entry in enumerate(questions):
        missing = [field for field in FIELDS if not entry.get(field)]
        assert not missing, f"question {number}: no {missing}"
        assert isinstance(entry["answers"], list) and all(isinstance(a, str) for a in entry["answers"]), entry
        assert isinstance(entry["question"], str) and isinstance(entry["short"], str), entry
    texts = [words(entry["question"]) for entry in questions]
    assert len(set(texts)) == len(texts), "a question is asked twice"


def test_a_short_form_has_at_most_three_words():
    long = [entry["short"] for entry in load_all() if len(entry["short"].split()) > 3]
    assert not long, long


def test_no_question_repeats_a_heading_of_the_tables():
    found = table_headings()
    assert len(found) > 50, "the tables' headings were not read"
    problems = []
    for entry in load_all():
        question, short = words(entry["question"]), words(entry["short"])
        for heading in found:
            if heading in (question, short):
                problems.append(f"{entry['question']!r} / {entry['short']!r} is the heading {heading!r}")
            elif len(heading.split()) >= 3 and f" {heading} " in f" {question} ":
                problems.append(f"{entry['question']!r} contains the heading {heading!r}")
    assert not problems, "\n".join(problems)


def test_every_answer_is_a_label_or_a_section_of_the_sources():
    known = labels()
    assert "tables-layers-max-pool-ceil" in known, "the book's labels were not read"
    problems = []
    for entry in load_all():
        for answer in entry["answers"]:
            if "#" not in answer:
                if answer not in known:
                    problems.append(f"{entry['question']!r}: no label {answer!r} in book/")
                continue
            page, _, section = answer.partition("#")
            source = ROOT / Path(page).with_suffix(".md")
            if not page.endswith(".html") or not source.is_file():
                problems.append(f"{entry['question']!r}: {page!r} is not a built page of a source under book/")
            elif section not in section_ids(source) and section not in labels_of(source):
                problems.append(f"{entry['question']!r}: {source.relative_to(ROOT)} has no section {section!r}")
    assert not problems, "\n".join(problems)


def labels_of(path: Path) -> set[str]:
    return {LABEL.match(line).group("label") for line in prose_lines(path) if LABEL.match(line)}


def test_every_table_page_and_the_porting_chapters_are_asked_about():
    pages = {path.stem for path in (BOOK / "tables").glob("*.md")}
    label_pages = {LABEL.match(line).group("label"): path.stem
                   for path in (BOOK / "tables").glob("*.md") for line in prose_lines(path) if LABEL.match(line)}
    asked = set()
    for entry in load():
        for answer in entry["answers"]:
            asked.add(Path(answer.partition("#")[0]).stem if "#" in answer else label_pages.get(answer))
    missing = sorted((pages | {"moving_models", "finding_divergence", "porting_your_model"}) - asked)
    assert not missing, f"no question is answered on {missing}"


@pytest.mark.parametrize("text, expected", [
    ('### Conv, "same" padding, stride 2', 'conv same padding stride 2'),
    ("### Recording every layer's output", "recording every layer s output"),
])
def test_headings_are_compared_by_their_words(tmp_path, text, expected):
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\n```python\n# not a heading\n```\n\n{text}\n", encoding="utf-8")
    assert [words(found) for found in headings(page)] == ["title", expected]
