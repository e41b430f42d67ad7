"""The Sphinx extension: tab sets, their checks, partial builds, and kept-apart names."""

import json

from bs4 import BeautifulSoup

from conftest import build_sphinx, code_cell, myst_page
from rosetta_utils import FRAMEWORKS
from rosetta_utils.tab_namespaces import FrameworkNamespaces, source_digest
from rosetta_utils.tabs import skip_unselected_cells

ALL_FIVE = [code_cell(f"print('{name}')", name) for name in reversed(FRAMEWORKS)]


def tab_sets(html_path):
    soup = BeautifulSoup(html_path.read_text(), "html.parser")
    return soup.select("div.sd-tab-set.rosetta-framework-tabs")


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


def test_a_cell_tagged_with_two_frameworks_is_refused(tmp_path):
    page = myst_page("Double", code_cell("print(1)", "pytorch, jax"))
    done = build_sphinx(tmp_path / "src", {"double": page}, env={})
    assert done.returncode != 0 and "several frameworks (pytorch, jax)" in done.stderr


def test_partial_builds_skip_the_other_frameworks_cells():
    text = myst_page("P", code_cell("a = 1", "pytorch"), code_cell("a = 2", "jax"), code_cell("a = 3"))
    changed = skip_unselected_cells(text, ("jax",))
    assert ":tags: [pytorch, skip-execution]" in changed
    assert ":tags: [jax]" in changed
    assert skip_unselected_cells(text, FRAMEWORKS) == text


def test_each_framework_keeps_its_own_names_in_one_kernel(tmp_path):
    """Executed for real: same names in two tabs, and a shared dict both fill."""
    cells = [
        code_cell("results = {}; x = 'shared'"),
        code_cell("x = 'torch-x'\ndef show(): return x", "pytorch"),
        code_cell("x = 'jax-x'\ndef show(): return x", "jax"),
        code_cell("results['pytorch'] = (x, show())", "pytorch"),
        code_cell("results['jax'] = (x, show())", "jax"),
        code_cell("import json; print(json.dumps({'results': results, 'x': x}))"),
    ]
    page = myst_page("Names", *cells, front_matter_extra="frameworks: [pytorch, jax]\n")
    done = build_sphinx(tmp_path / "src", {"names": page}, execution="force")
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "src" / "_build" / "names.html").read_text()
    soup = BeautifulSoup(html, "html.parser")
    printed = soup.select("div.cell_output")[-1].get_text().strip()
    assert json.loads(printed) == {
        "results": {"pytorch": ["torch-x", "torch-x"], "jax": ["jax-x", "jax-x"]},
        "x": "shared",
    }


def test_a_partial_build_notes_the_frameworks_it_left_out(tmp_path):
    cells = [code_cell("print('torch ran')", "pytorch"), code_cell("print('jax ran')", "jax")]
    page = myst_page("Partial", *cells, front_matter_extra="frameworks: [pytorch, jax]\n")
    done = build_sphinx(tmp_path / "src", {"partial": page}, execution="force", env={"ROSETTA_FRAMEWORKS": "jax"})
    assert done.returncode == 0, done.stderr
    (tab_set,) = tab_sets(tmp_path / "src" / "_build" / "partial.html")
    torch_tab, jax_tab = tab_set.select("div.sd-tab-content")
    assert "not executed in this build" in torch_tab.get_text() and "torch ran" not in torch_tab.get_text().replace("print('torch ran')", "")
    assert "jax ran" in jax_tab.select_one("div.cell_output").get_text()


def test_namespaces_refuse_a_cell_out_of_order():
    layers = FrameworkNamespaces({}, [(None, source_digest("a = 1"))])
    try:
        layers.enter("b = 2")
    except RuntimeError as error:
        assert "not the cell being executed" in str(error)
    else:
        raise AssertionError("a cell out of order must stop the build")


def test_namespaces_restore_shared_names_and_forget_deleted_ones():
    namespace = {"x": "shared"}
    plan = [("jax", source_digest("1")), (None, source_digest("2")), ("jax", source_digest("3"))]
    layers = FrameworkNamespaces(namespace, plan)
    layers.enter("1")
    namespace["x"], namespace["y"] = "jax-x", "jax-y"
    layers.leave()
    assert namespace == {"x": "shared"}
    layers.enter("2")
    layers.leave()
    layers.enter("3")
    assert namespace == {"x": "jax-x", "y": "jax-y"}
    del namespace["y"]
    layers.leave()
    assert layers.private["jax"] == {"x": "jax-x"} and namespace == {"x": "shared"}
