"""Moving weights with rosetta_utils.porting between PyTorch and Keras 3 (its modules
.pytorch and .tensorflow), on small models of the tests' own: each kind's read -> write
round trip is exact in both; a move from PyTorch to Keras (and back) records the same
arrays, layer by layer within the divergence command's bound; a dense layer reading a
flattened feature map, or unflattened into one, has its columns or rows permuted; what the
move does not know is refused, naming the layer, with nothing written."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")

from keras import layers as kl
from torch import nn

from rosetta_utils.divergence import find_divergence
from rosetta_utils.porting import (
    PortingError,
    load_weights,
    move_weights,
    save_weights,
    model_layers,
)
from rosetta_utils.recorders import pytorch as torch_recorder
from rosetta_utils.recorders import tensorflow as keras_recorder


def image(channels_last: bool = False) -> np.ndarray:
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if channels_last else x


def tokens() -> np.ndarray:
    return np.random.default_rng(2).integers(0, 20, (3, 7)).astype(np.int64)


def agree(a, b) -> None:
    """Two recordings: the same layers, each within the divergence command's bound."""
    assert list(a.outputs) == list(b.outputs)
    report = find_divergence(a.outputs, b.outputs, a.fan_ins, kinds=a.kinds, gains=a.gains,
                             second_terms=(b.fan_ins, b.gains))
    assert report.first is None, "\n".join(report.lines())


def same_arrays(first, second) -> None:
    assert [(layer.path, layer.kind) for layer in first] == [(layer.path, layer.kind) for layer in second]
    for a, b in zip(first, second):
        assert a.arrays.keys() == b.arrays.keys(), a.path
        for name in a.arrays:
            np.testing.assert_array_equal(a.arrays[name], b.arrays[name], err_msg=f"{a.path}.{name}")


def quiet(call, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        result = call(*args, **kwargs)
    return result, printed.getvalue()


# --- models: PyTorch and its Keras port, attribute names and layer names alike ------------------

class TorchImageNet(nn.Module):
    """conv -> batch norm -> depthwise (multiplier 2) -> grouped 1x1 -> transposed conv ->
    max pool -> flatten -> dense: the dense reads a flattened map."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8, eps=1e-3)
        self.relu = nn.ReLU()
        self.dw = nn.Conv2d(8, 16, 3, padding=1, groups=8)
        self.grouped = nn.Conv2d(16, 8, 1, groups=4)
        self.up = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)
        self.pool = nn.MaxPool2d(8)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(2 * 2 * 4, 5)

    def forward(self, x):
        x = self.grouped(self.dw(self.relu(self.bn(self.conv1(x)))))
        return self.fc(self.flatten(self.pool(self.up(x))))


def torch_image_net(seed: int = 0) -> TorchImageNet:
    torch.manual_seed(seed)
    net = TorchImageNet().eval()
    with torch.no_grad():
        net.bn.running_mean.normal_(0, 0.5)
        net.bn.running_var.uniform_(0.5, 2.0)
        net.bn.weight.uniform_(0.5, 1.5)
        net.bn.bias.normal_(0, 0.1)
    return net


def keras_image_net() -> keras.Model:
    return keras.Sequential([
        keras.Input((8, 8, 3)),
        kl.Conv2D(8, 3, padding="same", name="conv1"),
        kl.BatchNormalization(name="bn"),
        kl.ReLU(name="relu"),
        kl.DepthwiseConv2D(3, depth_multiplier=2, padding="same", name="dw"),
        kl.Conv2D(8, 1, groups=4, name="grouped"),
        kl.Conv2DTranspose(4, 4, strides=2, padding="same", name="up"),
        kl.MaxPooling2D(8, name="pool"),
        kl.Flatten(name="flatten"),
        kl.Dense(5, name="fc"),
    ])


class TorchSequenceNet(nn.Module):
    """embedding -> two-layer LSTM -> bidirectional GRU -> dense -> multi-head attention ->
    layer norm -> 1-D convolution -> dense."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 6, num_layers=2, batch_first=True)
        self.gru = nn.GRU(6, 4, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(8, 8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm = nn.LayerNorm(8)
        self.conv = nn.Conv1d(8, 6, 3, padding=1)
        self.head = nn.Linear(6, 3)

    def forward(self, ids):
        h = self.proj(self.gru(self.lstm(self.embed(ids))[0])[0])
        h = self.norm(h + self.attn(h, h, h)[0])
        return self.head(self.conv(h.transpose(1, 2)).transpose(1, 2))


def torch_sequence_net(seed: int = 0) -> TorchSequenceNet:
    torch.manual_seed(seed)
    net = TorchSequenceNet().eval()
    with torch.no_grad():
        net.attn.in_proj_bias.normal_(0, 0.1)
        net.attn.out_proj.bias.normal_(0, 0.1)
        net.norm.weight.uniform_(0.5, 1.5)
        net.norm.bias.normal_(0, 0.1)
    return net


class KerasSequenceNet(keras.Model):
    def __init__(self):
        super().__init__()
        self.embed = kl.Embedding(20, 8)
        self.lstm = kl.RNN(kl.StackedRNNCells([kl.LSTMCell(6), kl.LSTMCell(6)]), return_sequences=True)
        self.gru = kl.Bidirectional(kl.GRU(4, return_sequences=True))
        self.proj = kl.Dense(8)
        self.attn = kl.MultiHeadAttention(2, 4)
        self.norm = kl.LayerNormalization(epsilon=1e-5)
        self.conv = kl.Conv1D(6, 3, padding="same")
        self.head = kl.Dense(3)

    def call(self, ids):
        h = self.proj(self.gru(self.lstm(self.embed(ids))))
        h = self.norm(h + self.attn(h, h, h))
        return self.head(self.conv(h))


#: The sequence net's layers compared across the frameworks: not its head, a dense layer on the
#: convolution's channels-last output, which the Keras recorder takes for a feature map.
SEQUENCE = {name: name for name in ("embed", "lstm", "gru", "proj", "attn", "norm", "conv")}


def keras_sequence_net() -> KerasSequenceNet:
    net = KerasSequenceNet()
    net(tokens())
    return net


class TorchDecoder(nn.Module):
    """dense -> unflatten to a (16, 2, 3) map -> transposed convolution: the dense's rows
    make a feature map."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 16 * 2 * 3)
        self.unflatten = nn.Unflatten(1, (16, 2, 3))
        self.up = nn.ConvTranspose2d(16, 3, 3, stride=2)

    def forward(self, z):
        return self.up(self.unflatten(self.fc(z)))


def keras_decoder() -> keras.Model:
    return keras.Sequential([keras.Input((5,)), kl.Dense(16 * 2 * 3, name="fc"),
                             kl.Reshape((2, 3, 16), name="unflatten"), kl.Conv2DTranspose(3, 3, strides=2, name="up")])


# --- each kind's round trip, within one framework ----------------------------------------------

KINDS = {"dense", "conv", "conv_transpose", "batch_norm", "layer_norm", "embedding", "lstm", "gru", "attention"}


def test_pytorch_round_trip_of_every_kind_is_exact():
    x, ids = image(), tokens()
    for build, inputs in ((torch_image_net, x), (torch_sequence_net, ids)):
        source, target = build(0), build(1)
        before = model_layers(source, inputs)
        move, printed = quiet(move_weights, source, target, inputs)
        assert move.written and "values moved" in printed
        same_arrays(before, model_layers(target, inputs))
        a, b = torch_recorder.record(source, inputs), torch_recorder.record(target, inputs)
        for name in a.outputs:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    kinds = {layer.kind for layer in model_layers(torch_image_net(), x) + model_layers(torch_sequence_net(), ids)}
    assert kinds == KINDS


def test_pytorch_cells_and_arrays_as_they_are():
    cell = nn.LSTMCell(4, 3)
    (layer,) = model_layers(cell, np.zeros((2, 4), np.float32))
    assert layer.kind == "lstm" and set(layer.arrays) == {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"}
    np.testing.assert_array_equal(layer.arrays["weight_ih_l0"], cell.weight_ih.detach().numpy())
    (gru,) = model_layers(nn.GRU(4, 3, bias=False), np.zeros((2, 5, 4), np.float32))
    assert set(gru.arrays) == {"weight_ih_l0", "weight_hh_l0"} and gru.config["flavor"] == "linear_before_reset"
    assert gru.conversion == ""


def test_keras_round_trip_of_every_kind_is_exact():
    x, ids = image(channels_last=True), tokens()
    for build, inputs in ((keras_image_net, x), (keras_sequence_net, ids)):
        source, target = build(), build()
        before = model_layers(source, inputs)
        quiet(move_weights, source, target, inputs)
        same_arrays(before, model_layers(target, inputs))
        a, b = keras_recorder.record(source, inputs), keras_recorder.record(target, inputs)
        for name in a.outputs:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    reset_before = keras.Sequential([keras.Input((5, 3)), kl.GRU(4, reset_after=False, name="gru")])
    reset_before.get_layer("gru").cell.bias.assign(np.linspace(-1, 1, 12).astype(np.float32))
    (layer,) = model_layers(reset_before, np.zeros((1, 5, 3), np.float32))
    assert layer.config["flavor"] == "reset_before" and not layer.arrays["bias_hh_l0"].any()
    other = keras.Sequential([keras.Input((5, 3)), kl.GRU(4, reset_after=False, name="gru")])
    quiet(move_weights, reset_before, other, np.zeros((1, 5, 3), np.float32))
    np.testing.assert_array_equal(other.get_layer("gru").cell.bias.numpy(),
                                  reset_before.get_layer("gru").cell.bias.numpy())


def test_keras_lstm_bias_reads_as_bias_ih_and_writes_back_the_sum():
    torch.manual_seed(0)
    source = nn.LSTM(3, 4, batch_first=True)
    target = keras.Sequential([keras.Input((5, 3)), kl.LSTM(4, return_sequences=True, name="lstm")])
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    quiet(move_weights, source, target, x)
    (layer,) = model_layers(target, x)
    np.testing.assert_allclose(layer.arrays["bias_ih_l0"], (source.bias_ih_l0 + source.bias_hh_l0).detach().numpy(),
                               rtol=0, atol=0)
    assert not layer.arrays["bias_hh_l0"].any() and "bias_hh = 0" in layer.conversion
    agree(torch_recorder.record(source, x, names={"LSTM": "lstm"}), keras_recorder.record(target, x))


# --- moves between the two frameworks ------------------------------------------------------------

def test_a_move_from_pytorch_to_keras_records_the_same_arrays_and_back():
    x, x_nhwc = image(), image(channels_last=True)
    torch_net, keras_net = torch_image_net(), keras_image_net()
    move, printed = quiet(move_weights, torch_net, keras_net, x, target_inputs=x_nhwc)
    assert "(in·multiplier, 1, h, w)" in printed and move.written
    agree(torch_recorder.record(torch_net, x), keras_recorder.record(keras_net, x_nhwc))
    back = torch_image_net(seed=3)
    quiet(move_weights, keras_net, back, x_nhwc, target_inputs=x)
    agree(torch_recorder.record(torch_net, x), torch_recorder.record(back, x))

    ids = tokens()
    torch_seq, keras_seq = torch_sequence_net(), keras_sequence_net()
    quiet(move_weights, torch_seq, keras_seq, ids)
    agree(torch_recorder.record(torch_seq, ids, names=SEQUENCE), keras_recorder.record(keras_seq, ids, names=SEQUENCE))
    back = torch_sequence_net(seed=3)
    quiet(move_weights, keras_seq, back, ids)
    agree(torch_recorder.record(torch_seq, ids), torch_recorder.record(back, ids))


def test_the_flatten_permutation_is_applied():
    x, x_nhwc = image(), image(channels_last=True)
    torch_net, keras_net = torch_image_net(), keras_image_net()
    move, _ = quiet(move_weights, torch_net, keras_net, x, target_inputs=x_nhwc)
    fc = next(b for a, b in move.pairs if b.path == "fc")
    assert "flattened 2x2x4 (H, W, C) map" in fc.conversion
    weight = torch_net.fc.weight.detach().numpy()  # columns (c, h, w)
    kernel = keras_net.get_layer("fc").kernel.numpy()  # rows (h, w, c)
    np.testing.assert_array_equal(kernel, weight.reshape(5, 4, 2, 2).transpose(2, 3, 1, 0).reshape(16, 5))
    assert not np.array_equal(kernel, weight.T)
    (read,) = [layer for layer in model_layers(keras_net, x_nhwc) if layer.path == "fc"]
    np.testing.assert_array_equal(read.arrays["weight"], weight)


def test_the_unflatten_permutation_is_applied():
    torch.manual_seed(0)
    z = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    torch_net, keras_net = TorchDecoder().eval(), keras_decoder()
    move, _ = quiet(move_weights, torch_net, keras_net, z)
    assert "rows (and bias) make a 2x3x16 (H, W, C) map" in move.pairs[0][1].conversion
    names = {"unflatten": "unflatten", "up": "up"}
    agree(torch_recorder.record(torch_net, z, names=names), keras_recorder.record(keras_net, z, names=names))


def test_a_move_through_a_file(tmp_path):
    ids = tokens()
    torch_seq, keras_seq = torch_sequence_net(), keras_sequence_net()
    path = save_weights(torch_seq, ids, tmp_path / "sequence.canonical.npz")
    quiet(load_weights, keras_seq, ids, path)
    agree(torch_recorder.record(torch_seq, ids, names=SEQUENCE), keras_recorder.record(keras_seq, ids, names=SEQUENCE))
    state = tmp_path / "state.npz"
    np.savez(state, **{name: value.detach().numpy() for name, value in torch_seq.state_dict().items()})
    fresh = keras_sequence_net()
    quiet(load_weights, fresh, ids, state)
    agree(torch_recorder.record(torch_seq, ids, names=SEQUENCE), keras_recorder.record(fresh, ids, names=SEQUENCE))


def test_reading_changes_nothing():
    net = torch_image_net().train()
    before = {name: value.clone() for name, value in net.state_dict().items()}
    model_layers(net, image())
    assert net.training and all(torch.equal(before[name], value) for name, value in net.state_dict().items())
    keras_net = keras_image_net()
    values = [variable.numpy().copy() for variable in keras_net.weights]
    model_layers(keras_net, image(channels_last=True))
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(values, keras_net.weights))
    assert "call" not in vars(keras_net.get_layer("fc"))


# --- refusals -------------------------------------------------------------------------------------

def test_unknown_weighted_layers_are_refused_naming_them():
    torch_net = nn.Sequential(nn.Linear(4, 4), nn.PReLU())
    with pytest.raises(PortingError, match=r"pytorch: 1 is a torch.nn.modules.activation.PReLU holding weights"):
        model_layers(torch_net, np.zeros((2, 4), np.float32))
    keras_net = keras.Sequential([keras.Input((4,)), kl.Dense(4, name="fc"), kl.PReLU(name="slope")])
    with pytest.raises(PortingError, match=r"tensorflow: slope is a .*PReLU holding weights"):
        model_layers(keras_net, np.zeros((2, 4), np.float32))
    separable = keras.Sequential([keras.Input((6, 6, 3)), kl.SeparableConv2D(4, 3, name="sep")])
    with pytest.raises(PortingError, match=r"sep: a SeparableConv2D holds a depthwise and a pointwise kernel"):
        model_layers(separable, np.zeros((1, 6, 6, 3), np.float32))
    attention = nn.MultiheadAttention(8, 2, kdim=4, vdim=4, batch_first=True)
    q, kv = np.zeros((1, 3, 8), np.float32), np.zeros((1, 3, 4), np.float32)
    with pytest.raises(PortingError, match=r"MultiheadAttention: a MultiheadAttention with kdim=4, vdim=4"):
        model_layers(attention, (q, kv, kv))


class Loose(nn.Module):
    def __init__(self):
        super().__init__()
        self.position = nn.Parameter(torch.zeros(4))
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x + self.position)


def test_weights_outside_any_layer_are_refused():
    with pytest.raises(PortingError, match=r"Loose \(Loose\) holds parameters of its own \(position\)"):
        model_layers(Loose(), np.zeros((1, 4), np.float32))


def test_a_refused_pair_writes_nothing():
    torch.manual_seed(0)
    source = nn.GRU(3, 4, batch_first=True)
    target = keras.Sequential([keras.Input((5, 3)), kl.Dense(3, name="fc"), kl.GRU(4, reset_after=False, name="gru")])
    with pytest.raises(PortingError, match=r"a gru layer in the source, a dense layer in the target"):
        move_weights(source, target, np.zeros((1, 5, 3), np.float32), show=False)
    target = keras.Sequential([keras.Input((5, 3)), kl.GRU(4, reset_after=False, name="gru")])
    before = [variable.numpy().copy() for variable in target.weights]
    with pytest.raises(PortingError, match=r"flavor 'linear_before_reset' in the source, 'reset_before' in the target"):
        move_weights(source, target, np.zeros((1, 5, 3), np.float32), show=False)
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(before, target.weights))
