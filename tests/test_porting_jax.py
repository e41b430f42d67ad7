"""Moving weights into and out of Flax NNX models (rosetta_utils.porting.jax), on small models
of its own: each kind read and written back exactly, a PyTorch state dict loaded into the same
architecture computing what PyTorch computes (convolutions 1-D and 2-D, grouped, depthwise,
dilated, transposed both ways, batch and layer norms, embedding, LSTM, GRU, attention, a dense
layer reading a flattened map and one unflattened into a map), a move from Flax to Flax
recording the same, unknown weighted layers refused by name."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

jax = pytest.importorskip("jax")
nnx = pytest.importorskip("flax.nnx")
torch = pytest.importorskip("torch")

import jax.numpy as jnp
from torch import nn

from rosetta_utils.divergence import find_divergence
from rosetta_utils.porting import PortingError, load_weights, move_weights
from rosetta_utils.porting.jax import weighted_layers
from rosetta_utils.recorders.jax import record

RNG = np.random.default_rng(3)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def quiet(function, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return function(*args, **kwargs)


def params(model):
    return {path: np.asarray(v[...]) for path, v in nnx.to_flat_state(nnx.state(model, (nnx.Param, nnx.BatchStat)))}


# --- the models, in Flax and in PyTorch ------------------------------------------------------

class Images(nnx.Module):
    """conv (stride 2) -> bn -> relu -> grouped dilated conv -> depthwise conv (multiplier 2)
    -> max pool -> flatten (channels last, or channels first by a transpose) -> fc -> layer
    norm -> gelu -> head."""

    def __init__(self, seed=0, flatten="reshape"):
        r = nnx.Rngs(seed)
        self.conv = nnx.Conv(3, 8, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)), rngs=r)
        self.bn = nnx.BatchNorm(8, use_running_average=True, rngs=r)
        self.grouped = nnx.Conv(8, 8, (3, 3), feature_group_count=2, kernel_dilation=(2, 2), padding="SAME", rngs=r)
        self.depthwise = nnx.Conv(8, 16, (3, 3), feature_group_count=8, padding="SAME", use_bias=False, rngs=r)
        self.fc = nnx.Linear(16 * 2 * 2, 10, rngs=r)
        self.norm = nnx.LayerNorm(10, rngs=r)
        self.head = nnx.Linear(10, 3, rngs=r)
        self.flatten = flatten

    def __call__(self, x):
        x = self.depthwise(self.grouped(nnx.relu(self.bn(self.conv(x)))))
        x = nnx.max_pool(x, (2, 2), (2, 2))
        if self.flatten == "transpose":
            x = x.transpose(0, 3, 1, 2)
        return self.head(nnx.gelu(self.norm(self.fc(x.reshape(x.shape[0], -1)))))


class TorchImages(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.grouped = nn.Conv2d(8, 8, 3, groups=2, dilation=2, padding=2)
        self.depthwise = nn.Conv2d(8, 16, 3, groups=8, padding=1, bias=False)
        self.fc = nn.Linear(64, 10)
        self.norm = nn.LayerNorm(10, eps=1e-6)  # Flax's default epsilon
        self.head = nn.Linear(10, 3)

    def forward(self, x):
        x = self.depthwise(self.grouped(torch.relu(self.bn(self.conv(x)))))
        x = torch.flatten(nn.functional.max_pool2d(x, 2), 1)
        return self.head(nn.functional.gelu(self.norm(self.fc(x)), approximate="tanh"))


class Decoder(nnx.Module):
    """fc -> unflatten into a 3x3 map of 8 channels (a channels-last reshape, or channels
    first then a transpose) -> relu -> transposed conv (stride 2, PyTorch's padding 1) ->
    transposed conv with transpose_kernel."""

    def __init__(self, seed=0, unflatten="reshape"):
        r = nnx.Rngs(seed)
        self.fc = nnx.Linear(4, 72, rngs=r)
        self.up = nnx.ConvTranspose(8, 4, (4, 4), strides=(2, 2), padding=((2, 2), (2, 2)), rngs=r)
        self.up2 = nnx.ConvTranspose(4, 2, (3, 3), padding=((1, 1), (1, 1)), transpose_kernel=True, rngs=r)
        self.unflatten = unflatten

    def __call__(self, z):
        x = self.fc(z)
        x = x.reshape(-1, 3, 3, 8) if self.unflatten == "reshape" else x.reshape(-1, 8, 3, 3).transpose(0, 2, 3, 1)
        return self.up2(self.up(nnx.relu(x)))


class TorchDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 72)
        self.up = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)
        self.up2 = nn.ConvTranspose2d(4, 2, 3, padding=1)

    def forward(self, z):
        return self.up2(self.up(torch.relu(self.fc(z).reshape(-1, 8, 3, 3))))


class Sequence(nnx.Module):
    """embedding -> 1-D conv -> LSTM -> bidirectional LSTM (OptimizedLSTMCell) -> bidirectional
    GRU -> self-attention -> fc."""

    def __init__(self, seed=0, gru_b_hn=False):
        r = nnx.Rngs(seed)
        self.embed = nnx.Embed(20, 8, rngs=r)
        self.conv = nnx.Conv(8, 8, (3,), padding=((1, 1),), rngs=r)
        self.lstm = nnx.RNN(nnx.LSTMCell(8, 6, rngs=r), rngs=r)
        self.bilstm = nnx.Bidirectional(nnx.RNN(nnx.OptimizedLSTMCell(6, 5, rngs=r), rngs=r),
                                        nnx.RNN(nnx.OptimizedLSTMCell(6, 5, rngs=r), rngs=r), rngs=r)
        cells = [nnx.GRUCell(10, 4, rngs=r) for _ in range(2)]
        if gru_b_hn:  # a recurrent bias, b_hn included
            for cell in cells:
                cell.dense_h = nnx.Linear(4, 12, use_bias=True, rngs=r)
        self.gru = nnx.Bidirectional(nnx.RNN(cells[0], rngs=r), nnx.RNN(cells[1], rngs=r), rngs=r)
        self.attn = nnx.MultiHeadAttention(2, 8, decode=False, rngs=r)
        self.fc = nnx.Linear(8, 3, rngs=r)

    def __call__(self, ids):
        x = nnx.relu(self.conv(self.embed(ids)))
        x = self.gru(self.bilstm(self.lstm(x)))
        return self.fc(self.attn(x))


class TorchSequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.conv = nn.Conv1d(8, 8, 3, padding=1)
        self.lstm = nn.LSTM(8, 6, batch_first=True)
        self.bilstm = nn.LSTM(6, 5, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(10, 4, batch_first=True, bidirectional=True)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, ids):
        x = torch.relu(self.conv(self.embed(ids).transpose(1, 2))).transpose(1, 2)
        x = self.gru(self.bilstm(self.lstm(x)[0])[0])[0]
        return self.fc(self.attn(x, x, x, need_weights=False)[0])


def torch_model(cls, b_hn=False):
    """A PyTorch model with every array random (biases and running statistics included);
    its GRU's b_hn zero unless ``b_hn``."""
    torch.manual_seed(1)
    model = cls().eval()
    with torch.no_grad():
        for name, array in model.state_dict().items():
            if array.dtype.is_floating_point:
                array.copy_(torch.rand_like(array) + 0.5 if name.endswith("running_var") else
                            torch.randn_like(array) * 0.3)
        if isinstance(model, TorchSequence) and not b_hn:
            for suffix in ("_l0", "_l0_reverse"):
                getattr(model.gru, f"bias_hh{suffix}")[8:] = 0
    return model


def state_dict_file(model, path):
    np.savez(path, **{name: array.numpy() for name, array in model.state_dict().items()})
    return path


def inputs_of(cls):
    if cls is TorchImages:
        x = normal(2, 3, 8, 8)
        return x, x.transpose(0, 2, 3, 1)
    if cls is TorchDecoder:
        z = normal(2, 4)
        return z, z
    ids = RNG.integers(0, 20, (2, 7))
    return ids, ids


# --- the tests -------------------------------------------------------------------------------

CASES = [(Images, TorchImages, {"flatten": "reshape"}), (Images, TorchImages, {"flatten": "transpose"}),
         (Decoder, TorchDecoder, {"unflatten": "reshape"}), (Decoder, TorchDecoder, {"unflatten": "transpose"}),
         (Sequence, TorchSequence, {})]


@pytest.mark.parametrize("flax_cls, torch_cls, options", CASES, ids=lambda c: getattr(c, "__name__", str(c)))
def test_a_pytorch_state_dict_loads_into_the_flax_port_and_computes_the_same(flax_cls, torch_cls, options,
                                                                            tmp_path):
    source = torch_model(torch_cls)
    x_torch, x_flax = inputs_of(torch_cls)
    port = flax_cls(seed=5, **options)
    move = quiet(load_weights, port, x_flax, state_dict_file(source, tmp_path / "state.npz"))
    assert move.written
    with torch.no_grad():
        expected = source(torch.as_tensor(x_torch)).numpy()
    port.eval()
    got = np.asarray(port(jnp.asarray(x_flax)))
    if got.ndim == 4:
        got = got.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)


def test_each_kind_read_and_written_back_is_exact():
    for cls, x in ((Images, normal(2, 8, 8, 3)), (Decoder, normal(2, 4)), (Sequence, RNG.integers(0, 20, (2, 7)))):
        source, target = cls(seed=1), cls(seed=2)
        for path, variable in nnx.to_flat_state(nnx.state(source, (nnx.Param, nnx.BatchStat))):
            values = normal(*variable[...].shape)  # biases and statistics too
            variable[...] = jnp.asarray(np.abs(values) + 0.5 if path[-1] == "var" else values)
        before = params(source)
        layers = weighted_layers(source, x)
        kinds = {layer.kind for layer in layers}
        for layer, other in zip(layers, weighted_layers(target, x)):
            other.write(layer.arrays)
        assert all(np.array_equal(array, before[path]) for path, array in params(source).items())
        assert params(target).keys() == before.keys()
        for path, array in params(target).items():
            if "gru" in path:  # Flax's GRU folds b_hr, b_hz into dense_i's bias: the same sums
                continue
            np.testing.assert_array_equal(array, before[path], err_msg=str(path))
        assert kinds <= {"conv", "batch_norm", "dense", "layer_norm", "conv_transpose", "embedding", "lstm", "gru",
                         "attention"}
    assert {layer.kind for layer in weighted_layers(Sequence(), x)} == {"embedding", "conv", "lstm", "gru",
                                                                        "attention", "dense"}


def test_a_move_from_flax_to_flax_records_the_same():
    x = normal(2, 8, 8, 3)
    source = Images(seed=1)
    for _, variable in nnx.to_flat_state(nnx.state(source, nnx.BatchStat)):
        variable[...] = jnp.asarray(RNG.uniform(0.5, 1.5, variable[...].shape).astype(np.float32))
    a = record(source, x)
    target = Images(seed=2)
    quiet(move_weights, source, target, x)
    b = record(target, x)
    assert list(a.outputs) == list(b.outputs)
    for name in a.outputs:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    other = Images(seed=2, flatten="transpose")  # flattens in PyTorch's order: fc's columns in another order
    move = quiet(move_weights, source, other, x)
    fc = next(pair for pair in move.pairs if pair[0].path == "fc")
    assert "channels-last map flattened" in fc[0].conversion and "already in channels-first" in fc[1].conversion
    c = record(other, x)
    assert find_divergence(a.outputs, c.outputs, fan_ins=a.fan_ins, kinds=a.kinds, gains=a.gains).first is None


def test_the_flatten_and_unflatten_permutations_are_measured():
    x = normal(2, 8, 8, 3)
    fc = {flatten: next(layer for layer in weighted_layers(Images(flatten=flatten), x) if layer.path == "fc")
          for flatten in ("reshape", "transpose")}
    kernel = np.asarray(Images().fc.kernel[...]).T  # (10, 64): the same seed, so the same kernel
    assert "channels-last map flattened (4 positions x 16 channels, measured)" in fc["reshape"].conversion
    np.testing.assert_array_equal(fc["reshape"].arrays["weight"],
                                  kernel.reshape(10, 2, 2, 16).transpose(0, 3, 1, 2).reshape(10, 64))
    np.testing.assert_array_equal(fc["transpose"].arrays["weight"], kernel)
    up = {unflatten: weighted_layers(Decoder(unflatten=unflatten), normal(2, 4))[0]
          for unflatten in ("reshape", "transpose")}
    rows = np.asarray(Decoder().fc.kernel[...]).T  # (72, 4)
    assert "rows unflattened into a channels-last map" in up["reshape"].conversion
    np.testing.assert_array_equal(up["reshape"].arrays["weight"],
                                  rows.reshape(3, 3, 8, 4).transpose(2, 0, 1, 3).reshape(72, 4))
    np.testing.assert_array_equal(up["transpose"].arrays["weight"], rows)


def test_a_jitted_forward_falls_back_to_flaxs_flatten_idiom(tmp_path):
    class Jitted(nnx.Module):
        def __init__(self):
            self.conv = nnx.Conv(3, 4, (3, 3), padding="VALID", rngs=nnx.Rngs(0))
            self.fc = nnx.Linear(4 * 4 * 4, 2, rngs=nnx.Rngs(1))

        @nnx.jit
        def __call__(self, x):
            x = nnx.relu(self.conv(x))
            return self.fc(x.reshape(x.shape[0], -1))

    class Torch(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.fc = nn.Conv2d(3, 4, 3), nn.Linear(64, 2)

        def forward(self, x):
            return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))

    source = Torch().eval()
    x = normal(2, 3, 6, 6)
    port = Jitted()
    move = quiet(load_weights, port, x.transpose(0, 2, 3, 1), state_dict_file(source, tmp_path / "jitted.npz"))
    assert "taken to be" in move.pairs[1][1].conversion
    with torch.no_grad():
        expected = source(torch.as_tensor(x)).numpy()
    np.testing.assert_allclose(np.asarray(port(jnp.asarray(x.transpose(0, 2, 3, 1)))), expected, rtol=1e-5, atol=1e-5)


def test_a_gru_b_hn_the_cell_cannot_hold_is_refused_naming_the_layer_and_nothing_is_written(tmp_path):
    source = torch_model(TorchSequence, b_hn=True)
    path = state_dict_file(source, tmp_path / "b_hn.npz")
    ids = RNG.integers(0, 20, (2, 7))
    port = Sequence(seed=5)
    before = params(port)
    with pytest.raises(PortingError, match=r"gru.*b_hn"):
        quiet(load_weights, port, ids, path)
    after = params(port)
    assert all(np.array_equal(after[key], before[key]) for key in before)
    holder = Sequence(seed=5, gru_b_hn=True)  # dense_h given a bias: b_hn fits
    quiet(load_weights, holder, ids, path)
    holder.eval()
    with torch.no_grad():
        expected = source(torch.as_tensor(ids)).numpy()
    np.testing.assert_allclose(np.asarray(holder(jnp.asarray(ids))), expected, rtol=2e-5, atol=2e-5)


def test_a_move_between_pytorch_and_flax_agrees_at_every_layer():
    pytest.importorskip("rosetta_utils.porting.pytorch")
    from rosetta_utils.recorders.pytorch import record as record_torch

    source = torch_model(TorchImages)
    x_torch, x_flax = inputs_of(TorchImages)
    port = Images(seed=5)
    quiet(move_weights, source, port, x_torch, x_flax)
    a, b = record_torch(source, x_torch), record(port, x_flax)
    report = find_divergence(a.outputs, b.outputs, fan_ins=a.fan_ins, kinds=a.kinds, gains=a.gains, common=True)
    assert report.first is None, report.lines()
    back = TorchImages().eval()
    quiet(move_weights, port, back, x_flax, x_torch)
    for name, array in source.state_dict().items():
        if array.dtype.is_floating_point:
            np.testing.assert_array_equal(back.state_dict()[name].numpy(), array.numpy(), err_msg=name)


class Scaled(nnx.Module):
    def __init__(self):
        self.fc = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
        self.gain = nnx.Param(jnp.ones(4))  # a weight of the model's own, outside any layer

    def __call__(self, x):
        return self.fc(x) * self.gain[...]


class Grouped(nnx.Module):
    def __init__(self):
        self.conv = nnx.Conv(3, 4, (3, 3), rngs=nnx.Rngs(0))
        self.norm = nnx.GroupNorm(4, num_groups=2, rngs=nnx.Rngs(0))

    def __call__(self, x):
        return self.norm(self.conv(x))


class Simple(nnx.Module):
    def __init__(self):
        self.rnn = nnx.RNN(nnx.SimpleCell(3, 4, rngs=nnx.Rngs(0)))

    def __call__(self, x):
        return self.rnn(x)


@pytest.mark.parametrize("model, x, named", [
    (Scaled, (2, 4), r"jax: scaled: a .*Scaled holds weights \(gain\)"),
    (Grouped, (2, 5, 5, 3), r"jax: norm: a flax\.nnx\..*GroupNorm holds weights"),
    (Simple, (2, 5, 3), r"jax: rnn: a flax\.nnx\..*SimpleCell cell"),
])
def test_an_unknown_weighted_layer_is_refused_naming_it(model, x, named):
    with pytest.raises(PortingError, match=named):
        weighted_layers(model(), normal(*x))


def test_reading_changes_nothing_in_the_model():
    model = Images(seed=1)
    model.train()
    before, classes = params(model), {path: type(m) for path, m in nnx.iter_modules(model)}
    weighted_layers(model, normal(2, 8, 8, 3))
    assert model.bn.use_running_average is False
    assert {path: type(m) for path, m in nnx.iter_modules(model)} == classes
    after = params(model)
    assert all(np.array_equal(after[key], before[key]) for key in before)
