"""The run profile and the environment report."""

import subprocess
import sys

import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_proof.framework_report import FrameworkReport, report_framework
from rosetta_utils.machine import machine_lines
from frameworks_under_test import AVAILABLE, IN_PROCESS_PARAMS
from page_checks import framework_process_output
from rosetta_book.environments import require_python
from rosetta_book.one_framework import environment
from rosetta_utils.frameworks import is_installed, usable_cores
from rosetta_utils.run_profile import UnknownProfileError, current_profile, describe_profile


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


@pytest.mark.parametrize("name", IN_PROCESS_PARAMS)
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
    code = f"{imports}\nfrom rosetta_proof.framework_report import report_framework\nprint(report_framework({framework!r}).line())"
    done = subprocess.run([require_python(framework), "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("name", AVAILABLE)
def test_report_works_after_the_pages_own_imports_under_the_guard(name):
    line = report_in_a_part(name, PAGE_IMPORTS[name])
    cores = usable_cores()
    assert line.endswith(f"on cpu, {cores} thread{'s' if cores != 1 else ''}"), line


@pytest.mark.skipif("mxnet" not in AVAILABLE, reason="needs MXNet")
def test_mxnet_threads_are_what_it_really_uses_without_omp_num_threads():
    """Without OMP_NUM_THREADS set before its import, MXNet runs on one OpenMP thread (the
    appendix measures it), and the report says one thread instead of failing."""
    line = report_in_a_part("mxnet", "import numpy as np\nnp.bool = bool\nimport mxnet as mx")
    assert line.endswith("on cpu, 1 thread"), line


ARRAY_AND_MODEL = {
    "pytorch": "made = torch.ones(2)\nmodel = torch.nn.Linear(2, 1)",
    "tensorflow": "made = tf.ones(2)\nmodel = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])",
    "jax": "made = jax.numpy.ones(2)\nmodel = nnx.Linear(2, 1, rngs=nnx.Rngs(0))",
    "mxnet": "made = mx.nd.ones(2)\nmodel = mx.gluon.nn.Dense(1, in_units=2)\nmodel.initialize()",
    "chainer": "made = chainer.Variable(np.ones(2, np.float32))\nmodel = chainer.links.Linear(2, 1)",
}


def device_in_a_part(framework: str, code: str) -> str:
    env = environment(framework)
    script = (f"import numpy as np\n{PAGE_IMPORTS[framework]}\n{code}\n"
              "from rosetta_proof.framework_report import array_device_in\n"
              f"print('DEVICE', array_device_in({framework!r}, dict(globals())))")
    done = subprocess.run([require_python(framework), "-c", script], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if line.startswith("DEVICE ")][-1][len("DEVICE "):]


@pytest.mark.parametrize("framework", AVAILABLE)
def test_the_device_is_read_from_an_array_the_part_made(framework):
    assert device_in_a_part(framework, ARRAY_AND_MODEL[framework]) == "cpu"
    assert device_in_a_part(framework, "nothing = np.ones(3)").startswith("not checked")


@pytest.mark.skipif("chainer" not in AVAILABLE, reason="Chainer is not installed")
def test_chainer_is_never_labelled_gpu_while_its_arrays_stay_numpy():
    """Even where CuPy claims a GPU, a Chainer part whose arrays are numpy ran on the CPU."""
    code = ("chainer.backends.cuda.available = True  # as if CuPy saw a GPU\n" + ARRAY_AND_MODEL["chainer"])
    assert device_in_a_part("chainer", code) == "cpu"


from rosetta_utils.frameworks import installed_gpu_build  # noqa: E402
from rosetta_book.build_plan import plan_frameworks  # noqa: E402

BUILDS = {"pytorch": "torch for CUDA 12.8", "jax": "jax-cuda12-plugin", "mxnet": None}


@pytest.mark.parametrize(
    "gpu, requested, expected",
    [
        (False, "", {"pytorch": "smoke", "jax": "smoke", "mxnet": "smoke"}),
        (True, "", {"pytorch": "full", "jax": "full", "mxnet": None}),
        (True, "smoke", {"pytorch": "smoke", "jax": "smoke", "mxnet": "smoke"}),
        (True, "full", {"pytorch": "full", "jax": "full", "mxnet": "full"}),
        (False, "full", {"pytorch": "full", "jax": "full", "mxnet": "full"}),
        (False, "smoke", {"pytorch": "smoke", "jax": "smoke", "mxnet": "smoke"}),
    ],
)
def test_the_profile_of_each_framework_for_gpu_build_and_request(gpu, requested, expected):
    plans = plan_frameworks(BUILDS, BUILDS, gpu_visible=gpu, requested=requested)
    assert {name: plan.profile for name, plan in plans.items()} == expected
    # Nothing runs the full profile on a CPU unless the reader asked for it.
    for name, plan in plans.items():
        if plan.profile == "full" and not (gpu and BUILDS[name]):
            assert requested == "full"
    if gpu and not requested:
        assert "no GPU build" in plans["mxnet"].reason and "ROSETTA_PROFILE=smoke" in plans["mxnet"].reason
        assert "on the GPU (torch for CUDA 12.8)" in plans["pytorch"].reason


def test_an_unknown_profile_in_the_plan_lists_the_valid_ones():
    with pytest.raises(UnknownProfileError, match="expected one of smoke, full"):
        plan_frameworks(BUILDS, BUILDS, gpu_visible=True, requested="huge")


def test_gpu_builds_are_read_from_the_installed_packages(monkeypatch):
    """Each framework's backend module reads its own GPU build (rosetta_utils.backends)."""
    import rosetta_utils.backends.pytorch as torch_backend

    cpu_only = {"torch": "2.13.0+cpu", "tensorflow-cpu": "2.21.0", "jax": "0.7.1", "mxnet": "1.9.1",
                "chainer": "7.8.1", "cupy-cuda13x": "13.6.0"}
    monkeypatch.setattr(torch_backend, "cuda_built_for", lambda: None)
    assert {n: installed_gpu_build(n, cpu_only) for n in FRAMEWORKS} == dict.fromkeys(FRAMEWORKS)
    gpu = {"torch": "2.13.0", "tensorflow": "2.21.0", "nvidia-cudnn-cu12": "9", "jax-cuda12-plugin": "0.7.1",
           "mxnet-cu117": "1.9.1", "cupy-cuda110": "7.8.0"}
    monkeypatch.setattr(torch_backend, "cuda_built_for", lambda: "12.8")
    assert installed_gpu_build("pytorch", gpu) == "torch for CUDA 12.8"
    assert installed_gpu_build("tensorflow", gpu) == "tensorflow[and-cuda]"
    assert installed_gpu_build("jax", gpu) == "jax-cuda12-plugin"
    assert installed_gpu_build("mxnet", gpu) == "mxnet-cu117"
    assert installed_gpu_build("chainer", gpu) == "cupy-cuda110 (CuPy 7)"
    monkeypatch.undo()
    # This machine's own install: tensorflow-cpu and JAX without its CUDA plugin; PyPI's
    # torch is a CUDA build, which its version.py says (torch.version.cuda).
    assert installed_gpu_build("tensorflow") is None and installed_gpu_build("jax") is None
    if is_installed("pytorch"):
        cuda = framework_process_output("pytorch", "import torch\nprint(torch.version.cuda)")
        assert installed_gpu_build("pytorch") == (None if cuda == "None" else f"torch for CUDA {cuda}")
