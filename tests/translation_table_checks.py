"""What every translation-table page's test checks, once: the page's compact table names only
APIs its tabs run, and each concept ran in every framework and was checked numerically."""

from __future__ import annotations

import re
from pathlib import Path

from rosetta_utils import FRAMEWORKS
from rosetta_book.page import Page, cell_role
from rosetta_utils.translation_checks import numeric_shares

#: The share of a page's concepts each framework must check numerically. Counted per
#: framework (it was per concept, by any framework) the pages reach 80% to 100% today;
#: issue 20's target is 95% in every framework, not met yet: a floor, not the goal.
SHARE_FLOOR = 0.8

#: The first word of each column's heading (e.g. "TensorFlow / Keras", "MXNet Gluon").
HEADER = ["concept", "PyTorch", "TensorFlow", "JAX", "MXNet", "Chainer"]


def compact_table(path: Path) -> dict[str, list[str]]:
    """{framework: [API names]} from the Markdown table the page opens with (its first)."""
    text = path.read_text().splitlines()
    first = next(index for index, line in enumerate(text) if line.startswith("|"))
    lines = []
    for line in text[first:]:
        if not line.startswith("|"):
            break
        lines.append(line)
    header = [cell.strip().split()[0] for cell in lines[0].strip("|").split("|")]
    assert header == HEADER, f"{path.name}: the compact table's columns are {header}"
    names: dict[str, list[str]] = {framework: [] for framework in FRAMEWORKS}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for framework, cell in zip(FRAMEWORKS, cells[1:]):
            names[framework] += re.findall(r"`([^`]+)`", cell)
    return names


def framework_code(path: Path, framework: str) -> str:
    """All the code of ``framework``'s cells on the page."""
    page = Page.read(path)
    return "\n".join(cell.source for cell in page.notebook.cells
                     if cell.cell_type == "code" and cell_role(cell) == framework)


def names_never_run(path: Path) -> list[str]:
    """The compact table's API names that no cell of their framework runs."""
    table = compact_table(path)
    code = {framework: framework_code(path, framework) for framework in table}
    return [f"{framework}: {name}" for framework, names in table.items()
            for name in names if name != "none" and name not in code[framework]]


def assert_every_concept_checked(checks, promised: int, frameworks=FRAMEWORKS) -> None:
    """At least ``promised`` concepts, each run in every framework, SHARE_FLOOR of them checked
    numerically in each framework,
    and every exact row within its bound."""
    concepts = {check.concept for check in checks}
    assert len(concepts) >= promised, f"{len(concepts)} concepts, {promised} promised"
    for concept in concepts:
        assert sorted(c.framework for c in checks if c.concept == concept) == sorted(frameworks), concept
    assert min(numeric_shares(checks).values()) >= SHARE_FLOOR, numeric_shares(checks)
    exact = [c for c in checks if c.exact and c.error is not None]
    assert exact and all(c.error <= c.tolerance for c in exact)


def assert_the_page_stops_naming(page: Path, broken_results, page_name: str, concept: str, framework: str) -> None:
    """The page's comparisons, run on ``broken_results``, stop with the TranslationMismatch
    that names the page, the concept and the framework."""
    import pytest

    from rosetta_book.chapter import ChapterError, load_comparisons
    from rosetta_utils.translation_checks import TranslationMismatch

    with pytest.raises(ChapterError) as failure:
        load_comparisons(page, broken_results)
    assert isinstance(failure.value.__cause__, TranslationMismatch)
    message = str(failure.value.__cause__)
    assert page_name in message and f"'{concept}'" in message and f"framework {framework}" in message
