"""The zoo in Chainer: each model of :mod:`spec` as a ``Chain`` of links, loaded from PyTorch's
``state_dict`` with ``.array[...] =`` and recorded by ``rosetta_utils.recorders.chainer``.

Chainer's links keep PyTorch's layouts (``L.Linear``'s ``W`` is (out, in), a convolution's
(out, in, k...), ``L.Deconvolution2D``'s (in, out, kh, kw)) except the depthwise convolution
(``L.DepthwiseConvolution2D``'s ``W`` is (multiplier, in, kh, kw): PyTorch's (in, 1, kh, kw)
with its first two axes swapped). Its recurrent links hold one array per gate: ``L.NStepLSTM``
``w0``..``w3`` / ``b0``..``b3`` on the input and ``w4``..``w7`` / ``b4``..``b7`` on the state,
gates i, f, g, o (PyTorch's order, as ``n_step_lstm._lstm`` reads them, whatever its docstring
says); ``L.NStepBiGRU`` child 0 forward and 1 backward, ``w0``..``w2`` / ``w3``..``w5``, gates
r, z, n. Activations, pools and reshapes are functions (``F.relu``, ``F.max_pooling_2d``):
Chainer has no link for them, so they run in the forward and are not recorded (:data:`ABSENT`).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

warnings.filterwarnings("ignore", "pkg_resources is deprecated")
import _distutils_hack  # noqa: E402

_distutils_hack.remove_shim()

import chainer  # noqa: E402
import chainer.functions as F  # noqa: E402
import chainer.links as L  # noqa: E402

import spec  # noqa: E402

warnings.filterwarnings("ignore", "SciPy is not available")  # F.erf computes with math.erf, element by element

#: The layers that are functions in Chainer (no link, so the recorder cannot see them).
ABSENT: dict[str, set[str]] = {
    "mlp": {"gelu", "tanh", "softmax"},
    "cnn": {"relu1", "pool1", "relu2", "pool2", "flatten"},
    "separable": {"relu6", "gap", "flatten"},
    "textconv": {"relu"},
    "lstm": set(),
    "bigru": set(),
    "decoder": {"relu0", "act1", "sigmoid"},
}

#: Traps that make the feature map too small for ``fc`` (256 inputs): the port stops with a shape
#: error there, so the recording keeps the layers before it.
FC_UNREACHABLE = {"conv_no_padding"}


def gelu(x):
    """GELU, exact (erf) form: Chainer 7 has no ``F.gelu``."""
    return 0.5 * x * (1.0 + F.erf(x / math.sqrt(2.0)))


# --- the models ----------------------------------------------------------------------------------

class MLP(chainer.Chain):
    def __init__(self, trap=None):
        super().__init__()
        with self.init_scope():
            self.norm_in = L.LayerNormalization(16, eps=1e-3 if trap == "ln_eps_1e-3" else 1e-5)
            self.fc1 = L.Linear(16, 32)
            self.fc2 = L.Linear(32, 32)
            self.norm = L.LayerNormalization(32, eps=1e-5)
            self.head = L.Linear(32, 5)

    def forward(self, x):
        x = gelu(self.fc1(self.norm_in(x)))
        x = F.tanh(self.norm(self.fc2(x)))
        return F.softmax(self.head(x), axis=-1)


class CNN(chainer.Chain):
    def __init__(self, trap=None):
        super().__init__()
        self.reaches_fc = trap not in FC_UNREACHABLE
        with self.init_scope():
            self.conv1 = L.Convolution2D(3, 8, 3, pad=0 if trap == "conv_no_padding" else 1)
            self.bn1 = L.BatchNormalization(8, eps=1e-5)
            self.conv2 = L.Convolution2D(8, 16, 2)
            self.fc = L.Linear(256, 10)

    def forward(self, x):
        x = F.max_pooling_2d(F.relu(self.bn1(self.conv1(x))), 2, cover_all=True)  # rounds up, as ceil_mode
        x = F.average_pooling_nd(F.relu(self.conv2(x)), 3, stride=2, pad=1, pad_value=None)  # padding not counted
        x = F.reshape(x, (len(x), -1))
        return self.fc(x) if self.reaches_fc else x


class Separable(chainer.Chain):
    def __init__(self, trap=None):
        super().__init__()
        with self.init_scope():
            self.dw = L.DepthwiseConvolution2D(8, 1, 3, pad=1)
            self.pw = L.Convolution2D(8, 16, 1)
            self.bn = L.BatchNormalization(16, eps=1e-5)
            self.fc = L.Linear(16, 4)

    def forward(self, x):
        x = F.clipped_relu(self.bn(self.pw(self.dw(x))), 6.0)
        return self.fc(F.average(x, axis=(2, 3)))


class TextConv(chainer.Chain):
    def __init__(self, trap=None):
        super().__init__()
        with self.init_scope():
            self.embed = L.EmbedID(50, 16)
            self.conv = L.Convolution1D(16, 24, 5, pad=2)
            self.fc = L.Linear(24, 3)

    def forward(self, ids):
        x = F.transpose(self.embed(ids), (0, 2, 1))
        x = F.relu(self.conv(x))
        return self.fc(F.max(x, axis=2))


class LSTMTagger(chainer.Chain):
    def __init__(self, trap=None):
        super().__init__()
        with self.init_scope():
            self.embed = L.EmbedID(40, 16)
            self.lstm = L.NStepLSTM(1, 16, 24, 0.0)
            self.fc = L.Linear(24, 6)

    def forward(self, ids):
        _, _, ys = self.lstm(None, None, list(F.separate(self.embed(ids), axis=0)))
        return self.fc(F.stack(ys), n_batch_axes=2)


class BiGRU(chainer.Chain):
    def __init__(self, trap=None):
        super().__init__()
        with self.init_scope():
            self.gru = L.NStepBiGRU(1, 8, 12, 0.0)
            self.fc = L.Linear(24, 3)

    def forward(self, x):
        _, ys = self.gru(None, list(F.separate(x, axis=0)))
        return self.fc(F.stack(ys), n_batch_axes=2)


class Decoder(chainer.Chain):
    def __init__(self, trap=None):
        super().__init__()
        with self.init_scope():
            self.fc = L.Linear(8, 256)
            self.up1 = L.Deconvolution2D(16, 8, 4, stride=2, pad=1)
            self.up2 = L.Deconvolution2D(8, 3, 3, pad=0 if trap == "conv_transpose_no_padding" else 1)

    def forward(self, z):
        x = F.relu(F.reshape(self.fc(z), (-1, 16, 4, 4)))
        x = F.leaky_relu(self.up1(x), 0.01)
        return F.sigmoid(self.up2(x))


BUILDERS = {"mlp": MLP, "cnn": CNN, "separable": Separable, "textconv": TextConv, "lstm": LSTMTagger,
            "bigru": BiGRU, "decoder": Decoder}


# --- the weights, moved from PyTorch's state_dict --------------------------------------------

def _swap_blocks(array: np.ndarray, first: int, second: int, blocks: int) -> np.ndarray:
    parts = np.split(array, blocks)
    parts[first], parts[second] = parts[second], parts[first]
    return np.concatenate(parts)


def _lstm(link: L.NStepLSTM, weights: dict, trap: str | None) -> None:
    """PyTorch's four arrays, cut into their gate blocks i, f, g, o: w0..w3 (input), w4..w7 (state)."""
    cell = link[0]
    for name, letter, first in (("weight_ih", "w", 0), ("weight_hh", "w", 4), ("bias_ih", "b", 0), ("bias_hh", "b", 4)):
        array = weights[f"lstm.{name}_l0"]
        if trap == "lstm_gate_order":
            array = _swap_blocks(array, 0, 1, 4)
        blocks = np.split(array, 4)
        if trap == "lstm_forget_bias" and name == "bias_ih":
            blocks[1] = blocks[1] + 1  # Keras's unit_forget_bias, on top of the moved bias
        for gate, block in enumerate(blocks):
            getattr(cell, f"{letter}{first + gate}").array[...] = block


def _bigru(link: L.NStepBiGRU, weights: dict, trap: str | None) -> None:
    """Per direction (child 0 forward, 1 backward) the gate blocks r, z, n: w0..w2 (input), w3..w5 (state)."""
    suffixes = ("_l0_reverse", "_l0") if trap == "gru_directions_swapped" else ("_l0", "_l0_reverse")
    for cell, suffix in zip(link, suffixes):
        for name, first in (("weight_ih", 0), ("weight_hh", 3), ("bias_ih", 0), ("bias_hh", 3)):
            array = weights[f"gru.{name}{suffix}"]
            if trap == "gru_z_n_swapped":
                array = _swap_blocks(array, 1, 2, 3)
            letter = "w" if name.startswith("weight") else "b"
            for gate, block in enumerate(np.split(array, 3)):
                getattr(cell, f"{letter}{first + gate}").array[...] = block


#: PyTorch's array names -> Chainer's.
NAMES = {"weight": "W", "bias": "b", "running_mean": "avg_mean", "running_var": "avg_var"}


def load(net: chainer.Chain, weights: dict[str, np.ndarray], trap: str | None = None) -> chainer.Chain:
    """Copy PyTorch's arrays into the port's links, planting a weight trap."""
    weights = {name: np.array(array, np.float32) for name, array in weights.items()}  # copies: traps edit them
    if trap == "square_kernel_not_transposed":
        weights["fc2.weight"] = weights["fc2.weight"].T.copy()  # Chainer's (out, in) read as Keras's (in, out)
    if trap in ("dense_bias_dropped", "pointwise_bias_dropped"):
        weights[("fc1" if trap == "dense_bias_dropped" else "pw") + ".bias"][:] = 0
    if trap == "embedding_rows_shifted":
        weights["embed.weight"] = np.roll(weights["embed.weight"], -1, axis=0)
    if trap == "conv1d_kernel_flipped":
        weights["conv.weight"] = weights["conv.weight"][:, :, ::-1].copy()
    if trap == "conv_transpose_kernel_flipped":
        weights["up1.weight"] = weights["up1.weight"][:, :, ::-1, ::-1].copy()
    for key, array in weights.items():
        child, _, name = key.partition(".")
        link = getattr(net, child)
        if isinstance(link, (L.NStepLSTM, L.NStepBiGRU)):
            if name == "weight_ih_l0":
                (_lstm if isinstance(link, L.NStepLSTM) else _bigru)(link, weights, trap)
            continue
        if isinstance(link, (L.LayerNormalization, L.BatchNormalization)) and name in ("weight", "bias"):
            target = link.gamma if name == "weight" else link.beta
        elif name in ("running_mean", "running_var"):
            if trap == "bn_running_mean_not_moved":
                continue  # left at Chainer's initial 0 and 1
            target = getattr(link, NAMES[name])
        else:
            target = getattr(link, NAMES[name])
        if isinstance(link, L.DepthwiseConvolution2D) and name == "weight":
            array = array.transpose(1, 0, 2, 3)  # (in, 1, kh, kw) -> (1, in, kh, kw)
        destination = target.array if isinstance(target, chainer.Variable) else target
        destination[...] = array
    return net


def build(model: str, weights: dict[str, np.ndarray], trap: str | None = None) -> chainer.Chain:
    return load(BUILDERS[model](trap=trap), weights, trap)


# --- the input pipeline, and a run ---------------------------------------------------------------

def pipeline(model: str, inputs: tuple, trap: str | None = None) -> tuple:
    """The port's inputs (numpy arrays, as Chainer takes them), with an input trap planted."""
    inputs = tuple(np.asarray(x) for x in inputs)
    if trap == "bgr_statistics":
        inputs = (spec.preprocess(spec.raw_pixels(model), order="BGR"),)
    elif trap == "input_not_standardised":
        inputs = (inputs[0] * np.float32(2) + np.float32(1),)
    return inputs


def forward(model: str, weights: dict[str, np.ndarray], inputs: tuple, trap: str | None = None) -> np.ndarray:
    """The port's final output (no recorder), to check against PyTorch's."""
    net = build(model, weights, trap)
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        return net(*pipeline(model, inputs, trap)).array


def _names(model: str, trap: str | None = None) -> dict[str, str]:
    """The recorder's names: the spec's layers that are links here (all but ``fc`` where a trap
    leaves it unreachable)."""
    layers = [name for name in spec.MODELS[model]["layers"] if not name.startswith("input")]
    if trap in FC_UNREACHABLE:
        layers.remove("fc")
    return {name: name for name in layers if name not in ABSENT[model]}


def port(model: str, weights: dict[str, np.ndarray] | None = None) -> tuple[chainer.Chain, dict[str, str]]:
    """The correct Chainer port, loaded with PyTorch's ``state_dict`` arrays if given, else at
    Chainer's own random initialisation; and the recorder's names."""
    net = BUILDERS[model]()
    if weights is not None:
        load(net, weights)
    return net, _names(model)


def framework_inputs(model: str, inputs: tuple) -> tuple:
    """The spec's arrays as the correct port takes them (numpy, as they are)."""
    return pipeline(model, inputs)


def run(model: str, weights: dict[str, np.ndarray], inputs: tuple, trap: str | None = None, path=None):
    """Build the Chainer port (with ``trap`` planted) and record it on ``inputs``."""
    from rosetta_utils.recorders.chainer import record

    if trap is not None and "chainer" not in spec.TRAPS[trap]["frameworks"]:
        raise ValueError(f"{trap}: not a trap of the Chainer port")
    if trap is None:
        (net, names), arrays = port(model, weights), framework_inputs(model, inputs)
    else:
        net, names, arrays = build(model, weights, trap), _names(model, trap), pipeline(model, inputs, trap)
    return record(net, arrays, names=names, path=path)
