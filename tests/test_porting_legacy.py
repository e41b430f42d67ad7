"""rosetta_utils.porting.mxnet and .chainer: the weighted layers of small models of our own.

One network written twice, as a Gluon block (hybridized, its first dense deferred) and as a
Chainer chain, holds every kind both frameworks can move: a grouped, a depthwise, a 1-D and
a grouped transposed convolution, a batch norm, a dense reading a flattened feature map, an
embedding, a stacked bidirectional LSTM, a bidirectional GRU and a stacked GRU, a layer norm
and a dense without bias. Each kind's read -> write round trip is exact; the recurrent
layers' canonical arrays compute PyTorch's LSTM and GRU (a numpy reference, gates i, f, g, o
and r, z, n); a move MXNet -> Chainer (live) and Chainer -> MXNet (through a file) gives
recordings that agree, and a move into the same framework identical ones; what cannot move
is refused, naming the layer.
"""

from __future__ import annotations

import numpy as np
import pytest

from rosetta_utils.divergence import find_divergence
from rosetta_utils.frameworks import is_installed

pytestmark = pytest.mark.legacy

RNG = np.random.default_rng(7)
IMAGES = RNG.standard_normal((2, 4, 6, 6)).astype(np.float32)
IDS = RNG.integers(0, 20, (2, 5))
KINDS = ["conv", "batch_norm", "conv", "conv_transpose", "dense", "embedding", "conv", "lstm", "gru", "gru",
         "layer_norm", "dense"]
PATHS = ["conv", "bn", "dw", "up", "fc", "embed", "conv1d", "lstm", "gru", "gru2", "norm", "head"]


@pytest.fixture(scope="module")
def mxp():
    """The MXNet porting module (MXNet imported with it)."""
    if not is_installed("mxnet"):
        pytest.skip("needs MXNet (the legacy environment)")
    from rosetta_utils.porting import mxnet as module

    return module


@pytest.fixture(scope="module")
def chp():
    """The Chainer porting module (Chainer imported with it)."""
    if not is_installed("chainer"):
        pytest.skip("needs Chainer (the legacy environment)")
    from rosetta_utils.porting import chainer as module

    return module


def _mx_net(mxp, hybridize=True):
    mx, nn = mxp.mx, mxp.nn
    from mxnet.gluon import rnn

    class Net(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.conv = nn.Conv2D(8, 3, padding=1, groups=2, in_channels=4)
                self.bn = nn.BatchNorm(epsilon=1e-5, in_channels=8)
                self.dw = nn.Conv2D(16, 3, padding=1, groups=8, in_channels=8)
                self.up = nn.Conv2DTranspose(6, 2, strides=2, groups=2, in_channels=16)
                self.fc = nn.Dense(5)  # in_units deferred to the first call
                self.embed = nn.Embedding(20, 6)
                self.conv1d = nn.Conv1D(6, 3, padding=1, in_channels=6)
                self.lstm = rnn.LSTM(5, num_layers=2, bidirectional=True, layout="NTC", input_size=6)
                self.gru = rnn.GRU(4, bidirectional=True, layout="NTC", input_size=10)
                self.gru2 = rnn.GRU(3, num_layers=2, layout="NTC", input_size=8)
                self.norm = nn.LayerNorm(epsilon=1e-5, in_channels=3)
                self.head = nn.Dense(2, flatten=False, use_bias=False, in_units=3)

        def hybrid_forward(self, F, images, ids):
            flat = self.fc(self.up(self.dw(F.relu(self.bn(self.conv(images))))))
            sequence = F.transpose(self.conv1d(F.transpose(self.embed(ids), axes=(0, 2, 1))), axes=(0, 2, 1))
            return flat, self.head(self.norm(self.gru2(self.gru(self.lstm(sequence)))))

    net = Net()
    net.initialize(mx.init.Uniform(0.5))
    if hybridize:
        net.hybridize()
    return net


def _ch_net(chp):
    chainer, L = chp.chainer, chp.L
    import chainer.functions as F

    class Net(chainer.Chain):
        def __init__(self):
            super().__init__()
            with self.init_scope():
                self.conv = L.Convolution2D(4, 8, 3, pad=1, groups=2)
                self.bn = L.BatchNormalization(8, eps=1e-5)
                self.dw = L.DepthwiseConvolution2D(8, 2, 3, pad=1)
                self.up = L.Deconvolution2D(16, 6, 2, stride=2, groups=2)
                self.fc = L.Linear(None, 5)
                self.embed = L.EmbedID(20, 6)
                self.conv1d = L.Convolution1D(6, 6, 3, pad=1)
                self.lstm = L.NStepBiLSTM(2, 6, 5, 0.0)
                self.gru = L.NStepBiGRU(1, 10, 4, 0.0)
                self.gru2 = L.NStepGRU(2, 8, 3, 0.0)
                self.norm = L.LayerNormalization(3, eps=1e-5)
                self.head = L.Linear(3, 2, nobias=True)

        def forward(self, images, ids):
            flat = self.fc(self.up(self.dw(F.relu(self.bn(self.conv(images))))))
            sequence = F.transpose(self.conv1d(F.transpose(self.embed(ids), (0, 2, 1))), (0, 2, 1))
            _, _, ys = self.lstm(None, None, list(F.separate(sequence, axis=0)))
            _, ys = self.gru(None, ys)
            _, ys = self.gru2(None, ys)
            ys = F.stack(ys)
            normed = F.reshape(self.norm(F.reshape(ys, (-1, 3))), ys.shape)
            return flat, self.head(normed, n_batch_axes=2)

    return Net()


MX_INPUTS = (IMAGES, IDS.astype(np.float32))
CH_INPUTS = (IMAGES, IDS.astype(np.int32))


def _random_canonical(layers, seed=1):
    """Random canonical arrays of each layer's shapes (variances positive)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for layer in layers:
        drawn = {name: rng.uniform(-0.5, 0.5, array.shape).astype(np.float32) for name, array in layer.arrays.items()}
        if "running_var" in drawn:
            drawn["running_var"] = np.abs(drawn["running_var"]) + np.float32(0.5)
        arrays.append(drawn)
    return arrays


def _records(module, model, inputs):
    recording = module.recorder.record(model, inputs)
    if module.__name__.endswith("chainer"):  # L.LayerNormalization reads (N·T, C): the Gluon one's shape
        recording.outputs["norm"] = recording.outputs["norm"].reshape(recording["gru2"].shape)
    return recording


def _agree(first, second):
    report = find_divergence(first.outputs, second.outputs, first.fan_ins, kinds=first.kinds, gains=first.gains)
    assert report.first is None, "\n".join(report.lines())


# --- reading and writing, each kind ----------------------------------------------------------

@pytest.mark.parametrize("framework", ["mxnet", "chainer"])
def test_each_kind_round_trip_is_exact(framework, mxp, chp):
    module, net, inputs = ((mxp, _mx_net(mxp), MX_INPUTS) if framework == "mxnet"
                           else (chp, _ch_net(chp), CH_INPUTS))
    layers = module.weighted_layers(net, inputs)
    assert [layer.path for layer in layers] == PATHS
    assert [layer.kind for layer in layers] == KINDS
    assert all(array.dtype == np.float32 for layer in layers for array in layer.arrays.values())
    shapes = {layer.path: layer.shapes() for layer in layers}
    assert shapes["conv"]["weight"] == (8, 2, 3, 3) and shapes["dw"]["weight"] == (16, 1, 3, 3)
    assert shapes["up"]["weight"] == (16, 3, 2, 2) and shapes["fc"]["weight"] == (5, 6 * 12 * 12)
    assert shapes["head"] == {"weight": (2, 3)}
    assert shapes["lstm"]["weight_ih_l1_reverse"] == (20, 10) and shapes["gru2"]["weight_hh_l1"] == (9, 3)
    configs = {layer.path: layer.config for layer in layers}
    assert configs["conv"] == {"groups": 2, "stride": (1, 1), "dilation": (1, 1)}
    assert configs["dw"]["groups"] == 8 and configs["up"]["stride"] == (2, 2)
    assert configs["lstm"] == {"layers": 2, "directions": 2}
    assert configs["gru"]["flavor"] == "linear_before_reset" and configs["gru"]["holds_b_hn"] is True
    assert configs["bn"]["epsilon"] == pytest.approx(1e-5) and configs["norm"]["epsilon"] == pytest.approx(1e-5)
    drawn = _random_canonical(layers)
    for layer, arrays in zip(layers, drawn):
        layer.write(arrays)
    again = module.weighted_layers(net, inputs)
    for layer, arrays in zip(again, drawn):
        for name, array in arrays.items():
            np.testing.assert_array_equal(layer.arrays[name], array, err_msg=f"{layer.path} {name}")


def test_chainer_depthwise_channel_order(chp):
    """The canonical depthwise weight computes what a grouped convolution with it computes."""
    L = chp.L
    depthwise, grouped = L.DepthwiseConvolution2D(3, 2, 3, pad=1), L.Convolution2D(3, 6, 3, pad=1, groups=3)
    x = RNG.standard_normal((2, 3, 5, 5)).astype(np.float32)
    (layer,) = chp.weighted_layers(depthwise, x)
    assert layer.shapes() == {"weight": (6, 1, 3, 3), "bias": (6,)} and "multiplier" in layer.conversion
    depthwise.b.array[...] = RNG.standard_normal(6)
    (layer,) = chp.weighted_layers(depthwise, x)
    (target,) = chp.weighted_layers(grouped, x)
    target.write(layer.arrays)
    np.testing.assert_allclose(grouped(x).array, depthwise(x).array, rtol=1e-5, atol=1e-5)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _reference(x, arrays, layers, directions, gates):
    """PyTorch's LSTM (gates i, f, g, o) or GRU (r, z, n) in numpy, from canonical arrays."""
    x = x.astype(np.float64)
    for index in range(layers):
        outputs = []
        for direction in range(directions):
            suffix = f"_l{index}" + ("_reverse" if direction else "")
            w, u, b, c = (arrays[name + suffix].astype(np.float64)
                          for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
            hidden = u.shape[1]
            h, cell, steps = np.zeros((len(x), hidden)), np.zeros((len(x), hidden)), []
            for t in (range(x.shape[1] - 1, -1, -1) if direction else range(x.shape[1])):
                a, r = x[:, t] @ w.T + b, h @ u.T + c
                if gates == 4:
                    i, f, g, o = np.split(a + r, 4, axis=1)
                    cell = _sigmoid(f) * cell + _sigmoid(i) * np.tanh(g)
                    h = _sigmoid(o) * np.tanh(cell)
                else:
                    (ar, az, an), (rr, rz, rn) = np.split(a, 3, axis=1), np.split(r, 3, axis=1)
                    reset, update = _sigmoid(ar + rr), _sigmoid(az + rz)
                    h = (1 - update) * np.tanh(an + reset * rn) + update * h
                steps.append(h)
            outputs.append(np.stack(steps[::-1] if direction else steps, axis=1))
        x = np.concatenate(outputs, axis=-1)
    return x


@pytest.mark.parametrize("framework", ["mxnet", "chainer"])
def test_recurrent_arrays_compute_pytorchs_lstm_and_gru(framework, mxp, chp):
    module, net, inputs = ((mxp, _mx_net(mxp), MX_INPUTS) if framework == "mxnet"
                           else (chp, _ch_net(chp), CH_INPUTS))
    layers = {layer.path: layer for layer in module.weighted_layers(net, inputs)}
    recording = _records(module, net, inputs)
    x = recording["conv1d"].transpose(0, 2, 1)
    for path, layers_, directions, gates in (("lstm", 2, 2, 4), ("gru", 1, 2, 3), ("gru2", 2, 1, 3)):
        expected = _reference(x, layers[path].arrays, layers_, directions, gates)
        np.testing.assert_allclose(recording[path], expected, rtol=1e-4, atol=1e-5, err_msg=path)
        x = recording[path]


# --- moves -------------------------------------------------------------------------------------

def test_move_mxnet_to_chainer_and_back_through_a_file(mxp, chp, tmp_path):
    from rosetta_utils.porting import load_weights, move_weights, save_weights

    source, target = _mx_net(mxp), _ch_net(chp)
    move = move_weights(source, target, MX_INPUTS, CH_INPUTS, show=False)
    assert move.written and (move.source, move.target) == ("mxnet", "chainer")
    assert "multiplier" in move.table() and "stacked" in move.table()
    _agree(_records(mxp, source, MX_INPUTS), _records(chp, target, CH_INPUTS))

    path = save_weights(target, CH_INPUTS, tmp_path / "chainer.canonical.npz")
    fresh = _mx_net(mxp)
    load_weights(fresh, MX_INPUTS, path, show=False)
    _agree(_records(chp, target, CH_INPUTS), _records(mxp, fresh, MX_INPUTS))
    with mxp.mx.autograd.predict_mode():  # the hybridized graph computes with the written weights
        moved, original = fresh(*map(mxp.mx.nd.array, MX_INPUTS)), source(*map(mxp.mx.nd.array, MX_INPUTS))
    for a, b in zip(moved, original):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("framework", ["mxnet", "chainer"])
def test_move_into_the_same_framework_records_the_same_arrays(framework, mxp, chp):
    from rosetta_utils.porting import move_weights

    module, make, inputs = (mxp, lambda: _mx_net(mxp), MX_INPUTS) if framework == "mxnet" else \
        (chp, lambda: _ch_net(chp), CH_INPUTS)
    source, target = make(), make()
    if framework == "chainer":
        source.bn.avg_mean[...] = RNG.standard_normal(8)
        source.bn.avg_var[...] = RNG.uniform(0.5, 2, 8)
    move_weights(source, target, inputs, show=False)
    first, second = _records(module, source, inputs), _records(module, target, inputs)
    assert list(first.outputs) == list(second.outputs)
    for name in first.outputs:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


def test_a_dense_reading_a_flattened_map_needs_no_permutation(mxp, chp):
    """Both frameworks flatten channels first, PyTorch's order: the columns move as they are."""
    from rosetta_utils.porting import move_weights

    nn, L = mxp.nn, chp.L
    import chainer
    import chainer.functions as F

    gluon_net = nn.HybridSequential()
    gluon_net.add(nn.Conv2D(3, 3, in_channels=2), nn.Activation("relu"), nn.Flatten(), nn.Dense(4, in_units=27))
    gluon_net.initialize(mxp.mx.init.Uniform(0.5))

    class Chain(chainer.Chain):
        def __init__(self):
            super().__init__()
            with self.init_scope():
                self.conv, self.fc = L.Convolution2D(2, 3, 3), L.Linear(27, 4)

        def forward(self, x):
            return self.fc(F.reshape(F.relu(self.conv(x)), (len(x), -1)))

    x = RNG.standard_normal((2, 2, 5, 5)).astype(np.float32)
    chain = Chain()
    move = move_weights(gluon_net, chain, x, show=False)
    dense = move.pairs[1]
    assert dense[0].conversion == dense[1].conversion == ""
    np.testing.assert_array_equal(chain.fc.W.array, gluon_net[3].weight.data().asnumpy())
    with mxp.mx.autograd.predict_mode():
        expected = gluon_net(mxp.mx.nd.array(x)).asnumpy()
    with chainer.using_config("train", False):
        np.testing.assert_allclose(chain(x).array, expected, rtol=1e-5, atol=1e-6)


def test_reading_changes_nothing(mxp):
    net = _mx_net(mxp)
    mxp.weighted_layers(net, MX_INPUTS)
    before = {name: p.data().asnumpy().copy() for name, p in net.collect_params().items()}
    mxp.weighted_layers(net, MX_INPUTS)
    assert net._active and net.conv._active
    assert all(np.array_equal(before[name], p.data().asnumpy()) for name, p in net.collect_params().items())


# --- refusals ----------------------------------------------------------------------------------

def test_mxnet_refuses_what_it_does_not_know(mxp):
    nn = mxp.nn
    from mxnet.gluon import rnn

    from rosetta_utils.porting import PortingError

    for block, words in ((nn.PReLU(), "PReLU"), (nn.InstanceNorm(in_channels=3), "InstanceNorm"),
                         (rnn.RNN(4, layout="NTC", input_size=4), "rnn.RNN")):
        net = nn.HybridSequential()
        net.add(nn.Dense(4, flatten=False, in_units=4), block)
        net.initialize()
        with pytest.raises(PortingError, match=rf"mxnet: 1: .*{words}"):
            mxp.weighted_layers(net, RNG.standard_normal((2, 3, 4)).astype(np.float32))

    class Scaled(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.fc = nn.Dense(3, in_units=3)
                self.scale = self.params.get("scale", shape=(3,))

        def hybrid_forward(self, F, x, scale):
            return self.fc(x) * scale

    net = Scaled()
    net.initialize()
    with pytest.raises(PortingError, match="Scaled holds parameters of its own"):
        mxp.weighted_layers(net, np.ones((2, 3), np.float32))


def test_mxnet_refuses_values_a_layer_cannot_hold(mxp):
    from rosetta_utils.porting import PortingError

    nn = mxp.nn
    net = nn.HybridSequential()
    net.add(nn.BatchNorm(scale=False, in_channels=3))
    net.initialize()
    (layer,) = mxp.weighted_layers(net, np.ones((2, 3), np.float32))
    assert "fix_gamma" in layer.conversion and np.all(layer.arrays["weight"] == 1)
    layer.write({**layer.arrays, "bias": np.full(3, 0.5, np.float32)})
    assert np.all(net[0].beta.data().asnumpy() == 0.5)
    with pytest.raises(PortingError, match="0: a BatchNorm built with scale=False"):
        layer.write({**layer.arrays, "weight": np.full(3, 2, np.float32)})

    layers = mxp.weighted_layers(_mx_net(mxp), MX_INPUTS)
    gru = layers[PATHS.index("gru")]
    with pytest.raises(PortingError, match="mxnet: gru: .*non-finite"):
        gru.write({name: np.full_like(array, np.nan) for name, array in gru.arrays.items()})


def test_chainer_refuses_what_it_does_not_know(chp):
    import chainer

    from rosetta_utils.porting import PortingError

    L = chp.L
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    for link, words in ((L.PReLU(3), "PReLU"), (L.LSTM(3, 4), "a LSTM"), (L.Bias(shape=(3,)), "Bias")):
        net = chainer.Sequential(L.Linear(3, 3), link)
        with pytest.raises(PortingError, match=rf"chainer: 1: .*{words}"):
            chp.weighted_layers(net, x)
    rnn = L.NStepRNNTanh(1, 3, 4, 0.0)
    with pytest.raises(PortingError, match="chainer: nsteprnntanh: a NStepRNNTanh"):
        chp.weighted_layers(rnn, (None, [x, x]))

    class Scaled(chainer.Chain):
        def __init__(self):
            super().__init__()
            with self.init_scope():
                self.fc = L.Linear(3, 3)
                self.scale = chainer.Parameter(np.ones(3, np.float32))

        def forward(self, x):
            return self.fc(x) * self.scale

    with pytest.raises(PortingError, match="Scaled holds parameters of its own"):
        chp.weighted_layers(Scaled(), x)

    bn = L.BatchNormalization(3, use_gamma=False)
    (layer,) = chp.weighted_layers(bn, x)
    assert layer.conversion == "no gamma: weight read as ones"
    with pytest.raises(PortingError, match="batchnormalization: a BatchNormalization without its gamma"):
        layer.write({**layer.arrays, "weight": np.full(3, 2, np.float32)})


def test_mxnet_writes_into_a_conv1d_that_ran(mxp):
    """After a run in predict mode MKL-DNN may hold a Conv1D's weight in its own layout, into
    which Parameter.set_data's copy fails: the write goes through an operator instead."""
    mx, nn = mxp.mx, mxp.nn
    x = RNG.standard_normal((2, 16, 20)).astype(np.float32)
    ran, fresh = nn.Conv1D(24, 5, padding=2, in_channels=16), nn.Conv1D(24, 5, padding=2, in_channels=16)
    ran.initialize()
    fresh.initialize()
    (layer,) = mxp.weighted_layers(ran, x)
    drawn = _random_canonical([layer])[0]
    layer.write(drawn)
    fresh.weight.set_data(mx.nd.array(drawn["weight"]))
    fresh.bias.set_data(mx.nd.array(drawn["bias"]))
    with mx.autograd.predict_mode():
        np.testing.assert_array_equal(ran(mx.nd.array(x)).asnumpy(), fresh(mx.nd.array(x)).asnumpy())


def test_the_zoo_moves_between_gluon_and_chainer(mxp, chp):
    """Every zoo model both frameworks have, at one's own random initialisation, moved into the
    other's: the layers both record agree."""
    import sys
    from pathlib import Path

    from rosetta_utils.porting import move_weights

    sys.path.insert(0, str(Path(__file__).parent / "zoo"))
    import spec
    import zoo_chainer
    import zoo_mxnet

    zoos = {"mxnet": (zoo_mxnet, mxp), "chainer": (zoo_chainer, chp)}
    for model, about in spec.MODELS.items():
        if not {"mxnet", "chainer"} <= set(about["frameworks"]):
            continue
        probe = spec.probe(model, about["probes"][0])
        for a, b in (("mxnet", "chainer"), ("chainer", "mxnet")):
            (zoo_a, module_a), (zoo_b, module_b) = zoos[a], zoos[b]
            (source, names), (target, other) = zoo_a.port(model), zoo_b.port(model)
            inputs_a, inputs_b = zoo_a.framework_inputs(model, probe), zoo_b.framework_inputs(model, probe)
            move_weights(source, target, inputs_a, inputs_b, show=False)
            common = {name: name for name in names if name in other}
            _agree(module_a.recorder.record(source, inputs_a, names=common),
                   module_b.recorder.record(target, inputs_b, names=common))
