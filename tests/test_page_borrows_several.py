"""A page that borrows the code of several pages: front matter ``borrows`` as a list.

The chapter on moving models borrows the CIFAR-10, IMDB and ResNet-50 pages' code.
Each entry keeps the one-page form's meaning (page, the section before which its code
stops, the name that holds it); the single mapping still works as it did.
"""

import subprocess

import pytest

from tiny_pages import code_cell, myst_page
from rosetta_book.chapter import load_chapter
from rosetta_book.downloads import download_notebook, download_script
from rosetta_book.environments import require_python
from rosetta_book.name_check import check_page
from rosetta_book.one_framework import environment
from rosetta_book.page import Page, PageError

FIRST = myst_page(
    "First",
    "## Setup\n", code_cell("SIZE = 3"), code_cell("def make(): return ['jax'] * SIZE", "jax"),
    code_cell("def make(): return ['mxnet'] * SIZE", "mxnet"),
    "## Training\n", code_cell("raise RuntimeError('the first page's training is not borrowed')", "jax"),
)
SECOND = myst_page(
    "Second",
    "## Setup\n", code_cell("WIDTH = 2"), code_cell("def shape(): return ('jax', WIDTH)", "jax"),
    "## Model\n", code_cell("def deeper(): return 'jax model'", "jax"),
    "## Evaluation\n", code_cell("raise RuntimeError('the second page's evaluation is not borrowed')", "jax"),
)
TWO_BORROWS = ("borrows:\n"
               "  - {page: first.md, until: Training, name: FIRST_CODE}\n"
               "  - {page: second.md, until: Evaluation, name: SECOND_CODE}\n")
USER = myst_page(
    "User",
    code_cell("import runpy, pathlib\n"
              "pathlib.Path('first_part.py').write_text(FIRST_CODE)\n"
              "pathlib.Path('second_part.py').write_text(SECOND_CODE)\n"
              "first, second = runpy.run_path('first_part.py'), runpy.run_path('second_part.py')\n"
              "print(first['make'](), second['shape'](), second['deeper']())", "jax"),
    front_matter_extra=TWO_BORROWS,
)


@pytest.fixture
def pages(write_page):
    write_page("first.md", FIRST)
    write_page("second.md", SECOND)
    return write_page


def test_each_entry_sets_its_own_name_to_its_pages_code_up_to_its_section(pages):
    page = Page.read(pages("user.md", USER))
    assert [(path.name, until, name) for path, until, name in page.borrowings] == [
        ("first.md", "Training", "FIRST_CODE"), ("second.md", "Evaluation", "SECOND_CODE")]
    assert page.borrows[2] == "FIRST_CODE"  # the first entry, as the one-page form gives it
    cell = page.borrowed_cell("jax")
    first, second = cell.split("\n\n# second.md")
    assert first.startswith("# first.md's JAX (Flax) code up to its Training section")
    assert "FIRST_CODE = r'''" in first and "def make(): return ['jax'] * SIZE" in first
    assert second.startswith("'s JAX (Flax) code up to its Evaluation section")
    assert "SECOND_CODE = r'''" in second and "def deeper(): return 'jax model'" in second
    assert "mxnet" not in cell and "not borrowed" not in cell


def test_the_download_carries_every_borrowed_page_and_runs_alone(pages, tmp_path):
    notebook = download_notebook(Page.read(pages("user.md", USER)), "jax")
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "user-jax.py").write_text(download_script(notebook))
    done = subprocess.run([require_python("jax"), "user-jax.py"], env=environment("jax"), cwd=alone,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['jax', 'jax', 'jax'] ('jax', 2) jax model"


def test_the_chapter_loader_and_the_name_check_know_every_borrowed_name(pages):
    namespace = load_chapter(pages("user.md", USER), "jax")
    assert "SIZE = 3" in namespace["FIRST_CODE"] and "WIDTH = 2" in namespace["SECOND_CODE"]
    check_page(Page.read(pages("user.md", USER)))
    reads_more = USER.replace("print(first", "print(THIRD_CODE, first")
    with pytest.raises(PageError, match="the jax part reads 'THIRD_CODE'"):
        check_page(Page.read(pages("more.md", reads_more)))


def test_the_one_page_form_is_unchanged(pages):
    one = myst_page("One", code_cell("print(FIRST_CODE)", "jax"),
                    front_matter_extra="borrows: {page: first.md, until: Training, name: FIRST_CODE}\n")
    page = Page.read(pages("one.md", one))
    assert len(page.borrowings) == 1 and page.borrows[2] == "FIRST_CODE"
    cell = page.borrowed_cell("jax")
    assert cell.startswith("# first.md's JAX (Flax) code up to its Training section") and "SECOND" not in cell
    assert Page.read(pages("none.md", myst_page("None", code_cell("x = 1", "jax")))).borrowed_cell("jax") is None


@pytest.mark.parametrize("borrows, message", [
    ("borrows: []\n", "'borrows' is an empty list"),
    ("borrows:\n  - {page: first.md, until: Training, name: CODE}\n  - {page: second.md, until: Evaluation, "
     "name: CODE}\n", "names 'CODE' twice"),
    ("borrows:\n  - {page: first.md, until: Training, name: CODE}\n  - {page: second.md, until: Model}\n",
     "must have exactly 'page', 'until' and 'name'"),
    ("borrows:\n  - {page: first.md, until: Training, name: CODE}\n  - second.md\n",
     "must have exactly 'page', 'until' and 'name'"),
    ("borrows:\n  - {page: first.md, until: Training, name: CODE}\n  - {page: second.md, until: Timing, "
     "name: MORE}\n", "no section headed 'Timing'"),
])
def test_a_wrong_list_is_an_error_naming_the_problem(pages, borrows, message):
    page = Page.read(pages("user.md", myst_page("User", code_cell("x = 1", "jax"), front_matter_extra=borrows)))
    with pytest.raises(PageError, match=message):
        download_notebook(page, "jax")
