"""The device check: every chapter's PyTorch and JAX parts in the full profile on this
machine's GPU, one results record per task and framework appended to ``results/``.

``make gpu-check`` (``python -m rosetta_book.gpu_check``) is what a GPU runner
or a borrowed GPU machine runs. It needs only PyTorch, JAX (with Flax and
optax), numpy and the book's small pure-Python helpers (pooch, tqdm, MyST-NB
to read the pages); no TensorFlow, MXNet or Chainer, no network: the data
sets' labelled stand-ins take the place of missing downloads
(``ROSETTA_OFFLINE=1``). Each part runs in its own process, through the
chapter loader, exactly as the tests run it.

A record holds the device's name, driver and CUDA versions, the framework's
versions and the device its arrays were on, the profile, the commit, the
date, and the chapter's metrics: every number (or list of numbers) the part
leaves for its page's comparisons. The whole check keeps to a time budget
(8 minutes by default): a part that would start after it is reported as not
run, never silently dropped.

Without a GPU the check refuses to run the full profile (a CPU would take
hours); ``--profile smoke --allow-cpu`` runs it small on a CPU, to test it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from rosetta_utils.envreport import gpu_name
from rosetta_utils.frameworks import is_installed
from .page import Page
from rosetta_utils.profile import PROFILES, cuda_gpu_visible

#: The frameworks the device check runs: those whose current GPU builds the runner has.
CHECKED_FRAMEWORKS = ("pytorch", "jax")
DEFAULT_BUDGET_SECONDS = 8 * 60


class DeviceCheckError(RuntimeError):
    """A device check that cannot run here, or whose parts failed; says which and why."""


@dataclass(frozen=True)
class GPUInfo:
    name: str
    driver: str
    cuda: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "driver": self.driver, "cuda": self.cuda}


def _nvidia_smi(*fields: str) -> list[str] | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    first = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    return [value.strip() for value in first.split(",")] if first else None


def _cuda_version_from_smi() -> str:
    try:
        done = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    for line in done.stdout.splitlines():
        if "CUDA Version:" in line:
            return line.split("CUDA Version:", 1)[1].strip().strip("|").strip()
    return "unknown"


def gpu_info() -> GPUInfo | None:
    """The first NVIDIA GPU, its driver and the CUDA version the driver supports."""
    if not cuda_gpu_visible():
        return None
    values = _nvidia_smi("name", "driver_version")
    if values and len(values) >= 2:
        return GPUInfo(values[0], values[1], _cuda_version_from_smi())
    return GPUInfo(gpu_name() or "NVIDIA GPU", "unknown", "unknown")


def chapter_pages(book: Path) -> list[Path]:
    """The chapters (``book/chapters/*.md`` with code), in the table of contents' order
    where the page is listed there, else by name."""
    pages = sorted(path for path in (book / "chapters").glob("*.md") if "```{code-cell}" in path.read_text())
    toc = book.parent / "_toc.yml"
    if toc.is_file():
        listed = [line.split("file:", 1)[1].strip() for line in toc.read_text().splitlines() if "file:" in line]
        order = {name: index for index, name in enumerate(listed)}
        pages.sort(key=lambda path: order.get(path.relative_to(book.parent).with_suffix("").as_posix(), len(order)))
    return pages


def chapter_metrics(results: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers a part left for its comparisons: every int, float, or flat list of
    numbers (e.g. epoch times); arrays, strings and nested values stay out."""
    metrics: dict[str, Any] = {}
    for name, value in results.items():
        if name == "environment" or isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            metrics[name] = value
        elif isinstance(value, (list, tuple)) and value and all(
                isinstance(item, (int, float)) and not isinstance(item, bool) for item in value):
            metrics[name] = list(value)
    return metrics


def check_can_run(profile: str, allow_cpu: bool, gpu: GPUInfo | None) -> None:
    if profile not in PROFILES:
        raise DeviceCheckError(f"profile {profile!r} is not a profile: expected one of {', '.join(PROFILES)}")
    if gpu is None and not allow_cpu:
        raise DeviceCheckError(
            "no NVIDIA GPU is visible here: the device check runs the full profile on a GPU, which a "
            "CPU would take hours to finish; to test the check itself on a CPU, run it with "
            "--profile smoke --allow-cpu")
    if gpu is None and profile == "full":
        raise DeviceCheckError("the full profile needs a GPU: on a CPU, test the check with --profile smoke")


def run_device_check(
    book: Path,
    results_folder: Path,
    profile: str = "full",
    frameworks: Iterable[str] = CHECKED_FRAMEWORKS,
    allow_cpu: bool = False,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    pages: Iterable[Path] | None = None,
    log: Any = print,
) -> list[dict[str, Any]]:
    """Run each chapter's parts of ``frameworks``; append and return one record per part.

    Raises :class:`DeviceCheckError` after all parts ran if any failed or did not fit
    the budget (the records of those that ran are kept).
    """
    from .chapter import ChapterError, run_framework_part
    from rosetta_utils.results import record_result

    gpu = gpu_info()
    check_can_run(profile, allow_cpu, gpu)
    frameworks = [name for name in frameworks if is_installed(name)]
    if not frameworks:
        raise DeviceCheckError(f"none of {', '.join(CHECKED_FRAMEWORKS)} is installed here")
    os.environ["ROSETTA_PROFILE"] = profile
    os.environ["ROSETTA_OFFLINE"] = "1"
    started = time.monotonic()
    records, problems = [], []
    for path in (list(pages) if pages is not None else chapter_pages(book)):
        page = Page.read(path)
        for framework in frameworks:
            if framework not in page.frameworks:
                continue
            left = budget_seconds - (time.monotonic() - started)
            if left <= 0:
                problems.append(f"{page.name} ({framework}): not run, the {budget_seconds:.0f} s budget was spent")
                continue
            part_started = time.monotonic()
            try:
                results = run_framework_part(path, framework, timeout=left)
            except ChapterError as error:
                problems.append(f"{page.name} ({framework}): {error}")
                log(f"FAILED {page.name} {framework}: {error}")
                continue
            seconds = time.monotonic() - part_started
            environment = results["environment"]
            record = record_result(
                page.results_task, framework, {**chapter_metrics(results), "part_seconds": round(seconds, 2)},
                versions=environment["versions"], device=environment["device"],
                config={"gpu": gpu.as_dict() if gpu else None, "float32": environment.get("float32"),
                        "data": "stand-ins where no cached download (offline)", "check": "gpu_check"},
                folder=results_folder)
            records.append(record)
            log(f"{page.name} {framework}: {seconds:.1f} s on {environment['device']}")
    if problems:
        raise DeviceCheckError("the device check did not complete:\n  " + "\n  ".join(problems))
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="full", help="full (default) or smoke")
    parser.add_argument("--allow-cpu", action="store_true", help="run without a GPU (with --profile smoke)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="folder to append records to")
    parser.add_argument("--book", type=Path, default=Path("book"), help="the book's folder")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_SECONDS, help="seconds for the whole check")
    arguments = parser.parse_args(argv)
    begun = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    try:
        records = run_device_check(arguments.book, arguments.results, arguments.profile,
                                   allow_cpu=arguments.allow_cpu, budget_seconds=arguments.budget)
    except DeviceCheckError as error:
        print(f"gpu_check: {error}", file=sys.stderr)
        return 1
    print(f"gpu_check: {len(records)} records appended under {arguments.results}/ (started {begun})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
