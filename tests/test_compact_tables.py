"""The compact tables' machinery: the decisive call of each concept read from the tab code
that computes it, refused where it is missing or names nothing, and the table made from
those calls and the checks' verdicts (a tiny page, built by Sphinx, shows it at its top)."""

import json

import numpy as np
import pytest

from tiny_pages import build_sphinx, code_cell, myst_page
from rosetta_book.decisive_calls import decisive_calls, write_decisive_calls
from rosetta_book.page import Page, PageError
from rosetta_proof.compact_table import CompactTableError, compact_markdown, compact_rows, load_calls
from rosetta_proof.translation_checks import check_concepts
from rosetta_utils.cases import grid

FRONT = "frameworks: [pytorch, jax]\ntab_results: [outputs]\n"


def cell(source, tag=None, decisive=None):
    text = code_cell(source, tag)
    if decisive is None:
        return text
    head, rest = text.split("\n", 1)
    if tag:
        tags, rest = rest.split("\n", 1)
        head = f"{head}\n{tags}"
    return f"{head}\n:decisive: {decisive}\n{rest}"


def table_page(pytorch_marker="np.multiply", jax_marker="np.add", jax_code=None):
    return myst_page(
        "Tiny table",
        cell("import numpy as np\nreferences, grids = {}, {}\n"),
        "(tiny-double)=\n## Double\n",
        cell('grids["double"] = [2, 3]\nreferences["double"] = [np.arange(n) * 2.0 for n in grids["double"]]\n'),
        cell('outputs = {}\nlayer = np.multiply\noutputs["double"] = [layer(np.arange(n), 2) for n in grids["double"]]',
             "pytorch", pytorch_marker),
        cell(jax_code or 'outputs = {}\nx = np.arange(3)\nx.sum()\n'
             'outputs["double"] = [np.add(np.arange(n), np.arange(n)) for n in grids["double"]]',
             "jax", jax_marker),
        front_matter_extra=FRONT,
    )


def read(tmp_path, text):
    path = tmp_path / "table.md"
    path.write_text(text)
    return Page.read(path)


def test_the_decisive_call_is_read_from_the_tab_with_its_arguments(tmp_path):
    calls = decisive_calls(read(tmp_path, table_page()))
    assert list(calls) == ["double"]
    assert calls["double"]["title"] == "Double" and calls["double"]["label"] == "tiny-double"
    assert [c.text for c in calls["double"]["calls"]["pytorch"]] == ["np.multiply"]  # the name, not called
    assert [c.text for c in calls["double"]["calls"]["jax"]] == ["np.add(np.arange(n), np.arange(n))"]
    changed = decisive_calls(read(tmp_path, table_page(jax_code='outputs = {}\noutputs["double"] = '
                                                        '[np.add(np.arange(n), np.arange(n), dtype=float) '
                                                        'for n in grids["double"]]')))
    assert changed["double"]["calls"]["jax"][0].text == "np.add(np.arange(n), np.arange(n), dtype=float)"


@pytest.mark.parametrize("marker, expected", [
    (".sum", "x.sum()"),
    ("dtype=", "dtype=float"),
    ("[np.arange, np.add]", "np.arange(3) np.add(x, x, dtype=float)"),
    ("{double: np.add}", "np.add(x, x, dtype=float)"),
])
def test_markers_name_methods_keywords_lists_and_concepts(tmp_path, marker, expected):
    code = 'outputs = {}\nx = np.arange(3)\nx.sum()\noutputs["double"] = [np.add(x, x, dtype=float)]'
    calls = decisive_calls(read(tmp_path, table_page(jax_marker=marker, jax_code=code)))
    assert " ".join(c.text for c in calls["double"]["calls"]["jax"]) == expected


def test_a_framework_without_the_api_marks_none(tmp_path):
    code = 'outputs = {}\noutputs["double"] = "no such function"'
    calls = decisive_calls(read(tmp_path, table_page(jax_marker="none", jax_code=code)))
    assert calls["double"]["calls"]["jax"] == "none"


def test_a_tab_that_marks_no_decisive_call_stops_the_build_naming_concept_and_framework(tmp_path):
    text = table_page().replace(":decisive: np.add\n", "")
    with pytest.raises(PageError, match=r"table.md:\d+: concept 'double', framework jax: the cell marks no "
                                        "decisive call"):
        decisive_calls(read(tmp_path, text))


def test_a_marker_that_names_nothing_in_the_code_stops_the_build(tmp_path):
    with pytest.raises(PageError, match="concept 'double', framework jax: the decisive call 'np.subtract' is "
                                        "not in the code that computes it"):
        decisive_calls(read(tmp_path, table_page(jax_marker="np.subtract")))


def test_a_marker_on_a_cell_that_computes_no_concept_is_refused(tmp_path):
    text = table_page() + cell("print(1)", "pytorch", "print")
    with pytest.raises(PageError, match="marks a decisive call .* but writes no concept's result"):
        decisive_calls(read(tmp_path, text))


def test_the_compact_rows_show_each_call_and_its_verdict(tmp_path):
    page = read(tmp_path, table_page())
    write_decisive_calls(page, tmp_path)
    calls = load_calls(tmp_path)
    cases = grid(size=(2, 3))
    references = {"double": [np.arange(c.size) * 2.0 for c in cases]}
    runs = {"pytorch": {"outputs": {"double": [np.arange(c.size) * 2.0 for c in cases]}},
            "jax": {"outputs": {"double": [np.arange(c.size) * 2.0 + c.size % 2 for c in cases]}}}
    checks = check_concepts("p", runs, references, grids={"double": cases},
                            conditions={"double": {"jax": "size % 2 == 0"}})
    headers, rows = compact_rows(checks, calls, ["pytorch", "jax"], {"double": "size 2, 3 (2 cases)"})
    assert headers == ["concept", "PyTorch", "JAX (Flax)", "checked on"]
    assert rows == [["{ref}`Double <tiny-double>`", "`np.multiply`: exact",
                     "`np.add(np.arange(n), np.arange(n))`: exact where `size % 2 == 0`; else differs (1 at size 3)",
                     "size 2, 3 (2 cases)"]]
    assert compact_markdown(headers, rows).count("\n") == 2
    only_pytorch = [check for check in checks if check.framework == "pytorch"]
    assert compact_rows(only_pytorch, calls, ["pytorch", "jax"])[1][0][2].endswith("not checked in this build")


def test_a_call_that_contradicts_its_result_is_refused(tmp_path):
    page = read(tmp_path, table_page(jax_marker="none", jax_code='outputs = {}\noutputs["double"] = "none here"'))
    write_decisive_calls(page, tmp_path)
    runs = {"pytorch": {"outputs": {"double": [np.zeros(2)]}}, "jax": {"outputs": {"double": [np.zeros(2)]}}}
    checks = check_concepts("p", runs, {"double": [np.zeros(2)]}, grids={"double": grid(size=(2,))})
    with pytest.raises(CompactTableError, match="framework jax: the decisive call is 'none' but the part computed"):
        compact_rows(checks, load_calls(tmp_path), ["pytorch", "jax"])


def test_a_page_without_references_leaves_no_calls(tmp_path):
    page = read(tmp_path, myst_page("Plain", cell("x = 1", "pytorch"), cell("x = 1", "jax"), front_matter_extra=FRONT))
    assert write_decisive_calls(page, tmp_path) is None
    with pytest.raises(CompactTableError, match="left no decisive calls"):
        load_calls(tmp_path)


def test_the_built_page_opens_with_its_compact_table(tmp_path):
    """Sphinx builds the page: each part runs, the comparisons check the grid and glue the
    compact table, which the page shows above its prose."""
    text = table_page().replace("(tiny-double)=", "+++ {\"tags\": [\"comparison\"]}\n\n```{glue:md} compact_table\n"
                                ":format: myst\n```\n\n+++\n\nThe prose.\n\n(tiny-double)=", 1)
    text += "\n## Checks\n\n" + code_cell(
        "from myst_nb import glue\n"
        "from rosetta_proof.compact_table import compact_table\n"
        "from rosetta_proof.tab_results import load_tab_results\n"
        "from rosetta_proof.translation_checks import check_concepts\n"
        "from rosetta_utils.cases import grid\n"
        "cases = grid(size=(2, 3))\n"
        "checks = check_concepts('tiny', load_tab_results(), references, grids={'double': cases})\n"
        "glue('compact_table', compact_table(checks, {'double': cases}), display=False)\n", "comparison")
    done = build_sphinx(tmp_path / "src", {"table": text}, execution="cache")
    assert done.returncode == 0, done.stderr[-3000:]
    html = (tmp_path / "src" / "_build" / "table.html").read_text()
    table = html.index("<table")
    assert table < html.index("The prose.")
    row = html[table: html.index("</table>", table)]
    assert 'href="#tiny-double"' in row and "size 2, 3 (2 cases)" in row
    assert row.count(": exact") == 2 and "np.multiply" in row


def test_the_calls_file_is_plain_json(tmp_path):
    path = write_decisive_calls(read(tmp_path, table_page()), tmp_path)
    data = json.loads(path.read_text())
    assert data["double"]["calls"]["pytorch"][0] == {"text": "np.multiply", "cell": 4, "line": 2,
                                                     "source": "np.multiply"}


def readers_page(jax_code, prose=""):
    return myst_page(
        "Tiny table",
        cell("import numpy as np\nfrom rosetta_utils.cases import grid\nreferences, grids = {}, {}\nSCALE = 2\n"
             "table_np = np.arange(6.0)\n"),
        f"(tiny-double)=\n## Double\n\n{prose}\n",
        cell('grids["double"] = grid(n=(2, 3))\nreferences["double"] = [np.arange(c.n) * 2.0 for c in grids["double"]]\n'),
        cell('outputs = {}\noutputs["double"] = [np.multiply(np.arange(c.n), SCALE) for c in grids["double"]]',
             "pytorch", "np.multiply"),
        cell(jax_code, "jax", "np.add"),
        front_matter_extra=FRONT,
    )


@pytest.mark.parametrize("code, shown", [
    ("def double(case):\n    return np.add(np.arange(case.n), np.arange(case.n))\n", "np.add(np.arange(n), np.arange(n))"),
    ("def double(case):\n    return np.add(np.arange(case.n), np.arange(case.n) * SCALE * 0)\n",
     "np.add(np.arange(n), np.arange(n) * 2 * 0)"),
    ("def double(case):\n    return np.add(np.arange(case.n), np.arange(case.n) * (SCALE - 2 * 1))\n",
     "np.add(np.arange(n), np.arange(n) * 0)"),
    ("def double(case):\n    width = case.n\n    return np.add(np.arange(width), np.arange(width))\n",
     "np.add(np.arange(n), np.arange(n))"),
    ("def double(case):\n    x_np = np.arange(case.n)\n    return np.add(x_np, x_np, initialW=None)\n", "np.add(x, x)"),
])
def test_a_cell_shows_the_call_in_the_readers_words(tmp_path, code, shown):
    """A grid's parameter by its name, a constant by its value, a name bound to a value by
    that value, numpy's copy of an array by the array's name, weights handed in left out."""
    code = "outputs = {}\n" + code + 'outputs["double"] = [double(c) for c in grids["double"]]'
    calls = decisive_calls(read(tmp_path, readers_page(code)))
    (call,) = calls["double"]["calls"]["jax"]
    assert call.text == shown and "case." in call.source or "initialW" in call.source or "width" in call.source


def test_a_call_that_names_the_harness_stops_the_build_naming_page_concept_and_framework(tmp_path):
    """``MASK`` is bound by a shared cell (the page's checks) to no value a cell can show."""
    code = ('outputs = {}\ndef double(case):\n    return np.add(np.arange(case.n), np.arange(case.n), where=MASK)\n'
            'outputs["double"] = [double(c) for c in grids["double"]]')
    page = readers_page(code).replace("SCALE = 2\n", "SCALE = 2\nMASK = np.ones(3, bool)\n", 1)
    with pytest.raises(PageError, match=r"table.md:\d+: concept 'double', framework jax: the compact table would "
                                        r"show .*names the page's harness \(where=MASK, MASK\)"):
        decisive_calls(read(tmp_path, page))
    defined = page.replace("## Double\n", "## Double\n\nEvery sum is taken where `MASK` is true.\n")
    assert decisive_calls(read(tmp_path, defined))["double"]["calls"]["jax"][0].text.endswith("where=MASK)")
