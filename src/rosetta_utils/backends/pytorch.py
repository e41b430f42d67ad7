"""PyTorch: device, threads and synchronization."""

from __future__ import annotations

from typing import Any

from ..frameworks import import_framework


def version() -> dict[str, str]:
    torch = import_framework("pytorch")
    return {"torch": torch.__version__}


def device() -> str:
    torch = import_framework("pytorch")
    if torch.cuda.is_available():
        return f"cuda:0 ({torch.cuda.get_device_name(0)})"
    return "cpu"


def threads() -> int:
    return import_framework("pytorch").get_num_threads()


def synchronize(value: Any = None) -> None:
    """CUDA kernels run asynchronously: wait for the whole stream."""
    torch = import_framework("pytorch")
    if torch.cuda.is_available():
        torch.cuda.synchronize()
