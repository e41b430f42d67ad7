"""Per-framework downloads of a page: a notebook and a script a reader takes away.

A framework's download holds the page's headings and prose, its shared
setup and data cells, and that framework's cells, in page order; nothing that
belongs to another framework and nothing that only compares frameworks
(:mod:`rosetta_book.page`). The book build executes exactly this notebook
for each framework, in an empty folder and a process where every other
framework's import fails, so a download that needs anything from another tab,
or a file beside the page, cannot build.

``python -m rosetta_book.downloads PAGE FRAMEWORK [--script]`` prints one.
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rosetta_utils
from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS
from rosetta_utils.frameworks import REGISTRY

from .page import Page, PageError, is_for_comparison
from .python_source import parse

#: Where the built site serves the downloads, relative to its root.
SITE_FOLDER = "downloads"

#: The wheel of ``rosetta_utils`` the site serves beside the downloads.
UTILS_WHEEL = f"rosetta_utils-{rosetta_utils.__version__}-py3-none-any.whl"

#: Import names whose distribution on the package registry is named otherwise.
DISTRIBUTIONS = {"PIL": "Pillow", "_distutils_hack": "setuptools", "sklearn": "scikit-learn", "yaml": "pyyaml", "cv2": "opencv-python",
                 "google": "protobuf"}

#: The heading and note of a download's optional last part: its ``for-comparison`` cells.
LAST_PART = (
    "## Optional: what the comparison across frameworks reads\n\n"
    "*The page sets this part's results beside the other frameworks'. The cells below "
    "compute, from this part's objects, what that comparison reads, and print it; "
    "nothing above needs them.*"
)

#: The reader's library's folder, whose modules a download imports.
UTILS_FOLDER = Path(rosetta_utils.__file__).parent


@dataclass(frozen=True)
class Requirements:
    """What one download needs installed: the pip requirements in the order a reader types
    them (its framework's, then the other packages it imports, then the reader's library
    with the extras the download's calls need), and the top-level modules its opening
    cell checks for."""

    packages: tuple[str, ...]
    utils_extras: tuple[str, ...]
    modules: tuple[str, ...]
    #: What the framework builds with, installed first (its registry entry's ``build_with``).
    first: tuple[str, ...] = ()

    def pip_line(self, wheel: str = UTILS_WHEEL) -> str:
        """The one ``pip install`` line of the download, e.g.
        ``pip install torch matplotlib './rosetta_utils-0.2.0-py3-none-any.whl[images]'``;
        for a framework built from source, two commands: what it builds with first, then the
        rest without build isolation (``pip install 'setuptools<81' wheel && pip install
        --no-build-isolation 'chainer==7.8.1' ...``)."""
        extras = f"[{','.join(self.utils_extras)}]" if self.utils_extras else ""
        words = [_quoted(package) for package in self.packages] + [_quoted(f"./{wheel}{extras}")]
        if not self.first:
            return "pip install " + " ".join(words)
        first = " ".join(_quoted(package) for package in self.first)
        return f"pip install {first} && pip install --no-build-isolation " + " ".join(words)


def _distribution_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower()


def _quoted(requirement: str) -> str:
    return f"'{requirement}'" if re.search(r"[<>=\[\]!~ ]", requirement) else requirement


def _imported_names(code: str) -> set[str]:
    """Every absolute name ``code`` imports: ``a.b`` for ``import a.b``, and ``a.b`` and
    ``a.b.c`` for ``from a.b import c``; also inside string constants that are Python
    themselves (a worker script written from a cell, another page's borrowed code)."""
    source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines())
    try:
        tree = parse(source)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif _is_code_text(node):
            found |= _imported_names(node.value)
    return found


def _is_code_text(node: ast.AST) -> bool:
    """Whether ``node`` is a string of several lines that imports something (a script)."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value.strip()
            and "import " in node.value)


def _utils_module_of(path: Path) -> str:
    parts = path.relative_to(UTILS_FOLDER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.lru_cache(maxsize=1)
def _utils_imports() -> dict[str, tuple[set[str], set[str]]]:
    """Per module of the reader's library: the modules of the library it imports (relative
    imports resolved) and the third-party top-level modules it imports, function bodies
    included."""
    table = {}
    for path in sorted(UTILS_FOLDER.rglob("*.py")):
        if "build" in path.relative_to(UTILS_FOLDER).parts:
            continue
        module = _utils_module_of(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        inside, outside = set(), set()
        for node in ast.walk(parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                    names = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
                else:
                    names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                if name.split(".")[0] == "rosetta_utils":
                    inside.add(name)
                elif not name.startswith("_"):
                    outside.add(name.split(".")[0])
        table[module] = (inside, outside)
    return table


def _utils_closure(imported: set[str], framework: str) -> set[str]:
    """The library's modules a download that imports ``imported`` runs, for ``framework``:
    what they import, recursively, each package's ``__init__``, and the per-framework
    module of a package they use (``backends.mxnet``, ``gru.mxnet``: chosen at run time by
    the framework's name), never another framework's."""
    table = _utils_imports()
    others = set(FRAMEWORKS) - {framework}
    todo, seen = list(imported), set()
    while todo:
        name = todo.pop()
        if name not in table:
            name = name.rpartition(".")[0]  # an imported name, not a module
        if not name or name in seen or name not in table or others & set(name.split(".")[1:]):
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:end]) for end in range(1, len(parts))]
        todo += list(table[name][0])
        if f"{name}.{framework}" in table:
            todo.append(f"{name}.{framework}")
    return seen


@functools.lru_cache(maxsize=1)
def _utils_extras() -> dict[str, str]:
    """Per distribution an extra of the reader's library installs (lower case): that extra."""
    project = tomllib.loads((UTILS_FOLDER / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {re.split(r"[ <>=!~;\[]", requirement, maxsplit=1)[0].lower(): extra
            for extra, requirements in project.get("optional-dependencies", {}).items()
            for requirement in requirements}


def download_requirements(page: Page, framework: str) -> Requirements:
    """What ``framework``'s download of ``page`` needs installed, read from its code: the
    framework's own packages (its registry entry), every other package its cells import,
    what the page's front matter adds for the framework (``requires``: packages that code
    needs at run time without importing them), and the reader's library's extras for the
    library's modules the download uses."""
    notebook = download_notebook_with_origins(page, framework, with_opening=False)[0]
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    borrowed = page.borrowed_cell(framework)
    names = _imported_names(code + "\n" + (borrowed or ""))
    imported = {name.split(".")[0] for name in names}
    entry = REGISTRY[framework]
    # Another framework's module is never installed for this one: the one-framework guard
    # refuses it when the part runs, in the build as in a reader's environment.
    others = {module for name, other in REGISTRY.items() if name != framework for module in other.all_modules}
    third_party = sorted(module for module in imported
                         if module not in sys.stdlib_module_names and module not in entry.all_modules
                         and module not in ("rosetta_utils", "numpy", "__future__")
                         and module not in page.optional_imports(framework) and module not in others)
    packages = list(entry.install)
    if "numpy" in imported and not any(package.split("<")[0].split("=")[0] == "numpy" for package in packages):
        packages.append("numpy")
    packages += [distribution for module, distribution in entry.companions if module in imported]
    packages += [DISTRIBUTIONS.get(module, module) for module in third_party]
    packages += [package for package in page.requires(framework) if package not in packages]
    first = {_distribution_name(package) for package in entry.build_with}  # installed first, pinned
    packages = [package for package in packages if _distribution_name(package) not in first]
    utils_modules = _utils_closure({name for name in names if name.split(".")[0] == "rosetta_utils"}, framework)
    needed = {module for name in utils_modules for module in _utils_imports()[name][1]}
    extras = sorted({_utils_extras()[DISTRIBUTIONS.get(module, module).lower()] for module in needed
                     if DISTRIBUTIONS.get(module, module).lower() in _utils_extras()})
    modules = [entry.probe_module] + [module for module, _ in entry.companions if module in imported]
    modules += third_party  # requires names distributions, not always importable modules (mpich)
    if utils_modules or "rosetta_utils" in imported:
        modules.append("rosetta_utils")
    return Requirements(tuple(packages), tuple(extras), tuple(dict.fromkeys(modules)), entry.build_with)


def _framework_tags(tags: list[str]) -> list[str]:
    return [tag for tag in tags if tag not in FRAMEWORKS and tag != "skip-execution"]


def download_notebook(page: Page, framework: str) -> Any:
    """The notebook of ``framework``'s part of ``page`` (an ``nbformat`` v4 notebook)."""
    return download_notebook_with_origins(page, framework)[0]


def download_notebook_with_origins(page: Page, framework: str,
                                   with_opening: bool = True) -> tuple[Any, list[int | None]]:
    """The download, and for each of its cells the index of the page cell it comes
    from (``None`` for the cells the download opens with: its note, the check that its
    packages are installed and, on a page that borrows another's code, that code;
    ``with_opening=False`` leaves them out; and for the heading of its optional last
    part, which holds the part's ``for-comparison`` cells in page order)."""
    import nbformat

    indexes = page.framework_part(framework)  # raises for a framework the page does not declare
    title = FRAMEWORK_TITLES[framework]
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    notebook.metadata["language_info"] = {"name": "python"}
    cells, origins = [], []
    last_part = [index for index in indexes if is_for_comparison(page.notebook.cells[index])]
    for index in [index for index in indexes if index not in last_part]:
        origins.append(index)
        cell = page.notebook.cells[index]
        metadata = {}
        tags = _framework_tags(list(cell.get("metadata", {}).get("tags", [])))
        if tags:
            metadata["tags"] = tags
        if cell.cell_type == "code":
            cells.append(nbformat.v4.new_code_cell(cell.source, metadata=metadata))
        else:
            cells.append(nbformat.v4.new_markdown_cell(cell.source, metadata=metadata))
    opening = []
    if with_opening:
        requirements = download_requirements(page, framework)
        line = requirements.pip_line()
        python = f" (Python {REGISTRY[framework].python})" if REGISTRY[framework].python else ""
        note = nbformat.v4.new_markdown_cell(
            f"*The {title} part of the page “{page.title}” of the Rosetta book: the page's "
            f"prose, its shared cells and its {title} cells. To run it{python}, install what it "
            f"imports, with the book's reader library (`{UTILS_WHEEL}`, served beside this "
            f"file), and run it in the folder that holds the wheel:*\n\n"
            f"```\n{line}\n```"
        )
        check = nbformat.v4.new_code_cell(
            "import importlib.util\n\n"
            f"INSTALL = {line!r}\n"
            f"for _module in {list(requirements.modules)!r}:\n"
            "    if importlib.util.find_spec(_module) is None:\n"
            f"        _need = f\"this {title} part needs {{_module}}\"\n"
            "        raise ModuleNotFoundError(f\"{_need}: {INSTALL}\")"
        )
        opening = [note, check]
        borrowed = page.borrowed_cell(framework)
        if borrowed is not None:
            opening.append(nbformat.v4.new_code_cell(borrowed))
    if last_part:
        cells.append(nbformat.v4.new_markdown_cell(LAST_PART))
        origins.append(None)
        for index in last_part:
            cells.append(nbformat.v4.new_code_cell(page.notebook.cells[index].source))
            origins.append(index)
    first_heading = next((i for i, c in enumerate(cells) if c.cell_type == "markdown"), -1)
    cells[first_heading + 1:first_heading + 1] = opening
    origins[first_heading + 1:first_heading + 1] = [None] * len(opening)
    for number, cell in enumerate(cells):
        cell["id"] = f"{framework}-{number}"
    notebook.cells = cells
    return notebook, origins


def download_script(notebook: Any) -> str:
    """The same part as a Python script (jupytext's percent format: prose as comments)."""
    import jupytext

    return jupytext.writes(notebook, fmt="py:percent")


def download_names(page: Page, framework: str) -> dict[str, str]:
    """File names of the two downloads, e.g. ``cifar10_cnn-pytorch.ipynb``."""
    page.check_framework(framework)
    stem = f"{page.name}-{framework}"
    return {"notebook": f"{stem}.ipynb", "script": f"{stem}.py"}


def write_downloads(page: Page, folder: str | Path) -> dict[str, dict[str, Path]]:
    """Write the notebook and the script of every framework the page declares and has
    cells for into ``folder``; returns ``{framework: {"notebook": path, "script": path}}``."""
    import nbformat

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for framework in page.frameworks:
        notebook = download_notebook(page, framework)
        names = download_names(page, framework)
        paths = {kind: folder / name for kind, name in names.items()}
        paths["notebook"].write_text(nbformat.writes(notebook), encoding="utf-8")
        paths["script"].write_text(download_script(notebook), encoding="utf-8")
        written[framework] = paths
    return written


def build_utils_wheel(folder: str | Path) -> Path:
    """Build the wheel of ``rosetta_utils`` into ``folder`` (pip, from a copy of the
    package's source, so that the build leaves nothing in the repository); returns it."""
    import shutil
    import subprocess
    import tempfile

    source = Path(rosetta_utils.__file__).parent
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rosetta-utils-wheel-") as scratch:
        copy = Path(scratch) / "rosetta_utils"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                               "--quiet", "-w", str(Path(scratch) / "wheel"), str(copy)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"building the rosetta_utils wheel failed: {done.stderr.strip()[-2000:]}")
        (built,) = (Path(scratch) / "wheel").glob("rosetta_utils-*.whl")
        if built.name != UTILS_WHEEL:
            raise RuntimeError(f"the rosetta_utils wheel is {built.name}, the downloads name {UTILS_WHEEL}")
        target = folder / UTILS_WHEEL
        shutil.copyfile(built, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.downloads",
                                     description="Print one framework's download of a page.")
    parser.add_argument("page", type=Path)
    parser.add_argument("framework", choices=FRAMEWORKS)
    parser.add_argument("--script", action="store_true", help="the .py script instead of the notebook")
    args = parser.parse_args(argv)
    import nbformat

    try:
        notebook = download_notebook(Page.read(args.page), args.framework)
    except PageError as error:
        parser.exit(2, f"error: {error}\n")
    sys.stdout.write(download_script(notebook) if args.script else nbformat.writes(notebook))
    return 0


if __name__ == "__main__":
    sys.exit(main())
