"""The machine a page ran on: its CPU, cores, GPU and run profile.

Each page prints :func:`machine_lines` where the reader sees it, so that every
number on the page can be read against the machine that produced it (what each
framework's part ran with, its versions, device and threads, the book build
records beside its results: :mod:`rosetta_proof.framework_report`).
"""

from __future__ import annotations

import platform
from pathlib import Path

from .frameworks import usable_cores
from .run_profile import describe_profile


def cpu_model() -> str:
    """The CPU's model name, from ``/proc/cpuinfo`` where there is one."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def gpu_name() -> str | None:
    """The first NVIDIA GPU's name, read from the driver without importing a framework."""
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        for line in info.read_text(errors="replace").splitlines():
            if line.startswith("Model:"):
                return line.split(":", 1)[1].strip()
    return None


def machine_lines() -> list[str]:
    """The machine and profile, one fact a line."""
    return [
        f"Machine: {cpu_model()}, {usable_cores()} usable cores, "
        f"GPU: {gpu_name() or 'none'}; Python {platform.python_version()}",
        describe_profile(),
    ]

