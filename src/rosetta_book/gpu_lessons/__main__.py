"""``python -m rosetta_book.gpu_lessons FRAMEWORK OUT --book BOOK --jobs ... [--setting ...]``:
one measuring process of the GPU lessons (the device check starts it; see the package).

It writes each measurement to ``OUT/measurements.jsonl`` as soon as it is taken (so
that a process stopped by the budget keeps what it measured), and the arrays that
two runs of an autotuning setting compare to ``OUT/<name>.npz``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from . import AUTOTUNE_SETTINGS, MEASURED


class Sink:
    """Where a process puts its measurements (see the module docstring)."""

    def __init__(self, folder: Path, framework: str, versions: Mapping[str, str]):
        self.folder = folder
        self.framework = framework
        self.versions = dict(versions)
        self.count = 0
        folder.mkdir(parents=True, exist_ok=True)

    def add(self, task: str, device: str, config: Mapping[str, Any], metrics: Mapping[str, Any],
            arrays: Mapping[str, np.ndarray] | None = None) -> None:
        line: dict[str, Any] = {"task": task, "framework": self.framework, "device": device,
                                "config": dict(config), "metrics": dict(metrics), "versions": self.versions}
        if arrays is not None:
            self.count += 1
            name = f"arrays{self.count}.npz"
            np.savez(self.folder / name, **{key: np.asarray(value) for key, value in arrays.items()})
            line["arrays"] = name
        with open(self.folder / "measurements.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, allow_nan=False) + "\n")
        shown = ", ".join(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
                          for key, value in metrics.items())
        print(f"{task} {self.framework} {config.get('network')} {config.get('setting')}"
              f"{' ' + str(config['dtype']) if 'dtype' in config else ''} on {device}: {shown}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.gpu_lessons", description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", choices=sorted(MEASURED))
    parser.add_argument("out", type=Path)
    parser.add_argument("--book", type=Path, required=True)
    parser.add_argument("--jobs", required=True, help="comma-separated lessons")
    parser.add_argument("--setting", help="the autotuning setting of this process")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch-limit", type=int,
                        help="keep only this many examples of each batch (a rehearsal on a CPU)")
    arguments = parser.parse_args(argv)
    jobs = [job for job in arguments.jobs.split(",") if job]
    unknown = [job for job in jobs if job not in MEASURED[arguments.framework]]
    if unknown:
        parser.error(f"{arguments.framework} measures no {', '.join(unknown)}")
    settings = AUTOTUNE_SETTINGS[arguments.framework]
    setting = arguments.setting or settings[0]
    if setting not in settings:
        parser.error(f"{setting!r} is not one of {arguments.framework}'s settings: {', '.join(settings)}")
    if arguments.framework == "jax":  # XLA reads its flags once, when JAX starts its backend
        level = setting.rsplit(" ", 1)[-1]
        os.environ["XLA_FLAGS"] = " ".join(
            [flag for flag in os.environ.get("XLA_FLAGS", "").split() if "xla_gpu_autotune_level" not in flag]
            + [f"--xla_gpu_autotune_level={level}"])
        from . import jax_lessons as lessons
    else:
        from . import torch_lessons as lessons
    versions = {**lessons.versions(), "numpy": np.__version__, "Python": platform.python_version()}
    sink = Sink(arguments.out, arguments.framework, versions)
    lessons.run(sink, arguments.book, jobs, setting, arguments.repeats, arguments.warmup, arguments.batch_limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
