"""The chapter loader runs exactly the page's untagged cells plus one framework's."""

import sys

import pytest

from conftest import code_cell, myst_page
from rosetta_utils.chapter import ChapterError, load_chapter

PAGE = myst_page(
    "Demo",
    code_cell("steps = ['shared']"),
    code_cell("steps.append('pytorch'); x = 1", "pytorch"),
    code_cell("steps.append('jax'); x = 2", "jax"),
    code_cell("steps.append('after')"),
)


def test_untagged_cells_and_one_frameworks_cells_run_in_order(write_page):
    path = write_page("demo.md", PAGE)
    namespace = load_chapter(path, "jax")
    assert namespace["steps"] == ["shared", "jax", "after"]
    assert namespace["x"] == 2, "the framework's own names are returned"
    assert load_chapter(path, "pytorch")["steps"] == ["shared", "pytorch", "after"]


def test_a_framework_without_cells_runs_only_the_shared_ones(write_page):
    path = write_page("shared_only.md", myst_page("Shared", code_cell("value = 3")))
    assert load_chapter(path, "chainer")["value"] == 3


def test_cells_run_in_the_pages_folder(write_page, tmp_path):
    path = write_page("cwd.md", myst_page("Cwd", code_cell("import os; here = os.getcwd()")))
    assert load_chapter(path, "mxnet")["here"] == str(tmp_path)


def test_a_failing_cell_names_page_and_line(write_page):
    text = myst_page("Broken", code_cell("a = 1"), code_cell("b = 1 / 0", "tensorflow"))
    path = write_page("broken.md", text)
    line = text.splitlines().index("b = 1 / 0") + 1 - 1  # the cell's fence line
    with pytest.raises(ChapterError, match=rf"broken.md:{line}: the tensorflow run failed.*ZeroDivisionError"):
        load_chapter(path, "tensorflow")


def test_bad_input_is_a_clear_error(write_page, tmp_path):
    with pytest.raises(ValueError, match="unknown framework 'keras'"):
        load_chapter(write_page("ok.md", PAGE), "keras")
    with pytest.raises(ChapterError, match="no such page"):
        load_chapter(tmp_path / "missing.md", "jax")
    magic = write_page("magic.md", myst_page("Magic", code_cell("%timeit 1 + 1")))
    with pytest.raises(ChapterError, match="IPython magics"):
        load_chapter(magic, "jax")


def test_classes_defined_on_a_page_behave_as_in_a_kernel(write_page):
    """A kernel runs cells in ``__main__``, a module in ``sys.modules``; dataclasses need that."""
    page = write_page("page.md", myst_page(
        "Classes",
        code_cell("""
            import dataclasses

            @dataclasses.dataclass
            class Point:
                x: int
                y: int = 2

            point = Point(1)
        """),
    ))
    namespace = load_chapter(page, "pytorch")
    assert namespace["point"] == namespace["Point"](1, 2)
    assert "__chapter__" not in sys.modules, "the page's module is only registered while it runs"


def test_untagged_cells_see_only_shared_names_as_in_the_book(write_page):
    """The kernel keeps each tab's names private (rosetta_utils.tab_namespaces); so does the loader."""
    reads_a_tab_name = write_page("leak.md", myst_page(
        "Leak",
        code_cell("model = 'pytorch model'", "pytorch"),
        code_cell("summary = model.upper()"),
    ))
    with pytest.raises(ChapterError, match=r"leak.md:\d+: .*NameError: name 'model' is not defined"):
        load_chapter(reads_a_tab_name, "pytorch")

    shared_results = write_page("shared.md", myst_page(
        "Shared",
        code_cell("results, size = {}, 'shared'"),
        code_cell("size = 'pytorch size'; results['pytorch'] = size", "pytorch"),
        code_cell("seen = (size, dict(results))"),
    ))
    namespace = load_chapter(shared_results, "pytorch")
    assert namespace["seen"] == ("shared", {"pytorch": "pytorch size"}), "a tab's rebinding stays in the tab"
    assert namespace["size"] == "pytorch size", "the returned namespace lays the tab's names over"
