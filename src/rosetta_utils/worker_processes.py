"""Start a data-parallel run's processes on this machine, bounded in time, and clean up.

A data-parallel run is several processes (workers, and for MXNet a scheduler
and a server) that find each other through ports on 127.0.0.1.
:func:`free_port` finds a port nothing listens on; :func:`run_processes`
starts the processes, each in a process group of its own, collects what each
prints, and returns it when every process has exited cleanly. When one exits
with an error or is killed, or no process prints a line for a while (a hang),
or the run passes its time limit, every process group is killed at once, so
nothing is left behind, and a :class:`WorkerError` names the framework and
the process: its name, or for a launcher that starts the workers itself
(torchrun, mpiexec) the rank the launcher reports, or the rank of a stopped
worker below it. The error shows the process's last lines and, where a
worker's Python traceback is in its output but above those lines (a
launcher's summary follows it), that traceback too. A port another program holds gives a :class:`PortInUse`;
:func:`on_free_ports` checks the ports a caller gives and retries a run on
fresh ports when the ones it chose were taken in between.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

HOST = "127.0.0.1"

#: What frameworks print when the port they were given is held by another program.
_PORT_TAKEN = re.compile(r"address already in use|EADDRINUSE|errno 98|bind.*failed",
                         re.IGNORECASE)
#: How launchers name the worker that failed (torchrun's and MPICH's reports).
_LAUNCHER_RANK = re.compile(r"\brank\s*:?\s*(\d+)\b", re.IGNORECASE)
#: MPICH's one-machine launcher (mpiexec.gforker) reports each rank's end,
#: "[0]1:Return code = 0, signaled with Killed", and exits with 0 even then.
_GFORKER_END = re.compile(
    r"^\[\d+\](\d+):Return code = (-?\d+)(?:, signaled with (\w+))?", re.MULTILINE)


class WorkerError(RuntimeError):
    """A process of a data-parallel run failed or hung; the message names framework and process."""

    def __init__(self, message: str, framework: str, worker: str, outputs: Mapping[str, str]):
        super().__init__(message)
        self.framework = framework
        self.worker = worker
        self.outputs = dict(outputs)


class PortInUse(WorkerError):
    """A port the run was told to use is held by another program."""


@dataclass
class Process:
    """One process of a run: a name for messages, its command line, extra environment."""

    name: str
    command: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)


def free_port(host: str = HOST) -> int:
    """A TCP port on ``host`` that nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def free_ports(count: int, host: str = HOST) -> list[int]:
    """``count`` different free ports (each held open until all are chosen)."""
    probes = []
    try:
        for _ in range(count):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probes.append(probe)
            probe.bind((host, 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def check_port_free(port: int, framework: str, host: str = HOST) -> None:
    """Raise :class:`PortInUse` when ``port`` on ``host`` is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as error:
            raise PortInUse(
                f"{framework}: port {port} on {host} is already in use by another "
                f"program ({error.strerror}); choose another, e.g. free_port()",
                framework, "launcher", {}) from None


class _Running:
    """A started process, its output read by a thread into lines."""

    def __init__(self, spec: Process, cwd: str | None):
        env = dict(os.environ)
        env.update(spec.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.spec = spec
        self.lines: list[str] = []
        self.last_line = time.monotonic()
        self.popen = subprocess.Popen(
            list(spec.command), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            errors="replace", start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))
            self.last_line = time.monotonic()

    def output(self) -> str:
        return "\n".join(self.lines)

    def kill(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def reap(self) -> None:
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignored
            pass
        self.reader.join(timeout=5)


def _describe_exit(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def _rank_failures(output: str) -> list[tuple[str, str]]:
    """``(rank, how it ended)`` for each rank a launcher reports as failed; the ranks it
    stopped itself (SIGINT or SIGQUIT, its ways of stopping the others) come last."""
    failed = [(rank, f"was killed by a signal ({signal_name})" if signal_name
               else f"exited with status {code}")
              for rank, code, signal_name in _GFORKER_END.findall(output)
              if code != "0" or signal_name]
    return sorted(failed, key=lambda item: item[1].endswith(("(Quit)", "(Interrupt)")))


def _culprit(process: _Running) -> str:
    """The process's name, with the rank a launcher reports as the first failure."""
    output = process.output()
    reported = _rank_failures(output)
    if reported and process.spec.name.startswith("launcher"):
        return f"worker {reported[0][0]} (reported by the {process.spec.name})"
    marker = output.rfind("Root Cause")  # torchrun's summary; MPICH names RANK n
    ranks = _LAUNCHER_RANK.findall(output[marker:] if marker >= 0 else output)
    if ranks and process.spec.name.startswith("launcher"):
        return f"worker {ranks[0]} (reported by the {process.spec.name})"
    return process.spec.name


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.splitlines()[-lines:])


#: torchrun prefixes each line a worker writes to stderr with its rank: "[rank1]: ...".
_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:\s?")


def _traceback(text: str, rank: str | None = None) -> str | None:
    """A worker's Python traceback in a process's output, up to its exception line; a
    launcher's lines come after its workers', and torchrun prefixes a worker's lines with
    its rank: the traceback of ``rank`` if there is one, else of the first rank that has
    one, else the last traceback of the output. ``None`` if there is none."""
    lines = []
    for line in text.splitlines():
        prefix = _RANK_PREFIX.match(line)
        lines.append((prefix.group(1) if prefix else None, line[prefix.end():] if prefix else line))
    starts = {}  # the last traceback of each prefix: the end of a chain of exceptions
    for number, (who, line) in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            starts[who] = number
    if not starts:
        return None
    ranked = [who for who in starts if who is not None]
    who = rank if rank in starts else (ranked[0] if ranked else None)
    found = []
    for line_rank, line in lines[starts[who]:]:
        if line_rank != who:
            continue
        found.append(line)
        if len(found) > 1 and line and not line[0].isspace():
            break  # the exception's own line ends a traceback
    return "\n".join(found)


def _last_output(text: str, culprit: str = "") -> str:
    """A failed process's last lines, after the failed worker's traceback when those lines
    do not show it (a launcher's summary follows it)."""
    rank = re.match(r"worker (\d+)", culprit)
    tail, traceback = _tail(text), _traceback(text, rank.group(1) if rank else None)
    if traceback is None or traceback in tail:
        return f"Its last output:\n{tail}"
    return f"The worker's traceback:\n{traceback}\nIts last output:\n{tail}"


def _process_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _rank_of(pid: int) -> str | None:
    """The rank a launcher gave a process, from its environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            variables = dict(item.split(b"=", 1) for item in environ.read().split(b"\0")
                             if b"=" in item)
    except OSError:
        return None
    for name in (b"RANK", b"PMI_RANK", b"OMPI_COMM_WORLD_RANK"):
        if name in variables:
            return variables[name].decode()
    return None


def _hung(process: "_Running") -> str:
    """Which worker of a process hangs: a stopped one below a launcher, or the process."""
    for pid in [process.popen.pid, *descendants(process.popen.pid)]:
        if _process_state(pid) in ("T", "t"):  # stopped (SIGSTOP, a debugger)
            rank = _rank_of(pid)
            if pid != process.popen.pid and rank is not None:
                return f"worker {rank} (stopped, started by the {process.spec.name})"
            return f"{process.spec.name} (stopped)"
    return process.spec.name


def run_processes(framework: str, processes: Sequence[Process], silence: float = 60.0,
                  timeout: float = 600.0, cwd: str | None = None,
                  poll: float = 0.05) -> dict[str, str]:
    """Run ``processes`` together; return ``{name: output}`` when all exited with 0.

    The first process that fails ends the whole run at once; a run in which
    no process printed a line for ``silence`` seconds counts as hung, and so
    does one still running after ``timeout`` seconds. Then every process
    group is killed and a :class:`WorkerError` (or :class:`PortInUse`) names
    the framework and the process.
    """
    names = [spec.name for spec in processes]
    if len(set(names)) != len(names):
        raise ValueError(f"process names must differ: {names}")
    running: list[_Running] = []
    started = time.monotonic()
    try:
        for spec in processes:
            running.append(_Running(spec, cwd))
        while True:
            codes = [process.popen.poll() for process in running]
            failed = [p for p, code in zip(running, codes) if code not in (None, 0)]
            if failed:
                first = failed[0]
                time.sleep(0.3)  # a launcher's own report of which rank failed
                for process in running:
                    process.kill()
                    process.reap()
                outputs = {p.spec.name: p.output() for p in running}
                who = _culprit(first)
                text = outputs[first.spec.name]
                kind = PortInUse if _PORT_TAKEN.search(text) else WorkerError
                raise kind(
                    f"{framework}: {who} {_describe_exit(first.popen.returncode)}; "
                    f"the run was stopped and its processes killed. "
                    f"{_last_output(text, who)}", framework, who, outputs)
            if all(code == 0 for code in codes):
                for process in running:
                    process.reap()
                    process.kill()  # anything a process left in its group
                outputs = {p.spec.name: p.output() for p in running}
                for process in running:  # a launcher that hides a failed rank
                    reported = _rank_failures(outputs[process.spec.name])
                    if reported:
                        who = _culprit(process)
                        raise WorkerError(
                            f"{framework}: {who} {reported[0][1]}; the run was "
                            f"stopped. {_last_output(outputs[process.spec.name], who)}",
                            framework, who, outputs)
                return outputs
            now = time.monotonic()
            last_line = max([started, *(p.last_line for p in running)])
            if now - last_line > silence or now - started > timeout:
                alive = [p for p, code in zip(running, codes) if code is None]
                stuck = [_hung(p) for p in alive]
                who = next((name for name in stuck if "stopped" in name),
                           min(alive, key=lambda p: len(p.lines)).spec.name)
                for process in running:
                    process.kill()
                    process.reap()
                outputs = {p.spec.name: p.output() for p in running}
                last = {p.spec.name: (p.lines[-1] if p.lines else "(nothing)")
                        for p in alive}
                report = "; ".join(f"{name}: {line!r}" for name, line in last.items())
                why = (f"printed nothing for {silence:g} s" if now - last_line > silence
                       else f"ran past its {timeout:g} s limit")
                raise WorkerError(
                    f"{framework}: {who} hung: the run {why}, and its processes "
                    f"were killed. Their last lines: {report}", framework, who, outputs)
            time.sleep(poll)
    finally:
        for process in running:
            if process.popen.poll() is None:
                process.kill()
                process.reap()


def on_free_ports(framework: str, processes: Callable[[list[int]], Sequence[Process]],
                  count: int = 1, ports: Sequence[int] | None = None, attempts: int = 2,
                  **run: Any) -> dict[str, str]:
    """:func:`run_processes` on ``processes(ports)``: ``count`` free ports on 127.0.0.1.

    Ports the caller gives are checked first (a taken one raises
    :class:`PortInUse` at once); ports this function chose are chosen afresh
    when the run reports one taken (another program took it in between), at
    most ``attempts`` times in all.
    """
    if ports is not None:
        for port in ports:
            check_port_free(port, framework)
        return run_processes(framework, processes(list(ports)), **run)
    for attempt in range(1, attempts + 1):
        chosen = free_ports(count)
        try:
            return run_processes(framework, processes(chosen), **run)
        except PortInUse:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def descendants(pid: int) -> list[int]:
    """The ids of every process below ``pid`` (read from /proc), for tests and cleanup."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
