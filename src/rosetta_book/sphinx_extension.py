"""The Sphinx adapter: the book's pages executed part by part, shown as synced tabs.

The work is done elsewhere; this module connects it to Sphinx's events and
docutils' nodes: the page cache (:mod:`rosetta_book.build_cache`), the checks
(:mod:`rosetta_book.name_check`), the downloads (:mod:`rosetta_book.downloads`)
and what the site says of its build (:mod:`rosetta_book.build_report`).

Authors write ordinary top-level code cells and tag each with one framework
(``:tags: [pytorch]``) or with ``comparison`` (see :mod:`rosetta_book.page`).

Execution. When Sphinx reads a page, every framework part of it runs on its
own, then its comparisons (:mod:`rosetta_book.page_execution`), and the
merged outputs go into MyST-NB's execution cache, where MyST-NB finds them;
MyST-NB never executes a page itself. Before that, a part that reads a name
it never defines (:mod:`rosetta_book.name_check`) stops the build, naming
page, line, framework and name.

Tabs. After MyST-NB rendered a page, every run of consecutive tagged cells
becomes one sphinx-design tab set in the ``framework`` sync group, tabs always
in the book's order, each holding its cells' code and outputs; a run of
``for-comparison`` cells becomes a tab set of its own, folded like the
comparison cells. Choosing a tab
switches every tab set on the page, persists to the next page, and
``?framework=jax`` in the URL selects it.

Downloads. Each page with framework cells gets, under its title, a synced
line "Download the PyTorch part: notebook · script", and the build writes
those files into the site (:mod:`rosetta_book.downloads`).

Checks (reported as Sphinx warnings with page and line, so ``-W`` fails): a
tab group that lacks a framework the page declares (front matter
``frameworks: [...]``, default all five; a framework with no equivalent still
gets a cell that says why); a cell tagged with more than one framework, with
one the page does not declare, or with a framework and ``comparison``.

With ``ROSETTA_FRAMEWORKS`` naming a subset, the other frameworks' parts are
not executed, and their tabs show the code with a one-line note instead of
output.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS, __version__
from rosetta_utils.run_profile import current_profile, is_test_build

from .build_cache import cache_folder, outputs_for
from .build_plan import build_plan, executed_frameworks
from .build_report import (EXECUTION_HEADERS, banner_text, comparison_caption, devices_by_framework,
                           execution_rows, front_matter_list, gated_line, gated_verdicts, where_it_ran)
from .environments import check_registry
from .name_check import check_page
from .page import FOR_COMPARISON, Page, PageError

LOGGER = logging.getLogger(__name__)
#: The theme Jupyter Book gives the book, whose pages the search index reads.
BOOK_THEME = "sphinx_book_theme"
#: Beside the site (``_build/``): how many verdicts each page of the build gated, which
#: ``make test`` reports at its end.
GATED_LEDGER = "verdicts-gated.json"
#: Front matter ``rosetta_execute: every-build``: see :func:`_every_build_pages`.
EVERY_BUILD = "every-build"
SYNC_GROUP = "framework"
#: The caption of a folded tab set of ``for-comparison`` cells.
FOR_COMPARISON_CAPTION = "What each framework's part computes for the comparison"
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


def _source_to_read(text: str) -> str:
    """A page's text as Sphinx reads it: the cells of frameworks this build does not execute
    marked ``skip-execution``."""
    selected = executed_frameworks()
    return text if selected == FRAMEWORKS else skip_unselected_cells(text, selected)


def _page_to_execute(app: Sphinx, path: Path, text: str) -> tuple[Page, list[str], bool] | None:
    """The page Sphinx reads from ``text`` (:func:`_source_to_read`), checked; the
    frameworks whose parts it executes; whether it executes in every build. None where
    nothing is executed (not a MyST notebook, no code, execution off)."""
    from myst_nb.core.read import create_nb_reader

    reader = create_nb_reader(str(path), app.env.myst_config, app.env.mystnb_config, text)
    if path.suffix != ".md" or reader is None:  # not a MyST notebook: nothing to execute
        return None
    selected = executed_frameworks()
    page = Page(path, reader.read(_source_to_read(text)))
    try:
        check_page(page)
    except PageError as error:
        raise ExtensionError(str(error)) from None
    if app.config.rosetta_execution_mode == "off" or not any(c.cell_type == "code" for c in page.notebook.cells):
        return None
    every_build = page.notebook.metadata.get("rosetta_execute") == EVERY_BUILD
    return page, [name for name in page.tagged_frameworks() if name in selected], every_build


def _on_source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    found = _page_to_execute(app, Path(app.env.doc2path(docname)), source[0])
    source[0] = _source_to_read(source[0])
    if found is not None:
        page, frameworks, every_build = found
        _execute(app, page, frameworks, force=app.config.rosetta_execution_mode == "force" or every_build)


def _execute_ahead(app: Sphinx, env: Any, docnames: list[str]) -> None:
    """Before Sphinx reads them one by one, execute the pages it is about to read, their parts
    side by side in the machine's slots (:mod:`rosetta_book.machine_slots`); each page's read
    then takes its outputs (or raises its error). Pages that execute in every build run
    later, as Sphinx reads them, since they read what the others wrote."""
    from .build_cache import outputs_for_pages

    pages = []
    for docname in docnames:
        path = Path(env.doc2path(docname))
        try:
            found = _page_to_execute(app, path, path.read_text(encoding="utf-8"))
        except Exception:  # the page's own read says what is wrong with it
            continue
        if found is not None and not found[2]:
            pages.append((docname, found[0], found[1]))
    if not pages:
        return
    force = app.config.rosetta_execution_mode == "force"
    done = outputs_for_pages([(page, frameworks) for _, page, frameworks in pages],
                             app.env.mystnb_config.execution_cache_path, force,
                             timeout=app.config.nb_execution_timeout or 1800, log=lambda line: LOGGER.info(line),
                             log_folder=Path(app.outdir).parent / "logs")
    _executed_ahead(app).update({page.path: done[page.path] for _, page, _ in pages})


def _executed_ahead(app: Sphinx) -> dict[Path, Any]:
    """Per page path, what :func:`_execute_ahead` left: its outputs, or its error (kept on
    the application, not in Sphinx's pickled environment)."""
    if not hasattr(app, "rosetta_executed_ahead"):
        app.rosetta_executed_ahead = {}
    return app.rosetta_executed_ahead


def _execute(app: Sphinx, page: Page, frameworks: list[str], force: bool = False) -> None:
    """Put the page's merged outputs into MyST-NB's cache (:mod:`rosetta_book.build_cache`)
    and keep what the build line and the execution table say of it."""
    ahead = _executed_ahead(app).pop(page.path, None)
    if isinstance(ahead, BaseException):
        raise ahead
    # A cache entry that cannot be read is said as a warning but logged as information:
    # with -W a Sphinx warning would stop the build that this miss lets go on.
    outputs = ahead or outputs_for(page, frameworks, app.env.mystnb_config.execution_cache_path, force,
                                   timeout=app.config.nb_execution_timeout or 1800,
                                   log=lambda line: LOGGER.info(line), log_folder=Path(app.outdir).parent / "logs")
    _parts_of(app.env)[app.env.docname] = outputs.parts
    _stand_ins_of(app.env)[app.env.docname] = outputs.rests_on_stand_ins


def _stand_ins_of(env: Any) -> dict[str, bool]:
    """Per executed page, whether it ran on a synthetic stand-in (kept in Sphinx's environment)."""
    if not hasattr(env, "rosetta_stand_ins"):
        env.rosetta_stand_ins = {}
    return env.rosetta_stand_ins


def _parts_of(env: Any) -> dict[str, dict[str, Any]]:
    """Per page, what each of its parts took and where it ran (kept in Sphinx's environment)."""
    if not hasattr(env, "rosetta_parts"):
        env.rosetta_parts = {}
    return env.rosetta_parts


def _is_code_cell(node: nodes.Node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "cell_code"


def _cell_framework(cell: nodes.container) -> str | None:
    """The framework a cell is tagged with (the first, if several)."""
    tags = cell.get("cell_metadata", {}).get("tags", [])
    found = [tag for tag in tags if tag in FRAMEWORKS]
    return found[0] if found else None


def _for_comparison(cell: nodes.container) -> bool:
    return FOR_COMPARISON in cell.get("cell_metadata", {}).get("tags", [])


def declared_frameworks(app: Sphinx, docname: str) -> tuple[str, ...]:
    """The frameworks a page declares in its front matter (``frameworks:``), default all."""
    from rosetta_utils.frameworks import parse_framework_list

    value = app.env.metadata.get(docname, {}).get("frameworks")
    return FRAMEWORKS if value is None else parse_framework_list(",".join(front_matter_list(value)))


def _tab_item(framework: str, children: list[nodes.Node], note: str | None = None) -> nodes.container:
    from sphinx_design.shared import create_component

    title = FRAMEWORK_TITLES[framework]
    label = nodes.rubric(title, "", nodes.Text(title), classes=["sd-tab-label"])
    label["sync_group"] = SYNC_GROUP
    label["sync_id"] = framework
    content = create_component("tab-content", classes=["sd-tab-content"])
    if note:
        content += nodes.paragraph("", note, classes=["rosetta-not-executed"])
    content.extend(children)
    return create_component(
        "tab-item", classes=["sd-tab-item", f"rosetta-tab-{framework}"], children=[label, content]
    )


def _left_out_note(framework: str) -> str:
    """Why this build did not execute ``framework``'s cells."""
    plan = build_plan().get(framework)
    why = plan.reason if plan is not None else "ROSETTA_FRAMEWORKS leaves it out"
    return f"{FRAMEWORK_TITLES[framework]} was not executed in this build ({why})."


def _tab_set(classes: list[str], items: list[nodes.container]) -> nodes.container:
    from sphinx_design.shared import create_component

    return create_component("tab-set", classes=["sd-tab-set", *classes], children=items)


def _regroup(parent: nodes.Element, declared: tuple[str, ...]) -> None:
    selected = executed_frameworks()
    children = list(parent.children)
    index = 0
    while index < len(children):
        if not (_is_code_cell(children[index]) and _cell_framework(children[index])):
            index += 1
            continue
        run: list[nodes.container] = []
        folded = _for_comparison(children[index])
        while index < len(children) and _is_code_cell(children[index]):
            if _cell_framework(children[index]) is None or _for_comparison(children[index]) != folded:
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
        items = [
            _tab_item(name, by_framework[name], None if name in selected else _left_out_note(name))
            for name in FRAMEWORKS if name in by_framework
        ]
        tab_set = _tab_set(["rosetta-framework-tabs"], items)
        tab_set.source, tab_set.line = run[0].source, run[0].line
        position = parent.index(run[0])
        for cell in run:
            parent.remove(cell)
        parent.insert(position, tab_set)
        if folded:  # what each part computes for the comparisons, folded as they are
            parent.insert(position, nodes.raw("", '<details class="rosetta-comparison"><summary>'
                                              f"{html.escape(FOR_COMPARISON_CAPTION)}</summary>", format="html"))
            parent.insert(position + 2, nodes.raw("", "</details>", format="html"))


def _download_line(app: Sphinx, docname: str, declared: tuple[str, ...]) -> nodes.container:
    """A synced tab set under the title: each framework's download of this page, and
    where this build ran that framework's part."""
    from sphinx.util.osutil import relative_uri

    from .downloads import SITE_FOLDER

    here = app.builder.get_target_uri(docname)
    stem = Path(docname).name
    parts = _parts_of(app.env).get(docname, {})
    items = []
    for framework in declared:
        title = FRAMEWORK_TITLES[framework]
        paragraph = nodes.paragraph("", f"Download the {title} part of this page: ")
        for number, (kind, suffix) in enumerate((("notebook", "ipynb"), ("script", "py"))):
            if number:
                paragraph += nodes.Text(" · ")
            target = relative_uri(here, f"{SITE_FOLDER}/{stem}-{framework}.{suffix}")
            paragraph += nodes.reference("", kind, refuri=target, classes=["rosetta-download"])
        paragraph += nodes.Text(" (its prose, shared cells and own cells; it runs on its own).")
        paragraph += nodes.inline("", where_it_ran(parts.get(framework), title), classes=["rosetta-ran-on"])
        items.append(_tab_item(framework, [paragraph]))
    return _tab_set(["rosetta-downloads"], items)


class build_banner(nodes.General, nodes.Element):
    """Placeholder for the line under every page's title that says what build this is."""


def _fill_banners(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    placeholders = list(doctree.findall(build_banner))
    if not placeholders:
        return
    devices = devices_by_framework(_parts_of(app.env))
    stand_ins = sorted(page for page, used in _stand_ins_of(app.env).items() if used)
    facts = [fact for name in sorted(app.env.found_docs)
             for fact in front_matter_list(app.env.metadata.get(name, {}).get("build_facts", []))]
    line = banner_text(current_profile(), stand_ins, devices, facts, is_test_build())
    for placeholder in placeholders:
        placeholder.replace_self(nodes.paragraph("", line, classes=["rosetta-banner"]))


class execution_table(nodes.General, nodes.Element):
    """Placeholder for the table of every page's parts, filled once all pages were read."""


class ExecutionTableDirective(Directive):
    """``{rosetta-execution-table}``: seconds per page and part of this build."""

    def run(self) -> list[nodes.Node]:
        return [execution_table("")]


def _fill_execution_tables(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    for placeholder in list(doctree.findall(execution_table)):
        line = nodes.paragraph("", f"This build: {gated_line(_parts_of(app.env))}, each of which would have "
                                   "stopped it had it failed.")
        placeholder.replace_self([line, _table(EXECUTION_HEADERS, execution_rows(_parts_of(app.env)))])


def _table(headers: list[str], rows: list[list[str]]) -> nodes.table:
    table = nodes.table(classes=["rosetta-execution-table"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    group.extend(nodes.colspec(colwidth=1) for _ in headers)
    head = nodes.thead()
    head += nodes.row("", *[nodes.entry("", nodes.paragraph("", text)) for text in headers])
    body = nodes.tbody()
    for row in rows:
        body += nodes.row("", *[nodes.entry("", nodes.paragraph("", text)) for text in row])
    group += head
    group += body
    return table


def _every_build_pages(env: Any) -> list[str]:
    """Pages whose front matter says ``rosetta_execute: every-build``: they read what the
    build wrote (results), so they execute in every build, after every other page."""
    return [name for name in sorted(env.found_docs)
            if f"rosetta_execute: {EVERY_BUILD}" in Path(env.doc2path(name)).read_text(encoding="utf-8", errors="replace")]


def _outdated_with_every_build(app: Sphinx, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """Pages showing the execution table are rewritten whenever any page was re-read;
    every-build pages always are."""
    every_build = _every_build_pages(env)
    if not (added or changed):
        return every_build
    return every_build + [name for name in env.found_docs if "rosetta-execution-table" in
                          Path(env.doc2path(name)).read_text(encoding="utf-8", errors="replace")]


def _read_every_build_pages_last(app: Sphinx, env: Any, docnames: list[str]) -> None:
    last = [name for name in _every_build_pages(env) if name in docnames]
    for name in last:
        docnames.remove(name)
    docnames.extend(last)
    _execute_ahead(app, env, docnames)


def _purge(app: Sphinx, env: Any, docname: str) -> None:
    _parts_of(env).pop(docname, None)


def _merge(app: Sphinx, env: Any, docnames: set, other: Any) -> None:
    _parts_of(env).update({name: parts for name, parts in _parts_of(other).items() if name in docnames})


def _on_doctree_read(app: Sphinx, doctree: nodes.document) -> None:
    docname = app.env.docname
    declared = declared_frameworks(app, docname)
    cells = list(doctree.findall(_is_code_cell))
    parents = {id(cell.parent): cell.parent for cell in cells}
    for parent in parents.values():
        _regroup(parent, declared)
    for cell in cells:
        if "comparison" in cell.get("cell_metadata", {}).get("tags", []):
            _collapse(cell)
    section = doctree.next_node(nodes.section)
    if section is not None and section.children and isinstance(section[0], nodes.title):
        if any(_cell_framework(cell) for cell in cells):
            section.insert(1, _download_line(app, docname, declared))
        section.insert(1, build_banner(""))


def _collapse(cell: nodes.container) -> None:
    """Fold a comparison cell's code under a one-line caption; its output stays open."""
    for child in list(cell.children):
        if isinstance(child, nodes.container) and child.get("nb_element") == "cell_code_source":
            caption = comparison_caption(child.astext())
            position = cell.index(child)
            cell.insert(position, nodes.raw("", '<details class="rosetta-comparison"><summary>'
                                            f"{html.escape(caption)}</summary>", format="html"))
            cell.insert(position + 2, nodes.raw("", "</details>", format="html"))
            return


def _on_build_finished(app: Sphinx, exception: Exception | None) -> None:
    """Write every framework's download of every page with framework cells into the site,
    the site's search index and the checklist's pairs' files."""
    from .downloads import SITE_FOLDER, build_utils_wheel, write_downloads
    from .checklist_pages import split_checklist
    from .search_index import build_index

    if exception is not None or app.builder.format != "html":
        return
    ledger = Path(app.outdir).parent / GATED_LEDGER
    executed = [[docname, part, facts.get("seconds"), facts.get("cpu_seconds")]
                for docname, parts in sorted(_parts_of(app.env).items()) for part, facts in parts.items()
                if not facts.get("cached") and not facts.get("from_page_cache")]  # what this build ran
    ledger.write_text(json.dumps({"line": gated_line(_parts_of(app.env)),
                                  "pages": gated_verdicts(_parts_of(app.env)), "executed_parts": executed}, indent=1))
    wrote = False
    for docname in sorted(app.env.found_docs):
        path = Path(app.env.doc2path(docname))
        if path.suffix != ".md" or "```{code-cell}" not in path.read_text(encoding="utf-8"):
            continue
        page = Page.read(path)
        if page.tagged_frameworks():
            write_downloads(page, Path(app.outdir) / SITE_FOLDER)
            wrote = True
    if wrote:  # the one pip command every download's note names
        build_utils_wheel(Path(app.outdir) / SITE_FOLDER)
    if app.config.html_theme == BOOK_THEME:  # the search page's index, one record per section
        LOGGER.info(f"search index: {build_index(Path(app.outdir))} sections")
    split_checklist(Path(app.outdir))  # the checklist page carries one pair, loads the others


def _on_config_inited(app: Sphinx, config: Any) -> None:
    check_registry()  # a wrong framework entry stops the build before any page runs
    # The extension executes pages itself; MyST-NB only reads the outputs from its cache.
    config.rosetta_execution_mode = config.nb_execution_mode
    if config.nb_execution_mode != "off":
        config.nb_execution_mode = "cache"
    # Any kernel MyST-NB itself starts refuses to run: pages execute part by part (_execute).
    os.environ["PYTHONSTARTUP"] = str(Path(__file__).with_name("myst_nb_guard.py"))
    base = Path(config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache")
    folder = cache_folder(base)  # one per profile, frameworks and helpers; older ones removed
    # A config value that changes with the cache makes Sphinx re-read every page.
    config.rosetta_execution_key = folder.name
    config.nb_execution_cache_path = str(folder)
    # The book's search page (templates/search.html, a page of the book's theme) searches the
    # index search_index.py builds at the end; a site in another theme keeps Sphinx's search.
    if config.html_theme == BOOK_THEME:
        config.templates_path = [*config.templates_path, str(Path(__file__).with_name("templates"))]
        config.html_context = {**config.html_context,
                               "rosetta_frameworks": [(name, FRAMEWORK_TITLES[name]) for name in FRAMEWORKS]}


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx_design")
    app.setup_extension("myst_nb")
    app.add_config_value("rosetta_execution_key", "", "env")
    app.add_config_value("rosetta_execution_mode", "cache", "env")
    app.connect("config-inited", _on_config_inited)
    app.connect("source-read", _on_source_read)
    app.connect("doctree-read", _on_doctree_read)
    app.connect("build-finished", _on_build_finished)
    app.connect("doctree-resolved", _fill_execution_tables)
    app.connect("doctree-resolved", _fill_banners)
    app.connect("env-get-outdated", _outdated_with_every_build)
    app.connect("env-before-read-docs", _read_every_build_pages_last)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.add_node(execution_table)
    app.add_node(build_banner)
    app.add_directive("rosetta-execution-table", ExecutionTableDirective)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
