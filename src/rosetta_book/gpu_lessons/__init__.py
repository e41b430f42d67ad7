"""The GPU lessons' measurements, run by the device check (:mod:`rosetta_book.gpu_check`).

The reference's three lessons are GPU lessons (autotuning, cuDNN, layouts); the
lessons pages show what this package measures, through
:func:`rosetta_proof.record_tables.gpu_lesson_rows`. Every network and step
is the chapters' own: a measuring process loads the CIFAR-10, ResNet-50 and
IMDB chapters' parts through the chapter loader up to their Training (or
Evaluation) section and calls the page's builder (``make_training``,
``make_resnet50``) with its options, as the benchmark does.

* ``autotuning``: ``torch.backends.cudnn.benchmark`` off and on for the CIFAR-10
  training step (batch 64) and the ResNet-50 forward pass (batch 32), and XLA's
  GPU autotuning (``--xla_gpu_autotune_level`` 0 and 4) for JAX's; each setting
  in a fresh process, twice: the first step, the steady step, and whether the
  two runs' results are bitwise equal;
* ``precision``: true float32, TF32 and bfloat16 autocast in PyTorch, time and
  error against float64 on the CPU, for the CIFAR-10 training step (its
  gradients) and the ResNet-50 forward pass (its features);
* ``layouts``: NCHW and channels-last in PyTorch in float32, TF32 and bfloat16,
  for both networks; the layout XLA chose for JAX's ResNet-50 convolutions,
  read from the compiled HLO;
* ``fused-rnn``: the IMDB training step with ``nn.GRU`` (cuDNN) and with a loop
  of ``nn.GRUCell``, and JAX's scanned cell (``nnx.RNN``).

Each framework's measurements run in processes of their own (``python -m
rosetta_book.gpu_lessons``), where no other framework imports; the processes
run one after another, never beside each other, so no measurement shares the
machine. The parent appends one record per measurement to ``results/`` (the
contract: ``lesson-autotuning``, ``lesson-precision``, ``lesson-layouts``,
``lesson-fused-rnn``), with the device read from an array the measurement made.
The processes run in the order of :func:`plan`, each only if the check's budget
has time left for it (its estimate on an H200-class GPU); what does not fit is
reported as not run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

LESSONS = ("autotuning", "precision", "layouts", "fused-rnn")

#: The records' task of each lesson.
RECORD_TASKS = {"autotuning": "lesson-autotuning", "precision": "lesson-precision", "layouts": "lesson-layouts",
         "fused-rnn": "lesson-fused-rnn"}

#: What each framework measures of each lesson (JAX has no autocast: no precision lesson).
MEASURED = {"pytorch": ("autotuning", "precision", "layouts", "fused-rnn"),
            "jax": ("autotuning", "layouts", "fused-rnn")}

#: Each framework's autotuning settings, in the order they run: the page's default first.
AUTOTUNE_SETTINGS = {"pytorch": ("cudnn.benchmark on", "cudnn.benchmark off"),
                     "jax": ("xla autotune level 4", "xla autotune level 0")}

#: On a CPU (``--allow-cpu``, a rehearsal whose records no page shows) the lessons keep
#: this many examples of each batch, fewer repeats and one warm-up call: ResNet-50 on
#: 32 images takes seconds per call on a small CPU.
CPU_BATCH_LIMIT, CPU_REPEATS, CPU_WARMUP = 4, 5, 1

#: Estimated seconds on an H200-class GPU (16 CPU cores), start and chapter loading
#: included; the budget starts a process only if this much is left. Estimates, not
#: measurements: the check prints what each process really took.
ESTIMATES = {
    ("pytorch", "process"): 12.0,  # Python, torch and CUDA start; three chapters' Setup to Model
    ("pytorch", "autotuning"): 6.0,
    ("pytorch", "precision"): 10.0,  # ResNet-50 in float64 on 16 cores: about 2 s
    ("pytorch", "layouts"): 15.0,
    ("pytorch", "fused-rnn"): 6.0,
    ("jax", "process"): 15.0,
    ("jax", "autotuning"): 25.0,  # compiling (and autotuning) the CIFAR-10 step and ResNet-50
    ("jax", "layouts"): 8.0,
    ("jax", "fused-rnn"): 12.0,
}


def check_lessons(lessons: Iterable[str]) -> list[str]:
    """``lessons`` as a list, each one of :data:`LESSONS`; a ``DeviceCheckError`` naming the
    unknown ones else."""
    chosen = list(lessons)
    unknown = [name for name in chosen if name not in LESSONS]
    if unknown:
        from ..gpu_processes import DeviceCheckError

        raise DeviceCheckError(f"no GPU lesson named {', '.join(unknown)}: the lessons are {', '.join(LESSONS)}")
    return chosen


@dataclass(frozen=True)
class LessonProcess:
    """One measuring process: a framework, its autotuning setting (None: the page's
    defaults), which run of that setting it is, and the lessons it measures."""

    framework: str
    setting: str | None
    run: int
    jobs: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.framework} {self.setting or 'defaults'} (run {self.run}): {', '.join(self.jobs)}"

    @property
    def estimate_seconds(self) -> float:
        return ESTIMATES[(self.framework, "process")] + sum(ESTIMATES[(self.framework, job)] for job in self.jobs)

    def command(self, book: Path, out: Path, repeats: int, warmup: int, batch_limit: int | None = None
                ) -> list[str]:
        command = [sys.executable, "-m", "rosetta_book.gpu_lessons", self.framework, str(out), "--book", str(book),
                   "--jobs", ",".join(self.jobs), "--repeats", str(repeats), "--warmup", str(warmup)]
        command += ["--batch-limit", str(batch_limit)] if batch_limit else []
        return command + (["--setting", self.setting] if self.setting else [])


def plan(lessons: Iterable[str], frameworks: Iterable[str]) -> list[LessonProcess]:
    """The processes that measure ``lessons`` for ``frameworks``, in the order they run.

    With autotuning, each setting runs in two fresh processes (the second run tells
    whether a run repeats bit for bit); the other lessons ride along in the first
    process of the framework's default setting. PyTorch's processes run first."""
    lessons = list(lessons)
    processes = []
    for framework in frameworks:
        wanted = tuple(name for name in MEASURED.get(framework, ()) if name in lessons)
        others = tuple(name for name in wanted if name != "autotuning")
        if "autotuning" in wanted:
            for index, setting in enumerate(AUTOTUNE_SETTINGS[framework]):
                processes.append(LessonProcess(framework, setting, 1, ("autotuning", *others) if index == 0
                                               else ("autotuning",)))
                processes.append(LessonProcess(framework, setting, 2, ("autotuning",)))
        elif others:
            processes.append(LessonProcess(framework, None, 1, others))
    return processes


@dataclass
class LessonOutcome:
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)


def read_measurements(folder: Path) -> list[dict[str, Any]]:
    """The measurements a process wrote (one JSON line each), also those of a process that
    stopped half-way; each with its arrays (for comparing runs) loaded."""
    import numpy as np

    path = folder / "measurements.jsonl"
    if not path.is_file():
        return []
    measurements = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        measurement = json.loads(line)
        if measurement.get("arrays"):
            with np.load(folder / measurement["arrays"], allow_pickle=False) as archive:
                measurement["arrays"] = {name: archive[name] for name in archive.files}
        measurements.append(measurement)
    return measurements


def write_record(measurement: Mapping[str, Any], metrics: Mapping[str, Any], results_folder: Path,
            driver: str | None, incomplete: str | None = None) -> dict[str, Any]:
    """The record of a measurement that ran on the device it was meant for (the check
    it passed, :func:`_device_problem`); ``incomplete`` says what of it did not run."""
    from rosetta_proof.records import record_result

    versions = dict(measurement["versions"])
    if driver:
        versions["NVIDIA driver"] = driver
    verdicts: dict[str, Any] = {"ran on the device it was meant for": {measurement["framework"]: "agrees"}}
    if incomplete:
        verdicts["the lesson's runs"] = f"not run: {incomplete}"
    return record_result(measurement["task"], measurement["framework"], metrics, versions=versions,
                         device=measurement["device"], config=measurement["config"], folder=results_folder,
                         verdicts=verdicts, held=not incomplete)


def _device_problem(measurement: Mapping[str, Any], expected: str) -> str | None:
    device = str(measurement.get("device", ""))
    on_cpu = device == "cpu"
    if expected == "gpu" and on_cpu:
        return f"its arrays were on the CPU, not on the GPU ({measurement['config']})"
    if expected == "cpu" and not on_cpu:
        return f"its arrays were on {device}, where the CPU was expected ({measurement['config']})"
    return None


def run_lessons(book: Path, results_folder: Path, lessons: Iterable[str], frameworks: Iterable[str],
                kinds: Mapping[str, str], deadline: float, gpu: Any = None,
                log: Callable[..., Any] = print, repeats: int | None = None, warmup: int | None = None,
                runner: Callable[..., subprocess.CompletedProcess] | None = None) -> LessonOutcome:
    """Run :func:`plan`'s processes one after another while the budget (``deadline``, a
    ``time.monotonic()`` value) has time for them; append a record per measurement.

    An autotuning setting's record is written once its second run compared its arrays
    with the first's (``bitwise_equal_runs``, ``max_abs_difference_between_runs``). On
    the CPU (``kinds`` says where each framework runs) the batches are cut to
    :data:`CPU_BATCH_LIMIT` examples, the repeats are fewer and the estimates unused."""
    from .measure import REPEATS, WARMUP, runs_compared

    outcome = LessonOutcome()
    driver = getattr(gpu, "driver", None)
    first_runs: dict[tuple, dict[str, Any]] = {}
    processes = plan(lessons, [name for name in frameworks if name in kinds])
    if processes:
        log(f"GPU lessons: {len(processes)} processes, about {sum(p.estimate_seconds for p in processes):.0f} s "
            f"on an H200-class GPU; {max(deadline - time.monotonic(), 0):.0f} s of the budget left")
    for process in processes:
        on_gpu = kinds[process.framework] == "gpu"
        left = deadline - time.monotonic()
        needed = process.estimate_seconds if on_gpu else 1.0
        if left < needed:
            outcome.problems.append(f"GPU lesson {process.name}: not run, the budget was spent "
                                    f"({left:.0f} s left, about {needed:.0f} s needed)")
            continue
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="rosetta-gpu-lesson-") as temporary:
            folder = Path(temporary)
            failure = _run_process(process, book, folder,
                                   repeats or (REPEATS if on_gpu else CPU_REPEATS),
                                   warmup if warmup is not None else (WARMUP if on_gpu else CPU_WARMUP),
                                   None if on_gpu else CPU_BATCH_LIMIT, left, runner, log)
            measurements = read_measurements(folder)
        seconds = time.monotonic() - started
        outcome.summary.append(f"lesson {process.name:<60} {seconds:>7.1f} s (about {process.estimate_seconds:.0f} s "
                               "on an H200)")
        log(f"GPU lesson {process.name}: {seconds:.1f} s, {len(measurements)} measurements")
        if failure:
            outcome.problems.append(f"GPU lesson {process.name}: {failure}")
            log(f"FAILED GPU lesson {process.name}: {failure}")
        for measurement in measurements:
            problem = _device_problem(measurement, kinds[process.framework])
            if problem:
                outcome.problems.append(f"GPU lesson {process.name}: {problem}")
                continue
            arrays = measurement.pop("arrays", None)
            if measurement["task"] != RECORD_TASKS["autotuning"]:
                outcome.records.append(write_record(measurement, measurement["metrics"], results_folder, driver))
                continue
            key = (measurement["framework"], json.dumps(measurement["config"], sort_keys=True))
            if process.run == 1:
                first_runs[key] = {**measurement, "arrays": arrays}
                continue
            first = first_runs.pop(key, None)
            if first is None:
                outcome.problems.append(f"GPU lesson {process.name}: no first run to compare with "
                                        f"({measurement['config']})")
                continue
            metrics = {**first["metrics"], **runs_compared(first["arrays"], arrays)}
            outcome.records.append(write_record(first, metrics, results_folder, driver))
    for first in first_runs.values():  # a setting whose second run did not complete
        outcome.problems.append(f"GPU lesson autotuning {first['framework']} {first['config']['setting']}: "
                                "the second run did not complete; recorded without comparing runs")
        outcome.records.append(write_record(first, first["metrics"], results_folder, driver,
                                       incomplete="the second run, to compare with, did not complete"))
    return outcome


def _run_process(process: LessonProcess, book: Path, folder: Path, repeats: int, warmup: int,
                 batch_limit: int | None, timeout: float,
                 runner: Callable[..., subprocess.CompletedProcess] | None, log: Callable[..., Any]) -> str | None:
    """Run one measuring process, logging its line per measurement; None when it completed,
    else why it did not."""
    from ..gpu_processes import child_environment, last_lines, run_child

    command = process.command(book, folder, repeats, warmup, batch_limit)
    try:
        done = (runner or run_child)(command, child_environment(process.framework), timeout)
    except subprocess.TimeoutExpired:
        return f"stopped after {timeout:.0f} s, the rest of the budget (what it measured before is kept)"
    for line in (done.stdout or "").splitlines():  # the process's line per measurement
        if line.startswith("lesson-"):
            log(f"  {line}")
    if done.returncode != 0:
        return f"the process failed:\n{last_lines(done.stderr)}"
    return None
