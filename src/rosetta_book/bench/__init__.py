"""Benchmarks: a page's configuration against the alternatives its framework offers.

``python -m rosetta_book.bench cifar10|imdb|resnet50 [--profile smoke] [--frameworks ...] [--json PATH]``

For each framework, in a process of its own where no other framework
imports (as in the book build), it loads the page's Setup, Data and Model
sections through the chapter loader, so it times exactly the code the page
shows, then calls the page's builder with each alternative's options
(:mod:`rosetta_book.bench.tasks`) and times one training step (CIFAR-10,
IMDB) or one batch of feature extraction (ResNet-50) of each, taking turns.
It prints, per framework, how far the page's configuration is from the
fastest one (target: within 1.25×) and what share of this machine's peak each
configuration's model FLOP/s reach. The peak is the fastest float32 matrix
multiply measured in the same run across numpy and every installed framework's
paths, whichever frameworks are benchmarked.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Mapping

from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import selected_frameworks

from ..environments import available_frameworks
from rosetta_utils.timing import Timing
from .compare import compare_configurations, compare_inference_configurations
from .flops import conv2d_flops, dense_flops, gru_flops, model_flops_per_image, resnet50_flops
from .peak import measure_matmul_flops
from .tasks import TASKS, Task, page_configuration

__all__ = [
    "TASKS", "TARGET_RATIO", "benchmark_task", "compare_configurations", "compare_inference_configurations",
    "conv2d_flops", "dense_flops", "format_report", "gru_flops", "main", "model_flops_per_image",
    "page_configuration", "peak_verdicts", "resnet50_flops", "summarize",
]
TARGET_RATIO = 1.25
PROJECT_ROOT = Path(__file__).resolve().parents[3]


def time_page_configurations(task: Task, namespace: Mapping[str, Any], framework: str,
                             repeats: int) -> tuple[str, dict[str, tuple[Timing, int]]]:
    """The page's configuration name, and ``{name: (Timing, items per call)}`` for each
    alternative; ResNet-50's page configuration is also timed at half and double its batch."""
    builder = namespace[task.builder]
    alternatives = task.alternatives[framework]
    page_name = page_configuration(builder, alternatives, where=f"{task.page} ({framework})")
    if task.training:
        inputs, labels = task.inputs(namespace)
        timings = compare_configurations(builder, alternatives, framework, inputs, labels,
                                         warmup=3, repeats=repeats)
        return page_name, {name: (timing, len(labels)) for name, timing in timings.items()}
    (images,) = task.inputs(namespace)
    timings = compare_inference_configurations(builder, alternatives, framework, images, repeats=repeats)
    results = {name: (timing, len(images)) for name, timing in timings.items()}
    every_image = namespace["images"]
    for size in (len(images) // 2, 2 * len(images)):
        if 0 < size <= len(every_image):
            sized = compare_inference_configurations(
                builder, {f"page, batch {size}": alternatives[page_name]}, framework, every_image[:size],
                repeats=repeats)
            results.update({name: (timing, size) for name, timing in sized.items()})
    return page_name, results


def run_framework(task_name: str, framework: str, repeats: int) -> dict[str, Any]:
    """One framework's measurements (run inside that framework's own process)."""
    from ..chapter import load_chapter

    task = TASKS[task_name]
    namespace = load_chapter(PROJECT_ROOT / task.page, framework, until=task.stop_before)
    page_name, timings = time_page_configurations(task, namespace, framework, repeats)
    return {
        "page_configuration": page_name,
        "timings": {name: {"seconds": list(timing.seconds), "items": items}
                    for name, (timing, items) in timings.items()},
        "matmul_flops": measure_matmul_flops(framework),
        "data": namespace["data"].source,
        "flops_per_item": model_flops_per_image(task_name, namespace),
    }


def _run_in_own_process(task: str, framework: str, repeats: int, peak_only: bool = False) -> dict[str, Any]:
    from ..environments import require_python
    from ..one_framework import environment

    with tempfile.TemporaryDirectory(prefix="rosetta-bench-") as folder:
        out = Path(folder) / "result.json"
        command = [require_python(framework), "-m", "rosetta_book.bench", task, "--one", framework,
                   "--repeats", str(repeats), "--json", str(out)] + (["--peak-only"] if peak_only else [])
        done = subprocess.run(command, env=environment(framework))
        if done.returncode != 0:
            raise RuntimeError(f"the {framework} benchmark of {task} failed (exit {done.returncode}); "
                               "its error is printed above")
        return json.loads(out.read_text())


def summarize(task: str, measured: Mapping[str, Mapping[str, Any]], numpy_rates: Mapping[str, float]) -> dict[str, Any]:
    """The report: each framework's configurations with their shares of the peak."""
    rates = dict(numpy_rates)
    for result in measured.values():
        rates.update(result["matmul_flops"])
    peak = max(rates.values())
    counts = {framework: result["flops_per_item"] for framework, result in measured.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"the {task} page's parts declare different model sizes: FLOP per item {counts}")
    flops_per_item = next(iter(counts.values())) * (3 if TASKS[task].training else 1)
    report: dict[str, Any] = {"task": task, "peak_flops": peak, "matmul_flops": rates,
                              "model_flops_per_item": flops_per_item, "frameworks": {}}
    for framework, result in measured.items():
        timings = {name: (Timing(tuple(t["seconds"])), t["items"]) for name, t in result["timings"].items()}
        per_item = {name: timing.median / items for name, (timing, items) in timings.items()}
        fastest = min(per_item, key=per_item.get)
        page_name = result["page_configuration"]
        report["frameworks"][framework] = {
            "page_configuration": page_name,
            "fastest_configuration": fastest,
            "ratio": per_item[page_name] / per_item[fastest],  # time per item, so batch sizes compare
            "configurations": {
                name: {"median_seconds": t.median, "spread_seconds": t.spread, "items": items,
                       "flops_per_second": flops_per_item / per_item[name],
                       "fraction_of_peak": flops_per_item / per_item[name] / peak}
                for name, (t, items) in timings.items()
            },
            "data": result["data"],
        }
    return report


def benchmark_task(task: str, frameworks: tuple[str, ...], repeats: int) -> dict[str, Any]:
    """Time every framework's configurations for ``task``, each framework in its own process.

    The peak spans every installed library, benchmarked or not, so that a run of
    one framework reports the same shares of peak as a run of all five.
    """
    measured = {framework: _run_in_own_process(task, framework, repeats) for framework in frameworks}
    rates = measure_matmul_flops(None)
    for framework in FRAMEWORKS:
        if framework not in measured and framework in available_frameworks():
            rates.update(_run_in_own_process(task, framework, repeats, peak_only=True)["matmul_flops"])
    return summarize(task, measured, rates)


def format_report(report: Mapping[str, Any]) -> str:
    lines = [f"peak: {report['peak_flops'] / 1e9:.1f} GFLOP/s, the fastest float32 matrix multiply of: "
             + ", ".join(f"{name} {rate / 1e9:.1f}" for name, rate in report["matmul_flops"].items())]
    width = max([30] + [len(name) + 2 for result in report["frameworks"].values() for name in result["configurations"]])
    lines.append(f"{'framework':<11} {'configuration':<{width}} {'call (ms)':>10} {'GFLOP/s':>9} {'of peak':>8}")
    for framework, result in report["frameworks"].items():
        for name, numbers in result["configurations"].items():
            marker = " *" if name == result["page_configuration"] else ""
            lines.append(
                f"{framework:<11} {name + marker:<{width}} {numbers['median_seconds'] * 1e3:>10.1f} "
                f"{numbers['flops_per_second'] / 1e9:>9.1f} {numbers['fraction_of_peak']:>8.1%}"
            )
    lines.append(f"* the page's configuration; target: within {TARGET_RATIO}× of the framework's fastest")
    for framework, result in report["frameworks"].items():
        verdict = "meets" if result["ratio"] <= TARGET_RATIO else "MISSES"
        lines.append(f"{framework}: page / fastest = {result['ratio']:.2f} ({verdict} the target; "
                     f"fastest: {result['fastest_configuration']})")
    if report.get("task") == "resnet50":
        lines += peak_verdicts({fw: max(c["fraction_of_peak"] for c in r["configurations"].values())
                                for fw, r in report["frameworks"].items()})
    return "\n".join(lines)


def peak_verdicts(best_shares: Mapping[str, float]) -> list[str]:
    """ResNet-50's targets, given each framework's best share of peak: the fastest
    framework at 80% or more, every other one but Chainer at 50% or more."""
    leader = max(best_shares, key=best_shares.get)
    lines = []
    for framework, share in best_shares.items():
        target = 0.8 if framework == leader else (None if framework == "chainer" else 0.5)
        verdict = "no target" if target is None else f"{'meets' if share >= target else 'MISSES'} {target:.0%}"
        lines.append(f"{framework}: {share:.1%} of peak at best ({verdict})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("task", choices=sorted(TASKS))
    parser.add_argument("--profile", choices=["smoke", "full"], help="sets ROSETTA_PROFILE for the pages' sizes")
    parser.add_argument("--frameworks", help="comma-separated subset, e.g. pytorch,jax (default: all installed)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per configuration (default 10)")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one framework in this process
    parser.add_argument("--peak-only", action="store_true", help=argparse.SUPPRESS)  # internal, with --one
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.profile:
        os.environ["ROSETTA_PROFILE"] = args.profile
    if args.one:
        result = ({"matmul_flops": measure_matmul_flops(args.one)} if args.peak_only
                  else run_framework(args.task, args.one, args.repeats))
        args.json.write_text(json.dumps(result))
        return 0
    if args.frameworks:
        os.environ["ROSETTA_FRAMEWORKS"] = args.frameworks
    frameworks = available_frameworks(selected_frameworks())
    if not frameworks:
        parser.error("none of the selected frameworks is installed")
    report = benchmark_task(args.task, frameworks, args.repeats)
    print(format_report(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return 0
