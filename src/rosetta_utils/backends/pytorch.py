"""PyTorch: version, device, threads and synchronization."""

from __future__ import annotations

from typing import Any


def version() -> dict[str, str]:
    import torch

    return {"torch": torch.__version__}


def device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda:0 ({torch.cuda.get_device_name(0)})"
    return "cpu"


def threads() -> int:
    """PyTorch's intra-op threads (``torch.get_num_threads()``)."""
    import torch

    return torch.get_num_threads()


def synchronize(value: Any = None) -> None:
    """CUDA kernels run asynchronously: wait for the whole stream."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
