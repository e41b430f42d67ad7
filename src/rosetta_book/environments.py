"""Which Python environment runs which framework.

The book builds in two environments (``environments/README.md``):

- ``current``: PyTorch, TensorFlow (Keras 3) and JAX (Flax) on their newest
  releases and numpy 2, with the book's tooling; the comparison cells run
  here too, with no framework importable;
- ``legacy``: MXNet 1.9 and Chainer 7, whose last releases need numpy 1.26
  and Python 3.11.

Each framework's part of a page runs in a kernel (or a process) of its
framework's environment. :func:`python_for` names that interpreter: this
process's own where the framework imports here, else the interpreter of its
environment, which the Makefile exports as ``ROSETTA_<ENVIRONMENT>_PYTHON``
(default: ``.venv`` and ``.venv-legacy`` at the repository's root).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import ENVIRONMENT_FOLDERS, PROBE_MODULES, REGISTRY, check_framework, is_installed

#: Each environment and the frameworks it holds (their registry entries say which), in
#: the book's tab order.
ENVIRONMENTS = {
    environment: tuple(name for name, framework in REGISTRY.items() if framework.environment == environment)
    for environment in ENVIRONMENT_FOLDERS
}

#: The repository's root, where ``make book`` creates the environments.
ROOT = Path(__file__).resolve().parents[2]


class BookEnvironmentError(RuntimeError):
    """An unknown environment, or a framework whose environment is missing."""


class RegistryError(BookEnvironmentError):
    """A framework's registry entry that names something missing; says the entry and field."""


def check_registry(registry=None) -> None:
    """Stop on a registry entry (:data:`rosetta_utils.frameworks.REGISTRY`) that names an
    unknown environment, no module or no install requirement, or a backend or GRU
    converter module that cannot be found, naming the entry and the field."""
    import importlib.util

    for name, framework in (REGISTRY if registry is None else registry).items():
        where = f"the registry entry {name!r} (rosetta_utils.frameworks.REGISTRY)"
        if framework.name != name:
            raise RegistryError(f"{where}: field 'name' is {framework.name!r}, not its key")
        if framework.environment not in ENVIRONMENT_FOLDERS:
            raise RegistryError(f"{where}: field 'environment' names {framework.environment!r}, not one of "
                                f"{', '.join(ENVIRONMENT_FOLDERS)}")
        for field in ("modules", "install"):
            if not getattr(framework, field):
                raise RegistryError(f"{where}: field {field!r} is empty")
        for field, module in (("backend", framework.backend_module), ("gru_converter", framework.gru_module)):
            if module is None:
                continue
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:  # its package is missing
                found = False
            if not found:
                raise RegistryError(f"{where}: field {field!r}: no module {module}")


def check_environment(name: str) -> str:
    """``name`` if it is one of :data:`ENVIRONMENTS`, else an error listing them."""
    if name not in ENVIRONMENTS:
        raise BookEnvironmentError(f"unknown environment {name!r}: expected one of {', '.join(ENVIRONMENTS)}")
    return name


def environment_of(framework: str) -> str:
    """The environment that holds ``framework``."""
    check_framework(framework)
    return next(name for name, members in ENVIRONMENTS.items() if framework in members)


def environment_python(name: str) -> Path:
    """The interpreter of environment ``name`` (it may not exist)."""
    check_environment(name)
    configured = os.environ.get(f"ROSETTA_{name.upper()}_PYTHON")
    if configured:
        return Path(configured)
    return ROOT / ENVIRONMENT_FOLDERS[name] / "bin" / "python"


@functools.lru_cache(maxsize=None)
def _importable_in(python: str) -> tuple[str, ...]:
    """The frameworks ``python`` can import (asked without importing them)."""
    code = ("import json, importlib.util as u\n"
            f"probes = {json.dumps(PROBE_MODULES)}\n"
            "print(json.dumps([n for n, m in probes.items() if u.find_spec(m) is not None]))")
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120,
                              env={key: value for key, value in os.environ.items()
                                   if key not in ("PYTHONPATH", "PYTHONSTARTUP")})
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if done.returncode != 0:
        return ()
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def python_for(framework: str) -> str | None:
    """The interpreter a part of ``framework`` runs in: this process's where the framework
    imports here, else its environment's where that exists and has it; None if neither."""
    if is_installed(framework):
        return sys.executable
    python = environment_python(environment_of(framework))
    if python.is_file() and os.access(python, os.X_OK) and framework in _importable_in(str(python)):
        return str(python)
    return None


def require_python(framework: str) -> str:
    """:func:`python_for`, or an error that says which environment to create and how."""
    python = python_for(framework)
    if python is None:
        environment = environment_of(framework)
        raise BookEnvironmentError(
            f"{framework} runs in the {environment} environment, and none with it installed was "
            f"found at {environment_python(environment)}: run `make book` (or set "
            f"ROSETTA_{environment.upper()}_PYTHON to an interpreter that has it)"
        )
    return python


def available_frameworks(frameworks: tuple[str, ...] = FRAMEWORKS) -> tuple[str, ...]:
    """Those of ``frameworks`` that some environment here can run."""
    return tuple(name for name in frameworks if python_for(name) is not None)


def process_environment(framework: str, env: dict[str, str]) -> dict[str, str]:
    """``env`` for a process of ``framework``'s interpreter: its environment's ``bin``
    first on ``PATH`` (where MPICH's ``mpiexec`` and ``torchrun`` live), and nothing of
    the legacy environment's distutils choice in a current one."""
    python = python_for(framework)
    if python is None:
        return env
    folder = str(Path(python).parent)
    paths = [folder] + [part for part in env.get("PATH", "").split(os.pathsep) if part and part != folder]
    updated = dict(env, PATH=os.pathsep.join(paths))
    updated["VIRTUAL_ENV"] = str(Path(python).parent.parent)
    if framework not in ENVIRONMENTS["legacy"]:
        # Chainer's choice of the standard library's distutils (rosetta_utils.frameworks)
        # belongs to the legacy environment; inherited by a current one, it breaks
        # torch.compile there.
        updated.pop("SETUPTOOLS_USE_DISTUTILS", None)
    return updated
