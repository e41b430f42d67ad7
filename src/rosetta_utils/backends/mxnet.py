"""MXNet Gluon: device, threads and synchronization."""

from __future__ import annotations

import os
from typing import Any

from ..frameworks import import_framework


def version() -> dict[str, str]:
    return {"mxnet": import_framework("mxnet").__version__}


def context() -> Any:
    """The context new arrays should live in: the first GPU if MXNet sees one."""
    mx = import_framework("mxnet")
    return mx.gpu(0) if mx.context.num_gpus() > 0 else mx.cpu()


def device() -> str:
    ctx = context()
    return "cpu" if ctx.device_type == "cpu" else f"gpu:{ctx.device_id}"


def threads() -> int:
    """MXNet's operators use the OpenMP thread count fixed when it was imported."""
    import_framework("mxnet")
    return int(os.environ["OMP_NUM_THREADS"])


def synchronize(value: Any = None) -> None:
    """MXNet's engine runs every operator asynchronously, on CPU too: wait for all."""
    import_framework("mxnet").nd.waitall()
