"""Run the book's whole test suite on every core: each heavy test file in a pytest process
of its own, the light ones a few to a process, several processes at once.

    python tools/run_tests.py --current .venv/bin/python [--legacy .venv-legacy/bin/python]
        [--site _build/html] [--jobs N] [--out _build/test-run] [--store-durations]

The suite has three runs: the current environment's unit tests, the legacy
environment's (the tests marked ``legacy``, ``ROSETTA_TEST_ENVIRONMENT=legacy``)
and the built site's (``tests/test_built_*.py``, ``ROSETTA_BOOK_HTML``). One
process holding a whole run grows with every framework and model it loads
(16.5 GiB for the current run), and keeps about one core busy; here each
process holds one test file, or a few light ones, and dies with what it
loaded, and ``--jobs`` of them (default: the machine's cores) run at once,
the longest first, so the run ends on short ones.

How long each file takes comes from ``tests/durations.json``, which
``--store-durations`` rewrites from this run's own times (a file it does not
list counts as :data:`UNKNOWN_SECONDS`); it decides the order and the
grouping, never what runs. Each process writes a JUnit file and its output
under ``--out``; at the end the runner prints how many tests passed, skipped
and failed, the 15 slowest, every process's peak memory, and the output of
each process that failed. It exits 1 if any test failed or any process did
not finish.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
DURATIONS = TESTS / "durations.json"
#: What a file not in the durations file is expected to take, in seconds.
UNKNOWN_SECONDS = 10.0
#: A file expected to take at least this long runs in a process of its own; lighter ones
#: share one up to about this much work, with the ~4 s each process spends starting.
ALONE_SECONDS = 20.0
_PEAK = re.compile(r"peak resident memory \((?P<environment>\w+) environment\): test process "
                   r"(?P<own>[\d.]+) GiB, largest child process (?P<child>[\d.]+) GiB")


@dataclass
class Job:
    """One pytest process: a run (current, legacy or site) over some test files."""

    run: str
    files: list[str]
    expected: float
    python: str
    env: dict[str, str]
    name: str = ""
    process: subprocess.Popen | None = None
    started: float = 0.0
    seconds: float = 0.0
    returncode: int | None = None
    output: Path | None = None
    junit: Path | None = None
    tests: list[dict] = field(default_factory=list)

    @property
    def label(self) -> str:
        shown = ", ".join(Path(name).name for name in self.files[:3])
        more = f" and {len(self.files) - 3} more" if len(self.files) > 3 else ""
        return f"{self.run}: {shown}{more}"


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """``{"run/tests/test_x.py": seconds}`` from the durations file (empty if it has none)."""
    try:
        return {str(key): float(value) for key, value in json.loads(path.read_text()).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def plan_jobs(runs: dict[str, list[str]], durations: dict[str, float]) -> list[tuple[str, list[str], float]]:
    """``(run, files, expected seconds)`` per process: a file expected to take
    :data:`ALONE_SECONDS` or more alone, the others packed (largest first) into processes of
    about that much work; longest first."""
    jobs = []
    for run, files in runs.items():
        expected = {name: durations.get(f"{run}/{name}", UNKNOWN_SECONDS) for name in files}
        light = []
        for name in sorted(files, key=lambda item: -expected[item]):
            if expected[name] >= ALONE_SECONDS:
                jobs.append((run, [name], expected[name]))
            else:
                light.append(name)
        groups: list[list[str]] = []
        for name in light:  # first fit, largest first
            for group in groups:
                if sum(expected[item] for item in group) + expected[name] <= ALONE_SECONDS * 2:
                    group.append(name)
                    break
            else:
                groups.append([name])
        # each process takes its files in the suite's own (alphabetical) order
        jobs.extend((run, sorted(group), sum(expected[item] for item in group)) for group in groups)
    return sorted(jobs, key=lambda job: -job[2])


def test_files(pattern: str, exclude: str | None = None) -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for path in TESTS.glob(pattern)
                  if exclude is None or not path.match(exclude))


def collected_files(python: str, env: dict[str, str], files: list[str]) -> list[str]:
    """Those of ``files`` that hold a test this run keeps (pytest's own collection, in its
    environment: the legacy run keeps the tests marked ``legacy``)."""
    done = subprocess.run([python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 5):  # 5: nothing collected
        raise SystemExit(f"collecting the tests failed (exit {done.returncode}):\n{done.stdout[-4000:]}"
                         f"{done.stderr[-2000:]}")
    kept = {line.split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    return [name for name in files if name in kept]


def read_junit(path: Path) -> list[dict]:
    """Each test case of a JUnit file: its id, seconds and outcome."""
    if not path.is_file():
        return []
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", (child.get("message") or "").partition("\n")[0]
            elif child.tag == "skipped":
                outcome = "skipped"
        cases.append({"id": f"{case.get('classname', '')}::{case.get('name', '')}",
                      "file": case.get("file") or case.get("classname", "").replace(".", "/") + ".py",
                      "seconds": float(case.get("time") or 0), "outcome": outcome,
                      "message": message})
    return cases


def start(job: Job, out: Path, number: int) -> None:
    job.name = f"{number:02d}-{job.run}"
    job.output, job.junit = out / f"{job.name}.log", out / f"{job.name}.xml"
    command = [job.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={job.junit}",
               "-o", "junit_family=xunit1", *job.files]
    handle = open(job.output, "w")
    job.started = time.perf_counter()
    job.process = subprocess.Popen(command, cwd=ROOT, env=job.env, stdout=handle, stderr=subprocess.STDOUT)
    handle.close()


def finish(job: Job) -> None:
    job.seconds = time.perf_counter() - job.started
    job.returncode = job.process.returncode
    job.tests = read_junit(job.junit)


def peak_of(job: Job) -> str:
    match = _PEAK.search(job.output.read_text(errors="replace")) if job.output else None
    return f"{max(float(match['own']), float(match['child'])):.1f} GiB" if match else "?"


def counts(tests: list[dict]) -> dict[str, int]:
    found = {"passed": 0, "skipped": 0, "failed": 0}
    for test in tests:
        found[test["outcome"]] += 1
    return found


def run_jobs(jobs: list[Job], at_once: int, out: Path) -> None:
    waiting, running = list(jobs), []
    number = 0
    while waiting or running:
        while waiting and len(running) < at_once:
            number += 1
            job = waiting.pop(0)
            start(job, out, number)
            running.append(job)
        time.sleep(0.5)
        for job in [job for job in running if job.process.poll() is not None]:
            running.remove(job)
            finish(job)
            found = counts(job.tests)
            state = "ok" if job.returncode == 0 else f"FAILED (exit {job.returncode})"
            print(f"[tests] {job.label}: {found['passed']} passed, {found['skipped']} skipped, "
                  f"{found['failed']} failed in {job.seconds:.0f} s, peak {peak_of(job)}: {state}", flush=True)


def report(jobs: list[Job], verdicts: Path | None = None) -> bool:
    """Print every failed process's output, the 15 slowest tests, each run's time, the
    largest process and the totals, with the verdicts the build gated (its ledger,
    ``verdicts``); True if everything passed."""
    tests = [test for job in jobs for test in job.tests]
    found = counts(tests)
    failed_jobs = [job for job in jobs if job.returncode != 0]
    for job in failed_jobs:
        print(f"\n===== {job.label} (exit {job.returncode}): its output's end =====")
        print(job.output.read_text(errors="replace")[-8000:])
    print("\n15 slowest tests:")
    for test in sorted(tests, key=lambda test: -test["seconds"])[:15]:
        print(f"  {test['seconds']:7.1f} s  {test['id']}")
    print("\nthe 10 costliest parts this build executed and test processes (the next minutes to win):")
    for seconds, what in costliest(jobs, verdicts)[:10]:
        print(f"  {seconds:7.1f} s  {what}")
    peaks = sorted(((peak_of(job), job.label) for job in jobs), key=lambda item: -float(item[0].split()[0])
                   if item[0] != "?" else 0)
    print(f"largest process: {peaks[0][0]} ({peaks[0][1]})" if peaks else "no process ran")
    for run in dict.fromkeys(job.run for job in jobs):
        mine = [job for job in jobs if job.run == run]
        span = max(job.started + job.seconds for job in mine) - min(job.started for job in mine)
        print(f"{run} tests: {sum(len(job.tests) for job in mine)} in {len(mine)} processes, "
              f"{sum(job.seconds for job in mine):.0f} process-seconds over {span:.0f} s")
    tested = (f"{len(tests)} tests ({found['passed']} passed, {found['skipped']} skipped, "
              f"{found['failed']} failed, in {len(jobs)} pytest processes)")
    failed = [test for test in tests if test["outcome"] == "failed"]
    if failed:  # last, where a log's tail shows them
        print(f"failed tests ({len(failed)}):")
        for test in failed[:10]:
            print(f"  {test['id']}: {test['message'][:160]}")
        if len(failed) > 10:
            print(f"  and {len(failed) - 10} more (each process's log is in {jobs[0].output.parent})")
    print(f"{gated_line(verdicts)}; {tested}" if verdicts is not None else tested)
    return not failed_jobs and found["failed"] == 0 and bool(tests)


def costliest(jobs: list[Job], ledger: Path | None) -> list[tuple[float, str]]:
    """The build's executed parts (from its ledger, where it names them) and the test
    processes, each with its seconds, the longest first."""
    costs = [(job.seconds, f"test process {job.label}") for job in jobs]
    try:
        parts = json.loads(ledger.read_text()).get("executed_parts", []) if ledger is not None else []
    except (OSError, ValueError):
        parts = []
    for page, part, seconds, cpu in parts:
        if seconds is not None:
            cpu_text = f", {cpu:.0f} CPU-s" if cpu is not None else ""
            costs.append((float(seconds), f"build part {page}: {part}{cpu_text}"))
    return sorted(costs, key=lambda cost: -cost[0])


def gated_line(ledger: Path) -> str:
    """What the build's ledger (``_build/verdicts-gated.json``) says it gated."""
    try:
        return str(json.loads(ledger.read_text())["line"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        return f"the build's verdict count is unreadable ({ledger}: {type(error).__name__})"


def store_durations(jobs: list[Job], path: Path = DURATIONS) -> None:
    """Each file's seconds in this run (its tests' own, plus its share of its process's start)."""
    durations = load_durations(path)
    for job in jobs:
        if job.returncode != 0:
            continue
        own = {name: 0.0 for name in job.files}
        for test in job.tests:
            for name in job.files:
                if test["file"].endswith(Path(name).name) or Path(name).stem in test["id"]:
                    own[name] += test["seconds"]
                    break
        overhead = max(0.0, job.seconds - sum(own.values())) / len(job.files)
        for name, seconds in own.items():
            durations[f"{job.run}/{name}"] = round(seconds + overhead, 1)
    path.write_text(json.dumps(dict(sorted(durations.items())), indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/run_tests.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--current", required=True, help="the current environment's python")
    parser.add_argument("--legacy", help="the legacy environment's python (its run is left out without it)")
    parser.add_argument("--site", type=Path, help="the built site (its tests are left out without it)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes at once")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "test-run", help="logs and JUnit files")
    parser.add_argument("--verdicts", type=Path, help="the build's ledger of gated verdicts, reported at the end")
    parser.add_argument("--store-durations", action="store_true", help=f"rewrite {DURATIONS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.site is not None and not (args.site / "index.html").is_file():
        parser.error(f"--site {args.site}: no built site there (run make book first)")
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in [*args.out.glob("*.xml"), *args.out.glob("*.log")]:
        stale.unlink()
    # processes side by side: OpenMP threads that sleep when they wait instead of spinning on
    # a core the other process needs (rosetta_book.page_execution.SHARING_THREADS)
    shared = {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")} if args.jobs > 1 else {}
    base = {**os.environ, **shared, "ROSETTA_OFFLINE": "1"}
    pythons = {"current": (args.current, base)}
    runs = {"current": test_files("test_*.py", exclude="test_built_*.py")}
    if args.legacy:
        pythons["legacy"] = (args.legacy, {**base, "ROSETTA_TEST_ENVIRONMENT": "legacy"})
        runs["legacy"] = runs["current"]
    if args.site is not None:
        pythons["site"] = (args.current, {**os.environ, **shared, "ROSETTA_BOOK_HTML": str(args.site.resolve())})
        runs["site"] = test_files("test_built_*.py")
    if args.legacy:  # most files hold no legacy test: their processes would only collect
        runs["legacy"] = collected_files(*pythons["legacy"], runs["legacy"])
    jobs = [Job(run, files, expected, *pythons[run])
            for run, files, expected in plan_jobs(runs, load_durations())]
    print(f"[tests] {sum(len(files) for files in runs.values())} test files of {len(runs)} runs in "
          f"{len(jobs)} pytest processes, {args.jobs} at once", flush=True)
    run_jobs(jobs, args.jobs, args.out)
    passed = report(jobs, args.verdicts)
    if args.store_durations:
        store_durations(jobs)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
