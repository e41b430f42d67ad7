"""rosetta_utils.recorders.mxnet and .chainer: small models of our own, recorded layer by layer.

Each checks what a recording holds: the layers' paths in the order they ran, the kinds and
fan-ins their configuration gives, the values (against the layer's own computation), the
notes; that the model is left as it was (hooks gone, a hybridized model still hybridized),
even when its forward raises; and that an MXNet and a Chainer port of one network record
the same arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

from rosetta_utils.frameworks import is_installed
from rosetta_utils.recorders import (
    RecordingError,
    norm_terms,
    recurrent_fan_in,
)

pytestmark = pytest.mark.legacy

RNG = np.random.default_rng(3)
IMAGES = RNG.standard_normal((2, 3, 15, 15)).astype(np.float32)
IDS = RNG.integers(0, 40, (3, 7))


@pytest.fixture(scope="module")
def mxr():
    """The MXNet recorder module (MXNet imported with it)."""
    if not is_installed("mxnet"):
        pytest.skip("needs MXNet (the legacy environment)")
    from rosetta_utils.recorders import mxnet as recorder

    return recorder


@pytest.fixture(scope="module")
def chr_():
    """The Chainer recorder module (Chainer imported with it)."""
    if not is_installed("chainer"):
        pytest.skip("needs Chainer (the legacy environment)")
    from rosetta_utils.recorders import chainer as recorder

    return recorder


def _set(parameter, values):
    parameter.set_data(np.asarray(values, np.float32))


# --- MXNet --------------------------------------------------------------------------------

def _mx_net(mxr, seed=0):
    """features (conv, batch norm, relu, pools, a grouped convolution, dropout, flatten),
    fc with a fused relu, head, tanh: a block of our own around a HybridSequential."""
    mx, nn = mxr.mx, mxr.nn

    class Net(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.features = nn.HybridSequential()
                self.features.add(nn.Conv2D(8, 3, padding=1, in_channels=3), nn.BatchNorm(in_channels=8),
                                  nn.Activation("relu"), nn.MaxPool2D(2, ceil_mode=True),
                                  nn.Conv2D(16, 2, groups=2, use_bias=False, in_channels=8), nn.LeakyReLU(0.1),
                                  nn.AvgPool2D(3, 2, 1, count_include_pad=False), nn.Dropout(0.5), nn.Flatten())
                self.fc = nn.Dense(12, activation="relu", in_units=256)
                self.head = nn.Dense(5, in_units=12)
                self.out = nn.HybridLambda("tanh")

        def hybrid_forward(self, F, x):
            return self.out(self.head(self.fc(self.features(x))))

    net = Net()
    net.initialize(mx.init.Xavier(rnd_type="gaussian", magnitude=3), ctx=mx.cpu())
    rng = np.random.default_rng(seed)
    bn = net.features[1]
    _set(bn.running_mean, rng.standard_normal(8))
    _set(bn.running_var, rng.uniform(0.5, 2.0, 8))
    _set(bn.gamma, rng.uniform(0.5, 1.5, 8))
    _set(bn.beta, rng.standard_normal(8))
    return net


MX_PATHS = ["input", "features.0", "features.1", "features.2", "features.3", "features.4", "features.5",
            "features.6", "features.7", "features.8", "fc", "fc.act", "head", "out"]


def test_mxnet_conv_net_paths_kinds_fan_ins_and_values(mxr):
    net = _mx_net(mxr)
    recording = mxr.record(net, IMAGES)
    assert list(recording.outputs) == MX_PATHS
    kinds = [recording.kinds[p] for p in MX_PATHS[1:]]
    assert kinds == ["conv", "norm", "activation", "pool", "conv", "activation", "pool", "dropout", "reshape",
                     "dense", "activation", "dense", "activation"]
    fan_ins = {p: recording.fan_ins[p] for p in MX_PATHS}
    assert fan_ins["features.0"] == 3 * 9 + 1
    assert fan_ins["features.3"] == 1  # max pool
    assert fan_ins["features.4"] == 4 * 4  # 8 channels in 2 groups, 2x2 kernel, no bias
    assert fan_ins["features.6"] == 9  # average pool's window
    assert fan_ins["features.7"] == fan_ins["features.8"] == 0
    assert fan_ins["fc"] == 257 and fan_ins["head"] == 13 and fan_ins["fc.act"] == 1
    x, y = recording["features.0"], recording["features.1"]
    bn = net.features[1]
    scale = bn.gamma.data().asnumpy() / np.sqrt(bn.running_var.data().asnumpy() + 1e-5)
    expected = (x - bn.running_mean.data().asnumpy()[:, None, None]) * scale[:, None, None] \
        + bn.beta.data().asnumpy()[:, None, None]
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    terms = (fan_ins["features.1"], recording.gains.get("features.1", 1.0))
    assert terms == pytest.approx(norm_terms(x, y, (), scale[None, :, None, None]))
    assert recording["features.3"].shape == (2, 8, 8, 8)  # ceil_mode: 15 -> 8
    np.testing.assert_array_equal(recording["features.7"], recording["features.6"])  # dropout off
    assert recording["features.8"].shape == (2, 256)
    assert (recording["fc"] < 0).any()  # the dense layer's own output, before its fused relu
    np.testing.assert_array_equal(recording["fc.act"], np.maximum(recording["fc"], 0))
    with mxr.autograd.predict_mode():
        out = net(mxr.mx.nd.array(IMAGES)).asnumpy()
    np.testing.assert_array_equal(recording["out"], out)
    assert not any("flattens" in note for note in recording.notes)  # fc reads a flat input
    assert not any("hybridized" in note for note in recording.notes)


def test_mxnet_hybridized_records_the_same_and_stays_hybridized(mxr):
    net = _mx_net(mxr)
    imperative = mxr.record(net, IMAGES)
    net.hybridize(static_alloc=True, static_shape=True)
    first = net(mxr.mx.nd.array(IMAGES)).asnumpy()
    cached, flags = net._cached_op, list(net._flags)
    assert cached is not None
    hybrid = mxr.record(net, IMAGES)
    assert list(hybrid.outputs) == list(imperative.outputs)
    for name in imperative.outputs:
        np.testing.assert_array_equal(hybrid[name], imperative[name])
    assert hybrid.fan_ins == imperative.fan_ins
    assert any("hybridized" in note and "imperatively" in note for note in hybrid.notes)
    assert net._active and net.features._active and net.features[0]._active
    assert net._cached_op is cached and net._flags == flags
    np.testing.assert_allclose(net(mxr.mx.nd.array(IMAGES)).asnumpy(), first, rtol=1e-6, atol=1e-6)
    assert all(not block._forward_hooks and not block._forward_pre_hooks for block in mxr._blocks(net))


def _mx_rnn(mxr, hybridize):
    nn, rnn = mxr.nn, mxr.rnn
    net = nn.HybridSequential()
    net.add(nn.Embedding(40, 16), rnn.LSTM(24, layout="NTC", input_size=16),
            rnn.GRU(12, num_layers=2, layout="NTC", bidirectional=True, input_size=24),
            nn.Dense(6, flatten=False, in_units=24))
    net.initialize(mxr.mx.init.Uniform(0.3))
    if hybridize:
        net.hybridize()
        net(mxr.mx.nd.array(IDS))
    return net


@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
def test_mxnet_recurrent_layers(mxr, hybridize):
    net = _mx_rnn(mxr, hybridize)
    recording = mxr.record(net, IDS)
    assert list(recording.outputs) == ["input", "0", "1", "2", "3"]
    assert [recording.kinds[p] for p in ("0", "1", "2", "3")] == ["embedding", "recurrent", "recurrent", "dense"]
    steps = IDS.shape[1]
    assert recording.fan_ins["1"] == recurrent_fan_in(16, 24, steps)
    assert recording.fan_ins["2"] == recurrent_fan_in(24, 12, steps, 2) + recurrent_fan_in(24, 12, steps, 2)
    assert recording["1"].shape == (3, steps, 24) and recording["2"].shape == (3, steps, 24)
    with mxr.autograd.predict_mode():
        own = net[1](mxr.mx.nd.array(recording["0"])).asnumpy()
        out = net(mxr.mx.nd.array(IDS)).asnumpy()
    np.testing.assert_allclose(recording["1"], own, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(recording["3"], out, rtol=1e-5, atol=1e-6)
    assert any("hybridized" in note for note in recording.notes) == hybridize
    assert net._active == hybridize


def test_mxnet_names_and_never_ran(mxr):
    net = _mx_net(mxr)
    recording = mxr.record(net, IMAGES, names={"features.0": "conv1", "fc": "fc1", "out": "tanh"})
    assert list(recording.outputs) == ["input", "conv1", "fc1", "tanh"]
    assert recording.kinds["conv1"] == "conv" and recording.fan_ins["fc1"] == 257
    with pytest.raises(RecordingError, match="features.99"):
        mxr.record(net, IMAGES, names={"features.0": "conv1", "features.99": "nowhere"})
    with pytest.raises(RecordingError, match="gluon Block"):
        mxr.record(lambda x: x, IMAGES)


def test_mxnet_hooks_removed_when_the_forward_raises(mxr):
    nn = mxr.nn

    class Broken(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.dense = nn.Dense(4, activation="relu", in_units=6)
                self.norm = nn.LayerNorm(in_channels=4)

        def hybrid_forward(self, F, x):
            self.norm(self.dense(x))
            raise ValueError("this forward fails after its layers ran")

    net = Broken()
    net.initialize()
    net.hybridize()
    with pytest.raises(ValueError, match="forward fails"):
        mxr.record(net, np.ones((2, 6), np.float32))
    assert all(not block._forward_hooks and not block._forward_pre_hooks for block in mxr._blocks(net))
    assert net._active and net.dense._active


def test_mxnet_channels_last_layers_norms_and_lambdas(mxr):
    nn = mxr.nn
    net = nn.HybridSequential()  # MXNet's CPU convolutions are channels first only; its pools are not
    net.add(nn.MaxPool2D(3, 2, layout="NHWC"), nn.BatchNorm(axis=3, in_channels=3), nn.Flatten(),
            nn.Dense(6, in_units=147), nn.LayerNorm(in_channels=6), nn.GELU(), nn.HybridLambda("softmax"),
            nn.HybridLambda(lambda F, x: x * 2))
    net.initialize()
    images = np.transpose(IMAGES, (0, 2, 3, 1)).copy()
    recording = mxr.record(net, images)
    native = mxr.record(net, images, layout="native")
    assert recording["input"].shape == (2, 3, 15, 15) and native["input"].shape == (2, 15, 15, 3)
    assert recording["0"].shape == (2, 3, 7, 7) and native["0"].shape == (2, 7, 7, 3)
    np.testing.assert_array_equal(recording["1"], np.moveaxis(native["1"], -1, 1))
    np.testing.assert_array_equal(recording["2"], recording["1"].reshape(2, -1))  # flattened channels first
    np.testing.assert_array_equal(native["2"], native["1"].reshape(2, -1))
    assert [recording.kinds[p] for p in "01234567"] == ["pool", "norm", "reshape", "dense", "norm", "activation",
                                                        "softmax", "other"]
    assert recording.fan_ins["6"] == 6 + 2 and recording.fan_ins["7"] == 1
    assert recording.fan_ins["4"] == norm_terms(recording["3"], recording["4"], (-1,), 1.0)[0]
    assert any("softmax taken over the last axis" in note for note in recording.notes)
    pooled = nn.HybridSequential()
    pooled.add(nn.GlobalAvgPool2D(layout="NHWC"), nn.GlobalAvgPool2D())
    mixed = mxr.record(pooled, images)  # the second reads the (2, 1, 1, 3) map as channels first
    assert mixed.fan_ins == {"input": 0, "0": 15 * 15, "1": 1 * 3}
    assert any("mixes channels-first and channels-last" in note for note in mixed.notes)


# --- Chainer ------------------------------------------------------------------------------

def _ch_net(chr_, seed=0):
    chainer, L = chr_.chainer, chr_.L
    F = chainer.functions

    class Net(chainer.Chain):
        def __init__(self):
            super().__init__()
            with self.init_scope():
                self.conv1 = L.Convolution2D(3, 8, 3, pad=1)
                self.bn1 = L.BatchNormalization(8, eps=1e-5)
                self.blocks = chainer.ChainList(L.Convolution2D(8, 16, 2, groups=2, nobias=True),
                                                L.DepthwiseConvolution2D(16, 1, 3, pad=1))
                self.up = L.Deconvolution2D(16, 4, 2, stride=2)
                self.norm = L.GroupNormalization(2, 4)
                self.fc = L.Linear(None, 5)

        def forward(self, x):
            h = F.max_pooling_2d(F.relu(self.bn1(self.conv1(x))), 2, cover_all=True)
            for link in self.blocks:
                h = link(h)
            return self.fc(F.relu(self.norm(self.up(h))))

    net = Net()
    rng = np.random.default_rng(seed)
    net.bn1.avg_mean[...] = rng.standard_normal(8)
    net.bn1.avg_var[...] = rng.uniform(0.5, 2.0, 8)
    return net


def test_chainer_conv_net_paths_kinds_fan_ins_and_values(chr_):
    net = _ch_net(chr_)
    recording = chr_.record(net, IMAGES)
    paths = ["input", "conv1", "bn1", "blocks.0", "blocks.1", "up", "norm", "fc"]
    assert list(recording.outputs) == paths
    assert [recording.kinds[p] for p in paths[1:]] == ["conv", "norm", "conv", "conv", "conv", "norm", "dense"]
    assert recording.fan_ins["conv1"] == 28 and recording.fan_ins["blocks.0"] == 16
    assert recording.fan_ins["blocks.1"] == 10 and recording.fan_ins["up"] == 16 * 4 + 1
    assert recording.fan_ins["fc"] == 4 * 14 * 14 + 1
    x, y = recording["conv1"], recording["bn1"]
    scale = net.bn1.gamma.array / np.sqrt(net.bn1.avg_var + 1e-5)
    expected = (x - net.bn1.avg_mean[:, None, None]) * scale[:, None, None] + net.bn1.beta.array[:, None, None]
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    assert recording.fan_ins["bn1"] == norm_terms(x, y, (), scale[None, :, None, None])[0]
    assert recording["blocks.0"].shape == (2, 16, 7, 7)  # the pool's cover_all: 15 -> 8, then 8 -> 7
    with chr_.chainer.using_config("train", False):
        np.testing.assert_array_equal(recording["fc"], net(IMAGES).array)
    assert any("Linear flattens" in note for note in recording.notes)
    assert not chr_.chainer._get_link_hooks()


def _ch_rnn(chr_, link, equal=True):
    chainer, L = chr_.chainer, chr_.L
    F = chainer.functions

    class Net(chainer.Chain):
        def __init__(self):
            super().__init__()
            with self.init_scope():
                self.embed = L.EmbedID(40, 16)
                self.rnn = link
                self.fc = L.Linear(link.out_size * link.direction, 6)

        def forward(self, ids):
            xs = list(F.separate(self.embed(ids), axis=0))
            if not equal:
                xs = [x[:len(x) - i] for i, x in enumerate(xs)]
            states = (None, None) if isinstance(self.rnn, (L.NStepLSTM, L.NStepBiLSTM)) else (None,)
            ys = self.rnn(*states, xs)[-1]
            return self.fc(F.stack(ys) if equal else ys[0], n_batch_axes=2 if equal else 1)

    return Net()


def test_chainer_nstep_layers(chr_):
    L = chr_.L
    steps = IDS.shape[1]
    lstm = chr_.record(_ch_rnn(chr_, L.NStepLSTM(1, 16, 24, 0.0)), IDS)
    assert list(lstm.outputs) == ["input", "embed", "rnn", "fc"]
    assert [lstm.kinds[p] for p in ("embed", "rnn", "fc")] == ["embedding", "recurrent", "dense"]
    assert lstm["rnn"].shape == (3, steps, 24) and lstm.fan_ins["rnn"] == recurrent_fan_in(16, 24, steps)
    assert not any("flattens" in note for note in lstm.notes)  # fc keeps two batch axes
    gru = chr_.record(_ch_rnn(chr_, L.NStepBiGRU(2, 16, 12, 0.0)), IDS)
    assert gru["rnn"].shape == (3, steps, 24)
    assert gru.fan_ins["rnn"] == recurrent_fan_in(16, 12, steps, 2) + recurrent_fan_in(24, 12, steps, 2)
    with pytest.raises(RecordingError, match="lengths"):
        chr_.record(_ch_rnn(chr_, L.NStepGRU(1, 16, 12, 0.0), equal=False), IDS)
    assert not chr_.chainer._get_link_hooks()
    # a recording that leaves the ragged layer out records the others
    kept = chr_.record(_ch_rnn(chr_, L.NStepGRU(1, 16, 12, 0.0), equal=False), IDS, names={"embed": "embed"})
    assert list(kept.outputs) == ["input", "embed"]


def test_chainer_step_link_keeps_its_first_step(chr_):
    chainer, L = chr_.chainer, chr_.L

    class Steps(chainer.Chain):
        def __init__(self):
            super().__init__()
            with self.init_scope():
                self.lstm = L.LSTM(5, 6)
                self.out = L.Linear(6, 2)

        def forward(self, x):
            self.lstm.reset_state()
            for t in range(x.shape[1]):
                h = self.lstm(x[:, t])
            return self.out(h)

    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    recording = chr_.record(Steps(), x)
    assert list(recording.outputs) == ["input", "lstm", "out"]  # not lstm.upward, lstm.lateral
    assert recording.kinds["lstm"] == "recurrent" and recording.fan_ins["lstm"] == recurrent_fan_in(5, 6, 1)
    assert any("lstm ran more than once" in note for note in recording.notes)


def test_chainer_names_never_ran_and_hooks_removed_on_error(chr_):
    chainer, L = chr_.chainer, chr_.L
    net = _ch_net(chr_)
    recording = chr_.record(net, IMAGES, names={"blocks.1": "depthwise", "conv1": "conv"})
    assert list(recording.outputs) == ["input", "conv", "depthwise"]
    with pytest.raises(RecordingError, match="never run.*'absent'"):
        chr_.record(net, IMAGES, names={"conv1": "conv", "absent": "x"})

    class Broken(chainer.Chain):
        def __init__(self):
            super().__init__()
            with self.init_scope():
                self.fc = L.Linear(6, 4)

        def forward(self, x):
            self.fc(x)
            raise ValueError("this forward fails after its layers ran")

    with pytest.raises(ValueError, match="forward fails"):
        chr_.record(Broken(), np.ones((2, 6), np.float32))
    assert not chainer._get_link_hooks() and chainer.config.train
    with pytest.raises(RecordingError, match="chainer.Link"):
        chr_.record(object(), IMAGES)


# --- one network, two frameworks ----------------------------------------------------------

def test_mxnet_and_chainer_ports_record_the_same_arrays(mxr, chr_):
    """conv -> batch norm -> relu -> max pool -> dense, the same weights in both."""
    nn = mxr.nn
    mx_net = nn.HybridSequential()
    mx_net.add(nn.Conv2D(6, 3, padding=1, in_channels=3), nn.BatchNorm(in_channels=6), nn.Activation("relu"),
               nn.MaxPool2D(2), nn.Dense(4, in_units=6 * 7 * 7))
    mx_net.initialize()
    chainer, L = chr_.chainer, chr_.L
    F = chainer.functions

    class ChNet(chainer.Chain):
        def __init__(self):
            super().__init__()
            with self.init_scope():
                self.conv = L.Convolution2D(3, 6, 3, pad=1)
                self.bn = L.BatchNormalization(6, eps=1e-5)
                self.fc = L.Linear(6 * 7 * 7, 4)

        def forward(self, x):
            return self.fc(F.max_pooling_2d(F.relu(self.bn(self.conv(x))), 2, cover_all=False))

    ch_net = ChNet()
    rng = np.random.default_rng(11)
    weights = {"conv.W": rng.standard_normal((6, 3, 3, 3)) * 0.3, "conv.b": rng.standard_normal(6),
               "gamma": rng.uniform(0.5, 1.5, 6), "beta": rng.standard_normal(6), "mean": rng.standard_normal(6),
               "var": rng.uniform(0.5, 2.0, 6), "fc.W": rng.standard_normal((4, 294)) * 0.1,
               "fc.b": rng.standard_normal(4)}
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    conv, bn, fc = mx_net[0], mx_net[1], mx_net[4]
    for parameter, key in [(conv.weight, "conv.W"), (conv.bias, "conv.b"), (bn.gamma, "gamma"), (bn.beta, "beta"),
                           (bn.running_mean, "mean"), (bn.running_var, "var"), (fc.weight, "fc.W"),
                           (fc.bias, "fc.b")]:
        _set(parameter, weights[key])
    for array, key in [(ch_net.conv.W.array, "conv.W"), (ch_net.conv.b.array, "conv.b"),
                       (ch_net.bn.gamma.array, "gamma"), (ch_net.bn.beta.array, "beta"), (ch_net.bn.avg_mean, "mean"),
                       (ch_net.bn.avg_var, "var"), (ch_net.fc.W.array, "fc.W"), (ch_net.fc.b.array, "fc.b")]:
        array[...] = weights[key]
    x = IMAGES[:, :, :14, :14].copy()
    mx_rec = mxr.record(mx_net, x, names={"0": "conv", "1": "bn", "4": "fc"})
    ch_rec = chr_.record(ch_net, x, names={"conv": "conv", "bn": "bn", "fc": "fc"})
    assert list(mx_rec.outputs) == list(ch_rec.outputs) == ["input", "conv", "bn", "fc"]
    assert mx_rec.kinds == ch_rec.kinds
    assert mx_rec.fan_ins["conv"] == ch_rec.fan_ins["conv"] and mx_rec.fan_ins["fc"] == ch_rec.fan_ins["fc"]
    for name in mx_rec.outputs:
        np.testing.assert_allclose(mx_rec[name], ch_rec[name], rtol=1e-5, atol=1e-5)
