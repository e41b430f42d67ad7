"""The data-parallel page's claims, checked through the code the page shows.

The equivalence of each framework's two workers with one process comes from the page's
own parts (run as the build runs them, each in its own process) and its comparison
cells; each verdict is then fed a wrong case. The faults (a killed worker, a taken
port) go through each framework's own ``launch``, loaded from the page up to the
section that runs it, and must end within the page's bound, name the framework and
the worker, and leave no process behind.
"""

import os
import re
import shutil
import signal
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from frameworks_under_test import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS
from page_checks import parts_as_built, assert_a_failed_proof_stops_the_page, smoke_offline

from rosetta_book.chapter import load_chapter, load_comparisons
from rosetta_proof.tab_results import TabRun
from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import is_installed
from rosetta_utils.worker_processes import PortInUse, WorkerError, descendants

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "data_parallel_training.md"
RUNS_SECTION = "The run"


@pytest.fixture(scope="module")
def results():
    """What each framework's part left, each run in its own process as the build runs it."""
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(results):
    """The page's comparison cells, run on what each framework's part left."""
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        return load_comparisons(PAGE, results)


def planted(run, name, share):
    """``run`` with tensor ``name``'s one-step difference set to ``share`` of its move."""
    differences = dict(run["one_step_differences"], **{name: share * run["alone_moves"][name]})
    return {"one_step_differences": differences}


def test_a_step_that_differs_or_a_wrong_count_stops_the_page(results):
    """3% off in the smallest tensor (the last layer's ten biases) stops the page."""
    framework = AVAILABLE[-1]
    smallest = last_bias(results[framework]["alone_moves"])
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, planted(results[framework], smallest, 0.03),
                                         r"two workers against one process failed for .*one step: 1 process "
                                         r"vs 2 workers: DIFFERS")
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"parameter_count": 3_441_591},
                                         r"parameter count against the issue's 3,441,592 failed")


def last_bias(names):
    """The last layer's bias (ten numbers, the smallest tensor) by the framework's own name:
    fc2.bias, fc2/bias, /fc2/b, ..."""
    (name,) = [name for name in names if "fc2" in name and re.split(r"[./]", name)[-1] in ("bias", "b")]
    return name


@pytest.mark.parametrize("framework", AVAILABLE)
def test_two_workers_take_the_step_of_one_process(comparison, framework):
    run = comparison["runs"][framework]
    assert comparison["one_step_ratio"](run) <= 1
    assert comparison["ONE_STEP_RELATIVE"] == pytest.approx(65536 * 2.0**-24)
    assert run.workers_difference == 0.0, "the workers' weights differ after ten steps"
    assert comparison["equivalence_verdict"](run) == "agrees"


def test_the_verdict_fails_a_step_that_differs(comparison):
    """Wrong cases for both checks: 3% off in any one tensor's step, and workers whose
    weights differ by a single rounding step."""
    run = comparison["runs"][AVAILABLE[0]]
    for name in run.alone_moves:
        wrong_step = TabRun(run.framework, {**run.as_dict(), **planted(run, name, 0.03)})
        assert comparison["equivalence_verdict"](wrong_step).startswith(comparison["ONE_STEP"]), name
    spacing = float(np.spacing(np.float32(1)))
    apart = TabRun(run.framework, {**run.as_dict(), "workers_difference": spacing})
    assert comparison["LAST_STEP"] in comparison["equivalence_verdict"](apart)


def test_the_difference_sees_a_changed_weight(comparison):
    """The comparison the Equivalence tabs make: ``at_stage`` picks one stage's weights,
    ``max_abs_difference`` sees a single changed value in them."""
    at_stage, difference = comparison["at_stage"], comparison["max_abs_difference"]
    saved = {"one_step/w": np.zeros(3, np.float32), "alone/w": np.zeros(3, np.float32),
             "last_step/w": np.ones(3, np.float32)}
    assert difference(at_stage(saved, "one_step"), at_stage(saved, "alone")) == 0.0
    saved["alone/w"][1] = 1e-3
    one_step = difference(at_stage(saved, "one_step"), at_stage(saved, "alone"))
    assert one_step == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="no weights saved"):
        at_stage(saved, "middle")


def test_every_model_is_the_issues_full_size_network(comparison):
    for framework, run in comparison["runs"].items():
        assert run.parameter_count == comparison["ISSUE_PARAMETERS"] == 3_441_592, framework


def test_timing_rows_are_measured(comparison):
    for row in comparison["timing_rows"]:
        framework, _, alone, together, speedup, collective, share, written, ratio = row
        assert alone > 0 and together > 0 and collective > 0, framework
        assert speedup == pytest.approx(alone / together)
        assert share == pytest.approx(collective / together)
    runs = comparison["runs"]
    for framework in ("pytorch", "tensorflow", "jax", "mxnet"):
        if framework in runs:  # gradients through loopback sockets: about one gradient
            gradient = 4 * runs[framework].parameter_count
            assert min(runs[framework].bytes_per_step) >= 0.9 * gradient, framework
    if "chainer" in runs:  # MPICH on one machine: shared memory, not TCP
        assert max(runs["chainer"].bytes_per_step) < 0.01 * 4 * runs["chainer"].parameter_count


def test_the_tensorflow_note_is_the_error_keras_gave(comparison):
    if "tensorflow" in comparison["runs"]:
        note = comparison["runs"]["tensorflow"].engine_notes
        assert note == "" or note.startswith(("ValueError", "TypeError"))


# ---- the Summary -----------------------------------------------------------------------

def test_each_part_names_the_data_its_workers_trained_on(results):
    """The workers' data note comes back with their results: the CIFAR-10 images, or
    (offline, with no cached copy) the labelled stand-in."""
    for framework, run in results.items():
        assert run["data_note"] in ("CIFAR-10", "synthetic stand-in, not CIFAR-10"), framework
    assert len({run["data_note"] for run in results.values()}) == 1


def test_the_summary_states_what_the_workers_measured(results, comparison):
    """The Summary's numbers against the workers' own results, recomputed here."""
    summary = "\n".join(comparison["SUMMARY"])
    one_step = {fw: run["one_step_difference"] for fw, run in results.items()}
    furthest = max(one_step, key=one_step.get)
    assert f"at most {one_step[furthest]:.2g} ({furthest};" in summary
    assert f"the workers' weights differ by {max(r['workers_difference'] for r in results.values()):g}" in summary
    assert f"data: {results[furthest]['data_note']};" in summary
    for framework, run in results.items():
        alone = np.median(np.asarray(run["steps_alone"])[1:])
        together = max(np.median(np.asarray(seconds)[1:]) for seconds in run["steps_together"])
        collective = max(np.median(seconds) for seconds in run["allreduce_seconds"])
        sent = max(run["bytes_per_step"]) / (4 * run["parameter_count"])
        assert f"{framework} {alone / together:.2f}×" in summary, framework
        assert f"{framework} {collective / together:.0%}" in summary, framework
        assert f"{framework} {sent:.2f}" in summary, framework


def test_the_summary_follows_the_runs(results):
    """Changed results give a changed Summary: a single process twice as slow doubles the
    speed-up, a larger one-step difference and another data note are named."""
    framework = AVAILABLE[0]
    changed = {name: dict(values) for name, values in results.items()}
    changed[framework]["steps_alone"] = 2 * np.asarray(results[framework]["steps_alone"])
    changed[framework]["one_step_difference"] = 9e-6  # the largest shown; the verdict reads each tensor
    for values in changed.values():
        values["data_note"] = "a data set of the test's"
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        before = load_comparisons(PAGE, results)["measured"][framework][4]
        summary = "\n".join(load_comparisons(PAGE, changed)["SUMMARY"])
    assert f"{framework} {2 * before:.2f}×" in summary
    assert "data: a data set of the test's;" in summary
    assert f"at most 9e-06 ({framework};" in summary


# ---- faults ---------------------------------------------------------------------------

# PyTorch's launcher (torchrun) and MPICH's (whose gforker exits 0 when a rank dies, so the
# rank's own report is read): the two ways a launcher sits between the page and its workers.
# Each runs where its framework imports in the test's process (Chainer: the legacy run).
FAULT_FRAMEWORKS = [name for name in ("pytorch", "chainer") if name in IN_PROCESS]
FAULT_PARAMS = [param for param in IN_PROCESS_PARAMS
                if (param.values[0] if hasattr(param, "values") else param) in FAULT_FRAMEWORKS]


@pytest.fixture(scope="module")
def launchers():
    """Each fault framework's part of the page up to the runs: its script and launch."""
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        namespaces = {framework: load_chapter(PAGE, framework, until=RUNS_SECTION)
                      for framework in FAULT_FRAMEWORKS}
    yield namespaces
    for namespace in namespaces.values():
        shutil.rmtree(namespace["RUN"], ignore_errors=True)


def _environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return dict(item.split(b"=", 1) for item in environ.read().split(b"\0") if b"=" in item)
    except OSError:
        return {}


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _worker(script):
    """The process of this test that runs ``script`` as worker 1, once it exists: the
    one a launcher gave rank 1 (torchrun, mpiexec, the page's JAX launch), or for MXNet, whose
    ranks the scheduler hands out later, the second worker process the page started."""
    workers = []
    for pid in sorted(descendants(os.getpid())):
        environ = _environ(pid)
        if script not in _cmdline(pid):
            continue
        if environ.get(b"RANK") == b"1" or environ.get(b"PMI_RANK") == b"1":
            return pid
        if environ.get(b"DMLC_ROLE") == b"worker":
            workers.append(pid)
    return workers[1] if len(workers) == 2 else None


def _left_over(namespace):
    run = str(namespace["RUN"])
    return [pid for pid in os.listdir("/proc") if pid.isdigit() and run in _cmdline(pid)]


@pytest.mark.parametrize("framework", FAULT_PARAMS)
def test_a_killed_worker_ends_the_run_with_an_error_naming_it(launchers, framework):
    namespace = launchers[framework]
    script = namespace["SCRIPT"].name
    outcome = {}
    before = set(descendants(os.getpid()))  # what other tests' fixtures may hold

    def run():
        try:
            namespace["launch"](2, namespace["STEPS"])
        except WorkerError as error:
            outcome["error"] = error
        outcome["seconds"] = time.monotonic() - start

    start = time.monotonic()
    runner = threading.Thread(target=run)
    runner.start()
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline and runner.is_alive():
        victim = _worker(script)
        time.sleep(0.1)
    assert victim is not None, f"no {framework} worker 1 appeared"
    time.sleep(1.0)  # let it get going
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    runner.join(timeout=namespace["SILENCE"] + 30)
    assert not runner.is_alive(), "the run did not end"
    error = outcome.get("error")
    assert error is not None, "the run ended without an error"
    assert time.monotonic() - killed_at <= namespace["SILENCE"]
    assert str(error).startswith(f"{framework}: ")
    assert error.framework == framework
    assert error.worker.startswith("worker 1"), error.worker
    assert _left_over(namespace) == [], "a process of the run is still running"
    assert set(descendants(os.getpid())) <= before, "the run left a process"


@pytest.mark.parametrize("framework", FAULT_PARAMS)
def test_a_worker_that_raises_shows_its_own_traceback(launchers, framework, tmp_path):
    """The workers run the CIFAR-10 code the tab wrote (CIFAR_PART) first: a planted
    fault there must reach the error through the launcher with the worker's traceback."""
    namespace = launchers[framework]
    broken = tmp_path / "cifar10_broken.py"
    broken.write_text('raise ValueError("a planted fault in the chapter code")\n')
    written = namespace["CIFAR_PART"]
    namespace["CIFAR_PART"] = broken
    try:
        with pytest.raises(WorkerError) as error:
            namespace["launch"](2, namespace["STEPS"])
    finally:
        namespace["CIFAR_PART"] = written
    assert error.value.framework == framework
    assert "ValueError: a planted fault in the chapter code" in str(error.value)
    assert "cifar10_broken.py" in str(error.value)
    assert _left_over(namespace) == []


@pytest.mark.parametrize("framework", FAULT_PARAMS)
def test_a_taken_port_gives_a_clear_error(launchers, framework):
    namespace = launchers[framework]
    before = set(descendants(os.getpid()))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        ports = [port] * (2 if framework == "tensorflow" else 1)
        with pytest.raises(PortInUse) as error:
            namespace["launch"](2, namespace["STEPS"], ports=ports)
    assert str(error.value).startswith(f"{framework}: port {port} on 127.0.0.1 is already in use")
    assert _left_over(namespace) == []
    assert set(descendants(os.getpid())) <= before, "the run left a process"
