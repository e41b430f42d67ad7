"""Framework names, selection, and the imports with their compatibility fixes."""

import subprocess
import sys

from pathlib import Path

import pytest

from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import (
    UnknownFrameworkError,
    check_framework,
    import_framework,
    is_installed,
    parse_framework_list,
    selected_frameworks,
    usable_cores,
)

INSTALLED = [name for name in FRAMEWORKS if is_installed(name)]


def run_python(code: str, **env: str) -> str:
    import os

    child_env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",)}
    child_env.update(env)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


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
        "import sys, rosetta_utils, rosetta_utils.frameworks, rosetta_utils.envreport, "
        "rosetta_utils.timing, rosetta_utils.results, rosetta_utils.chapter, rosetta_utils.tables, "
        "rosetta_utils.progress, rosetta_utils.profile, rosetta_utils.backends, rosetta_utils.page, "
        "rosetta_utils.downloads, rosetta_utils.tab_results, rosetta_utils.page_execution, "
        "rosetta_utils.name_check, rosetta_utils.tabs\n"
        "heavy = ['torch', 'tensorflow', 'keras', 'jax', 'flax', 'mxnet', 'chainer']\n"
        "print(','.join(name for name in heavy if name in sys.modules))"
    )
    assert run_python(code) == ""


@pytest.mark.parametrize("name", INSTALLED)
def test_every_installed_framework_imports_with_its_fixes(name):
    module = import_framework(name)
    expected = {"pytorch": "torch", "tensorflow": "keras", "jax": "flax.nnx", "mxnet": "mxnet", "chainer": "chainer"}
    assert module.__name__ == expected[name]


@pytest.mark.skipif(not {"mxnet", "pytorch"} <= set(INSTALLED), reason="needs MXNet and PyTorch")
def test_mxnet_no_longer_drags_pytorch_down_to_one_thread():
    code = (
        "from rosetta_utils.frameworks import import_framework\n"
        "import_framework('mxnet'); torch = import_framework('pytorch')\n"
        "print(torch.get_num_threads())"
    )
    assert run_python(code) == str(usable_cores())


@pytest.mark.skipif(not {"mxnet", "chainer"} <= set(INSTALLED), reason="needs MXNet and Chainer")
def test_chainer_imports_after_mxnet_in_one_process():
    code = (
        "from rosetta_utils.frameworks import import_framework\n"
        "import_framework('mxnet'); print(import_framework('chainer').__version__)"
    )
    assert run_python(code) == "7.8.1"


def test_missing_framework_names_the_install_command(monkeypatch):
    import rosetta_utils.frameworks as frameworks

    monkeypatch.setitem(frameworks._PROBE_MODULES, "chainer", "no_such_module_here")
    monkeypatch.setitem(frameworks._MAIN_MODULES, "chainer", ("no_such_module_here",))
    with pytest.raises(ImportError, match=r"chainer is not installed.*\.\[chainer\]"):
        import_framework("chainer")


def test_native_stderr_noise_is_dropped_and_the_rest_passed_on(capfd):
    import os

    from rosetta_utils.frameworks import _native_stderr_without

    with _native_stderr_without(("noise",)):
        os.write(2, b"I0000 00:00:1.0 1 a.cc:1] useful\nsome noise here\nI0000 00:00:2.0 1 a.cc:1] useful\n")
    err = capfd.readouterr().err
    assert err.count("useful") == 1 and "noise" not in err


def test_a_machine_with_only_pytorch_still_runs_the_pytorch_tabs():
    """The other four frameworks made unimportable: the PyTorch part of a page still runs."""
    import subprocess
    import sys

    from rosetta_utils.one_framework import environment

    code = (
        "from rosetta_utils.frameworks import is_installed\n"
        "from rosetta_utils.chapter import load_chapter\n"
        "installed = [n for n in ['pytorch', 'tensorflow', 'jax', 'mxnet', 'chainer'] if is_installed(n)]\n"
        "page = load_chapter('book/chapters/five_frameworks_one_computation.md', 'pytorch')\n"
        "print('RESULT', installed, sorted(page['computed']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=environment("pytorch"), capture_output=True, text=True,
                          cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "RESULT ['pytorch'] ['grad_bias', 'grad_input', 'grad_weight', 'product', 'y']")
