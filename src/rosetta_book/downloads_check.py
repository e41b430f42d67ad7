"""Run every download where a reader runs it: a fresh environment made from its install line.

``python -m rosetta_book.downloads_check`` (``make downloads-check``) takes each
framework's downloads (:mod:`rosetta_book.downloads`) and, for each distinct
install line, makes a new virtual environment of that framework's Python (with
its own pip, as a reader's) into which the download's whole line is installed,
the served wheel of the reader's library included. Never the build's
environments. The line is installed by uv's ``uv pip install``, which takes the
same arguments and resolves them to the same releases as pip, from a cache it
links into the environment instead of unpacking each wheel again (PyTorch's
line: seconds against about a minute), and which, like pip's ``--no-compile``,
leaves byte-compiling to Python when a download imports a module. Then it runs the download's script
alone, offline (``ROSETTA_OFFLINE=1``: the data sets' labelled stand-ins), in
the smoke profile, in an empty folder, and reports each download as run or
stopped, with the last lines of what stopped it. It exits with 1 when any
stopped.

MXNet's and Chainer's environments use Python 3.11 (``--legacy-python``), the
others the newest the book builds with (``--current-python``); the defaults are
the Makefile's ``PYTHON_CURRENT`` and ``PYTHON_LEGACY``.

``--one-per-framework`` runs one download per framework (``make test`` does),
the lightest: :data:`ONE_PER_FRAMEWORK`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from uv import find_uv_bin

from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import REGISTRY, parse_framework_list

from .downloads import build_utils_wheel, download_notebook, download_requirements, download_script
from .environments import ROOT, RegistryError, check_registry
from .page import Page

#: The page whose download ``--one-per-framework`` runs: the shortest chapter.
ONE_PER_FRAMEWORK = "book/chapters/five_frameworks_one_computation.md"

#: How long one download may run, in seconds (the longest run a few minutes on 2 cores).
DOWNLOAD_TIMEOUT = 1800


@dataclass
class DownloadRun:
    page: str
    framework: str
    line: str
    outcome: str  # "ran" or "stopped"
    seconds: float
    tail: str = ""


def pages_with_downloads(paths: list[Path] | None = None) -> list[Page]:
    """The book's pages that have framework cells, in file order (or the ``paths`` given)."""
    paths = paths if paths is not None else sorted((ROOT / "book").rglob("*.md"))
    pages = []
    for path in paths:
        page = Page.read(path)
        if page.tagged_frameworks():
            pages.append(page)
    return pages


def _run(command: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None,
         timeout: float | None = None) -> int:
    with log.open("a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(command)}\n")
        handle.flush()
        try:
            return subprocess.run(command, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT, env=env,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            handle.write(f"\n(stopped after {timeout:.0f} s)\n")
            return 124


def _tail(log: Path, lines: int = 12) -> str:
    text = log.read_text(encoding="utf-8", errors="replace").rstrip().splitlines()
    return "\n".join(text[-lines:])


class Environments:
    """One fresh environment per install line, made by the framework's Python."""

    def __init__(self, work: Path, pythons: dict[str, str], wheel_folder: Path):
        self.work, self.pythons, self.wheel_folder = work, pythons, wheel_folder
        self.lines: dict[str, Path] = {}

    def for_line(self, framework: str, line: str) -> Path:
        """The environment of one install line: a new virtual environment of the
        framework's Python, the line installed into it as a reader types it (each of its
        ``pip install`` commands), in the folder that holds the wheel, and nothing else."""
        if line in self.lines:
            return self.lines[line]
        venv = self.work / "envs" / f"{framework}-{sum(v.name.startswith(framework + '-') for v in self.lines.values()) + 1}"
        log = self.work / "logs" / f"{venv.name}.log"
        shutil.rmtree(venv, ignore_errors=True)
        python = self.pythons[REGISTRY[framework].environment]
        if _run([python, "-m", "venv", str(venv)], self.work, log) != 0:
            raise RuntimeError(f"{framework}: could not make a virtual environment with {python}: {_tail(log)}")
        pip = f"{shlex.quote(find_uv_bin())} pip install --quiet --python {shlex.quote(str(venv / 'bin' / 'python'))}"
        for command in line.split(" && "):  # a framework built from source: two commands
            if not command.startswith("pip install "):
                raise RuntimeError(f"{framework}: {line!r} is not a line of pip install commands")
            if _run(["bash", "-c", f"{pip} {command.split(' ', 2)[2]}"], self.wheel_folder, log) != 0:
                raise RuntimeError(f"{framework}: {line} failed: {_tail(log)}")
        self.lines[line] = venv
        return venv

    def remove(self, framework: str) -> None:
        """Delete ``framework``'s environments."""
        for line, venv in list(self.lines.items()):
            if venv.name.startswith(f"{framework}-"):
                shutil.rmtree(venv, ignore_errors=True)
                del self.lines[line]


def run_download(page: Page, framework: str, environments: Environments, work: Path) -> DownloadRun:
    line = download_requirements(page, framework).pip_line()
    started = time.perf_counter()
    name = f"{page.name}-{framework}"
    log = work / "logs" / f"{name}.log"
    log.unlink(missing_ok=True)
    try:
        venv = environments.for_line(framework, line)
    except RuntimeError as error:
        log.write_text(str(error), encoding="utf-8")
        return DownloadRun(page.name, framework, line, "stopped", time.perf_counter() - started,
                           f"install failed: {_tail(log)}")
    folder = work / "runs" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    script = folder / f"{name}.py"
    script.write_text(download_script(download_notebook(page, framework)), encoding="utf-8")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ROSETTA_", "PYTHON", "VIRTUAL_ENV", "JAX_", "TORCHINDUCTOR"))}
    env.update({"ROSETTA_OFFLINE": "1", "ROSETTA_PROFILE": "smoke", "MPLBACKEND": "Agg",
                "ROSETTA_DATA_DIR": str(work / "data"), "HOME": str(work / "home")})
    (work / "home").mkdir(exist_ok=True)
    code = _run([str(venv / "bin" / "python"), script.name], folder, log, env=env, timeout=DOWNLOAD_TIMEOUT)
    seconds = time.perf_counter() - started
    return DownloadRun(page.name, framework, line, "ran" if code == 0 else "stopped", seconds,
                       "" if code == 0 else _tail(log))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.downloads_check", description=__doc__.split("\n")[0])
    parser.add_argument("--frameworks", default="", help=f"comma-separated, of {', '.join(FRAMEWORKS)} (default: all)")
    parser.add_argument("--pages", nargs="*", type=Path, help="these pages only (default: every page with tabs)")
    parser.add_argument("--one-per-framework", action="store_true", help=f"only {ONE_PER_FRAMEWORK}'s downloads")
    parser.add_argument("--current-python", default=os.environ.get("PYTHON_CURRENT") or "python3.12")
    parser.add_argument("--legacy-python", default=os.environ.get("PYTHON_LEGACY") or "python3.11")
    parser.add_argument("--work", type=Path, default=ROOT / "_build" / "downloads-check")
    args = parser.parse_args(argv)
    try:
        check_registry()
    except RegistryError as error:
        parser.error(str(error))
    try:
        frameworks = parse_framework_list(args.frameworks)
    except ValueError as error:
        parser.error(str(error))
    paths = [ROOT / ONE_PER_FRAMEWORK] if args.one_per_framework else args.pages
    for path in paths or []:
        if not Path(path).is_file():
            parser.error(f"no such page: {path}")
    pythons = {"current": args.current_python, "legacy": args.legacy_python}
    for environment, python in pythons.items():
        if shutil.which(python) is None and not Path(python).is_file():
            parser.error(f"no {python} for the {environment} frameworks: name one with --{environment}-python")
    work = args.work.resolve()
    shutil.rmtree(work / "runs", ignore_errors=True)
    for folder in ("logs", "runs", "data", "wheel"):
        (work / folder).mkdir(parents=True, exist_ok=True)
    build_utils_wheel(work / "wheel")
    environments = Environments(work, pythons, work / "wheel")
    pages = pages_with_downloads(paths)
    runs = []
    for framework in frameworks:
        for page in pages:
            if framework not in page.tagged_frameworks():
                continue
            run = run_download(page, framework, environments, work)
            runs.append(run)
            print(f"{run.outcome:8s} {run.seconds:7.1f} s  {page.name}-{framework}  ({run.line})", flush=True)
            if run.tail:
                print("         " + run.tail.replace("\n", "\n         "), flush=True)
        environments.remove(framework)  # gigabytes each: one framework's at a time on the disk
    (work / "downloads-check.json").write_text(json.dumps([asdict(run) for run in runs], indent=1), encoding="utf-8")
    ran = sum(run.outcome == "ran" for run in runs)
    by_framework = ", ".join(f"{framework} {sum(r.outcome == 'ran' for r in runs if r.framework == framework)} of "
                             f"{sum(r.framework == framework for r in runs)}" for framework in frameworks)
    print(f"downloads run in fresh environments from their own install lines: {ran} of {len(runs)} ({by_framework})")
    return 0 if runs and ran == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
