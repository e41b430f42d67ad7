"""The chapter loader runs a page's framework part (shared cells plus one framework's),
and its comparisons on what the parts left, as the book build does."""

import sys
from pathlib import Path

import numpy as np
import pytest

from tiny_pages import code_cell, myst_page
from rosetta_book.chapter import (ChapterError, load_chapter, load_comparisons, run_framework_part,
                                   run_framework_parts, tab_results_of)
from rosetta_proof.tab_results import TabResultError

PAGE = myst_page(
    "Demo",
    code_cell("steps = ['shared']"),
    code_cell("steps.append('pytorch'); x = 1", "pytorch"),
    code_cell("steps.append('jax'); x = 2", "jax"),
    code_cell("steps.append('after')"),
    code_cell("compared = sorted(load_tab_results())", "comparison"),
)


def test_shared_cells_and_one_frameworks_cells_run_in_order(write_page):
    path = write_page("demo.md", PAGE)
    namespace = load_chapter(path, "jax")
    assert namespace["steps"] == ["shared", "jax", "after"], "no other tab, no comparison"
    assert namespace["x"] == 2
    assert load_chapter(path, "pytorch")["steps"] == ["shared", "pytorch", "after"]


def test_a_framework_without_cells_runs_only_the_shared_ones(write_page):
    path = write_page("shared_only.md", myst_page("Shared", code_cell("value = 3")))
    assert load_chapter(path, "chainer")["value"] == 3


def test_cells_run_in_the_pages_folder(write_page, tmp_path):
    path = write_page("cwd.md", myst_page("Cwd", code_cell("import os; here = os.getcwd()")))
    assert load_chapter(path, "mxnet")["here"] == str(tmp_path)


def test_until_stops_before_a_section(write_page):
    text = myst_page("Parts", "## Model\n", code_cell("a = 1"), "## Training\n", code_cell("b = 2"))
    namespace = load_chapter(write_page("parts.md", text), "jax", until="Training")
    assert namespace["a"] == 1 and "b" not in namespace
    with pytest.raises(ChapterError, match="no section headed 'Lessons'"):
        load_chapter(write_page("parts.md", text), "jax", until="Lessons")


def test_a_failing_cell_names_page_and_line(write_page):
    text = myst_page("Broken", code_cell("a = 1"), code_cell("b = 1 / 0", "tensorflow"))
    path = write_page("broken.md", text)
    line = text.splitlines().index("b = 1 / 0")  # the cell's fence line, 1-based
    with pytest.raises(ChapterError, match=rf"broken.md:{line}: the tensorflow part failed.*ZeroDivisionError"):
        load_chapter(path, "tensorflow")


def test_bad_input_is_a_clear_error(write_page, tmp_path):
    with pytest.raises(ValueError, match="unknown framework 'keras'"):
        load_chapter(write_page("ok.md", PAGE), "keras")
    with pytest.raises(ChapterError, match="no such page"):
        load_chapter(tmp_path / "missing.md", "jax")
    magic = write_page("magic.md", myst_page("Magic", code_cell("%timeit 1 + 1")))
    with pytest.raises(ChapterError, match="IPython magics"):
        load_chapter(magic, "jax")
    two = write_page("two.md", myst_page("Two", code_cell("a = 1", "jax"), front_matter_extra="frameworks: [jax]\n"))
    with pytest.raises(ChapterError, match="does not declare 'pytorch'"):
        load_chapter(two, "pytorch")


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


def test_comparisons_read_what_each_part_left(write_page):
    text = myst_page(
        "Compare",
        code_cell("import numpy as np\nfrom rosetta_proof.tab_results import load_tab_results\nscale = 10"),
        code_cell("value = np.arange(3) * scale", "pytorch"),
        code_cell("value = np.arange(3) * scale + 1", "jax"),
        code_cell("runs = load_tab_results()\ngaps = {fw: float(np.max(run.value)) for fw, run in runs.items()}",
                  "comparison"),
        front_matter_extra="frameworks: [pytorch, jax]\ntab_results: [value]\n",
    )
    path = write_page("compare.md", text)
    results = {fw: tab_results_of(path, fw, load_chapter(path, fw)) for fw in ("jax", "pytorch")}
    comparison = load_comparisons(path, results)
    assert list(comparison["runs"]) == ["pytorch", "jax"], "in the book's tab order"
    assert comparison["gaps"] == {"pytorch": 20.0, "jax": 21.0}
    assert "value" not in comparison, "comparison cells see the parts only through load_tab_results"


def test_a_part_must_leave_what_the_front_matter_lists(write_page):
    text = myst_page("Missing", code_cell("y = 1", "pytorch"), front_matter_extra="tab_results: [x]\n")
    path = write_page("missing.md", text)
    with pytest.raises(TabResultError, match=r"the pytorch part never defines 'x'.*tab_results"):
        tab_results_of(path, "pytorch", load_chapter(path, "pytorch"))


def test_tab_results_must_be_plain_data(write_page):
    text = myst_page("Unplain", code_cell("import fractions\nx = {'a': fractions.Fraction(1, 3)}", "pytorch"),
                     front_matter_extra="tab_results: [x]\n")
    path = write_page("unplain.md", text)
    with pytest.raises(TabResultError, match=r"pytorch part's 'x'\['a'\] is a fractions.Fraction, not plain data"):
        tab_results_of(path, "pytorch", load_chapter(path, "pytorch"))


def test_a_part_runs_in_its_own_process_where_other_frameworks_do_not_import(write_page):
    good = myst_page("Own", code_cell("import numpy as np\nx = np.ones(2)", "jax"),
                     front_matter_extra="tab_results: [x]\n")
    results = run_framework_part(write_page("own.md", good), "jax")
    assert np.array_equal(results["x"], np.ones(2)) and "environment" in results
    leaning = myst_page("Lean", code_cell("import torch", "jax"))
    with pytest.raises(ChapterError, match=r"import of 'torch' refused: this process runs the jax part"):
        run_framework_part(write_page("lean.md", leaning), "jax")


def test_a_part_in_its_own_process_leaves_nothing_in_the_temporary_folder(write_page):
    leaves = myst_page("Leaves", code_cell("import tempfile\nleft = tempfile.mkdtemp()", "jax"),
                       front_matter_extra="tab_results: [left]\n")
    left = Path(run_framework_part(write_page("leaves.md", leaves), "jax")["left"])
    assert left.name and not left.exists(), "the part's folder went with its process's scratch"


def test_parts_run_side_by_side_keep_their_order_and_a_failing_one_raises(write_page, tmp_path):
    """Two processes at once (each part waits for the other's file, so they overlapped);
    the results in the frameworks' order; a part that fails still raises its error."""
    def part(me, other):
        return (f"import pathlib, time\nfolder = pathlib.Path({str(tmp_path)!r})\n(folder / {me!r}).touch()\n"
                f"waited = 0\nwhile not (folder / {other!r}).exists() and waited < 600:\n"
                "    time.sleep(0.1)\n    waited += 1\n"
                f"x = (folder / {other!r}).exists()")
    text = myst_page("Side", code_cell(part("pytorch", "jax"), "pytorch"), code_cell(part("jax", "pytorch"), "jax"),
                     front_matter_extra="frameworks: [pytorch, jax]\ntab_results: [x]\n")
    results = run_framework_parts(write_page("side.md", text), ["jax", "pytorch"], at_once=2)
    assert list(results) == ["jax", "pytorch"] and results["jax"]["x"] and results["pytorch"]["x"]
    broken = myst_page("Broken", code_cell("x = 1", "pytorch"), code_cell("x = 1 / 0", "jax"),
                       front_matter_extra="frameworks: [pytorch, jax]\ntab_results: [x]\n")
    with pytest.raises(ChapterError, match=r"the jax part of .*broken.md failed in its own process.*ZeroDivision"):
        run_framework_parts(write_page("broken.md", broken), ["pytorch", "jax"], at_once=2)


def test_parts_the_build_executed_are_taken_from_its_cache_and_changed_code_runs_again(
        write_page, tmp_path, monkeypatch):
    """`make test` runs the unit tests after the smoke build: a part whose code, profile and
    helpers the build already executed comes from the build's cache; any change runs it."""
    from jupyter_cache import get_cache

    from rosetta_book import chapter
    from rosetta_book.page import Page
    from rosetta_book.page_execution import execute_page, framework_parts_cache

    text = myst_page("Cached", code_cell("import numpy as np\nx = np.arange(3)", "jax"),
                     front_matter_extra="tab_results: [x]\n")
    path = write_page("cached.md", text)
    base = tmp_path / "jupyter_cache"
    execute_page(Page.read(path), ["jax"], get_cache(framework_parts_cache(base)))
    monkeypatch.setenv("ROSETTA_BUILD_CACHE", str(base))
    started = []
    real_run = chapter.subprocess.run
    monkeypatch.setattr(chapter.subprocess, "run", lambda *a, **k: started.append(a) or real_run(*a, **k))
    results = run_framework_part(path, "jax")
    assert np.array_equal(results["x"], np.arange(3)) and "environment" in results
    assert started == [], "the part ran again although the build had executed the same code"
    path.write_text(text.replace("np.arange(3)", "np.arange(4)"))
    assert np.array_equal(run_framework_part(path, "jax")["x"], np.arange(4)) and len(started) == 1


def test_parts_side_by_side_overlap_only_in_their_processes(write_page, monkeypatch):
    """Two parts' threads never read the page or the build's cache at once: CPython 3.11
    fails two ``ast`` parses at once ("AST constructor recursion depth mismatch"), which
    broke a legacy test process. A slow stand-in for the cache lookup shows whether two
    threads were ever inside together."""
    import threading
    import time

    from rosetta_book import chapter

    inside, overlapped, lock = [], [], threading.Lock()

    def slow_lookup(page, framework):
        with lock:
            inside.append(framework)
            overlapped.append(len(inside) > 1)
        time.sleep(0.3)
        with lock:
            inside.remove(framework)
        return {"framework": framework}

    monkeypatch.setattr(chapter, "_from_the_build", slow_lookup)
    path = write_page("overlap.md", PAGE)
    results = run_framework_parts(path, ["pytorch", "jax"], at_once=2)
    assert results == {"pytorch": {"framework": "pytorch"}, "jax": {"framework": "jax"}}
    assert overlapped == [False, False]
