"""The run profile: ``smoke`` (sized for a 2-core CPU) or ``full`` (the reference's sizes).

``ROSETTA_PROFILE`` chooses it; without it, ``full`` when a CUDA GPU is visible
and ``smoke`` otherwise. The GPU check reads the driver's device files and
imports no framework.

:func:`plan_frameworks` decides, per framework, what a build runs: no
framework runs the full profile on a CPU unless the reader asked for it. On a
machine with a GPU and no explicit profile, the frameworks with a GPU build
run the full profile there, and those without one are left out of the build
with a note that says why (so that every comparison on a page compares one
size); ``ROSETTA_PROFILE=smoke`` runs all of them, small, wherever they can.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Iterable, Mapping

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


@dataclass(frozen=True)
class FrameworkPlan:
    """What a build does with one framework: its profile, or None when it is left out."""

    framework: str
    profile: str | None
    reason: str


def plan_frameworks(
    frameworks: Iterable[str],
    gpu_builds: Mapping[str, str | None],
    gpu_visible: bool | None = None,
    requested: str | None = None,
) -> dict[str, FrameworkPlan]:
    """One :class:`FrameworkPlan` per framework (see the module docstring).

    ``gpu_builds`` maps a framework to its installed GPU build or None
    (:func:`rosetta_utils.frameworks.installed_gpu_build`); ``requested`` is
    ``ROSETTA_PROFILE`` (read from the environment when None).
    """
    from . import FRAMEWORK_TITLES

    gpu_visible = cuda_gpu_visible() if gpu_visible is None else gpu_visible
    if requested is None:
        requested = os.environ.get("ROSETTA_PROFILE", "")
    chosen = requested.strip().lower()
    if chosen and chosen not in PROFILES:
        raise UnknownProfileError(
            f"ROSETTA_PROFILE={chosen!r} is not a profile: expected one of {', '.join(PROFILES)}")
    plans = {}
    for name in frameworks:
        title = FRAMEWORK_TITLES[name]
        build = gpu_builds.get(name)
        where = f"on the GPU ({build})" if gpu_visible and build else "on the CPU"
        if chosen:
            plans[name] = FrameworkPlan(name, chosen, f"{chosen} profile (ROSETTA_PROFILE), {where}")
        elif not gpu_visible:
            plans[name] = FrameworkPlan(name, "smoke", "smoke profile: no GPU on this machine, on the CPU")
        elif build:
            plans[name] = FrameworkPlan(name, "full", f"full profile {where}")
        else:
            plans[name] = FrameworkPlan(name, None, (
                f"{title} has no GPU build installed here, and the full profile is too large for "
                "a CPU: this build leaves it out (ROSETTA_PROFILE=smoke runs it, small, on the CPU)"))
    return plans


def build_plan() -> dict[str, FrameworkPlan]:
    """:func:`plan_frameworks` for this machine and the frameworks ROSETTA_FRAMEWORKS selects."""
    from .frameworks import installed_gpu_build, selected_frameworks

    selected = selected_frameworks()
    return plan_frameworks(selected, {name: installed_gpu_build(name) for name in selected})


def executed_frameworks() -> tuple[str, ...]:
    """The selected frameworks this build executes (see :func:`build_plan`)."""
    return tuple(name for name, plan in build_plan().items() if plan.profile is not None)
