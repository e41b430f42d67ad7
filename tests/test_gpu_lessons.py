"""The GPU lessons of the device check: which processes measure what, how their
measurements become records (autotuning runs compared bit for bit, a measurement off the
GPU refused, a short budget cutting processes), the timing rule, the errors, the layouts
read from XLA's HLO, and one real run of a lesson on this CPU."""

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from rosetta_book.gpu_check import DeviceCheckError, GPUInfo, run_device_check
from rosetta_book.gpu_lessons import (
    LESSONS,
    LessonProcess,
    check_lessons,
    plan,
    run_lessons,
)
from rosetta_book.gpu_lessons.measure import (
    convolution_layouts,
    describe_layouts,
    errors_against,
    physical_order,
    runs_compared,
    time_calls,
)
from rosetta_proof.record_tables import gpu_lesson_rows
from rosetta_utils.frameworks import is_installed

BOOK = Path(__file__).resolve().parents[1] / "book"
A_GPU = GPUInfo("NVIDIA H200", "580.159.04", "13.0")


def quiet(*_):
    pass


def test_the_plan_runs_each_autotuning_setting_twice_in_fresh_processes():
    processes = plan(LESSONS, ["pytorch", "jax"])
    assert [(p.framework, p.setting, p.run, p.jobs) for p in processes] == [
        ("pytorch", "cudnn.benchmark on", 1, ("autotuning", "precision", "layouts", "fused-rnn")),
        ("pytorch", "cudnn.benchmark on", 2, ("autotuning",)),
        ("pytorch", "cudnn.benchmark off", 1, ("autotuning",)),
        ("pytorch", "cudnn.benchmark off", 2, ("autotuning",)),
        ("jax", "xla autotune level 4", 1, ("autotuning", "layouts", "fused-rnn")),
        ("jax", "xla autotune level 4", 2, ("autotuning",)),
        ("jax", "xla autotune level 0", 1, ("autotuning",)),
        ("jax", "xla autotune level 0", 2, ("autotuning",)),
    ]
    assert [(p.framework, p.setting, p.jobs) for p in plan(["precision", "fused-rnn"], ["pytorch", "jax"])] == [
        ("pytorch", None, ("precision", "fused-rnn")), ("jax", None, ("fused-rnn",))]
    assert plan(["precision"], ["jax"]) == []  # JAX has no autocast to measure
    with pytest.raises(DeviceCheckError, match="no GPU lesson named speed"):
        check_lessons(["layouts", "speed"])


def test_a_process_command_names_its_setting_and_jobs():
    command = LessonProcess("jax", "xla autotune level 0", 2, ("autotuning",)).command(
        Path("book"), Path("/tmp/out"), 10, 3, None)
    assert command[1:5] == ["-m", "rosetta_book.gpu_lessons", "jax", "/tmp/out"]
    assert command[-2:] == ["--setting", "xla autotune level 0"] and "--batch-limit" not in command


class FakeProcesses:
    """Stands in for the measuring processes: writes what each would measure, on
    ``device``; the second run of ``cudnn.benchmark on`` computes other last bits."""

    def __init__(self, device="NVIDIA H200", fail_setting=None, seconds=0.0):
        self.device, self.fail_setting, self.seconds, self.commands, self.runs = device, fail_setting, seconds, [], {}

    def __call__(self, command, env, timeout):
        self.commands.append(command)
        time.sleep(self.seconds)
        framework, out = command[3], Path(command[4])
        jobs = command[command.index("--jobs") + 1].split(",")
        setting = command[command.index("--setting") + 1] if "--setting" in command else None
        run = self.runs[setting] = self.runs.get(setting, 0) + 1
        lines = []
        if "autotuning" in jobs:
            arrays = {"losses": np.array([0.5, 0.25 + (1e-7 if setting == "cudnn.benchmark on" and run == 2 else 0)],
                                         dtype=np.float32)}
            np.savez(out / "arrays1.npz", **arrays)
            lines.append({"task": "lesson-autotuning", "framework": framework, "device": self.device,
                          "config": {"network": "cifar10", "batch": 64, "setting": setting},
                          "metrics": {"first_step_seconds": 1.0 * run, "median_seconds": 0.002, "iqr_seconds": 0.0001},
                          "versions": {"torch": "2.11.0"}, "arrays": "arrays1.npz"})
        if "precision" in jobs:
            lines.append({"task": "lesson-precision", "framework": framework, "device": self.device,
                          "config": {"network": "resnet50", "batch": 32, "setting": "tf32"},
                          "metrics": {"median_seconds": 0.01, "iqr_seconds": 0.001, "max_abs_error": 1e-3,
                                      "relative_error": 1e-4}, "versions": {"torch": "2.11.0"}})
        (out / "measurements.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        failed = setting == self.fail_setting and run == 2
        return subprocess.CompletedProcess(command, 1 if failed else 0, "", "Traceback\nRuntimeError: boom" if failed
                                           else "")


def test_measurements_become_records_and_two_runs_are_compared_bit_for_bit(tmp_path):
    fake = FakeProcesses()
    outcome = run_lessons(BOOK, tmp_path, ["autotuning", "precision"], ["pytorch"], {"pytorch": "gpu"},
                          time.monotonic() + 600, gpu=A_GPU, log=quiet, runner=fake)
    assert outcome.problems == []
    assert len(fake.commands) == 4 and all("--batch-limit" not in command for command in fake.commands)
    autotuning = [json.loads(line) for line in (tmp_path / "lesson-autotuning.jsonl").read_text().splitlines()]
    by_setting = {record["config"]["setting"]: record for record in autotuning}
    assert set(by_setting) == {"cudnn.benchmark on", "cudnn.benchmark off"}
    assert by_setting["cudnn.benchmark off"]["metrics"]["bitwise_equal_runs"] is True
    assert by_setting["cudnn.benchmark on"]["metrics"]["bitwise_equal_runs"] is False
    assert by_setting["cudnn.benchmark on"]["metrics"]["max_abs_difference_between_runs"] == pytest.approx(1e-7, rel=0.2)
    assert by_setting["cudnn.benchmark on"]["metrics"]["first_step_seconds"] == 1.0, "the first run's timing"
    for record in autotuning:
        assert record["device"] == "NVIDIA H200" and record["versions"]["NVIDIA driver"] == "580.159.04"
    precision = json.loads((tmp_path / "lesson-precision.jsonl").read_text())
    assert precision["metrics"]["relative_error"] == 1e-4


def test_the_records_show_on_a_lessons_page_with_their_verdict_columns(tmp_path, monkeypatch):
    monkeypatch.setenv("ROSETTA_RESULTS_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("ROSETTA_CURATED_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("ROSETTA_PROFILE", "full")
    run_lessons(BOOK, tmp_path, ["autotuning"], ["pytorch"], {"pytorch": "gpu"}, time.monotonic() + 600,
                gpu=A_GPU, log=quiet, runner=FakeProcesses())
    _, rows = gpu_lesson_rows("lesson-autotuning", config=["network", "setting"],
                                    metrics=["first_step_seconds", "median_seconds", "bitwise_equal_runs"])
    assert [row[:4] + [row[6]] for row in rows] == [
        ["pytorch", "NVIDIA H200", "cifar10", "cudnn.benchmark on", False],
        ["pytorch", "NVIDIA H200", "cifar10", "cudnn.benchmark off", True]]


def test_a_measurement_off_the_gpu_is_refused_and_never_recorded(tmp_path):
    outcome = run_lessons(BOOK, tmp_path, ["precision"], ["pytorch"], {"pytorch": "gpu"}, time.monotonic() + 600,
                          gpu=A_GPU, log=quiet, runner=FakeProcesses(device="cpu"))
    assert outcome.records == [] and not (tmp_path / "lesson-precision.jsonl").exists()
    assert outcome.problems and "its arrays were on the CPU, not on the GPU" in outcome.problems[0]


def test_a_failed_second_run_is_reported_and_the_first_recorded_without_comparison(tmp_path):
    outcome = run_lessons(BOOK, tmp_path, ["autotuning"], ["pytorch"], {"pytorch": "gpu"}, time.monotonic() + 600,
                          gpu=A_GPU, log=quiet, runner=FakeProcesses(fail_setting="cudnn.benchmark off"))
    assert any("cudnn.benchmark off (run 2)" in problem and "RuntimeError: boom" in problem
               for problem in outcome.problems)
    records = [json.loads(line) for line in (tmp_path / "lesson-autotuning.jsonl").read_text().splitlines()]
    assert len(records) == 2  # the failed run's measurement was still compared: it wrote one before failing


def test_a_short_budget_cuts_the_lessons_and_says_which(tmp_path):
    fake = FakeProcesses(seconds=2.0)
    needed = LessonProcess("jax", "xla autotune level 4", 1, ("autotuning",)).estimate_seconds
    outcome = run_lessons(BOOK, tmp_path, ["autotuning"], ["jax"], {"jax": "gpu"}, time.monotonic() + needed + 1,
                          gpu=A_GPU, log=quiet, runner=fake)
    assert len(fake.commands) == 1, "after the first process, less than a process's estimate is left"
    assert sum("not run, the budget was spent" in problem for problem in outcome.problems) == 3
    assert any("recorded without comparing runs" in problem for problem in outcome.problems)


def test_time_calls_times_the_first_call_apart_and_needs_five_repeats():
    calls, waited = [], []
    timed, result = time_calls(lambda: calls.append(1) or len(calls), waited.append, warmup=2, repeats=5)
    assert len(calls) == 8 and waited == list(range(1, 9)) and result == 8
    assert len(timed.steady) == 5 and timed.first_seconds >= 0
    assert set(timed.metrics(first=True)) == {"median_seconds", "iqr_seconds", "repeats", "first_step_seconds"}
    with pytest.raises(ValueError, match="at least 5 repeats"):
        time_calls(lambda: None, lambda _: None, repeats=4)


def test_runs_and_errors_are_compared_exactly():
    a = {"w": np.array([1.0, 2.0], dtype=np.float32)}
    assert runs_compared(a, {"w": a["w"].copy()}) == {"bitwise_equal_runs": True,
                                                      "max_abs_difference_between_runs": 0.0}
    assert runs_compared(a, {"w": np.nextafter(a["w"], 3, dtype=np.float32)})["bitwise_equal_runs"] is False
    with pytest.raises(ValueError, match="different arrays"):
        runs_compared(a, {"v": a["w"]})
    errors = errors_against([np.array([1.0, 2.0]), np.array([3.0])], [np.array([1.0, 2.0]), np.array([4.0])])
    assert errors == {"max_abs_error": 1.0, "relative_error": pytest.approx(1 / np.sqrt(21))}


GPU_HLO = """
  %p = f32[32,3,224,224]{3,2,1,0} parameter(0)
  %w = f32[64,3,7,7]{3,2,1,0} parameter(1)
  %t = f32[32,3,224,224]{1,3,2,0} copy(%p)
  %cudnn-conv = (f32[32,64,112,112]{1,3,2,0}, u8[0]{0}) custom-call(f32[32,3,224,224]{1,3,2,0} %t, f32[64,3,7,7]{1,3,2,0} %w), window={size=7x7 stride=2x2 pad=3_3x3_3}, dim_labels=bf01_oi01->bf01, custom_call_target="__cudnn$convForward"
  ROOT %fused = (f32[32,64,112,112]{3,2,1,0}, u8[0]{0}) custom-call(%p, %w), window={size=7x7}, dim_labels=bf01_oi01->bf01, custom_call_target="__cudnn$convBiasActivationForward"
"""


def test_the_layout_of_each_convolution_is_read_from_the_hlo():
    assert convolution_layouts(GPU_HLO) == ["NHWC", "NCHW"]
    assert describe_layouts(["NHWC", "NCHW", "NHWC"]) == "NHWC (2 of 3 convolutions), NCHW (1 of 3 convolutions)"
    assert physical_order("b01f", 4, None) == "NHWC"
    with pytest.raises(ValueError, match="not a permutation"):
        physical_order("bf01", 4, [0, 0, 1, 2])
    with pytest.raises(ValueError, match="no convolution"):
        describe_layouts(convolution_layouts("%x = f32[2]{0} parameter(0)"))


@pytest.mark.skipif(not is_installed("jax"), reason="JAX is not installed")
def test_the_layout_is_read_from_a_module_this_jax_compiled():
    import jax
    import jax.numpy as jnp

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    text = jax.jit(conv).lower(jnp.ones((2, 8, 8, 3)), jnp.ones((3, 3, 3, 4))).compile().as_text()
    orders = convolution_layouts(text)
    assert len(orders) == 1 and sorted(orders[0]) == sorted("NHWC")


@pytest.mark.skipif(not (is_installed("pytorch") and is_installed("jax")), reason="needs PyTorch and JAX")
def test_the_fused_rnn_lesson_runs_through_the_imdb_chapter_on_this_cpu(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    records = run_device_check(BOOK, tmp_path / "results", profile="smoke", allow_cpu=True, pages=[],
                               lessons=["fused-rnn"], log=quiet)
    assert [(r["framework"], r["config"]["setting"]) for r in records] == [
        ("pytorch", "nn.GRU (cuDNN)"), ("pytorch", "GRUCell loop"), ("jax", "nnx scan")]
    for record in records:
        assert record["task"] == "lesson-fused-rnn" and record["device"] == "cpu" and record["profile"] == "smoke"
        assert record["config"]["batch"] == 4, "on a CPU the rehearsal cuts the page's batch of 64 to 4"
        assert record["metrics"]["repeats"] == 5 and record["metrics"]["median_seconds"] > 0
        assert record["config"]["steps_per_review"] == 150
