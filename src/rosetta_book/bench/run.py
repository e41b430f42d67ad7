"""The parent's side of a benchmark run: start the processes, take rounds, gather the seconds.

Every framework's alternatives are split by the process environment they
need (:attr:`rosetta_book.bench.tasks.Alternative.env`); each group runs in a
process of its own (:mod:`rosetta_book.bench.worker`). All of a task's
processes are started and warmed up first; then each round asks every
process in turn for one timed call of each of its alternatives, the order of
the processes (and of the alternatives inside each) shifting by one every
round. The parent times numpy's matrix product in a turn of its own. A short
pause before each turn lets the threads the previous turn left spinning go
idle, so that one process's threads never compete with another's work.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from typing import Any, Callable, Mapping

from rosetta_utils import FRAMEWORKS
from rosetta_utils.machine import cpu_model

from .convolutions import CONVOLUTIONS_ALONE
from .tasks import Alternative, Task, resolve_task

#: The side of the square float32 matrices whose product sets the peak.
MATMUL_SIZE = 2048
#: How long a process may take to load the page, build and warm up its alternatives.
START_TIMEOUT = 3600


class BenchmarkError(RuntimeError):
    """A benchmark process that failed; the message names framework, group and cause."""


@dataclass
class Group:
    """The alternatives of one framework that run in one process environment."""

    framework: str
    env: dict[str, str]
    names: list[str] = field(default_factory=list)
    peak: bool = False  # this process also times the framework's matrix products

    @property
    def label(self) -> str:
        settings = " ".join(f"{key}={value}" for key, value in sorted(self.env.items()))
        if self.peak and not self.names:
            return f"{self.framework} (matrix products{', ' + settings if settings else ''})"
        return f"{self.framework} ({settings or 'the page environment'})"


def plan_groups(task: str | Task, frameworks: tuple[str, ...],
                peak_frameworks: tuple[str, ...] = ()) -> list[Group]:
    """The processes a run needs: one per framework and process environment among the
    alternatives timed (not ``dropped``), the page's own environment first, and for each
    framework benchmarked or named in ``peak_frameworks`` one more that only times its
    matrix products. The products run in a process of their own: in the page's process
    they slowed the page's calls (Chainer's CIFAR-10 step: 1.33x slower than the same
    configuration in a second process, whose calls no product preceded)."""
    alternatives = resolve_task(task).alternatives
    groups: list[Group] = []
    for framework in frameworks:
        by_env: dict[tuple[tuple[str, str], ...], Group] = {}
        for name, alternative in alternatives[framework].items():
            if alternative.dropped:
                continue
            key = tuple(sorted(alternative.env.items()))
            group = by_env.setdefault(key, Group(framework, dict(alternative.env)))
            group.names.append(name)
        groups.extend(sorted(by_env.values(), key=lambda group: (bool(group.env), group.label)))
    for framework in dict.fromkeys((*frameworks, *peak_frameworks)):
        groups.append(Group(framework, {}, peak=True))
    return groups


class BenchProcess:
    """A running benchmark process and its connection."""

    def __init__(self, task: str, group: Group, listener: Listener, address: str, key: bytes,
                 log: Path) -> None:
        from ..environments import require_python
        from ..one_framework import environment

        self.group = group
        self.log = log
        env = environment(group.framework)
        env.update(group.env)
        env["ROSETTA_BENCH_KEY"] = key.hex()
        env.setdefault("TQDM_DISABLE", "1")
        command = [require_python(group.framework), "-m", "rosetta_book.bench.worker", task, group.framework,
                   address]
        with open(log, "wb") as handle:
            self.process = subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        self.connection = self._accept(listener)

    def _accept(self, listener: Listener) -> Connection:
        accepted: list[Connection] = []
        thread = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(0.2)
            if self.process.poll() is not None and not accepted:
                raise self.failure("exited before it connected")
        return accepted[0]

    def failure(self, what: str) -> BenchmarkError:
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-30:]) if self.log.exists() else ""
        return BenchmarkError(f"the benchmark process of {self.group.label} {what}; its last lines:\n{tail}")

    def send(self, message: Mapping[str, Any]) -> None:
        try:
            self.connection.send_bytes(json.dumps(message).encode())
        except OSError:  # a broken pipe: the process is gone
            self.process.wait(timeout=10)
            raise self.failure(f"exited ({self.exit_reason()})") from None

    def exit_reason(self) -> str:
        """How the process ended: its status, or the signal that killed it (SIGKILL: often the
        kernel's out-of-memory killer, when every process of a task does not fit in memory)."""
        status = self.process.returncode
        if status is not None and status < 0:
            name = signal.Signals(-status).name
            hint = ": the machine's memory may not hold every process of this task at once; run fewer " \
                   "frameworks (--frameworks)" if -status == signal.SIGKILL else ""
            return f"killed by {name}{hint}"
        return f"status {status}"

    def receive(self, timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.connection.poll(0.5):
            if self.process.poll() is not None:
                raise self.failure(f"exited ({self.exit_reason()})")
            if deadline is not None and time.monotonic() > deadline:
                raise self.failure(f"did not answer within {timeout:.0f} s")
        try:
            message = json.loads(self.connection.recv_bytes())
        except EOFError:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                raise self.failure("closed its connection") from None
            raise self.failure(f"exited ({self.exit_reason()})") from None
        if "error" in message:
            raise BenchmarkError(f"the benchmark process of {self.group.label} failed:\n{message['error']}")
        return message

    def close(self) -> None:
        try:
            self.send({"do": "quit"})
            self.process.wait(timeout=60)
        except Exception:  # already gone, or stuck: end it
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


def machine_load() -> list[float]:
    """The 1, 5 and 15-minute load averages."""
    return [round(value, 2) for value in os.getloadavg()]


def run_task(task: str, frameworks: tuple[str, ...], *, rounds: int, warmup: int, steps: int,
             pause: float = 0.2, peak_frameworks: tuple[str, ...] = (), matmul_size: int = MATMUL_SIZE,
             log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> dict[str, Any]:
    """Start every process ``task`` needs, warm them up, take ``rounds`` rounds; return the
    raw measurements (see :func:`rosetta_book.bench.report.summarize` for the report).
    ``task`` is a name in :data:`~rosetta_book.bench.tasks.TASKS` or ``module:attribute``
    (which the processes import)."""
    from .peak import matmul_paths

    if rounds < 1 or warmup < 1 or steps < 1:
        raise ValueError(f"need rounds, warmup and steps >= 1, got {rounds}, {warmup} and {steps}")
    groups = plan_groups(task, frameworks, peak_frameworks)
    key = secrets.token_bytes(16)
    load_before = machine_load()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="rosetta-bench-") as folder:
        address = str(Path(folder) / "socket")
        processes: list[BenchProcess] = []
        try:
            with Listener(address, family="AF_UNIX", authkey=key) as listener:
                ready: dict[int, dict[str, Any]] = {}
                for index, group in enumerate(groups):
                    log(f"{task}: starting {group.label}: {', '.join(group.names) or 'matrix products only'}")
                    process = BenchProcess(task, group, listener, address, key, Path(folder) / f"{index}.log")
                    processes.append(process)
                    process.send({"names": group.names, "warmup": warmup, "steps": steps, "peak": group.peak,
                                  "matmul_size": matmul_size})
                    ready[index] = process.receive(START_TIMEOUT)
                    built = ready[index]["ready"]
                    log(f"{task}: {group.label} ready ("
                        + (", ".join(f"{name}: FAILED, {facts['failed']}" if "failed" in facts
                                     else f"{name}: {facts['build_seconds']:.0f} s to build and warm up"
                                     for name, facts in built.items()) or "matrix products") + ")")
                numpy_product = matmul_paths(None, matmul_size)["numpy (its BLAS)"]()
                numpy_product()
                seconds = {index: {name: [] for name in group.names} for index, group in enumerate(groups)}
                matmul: dict[str, list[float]] = {"numpy (its BLAS)": []}
                owners: dict[str, str | None] = {"numpy (its BLAS)": None}  # product -> its framework
                probes: dict[int, dict[str, list[float]]] = {}  # process -> probe -> seconds
                turns = list(range(len(processes))) + [None]  # None: the parent's numpy turn
                for round_ in range(rounds):
                    shift = round_ % len(turns)
                    for turn in turns[shift:] + turns[:shift]:
                        time.sleep(pause)
                        if turn is None:
                            start = time.perf_counter()
                            numpy_product()
                            matmul["numpy (its BLAS)"].append(time.perf_counter() - start)
                            continue
                        processes[turn].send({"do": "round", "round": round_})
                        answer = processes[turn].receive(START_TIMEOUT)
                        for name, value in answer["seconds"].items():
                            seconds[turn][name].append(value)
                        for path, value in answer["matmul_seconds"].items():
                            matmul.setdefault(path, []).append(value)
                            owners[path] = groups[turn].framework
                        for name, value in answer.get("probe_seconds", {}).items():
                            probes.setdefault(turn, {}).setdefault(name, []).append(value)
                    log(f"{task}: round {round_ + 1}/{rounds} done")
        finally:
            for process in processes:
                process.close()
    measured: dict[str, Any] = {}
    for index, group in enumerate(groups):
        if not group.names:
            continue
        entry = measured.setdefault(group.framework, {"alternatives": {}})
        entry.update({key: ready[index][key] for key in ("data", "weights", "flops_per_item")})
        if "convolutions" in ready[index]:  # the page's convolutions alone, from the page's process
            entry["convolutions"] = {**ready[index]["convolutions"],
                                     "seconds": probes.get(index, {}).get(CONVOLUTIONS_ALONE, [])}
        for name in group.names:
            entry["alternatives"][name] = {**ready[index]["ready"][name], "seconds": seconds[index][name],
                                           "env": group.env}
    return {"task": task, "rounds": rounds, "warmup": warmup, "steps": steps,
            "pause": pause, "matmul_size": matmul_size, "matmul_seconds": matmul, "matmul_frameworks": owners,
            "frameworks": measured,
            "load_average": {"before": load_before, "after": machine_load()},
            "machine": {"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0))},
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started)),
            "wall_seconds": round(time.time() - started, 1)}


def run_in_turn(task: str, frameworks: tuple[str, ...], *, peak_frameworks: tuple[str, ...] = (),
                log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
                **settings: Any) -> dict[str, Any]:
    """:func:`run_task` for one framework after another (each framework's processes alone on
    the machine, its configurations taking turns among themselves), each turn timing the
    matrix products of ``peak_frameworks`` too, so that a framework's shares of the peak
    divide by a peak timed beside it; the runs merged into one (see :func:`merge_runs`).
    For a task whose processes do not fit in memory all at once."""
    runs = []
    for framework in frameworks:  # each turn times the peak again, over every library's product
        log(f"{task}: {framework}'s turn")
        runs.append(run_task(task, (framework,), peak_frameworks=peak_frameworks, log=log, **settings))
    if not runs:
        log(f"{task}: the matrix products of {', '.join(peak_frameworks) or 'numpy'}")
        runs.append(run_task(task, (), peak_frameworks=peak_frameworks, log=log, **settings))
    return merge_runs(runs)


def merge_runs(runs: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Runs of one task taken in turn, as one run: every framework's measurements, with the
    matrix products of its own turn (its shares of the peak divide by those), every matrix
    product's seconds over all the turns, the load before the first and after the last, the
    wall time of all; ``in_turn`` lists the turns' frameworks."""
    first, last = runs[0], runs[-1]
    for run in runs[1:]:
        for key in ("task", "rounds", "warmup", "steps", "matmul_size"):
            if run[key] != first[key]:
                raise ValueError(f"runs to merge differ in {key}: {first[key]!r} and {run[key]!r}")
    matmul: dict[str, list[float]] = {}
    owners: dict[str, str | None] = {}
    measured: dict[str, Any] = {}
    for run in runs:
        for path, values in run["matmul_seconds"].items():
            matmul.setdefault(path, []).extend(values)
        owners.update(run["matmul_frameworks"])
        overlap = set(measured) & set(run["frameworks"])
        if overlap:
            raise ValueError(f"runs to merge both measured {', '.join(sorted(overlap))}")
        measured.update({framework: {**result, "matmul_seconds": dict(run["matmul_seconds"])}
                         for framework, result in run["frameworks"].items()})
    return {**first, "matmul_seconds": matmul, "matmul_frameworks": owners, "frameworks": measured,
            "load_average": {"before": first["load_average"]["before"], "after": last["load_average"]["after"]},
            "wall_seconds": round(sum(run["wall_seconds"] for run in runs), 1),
            "in_turn": [sorted(run["frameworks"]) for run in runs]}


def installed_frameworks() -> tuple[str, ...]:
    from ..environments import available_frameworks

    return available_frameworks(FRAMEWORKS)


__all__ = ["Alternative", "BenchmarkError", "Group", "MATMUL_SIZE", "installed_frameworks", "machine_load",
           "merge_runs", "plan_groups", "run_in_turn", "run_task"]
