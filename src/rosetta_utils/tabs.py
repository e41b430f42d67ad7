"""Sphinx extension: regroup framework-tagged notebook cells into synced tab sets.

Authors write ordinary top-level code cells and tag each with one framework
(``:tags: [pytorch]``). After MyST-NB has executed and rendered a page, every
run of consecutive tagged cells becomes one sphinx-design tab set in the
``framework`` sync group, tabs always in the book's order, each holding its
cells' code and outputs. Choosing a tab switches every tab set on the page,
persists to the next page, and ``?framework=jax`` in the URL selects it.

Checks (reported as Sphinx warnings with page and line, so ``-W`` fails):

* a tab group that lacks a framework the page declares (front matter
  ``frameworks: [...]``, default all five). A framework with no equivalent
  still gets a cell that says why;
* a cell tagged with more than one framework, or with one the page does not
  declare.

With ``ROSETTA_FRAMEWORKS`` naming a subset, cells of the other frameworks
are tagged ``skip-execution`` before the page executes, and their tabs show
the code with a one-line note instead of output.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

from . import FRAMEWORK_TITLES, FRAMEWORKS, __version__
from .frameworks import parse_framework_list, selected_frameworks
from .profile import current_profile
from .tab_namespaces import execution_plan

LOGGER = logging.getLogger(__name__)
SYNC_GROUP = "framework"
_TAGS_LINE = re.compile(r"^(?P<indent>\s*):tags:\s*\[(?P<tags>[^\]]*)\]\s*$")
_CELL_OPEN = re.compile(r"^\s*(`{3,}|~{3,})\{code-cell\}")


def _split_tags(text: str) -> list[str]:
    return [tag.strip().strip("'\"") for tag in text.split(",") if tag.strip()]


def skip_unselected_cells(text: str, selected: tuple[str, ...]) -> str:
    """Add ``skip-execution`` to the tags of code cells whose framework is not selected."""
    lines = text.split("\n")
    fence: str | None = None
    for number, line in enumerate(lines):
        if fence is None:
            opened = _CELL_OPEN.match(line)
            if opened:
                fence = opened.group(1)
            continue
        if line.strip() == fence:
            fence = None
            continue
        match = _TAGS_LINE.match(line)
        if not match:
            continue
        tags = _split_tags(match.group("tags"))
        unselected = [tag for tag in tags if tag in FRAMEWORKS and tag not in selected]
        if unselected and "skip-execution" not in tags:
            tags.append("skip-execution")
            lines[number] = f"{match.group('indent')}:tags: [{', '.join(tags)}]"
    return "\n".join(lines)


def _on_source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    selected = selected_frameworks()
    if selected != FRAMEWORKS:
        source[0] = skip_unselected_cells(source[0], selected)
    # The page's kernel starts while this page is parsed, right after this
    # event: hand it the plan of the cells it will run (see tab_namespaces).
    os.environ["ROSETTA_TAB_PLAN"] = json.dumps(_plan_of(app, docname, source[0]))


def _plan_of(app: Sphinx, docname: str, text: str) -> list[tuple[str | None, str]]:
    from myst_nb.core.read import is_myst_markdown_notebook, read_myst_markdown_notebook

    if not app.env.doc2path(docname).endswith(".md") or not is_myst_markdown_notebook(text):
        return []
    return execution_plan(read_myst_markdown_notebook(text))


def declared_frameworks(app: Sphinx, docname: str) -> tuple[str, ...]:
    """The frameworks a page declares in its front matter (``frameworks:``), default all."""
    value = app.env.metadata.get(docname, {}).get("frameworks")
    if value is None:
        return FRAMEWORKS
    if isinstance(value, str):  # docinfo may hold the YAML list as text: '["pytorch", "jax"]'
        value = [item.strip().strip("'\"") for item in value.strip().strip("[]").split(",")]
    try:
        return parse_framework_list(",".join(value))
    except ValueError as error:
        raise ValueError(f"{app.env.doc2path(docname)}: front matter 'frameworks': {error}") from None


def _is_code_cell(node: nodes.Node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "cell_code"


def _cell_framework(cell: nodes.container) -> str | None:
    """The framework a cell is tagged with (the first, if several)."""
    tags = cell.get("cell_metadata", {}).get("tags", [])
    found = [tag for tag in tags if tag in FRAMEWORKS]
    return found[0] if found else None


def _check_cell_tags(cell: nodes.container, declared: tuple[str, ...]) -> None:
    tags = cell.get("cell_metadata", {}).get("tags", [])
    found = [tag for tag in tags if tag in FRAMEWORKS]
    if len(found) > 1:
        LOGGER.warning(
            f"a cell is tagged with several frameworks ({', '.join(found)}); tag it with one",
            location=cell, type="rosetta", subtype="tabs",
        )
    if found and found[0] not in declared:
        LOGGER.warning(
            f"a cell is tagged {found[0]!r}, which this page does not declare "
            f"(frameworks: {', '.join(declared)})",
            location=cell, type="rosetta", subtype="tabs",
        )


def _tab_item(framework: str, cells: list[nodes.container], executed: bool) -> nodes.container:
    from sphinx_design.shared import create_component

    title = FRAMEWORK_TITLES[framework]
    label = nodes.rubric(title, "", nodes.Text(title), classes=["sd-tab-label"])
    label["sync_group"] = SYNC_GROUP
    label["sync_id"] = framework
    content = create_component("tab-content", classes=["sd-tab-content"])
    if not executed:
        content += nodes.paragraph(
            "", f"{title} was not executed in this build (ROSETTA_FRAMEWORKS leaves it out).",
            classes=["rosetta-not-executed"],
        )
    content.extend(cells)
    return create_component(
        "tab-item", classes=["sd-tab-item", f"rosetta-tab-{framework}"], children=[label, content]
    )


def _regroup(parent: nodes.Element, declared: tuple[str, ...]) -> None:
    selected = selected_frameworks()
    children = list(parent.children)
    index = 0
    while index < len(children):
        if not (_is_code_cell(children[index]) and _cell_framework(children[index])):
            index += 1
            continue
        run: list[nodes.container] = []
        while index < len(children) and _is_code_cell(children[index]):
            if _cell_framework(children[index]) is None:
                break
            run.append(children[index])
            index += 1
        by_framework: dict[str, list[nodes.container]] = {}
        for cell in run:
            by_framework.setdefault(_cell_framework(cell) or "", []).append(cell)
        missing = [name for name in declared if name not in by_framework]
        if missing:
            LOGGER.warning(
                f"this tab group has no cell for {', '.join(missing)}; add one, or a cell "
                "tagged with that framework that explains why it has no equivalent",
                location=run[0], type="rosetta", subtype="tabs",
            )
        from sphinx_design.shared import create_component

        tab_set = create_component("tab-set", classes=["sd-tab-set", "rosetta-framework-tabs"])
        tab_set.source, tab_set.line = run[0].source, run[0].line
        for name in FRAMEWORKS:
            if name in by_framework:
                tab_set += _tab_item(name, by_framework[name], executed=name in selected)
        position = parent.index(run[0])
        for cell in run:
            parent.remove(cell)
        parent.insert(position, tab_set)


def _on_doctree_read(app: Sphinx, doctree: nodes.document) -> None:
    docname = app.env.docname
    declared = declared_frameworks(app, docname)
    cells = list(doctree.findall(_is_code_cell))
    for cell in cells:
        _check_cell_tags(cell, declared)
    parents = {id(cell.parent): cell.parent for cell in cells}
    for parent in parents.values():
        _regroup(parent, declared)


def helpers_fingerprint() -> str:
    """A digest of this package's source files: the pages' outputs depend on them too."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(path.relative_to(Path(__file__).parent).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def execution_cache_name() -> str:
    """The cache folder for this build, e.g. ``smoke-all-3f2a...``.

    jupyter-cache keys a page by its code alone, but what the code computes
    also depends on ``ROSETTA_PROFILE``, ``ROSETTA_FRAMEWORKS`` and the shared
    helpers: each combination gets its own cache, so a smoke run is never
    served as a full one and a changed helper re-executes the pages.
    """
    selected = selected_frameworks()
    frameworks = "all" if selected == FRAMEWORKS else "-".join(selected)
    return f"{current_profile()}-{frameworks}-{helpers_fingerprint()}"


def _on_config_inited(app: Sphinx, config: Any) -> None:
    os.environ["PYTHONSTARTUP"] = str(Path(__file__).with_name("kernel_startup.py"))
    base = Path(config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache")
    # A config value that changes with the cache makes Sphinx re-read every page.
    config.rosetta_execution_key = execution_cache_name()
    config.nb_execution_cache_path = str(base / config.rosetta_execution_key)
    # Caches of the same profile and frameworks made with older helpers can never be used again.
    stem = config.rosetta_execution_key.rsplit("-", 1)[0]
    for stale in base.glob(f"{stem}-*"):
        if stale.name != config.rosetta_execution_key and stale.name.rsplit("-", 1)[0] == stem:
            shutil.rmtree(stale, ignore_errors=True)


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx_design")
    app.setup_extension("myst_nb")
    app.add_config_value("rosetta_execution_key", "", "env")
    app.connect("config-inited", _on_config_inited)
    app.connect("source-read", _on_source_read)
    app.connect("doctree-read", _on_doctree_read)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
