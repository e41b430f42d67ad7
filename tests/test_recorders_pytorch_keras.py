"""The PyTorch and Keras recorders (rosetta_utils.recorders.pytorch, .tensorflow) on small
models of the tests' own: what they record, in which order, with which kinds and fan-ins;
that a Keras port of a PyTorch model records the same arrays; that the model is left as
it was."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
keras = pytest.importorskip("keras")

from keras import layers as kl  # noqa: E402
from torch import nn  # noqa: E402

from rosetta_utils.recorders import RecordingError  # noqa: E402
from rosetta_utils.recorders import pytorch as torch_recorder  # noqa: E402
from rosetta_utils.recorders import tensorflow as keras_recorder  # noqa: E402

RNG = np.random.default_rng(0)


# --- PyTorch -----------------------------------------------------------------------------------

class TorchConvNet(nn.Module):
    """conv -> batch norm -> relu -> max pool -> grouped conv -> (F.tanh) -> avg pool ->
    flatten -> linear: a function between modules, and each kind of layer."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 6, 3, groups=2, padding=1)
        self.avg = nn.AvgPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(24, 5)

    def forward(self, x):
        x = self.pool(self.relu(self.bn(self.conv1(x))))
        return self.fc(self.flatten(self.avg(torch.tanh(self.conv2(x)))))


def torch_conv_net() -> TorchConvNet:
    torch.manual_seed(0)
    net = TorchConvNet()
    net.bn.running_mean.copy_(torch.rand(4) - 0.5)
    net.bn.running_var.copy_(torch.rand(4) + 0.5)
    net.bn.weight.data.copy_(torch.rand(4) + 0.5)
    net.bn.bias.data.copy_(torch.rand(4) - 0.5)
    return net


def image(channels_last: bool = False) -> np.ndarray:
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    return x.transpose(0, 2, 3, 1) if channels_last else x


def test_pytorch_conv_net_order_kinds_and_fan_ins():
    recording = torch_recorder.record(torch_conv_net(), image())
    assert list(recording.outputs) == ["input", "conv1", "bn", "relu", "pool", "conv2", "avg", "flatten", "fc"]
    assert recording.kinds == {"input": "input", "conv1": "conv", "bn": "norm", "relu": "activation", "pool": "pool",
                               "conv2": "conv", "avg": "pool", "flatten": "reshape", "fc": "dense"}
    fan_ins = recording.fan_ins
    assert fan_ins["conv1"] == 3 * 3 * 3 + 1
    assert fan_ins["conv2"] == 4 // 2 * 3 * 3 + 1
    assert (fan_ins["pool"], fan_ins["avg"], fan_ins["flatten"], fan_ins["fc"]) == (1, 4, 0, 25)
    assert recording["conv2"].shape == (2, 6, 4, 4) and recording["flatten"].shape == (2, 24)
    with torch.no_grad():
        net = torch_conv_net().eval()
        np.testing.assert_allclose(recording["fc"], net(torch.from_numpy(image())).numpy(), rtol=1e-6)


class TorchRecurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(12, 6)
        self.lstm = nn.LSTM(6, 5, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(10, 3)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, ids):
        sequence, _ = self.lstm(self.embed(ids))
        return self.softmax(self.fc(sequence))


def test_pytorch_lstm_records_its_sequence_output():
    torch.manual_seed(0)
    net = TorchRecurrent()
    ids = RNG.integers(0, 12, (2, 7))
    recording = torch_recorder.record(net, ids)
    assert list(recording.outputs) == ["input", "embed", "lstm", "fc", "softmax"]
    with torch.no_grad():
        sequence = net.lstm(net.embed(torch.from_numpy(ids)))[0].numpy()
    np.testing.assert_array_equal(recording["lstm"], sequence)
    assert recording.kinds["lstm"] == "recurrent" and recording.kinds["embed"] == "embedding"
    # two layers, both directions: the first reads 6 features, the second the 2 x 5 of the first
    assert recording.fan_ins["lstm"] == 7 * (6 + 5 + 8) + 7 * (10 + 5 + 8)
    assert recording.fan_ins["softmax"] == 3 + 2 and recording.fan_ins["embed"] == 0


def test_pytorch_transformer_block_records_its_children():
    torch.manual_seed(0)
    block = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()
    x = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    recording = torch_recorder.record(block, x)
    assert list(recording.outputs) == ["input", "self_attn", "dropout1", "norm1", "linear1", "dropout", "linear2",
                                       "dropout2", "norm2"]
    assert recording.kinds["self_attn"] == "attention"
    assert recording.fan_ins["self_attn"] == 3 * 8 + 4 + 2 * 5 + 8
    with torch.no_grad():
        expected = block.self_attn(*[torch.from_numpy(x)] * 3)[0].numpy()
    np.testing.assert_allclose(recording["self_attn"], expected, rtol=1e-5, atol=1e-6)
    assert torch.backends.mha.get_fastpath_enabled()


def test_pytorch_names_keep_those_and_an_unrun_name_fails():
    recording = torch_recorder.record(torch_conv_net(), image(), names={"conv1": "c1", "fc": "logits"})
    assert list(recording.outputs) == ["input", "c1", "logits"]
    with pytest.raises(RecordingError, match="conv9"):
        torch_recorder.record(torch_conv_net(), image(), names={"conv1": "c1", "conv9": "c9"})


class Failing(TorchConvNet):
    def forward(self, x):
        self.relu(self.conv1(x))
        raise RuntimeError("the forward failed")


@pytest.mark.parametrize("fail", [False, True])
def test_pytorch_model_left_as_it_was(fail):
    net = Failing() if fail else torch_conv_net()
    net.train()
    net.bn.eval()
    if fail:
        with pytest.raises(RuntimeError, match="the forward failed"):
            torch_recorder.record(net, image())
    else:
        torch_recorder.record(net, image())
    assert all(not module._forward_hooks for module in net.modules())
    assert net.training and not net.bn.training and net.conv1.training
    assert torch.backends.mha.get_fastpath_enabled() and torch.is_grad_enabled()


def test_pytorch_layer_norm_gain_of_a_shifted_input():
    norm = nn.Sequential(nn.LayerNorm(8))
    x = (20 + 0.5 * RNG.standard_normal((4, 8))).astype(np.float32)
    recording = torch_recorder.record(norm, x)
    assert recording.kinds["0"] == "norm" and recording.gains["0"] > 10


def test_pytorch_layer_called_twice_keeps_its_first_call():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(self.fc(x))

    net = Twice()
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    recording = torch_recorder.record(net, x)
    with torch.no_grad():
        np.testing.assert_array_equal(recording["fc"], net.fc(torch.from_numpy(x)).numpy())
    assert any("more than once" in note for note in recording.notes)


def test_pytorch_rejects_what_it_cannot_record():
    with pytest.raises(RecordingError, match="list"):
        torch_recorder.record([nn.Linear(2, 2)], np.zeros((1, 2)))
    with pytest.raises(RecordingError, match="dtype"):
        torch_recorder.record(nn.Linear(2, 2), np.array([["a", "b"]]))


# --- Keras ---------------------------------------------------------------------------------------

def keras_layers() -> list:
    """The Keras port of TorchConvNet (tanh, a function there, is a layer here)."""
    return [kl.Conv2D(4, 3, padding="same", name="conv1"), kl.BatchNormalization(epsilon=1e-5, name="bn"),
            kl.ReLU(name="relu"), kl.MaxPooling2D(2, name="pool"),
            kl.Conv2D(6, 3, groups=2, padding="same", name="conv2"), kl.Activation("tanh", name="tanh"),
            kl.AveragePooling2D(2, name="avg"), kl.Flatten(name="flatten"), kl.Dense(5, name="fc")]


def keras_sequential() -> keras.Model:
    return keras.Sequential([keras.Input((8, 8, 3))] + keras_layers())


def keras_functional() -> keras.Model:
    inputs = keras.Input((8, 8, 3))
    x = inputs
    for layer in keras_layers():
        x = layer(x)
    return keras.Model(inputs, x)


class KerasSubclassed(keras.Model):
    def __init__(self):
        super().__init__()
        (self.conv1, self.bn, self.relu, self.pool, self.conv2, self.tanh, self.avg, self.flatten,
         self.fc) = keras_layers()

    def call(self, x, training=False):
        x = self.pool(self.relu(self.bn(self.conv1(x), training=training)))
        return self.fc(self.flatten(self.avg(self.tanh(self.conv2(x)))))


def ported(model: keras.Model) -> keras.Model:
    """``model`` with TorchConvNet's weights, moved to Keras's layouts."""
    net = torch_conv_net()
    state = {name: value.numpy() for name, value in net.state_dict().items()}
    model(image(channels_last=True))
    layer = {name: getattr(model, name) if isinstance(model, KerasSubclassed) else model.get_layer(name)
             for name in ("conv1", "bn", "conv2", "fc")}
    layer["conv1"].set_weights([state["conv1.weight"].transpose(2, 3, 1, 0), state["conv1.bias"]])
    layer["bn"].set_weights([state["bn.weight"], state["bn.bias"], state["bn.running_mean"], state["bn.running_var"]])
    layer["conv2"].set_weights([state["conv2.weight"].transpose(2, 3, 1, 0), state["conv2.bias"]])
    # PyTorch flattens (C, H, W), Keras (H, W, C)
    fc = state["fc.weight"].reshape(5, 6, 2, 2).transpose(2, 3, 1, 0).reshape(24, 5)
    layer["fc"].set_weights([fc, state["fc.bias"]])
    return model


def test_keras_conv_net_order_kinds_and_fan_ins():
    recording = keras_recorder.record(ported(keras_sequential()), image(channels_last=True))
    assert list(recording.outputs) == ["input", "conv1", "bn", "relu", "pool", "conv2", "tanh", "avg", "flatten",
                                       "fc"]
    assert recording.kinds["bn"] == "norm" and recording.kinds["tanh"] == "activation"
    assert recording.fan_ins["conv1"] == 28 and recording.fan_ins["conv2"] == 19 and recording.fan_ins["fc"] == 25
    assert recording["input"].shape == (2, 3, 8, 8) and recording["conv2"].shape == (2, 6, 4, 4)
    native = keras_recorder.record(ported(keras_sequential()), image(channels_last=True), layout="native")
    assert native["conv2"].shape == (2, 4, 4, 6)


def test_keras_styles_record_the_same_arrays():
    x = image(channels_last=True)
    recordings = [keras_recorder.record(ported(build()), x)
                  for build in (keras_sequential, keras_functional, KerasSubclassed)]
    first = recordings[0]
    for other in recordings[1:]:
        assert list(other.outputs) == list(first.outputs)
        assert other.fan_ins == first.fan_ins and other.kinds == first.kinds
        for name in first.outputs:
            np.testing.assert_array_equal(other[name], first[name], err_msg=name)


def test_pytorch_and_keras_ports_record_the_same_arrays():
    torch_recording = torch_recorder.record(torch_conv_net(), image())
    names = {name: name for name in ("conv1", "bn", "relu", "pool", "conv2", "avg", "flatten", "fc")}
    keras_recording = keras_recorder.record(ported(keras_functional()), image(channels_last=True), names=names)
    assert list(keras_recording.outputs) == ["input"] + list(names)
    for name in keras_recording.outputs:
        np.testing.assert_allclose(keras_recording[name], torch_recording[name], atol=1e-5, err_msg=name)
        assert keras_recording.fan_ins[name] == torch_recording.fan_ins[name] or name == "bn"


def test_keras_names_keep_those_and_an_unrun_name_fails():
    recording = keras_recorder.record(ported(keras_functional()), image(channels_last=True),
                                      names={"conv1": "c1", "fc": "logits"})
    assert list(recording.outputs) == ["input", "c1", "logits"]
    with pytest.raises(RecordingError, match="conv9"):
        keras_recorder.record(keras_functional(), image(channels_last=True), names={"conv9": "c9"})


class KerasText(keras.Model):
    """Embedding -> LSTM returning its states -> attention with a residual -> layer norm
    -> a list of dense layers, and a nested Sequential."""

    def __init__(self):
        super().__init__()
        self.embed = kl.Embedding(12, 6)
        self.lstm = kl.LSTM(8, return_sequences=True, return_state=True)
        self.attention = kl.MultiHeadAttention(2, 4)
        self.norm = kl.LayerNormalization()
        self.heads = [kl.Dense(6, activation="relu"), kl.Dense(3)]
        self.tail = keras.Sequential([kl.Dropout(0.5, name="drop"), kl.Softmax(name="softmax")])

    def call(self, ids):
        sequence, _, _ = self.lstm(self.embed(ids))
        x = self.norm(sequence + self.attention(sequence, sequence))
        return self.tail(self.heads[1](self.heads[0](x)))


def test_keras_subclassed_paths_composites_and_primary_outputs():
    keras.utils.set_random_seed(0)
    model = KerasText()
    ids = RNG.integers(0, 12, (2, 7))
    recording = keras_recorder.record(model, ids)
    assert list(recording.outputs) == ["input", "embed", "lstm", "attention", "norm", "heads.0", "heads.1",
                                       "tail.drop", "tail.softmax"]
    assert [recording.kinds[name] for name in recording.outputs] == [
        "input", "embedding", "recurrent", "attention", "norm", "dense", "dense", "dropout", "softmax"]
    sequence = model.lstm(model.embed(ids))[0]
    np.testing.assert_allclose(recording["lstm"], sequence, rtol=1e-6)
    assert recording.fan_ins["lstm"] == 7 * (6 + 8 + 8)
    assert recording.fan_ins["attention"] == 3 * 8 + 4 + 2 * 7 + 8
    assert recording.fan_ins["tail.softmax"] == 3 + 2 and recording.fan_ins["heads.0"] == 9


class KerasFailing(KerasSubclassed):
    def call(self, x, training=False):
        self.relu(self.conv1(x))
        raise RuntimeError("the call failed")


@pytest.mark.parametrize("fail", [False, True])
def test_keras_model_left_as_it_was(fail):
    import tensorflow as tf

    model = KerasFailing() if fail else ported(keras_functional())
    if fail:
        with pytest.raises(RuntimeError, match="the call failed"):
            keras_recorder.record(model, image(channels_last=True))
    else:
        keras_recorder.record(model, image(channels_last=True))
    assert all("call" not in vars(layer) for layer in model._flatten_layers())
    assert not tf.config.functions_run_eagerly()


def test_keras_layer_norm_gain_and_layer_called_twice():
    x = (20 + 0.5 * RNG.standard_normal((4, 8))).astype(np.float32)
    inputs = keras.Input((8,))
    norm = kl.LayerNormalization(name="norm")
    model = keras.Model(inputs, norm(norm(inputs)))
    recording = keras_recorder.record(model, x)
    assert recording.kinds["norm"] == "norm" and recording.gains["norm"] > 10
    np.testing.assert_allclose(recording["norm"], norm(x), rtol=1e-6)
    assert any("more than once" in note for note in recording.notes)


def test_keras_unbuilt_sequential_and_bad_input():
    model = keras.Sequential([kl.Dense(3, name="a"), kl.ReLU(name="b")])
    recording = keras_recorder.record(model, RNG.standard_normal((2, 4)))
    assert list(recording.outputs) == ["input", "a", "b"] and recording["input"].dtype == np.float32
    with pytest.raises(RecordingError, match="dtype"):
        keras_recorder.record(model, np.array([["a", "b", "c", "d"]]))
