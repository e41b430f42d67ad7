"""The weighted layers of an MXNet Gluon model (MXNet 1.9), in the canonical layout.

``weighted_layers(model, x)`` records the model once on ``x`` with
:func:`rosetta_utils.recorders.mxnet.record` (predict mode; a hybridized model runs
imperatively for it and stays hybridized) and reads, in the order the layers ran, each
one that holds weights. Running it first also completes Gluon's deferred
initialisation (``in_units=0``, ``in_channels=0``), so the shapes are known.

Gluon keeps PyTorch's layouts, so every array is a copy under another name: ``Dense``
(out, in), ``Conv1D`` / ``Conv2D`` (grouped and depthwise too: out, in/groups, k...),
``Conv1DTranspose`` / ``Conv2DTranspose`` (in, out/groups, k...), ``BatchNorm`` (gamma,
beta, running_mean, running_var -> weight, bias, running_mean, running_var), ``LayerNorm``,
``Embedding``, and ``rnn.LSTM`` / ``rnn.GRU`` (``l0_i2h_weight`` -> ``weight_ih_l0``,
``r0_`` -> ``_reverse``; gates i, f, c, o and r, z, n, PyTorch's order). A ``Dense`` with
``flatten=True`` flattens a channels-first map in PyTorch's order: its columns need nothing.

Writing copies into the Parameters' own arrays (an operator's output, not ``set_data``'s
copy, which fails on a weight MKL-DNN holds in its own layout after a run), the arrays a
hybridized block's cached graph reads: the next call computes with the new weights.
Refused, naming the layer: channels-last convolutions (``layout="NHWC"``; MXNet's CPU
build does not run them), an LSTM with ``projection_size``, ``rnn.RNN``, recurrent cells, every other block
with parameters (``PReLU``, ``InstanceNorm``, ``GroupNorm``, a ``SymbolBlock``), and a
block of your own that holds parameters of its own beside its children.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rosetta_utils import gru
from rosetta_utils.porting import Layer, PortingError
from rosetta_utils.recorders import mxnet as recorder

# MXNet as the recorder imported it (numpy's removed alias restored first)
mx, gluon, nn = recorder.mx, recorder.gluon, recorder.nn
_BatchNorm, _Conv, _RNNLayer = recorder._BatchNorm, recorder._Conv, recorder._RNNLayer
RecurrentCell = recorder.RecurrentCell

__all__ = ["weighted_layers"]

#: Canonical recurrent array names -> Gluon's (after the layer and direction prefix ``l0_`` / ``r0_``).
#: The installed release's layer classes each kind is read from (what ``available_kinds`` checks).
LAYER_CLASSES = {
    "dense": ("mxnet.gluon.nn.Dense",),
    "conv": ("mxnet.gluon.nn.Conv1D", "mxnet.gluon.nn.Conv2D", "mxnet.gluon.nn.Conv3D"),
    "conv_transpose": ("mxnet.gluon.nn.Conv1DTranspose", "mxnet.gluon.nn.Conv2DTranspose"),
    "batch_norm": ("mxnet.gluon.nn.BatchNorm",),
    "layer_norm": ("mxnet.gluon.nn.LayerNorm",),
    "embedding": ("mxnet.gluon.nn.Embedding",),
    "lstm": ("mxnet.gluon.rnn.LSTM",),
    "gru": ("mxnet.gluon.rnn.GRU",),
}
_RNN_NAMES = {"weight_ih": "i2h_weight", "weight_hh": "h2h_weight", "bias_ih": "i2h_bias", "bias_hh": "h2h_bias"}


def _read(parameter) -> np.ndarray:
    return np.array(parameter.data(parameter.list_ctx()[0]).asnumpy(), dtype=np.float32)


def _set(parameter, array: np.ndarray) -> None:
    """Write ``array`` into every context's copy of ``parameter``: through an operator's output where
    the parameter holds arrays (after a run in predict mode MKL-DNN may keep a weight, a Conv1D's, in
    its own layout, and ``set_data``'s copy into it then fails), through ``set_data`` where its
    initialisation is still deferred."""
    if parameter._data is None:
        make = mx.np.array if recorder.is_np_array() else mx.nd.array
        parameter.set_data(make(np.asarray(array), dtype=parameter.dtype))
        return
    for data in parameter.list_data():
        target = data.as_nd_ndarray() if recorder.is_np_array() else data
        mx.nd.identity(mx.nd.array(np.asarray(array), ctx=data.context, dtype=data.dtype), out=target)
    trainer = parameter._trainer  # as set_data does: a trainer that updates on its kvstore reads it again
    if trainer and trainer._kv_initialized and trainer._update_on_kvstore and parameter not in trainer._params_to_init:
        trainer._reset_kvstore()


def _writer(path: str, parameters: Mapping[str, object]):
    """A write that sets each canonical array into its Parameter, checking shapes first."""
    def write(arrays: Mapping[str, np.ndarray]) -> None:
        for name, parameter in parameters.items():
            if tuple(arrays[name].shape) != tuple(parameter.shape):
                raise PortingError(f"mxnet: {path}: {name} is {arrays[name].shape}, the layer holds "
                                   f"{tuple(parameter.shape)}")
        for name, parameter in parameters.items():
            _set(parameter, arrays[name])
    return write


def _plain(path: str, kind: str, parameters: Mapping[str, object], config=None, conversion: str = "") -> Layer:
    """A layer whose canonical arrays are its Parameters as they are."""
    parameters = {name: parameter for name, parameter in parameters.items() if parameter is not None}
    arrays = {name: _read(parameter) for name, parameter in parameters.items()}
    return Layer(path, kind, arrays, dict(config or {}), conversion, _writer(path, parameters))


def _convolution(path: str, block: _Conv) -> Layer:
    kwargs = block._kwargs
    if recorder._channels_last(block):
        raise PortingError(f"mxnet: {path}: a {type(block).__name__} with layout {kwargs['layout']!r} (channels "
                           "last, weight (out, k..., in)): not handled; build it with the channels-first layout")
    kind = "conv_transpose" if block._op_name == "Deconvolution" else "conv"
    config = {"groups": int(kwargs["num_group"]), "stride": tuple(int(s) for s in kwargs["stride"]),
              "dilation": tuple(int(d) for d in kwargs["dilate"])}
    return _plain(path, kind, {"weight": block.weight, "bias": block.bias}, config)


def _batch_norm(path: str, block: _BatchNorm) -> Layer:
    parameters = {"weight": block.gamma, "bias": block.beta, "running_mean": block.running_mean,
                  "running_var": block.running_var}
    config = {"epsilon": float(block._kwargs["eps"])}
    if not block._kwargs.get("fix_gamma"):
        return _plain(path, "batch_norm", parameters, config)
    layer = _plain(path, "batch_norm", parameters, config, "scale=False (fix_gamma): weight read as ones")
    layer.arrays["weight"] = np.ones_like(layer.arrays["weight"])
    write = layer.write

    def write_fixed(arrays: Mapping[str, np.ndarray]) -> None:
        if np.any(arrays["weight"] != 1):
            raise PortingError(f"mxnet: {path}: a BatchNorm built with scale=False multiplies by 1, and the "
                               "weight to write is not all ones")
        write({**arrays, "weight": np.asarray(block.gamma.data(block.gamma.list_ctx()[0]).asnumpy())})

    layer.write = write_fixed
    return layer


def _direction_names(layers: int, directions: int):
    """(canonical suffix, Gluon prefix) of each layer and direction, in PyTorch's order."""
    return [(f"_l{index}" + ("_reverse" if direction else ""), f"{'lr'[direction]}{index}_")
            for index in range(layers) for direction in range(directions)]


def _recurrent(path: str, block: _RNNLayer) -> Layer:
    mode = block._mode
    if mode not in ("lstm", "gru"):
        raise PortingError(f"mxnet: {path}: an rnn.RNN ({mode}): no canonical layout for a plain recurrent layer")
    if block._projection_size:
        raise PortingError(f"mxnet: {path}: an LSTM with projection_size={block._projection_size}: not handled")
    layers, directions = block._num_layers, block._dir
    parameters = {name + suffix: block._reg_params[prefix + gluon_name]
                  for suffix, prefix in _direction_names(layers, directions)
                  for name, gluon_name in _RNN_NAMES.items()}
    config = {"layers": layers, "directions": directions}
    if mode == "lstm":
        return _plain(path, "lstm", parameters, config)
    config.update(flavor=gru.LBR, holds_b_hn=True)
    if layers > 1:  # rosetta_utils.gru handles one layer; the stacked layers are copies alike
        return _plain(path, "gru", parameters, config)
    try:
        weights = gru.get_weights(block)
    except gru.GRUConversionError as error:
        raise PortingError(f"mxnet: {path}: {error}") from None
    arrays = {name + suffix: weights[direction][name] for direction, suffix in (("forward", "_l0"),
                                                                               ("backward", "_l0_reverse"))
              if direction in weights for name in _RNN_NAMES}

    def write(canonical: Mapping[str, np.ndarray]) -> None:
        given = {direction: {name: np.asarray(canonical[name + suffix], np.float32) for name in _RNN_NAMES}
                 for direction, suffix in (("forward", "_l0"), ("backward", "_l0_reverse"))[:directions]}
        try:
            gru.set_weights(block, {**given, "flavor": gru.LBR})
        except gru.GRUConversionError as error:
            raise PortingError(f"mxnet: {path}: {error}") from None

    return Layer(path, "gru", arrays, config, "", write)


def _layer(path: str, block: gluon.Block) -> Layer:
    """The canonical reading of one recorded block that holds parameters."""
    if isinstance(block, nn.Dense):
        return _plain(path, "dense", {"weight": block.weight, "bias": block.bias})
    if isinstance(block, _Conv):
        return _convolution(path, block)
    if isinstance(block, _BatchNorm):
        return _batch_norm(path, block)
    if isinstance(block, nn.LayerNorm):
        return _plain(path, "layer_norm", {"weight": block.gamma, "bias": block.beta},
                      {"epsilon": float(block._epsilon)})
    if isinstance(block, nn.Embedding):
        return _plain(path, "embedding", {"weight": block.weight})
    if isinstance(block, _RNNLayer):
        return _recurrent(path, block)
    if isinstance(block, RecurrentCell):
        raise PortingError(f"mxnet: {path}: a recurrent cell ({type(block).__name__}) run step by step: not "
                           "handled; use the rnn.LSTM / rnn.GRU layer")
    names = ", ".join(sorted(block.collect_params().keys()))
    raise PortingError(f"mxnet: {path}: a {type(block).__module__}.{type(block).__name__} holds weights ({names}) "
                       "and is no layer this module knows")


def _refuse_loose_parameters(model: gluon.Block) -> None:
    """Refuse a block with children that also holds parameters of its own (they would not move)."""
    def walk(block: gluon.Block, path: str, seen: set[int]) -> None:
        if id(block) in seen or recorder._is_layer(block):
            return
        seen.add(id(block))
        if block._reg_params:
            raise PortingError(f"mxnet: {path or type(block).__name__}: a {type(block).__name__} holds parameters "
                               f"of its own ({', '.join(sorted(block._reg_params))}) beside its children: no layer "
                               "this module knows")
        for key, child in block._children.items():
            walk(child, f"{path}.{key}" if path else str(key), seen)

    walk(model, "", set())


def weighted_layers(model: gluon.Block, inputs: object) -> list[Layer]:
    """The Gluon model's blocks that hold weights, in the order they ran on ``inputs`` (numpy
    or NDArray, as :func:`rosetta_utils.recorders.mxnet.record` takes them), each with its
    arrays in PyTorch's layout and a ``write`` that copies canonical arrays back into its
    Parameters (hybridized or not). The model is run once, in predict mode, and otherwise left as it was."""
    if not isinstance(model, gluon.Block):
        raise PortingError(f"mxnet: a gluon Block is needed, not a {type(model).__name__}")
    _refuse_loose_parameters(model)
    blocks = dict(recorder._layers(model))
    recording = recorder.record(model, inputs, layout="native")
    layers = []
    for path in recording.outputs:
        block = blocks.get(path)
        if block is not None and list(block.collect_params().keys()):  # a ParameterDict is never falsy
            layers.append(_layer(path, block))
    return layers
