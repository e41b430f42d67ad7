"""The downloads check: every download in a fresh environment made from its own install line.

Running it means installing each framework from the registry (minutes): ``make
downloads-check`` does, and ``make test`` runs it for one download per
framework. Here: what it refuses, and how it layers an install line's
environment on its framework's base.
"""

import subprocess
import sys
import tempfile

import pytest

from rosetta_book import downloads_check
from rosetta_book.downloads_check import Environments, main, pages_with_downloads


def test_an_unknown_framework_is_refused_naming_the_five(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--frameworks", "pytorch,theano"])
    assert stop.value.code == 2
    assert "unknown framework 'theano': expected one of pytorch, tensorflow, jax, mxnet, chainer" in capsys.readouterr().err


def test_a_missing_page_or_interpreter_is_refused_naming_it(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--pages", str(tmp_path / "nowhere.md")])
    assert "no such page" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--current-python", str(tmp_path / "python9.9")])
    assert "name one with --current-python" in capsys.readouterr().err


def test_every_page_with_tabs_has_downloads_and_the_one_per_framework_page_has_all_five():
    pages = pages_with_downloads()
    assert len(pages) >= 23
    first = next(page for page in pages if str(page.path).endswith(downloads_check.ONE_PER_FRAMEWORK))
    assert first.tagged_frameworks() == ("pytorch", "tensorflow", "jax", "mxnet", "chainer")


def _tiny_wheel(folder, name="tiny_thing"):
    """A wheel of one module, ``name``, written by hand (no build, no network)."""
    import zipfile

    path = folder / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    files = {f"{name}.py": "VALUE = 7\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{file},,\n" for file in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def test_each_install_line_gets_a_fresh_environment_of_its_own(tmp_path):
    """A line's environment holds what the line installs, run in the folder that holds the
    wheel as a reader runs it, its console scripts beside its Python (torchrun is one), and
    nothing of another line's; a line met again reuses its environment."""
    (tmp_path / "logs").mkdir()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _tiny_wheel(wheels)
    _tiny_wheel(wheels, "other_thing")
    environments = Environments(tmp_path, {"current": sys.executable, "legacy": sys.executable}, wheels)
    line = "pip install --no-index ./tiny_thing-1.0-py3-none-any.whl"
    venv = environments.for_line("pytorch", line)
    code = "import sys, tiny_thing; print(sys.prefix, tiny_thing.__file__, tiny_thing.VALUE)"
    found = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    prefix, tiny_file, value = found.stdout.split()
    assert prefix == str(venv) and tiny_file.startswith(str(venv)) and value == "7"
    assert (venv / "bin" / "pip").exists()  # the line's own pip, with its own console scripts
    other = environments.for_line("pytorch", "pip install --no-index ./other_thing-1.0-py3-none-any.whl")
    assert other != venv and subprocess.run([str(other / "bin" / "python"), "-c", "import tiny_thing"]).returncode != 0
    assert environments.for_line("pytorch", line) == venv
    both = environments.for_line("chainer", f"{line} && pip install --no-index ./other_thing-1.0-py3-none-any.whl")
    assert subprocess.run([str(both / "bin" / "python"), "-c", "import tiny_thing, other_thing"]).returncode == 0
    with pytest.raises(RuntimeError, match="is not a line of pip install commands"):
        environments.for_line("jax", f"{line} && rm -rf /")
    environments.remove("pytorch")
    assert not venv.exists() and not other.exists() and both.exists()


def test_one_download_per_framework_runs_in_fresh_environments_from_its_own_line():
    """What ``make test`` runs of ``make downloads-check``: the first chapter's download of
    every framework here, each in environments made from its install line alone (the
    frameworks from the package registry), offline, in an empty folder. Each environment
    is made by the interpreter its framework's book environment was made from, never
    with the book environment's packages."""
    from frameworks_under_test import AVAILABLE
    from rosetta_book.environments import environment_of, require_python

    pythons = {}
    for framework in AVAILABLE:
        base = subprocess.run([require_python(framework), "-c", "import sys; print(sys._base_executable)"],
                              capture_output=True, text=True, check=True).stdout.strip()
        pythons[environment_of(framework)] = base
    with tempfile.TemporaryDirectory(prefix="rosetta-downloads-check-") as work:  # gigabytes: removed after
        command = [sys.executable, "-m", "rosetta_book.downloads_check", "--one-per-framework",
                   "--frameworks", ",".join(AVAILABLE), "--work", work]
        command += [option for environment, python in pythons.items()
                    for option in (f"--{environment}-python", python)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"downloads run in fresh environments from their own install lines: "
                           f"{len(AVAILABLE)} of {len(AVAILABLE)}"), last
