"""Record a Keras 3 model's layer outputs (:mod:`rosetta_utils.recorders`), TensorFlow backend.

``record(model, x)`` replaces, for the length of one run, the ``call`` method of every
leaf layer of ``model`` (a layer without sub-layers) and of the composite layers recorded
whole (recurrent layers, ``Bidirectional``, ``TimeDistributed``, the attention layers)
by a wrapper that sees the layer's inputs and outputs; runs ``model(x, training=False)``
eagerly (``tf.function``-s too, for the run: ``tf.config.run_functions_eagerly``); and
puts every ``call`` back, also when the run raises. ``Sequential``, functional and
subclassed models all run their layers through ``Layer.__call__``, which calls the
layer's ``call``, so the three styles of one architecture record the same arrays.

A layer's path: in a ``Sequential`` or functional model, its ``name``; in a subclassed
model or layer, the attribute it is stored in (``"blocks.0"`` for a list; its name where
no attribute holds it); nested models and layers join theirs with dots
(``"encoder.dense_1"``). A model that is itself a leaf layer is recorded under its name.

A layer with a fused activation (``Conv2D(8, 3, activation="relu")``) records its
output after the activation, as Keras computes it in one layer: its port records the
convolution and the activation as two layers, and its ``names`` should map the Keras
layer to the activation's name. Feature maps of ``data_format="channels_last"`` layers
(Keras's default) are moved channels first when ``layout="NCHW"``; a
``channels_first`` layer's are kept as they are.
"""

from __future__ import annotations

import inspect

import keras
import numpy as np
import tensorflow as tf
from keras import layers as kl
from keras.src.models.functional import Functional

from rosetta_utils.recorders import (
    Collector,
    Recording,
    RecordingError,
    attention_fan_in,
    conv_fan_in,
    dense_fan_in,
    elementwise_gain,
    input_array,
    norm_terms,
    recurrent_fan_in,
    softmax_gain,
)

FRAMEWORK = "tensorflow"


def _classes(*names: str) -> tuple[type, ...]:
    return tuple(getattr(kl, name) for name in names if hasattr(kl, name))


ATTENTIONS = _classes("MultiHeadAttention", "GroupQueryAttention", "GroupedQueryAttention")
DOT_ATTENTIONS = _classes("Attention", "AdditiveAttention")
#: Layers with sub-layers recorded as one layer, their sub-layers not wrapped.
COMPOSITES = (kl.RNN, kl.Bidirectional, kl.TimeDistributed) + ATTENTIONS
SEPARABLE = _classes("SeparableConv1D", "SeparableConv2D")
DEPTHWISE = _classes("DepthwiseConv1D", "DepthwiseConv2D")
TRANSPOSED = _classes("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose")
CONVOLUTIONS = _classes("Conv1D", "Conv2D", "Conv3D")
MAX_POOLS = _classes("MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "GlobalMaxPooling1D", "GlobalMaxPooling2D",
                     "GlobalMaxPooling3D", "AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D", "AdaptiveMaxPooling3D")
AVERAGE_POOLS = _classes("AveragePooling1D", "AveragePooling2D", "AveragePooling3D")
GLOBAL_AVERAGE_POOLS = _classes("GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D")
ADAPTIVE_AVERAGE_POOLS = _classes("AdaptiveAveragePooling1D", "AdaptiveAveragePooling2D", "AdaptiveAveragePooling3D")
DROPOUTS = _classes("Dropout", "GaussianDropout", "GaussianNoise", "AlphaDropout", "ActivityRegularization")
ACTIVATIONS = _classes("ReLU", "LeakyReLU", "PReLU", "ELU", "Activation")
FEATURE_NORMS = _classes("LayerNormalization", "RMSNormalization")
ELEMENTWISE_MERGES = _classes("Add", "Subtract", "Average", "Multiply", "Maximum", "Minimum")


def to_numpy(tensor: object) -> np.ndarray:
    if tf.is_tensor(tensor) and hasattr(tensor, "numpy"):
        return np.asarray(tensor.numpy())
    return np.asarray(keras.ops.convert_to_numpy(tensor))


def _tensors(value: object) -> list[object]:
    """The tensors in a layer's argument (a tensor, or a list, tuple or dict of them)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return [value] if hasattr(value, "shape") and hasattr(value, "dtype") else []


def _primary(output: object) -> object:
    """The output the next layer reads: the sequence of a recurrent layer returning its
    states, the attended values of an attention layer returning its scores."""
    while isinstance(output, (list, tuple)) and output:
        output = output[0]
    return output


def _channels_last(layer: object) -> bool:
    return getattr(layer, "data_format", "channels_last") != "channels_first"


def _per_example(x: object) -> int:
    shape = tuple(getattr(x, "shape", ()))
    return int(np.prod(shape[1:])) if len(shape) > 1 else int(np.prod(shape))


def _numpy_of(variable: object | None) -> np.ndarray | float:
    return 1.0 if variable is None else to_numpy(variable).astype(np.float64)


def _broadcast(values: np.ndarray | float, ndim: int, axes: tuple[int, ...]) -> np.ndarray | float:
    """A parameter over ``axes`` (gamma, a moving variance) shaped to broadcast against an input."""
    if np.ndim(values) == 0:
        return values
    shape = [1] * ndim
    for axis, size in zip(axes, np.shape(values)):
        shape[axis] = size
    return np.reshape(values, shape)


def _axes(axis: object, ndim: int) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(int(a) % ndim for a in axes))


def _norm(layer: object, x: object, y: object) -> tuple[int, float]:
    """A normalisation's fan-in and gain from numpy copies of its input and output."""
    xs, ys = to_numpy(x).astype(np.float64), to_numpy(y).astype(np.float64)
    gamma = _numpy_of(getattr(layer, "gamma", None))
    if isinstance(layer, kl.BatchNormalization):
        axes = _axes(layer.axis, xs.ndim)
        scale = gamma / np.sqrt(_numpy_of(layer.moving_variance) + layer.epsilon)
        return norm_terms(xs, ys, (), _broadcast(scale, xs.ndim, axes))
    if isinstance(layer, kl.GroupNormalization):
        axis = int(layer.axis) % xs.ndim
        xs, ys = np.moveaxis(xs, axis, -1), np.moveaxis(ys, axis, -1)
        shape = xs.shape[:-1] + (layer.groups, xs.shape[-1] // layer.groups)
        xs, ys = xs.reshape(shape), ys.reshape(shape)
        scale = gamma if np.ndim(gamma) == 0 else gamma.reshape(layer.groups, -1)
        return norm_terms(xs, ys, tuple(range(1, xs.ndim - 2)) + (xs.ndim - 1,), scale)
    axes = _axes(layer.axis, xs.ndim)
    return norm_terms(xs, ys, axes, _broadcast(gamma, xs.ndim, axes))


def _recurrent_fan_in(layer: object, x: object) -> int:
    """A recurrent layer's fan-in: its cell's (or stacked cells') sums over every step."""
    steps, features = int(x.shape[1]), int(x.shape[-1])
    cells = getattr(layer.cell, "cells", [layer.cell])
    fan_in = 0
    for cell in cells:
        if hasattr(cell, "kernel_size"):
            taps = int(np.prod(cell.kernel_size))
            fan_in += steps * (taps * (features + cell.filters) + 8)
            features = cell.filters
        else:
            units = int(getattr(cell, "units", features))
            fan_in += recurrent_fan_in(features, units, steps)
            features = units
    return fan_in


def _einsum_fan_in(layer: object) -> int:
    operands, output = layer.equation.split("->")
    kernel = operands.split(",")[1]
    shape = tuple(layer.kernel.shape)
    summed = [shape[i] for i, letter in enumerate(kernel) if letter not in output]
    return int(np.prod(summed)) + int(getattr(layer, "bias", None) is not None)


def _describe(layer: object, arguments: dict, x: object, y: object, measure: bool = True) -> dict:
    """A layer's kind, fan-in, gain and layout flags for :meth:`Collector.add`, from its
    class and configuration (and, for norms, softmaxes and activations, its input ``x``
    and output ``y``; ``measure=False`` leaves those gains at 1). ``arguments``: its call's
    arguments by name."""
    maps = _channels_last(layer)
    # a dense layer on an image's channels is a 1x1 convolution (a feature map); on a sequence's
    # features (N, T, C), PyTorch's Linear reads the same axis: not a feature map to move
    dense_map = None if len(y.shape) >= 4 else False
    if isinstance(layer, kl.Dense):
        return dict(kind="dense", fan_in=dense_fan_in(layer.kernel.shape[0], layer.use_bias), spatial=dense_map)
    if isinstance(layer, kl.EinsumDense):
        return dict(kind="dense", fan_in=_einsum_fan_in(layer), spatial=dense_map)
    if isinstance(layer, SEPARABLE):
        channels = int(layer.depthwise_kernel.shape[-2])
        fan_in = (conv_fan_in(channels, channels, layer.kernel_size, False)
                  + conv_fan_in(channels * layer.depth_multiplier, 1, (1,), layer.use_bias))
        return dict(kind="conv", fan_in=fan_in, spatial=maps)
    if isinstance(layer, DEPTHWISE):
        channels = int(layer.kernel.shape[-2])
        return dict(kind="conv", fan_in=conv_fan_in(channels, channels, layer.kernel_size, layer.use_bias),
                    spatial=maps)
    if isinstance(layer, TRANSPOSED):
        return dict(kind="conv", fan_in=conv_fan_in(layer.kernel.shape[-1], 1, layer.kernel_size, layer.use_bias),
                    spatial=maps)
    if isinstance(layer, CONVOLUTIONS):
        groups = int(getattr(layer, "groups", 1))
        return dict(kind="conv", spatial=maps,
                    fan_in=conv_fan_in(int(layer.kernel.shape[-2]) * groups, groups, layer.kernel_size,
                                       layer.use_bias))
    if isinstance(layer, (kl.BatchNormalization, kl.GroupNormalization) + FEATURE_NORMS):
        fan_in, gain = _norm(layer, x, y) if measure else (4, 1.0)
        return dict(kind="norm", fan_in=fan_in, gain=gain)
    if isinstance(layer, kl.Embedding):
        return dict(kind="embedding", fan_in=0)
    if isinstance(layer, kl.Bidirectional):
        fan_in = _recurrent_fan_in(layer.forward_layer, x)
        return dict(kind="recurrent", fan_in=fan_in, spatial=False)
    if isinstance(layer, kl.RNN):
        spatial = len(y.shape) >= 4 and maps and hasattr(layer.cell, "kernel_size")
        return dict(kind="recurrent", fan_in=_recurrent_fan_in(layer, x), spatial=spatial)
    if isinstance(layer, ATTENTIONS):
        query = arguments.get("query", x)
        key = arguments.get("key")
        key = arguments.get("value", query) if key is None else key
        axes = getattr(layer, "_attention_axes", None) or tuple(range(1, len(key.shape) - 1))
        keys = int(np.prod([key.shape[a] for a in axes]))
        head = getattr(layer, "_key_dim", None) or getattr(layer, "head_dim", None) or int(query.shape[-1])
        return dict(kind="attention", fan_in=attention_fan_in(int(query.shape[-1]), int(head), keys), spatial=False)
    if isinstance(layer, DOT_ATTENTIONS):
        inputs = _tensors(arguments.get("inputs", x))
        value = inputs[1] if len(inputs) > 1 else inputs[0]
        return dict(kind="attention", fan_in=attention_fan_in(0, int(inputs[0].shape[-1]), int(value.shape[1])),
                    spatial=False)
    if isinstance(layer, kl.TimeDistributed):
        about = _describe(layer.layer, {}, _merge_time(x), _merge_time(y), measure)
        about.update(spatial=False, flatten=False)
        return about
    if isinstance(layer, MAX_POOLS):
        keeps = len(y.shape) == len(x.shape)
        return dict(kind="pool", fan_in=1, spatial=maps and keeps)
    if isinstance(layer, AVERAGE_POOLS):
        return dict(kind="pool", fan_in=int(np.prod(layer.pool_size)), spatial=maps)
    if isinstance(layer, GLOBAL_AVERAGE_POOLS):
        spatial_axes = x.shape[1:-1] if maps else x.shape[2:]
        keeps = len(y.shape) == len(x.shape)
        return dict(kind="pool", fan_in=int(np.prod(spatial_axes)), spatial=maps and keeps)
    if isinstance(layer, ADAPTIVE_AVERAGE_POOLS):
        sizes_in = x.shape[1:-1] if maps else x.shape[2:]
        sizes_out = y.shape[1:-1] if maps else y.shape[2:]
        windows = [_adaptive_window(int(a), int(b)) for a, b in zip(sizes_in, sizes_out)]
        return dict(kind="pool", fan_in=int(np.prod(windows)), spatial=maps)
    if isinstance(layer, DROPOUTS):
        return dict(kind="dropout", fan_in=0)
    if isinstance(layer, kl.Flatten):
        return dict(kind="reshape", fan_in=0, flatten=True, spatial=False)
    if isinstance(layer, kl.Reshape):
        return dict(kind="reshape", fan_in=0, spatial=len(y.shape) >= 4)
    if isinstance(layer, (kl.Permute, kl.RepeatVector)):
        return dict(kind="reshape", fan_in=0, spatial=False)
    if isinstance(layer, kl.Concatenate):
        return dict(kind="reshape", fan_in=0)
    if isinstance(layer, ELEMENTWISE_MERGES):
        return dict(kind="other", fan_in=len(_tensors(arguments.get("inputs", x))))
    softmax = isinstance(layer, kl.Softmax) or (
        isinstance(layer, kl.Activation) and getattr(layer.activation, "__name__", "") in ("softmax", "log_softmax"))
    if softmax:
        axes = _axes(getattr(layer, "axis", -1), len(x.shape))
        gain = softmax_gain(to_numpy(x), to_numpy(y)) if measure else 1.0
        return dict(kind="softmax", fan_in=int(np.prod([x.shape[a] for a in axes])) + 2, gain=gain)
    if isinstance(layer, ACTIVATIONS):
        gain = elementwise_gain(to_numpy(x), to_numpy(y)) if measure else 1.0
        return dict(kind="activation", fan_in=1, gain=gain)
    same_rank = x is not None and len(x.shape) == len(y.shape) and maps
    if layer.weights:
        return dict(kind="other", fan_in=_per_example(x), spatial=None if same_rank else False, unknown=True)
    return dict(kind="other", fan_in=1, spatial=None if same_rank else False)


def _adaptive_window(size: int, out: int) -> int:
    """The widest window an adaptive pool takes to make ``out`` values of ``size``."""
    return max(-(-(i + 1) * size // out) - (i * size) // out for i in range(out))


def _merge_time(array: object) -> np.ndarray:
    values = to_numpy(array)
    return values.reshape((-1,) + values.shape[2:])


def _sublayers(layer: object) -> list[object]:
    return [sub for sub in getattr(layer, "_layers", []) if not isinstance(sub, kl.InputLayer)]


def _attribute_paths(layer: object) -> dict[int, str]:
    """A subclassed layer's sub-layers by the attribute that holds them (public attributes
    first): id of the sub-layer -> ``"attr"``, ``"attr.0"``, ``"attr.key"``."""
    found: dict[int, str] = {}
    items = sorted(vars(layer).items(), key=lambda item: item[0].startswith("_"))
    for attribute, value in items:
        private = attribute.startswith("_")
        if attribute in ("_layers", "_tracker", "_functional") or attribute.startswith("_self_"):
            continue
        if isinstance(value, kl.Layer):
            found.setdefault(id(value), attribute)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                if isinstance(item, kl.Layer):
                    found.setdefault(id(item), f"{attribute}.{index}")
        elif isinstance(value, dict) and not private:
            for key, item in value.items():
                if isinstance(item, kl.Layer):
                    found.setdefault(id(item), f"{attribute}.{key}")
    return found


def _recorded_layers(model: object) -> list[tuple[str, object]]:
    """(path, layer) of every leaf and composite layer, each layer once (its first path)."""
    found: list[tuple[str, object]] = []
    seen: set[int] = set()
    functional = (keras.Sequential, Functional)

    def visit(layer: object, path: str) -> None:
        if id(layer) in seen:
            return
        seen.add(id(layer))
        children = _sublayers(layer)
        if isinstance(layer, COMPOSITES) or not children:
            found.append((path or layer.name, layer))
            return
        attributes = {} if isinstance(layer, functional) else _attribute_paths(layer)
        for child in children:
            name = attributes.get(id(child), child.name)
            visit(child, f"{path}.{name}" if path else name)

    visit(model, "")
    return found


def _as_tensors(model: object, inputs: object) -> tuple[object, ...]:
    """The inputs as tensors: numpy arrays (and array-likes) converted, floating ones to the
    model's compute dtype; tensors as they are."""
    items = inputs if isinstance(inputs, tuple) else (inputs,)
    dtype = getattr(model, "compute_dtype", "float32")
    tensors = []
    for index, item in enumerate(items):
        if item is None:
            tensors.append(item)
            continue
        if isinstance(item, keras.KerasTensor):
            raise RecordingError(f"{FRAMEWORK}: input {index} is a symbolic KerasTensor: give it arrays")
        if tf.is_tensor(item):
            tensors.append(item)
            continue
        array = input_array(FRAMEWORK, index, item)
        tensors.append(tf.convert_to_tensor(array, dtype=dtype if array.dtype.kind == "f" else None))
    return tuple(tensors)


def _run(model: object, tensors: tuple[object, ...]) -> object:
    """Call the model on its inputs: one tensor, a list for a functional model, positional
    arguments for a subclassed model whose ``call`` takes that many (a list otherwise)."""
    if len(tensors) == 1:
        return model(tensors[0], training=False)
    if not isinstance(model, (keras.Sequential, Functional)):
        parameters = [p for p in inspect.signature(model.call).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in ("training", "mask")]
        if len(parameters) >= len(tensors):
            return model(*tensors, training=False)
    return model(list(tensors), training=False)


def record(model: object, inputs: object, *, names: dict[str, str] | None = None, layout: str = "NCHW",
           path: str | None = None) -> Recording:
    """Run the Keras ``model`` once on ``inputs`` (an array or tensor, or a tuple of them)
    with ``training=False``, and record the input and every layer's output in the order
    the layers ran, with each one's kind and fan-in. ``names`` maps a layer's path to the
    name it is saved under and keeps only those; ``layout="NCHW"`` saves channels-last
    feature maps channels first; ``path`` saves the recording there. Every layer's
    ``call`` is restored afterwards, also when the model raises."""
    if not isinstance(model, kl.Layer):
        raise RecordingError(f"{FRAMEWORK}: a model must be a Keras layer or model, not {type(model).__name__}")
    collector = Collector(FRAMEWORK, names, layout, channels_last=True, to_numpy=to_numpy)
    return run_collecting(model, inputs, collector).finish(path)


def run_collecting(model: object, inputs: object, collector: Collector) -> Collector:
    """What :func:`record` does, into a ``collector`` of the caller's (a :class:`Collector`,
    or a subclass that keeps more of each layer, as :mod:`rosetta_utils.porting` does);
    returns it unfinished."""
    if not isinstance(model, kl.Layer):
        raise RecordingError(f"{FRAMEWORK}: a model must be a Keras layer or model, not {type(model).__name__}")
    tensors = _as_tensors(model, inputs)
    collector.add_inputs(tensors)
    done: set[str] = set()
    skipped: list[str] = []

    def wrapper_for(layer_path: str, layer: object, call):
        signature = inspect.signature(call)

        def wrapped(*args, **kwargs):
            output = call(*args, **kwargs)
            if not tf.executing_eagerly():
                skipped.append(layer_path)
                return output
            if layer_path in done:
                collector.note(f"{layer_path} ran more than once: its first call is recorded")
                return output
            done.add(layer_path)
            try:
                arguments = signature.bind_partial(*args, **kwargs).arguments
            except TypeError:
                arguments = {}
            inputs_seen = _tensors(list(args) + list(kwargs.values()))
            x = inputs_seen[0] if inputs_seen else None
            y = _primary(output)
            if not hasattr(y, "shape"):
                raise RecordingError(f"{FRAMEWORK}: {layer_path} ({type(layer).__name__}) returned "
                                     f"{type(output).__name__}, not a tensor the recorder can record")
            about = _describe(layer, arguments, x, y, measure=collector.keeps(layer_path))
            if about.pop("unknown", False):
                collector.note(f"{layer_path}: {type(layer).__name__} is not a layer the recorder knows; its fan-in "
                               "is taken as its input's size per example")
            collector.add(layer_path, about.pop("kind"), y, about.pop("fan_in"), source=x, **about)
            return output
        return wrapped

    patched: list[tuple[object, bool, object]] = []
    eager = tf.config.functions_run_eagerly()
    try:
        for layer_path, layer in _recorded_layers(model):
            own = vars(layer).get("call")
            patched.append((layer, "call" in vars(layer), own))
            object.__setattr__(layer, "call", wrapper_for(layer_path, layer, layer.call))
        tf.config.run_functions_eagerly(True)
        _run(model, tensors)
    finally:
        tf.config.run_functions_eagerly(eager)
        for layer, had, own in patched:
            if had:
                object.__setattr__(layer, "call", own)
            else:
                vars(layer).pop("call", None)
    if skipped and not done:
        raise RecordingError(f"{FRAMEWORK}: the model ran its layers only in a graph ({skipped[0]}, ...), "
                             "not eagerly: call record on the Keras model, not on a traced function")
    return collector
