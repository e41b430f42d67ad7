"""Each framework's download of a page: what it holds, and that it runs on its own."""

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AVAILABLE, code_cell, myst_page
from rosetta_book.environments import python_for, require_python
from rosetta_book.downloads import download_notebook, download_script, main, write_downloads
from rosetta_book.one_framework import environment
from rosetta_book.page import Page, PageError

ROOT = Path(__file__).parents[1]
FIRST_PAGE = ROOT / "book" / "chapters" / "five_frameworks_one_computation.md"


def test_a_download_for_a_framework_the_page_does_not_declare_is_an_error(write_page, capsys):
    path = write_page("two.md", myst_page("Two", code_cell("x = 1", "jax"), front_matter_extra="frameworks: [jax]\n"))
    with pytest.raises(PageError, match="does not declare 'pytorch'"):
        download_notebook(Page.read(path), "pytorch")
    with pytest.raises(SystemExit) as exit_info:
        main([str(path), "pytorch"])
    assert exit_info.value.code == 2 and "does not declare 'pytorch'" in capsys.readouterr().err


def test_a_download_opens_with_its_title_and_says_what_it_needs(write_page):
    path = write_page("one.md", myst_page("One page", code_cell("x = 1", "mxnet")))
    notebook = download_notebook(Page.read(path), "mxnet")
    assert notebook.cells[0].source.startswith("# One page")
    assert "MXNet (Gluon) part" in notebook.cells[1].source and "mxnet (1.9.1" in notebook.cells[1].source
    assert "find_spec(_module)" in notebook.cells[2].source and "pip install mxnet==1.9.1" in notebook.cells[2].source
    assert notebook.cells[3].source == "x = 1" and "tags" not in notebook.cells[3].metadata


def test_writing_the_downloads_writes_a_notebook_and_a_script_per_framework(write_page, tmp_path):
    path = write_page("pair.md", myst_page("Pair", code_cell("a = 1", "pytorch"), code_cell("a = 2", "jax"),
                                           front_matter_extra="frameworks: [pytorch, jax]\n"))
    written = write_downloads(Page.read(path), tmp_path / "site")
    assert sorted(p.name for p in (tmp_path / "site").iterdir()) == [
        "pair-jax.ipynb", "pair-jax.py", "pair-pytorch.ipynb", "pair-pytorch.py"]
    assert "a = 2" in written["jax"]["script"].read_text() and "a = 1" not in written["jax"]["script"].read_text()


@pytest.mark.parametrize("framework", AVAILABLE)
def test_the_first_pages_scripts_run_alone_where_no_other_framework_imports(framework, tmp_path):
    script = tmp_path / f"page-{framework}.py"  # as served: named after the page, not the module
    script.write_text(download_script(download_notebook(Page.read(FIRST_PAGE), framework)))
    done = subprocess.run([require_python(framework), str(script)], env=environment(framework), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "forward + backward:" in done.stdout


def test_the_guard_refuses_every_other_framework_and_nothing_else():
    code = (
        "import importlib\n"
        "for name in ['torch', 'tensorflow', 'keras', 'jax', 'flax', 'optax', 'mxnet', 'chainer']:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as error:\n"
        "        assert 'refused' in str(error), error\n"
        "        print('refused', name)\n"
        "import numpy, rosetta_utils.data\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=environment("none"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused", "torch", "refused", "tensorflow", "refused", "keras", "refused", "jax",
                                   "refused", "flax", "refused", "optax", "refused", "mxnet", "refused", "chainer"]


def test_a_download_without_its_framework_says_what_to_install(tmp_path):
    """Run by a Python that has no PyTorch (the legacy environment's), a PyTorch download's
    first code cell stops with the pip line, before any of the page's code."""
    other = python_for("mxnet")
    if other is None or other == python_for("pytorch"):
        pytest.skip("needs a Python without PyTorch (the legacy environment)")
    script = tmp_path / "page-pytorch.py"
    script.write_text(download_script(download_notebook(Page.read(FIRST_PAGE), "pytorch")))
    done = subprocess.run([other, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    assert "ModuleNotFoundError: this PyTorch part needs torch: pip install torch" in done.stderr
