"""The memory-layouts lesson, checked through the code it shows.

Each framework's part runs in its own process, as in the book build (smoke
profile, offline); the page's comparison cells then build the knob table,
the transpose counts and their check, the timings and the weight-layout
verdicts from what the parts left. Each check the page prints is also fed a
wrong case, which it must fail, and each default in the knob table is read
again here from the installed framework.
"""

import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, parts_as_built
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import load_comparisons
from rosetta_utils.frameworks import is_installed

PAGE = Path(__file__).parents[1] / "book" / "lessons" / "memory_layouts.md"
#: The switches the issue names, one row each.
KNOBS = ["conv layout", "RNN layout", "conv kernel layout", "dense weight layout"]


@pytest.fixture(scope="module")
def comparison():
    """The page's comparison cells, run on what each framework's part left."""
    for parts in parts_as_built(PAGE, AVAILABLE):  # inside the build's conditions
        yield load_comparisons(PAGE, parts)


def test_the_knob_table_has_a_row_per_switch_and_a_cell_per_framework(comparison):
    assert comparison["KNOBS"] == KNOBS
    assert list(comparison["runs"]) == AVAILABLE
    for framework, run in comparison["runs"].items():
        for knob in KNOBS:
            assert isinstance(run.knobs[knob], str) and run.knobs[knob].strip(), (framework, knob)
    table = comparison["show_table"](
        ["knob", *comparison["runs"]],
        [[knob, *(run.knobs[knob] for run in comparison["runs"].values())] for knob in KNOBS])
    lines = table.data.splitlines()
    assert len(lines) == 2 + len(KNOBS) and all(line.count("|") - line.count("\\|") == len(AVAILABLE) + 2
                                                for line in lines)


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
def test_every_workload_is_timed_or_says_why_not(comparison, framework):
    run = comparison["runs"][framework]
    offered = set(run.layout_seconds)
    assert offered == set(run.transposes), "a timed workload without a transpose count"
    assert all(seconds > 0 for seconds in run.layout_seconds.values())
    for key in comparison["KEYS"]:
        if key not in offered and not key.endswith("sequences"):
            assert run.layout_notes.get(key), f"{framework}: {key} has neither a time nor a reason"
    assert "CIFAR step, NCHW" in offered or "CIFAR step, NHWC" in offered


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
        assert comparison["transpose_checks"]["jax"]["GRU step"].startswith("DIFFERS")
    for framework, checks in comparison["transpose_checks"].items():
        expected = comparison["default_has_fewest"](comparison["runs"][framework].transposes,
                                                    comparison["runs"][framework].knobs)
        assert checks == expected
        if framework != "jax":
            assert set(checks.values()) == {"agrees"}, (framework, checks)


def test_the_transpose_check_fails_when_the_default_layout_costs_more(comparison):
    check = comparison["default_has_fewest"]
    knobs = {"conv layout": "NCHW (x)", "RNN layout": "TNC (x)"}
    counts = {"CIFAR step, NCHW": 0, "CIFAR step, NHWC": 2, "bottleneck, NCHW": 0,
              "GRU step, TNC": 0, "GRU step, NTC": 2}
    assert set(check(counts, knobs).values()) == {"agrees"}
    wrong = dict(counts, **{"CIFAR step, NCHW": 3})
    assert check(wrong, knobs)["CIFAR step"].startswith("DIFFERS")
    missing = {key: value for key, value in counts.items() if key != "GRU step, TNC"}
    assert check(missing, knobs)["GRU step"].startswith("DIFFERS")


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
