"""The zoo in MXNet Gluon: each model of :mod:`spec` as a ``HybridBlock`` (the image models and
the decoder hybridized), loaded from PyTorch's ``state_dict`` with ``Parameter.set_data`` and
recorded by ``rosetta_utils.recorders.mxnet``.

Gluon keeps PyTorch's layouts: a dense weight is (out, in), a convolution's (out, in / groups,
kh, kw), a transposed convolution's (in, out, kh, kw), and ``rnn.LSTM`` / ``rnn.GRU`` hold
PyTorch's four arrays per direction (``l0_`` forward, ``r0_`` backward; ``i2h`` for ``ih``,
``h2h`` for ``hh``) in PyTorch's gate order (LSTM i, f, c, o; GRU r, z, n), so every move is a
copy under another name. What Gluon has no block for (ReLU6, the softmax, GELU's tanh form, a
hard sigmoid) is a ``HybridLambda`` of a named function.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

np.bool = bool  # MXNet 1.9 still reads numpy's removed alias

import mxnet as mx  # noqa: E402
from mxnet.gluon import nn, rnn  # noqa: E402

import spec  # noqa: E402

#: Gluon has a block for every layer of its models (a HybridLambda where it has no class).
ABSENT: dict[str, set[str]] = {model: set() for model, about in spec.MODELS.items() if "mxnet" in about["frameworks"]}

#: Traps that make the feature map too small for ``fc`` (256 inputs): the port stops with a shape
#: error there, so the recording keeps the layers before it.
FC_UNREACHABLE = {"conv_no_padding", "max_pool_floor"}

#: The slope ``mx.nd.LeakyReLU`` takes when none is given (Gluon's ``nn.LeakyReLU`` asks for one).
DEFAULT_LEAKY_SLOPE = 0.25


# --- the functions HybridLambda wraps (named: the recorder reads the kind from the name) -------

def softmax_over(axis: int):
    """``F.softmax`` over ``axis``: Gluon 1.9 has no softmax block."""
    def softmax(F, x):
        return F.softmax(x, axis=axis)
    return softmax


def relu6(F, x):
    return F.clip(x, 0.0, 6.0)


def gelu(F, x):
    """GELU's tanh approximation, written out (``nn.GELU`` computes the exact, erf form)."""
    return 0.5 * x * (1.0 + F.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def hard_sigmoid(F, x):
    return F.hard_sigmoid(x)


# --- the models ----------------------------------------------------------------------------------

class MLP(nn.HybridBlock):
    def __init__(self, trap=None, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.norm_in = nn.LayerNorm(epsilon=1e-3 if trap == "ln_eps_1e-3" else 1e-5, in_channels=16)
            self.fc1 = nn.Dense(32, in_units=16)
            self.gelu = nn.HybridLambda(gelu) if trap == "gelu_tanh" else nn.GELU()
            self.fc2 = nn.Dense(32, in_units=32)
            self.norm = nn.LayerNorm(epsilon=1e-5, in_channels=32)
            self.tanh = nn.Activation("tanh")
            self.head = nn.Dense(5, in_units=32)
            self.softmax = nn.HybridLambda(softmax_over(0 if trap == "softmax_wrong_axis" else -1))

    def hybrid_forward(self, F, x):
        x = self.gelu(self.fc1(self.norm_in(x)))
        x = self.tanh(self.norm(self.fc2(x)))
        return self.softmax(self.head(x))


class CNN(nn.HybridBlock):
    def __init__(self, trap=None, **kwargs):
        super().__init__(**kwargs)
        self.reaches_fc = trap not in FC_UNREACHABLE
        with self.name_scope():
            self.conv1 = nn.Conv2D(8, 3, padding=0 if trap == "conv_no_padding" else 1, in_channels=3)
            self.bn1 = nn.BatchNorm(epsilon=1e-5, in_channels=8)
            self.relu1 = nn.Activation("relu")
            self.pool1 = nn.MaxPool2D(2, ceil_mode=trap != "max_pool_floor")
            self.conv2 = nn.Conv2D(16, 2, in_channels=8)
            self.relu2 = nn.Activation("relu")
            self.pool2 = nn.AvgPool2D(3, strides=2, padding=1, count_include_pad=trap == "avg_pool_counts_padding")
            self.flatten = nn.Flatten()
            self.fc = nn.Dense(10, in_units=256)

    def hybrid_forward(self, F, x):
        x = self.pool1(self.relu1(self.bn1(self.conv1(x))))
        x = self.flatten(self.pool2(self.relu2(self.conv2(x))))
        return self.fc(x) if self.reaches_fc else x


class Separable(nn.HybridBlock):
    def __init__(self, trap=None, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dw = nn.Conv2D(8, 3, padding=1, groups=8, in_channels=8)
            self.pw = nn.Conv2D(16, 1, in_channels=8)
            self.bn = nn.BatchNorm(epsilon=1e-5, in_channels=16)
            self.relu6 = nn.Activation("relu") if trap == "relu6_as_relu" else nn.HybridLambda(relu6)
            self.gap = nn.GlobalMaxPool2D() if trap == "global_max_for_average" else nn.GlobalAvgPool2D()
            self.flatten = nn.Flatten()
            self.fc = nn.Dense(4, in_units=16)

    def hybrid_forward(self, F, x):
        x = self.relu6(self.bn(self.pw(self.dw(x))))
        return self.fc(self.flatten(self.gap(x)))


class TextConv(nn.HybridBlock):
    def __init__(self, trap=None, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = nn.Embedding(50, 16)
            self.conv = nn.Conv1D(24, 5, padding=0 if trap == "conv1d_valid" else 2, in_channels=16)
            self.relu = nn.Activation("relu")
            self.fc = nn.Dense(3, in_units=24)

    def hybrid_forward(self, F, ids):
        x = F.transpose(self.embed(ids), axes=(0, 2, 1))
        x = self.relu(self.conv(x))
        return self.fc(F.max(x, axis=2))


class LSTMTagger(nn.HybridBlock):
    def __init__(self, trap=None, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = nn.Embedding(40, 16)
            self.lstm = rnn.LSTM(24, layout="NTC", input_size=16)
            self.fc = nn.Dense(6, in_units=24, flatten=False)

    def hybrid_forward(self, F, ids):
        return self.fc(self.lstm(self.embed(ids)))


class BiGRU(nn.HybridBlock):
    def __init__(self, trap=None, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.gru = rnn.GRU(12, layout="NTC", bidirectional=True, input_size=8)
            self.fc = nn.Dense(3, in_units=24, flatten=False)

    def hybrid_forward(self, F, x):
        return self.fc(self.gru(x))


class Decoder(nn.HybridBlock):
    def __init__(self, trap=None, **kwargs):
        super().__init__(**kwargs)
        slope = DEFAULT_LEAKY_SLOPE if trap == "leaky_relu_default_slope" else 0.01
        with self.name_scope():
            self.fc = nn.Dense(256, in_units=8)
            self.relu0 = nn.Activation("relu")
            self.up1 = nn.Conv2DTranspose(8, 4, strides=2, padding=1, in_channels=16)
            self.act1 = nn.LeakyReLU(slope)
            self.up2 = nn.Conv2DTranspose(3, 3, padding=0 if trap == "conv_transpose_no_padding" else 1,
                                          in_channels=8)
            self.sigmoid = nn.HybridLambda(hard_sigmoid) if trap == "hard_sigmoid" else nn.Activation("sigmoid")

    def hybrid_forward(self, F, z):
        x = self.relu0(F.reshape(self.fc(z), shape=(-1, 16, 4, 4)))
        x = self.act1(self.up1(x))
        return self.sigmoid(self.up2(x))


BUILDERS = {"mlp": MLP, "cnn": CNN, "separable": Separable, "textconv": TextConv, "lstm": LSTMTagger,
            "bigru": BiGRU, "decoder": Decoder}
#: The models run hybridized (a cached graph); the recorder runs them block by block.
HYBRIDIZED = {"cnn", "separable", "decoder"}

#: PyTorch's recurrent array names -> Gluon's (after the direction's prefix l0_ / r0_).
RNN_NAMES = {"weight_ih": "i2h_weight", "weight_hh": "h2h_weight", "bias_ih": "i2h_bias", "bias_hh": "h2h_bias"}


# --- the weights, moved from PyTorch's state_dict --------------------------------------------

def _swap_blocks(array: np.ndarray, first: int, second: int, blocks: int) -> np.ndarray:
    parts = np.split(array, blocks)
    parts[first], parts[second] = parts[second], parts[first]
    return np.concatenate(parts)


def _recurrent(layer: rnn.LSTM | rnn.GRU, weights: dict, source: str, trap: str | None) -> None:
    directions = {"l0_": "_l0", "r0_": "_l0_reverse"}
    if trap == "gru_directions_swapped":
        directions = {"l0_": "_l0_reverse", "r0_": "_l0"}
    for prefix, suffix in directions.items():
        if not hasattr(layer, prefix + "i2h_weight"):
            continue
        for name, gluon_name in RNN_NAMES.items():
            array = weights[f"{source}.{name}{suffix}"]
            if trap == "lstm_gate_order":
                array = _swap_blocks(array, 0, 1, 4)
            elif trap == "gru_z_n_swapped":
                array = _swap_blocks(array, 1, 2, 3)
            getattr(layer, prefix + gluon_name).set_data(mx.nd.array(array))


def load(net: nn.HybridBlock, weights: dict[str, np.ndarray], trap: str | None = None) -> nn.HybridBlock:
    """Copy PyTorch's arrays into the port's Parameters (the same layouts), planting a weight trap."""
    weights = {name: np.array(array, np.float32) for name, array in weights.items()}  # copies: traps edit them
    if trap == "square_kernel_not_transposed":
        weights["fc2.weight"] = weights["fc2.weight"].T.copy()  # Gluon's (out, in) read as Keras's (in, out)
    if trap in ("dense_bias_dropped", "conv1d_bias_dropped"):
        weights[("fc1" if trap == "dense_bias_dropped" else "conv") + ".bias"][:] = 0
    if trap == "embedding_rows_shifted":
        weights["embed.weight"] = np.roll(weights["embed.weight"], -1, axis=0)
    if trap == "conv1d_kernel_flipped":
        weights["conv.weight"] = weights["conv.weight"][:, :, ::-1].copy()
    if trap == "conv_transpose_kernel_flipped":
        weights["up1.weight"] = weights["up1.weight"][:, :, ::-1, ::-1].copy()
    for key, array in weights.items():
        child, _, name = key.partition(".")
        block = getattr(net, child)
        if isinstance(block, (rnn.LSTM, rnn.GRU)):
            if name == "weight_ih_l0":
                _recurrent(block, weights, child, trap)
            continue
        if isinstance(block, (nn.LayerNorm, nn.BatchNorm)) and name in ("weight", "bias"):
            name = "gamma" if name == "weight" else "beta"
        elif name not in ("weight", "bias", "running_mean", "running_var"):
            raise KeyError(f"{key}: no Gluon parameter for it")
        if trap == "bn_running_mean_not_moved" and name in ("running_mean", "running_var"):
            continue  # left at Gluon's initial 0 and 1
        getattr(block, name).set_data(mx.nd.array(array))
    return net


def build(model: str, weights: dict[str, np.ndarray], trap: str | None = None) -> nn.HybridBlock:
    net = BUILDERS[model](trap=trap)
    net.initialize()
    load(net, weights, trap)
    if model in HYBRIDIZED:
        net.hybridize()
    return net


# --- the input pipeline, and a run ---------------------------------------------------------------

def pipeline(model: str, inputs: tuple, trap: str | None = None) -> tuple:
    """The port's inputs as NDArrays (float32, ids included, as Gluon's Embedding takes them)."""
    if trap == "bgr_statistics":
        inputs = (spec.preprocess(spec.raw_pixels(model), order="BGR"),)
    elif trap == "pixels_not_scaled":
        inputs = (spec.preprocess(spec.raw_pixels(model), scale=1.0),)
    return tuple(mx.nd.array(np.asarray(x), dtype="float32") for x in inputs)


def forward(model: str, weights: dict[str, np.ndarray], inputs: tuple, trap: str | None = None) -> np.ndarray:
    """The port's final output (no recorder), to check against PyTorch's."""
    net = build(model, weights, trap)
    with mx.autograd.predict_mode():
        return net(*pipeline(model, inputs, trap)).asnumpy()


def _names(model: str, trap: str | None = None) -> dict[str, str]:
    """The recorder's names: the spec's layers that this port records (all but ``fc`` where a trap
    leaves it unreachable)."""
    layers = [name for name in spec.MODELS[model]["layers"] if not name.startswith("input")]
    if trap in FC_UNREACHABLE:
        layers.remove("fc")
    return {name: name for name in layers if name not in ABSENT[model]}


def port(model: str, weights: dict[str, np.ndarray] | None = None) -> tuple[nn.HybridBlock, dict[str, str]]:
    """The correct Gluon port (hybridized where :data:`HYBRIDIZED` says), loaded with PyTorch's
    ``state_dict`` arrays if given, else at Gluon's own random initialisation; and the recorder's
    names."""
    net = BUILDERS[model]()
    net.initialize()
    if weights is not None:
        load(net, weights)
    if model in HYBRIDIZED:
        net.hybridize()
    return net, _names(model)


def framework_inputs(model: str, inputs: tuple) -> tuple:
    """The spec's arrays as the correct port takes them (NDArrays, float32)."""
    return pipeline(model, inputs)


def run(model: str, weights: dict[str, np.ndarray], inputs: tuple, trap: str | None = None, path=None):
    """Build the Gluon port (with ``trap`` planted) and record it on ``inputs``."""
    from rosetta_utils.recorders.mxnet import record

    if trap is not None and "mxnet" not in spec.TRAPS[trap]["frameworks"]:
        raise ValueError(f"{trap}: not a trap of the MXNet port")
    if trap is None:
        (net, names), arrays = port(model, weights), framework_inputs(model, inputs)
    else:
        net, names, arrays = build(model, weights, trap), _names(model, trap), pipeline(model, inputs, trap)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Parameter .* is not used by any computation")  # fc, where unreachable
        return record(net, arrays, names=names, path=path)
