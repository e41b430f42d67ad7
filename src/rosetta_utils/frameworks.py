"""The book's frameworks: one registry entry each, and which are selected, installed, usable.

:data:`REGISTRY` holds, per framework, everything the book's code needs to
know of it outside its tabs: its title, the environment that runs it, the
modules that belong to it, the one whose presence means "installed", and
what a reader installs for it. Every other framework table of the book is
derived from it; adding a framework is one entry here, its tabs, and the
per-framework modules the entry names (DEVELOPERS.md, "Adding a framework").

:func:`check_framework` and :func:`parse_framework_list` check names against
the book's five (``ROSETTA_FRAMEWORKS`` uses the latter's syntax, read by
:func:`selected_frameworks`); :func:`is_installed` tells whether a framework
can be imported without importing it; :func:`usable_cores` is the number of
cores this process may run on.

Pages import their frameworks themselves, with plain imports; the lines MXNet
and Chainer need today sit visibly in their tabs and are explained in the
appendix "Running retired frameworks today". Nothing here imports a
framework.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Framework:
    """One framework of the book."""

    #: The name of its tabs, tags and files (``"pytorch"``).
    name: str
    #: How a reader sees it named (``"PyTorch"``).
    title: str
    #: The environment whose kernels run its parts (``"current"`` or ``"legacy"``).
    environment: str
    #: The top-level modules its :attr:`install` brings; the first must be importable for
    #: the framework to count as installed.
    modules: tuple[str, ...]
    #: What a reader installs for it, as pip requirements.
    install: tuple[str, ...]
    #: What its source distribution builds with, where the registry has no wheel of it: a
    #: reader's line installs these first, then the rest without build isolation (Chainer
    #: 7.8.1's build imports pkg_resources, which setuptools 81 removed: an isolated build
    #: takes the newest setuptools and fails).
    build_with: tuple[str, ...] = ()
    #: The Python versions it runs on, where they are fewer than the book's, for a reader.
    python: str = ""
    #: Its companion libraries, installed apart (module: distribution), e.g. torchvision.
    companions: tuple[tuple[str, str], ...] = ()
    #: The module of its backend helpers (version, device, threads, synchronize: see
    #: :mod:`rosetta_utils.backends`); empty: ``rosetta_utils.backends.<name>``.
    backend: str = ""
    #: The module of its GRU converter (see :mod:`rosetta_utils.gru`); empty:
    #: ``rosetta_utils.gru.<name>``; None: it has none, and its GRU layers cannot be moved.
    gru_converter: str | None = ""

    @property
    def backend_module(self) -> str:
        return self.backend or f"rosetta_utils.backends.{self.name}"

    @property
    def gru_module(self) -> str | None:
        if self.gru_converter is None:
            return None
        return self.gru_converter or f"rosetta_utils.gru.{self.name}"

    @property
    def probe_module(self) -> str:
        return self.modules[0]

    @property
    def all_modules(self) -> tuple[str, ...]:
        """Every top-level module that belongs to the framework, companions included."""
        return self.modules + tuple(module for module, _ in self.companions)


#: The book's frameworks, in the order their tabs appear.
REGISTRY = {framework.name: framework for framework in (
    Framework("pytorch", "PyTorch", "current", ("torch",), ("torch",),
              companions=(("torchvision", "torchvision"), ("torchaudio", "torchaudio"))),
    Framework("tensorflow", "TensorFlow (Keras 3)", "current", ("tensorflow", "keras"), ("tensorflow", "keras"),
              companions=(("tf_keras", "tf-keras"),)),
    Framework("jax", "JAX (Flax)", "current", ("flax", "jax", "jaxlib", "optax"), ("jax", "flax", "optax"),
              companions=(("orbax", "orbax-checkpoint"),)),
    Framework("mxnet", "MXNet (Gluon)", "legacy", ("mxnet",), ("mxnet==1.9.1", "numpy<2"), python="3.11 or older"),
    Framework("chainer", "Chainer", "legacy", ("chainer", "chainerx", "chainermn"), ("chainer==7.8.1", "numpy<2"),
              build_with=("setuptools<81", "wheel"), python="3.11 or older", companions=(("cupy", "cupy"),)),
)}

#: The five frameworks of the book, in the order their tabs appear.
FRAMEWORKS = tuple(REGISTRY)

#: The book's two environments (a framework's :attr:`Framework.environment`) and the folders
#: ``make book`` creates them in, at the repository's root.
ENVIRONMENT_FOLDERS = {"current": ".venv", "legacy": ".venv-legacy"}

#: How each framework is named where a reader sees it.
FRAMEWORK_TITLES = {name: framework.title for name, framework in REGISTRY.items()}

#: The module that must be importable for each framework to be "installed".
PROBE_MODULES = {name: framework.probe_module for name, framework in REGISTRY.items()}


class UnknownFrameworkError(ValueError):
    """Raised for a framework name that is not one of the book's five."""


def check_framework(name: str) -> str:
    """Return ``name`` if it is one of :data:`FRAMEWORKS`, else raise a clear error."""
    if name not in FRAMEWORKS:
        raise UnknownFrameworkError(
            f"unknown framework {name!r}: expected one of {', '.join(FRAMEWORKS)}"
        )
    return name


def parse_framework_list(text: str | None) -> tuple[str, ...]:
    """Parse a comma-separated list such as ``"pytorch,jax"`` (the
    ``ROSETTA_FRAMEWORKS`` syntax) into a tuple in the book's tab order.

    An empty or missing value means all five frameworks.
    """
    if text is None or not text.strip():
        return FRAMEWORKS
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    for name in names:
        check_framework(name)
    return tuple(name for name in FRAMEWORKS if name in names)


def selected_frameworks() -> tuple[str, ...]:
    """The frameworks this build executes, from ``ROSETTA_FRAMEWORKS`` (default: all)."""
    try:
        return parse_framework_list(os.environ.get("ROSETTA_FRAMEWORKS"))
    except UnknownFrameworkError as error:
        raise UnknownFrameworkError(f"ROSETTA_FRAMEWORKS: {error}") from None


def is_installed(name: str) -> bool:
    """Whether ``name``'s framework can be imported, without importing it."""
    check_framework(name)
    try:
        spec = importlib.util.find_spec(PROBE_MODULES[name])
    except (ImportError, ValueError):  # a parent package missing, or blocked in sys.modules
        return False
    # A framework the one-framework guard refuses in this process counts as absent.
    return spec is not None and not getattr(spec.loader, "refuses_import", False)


def usable_cores() -> int:
    """The number of CPU cores this process may run on (affinity, not the host total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _use_stdlib_distutils() -> None:
    """Give this process Python's own distutils, which Chainer 7 needs, from now on.

    What a Chainer tab's ``_distutils_hack.remove_shim()`` does, for a process
    that imports Chainer without such a tab (tests, the backends), and for its
    child processes. Raises if setuptools' copy was imported already: the first
    copy imported stays for the whole process.
    """
    loaded = sys.modules.get("distutils")
    if loaded is not None and "setuptools" in (getattr(loaded, "__file__", "") or ""):
        raise ImportError(
            "Chainer needs the standard library's distutils, but setuptools' copy "
            "was imported first in this process (MXNet imports it too). Remove "
            "setuptools' shim before anything imports distutils "
            "(import _distutils_hack; _distutils_hack.remove_shim()), or start "
            "Python with SETUPTOOLS_USE_DISTUTILS=stdlib."
        )
    os.environ["SETUPTOOLS_USE_DISTUTILS"] = "stdlib"
    try:
        import _distutils_hack  # installed by setuptools as a .pth hook
    except ImportError:
        return
    _distutils_hack.remove_shim()



@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, str]:
    """Installed distributions, by normalised name: version (read once: a build asks for
    every tab set of every page, and what is installed does not change meanwhile)."""
    from importlib import metadata

    found = {}
    for distribution in metadata.distributions():
        name = (distribution.metadata["Name"] or "").lower().replace("_", "-")
        if name:
            found[name] = distribution.version
    return found


def installed_gpu_build(name: str, distributions: dict[str, str] | None = None) -> str | None:
    """Which GPU build of framework ``name`` is installed (e.g. ``"torch for CUDA 12.8"``),
    or None for a CPU-only install, read from the installed packages (``distributions``:
    name to version; default, this environment's) without importing the framework: each
    framework's backend module says how (its ``gpu_build``; one without says None)."""
    check_framework(name)
    installed = _distributions() if distributions is None else distributions
    module = importlib.import_module(REGISTRY[name].backend_module)
    reader = getattr(module, "gpu_build", None)
    return None if reader is None else reader(installed)


def _requirement_name(requirement: str) -> str:
    """The distribution a pip requirement names (``"chainer"`` of ``"chainer==7.8.1"``)."""
    return re.match(r"[A-Za-z0-9._-]+", requirement.strip()).group(0)


def make_list(what: str, environment: str | None = None) -> tuple[str, ...]:
    """A list of the registry's for the Makefile, which reads it (``python3 frameworks.py WHAT
    [ENVIRONMENT]``, before any environment exists) rather than typing it again: ``all`` the
    frameworks, ``current`` or ``legacy`` those of one environment, and for an environment's
    frameworks what builds without isolation (``no-build-isolation``, distributions) and what
    that build needs first (``build-with``, requirements: :attr:`Framework.build_with`)."""
    if what == "all":
        return FRAMEWORKS
    if what in ENVIRONMENT_FOLDERS and environment is None:
        return tuple(name for name, entry in REGISTRY.items() if entry.environment == what)
    if what in ("no-build-isolation", "build-with") and environment in ENVIRONMENT_FOLDERS:
        entries = [entry for entry in REGISTRY.values() if entry.environment == environment and entry.build_with]
        if what == "build-with":
            return tuple(dict.fromkeys(requirement for entry in entries for requirement in entry.build_with))
        return tuple(_requirement_name(entry.install[0]) for entry in entries)
    environments = "|".join(ENVIRONMENT_FOLDERS)
    raise ValueError(f"usage: frameworks.py all | {environments} | no-build-isolation ({environments}) | "
                     f"build-with ({environments})")


if __name__ == "__main__":  # run as a file by the Makefile
    try:
        print(" ".join(make_list(*sys.argv[1:3])) if 2 <= len(sys.argv) <= 3 else make_list(""))
    except ValueError as error:
        sys.exit(str(error))
