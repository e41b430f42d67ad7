"""Where each framework keeps the book's three models' arrays, and in what layout.

A *native* checkpoint is read into a flat dict ``{key: array}`` (:mod:`.formats`):

``pytorch``
    ``state_dict`` names: ``conv1.weight``, ``layer1.0.bn1.running_mean``;
``tensorflow``
    Keras 3's ``.weights.h5``: the layer's name, then the index of the variable in
    the layer: ``conv1/0`` (kernel), ``conv1/1`` (bias); a GRU's cell, ``gru/0..2``;
``jax``
    a Flax nnx state's paths: ``conv1/kernel``, ``layer1/layers/0/bn1/mean``;
``mxnet``
    Gluon's ``save_parameters`` names: ``conv1.weight``, ``4.0.body.1.gamma``;
``chainer``
    ``save_npz``'s paths: ``conv1/W``, ``res2/a/bn1/avg_mean``.

:func:`layout` lists, for a model and a framework, each :class:`Move` between
native keys and canonical names; :func:`to_canonical` and
:func:`from_canonical` apply them. Kernels move with
:mod:`rosetta_utils.transplant`; a GRU's arrays go through
:mod:`rosetta_utils.gru`'s converters, in a GRU layer of the framework's own
(Keras and Flax, whose gate order or bias layout differ from PyTorch's), or
are split into Chainer's six matrices and six vectors. Convolution biases that
torchvision's ResNet-50 does not have (Keras, Gluon and Chainer keep some) are
folded into the batch norm after them: ``running_mean - bias`` gives the same
function, in training mode too, where the batch's mean takes the bias away.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..transplant import (
    conv_hwio_to_oihw,
    conv_oihw_to_hwio,
    dense_in_out_to_out_in,
    dense_out_in_to_in_out,
    flattened_dense_nchw_to_nhwc,
    flattened_dense_nhwc_to_nchw,
)
from ..resnet50_layout import keras_order, native_names, resnet50_layers
from .models import CIFAR10_CONVOLUTIONS, CIFAR10_DENSES, IMDB_GRU, cifar10_flatten, check_model
from .errors import CheckpointError
from .formats import OPTIMIZER_KEY
from ..frameworks import FRAMEWORKS  # the command reads and writes each one's own format


@dataclass(frozen=True)
class Move:
    """Native keys and canonical names that hold the same numbers, and how:

    ``same`` (one array each way), ``conv`` (HWIO ↔ OIHW), ``dense`` ((in, out) ↔
    (out, in)), ``flatten`` (a dense layer after an NHWC flatten), ``gru`` (the
    four arrays of a GRU, through ``gru`` = the framework), ``fold`` (a
    convolution's bias, folded into the running mean named in ``canonical``),
    ``extra`` (a native entry that is no weight: left out when read, written as
    ``fill`` of the shape ``shape``)."""

    kind: str
    native: tuple[str, ...]
    canonical: tuple[str, ...] = ()
    fill: Any = 0
    shape: tuple[int, ...] = ()
    dtype: str = "float32"
    note: str = ""


def _same(native: str, canonical: str) -> Move:
    return Move("same", (native,), (canonical,))


# --- CIFAR-10 ---------------------------------------------------------------------------


def _cifar10(framework: str) -> list[Move]:
    moves = []
    for name in CIFAR10_CONVOLUTIONS + CIFAR10_DENSES:
        weight, bias = f"{name}.weight", f"{name}.bias"
        if framework in ("pytorch", "mxnet"):
            moves += [_same(weight, weight), _same(bias, bias)]
        elif framework == "chainer":
            moves += [_same(f"{name}/W", weight), _same(f"{name}/b", bias)]
        else:
            kernel, offset = ((f"{name}/0", f"{name}/1") if framework == "tensorflow"
                              else (f"{name}/kernel", f"{name}/bias"))
            kind = "conv" if name in CIFAR10_CONVOLUTIONS else "flatten" if name == "fc1" else "dense"
            moves += [Move(kind, (kernel,), (weight,)), _same(offset, bias)]
    return moves


# --- IMDB -------------------------------------------------------------------------------

_IMDB_NATIVE = {
    "pytorch": {"embedding": "embedding.weight", "gru": IMDB_GRU, "dense": ("dense.weight", "dense.bias")},
    "mxnet": {"embedding": "embedding.weight",
              "gru": tuple(f"gru._unfused.0.{name}" for name in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")),
              "dense": ("dense.weight", "dense.bias")},
    "chainer": {"embedding": "embedding/W",
                "gru": tuple(f"gru/0/{kind}{i}" for kind in "wb" for i in range(6)),
                "dense": ("dense/W", "dense/b")},
    "tensorflow": {"embedding": "embedding/0", "gru": ("gru/0", "gru/1", "gru/2"), "dense": ("dense/0", "dense/1")},
    "jax": {"embedding": "embedding/embedding",
            "gru": ("gru/cell/dense_i/kernel", "gru/cell/dense_i/bias", "gru/cell/dense_h/kernel",
                    "gru/cell/dense_h/bias"),
            "dense": ("dense/kernel", "dense/bias")},
}


def _imdb(framework: str) -> list[Move]:
    native = _IMDB_NATIVE[framework]
    kernel, bias = native["dense"]
    dense = "dense" if framework in ("tensorflow", "jax") else "same"
    return [_same(native["embedding"], "embedding.weight"), Move("gru", native["gru"], IMDB_GRU),
            Move(dense, (kernel,), ("dense.weight",)), _same(bias, "dense.bias")]


# --- ResNet-50 --------------------------------------------------------------------------

_BATCH_NORM = ("weight", "bias", "running_mean", "running_var")


_NATIVE_BATCH_NORM = {
    "tensorflow": ("0", "1", "2", "3"),  # gamma, beta, moving_mean, moving_variance
    "jax": ("scale", "bias", "mean", "var"),
    "mxnet": ("gamma", "beta", "running_mean", "running_var"),
    "chainer": ("gamma", "beta", "avg_mean", "avg_var"),
}
_NATIVE_SEPARATOR = {"tensorflow": "/", "jax": "/", "mxnet": ".", "chainer": "/"}
_NATIVE_CONV = {"tensorflow": ("0", "1"), "jax": ("kernel", None), "mxnet": ("weight", "bias"), "chainer": ("W", "b")}

#: Chainer's ResNet50Layers carries its ImageNet classifier, which the feature extractor has not.
CHAINER_CLASSIFIER = {"fc6/W": (1000, 2048), "fc6/b": (1000,)}


def _resnet50(framework: str) -> list[Move]:
    moves: list[Move] = []
    for conv, bn, (stage, block, branch) in resnet50_layers():
        if framework == "pytorch":
            moves.append(_same(f"{conv}.weight", f"{conv}.weight"))
            moves += [_same(f"{bn}.{field}", f"{bn}.{field}") for field in _BATCH_NORM]
            moves.append(Move("extra", (f"{bn}.num_batches_tracked",), dtype="int64",
                              note="PyTorch's count of training batches seen"))
            continue
        native_conv, native_bn, has_bias = native_names(framework, stage, block, branch)
        sep = _NATIVE_SEPARATOR[framework]
        kernel, bias = _NATIVE_CONV[framework]
        kind = "conv" if framework in ("tensorflow", "jax") else "same"
        moves.append(Move(kind, (f"{native_conv}{sep}{kernel}",), (f"{conv}.weight",)))
        if has_bias:
            moves.append(Move("fold", (f"{native_conv}{sep}{bias}",), (f"{bn}.running_mean",)))
        moves += [_same(f"{native_bn}{sep}{native}", f"{bn}.{field}")
                  for native, field in zip(_NATIVE_BATCH_NORM[framework], _BATCH_NORM)]
        if framework == "chainer":
            moves.append(Move("extra", (f"{native_bn}/N",), dtype="int64",
                              note="Chainer's count of training batches seen"))
    if framework == "chainer":
        moves += [Move("extra", (key,), shape=shape, note="Chainer's ImageNet classifier, not part of the "
                       "feature extractor") for key, shape in CHAINER_CLASSIFIER.items()]
    return moves


_LAYOUTS: dict[str, Callable[[str], list[Move]]] = {"cifar10": _cifar10, "imdb": _imdb, "resnet50": _resnet50}


def layout(model: str, framework: str) -> list[Move]:
    """The moves between ``framework``'s checkpoint of ``model`` and the canonical arrays."""
    check_model(model)
    if framework not in FRAMEWORKS:
        raise CheckpointError(f"unknown framework {framework!r}: the frameworks are {', '.join(FRAMEWORKS)}")
    return _LAYOUTS[model](framework)


# --- Keras's file: which group holds which layer ------------------------------------------


def keras_groups(model: str, layer_names: list[str]) -> dict[str, str]:
    """``{layer name: the group of its variables}`` in a Keras 3 ``.weights.h5``, as
    ``model.save_weights`` writes it: a layer's group is named after its class, numbered
    in the model's order (``conv2d``, ``conv2d_1``, ...), and a GRU keeps its variables
    in its cell. A Keras functional model lists a ResNet block's shortcut after its
    second convolution."""
    groups: dict[str, str] = {}
    counts: dict[str, int] = {}

    def add(name: str, kind: str, inner: str = "vars") -> None:
        count = counts.get(kind, -1) + 1
        counts[kind] = count
        groups[name] = f"layers/{kind}{'' if count == 0 else f'_{count}'}/{inner}"

    if model == "cifar10":
        for name in CIFAR10_CONVOLUTIONS:
            add(name, "conv2d")
        for name in CIFAR10_DENSES:
            add(name, "dense")
    elif model == "imdb":
        add("embedding", "embedding")
        add("gru", "gru", "cell/vars")
        add("dense", "dense")
    else:
        ranked = [place for _, _, place in keras_order()]
        for stage, block, branch in ranked:
            conv, _, _ = native_names("tensorflow", stage, block, branch)
            add(conv, "conv2d")
        for stage, block, branch in ranked:
            _, bn, _ = native_names("tensorflow", stage, block, branch)
            add(bn, "batch_normalization")
    missing = [name for name in layer_names if name not in groups]
    if missing:
        raise CheckpointError(f"no Keras group for the layer(s) {', '.join(missing)} of the {model} model")
    return groups


# --- applying the moves -----------------------------------------------------------------


@dataclass
class Converted:
    """Arrays in one layout, the problems found on the way, and notes for the reader."""

    arrays: dict[str, np.ndarray]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _shape(array: Any) -> str:
    shape = tuple(np.shape(array))
    return "(" + ", ".join(map(str, shape)) + (",)" if len(shape) == 1 else ")")


def to_canonical(model: str, framework: str, native: Mapping[str, np.ndarray]) -> Converted:
    """Canonical arrays from ``framework``'s native arrays of ``model``; every native key
    missing or unexpected, and every array of the wrong rank, is a problem."""
    moves = layout(model, framework)
    known = [key for move in moves for key in move.native]
    result = Converted({})
    if OPTIMIZER_KEY in native:
        native = {key: array for key, array in native.items() if key != OPTIMIZER_KEY}
        result.notes.append("left out the optimizer's variables: a checkpoint converts the model, not its training")
    problems = result.problems
    problems += [f"missing {key}" for key in known if key not in native and not _optional(moves, key)]
    expected = set(known)
    problems += [f"unexpected {key} {_shape(array)}" for key, array in native.items() if key not in expected]
    folds = []
    for move in moves:
        if move.kind == "extra":
            continue
        if any(key not in native for key in move.native):
            continue
        arrays = [np.asarray(native[key]) for key in move.native]
        try:
            if move.kind == "fold":
                folds.append((move, arrays[0]))
            elif move.kind == "gru":
                result.arrays.update(_gru_to_canonical(framework, move, arrays))
            else:
                result.arrays[move.canonical[0]] = _array_to_canonical(move, arrays[0], result.arrays)
        except _Mismatch as mismatch:
            problems.append(str(mismatch))
    for move, bias in folds:  # after the batch norms they fold into
        mean = result.arrays.get(move.canonical[0])
        if mean is not None and bias.shape == mean.shape:
            result.arrays[move.canonical[0]] = (mean - bias).astype(np.float32)
            if np.any(bias != 0):
                result.notes.append(f"{move.native[0]}: a convolution bias torchvision has not, folded into "
                                    f"{move.canonical[0]} (the same function)")
        elif mean is not None:
            problems.append(f"{move.native[0]} is {_shape(bias)}, expected {_shape(mean)}")
    left_out = [key for move in moves if move.kind == "extra" for key in move.native if key in native]
    if left_out:
        notes = sorted({move.note for move in moves if move.kind == "extra" and move.native[0] in native})
        result.notes.append(f"left out {len(left_out)} entr{'y' if len(left_out) == 1 else 'ies'} that are "
                            f"not weights: {'; '.join(notes)}")
    return result


def _optional(moves: list[Move], key: str) -> bool:
    return any(move.kind == "extra" and key in move.native for move in moves)


class _Mismatch(Exception):
    pass


def _array_to_canonical(move: Move, array: np.ndarray, done: Mapping[str, np.ndarray]) -> np.ndarray:
    key = move.native[0]
    if move.kind == "same":
        return array
    if move.kind == "conv":
        _rank(key, array, 4, "an (h, w, in, out) kernel")
        return conv_hwio_to_oihw(array)
    _rank(key, array, 2, "an (in, out) kernel")
    if move.kind == "dense":
        return dense_in_out_to_out_in(array)
    conv4 = done.get("conv4.weight")  # flatten: fc1 reads conv4's channels on a square grid
    if conv4 is None:
        raise _Mismatch(f"{key}: conv4 is needed to read it")
    channels = conv4.shape[0]
    side = int(round(np.sqrt(array.shape[0] / channels)))
    if channels * side * side != array.shape[0]:
        raise _Mismatch(f"{key} is {_shape(array)}: its {array.shape[0]} inputs are not conv4's "
                        f"{channels} channels on a square grid")
    return flattened_dense_nhwc_to_nchw(dense_in_out_to_out_in(array), channels, side, side)


def _rank(key: str, array: np.ndarray, ndim: int, what: str) -> None:
    if array.ndim != ndim:
        raise _Mismatch(f"{key} is {_shape(array)}, expected {what}")


def from_canonical(model: str, framework: str, canonical: Mapping[str, np.ndarray]) -> Converted:
    """``framework``'s native arrays of ``model`` from checked canonical arrays."""
    result = Converted({})
    for move in layout(model, framework):
        if move.kind == "extra":
            result.arrays[move.native[0]] = np.full(move.shape, move.fill, dtype=move.dtype)
            if move.shape:
                result.notes.append(f"{move.native[0]}: {move.note}, written as zeros")
        elif move.kind == "fold":
            result.arrays[move.native[0]] = np.zeros_like(canonical[move.canonical[0]])
        elif move.kind == "gru":
            result.arrays.update(_gru_from_canonical(framework, move, [canonical[name] for name in move.canonical]))
        else:
            array = np.asarray(canonical[move.canonical[0]])
            if move.kind == "conv":
                array = conv_oihw_to_hwio(array)
            elif move.kind == "dense":
                array = dense_out_in_to_in_out(array)
            elif move.kind == "flatten":
                channels, height, width = cifar10_flatten(canonical)
                array = dense_out_in_to_in_out(flattened_dense_nchw_to_nhwc(array, channels, height, width))
            result.arrays[move.native[0]] = np.ascontiguousarray(array)
    return result


# --- the GRU: through rosetta_utils.gru ---------------------------------------------------


def _gru_to_canonical(framework: str, move: Move, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
    names = move.canonical
    if framework in ("pytorch", "mxnet"):  # PyTorch's layout and gate order already
        return dict(zip(names, arrays))
    if framework == "chainer":  # w0..w2 input side, w3..w5 hidden side, b0..b5 likewise
        for key, array in zip(move.native, arrays):
            _rank(key, array, 2 if "/w" in key else 1, "a matrix" if "/w" in key else "a vector")
        w, b = arrays[:6], arrays[6:]
        try:
            return dict(zip(names, (np.concatenate(w[:3]), np.concatenate(w[3:]),
                                    np.concatenate(b[:3]), np.concatenate(b[3:]))))
        except ValueError as error:
            raise _Mismatch(f"{move.native[0].rsplit('/', 1)[0]}: the six matrices do not stack: {error}") from None
    if framework == "tensorflow":
        return _keras_gru_to_canonical(move, arrays)
    return _flax_gru_to_canonical(move, arrays)


def _gru_from_canonical(framework: str, move: Move, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
    if framework in ("pytorch", "mxnet"):
        return dict(zip(move.native, arrays))
    if framework == "chainer":
        blocks = np.split(arrays[0], 3) + np.split(arrays[1], 3) + np.split(arrays[2], 3) + np.split(arrays[3], 3)
        return {key: np.ascontiguousarray(block) for key, block in zip(move.native, blocks)}
    weights = {"forward": dict(zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), arrays)), "flavor": "linear_before_reset"}
    if framework == "tensorflow":
        return _keras_gru_from_canonical(move, weights)
    return _flax_gru_from_canonical(move, weights)


def _canonical_of(names: tuple[str, ...], weights: Mapping[str, Any]) -> dict[str, np.ndarray]:
    forward = weights["forward"]
    return dict(zip(names, (forward["weight_ih"], forward["weight_hh"], forward["bias_ih"], forward["bias_hh"])))


def _keras_gru_layer(inputs: int, units: int) -> Any:
    import keras

    layer = keras.layers.GRU(units)  # reset_after=True: the GRU of PyTorch, cuDNN and the book
    layer.build((None, None, inputs))
    return layer


def _keras_gru_to_canonical(move: Move, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
    kernel, recurrent, bias = arrays
    key = move.native[0].split("/")[0]
    _rank(move.native[0], kernel, 2, "an (inputs, 3 units) kernel")
    _rank(move.native[1], recurrent, 2, "a (units, 3 units) recurrent kernel")
    units = recurrent.shape[0]
    if recurrent.shape != (units, 3 * units) or kernel.shape[1:] != (3 * units,):
        raise _Mismatch(f"{key}: kernel {_shape(kernel)} and recurrent kernel {_shape(recurrent)} are not a GRU's "
                        f"(inputs, 3U) and (U, 3U)")
    if bias.shape != (2, 3 * units):
        variant = (": a GRU with reset_after=False, the other GRU variant (reset before), which the model's "
                   "GRU is not") if bias.shape == (3 * units,) else ""
        raise _Mismatch(f"{move.native[2]} is {_shape(bias)}, expected (2, {3 * units}){variant}")
    from ..gru import get_weights

    layer = _keras_gru_layer(kernel.shape[0], units)
    for variable, value in zip((layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias), arrays):
        variable.assign(value)
    return _canonical_of(move.canonical, get_weights(layer))


def _keras_gru_from_canonical(move: Move, weights: dict[str, Any]) -> dict[str, np.ndarray]:
    from ..gru import set_weights

    forward = weights["forward"]
    layer = set_weights(_keras_gru_layer(forward["weight_ih"].shape[1], forward["weight_hh"].shape[1]), weights)
    values = (layer.cell.kernel, layer.cell.recurrent_kernel, layer.cell.bias)
    return {key: np.asarray(value).astype(np.float32) for key, value in zip(move.native, values)}


def _flax_gru_cell(inputs: int, hidden: int) -> Any:
    from flax import nnx

    cell = nnx.GRUCell(inputs, hidden, rngs=nnx.Rngs(0))
    # with a bias in dense_h, nnx's GRUCell holds b_hn: it is PyTorch's GRU exactly
    cell.dense_h = nnx.Linear(hidden, 3 * hidden, use_bias=True, rngs=nnx.Rngs(0))
    return cell


def _flax_gru_to_canonical(move: Move, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
    kernel_i, bias_i, kernel_h, bias_h = arrays
    for key, array, ndim in zip(move.native, arrays, (2, 1, 2, 1)):
        _rank(key, array, ndim, "a kernel" if ndim == 2 else "a bias")
    hidden = kernel_h.shape[0]
    expected = {move.native[1]: (3 * hidden,), move.native[2]: (hidden, 3 * hidden), move.native[3]: (3 * hidden,)}
    for key, array in zip(move.native[1:], arrays[1:]):
        if array.shape != expected[key]:
            raise _Mismatch(f"{key} is {_shape(array)}, expected {_shape(np.empty(expected[key]))}")
    if kernel_i.shape[1] != 3 * hidden:
        raise _Mismatch(f"{move.native[0]} is {_shape(kernel_i)}, expected (inputs, {3 * hidden})")
    import jax.numpy as jnp

    from ..gru import get_weights

    cell = _flax_gru_cell(kernel_i.shape[0], hidden)
    for variable, value in zip((cell.dense_i.kernel, cell.dense_i.bias, cell.dense_h.kernel, cell.dense_h.bias),
                               arrays):
        variable[...] = jnp.asarray(value)
    return _canonical_of(move.canonical, get_weights(cell))


def _flax_gru_from_canonical(move: Move, weights: dict[str, Any]) -> dict[str, np.ndarray]:
    from ..gru import set_weights

    forward = weights["forward"]
    cell = set_weights(_flax_gru_cell(forward["weight_ih"].shape[1], forward["weight_hh"].shape[1]), weights)
    values = (cell.dense_i.kernel, cell.dense_i.bias, cell.dense_h.kernel, cell.dense_h.bias)
    return {key: np.asarray(value[...]).astype(np.float32) for key, value in zip(move.native, values)}
