"""The environment report: versions, device and threads per framework, CPU and GPU.

Each page shows it where the reader sees it, so that every number on the page
can be read against the machine that produced it.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from . import FRAMEWORK_TITLES, FRAMEWORKS
from .backends import backend
from .frameworks import usable_cores
from .profile import describe_profile


@dataclass(frozen=True)
class FrameworkReport:
    framework: str
    versions: dict[str, str]
    device: str
    threads: int

    def line(self) -> str:
        """One line for a page, e.g. ``PyTorch: torch 2.13.0 on cpu, 2 threads``."""
        versions = ", ".join(f"{name} {version}" for name, version in self.versions.items())
        return f"{FRAMEWORK_TITLES[self.framework]}: {versions} on {self.device}, {self.threads} threads"


def report_framework(name: str) -> FrameworkReport:
    """Import ``name`` (with its fixes) and report where and how it runs."""
    helpers = backend(name)
    return FrameworkReport(name, helpers.version(), helpers.device(), helpers.threads())


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


def environment_report(frameworks: Iterable[str] = FRAMEWORKS) -> str:
    """The whole report as text: machine, then one line per framework."""
    lines = machine_lines()
    lines += [report_framework(name).line() for name in frameworks]
    return "\n".join(lines)
