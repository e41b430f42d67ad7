"""Import the five frameworks in one process, with the fixes the retired ones need.

Every page imports its framework through :func:`import_framework`, so the
fixes live in one place and the appendix page "Running retired frameworks
today" can show each of them:

* MXNet 1.9.1 uses ``numpy.bool``, an alias numpy 1.24 removed: we restore it.
* MXNet sets its OpenMP runtime to one thread unless ``OMP_NUM_THREADS`` is
  set before it loads, and then drags PyTorch down to one thread as well: we
  set it to the number of cores this process may use.
* Chainer 7 imports ``numpy.distutils``, which fails under setuptools'
  distutils shim (no ``distutils.msvccompiler``): we remove the shim so the
  standard library's distutils (still in Python 3.11) is used. MXNet imports
  distutils too, so the shim goes before either of them loads; otherwise
  MXNet would pin setuptools' copy for the rest of the process.

Nothing here imports a framework at module import time.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import tempfile
import types
import warnings
from typing import Iterable, Iterator

from . import FRAMEWORKS

#: The module that must be importable for each framework to be "installed".
_PROBE_MODULES = {
    "pytorch": "torch",
    "tensorflow": "tensorflow",
    "jax": "flax",
    "mxnet": "mxnet",
    "chainer": "chainer",
}


#: The modules whose presence in ``sys.modules`` means the framework is imported; the
#: last one is what :func:`import_framework` returns.
_MAIN_MODULES = {
    "pytorch": ("torch",),
    "tensorflow": ("tensorflow", "keras"),
    "jax": ("jax", "flax.nnx"),
    "mxnet": ("mxnet",),
    "chainer": ("chainer",),
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
        return importlib.util.find_spec(_PROBE_MODULES[name]) is not None
    except (ImportError, ValueError):  # a parent package missing, or blocked in sys.modules
        return False


def usable_cores() -> int:
    """The number of CPU cores this process may run on (affinity, not the host total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: Lines TensorFlow's C++ runtime writes to the process's stderr at import,
#: twice, before its logging is configured (so TF_CPP_MIN_LOG_LEVEL cannot
#: silence them). They carry no information about the run.
_TENSORFLOW_NOISE = ("All log messages before absl::InitializeLog() is called",)


@contextlib.contextmanager
def _native_stderr_without(patterns: tuple[str, ...]) -> Iterator[None]:
    """Capture what native code writes to file descriptor 2, then pass it on
    without the lines that contain one of ``patterns``, each other message once."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            seen = set()
            for line in capture.read().decode(errors="replace").splitlines():
                message = line.split("] ", 1)[-1]  # without the log prefix's time stamp
                if line.strip() and message not in seen and not any(p in line for p in patterns):
                    seen.add(message)
                    print(line, file=sys.stderr)


def _set_openmp_threads() -> None:
    """Give OpenMP runtimes loaded from now on every usable core, unless the user chose."""
    os.environ.setdefault("OMP_NUM_THREADS", str(usable_cores()))


def _restore_numpy_bool() -> None:
    import numpy

    # Looked up in the module's dict: numpy 1.26's getattr hook would warn.
    if "bool" not in vars(numpy):  # removed in numpy 1.24, back in numpy 2
        numpy.bool = bool  # type: ignore[attr-defined]


def _use_stdlib_distutils() -> None:
    loaded = sys.modules.get("distutils")
    if loaded is not None and "setuptools" in (getattr(loaded, "__file__", "") or ""):
        raise ImportError(
            "Chainer needs the standard library's distutils, but setuptools' copy "
            "was imported first in this process. Import MXNet and Chainer through "
            "import_framework before anything else imports distutils, or start "
            "Python with SETUPTOOLS_USE_DISTUTILS=stdlib."
        )
    os.environ["SETUPTOOLS_USE_DISTUTILS"] = "stdlib"
    try:
        import _distutils_hack  # installed by setuptools as a .pth hook
    except ImportError:
        return
    _distutils_hack.remove_shim()


def import_framework(name: str) -> types.ModuleType:
    """Import a framework's main module with the fixes it needs, and give it every core.

    Returns ``torch``, ``keras``, ``flax.nnx``, ``mxnet`` or ``chainer``.
    """
    check_framework(name)
    already = _MAIN_MODULES[name]
    if all(module in sys.modules for module in already):  # imported by the page itself
        return sys.modules[already[-1]]
    if not is_installed(name):
        raise ImportError(
            f"{name} is not installed in this environment; install it with "
            f"`pip install -e '.[{name}]'` or leave it out of ROSETTA_FRAMEWORKS"
        )
    _set_openmp_threads()
    if name == "pytorch":
        torch = importlib.import_module("torch")
        torch.set_num_threads(usable_cores())
        return torch
    if name == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        os.environ.setdefault("KERAS_BACKEND", "tensorflow")
        if os.environ["KERAS_BACKEND"] != "tensorflow":
            raise RuntimeError(
                f"KERAS_BACKEND is {os.environ['KERAS_BACKEND']!r}: the TensorFlow "
                "tabs need Keras on its TensorFlow backend"
            )
        with _native_stderr_without(_TENSORFLOW_NOISE):
            importlib.import_module("tensorflow")  # intra-op threads default to all cores
        return importlib.import_module("keras")
    if name == "jax":
        importlib.import_module("jax")  # XLA's CPU client uses every core by default
        return importlib.import_module("flax.nnx")
    _use_stdlib_distutils()  # the retired two: MXNet and Chainer
    if name == "mxnet":
        _restore_numpy_bool()
        return importlib.import_module("mxnet")
    with warnings.catch_warnings():
        # Chainer's import-time version check uses pkg_resources (hence setuptools<81).
        warnings.filterwarnings("ignore", "pkg_resources is deprecated", UserWarning)
        return importlib.import_module("chainer")


def import_frameworks(names: Iterable[str]) -> dict[str, types.ModuleType]:
    """Import several frameworks, returning ``{name: module}``."""
    return {name: import_framework(name) for name in names}
