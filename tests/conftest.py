"""Shared fixtures: small MyST pages and books written by the tests."""

import hashlib
import importlib.abc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from local_http_server import LocalHTTPServer
from rosetta_book.chapter import BUILD_CACHE_VARIABLE
from rosetta_book.environments import ENVIRONMENTS, available_frameworks, check_environment, require_python
from rosetta_book.one_framework import environment as one_framework_environment
from rosetta_book.page_execution import compilation_caches, framework_parts_cache
from rosetta_utils.frameworks import _use_stdlib_distutils, is_installed, selected_frameworks

#: Which environment this test run is (``make unit-tests`` runs both): ``current`` runs
#: every test; ``legacy`` runs only those marked ``legacy``, which import MXNet or Chainer
#: in the test's own process (in the current run their legacy cases are absent or skip).
TEST_ENVIRONMENT = check_environment(os.environ.get("ROSETTA_TEST_ENVIRONMENT", "current"))
if TEST_ENVIRONMENT == "legacy":
    # MXNet reads OMP_NUM_THREADS once, when it is first imported, and without it runs on one
    # OpenMP thread; its pages set it to the usable cores before their import, and so does this
    # process, whichever of its test files imports MXNet first (tools/run_tests.py groups them).
    os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    # Chainer's Caffe protobufs predate protobuf 4 and need its Python parser, which protobuf
    # chooses when it is first imported. A page's Chainer cell sets it before its import (the
    # build runs each part in a fresh process); in this test process onnx (the moving-models
    # and checkpoint tests) imports protobuf first, so the choice is made here, for all.
    os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
LEGACY_FRAMEWORKS = ENVIRONMENTS["legacy"]

# The tests run the pages' JAX and PyTorch code again, in this process and in processes it
# starts. Where they take parts from a build (ROSETTA_BUILD_CACHE), JAX and PyTorch's Inductor
# take the programs that build compiled (for the pages whose times nobody reads: the
# untimed ones, every page of the test build) from their compilation caches, instead of
# compiling them again, and add the tests' own (rosetta_book.page_execution.compilation_caches).
if os.environ.get(BUILD_CACHE_VARIABLE):
    for _name, _value in compilation_caches(framework_parts_cache(os.environ[BUILD_CACHE_VARIABLE])).items():
        os.environ.setdefault(_name, _value)

#: The frameworks under test: the ones the build selects (``ROSETTA_FRAMEWORKS``, default
#: all five). Each must run here; one that does not fails the suite at its start
#: (:func:`pytest_configure`) instead of losing its tests without a word.
SELECTED = selected_frameworks()
#: The selected frameworks (a part runs in a process of its own environment).
AVAILABLE = [name for name in SELECTED if name in available_frameworks()]
#: The selected frameworks of this run's environment: they import in this test process.
IN_PROCESS = [name for name in SELECTED if name in ENVIRONMENTS[TEST_ENVIRONMENT] and is_installed(name)]


def missing_frameworks() -> list[str]:
    """Selected frameworks this machine cannot test: no environment runs them, or this
    run's environment should import them and does not."""
    missing = [name for name in SELECTED if name not in AVAILABLE]
    missing += [name for name in SELECTED if name in ENVIRONMENTS[TEST_ENVIRONMENT]
                and name not in IN_PROCESS and name not in missing]
    return missing


def pytest_configure(config):
    # The tests' records (a page's comparisons run on planted errors among them) go to a
    # folder of this run's own, never into the build's results that later builds read.
    if not os.environ.get(OWN_PROCESS_VARIABLE):
        config.rosetta_results = tempfile.mkdtemp(prefix="rosetta-test-results-")
        os.environ["ROSETTA_RESULTS_DIR"] = config.rosetta_results
        # What the pages' code and the tests leave in the temporary folder (a page's
        # tempfile.mkdtemp folders: 337 MB for each run of the finding-divergence chapter)
        # goes into a folder of this run's own, removed when the run ends, in this process
        # and in every process it starts.
        config.rosetta_temporary = tempfile.mkdtemp(prefix="rosetta-test-temporary-")
        os.environ["TMPDIR"] = tempfile.tempdir = config.rosetta_temporary
    missing = missing_frameworks()
    if missing:
        raise pytest.UsageError(
            f"the selected frameworks {', '.join(missing)} cannot be tested here: no environment of "
            f"this checkout runs them, or the {TEST_ENVIRONMENT} one cannot import them. Run `make "
            "environments`, or leave them out of ROSETTA_FRAMEWORKS (selected now: "
            f"{', '.join(SELECTED)})")


def pytest_unconfigure(config):
    for folder in ("rosetta_results", "rosetta_temporary"):
        if getattr(config, folder, None):
            shutil.rmtree(getattr(config, folder), ignore_errors=True)


#: ``IN_PROCESS`` for ``pytest.mark.parametrize``: the legacy ones marked ``legacy``.
IN_PROCESS_PARAMS = [pytest.param(name, marks=pytest.mark.legacy) if name in LEGACY_FRAMEWORKS else name
                     for name in IN_PROCESS]


def pytest_collection_modifyitems(config, items):
    """Each test runs in one environment: ``legacy``-marked tests in the legacy run, the
    others in the current one (where a legacy-marked test skips, saying what it needs)."""
    if TEST_ENVIRONMENT != "legacy":
        return
    kept = [item for item in items if item.get_closest_marker("legacy")]
    deselected = [item for item in items if not item.get_closest_marker("legacy")]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = kept


# In the current environment, tests load PyTorch's, TensorFlow's and JAX's parts in this
# one process (a reader's download and the build's kernels never hold two). PyPI's torch
# brings Triton, whose native library crashes the process (a segmentation fault) when it
# loads after TensorFlow's; loaded first, both work. So torch's compiler, which imports
# Triton, is imported just before TensorFlow is, in the test processes that import it (the
# others do not pay its 3 s).
class _TorchCompilerBeforeTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow":
            sys.meta_path.remove(self)
            import torch._dynamo  # noqa: F401
        return None  # the import itself goes on as usual


if is_installed("pytorch") and is_installed("tensorflow"):
    sys.meta_path.insert(0, _TorchCompilerBeforeTensorFlow())

# In the legacy environment, tests load MXNet's and Chainer's parts in this one process.
# Chainer 7 needs the standard library's distutils, which a part of MXNet would otherwise
# have replaced by setuptools' copy for the rest of the process; choose it before anything
# loads. (The current environment's Python 3.12 has no standard-library distutils.)
if is_installed("chainer"):
    _use_stdlib_distutils()

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


@pytest.fixture
def write_page(tmp_path):
    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


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


def smoke_offline(patch: pytest.MonkeyPatch, results_dir: Path | None = None) -> None:
    """Set the environment `make test` runs pages in: smoke profile, offline (labelled
    stand-ins for missing data), a book build; records into ``results_dir`` if given."""
    patch.setenv("ROSETTA_PROFILE", "smoke")
    patch.setenv("ROSETTA_OFFLINE", "1")
    patch.setenv("ROSETTA_BOOK_BUILD", "1")
    if results_dir is not None:
        patch.setenv("ROSETTA_RESULTS_DIR", str(results_dir))


def comparisons_with_records(page: Path, parts, folder: Path, *records) -> dict:
    """A page's comparison cells run on ``parts``, with ``records`` (measurements: task,
    framework, versions, device, config and metrics) written by the device check's own
    writer for the GPU lessons as the only results the build's and the curated folder hold
    (both under ``folder``): how a lessons page shows GPU records it has, or says it has none."""
    from rosetta_book.chapter import load_comparisons
    from rosetta_book.gpu_lessons import write_record

    build, curated = folder / "build", folder / "curated"
    curated.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch, build)
        patch.setenv("ROSETTA_CURATED_RESULTS_DIR", str(curated))
        patch.setenv("MPLBACKEND", "Agg")
        for record in records:
            write_record(record, record["metrics"], build, driver=None)
        return load_comparisons(page, parts)


def summary_shown(page_path: Path, namespace: dict, monkeypatch: pytest.MonkeyPatch) -> str:
    """What a page's Summary cell shows, run again on its comparison cells' namespace (a
    copy: ``namespace`` is left as it was): the text of every object it displays."""
    import IPython.display

    from rosetta_book.page import Page

    page = Page.read(page_path)
    (source,) = [source for index, source in page.code_cells(page.comparison_part())
                 if page.section_of(index) == "Summary"]
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects, **_: shown.extend(objects))
    exec(compile(source, f"{page_path.name} (Summary)", "exec"), dict(namespace))  # noqa: S102 - the page's cell
    return "\n".join(getattr(shown_object, "data", str(shown_object)) for shown_object in shown)


@pytest.fixture
def offline_smoke(monkeypatch):
    """A page's run as `make test` does it (see smoke_offline), for one test."""
    smoke_offline(monkeypatch)


@pytest.fixture
def server():
    """A local HTTP server on 127.0.0.1 serving what the test adds to it."""
    with LocalHTTPServer() as running:
        yield running


def snapshot(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` with the SHA-256 of its bytes (folders: '<dir>'): a cache
    compared before and after a failure must be unchanged."""
    if not folder.exists():
        return {}
    return {
        str(path.relative_to(folder)): ("<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest())
        for path in sorted(folder.rglob("*"))
    }


@pytest.fixture
def download_environment(monkeypatch):
    """Downloads as on a reader's machine: online, the default cache, no proxy between the
    test and its server on 127.0.0.1."""
    for name in ("ROSETTA_OFFLINE", "ROSETTA_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def assert_true_float32_equivalence(runs) -> None:
    """Each TF32 switch, read inside a page's own equivalence cells, was off there; the part's
    environment, read at its end (after Timing), shows the framework's defaults again."""
    expected = {"pytorch": ["ieee", "ieee", "ieee"], "tensorflow": False, "jax": "highest",
                "mxnet": "float32", "chainer": "float32"}
    defaults = {"pytorch": "matmul none, conv tf32, rnn tf32", "tensorflow": "TF32 allowed",
                "jax": "matmul precision default"}
    for framework, run in runs.items():
        assert run.equivalence_precision == expected[framework], framework
        if framework in defaults:
            assert run.environment["float32"] == defaults[framework], framework


#: What MXNet 1.9 and Chainer 7 need before their import (the pages' fix lines, shortened).
IMPORT_FIXES = {
    "mxnet": "import numpy as np\nnp.bool = bool\n",
    "chainer": "import _distutils_hack\n_distutils_hack.remove_shim()\n",
}


def framework_process_output(framework: str, code: str) -> str:
    """The last line ``code`` prints in a fresh process where only ``framework`` imports:
    how a test reads what the installed framework itself says (a default, a switch)."""
    done = subprocess.run([require_python(framework), "-c", IMPORT_FIXES.get(framework, "") + code],
                          env=one_framework_environment(framework), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def assert_knob_table_complete(comparison, switches, frameworks) -> None:
    """A lessons page's knob table: a row for every knob, a filled cell for every framework,
    a link to the measurement, and each named switch in its framework's cell."""
    from rosetta_proof.knob_table import NOT_REPORTED, knob_rows, missing_cells

    headers, rows = knob_rows(comparison["runs"], comparison["KNOBS"], comparison["LINKS"])
    assert headers == ["knob", *frameworks, "measured"]
    assert [row[0] for row in rows] == comparison["KNOBS"]
    assert missing_cells(comparison["runs"], comparison["KNOBS"]) == []
    for row in rows:
        assert all(cell and cell != NOT_REPORTED for cell in row[1:-1]), row
        assert "{ref}`" in row[-1]
    for framework, named in switches.items():
        if framework in frameworks:
            column = headers.index(framework)
            for knob, switch in named.items():
                cell = next(row[column] for row in rows if row[0] == knob)
                assert switch in cell, f"{framework} {knob}: {cell}"


def parts_as_built(page, frameworks):
    """For a module fixture (``yield from``): each framework's part of ``page`` run as `make
    test` runs it (smoke profile, offline; from the build's cache where it executed them)."""
    from rosetta_book.chapter import run_framework_parts

    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        yield run_framework_parts(page, frameworks)


def comparisons_as_built(page, results, results_dir=None):
    """For a module fixture (``yield from``): the page's comparison cells run on ``results``
    as the build runs them (smoke profile, offline; records into ``results_dir``)."""
    from rosetta_book.chapter import load_comparisons

    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        if results_dir is not None:
            patch.setenv("ROSETTA_RESULTS_DIR", str(results_dir))
        yield load_comparisons(page, results)


def assert_a_failed_proof_stops_the_page(page, results, framework, changed, match, failing=None):
    """Run the page's comparison cells as the build does, on ``results`` where
    ``framework``'s results take ``changed``: the page's gate must stop it, with an error
    naming the page, the section, the check, what failed (``failing``, default the
    framework) and the verdict (``match``)."""
    from rosetta_book.chapter import ChapterError, load_comparisons
    from rosetta_proof.equivalence import VerdictFailed

    import tempfile

    wrong = {name: dict(values) for name, values in results.items()}
    wrong[framework].update(changed)
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory(prefix="rosetta-failed-") as records:
        smoke_offline(patch)
        patch.setenv("ROSETTA_RESULTS_DIR", records)  # a failed run's records go nowhere that lasts
        with pytest.raises(ChapterError) as error:
            load_comparisons(page, wrong)
    assert isinstance(error.value.__cause__, VerdictFailed), error.value
    message = str(error.value)
    assert f"{Path(page).name}:" in message and "(section '" in message, message
    assert f"failed for {failing or framework}" in message and re.search(match, message), message
    return message


#: Set in a pytest process that :func:`in_a_process_of_its_own` started: its tests, one per line.
OWN_PROCESS_VARIABLE = "ROSETTA_TEST_IN_OWN_PROCESS"


#: Tests that already passed in a process another test started (``together_with``).
_PASSED_ALONE: set[str] = set()


def in_a_process_of_its_own(request, together_with: tuple[str, ...] = ()) -> bool:
    """For a test that loads whole models of several frameworks in turn: run it again in a
    pytest process of its own, where what it loads dies with it (the suite's processes
    stay under 8 GB). Returns True in that process, where the test goes on; in the test
    process itself it asserts that the other one passed and returns False.
    ``together_with``: names of tests in the same module, with the same parameters, that
    run in that process too (they load the same part once, see the module's own memo);
    each of them then returns False at once here, having passed there."""
    nodeid = request.node.nodeid
    if nodeid in os.environ.get(OWN_PROCESS_VARIABLE, "").split("\n"):
        return True
    if nodeid in _PASSED_ALONE:
        return False
    module, _, test = nodeid.partition("::")
    parameters = test[test.index("["):] if "[" in test else ""
    nodeids = [nodeid] + [f"{module}::{name}{parameters}" for name in together_with]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *nodeids],
        cwd=Path(__file__).parents[1], env={**os.environ, OWN_PROCESS_VARIABLE: "\n".join(nodeids)},
        capture_output=True, text=True)
    assert done.returncode == 0, f"{', '.join(nodeids)}, in a process of their own:\n{done.stdout[-6000:]}"
    assert re.search(rf"\b{len(nodeids)} passed\b", done.stdout), done.stdout[-2000:]
    _PASSED_ALONE.update(nodeids[1:])
    return False


#: How far each test file raised this process's peak resident memory, in GiB.
PEAK_RISES: dict[str, float] = {}


def _peak_gib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _peak_gib()
    yield
    rise = _peak_gib() - before
    if rise > 0:
        PEAK_RISES[item.fspath.basename] = PEAK_RISES.get(item.fspath.basename, 0.0) + rise


def pytest_terminal_summary(terminalreporter):
    """The peak resident memory of this test process and of its largest child process
    (parts, kernels, workers): the suite is meant to stay under 8 GB in every process;
    and the test files that raised this process's peak most."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    terminalreporter.write_line(f"peak resident memory ({TEST_ENVIRONMENT} environment): test process "
                                f"{_peak_gib():.1f} GiB, largest child process {children:.1f} GiB")
    largest = sorted(PEAK_RISES.items(), key=lambda item: -item[1])[:5]
    if largest and largest[0][1] >= 0.5:
        terminalreporter.write_line("raised the test process's peak most: " + ", ".join(
            f"{name} +{rise:.1f} GiB" for name, rise in largest))
