"""The memory-layouts lesson, checked through the code it shows.

Each framework's part runs in its own process, as in the book build (smoke
profile, offline); the page's comparison cells then build the knob table
with each switch's measured effect, the transpose counts, the layouts the
convolutions ran in, the timings (medians and IQRs, never a verdict) and the
weight-layout verdicts from what the parts left. Each check the page makes
is also fed a wrong case, which it must fail (a failed weight check stops
the page), each default in the knob table is read again here from the
installed framework, and the GPU section is shown with and without a
device-check record.
"""

import copy
import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS_PARAMS
from page_checks import (
    comparisons_with_records,
    assert_a_failed_proof_stops_the_page,
    assert_knob_table_complete,
    smoke_offline,
)
from rosetta_book.chapter import run_framework_parts
from rosetta_proof.record_tables import NOT_MEASURED_ON_A_GPU

PAGE = Path(__file__).parents[1] / "book" / "lessons" / "memory_layouts.md"
#: The switches the issue names, one row each.
KNOBS = ["conv layout", "RNN layout", "conv kernel layout", "dense weight layout"]
#: The switch each framework's cells must name, per knob.
SWITCHES = {
    "pytorch": {"conv layout": "torch.channels_last", "RNN layout": "batch_first"},
    "tensorflow": {"conv layout": "data_format='channels_first'", "RNN layout": "time_major"},
    "jax": {"conv layout": "nnx.Conv has no layout argument", "RNN layout": "time_major"},
    "mxnet": {"conv layout": "layout='NHWC'", "RNN layout": "layout='NTC'"},
    "chainer": {"conv layout": "no layout argument"},
}


@pytest.fixture(scope="module")
def parts():
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        yield run_framework_parts(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(parts, tmp_path_factory):
    """The page's comparison cells, run on what each framework's part left."""
    return comparisons_with_records(PAGE, parts, tmp_path_factory.mktemp("layouts-results"))


def test_the_knob_table_has_a_row_per_switch_and_a_cell_per_framework(comparison):
    assert comparison["KNOBS"] == KNOBS
    assert list(comparison["runs"]) == AVAILABLE
    # the page's last column is each switch's measured effect, with a link to where
    assert_knob_table_complete({**comparison, "LINKS": comparison["EFFECTS"]}, SWITCHES, AVAILABLE)


def installed_defaults(framework):
    """Each knob's default, read here from the installed framework, independently of the page."""
    if framework == "pytorch":
        import torch

        batch_first = inspect.signature(torch.nn.RNNBase.__init__).parameters["batch_first"].default
        return {"conv layout": "NCHW" if torch.empty(2, 3, 4, 4).is_contiguous() else "NHWC",
                "RNN layout": "NTC" if batch_first else "TNC",
                "conv kernel layout": tuple(torch.nn.Conv2d(3, 4, (1, 2)).weight.shape),
                "dense weight layout": tuple(torch.nn.Linear(3, 4).weight.shape)}
    if framework == "tensorflow":
        import keras

        conv, dense = keras.layers.Conv2D(4, (1, 2)), keras.layers.Dense(4)
        conv.build((None, 8, 8, 3))
        dense.build((None, 3))
        assert "time_major" not in inspect.signature(keras.layers.GRU).parameters
        return {"conv layout": {"channels_last": "NHWC", "channels_first": "NCHW"}[
                    keras.config.image_data_format()],
                "RNN layout": "NTC", "conv kernel layout": tuple(conv.kernel.shape),
                "dense weight layout": tuple(dense.kernel.shape)}
    if framework == "jax":
        from flax import nnx

        assert not {"data_format", "layout"} & set(inspect.signature(nnx.Conv.__init__).parameters)
        time_major = inspect.signature(nnx.RNN.__init__).parameters["time_major"].default
        return {"conv layout": "NHWC", "RNN layout": "TNC" if time_major else "NTC",
                "conv kernel layout": nnx.Conv(3, 4, (1, 2), rngs=nnx.Rngs(0)).kernel[...].shape,
                "dense weight layout": nnx.Linear(3, 4, rngs=nnx.Rngs(0)).kernel[...].shape}
    if framework == "mxnet":
        np.bool = bool  # MXNet 1.9 on numpy 1.26, as on the page
        from mxnet.gluon import nn, rnn

        return {"conv layout": inspect.signature(nn.Conv2D).parameters["layout"].default,
                "RNN layout": inspect.signature(rnn.GRU).parameters["layout"].default,
                "conv kernel layout": nn.Conv2D(4, (1, 2), in_channels=3).weight.shape,
                "dense weight layout": nn.Dense(4, in_units=3).weight.shape}
    if framework == "chainer":
        warnings.filterwarnings("ignore", "pkg_resources is deprecated")
        import chainer.links as L

        assert "layout" not in inspect.signature(L.Convolution2D.__init__).parameters
        return {"conv layout": "NCHW", "RNN layout": "sequences",
                "conv kernel layout": L.Convolution2D(3, 4, (1, 2)).W.shape,
                "dense weight layout": L.Linear(3, 4).W.shape}
    raise AssertionError(framework)


SHAPE_NAMES = {(4, 3, 1, 2): "OIHW", (1, 2, 3, 4): "HWIO", (4, 3): "(out, in)", (3, 4): "(in, out)"}


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_each_default_in_the_table_is_the_installed_frameworks(comparison, framework):
    knobs = comparison["runs"][framework].knobs
    expected = installed_defaults(framework)
    for knob in ("conv layout", "RNN layout"):
        assert comparison["default_layout"](knobs[knob]) == expected[knob], (knob, knobs[knob])
    for knob in ("conv kernel layout", "dense weight layout"):
        assert knobs[knob] == SHAPE_NAMES[tuple(expected[knob])], (knob, knobs[knob])


def test_the_layout_parser_reads_each_kind_of_cell(comparison):
    parse = comparison["default_layout"]
    assert parse("NCHW (NHWC: memory_format=torch.channels_last)") == "NCHW"
    assert parse("NHWC only (nnx.Conv has no layout argument)") == "NHWC"
    assert parse("list of (T, C) sequences (NStepGRU has no layout argument)") == "sequences"


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_workload_is_timed_on_the_cpu_or_says_why_not(comparison, framework):
    run = comparison["runs"][framework]
    assert "cpu" in run.environment["device"].lower() or "numpy" in run.environment["device"], run.environment
    offered = set(run.layout_seconds)
    assert offered == set(run.transposes), "a timed workload without a transpose count"
    for seconds in run.layout_seconds.values():
        assert len(seconds) == comparison["REPEATS"] and min(seconds) > 0
    for key in comparison["KEYS"]:
        if key not in offered and not key.endswith("sequences"):
            assert run.layout_notes.get(key), f"{framework}: {key} has neither a time nor a reason"
    assert "CIFAR step, NCHW" in offered or "CIFAR step, NHWC" in offered


def test_the_found_table_is_the_medians_of_the_timings(comparison):
    for row in comparison["found_rows"]:
        framework, workload, layouts = row[:3]
        default, other = layouts.split(" / ")
        seconds = comparison["runs"][framework].layout_seconds
        ratio = np.median(seconds[f"{workload}, {other}"]) / np.median(seconds[f"{workload}, {default}"])
        assert row[4] == pytest.approx(ratio)
        assert row[5] in (default, other, "neither")
    assert comparison["found_rows"], "no framework offered two layouts of any workload"


def test_faster_is_said_by_the_books_iqr_rule(comparison):
    """The page's verdicts use rosetta_utils.timing's rule (tested in test_timing_and_tables)."""
    import rosetta_utils.timing as timing

    assert comparison["faster"] is timing.faster and comparison["median_and_iqr"] is timing.median_and_iqr


def test_the_transposes_that_the_graphs_show(comparison):
    runs = comparison["runs"]
    if "jax" in runs:  # NCHW data in front of Flax's NHWC-only convolutions
        assert runs["jax"].transposes["CIFAR step, NCHW"] >= 1
        assert runs["jax"].transposes["bottleneck, NCHW"] >= 2
        assert runs["jax"].transposes["CIFAR step, NHWC"] == 0
    if "mxnet" in runs:  # the NTC GRU is the TNC one between two SwapAxis
        assert runs["mxnet"].transposes["GRU step, NTC"] >= 2
        assert runs["mxnet"].transposes["GRU step, TNC"] == 0
    if "jax" in runs:  # nnx.RNN scans time-major: its batch-first default transposes
        assert runs["jax"].transposes["GRU step, NTC"] > runs["jax"].transposes["GRU step, TNC"]
        assert comparison["fewest"]["jax"]["GRU step"].startswith("no (")
    for framework, answers in comparison["fewest"].items():
        run = comparison["runs"][framework]
        assert answers == comparison["default_has_fewest"](run.transposes, run.knobs)
        if framework != "jax":
            assert set(answers.values()) == {"yes"}, (framework, answers)


def test_the_fewest_transposes_observation_says_no_when_the_default_costs_more(comparison):
    check = comparison["default_has_fewest"]
    knobs = {"conv layout": "NCHW (x)", "RNN layout": "TNC (x)"}
    counts = {"CIFAR step, NCHW": 0, "CIFAR step, NHWC": 2, "bottleneck, NCHW": 0,
              "GRU step, TNC": 0, "GRU step, NTC": 2}
    assert set(check(counts, knobs).values()) == {"yes"}
    wrong = dict(counts, **{"CIFAR step, NCHW": 3})
    assert check(wrong, knobs)["CIFAR step"] == "no (NCHW 3, NHWC 2)"
    missing = {key: value for key, value in counts.items() if key != "GRU step, TNC"}
    assert check(missing, knobs)["GRU step"].startswith("no count for")


def test_the_layouts_the_convolutions_ran_in_are_read_from_each_framework(comparison):
    runs = comparison["runs"]
    conv_keys = [key for key in comparison["KEYS"] if not key.startswith("GRU")]
    for framework, run in runs.items():
        assert set(run.chosen_layouts) == {key for key in conv_keys if key in run.transposes}
    if "pytorch" in runs:  # channels_last lives in the strides of the output
        assert runs["pytorch"].chosen_layouts["CIFAR step, NHWC"] == "NHWC (channels_last)"
        assert runs["pytorch"].chosen_layouts["CIFAR step, NCHW"] == "NCHW"
    if "tensorflow" in runs:
        for key, layout in runs["tensorflow"].chosen_layouts.items():
            assert layout.startswith(key.split(", ")[1]), (key, layout)
    if "jax" in runs:  # XLA's own choice, read from the compiled program
        for layout in runs["jax"].chosen_layouts.values():
            assert re.fullmatch(r"[bf01]{4}_[01io]{4}->[bf01]{4} \(XLA dim_labels\)", layout), layout


@pytest.mark.parametrize("framework", AVAILABLE)
def test_a_kernel_moved_between_layouts_computes_the_same_and_flatten_order_matters(comparison, framework):
    run = comparison["runs"][framework]
    found = comparison["probe_differences"](run.layout_probe)
    tolerance = comparison["TOLERANCE"]
    assert found["conv"] <= tolerance and found["dense permuted"] <= tolerance, found
    if run.knobs["conv kernel layout"] == "HWIO":  # Keras and Flax flatten NHWC
        assert found["dense as given"] > 100 * tolerance, found
    else:
        assert found["dense as given"] <= tolerance, found


def test_the_weight_checks_fail_on_a_wrong_kernel_and_an_unpermuted_weight(comparison):
    verdict, tolerance = comparison["verdict"], comparison["TOLERANCE"]
    probe = dict(comparison["runs"][AVAILABLE[0]].layout_probe)
    # the classic mistake: rows and columns of the window swapped (OIWH read as OIHW)
    probe["conv"] = comparison["reference_conv"](
        comparison["probe_images"], comparison["probe_kernel"].transpose(0, 1, 3, 2),
        comparison["probe_bias"])
    assert verdict(comparison["probe_differences"](probe)["conv"], tolerance).startswith("DIFFERS")
    features = comparison["reference_features"]
    nhwc_flat = features.transpose(0, 2, 3, 1).reshape(len(features), -1)
    probe["dense permuted"] = nhwc_flat @ comparison["probe_weight"].T  # weight left as given
    assert verdict(comparison["probe_differences"](probe)["dense permuted"], tolerance).startswith("DIFFERS")


def test_an_unpermuted_dense_weight_stops_the_page(parts):
    framework = AVAILABLE[-1]
    probe = copy.deepcopy(parts[framework]["layout_probe"])
    probe["dense permuted"] = probe["dense permuted"][:, ::-1]
    assert_a_failed_proof_stops_the_page(PAGE, parts, framework, {"layout_probe": probe}, r"DIFFERS \(")


def test_without_a_gpu_record_the_gpu_section_says_so(comparison):
    assert comparison["GPU_ROWS"] == [[NOT_MEASURED_ON_A_GPU] + ["-"] * (len(comparison["GPU_HEADERS"]) - 1)]
    assert NOT_MEASURED_ON_A_GPU in comparison["EFFECTS"]["conv layout"]
    assert comparison["cifar"] == []  # the chapter's GPU layout: an unmeasured default


def test_a_gpu_record_is_shown_and_a_cpu_one_never(parts, tmp_path):
    def record(setting, device, seconds, dtype="tf32"):
        return {"task": "lesson-layouts", "framework": "pytorch", "versions": {"torch": "2.11.0"},
                "device": device, "config": {"network": "cifar10", "batch": 64, "setting": setting,
                                             "dtype": dtype},
                "metrics": {"median_seconds": seconds, "iqr_seconds": seconds / 10}}

    found = comparisons_with_records(PAGE, parts, tmp_path, record("NCHW", "NVIDIA H200", 0.004),
                                     record("channels_last", "NVIDIA H200", 0.002),
                                     record("channels_last", "cpu", 9.0))
    assert [(row[1], row[4]) for row in found["GPU_ROWS"]] == [("NVIDIA H200", "NCHW"),
                                                              ("NVIDIA H200", "channels_last")]
    assert "cifar10 tf32 on NVIDIA H200: x0.50" in found["EFFECTS"]["conv layout"]
    assert len(found["cifar"]) == 2
