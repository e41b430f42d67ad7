"""MXNet Gluon: version, device, threads and synchronization."""

from __future__ import annotations

import os
import sys
import types
from typing import Any, Mapping

from ..frameworks import usable_cores


def _mxnet() -> types.ModuleType:
    """The ``mxnet`` the page imported; else imported here after the page's two lines."""
    loaded = sys.modules.get("mxnet")
    if loaded is not None:
        return loaded
    import numpy as np

    if "bool" not in vars(np):  # looked up in the dict: numpy 1.26's getattr hook would warn
        np.bool = bool  # MXNet 1.9 uses numpy.bool, removed in numpy 1.24
    os.environ.setdefault("OMP_NUM_THREADS", str(usable_cores()))  # else 1 thread
    import mxnet

    return mxnet


def version() -> dict[str, str]:
    return {"mxnet": _mxnet().__version__}


def device() -> str:
    """The first GPU if MXNet sees one, else the CPU (what a page's ``ctx`` is)."""
    mx = _mxnet()
    return "gpu:0" if mx.context.num_gpus() > 0 else "cpu"


def array_device(value: Any) -> str | None:
    """Where ``value`` (an NDArray, or a Gluon block's first parameter) lives."""
    mx = _mxnet()
    if isinstance(value, mx.gluon.Block):
        parameters = list(value.collect_params().values())
        try:
            value = parameters[0].data() if parameters else None
        except (RuntimeError, mx.base.MXNetError):  # not initialized yet
            return None
    if not isinstance(value, mx.nd.NDArray):
        return None
    context = value.context
    return "cpu" if context.device_type == "cpu" else f"{context.device_type}:{context.device_id}"


def float32_precision() -> str:
    """MXNet 1.9 has no TF32 switch; its CPU build computes float32 as float32."""
    return "float32 (no TF32 switch)"


def threads() -> int:
    """The OpenMP threads MXNet's operators run on, as its OpenMP runtime reports them.

    MXNet fixes the count when it loads: ``OMP_NUM_THREADS`` if that was set
    by then, else one thread (the appendix measures it). Read from the
    OpenMP-threaded OpenBLAS that ships inside MXNet, which reports the
    runtime's count; without it, from the process's OpenMP runtimes.
    """
    mx = _mxnet()
    from threadpoolctl import threadpool_info

    pools = threadpool_info()
    folder = os.path.dirname(os.path.realpath(mx.__file__)) + os.sep
    own = [pool["num_threads"] for pool in pools if os.path.realpath(pool["filepath"]).startswith(folder)]
    if own:
        return min(own)
    openmp = [pool["num_threads"] for pool in pools if pool["user_api"] == "openmp"]
    return min(openmp) if openmp else 1


def synchronize(value: Any = None) -> None:
    """MXNet's engine runs every operator asynchronously, on CPU too: wait for all."""
    _mxnet().nd.waitall()


def gpu_build(installed: Mapping[str, str]) -> str | None:
    """The GPU build among the installed distributions: an ``mxnet-cuXXX`` wheel (none
    exists for a current GPU: the appendix "Running retired frameworks today" says why)."""
    builds = sorted(dist for dist in installed if dist.startswith("mxnet-cu"))
    return builds[0] if builds else None
