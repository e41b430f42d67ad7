"""The autotuning page's claims, checked through the code it shows.

Each installed framework's part runs in its own process, as in the book
build; the comparison cells then run on what the parts left. The tests read
the knob table against the installed frameworks (PyTorch in this process,
the others each in a process of its own), check that every measurement the
page shows is there and ran on the CPU (no timing thresholds: the machine
may be busy), check the rule that names a faster setting, and show the GPU
section with and without a device-check record: the page says nothing of a
GPU without one, and never shows a CPU record as a GPU one.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE
from page_checks import assert_knob_table_complete, comparisons_with_records, framework_process_output, smoke_offline
from rosetta_book.chapter import run_framework_parts
from rosetta_proof.record_tables import NOT_MEASURED_ON_A_GPU
from rosetta_utils.frameworks import is_installed

PAGE = Path(__file__).parents[1] / "book" / "lessons" / "autotuning.md"
#: The switch each framework's cells must name, per knob.
SWITCHES = {
    "pytorch": {"cuDNN algorithm search": "torch.backends.cudnn.benchmark",
                "deterministic algorithms": "torch.backends.cudnn.deterministic",
                "new input shape": "torch.compile",
                "oneDNN primitive cache (CPU)": "ONEDNN_PRIMITIVE_CACHE_CAPACITY"},
    "tensorflow": {"cuDNN algorithm search": "TF_CUDNN_USE_AUTOTUNE",
                   "XLA GPU autotune level": "--xla_gpu_autotune_level",
                   "new input shape": "tf.function",
                   "input pipeline autotune": "tf.data.AUTOTUNE"},
    "jax": {"XLA GPU autotune level": "--xla_gpu_autotune_level",
            "deterministic algorithms": "--xla_gpu_deterministic_ops",
            "new input shape": "jax.jit",
            "persistent compilation cache": "jax_compilation_cache_dir"},
    "mxnet": {"cuDNN algorithm search": "MXNET_CUDNN_AUTOTUNE_DEFAULT",
              "deterministic algorithms": "MXNET_ENFORCE_DETERMINISM",
              "new input shape": "hybridize",
              "oneDNN primitive cache (CPU)": "MXNET_MKLDNN_CACHE_NUM"},
    "chainer": {"cuDNN algorithm search": "chainer.config.autotune",
                "deterministic algorithms": "chainer.config.cudnn_deterministic"},
}
#: (code printing values in a process with only that framework, the knob, the text it must hold)
DEFAULTS = {
    "tensorflow": ("import tensorflow as tf\nprint(tf.data.AUTOTUNE)",
                   "input pipeline autotune", "tf.data.AUTOTUNE = {}"),
    "jax": ("import jax\nprint(jax.config.jax_compilation_cache_dir)",
            "persistent compilation cache", "jax_compilation_cache_dir = {}"),
    "mxnet": ("import mxnet as mx\nprint(mx.util.getenv('MXNET_CUDNN_AUTOTUNE_DEFAULT') or 'unset')",
              "cuDNN algorithm search", "MXNET_CUDNN_AUTOTUNE_DEFAULT = {}"),
    "chainer": ("import chainer\nprint(chainer.config.autotune, chainer.config.cudnn_deterministic)",
                None, None),
}
#: The CPU knob each framework measures, its two settings in the order they are shown.
CPU_SETTINGS = {"pytorch": ["primitive cache: default", "primitive cache: off"],
                "mxnet": ["primitive cache: default", "primitive cache: off"],
                "tensorflow": ["tf.data AUTOTUNE: off", "tf.data AUTOTUNE: on"],
                "jax": ["compile cache: empty", "compile cache: filled"],
                "chainer": []}
#: The variables the settings put into a fresh process's environment (pages are read, not run).
SETTING_VARIABLES = {"pytorch": '"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "0"',
                     "mxnet": '"MXNET_MKLDNN_CACHE_NUM": "0"',
                     "jax": "JAX_COMPILATION_CACHE_DIR=cache_dir"}


@pytest.fixture(scope="module")
def parts():
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        patch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0)))))
        for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "MXNET_MKLDNN_CACHE_NUM", "XLA_FLAGS",
                     "TF_CUDNN_USE_AUTOTUNE", "JAX_COMPILATION_CACHE_DIR"):
            patch.delenv(name, raising=False)
        yield run_framework_parts(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(parts, tmp_path_factory):
    return comparisons_with_records(PAGE, parts, tmp_path_factory.mktemp("autotuning-results"))


def test_the_knob_table_has_every_switch_and_a_cell_for_every_framework(comparison):
    # the page's last column is each switch's measured effect, with a link to where
    assert_knob_table_complete({**comparison, "LINKS": comparison["EFFECTS"]}, SWITCHES, AVAILABLE)


@pytest.mark.skipif(not is_installed("pytorch"), reason="PyTorch is not installed")
def test_pytorch_defaults_are_the_installed_ones(comparison):
    """Read in a fresh process: a page loaded in this one (CIFAR-10 switches cudnn.benchmark
    on) would change them."""
    installed = framework_process_output("pytorch", (
        "import torch, torch._inductor.config as c; print(torch.backends.cudnn.benchmark, "
        "torch.backends.cudnn.deterministic, torch.are_deterministic_algorithms_enabled(), c.fx_graph_cache)"))
    benchmark, deterministic, algorithms, graph_cache = installed.split()
    knobs = comparison["runs"]["pytorch"].knobs
    assert knobs["cuDNN algorithm search"] == f"torch.backends.cudnn.benchmark = {benchmark}"
    assert knobs["deterministic algorithms"].startswith(f"torch.backends.cudnn.deterministic = {deterministic};")
    assert knobs["deterministic algorithms"].endswith(f"= {algorithms}")
    assert "unset" in knobs["oneDNN primitive cache (CPU)"]
    assert f"fx_graph_cache = {graph_cache}:" in knobs["persistent compilation cache"]


@pytest.mark.parametrize("framework", [fw for fw in DEFAULTS if fw in AVAILABLE])
def test_other_defaults_are_the_installed_ones(comparison, framework):
    code, knob, expected = DEFAULTS[framework]
    value = framework_process_output(framework, code)
    knobs = comparison["runs"][framework].knobs
    if framework == "chainer":
        autotune, deterministic = value.split()
        assert knobs["cuDNN algorithm search"] == f"chainer.config.autotune = {autotune}"
        assert knobs["deterministic algorithms"] == f"chainer.config.cudnn_deterministic = {deterministic}"
    elif framework == "mxnet" and value == "unset":
        assert knobs[knob].startswith("MXNET_CUDNN_AUTOTUNE_DEFAULT = unset")
    else:
        assert expected.format(value) in knobs[knob]


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_new_shape_was_timed_on_the_cpu(comparison, framework):
    run = comparison["runs"][framework]
    assert "cpu" in run.placement["device"].lower() or run.placement["device"] == "@numpy", run.placement
    for costs in run.shape_costs.values():
        assert list(costs) == [f"batch {batch}" for batch in comparison["BATCHES"]]
        for cost in costs.values():
            assert cost["first"] > 0 and len(cost["steady"]) == comparison["REPEATS"]
            assert min(cost["steady"]) > 0
    assert isinstance(run.repeatable, bool)


def test_the_network_is_the_chapters_and_the_batches_its_own():
    """The sizes the page measures at are the CIFAR-10 chapter's: its batch, its layers."""
    text = PAGE.read_text()
    chapter = (PAGE.parents[1] / "chapters" / "cifar10_cnn.md").read_text()
    assert "BATCH, LR, MOMENTUM = 64," in chapter and "BATCHES = [64, 16]" in text
    for layer in ('"conv2": (50, 50, 3, 32)', '"conv4": (100, 100, 3, 16)', '"fc1": (100 * 8 * 8, 512, 1, 1)'):
        assert layer in chapter
    assert text.count("nn.Conv2d(100, 100, 3, padding=1)") == 2  # the tab and the CPU script
    assert "nn.Linear(100 * 8 * 8, 512)" in text and "Dense(512" in text


@pytest.mark.parametrize("framework", AVAILABLE)
def test_each_frameworks_own_cpu_knob_was_measured_in_turns(comparison, framework):
    run = comparison["runs"][framework]
    assert list(run.cpu_tuning) == CPU_SETTINGS[framework]
    rounds, repeats = comparison["ROUNDS"], comparison["REPEATS"]
    expected = {"jax": rounds, "tensorflow": repeats}.get(framework, rounds * repeats)
    for seconds in run.cpu_tuning.values():
        assert len(seconds) == expected and min(seconds) > 0
    if framework in SETTING_VARIABLES:
        assert SETTING_VARIABLES[framework] in PAGE.read_text()
    shown = [row for row in comparison["rows_cpu"] if row[0] == framework]
    if not CPU_SETTINGS[framework]:
        assert shown == [[framework, "nothing to tune: not measured", "-", "-", "-"]]
    else:
        assert [row[1] for row in shown] == CPU_SETTINGS[framework]
        assert shown[0][3] == 1.0


def test_faster_is_said_by_the_books_iqr_rule(comparison):
    """The page's verdicts use rosetta_utils.timing's rule (tested in test_timing_and_tables)."""
    import rosetta_utils.timing as timing

    assert comparison["faster"] is timing.faster and comparison["median_and_iqr"] is timing.median_and_iqr


def test_the_effects_in_the_knob_table_are_the_measured_ratios(comparison):
    for framework, run in comparison["runs"].items():
        if not run.cpu_tuning:
            continue
        (base, first), (other, second) = run.cpu_tuning.items()
        ratio = np.median(second) / np.median(first)
        assert f"{framework}: {other} x{ratio:.2f} of {base}" in " ".join(comparison["EFFECTS"].values())
    costs = comparison["runs"][AVAILABLE[0]].shape_costs
    form, shapes = next(iter(costs.items()))
    first = shapes[f"batch {comparison['BATCHES'][0]}"]
    assert f"x{first['first'] / np.median(first['steady']):.1f}" in comparison["EFFECTS"]["new input shape"]


def test_without_a_gpu_record_the_page_claims_nothing_of_a_gpu(comparison):
    assert comparison["GPU_ROWS"] == [[NOT_MEASURED_ON_A_GPU] + ["-"] * (len(comparison["GPU_HEADERS"]) - 1)]
    for knob in ("cuDNN algorithm search", "XLA GPU autotune level"):
        assert comparison["EFFECTS"][knob].startswith(NOT_MEASURED_ON_A_GPU)
    assert "on_gpu" not in comparison, "no GPU statement from the CPU parts"


def test_a_gpu_record_is_shown_and_a_cpu_one_never(parts, tmp_path):
    def record(setting, device, first, median, equal):
        return {"task": "lesson-autotuning", "framework": "pytorch", "versions": {"torch": "2.11.0"},
                "device": device, "config": {"network": "cifar10", "batch": 64, "setting": setting},
                "metrics": {"first_step_seconds": first, "median_seconds": median, "iqr_seconds": median / 10,
                            "bitwise_equal_runs": equal}}

    found = comparisons_with_records(PAGE, parts, tmp_path,
                                     record("cudnn.benchmark off", "NVIDIA H200", 0.5, 0.004, True),
                                     record("cudnn.benchmark on", "NVIDIA H200", 2.0, 0.003, False),
                                     record("cudnn.benchmark on", "cpu", 99.0, 9.0, True))
    assert [(row[0], row[1], row[4]) for row in found["GPU_ROWS"]] == [
        ("pytorch", "NVIDIA H200", "cudnn.benchmark off"), ("pytorch", "NVIDIA H200", "cudnn.benchmark on")]
    effect = found["EFFECTS"]["cuDNN algorithm search"]
    assert "first step 0.5 s -> 2 s, steady step x0.75, bitwise-equal runs False" in effect
    assert "99" not in effect
    assert found["EFFECTS"]["XLA GPU autotune level"].startswith("no record of both")


def _cell_with(text):
    from rosetta_book.page import Page

    page = Page.read(PAGE)
    (source,) = [source for _, source in page.code_cells(page.comparison_part()) if text in source]
    return source


def test_what_the_benchmarks_search_moved_most_comes_from_its_reports(comparison, tmp_path, monkeypatch, capsys):
    """The page's own cells, on a fixture report: the table and the Summary's line; with no
    report (the comparison fixture's empty folders), both say so."""
    import json

    from test_bench import CIFAR_RUN
    from rosetta_book.bench.report import summarize
    from rosetta_proof.record_tables import bench_moves, missed_targets

    assert comparison["MOVES"] == [] and comparison["TOP_GAIN"] is None
    curated = tmp_path / "curated"
    curated.mkdir()
    report = summarize(CIFAR_RUN, "smoke")
    (curated / "bench-cifar10.json").write_text(json.dumps(report))
    monkeypatch.setenv("ROSETTA_RESULTS_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("ROSETTA_CURATED_RESULTS_DIR", str(curated))
    monkeypatch.setattr("IPython.display.display", lambda *objects, **_: None)
    namespace = dict(comparison)
    exec(compile(_cell_with("bench_moves(bench_reports)"), "moves", "exec"), namespace)  # noqa: S102
    assert namespace["MOVES"] == bench_moves([report])
    assert namespace["TOP_GAIN"][:5] == ["cifar10", "jax", "jit", "no jit", "1.50"]
    assert "a curated report, committed under results/" in capsys.readouterr().out
    exec(compile(_cell_with("missed_targets(bench_reports)"), "missed", "exec"), namespace)  # noqa: S102
    assert namespace["MISSED"] == missed_targets([report])
    assert [row[:4] for row in namespace["MISSED"]] == [["cifar10", "jax", "page / fastest <= 1.10", "1.50"]]
    exec(compile(_cell_with("The page's findings in numbers"), "summary", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "the largest gain over a page's configuration, jax on cifar10: no jit, x1.50" in out
    assert "1 target(s) missed, each with why, in its table" in out
    exec(compile(_cell_with("The page's findings in numbers"), "summary", "exec"), dict(comparison))  # noqa: S102
    assert "no report, or no setting beat a page's configuration" in capsys.readouterr().out
