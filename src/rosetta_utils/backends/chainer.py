"""Chainer: version, device, threads and synchronization."""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

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
    chainer = _chainer()
    if chainer.backends.cuda.available:
        return "gpu:0 (CuPy)"
    return "cpu"


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
