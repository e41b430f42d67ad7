"""Benchmarks: a page's configuration against every other setting its framework offers.

``python -m rosetta_book.bench [cifar10|imdb|resnet50 ...] [--profile smoke] [--frameworks ...] [--rounds N] [--in-turn] [--json PATH]``

Without a task it runs every task of the book's registry (:data:`rosetta_proof.tasks.TASK_REGISTRY`),
one after another.

For each framework, in processes of its own where no other framework imports
(as in the book build), the benchmark loads the page's Setup, Data and Model
sections through the chapter loader, so it times exactly the code the page
shows, and calls the page's builder with each alternative's options
(:mod:`rosetta_book.bench.tasks`: every setting tried, with why, and those
not timed with why not). Settings a framework reads when it starts (thread
counts, oneDNN and engine switches, XLA's flags) run in a process of their own. It times training steps
(CIFAR-10, IMDB) or one batch of feature extraction (ResNet-50) of each
configuration, all of a task's processes taking turns round by round
(:mod:`rosetta_book.bench.run`; where all of a task's processes do not fit in
memory at once, one framework after another), and prints (:mod:`rosetta_book.bench.report`)
every configuration's time and its share of this machine's peak (the fastest
float32 matrix product, timed in the same rounds across numpy and every
installed framework), page / fastest per framework (target: within 1.10x),
and the task's fastest framework with its share (on ResNet-50, against the
targets of :func:`~rosetta_book.bench.report.peak_targets`).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rosetta_utils.frameworks import UnknownFrameworkError, parse_framework_list, selected_frameworks
from rosetta_proof.tasks import TASK_REGISTRY

from .flops import conv2d_flops, dense_flops, gru_flops, model_flops_per_image, resnet50_flops
from .report import TARGET_RATIO, format_report, peak_targets, summarize
from .tasks import TASKS, Alternative, Task, page_configuration, resolve_task

__all__ = [
    "Alternative", "TASKS", "TARGET_RATIO", "Task", "benchmark_task", "conv2d_flops", "dense_flops", "format_report",
    "gru_flops", "main", "model_flops_per_image", "page_configuration", "peak_targets", "resnet50_flops",
    "resolve_task", "summarize",
]

#: Timed training steps per call: the pages' training loops wait for the framework once
#: per epoch, not after every step, so a call runs a few steps before it waits.
TRAINING_STEPS = 4


def benchmark_task(task: str, frameworks: tuple[str, ...], *, rounds: int, warmup: int = 2,
                   steps: int | None = None, pause: float = 0.2, in_turn: bool | None = None) -> dict:
    """Run ``task``'s benchmark for ``frameworks`` and return its report. The peak spans every
    installed framework, benchmarked or not, so that a run of one framework reports the same
    shares of peak as a run of all five. ``in_turn`` times one framework after another
    (default: where the task says why, :attr:`~rosetta_book.bench.tasks.Task.in_turn`)."""
    from rosetta_utils.run_profile import current_profile

    from .run import installed_frameworks, run_in_turn, run_task

    resolved = resolve_task(task)
    if steps is None:
        steps = TRAINING_STEPS if resolved.training else 1
    run = run_in_turn if (bool(resolved.in_turn) if in_turn is None else in_turn) else run_task
    raw = run(task, frameworks, rounds=rounds, warmup=warmup, steps=steps, pause=pause,
              peak_frameworks=installed_frameworks())
    return summarize(raw, current_profile())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="*", metavar="task",
                        help=f"one or more of {', '.join(TASKS)} (default: every task, in the book's order)")
    parser.add_argument("--profile", choices=["smoke", "full"], help="sets ROSETTA_PROFILE for the pages' sizes")
    parser.add_argument("--frameworks", help="comma-separated subset, e.g. pytorch,jax (default: all installed)")
    parser.add_argument("--rounds", "--repeats", dest="rounds", type=int, default=10,
                        help="timed rounds: calls per configuration (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls per configuration first (default 2)")
    parser.add_argument("--steps", type=int, help=f"training steps per timed call (default {TRAINING_STEPS}; "
                                                  "feature extraction: 1 batch)")
    parser.add_argument("--json", type=Path, help="where to write the report as JSON (default: this build's "
                                                   "results folder, bench-TASK.json, which the Results page shows)")
    parser.add_argument("--in-turn", action=argparse.BooleanOptionalAction, default=None,
                        help="time one framework after another, each alone on the machine (default: where "
                             "the task's processes do not fit in memory at once: " + ", ".join(
                                 name for name, known in TASKS.items() if known.in_turn) + ")")
    args = parser.parse_args(argv)
    unknown = [task for task in args.tasks if task not in TASKS]
    if unknown:
        parser.error(f"no task {', '.join(map(repr, unknown))}: the tasks are {', '.join(TASKS)}")
    tasks = list(dict.fromkeys(args.tasks)) or [task for task in TASK_REGISTRY if task in TASKS]
    if args.json is not None and len(tasks) > 1:
        parser.error("--json names one report: give one task with it")
    if args.rounds < 1 or args.warmup < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--rounds, --warmup and --steps must be at least 1")
    if args.profile:
        os.environ["ROSETTA_PROFILE"] = args.profile
    if args.frameworks:
        try:
            parse_framework_list(args.frameworks)
        except UnknownFrameworkError as error:
            parser.error(f"--frameworks {args.frameworks}: {error}")
        os.environ["ROSETTA_FRAMEWORKS"] = args.frameworks
    from .run import installed_frameworks

    frameworks = tuple(name for name in selected_frameworks() if name in installed_frameworks())
    if not frameworks:
        parser.error("none of the selected frameworks is installed")
    for task in tasks:
        report = benchmark_task(task, frameworks, rounds=args.rounds, warmup=args.warmup, steps=args.steps,
                                in_turn=args.in_turn)
        print(format_report(report))
        if args.json is None:
            from rosetta_proof.records import build_results_dir

            path = build_results_dir() / f"bench-{task}.json"
        else:
            path = args.json
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")  # a report is never left half written
        partial.write_text(json.dumps(report, indent=2))
        partial.replace(path)
        print(f"wrote {path}")
    return 0
