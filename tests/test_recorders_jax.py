"""The Flax NNX recorder (rosetta_utils.recorders.jax) on small models of its own."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")

from rosetta_utils.recorders import (
    RecordingError,
    attention_fan_in,
    conv_fan_in,
    dense_fan_in,
    recurrent_fan_in,
)
from rosetta_utils.recorders.jax import record

RNG = np.random.default_rng(7)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


class ConvNet(nnx.Module):
    """conv -> bn -> relu -> max pool -> depthwise conv -> avg pool -> dropout -> flatten -> fc."""

    def __init__(self, rngs):
        self.conv = nnx.Conv(3, 8, (3, 3), rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.blocks = nnx.Sequential(nnx.Conv(8, 8, (3, 3), feature_group_count=8, use_bias=False, rngs=rngs),
                                     nnx.relu)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.fc = nnx.Linear(8 * 2 * 2, 5, rngs=rngs)

    def __call__(self, x):
        x = nnx.max_pool(nnx.relu(self.bn(self.conv(x))), (2, 2), (2, 2))
        x = nnx.avg_pool(self.blocks(x), (2, 2), (2, 2))
        x = self.drop(x)
        return self.fc(x.reshape(x.shape[0], -1))


class LSTMClassifier(nnx.Module):
    def __init__(self, rngs, return_carry=False):
        self.embed = nnx.Embed(40, 16, rngs=rngs)
        self.lstm = nnx.RNN(nnx.LSTMCell(16, 24, rngs=rngs), return_carry=return_carry)
        self.fc = nnx.Linear(24, 6, rngs=rngs)

    def __call__(self, ids):
        out = self.lstm(self.embed(ids))
        return self.fc(out[1] if isinstance(out, tuple) else out)


class BiGRU(nnx.Module):
    def __init__(self, rngs):
        self.gru = nnx.Bidirectional(nnx.RNN(nnx.GRUCell(8, 12, rngs=rngs)),
                                     nnx.RNN(nnx.GRUCell(8, 12, rngs=rngs)), rngs=rngs)
        self.fc = nnx.Linear(24, 3, rngs=rngs)

    def __call__(self, x):
        return self.fc(self.gru(x))


class Block(nnx.Module):
    """A transformer block: attention with a padding mask, two residual layer norms."""

    def __init__(self, rngs):
        self.attn = nnx.MultiHeadAttention(2, 16, dropout_rate=0.1, decode=False, rngs=rngs)
        self.norm1 = nnx.LayerNorm(16, epsilon=1e-5, rngs=rngs)
        self.ff1 = nnx.Linear(16, 32, rngs=rngs)
        self.ff2 = nnx.Linear(32, 16, rngs=rngs)
        self.norm2 = nnx.LayerNorm(16, epsilon=1e-5, rngs=rngs)

    def __call__(self, x, pad):
        mask = nnx.make_attention_mask(~pad, ~pad)
        x = self.norm1(x + self.attn(x, mask=mask))
        return self.norm2(x + self.ff2(nnx.relu(self.ff1(x))))


@pytest.fixture(scope="module")
def image():
    return normal(2, 8, 8, 3)


@pytest.fixture(scope="module")
def conv_net():
    model = ConvNet(nnx.Rngs(0))
    model.bn.mean[...] = normal(8)
    model.bn.var[...] = np.abs(normal(8)) + 0.5
    return model


def test_conv_net_names_kinds_fan_ins(conv_net, image):
    recording = record(conv_net, image)
    assert list(recording.outputs) == ["input", "conv", "bn", "blocks.layers.0", "drop", "fc"]
    assert recording.kinds == {"input": "input", "conv": "conv", "bn": "norm", "blocks.layers.0": "conv",
                               "drop": "dropout", "fc": "dense"}
    assert recording.fan_ins["conv"] == conv_fan_in(3, 1, (3, 3), True) == 28
    assert recording.fan_ins["blocks.layers.0"] == conv_fan_in(8, 8, (3, 3), False) == 9
    assert recording.fan_ins["fc"] == dense_fan_in(32, True)
    assert recording.fan_ins["bn"] >= 4  # inference: per-channel scale, no sums


def test_conv_net_channels_first(conv_net, image):
    recording = record(conv_net, image)
    native = record(conv_net, image, layout="native")
    conv = np.asarray(conv_net.conv(image))
    assert native["conv"].shape == (2, 8, 8, 8) and recording["conv"].shape == (2, 8, 8, 8)
    np.testing.assert_array_equal(native["conv"], conv)
    np.testing.assert_array_equal(recording["conv"], np.moveaxis(conv, -1, 1))
    np.testing.assert_array_equal(recording["input"], np.moveaxis(image, -1, 1))
    # the dropout reads a pooled feature map (functions between): channels first too
    assert native["drop"].shape == (2, 2, 2, 8) and recording["drop"].shape == (2, 8, 2, 2)
    np.testing.assert_array_equal(recording["drop"], np.moveaxis(native["drop"], -1, 1))
    np.testing.assert_array_equal(recording["fc"], native["fc"])


def test_conv_transpose_and_norms():
    class Decoder(nnx.Module):
        def __init__(self, rngs):
            self.up = nnx.ConvTranspose(4, 6, (4, 4), strides=(2, 2), transpose_kernel=True, rngs=rngs)
            self.group = nnx.GroupNorm(6, num_groups=3, rngs=rngs)
            self.rms = nnx.RMSNorm(6, rngs=rngs)
            self.prelu = nnx.PReLU()

        def __call__(self, z):
            return self.prelu(self.rms(self.group(self.up(z))))

    recording = record(Decoder(nnx.Rngs(1)), normal(2, 3, 3, 4))
    assert [recording.kinds[n] for n in ("up", "group", "rms", "prelu")] == ["conv", "norm", "norm", "activation"]
    assert recording.fan_ins["up"] == conv_fan_in(4, 1, (4, 4), True)
    assert recording["up"].shape == recording["prelu"].shape == (2, 6, 6, 6)  # moved to channels first
    assert recording.fan_ins["group"] >= 2 * 6 * 6  # sums over a group: 2 channels by 6 by 6
    assert recording.fan_ins["rms"] >= 6


def test_lstm_output_recorded_and_result_unchanged():
    model = LSTMClassifier(nnx.Rngs(2))
    ids = RNG.integers(0, 40, (3, 11)).astype(np.int64)
    before = np.asarray(model(ids))
    recording = record(model, ids)
    assert list(recording.outputs) == ["input", "embed", "lstm", "fc"]
    assert [recording.kinds[n] for n in ("embed", "lstm", "fc")] == ["embedding", "recurrent", "dense"]
    assert recording.fan_ins["embed"] == 0
    assert recording.fan_ins["lstm"] == recurrent_fan_in(16, 24, 11)
    np.testing.assert_array_equal(recording["lstm"], np.asarray(model.lstm(model.embed(ids))))
    np.testing.assert_array_equal(recording["fc"], before)
    np.testing.assert_array_equal(np.asarray(model(ids)), before)


def test_rnn_with_carry_records_its_outputs():
    model = LSTMClassifier(nnx.Rngs(2), return_carry=True)
    ids = RNG.integers(0, 40, (2, 5)).astype(np.int64)
    recording = record(model, ids)
    assert recording["lstm"].shape == (2, 5, 24)
    np.testing.assert_array_equal(recording["lstm"], np.asarray(model.lstm(model.embed(ids))[1]))


def test_bidirectional_gru():
    model = BiGRU(nnx.Rngs(3))
    x = normal(2, 7, 8)
    recording = record(model, x)
    assert list(recording.outputs) == ["input", "gru", "fc"]
    assert recording.kinds["gru"] == "recurrent" and recording["gru"].shape == (2, 7, 24)
    assert recording.fan_ins["gru"] == recurrent_fan_in(8, 12, 7)
    np.testing.assert_array_equal(recording["gru"], np.asarray(model.gru(x)))
    np.testing.assert_array_equal(recording["fc"], np.asarray(model(x)))


def test_transformer_block_with_mask():
    model = Block(nnx.Rngs(4))
    x, pad = normal(3, 6, 16), np.zeros((3, 6), bool)
    pad[1, 5:], pad[2, 4:] = True, True
    recording = record(model, (x, pad))
    assert list(recording.outputs) == ["input", "input.1", "attn", "norm1", "ff1", "ff2", "norm2"]
    assert recording.kinds["attn"] == "attention" and recording["attn"].shape == (3, 6, 16)
    assert recording.fan_ins["attn"] == attention_fan_in(16, 8, 6)
    assert model.attn.deterministic is None  # its mode restored
    model.eval()
    mask = nnx.make_attention_mask(~pad, ~pad)
    np.testing.assert_array_equal(recording["attn"], np.asarray(model.attn(x, mask=mask)))
    np.testing.assert_array_equal(recording["norm2"], np.asarray(model(x, pad)))


def test_names_mapping_and_never_ran(conv_net, image):
    recording = record(conv_net, image, names={"conv": "conv1", "fc": "head"})
    assert list(recording.outputs) == ["input", "conv1", "head"]
    with pytest.raises(RecordingError, match="never run.*'classifier'"):
        record(conv_net, image, names={"conv": "conv1", "classifier": "head"})


def test_model_unchanged_even_when_the_forward_raises(image):
    class Broken(ConvNet):
        def __call__(self, x):
            self.conv(x)
            raise RuntimeError("the forward failed")

    model = Broken(nnx.Rngs(0))
    model.train()
    graph = nnx.graphdef(model)
    classes = {path: type(module) for path, module in nnx.iter_modules(model)}
    with pytest.raises(RuntimeError, match="the forward failed"):
        record(model, image)
    assert {path: type(module) for path, module in nnx.iter_modules(model)} == classes
    assert type(model.conv) is nnx.Conv and "__call__" not in vars(model.conv)
    assert model.drop.deterministic is False and model.bn.use_running_average is False
    assert nnx.graphdef(model) == graph


def test_mode_restored_and_inference_used(conv_net, image):
    conv_net.train()
    try:
        first = record(conv_net, image)
        second = record(conv_net, image)
        assert conv_net.drop.deterministic is False and conv_net.bn.use_running_average is False
    finally:
        conv_net.eval()
    np.testing.assert_array_equal(first["drop"], second["drop"])  # dropout off: the same both times
    np.testing.assert_array_equal(first["fc"], np.asarray(conv_net(image)))


def test_jitted_forward_records_the_same(conv_net, image):
    class Jitted(nnx.Module):
        def __init__(self, inner):
            self.inner = inner

        @nnx.jit
        def __call__(self, x):
            return self.inner(x)

    eager = record(conv_net, image)
    jitted = record(Jitted(conv_net), image)
    assert [name.removeprefix("inner.") for name in jitted.outputs] == list(eager.outputs)
    for name in eager.outputs:
        np.testing.assert_allclose(jitted[name if name == "input" else "inner." + name], eager[name],
                                   rtol=1e-5, atol=1e-5)
    assert any("jax.debug.callback" in note for note in jitted.notes)


def test_layer_called_twice_keeps_the_first():
    class Twice(nnx.Module):
        def __init__(self, rngs):
            self.fc = nnx.Linear(4, 4, rngs=rngs)

        def __call__(self, x):
            return self.fc(self.fc(x))

    model = Twice(nnx.Rngs(5))
    x = normal(2, 4)
    recording = record(model, x)
    assert list(recording.outputs) == ["input", "fc"]
    np.testing.assert_array_equal(recording["fc"], np.asarray(model.fc(x)))
    assert any("fc ran 2 times" in note for note in recording.notes)


def test_layer_norm_fast_variance_has_the_larger_fan_in():
    x = normal(4, 16) + 20
    fan_ins = {}
    for fast in (True, False):
        model = nnx.Sequential(nnx.LayerNorm(16, use_fast_variance=fast, rngs=nnx.Rngs(0)))
        fan_ins[fast] = record(model, x).fan_ins["layers.0"]
    assert fan_ins[True] > fan_ins[False] > 16


def test_unknown_layers_and_bad_inputs():
    class Scale(nnx.Module):
        def __init__(self):
            self.w = nnx.Param(np.ones(5, np.float32))

        def __call__(self, x):
            return x * self.w[...]

    recording = record(nnx.Sequential(Scale()), normal(2, 5))
    assert recording.kinds["layers.0"] == "other" and recording.fan_ins["layers.0"] == 5
    assert any("Scale" in note for note in recording.notes)
    with pytest.raises(RecordingError, match="str"):
        record(nnx.Sequential(Scale()), "not an array")
    with pytest.raises(RecordingError, match="not a Flax NNX module"):
        record(lambda x: x, normal(2, 5))
