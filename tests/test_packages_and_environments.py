"""The three packages and the two environments.

Three layers, imported downwards only: ``rosetta_utils``, the reader's library
(what framework tabs and downloads import), imports neither the proof library
``rosetta_proof`` nor the build engine ``rosetta_book``; the proof library
never imports the engine. The reader's library declares every third-party
module it imports, and imports with nothing but what its own pyproject declares; each framework's part runs in its own environment (the
legacy one on numpy 1.26, the current one on numpy 2), and what a part leaves
crosses to the comparisons as plain data or stops the page naming it.
"""

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from jupyter_cache import get_cache
from uv import find_uv_bin

from frameworks_under_test import AVAILABLE
from tiny_pages import code_cell, myst_page
from rosetta_book.environments import (
    ENVIRONMENTS,
    BookEnvironmentError,
    check_environment,
    environment_of,
    python_for,
    require_python,
)
from rosetta_book.page import Page
from rosetta_book.page_execution import CacheEntryUnreadable, PageExecutionError, execute_page
from rosetta_utils import FRAMEWORKS

ROOT = Path(__file__).parents[1]
UTILS = ROOT / "src" / "rosetta_utils"
PROOF = ROOT / "src" / "rosetta_proof"
ENGINE = ROOT / "src" / "rosetta_book"


def imported_modules(folder: Path) -> dict[str, set[str]]:
    """Every module each file under ``folder`` imports (absolute names; relative imports
    resolved against the file's package)."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        package = ".".join(path.relative_to(folder.parent).with_suffix("").parts[:-1])
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    names.add(".".join(base + ([node.module] if node.module else [])))
                else:
                    names.add(node.module)
        found[str(path.relative_to(folder.parent))] = names
    return found


def upward_imports(folder: Path, above: set[str]) -> dict[str, list[str]]:
    """Per module of ``folder``, the imports it makes of the packages ``above`` it."""
    leaks = {path: sorted(name for name in names if name.split(".")[0] in above)
             for path, names in imported_modules(folder).items()}
    return {path: names for path, names in leaks.items() if names}


def test_the_readers_library_imports_neither_the_proofs_nor_the_engine():
    assert upward_imports(UTILS, {"rosetta_proof", "rosetta_book"}) == {}


def test_the_proof_library_never_imports_the_engine():
    assert upward_imports(PROOF, {"rosetta_book"}) == {}


#: The frameworks' own modules: a reader installs the framework of the tab they take,
#: and the reader's library imports it only inside the functions of that framework.
FRAMEWORK_MODULES = {"torch", "torchvision", "tensorflow", "keras", "jax", "jaxlib", "flax", "optax",
                     "orbax", "mxnet", "chainer", "chainermn", "mpi4py"}
#: Import names that differ from their distribution's name on the registry.
DISTRIBUTION_OF = {"PIL": "pillow", "yaml": "pyyaml", "sklearn": "scikit-learn"}


def third_party_imports(folder: Path) -> dict[str, set[str]]:
    """Per top-level third-party module imported anywhere under ``folder`` (function bodies
    included), the files that import it."""
    found: dict[str, set[str]] = {}
    for path, names in imported_modules(folder).items():
        for name in names:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top.startswith("rosetta_") or top.startswith("_"):
                continue
            found.setdefault(top, set()).add(path)
    return found


def declared_distributions(pyproject: Path) -> dict[str, str]:
    """Every distribution the pyproject declares, with where: ``dependencies`` or ``[extra]``."""
    project = tomllib.loads(pyproject.read_text())["project"]
    declared = {}
    for where, requirements in [("dependencies", project["dependencies"]),
                                *[(f"[{extra}]", listed)
                                  for extra, listed in project.get("optional-dependencies", {}).items()]]:
        for requirement in requirements:
            declared.setdefault(re.split(r"[ <>=!~;\[]", requirement, maxsplit=1)[0].lower(), where)
    return declared


def test_the_readers_library_declares_every_third_party_module_it_imports():
    declared = declared_distributions(UTILS / "pyproject.toml")
    imports = third_party_imports(UTILS)
    undeclared = {module: sorted(files) for module, files in imports.items()
                  if module not in FRAMEWORK_MODULES and DISTRIBUTION_OF.get(module, module).lower() not in declared}
    assert undeclared == {}
    unused = {name for name in declared
              if name not in {DISTRIBUTION_OF.get(module, module).lower() for module in imports}}
    assert unused <= {"tqdm"}, "declared but never imported (tqdm is pooch's progress bar)"


def test_the_declaration_check_sees_an_undeclared_import(tmp_path):
    copy = tmp_path / "rosetta_utils"
    shutil.copytree(UTILS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "image_crops.py").write_text((copy / "image_crops.py").read_text() + "\n\ndef f():\n    import scipy\n")
    assert "scipy" in third_party_imports(copy)
    assert "scipy" not in declared_distributions(copy / "pyproject.toml")


def test_the_import_check_sees_an_engine_import(tmp_path):
    """The check above is not blind: a module of a copy that imports the engine is named."""
    copy = tmp_path / "rosetta_utils"
    shutil.copytree(UTILS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "timing.py").write_text((copy / "timing.py").read_text() + "\nfrom rosetta_book.page import Page\n")
    (copy / "transplant.py").write_text((copy / "transplant.py").read_text()
                                        + "\n\ndef f():\n    from rosetta_proof.tables import show_table\n")
    (copy / "data" / "fetch.py").write_text("from ..page import Page\n")  # relative, as if moved back
    names = imported_modules(copy)
    assert "rosetta_book.page" in next(v for k, v in names.items() if k.endswith("timing.py"))
    assert "rosetta_utils.page" in next(v for k, v in names.items() if k.endswith("fetch.py"))
    assert set(upward_imports(copy, {"rosetta_proof", "rosetta_book"})) == {
        "rosetta_utils/timing.py", "rosetta_utils/transplant.py"}


#: An import of the build engine anywhere in a cell, a worker script written as a string included.
ENGINE_IMPORT = re.compile(r"^\s*(?:from|import)\s+rosetta_book\b", re.MULTILINE)


def test_no_page_imports_the_build_engine():
    """Pages and their downloads import ``rosetta_utils`` only: a reader has no engine."""
    pages = sorted((ROOT / "book").rglob("*.md"))
    assert len(pages) > 20
    found = [f"{page.where(index)}" for path in pages for page in [Page.read(path)]
             for index, cell in enumerate(page.notebook.cells)
             if cell.cell_type == "code" and ENGINE_IMPORT.search(cell.source)]
    assert found == []
    planted = "SCRIPT.write_text('''\nimport os\n    from rosetta_book.chapter import load_chapter\n''')"
    assert ENGINE_IMPORT.search(planted) and not ENGINE_IMPORT.search("# rosetta_book.bench times it")


#: An import of the proof library anywhere in a cell.
PROOF_IMPORT = re.compile(r"^\s*(?:from|import)\s+rosetta_proof\b", re.MULTILINE)


def test_only_comparison_cells_import_the_proof_library():
    """What a download holds (shared and framework cells) imports the reader's library
    only; verdicts, tables and records live in the comparison cells, which no download
    carries."""
    from rosetta_book.page import COMPARISON, cell_role

    found, comparisons = [], 0
    for path in sorted((ROOT / "book").rglob("*.md")):
        page = Page.read(path)
        for index, cell in enumerate(page.notebook.cells):
            if cell.cell_type == "code" and PROOF_IMPORT.search(cell.source):
                if cell_role(cell) == COMPARISON:
                    comparisons += 1
                else:
                    found.append(page.where(index))
    assert found == [] and comparisons > 20


def test_the_engine_imports_rosetta_utils_and_its_own_modules_only_by_their_names():
    """The engine reaches the pages' helpers as ``rosetta_utils``: no relative import of a
    helper module that moved (it would resolve to a missing ``rosetta_book.<name>``)."""
    engine_modules = {path.stem for path in ENGINE.glob("*.py")} | {path.name for path in ENGINE.iterdir()
                                                                   if path.is_dir() and path.name != "__pycache__"}
    for path, names in imported_modules(ENGINE).items():
        for name in names:
            parts = name.split(".")
            if parts[0] == "rosetta_book" and len(parts) > 1:
                assert parts[1] in engine_modules, f"{path} imports {name}, which is not the engine's"


def test_the_utils_pyproject_lists_every_package_folder():
    config = tomllib.loads((UTILS / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    folders = {"rosetta_utils" + "".join(f".{part}" for part in path.parent.relative_to(UTILS).parts)
               for path in UTILS.rglob("__init__.py") if "build" not in path.parts}
    assert listed == folders


def _distribution_closure(requirements: list[str]) -> set[str]:
    """The installed distributions ``requirements`` need, and theirs, recursively (no extras)."""
    seen, todo = set(), [re.split(r"[ <>=!~;\[]", requirement, maxsplit=1)[0] for requirement in requirements]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        for requirement in importlib.metadata.requires(name) or []:
            if "extra ==" in requirement:
                continue
            marker = requirement.split(";", 1)[1] if ";" in requirement else ""
            if "python_version" in marker or "platform" in marker or "sys_platform" in marker:
                from packaging.markers import Marker

                if not Marker(marker).evaluate():
                    continue
            todo.append(re.split(r"[ <>=!~;\[(]", requirement.strip(), maxsplit=1)[0])
    return seen


@pytest.mark.legacy  # on numpy 1.26 (legacy run) and on numpy 2 (current run)
def test_rosetta_utils_imports_with_only_its_declared_dependencies(tmp_path):
    """A folder holding only the distributions rosetta_utils's pyproject declares (and what
    they need), and the package itself: every module of it imports there, in a Python that
    sees no other site-packages."""
    declared = tomllib.loads((UTILS / "pyproject.toml").read_text())["project"]["dependencies"]
    site = tmp_path / "site"
    site.mkdir()
    for name in _distribution_closure(declared):
        for file in importlib.metadata.distribution(name).files or []:
            top = file.parts[0]
            source = Path(file.locate())
            if top.endswith((".dist-info", ".pth")) or ".." in file.parts or not source.exists():
                continue
            target = site / top
            if not target.exists():
                target.symlink_to(Path(file.locate()).parents[len(file.parts) - 1] / top)
    (site / "rosetta_utils").symlink_to(UTILS)
    code = (
        "import importlib, pkgutil, sys\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        "import rosetta_utils, numpy\n"
        "skipped = {f'rosetta_utils.{family}.{f}' for family in ('gru', 'porting', 'recorders')\n"
        "           for f in ('pytorch', 'tensorflow', 'jax', 'mxnet', 'chainer')}\n"
        "names = [m.name for m in pkgutil.walk_packages(rosetta_utils.__path__, 'rosetta_utils.')]\n"
        "for name in names:\n"
        "    if name not in skipped:\n"
        "        importlib.import_module(name)\n"
        "outside = sorted({m.__file__.split('/site-packages/')[0] for m in list(sys.modules.values())\n"
        "                  if getattr(m, '__file__', None) and '/site-packages/' in m.__file__})\n"
        "print(len(names), numpy.__version__, outside)\n"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    count, numpy_version, outside = done.stdout.split(" ", 2)
    assert int(count) > 20 and outside.strip() == "[]", done.stdout
    assert numpy_version == importlib.metadata.version("numpy")


def _interpreter(version: str) -> str | None:
    """A working ``python3.X``: on the PATH, or among pyenv's versions (as the Makefile looks)."""
    import glob

    found = [shutil.which(f"python{version}")]
    for root in filter(None, [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]):
        found += sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"))
    for candidate in filter(None, found):
        if subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    return None


#: What a reader's session calls of the library, framework-free, as the downloads call it
#: (offline: the data sets' and the weights' labelled stand-ins); run in a bare environment.
READER_SESSION = """
import os, tempfile
os.environ["ROSETTA_OFFLINE"] = "1"
os.environ["ROSETTA_DATA_DIR"] = tempfile.mkdtemp()
import numpy as np
from rosetta_utils.cases import grid
from rosetta_utils.data import cifar10, imdb
from rosetta_utils.differences import max_abs_difference
from rosetta_utils.gru import random_gru_weights
from rosetta_utils.image_crops import center_crops
from rosetta_utils.keras_h5 import read_keras_weights, write_keras_weights
from rosetta_utils.machine import machine_lines
from rosetta_utils.pretrained import resnet50_imagenet_weights
from rosetta_utils.run_profile import current_profile, timed_rounds
from rosetta_utils.timing import interleave
from rosetta_utils.transplant import conv_oihw_to_hwio, glorot_uniform

images = cifar10()
assert images.synthetic and images.x_train.ndim == 4
assert imdb().synthetic
crops = center_crops(images.x_test[:2], resize=40, crop=32)
assert crops.shape == (2, 3, 32, 32)
weights = resnet50_imagenet_weights()
assert weights.stand_in and len(weights.weights) == 265
path = write_keras_weights(os.path.join(tempfile.mkdtemp(), "w.h5"), {"dense": {"kernel:0": np.ones((2, 3))}})
assert read_keras_weights(path)["dense"]
kernel = conv_oihw_to_hwio(glorot_uniform((4, 3, 3, 3), np.random.default_rng(0)))
assert max_abs_difference(kernel, kernel) == 0.0 and len(grid(size=(6, 7), stride=(1, 2))) == 4
assert random_gru_weights(3, 4) and current_profile() == "smoke" and timed_rounds(5) >= 1
assert machine_lines() and callable(interleave)
print("reader session ran", crops.shape)
"""


@pytest.mark.parametrize("version", ["3.10", "3.13"])
def test_a_reader_installs_the_readers_library_alone_and_runs_what_downloads_call(version, tmp_path):
    """The environments run Python 3.11 and 3.12; a reader may have 3.10 or 3.13. A fresh
    virtual environment of that Python, the package's folder installed with its extras
    (numpy, pooch and the rest from the registry, no framework; by ``uv pip install``, which
    resolves a requirement as pip does, from its cache): every module imports, every name a
    download imports from it exists, and the framework-free calls a reader's session makes
    run, offline."""
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    copy = tmp_path / "rosetta_utils"
    shutil.copytree(UTILS, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    extras = ",".join(tomllib.loads((UTILS / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    installed = subprocess.run([find_uv_bin(), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                                f"{copy}[{extras}]"], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    names = sorted(downloads_imports())
    code = (
        "import pkgutil, importlib, numpy, rosetta_utils\n"
        "skipped = {f'rosetta_utils.{family}.{f}' for family in ('gru', 'porting', 'recorders')\n"
        "           for f in ('pytorch', 'tensorflow', 'jax', 'mxnet', 'chainer')}\n"
        "names = [m.name for m in pkgutil.walk_packages(rosetta_utils.__path__, 'rosetta_utils.')]\n"
        "for name in names:\n"
        "    if name not in skipped:\n"
        "        importlib.import_module(name)\n"
        f"for module, name in {names!r}:\n"
        "    if module not in skipped:  # a framework's own module needs its framework\n"
        "        getattr(importlib.import_module(module), name)\n"
        "print(len(names), numpy.__version__, rosetta_utils.__version__)\n"
    )
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    count, numpy_version, version_installed = done.stdout.split()
    import rosetta_utils

    assert int(count) > 20 and version_installed == rosetta_utils.__version__
    assert numpy_version.startswith("2."), "the resolver chose a numpy older than 2 for a new Python"
    session = subprocess.run([str(venv / "bin" / "python"), "-c", READER_SESSION], cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
    assert session.returncode == 0, session.stderr[-3000:]
    assert "reader session ran" in session.stdout


def downloads_imports() -> set[tuple[str, str]]:
    """Every ``(module, name)`` the book's downloads import from the reader's library."""
    from rosetta_book.downloads import download_notebook
    from rosetta_book.downloads_check import pages_with_downloads

    found = set()
    for page in pages_with_downloads():
        for framework in page.tagged_frameworks():
            for cell in download_notebook(page, framework).cells:
                if cell.cell_type != "code":
                    continue
                try:
                    tree = ast.parse("\n".join(line for line in cell.source.splitlines()
                                               if not line.lstrip().startswith(("%", "!"))))
                except SyntaxError:
                    continue
                found |= {(node.module, alias.name) for node in ast.walk(tree)
                          if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rosetta_utils")
                          for alias in node.names}
    return found


def test_every_framework_has_one_environment():
    assert sorted(name for members in ENVIRONMENTS.values() for name in members) == sorted(FRAMEWORKS)
    assert environment_of("mxnet") == "legacy" and environment_of("jax") == "current"


def test_an_unknown_environment_is_an_error_listing_the_known_ones():
    with pytest.raises(BookEnvironmentError, match="unknown environment 'py2'.*current, legacy"):
        check_environment("py2")


def test_a_missing_environment_says_how_to_make_it(monkeypatch, tmp_path):
    monkeypatch.setenv("ROSETTA_LEGACY_PYTHON", str(tmp_path / "no-such-python"))
    if python_for("mxnet") == sys.executable:
        pytest.skip("MXNet imports in this process")
    with pytest.raises(BookEnvironmentError, match=r"mxnet runs in the legacy environment.*make book.*ROSETTA_LEGACY_PYTHON"):
        require_python("mxnet")


NUMPY_PAGE = myst_page(
    "Numpys",
    code_cell("import numpy as np\nimport sys", None),
    code_cell("value = {'numpy': np.__version__, 'python': sys.version.split()[0], 'x': np.arange(3.0)}", "jax"),
    code_cell("value = {'numpy': np.__version__, 'python': sys.version.split()[0], 'x': np.arange(3.0)}", "mxnet"),
    code_cell("from rosetta_proof.tab_results import load_tab_results\n"
              "print(sorted((fw, run.value['numpy'], run.value['x'].tolist()) for fw, run in load_tab_results().items()))",
              "comparison"),
    front_matter_extra="frameworks: [jax, mxnet]\ntab_results: [value]\n",
)


@pytest.mark.skipif(not {"jax", "mxnet"} <= set(AVAILABLE), reason="needs both environments")
def test_each_part_runs_in_its_environment_and_its_results_cross(write_page):
    executed = execute_page(Page.read(write_page("numpys.md", NUMPY_PAGE)), ["jax", "mxnet"], log=lambda line: None)
    versions = {part.name: part.environment["versions"] for part in executed.parts if part.name != "comparisons"}
    assert versions["mxnet"]["numpy"].startswith("1.26") and versions["mxnet"]["Python"].startswith("3.11")
    assert versions["jax"]["numpy"].startswith("2.") and versions["jax"]["Python"].startswith("3.12")
    printed = "".join(o.get("text", "") for o in executed.notebook.cells[-1].outputs)
    assert printed.strip() == (f"[('jax', '{versions['jax']['numpy']}', [0.0, 1.0, 2.0]), "
                               f"('mxnet', '{versions['mxnet']['numpy']}', [0.0, 1.0, 2.0])]")


@pytest.mark.skipif("mxnet" not in AVAILABLE, reason="needs the legacy environment")
def test_a_result_that_cannot_cross_stops_the_page_naming_page_framework_and_name(write_page):
    text = myst_page("Opaque", code_cell("import datetime\nvalue = datetime.date(2026, 1, 1)", "mxnet"),
                     front_matter_extra="frameworks: [mxnet]\ntab_results: [value]\n")
    path = write_page("opaque.md", text)
    with pytest.raises(PageExecutionError, match=r"opaque\.md.*the mxnet part's 'value' is a datetime\.date, "
                                                 r"not plain data"):
        execute_page(Page.read(path), ["mxnet"], log=lambda line: None)


def test_a_truncated_cache_entry_is_a_miss_that_is_run_again_and_replaced(write_page, tmp_path):
    cache = get_cache(tmp_path / "cache")
    page = myst_page("Cut", code_cell("value = 41 + 1\nprint(value)", "jax"),
                     front_matter_extra="frameworks: [jax]\ntab_results: [value]\n")
    path = write_page("cut.md", page)
    first = execute_page(Page.read(path), ["jax"], cache, log=lambda line: None)
    assert [part.cached for part in first.parts] == [False]
    assert len(cache.list_cache_records()) == 1
    notebooks = sorted((tmp_path / "cache").rglob("*.ipynb"))
    assert notebooks, "jupyter-cache keeps the executed notebook as a file"
    for notebook in notebooks:  # cut every stored notebook in half, as an interrupted write would
        notebook.write_bytes(notebook.read_bytes()[: len(notebook.read_bytes()) // 2])
    with pytest.warns(CacheEntryUnreadable, match=r"cut\.md: the cached jax part .*cannot be read"):
        second = execute_page(Page.read(path), ["jax"], cache, log=lambda line: None)
    assert [part.cached for part in second.parts] == [False]
    assert "".join(o.get("text", "") for o in second.notebook.cells[-1].outputs) == "42\n"
    third = execute_page(Page.read(path), ["jax"], cache, log=lambda line: None)
    assert [part.cached for part in third.parts] == [True], "the replaced entry serves the next build"


# --- the Makefile -------------------------------------------------------------------------


def make(tmp_path, *arguments, **env):
    """``make`` on a copy of the Makefile in an empty folder (nothing of the checkout is touched)."""
    folder = tmp_path / "checkout"
    if not folder.exists():
        (folder / "environments").mkdir(parents=True)
        (folder / "src" / "rosetta_utils").mkdir(parents=True)
        shutil.copy(ROOT / "Makefile", folder)
        for name in ("pyproject.toml", "src/rosetta_utils/pyproject.toml", "environments/current.txt",
                     "environments/legacy.txt"):
            (folder / name).write_text("")
        shutil.copy(ROOT / "src" / "rosetta_utils" / "frameworks.py", folder / "src" / "rosetta_utils")
    clean = {key: value for key, value in os.environ.items() if not key.startswith(("ROSETTA_", "MAKE"))}
    return subprocess.run(["make", "--no-print-directory", "-C", str(folder), *arguments],
                          capture_output=True, text=True, env=dict(clean, **env), timeout=120)


def test_make_refuses_an_unknown_framework_listing_the_five(tmp_path):
    done = make(tmp_path, "environments", ROSETTA_FRAMEWORKS="pytorch,caffe")
    assert done.returncode != 0
    assert "ROSETTA_FRAMEWORKS names caffe" in done.stderr and "pytorch tensorflow jax mxnet chainer" in done.stderr
    assert not (tmp_path / "checkout" / ".venv").exists()


def test_makes_framework_lists_are_the_registrys_a_sixth_framework_included(tmp_path):
    """The Makefile types no framework list: it reads the registry, so a framework added there
    (here a stand-in, npnet, in the current environment and built without isolation) is one
    make knows, installs into its environment, and lists when it refuses an unknown name."""
    done = make(tmp_path, "-n", "environments", "PYTHON_CURRENT=/bin/true", "PYTHON_LEGACY=/bin/true")
    assert '".[test,pytorch,tensorflow,jax]"' in done.stdout and '".[test,mxnet,chainer]"' in done.stdout
    assert "--no-build-isolation-package chainer " in done.stdout
    registry = tmp_path / "checkout" / "src" / "rosetta_utils" / "frameworks.py"
    text = registry.read_text()
    main = text.index('if __name__ == "__main__":')
    registry.write_text(text[:main] + 'REGISTRY["npnet"] = Framework("npnet", "NpNet", "current", ("npnet",), '
                        '("npnet",), build_with=("setuptools",))\nFRAMEWORKS = tuple(REGISTRY)\n\n' + text[main:])
    done = make(tmp_path, "-n", "environments", "PYTHON_CURRENT=/bin/true", ROSETTA_FRAMEWORKS="npnet,pytorch")  # in the registry's order
    assert done.returncode == 0, done.stderr
    assert '".[test,pytorch,npnet]"' in done.stdout and ".venv-legacy" not in done.stdout
    done = make(tmp_path, "environments", ROSETTA_FRAMEWORKS="caffe")
    assert "pytorch tensorflow jax mxnet chainer npnet" in done.stderr
    installs = make(tmp_path, "-n", "environments", "PYTHON_CURRENT=/bin/true").stdout.splitlines()
    assert any('"setuptools"' in line.split() for line in installs if line.startswith(".venv/bin/uv"))
    assert any("--no-build-isolation-package npnet " in line and ".[test,pytorch,tensorflow,jax,npnet]" in line
               for line in installs)


def test_make_names_a_missing_interpreter_and_how_to_get_it(tmp_path):
    done = make(tmp_path, "environments", "PYTHON_CURRENT=")
    assert done.returncode != 0
    assert "no python3.12 found" in done.stderr and "PYTHON_CURRENT=/path/to/python3.12" in done.stderr
    assert not (tmp_path / "checkout" / ".venv").exists(), "nothing is created before the check"
    done = make(tmp_path, "-n", "environments", "ROSETTA_FRAMEWORKS=pytorch,jax")
    assert ".venv-legacy" not in done.stdout, "pytorch and jax need only the current environment"


def test_make_writes_the_stamp_last(tmp_path):
    """The install's recipe, printed by make -n: the stamp comes after the last install (pip
    installs uv, uv the rest)."""
    done = make(tmp_path, "-n", "environments", "PYTHON_CURRENT=/bin/true", "PYTHON_LEGACY=/bin/true")
    lines = done.stdout.splitlines()
    for folder in (".venv", ".venv-legacy"):
        touch = next(i for i, line in enumerate(lines) if line.startswith(f"touch {folder}/.installed-"))
        pips = [i for i, line in enumerate(lines)
                if f"{folder}/bin/python -m pip install" in line or f"{folder}/bin/uv pip install" in line]
        assert any(f"{folder}/bin/uv pip install" in lines[i] and "-e src/rosetta_utils" in lines[i] for i in pips)
        removes = [i for i, line in enumerate(lines) if line.startswith(f"rm -f {folder}/.installed-")]
        assert pips and removes and removes[0] < min(pips) and max(pips) < touch, folder


def test_a_selected_framework_that_cannot_run_fails_the_suite(tmp_path):
    """A framework whose environment is missing or broken does not lose its tests quietly:
    the suite stops at its start, naming it and the fix."""
    env = {**os.environ, "ROSETTA_FRAMEWORKS": "jax,mxnet",
           "ROSETTA_LEGACY_PYTHON": str(tmp_path / "no-such-python")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "test_frameworks.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "the selected frameworks mxnet cannot be tested here" in done.stdout + done.stderr
    env["ROSETTA_FRAMEWORKS"] = "jax"  # the same machine, MXNet not selected: collected
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "test_frameworks.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_current_part_does_not_inherit_the_legacy_distutils_choice(monkeypatch):
    """Chainer's run sets SETUPTOOLS_USE_DISTUTILS=stdlib in its process (Python 3.11); a
    PyTorch part started from there (Python 3.12, no such distutils) must not see it."""
    from rosetta_book.one_framework import environment

    monkeypatch.setenv("SETUPTOOLS_USE_DISTUTILS", "stdlib")
    assert "SETUPTOOLS_USE_DISTUTILS" not in environment("pytorch")
    assert environment("chainer").get("SETUPTOOLS_USE_DISTUTILS") == "stdlib"


def test_resnet50s_layout_is_said_in_one_module():
    """Its stages, its layers' names in every framework and its weights' shapes live in
    rosetta_utils.resnet50_layout; no other module of src/ spells a layer's name."""
    spellings = re.compile(r"downsample|_block\{|RESNET50_STAGES = |res\{stage")
    found = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "src").rglob("*.py")
                   if spellings.search(path.read_text(encoding="utf-8")))
    assert found == ["src/rosetta_utils/resnet50_layout.py"]


def test_one_name_per_meaning_among_the_public_names_of_src():
    """No two modules of src/ define the same public function, class or module-level
    constant, except the modules of the families that offer one interface per framework (a
    backend, a GRU converter, a recorder, a weight mover, the GPU lessons: each says which
    framework it is for, ``FRAMEWORK``) and each command's ``main``."""
    families = ("rosetta_utils/backends/", "rosetta_utils/gru/", "rosetta_utils/porting/", "rosetta_utils/recorders/",
                "rosetta_book/gpu_lessons/")
    places: dict[str, list[str]] = {}
    for path in sorted((ROOT / "src").rglob("*.py")):
        where = str(path.relative_to(ROOT / "src"))
        for name in public_names(path):
            if where not in places.setdefault(name, []):
                places[name].append(where)
    twice = {name: found for name, found in places.items() if len(found) > 1 and name != "main"
             and not all(any(place.startswith(family) and place != family + "__init__.py" for family in families)
                         for place in found)}
    assert twice == {}


def public_names(path):
    """The public functions, classes and module-level constants (UPPER_CASE, assigned:
    an import of another module's constant is the same name, not a second one) a module defines."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            yield node.name
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9_]*", target.id):
                yield target.id


def test_a_constant_defined_in_two_modules_is_found(tmp_path):
    (tmp_path / "a.py").write_text("UNIT_ROUNDOFF = 2.0**-24\n_PRIVATE = 1\ndef f():\n    pass\n")
    (tmp_path / "b.py").write_text("from a import UNIT_ROUNDOFF\nROOT: str = '.'\n")
    assert list(public_names(tmp_path / "a.py")) == ["UNIT_ROUNDOFF", "f"]
    assert list(public_names(tmp_path / "b.py")) == ["ROOT"]


@pytest.mark.parametrize("change, message", [
    ({"environment": "ancient"}, "field 'environment' names 'ancient', not one of current, legacy"),
    ({"install": ()}, "field 'install' is empty"),
    ({"name": "theano"}, "field 'backend': no module rosetta_utils.backends.theano"),
    ({"gru_converter": "rosetta_utils.gru.theano"}, "field 'gru_converter': no module rosetta_utils.gru.theano"),
    ({"backend": "nowhere.backend"}, "field 'backend': no module nowhere.backend"),
])
def test_a_registry_entry_that_names_something_missing_stops_naming_entry_and_field(change, message):
    from dataclasses import replace

    from rosetta_book.environments import RegistryError, check_registry
    from rosetta_utils.frameworks import REGISTRY

    check_registry()  # the book's own registry holds
    wrong = replace(REGISTRY["mxnet"], **change)
    with pytest.raises(RegistryError, match=re.escape(message)):
        check_registry({**REGISTRY, wrong.name: wrong})


def test_every_table_of_tasks_names_the_registrys_tasks_and_only_them():
    """The benchmark's tasks, the checkpoint command's models, the Results page's units,
    and the 2018 reference's figures all list the tasks of rosetta_proof.tasks.TASK_REGISTRY,
    every task's page exists, and `make bench` runs the registry's tasks (it names none)."""
    from rosetta_book.bench.tasks import TASKS as BENCH
    from rosetta_proof.record_tables import RATE_UNITS
    from rosetta_proof.reference import PUBLISHED
    from rosetta_utils.checkpoints import MODELS
    from rosetta_proof.tasks import TASK_REGISTRY as TASKS

    names = set(TASKS)
    assert set(BENCH) == names and set(RATE_UNITS) == names and set(PUBLISHED) <= names
    assert set(MODELS) == {task.model for task in TASKS.values()}
    assert all(BENCH[name].page == task.page and (ROOT / task.page).is_file() for name, task in TASKS.items())
    makefile = (ROOT / "Makefile").read_text()
    bench = re.search(r"^bench:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "rosetta_book.bench --frameworks" in bench and not any(name in bench for name in names)
