"""The test run's settings and fixtures: the environment variables, import order and
temporary folders of every test process, the legacy run's selection of tests, and the
fixtures tests take by name. The helpers tests import live in modules of their own:
frameworks_under_test.py, tiny_pages.py, page_checks.py."""

import importlib.abc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from frameworks_under_test import SELECTED, TEST_ENVIRONMENT, missing_frameworks
from local_http_server import LocalHTTPServer
from page_checks import OWN_PROCESS_VARIABLE, smoke_offline
from rosetta_book.chapter import BUILD_CACHE_VARIABLE
from rosetta_book.page_execution import compilation_caches, framework_parts_cache
from rosetta_utils.frameworks import _use_stdlib_distutils, is_installed

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

# The tests run the pages' JAX and PyTorch code again, in this process and in processes it
# starts. Where they take parts from a build (ROSETTA_BUILD_CACHE), JAX and PyTorch's Inductor
# take the programs that build compiled (for the pages whose times nobody reads: the
# untimed ones, every page of the test build) from their compilation caches, instead of
# compiling them again, and add the tests' own (rosetta_book.page_execution.compilation_caches).
if os.environ.get(BUILD_CACHE_VARIABLE):
    for _name, _value in compilation_caches(framework_parts_cache(os.environ[BUILD_CACHE_VARIABLE])).items():
        os.environ.setdefault(_name, _value)


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


@pytest.fixture
def write_page(tmp_path):
    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def offline_smoke(monkeypatch):
    """A page's run as `make test` does it (see smoke_offline), for one test."""
    smoke_offline(monkeypatch)


@pytest.fixture
def server():
    """A local HTTP server on 127.0.0.1 serving what the test adds to it."""
    with LocalHTTPServer() as running:
        yield running


@pytest.fixture
def download_environment(monkeypatch):
    """Downloads as on a reader's machine: online, the default cache, no proxy between the
    test and its server on 127.0.0.1."""
    for name in ("ROSETTA_OFFLINE", "ROSETTA_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


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
