"""The zoo: small models of our own, none of them the book's, each written in every framework
that has its layers, to prove the recorders (rosetta_utils.recorders), the divergence
command and the weight moves on models they were not built from.

This module is framework-free (numpy only): every port reads it.

PyTorch is the source of every model: ``zoo_pytorch.py`` builds it, initialises it from a
seed (and sets what initialisation leaves trivial: batch norms' running statistics,
layer norms' scale and shift), and saves its ``state_dict`` as numpy arrays. Every other
port loads those arrays, converted by its own code, so a correct port computes the same
function. Each model's recordings hold the names in :data:`MODELS` ``[model]["layers"]``,
in that order, less those a framework cannot record (``absent``: a function, not a layer,
in that framework). Inputs are the same numpy arrays in every framework, in PyTorch's
layout (channels first); a port that computes channels last transposes them in its own
code before its model (and declares ``layout`` to the recorder, which moves its outputs
back).

The models (PyTorch's definitions; every port computes the same):

``mlp``       x (N, 16) -> norm_in LayerNorm(16) -> fc1 Linear(16, 32) -> gelu GELU()
              (exact, erf) -> fc2 Linear(32, 32) (square) -> norm LayerNorm(32) -> tanh
              Tanh() -> head Linear(32, 5) -> softmax Softmax(dim=-1). LayerNorm eps 1e-5.
``cnn``       x (N, 3, 15, 15) -> conv1 Conv2d(3, 8, 3, padding=1) -> bn1 BatchNorm2d(8)
              (inference mode, running statistics) -> relu1 ReLU() -> pool1 MaxPool2d(2,
              ceil_mode=True) (15 -> 8) -> conv2 Conv2d(8, 16, 2) (8 -> 7) -> relu2 ReLU()
              -> pool2 AvgPool2d(3, stride=2, padding=1, count_include_pad=False) (7 -> 4)
              -> flatten Flatten() (channels-first order, 256) -> fc Linear(256, 10).
``separable`` x (N, 8, 12, 12) -> dw Conv2d(8, 8, 3, padding=1, groups=8) (depthwise) ->
              pw Conv2d(8, 16, 1) -> bn BatchNorm2d(16) -> relu6 ReLU6() -> gap
              AdaptiveAvgPool2d(1) -> flatten Flatten() -> fc Linear(16, 4).
``textconv``  ids (N, 20) int64 in [0, 50) -> embed Embedding(50, 16) -> (the forward
              transposes to (N, 16, 20)) -> conv Conv1d(16, 24, 5, padding=2) -> relu ReLU()
              -> (the forward takes the max over time: (N, 24)) -> fc Linear(24, 3).
``lstm``      ids (N, T) int64 in [0, 40) -> embed Embedding(40, 16) -> lstm LSTM(16, 24,
              batch_first=True) (its sequence output) -> fc Linear(24, 6) (every step).
``bigru``     x (N, T, 8) -> gru GRU(8, 12, batch_first=True, bidirectional=True) (its
              sequence output, forward then backward halves) -> fc Linear(24, 3) (every
              step). The recurrent bias of the n gate (bias_hh rows 24:36, both directions)
              is zero in the source, since a Flax GRUCell has none.
``attention`` x (N, 6, 16), pad (N, 6) bool, True where a key is padding -> attn
              MultiheadAttention(16, 2, batch_first=True), query = key = value = x,
              key_padding_mask=pad (its attended values) -> (x + attn) -> norm1
              LayerNorm(16) -> ff1 Linear(16, 32) -> relu ReLU() -> ff2 Linear(32, 16) ->
              (norm1 + ff2) -> norm2 LayerNorm(16). Its projections' biases are random (PyTorch
              starts them at zero, where a dropped bias would change nothing).
``decoder``   z (N, 8) -> fc Linear(8, 256) -> unflatten (N, 16, 4, 4) -> relu0 ReLU() ->
              up1 ConvTranspose2d(16, 8, 4, stride=2, padding=1) (4 -> 8) -> act1
              LeakyReLU(0.01) -> up2 ConvTranspose2d(8, 3, 3, padding=1) (8 -> 8) ->
              sigmoid Sigmoid().

A trap that changes a feature map's size (``conv_no_padding``, ``max_pool_floor``) leaves the
layers after it unable to run in a framework that checks the next layer's input size: such a
port records up to the layer that can still run, which is after the trap's layer.

Traps (:data:`TRAPS`): each a mistake from the translation tables, planted in the ports it
names (never in the source), on one probe; ``layer``: the first recorded layer whose
computation differs, in every framework it is planted in (``layer_in``: where it differs
by framework, since a framework without a layer there records the next one); ``cause``:
the cause the divergence command must name first (a key of
``rosetta_utils.divergence.CAUSES``).
"""

from __future__ import annotations

import numpy as np

FRAMEWORKS = ("pytorch", "tensorflow", "jax", "mxnet", "chainer")
SOURCE = "pytorch"

MODELS = {
    "mlp": {"layers": ["input", "norm_in", "fc1", "gelu", "fc2", "norm", "tanh", "head", "softmax"],
            "frameworks": FRAMEWORKS, "probes": ("normal", "large_mean")},
    "cnn": {"layers": ["input", "conv1", "bn1", "relu1", "pool1", "conv2", "relu2", "pool2", "flatten", "fc"],
            "frameworks": FRAMEWORKS, "probes": ("normal", "pixels")},
    "separable": {"layers": ["input", "dw", "pw", "bn", "relu6", "gap", "flatten", "fc"],
                  "frameworks": FRAMEWORKS, "probes": ("normal", "pixels")},
    "textconv": {"layers": ["input", "embed", "conv", "relu", "fc"],
                 "frameworks": FRAMEWORKS, "probes": ("normal",)},
    "lstm": {"layers": ["input", "embed", "lstm", "fc"], "frameworks": FRAMEWORKS, "probes": ("normal", "long")},
    "bigru": {"layers": ["input", "gru", "fc"], "frameworks": FRAMEWORKS, "probes": ("normal", "long")},
    # MXNet 1.9 and Chainer 7 have no multi-head attention layer
    "attention": {"layers": ["input", "input.1", "attn", "norm1", "ff1", "relu", "ff2", "norm2"],
                  "frameworks": ("pytorch", "tensorflow", "jax"), "probes": ("normal", "large_mean")},
    "decoder": {"layers": ["input", "fc", "relu0", "up1", "act1", "up2", "sigmoid"],
                "frameworks": FRAMEWORKS, "probes": ("normal",)},
}

#: The per-channel mean and spread the image models' pixel probe is normalised with (RGB).
PIXEL_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
PIXEL_STD = np.array([0.229, 0.224, 0.225], np.float32)


def preprocess(pixels: np.ndarray, order: str = "RGB", scale: float = 1 / 255) -> np.ndarray:
    """Pixels 0-255 (N, 3, H, W) to the network's input: scaled, less the mean, over the
    spread, channel by channel. A port's input pipeline calls this; the input traps call it
    with the channels' statistics in BGR order, or without the scaling."""
    mean, std = (PIXEL_MEAN, PIXEL_STD) if order == "RGB" else (PIXEL_MEAN[::-1], PIXEL_STD[::-1])
    x = pixels.astype(np.float32) * np.float32(scale)
    return ((x - mean[:, None, None]) / std[:, None, None]).astype(np.float32)


def probe(model: str, name: str, batch: int = 4) -> tuple:
    """The inputs of one probe, the same arrays in every framework (channels first)."""
    rng = np.random.default_rng(sum(map(ord, model + name)))
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    if model == "mlp":
        x = normal(batch, 16)
        return (x + 20 if name == "large_mean" else x,)
    if model in ("cnn", "separable"):
        channels, size = (3, 15) if model == "cnn" else (8, 12)
        if name == "pixels":
            pixels = rng.integers(0, 256, (batch, channels, size, size)).astype(np.float32)
            return (preprocess(pixels) if channels == 3 else pixels,)
        return (normal(batch, channels, size, size),)
    if model == "textconv":
        return (rng.integers(0, 50, (batch, 20)).astype(np.int64),)
    if model == "lstm":
        return (rng.integers(0, 40, (batch, 200 if name == "long" else 12)).astype(np.int64),)
    if model == "bigru":
        return (normal(batch, 200 if name == "long" else 10, 8),)
    if model == "attention":
        x = normal(batch, 6, 16)
        pad = np.zeros((batch, 6), bool)
        for row in range(batch):
            pad[row, 6 - row % 3:] = True  # 0, 1 or 2 padded keys at the end
        return (x + 20 if name == "large_mean" else x, pad)
    if model == "decoder":
        return (normal(batch, 8),)
    raise KeyError(f"no model {model!r}")


def raw_pixels(model: str, batch: int = 4) -> np.ndarray:
    """The pixel probe's integers before :func:`preprocess` (for the input traps)."""
    rng = np.random.default_rng(sum(map(ord, model + "pixels")))
    return rng.integers(0, 256, (batch, 3, 15, 15)).astype(np.float32)


def _trap(model, probe_name, layer, cause, frameworks, what, layer_in=None):
    return {"model": model, "probe": probe_name, "layer": layer, "cause": cause, "frameworks": tuple(frameworks),
            "what": what, "layer_in": dict(layer_in or {})}


PORTS = ("tensorflow", "jax", "mxnet", "chainer")

#: Every planted trap: its name -> what it is, where it must be found, and its cause.
TRAPS = {
    # mlp
    "ln_eps_1e-3": _trap("mlp", "normal", "norm_in", "normalisation", PORTS,
                         "layer norm's epsilon left at 1e-3 (Keras's default) for PyTorch's 1e-5"),
    "square_kernel_not_transposed": _trap("mlp", "normal", "fc2", "order", PORTS,
                                          "the square dense layer's kernel moved in the wrong orientation (Keras and "
                                          "Flax: without the transpose they need; Gluon and Chainer, which keep "
                                          "PyTorch's (out, in): "
                                          "with one they do not)"),
    "dense_bias_dropped": _trap("mlp", "normal", "fc1", "bias", PORTS, "fc1's bias left at zero"),
    "gelu_tanh": _trap("mlp", "normal", "gelu", "activation", ("tensorflow", "mxnet"),
                       "GELU's tanh approximation for the exact (erf) form"),
    "input_not_standardised": _trap("mlp", "normal", "input", "input", ("tensorflow", "chainer"),
                                    "the port's input pipeline feeds x * 2 + 1 (another standardisation)"),
    "softmax_wrong_axis": _trap("mlp", "normal", "softmax", "softmax axis", ("tensorflow", "mxnet"),
                                "the output softmax taken over the batch axis (0) for the class axis"),
    # cnn
    "bgr_statistics": _trap("cnn", "pixels", "input", "input", PORTS,
                            "the pixels normalised with the channels' mean and spread in BGR order"),
    "pixels_not_scaled": _trap("cnn", "pixels", "input", "input", ("tensorflow", "mxnet"),
                               "the pixels normalised without dividing by 255 first"),
    "bn_running_mean_not_moved": _trap("cnn", "normal", "bn1", "normalisation", PORTS,
                                       "bn1's running mean and variance left at their initial 0 and 1"),
    "max_pool_floor": _trap("cnn", "normal", "pool1", "pooling", ("tensorflow", "mxnet"),
                            "the 2x2 max pool rounds its size down (15 -> 7) where PyTorch's ceil_mode "
                            "rounds up (8)"),
    "avg_pool_counts_padding": _trap("cnn", "normal", "pool2", "padding", ("tensorflow", "mxnet"),
                                     "the padded average pool counts the padding's zeros"),
    "conv_no_padding": _trap("cnn", "normal", "conv1", "padding", PORTS,
                             "conv1 without its padding of 1 ('valid')"),
    "conv_out_channels_permuted": _trap("cnn", "normal", "conv1", "order", ("tensorflow", "jax"),
                                        "conv1's output channels moved in another order (kernel and bias "
                                        "alike)"),
    # separable
    "relu6_as_relu": _trap("separable", "pixels", "relu6", "activation", ("tensorflow", "mxnet"),
                           "ReLU for ReLU6 (no cap at 6)"),
    "pointwise_bias_dropped": _trap("separable", "normal", "pw", "bias", ("tensorflow", "chainer"),
                                    "the pointwise convolution's bias left at zero"),
    "global_max_for_average": _trap("separable", "normal", "gap", "pooling", ("tensorflow", "mxnet"),
                                    "a global max pool for the global average pool"),
    # textconv
    "conv1d_kernel_flipped": _trap("textconv", "normal", "conv", "order", PORTS,
                                   "the 1-D kernel flipped in time (a convolution for a cross-correlation)"),
    "embedding_rows_shifted": _trap("textconv", "normal", "embed", "order", PORTS,
                                    "the embedding's rows moved one place (row i holds id i+1's vector)"),
    "conv1d_valid": _trap("textconv", "normal", "conv", "padding", ("tensorflow", "mxnet"),
                          "the 1-D convolution without its padding ('valid': 20 -> 16 steps)"),
    "conv1d_bias_dropped": _trap("textconv", "normal", "conv", "bias", ("jax", "mxnet"),
                                 "the 1-D convolution's bias left at zero"),
    # lstm
    "lstm_gate_order": _trap("lstm", "normal", "lstm", "gates", PORTS,
                             "the LSTM's input and forget gate blocks swapped (i, f, g, o read as f, i, g, o)"),
    "lstm_forget_bias": _trap("lstm", "normal", "lstm", "forget bias", ("tensorflow", "jax", "chainer"),
                              "1 added to the forget gate's bias (Keras's unit_forget_bias on top of the "
                              "moved bias)"),
    # bigru
    "gru_directions_swapped": _trap("bigru", "normal", "gru", "gates", PORTS,
                                    "the bidirectional GRU's forward and backward weights swapped"),
    "gru_z_n_swapped": _trap("bigru", "normal", "gru", "gates", PORTS,
                             "the GRU's update (z) and candidate (n) gate blocks swapped"),
    # attention
    "mask_polarity": _trap("attention", "normal", "attn", "attention", ("tensorflow", "jax"),
                           "the padding mask handed over as it is: True read as attend"),
    "qk_projections_swapped": _trap("attention", "normal", "attn", "attention", ("tensorflow", "jax"),
                                    "the packed in_proj_weight's query and key blocks swapped"),
    "attention_ln_eps": _trap("attention", "normal", "norm1", "normalisation", ("tensorflow", "jax"),
                              "norm1's epsilon left at Keras's default, 1e-3, for PyTorch's 1e-5 (Flax's own "
                              "default, 1e-6, differs from 1e-5 by less than float32 resolves on this probe)"),
    "attention_out_bias_dropped": _trap("attention", "normal", "attn", "bias", ("tensorflow", "jax"),
                                        "the output projection's bias left at zero"),
    # decoder
    "unflatten_order": _trap("decoder", "normal", "relu0", "order", ("tensorflow", "jax"),
                             "fc's weights not permuted for the channels-last unflatten: fc's own output is "
                             "PyTorch's, the feature map it is unflattened into holds its values elsewhere",
                             layer_in={"jax": "up1"}),
    "conv_transpose_kernel_flipped": _trap("decoder", "normal", "up1", "order", PORTS,
                                           "up1's kernel flipped in height and width"),
    "conv_transpose_no_padding": _trap("decoder", "normal", "up2", "padding", ("mxnet", "chainer"),
                                       "up2 without its padding of 1 (8 -> 10)"),
    "hard_sigmoid": _trap("decoder", "normal", "sigmoid", "activation", ("tensorflow", "mxnet"),
                          "a hard sigmoid for the sigmoid"),
    "leaky_relu_default_slope": _trap("decoder", "normal", "act1", "activation", ("tensorflow", "mxnet"),
                                      "LeakyReLU with the framework's default slope (Keras 0.3, "
                                      "MXNet's LeakyReLU operator 0.25) for PyTorch's 0.01"),
}
