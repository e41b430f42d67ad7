"""Each framework's download of a page: what it holds, and that it runs on its own."""

import subprocess
import sys
from pathlib import Path

import pytest

from frameworks_under_test import AVAILABLE
from tiny_pages import code_cell, myst_page
from rosetta_book.downloads import (
    download_notebook,
    download_requirements,
    download_script,
    main,
    write_downloads,
)
from rosetta_book.environments import python_for, require_python
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
    assert "MXNet (Gluon) part" in notebook.cells[1].source and "Python 3.11 or older" in notebook.cells[1].source
    line = "pip install 'mxnet==1.9.1' 'numpy<2' ./rosetta_utils-"
    assert f"```\n{line}" in notebook.cells[1].source
    assert "find_spec(_module)" in notebook.cells[2].source and line in notebook.cells[2].source
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
    assert "ModuleNotFoundError: this PyTorch part needs torch: pip install torch numpy ./rosetta_utils-" in done.stderr


BORROWS = "borrows: {page: model.md, until: Training, name: MODEL_CODE}\n"
MODEL_PAGE = myst_page(
    "Model page",
    "## Setup\n", code_cell("SIZE = 3"), code_cell("def make(): return ['jax'] * SIZE", "jax"),
    code_cell("def make(): return ['mxnet'] * SIZE", "mxnet"),
    "## Training\n", code_cell("raise RuntimeError('training is not borrowed')", "jax"),
)
USER_PAGE = myst_page(
    "User page",
    code_cell("import runpy, pathlib\n"
              "pathlib.Path('model_part.py').write_text(MODEL_CODE)\n"
              "print(runpy.run_path('model_part.py')['make']())", "jax"),
    front_matter_extra=BORROWS,
)


def test_a_page_that_borrows_code_carries_it_in_its_download_and_runs_alone(write_page, tmp_path):
    """The data-parallel page's workers run the CIFAR-10 page's code: its download opens
    with that code (up to the section named), so it runs where the other page is not."""
    write_page("model.md", MODEL_PAGE)
    page = Page.read(write_page("user.md", USER_PAGE))
    notebook = download_notebook(page, "jax")
    borrowed = notebook.cells[3].source
    assert borrowed.startswith("# model.md's JAX (Flax) code up to its Training section")
    assert "SIZE = 3\n\ndef make(): return ['jax'] * SIZE" in borrowed
    assert "mxnet" not in borrowed and "training is not borrowed" not in borrowed
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "user-jax.py").write_text(download_script(notebook))
    done = subprocess.run([require_python("jax"), "user-jax.py"], env=environment("jax"), cwd=alone,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['jax', 'jax', 'jax']"


def test_the_name_check_counts_the_borrowed_name_as_defined_and_nothing_more(write_page):
    from rosetta_book.name_check import check_page

    write_page("model.md", MODEL_PAGE)
    check_page(Page.read(write_page("user.md", USER_PAGE)))  # reads MODEL_CODE: the opening cell sets it
    reads_more = USER_PAGE.replace("print(runpy", "print(OTHER_CODE, runpy")
    with pytest.raises(PageError, match="the jax part reads 'OTHER_CODE'"):
        check_page(Page.read(write_page("more.md", reads_more)))


def test_the_chapter_loader_runs_the_borrowed_code_too(write_page):
    from rosetta_book.chapter import load_chapter

    write_page("model.md", MODEL_PAGE)
    namespace = load_chapter(write_page("user.md", USER_PAGE), "jax")
    assert "def make(): return ['jax'] * SIZE" in namespace["MODEL_CODE"]


@pytest.mark.parametrize("borrows, message", [
    ("borrows: {page: model.md, until: Training}\n", "must have exactly 'page', 'until' and 'name'"),
    ("borrows: {page: model.md, until: Training, name: 2fast}\n", "'2fast' is not a Python name"),
    ("borrows: {page: absent.md, until: Training, name: CODE}\n", "absent.md: no such page"),
    ("borrows: {page: model.md, until: Evaluation, name: CODE}\n", "no section headed 'Evaluation'"),
])
def test_a_wrong_borrows_entry_is_an_error_naming_the_problem(write_page, borrows, message):
    write_page("model.md", MODEL_PAGE)
    page = Page.read(write_page("user.md", myst_page("User", code_cell("x = 1", "jax"),
                                                     front_matter_extra=borrows)))
    with pytest.raises(PageError, match=message):
        download_notebook(page, "jax")


def _line(page_text, framework, write_page, name="needs.md"):
    return download_requirements(Page.read(write_page(name, page_text)), framework).pip_line()


def test_the_install_line_names_every_package_the_download_imports(write_page):
    page = myst_page("Needs", code_cell("import numpy as np\nimport matplotlib.pyplot as plt\n"
                                        "from rosetta_utils.data import cifar10"),
                     code_cell("import torch\nimport torchvision\nfrom PIL import Image", "pytorch"),
                     code_cell("import jax\nfrom flax import nnx", "jax"),
                     front_matter_extra="frameworks: [pytorch, jax]\n")
    # torchvision is PyTorch's companion, installed apart: the page's import of it puts it
    # in the line; rosetta_utils.data crops images with Pillow: its extra
    wheel = "'./rosetta_utils-0.2.0-py3-none-any.whl[images]'"
    assert _line(page, "pytorch", write_page) == f"pip install torch numpy torchvision Pillow matplotlib {wheel}"
    assert _line(page, "jax", write_page) == f"pip install jax flax optax numpy matplotlib {wheel}"


def test_a_helper_that_reads_keras_weights_brings_its_extra_and_mxnet_its_threads(write_page):
    page = myst_page("Weights", code_cell("from rosetta_utils.pretrained import resnet50_imagenet_weights"),
                     code_cell("import mxnet\nfrom rosetta_utils.timing import Timing", "mxnet"),
                     code_cell("import torch", "pytorch"), front_matter_extra="frameworks: [pytorch, mxnet]\n")
    assert "keras-h5" in _line(page, "pytorch", write_page) and "threads" not in _line(page, "pytorch", write_page)
    assert _line(page, "mxnet", write_page).endswith("whl[images,keras-h5,threads]'")


def test_front_matter_adds_what_code_loads_unseen_and_drops_what_a_part_runs_without(write_page):
    page = myst_page("Export", code_cell("import jax\nimport optional_thing", "jax"),
                     front_matter_extra="frameworks: [jax]\nrequires: {jax: [flatbuffers]}\n"
                                        "optional_imports: {jax: [optional_thing]}\n")
    line = _line(page, "jax", write_page)
    assert "flatbuffers" in line and "optional_thing" not in line
    wrong = myst_page("Wrong", code_cell("import jax", "jax"),
                      front_matter_extra="frameworks: [jax]\nrequires: {torch: [x]}\n")
    with pytest.raises(PageError, match="'requires' names 'torch', not one of the page's frameworks"):
        _line(wrong, "jax", write_page, "wrong.md")


def test_a_download_that_imports_another_framework_never_installs_it(write_page):
    """The one-framework guard refuses the import when the part runs (tests/test_chapter_loader.py)."""
    page = myst_page("Cross", code_cell("import jax\nimport torch", "jax"), front_matter_extra="frameworks: [jax]\n")
    assert "torch" not in _line(page, "jax", write_page)


def test_every_download_of_the_book_has_one_install_line_that_names_its_imports():
    """On the book's own pages: matplotlib wherever a download draws, Pillow's extra for
    ImageNet's crops, and the framework's own line first."""
    from rosetta_book.downloads_check import pages_with_downloads

    lines = {(page.name, framework): download_requirements(page, framework).pip_line()
             for page in pages_with_downloads() for framework in page.tagged_frameworks()}
    assert len(lines) >= 100
    assert all(line.startswith("pip install ") and "rosetta_utils-" in line for line in lines.values())
    assert "matplotlib" in lines["imdb_gru", "jax"] and "images" in lines["resnet50_features", "pytorch"]
    assert lines["moving_models", "chainer"].count("onnx_chainer") == 0
    # Chainer 7.8.1 is a source distribution whose build imports pkg_resources (gone in
    # setuptools 81): what it builds with comes first, then the rest without build isolation
    for (page, framework), line in lines.items():
        built = line.startswith("pip install 'setuptools<81' wheel && pip install --no-build-isolation "
                                "'chainer==7.8.1' ")
        assert built is (framework == "chainer"), (page, line)
        assert line.count("setuptools") == (framework == "chainer"), (page, line)
    assert "flatbuffers" in lines["saving_and_devices", "jax"]


FOLDED = myst_page(
    "Folded",
    code_cell("y = 1", "pytorch"),
    code_cell("kept = y + 1\nprint(kept)", "pytorch, for-comparison"),
    code_cell("print(y)", "pytorch"),
    front_matter_extra="frameworks: [pytorch]\n",
)


def test_a_download_runs_its_for_comparison_cells_last_under_a_heading_of_their_own(write_page):
    notebook = download_notebook(Page.read(write_page("folded.md", FOLDED)), "pytorch")
    sources = [cell.source for cell in notebook.cells]
    assert sources[-3:-1] == ["print(y)", sources[-2]] and sources[-2].startswith("## Optional:")
    assert sources[-1] == "kept = y + 1\nprint(kept)" and "tags" not in notebook.cells[-1].metadata
    assert sources.index("y = 1") < sources.index("print(y)")


def test_a_cell_that_reads_what_a_for_comparison_cell_binds_is_refused(write_page):
    path = write_page("reads.md", FOLDED.replace("print(y)", "print(kept)"))
    line = FOLDED.splitlines().index("print(y)")  # the reading cell's fence
    with pytest.raises(PageError, match=rf"reads\.md:{line}: the pytorch cell reads 'kept', which the "
                                        r"for-comparison cell at line \d+ binds"):
        Page.read(path)
    untagged = FOLDED.replace("pytorch, for-comparison", "for-comparison")
    with pytest.raises(PageError, match="tagged 'for-comparison' with no framework"):
        Page.read(write_page("untagged.md", untagged))
