"""The benchmark's probe of a network's convolutions alone (rosetta_book.bench.convolutions):
it finds every convolution of a model with its shapes and counts their arithmetic, and the
report turns its timing into the reason a page stays below its share of the peak."""

import numpy as np
import pytest

from rosetta_book.bench import resnet50_flops, summarize
from rosetta_book.bench.convolutions import PROBED, conv_call_flops, convolutions_alone
from rosetta_proof.record_tables import why_below_peak

from frameworks_under_test import IN_PROCESS, IN_PROCESS_PARAMS
from test_bench import measured, raw_run

#: a batch of 2 images, 3 channels, 8 x 8, as a page's extractor takes them (NCHW numpy)
IMAGES = np.random.default_rng(0).standard_normal((2, 3, 8, 8), dtype=np.float32)
#: the tiny model's convolutions by hand (2 images): 3->4, 3x3, same, 8x8 out; 4->6, 1x1,
#: stride 2, 4x4 out; 6->6, 3x3 in 3 groups, valid, 2x2 out
HAND_COUNT = 2 * (2 * 8 * 8 * 4 * 3 * 9 + 2 * 4 * 4 * 6 * 4 * 1 + 2 * 2 * 2 * 6 * 2 * 9)


def tiny_model(framework, channels_last=False):
    """The three convolutions of HAND_COUNT in ``framework``: ``(model, images)``, the images
    as the probe takes them (the page's batch: NCHW, except Keras's NHWC)."""
    if framework == "pytorch":
        import torch

        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                                    torch.nn.Conv2d(4, 6, 1, stride=2), torch.nn.Conv2d(6, 6, 3, groups=3))
        model = model.to(memory_format=torch.channels_last) if channels_last else model
        return model, IMAGES
    if framework == "mxnet":
        gluon = _gluon()
        model = gluon.nn.HybridSequential()
        model.add(gluon.nn.Conv2D(4, 3, padding=1, activation="relu"), gluon.nn.Conv2D(6, 1, strides=2),
                  gluon.nn.Conv2D(6, 3, groups=3, use_bias=False))
        model.initialize()
        model.hybridize(static_alloc=True, static_shape=True)
        model(_mx_array(IMAGES))
        return model, IMAGES
    if framework == "jax":
        from flax import nnx

        rngs = nnx.Rngs(0)
        model = nnx.Sequential(nnx.Conv(3, 4, (3, 3), padding="SAME", rngs=rngs), nnx.relu,
                               nnx.Conv(4, 6, (1, 1), strides=2, rngs=rngs),
                               nnx.Conv(6, 6, (3, 3), padding="VALID", feature_group_count=3, rngs=rngs))
        return model, IMAGES
    import keras

    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.Conv2D(6, 1, strides=2)(x)
    return keras.Model(inputs, keras.layers.Conv2D(6, 3, groups=3)(x)), IMAGES.transpose(0, 2, 3, 1)


def _gluon():
    """MXNet's Gluon, imported as the pages import it (with their numpy fix line)."""
    from rosetta_utils.backends.mxnet import _mxnet

    return _mxnet().gluon


def _mx_array(images):
    from rosetta_utils.backends.mxnet import _mxnet

    return _mxnet().nd.array(images)


def test_a_convolutions_arithmetic_counts_each_group_once():
    assert conv_call_flops((2, 4, 8, 8), 3, 1, (3, 3)) == 2 * 2 * 4 * 8 * 8 * 3 * 9
    assert conv_call_flops((1, 6, 2, 2), 6, 3, (3, 3)) == 2 * 6 * 2 * 2 * 2 * 9
    with pytest.raises(ValueError, match="5 input channels do not split into 2 groups"):
        conv_call_flops((1, 4, 2, 2), 5, 2, (1, 1))


PROBED_HERE = [param for param in IN_PROCESS_PARAMS if getattr(param, "values", (param,))[0] in PROBED]


@pytest.mark.parametrize("framework", PROBED_HERE)
def test_the_probe_finds_every_convolution_with_its_shapes(framework):
    for channels_last in ((False, True) if framework == "pytorch" else (False,)):
        model, images = tiny_model(framework, channels_last)
        call, flops, count = convolutions_alone(framework, model, images)
        assert count == 3 and flops == HAND_COUNT
        last = call()
        last = last.asnumpy() if framework == "mxnet" else np.asarray(
            last.detach() if framework == "pytorch" else last)
        assert last.shape == ((2, 6, 2, 2) if framework in ("pytorch", "mxnet") else (2, 2, 2, 6))


@pytest.mark.parametrize("framework", PROBED_HERE)
def test_a_model_without_convolutions_is_refused(framework):
    if framework == "pytorch":
        import torch

        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))
    elif framework == "mxnet":
        gluon = _gluon()
        model = gluon.nn.HybridSequential()
        model.add(gluon.nn.Flatten(), gluon.nn.Dense(2))
        model.initialize()
        model(_mx_array(IMAGES))
    elif framework == "jax":
        from flax import nnx

        model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))  # on the last axis of NHWC
    else:
        import keras

        inputs = keras.Input((8, 8, 3))
        model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(inputs)))
    with pytest.raises(ValueError, match="the model has no"):
        convolutions_alone(framework, model, IMAGES)


def test_a_framework_it_cannot_take_apart_says_so():
    with pytest.raises(NotImplementedError, match="chainer: the benchmark cannot take a model apart"):
        convolutions_alone("chainer", object(), IMAGES)


def _report(conv_seconds, not_measured=None):
    """ResNet-50 with PyTorch's page at 2 s a batch of 32; its convolutions alone at
    ``conv_seconds`` (97% of the model's arithmetic); the peak 200 GFLOP/s."""
    flops = resnet50_flops("v1")
    run = raw_run("resnet50", {
        "pytorch": {"NHWC, torch.compile": measured([2.0] * 3, items=32, defaults=True)},
        "mxnet": {"hybridized, oneDNN fusion": measured([1.4] * 3, items=32, defaults=True)},
    }, {"torch oneDNN linear": [0.01] * 3}, flops)
    run["steps"] = 1
    run["frameworks"]["pytorch"]["convolutions"] = (
        {"not_measured": not_measured} if not_measured else
        {"flops": round(0.97 * flops * 32), "count": 53, "items": 32, "seconds": [] if conv_seconds is None else [conv_seconds] * 3})
    return summarize(run, "smoke")


def test_convolutions_below_the_target_are_named_as_the_reason():
    report = _report(conv_seconds=1.9)
    convolutions = report["frameworks"]["pytorch"]["convolutions_alone"]
    assert convolutions["fraction_of_peak"] == pytest.approx(0.97 * resnet50_flops("v1") * 32 / 1.9 / 2e11)
    assert convolutions["share_of_page_time"] == pytest.approx(0.95)
    assert convolutions["share_of_model_flops"] == pytest.approx(0.97, abs=1e-6)
    target = report["peak_targets"]["pytorch"]
    assert not target["meets"] and convolutions["fraction_of_peak"] < target["target"]
    why = why_below_peak(report, "pytorch", target)
    assert why.startswith("its 53 convolutions, timed alone on the page's batch (one call each), reach ")
    assert "below the target: its convolution kernels hold it there" in why
    assert "the layers between them take the other 5% of the page's time" in why
    # the convolutions alone slower than the page's whole network: the page runs them faster
    slow = _report(conv_seconds=2.5)
    assert "yet alone they took 125% of the page's time: the page runs them faster together, so one call " \
        "each does not show what holds it at" in why_below_peak(slow, "pytorch", slow["peak_targets"]["pytorch"])


def test_convolutions_above_the_target_put_the_reason_in_the_layers_between():
    report = _report(conv_seconds=1.2)
    target = report["peak_targets"]["pytorch"]
    convolutions = report["frameworks"]["pytorch"]["convolutions_alone"]
    assert convolutions["fraction_of_peak"] > target["target"] > target["share"]
    why = why_below_peak(report, "pytorch", target)
    assert "above the target, but the layers between them take the other 40% of the page's time" in why
    assert f"which holds the page at {target['share']:.1%}" in why
    # without the probe (a framework it cannot take apart), the matrix product's reason stands
    unprobed = _report(conv_seconds=0, not_measured="cannot")
    assert unprobed["frameworks"]["pytorch"]["convolutions_alone"] == {"not_measured": "cannot"}
    assert "so the product does not stop it" in why_below_peak(unprobed, "pytorch", target)


def test_a_probe_built_but_never_timed_is_an_error():
    with pytest.raises(ValueError, match="built but never timed"):
        _report(conv_seconds=None)


@pytest.mark.skipif("pytorch" not in IN_PROCESS, reason="the tiny feature task's model is PyTorch's")
def test_the_page_process_times_its_convolutions_in_the_same_rounds():
    from rosetta_book.bench.run import run_task
    from rosetta_book.bench.tiny import TINY_FEATURE_FLOPS

    raw = run_task("rosetta_book.bench.tiny:TINY_FEATURES", ("pytorch",), rounds=2, warmup=1, steps=1,
                   pause=0.0, matmul_size=32, log=lambda line: None)
    convolutions = raw["frameworks"]["pytorch"]["convolutions"]
    assert convolutions["count"] == 2 and convolutions["flops"] == TINY_FEATURE_FLOPS
    assert convolutions["items"] == 2 and len(convolutions["seconds"]) == 2
    report = summarize(raw, "smoke")
    assert report["frameworks"]["pytorch"]["convolutions_alone"]["fraction_of_peak"] > 0
