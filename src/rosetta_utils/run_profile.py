"""The run profile: ``smoke`` (sized for a 2-core CPU) or ``full`` (the reference's sizes).

``ROSETTA_PROFILE`` chooses it; without it, ``full`` when a CUDA GPU is visible
and ``smoke`` otherwise. The GPU check reads the driver's device files and
imports no framework. What a build runs of each framework under it is the
engine's to decide (:mod:`rosetta_book.build_plan`).
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


#: Set to 1 by ``make test``: the test build, whose parts share the machine.
TEST_BUILD_VARIABLE = "ROSETTA_TEST_BUILD"


def is_test_build() -> bool:
    """Whether this run is part of the test build (``ROSETTA_TEST_BUILD=1``, which ``make
    test`` sets): its page parts run side by side on a shared machine, so what it times
    shows that the code runs, not how fast it runs."""
    value = os.environ.get(TEST_BUILD_VARIABLE, "").strip()
    if value not in ("", "0", "1"):
        raise UnknownProfileError(f"{TEST_BUILD_VARIABLE}={value!r} is not valid: use 1 (the test build) or 0")
    return value == "1"


#: The timed rounds the test build takes where a page asks for more: two, so that the
#: page's spreads and comparisons still compute (its times are not measurements).
TEST_BUILD_ROUNDS = 2


def timed_rounds(rounds: int) -> int:
    """The timed rounds a page takes: ``rounds``, except in the test build (see
    :func:`is_test_build`), which takes at most :data:`TEST_BUILD_ROUNDS`."""
    if rounds < 1:
        raise ValueError(f"a page times at least one round, not {rounds}")
    return min(rounds, TEST_BUILD_ROUNDS) if is_test_build() else rounds


def describe_profile(profile: str | None = None) -> str:
    """One line for a page: which profile ran and what it means."""
    profile = profile or current_profile()
    if profile == "smoke":
        return "Profile: smoke (small sizes that run on a 2-core CPU; timings are not the reference's)"
    return "Profile: full (the reference's sizes)"
