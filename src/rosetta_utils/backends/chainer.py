"""Chainer: device, threads and synchronization."""

from __future__ import annotations

from typing import Any

from ..frameworks import import_framework


def version() -> dict[str, str]:
    chainer = import_framework("chainer")
    import numpy

    return {"chainer": chainer.__version__, "numpy": numpy.__version__}


def device() -> str:
    chainer = import_framework("chainer")
    if chainer.backends.cuda.available:
        return "gpu:0 (CuPy)"
    return "cpu"


def threads() -> int:
    """Chainer on CPU computes with numpy, whose BLAS sets the thread count."""
    import_framework("chainer")
    from threadpoolctl import threadpool_info

    counts = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    return max(counts) if counts else 1


def synchronize(value: Any = None) -> None:
    """CuPy kernels run asynchronously; numpy on the CPU is already synchronous."""
    chainer = import_framework("chainer")
    if chainer.backends.cuda.available:
        chainer.backends.cuda.cupy.cuda.Stream.null.synchronize()
