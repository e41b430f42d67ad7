"""The launcher helper of the data-parallel page: bounded runs, named failures, nothing left.

Every test starts small Python processes (no framework), so the whole file runs in seconds.
"""

import os
import signal
import socket
import sys
import textwrap
import threading
import time

import pytest

from rosetta_utils.worker_processes import (
    PortInUse, Process, WorkerError, check_port_free, descendants, free_port, free_ports,
    on_free_ports, run_processes)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def wait_for(predicate, seconds=20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("the condition never held")


@pytest.fixture(autouse=True)
def nothing_left_behind():
    before = set(descendants(os.getpid()))  # what other tests' fixtures may hold
    yield
    # every process a test started is gone once run_processes returned or raised
    left = [pid for pid in descendants(os.getpid()) if pid not in before]
    assert left == [], "a test left a process running"


def test_free_port_is_free_on_loopback():
    port = free_port()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))
    ports = free_ports(3)
    assert len(set(ports)) == 3


def test_a_clean_run_returns_each_process_output():
    outputs = run_processes("demo", [
        Process("worker 0", python("print('hello from 0')")),
        Process("worker 1", python("import os; print('rank', os.environ['RANK'])"), {"RANK": "1"}),
    ])
    assert outputs == {"worker 0": "hello from 0", "worker 1": "rank 1"}


def test_a_failing_worker_stops_the_run_and_is_named():
    start = time.monotonic()
    with pytest.raises(WorkerError) as error:
        run_processes("demo", [
            Process("worker 0", python("import time; print('waiting'); time.sleep(300)")),
            Process("worker 1", python("raise SystemExit('worker 1 gives up')")),
        ], silence=60)
    assert time.monotonic() - start < 15
    assert error.value.framework == "demo" and error.value.worker == "worker 1"
    assert "demo: worker 1 exited with status 1" in str(error.value)
    assert "worker 1 gives up" in str(error.value)


def test_a_killed_worker_stops_the_run_and_is_named():
    pids = {}

    def kill_worker_1():
        pid = wait_for(lambda: pids.get("worker 1"))
        wait_for(lambda: os.path.exists(f"/proc/{pid}"))
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)

    code = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(300)"
    specs = [Process(f"worker {rank}", python(code)) for rank in range(2)]
    import rosetta_utils.worker_processes as module

    original = module._Running.__init__

    def remember(self, spec, cwd):
        original(self, spec, cwd)
        pids[spec.name] = self.popen.pid

    module._Running.__init__ = remember
    try:
        killer = threading.Thread(target=kill_worker_1)
        killer.start()
        start = time.monotonic()
        with pytest.raises(WorkerError) as error:
            run_processes("demo", specs, silence=60)
        killer.join()
    finally:
        module._Running.__init__ = original
    assert time.monotonic() - start < 15
    assert error.value.worker == "worker 1"
    assert "was killed by SIGKILL" in str(error.value)


def test_a_silent_run_counts_as_hung_and_names_the_stopped_worker():
    """A launcher whose worker 1 is stopped (SIGSTOP: a hang): the run ends after
    ``silence`` seconds, and the error names the rank the launcher gave that worker."""
    launcher = python("""
        import os, signal, subprocess, sys, time
        children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                     env=dict(os.environ, RANK=str(rank))) for rank in range(2)]
        time.sleep(0.5)
        os.kill(children[1].pid, signal.SIGSTOP)
        print("started both", flush=True)
        time.sleep(300)
    """)
    start = time.monotonic()
    with pytest.raises(WorkerError) as error:
        run_processes("demo", [Process("launcher (demo)", launcher)], silence=3)
    assert time.monotonic() - start < 15
    assert "hung" in str(error.value) and "printed nothing for 3 s" in str(error.value)
    assert error.value.worker.startswith("worker 1 (stopped")


def test_a_run_that_never_ends_is_bounded_by_its_timeout():
    chatty = python("""
        import time
        while True:
            print('still here', flush=True)
            time.sleep(0.2)
    """)
    start = time.monotonic()
    with pytest.raises(WorkerError, match="ran past its 2 s limit"):
        run_processes("demo", [Process("worker 0", chatty)], silence=60, timeout=2)
    assert time.monotonic() - start < 10


def test_a_launcher_report_names_the_failed_rank():
    report = python("""
        print("Root Cause (first observed failure):")
        print("[0]:")
        print("  rank      : 1 (local_rank: 1)")
        print("  exitcode  : -9 (pid: 123)")
        raise SystemExit(1)
    """)
    with pytest.raises(WorkerError) as error:
        run_processes("demo", [Process("launcher (demo)", report)])
    assert error.value.worker == "worker 1 (reported by the launcher (demo))"


def test_a_worker_traceback_above_the_launcher_summary_reaches_the_error():
    """torchrun prints each worker's traceback, prefixed with its rank, then a traceback of
    its own and its summary naming the first rank that failed: the error shows that
    rank's own exception, not the launcher's."""
    report = python("""
        import sys
        for rank in (0, 1):
            print(f"[rank{rank}]: Traceback (most recent call last):", file=sys.stderr)
            print(f'[rank{rank}]:   File "worker.py", line 3, in <module>', file=sys.stderr)
            print(f"[rank{rank}]: ValueError: rank {rank}'s own reason", file=sys.stderr)
        print("Traceback (most recent call last):")
        print('  File "torchrun", line 8, in <module>')
        print("ChildFailedError: ")
        print("Root Cause (first observed failure):")
        print("  rank      : 1 (local_rank: 1)")
        for line in range(20):
            print(f"summary line {line}")
        raise SystemExit(1)
    """)
    with pytest.raises(WorkerError) as error:
        run_processes("demo", [Process("launcher (demo)", report)])
    message = str(error.value)
    assert error.value.worker == "worker 1 (reported by the launcher (demo))"
    assert ("The worker's traceback:\nTraceback (most recent call last):\n"
            '  File "worker.py", line 3, in <module>\n'
            "ValueError: rank 1's own reason\nIts last output:") in message
    assert "ChildFailedError" not in message and message.endswith("summary line 19")
    plain = python("raise ValueError('seen in the last lines')")
    with pytest.raises(WorkerError) as error:
        run_processes("demo", [Process("worker 0", plain)])
    assert "The worker's traceback" not in str(error.value)  # the last lines show it already
    assert "ValueError: seen in the last lines" in str(error.value)


def test_a_rank_the_launcher_hides_is_still_a_failure():
    """MPICH's mpiexec.gforker exits with 0 even when a rank was killed; its report
    of each rank's end names the rank; the ones it stopped itself (Interrupt, Quit) do not."""
    report = python("""
        print("[0]0:Return code = 0, signaled with Interrupt")
        print("[0]1:Return code = 0, signaled with Killed")
        print("[0]2:Return code = 0, signaled with Quit")
    """)
    with pytest.raises(WorkerError) as error:
        run_processes("demo", [Process("launcher (demo)", report)])
    assert error.value.worker == "worker 1 (reported by the launcher (demo))"
    assert "was killed by a signal (Killed)" in str(error.value)
    clean = python("""
        print("[0]0:Return code = 0")
        print("[0]1:Return code = 0")
    """)
    assert run_processes("demo", [Process("launcher (demo)", clean)])


def test_a_taken_port_is_a_clear_error_before_anything_starts():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUse, match=f"demo: port {port} on 127.0.0.1 is already in use"):
            check_port_free(port, "demo")
        started = []
        with pytest.raises(PortInUse):
            on_free_ports("demo", lambda ports: started.append(ports) or [], count=1, ports=[port])
        assert started == []


def test_a_port_taken_under_the_run_is_retried_on_fresh_ports():
    """A run that reports its port taken (another program won the race) runs again on new
    ports; a port given by the caller is not retried."""
    attempts = []

    def processes(ports):
        attempts.append(ports)
        if len(attempts) == 1:
            code = "raise SystemExit('bind failed: Address already in use')"
        else:
            code = "print('listening')"
        return [Process("worker 0", python(code))]

    outputs = on_free_ports("demo", processes, count=2)
    assert outputs == {"worker 0": "listening"}
    assert len(attempts) == 2 and all(len(ports) == 2 for ports in attempts)

    with pytest.raises(PortInUse, match="Address already in use"):
        on_free_ports("demo", lambda ports: [Process("worker 0", python(
            "raise SystemExit('Address already in use')"))], count=1, attempts=1)


def test_process_names_must_differ():
    with pytest.raises(ValueError, match="names must differ"):
        run_processes("demo", [Process("worker", python("pass")), Process("worker", python("pass"))])
