"""The run profile: ``smoke`` (sized for a 2-core CPU) or ``full`` (the reference's sizes).

``ROSETTA_PROFILE`` chooses it; without it, ``full`` when a CUDA GPU is visible
and ``smoke`` otherwise. The GPU check reads the driver's device files and
imports no framework.
"""

from __future__ import annotations

import glob
import os

PROFILES = ("smoke", "full")


class UnknownProfileError(ValueError):
    """Raised for a ``ROSETTA_PROFILE`` that is neither ``smoke`` nor ``full``."""


def cuda_gpu_visible() -> bool:
    """Whether an NVIDIA GPU is present and not hidden by ``CUDA_VISIBLE_DEVICES``."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and hidden.strip() in ("", "-1"):
        return False
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def current_profile() -> str:
    """The profile of this run (see the module docstring)."""
    chosen = os.environ.get("ROSETTA_PROFILE", "").strip().lower()
    if not chosen:
        return "full" if cuda_gpu_visible() else "smoke"
    if chosen not in PROFILES:
        raise UnknownProfileError(
            f"ROSETTA_PROFILE={chosen!r} is not a profile: expected one of {', '.join(PROFILES)}"
        )
    return chosen


def describe_profile(profile: str | None = None) -> str:
    """One line for a page: which profile ran and what it means."""
    profile = profile or current_profile()
    if profile == "smoke":
        return "Profile: smoke (small sizes that run on a 2-core CPU; timings are not the reference's)"
    return "Profile: full (the reference's sizes)"
