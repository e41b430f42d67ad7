"""The autotuning page's claims, checked through the code it shows.

Each installed framework's part runs in its own process, as in the book
build; the comparison cells then run on what the parts left. The tests read
the knob table against the installed frameworks (PyTorch in this process,
the others each in a process of its own), check that every measurement the
page shows is there (no timing thresholds: the machine may be busy), and
feed each verdict the page prints a case it must fail.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, assert_knob_table_complete, framework_process_output, smoke_offline
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import load_comparisons, run_framework_parts
from rosetta_utils.frameworks import is_installed

PAGE = Path(__file__).parents[1] / "book" / "lessons" / "autotuning.md"
#: The switch each framework's cells must name, per knob (the issue's list).
SWITCHES = {
    "pytorch": {"cuDNN algorithm search": "torch.backends.cudnn.benchmark",
                "deterministic algorithms": "torch.backends.cudnn.deterministic",
                "new input shape": "torch.compile",
                "oneDNN primitive cache (CPU)": "ONEDNN_PRIMITIVE_CACHE_CAPACITY"},
    "tensorflow": {"cuDNN algorithm search": "TF_CUDNN_USE_AUTOTUNE",
                   "XLA GPU autotune level": "--xla_gpu_autotune_level",
                   "new input shape": "tf.function",
                   "oneDNN primitive cache (CPU)": "ONEDNN_PRIMITIVE_CACHE_CAPACITY",
                   "input pipeline autotune": "tf.data.AUTOTUNE"},
    "jax": {"XLA GPU autotune level": "--xla_gpu_autotune_level",
            "deterministic algorithms": "--xla_gpu_deterministic_ops",
            "new input shape": "jax.jit"},
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
            "new input shape", "jax_compilation_cache_dir = {}"),
    "mxnet": ("import mxnet as mx\nprint(mx.util.getenv('MXNET_CUDNN_AUTOTUNE_DEFAULT') or 'unset')",
              "cuDNN algorithm search", "MXNET_CUDNN_AUTOTUNE_DEFAULT = {}"),
    "chainer": ("import chainer\nprint(chainer.config.autotune, chainer.config.cudnn_deterministic)",
                None, None),
}


installed_output = framework_process_output


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    patch = pytest.MonkeyPatch()
    smoke_offline(patch, tmp_path_factory.mktemp("autotuning-results"))
    patch.setenv("MPLBACKEND", "Agg")
    patch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0)))))
    for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "XLA_FLAGS", "TF_CUDNN_USE_AUTOTUNE"):
        patch.delenv(name, raising=False)
    try:
        yield load_comparisons(PAGE, run_framework_parts(PAGE, AVAILABLE))
    finally:
        patch.undo()


def test_the_knob_table_has_every_switch_and_a_cell_for_every_framework(comparison):
    assert_knob_table_complete(comparison, SWITCHES, AVAILABLE)


@pytest.mark.skipif(not is_installed("pytorch"), reason="PyTorch is not installed")
def test_pytorch_defaults_are_the_installed_ones(comparison):
    import torch

    knobs = comparison["runs"]["pytorch"].knobs
    assert knobs["cuDNN algorithm search"] == f"torch.backends.cudnn.benchmark = {torch.backends.cudnn.benchmark}"
    assert knobs["deterministic algorithms"].startswith(
        f"torch.backends.cudnn.deterministic = {torch.backends.cudnn.deterministic};")
    assert knobs["deterministic algorithms"].endswith(f"= {torch.are_deterministic_algorithms_enabled()}")
    assert "unset" in knobs["oneDNN primitive cache (CPU)"]


@pytest.mark.parametrize("framework", [fw for fw in DEFAULTS if fw in AVAILABLE])
def test_other_defaults_are_the_installed_ones(comparison, framework):
    code, knob, expected = DEFAULTS[framework]
    value = installed_output(framework, code)
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
def test_every_new_shape_was_timed(comparison, framework):
    run = comparison["runs"][framework]
    for costs in run.shape_costs.values():
        assert list(costs) == [f"batch {batch}" for batch in comparison["SHAPES"]]
        for cost in costs.values():
            assert cost["first"] > 0 and cost["steady"] > 0
    assert isinstance(run.repeatable, bool)


def test_tensorflow_traced_once_per_shape(comparison):
    if "tensorflow" not in comparison["runs"]:
        pytest.skip("TensorFlow is not installed")
    assert list(comparison["runs"]["tensorflow"].shape_costs) == ["tf.function"]


def test_the_cpu_measurements_are_there_or_said_missing(comparison):
    runs = comparison["runs"]
    expected = {"pytorch": {"oneDNN primitive cache: default", "oneDNN primitive cache: off"},
                "mxnet": {"oneDNN primitive cache: default", "oneDNN primitive cache: off"},
                "tensorflow": {"tf.data AUTOTUNE: on", "tf.data AUTOTUNE: off"},
                "jax": set(), "chainer": set()}
    for framework, run in runs.items():
        assert set(run.cpu_tuning) == expected[framework]
        assert all(value > 0 for value in run.cpu_tuning.values())
    shown = [row[0] for row in comparison["rows"] if row[1] == "not measured here"]
    assert shown == [fw for fw in runs if not expected[fw]]


def test_the_new_shape_verdict_fails_a_costly_first_call(comparison):
    verdict = comparison["new_shape_verdict"]
    assert verdict({"first": 1.0, "steady": 0.01}).startswith("COSTLY")
    assert verdict({"first": 0.011, "steady": 0.01}) == "no extra cost"
    assert verdict({"first": float("nan"), "steady": 0.01}) == "NOT MEASURED"


def test_the_repeat_verdict_fails_differing_calls(comparison):
    assert comparison["repeat_verdict"](False).startswith("DIFFERS")
    assert comparison["repeat_verdict"](True) == "bit-identical"


def test_gpu_autotuning_is_not_measured_on_a_cpu(comparison):
    on_gpu = [fw for fw, run in comparison["runs"].items()
              if run.environment["device"].lower().startswith(("cuda", "gpu"))]
    assert comparison["on_gpu"] == on_gpu
    assert np.isfinite(comparison["NEW_SHAPE_RATIO"])
