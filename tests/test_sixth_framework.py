"""Adding a framework is one registry entry plus its tabs (DEVELOPERS.md, "Adding a
framework or a task"), followed once, as a maintainer would.

The test copies the book's three packages, adds ONE entry to the copy's
``rosetta_utils.frameworks.REGISTRY`` (a throwaway framework, ``npnet``: numpy
behind a module of its own, with its backend module beside it), writes a
translation-table page with a PyTorch tab and an npnet tab, and checks, in a
process that imports the copy, that the engine executes the page (each part in
its own guarded kernel, the comparison cell's verdicts, the compact table),
that the new framework's download names what to install and holds none of
PyTorch's code, and that the porting checklist takes its rows. Nothing else in
the copy is edited.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The one registry entry the test adds (the framework's modules live in the test's folder).
ENTRY = ('    Framework("npnet", "NpNet", "current", ("npnet",), ("npnet",), backend="npnet_backend",\n'
         '              gru_converter=None),\n')

FRAMEWORK = '''
"""A throwaway framework: numpy behind a module of its own."""
import numpy as np

__version__ = "0.1"


def dense(x, weight, bias):
    """PyTorch's Linear: weight is (out, in)."""
    return x @ weight.T + bias
'''

BACKEND = '''
"""npnet's backend helpers (the functions rosetta_utils.backends documents)."""
import os

import npnet


def version():
    return {"npnet": npnet.__version__}


def device():
    return "cpu"


def array_device(value):
    return None


def float32_precision():
    return "float32"


def threads():
    return os.cpu_count() or 1


def synchronize(value):
    return value
'''

PAGE = '''
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
frameworks: [pytorch, npnet]
tab_results: [outputs]
untimed: true
---

# A dense layer in a sixth framework

## Setup

```{code-cell} ipython3
import numpy as np

from rosetta_utils.cases import grid

rng = np.random.default_rng(6)
grids, references = {}, {}
```

## A dense layer

Trap: NpNet's weight is (out, in), as PyTorch's.

```{code-cell} ipython3
grids["dense"] = grid(batch=(1, 3))
references["dense"] = []
for case in grids["dense"]:
    case.x = rng.standard_normal((case.batch, 4)).astype(np.float32)
    case.w = rng.standard_normal((2, 4)).astype(np.float32)
    case.b = rng.standard_normal(2).astype(np.float32)
    x64, w64 = case.x.astype(np.float64), case.w.astype(np.float64)
    references["dense"].append(x64 @ w64.T + case.b)
```

```{code-cell} ipython3
:tags: [pytorch]
:decisive: torch.nn.functional.linear
import torch


def dense(case):
    x, w, b = (torch.from_numpy(a) for a in (case.x, case.w, case.b))
    return torch.nn.functional.linear(x, w, b).numpy()


outputs = {}
outputs["dense"] = [dense(case) for case in grids["dense"]]
```

```{code-cell} ipython3
:tags: [npnet]
:decisive: npnet.dense
import npnet


def dense(case):
    return npnet.dense(case.x, case.w, case.b)


outputs = {}
outputs["dense"] = [dense(case) for case in grids["dense"]]
```

## The checks

```{code-cell} ipython3
:tags: [comparison]
from rosetta_proof.checklist import record_table
from rosetta_proof.compact_table import compact_table, load_calls
from rosetta_proof.tab_results import load_tab_results
from rosetta_proof.translation_checks import check_concepts

runs = load_tab_results()
checks = check_concepts("tables/sixth.md", runs, references, grids=grids)
print(sorted(runs))
print(compact_table(checks, grids).data)
record_table("tables/sixth.md", "Sixth", checks, load_calls())
```
'''.lstrip()

SCRIPT = '''
import json, sys
from pathlib import Path

from rosetta_book.downloads import download_notebook, download_requirements
from rosetta_book.environments import check_registry
from rosetta_book.page import Page
from rosetta_book.page_execution import execute_page
from rosetta_proof.checklist import load_tables, pair_traps
from rosetta_utils import FRAMEWORKS

check_registry()
page = Page.read(Path(sys.argv[1]))
executed = execute_page(page, ("pytorch", "npnet"))
texts = [output.get("text", "") + json.dumps(output.get("data", {}))
         for cell in executed.notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
download = download_notebook(page, "npnet")
traps = pair_traps(load_tables(), "pytorch", "npnet")
print(json.dumps({
    "frameworks": list(FRAMEWORKS),
    "page_frameworks": list(page.frameworks),
    "outputs": texts,
    "pip_line": download_requirements(page, "npnet").pip_line(),
    "download": "\\n".join(cell.source for cell in download.cells),
    "checklist": [str(trap) for trap in traps],
}))
'''


@pytest.fixture(scope="module")
def sixth(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sixth")
    src = folder / "src"
    for package in ("rosetta_utils", "rosetta_proof", "rosetta_book"):
        shutil.copytree(ROOT / "src" / package, src / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    registry = src / "rosetta_utils" / "frameworks.py"
    text = registry.read_text()
    anchor = "\n)}\n"  # the end of the REGISTRY literal
    assert text.count(anchor) == 1, "the registry literal's end moved: update the test's anchor"
    registry.write_text(text.replace(anchor, "\n" + ENTRY + ")}\n"))
    modules = folder / "modules"
    (modules / "npnet").mkdir(parents=True)
    (modules / "npnet" / "__init__.py").write_text(FRAMEWORK)
    (modules / "npnet_backend.py").write_text(BACKEND)
    page = folder / "book" / "tables" / "sixth.md"
    page.parent.mkdir(parents=True)
    page.write_text(PAGE)
    (folder / "run.py").write_text(textwrap.dedent(SCRIPT))
    results = folder / "results"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(modules)]),
           "ROSETTA_RESULTS_DIR": str(results), "ROSETTA_FRAMEWORKS": ""}
    done = subprocess.run([sys.executable, str(folder / "run.py"), str(page)], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_registry_entry_alone_makes_it_a_framework_of_the_book(sixth):
    assert sixth["frameworks"][-1] == "npnet"
    assert sixth["page_frameworks"] == ["pytorch", "npnet"]


def test_the_engine_executes_its_part_and_checks_it_against_the_reference(sixth):
    printed = "\n".join(sixth["outputs"])
    assert "['npnet', 'pytorch']" in printed  # both parts left their results
    assert "npnet.dense" in printed and "NpNet" in printed  # its column of the compact table


def test_its_download_names_what_to_install_and_holds_only_its_own_tab(sixth):
    assert sixth["pip_line"].startswith("pip install npnet ")
    assert "import npnet" in sixth["download"] and "torch" not in sixth["download"]


def test_the_checklist_takes_its_rows(sixth):
    (line,) = sixth["checklist"]  # the page's one trap, for the pair PyTorch and npnet
    assert "'npnet': '`npnet.dense(x, w, b)`: exact'" in line and "NpNet's weight" in line  # the reader's words
    assert "cost='noise'" in line  # the same results as the table writes them; its prose names NpNet
