"""A Flax NNX model's weighted layers in the canonical layout (:mod:`rosetta_utils.porting`).

::

    from rosetta_utils.porting.jax import weighted_layers
    layers = weighted_layers(model, x)        # x: as the model reads it (images NHWC)

The layers are found and ordered by one run of the recorder
(:func:`rosetta_utils.recorders.jax.record`, inference mode): ``nnx.Linear`` (and an
``nnx.LinearGeneral`` of one input and one output axis), ``nnx.Conv`` (1-D, 2-D, 3-D,
grouped, depthwise), ``nnx.ConvTranspose``, ``nnx.BatchNorm``, ``nnx.LayerNorm``,
``nnx.Embed``, ``nnx.RNN`` and ``nnx.Bidirectional`` over an ``LSTMCell``,
``OptimizedLSTMCell`` or ``GRUCell`` (or such a cell called on its own) and
``nnx.MultiHeadAttention``. A layer that never ran on the example input is left out.
A module holding an ``nnx.Param`` outside those (``nnx.GroupNorm``, ``nnx.RMSNorm``,
``nnx.Einsum``, a ``SimpleCell``, your own module's ``nnx.Param``) is refused, naming it.

What Flax's layout needs, per kind (PyTorch's is the canonical one):

- dense: kernel (in, out) -> weight (out, in);
- conv: kernel (*k, in/groups, out) -> (out, in/groups, *k);
- conv_transpose: Flax's ``lax.conv_transpose`` does not flip its kernel, PyTorch's
  transposed convolution does: kernel (*k, in, out) -> (in, out, *k) flipped in every
  spatial axis; with ``transpose_kernel=True`` Flax flips it itself and the kernel is
  (*k, out, in) -> (in, out, *k) without a flip. Flax's padding for PyTorch's ``p`` is
  ``k - 1 - p`` on each side (not a weight: not checked);
- batch_norm: scale, bias, mean, var -> weight, bias, running_mean, running_var;
- layer_norm: scale, bias -> weight, bias (``use_fast_variance`` changes how the
  variance is computed, not the weights);
- embedding: as it is;
- lstm: the cell's eight per-gate Linears (``ii``, ``if_``, ``ig``, ``io`` on the input,
  ``hi``, ``hf``, ``hg``, ``ho`` on the hidden state; an ``OptimizedLSTMCell``'s
  ``dense_i`` and ``dense_h``, gates in column blocks) -> ``weight_ih_l0`` (4H, I) and
  ``weight_hh_l0`` (4H, H), gates i, f, g, o. Flax's cell has one bias per gate, on the
  hidden side: it is read as ``bias_hh_l0`` with ``bias_ih_l0`` zero, and
  ``bias_ih + bias_hh`` is written there (the two only ever add up);
- gru: through :mod:`rosetta_utils.gru` (gates r, z, n; a linear-before-reset GRU).
  Flax's ``GRUCell`` has no bias on its hidden side: b_hr and b_hz are read folded into
  ``bias_ih_l0`` (``bias_hh_l0`` zero) and written folded, and a non-zero b_hn (the
  n gate's recurrent bias, inside the reset) is refused naming the layer, since the
  cell cannot compute it (give its ``dense_h`` a bias and it can);
- attention: the query, key and value kernels (E, heads, head_dim) -> the packed
  ``in_proj_weight`` (3E, E), their biases (heads, head_dim) -> ``in_proj_bias``; the
  output kernel (heads, head_dim, E) -> ``out_proj.weight`` (E, E).

Flatten and unflatten: Flax flattens a feature map with a reshape, a function the
recorder does not see, in channels-last order. A dense layer reading a flattened
channels-last map holds its columns in that order; the canonical order is channels
first. Which order the columns are in is measured, not guessed from shapes (a pool
between changes them, a transpose to NCHW before the reshape, as a port by hand may do,
keeps the shapes and changes the order): a copy of the model (``nnx.clone``) is run
under ``jax.jvp`` with a change per channel added to the output of the layer that made
the map (or to the input image), and the dense layer's input shows which channel each
column came from. Columns in channels-last order are reported in channels-first order
(and written back); columns already in channels-first order are left as they are.
Likewise a dense layer whose output is reshaped into the map the next recorded layer
reads (a convolution, a transposed convolution, a batch norm): its rows are measured the
same way. Where the measure cannot be made (a forward under ``nnx.jit``, whose traced
values cannot be taken out), a dense layer right after a map of its input's size is taken
to read it reshaped channels last, Flax's idiom, and an unflatten is left as it is; the
conversion text says which was done. A model holding NaNs measures nothing either.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from flax.nnx.nn import recurrent as _recurrent

from rosetta_utils import gru
from rosetta_utils.porting import (
    Layer,
    PortingError,
    flatten_columns_to_channels_first,
    flatten_columns_to_channels_last,
    unflatten_rows_to_channels_first,
    unflatten_rows_to_channels_last,
)
from rosetta_utils.recorders import RecordingError
from rosetta_utils.recorders.jax import _inputs, _layers, record

__all__ = ["LAYER_CLASSES", "weighted_layers"]

#: The layer classes each kind is read from (:func:`rosetta_utils.porting.available_kinds`).
LAYER_CLASSES = {
    "dense": ["flax.nnx.Linear", "flax.nnx.LinearGeneral"],
    "conv": ["flax.nnx.Conv"],
    "conv_transpose": ["flax.nnx.ConvTranspose"],
    "batch_norm": ["flax.nnx.BatchNorm"],
    "layer_norm": ["flax.nnx.LayerNorm"],
    "embedding": ["flax.nnx.Embed"],
    "lstm": ["flax.nnx.RNN", "flax.nnx.Bidirectional", "flax.nnx.LSTMCell", "flax.nnx.OptimizedLSTMCell"],
    "gru": ["flax.nnx.RNN", "flax.nnx.Bidirectional", "flax.nnx.GRUCell"],
    "attention": ["flax.nnx.MultiHeadAttention"],
}

_KNOWN = ("nnx.Linear, nnx.LinearGeneral (one input and one output axis), nnx.Conv, nnx.ConvTranspose, "
          "nnx.BatchNorm, nnx.LayerNorm, nnx.Embed, nnx.RNN / nnx.Bidirectional / a cell of LSTMCell, "
          "OptimizedLSTMCell or GRUCell, nnx.MultiHeadAttention")
_WEIGHTED = (nnx.Linear, nnx.LinearGeneral, nnx.Conv, nnx.ConvTranspose, nnx.BatchNorm, nnx.LayerNorm, nnx.Embed,
             nnx.RNN, nnx.Bidirectional, nnx.LSTMCell, nnx.OptimizedLSTMCell, nnx.GRUCell, nnx.MultiHeadAttention)
_MAKES_MAP = (nnx.Conv, nnx.ConvTranspose)
_READS_MAP = (nnx.Conv, nnx.ConvTranspose, nnx.BatchNorm)
_NOT_MAP = (nnx.Linear, nnx.LinearGeneral, nnx.Embed, nnx.RNN, nnx.Bidirectional, nnx.RNNCellBase,
            nnx.MultiHeadAttention)


def weighted_layers(model: nnx.Module, inputs: object) -> list[Layer]:
    """The weighted layers of a Flax NNX ``model`` in the order they ran on ``inputs``
    (an array or a tuple of them, in the model's own layout), each with its arrays in the
    canonical layout and a ``write`` that puts canonical arrays back (see the module's
    docstring). Runs the model once in inference mode (the recorder's run), and a copy
    of it twice under ``jax.jvp`` per dense layer next to a feature map; changes nothing
    in it."""
    if not isinstance(model, nnx.Module):
        raise PortingError(f"jax: a {type(model).__name__} is not a Flax NNX module (flax.nnx.Module)")
    try:
        arrays = _inputs(inputs)
        recording = record(model, arrays, layout="native")
    except RecordingError as error:
        raise PortingError(f"jax: the model could not be run on the example input: {error}") from None
    modules = dict(_layers(model))
    _refuse_unknown(model)
    entries = list(recording.outputs.items())
    maps = _feature_maps(entries, modules)
    layers = []
    for index, (path, _) in enumerate(entries):
        module = modules.get(path)
        if module is None or not isinstance(module, _WEIGHTED):
            continue
        layer = _read(path, module)
        if layer.kind == "dense":
            _place_dense(layer, model, arrays, entries, index, maps, modules)
        layers.append(layer)
    return layers


# --- what is refused ----------------------------------------------------------------------

def _refuse_unknown(model: nnx.Module) -> None:
    """Refuse, naming it, a module holding an ``nnx.Param`` that no known layer holds."""
    owners = {tuple(path): module for path, module in nnx.iter_modules(model)}
    known = [path for path, module in owners.items() if isinstance(module, _WEIGHTED)]
    for path, _ in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        if any(path[:len(k)] == k for k in known):
            continue
        owner = max((p for p in owners if path[:len(p)] == p), key=len)
        module = owners[owner]
        where = ".".join(map(str, owner)) or type(module).__name__.lower()
        raise PortingError(f"jax: {where}: a {type(module).__module__}.{type(module).__qualname__} holds weights "
                           f"({'.'.join(map(str, path))}) that no known layer holds: its weights cannot be moved "
                           f"(known: {_KNOWN})")


# --- reading and writing one layer --------------------------------------------------------

def _numpy(variable: Any) -> np.ndarray:
    return np.array(np.asarray(variable[...]), dtype=np.float32)


def _bias(module: nnx.Module) -> Any:
    bias = getattr(module, "bias", None)
    return bias if isinstance(bias, nnx.Variable) else None


def _scale(module: nnx.Module) -> Any:
    scale = getattr(module, "scale", None)
    return scale if isinstance(scale, nnx.Variable) else None


def _assign(path: str, name: str, variable: Any, array: np.ndarray) -> None:
    """``variable[...] = array`` (NNX's idiom), in the variable's dtype, after checking the
    shape (an assignment would broadcast a wrong one)."""
    current = variable[...]
    array = np.asarray(array)
    if tuple(array.shape) != tuple(current.shape):
        raise PortingError(f"jax: {path}: {name} would be {tuple(array.shape)}, the layer holds "
                           f"{tuple(current.shape)}")
    variable[...] = jnp.asarray(array, dtype=current.dtype)


def _need(arrays: Mapping[str, np.ndarray], path: str, names: tuple[str, ...]) -> None:
    missing = [name for name in names if name not in arrays]
    if missing:
        raise PortingError(f"jax: {path}: no {', '.join(missing)} to write")


def _tuple(value: Any, length: int) -> tuple[int, ...]:
    if value is None:
        return (1,) * length
    if isinstance(value, int):
        return (value,) * length
    return tuple(int(v) for v in value)


def _read(path: str, module: nnx.Module) -> Layer:
    if isinstance(module, nnx.Linear):
        return _dense(path, module)
    if isinstance(module, nnx.LinearGeneral):
        return _linear_general(path, module)
    if isinstance(module, nnx.Conv):
        return _conv(path, module)
    if isinstance(module, nnx.ConvTranspose):
        return _conv_transpose(path, module)
    if isinstance(module, (nnx.BatchNorm, nnx.LayerNorm)):
        return _norm(path, module)
    if isinstance(module, nnx.Embed):
        return _embedding(path, module)
    if isinstance(module, nnx.MultiHeadAttention):
        return _attention(path, module)
    return _recurrent_layer(path, module)


def _weight_and_bias(path: str, kind: str, module: nnx.Module, to_canonical: Callable, to_flax: Callable,
                     config: dict, conversion: str) -> Layer:
    """A layer of one ``kernel`` and an optional ``bias``, the kernel converted both ways."""
    bias = _bias(module)
    arrays = {"weight": to_canonical(_numpy(module.kernel))}
    if bias is not None:
        arrays["bias"] = _numpy(bias)

    def write(canonical: Mapping[str, np.ndarray]) -> None:
        _need(canonical, path, tuple(arrays))
        _assign(path, "kernel", module.kernel, to_flax(np.asarray(canonical["weight"])))
        if bias is not None:
            _assign(path, "bias", bias, canonical["bias"])

    return Layer(path, kind, arrays, config, conversion, write)


def _dense(path: str, module: nnx.Linear) -> Layer:
    return _weight_and_bias(path, "dense", module, lambda k: np.ascontiguousarray(k.T),
                            lambda w: np.ascontiguousarray(w.T), {}, "kernel (in, out) -> (out, in)")


def _linear_general(path: str, module: nnx.LinearGeneral) -> Layer:
    kernel = module.kernel[...]
    axis = module.axis if isinstance(module.axis, int) else tuple(module.axis)
    if kernel.ndim != 2 or axis not in (-1, (-1,)):
        raise PortingError(f"jax: {path}: an nnx.LinearGeneral with a kernel of shape {tuple(kernel.shape)} over "
                           f"axes {module.axis}: only one input and one output axis (a dense layer) can be moved")
    return _weight_and_bias(path, "dense", module, lambda k: np.ascontiguousarray(k.T),
                            lambda w: np.ascontiguousarray(w.T), {}, "kernel (in, out) -> (out, in)")


def _conv(path: str, module: nnx.Conv) -> Layer:
    size = len(module.kernel_size)
    if module.mask is not None:
        raise PortingError(f"jax: {path}: an nnx.Conv with a mask: a masked convolution has no canonical form")
    if any(d != 1 for d in _tuple(module.input_dilation, size)):
        raise PortingError(f"jax: {path}: an nnx.Conv with input_dilation {module.input_dilation}: a fractionally "
                           "strided convolution has no canonical form (use nnx.ConvTranspose)")
    spatial = tuple(range(size))
    config = {"groups": int(module.feature_group_count), "stride": _tuple(module.strides, size),
              "dilation": _tuple(module.kernel_dilation, size)}
    return _weight_and_bias(path, "conv", module,
                            lambda k: np.ascontiguousarray(k.transpose(size + 1, size, *spatial)),
                            lambda w: np.ascontiguousarray(w.transpose(*(a + 2 for a in spatial), 1, 0)),
                            config, f"kernel ({_axes(size)}, in/groups, out) -> (out, in/groups, {_axes(size)})")


def _conv_transpose(path: str, module: nnx.ConvTranspose) -> Layer:
    size = len(module.kernel_size)
    if module.mask is not None:
        raise PortingError(f"jax: {path}: an nnx.ConvTranspose with a mask has no canonical form")
    spatial = tuple(range(size))
    flip = (slice(None),) * 2 + (slice(None, None, -1),) * size
    config = {"groups": 1, "stride": _tuple(module.strides, size), "dilation": _tuple(module.kernel_dilation, size)}
    if module.transpose_kernel:  # (*k, out, in), flipped by Flax itself
        return _weight_and_bias(path, "conv_transpose", module,
                                lambda k: np.ascontiguousarray(k.transpose(size + 1, size, *spatial)),
                                lambda w: np.ascontiguousarray(w.transpose(*(a + 2 for a in spatial), 1, 0)),
                                config, f"kernel ({_axes(size)}, out, in) (transpose_kernel) -> "
                                        f"(in, out, {_axes(size)})")
    return _weight_and_bias(path, "conv_transpose", module,
                            lambda k: np.ascontiguousarray(k.transpose(size, size + 1, *spatial)[flip]),
                            lambda w: np.ascontiguousarray(w[flip].transpose(*(a + 2 for a in spatial), 0, 1)),
                            config, f"kernel ({_axes(size)}, in, out) -> (in, out, {_axes(size)}), flipped in "
                                    f"{_axes(size)} (Flax's conv_transpose does not flip it, PyTorch's does)")


def _axes(size: int) -> str:
    return {1: "w", 2: "h, w", 3: "d, h, w"}.get(size, ", ".join(f"k{i}" for i in range(size)))


def _norm(path: str, module: nnx.Module) -> Layer:
    batch = isinstance(module, nnx.BatchNorm)
    variables = {"weight": _scale(module), "bias": _bias(module)}
    if batch:
        variables.update(running_mean=module.mean, running_var=module.var)
    variables = {name: variable for name, variable in variables.items() if variable is not None}
    arrays = {name: _numpy(variable) for name, variable in variables.items()}

    def write(canonical: Mapping[str, np.ndarray]) -> None:
        _need(canonical, path, tuple(variables))
        for name, variable in variables.items():
            _assign(path, name, variable, canonical[name])

    conversion = "scale, bias, mean, var -> weight, bias, running_mean, running_var" if batch else \
        "scale, bias -> weight, bias"
    return Layer(path, "batch_norm" if batch else "layer_norm", arrays, {"epsilon": float(module.epsilon)},
                 conversion, write)


def _embedding(path: str, module: nnx.Embed) -> Layer:
    def write(canonical: Mapping[str, np.ndarray]) -> None:
        _need(canonical, path, ("weight",))
        _assign(path, "embedding", module.embedding, canonical["weight"])

    return Layer(path, "embedding", {"weight": _numpy(module.embedding)}, {}, "", write)


def _attention(path: str, module: nnx.MultiHeadAttention) -> Layer:
    name = "an nnx.MultiHeadAttention"
    if module.normalize_qk:
        raise PortingError(f"jax: {path}: {name} with normalize_qk (layer norms on queries and keys) has no "
                           "canonical form")
    if module.num_kv_heads != module.num_heads:
        raise PortingError(f"jax: {path}: {name} with {module.num_kv_heads} key and value heads for "
                           f"{module.num_heads} query heads (grouped queries) has no canonical form")
    if module.in_kv_features != module.in_features:
        raise PortingError(f"jax: {path}: {name} whose keys and values have {module.in_kv_features} features "
                           f"and its queries {module.in_features}: the packed in_proj_weight needs them equal")
    if module.attention_fn is not nnx.dot_product_attention:
        raise PortingError(f"jax: {path}: {name} with attention_fn {module.attention_fn!r}: only "
                           "nnx.dot_product_attention (scaled by 1/sqrt(head_dim)) has a canonical form")
    projections = (module.query, module.key, module.value)
    biased = module.use_bias
    arrays = {"in_proj_weight": np.concatenate([_numpy(p.kernel).reshape(_numpy(p.kernel).shape[0], -1).T
                                                for p in projections])}
    if biased:
        arrays["in_proj_bias"] = np.concatenate([_numpy(p.bias).reshape(-1) for p in projections])
    out = _numpy(module.out.kernel)
    arrays["out_proj.weight"] = np.ascontiguousarray(out.reshape(-1, out.shape[-1]).T)
    if biased:
        arrays["out_proj.bias"] = _numpy(module.out.bias)
    arrays = {name: np.ascontiguousarray(array) for name, array in arrays.items()}

    def write(canonical: Mapping[str, np.ndarray]) -> None:
        _need(canonical, path, tuple(arrays))
        weights = np.split(np.asarray(canonical["in_proj_weight"]), 3)
        biases = np.split(np.asarray(canonical["in_proj_bias"]), 3) if biased else (None,) * 3
        for projection, name, weight, bias in zip(projections, ("query", "key", "value"), weights, biases):
            shape = projection.kernel[...].shape
            _assign(path, f"{name}.kernel", projection.kernel, weight.T.reshape(shape))
            if biased:
                _assign(path, f"{name}.bias", projection.bias, bias.reshape(projection.bias[...].shape))
        shape = module.out.kernel[...].shape
        _assign(path, "out.kernel", module.out.kernel, np.asarray(canonical["out_proj.weight"]).T.reshape(shape))
        if biased:
            _assign(path, "out.bias", module.out.bias, canonical["out_proj.bias"])

    return Layer(path, "attention", arrays, {"heads": int(module.num_heads)},
                 "query/key/value kernels (E, heads, head_dim) -> in_proj_weight (3E, E); out kernel "
                 "(heads, head_dim, E) -> out_proj.weight (E, E)", write)


# --- recurrent layers ---------------------------------------------------------------------

_SUFFIXES = {"forward": "_l0", "backward": "_l0_reverse"}


def _cells(path: str, module: nnx.Module) -> dict[str, nnx.Module]:
    """The cell of each direction of an ``nnx.RNN``, ``nnx.Bidirectional`` or a lone cell."""
    if isinstance(module, nnx.Bidirectional):
        if module.merge_fn is not _recurrent._concatenate:
            raise PortingError(f"jax: {path}: an nnx.Bidirectional with merge_fn {module.merge_fn!r}: only the "
                               "concatenation of both directions (the default) has a canonical form")
        rnns = {"forward": module.forward_rnn, "backward": module.backward_rnn}
        for direction, rnn in rnns.items():
            if not isinstance(rnn, nnx.RNN):
                raise PortingError(f"jax: {path}: its {direction} layer is a {type(rnn).__name__}, not an nnx.RNN")
        cells = {direction: rnn.cell for direction, rnn in rnns.items()}
    elif isinstance(module, nnx.RNN):
        if module.reverse:
            raise PortingError(f"jax: {path}: an nnx.RNN with reverse=True runs backward only: no canonical "
                               "form (put it in an nnx.Bidirectional)")
        cells = {"forward": module.cell}
    else:
        cells = {"forward": module}
    for direction, cell in cells.items():
        if not isinstance(cell, (nnx.LSTMCell, nnx.OptimizedLSTMCell, nnx.GRUCell)):
            raise PortingError(f"jax: {path}: a {type(cell).__module__}.{type(cell).__qualname__} cell: only "
                               "LSTMCell, OptimizedLSTMCell and GRUCell have a canonical form")
    kinds = {type(cell) is nnx.GRUCell for cell in cells.values()}
    if len(kinds) > 1:
        raise PortingError(f"jax: {path}: an LSTM cell one way and a GRU cell the other")
    return cells


def _recurrent_layer(path: str, module: nnx.Module) -> Layer:
    cells = _cells(path, module)
    if isinstance(cells["forward"], nnx.GRUCell):
        return _gru(path, module, cells)
    return _lstm(path, cells)


def _lstm_parts(cell: nnx.Module) -> tuple[list, list]:
    """The input-side and hidden-side Linears, one per gate (i, f, g, o), or one for all."""
    if isinstance(cell, nnx.OptimizedLSTMCell):
        return [cell.dense_i], [cell.dense_h]
    return [cell.ii, cell.if_, cell.ig, cell.io], [cell.hi, cell.hf, cell.hg, cell.ho]


def _stack(linears: list) -> tuple[np.ndarray, np.ndarray | None]:
    weight = np.concatenate([_numpy(linear.kernel).T for linear in linears])
    biases = [_bias(linear) for linear in linears]
    bias = None if any(b is None for b in biases) else np.concatenate([_numpy(b) for b in biases])
    return np.ascontiguousarray(weight), bias


def _unstack(path: str, linears: list, weight: np.ndarray, bias: np.ndarray | None) -> None:
    weights = np.split(np.asarray(weight), len(linears))
    biases = np.split(np.asarray(bias), len(linears)) if bias is not None else (None,) * len(linears)
    for linear, w, b in zip(linears, weights, biases):
        _assign(path, "kernel", linear.kernel, np.ascontiguousarray(w.T))
        if b is not None:
            _assign(path, "bias", linear.bias, b)


def _lstm(path: str, cells: dict[str, nnx.Module]) -> Layer:
    for cell in cells.values():
        if cell.gate_fn is not jax.nn.sigmoid or cell.activation_fn not in (jnp.tanh, nnx.tanh, jax.nn.tanh):
            raise PortingError(f"jax: {path}: an LSTM cell whose gate_fn is not sigmoid or activation_fn not "
                               "tanh has no canonical form")
    arrays, sides = {}, {}
    for direction, cell in cells.items():
        suffix = _SUFFIXES[direction]
        inputs, hidden = _lstm_parts(cell)
        weight_ih, bias_ih = _stack(inputs)
        weight_hh, bias_hh = _stack(hidden)
        zeros = np.zeros(weight_hh.shape[0], np.float32)
        arrays.update({f"weight_ih{suffix}": weight_ih, f"weight_hh{suffix}": weight_hh,
                       f"bias_ih{suffix}": zeros if bias_ih is None else bias_ih,
                       f"bias_hh{suffix}": zeros if bias_hh is None else bias_hh})
        sides[direction] = (inputs, hidden, bias_ih is not None, bias_hh is not None)

    def write(canonical: Mapping[str, np.ndarray]) -> None:
        _need(canonical, path, tuple(arrays))
        for direction, (inputs, hidden, input_bias, hidden_bias) in sides.items():
            suffix = _SUFFIXES[direction]
            b_ih, b_hh = np.asarray(canonical[f"bias_ih{suffix}"]), np.asarray(canonical[f"bias_hh{suffix}"])
            if not hidden_bias and not input_bias and (np.any(b_ih) or np.any(b_hh)):
                raise PortingError(f"jax: {path}: its LSTM cell has no bias and the weights' biases are not zero")
            if hidden_bias and not input_bias:
                b_ih, b_hh = None, b_ih + b_hh
            elif input_bias and not hidden_bias:
                b_ih, b_hh = b_ih + b_hh, None
            _unstack(path, inputs, canonical[f"weight_ih{suffix}"], b_ih)
            _unstack(path, hidden, canonical[f"weight_hh{suffix}"], b_hh)

    optimized = isinstance(cells["forward"], nnx.OptimizedLSTMCell)
    conversion = ("dense_i (in, 4H), dense_h (H, 4H) -> (4H, in), (4H, H)" if optimized else
                  "eight gate kernels ii, if_, ig, io (in, H) and hi, hf, hg, ho (H, H) -> stacked (4H, in), (4H, H)")
    conversion += "; one bias (hidden side): read as bias_hh, bias_ih 0; written bias_ih + bias_hh"
    return Layer(path, "lstm", arrays, {"layers": 1, "directions": len(cells)}, conversion, write)


def _gru(path: str, module: nnx.Module, cells: dict[str, nnx.Module]) -> Layer:
    try:
        weights = gru.get_weights(module)
        info = gru.dispatch.converter_for(module).layer_info(module)
    except gru.GRUConversionError as error:
        raise PortingError(f"jax: {path}: {error}") from None
    arrays = {}
    for direction in cells:
        for key in gru.CANONICAL_KEYS:
            arrays[f"{key}{_SUFFIXES[direction]}"] = weights[direction][key]

    def write(canonical: Mapping[str, np.ndarray]) -> None:
        _need(canonical, path, tuple(arrays))
        moved = {direction: {key: gru.as_float32(canonical[f"{key}{_SUFFIXES[direction]}"])
                             for key in gru.CANONICAL_KEYS} for direction in cells}
        try:
            gru.set_weights(module, {**moved, "flavor": gru.LBR})
        except gru.GRUConversionError as error:  # its hint at approximate=True is not this call's
            raise PortingError(f"jax: {path}: {str(error).split('. Pass approximate=True')[0]}") from None

    holds = bool(info["holds_b_hn"])
    conversion = "kernels (in, 3H), (H, 3H) -> (3H, in), (3H, H), gates r, z, n"
    if not holds:
        conversion += "; no hidden-side bias: b_hr, b_hz read folded into bias_ih, a non-zero b_hn refused"
    return Layer(path, "gru", arrays, {"layers": 1, "directions": len(cells), "flavor": gru.LBR,
                                       "holds_b_hn": holds}, conversion, write)


# --- a dense layer next to a feature map ----------------------------------------------------

def _feature_maps(entries: list[tuple[str, np.ndarray]], modules: Mapping[str, nnx.Module]) -> list[bool]:
    """Whether each recorded output is a channels-last feature map: an input image, a
    convolution's output, and a norm's, dropout's or unknown layer's of the same number of
    axes after one."""
    maps = []
    for path, output in entries:
        module = modules.get(path)
        if module is None:  # an input
            maps.append(output.ndim >= 4)
        elif isinstance(module, _MAKES_MAP):
            maps.append(True)
        elif isinstance(module, _NOT_MAP):
            maps.append(False)
        else:
            maps.append(bool(maps) and maps[-1] and output.ndim >= 3 and output.ndim == entries[len(maps) - 1][1].ndim)
    return maps


def _place_dense(layer: Layer, model: nnx.Module, arrays: tuple,
                 entries: list[tuple[str, np.ndarray]], index: int, maps: list[bool],
                 modules: Mapping[str, nnx.Module]) -> None:
    """Permute a dense layer's columns when it reads a flattened channels-last map, its rows
    when its output is unflattened into one (see the module's docstring)."""
    weight = layer.arrays["weight"]
    features_out, features_in = weight.shape
    notes = []
    columns = rows = None
    previous, output = entries[index - 1] if index > 0 else (None, None)
    if output is not None and maps[index - 1] and output.ndim >= 3:
        channels = output.shape[-1]
        if features_in % channels == 0 and features_in > channels:
            source = previous if previous in modules else _input_index(entries, previous)
            order = _flatten_order(model, arrays, source, layer.path, channels, features_in)
            if order is None and int(np.prod(output.shape[1:])) == features_in:
                order, how = "last", "taken to be"
            else:
                how = "measured"
            if order == "last":
                columns = (features_in // channels, channels)
                notes.append(f"columns of a channels-last map flattened ({columns[0]} positions x {channels} "
                             f"channels, {how}) -> channels-first order")
            elif order == "first":
                notes.append("columns measured already in channels-first order (left as they are)")
            elif order == "other":
                notes.append("columns read a map in an order neither channels-last nor channels-first (left as "
                             "they are)")
    if index + 1 < len(entries):
        after = modules.get(entries[index + 1][0])
        if isinstance(after, _READS_MAP):
            channels = int(after.in_features) if not isinstance(after, nnx.BatchNorm) else int(after.num_features)
            if features_out % channels == 0 and features_out > channels:
                order = _unflatten_order(model, arrays, layer.path, entries[index + 1][0], channels, features_out)
                if order == "last":
                    rows = (features_out // channels, channels)
                    notes.append(f"rows unflattened into a channels-last map ({rows[0]} positions x {channels} "
                                 "channels, measured) -> channels-first order")
                elif order == "first":
                    notes.append("rows measured already in channels-first order of the map they fill")
                elif order is None:
                    notes.append(f"whether {entries[index + 1][0]} reads these rows as a map could not be "
                                 "measured: rows left as they are")
                elif order == "other":
                    notes.append(f"{entries[index + 1][0]} reads these rows in an order neither channels-last nor "
                                 "channels-first (left as they are)")
    if columns is None and rows is None:
        if notes:
            layer.conversion += "; " + "; ".join(notes)
        return
    bias = layer.arrays.get("bias")
    if columns is not None:
        weight = flatten_columns_to_channels_first(weight, columns)
    if rows is not None:
        weight, bias = unflatten_rows_to_channels_first(weight, bias, rows)
    layer.arrays["weight"] = np.ascontiguousarray(weight)
    if bias is not None:
        layer.arrays["bias"] = np.ascontiguousarray(bias)
    layer.conversion += "; " + "; ".join(notes)
    write = layer.write

    def permuted(canonical: Mapping[str, np.ndarray]) -> None:
        _need(canonical, layer.path, tuple(layer.arrays))
        weight, bias = np.asarray(canonical["weight"]), canonical.get("bias")
        if rows is not None:
            weight, bias = unflatten_rows_to_channels_last(weight, None if bias is None else np.asarray(bias), rows)
        if columns is not None:
            weight = flatten_columns_to_channels_last(weight, columns)
        write({"weight": weight, **({} if bias is None else {"bias": bias})})

    layer.write = permuted


def _input_index(entries: list[tuple[str, np.ndarray]], name: str | None) -> int | None:
    inputs = [path for path, _ in entries if path == "input" or path.startswith("input.")]
    return inputs.index(name) if name in inputs else None


def _flatten_order(model: nnx.Module, arrays: tuple, source: str | int | None, dense: str, channels: int,
                   features: int) -> str | None:
    """How a dense layer's input columns hold the channels of the map ``source`` made (a
    module, or an input's index): "last", "first", "other", or None where it cannot be
    measured."""
    if source is None:
        return None
    tangents = _tangents(model, arrays, source, dense, channels)
    if tangents is None or tangents.shape[-1] != features or tangents.ndim != 3:
        return None
    labels = _labels(tangents, channels).reshape(-1, features)
    column = _per_position(labels)
    if column is None:
        return "other"
    known = column >= 0
    positions = features // channels
    last, first = np.arange(features) % channels, np.arange(features) // positions
    return _decide(column[known], last[known], first[known])


def _unflatten_order(model: nnx.Module, arrays: tuple, dense: str, after: str, channels: int,
                     features: int) -> str | None:
    """How the map the next layer reads holds the dense layer's rows: "last", "first",
    "other", "none" where that map is not made of them, or None where it cannot be
    measured."""
    tangents = _tangents(model, arrays, dense, after, features)
    if tangents is None:
        return None
    if tangents.ndim < 4 or tangents.shape[-1] != channels or int(np.prod(tangents.shape[2:])) != features:
        return "none"
    labels = _labels(tangents, features).reshape(-1, features)
    row = _per_position(labels)
    if row is None:
        return "other"
    known = row >= 0
    positions = features // channels
    grid = np.arange(features).reshape(positions, channels)
    last, first = grid.ravel(), (np.arange(channels)[None, :] * positions + np.arange(positions)[:, None]).ravel()
    return _decide(row[known], last[known], first[known]) or "none"


def _decide(found: np.ndarray, last: np.ndarray, first: np.ndarray) -> str | None:
    if not found.size or np.array_equal(last, first):
        return None
    if np.array_equal(found, last):
        return "last"
    if np.array_equal(found, first):
        return "first"
    return "other"


def _labels(tangents: np.ndarray, count: int) -> np.ndarray:
    """The label (0 .. count-1) each value's change came from, from the two tangents (the
    labels + 1, and ones): their ratio, which a per-position scale between (an activation,
    a pool over one channel) leaves whole; -1 where nothing changed or the ratio is not
    one label's."""
    marked, plain = tangents.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = marked / plain
    label = np.rint(ratio)
    good = (np.abs(plain) > 0) & np.isfinite(ratio) & (np.abs(ratio - label) < 1e-2) & (label >= 1) & (label <= count)
    return np.where(good, label - 1, -1).astype(np.int64)


def _per_position(labels: np.ndarray) -> np.ndarray | None:
    """One label per position (the last axis) over the examples; -1 where none is known,
    None where two examples disagree."""
    known = labels >= 0
    best = np.where(known, labels, -1).max(axis=0)
    if np.any(known & (labels != best[None, :])):
        return None
    return best


def _tangents(model: nnx.Module, arrays: tuple, source: str | int, target: str, count: int) -> np.ndarray | None:
    """Run a copy of the model (``nnx.clone``, in inference mode) twice under ``jax.jvp``
    with a change added to the output of the layer at path ``source`` (or to input number
    ``source``) along its last axis: ``label + 1`` for each of its ``count`` entries, then
    ones; return the two changes of the input of the layer at path ``target``, stacked (None
    where the model cannot be run so: a forward under ``nnx.jit``, whose traced values
    cannot be taken out, is run on the copy, which it may leave broken)."""
    copy = nnx.clone(model)
    copy.eval()
    modules = dict(_layers(copy))
    captured: list = []
    delta: list = []
    wraps = {id(modules[target]): lambda call, *args, **kwargs: (captured.append(args[0]), call(*args, **kwargs))[1]}
    if not isinstance(source, int):
        wraps[id(modules[source])] = lambda call, *args, **kwargs: call(*args, **kwargs) + delta[0]

    def forward(change):
        captured.clear()
        delta[:] = [change]
        inputs = list(arrays)
        if isinstance(source, int):
            inputs[source] = inputs[source] + change
        copy(*inputs)
        return captured[0]

    results = []
    try:
        with _wrapped(copy, wraps):
            for tangent in (np.arange(1, count + 1, dtype=np.float32), np.ones(count, np.float32)):
                _, change = jax.jvp(forward, (jnp.zeros(count, jnp.float32),), (jnp.asarray(tangent),))
                results.append(np.asarray(change))
    except Exception:  # noqa: BLE001 (a forward that cannot be run under jvp: not measured)
        return None
    finally:
        captured.clear()
        delta.clear()
    return np.stack(results)


# --- running a model with some layers' calls wrapped --------------------------------------

_WRAPS: dict[int, Callable] = {}
_CLASSES: dict[type, type] = {}


def _wrapping_class(cls: type) -> type:
    """A subclass of ``cls`` whose ``__call__`` goes through the wrapper registered for the
    instance, if any."""
    if cls not in _CLASSES:
        def __call__(self, *args, **kwargs):
            call = functools.partial(cls.__call__, self)
            wrap = _WRAPS.get(id(self))
            return call(*args, **kwargs) if wrap is None else wrap(call, *args, **kwargs)

        namespace = {"__call__": __call__, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        _CLASSES[cls] = type(cls)(cls.__name__, (cls,), namespace, pytree=getattr(cls, "_pytree__is_pytree", False))
    return _CLASSES[cls]


@contextlib.contextmanager
def _wrapped(model: nnx.Module, wraps: Mapping[int, Callable]) -> Iterator[None]:
    """Within: each module of ``model`` whose id is in ``wraps`` calls through its wrapper."""
    swapped = []
    try:
        for _, module in nnx.iter_modules(model):
            if id(module) in wraps and id(module) not in _WRAPS:
                cls = type(module)
                module.__class__ = _wrapping_class(cls)
                swapped.append((module, cls))
                _WRAPS[id(module)] = wraps[id(module)]
        yield
    finally:
        for module, cls in reversed(swapped):
            module.__class__ = cls
            _WRAPS.pop(id(module), None)
