"""The device check's child processes: how one is started, waited for and reported.

Shared by the device check (:mod:`rosetta_book.gpu_check`) and the GPU lessons
(:mod:`rosetta_book.gpu_lessons`), which both run each part or measurement in a
process of its own, where only its framework imports.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Mapping


class DeviceCheckError(RuntimeError):
    """A device check that cannot run here, or whose parts failed; says which and why."""


def child_environment(only: str, **extra: str) -> dict[str, str]:
    from .one_framework import environment

    env = environment(only)
    env.pop("ROSETTA_BUILD_CACHE", None)  # the check runs every part, never a cached one
    env.setdefault("MPLBACKEND", "Agg")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def last_lines(text: str, count: int = 20) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-count:])


def run_child(command: list[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``command`` in a process group of its own; on timeout kill the whole group (a
    part may have started workers) and raise :class:`subprocess.TimeoutExpired`."""
    with subprocess.Popen(command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
