"""Every page of the book keeps the conventions that let a reader take a tab away.

- No book plumbing inside a framework cell: the framework's own imports and
  the task's code only; records, comparisons and timing alternatives live in
  comparison cells or in `python -m rosetta_book.bench`.
- Each framework's download holds exactly the page's shared cells and that
  framework's cells, line for line, and reads no name it does not define.
- Task pages keep the book's order of sections.
- A page that declares it times nothing (``untimed: true``, whose parts the build
  runs side by side) reads no clock.
"""

import ast
import re
from pathlib import Path

import jupytext
import pytest

from rosetta_book.downloads import download_notebook_with_origins, download_script
from rosetta_book.name_check import undefined_names
from rosetta_book.page import COMPARISON, SHARED, Page, cell_role, is_for_comparison
from rosetta_book.timed_cells import reads_a_clock
from rosetta_utils import FRAMEWORKS

ROOT = Path(__file__).parents[1]
PAGES = sorted(path for path in (ROOT / "book").rglob("*.md") if "```{code-cell}" in path.read_text())
CHAPTERS = [path for path in PAGES if path.parent.name == "chapters"]
SECTION_ORDER = ["Setup", "Data", "Model", "Training", "Evaluation", "Equivalence", "Timing", "Lessons"]
TASK_PAGES = ["cifar10_cnn", "resnet50_features", "imdb_gru", "data_parallel_training"]

#: Names that only serve the book, never a reader's code.
PLUMBING_NAMES = {
    "import_framework", "report_framework", "Stopwatch", "progress", "report_epoch", "measure",
    "compare_configurations", "compare_inference_configurations", "record_result",
    "PAGE_OPTIONS", "ALTERNATIVES", "load_tab_results", "show_table",
}
#: rosetta_utils modules whose only job is bookkeeping.
PLUMBING_MODULES = {"envreport", "frameworks", "timing", "progress", "results", "bench", "tab_results",
                    "tables", "backends", "page_execution"}


def page_id(path):
    return str(path.relative_to(ROOT))


def plumbing_in(source: str) -> list[str]:
    """What in a cell's code is book plumbing: a name above, an import of a bookkeeping
    module, or a write into a dictionary keyed by framework (``d["pytorch"] = ...``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in PLUMBING_NAMES:
            found.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in PLUMBING_NAMES:
            found.append(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for module in modules:
                parts = module.split(".")
                if parts[0] == "rosetta_utils" and len(parts) > 1 and parts[1] in PLUMBING_MODULES:
                    found.append(module)
            if isinstance(node, ast.ImportFrom):
                found += [a.name for a in node.names if a.name in PLUMBING_NAMES
                          or (node.module == "rosetta_utils" and a.name in PLUMBING_MODULES)]
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                        and target.slice.value in FRAMEWORKS):
                    found.append(f"[{target.slice.value!r}] =")
    return found


def test_the_scan_finds_each_kind_of_plumbing():
    """The scan below is not vacuous."""
    assert plumbing_in("torch = import_framework('pytorch')") == ["import_framework"]
    assert plumbing_in("from rosetta_utils.timing import Stopwatch") == ["rosetta_utils.timing", "Stopwatch"]
    assert plumbing_in("results['jax'] = 1") == ["['jax'] ="]
    assert plumbing_in("make(**PAGE_OPTIONS)") == ["PAGE_OPTIONS"]
    assert plumbing_in("import torch\nfrom rosetta_utils.data import cifar10") == []


@pytest.mark.parametrize("path", PAGES, ids=page_id)
def test_no_framework_cell_carries_book_plumbing(path):
    page = Page.read(path)
    problems = []
    for index, cell in enumerate(page.notebook.cells):
        if cell.cell_type == "code" and cell_role(cell) in FRAMEWORKS:
            found = plumbing_in(cell.source)
            if found:
                problems.append(f"{page.where(index)} ({cell_role(cell)}): {', '.join(found)}")
    assert not problems, "book plumbing in framework cells:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", PAGES, ids=page_id)
def test_each_download_is_the_pages_cells_for_its_framework_line_for_line(path):
    page = Page.read(path)
    for framework in page.frameworks:
        mine = [cell for cell in page.notebook.cells if cell.cell_type == "code" and cell_role(cell) in (SHARED, framework)]
        # the for-comparison cells last, in page order: the download's optional last part
        expected = ([cell.source for cell in mine if not is_for_comparison(cell)]
                    + [cell.source for cell in mine if is_for_comparison(cell)])
        notebook, origins = download_notebook_with_origins(page, framework)
        added = [cell.source for cell, origin in zip(notebook.cells, origins)
                 if cell.cell_type == "code" and origin is None]
        borrowed = page.borrowed_cell(framework)  # another page's code, where the page borrows it
        assert len(added) == 1 + (borrowed is not None), "one check of what the part needs"
        assert "find_spec(_module)" in added[0] and added[1:] == ([borrowed] if borrowed else [])
        expected = [*added, *expected]  # that check (and the borrowed code) first, then the page's own cells
        code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
        assert code == expected, f"{page.path}: the {framework} download's code is not the page's"
        prose = [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]
        assert not [cell for cell in page.notebook.cells if cell_role(cell) == COMPARISON
                    and cell.source in prose + code], "comparisons stay on the page"
        script = jupytext.reads(download_script(notebook), fmt="py:percent")
        assert [cell.source for cell in script.cells if cell.cell_type == "code"] == expected, (
            f"{page.path}: the {framework} script's code is not the page's")
        compile(download_script(notebook), f"{page.path} ({framework} script)", "exec")


@pytest.mark.parametrize("path", PAGES, ids=page_id)
def test_no_part_reads_a_name_it_never_defines(path):
    page = Page.read(path)
    problems = [str(found) for framework in page.tagged_frameworks() for found in undefined_names(page, framework)]
    assert not problems, "\n".join(problems)


def test_the_name_check_catches_a_name_from_another_tab(write_page):
    from tiny_pages import code_cell, myst_page

    text = myst_page("Leak", code_cell("import numpy as np"), code_cell("model = 1", "pytorch"),
                     code_cell("out = model + np.ones(1)", "jax"), front_matter_extra="frameworks: [pytorch, jax]\n")
    page = Page.read(write_page("leak.md", text))
    (found,) = undefined_names(page, "jax")
    assert (found.framework, found.name, found.line) == ("jax", "model", text.splitlines().index("out = model + np.ones(1)"))
    assert "leak.md" in str(found) and undefined_names(page, "pytorch") == []


@pytest.mark.parametrize("path", CHAPTERS, ids=page_id)
def test_every_chapter_declares_all_five_and_has_cells_for_them(path):
    page = Page.read(path)
    assert page.frameworks == FRAMEWORKS and page.tagged_frameworks() == FRAMEWORKS


@pytest.mark.parametrize("name", TASK_PAGES)
def test_task_pages_keep_the_books_order_of_sections(name):
    page = Page.read(ROOT / "book" / "chapters" / f"{name}.md")
    sections = [line[3:].strip() for cell in page.notebook.cells if cell.cell_type == "markdown"
                for line in cell.source.splitlines() if line.startswith("## ")]
    known = [title for title in sections if title in SECTION_ORDER]
    assert known == sorted(known, key=SECTION_ORDER.index), f"{name}: sections out of order: {sections}"
    assert known[:3] == ["Setup", "Data", "Model"], f"{name}: {sections}"
    empty = re.compile(r"no (training|evaluation)|nothing to (train|evaluate)", re.I)
    for cell in page.notebook.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## ") and empty.search(cell.source):
            pytest.fail(f"{name}: a section that says it is empty should be left out:\n{cell.source[:200]}")


@pytest.mark.parametrize("path", CHAPTERS, ids=page_id)
def test_a_chapters_records_use_its_results_task(path):
    """The device check files a chapter's records under the page's results_task: the task
    name its own Timing cells record under, so that the results page sets them side by side."""
    import re

    page = Page.read(path)
    recorded = set(re.findall(r'record_result\(\s*"([\w-]+)"', path.read_text()))
    assert recorded <= {page.results_task}, f"{path.name} records {recorded}, declares {page.results_task}"


@pytest.mark.parametrize("path", [path for path in PAGES if Page.read(path).untimed], ids=page_id)
def test_a_page_that_declares_it_times_nothing_reads_no_clock(path):
    """Its parts run side by side in the build (rosetta_book.machine_slots), which would
    disturb a timing; borrowed code counts too. (The kernels' clock watch stops the build
    for a clock this scan cannot see: tests/test_page_execution.py.)"""
    page = Page.read(path)
    for framework in page.frameworks:
        source = "\n".join(code for _, code in page.code_cells(page.framework_part(framework)))
        source += page.borrowed_cell(framework) or ""
        assert not reads_a_clock(source), f"{framework}: {reads_a_clock(source)}"
    assert not reads_a_clock("\n".join(code for _, code in page.code_cells(page.comparison_part())))


def test_the_untimed_pages_are_the_tables_the_moving_models_part_and_retired_frameworks():
    """So that a page does not lose its side-by-side run (or a timed page gain one) unseen."""
    untimed = {page_id(path) for path in PAGES if Page.read(path).untimed}
    assert untimed == ({page_id(path) for path in PAGES if path.parent.name == "tables"}
                       | {"book/chapters/moving_models.md", "book/chapters/finding_divergence.md",
                          "book/chapters/porting_your_model.md", "book/appendix/retired_frameworks.md"})
