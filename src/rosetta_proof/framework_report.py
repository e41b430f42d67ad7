"""What a framework's part of a page ran with: its versions, device, threads and float32
precision, as the part's own process reports them (the book build records it beside the
part's results, :func:`rosetta_proof.tab_results.collect_tab_results`; a page shows its line).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any, Mapping

from rosetta_utils import FRAMEWORK_TITLES
from rosetta_utils.backends import backend


@dataclass(frozen=True)
class FrameworkReport:
    framework: str
    versions: dict[str, str]
    device: str
    threads: int
    float32: str = ""

    def line(self) -> str:
        """One line for a page, e.g. ``PyTorch: torch 2.13.0 on cpu, 2 threads``."""
        versions = ", ".join(f"{name} {version}" for name, version in self.versions.items())
        threads = f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        return f"{FRAMEWORK_TITLES[self.framework]}: {versions} on {self.device}, {threads}"


def report_framework(name: str, namespace: Mapping[str, Any] | None = None) -> FrameworkReport:
    """Where and how framework ``name`` runs in this process (see :mod:`rosetta_utils.backends`).

    With ``namespace`` (what a page's part defined), the device is read from an array or
    model the part made, never inferred from an installed package: the newest such value
    (a page's last cells hold its trained model), or "not checked" if the part made none.
    """
    import numpy

    helpers = backend(name)
    device = helpers.device() if namespace is None else array_device_in(name, namespace)
    # The book runs its frameworks in two environments (numpy 2 and numpy 1.26): every
    # report names the numpy and the Python its part ran with.
    versions = dict(helpers.version())
    versions.setdefault("numpy", numpy.__version__)
    versions["Python"] = platform.python_version()
    return FrameworkReport(name, versions, device, helpers.threads(), helpers.float32_precision())


def array_device_in(name: str, namespace: Mapping[str, Any]) -> str:
    """The device of the last value in ``namespace`` that is one of framework ``name``'s
    arrays or models (also looked for one level down, in dicts, lists and tuples)."""
    helpers = backend(name)
    for variable, value in reversed(list(namespace.items())):
        if variable.startswith("_"):
            continue
        candidates = list(value.values()) if isinstance(value, Mapping) else (
            list(value) if isinstance(value, (list, tuple)) else [value])
        for candidate in candidates:
            try:
                found = helpers.array_device(candidate)
            except Exception:  # an object that merely looks like an array
                found = None
            if found:
                return found
    return f"not checked (the part made no {name} array)"
