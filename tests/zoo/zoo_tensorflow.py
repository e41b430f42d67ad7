"""The zoo in Keras 3 (TensorFlow backend): every model of :mod:`spec` ported by hand from
PyTorch's ``state_dict`` (``set_weights``), in all three of Keras's styles (``Sequential``:
mlp, separable, bigru, decoder; functional: cnn, textconv; subclassed: lstm, attention),
computing channels last, and recorded by ``rosetta_utils.recorders.tensorflow``.

Every layer has the canonical name as its ``name`` (and, in the subclassed models, as its
attribute too), so the recorder's paths are the spec's names. ``port(model, weights)`` is the
correct port (at Keras's own initialisation without ``weights``), ``framework_inputs`` the
spec's arrays as it takes them: what ``run`` records, and what ``move.py`` moves weights into."""

from __future__ import annotations

import functools

import keras
import numpy as np
import spec
from keras import layers, ops

#: Keras has a layer for every layer of the zoo.
ABSENT: dict[str, set[str]] = {model: set() for model in spec.MODELS}


# --- moving PyTorch's arrays to Keras's layouts -----------------------------------------------

def dense(w, name, transpose=True, bias=True):
    """A Linear's (out, in) weight as a Dense kernel (in, out), and its bias."""
    kernel = w[f"{name}.weight"]
    return [kernel.T if transpose else kernel, w[f"{name}.bias"] if bias else np.zeros_like(w[f"{name}.bias"])]


def conv(w, name, bias=True):
    """A Conv2d/Conv1d's (out, in, *kernel) weight as a Conv kernel (*kernel, in, out)."""
    kernel = w[f"{name}.weight"]
    kernel = kernel.transpose(*range(2, kernel.ndim), 1, 0)
    return [kernel, w[f"{name}.bias"] if bias else np.zeros_like(w[f"{name}.bias"])]


def batch_norm(w, name, moved=True):
    mean, var = w[f"{name}.running_mean"], w[f"{name}.running_var"]
    if not moved:
        mean, var = np.zeros_like(mean), np.ones_like(var)
    return [w[f"{name}.weight"], w[f"{name}.bias"], mean, var]


def layer_norm(w, name):
    return [w[f"{name}.weight"], w[f"{name}.bias"]]


def flatten_rows(kernel, channels, height, width):
    """A Dense kernel whose rows follow a channels-first flatten (c, h, w), reordered for
    Keras's channels-last Flatten (h, w, c)."""
    out = kernel.shape[1]
    return kernel.reshape(channels, height, width, out).transpose(1, 2, 0, 3).reshape(-1, out)


def gate_blocks(array, order):
    """A recurrent weight's gate blocks (PyTorch stacks them on axis 0) in another order."""
    blocks = np.split(array, len(order), axis=0)
    return np.concatenate([blocks[i] for i in order], axis=0)


# --- the models -------------------------------------------------------------------------------

def mlp(w, trap):
    eps = 1e-3 if trap == "ln_eps_1e-3" else 1e-5
    gelu = functools.partial(keras.activations.gelu, approximate=True) if trap == "gelu_tanh" else "gelu"
    model = keras.Sequential([
        keras.Input((16,)),
        layers.LayerNormalization(epsilon=eps, name="norm_in"),
        layers.Dense(32, name="fc1"),
        layers.Activation(gelu, name="gelu"),
        layers.Dense(32, name="fc2"),
        layers.LayerNormalization(epsilon=eps, name="norm"),
        layers.Activation("tanh", name="tanh"),
        layers.Dense(5, name="head"),
        layers.Softmax(axis=0 if trap == "softmax_wrong_axis" else -1, name="softmax"),
    ], name="mlp")
    if w is not None:  # else Keras's own initialisation
        model.get_layer("norm_in").set_weights(layer_norm(w, "norm_in"))
        model.get_layer("fc1").set_weights(dense(w, "fc1", bias=trap != "dense_bias_dropped"))
        model.get_layer("fc2").set_weights(dense(w, "fc2", transpose=trap != "square_kernel_not_transposed"))
        model.get_layer("norm").set_weights(layer_norm(w, "norm"))
        model.get_layer("head").set_weights(dense(w, "head"))
    return model


def cnn(w, trap):
    pixels = keras.Input((15, 15, 3))
    x = layers.Conv2D(8, 3, padding="valid" if trap == "conv_no_padding" else "same", name="conv1")(pixels)
    x = layers.BatchNormalization(epsilon=1e-5, name="bn1")(x)
    x = layers.ReLU(name="relu1")(x)
    x = layers.MaxPooling2D(2, padding="valid" if trap == "max_pool_floor" else "same", name="pool1")(x)
    x = layers.Conv2D(16, 2, name="conv2")(x)
    x = layers.ReLU(name="relu2")(x)
    if trap == "avg_pool_counts_padding":
        x = layers.ZeroPadding2D(1, name="pad2")(x)
        x = layers.AveragePooling2D(3, strides=2, name="pool2")(x)
    else:  # TensorFlow's "same" average pool leaves the padding out of its counts
        x = layers.AveragePooling2D(3, strides=2, padding="same", name="pool2")(x)
    features = layers.Flatten(name="flatten")(x)
    fits = x.shape[1] == 4  # a trap that shrank the map leaves fc's 256-row kernel nothing to load into
    model = keras.Model(pixels, layers.Dense(10, name="fc")(features) if fits else features, name="cnn")
    if w is not None:  # else Keras's own initialisation
        kernel, bias = conv(w, "conv1")
        if trap == "conv_out_channels_permuted":
            kernel, bias = kernel[..., ::-1], bias[::-1]
        model.get_layer("conv1").set_weights([kernel, bias])
        model.get_layer("bn1").set_weights(batch_norm(w, "bn1", moved=trap != "bn_running_mean_not_moved"))
        model.get_layer("conv2").set_weights(conv(w, "conv2"))
        if fits:
            model.get_layer("fc").set_weights([flatten_rows(w["fc.weight"].T, 16, 4, 4), w["fc.bias"]])
    return model


def separable(w, trap):
    model = keras.Sequential([
        keras.Input((12, 12, 8)),
        layers.DepthwiseConv2D(3, padding="same", name="dw"),
        layers.Conv2D(16, 1, name="pw"),
        layers.BatchNormalization(epsilon=1e-5, name="bn"),
        layers.ReLU(name="relu6") if trap == "relu6_as_relu" else layers.ReLU(max_value=6.0, name="relu6"),
        (layers.GlobalMaxPooling2D if trap == "global_max_for_average" else layers.GlobalAveragePooling2D)(
            keepdims=True, name="gap"),
        layers.Flatten(name="flatten"),
        layers.Dense(4, name="fc"),
    ], name="separable")
    if w is not None:  # else Keras's own initialisation
        depthwise = w["dw.weight"].transpose(2, 3, 0, 1)  # (8, 1, 3, 3) -> (3, 3, 8, 1): a multiplier of 1
        model.get_layer("dw").set_weights([depthwise, w["dw.bias"]])
        model.get_layer("pw").set_weights(conv(w, "pw", bias=trap != "pointwise_bias_dropped"))
        model.get_layer("bn").set_weights(batch_norm(w, "bn"))
        model.get_layer("fc").set_weights(dense(w, "fc"))
    return model


def textconv(w, trap):
    ids = keras.Input((20,), dtype="int64")
    x = layers.Embedding(50, 16, name="embed")(ids)
    x = layers.Conv1D(24, 5, padding="valid" if trap == "conv1d_valid" else "same", name="conv")(x)
    x = layers.ReLU(name="relu")(x)
    x = layers.GlobalMaxPooling1D(name="max_over_time")(x)
    model = keras.Model(ids, layers.Dense(3, name="fc")(x), name="textconv")
    if w is not None:  # else Keras's own initialisation
        table = w["embed.weight"]
        shifted = trap == "embedding_rows_shifted"
        model.get_layer("embed").set_weights([np.roll(table, -1, axis=0) if shifted else table])
        kernel, bias = conv(w, "conv")
        model.get_layer("conv").set_weights([kernel[::-1] if trap == "conv1d_kernel_flipped" else kernel, bias])
        model.get_layer("fc").set_weights(dense(w, "fc"))
    return model


class LSTMTagger(keras.Model):
    def __init__(self):
        super().__init__(name="lstm_tagger")
        self.embed = layers.Embedding(40, 16, name="embed")
        self.lstm = layers.LSTM(24, return_sequences=True, name="lstm")
        self.fc = layers.Dense(6, name="fc")

    def call(self, ids):
        return self.fc(self.lstm(self.embed(ids)))


def lstm(w, trap):
    model = LSTMTagger()
    model(np.zeros((1, 3), np.int64))
    if w is not None:  # else Keras's own initialisation
        model.embed.set_weights([w["embed.weight"]])
        order = (1, 0, 2, 3) if trap == "lstm_gate_order" else (0, 1, 2, 3)  # PyTorch's i, f, g, o is Keras's
        bias = gate_blocks(w["lstm.bias_ih_l0"] + w["lstm.bias_hh_l0"], order)
        if trap == "lstm_forget_bias":
            bias[24:48] += 1.0
        model.lstm.set_weights([gate_blocks(w["lstm.weight_ih_l0"], order).T,
                                gate_blocks(w["lstm.weight_hh_l0"], order).T, bias])
        model.fc.set_weights(dense(w, "fc"))
    return model


def gru_weights(w, suffix, order):
    """PyTorch's r, z, n blocks as Keras's z, r, h (reset_after=True keeps both biases)."""
    moved = {name: gate_blocks(w[f"gru.{name}_l0{suffix}"], order)
             for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    return [moved["weight_ih"].T, moved["weight_hh"].T, np.stack([moved["bias_ih"], moved["bias_hh"]])]


def bigru(w, trap):
    model = keras.Sequential([
        keras.Input((None, 8)),
        layers.Bidirectional(layers.GRU(12, return_sequences=True), merge_mode="concat", name="gru"),
        layers.Dense(3, name="fc"),
    ], name="bigru")
    if w is not None:  # else Keras's own initialisation
        order = (2, 0, 1) if trap == "gru_z_n_swapped" else (1, 0, 2)
        forward, backward = gru_weights(w, "", order), gru_weights(w, "_reverse", order)
        if trap == "gru_directions_swapped":
            forward, backward = backward, forward
        gru = model.get_layer("gru")
        gru.forward_layer.set_weights(forward)
        gru.backward_layer.set_weights(backward)
        model.get_layer("fc").set_weights(dense(w, "fc"))
    return model


class AttentionBlock(keras.Model):
    def __init__(self, trap):
        super().__init__(name="attention_block")
        self.trap = trap
        self.attn = layers.MultiHeadAttention(num_heads=2, key_dim=8, name="attn")
        self.norm1 = layers.LayerNormalization(epsilon=1e-3 if trap == "attention_ln_eps" else 1e-5, name="norm1")
        self.ff1 = layers.Dense(32, name="ff1")
        self.relu = layers.ReLU(name="relu")
        self.ff2 = layers.Dense(16, name="ff2")
        self.norm2 = layers.LayerNormalization(epsilon=1e-5, name="norm2")

    def call(self, inputs, pad=None):
        x, pad = inputs if pad is None else (inputs, pad)
        attend = pad if self.trap == "mask_polarity" else ops.logical_not(pad)  # Keras: True attends
        attended = self.attn(x, x, x, attention_mask=attend[:, None, :])
        h = self.norm1(x + attended)
        return self.norm2(h + self.ff2(self.relu(self.ff1(h))))


def attention(w, trap):
    model = AttentionBlock(trap)
    model((np.zeros((1, 6, 16), np.float32), np.zeros((1, 6), bool)))
    if w is not None:  # else Keras's own initialisation
        q, k, v = np.split(w["attn.in_proj_weight"], 3)
        bq, bk, bv = np.split(w["attn.in_proj_bias"], 3)
        if trap == "qk_projections_swapped":
            q, k, bq, bk = k, q, bk, bq
        out_bias = w["attn.out_proj.bias"]
        if trap == "attention_out_bias_dropped":
            out_bias = np.zeros_like(out_bias)

        def heads(kernel):  # a Linear's (out, in) as Keras's (in, heads, head size)
            return kernel.T.reshape(16, 2, 8)

        model.attn.set_weights([heads(q), bq.reshape(2, 8), heads(k), bk.reshape(2, 8), heads(v), bv.reshape(2, 8),
                                w["attn.out_proj.weight"].T.reshape(2, 8, 16), out_bias])
        model.norm1.set_weights(layer_norm(w, "norm1"))
        model.ff1.set_weights(dense(w, "ff1"))
        model.ff2.set_weights(dense(w, "ff2"))
        model.norm2.set_weights(layer_norm(w, "norm2"))
    return model


def decoder(w, trap):
    if trap == "unflatten_order":  # a channels-last reshape of fc's channels-first features
        unflatten = [layers.Reshape((4, 4, 16), name="unflatten")]
    else:
        # fc's features are PyTorch's (c, h, w): as (c, h·w), transposed to (h·w, c), then unflattened
        unflatten = [layers.Reshape((16, 16), name="channels"), layers.Permute((2, 1), name="channels_last"),
                     layers.Reshape((4, 4, 16), name="unflatten")]
    model = keras.Sequential([
        keras.Input((8,)),
        layers.Dense(256, name="fc"),
        *unflatten,
        layers.ReLU(name="relu0"),
        layers.Conv2DTranspose(8, 4, strides=2, padding="same", name="up1"),
        layers.LeakyReLU(name="act1") if trap == "leaky_relu_default_slope" else layers.LeakyReLU(0.01, name="act1"),
        layers.Conv2DTranspose(3, 3, padding="same", name="up2"),
        layers.Activation("hard_sigmoid" if trap == "hard_sigmoid" else "sigmoid", name="sigmoid"),
    ], name="decoder")
    if w is not None:  # else Keras's own initialisation
        model.get_layer("fc").set_weights(dense(w, "fc"))
        for name in ("up1", "up2"):  # (in, out, kh, kw) -> (kh, kw, out, in): both are a convolution's gradient
            kernel = w[f"{name}.weight"].transpose(2, 3, 1, 0)
            if name == "up1" and trap == "conv_transpose_kernel_flipped":
                kernel = kernel[::-1, ::-1]
            model.get_layer(name).set_weights([kernel, w[f"{name}.bias"]])
    return model


BUILDERS = {"mlp": mlp, "cnn": cnn, "separable": separable, "textconv": textconv, "lstm": lstm, "bigru": bigru,
            "attention": attention, "decoder": decoder}


def port_inputs(model: str, inputs: tuple, trap: str | None) -> tuple:
    """The port's input pipeline: the spec's arrays (or the trap's), images channels last."""
    if trap == "input_not_standardised":
        inputs = (inputs[0] * 2 + 1,)
    elif trap == "bgr_statistics":
        inputs = (spec.preprocess(spec.raw_pixels(model), order="BGR"),)
    elif trap == "pixels_not_scaled":
        inputs = (spec.preprocess(spec.raw_pixels(model), scale=1.0),)
    return tuple(np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 else x for x in inputs)


def build(model: str, weights: dict[str, np.ndarray] | None, trap: str | None = None) -> keras.Model:
    """The port (with ``trap`` planted), loaded with ``weights`` by hand (left at Keras's own
    initialisation where ``weights`` is None)."""
    if trap is not None and (spec.TRAPS[trap]["model"] != model or "tensorflow" not in spec.TRAPS[trap]["frameworks"]):
        raise ValueError(f"{trap}: not a Keras trap of {model}")
    return BUILDERS[model](weights, trap)


def names_of(model: str, trap: str | None = None) -> dict[str, str]:
    """The recorder's ``names``: every layer under its spec name."""
    names = {name: name for name in spec.MODELS[model]["layers"] if not name.startswith("input")}
    if trap in ("conv_no_padding", "max_pool_floor"):
        del names["fc"]  # the model ends at flatten (spec.py: a trap that changes a feature map's size)
    return names


def port(model: str, weights: dict[str, np.ndarray] | None = None) -> tuple[keras.Model, dict[str, str]]:
    """The correct port, loaded with ``weights`` (PyTorch's ``state_dict`` names) if given,
    else at Keras's own initialisation; and the recorder's ``names`` for it."""
    return build(model, weights), names_of(model)


def framework_inputs(model: str, inputs: tuple) -> tuple:
    """The spec's arrays as the port takes them: images channels last."""
    return port_inputs(model, inputs, None)


def forward(model: str, weights: dict[str, np.ndarray], inputs: tuple, trap: str | None = None) -> np.ndarray:
    """The port's final output (no recorder), channels first like PyTorch's."""
    net = build(model, weights, trap)
    x = port_inputs(model, inputs, trap)
    y = ops.convert_to_numpy(net(x if len(x) > 1 else x[0], training=False))
    return y.transpose(0, 3, 1, 2) if y.ndim == 4 else y


def run(model: str, weights: dict[str, np.ndarray], inputs: tuple, trap: str | None = None, path=None):
    """Build the port (with ``trap`` planted), and record it on ``inputs`` (the spec's arrays)."""
    from rosetta_utils.recorders.tensorflow import record

    if trap is None:
        net, names = port(model, weights)
        return record(net, framework_inputs(model, inputs), names=names, path=path)
    net = build(model, weights, trap)
    return record(net, port_inputs(model, inputs, trap), names=names_of(model, trap), path=path)
