"""The cuDNN and oneDNN page's claims, checked through the code it shows.

Each installed framework's part runs in its own process, as in the book
build; the comparison cells then run on what the parts left. The tests read
the knob table against the installed frameworks (PyTorch in this process,
the others each in a process of its own), check what the oneDNN log showed
(no timing thresholds: the machine may be busy), and feed each verdict and
the log reader a case they must fail or reject.
"""

import math
import os
from pathlib import Path

import pytest

from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, assert_knob_table_complete, framework_process_output, smoke_offline
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import load_comparisons, run_framework_parts
from rosetta_utils.frameworks import is_installed

PAGE = Path(__file__).parents[1] / "book" / "lessons" / "vendor_libraries.md"
SWITCHES = {
    "pytorch": {"oneDNN on the CPU": "torch.backends.mkldnn.enabled",
                "cuDNN on the GPU": "torch.backends.cudnn.enabled",
                "see what ran": "ONEDNN_VERBOSE"},
    "tensorflow": {"oneDNN on the CPU": "TF_ENABLE_ONEDNN_OPTS", "see what ran": "ONEDNN_VERBOSE",
                   "fused GRU": "use_cudnn"},
    "jax": {"oneDNN on the CPU": "XLA_FLAGS", "fused GRU": "nnx.GRUCell"},
    "mxnet": {"oneDNN on the CPU": "MXNET_MKLDNN_ENABLED", "cuDNN on the GPU": "cudnn_off"},
    "chainer": {"oneDNN on the CPU": "chainer.config.use_ideep",
                "cuDNN on the GPU": "chainer.config.use_cudnn"},
}
#: (code printing one value in a process with only that framework, knob, text the cell must hold)
DEFAULTS = {
    "tensorflow": ("import tensorflow as tf\nprint(tf.sysconfig.get_build_info()['is_cuda_build'])",
                   "cuDNN on the GPU", "is_cuda_build = {}"),
    "jax": ("import jax\nprint(jax.default_backend())", "cuDNN on the GPU", "this backend: {}"),
    "mxnet": ("import mxnet as mx\nprint(mx.runtime.Features().is_enabled('MKLDNN'))",
              "oneDNN on the CPU", "built with it: {}"),
    "chainer": ("import chainer\nprint(repr(chainer.config.use_ideep))",
                "oneDNN on the CPU", "chainer.config.use_ideep = {}"),
}


installed_output = framework_process_output


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    patch = pytest.MonkeyPatch()
    smoke_offline(patch, tmp_path_factory.mktemp("vendor-results"))
    patch.setenv("MPLBACKEND", "Agg")
    patch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0)))))
    for name in ("TF_ENABLE_ONEDNN_OPTS", "MXNET_MKLDNN_ENABLED", "XLA_FLAGS"):
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
    assert knobs["oneDNN on the CPU"].startswith(f"torch.backends.mkldnn.enabled = {torch.backends.mkldnn.enabled} ")
    assert f"available: {torch.backends.mkldnn.is_available()}" in knobs["oneDNN on the CPU"]
    assert knobs["cuDNN on the GPU"].startswith(f"torch.backends.cudnn.enabled = {torch.backends.cudnn.enabled} ")


@pytest.mark.parametrize("framework", [fw for fw in DEFAULTS if fw in AVAILABLE])
def test_other_defaults_are_the_installed_ones(comparison, framework):
    code, knob, expected = DEFAULTS[framework]
    value = installed_output(framework, code)
    assert expected.format(value) in comparison["runs"][framework].knobs[knob]


def test_tensorflow_reads_its_onednn_switch_from_the_environment(comparison):
    if "tensorflow" not in comparison["runs"]:
        pytest.skip("TensorFlow is not installed")
    assert "unset" in comparison["runs"]["tensorflow"].knobs["oneDNN on the CPU"]


#: MXNet 1.9's GRU training step with oneDNN switched off stops in its fused RNN operator
#: ("Check failed: out_data.size() == num_outputs"); the page's table shows the error.
KNOWN_FAILURES = {("mxnet", "off", "GRU step"): "out_data.size() == num_outputs"}


@pytest.mark.parametrize("framework", AVAILABLE)
def test_each_setting_was_measured_or_says_why_not(comparison, framework):
    steps = comparison["runs"][framework].library_steps
    assert steps, framework
    for setting, value in steps.items():
        if isinstance(value, str):
            assert value.startswith(("no switch", "not available")), value
            continue
        assert set(value) == set(comparison["STEP_NAMES"])
        for step, seconds in value.items():  # a step that failed is a failure, but for the one
            if (framework, setting, step) in KNOWN_FAILURES:  # the page reports as MXNet's
                assert KNOWN_FAILURES[framework, setting, step] in seconds, seconds
                continue
            assert isinstance(seconds, float) and seconds > 0, f"{framework}, {setting}, {step}: {seconds}"


def test_the_log_shows_what_reaches_onednn(comparison):
    runs = comparison["runs"]
    if "pytorch" in runs:
        assert any(p.startswith("convolution") for p in runs["pytorch"].primitives["on"])
        assert not any(p.startswith("convolution") for p in runs["pytorch"].primitives["off"])
        assert not any(p.startswith("rnn") for p in runs["pytorch"].primitives["on"])
    if "mxnet" in runs:
        on = runs["mxnet"].primitives["on"]
        assert "rnn (forward_training)" in on and "rnn (forward_inference)" in on
        assert runs["mxnet"].primitives["off"] == []
        assert comparison["fused_verdict"](on).startswith("fused: training")
    if "chainer" in runs:
        assert runs["chainer"].primitives["off"] == []


def test_the_on_off_verdict_fails_each_wrong_case(comparison):
    verdict = comparison["on_off_verdict"]
    assert verdict(1.0, 2.0).endswith("faster")
    assert "SLOWER" in verdict(1.0, 0.5)
    assert verdict(1.0, 1.1) == "same within noise"
    assert verdict(1.0, math.nan) == "NOT MEASURED"


def test_the_fused_verdict_tells_the_cases_apart(comparison):
    verdict = comparison["fused_verdict"]
    assert verdict([]) == "no oneDNN RNN primitive"
    assert verdict(["convolution (forward_training)"]) == "no oneDNN RNN primitive"
    assert verdict(["rnn (forward_training)"]) == "fused, one propagation kind only"
    assert verdict(["rnn (forward_inference)", "rnn (forward_training)"]).startswith("fused: training")


def test_the_log_reader_reads_both_formats_and_rejects_a_failed_script(comparison):
    run_script = comparison["run_script"]
    code = ("print('onednn_verbose,exec,cpu,convolution,jit:avx2,forward_training,src_f32,,alg:x,mb1,0.1')\n"
            "print('onednn_verbose,v1,primitive,exec,cpu,rnn,ref,backward,src_f32,,alg:y,l1,0.2')\n"
            "print('{\"CIFAR-10 step\": 0.5}')")
    steps, found = run_script(code)
    assert steps == {"CIFAR-10 step": 0.5}
    assert found == ["convolution (forward_training)", "rnn (backward)"]
    with pytest.raises(RuntimeError, match="the script failed"):
        run_script("raise SystemExit(3)")


def test_cudnn_is_not_measured_and_the_page_says_whether_a_gpu_is_there(comparison):
    from rosetta_utils.profile import cuda_gpu_visible

    assert comparison["gpu_here"] == cuda_gpu_visible()
