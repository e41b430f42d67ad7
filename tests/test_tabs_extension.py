"""The Sphinx extension in real builds: tab sets and their checks, part-by-part execution,
comparisons, downloads, partial builds, and pages that break the conventions."""

import json

import nbformat
from bs4 import BeautifulSoup

from tiny_pages import build_sphinx, code_cell, myst_page
from rosetta_book.downloads import UTILS_WHEEL
from rosetta_book.sphinx_extension import skip_unselected_cells
from rosetta_utils import FRAMEWORKS

ALL_FIVE = [code_cell(f"print('{name}')", name) for name in reversed(FRAMEWORKS)]


def soup(path):
    return BeautifulSoup(path.read_text(), "html.parser")


def tab_sets(html_path):
    return soup(html_path).select("div.sd-tab-set.rosetta-framework-tabs")


def test_tagged_cells_become_one_synced_tab_set_in_book_order(tmp_path):
    page = myst_page("Tabs", code_cell("print('shared')"), *ALL_FIVE, code_cell("print('after')"))
    done = build_sphinx(tmp_path / "src", {"page": page})
    assert done.returncode == 0, done.stderr
    (tab_set,) = tab_sets(tmp_path / "src" / "_build" / "page.html")
    labels = tab_set.select("label")
    assert [label["data-sync-id"] for label in labels] == list(FRAMEWORKS)
    assert {label["data-sync-group"] for label in labels} == {"framework"}
    for name, content in zip(FRAMEWORKS, tab_set.select("div.sd-tab-content")):
        assert f"print('{name}')" in content.get_text()


def test_a_tab_group_missing_a_declared_framework_fails_the_build_naming_page_and_line(tmp_path):
    page = myst_page("Missing", code_cell("x = 1"), *ALL_FIVE[:4])  # no pytorch
    done = build_sphinx(tmp_path / "src", {"missing": page})
    assert done.returncode != 0
    first_code_line = page.splitlines().index("print('chainer')") + 1  # the group's first cell
    assert f"missing.md:{first_code_line}: WARNING: this tab group has no cell for pytorch" in done.stderr


def test_a_page_may_declare_fewer_frameworks(tmp_path):
    cells = [code_cell("print(1)", "jax"), code_cell("print(2)", "pytorch")]
    page = myst_page("Two", *cells, front_matter_extra="frameworks: [pytorch, jax]\n")
    done = build_sphinx(tmp_path / "src", {"two": page})
    assert done.returncode == 0, done.stderr
    (tab_set,) = tab_sets(tmp_path / "src" / "_build" / "two.html")
    assert [label["data-sync-id"] for label in tab_set.select("label")] == ["pytorch", "jax"]


def test_cells_tagged_against_the_conventions_are_refused(tmp_path):
    double = myst_page("Double", code_cell("print(1)", "pytorch, jax"))
    done = build_sphinx(tmp_path / "a", {"double": double}, execution="cache")
    assert done.returncode != 0 and "several frameworks (pytorch, jax)" in done.stderr
    both = myst_page("Both", code_cell("print(1)", "pytorch, comparison"))
    done = build_sphinx(tmp_path / "b", {"both": both}, execution="cache")
    assert done.returncode != 0 and "a comparison belongs to no framework" in done.stderr


def test_partial_builds_skip_the_other_frameworks_cells():
    text = myst_page("P", code_cell("a = 1", "pytorch"), code_cell("a = 2", "jax"), code_cell("a = 3"))
    changed = skip_unselected_cells(text, ("jax",))
    assert ":tags: [pytorch, skip-execution]" in changed
    assert ":tags: [jax]" in changed
    assert skip_unselected_cells(text, FRAMEWORKS) == text


COMPARED = myst_page(
    "Names",
    code_cell("shared = 'shared'\nprint('shared cell ran')"),
    code_cell("x = 'torch-x'\ndef show(): return x", "pytorch"),
    code_cell("x = 'jax-x'\ndef show(): return x", "jax"),
    code_cell("value = (x, show(), shared)\nprint(value)", "pytorch"),
    code_cell("value = (x, show(), shared)\nprint(value)", "jax"),
    "+++ {\"tags\": [\"comparison\"]}\n\nOnly the page shows this sentence.\n",
    code_cell("import json\nfrom rosetta_proof.tab_results import load_tab_results\n"
              "print(json.dumps({fw: run.value for fw, run in load_tab_results().items()}))", "comparison"),
    front_matter_extra="frameworks: [pytorch, jax]\ntab_results: [value]\n",
)


def test_each_part_runs_alone_and_the_comparisons_read_what_they_left(tmp_path):
    """Executed for real: the same names in two tabs, each part in its own kernel."""
    done = build_sphinx(tmp_path / "src", {"names": COMPARED}, execution="cache")
    assert done.returncode == 0, done.stderr
    page = soup(tmp_path / "src" / "_build" / "names.html")
    printed = page.select("div.cell_output")[-1].get_text().strip()
    assert json.loads(printed) == {"pytorch": ["torch-x", "torch-x", "shared"], "jax": ["jax-x", "jax-x", "shared"]}
    assert "shared cell ran" in page.select("div.cell_output")[0].get_text()


def test_every_part_is_a_download_in_the_site_with_a_synced_link(tmp_path):
    done = build_sphinx(tmp_path / "src", {"names": COMPARED}, execution="off")
    assert done.returncode == 0, done.stderr
    built = tmp_path / "src" / "_build"
    (downloads,) = soup(built / "names.html").select("div.sd-tab-set.rosetta-downloads")
    assert [label["data-sync-id"] for label in downloads.select("label")] == ["pytorch", "jax"]
    links = [a["href"] for a in downloads.select("a.rosetta-download")]
    assert links == ["downloads/names-pytorch.ipynb", "downloads/names-pytorch.py",
                     "downloads/names-jax.ipynb", "downloads/names-jax.py"]
    notebook = nbformat.read(built / "downloads" / "names-jax.ipynb", as_version=4)
    code = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    assert "pip install jax flax optax" in code[0]  # the download's check of what it needs
    assert code[1:] == ["shared = 'shared'\nprint('shared cell ran')", "x = 'jax-x'\ndef show(): return x",
                        "value = (x, show(), shared)\nprint(value)"]
    wheels = sorted(path.name for path in (built / "downloads").glob("*.whl"))
    assert wheels == [UTILS_WHEEL] and UTILS_WHEEL in notebook.cells[1].source
    assert not any("Only the page shows" in cell.source for cell in notebook.cells)
    script = (built / "downloads" / "names-jax.py").read_text()
    assert "x = 'jax-x'" in script and "torch-x" not in script and "load_tab_results" not in script


def test_a_part_that_reads_another_tabs_name_fails_the_build_naming_it(tmp_path):
    page = myst_page(
        "Leak",
        code_cell("model = 'pytorch model'", "pytorch"),
        code_cell("model = 'jax model'", "jax"),
        code_cell("print(model)", "pytorch"),
        code_cell("print(model, size)", "jax"),
        front_matter_extra="frameworks: [pytorch, jax]\n",
    )
    done = build_sphinx(tmp_path / "src", {"leak": page}, execution="cache")
    assert done.returncode != 0
    line = page.splitlines().index("print(model, size)")
    assert f"leak.md:{line}: the jax part reads 'size'" in done.stderr


def test_a_failing_cell_stops_the_build_naming_page_line_and_part(tmp_path):
    page = myst_page("Fails", code_cell("x = 1", "pytorch"), code_cell("y = 1 / 0", "jax"),
                     front_matter_extra="frameworks: [pytorch, jax]\n")
    done = build_sphinx(tmp_path / "src", {"fails": page}, execution="cache")
    assert done.returncode != 0
    line = page.splitlines().index("y = 1 / 0")
    assert f"fails.md:{line}: the JAX (Flax) part failed in section 'Fails': ZeroDivisionError" in done.stderr


def test_a_partial_build_notes_the_frameworks_it_left_out(tmp_path):
    cells = [code_cell("print('torch ran')", "pytorch"), code_cell("print('jax ran')", "jax")]
    page = myst_page("Partial", *cells, front_matter_extra="frameworks: [pytorch, jax]\n")
    done = build_sphinx(tmp_path / "src", {"partial": page}, execution="cache", env={"ROSETTA_FRAMEWORKS": "jax"})
    assert done.returncode == 0, done.stderr
    (tab_set,) = tab_sets(tmp_path / "src" / "_build" / "partial.html")
    torch_tab, jax_tab = tab_set.select("div.sd-tab-content")
    assert "not executed in this build" in torch_tab.get_text() and not torch_tab.select("div.cell_output")
    assert "jax ran" in jax_tab.select_one("div.cell_output").get_text()


def counted_page(title: str, runs, value: int, wait_for: str | None = None) -> str:
    """A page whose two parts each add a line to ``runs/<title>-<framework>`` when they run;
    with ``wait_for``, its PyTorch part also leaves ``runs/<title>.here`` and waits up to a
    minute for ``runs/<wait_for>.here`` (another page's part running beside it)."""
    def part(framework: str) -> str:
        code = f"open({str(runs / title)!r} + '-{framework}', 'a').write('ran\\n')\nvalue = {value}"
        if wait_for and framework == "pytorch":
            code += (f"\nimport pathlib, time\npathlib.Path({str(runs / title)!r} + '.here').touch()\n"
                     f"waited = 0\nwhile not pathlib.Path({str(runs / wait_for)!r} + '.here').exists() "
                     "and waited < 600:\n    time.sleep(0.1)\n    waited += 1\n"
                     f"print('met' if waited < 600 else 'alone')")
        return code_cell(code, framework)

    return myst_page(title, part("pytorch"), part("jax"),
                     front_matter_extra="frameworks: [pytorch, jax]\nuntimed: true\n")


def times_run(runs) -> dict[str, int]:
    return {path.name: len(path.read_text().splitlines()) for path in sorted(runs.glob("*-*"))}


def test_an_edit_to_one_page_re_executes_that_pages_changed_part_only(tmp_path):
    """A second build with nothing changed executes nothing; an edit to one page's JAX tab
    executes that part again, and no other."""
    runs = tmp_path / "runs"
    runs.mkdir()
    pages = {"one": counted_page("one", runs, 1), "two": counted_page("two", runs, 2)}
    for _ in range(2):
        done = build_sphinx(tmp_path / "src", pages, execution="cache")
        assert done.returncode == 0, done.stderr
        assert times_run(runs) == {"one-jax": 1, "one-pytorch": 1, "two-jax": 1, "two-pytorch": 1}
    pages["one"] = pages["one"].replace("value = 1\n```\n\n```{code-cell} ipython3\n:tags: [jax]",
                                        "value = 1\n```\n\n```{code-cell} ipython3\n:tags: [jax]\nvalue = 10")
    assert pages["one"] != counted_page("one", runs, 1)
    done = build_sphinx(tmp_path / "src", pages, execution="cache")
    assert done.returncode == 0, done.stderr
    assert times_run(runs) == {"one-jax": 2, "one-pytorch": 1, "two-jax": 1, "two-pytorch": 1}


def test_pages_run_their_parts_side_by_side_and_a_failed_page_keeps_the_others_cached(tmp_path):
    """Two pages' parts meet while both run (the build executes every page it is about to
    read, sharing the machine's slots); a page that fails stops the build, and the next
    build, with it mended, executes that page alone."""
    runs = tmp_path / "runs"
    runs.mkdir()
    failing = myst_page("broken", code_cell("value = 1 / 0", "pytorch"), code_cell("value = 1", "jax"),
                        front_matter_extra="frameworks: [pytorch, jax]\nuntimed: true\n")
    pages = {"one": counted_page("one", runs, 1, wait_for="two"), "two": counted_page("two", runs, 2, wait_for="one"),
             "broken": failing}
    done = build_sphinx(tmp_path / "src", pages, execution="cache", env={"ROSETTA_BUILD_SLOTS": "2"})
    assert done.returncode != 0 and "ZeroDivisionError" in done.stderr
    assert times_run(runs) == {"one-jax": 1, "one-pytorch": 1, "two-jax": 1, "two-pytorch": 1}
    pages["broken"] = failing.replace("1 / 0", "1")
    done = build_sphinx(tmp_path / "src", pages, execution="cache", env={"ROSETTA_BUILD_SLOTS": "2"})
    assert done.returncode == 0, done.stderr
    assert times_run(runs) == {"one-jax": 1, "one-pytorch": 1, "two-jax": 1, "two-pytorch": 1}
    for name in ("one", "two"):
        assert "met" in soup(tmp_path / "src" / "_build" / f"{name}.html").select("div.cell_output")[0].get_text()


def test_for_comparison_cells_form_a_folded_tab_set_of_their_own(tmp_path):
    page = myst_page(
        "Folded",
        code_cell("y = 1", "pytorch"),
        code_cell("y = 2", "jax"),
        code_cell("kept = y + 1\nprint(kept)", "pytorch, for-comparison"),
        code_cell("kept = y + 2\nprint(kept)", "jax, for-comparison"),
        front_matter_extra="frameworks: [pytorch, jax]\n",
    )
    done = build_sphinx(tmp_path / "src", {"folded": page})
    assert done.returncode == 0, done.stderr
    first, second = tab_sets(tmp_path / "src" / "_build" / "folded.html")
    assert "y = 1" in first.get_text() and "kept" not in first.get_text()
    assert "kept = y + 1" in second.get_text()
    (folded,) = soup(tmp_path / "src" / "_build" / "folded.html").select("details.rosetta-comparison")
    assert "computes for the comparison" in folded.summary.get_text()
    assert "kept" in folded.select_one("div.sd-tab-set").get_text()  # the tab set sits in the fold
