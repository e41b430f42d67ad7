"""The run profile and the environment report."""

import subprocess
import sys

import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_utils.envreport import FrameworkReport, machine_lines, report_framework
from rosetta_utils.frameworks import is_installed, usable_cores
from rosetta_utils.one_framework import environment
from rosetta_utils.profile import UnknownProfileError, current_profile, describe_profile


def test_profile_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("ROSETTA_PROFILE", "full")
    assert current_profile() == "full"
    monkeypatch.setenv("ROSETTA_PROFILE", " Smoke ")
    assert current_profile() == "smoke"


def test_profile_defaults_to_smoke_without_a_visible_gpu(monkeypatch):
    monkeypatch.delenv("ROSETTA_PROFILE", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert current_profile() == "smoke"


def test_unknown_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("ROSETTA_PROFILE", "fast")
    with pytest.raises(UnknownProfileError, match="'fast' is not a profile: expected one of smoke, full"):
        current_profile()


def test_profile_description_says_what_smoke_means():
    assert "smoke" in describe_profile("smoke") and "2-core CPU" in describe_profile("smoke")


def test_machine_lines_name_cpu_cores_and_profile(monkeypatch):
    monkeypatch.setenv("ROSETTA_PROFILE", "smoke")
    first, second = machine_lines()
    assert f"{usable_cores()} usable cores" in first and "GPU:" in first
    assert second.startswith("Profile: smoke (") and "2-core CPU" in second


@pytest.mark.parametrize("name", [n for n in FRAMEWORKS if is_installed(n)])
def test_every_framework_reports_a_device_and_uses_every_core(name):
    report = report_framework(name)
    assert report.device
    assert report.threads == usable_cores(), f"{name} uses {report.threads} of {usable_cores()} cores"
    assert report.versions and all(report.versions.values())


def test_report_line_names_versions_device_and_threads():
    line = FrameworkReport("mxnet", {"mxnet": "1.9.1"}, "cpu", 1).line()
    assert line == "MXNet (Gluon): mxnet 1.9.1 on cpu, 1 thread"
    assert FrameworkReport("pytorch", {"torch": "2"}, "cpu", 4).line().endswith("on cpu, 4 threads")


#: Each framework imported as its tab on a page imports it (MXNet and Chainer with their fixes).
PAGE_IMPORTS = {
    "pytorch": "import torch",
    "tensorflow": "import keras\nimport tensorflow as tf",
    "jax": "import jax\nfrom flax import nnx",
    "mxnet": (
        "import os\nimport numpy as np\nnp.bool = bool\n"
        "os.environ.setdefault('OMP_NUM_THREADS', str(len(os.sched_getaffinity(0))))\nimport mxnet as mx"
    ),
    "chainer": (
        "import warnings\nimport _distutils_hack\n_distutils_hack.remove_shim()\n"
        "warnings.filterwarnings('ignore', 'pkg_resources is deprecated')\nimport chainer"
    ),
}


def report_in_a_part(framework: str, imports: str) -> str:
    """The report's line in a process like the book's part of a page: the other frameworks
    blocked, the framework imported by the page's own lines, OMP_NUM_THREADS not set."""
    env = environment(framework)
    env.pop("OMP_NUM_THREADS", None)
    code = f"{imports}\nfrom rosetta_utils.envreport import report_framework\nprint(report_framework({framework!r}).line())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("name", [n for n in FRAMEWORKS if is_installed(n)])
def test_report_works_after_the_pages_own_imports_under_the_guard(name):
    line = report_in_a_part(name, PAGE_IMPORTS[name])
    cores = usable_cores()
    assert line.endswith(f"on cpu, {cores} thread{'s' if cores != 1 else ''}"), line


@pytest.mark.skipif(not is_installed("mxnet"), reason="needs MXNet")
def test_mxnet_threads_are_what_it_really_uses_without_omp_num_threads():
    """Without OMP_NUM_THREADS set before its import, MXNet runs on one OpenMP thread (the
    appendix measures it), and the report says one thread instead of failing."""
    line = report_in_a_part("mxnet", "import numpy as np\nnp.bool = bool\nimport mxnet as mx")
    assert line.endswith("on cpu, 1 thread"), line
