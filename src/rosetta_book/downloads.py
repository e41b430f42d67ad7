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
import sys
from pathlib import Path
from typing import Any

import rosetta_utils
from rosetta_utils import FRAMEWORK_TITLES, FRAMEWORKS
from rosetta_utils.frameworks import PROBE_MODULES

from .page import Page, PageError

#: Where the built site serves the downloads, relative to its root.
SITE_FOLDER = "downloads"

#: What a framework part needs installed, for the download's opening note.
PACKAGES = {
    "pytorch": "torch",
    "tensorflow": "tensorflow keras",
    "jax": "jax flax optax",
    "mxnet": "mxnet (1.9.1, with numpy < 2)",
    "chainer": "chainer (7.8.1, with numpy < 2, Python 3.11 or older)",
}

#: The pip line the download's first code cell names when its framework's module
#: (rosetta_utils.frameworks.PROBE_MODULES) cannot be found.
INSTALL = {
    "pytorch": "pip install torch",
    "tensorflow": "pip install tensorflow keras",
    "jax": "pip install jax flax optax",
    "mxnet": "pip install mxnet==1.9.1 'numpy<2'",
    "chainer": "pip install chainer==7.8.1 'numpy<2'",
}

#: The wheel of ``rosetta_utils`` the site serves beside the downloads.
UTILS_WHEEL = f"rosetta_utils-{rosetta_utils.__version__}-py3-none-any.whl"


def _framework_tags(tags: list[str]) -> list[str]:
    return [tag for tag in tags if tag not in FRAMEWORKS and tag != "skip-execution"]


def download_notebook(page: Page, framework: str) -> Any:
    """The notebook of ``framework``'s part of ``page`` (an ``nbformat`` v4 notebook)."""
    return download_notebook_with_origins(page, framework)[0]


def download_notebook_with_origins(page: Page, framework: str) -> tuple[Any, list[int | None]]:
    """The download, and for each of its cells the index of the page cell it comes
    from (``None`` for the cells the download opens with: its note, the check that its
    packages are installed and, on a page that borrows another's code, that code)."""
    import nbformat

    indexes = page.framework_part(framework)  # raises for a framework the page does not declare
    title = FRAMEWORK_TITLES[framework]
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    notebook.metadata["language_info"] = {"name": "python"}
    cells, origins = [], []
    for index in indexes:
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
    note = nbformat.v4.new_markdown_cell(
        f"*The {title} part of the page “{page.title}” of the Rosetta book: the page's "
        f"prose, its shared cells and its {title} cells. It needs {PACKAGES[framework]} and "
        "numpy; the shared cells use `rosetta_utils`, the book's small helper package (data "
        "sets with checksums, weight layouts; numpy, pooch and tqdm, no framework), served "
        f"beside this file: `pip install {UTILS_WHEEL}`.*"
    )
    check = nbformat.v4.new_code_cell(
        "import importlib.util\n\n"
        "for _module, _install in {\n"
        f"    {PROBE_MODULES[framework]!r}: {INSTALL[framework]!r},\n"
        f"    'rosetta_utils': 'pip install {UTILS_WHEEL}',\n"
        "}.items():\n"
        "    if importlib.util.find_spec(_module) is None:\n"
        f"        _need = f\"this {title} part needs {{_module}}\"\n"
        "        raise ModuleNotFoundError(f\"{_need}: {_install}\")"
    )
    opening = [note, check]
    borrowed = page.borrowed_cell(framework)
    if borrowed is not None:
        opening.append(nbformat.v4.new_code_cell(borrowed))
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
