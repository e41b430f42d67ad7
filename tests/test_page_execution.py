"""Executing a page part by part: caching per framework, merged outputs, the guards."""

from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache

from conftest import code_cell, myst_page
from rosetta_book.page import Page
from rosetta_book.page_execution import PageExecutionError, execute_page, run_notebook

FRONT = "frameworks: [pytorch, jax]\ntab_results: [value]\n"


def page_with(torch_code: str, jax_code: str) -> str:
    return myst_page(
        "Cached",
        code_cell("base = 2\nprint('shared', base)"),
        code_cell(torch_code, "pytorch"),
        code_cell(jax_code, "jax"),
        code_cell("from rosetta_utils.tab_results import load_tab_results\n"
                  "print({fw: run.value for fw, run in load_tab_results().items()})", "comparison"),
        front_matter_extra=FRONT,
    )


def outputs_of(notebook):
    return ["".join(o.get("text", "") for o in cell.get("outputs", [])) for cell in notebook.cells
            if cell.cell_type == "code"]


def test_parts_are_cached_one_framework_at_a_time(write_page, tmp_path):
    cache = get_cache(tmp_path / "cache")
    path = write_page("cached.md", page_with("value = base + 1\nprint(value)", "value = base + 2\nprint(value)"))
    first = execute_page(Page.read(path), ["pytorch", "jax"], cache, log=lambda line: None)
    assert [(part.name, part.cached) for part in first.parts] == [
        ("pytorch", False), ("jax", False), ("comparisons", False)]
    assert outputs_of(first.notebook) == ["shared 2\n", "3\n", "4\n", "{'pytorch': 3, 'jax': 4}\n"]
    path.write_text(page_with("value = base + 1\nprint(value)", "value = base * 10\nprint(value)"))
    second = execute_page(Page.read(path), ["pytorch", "jax"], cache, log=lambda line: None)
    assert [(part.name, part.cached) for part in second.parts] == [
        ("pytorch", True), ("jax", False), ("comparisons", False)], "only the changed tab re-runs"
    assert outputs_of(second.notebook) == ["shared 2\n", "3\n", "20\n", "{'pytorch': 3, 'jax': 20}\n"]


def test_an_unselected_framework_is_not_executed(write_page):
    path = write_page("one.md", page_with("value = 1", "value = 2"))
    executed = execute_page(Page.read(path), ["jax"], log=lambda line: None)
    assert [part.name for part in executed.parts] == ["jax", "comparisons"]
    assert outputs_of(executed.notebook)[1] == "" and outputs_of(executed.notebook)[-1] == "{'jax': 2}\n"


def test_a_failing_comparison_names_its_line(write_page):
    text = myst_page("Bad", code_cell("value = 1", "jax"), code_cell("1 / 0", "comparison"),
                     front_matter_extra="frameworks: [jax]\ntab_results: [value]\n")
    path = write_page("bad.md", text)
    line = text.splitlines().index("1 / 0")
    with pytest.raises(PageExecutionError, match=rf"bad.md:{line}: the comparison failed: ZeroDivisionError"):
        execute_page(Page.read(path), ["jax"], log=lambda line: None)


def test_native_output_goes_to_the_log_not_the_page(write_page, tmp_path):
    text = myst_page("Native", code_cell("import os\nos.write(2, b'native noise\\n')\nprint('python')", "jax"),
                     front_matter_extra="frameworks: [jax]\n")
    executed = execute_page(Page.read(write_page("native.md", text)), ["jax"], log=lambda line: None,
                            log_folder=tmp_path / "logs")
    assert outputs_of(executed.notebook) == ["python\n"]
    assert (tmp_path / "logs" / "native-jax.log").read_text() .count("native noise") == 1


def test_a_kernel_started_by_myst_nb_itself_refuses_every_cell(tmp_path):
    """The guard Sphinx installs (PYTHONSTARTUP) against a page executed in one kernel."""
    import rosetta_book.myst_nb_guard as guard
    from rosetta_book.one_framework import environment

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('ran')")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    env = dict(environment("none"), PYTHONSTARTUP=str(Path(guard.__file__)))
    with pytest.raises(Exception, match="MyST-NB started executing a page itself"):
        run_notebook(notebook, tmp_path, env, timeout=120)
