"""Framework names and selection, and the lines MXNet and Chainer need when they share a
process (the legacy environment; the appendix "Running retired frameworks today")."""

import subprocess
import sys

from pathlib import Path

import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import (
    UnknownFrameworkError,
    check_framework,
    is_installed,
    parse_framework_list,
    selected_frameworks,
)



def run_child(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter without the variables that would choose threads or a
    distutils for it (conftest sets SETUPTOOLS_USE_DISTUTILS for this process)."""
    import os

    unset = ("OMP_NUM_THREADS", "SETUPTOOLS_USE_DISTUTILS")
    child_env = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env)


def run_python(code: str) -> str:
    done = run_child(code)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


#: The lines of a page's MXNet tab above ``import mxnet``, and of its Chainer tab above ``import chainer``.
MXNET_LINES = (
    "import os\nimport numpy as np\nnp.bool = bool\n"
    "os.environ.setdefault('OMP_NUM_THREADS', str(len(os.sched_getaffinity(0))))\n"
)
NUMPY_BOOL_ONLY = "import numpy as np\nnp.bool = bool\n"
CHAINER_LINES = (
    "import warnings\nimport _distutils_hack\n_distutils_hack.remove_shim()\n"
    "warnings.filterwarnings('ignore', 'pkg_resources is deprecated')\n"
)


def test_unknown_framework_name_is_a_clear_error():
    with pytest.raises(UnknownFrameworkError, match="unknown framework 'torch'.*pytorch, tensorflow"):
        check_framework("torch")


def test_framework_list_is_parsed_into_tab_order():
    assert parse_framework_list("jax, pytorch") == ("pytorch", "jax")
    assert parse_framework_list("") == FRAMEWORKS
    assert parse_framework_list(None) == FRAMEWORKS


def test_framework_list_rejects_unknown_names(monkeypatch):
    monkeypatch.setenv("ROSETTA_FRAMEWORKS", "pytorch,caffe2")
    with pytest.raises(UnknownFrameworkError, match="ROSETTA_FRAMEWORKS: unknown framework 'caffe2'"):
        selected_frameworks()


def test_importing_the_package_imports_no_framework():
    code = (
        "import sys, rosetta_utils, rosetta_utils.frameworks, rosetta_utils.machine, "
        "rosetta_utils.timing, rosetta_proof.records, rosetta_book.chapter, rosetta_proof.tables, "
        "rosetta_utils.run_profile, rosetta_utils.backends, rosetta_book.page, "
        "rosetta_book.downloads, rosetta_proof.tab_results, rosetta_book.page_execution, "
        "rosetta_book.name_check, rosetta_book.sphinx_extension, rosetta_utils.data, rosetta_utils.gru\n"
        "heavy = ['torch', 'tensorflow', 'keras', 'jax', 'flax', 'mxnet', 'chainer']\n"
        "print(','.join(name for name in heavy if name in sys.modules))"
    )
    assert run_python(code) == ""


@pytest.mark.legacy
@pytest.mark.skipif(not {"mxnet", "chainer"} <= {fw for fw in FRAMEWORKS if is_installed(fw)},
                    reason="needs MXNet and Chainer in this process (the legacy environment)")
def test_chainer_after_mxnet_needs_the_shim_removed_before_mxnet():
    """MXNet imports distutils too, and the first copy imported stays for the process."""
    both = "import mxnet\nimport chainer\nprint(chainer.__version__)"
    assert run_python(CHAINER_LINES + MXNET_LINES + both) == "7.8.1"
    late = run_child(MXNET_LINES + "import mxnet\n" + CHAINER_LINES + "import chainer")
    assert late.returncode != 0 and "No module named 'distutils.msvccompiler'" in late.stderr


@pytest.mark.legacy
@pytest.mark.skipif(not is_installed("mxnet"), reason="needs MXNet in this process (the legacy environment)")
def test_stdlib_distutils_too_late_is_a_clear_error():
    done = run_child(NUMPY_BOOL_ONLY + "import mxnet\nfrom rosetta_utils.frameworks import _use_stdlib_distutils\n"
                     "_use_stdlib_distutils()")
    assert done.returncode != 0
    assert "setuptools' copy was imported first" in done.stderr and "remove_shim()" in done.stderr


def test_a_machine_with_only_pytorch_still_runs_the_pytorch_tabs():
    """The other four frameworks made unimportable: the PyTorch part of a page still runs."""
    import subprocess
    import sys

    from rosetta_book.one_framework import environment

    code = (
        "from rosetta_utils.frameworks import is_installed\n"
        "from rosetta_book.chapter import load_chapter\n"
        "installed = [n for n in ['pytorch', 'tensorflow', 'jax', 'mxnet', 'chainer'] if is_installed(n)]\n"
        "page = load_chapter('book/chapters/five_frameworks_one_computation.md', 'pytorch')\n"
        "print('RESULT', installed, sorted(page['computed']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=environment("pytorch"), capture_output=True, text=True,
                          cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "RESULT ['pytorch'] ['grad_bias', 'grad_input', 'grad_weight', 'product', 'y']")
