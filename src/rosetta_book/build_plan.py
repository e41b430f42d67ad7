"""What a build runs of each framework: its profile, or nothing, with the reason.

:func:`plan_frameworks` decides, per framework: no framework runs the full
profile on a CPU unless the reader asked for it. On a machine with a GPU and no
explicit profile, the frameworks with a GPU build run the full profile there,
and those without one are left out of the build with a note that says why (so
that every comparison on a page compares one size); ``ROSETTA_PROFILE=smoke``
runs all of them, small, wherever they can.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Mapping

from rosetta_utils import FRAMEWORK_TITLES
from rosetta_utils.frameworks import installed_gpu_build, selected_frameworks
from rosetta_utils.run_profile import PROFILES, UnknownProfileError, cuda_gpu_visible


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
    selected = selected_frameworks()
    return plan_frameworks(selected, {name: installed_gpu_build(name) for name in selected})


def executed_frameworks() -> tuple[str, ...]:
    """The selected frameworks this build executes (see :func:`build_plan`)."""
    return tuple(name for name, plan in build_plan().items() if plan.profile is not None)
