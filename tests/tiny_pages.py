"""Tiny MyST pages and Sphinx projects that the tests write."""

import subprocess
import sys
import textwrap
from pathlib import Path


FRONT_MATTER = """\
---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
{extra}---
"""


def code_cell(source: str, tag: str | None = None) -> str:
    options = f":tags: [{tag}]\n" if tag else ""
    return f"```{{code-cell}} ipython3\n{options}{textwrap.dedent(source).strip()}\n```\n"


def myst_page(title: str, *cells: str, front_matter_extra: str = "") -> str:
    return FRONT_MATTER.format(extra=front_matter_extra) + f"\n# {title}\n\n" + "\n".join(cells)


def build_sphinx(source: Path, pages: dict[str, str], execution: str = "off", env=None):
    """Build a tiny Sphinx project with MyST-NB and the tab extension; return the process."""
    source.mkdir(parents=True, exist_ok=True)
    (source / "conf.py").write_text(
        "extensions = ['myst_nb', 'rosetta_book.sphinx_extension']\n"
        f"nb_execution_mode = {execution!r}\n"
        "nb_execution_raise_on_error = True\n"
        "exclude_patterns = ['_build', 'jupyter_execute', '.jupyter_cache']\n"
    )
    toctree = "\n".join(pages)
    (source / "index.md").write_text(f"# Index\n\n```{{toctree}}\n{toctree}\n```\n")
    for name, text in pages.items():
        (source / f"{name}.md").write_text(text)
    import os

    child_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", str(source), str(source / "_build")],
        capture_output=True, text=True, env=child_env,
    )
