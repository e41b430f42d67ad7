"""Run a framework's part of a page in a process where no other framework imports.

:func:`environment` is the environment of such a process: this folder first
on ``PYTHONPATH``, so that its ``sitecustomize`` blocks every framework but
``only`` (see that module), and ``ROSETTA_ONLY_FRAMEWORK`` naming it. The
book build's kernels (:mod:`rosetta_book.page_execution`) and the chapter
loader's subprocesses (:func:`rosetta_book.chapter.run_framework_parts`)
both start from it.
"""

from __future__ import annotations

import os
from pathlib import Path

from rosetta_utils import FRAMEWORKS

GUARD_FOLDER = Path(__file__).parent
ONLY_VARIABLE = "ROSETTA_ONLY_FRAMEWORK"


def environment(only: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) for a process that may
    import only the framework ``only`` (``"none"``: no framework at all)."""
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONSTARTUP", None)  # the guard Sphinx sets against MyST-NB's own execution
    paths = [str(GUARD_FOLDER)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(GUARD_FOLDER)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[ONLY_VARIABLE] = only
    if only in FRAMEWORKS:  # its environment's bin first on PATH (mpiexec, torchrun)
        from ..environments import process_environment

        env = process_environment(only, env)
    return env
