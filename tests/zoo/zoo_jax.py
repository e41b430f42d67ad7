"""The zoo in JAX with Flax NNX: every model of :mod:`spec` as an ``nnx.Module``, its
parameters set by hand from PyTorch's ``state_dict`` (``param[...] = ...``), computing
channels last, and recorded by ``rosetta_utils.recorders.jax``.

Flax has modules for the zoo's weighted layers (``nnx.Linear``, ``nnx.Conv``,
``nnx.ConvTranspose``, ``nnx.BatchNorm``, ``nnx.LayerNorm``, ``nnx.Embed``, ``nnx.RNN``
and ``nnx.Bidirectional`` over an LSTM or GRU cell, ``nnx.MultiHeadAttention``); its
activations, pools, softmax and flatten are functions (``nnx.relu``, ``nnx.max_pool``,
a reshape), which a recorder cannot see: those layers are :data:`ABSENT`."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import spec
from flax import nnx

#: The zoo's layers that are functions in Flax, not modules.
ABSENT: dict[str, set[str]] = {
    "mlp": {"gelu", "tanh", "softmax"},
    "cnn": {"relu1", "pool1", "relu2", "pool2", "flatten"},
    "separable": {"relu6", "gap", "flatten"},
    "textconv": {"relu"},
    "lstm": set(),
    "bigru": set(),
    "attention": {"relu"},
    "decoder": {"relu0", "act1", "sigmoid"},
}


def rngs():
    return nnx.Rngs(0)


# --- the models (Flax's conventions, channels last) --------------------------------------------

class MLP(nnx.Module):
    def __init__(self, eps=1e-5):
        r = rngs()
        self.norm_in = nnx.LayerNorm(16, epsilon=eps, rngs=r)  # Flax's default epsilon is 1e-6
        self.fc1 = nnx.Linear(16, 32, rngs=r)
        self.fc2 = nnx.Linear(32, 32, rngs=r)
        self.norm = nnx.LayerNorm(32, epsilon=eps, rngs=r)
        self.head = nnx.Linear(32, 5, rngs=r)

    def __call__(self, x):
        x = nnx.gelu(self.fc1(self.norm_in(x)), approximate=False)  # Flax's default is the tanh form
        x = nnx.tanh(self.norm(self.fc2(x)))
        return nnx.softmax(self.head(x), axis=-1)


class CNN(nnx.Module):
    def __init__(self, conv1_padding=((1, 1), (1, 1)), fc=True):
        r = rngs()
        self.conv1 = nnx.Conv(3, 8, (3, 3), padding=conv1_padding, rngs=r)
        self.bn1 = nnx.BatchNorm(8, epsilon=1e-5, use_running_average=True, rngs=r)
        self.conv2 = nnx.Conv(8, 16, (2, 2), padding="VALID", rngs=r)
        self.fc = nnx.Linear(256, 10, rngs=r) if fc else nnx.data(None)

    def __call__(self, x):
        x = nnx.relu(self.bn1(self.conv1(x)))
        x = nnx.max_pool(x, (2, 2), (2, 2), padding=((0, 1), (0, 1)))  # ceil_mode: pad the end with -inf
        x = nnx.relu(self.conv2(x))
        x = nnx.avg_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)), count_include_pad=False)
        x = x.reshape(x.shape[0], -1)
        return x if self.fc is None else self.fc(x)


class Separable(nnx.Module):
    def __init__(self):
        r = rngs()
        self.dw = nnx.Conv(8, 8, (3, 3), padding=((1, 1), (1, 1)), feature_group_count=8, rngs=r)
        self.pw = nnx.Conv(8, 16, (1, 1), rngs=r)
        self.bn = nnx.BatchNorm(16, epsilon=1e-5, use_running_average=True, rngs=r)
        self.fc = nnx.Linear(16, 4, rngs=r)

    def __call__(self, x):
        x = nnx.relu6(self.bn(self.pw(self.dw(x))))
        return self.fc(x.mean(axis=(1, 2)))


class TextConv(nnx.Module):
    def __init__(self):
        r = rngs()
        self.embed = nnx.Embed(50, 16, rngs=r)
        self.conv = nnx.Conv(16, 24, (5,), padding=((2, 2),), rngs=r)
        self.fc = nnx.Linear(24, 3, rngs=r)

    def __call__(self, ids):
        x = nnx.relu(self.conv(self.embed(ids)))  # (N, T, E): Flax's 1-D convolution reads it as it is
        return self.fc(x.max(axis=1))


class LSTMTagger(nnx.Module):
    def __init__(self):
        r = rngs()
        self.embed = nnx.Embed(40, 16, rngs=r)
        self.lstm = nnx.RNN(nnx.LSTMCell(16, 24, rngs=r), rngs=r)
        self.fc = nnx.Linear(24, 6, rngs=r)

    def __call__(self, ids):
        return self.fc(self.lstm(self.embed(ids)))


class BiGRU(nnx.Module):
    def __init__(self):
        r = rngs()
        self.gru = nnx.Bidirectional(nnx.RNN(nnx.GRUCell(8, 12, rngs=r), rngs=r),
                                     nnx.RNN(nnx.GRUCell(8, 12, rngs=r), rngs=r), rngs=r)
        self.fc = nnx.Linear(24, 3, rngs=r)

    def __call__(self, x):
        return self.fc(self.gru(x))


class Attention(nnx.Module):
    def __init__(self, eps1=1e-5, mask_polarity=False):
        r = rngs()
        self.attn = nnx.MultiHeadAttention(2, 16, decode=False, rngs=r)
        self.norm1 = nnx.LayerNorm(16, epsilon=eps1, use_fast_variance=False, rngs=r)
        self.ff1 = nnx.Linear(16, 32, rngs=r)
        self.ff2 = nnx.Linear(32, 16, rngs=r)
        self.norm2 = nnx.LayerNorm(16, epsilon=1e-5, use_fast_variance=False, rngs=r)
        self.mask_polarity = mask_polarity

    def __call__(self, x, pad):
        attend = pad if self.mask_polarity else ~pad  # Flax attends where the mask is True
        h = self.norm1(x + self.attn(x, mask=attend[:, None, None, :]))
        return self.norm2(h + self.ff2(nnx.relu(self.ff1(h))))


class Decoder(nnx.Module):
    def __init__(self, unflatten_channels_last=False):
        r = rngs()
        self.fc = nnx.Linear(8, 256, rngs=r)
        # PyTorch's ConvTranspose2d padding p is Flax's k - 1 - p on each side
        self.up1 = nnx.ConvTranspose(16, 8, (4, 4), strides=(2, 2), padding=((2, 2), (2, 2)), rngs=r)
        self.up2 = nnx.ConvTranspose(8, 3, (3, 3), padding=((1, 1), (1, 1)), rngs=r)
        self.unflatten_channels_last = unflatten_channels_last

    def __call__(self, z):
        x = self.fc(z)
        if self.unflatten_channels_last:
            x = x.reshape(-1, 4, 4, 16)
        else:
            x = x.reshape(-1, 16, 4, 4).transpose(0, 2, 3, 1)
        x = nnx.leaky_relu(self.up1(nnx.relu(x)), negative_slope=0.01)
        return nnx.sigmoid(self.up2(x))


# --- moving PyTorch's arrays in ----------------------------------------------------------------

def set_linear(layer, w, name, transpose=True, bias=True):
    kernel = w[f"{name}.weight"]
    layer.kernel[...] = jnp.asarray(kernel.T if transpose else kernel)
    layer.bias[...] = jnp.asarray(w[f"{name}.bias"] if bias else np.zeros_like(w[f"{name}.bias"]))


def set_conv(layer, w, name, bias=True, out_order=None):
    """A Conv's (out, in/groups, *kernel) weight as Flax's (*kernel, in/groups, out)."""
    kernel = w[f"{name}.weight"]
    kernel = kernel.transpose(*range(2, kernel.ndim), 1, 0)
    b = w[f"{name}.bias"] if bias else np.zeros_like(w[f"{name}.bias"])
    if out_order is not None:
        kernel, b = kernel[..., out_order], b[out_order]
    layer.kernel[...] = jnp.asarray(kernel)
    layer.bias[...] = jnp.asarray(b)


def set_norm(layer, w, name, running=True, moved=True):
    layer.scale[...] = jnp.asarray(w[f"{name}.weight"])
    layer.bias[...] = jnp.asarray(w[f"{name}.bias"])
    if running:
        mean, var = w[f"{name}.running_mean"], w[f"{name}.running_var"]
        layer.mean[...] = jnp.asarray(mean if moved else np.zeros_like(mean))
        layer.var[...] = jnp.asarray(var if moved else np.ones_like(var))


def blocks(array, count):
    return np.split(array, count, axis=0)


def mlp(w, trap):
    net = MLP(eps=1e-3 if trap == "ln_eps_1e-3" else 1e-5)
    set_norm(net.norm_in, w, "norm_in", running=False)
    set_linear(net.fc1, w, "fc1", bias=trap != "dense_bias_dropped")
    set_linear(net.fc2, w, "fc2", transpose=trap != "square_kernel_not_transposed")
    set_norm(net.norm, w, "norm", running=False)
    set_linear(net.head, w, "head")
    return net


def cnn(w, trap):
    shrinks = trap == "conv_no_padding"  # the map ends 3x3: fc's 256-row kernel has nothing to load into
    net = CNN(conv1_padding="VALID" if shrinks else ((1, 1), (1, 1)), fc=not shrinks)
    set_conv(net.conv1, w, "conv1", out_order=np.arange(8)[::-1] if trap == "conv_out_channels_permuted" else None)
    set_norm(net.bn1, w, "bn1", moved=trap != "bn_running_mean_not_moved")
    set_conv(net.conv2, w, "conv2")
    if net.fc is not None:  # fc's inputs follow PyTorch's flatten (c, h, w); Flax flattens (h, w, c)
        net.fc.kernel[...] = jnp.asarray(w["fc.weight"].reshape(10, 16, 4, 4).transpose(2, 3, 1, 0).reshape(256, 10))
        net.fc.bias[...] = jnp.asarray(w["fc.bias"])
    return net


def separable(w, trap):
    net = Separable()
    net.dw.kernel[...] = jnp.asarray(w["dw.weight"].transpose(2, 3, 1, 0))  # (8, 1, 3, 3) -> (3, 3, 1, 8)
    net.dw.bias[...] = jnp.asarray(w["dw.bias"])
    set_conv(net.pw, w, "pw")
    set_norm(net.bn, w, "bn")
    set_linear(net.fc, w, "fc")
    return net


def textconv(w, trap):
    net = TextConv()
    table = w["embed.weight"]
    net.embed.embedding[...] = jnp.asarray(np.roll(table, -1, axis=0) if trap == "embedding_rows_shifted" else table)
    set_conv(net.conv, w, "conv", bias=trap != "conv1d_bias_dropped")
    if trap == "conv1d_kernel_flipped":
        net.conv.kernel[...] = net.conv.kernel[...][::-1]
    set_linear(net.fc, w, "fc")
    return net


def lstm(w, trap):
    """PyTorch's stacked i, f, g, o blocks as the cell's eight Linears; the two biases summed
    into the hidden side's (Flax's input side has none)."""
    net = LSTMTagger()
    net.embed.embedding[...] = jnp.asarray(w["embed.weight"])
    order = (1, 0, 2, 3) if trap == "lstm_gate_order" else (0, 1, 2, 3)
    w_ih, w_hh = blocks(w["lstm.weight_ih_l0"], 4), blocks(w["lstm.weight_hh_l0"], 4)
    bias = blocks(w["lstm.bias_ih_l0"] + w["lstm.bias_hh_l0"], 4)
    cell = net.lstm.cell
    for gate, (inner, hidden) in zip(order, [(cell.ii, cell.hi), (cell.if_, cell.hf), (cell.ig, cell.hg),
                                             (cell.io, cell.ho)]):
        inner.kernel[...] = jnp.asarray(w_ih[gate].T)
        hidden.kernel[...] = jnp.asarray(w_hh[gate].T)
        hidden.bias[...] = jnp.asarray(bias[gate] + (1.0 if trap == "lstm_forget_bias" and hidden is cell.hf else 0))
    set_linear(net.fc, w, "fc")
    return net


def set_gru(cell, w, suffix, order):
    """PyTorch's r, z, n blocks are Flax's order too; Flax's hidden side has no bias, so r's
    and z's recurrent biases join the input side's, and n's must be zero (spec.py)."""
    w_ih, w_hh = blocks(w[f"gru.weight_ih_l0{suffix}"], 3), blocks(w[f"gru.weight_hh_l0{suffix}"], 3)
    b_ih, b_hh = blocks(w[f"gru.bias_ih_l0{suffix}"], 3), blocks(w[f"gru.bias_hh_l0{suffix}"], 3)
    cell.dense_i.kernel[...] = jnp.asarray(np.concatenate([w_ih[i] for i in order]).T)
    cell.dense_h.kernel[...] = jnp.asarray(np.concatenate([w_hh[i] for i in order]).T)
    cell.dense_i.bias[...] = jnp.asarray(np.concatenate([b_ih[order[0]] + b_hh[order[0]],
                                                         b_ih[order[1]] + b_hh[order[1]], b_ih[order[2]]]))


def bigru(w, trap):
    net = BiGRU()
    order = (0, 2, 1) if trap == "gru_z_n_swapped" else (0, 1, 2)
    forward, backward = ("", "_reverse") if trap != "gru_directions_swapped" else ("_reverse", "")
    set_gru(net.gru.forward_rnn.cell, w, forward, order)
    set_gru(net.gru.backward_rnn.cell, w, backward, order)
    set_linear(net.fc, w, "fc")
    return net


def attention(w, trap):
    net = Attention(eps1=1e-3 if trap == "attention_ln_eps" else 1e-5, mask_polarity=trap == "mask_polarity")
    q, k, v = blocks(w["attn.in_proj_weight"], 3)
    bq, bk, bv = blocks(w["attn.in_proj_bias"], 3)
    if trap == "qk_projections_swapped":
        q, k, bq, bk = k, q, bk, bq
    for layer, kernel, bias in ((net.attn.query, q, bq), (net.attn.key, k, bk), (net.attn.value, v, bv)):
        layer.kernel[...] = jnp.asarray(kernel.T.reshape(16, 2, 8))  # (in, heads, head size)
        layer.bias[...] = jnp.asarray(bias.reshape(2, 8))
    net.attn.out.kernel[...] = jnp.asarray(w["attn.out_proj.weight"].T.reshape(2, 8, 16))
    out_bias = w["attn.out_proj.bias"]
    net.attn.out.bias[...] = jnp.asarray(np.zeros_like(out_bias) if trap == "attention_out_bias_dropped" else out_bias)
    set_norm(net.norm1, w, "norm1", running=False)
    set_linear(net.ff1, w, "ff1")
    set_linear(net.ff2, w, "ff2")
    set_norm(net.norm2, w, "norm2", running=False)
    return net


def decoder(w, trap):
    net = Decoder(unflatten_channels_last=trap == "unflatten_order")
    set_linear(net.fc, w, "fc")
    for layer, name in ((net.up1, "up1"), (net.up2, "up2")):
        # (in, out, kh, kw) -> (kh, kw, in, out), flipped: Flax's transposed convolution does not flip it
        kernel = w[f"{name}.weight"].transpose(2, 3, 0, 1)
        if not (name == "up1" and trap == "conv_transpose_kernel_flipped"):
            kernel = kernel[::-1, ::-1]
        layer.kernel[...] = jnp.asarray(np.ascontiguousarray(kernel))
        layer.bias[...] = jnp.asarray(w[f"{name}.bias"])
    return net


BUILDERS = {"mlp": mlp, "cnn": cnn, "separable": separable, "textconv": textconv, "lstm": lstm, "bigru": bigru,
            "attention": attention, "decoder": decoder}

#: Each model's correct port, built with Flax's own initialisation (``nnx.Rngs(0)``).
MODELS = {"mlp": MLP, "cnn": CNN, "separable": Separable, "textconv": TextConv, "lstm": LSTMTagger, "bigru": BiGRU,
          "attention": Attention, "decoder": Decoder}


def port_inputs(model: str, inputs: tuple, trap: str | None) -> tuple:
    """The port's input pipeline: the spec's arrays (or the trap's), images channels last."""
    if trap == "bgr_statistics":
        inputs = (spec.preprocess(spec.raw_pixels(model), order="BGR"),)
    return tuple(jnp.asarray(x.transpose(0, 2, 3, 1) if x.ndim == 4 else x) for x in inputs)


def framework_inputs(model: str, inputs: tuple) -> tuple:
    """The spec's arrays as the correct port reads them (images channels last)."""
    return port_inputs(model, inputs, None)


def names_of(model: str) -> dict[str, str]:
    """The recorder's names: the spec's layers that are modules in Flax."""
    return {name: name for name in spec.MODELS[model]["layers"]
            if not name.startswith("input") and name not in ABSENT[model]}


def port(model: str, weights: dict[str, np.ndarray] | None = None) -> tuple[nnx.Module, dict[str, str]]:
    """The correct port, in inference mode, loaded with ``weights`` (PyTorch's ``state_dict``
    names) if given, else at Flax's own initialisation; and the recorder's names."""
    net = BUILDERS[model](weights, None) if weights is not None else MODELS[model]()
    net.eval()
    return net, names_of(model)


def build(model: str, weights: dict[str, np.ndarray], trap: str | None = None) -> nnx.Module:
    if trap is None:
        return port(model, weights)[0]
    if spec.TRAPS[trap]["model"] != model or "jax" not in spec.TRAPS[trap]["frameworks"]:
        raise ValueError(f"{trap}: not a Flax trap of {model}")
    net = BUILDERS[model](weights, trap)
    net.eval()
    return net


def forward(model: str, weights: dict[str, np.ndarray], inputs: tuple, trap: str | None = None) -> np.ndarray:
    """The port's final output (no recorder), channels first like PyTorch's."""
    y = np.asarray(build(model, weights, trap)(*port_inputs(model, inputs, trap)))
    return y.transpose(0, 3, 1, 2) if y.ndim == 4 else y


def run(model: str, weights: dict[str, np.ndarray], inputs: tuple, trap: str | None = None, path=None):
    """Build the port (with ``trap`` planted), and record it on ``inputs`` (the spec's arrays)."""
    from rosetta_utils.recorders.jax import record

    if trap is None:
        net, names = port(model, weights)
        return record(net, framework_inputs(model, inputs), names=names, path=path)
    net, names = build(model, weights, trap), names_of(model)
    if trap == "conv_no_padding":
        del names["fc"]  # the model ends at its flatten (spec.py: a trap that changes a feature map's size)
    return record(net, port_inputs(model, inputs, trap), names=names, path=path)
