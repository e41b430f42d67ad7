"""A chapter page, read as MyST-NB reads it, and the role of each of its cells.

A page is one MyST notebook. Its cells play one of three roles:

* **shared**: untagged cells, the setup and data every framework needs. They
  import no framework.
* **framework**: cells tagged with one framework (``:tags: [pytorch]``). Each
  framework's cells, with the shared cells and the prose, make that
  framework's part of the page: the download a reader takes away, the
  notebook the build executes, and what the chapter loader runs.
* **comparison**: cells tagged ``comparison``. They compare what the
  framework parts computed (through :func:`rosetta_proof.tab_results.load_tab_results`)
  and are in no download. Prose that only introduces a comparison carries
  the tag too (``+++ {"tags": ["comparison"]}`` above it in MyST).

A framework's cell that computes only what the comparisons read, from that
framework's objects, carries ``for-comparison`` beside its framework
(``:tags: [pytorch, for-comparison]``). It runs where it stands, in its
framework's part; the page folds it, and a download moves it to an optional
last part, where it prints what it computed. So no later cell of the part may
read what it binds (:meth:`Page.check` refuses one that does).

The front matter declares the page's frameworks (``frameworks: [...]``,
default all five) and the names each framework part leaves for the
comparisons (``tab_results: [...]``, and ``tab_results_by_framework: {...}`` for
names only some parts leave). A page built on another page's code
declares it (``borrows: {page: cifar10_cnn.md, until: Training, name:
CIFAR_CODE}``, or a list of such entries for several pages): each of its
framework parts then opens with a cell that sets each ``name`` to the text of
its page's part of that framework, up to the section ``until``
(:meth:`Page.borrowed_cell`), so that its download carries that code and runs
where the other pages are not.

A page that times nothing says so (``untimed: true``): the build may then run
its framework parts side by side (:mod:`rosetta_book.page_execution`), which
would disturb a page's timings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS
from rosetta_utils.frameworks import UnknownFrameworkError, parse_framework_list

from .python_source import bound_and_read

#: Tag of the cells that only compare frameworks.
COMPARISON = "comparison"
#: Tag, beside a framework's, of a cell that computes only what the comparisons read.
FOR_COMPARISON = "for-comparison"
SHARED = "shared"


class PageError(ValueError):
    """A page that breaks the book's conventions; the message names page and line."""


def read_page(path: str | Path, text: str | None = None) -> Any:
    """Parse a MyST markdown page (or ``text``, its source) into a notebook whose
    metadata carries ``source_map``: the page line of every cell."""
    from myst_nb.core.read import read_myst_markdown_notebook

    path = Path(path)
    if text is None:
        if not path.is_file():
            raise PageError(f"{path}: no such page")
        text = path.read_text(encoding="utf-8")
    return read_myst_markdown_notebook(text, add_source_map=True, path=path)


def cell_tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def cell_role(cell: Any) -> str:
    """``"shared"``, ``"comparison"`` or the framework a cell belongs to."""
    tags = cell_tags(cell)
    frameworks = [tag for tag in tags if tag in FRAMEWORKS]
    if frameworks:
        return frameworks[0]
    return COMPARISON if COMPARISON in tags else SHARED


def is_for_comparison(cell: Any) -> bool:
    """Whether a framework's cell computes only what the comparisons read."""
    return FOR_COMPARISON in cell_tags(cell)


def cell_line(notebook: Any, index: int) -> int:
    """The page line where cell ``index`` starts (1-based; 0 if unknown)."""
    source_map = notebook.metadata.get("source_map", [])
    return source_map[index] + 1 if index < len(source_map) else 0


def _front_matter_list(notebook: Any, key: str) -> list[str] | None:
    value = notebook.metadata.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [item.strip().strip("'\"") for item in value.strip().strip("[]").split(",") if item.strip()]
    return [str(item) for item in value]


@dataclass(frozen=True)
class Page:
    """A parsed page with its path and the conventions it declares."""

    path: Path
    notebook: Any

    @classmethod
    def read(cls, path: str | Path, text: str | None = None) -> "Page":
        page = cls(Path(path), read_page(path, text))
        page.check()
        return page

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def title(self) -> str:
        for cell in self.notebook.cells:
            if cell.cell_type == "markdown":
                for line in cell.source.splitlines():
                    if line.startswith("# "):
                        return line[2:].strip()
        return self.name

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The frameworks the page declares, in tab order."""
        declared = _front_matter_list(self.notebook, "frameworks")
        if declared is None:
            return FRAMEWORKS
        try:
            return parse_framework_list(",".join(declared))
        except UnknownFrameworkError as error:
            raise PageError(f"{self.path}: front matter 'frameworks': {error}") from None

    @property
    def results_task(self) -> str:
        """The task name of the page's result records (front matter ``results_task``,
        default the page's file name)."""
        return str(self.notebook.metadata.get("results_task") or self.name)

    @property
    def untimed(self) -> bool:
        """Whether the page declares that it times nothing (front matter ``untimed: true``)."""
        value = self.notebook.metadata.get("untimed", False)
        if not isinstance(value, bool):
            raise PageError(f"{self.path}: front matter 'untimed' must be true or false, not {value!r}")
        return value

    @property
    def tab_results(self) -> tuple[str, ...]:
        """The names every framework part must leave for the comparison cells."""
        return tuple(_front_matter_list(self.notebook, "tab_results") or ())

    def tab_results_for(self, framework: str) -> tuple[str, ...]:
        """The names ``framework``'s part must leave: every part's (``tab_results``), then
        those only some parts compute (front matter ``tab_results_by_framework: {pytorch:
        [padding_mistake]}``: a measurement one framework makes for all)."""
        return self.tab_results + self._per_framework_lists("tab_results_by_framework").get(framework, ())

    def _per_framework_lists(self, key: str) -> dict[str, tuple[str, ...]]:
        value = self.notebook.metadata.get(key) or {}
        if not isinstance(value, dict):
            raise PageError(f"{self.path}: front matter {key!r} must map frameworks to lists, not {value!r}")
        for name, listed in value.items():
            if name not in self.frameworks:
                raise PageError(f"{self.path}: front matter {key!r} names {name!r}, not one of the page's "
                                f"frameworks ({', '.join(self.frameworks)})")
            if not isinstance(listed, list) or not all(isinstance(item, str) and item for item in listed):
                raise PageError(f"{self.path}: front matter {key!r} for {name} must be a list of names, "
                                f"not {listed!r}")
        return {name: tuple(listed) for name, listed in value.items()}

    def requires(self, framework: str) -> tuple[str, ...]:
        """What ``framework``'s part needs installed beyond what its code imports (front
        matter ``requires: {jax: [flatbuffers]}``: a package a library loads at run time
        without the page importing it), for its download's install line."""
        return self._per_framework_lists("requires").get(framework, ())

    def optional_imports(self, framework: str) -> tuple[str, ...]:
        """Modules ``framework``'s part imports but runs without, showing what their absence
        means (front matter ``optional_imports: {chainer: [onnx_chainer]}``): left out of its
        download's install line."""
        return self._per_framework_lists("optional_imports").get(framework, ())

    @property
    def borrows(self) -> tuple[Path, str, str] | None:
        """The front matter's first (or only) ``borrows`` entry: (the other page, the section
        before which its code stops, the name that holds it), or ``None``. A page that
        borrows from several pages lists them all in :attr:`borrowings`."""
        borrowings = self.borrowings
        return borrowings[0] if borrowings else None

    @property
    def borrowings(self) -> tuple[tuple[Path, str, str], ...]:
        """Every ``borrows`` entry, in the front matter's order: ``borrows`` is one mapping
        ``{page, until, name}`` or a list of them, each with its own name."""
        borrows = self.notebook.metadata.get("borrows")
        if borrows is None:
            return ()
        entries = borrows if isinstance(borrows, list) else [borrows]
        if not entries:
            raise PageError(f"{self.path}: front matter 'borrows' is an empty list")
        found: list[tuple[Path, str, str]] = []
        for entry in entries:
            if not isinstance(entry, dict) or set(entry) != {"page", "until", "name"}:
                raise PageError(f"{self.path}: front matter 'borrows' must have exactly 'page', "
                                f"'until' and 'name' (got {entry!r})")
            name = str(entry["name"])
            if not name.isidentifier():
                raise PageError(f"{self.path}: front matter 'borrows': name {name!r} is not a Python name")
            if name in [taken for _, _, taken in found]:
                raise PageError(f"{self.path}: front matter 'borrows' names {name!r} twice; give each "
                                "borrowed code its own name")
            found.append((self.path.parent / str(entry["page"]), str(entry["until"]), name))
        return tuple(found)

    def borrowed_cell(self, framework: str) -> str | None:
        """The cell that opens ``framework``'s part of a page that ``borrows`` other pages'
        code (see the module's note), or ``None``; the build, the downloads and the chapter
        loader all run this same cell."""
        assignments = [self._borrowed_code(framework, *borrowing) for borrowing in self.borrowings]
        return "\n\n".join(assignments) if assignments else None

    def _borrowed_code(self, framework: str, path: Path, until: str, name: str) -> str:
        other = Page.read(path)
        code = "\n\n".join(source for _, source in other.code_cells(other.framework_part(framework, until)))
        if "'''" in code:
            raise PageError(f"{other.path}: its {framework} code up to {until!r} cannot be quoted "
                            f"with r''' for {self.path}")
        title = FRAMEWORK_TITLES[framework]
        return (f"# {other.path.name}'s {title} code up to its {until} section (the book copies it\n"
                f"# in from that page when it builds this one): what {name} holds.\n"
                f"{name} = r'''{code}\n'''")

    def line(self, index: int) -> int:
        return cell_line(self.notebook, index)

    def where(self, index: int) -> str:
        return f"{self.path}:{self.line(index)}"

    def section_of(self, index: int) -> str | None:
        """The heading of the section cell ``index`` is in (the nearest above it)."""
        for cell in reversed(self.notebook.cells[: index + 1]):
            if cell.cell_type == "markdown" and headings(cell):
                return headings(cell)[-1]
        return None

    def roles(self) -> list[str]:
        return [cell_role(cell) for cell in self.notebook.cells]

    def tagged_frameworks(self) -> tuple[str, ...]:
        """The frameworks that have cells on the page, in tab order."""
        found = {cell_role(cell) for cell in self.notebook.cells}
        return tuple(name for name in FRAMEWORKS if name in found)

    def check(self) -> None:
        """Refuse a cell tagged with two frameworks, with a framework the page does not
        declare, or with a framework and ``comparison``."""
        declared = self.frameworks
        for index, cell in enumerate(self.notebook.cells):
            tags = cell_tags(cell)
            frameworks = [tag for tag in tags if tag in FRAMEWORKS]
            if len(frameworks) > 1:
                raise PageError(f"{self.where(index)}: a cell is tagged with several frameworks "
                                f"({', '.join(frameworks)}); tag it with one")
            if frameworks and COMPARISON in tags:
                raise PageError(f"{self.where(index)}: a cell is tagged {frameworks[0]!r} and "
                                f"{COMPARISON!r}; a comparison belongs to no framework")
            if frameworks and frameworks[0] not in declared:
                raise PageError(f"{self.where(index)}: a cell is tagged {frameworks[0]!r}, which this "
                                f"page does not declare (frameworks: {', '.join(declared)})")
            if FOR_COMPARISON in tags and not frameworks:
                raise PageError(f"{self.where(index)}: a cell is tagged {FOR_COMPARISON!r} with no "
                                "framework; tag it with the framework whose part computes it")
        for framework in self.tagged_frameworks():
            self._check_for_comparison(framework)

    def _check_for_comparison(self, framework: str) -> None:
        """Refuse a later cell of ``framework``'s part that reads a name a
        ``for-comparison`` cell binds: the download runs that cell last."""
        moved: dict[str, int] = {}
        for index in self.framework_part(framework):
            cell = self.notebook.cells[index]
            if cell.cell_type != "code":
                continue
            bound, read = bound_and_read(cell.source)
            if is_for_comparison(cell):
                moved.update(dict.fromkeys(bound, index))
                continue
            for name in sorted(read & moved.keys()):
                raise PageError(f"{self.where(index)}: the {framework} cell reads {name!r}, which the "
                                f"{FOR_COMPARISON} cell at line {cell_line(self.notebook, moved[name])} "
                                "binds; a download runs that cell last, so compute it in a cell of the part")
            for name in bound:
                moved.pop(name, None)

    def check_framework(self, framework: str) -> str:
        if framework not in FRAMEWORKS:
            raise UnknownFrameworkError(f"unknown framework {framework!r}: expected one of {', '.join(FRAMEWORKS)}")
        if framework not in self.frameworks:
            raise PageError(f"{self.path} does not declare {framework!r} (frameworks: "
                            f"{', '.join(self.frameworks)}): it has no {framework} part")
        return framework

    def framework_part(self, framework: str, until: str | None = None) -> list[int]:
        """Indexes of the cells of ``framework``'s part: every markdown cell but the
        comparisons' prose, the shared code cells and the framework's own, up to the
        section headed ``until`` (not included)."""
        self.check_framework(framework)
        chosen = []
        for index, cell in enumerate(self.notebook.cells):
            if until is not None and cell.cell_type == "markdown" and until in headings(cell):
                return chosen
            if cell_role(cell) in (SHARED, framework):
                chosen.append(index)
        if until is not None:
            raise PageError(f"{self.path}: the page has no section headed {until!r}")
        return chosen

    def comparison_part(self) -> list[int]:
        """Indexes of the code cells the comparison run executes: shared and comparison."""
        return [index for index, cell in enumerate(self.notebook.cells)
                if cell.cell_type == "code" and cell_role(cell) in (SHARED, COMPARISON)]

    def has_comparisons(self) -> bool:
        return any(cell.cell_type == "code" and cell_role(cell) == COMPARISON for cell in self.notebook.cells)

    def code_cells(self, indexes: Iterable[int]) -> list[tuple[int, str]]:
        return [(index, self.notebook.cells[index].source) for index in indexes
                if self.notebook.cells[index].cell_type == "code"]


def headings(cell: Any) -> list[str]:
    return [line.lstrip("#").strip() for line in cell.source.splitlines() if line.startswith("#")]
