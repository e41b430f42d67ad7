"""The device check: every chapter's PyTorch and JAX parts in the full profile on this
machine's GPU, each page's comparison cells on what they computed, then the GPU
lessons' measurements; records appended to ``results/``.

``make gpu-check`` (``python -m rosetta_book.gpu_check``) is what a GPU runner
or a borrowed GPU machine runs. It needs only PyTorch, JAX (with Flax and
optax), numpy and the book's small pure-Python helpers (pooch, tqdm, MyST-NB
to read the pages); no TensorFlow, MXNet or Chainer, no network: the data
sets' labelled stand-ins take the place of missing downloads
(``ROSETTA_OFFLINE=1``).

What it checks, failing (exit status 1, naming page and framework) where any
of it does not hold:

* before anything runs, every framework it is asked for imports and sees the
  GPU (``--allow-cpu``: or runs on the CPU), else it stops naming the framework;
* each part runs in a process of its own through the chapter loader, exactly as
  the tests run it, and the device read from its arrays is the GPU (for the few
  parts their page runs elsewhere by design, :data:`BY_DESIGN`, what the page says);
* where a part reports the float32 setting of its equivalence probes
  (``equivalence_precision``), it must be true float32, not TF32; the page's
  comparison cells then run on the parts' results, as in the book build
  (PyTorch against JAX), and every verdict they pass to ``require`` must hold;
* the GPU lessons (:mod:`rosetta_book.gpu_lessons`) measure what the lessons
  pages show: autotuning, precision, layouts and fused recurrent kernels.

A chapter record holds the device's name, driver and CUDA versions, the
framework's versions and the device its arrays were on, the profile, the
commit, the date, the part's data source, the chapter's metrics (every number
the part leaves for its page's comparisons) and, beside them, the verdicts of
the page's comparisons. The whole check keeps to a time budget (6 minutes by
default): chapters first, then the lessons, so a short budget cuts the
lessons first; what it cuts is reported as not run, never silently dropped.

Without a GPU the check refuses to run (the full profile would take hours on
a CPU); ``--profile smoke --allow-cpu`` runs it small on a CPU, to test it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from rosetta_utils.machine import gpu_name
from rosetta_utils.run_profile import PROFILES, cuda_gpu_visible

from .gpu_processes import DeviceCheckError, child_environment, last_lines, run_child
from .page import Page, PageError

#: The frameworks the device check runs: those whose current GPU builds the runner has.
CHECKED_FRAMEWORKS = ("pytorch", "jax")
DEFAULT_BUDGET_SECONDS = 6 * 60

#: Parts that their page runs elsewhere than on the GPU by design, with where and the
#: page's reason: ``"cpu"``, the check expects the CPU there (and fails if such a part
#: moves, so that this list follows the pages); ``"workers"``, the part's own process makes
#: no array (its work runs in worker processes it starts), so no device can be read from
#: it; where it does make one, that must be on the GPU. The record says which and why.
BY_DESIGN = {
    ("gru_flavors", "pytorch"): ("cpu", "the page keeps PyTorch's GRU layers on the CPU (its Setup says so)"),
    ("variable_length_sequences", "pytorch"): (
        "cpu", "the page leaves its tiny arrays where each framework puts them by default: PyTorch's CPU"),
    ("data_parallel_training", "pytorch"): (
        "workers", "the part's workers (torchrun) compute; the part's own process makes no array"),
    ("data_parallel_training", "jax"): (
        "workers", "the part's workers (JAX's multi-process runtime) compute; the part's own process makes no array"),
}





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


# ---- the frameworks: each must run, and see the GPU -------------------------------------

_PROBES = {
    "pytorch": (
        "import json, torch\n"
        "gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]"
        " if torch.cuda.is_available() else []\n"
        "print(json.dumps({'versions': {'torch': torch.__version__, 'CUDA (torch)': str(torch.version.cuda)},"
        " 'gpus': gpus}))\n"),
    "jax": (
        "import json, jax, flax, optax\n"
        "devices = jax.devices()\n"
        "print(json.dumps({'versions': {'jax': jax.__version__, 'flax': flax.__version__},"
        " 'gpus': [d.device_kind for d in devices if d.platform != 'cpu']}))\n"),
}


@dataclass(frozen=True)
class FrameworkProbe:
    """What a framework reported in a process of its own: its versions and the GPUs it sees."""

    framework: str
    versions: dict[str, str]
    gpus: tuple[str, ...]


def probe_framework(framework: str, timeout: float = 300) -> FrameworkProbe:
    """Import ``framework`` in a process of its own (where no other framework imports) and
    ask it which GPUs it sees; a :class:`DeviceCheckError` naming it if it cannot."""
    from .environments import BookEnvironmentError, require_python

    if framework not in _PROBES:
        raise DeviceCheckError(f"the device check cannot run {framework!r}: it runs {', '.join(_PROBES)}")
    try:
        python = require_python(framework)
    except BookEnvironmentError as error:
        raise DeviceCheckError(f"{framework} cannot run here: {error}") from None
    try:
        done = subprocess.run([python, "-c", _PROBES[framework]], env=child_environment(framework), check=False,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DeviceCheckError(f"{framework} did not import within {timeout:.0f} s") from None
    if done.returncode != 0:
        raise DeviceCheckError(f"{framework} cannot run here: importing it failed:\n{last_lines(done.stderr, 8)}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return FrameworkProbe(framework, answer["versions"], tuple(answer["gpus"]))


def check_frameworks(frameworks: Iterable[str], allow_cpu: bool,
                     probe: Callable[[str], FrameworkProbe] = probe_framework,
                     log: Callable[..., Any] = print) -> dict[str, str]:
    """``{framework: "gpu" or "cpu"}``, where each framework's parts must run. Every
    framework asked for must import; without ``allow_cpu`` each must see a GPU. Raises a
    :class:`DeviceCheckError` naming the framework before anything else runs."""
    frameworks = list(frameworks)
    if not frameworks:
        raise DeviceCheckError("no framework to check: name one or more of " + ", ".join(CHECKED_FRAMEWORKS))
    kinds = {}
    for framework in frameworks:
        found = probe(framework)
        versions = ", ".join(f"{name} {version}" for name, version in found.versions.items())
        if found.gpus:
            kinds[framework] = "gpu"
            log(f"{framework}: {versions}; sees {', '.join(found.gpus)}")
        elif allow_cpu:
            kinds[framework] = "cpu"
            log(f"{framework}: {versions}; sees no GPU: its parts run on the CPU (--allow-cpu)")
        else:
            raise DeviceCheckError(
                f"{framework} sees no GPU here ({versions}): install its CUDA build, or test the check "
                "on the CPU with --profile smoke --allow-cpu")
    return kinds


def names_a_gpu(device: str) -> bool:
    """Whether a device line read from an array names a GPU (``cuda:0 (...)``, ``gpu:0 (...)``)."""
    return str(device).lower().startswith(("cuda", "gpu", "rocm"))


def check_part_device(where: str, device: str, values: Mapping[str, Mapping[str, str]], expected: str,
                      workers: bool = False) -> None:
    """Raise a :class:`DeviceCheckError` unless the part computed where it should:
    ``device`` (read from its newest array or model) on the GPU when ``expected`` is
    ``"gpu"``, on the CPU when it is ``"cpu"``, and no model of the part elsewhere.
    ``workers`` (:data:`BY_DESIGN`) accepts a part that made no array at all. ``values``
    maps each top-level name of the part's arrays and models to its ``{"device": ...,
    "kind": "array" or "model"}``."""
    if str(device).startswith("not checked"):
        if workers:
            return
        raise DeviceCheckError(f"{where}: {device}, so where it computed cannot be read")
    on_gpu = names_a_gpu(device)
    if expected == "gpu" and not on_gpu:
        raise DeviceCheckError(f"{where}: its arrays are on {device}, not on the GPU")
    if expected == "cpu" and on_gpu:
        raise DeviceCheckError(f"{where}: its arrays are on {device}, where the CPU was expected")
    astray = sorted(name for name, value in values.items()
                    if value.get("kind") == "model" and names_a_gpu(value.get("device", "")) != (expected == "gpu"))
    if astray:
        places = ", ".join(f"{name} on {values[name]['device']}" for name in astray)
        raise DeviceCheckError(f"{where}: model(s) not on the {expected.upper()}: {places}")


#: What a part's ``equivalence_precision`` (the setting its ``true_float32()`` yields for the
#: Equivalence section's probes) reads when float32 is computed as float32.
TRUE_FLOAT32 = {"pytorch": "ieee", "jax": "highest"}


def check_true_float32(where: str, framework: str, setting: Any) -> None:
    """Raise a :class:`DeviceCheckError` unless the part's equivalence probes ran in true
    float32 (every PyTorch flag ``"ieee"``; JAX's matmul precision ``"highest"``), not TF32."""
    settings = list(setting) if isinstance(setting, (list, tuple)) else [setting]
    if not settings or any(str(value) != TRUE_FLOAT32[framework] for value in settings):
        raise DeviceCheckError(f"{where}: its equivalence probes ran with float32 set to {setting!r}, not true "
                               f"float32 ({TRUE_FLOAT32[framework]!r})")


# ---- one part, and one page's comparisons, each in a process of its own -----------------

@dataclass
class DevicePart:
    framework: str
    results: dict[str, Any]
    facts: dict[str, Any]
    seconds: float


def run_part(path: Path, framework: str, folder: Path, timeout: float) -> DevicePart:
    """Run ``framework``'s part of the page (``python -m rosetta_book.gpu_check --part``)
    and read what it left in ``folder``; :class:`DeviceCheckError` if it failed."""
    from rosetta_proof.tab_results import load_tab_results

    from .environments import BookEnvironmentError, require_python

    try:
        python = require_python(framework)
    except BookEnvironmentError as error:
        raise DeviceCheckError(f"{framework} cannot run here: {error}") from None
    command = [python, "-m", "rosetta_book.gpu_check", "--part", str(path), framework, str(folder)]
    started = time.monotonic()
    try:
        done = run_child(command, child_environment(framework), timeout)
    except subprocess.TimeoutExpired:
        raise DeviceCheckError(f"the part ran past the budget (stopped after {timeout:.0f} s)") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = next((line for line in reversed(lines) if "ChapterError" in line), last_lines(done.stderr))
        raise DeviceCheckError(f"the part failed in its own process: {reason}")
    results = load_tab_results(folder)[framework].as_dict()
    facts = json.loads((folder / f"{framework}.facts.json").read_text())
    return DevicePart(framework, results, facts, time.monotonic() - started)


def data_sources(namespace: Mapping[str, Any]) -> str:
    """The ``source`` lines of the data sets a part loaded (found at its top level or one
    level down, e.g. in a borrowed chapter's namespace), or a line saying it loaded none."""
    found: list[str] = []
    for name, value in namespace.items():
        if name.startswith("_"):
            continue
        for candidate in (list(value.values()) if isinstance(value, dict) else [value]):
            if isinstance(candidate, type):
                continue
            source = getattr(candidate, "source", None)
            if isinstance(source, str) and isinstance(getattr(candidate, "synthetic", None), bool) \
                    and source not in found:
                found.append(source)
    return "; ".join(found) if found else "none: the part loads no data set (its inputs are made in its cells)"


def value_devices(framework: str, namespace: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``{name: {"device", "kind"}}`` for each top-level array (``kind`` "array") or model
    (something callable, "model") of ``framework`` that the part left."""
    from rosetta_utils.backends import backend

    helpers = backend(framework)
    devices = {}
    for name, value in namespace.items():
        if name.startswith("_") or isinstance(value, type):
            continue
        try:
            device = helpers.array_device(value)
        except Exception:  # an object that merely looks like an array
            device = None
        if device:
            devices[name] = {"device": device, "kind": "model" if callable(value) else "array"}
    return devices


def _part_main(path: str, framework: str, folder: str) -> int:
    """In the part's own process: run it through the chapter loader, save its tab results
    and what the check reads besides (its data source, where its arrays are)."""
    from rosetta_proof import epilogue

    from .chapter import load_chapter
    from .page import Page
    from .page_execution import part_request

    namespace = load_chapter(path, framework)
    epilogue.run_epilogue(namespace, part_request(Page.read(path), framework, folder))  # as the build's kernels end
    facts = {"data": data_sources(namespace), "values": value_devices(framework, namespace)}
    (Path(folder) / f"{framework}.facts.json").write_text(json.dumps(facts))
    return 0


@dataclass
class Comparisons:
    """What a page's comparison cells decided: every ``require`` call's verdicts, in order,
    and the error that stopped them (None when they all ran)."""

    checks: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    not_run: str | None = None  # why the cells did not run at all
    #: the records the page's own cells wrote (the rates the Results page shows, computed
    #: from the parts' timed steps; the data and weights they rest on)
    page_records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.error is None and self.not_run is None and all(check["passed"] for check in self.checks)

    def verdicts(self) -> dict[str, Any]:
        """``{check: {item: verdict}}`` for a record (a repeated check gets " (2)", ...)."""
        from rosetta_proof.equivalence import verdicts_by_check

        verdicts = verdicts_by_check(self.checks)
        if self.error is not None:
            verdicts["comparison cells"] = f"FAILED: {self.error}"
        if self.not_run is not None:
            verdicts["comparison cells"] = f"not run: {self.not_run}"
        return verdicts


def run_device_comparisons(path: Path, folder: Path, timeout: float) -> Comparisons:
    """Run the page's comparison cells on the tab results saved in ``folder``, in a process
    where no framework imports, as the book build does. The page's own records go to a
    throwaway folder, from which the check takes what they measured (the rates), to write
    into its own records."""
    from rosetta_proof.records import load_results

    out = folder / "comparisons.json"
    with tempfile.TemporaryDirectory(prefix="rosetta-gpu-check-page-records-") as records:
        command = [sys.executable, "-m", "rosetta_book.gpu_check", "--comparisons", str(path), str(folder), str(out)]
        try:
            done = run_child(command, child_environment("none", ROSETTA_RESULTS_DIR=records), timeout)
        except subprocess.TimeoutExpired:
            return Comparisons(error=f"the comparison cells ran past the budget (stopped after {timeout:.0f} s)")
        page_records = load_results([Path(records)]).records
    if not out.is_file():
        return Comparisons(error=f"the comparison cells' process failed:\n{last_lines(done.stderr)}")
    answer = json.loads(out.read_text())
    return Comparisons(answer["checks"], answer["error"], page_records=page_records)


def _comparisons_main(path: str, folder: str, out: str) -> int:
    """In the comparisons' own process: run the page's comparison cells on the saved tab
    results; every verdict the cells passed to ``require`` is what ``gated_checks`` kept."""
    from rosetta_proof.equivalence import gated_checks
    from rosetta_proof.tab_results import load_tab_results

    from .chapter import ChapterError, load_comparisons

    results = {framework: run.as_dict() for framework, run in load_tab_results(folder).items()}
    error = None
    try:
        load_comparisons(path, results)  # which starts the page's record of checks anew
    except ChapterError as failure:
        error = str(failure)
    Path(out).write_text(json.dumps({"checks": gated_checks(), "error": error}))
    return 0 if error is None else 1


# ---- the check ---------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one run of the check appended and what went wrong (empty when all held)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)


def _check_page(path: Path, frameworks: list[str], kinds: Mapping[str, str], gpu: GPUInfo | None,
                results_folder: Path, deadline: float, outcome: Outcome, log: Callable[..., Any]) -> None:
    from rosetta_proof.records import record_result

    page = Page.read(path)
    runs: dict[str, DevicePart] = {}
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="rosetta-gpu-check-") as temporary:
        folder = Path(temporary)
        for framework in frameworks:
            where = f"{page.name} ({framework})"
            left = deadline - time.monotonic()
            if left <= 0:
                outcome.problems.append(f"{where}: not run, the budget was spent")
                continue
            place, reason = BY_DESIGN.get((path.stem, framework), (None, None))
            expected = "cpu" if place == "cpu" else kinds[framework]
            try:
                run = run_part(path, framework, folder, left)
                check_part_device(where, run.results["environment"]["device"], run.facts["values"], expected,
                                  workers=place == "workers")
                if "equivalence_precision" in run.results:
                    check_true_float32(where, framework, run.results["equivalence_precision"])
            except DeviceCheckError as error:
                message = str(error) if str(error).startswith(where) else f"{where}: {error}"
                outcome.problems.append(message)
                log(f"FAILED {message}")
                continue
            runs[framework] = run
            if place is not None:
                notes[framework] = f"{'on the CPU' if place == 'cpu' else 'in worker processes'} by design: {reason}"
            log(f"{where}: {run.seconds:.1f} s on {run.results['environment']['device']}")
        if not runs:
            return
        missing = [framework for framework in frameworks if framework not in runs]
        left = deadline - time.monotonic()
        if missing:  # each missing part is a problem already
            comparisons = Comparisons(not_run=f"the {', '.join(missing)} part(s) did not complete")
        elif not page.has_comparisons():
            comparisons = Comparisons()
        elif left <= 0:
            comparisons = Comparisons(not_run="the budget was spent")
            outcome.problems.append(f"{page.name}: the comparisons did not run, the budget was spent")
        else:
            started = time.monotonic()
            comparisons = run_device_comparisons(path, folder, left)
            log(f"{page.name}: comparisons {'passed' if comparisons.passed else 'FAILED'} "
                f"({len(comparisons.checks)} verdict checks, {time.monotonic() - started:.1f} s)")
        if comparisons.not_run is None and not comparisons.passed:
            failing = [f"{check['check']}: {check['verdicts']}" for check in comparisons.checks if not check["passed"]]
            outcome.problems.append(f"{page.name}: the comparisons failed: "
                                    + "; ".join(failing + ([comparisons.error] if comparisons.error else [])))
    for framework, run in runs.items():
        environment = run.results["environment"]
        own = next((record for record in reversed(comparisons.page_records)  # what the page's cells recorded
                    if record["task"] == page.results_task and record["framework"] == framework), {})
        config = {**own.get("config", {}), "gpu": gpu.as_dict() if gpu else None,
                  "float32": environment.get("float32"), "data": run.facts["data"], "check": "gpu_check"}
        if framework in notes:
            config["device_note"] = notes[framework]
        metrics = {**chapter_metrics(run.results), **own.get("metrics", {}), "part_seconds": round(run.seconds, 2)}
        outcome.records.append(record_result(
            page.results_task, framework, metrics,
            versions=environment["versions"], device=environment["device"], config=config,
            folder=results_folder, verdicts=comparisons.verdicts(), held=comparisons.passed))
        held = "held" if comparisons.passed else ("not run" if comparisons.not_run else "FAILED")
        outcome.summary.append(f"{page.name:<34} {framework:<8} {run.seconds:>7.1f} s  {environment['device']}; "
                               f"verdicts {held}")


def run_device_check(
    book: Path,
    results_folder: Path,
    profile: str = "full",
    frameworks: Iterable[str] = CHECKED_FRAMEWORKS,
    allow_cpu: bool = False,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    pages: Iterable[Path] | None = None,
    lessons: Iterable[str] | None = None,
    log: Callable[..., Any] = print,
    probe: Callable[[str], FrameworkProbe] = probe_framework,
    gpu: GPUInfo | None = None,
) -> list[dict[str, Any]]:
    """Check each chapter's parts of ``frameworks`` and their comparisons, then run the GPU
    lessons (``lessons``: names from :data:`rosetta_book.gpu_lessons.LESSONS`, default all);
    append and return the records.

    Raises :class:`DeviceCheckError` before anything runs if a framework cannot run here
    (or sees no GPU, unless ``allow_cpu``), and after everything ran if any part, verdict
    or lesson failed or did not fit the budget (the records of what ran are kept).
    ``probe`` and ``gpu`` replace the machine's answers (tests).
    """
    from . import gpu_lessons

    started = time.monotonic()
    gpu = gpu if gpu is not None else gpu_info()
    check_can_run(profile, allow_cpu, gpu)
    frameworks = list(frameworks)
    lessons = gpu_lessons.check_lessons(gpu_lessons.LESSONS if lessons is None else lessons)
    kinds = check_frameworks(frameworks, allow_cpu, probe, log)
    with _check_environment(profile):
        return _run_checks(book, results_folder, frameworks, kinds, lessons, started, budget_seconds, pages, log,
                           gpu)


@contextlib.contextmanager
def _check_environment(profile: str) -> Iterator[None]:
    """The profile and offline data for this process and every process it starts; the
    previous values come back after."""
    saved = {name: os.environ.get(name) for name in ("ROSETTA_PROFILE", "ROSETTA_OFFLINE")}
    os.environ.update(ROSETTA_PROFILE=profile, ROSETTA_OFFLINE="1")
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run_checks(book: Path, results_folder: Path, frameworks: list[str], kinds: Mapping[str, str],
                lessons: list[str], started: float, budget_seconds: float, pages: Iterable[Path] | None,
                log: Callable[..., Any], gpu: GPUInfo | None) -> list[dict[str, Any]]:
    """The parts, comparisons and lessons of :func:`run_device_check`, within the budget
    that began at ``started`` (a ``time.monotonic()`` value)."""
    from . import gpu_lessons

    deadline = started + budget_seconds
    outcome = Outcome()
    for path in (list(pages) if pages is not None else chapter_pages(book)):
        try:
            page = Page.read(path)
        except PageError as error:
            outcome.problems.append(f"{path}: {error}")
            continue
        page_frameworks = [name for name in frameworks if name in page.frameworks]
        if page_frameworks:
            _check_page(path, page_frameworks, kinds, gpu, results_folder, deadline, outcome, log)
    chapters_seconds = time.monotonic() - started
    if lessons:
        lesson_outcome = gpu_lessons.run_lessons(book, results_folder, lessons, frameworks, kinds, deadline,
                                                 gpu=gpu, log=log)
        outcome.records += lesson_outcome.records
        outcome.problems += lesson_outcome.problems
        outcome.summary += lesson_outcome.summary
    log("\nsummary (seconds on this machine):\n  " + "\n  ".join(outcome.summary or ["nothing ran"])
        + f"\n  framework checks, chapters and comparisons {chapters_seconds:.0f} s, in all {time.monotonic() - started:.0f} s "
        f"of a {budget_seconds:.0f} s budget")
    if outcome.problems:
        raise DeviceCheckError(f"the device check did not pass ({len(outcome.records)} records appended):\n  "
                               + "\n  ".join(outcome.problems))
    return outcome.records


def main(argv: list[str] | None = None) -> int:
    from .gpu_lessons import LESSONS

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--part"] and len(argv) == 4:
        return _part_main(*argv[1:])
    if argv[:1] == ["--comparisons"] and len(argv) == 4:
        return _comparisons_main(*argv[1:])
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="full", help="full (default) or smoke")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run where a framework sees no GPU, on the CPU (with --profile smoke)")
    parser.add_argument("--results", type=Path, default=Path("results"), help="folder to append records to")
    parser.add_argument("--book", type=Path, default=Path("book"), help="the book's folder")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_SECONDS,
                        help=f"seconds for the whole check (default {DEFAULT_BUDGET_SECONDS}); chapters run "
                             "first, so a short budget cuts the lessons first")
    parser.add_argument("--frameworks", default=",".join(CHECKED_FRAMEWORKS),
                        help=f"comma-separated (default {','.join(CHECKED_FRAMEWORKS)})")
    parser.add_argument("--pages", default="all",
                        help="chapters to run, comma-separated names such as cifar10_cnn (default all; none)")
    parser.add_argument("--lessons", default="all",
                        help=f"GPU lessons to measure, comma-separated of {','.join(LESSONS)} (default all; none)")
    arguments = parser.parse_args(argv)
    begun = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    try:
        pages = _chosen_pages(arguments.book, arguments.pages)
        lessons = [] if arguments.lessons == "none" else (
            list(LESSONS) if arguments.lessons == "all" else [name for name in arguments.lessons.split(",") if name])
        frameworks = [name for name in arguments.frameworks.split(",") if name]
        records = run_device_check(arguments.book, arguments.results, arguments.profile, frameworks,
                                   allow_cpu=arguments.allow_cpu, budget_seconds=arguments.budget,
                                   pages=pages, lessons=lessons)
    except DeviceCheckError as error:
        print(f"gpu_check: {error}", file=sys.stderr)
        return 1
    print(f"gpu_check: passed; {len(records)} records appended under {arguments.results}/ (started {begun})")
    return 0


def _chosen_pages(book: Path, names: str) -> list[Path]:
    every = chapter_pages(book)
    if names == "all":
        return every
    if names == "none":
        return []
    by_name = {path.stem: path for path in every}
    chosen = [name for name in names.split(",") if name]
    unknown = [name for name in chosen if name not in by_name]
    if unknown:
        raise DeviceCheckError(f"no chapter named {', '.join(unknown)}: the chapters are {', '.join(by_name)}")
    return [by_name[name] for name in chosen]


if __name__ == "__main__":
    sys.exit(main())
