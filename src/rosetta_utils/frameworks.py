"""The book's framework names: which one is which, which are selected, installed, usable.

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
import sys

from . import FRAMEWORKS

#: The module that must be importable for each framework to be "installed".
PROBE_MODULES = {
    "pytorch": "torch",
    "tensorflow": "tensorflow",
    "jax": "flax",
    "mxnet": "mxnet",
    "chainer": "chainer",
}


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


@functools.lru_cache(maxsize=1)
def _torch_cuda_version() -> str | None:
    """The CUDA version torch was built for, read from its ``version.py`` (no import)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    version_file = os.path.join(os.path.dirname(spec.origin), "version.py")
    try:
        text = open(version_file, encoding="utf-8").read()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("cuda"):
            value = line.split("=", 1)[1].strip().strip("'\"")
            return None if value in ("None", "") else value
    return None


def gpu_build(name: str, distributions: dict[str, str] | None = None,
              torch_cuda: str | None = ...) -> str | None:  # type: ignore[assignment]
    """Which GPU build of framework ``name`` is installed (e.g. ``"torch for CUDA 12.8"``),
    or None for a CPU-only install, read from the installed packages without importing.

    MXNet's GPU builds are the ``mxnet-cuXXX`` wheels and Chainer's is CuPy 7 (Chainer 7
    refuses any other major version); the appendix "Running retired frameworks today"
    says why neither exists for a current GPU.
    """
    check_framework(name)
    installed = _distributions() if distributions is None else distributions
    if name == "pytorch":
        cuda = _torch_cuda_version() if torch_cuda is ... else torch_cuda
        return f"torch for CUDA {cuda}" if cuda and "torch" in installed else None
    if name == "tensorflow":
        has_cuda_libraries = any(dist.startswith("nvidia-cudnn-cu") for dist in installed)
        return "tensorflow[and-cuda]" if "tensorflow" in installed and has_cuda_libraries else None
    if name == "jax":
        plugins = sorted(dist for dist in installed if dist.startswith("jax-cuda") and dist.endswith("-plugin"))
        return plugins[0] if plugins else None
    if name == "mxnet":
        builds = sorted(dist for dist in installed if dist.startswith("mxnet-cu"))
        return builds[0] if builds else None
    cupy = sorted(dist for dist, version in installed.items()
                  if dist.startswith("cupy") and version.split(".")[0] == "7")
    return f"{cupy[0]} (CuPy 7)" if cupy else None
