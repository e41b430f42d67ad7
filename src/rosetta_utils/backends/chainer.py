"""Chainer: version, device, threads and synchronization."""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any, Mapping

from ..frameworks import _use_stdlib_distutils


def _chainer() -> types.ModuleType:
    """The ``chainer`` the page imported; else imported here after the page's two lines."""
    loaded = sys.modules.get("chainer")
    if loaded is not None:
        return loaded
    _use_stdlib_distutils()  # Chainer 7 needs Python's own distutils
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "pkg_resources is deprecated")  # from Chainer's import
        import chainer

    return chainer


def version() -> dict[str, str]:
    chainer = _chainer()
    import numpy

    return {"chainer": chainer.__version__, "numpy": numpy.__version__}


def device() -> str:
    """Chainer makes new arrays with numpy unless a page sends them to a CuPy device, so its
    default device is the CPU even where CuPy is installed (see :func:`array_device`)."""
    _chainer()
    return "cpu"


def array_device(value: Any) -> str | None:
    """Where ``value`` (a Variable, a Link's first parameter, or a CuPy array) lives: Chainer
    computes wherever its arrays are, whether or not CuPy is installed. A bare numpy array is
    no evidence (every page has them); one inside a Variable or a Link is Chainer's CPU."""
    chainer = _chainer()

    if isinstance(value, chainer.Link):
        parameter = next(iter(value.params()), None)
        value = parameter if parameter is not None and parameter.array is not None else None
    if isinstance(value, chainer.Variable):
        value = value.array
    elif type(value).__module__.split(".")[0] not in ("cupy", "chainerx"):
        return None
    if value is None:
        return None
    device = chainer.backend.get_device_from_array(value)
    return "cpu" if device.xp.__name__ == "numpy" else str(device)



def float32_precision() -> str:
    """Chainer has no TF32 switch; on the CPU it computes float32 with numpy."""
    return "float32 (no TF32 switch)"


def threads() -> int:
    """Chainer on CPU computes with numpy, whose BLAS sets the thread count."""
    from threadpoolctl import threadpool_info

    counts = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    return max(counts) if counts else 1


def synchronize(value: Any = None) -> None:
    """CuPy kernels run asynchronously; numpy on the CPU is already synchronous."""
    chainer = _chainer()
    if chainer.backends.cuda.available:
        chainer.backends.cuda.cupy.cuda.Stream.null.synchronize()


def gpu_build(installed: Mapping[str, str]) -> str | None:
    """The GPU build among the installed distributions: CuPy 7, the only major version
    Chainer 7 accepts (none exists for a current GPU: the appendix says why)."""
    cupy = sorted(dist for dist, version in installed.items()
                  if dist.startswith("cupy") and version.split(".")[0] == "7")
    return f"{cupy[0]} (CuPy 7)" if cupy else None
