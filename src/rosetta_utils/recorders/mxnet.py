"""Record every layer's output of an MXNet Gluon model (MXNet 1.9).

``record(model, x)`` runs a Gluon block once under ``autograd.pause(train_mode=False)``
(predict mode: dropout off, batch norms on their running statistics; nothing recorded for
gradients) and keeps each layer's output through forward hooks
(``block.register_forward_hook``), detached afterwards.

What is recorded: every block without children, and, as one layer each, the recurrent
layers ``rnn.LSTM``, ``rnn.GRU`` and ``rnn.RNN`` (bidirectional and stacked ones too; their
sequence output, in the layer's own ``layout``). A ``Dense`` or convolution built with
``activation=`` holds its activation as a child ``act``: it is recorded as two layers, the
layer's own output under its path and the activation under ``<path>.act``. Sequential
containers and blocks of your own with children are not recorded; their children are.
A layer's path is its attribute path from the model, dotted (``features.0``, ``encoder.rnn``);
a model that is itself one layer is recorded under its class's name in lower case.

A hybridized block (``model.hybridize()``) runs one cached graph that skips its children's
hooks: the recorder runs the model imperatively for the recording (each block's ``_active``
flag is turned off, then put back, so the cached graph and its flags stay as they were) and
adds a note saying so. A ``SymbolBlock`` (an imported graph) always runs as one graph: it is
recorded as one layer.

Feature maps are channels first unless a convolution or pool says otherwise: a model with a
channels-last layer (``layout="NHWC"``) has those layers' outputs moved to channels first
when the recording is saved in ``"NCHW"``.

Numpy inputs become ``NDArray`` on the model's context (floating dtypes kept, integer ids as
float32, MXNet's convention for ``Embedding``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from rosetta_utils.frameworks import _use_stdlib_distutils

if "bool" not in np.__dict__:
    np.bool = bool  # MXNet 1.9 reads numpy.bool, removed in numpy 1.24
if "mxnet" not in sys.modules and "distutils" not in sys.modules:
    _use_stdlib_distutils()  # else MXNet's import installs setuptools' copy, and Chainer's import then fails

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon import nn, rnn
from mxnet.gluon.nn.basic_layers import _BatchNorm
from mxnet.gluon.nn.conv_layers import _Conv, _Pooling
from mxnet.gluon.rnn.rnn_cell import RecurrentCell
from mxnet.gluon.rnn.rnn_layer import _RNNLayer
from mxnet.util import is_np_array

from rosetta_utils.recorders import (
    Collector,
    Recording,
    RecordingError,
    conv_fan_in,
    dense_fan_in,
    elementwise_gain,
    input_array,
    norm_terms,
    recurrent_fan_in,
    softmax_gain,
)

__all__ = ["record", "to_numpy"]

#: Function names a ``HybridLambda`` or ``Lambda`` may carry that make it an activation.
ACTIVATION_NAMES = {"relu", "relu6", "tanh", "sigmoid", "softrelu", "softplus", "softsign", "gelu", "elu",
                    "selu", "leakyrelu", "leaky_relu", "swish", "silu", "mish", "hard_sigmoid", "log_sigmoid",
                    "erf", "abs"}
#: ... and those that make it a softmax (over the last axis).
SOFTMAX_NAMES = {"softmax", "log_softmax", "softmin"}
_ACTIVATIONS = (nn.Activation, nn.LeakyReLU, nn.PReLU, nn.ELU, nn.SELU, nn.GELU, nn.Swish)


def to_numpy(value: object) -> np.ndarray:
    """An ``NDArray`` (or a numpy array, or a list of equal-shaped arrays) as a numpy array."""
    if isinstance(value, (list, tuple)):
        arrays = [to_numpy(item) for item in value]
        if len({array.shape for array in arrays}) > 1:
            raise RecordingError(f"mxnet: a list of arrays of different shapes "
                                 f"{[array.shape for array in arrays]} is not one array")
        return np.stack(arrays)
    if isinstance(value, mx.sym.Symbol):
        raise RecordingError("mxnet: a Symbol has no values; record(...) runs the model on arrays")
    if hasattr(value, "asnumpy"):
        return value.asnumpy()
    array = np.asarray(value)
    if array.dtype == object:
        raise RecordingError(f"mxnet: a {type(value).__name__} is not an array of numbers")
    return array


def _context(model: gluon.Block):
    for parameter in model.collect_params().values():
        try:
            return parameter.list_ctx()[0]
        except (RuntimeError, AssertionError, IndexError):
            continue
    return mx.current_context()


def _as_inputs(model: gluon.Block, inputs: object) -> list:
    items = list(inputs) if isinstance(inputs, tuple) else [inputs]
    context, converted = _context(model), []
    for index, item in enumerate(items):
        if isinstance(item, mx.nd.NDArray) or (hasattr(item, "asnumpy") and hasattr(item, "context")):
            converted.append(item)
            continue
        if isinstance(item, mx.sym.Symbol):
            raise RecordingError("mxnet: a Symbol input has no values; pass arrays")
        array = input_array("mxnet", index, item)
        dtype = array.dtype if array.dtype.kind == "f" else np.float32
        make = mx.np.array if is_np_array() else mx.nd.array  # after npx.set_np(), numpy-style arrays
        converted.append(make(array, ctx=context, dtype=dtype))
    return converted


# --- which blocks are layers -------------------------------------------------------------

def _fused_activation(block: gluon.Block) -> gluon.Block | None:
    """The ``act`` child of a Dense or convolution built with ``activation=``."""
    if isinstance(block, (nn.Dense, _Conv)) and getattr(block, "act", None) is not None:
        return block.act
    return None


def _is_layer(block: gluon.Block) -> bool:
    return (not block._children or isinstance(block, _RNNLayer) or _fused_activation(block) is not None
            or isinstance(block, nn.SymbolBlock))


def _layers(model: gluon.Block) -> list[tuple[str, gluon.Block]]:
    """The layers to hook, each with its attribute path, in the model's order."""
    if _is_layer(model):
        return [(type(model).__name__.lower(), model)]
    found, seen = [], {id(model)}

    def walk(block: gluon.Block, prefix: str) -> None:
        for key, child in block._children.items():
            if id(child) in seen:
                continue
            seen.add(id(child))
            path = f"{prefix}.{key}" if prefix else str(key)
            if _is_layer(child):
                found.append((path, child))
            else:
                walk(child, path)

    walk(model, "")
    return found


def _blocks(model: gluon.Block) -> list[gluon.Block]:
    found, stack, seen = [], [model], set()
    while stack:
        block = stack.pop()
        if id(block) in seen:
            continue
        seen.add(id(block))
        found.append(block)
        stack.extend(block._children.values())
    return found


def _layout(block: gluon.Block) -> str:
    return block._kwargs.get("layout", "NCHW") if isinstance(block, (_Conv, _Pooling)) else "NCHW"


def _channels_last(block: gluon.Block) -> bool:
    layout = _layout(block)
    return len(layout) >= 3 and layout.endswith("C")


# --- kinds and fan-ins -------------------------------------------------------------------

def _along(values: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """A per-channel vector shaped to broadcast against an array of ``ndim`` axes at ``axis``."""
    shape = [1] * ndim
    shape[axis % ndim] = -1
    return np.asarray(values, dtype=np.float64).reshape(shape)


def _data(parameter) -> np.ndarray:
    return parameter.data().asnumpy().astype(np.float64)


def _norm(block: gluon.Block, x: np.ndarray, y: np.ndarray) -> tuple[int, float]:
    if isinstance(block, _BatchNorm):
        kwargs = block._kwargs
        gamma = 1.0 if kwargs.get("fix_gamma") else _data(block.gamma)
        scale = gamma / np.sqrt(_data(block.running_var) + kwargs["eps"])
        return norm_terms(x, y, (), _along(scale, kwargs["axis"], x.ndim))
    if isinstance(block, nn.LayerNorm):
        gamma = _along(_data(block.gamma), block._axis, x.ndim) if block._scale else 1.0
        return norm_terms(x, y, (block._axis,), gamma)
    if isinstance(block, nn.InstanceNorm):
        axis = block._axis % x.ndim
        gamma = _along(_data(block.gamma), axis, x.ndim) if block._kwargs.get("scale") else 1.0
        return norm_terms(x, y, tuple(a for a in range(1, x.ndim) if a != axis), gamma)
    groups = block._num_groups  # GroupNorm: channels (axis 1) in groups, one gamma per group
    grouped = (x.shape[0], groups, -1)
    gamma = _data(block.gamma).reshape(1, groups, 1) if block._scale else 1.0
    return norm_terms(x.reshape(grouped), y.reshape(grouped), (2,), gamma)


def _rnn_fan_in(block: _RNNLayer, x: object) -> int:
    steps = x.shape[block._layout.find("T")]
    size, hidden, directions = x.shape[-1], block._hidden_size, block._dir
    total = 0
    for _ in range(block._num_layers):
        total += recurrent_fan_in(size, hidden, steps, directions)
        size = (block._projection_size or hidden) * directions
    return total


def _function_name(block: gluon.Block) -> str:
    if isinstance(block, nn.HybridLambda):
        name = block._func_name
    else:
        name = getattr(block._func_impl, "__name__", "")
    return str(name).lower()


class _Recorder:
    """The hooks' shared state: the collector, each layer's path and what ran already."""

    def __init__(self, collector: Collector):
        self.collector = collector
        self.done: set[str] = set()
        self.pending: dict[int, object] = {}

    def keeps(self, path: str) -> bool:
        return self.collector.names is None or path in self.collector.names

    def attach(self, path: str, block: gluon.Block) -> list:
        act = _fused_activation(block)
        if act is None:
            def hook(layer, args, out):
                self.add(path, layer, args[0] if args else None, out)

            return [block.register_forward_hook(hook)]

        def before(parent, args):
            self.pending[id(parent)] = args[0] if args else None

        def after(child, args, out):
            source = self.pending.pop(id(block), None)
            self.add(path, block, source, args[0])
            self.add(f"{path}.act", child, args[0], out)

        return [block.register_forward_pre_hook(before), act.register_forward_hook(after)]

    def add(self, path: str, block: gluon.Block, x: object, output: object) -> None:
        if path in self.done:
            self.collector.note(f"{path} ran more than once: its first call is kept")
            return
        self.done.add(path)
        y = output[0] if isinstance(output, (list, tuple)) else output
        keep = self.keeps(path)
        kind, fan_in, gain, spatial, flatten = self.describe(path, block, x, y, keep)
        self.collector.add(path, kind, y, fan_in, gain=gain, source=x, spatial=spatial, flatten=flatten)

    def describe(self, path: str, block: gluon.Block, x: object, y: object, keep: bool):
        """kind, fan-in, gain, spatial, flatten of one layer's call."""
        numbers = (lambda: (to_numpy(x), to_numpy(y))) if keep else None
        per_example = int(np.prod(x.shape[1:])) if x is not None and len(x.shape) > 1 else 1
        if isinstance(block, nn.Dense):
            flattens = block._flatten and len(x.shape) > 2
            if flattens and keep:
                self.collector.note(f"{path}: Dense(flatten=True) flattens its {tuple(x.shape)} input, so its "
                                    f"fan-in counts the flattened {per_example} features")
            return "dense", dense_fan_in(per_example if flattens else x.shape[-1], block.bias is not None), \
                1.0, False, False
        if isinstance(block, _Conv):
            kwargs, layout = block._kwargs, _layout(block)
            channels = x.shape[layout.find("C")]
            fan_in = conv_fan_in(channels, kwargs["num_group"], kwargs["kernel"], not kwargs["no_bias"])
            return "conv", fan_in, 1.0, _channels_last(block), False
        if isinstance(block, _Pooling):
            kwargs, layout = block._kwargs, _layout(block)
            if kwargs["pool_type"] == "max":
                fan_in = 1
            elif kwargs["global_pool"]:
                fan_in = int(np.prod([x.shape[i] for i, axis in enumerate(layout) if axis not in "NC"]))
            else:
                fan_in = int(np.prod(kwargs["kernel"]))
            return "pool", fan_in, 1.0, _channels_last(block), False
        if isinstance(block, (_BatchNorm, nn.LayerNorm, nn.InstanceNorm, nn.GroupNorm)):
            if isinstance(block, nn.BatchNormReLU) and keep:
                self.collector.note(f"{path}: BatchNormReLU records the batch norm with its ReLU applied")
            fan_in, gain = _norm(block, *numbers()) if keep else (0, 1.0)
            return "norm", fan_in, gain, None, False
        if isinstance(block, _RNNLayer):
            return "recurrent", _rnn_fan_in(block, x), 1.0, False, False
        if isinstance(block, RecurrentCell) and not isinstance(block, rnn.DropoutCell):
            return "recurrent", recurrent_fan_in(x.shape[-1], y.shape[-1], 1), 1.0, False, False
        if isinstance(block, nn.Embedding):
            return "embedding", 0, 1.0, False, False
        if isinstance(block, (nn.Dropout, rnn.DropoutCell)):
            return "dropout", 0, 1.0, None, False
        if isinstance(block, nn.Flatten):
            return "reshape", 0, 1.0, False, True
        if isinstance(block, nn.ReflectionPad2D):
            return "reshape", 0, 1.0, None, False
        if isinstance(block, _ACTIVATIONS):
            return "activation", 1, elementwise_gain(*numbers()) if keep else 1.0, None, False
        if isinstance(block, (nn.HybridLambda, nn.Lambda)):
            name = _function_name(block)
            if name in ACTIVATION_NAMES:
                return "activation", 1, elementwise_gain(*numbers()) if keep else 1.0, None, False
            if name in SOFTMAX_NAMES:
                if keep:
                    self.collector.note(f"{path}: a {name} taken over the last axis (the function's default)")
                return "softmax", y.shape[-1] + 2, softmax_gain(*numbers()) if keep else 1.0, False, False
            return "other", 1, 1.0, None, False
        if isinstance(block, nn.SymbolBlock):
            if keep:
                self.collector.note(f"{path}: a SymbolBlock runs as one graph, recorded as one layer")
            return "other", per_example, 1.0, None, False
        if list(block.collect_params().keys()):
            if keep:
                self.collector.note(f"{path}: {type(block).__name__} is not a layer the recorder knows; "
                                    "its fan-in is taken as its input's size per example")
            return "other", per_example, 1.0, None, False
        return "other", 1, 1.0, None, False


def record(model: gluon.Block, inputs: object, *, names: dict[str, str] | None = None, layout: str = "NCHW",
           path: str | Path | None = None) -> Recording:
    """Run a Gluon block once in predict mode on ``inputs`` (an array or a tuple of arrays,
    numpy or ``NDArray``) and return every layer's output with its kind and fan-in.

    ``names`` maps a layer's attribute path to the name it is saved under (only those are
    kept); ``layout="NCHW"`` moves the outputs of channels-last layers to channels first;
    ``path`` saves the recording there. A hybridized model runs imperatively for the
    recording and stays hybridized afterwards (a note says so). Hooks are detached and the
    hybridization restored even when the forward raises."""
    if not isinstance(model, gluon.Block):
        raise RecordingError(f"mxnet: record needs a gluon Block, not a {type(model).__name__}")
    arguments = _as_inputs(model, inputs)
    layers = _layers(model)
    channels_last = [p for p, block in layers if _channels_last(block)]
    collector = Collector("mxnet", names, layout, channels_last=bool(channels_last), to_numpy=to_numpy)
    if channels_last and len(channels_last) < sum(isinstance(b, (_Conv, _Pooling)) for _, b in layers):
        collector.note("mxnet: the model mixes channels-first and channels-last layers; its image inputs "
                       "are taken as channels last")
    collector.add_inputs(arguments)
    recorder = _Recorder(collector)
    hybrid = [(block, block._active) for block in _blocks(model) if isinstance(block, gluon.HybridBlock)]
    handles = []
    try:
        for layer_path, block in layers:
            handles += recorder.attach(layer_path, block)
        for block, _ in hybrid:
            block._active = False
        with autograd.pause(train_mode=False):
            model(*arguments)
    finally:
        for handle in handles:
            handle.detach()
        for block, active in hybrid:
            block._active = active
    if any(active for _, active in hybrid):
        collector.note("mxnet: the model is hybridized, and a hybridized block runs its cached graph, which "
                       "skips its children's hooks; it ran imperatively for this recording, and stays "
                       "hybridized (its cached graph and flags untouched)")
    return collector.finish(path)
