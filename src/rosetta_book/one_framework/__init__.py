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


def environment(only: str, base: dict[str, str] | None = None,
                temporary: str | Path | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) for a process that may
    import only the framework ``only`` (``"none"``: no framework at all). Given a
    ``temporary`` folder (made here if need be), the process's temporary files go there
    (``TMPDIR``), so that whoever removes that folder removes what a page's code left
    behind: a page's ``tempfile.mkdtemp`` folders stay after its process ends (the finding
    divergence chapter's recordings are 337 MB a run)."""
    env = dict(os.environ if base is None else base)
    if temporary is not None:
        Path(temporary).mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(temporary)
    env.pop("PYTHONSTARTUP", None)  # the guard Sphinx sets against MyST-NB's own execution
    paths = [str(GUARD_FOLDER)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(GUARD_FOLDER)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[ONLY_VARIABLE] = only
    if only in FRAMEWORKS:  # its environment's bin first on PATH (mpiexec, torchrun)
        from ..environments import process_environment

        env = process_environment(only, env)
    return env
