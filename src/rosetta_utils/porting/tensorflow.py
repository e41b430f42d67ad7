"""A Keras 3 model's weighted layers for :mod:`rosetta_utils.porting` (TensorFlow backend).

The layers and their order come from the Keras recorder
(:func:`rosetta_utils.recorders.tensorflow.run_collecting`, what ``record`` runs):
``Sequential``, functional and subclassed models alike, each layer under the
recorder's path; recurrent layers, ``Bidirectional`` and ``MultiHeadAttention`` whole;
``TimeDistributed`` read through the layer it wraps. Each layer's arrays are moved
to PyTorch's names and layouts, and its ``write`` moves them back:

- ``Dense``: kernel (in, out) -> weight (out, in). A dense layer reading a flattened
  channels-last feature map (``Flatten``, or a reshape to (N, -1), of an (N, H, W, C)
  or (N, W, C) map) holds its columns in channels-first order, and one whose output a
  ``Reshape`` unflattens into a channels-last map (4-D, or 3-D read by a convolution)
  its rows and bias likewise.
- ``Conv1D/2D/3D``: kernel (*k, in/groups, out) -> (out, in/groups, *k);
  ``DepthwiseConv1D/2D``: (*k, in, multiplier) -> (in·multiplier, 1, *k), groups = in;
  ``Conv1DTranspose/2D/3D``: (*k, out, in) -> (in, out, *k), no flip (Keras's and
  PyTorch's transposed convolutions are both the gradient of a cross-correlation).
- ``BatchNormalization``: gamma, beta, moving_mean, moving_variance -> weight, bias,
  running_mean, running_var; ``LayerNormalization``: gamma, beta -> weight, bias;
  ``Embedding``: as it is.
- ``LSTM`` (an ``RNN`` of an ``LSTMCell`` or a ``StackedRNNCells`` of them, or the cell
  alone, as a one-layer LSTM): kernel
  (I, 4H) -> weight_ih (4H, I), same gate order (i, f, c, o is i, f, g, o); Keras's one
  bias reads as bias_ih = bias, bias_hh = 0, and writes as their sum (the function is
  the same; the arrays read back differ from PyTorch's two).
- ``GRU``: through :mod:`rosetta_utils.gru` (gates z, r, h -> r, z, n; ``reset_after``
  True is the LBR flavor with bias (2, 3H), False the RB flavor with one bias).
- ``Bidirectional``: forward_layer -> ``_l0``, backward_layer -> ``_l0_reverse``.
- ``MultiHeadAttention``: query/key/value kernels (E, heads, head) -> rows of the packed
  in_proj_weight (3E, E), biases (heads, head) -> in_proj_bias; the output kernel
  (heads, head, E) -> out_proj.weight (E, E).

Refused, naming the layer: ``SeparableConv`` (two kernels in one layer), ``SimpleRNN``,
``ConvLSTM``, ``GroupNormalization``, ``RMSNormalization`` (or ``rms_scaling``), ``PReLU``,
``EinsumDense``, a LoRA-enabled or quantized layer, a ``BatchNormalization`` with renorm, an
attention whose keys, values or output have other sizes than its queries, or with a gate or
a sliding window, a recurrent layer with other activations than tanh and sigmoid, a
``go_backwards`` layer outside ``Bidirectional``, a ``Bidirectional`` of stacked cells, any
other layer holding weights, and a model or layer holding weights of its own outside its
sub-layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from keras import layers as kl

from rosetta_utils import gru
from rosetta_utils.porting import (
    Layer,
    PortingError,
    flatten_columns_to_channels_first,
    flatten_columns_to_channels_last,
    unflatten_rows_to_channels_first,
    unflatten_rows_to_channels_last,
)
from rosetta_utils.recorders import Collector
from rosetta_utils.recorders.tensorflow import (
    ATTENTIONS,
    CONVOLUTIONS,
    DEPTHWISE,
    FEATURE_NORMS,
    SEPARABLE,
    TRANSPOSED,
    _recorded_layers,
    _sublayers,
    run_collecting,
    to_numpy,
)

FRAMEWORK = "tensorflow"

#: The layer classes each kind is read from (:func:`rosetta_utils.porting.available_kinds`).
LAYER_CLASSES = {
    "dense": ["keras.layers.Dense"],
    "conv": [f"keras.layers.{name}" for name in ("Conv1D", "Conv2D", "Conv3D", "DepthwiseConv1D", "DepthwiseConv2D")],
    "conv_transpose": [f"keras.layers.{name}" for name in ("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose")],
    "batch_norm": ["keras.layers.BatchNormalization"],
    "layer_norm": ["keras.layers.LayerNormalization"],
    "embedding": ["keras.layers.Embedding"],
    "lstm": ["keras.layers.LSTM", "keras.layers.LSTMCell", "keras.layers.StackedRNNCells",
             "keras.layers.Bidirectional"],
    "gru": ["keras.layers.GRU", "keras.layers.GRUCell", "keras.layers.StackedRNNCells", "keras.layers.Bidirectional"],
    "attention": ["keras.layers.MultiHeadAttention"],
}

#: Layers whose output is their input's values, element by element: a flatten seen through them.
_PASSING = ("dropout", "activation")


@dataclass
class _Step:
    """One recorded layer's call: its output's shape, and where its input came from."""

    path: str
    kind: str
    shape: tuple[int, ...]
    source_shape: tuple[int, ...] | None
    producer: int | None  # the step that made its input; None: an input, or an array made between layers
    from_input: bool
    is_map: bool  # its output is a channels-last feature map
    from_map: bool  # its input was one
    flatten: bool


def _shape(array: object) -> tuple[int, ...] | None:
    return None if array is None else tuple(int(size) for size in array.shape)


class _Trace(Collector):
    """The recorder's collector, keeping for every layer which layer made its input."""

    def __init__(self):
        super().__init__(FRAMEWORK, None, "native", channels_last=True, to_numpy=to_numpy)
        self.steps: list[_Step] = []
        self._made: dict[int, int] = {}
        self._inputs: set[int] = set()

    def add_inputs(self, inputs) -> None:
        super().add_inputs(inputs)
        self._inputs.update(id(array) for array in inputs if array is not None)

    def add(self, path, kind, output, fan_in, *, gain=1.0, source=None, spatial=None, flatten=False) -> None:
        from_map = source is not None and self._is_spatial(source)
        super().add(path, kind, output, fan_in, gain=gain, source=source, spatial=spatial, flatten=flatten)
        producer = None if source is None else self._made.get(id(source))
        from_input = source is not None and id(source) in self._inputs
        self._made[id(output)] = len(self.steps)
        self.steps.append(_Step(path, kind, _shape(output), _shape(source), producer, from_input,
                                self._is_spatial(output), from_map, flatten))


def _numpy(variable: object) -> np.ndarray:
    return np.array(variable.numpy(), dtype=np.float32)


def _assign(path: str, name: str, variable: object, value: np.ndarray) -> None:
    value = np.ascontiguousarray(value, dtype=np.float32)
    if tuple(value.shape) != tuple(variable.shape):
        raise PortingError(f"{FRAMEWORK}: {path}: {name} {value.shape} for a variable of {tuple(variable.shape)}")
    variable.assign(value)


def _refuse_adapted(layer: object, path: str) -> None:
    if getattr(layer, "lora_enabled", False):
        raise PortingError(f"{FRAMEWORK}: {path}: a LoRA-enabled {type(layer).__name__}: its kernel is a sum of "
                           "three variables (merge the LoRA weights first)")
    if getattr(layer, "quantization_mode", None):
        raise PortingError(f"{FRAMEWORK}: {path}: a {layer.quantization_mode}-quantized {type(layer).__name__}: "
                           "the move knows float weights only")


def _as_is(layer: object, path: str, kind: str, variables: Mapping[str, object], config: dict,
           conversion: str) -> Layer:
    """A layer whose canonical arrays are its variables' values as they are."""
    arrays = {name: _numpy(variable) for name, variable in variables.items()}

    def write(values: Mapping[str, np.ndarray]) -> None:
        for name, variable in variables.items():
            _assign(path, name, variable, values[name])

    return Layer(path, kind, arrays, config, conversion, write)


def _map_text(shape: tuple[int, ...]) -> str:
    letters = ("H", "W", "C") if len(shape) == 3 else ("W", "C")
    return "x".join(map(str, shape)) + f" ({', '.join(letters)})"


def _trivial(shape: tuple[int, ...] | None) -> bool:
    return shape is None or int(np.prod(shape[:-1])) == 1


def _flattened_map(trace: _Trace, index: int, inputs: int) -> tuple[int, ...] | None:
    """The channels-last map (H, W, C) or (W, C) that the dense layer of step ``index``
    reads flattened, if it reads one."""
    step = trace.steps[index]
    producer = step.producer
    while producer is not None and trace.steps[producer].kind in _PASSING:
        producer = trace.steps[producer].producer
    if producer is not None:
        made = trace.steps[producer]
        flattens = made.flatten or (made.kind == "reshape" and len(made.shape) == 2)
        source = made.source_shape
        if flattens and made.from_map and source and len(source) in (3, 4) and int(np.prod(source[1:])) == inputs:
            return source[1:]
        return None
    if step.from_input or index == 0 or step.source_shape is None or len(step.source_shape) != 2:
        return None
    before = trace.steps[index - 1]  # its input was made between layers (a reshape in the model's own code)
    if before.is_map and len(before.shape) in (3, 4) and int(np.prod(before.shape[1:])) == inputs:
        return before.shape[1:]
    return None


def _unflattened_map(trace: _Trace, index: int, units: int) -> tuple[int, ...] | None:
    """The channels-last map (H, W, C) or (W, C) that the dense layer of step ``index``
    makes, unflattened by a reshape after it, if it makes one."""
    makers = {index}
    for number in range(index + 1, len(trace.steps)):
        step = trace.steps[number]
        if step.producer not in makers:
            continue
        if step.kind in _PASSING:
            makers.add(number)
            continue
        shape = step.shape
        if step.kind != "reshape" or step.flatten or len(shape) not in (3, 4) or int(np.prod(shape[1:])) != units:
            continue
        read_as_map = any(later.producer == number and later.is_map and later.kind in ("conv", "pool")
                          for later in trace.steps[number + 1:])
        if len(shape) == 4 or read_as_map:
            return shape[1:]
    seen = any(step.producer in makers for step in trace.steps[index + 1:])
    if not seen and index + 1 < len(trace.steps):  # reshaped in the model's own code
        after = trace.steps[index + 1]
        source = after.source_shape
        if (after.producer is None and not after.from_input and after.is_map and after.kind in ("conv", "pool")
                and source and len(source) in (3, 4) and int(np.prod(source[1:])) == units):
            return source[1:]
    return None


def _dense(layer: object, path: str, trace: _Trace | None, index: int | None) -> Layer:
    _refuse_adapted(layer, path)
    kernel, bias = layer.kernel, (layer.bias if layer.use_bias else None)
    weight = _numpy(kernel).T
    bias_values = None if bias is None else _numpy(bias)
    columns = rows = None
    if trace is not None:
        columns = _flattened_map(trace, index, weight.shape[1])
        rows = _unflattened_map(trace, index, weight.shape[0])
    columns, rows = (None if _trivial(columns) else columns), (None if _trivial(rows) else rows)
    conversion = ["kernel (in, out) -> (out, in)"]
    if columns:
        weight = flatten_columns_to_channels_first(weight, columns)
        conversion.append(f"columns read a flattened {_map_text(columns)} map: put in channels-first order")
    if rows:
        weight, bias_values = unflatten_rows_to_channels_first(weight, bias_values, rows)
        conversion.append(f"rows (and bias) make a {_map_text(rows)} map: put in channels-first order")
    arrays = {"weight": weight} if bias is None else {"weight": weight, "bias": bias_values}

    def write(values: Mapping[str, np.ndarray]) -> None:
        w, b = np.asarray(values["weight"]), values.get("bias")
        if rows:
            w, b = unflatten_rows_to_channels_last(w, b, rows)
        if columns:
            w = flatten_columns_to_channels_last(w, columns)
        _assign(path, "weight", kernel, w.T)
        if bias is not None:
            _assign(path, "bias", bias, b)

    return Layer(path, "dense", arrays, {}, "; ".join(conversion), write)


def _kernel_text(rank: int, before: str, after: str) -> str:
    spatial = {1: "k", 2: "h, w", 3: "d, h, w"}[rank]
    return f"kernel ({spatial}, {before}) -> ({after}, {spatial})"


def _conv(layer: object, path: str) -> Layer:
    _refuse_adapted(layer, path)
    kernel, bias = layer.kernel, (layer.bias if layer.use_bias else None)
    values = _numpy(kernel)
    rank = values.ndim - 2
    order = (rank + 1, rank) + tuple(range(rank))  # (*k, a, b) -> (b, a, *k)
    config = {"stride": tuple(int(s) for s in layer.strides),
              "dilation": tuple(int(d) for d in layer.dilation_rate)}
    if isinstance(layer, DEPTHWISE):
        channels, multiplier = values.shape[-2:]
        kind, config["groups"] = "conv", int(channels)
        weight = values.transpose((rank, rank + 1) + tuple(range(rank))).reshape(channels * multiplier, 1,
                                                                                 *values.shape[:rank])
        conversion = _kernel_text(rank, "in, multiplier", "in·multiplier, 1")

        def to_kernel(w: np.ndarray) -> np.ndarray:
            return w.reshape(channels, multiplier, *values.shape[:rank]).transpose(tuple(range(2, rank + 2)) + (0, 1))
    else:
        transposed = isinstance(layer, TRANSPOSED)
        kind, config["groups"] = ("conv_transpose", 1) if transposed else ("conv", int(getattr(layer, "groups", 1)))
        weight = values.transpose(order)
        conversion = (_kernel_text(rank, "out, in", "in, out") if transposed
                      else _kernel_text(rank, "in/groups, out", "out, in/groups"))

        def to_kernel(w: np.ndarray) -> np.ndarray:
            return w.transpose(np.argsort(order))

    arrays = {"weight": np.ascontiguousarray(weight)}
    if bias is not None:
        arrays["bias"] = _numpy(bias)

    def write(new: Mapping[str, np.ndarray]) -> None:
        _assign(path, "weight", kernel, to_kernel(np.asarray(new["weight"])))
        if bias is not None:
            _assign(path, "bias", bias, new["bias"])

    return Layer(path, kind, arrays, config, conversion, write)


def _batch_norm(layer: object, path: str) -> Layer:
    if getattr(layer, "renorm", False):
        raise PortingError(f"{FRAMEWORK}: {path}: a BatchNormalization with renorm=True holds renorm statistics "
                           "of its own, which PyTorch's batch norm has not")
    variables = {}
    if layer.scale:
        variables["weight"] = layer.gamma
    if layer.center:
        variables["bias"] = layer.beta
    variables.update(running_mean=layer.moving_mean, running_var=layer.moving_variance)
    return _as_is(layer, path, "batch_norm", variables, {"epsilon": float(layer.epsilon)},
                  "gamma, beta, moving_mean, moving_variance -> weight, bias, running_mean, running_var")


def _layer_norm(layer: object, path: str) -> Layer | None:
    if not isinstance(layer, kl.LayerNormalization) or getattr(layer, "rms_scaling", False):
        raise PortingError(f"{FRAMEWORK}: {path}: a {type(layer).__name__} (RMS scaling) is not the layer norm the "
                           "move knows")
    variables = {}
    if layer.scale:
        variables["weight"] = layer.gamma
    if layer.center:
        variables["bias"] = layer.beta
    if not variables:
        return None
    return _as_is(layer, path, "layer_norm", variables, {"epsilon": float(layer.epsilon)},
                  "gamma, beta -> weight, bias")


def _name(function: object) -> str:
    return str(getattr(function, "__name__", function))


def _recurrent_cells(layer: object, path: str) -> tuple[str, dict[str, object], int, int]:
    """A recurrent layer's kind, its cells by canonical suffix (``_l0``, ``_l0_reverse``),
    its number of layers and of directions."""
    if isinstance(layer, (kl.LSTMCell, kl.GRUCell)):
        stacks = {"": [layer]}
    elif isinstance(layer, kl.Bidirectional):
        directions = {"": layer.forward_layer, "_reverse": layer.backward_layer}
        for sub in directions.values():
            if isinstance(getattr(sub, "cell", None), kl.StackedRNNCells):
                raise PortingError(f"{FRAMEWORK}: {path}: a Bidirectional of stacked cells runs each direction's "
                                   "stack apart, where a stacked bidirectional layer's second layer reads both "
                                   "directions: stack Bidirectional layers instead")
        stacks = {suffix: [sub.cell] for suffix, sub in directions.items()}
    else:
        if layer.go_backwards:
            raise PortingError(f"{FRAMEWORK}: {path}: a {type(layer).__name__} with go_backwards=True outside "
                               "Bidirectional runs backwards alone, which no canonical recurrent layer does")
        cell = layer.cell
        stacks = {"": list(cell.cells) if isinstance(cell, kl.StackedRNNCells) else [cell]}
    cells = {f"_l{number}{suffix}": cell for suffix, stack in stacks.items() for number, cell in enumerate(stack)}
    types = {type(cell) for cell in cells.values()}
    if types <= {kl.LSTMCell}:
        kind = "lstm"
    elif types <= {kl.GRUCell}:
        kind = "gru"
    else:
        names = ", ".join(sorted(t.__name__ for t in types))
        raise PortingError(f"{FRAMEWORK}: {path} is a {type(layer).__name__} of {names}: the move knows LSTM and "
                           "GRU cells (a SimpleRNN, a ConvLSTM or a cell of one's own has no canonical form)")
    for cell in cells.values():
        if _name(cell.activation) != "tanh" or _name(cell.recurrent_activation) != "sigmoid":
            raise PortingError(f"{FRAMEWORK}: {path}: activation {_name(cell.activation)!r}, recurrent_activation "
                               f"{_name(cell.recurrent_activation)!r}; an LSTM or GRU uses tanh and sigmoid")
    return kind, cells, len(next(iter(stacks.values()))), len(stacks)


def _lstm(path: str, cells: Mapping[str, object], config: dict) -> Layer:
    arrays: dict[str, np.ndarray] = {}
    for suffix, cell in cells.items():
        arrays[f"weight_ih{suffix}"] = _numpy(cell.kernel).T
        arrays[f"weight_hh{suffix}"] = _numpy(cell.recurrent_kernel).T
        if cell.use_bias:
            arrays[f"bias_ih{suffix}"] = _numpy(cell.bias)
            arrays[f"bias_hh{suffix}"] = np.zeros_like(arrays[f"bias_ih{suffix}"])

    def write(values: Mapping[str, np.ndarray]) -> None:
        for suffix, cell in cells.items():
            _assign(path, f"weight_ih{suffix}", cell.kernel, np.asarray(values[f"weight_ih{suffix}"]).T)
            _assign(path, f"weight_hh{suffix}", cell.recurrent_kernel, np.asarray(values[f"weight_hh{suffix}"]).T)
            if cell.use_bias:
                _assign(path, f"bias{suffix}", cell.bias, values[f"bias_ih{suffix}"] + values[f"bias_hh{suffix}"])

    conversion = ("kernel (I, 4H) -> weight_ih (4H, I), recurrent_kernel -> weight_hh (gates i, f, c, o = i, f, g, o); "
                  "one bias -> bias_ih = bias, bias_hh = 0 (written back as bias_ih + bias_hh)")
    return Layer(path, "lstm", arrays, config, conversion, write)


def _gru(path: str, cells: Mapping[str, object], config: dict) -> Layer:
    arrays: dict[str, np.ndarray] = {}
    flavors = set()
    for suffix, cell in cells.items():
        try:
            read = gru.get_weights(cell)
        except gru.GRUConversionError as error:
            raise PortingError(f"{FRAMEWORK}: {path}: {error}") from None
        flavors.add(read["flavor"])
        for name, array in read["forward"].items():
            if cell.use_bias or not name.startswith("bias"):
                arrays[f"{name}{suffix}"] = array
    if len(flavors) != 1:
        raise PortingError(f"{FRAMEWORK}: {path}: its cells differ in reset_after")
    flavor = flavors.pop()
    config.update(flavor=flavor, holds_b_hn=True)

    def write(values: Mapping[str, np.ndarray]) -> None:
        for suffix, cell in cells.items():
            hidden = int(cell.units)
            canonical = {name: np.ascontiguousarray(values.get(f"{name}{suffix}", np.zeros(3 * hidden)),
                                                    dtype=np.float32) for name in gru.CANONICAL_KEYS}
            try:
                gru.set_weights(cell, {"forward": canonical, "flavor": flavor})
            except gru.GRUConversionError as error:
                raise PortingError(f"{FRAMEWORK}: {path}: {error}") from None

    bias = "bias (2, 3H) -> bias_ih, bias_hh" if flavor == gru.LBR else "one bias (3H,) -> bias_ih, bias_hh = 0"
    conversion = f"kernel (I, 3H) gates z, r, h -> weight_ih (3H, I) gates r, z, n; {bias} (rosetta_utils.gru)"
    return Layer(path, "gru", arrays, config, conversion, write)


def _recurrent(layer: object, path: str) -> Layer:
    kind, cells, layers, directions = _recurrent_cells(layer, path)
    config = {"layers": layers, "directions": directions}
    return (_lstm if kind == "lstm" else _gru)(path, cells, config)


def _attention(layer: object, path: str) -> Layer:
    if not isinstance(layer, kl.MultiHeadAttention):
        raise PortingError(f"{FRAMEWORK}: {path}: a {type(layer).__name__} is not the multi-head attention the move "
                           "knows (query, key and value heads alike)")
    if getattr(layer, "_use_gate", False) or getattr(layer, "_sliding_window", None):
        raise PortingError(f"{FRAMEWORK}: {path}: a MultiHeadAttention with a gate or a sliding window computes "
                           "what PyTorch's attention does not")
    dense = {"query": layer._query_dense, "key": layer._key_dense, "value": layer._value_dense}
    output = layer._output_dense
    heads = int(layer._num_heads)
    embed = int(dense["query"].kernel.shape[0])
    for name, part in dense.items():
        if tuple(part.kernel.shape) != (embed, heads, embed // heads) or heads * (embed // heads) != embed:
            raise PortingError(f"{FRAMEWORK}: {path}: its {name} kernel is {tuple(part.kernel.shape)}, where the "
                               f"packed in_proj_weight needs ({embed}, {heads}, {embed // heads}): key_dim and "
                               "value_dim must be embed / heads, and keys and values of the queries' size")
    if tuple(output.kernel.shape) != (heads, embed // heads, embed):
        raise PortingError(f"{FRAMEWORK}: {path}: its output kernel is {tuple(output.kernel.shape)}, where "
                           f"out_proj.weight needs ({heads}, {embed // heads}, {embed}) (output_shape = embed)")
    use_bias = bool(layer._use_bias)
    arrays = {"in_proj_weight": np.concatenate([_numpy(part.kernel).reshape(embed, embed).T
                                                for part in dense.values()])}
    if use_bias:
        arrays["in_proj_bias"] = np.concatenate([_numpy(part.bias).reshape(-1) for part in dense.values()])
    arrays["out_proj.weight"] = np.ascontiguousarray(_numpy(output.kernel).reshape(embed, embed).T)
    if use_bias:
        arrays["out_proj.bias"] = _numpy(output.bias)

    def write(values: Mapping[str, np.ndarray]) -> None:
        weights = np.split(np.asarray(values["in_proj_weight"]), 3)
        biases = np.split(np.asarray(values["in_proj_bias"]), 3) if use_bias else [None] * 3
        for (name, part), weight, bias in zip(dense.items(), weights, biases):
            _assign(path, f"{name} kernel", part.kernel, weight.T.reshape(embed, heads, embed // heads))
            if use_bias:
                _assign(path, f"{name} bias", part.bias, bias.reshape(heads, embed // heads))
        _assign(path, "output kernel", output.kernel,
                np.asarray(values["out_proj.weight"]).T.reshape(heads, embed // heads, embed))
        if use_bias:
            _assign(path, "output bias", output.bias, values["out_proj.bias"])

    conversion = ("query/key/value kernels (E, heads, head) -> in_proj_weight rows (3E, E), biases (heads, head) "
                  "-> in_proj_bias; output kernel (heads, head, E) -> out_proj.weight (E, E)")
    return Layer(path, "attention", arrays, {"heads": heads}, conversion, write)


def _layer(layer: object, path: str, trace: _Trace | None = None, index: int | None = None) -> Layer | None:
    """The canonical layer of one recorded Keras layer; None for a layer without weights."""
    if isinstance(layer, kl.TimeDistributed):
        return _layer(layer.layer, path)
    if isinstance(layer, kl.Dense):
        return _dense(layer, path, trace, index)
    if isinstance(layer, SEPARABLE):
        raise PortingError(f"{FRAMEWORK}: {path}: a {type(layer).__name__} holds a depthwise and a pointwise kernel "
                           "in one layer: build it as a DepthwiseConv and a 1x1 Conv, the two layers PyTorch has")
    if isinstance(layer, DEPTHWISE + TRANSPOSED + CONVOLUTIONS):
        return _conv(layer, path)
    if isinstance(layer, kl.BatchNormalization):
        return _batch_norm(layer, path)
    if isinstance(layer, FEATURE_NORMS):
        return _layer_norm(layer, path)
    if isinstance(layer, kl.Embedding):
        _refuse_adapted(layer, path)
        return _as_is(layer, path, "embedding", {"weight": layer.embeddings}, {}, "embeddings -> weight")
    if isinstance(layer, (kl.Bidirectional, kl.RNN, kl.LSTMCell, kl.GRUCell)):
        return _recurrent(layer, path)
    if isinstance(layer, ATTENTIONS):
        return _attention(layer, path)
    if layer.weights:
        held = ", ".join(variable.path for variable in layer.weights)
        raise PortingError(f"{FRAMEWORK}: {path} is a {type(layer).__module__}.{type(layer).__name__} holding "
                           f"weights ({held}): not a layer the move knows (dense, conv, conv_transpose, "
                           "batch_norm, layer_norm, embedding, lstm, gru, attention)")
    return None


def _refuse_loose_weights(model: object, recorded: set[int]) -> None:
    """A model or layer recorded through its sub-layers that holds weights of its own
    (``add_weight`` in a subclassed model): refused, naming it."""

    def visit(layer: object, path: str) -> None:
        if id(layer) in recorded:
            return
        own = list(getattr(layer, "_trainable_variables", [])) + list(getattr(layer, "_non_trainable_variables", []))
        if own:
            raise PortingError(f"{FRAMEWORK}: {path or layer.name} ({type(layer).__name__}) holds weights of its "
                               f"own ({', '.join(variable.path for variable in own)}) outside any layer: the move "
                               "cannot pair them; hold them in a layer of their own or move them by hand")
        for child in _sublayers(layer):
            visit(child, f"{path}.{child.name}" if path else child.name)

    visit(model, "")


def weighted_layers(model: object, inputs: object) -> list[Layer]:
    """The weighted layers of the Keras ``model`` that ran on ``inputs`` (numpy arrays or
    tensors in the model's own layout, channels last for images; a tuple for several), in
    the order they ran, with their arrays in PyTorch's names and layouts. Runs the model
    once with ``training=False``; changes nothing until a layer's ``write`` is called."""
    trace = run_collecting(model, inputs, _Trace())
    found = dict(_recorded_layers(model))
    _refuse_loose_weights(model, {id(layer) for layer in found.values()})
    layers = []
    for index, step in enumerate(trace.steps):
        layer = _layer(found[step.path], step.path, trace, index)
        if layer is not None:
            layers.append(layer)
    return layers
