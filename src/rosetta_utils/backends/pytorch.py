"""PyTorch: version, device, threads and synchronization."""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any, Mapping


def version() -> dict[str, str]:
    import torch

    return {"torch": torch.__version__}


def device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda:0 ({torch.cuda.get_device_name(0)})"
    return "cpu"


def array_device(value: Any) -> str | None:
    """Where ``value`` (a tensor, or a module's first parameter) lives; None if it is neither."""
    import torch

    if isinstance(value, torch.nn.Module):
        value = next(iter(value.parameters()), None)
    if not isinstance(value, torch.Tensor):
        return None
    if value.device.type == "cuda":
        return f"{value.device} ({torch.cuda.get_device_name(value.device)})"
    return value.device.type


def float32_precision() -> str:
    """How float32 matrix products, convolutions and RNNs compute now ("tf32" allows
    TensorFloat-32 on GPUs that have it; "ieee" is true float32; "none" follows the default)."""
    import torch

    flags = {"matmul": torch.backends.cuda.matmul, "conv": torch.backends.cudnn.conv,
             "rnn": torch.backends.cudnn.rnn}
    return ", ".join(f"{name} {flag.fp32_precision}" for name, flag in flags.items())


def threads() -> int:
    """PyTorch's intra-op threads (``torch.get_num_threads()``)."""
    import torch

    return torch.get_num_threads()


def synchronize(value: Any = None) -> None:
    """CUDA kernels run asynchronously: wait for the whole stream."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


@functools.lru_cache(maxsize=1)
def cuda_built_for() -> str | None:
    """The CUDA version the installed torch was built for, read from its ``version.py``
    (without importing torch); None for a CPU build or no torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    try:
        text = open(os.path.join(os.path.dirname(spec.origin), "version.py"), encoding="utf-8").read()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("cuda"):
            value = line.split("=", 1)[1].strip().strip("'\"")
            return None if value in ("None", "") else value
    return None


def gpu_build(installed: Mapping[str, str]) -> str | None:
    """The GPU build among the installed distributions: torch built for CUDA."""
    cuda = cuda_built_for()
    return f"torch for CUDA {cuda}" if cuda and "torch" in installed else None
