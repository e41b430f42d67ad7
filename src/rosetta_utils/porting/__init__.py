"""WeightMove your own model's weights into the same architecture in another framework, in one call.

Two live models of one architecture, in two frameworks of one environment::

    from rosetta_utils.porting import move_weights
    move_weights(torch_model, keras_model, x)   # x: an example input, as numpy

walks both models' weighted layers in the order they run on the example input,
pairs them in that order, checks that each pair is one kind of layer holding
arrays of one shape, converts each kind's layout (PyTorch's is the canonical
one) and writes the source's weights into the target. It prints the pairing as
a table (source layer, target layer, kind, shapes, the conversion applied) and
writes nothing at all if any layer is unpaired, of another kind or shape, or
of a variant that cannot hold the same function (a GRU without the recurrent
bias of its candidate gate against one with it), naming the first.

Across the two environments (MXNet and Chainer live in the legacy one), go
through a file: :func:`save_weights` in one writes the canonical arrays and the
layer structure it found, :func:`load_weights` in the other reads them::

    save_weights(torch_model, x, "model.canonical.npz")        # current environment
    load_weights(gluon_model, x, "model.canonical.npz")        # legacy environment

One module per framework (``pytorch``, ``tensorflow``, ``jax``, ``mxnet``,
``chainer``) offers ``weighted_layers(model, inputs)``: the model's layers that
hold weights, in the order they ran, each a :class:`Layer` with its arrays in the
canonical layout and a way to write canonical arrays back. This module pairs,
checks and moves; it imports no framework.

The canonical arrays of each kind (:data:`CANONICAL`) are PyTorch's names and
layouts: a dense layer's ``weight`` (out, in); a convolution's ``weight`` (out,
in/groups, *kernel); a transposed convolution's (in, out/groups, *kernel); a
batch norm's ``weight``, ``bias``, ``running_mean``, ``running_var``; an LSTM's
``weight_ih_l0`` (4H, I) with the gates i, f, g, o (``_reverse`` for the backward
direction, ``l1`` for a second layer), a GRU's with r, z, n; multi-head
attention's packed ``in_proj_weight`` (3E, E: query, key, value). A dense layer
that reads a flattened feature map holds its columns in channels-first order
(channel, row, column) whatever the framework flattened, and one whose output is
unflattened into a feature map its rows likewise: the framework's module permutes
them, which is where a port by hand most often goes wrong.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..frameworks import REGISTRY

#: The kinds of weighted layer a move knows, and the arrays each holds (a recurrent
#: layer's hold one set per layer and direction, named with PyTorch's suffixes).
CANONICAL = {
    "dense": ("weight", "bias"),
    "conv": ("weight", "bias"),
    "conv_transpose": ("weight", "bias"),
    "batch_norm": ("weight", "bias", "running_mean", "running_var"),
    "layer_norm": ("weight", "bias"),
    "embedding": ("weight",),
    "lstm": ("weight_ih", "weight_hh", "bias_ih", "bias_hh"),
    "gru": ("weight_ih", "weight_hh", "bias_ih", "bias_hh"),
    "attention": ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"),
}

#: What a layer's configuration must share with its pair, beyond its arrays' shapes: a
#: difference here means another function, which no move of weights can make equal.
MUST_AGREE = ("groups", "stride", "dilation", "heads", "layers", "directions", "flavor")
#: What may differ and is worth saying (the outputs will differ by it): the table notes it.
SHOULD_AGREE = ("epsilon",)

#: The key of the structure's description in a saved ``.npz``.
_META = "__rosetta_porting__"


class PortingError(ValueError):
    """A move that cannot be made: names the layer and what differs. Nothing was written."""


@dataclass
class Layer:
    """One weighted layer of a model, as a framework's module reads it."""

    path: str  # the layer's path in its model (the recorders' convention)
    kind: str  # a key of CANONICAL
    arrays: dict[str, np.ndarray]  # canonical names and layouts
    config: dict[str, Any] = field(default_factory=dict)  # groups, epsilon, flavor, heads, ...
    conversion: str = ""  # what the framework's layout needed, for the table
    write: Callable[[Mapping[str, np.ndarray]], None] | None = None  # canonical arrays into the layer

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(array.shape) for name, array in self.arrays.items()}

    def size(self) -> int:
        return int(sum(array.size for array in self.arrays.values()))


@dataclass
class WeightMove:
    """The pairs of a move (source layer, target layer), the notes on what differs, and
    whether the weights were written."""

    pairs: list[tuple[Layer, Layer]]
    source: str
    target: str
    notes: list[str] = field(default_factory=list)
    written: bool = False

    def table(self) -> str:
        """The pairing as a reader's terminal shows it."""
        rows = [("#", f"{self.source} layer", f"{self.target} layer", "kind", "shapes", "conversion")]
        for number, (a, b) in enumerate(self.pairs, 1):
            shapes = ", ".join(f"{name} {'x'.join(map(str, shape))}" for name, shape in a.shapes().items())
            done = "; ".join(text for text in (a.conversion and f"from: {a.conversion}",
                                               b.conversion and f"into: {b.conversion}") if text) or "as it is"
            rows.append((str(number), a.path, b.path, a.kind, shapes, done))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths)) + "  " + row[5] for row in rows]
        parameters = sum(a.size() for a, _ in self.pairs)
        lines.append(f"{len(self.pairs)} layers, {parameters:,} values "
                     + ("moved" if self.written else "paired (nothing written)"))
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


_PACKAGES = {module: name for name, framework in REGISTRY.items() for module in framework.all_modules}


def framework_of(model: object) -> str:
    """The framework a model belongs to, from its type's module (``torch`` -> pytorch)."""
    for cls in type(model).__mro__:
        top = cls.__module__.split(".")[0]
        if top in _PACKAGES:
            return _PACKAGES[top]
    raise PortingError(f"a {type(model).__module__}.{type(model).__name__} is no model of "
                       f"{', '.join(REGISTRY)}")


def model_layers(model: object, inputs: object) -> list[Layer]:
    """The model's weighted layers in the order they ran on ``inputs``, read by its
    framework's module."""
    framework = framework_of(model)
    module = importlib.import_module(f"{__name__}.{framework}")
    layers = module.weighted_layers(model, inputs)
    for layer in layers:
        if layer.kind not in CANONICAL:
            raise PortingError(f"{framework}: {layer.path}: unknown kind {layer.kind!r}")
    if not layers:
        raise PortingError(f"{framework}: the model ran no layer with weights on the example input")
    return layers


def available_kinds(framework: str) -> dict[str, list[str]]:
    """Each kind the move converts in ``framework``, with the layer classes of the installed
    release that hold it (a class the release lacks is left out; a kind with none is
    absent): the framework's module lists them in ``LAYER_CLASSES``."""
    module = importlib.import_module(f"{__name__}.{framework}")
    found: dict[str, list[str]] = {}
    for kind, paths in module.LAYER_CLASSES.items():
        for path in paths:
            module_name, _, name = path.rpartition(".")
            try:
                present = hasattr(importlib.import_module(module_name), name)
            except ImportError:
                present = False
            if present:
                found.setdefault(kind, []).append(path)
    return found


def pair_layers(source: Sequence[Layer], target: Sequence[Layer], names: tuple[str, str] = ("source", "target")
                ) -> tuple[list[tuple[Layer, Layer]], list[str]]:
    """Pair two models' weighted layers in the order they ran; refuse, naming the first
    layer that differs, a pair of another kind, other arrays or shapes, or a configuration
    that computes another function. Returns the pairs and notes on what may differ."""
    notes = []
    for index, (a, b) in enumerate(zip(source, target), 1):
        where = f"layer {index} ({names[0]} {a.path!r}, {names[1]} {b.path!r})"
        if b.kind in a.config.get("kinds", ()):  # a state dict's layer: its kind read off the target
            a.kind = b.kind
        if a.kind != b.kind:
            raise PortingError(f"{where}: a {a.kind} layer in the {names[0]}, a {b.kind} layer in the {names[1]}")
        if set(a.arrays) != set(b.arrays):
            only_a, only_b = sorted(set(a.arrays) - set(b.arrays)), sorted(set(b.arrays) - set(a.arrays))
            raise PortingError(f"{where}: the {names[0]} holds {only_a or 'nothing more'}, the {names[1]} "
                               f"{only_b or 'nothing more'} (a bias in one only?)")
        for name in a.arrays:
            if a.arrays[name].shape != b.arrays[name].shape:
                raise PortingError(f"{where}: {name} is {a.arrays[name].shape} in the {names[0]}, "
                                   f"{b.arrays[name].shape} in the {names[1]}")
        for key in MUST_AGREE:
            if key in a.config and key in b.config and not _same(a.config[key], b.config[key]):
                raise PortingError(f"{where}: {key} {a.config[key]!r} in the {names[0]}, {b.config[key]!r} in the "
                                   f"{names[1]}: another function, which no weights can make the same")
        for key in SHOULD_AGREE:
            if key in a.config and key in b.config and not _same(a.config[key], b.config[key]):
                notes.append(f"{b.path}: {key} {a.config[key]!r} in the {names[0]}, {b.config[key]!r} in the "
                             f"{names[1]}: its outputs will differ by that")
    if len(source) != len(target):
        longer, extra = ((names[0], source[len(target)]) if len(source) > len(target)
                         else (names[1], target[len(source)]))
        raise PortingError(f"the {longer} has more weighted layers: {extra.path!r} ({extra.kind}, layer "
                           f"{min(len(source), len(target)) + 1}) has no pair")
    return list(zip(source, target)), notes


def _write(pairs: list[tuple[Layer, Layer]], target: str) -> None:
    """Write each pair's source arrays into its target layer; if any layer refuses them,
    write back what the layers held before (their arrays as read), so that a refused move
    leaves the model as it was."""
    for a, b in pairs:
        if b.write is None:
            raise PortingError(f"{target}: {b.path}: read from a file, it cannot be written")
    before = [{name: np.array(array, copy=True) for name, array in b.arrays.items()} for _, b in pairs]
    written: list[tuple[Layer, dict]] = []
    try:
        for (a, b), held in zip(pairs, before):
            b.write({name: np.ascontiguousarray(array, dtype=np.float32) for name, array in a.arrays.items()})
            written.append((b, held))
    except Exception as error:
        for layer, held in written:
            layer.write(held)
        if isinstance(error, PortingError):
            raise
        raise PortingError(f"{target}: {b.path}: {error} (nothing was written: every layer holds what it held "
                           "before)") from error


def move_weights(source: object, target: object, inputs: object, target_inputs: object = None, *,
                 show: bool = True) -> WeightMove:
    """WeightMove ``source``'s weights into ``target``, a model of the same architecture in
    another (or the same) framework. ``inputs``: an example input for the source (numpy, in
    its layout); ``target_inputs``: the target's, where its layout differs (a Keras or Flax
    image model's channels-last batch). Every pair is checked before anything is written;
    a refused move raises :class:`PortingError` naming the first layer and why. Prints the
    pairing table unless ``show`` is False; returns the :class:`WeightMove`."""
    source_layers = model_layers(source, inputs)
    target_layers = model_layers(target, inputs if target_inputs is None else target_inputs)
    pairs, notes = pair_layers(source_layers, target_layers)
    move = WeightMove(pairs, framework_of(source), framework_of(target), notes)
    _write(pairs, move.target)
    move.written = True
    if show:
        print(move.table())
    return move


def save_weights(model: object, inputs: object, path: str | Path) -> Path:
    """Write ``model``'s weighted layers (canonical arrays, kinds, configurations, paths, in
    the order they ran) to a numpy ``.npz`` that :func:`load_weights` reads in either
    environment."""
    return write_saved(path, framework_of(model), model_layers(model, inputs))


def write_saved(path: str | Path, framework: str, layers: Sequence[Layer]) -> Path:
    """Write layers as :func:`save_weights` does (:func:`read_saved` reads them back)."""
    arrays, described = {}, []
    for index, layer in enumerate(layers):
        for name, array in layer.arrays.items():
            arrays[f"{index}/{name}"] = np.asarray(array, dtype=np.float32)
        described.append({"path": layer.path, "kind": layer.kind, "config": _plain(layer.config),
                          "arrays": list(layer.arrays), "conversion": layer.conversion})
    meta = {"framework": framework, "layers": described}
    path = Path(path)
    with open(path, "wb") as file:
        np.savez(file, **arrays, **{_META: np.array(json.dumps(meta))})
    return path


def read_saved(path: str | Path) -> tuple[str, list[Layer]]:
    """The framework and the layers :func:`save_weights` wrote (read without pickle)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            if _META not in archive.files:
                raise PortingError(f"{path}: no layer structure in it (write it with save_weights)")
            meta = json.loads(str(archive[_META]))
            layers = [Layer(item["path"], item["kind"],
                            {name: archive[f"{index}/{name}"] for name in item["arrays"]},
                            item["config"], item.get("conversion", ""))
                      for index, item in enumerate(meta["layers"])]
    except PortingError:
        raise
    except (OSError, ValueError, KeyError) as error:
        raise PortingError(f"{path}: not a file of saved weights: {error}") from None
    return meta["framework"], layers


def load_weights(model: object, inputs: object, path: str | Path, *, show: bool = True) -> WeightMove:
    """WeightMove the weights of a file into ``model`` (same checks as :func:`move_weights`;
    nothing is written if any layer is refused). The file is either what
    :func:`save_weights` wrote (any framework's model, its structure saved with it), or a
    PyTorch state dict's arrays under PyTorch's names: a ``.safetensors`` file, a numpy
    ``.npz``, or (where PyTorch is installed) a ``torch.save`` file. A state dict's layers
    are paired with the model's by their paths where the model's layers carry the
    original's names (a port that keeps them: ``self.fc1``, ``name="fc1"``), else in the
    order the file holds them, which must be the order the layers run."""
    framework, source_layers, ordered = read_file(Path(path))
    target_layers = model_layers(model, inputs)
    if framework == "a state dict":
        by_path = {layer.path: layer for layer in source_layers}
        if all(layer.path in by_path for layer in target_layers):
            source_layers = [by_path[layer.path] for layer in target_layers] + [
                layer for layer in source_layers if layer.path not in {t.path for t in target_layers}]
        elif not ordered:
            missing = [layer.path for layer in target_layers if layer.path not in by_path]
            raise PortingError(f"{path}: the model's layers {missing[:3]} have no arrays of that name in the file, "
                               "and a .safetensors file keeps no order to pair them by: name the port's layers as "
                               "the original's")
    pairs, notes = pair_layers(source_layers, target_layers, (str(framework), framework_of(model)))
    move = WeightMove(pairs, framework, framework_of(model), notes)
    _write(pairs, move.target)
    move.written = True
    if show:
        print(move.table())
    return move


def read_file(path: Path) -> tuple[str, list[Layer], bool]:
    """A weights file's layers (:func:`load_weights` reads any of these): its framework (or
    "a state dict"), the layers, and whether it keeps the order they run in."""
    if not path.is_file():
        raise PortingError(f"{path}: no such file")
    if path.suffix == ".safetensors":
        try:
            from safetensors.numpy import load_file
        except ImportError:
            raise PortingError(f"{path}: reading .safetensors needs the safetensors package "
                               "(pip install 'rosetta-utils[safetensors]')") from None
        return "a state dict", read_state_dict(load_file(str(path))), False
    if path.suffix in (".pt", ".pth"):
        try:
            import torch
        except ImportError:
            raise PortingError(f"{path}: a torch.save file needs PyTorch; in an environment without it, convert "
                               "it first (python -m rosetta_utils.checkpoints ... --to safetensors)") from None
        state = torch.load(path, map_location="cpu", weights_only=True)
        return "a state dict", read_state_dict({k: v.detach().numpy() for k, v in state.items()}), True
    try:
        with np.load(path, allow_pickle=False) as archive:
            if _META in archive.files:
                framework, layers = read_saved(path)
                return framework, layers, True
            return "a state dict", read_state_dict({name: archive[name] for name in archive.files}), True
    except (OSError, ValueError) as error:
        raise PortingError(f"{path}: not a file of weights (.npz, .safetensors, .pt): {error}") from None


#: A state dict's names that belong to the layer before their last dot but one.
_NESTED = ("out_proj.weight", "out_proj.bias")


def read_state_dict(arrays: Mapping[str, np.ndarray]) -> list[Layer]:
    """A PyTorch state dict's arrays grouped into layers, in the order the file holds them,
    each layer's kind read off its arrays (where the arrays alone cannot tell a dense layer
    from an embedding, or a convolution from a transposed one, the target's layer decides)."""
    groups: dict[str, dict[str, np.ndarray]] = {}
    for key, array in arrays.items():
        if key.endswith("num_batches_tracked"):
            continue
        nested = next((end for end in _NESTED if key.endswith("." + end)), None)
        prefix, name = (key[: -len(nested) - 1], nested) if nested else (key.rsplit(".", 1) if "." in key
                                                                         else ("", key))
        groups.setdefault(prefix, {})[name] = np.asarray(array, dtype=np.float32)
    layers = []
    for prefix, group in groups.items():
        layers.append(_state_dict_layer(prefix, group))
    return layers


def _state_dict_layer(prefix: str, group: dict[str, np.ndarray]) -> Layer:
    if "running_mean" in group:
        return Layer(prefix, "batch_norm", group)
    if "in_proj_weight" in group:
        return Layer(prefix, "attention", group)
    if "weight_hh_l0" in group:
        hidden = group["weight_hh_l0"].shape[1]
        kind = {4: "lstm", 3: "gru"}.get(group["weight_hh_l0"].shape[0] // hidden)
        if kind is None:
            raise PortingError(f"{prefix}: a recurrent layer of {group['weight_hh_l0'].shape[0] // hidden} gates")
        layers = len([name for name in group if name.startswith("weight_hh_l") and not name.endswith("_reverse")])
        directions = 2 if any(name.endswith("_reverse") for name in group) else 1
        config = {"layers": layers, "directions": directions}
        if kind == "gru":
            config["flavor"] = "linear_before_reset"
        return Layer(prefix, kind, group, config)
    weight = group.get("weight")
    if weight is None:
        raise PortingError(f"{prefix}: arrays {sorted(group)} are no layer this knows")
    if weight.ndim >= 3:
        return Layer(prefix, "conv", group, {"kinds": ("conv", "conv_transpose")})
    if weight.ndim == 2:
        return Layer(prefix, "dense", group, {"kinds": ("dense", "embedding")})
    return Layer(prefix, "layer_norm", group, {"kinds": ("layer_norm", "batch_norm")})


def _same(a: object, b: object) -> bool:
    """Two configuration values alike, once both are as JSON holds them (a tuple as a list;
    floats to float32's precision)."""
    def plain(value):
        value = _plain({"v": value})["v"]
        return round(value, 9) if isinstance(value, float) else value
    return plain(a) == plain(b)


def _plain(config: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration as JSON can hold it (tuples as lists)."""
    return json.loads(json.dumps(dict(config), default=lambda value: list(value) if isinstance(value, tuple)
                                 else str(value)))


# --- the arithmetic every framework's module shares ----------------------------------------

def flatten_columns_to_channels_first(weight: np.ndarray, map_shape: Sequence[int]) -> np.ndarray:
    """A dense weight (out, H·W·C) that reads a channels-last map flattened, with its
    columns in channels-first order (out, C·H·W). ``map_shape``: (H, W, C), or (W, C)."""
    *spatial, channels = map_shape
    out = weight.shape[0]
    moved = weight.reshape(out, *spatial, channels)
    return np.ascontiguousarray(np.moveaxis(moved, -1, 1).reshape(out, -1))


def flatten_columns_to_channels_last(weight: np.ndarray, map_shape: Sequence[int]) -> np.ndarray:
    """The inverse of :func:`flatten_columns_to_channels_first`."""
    *spatial, channels = map_shape
    out = weight.shape[0]
    moved = weight.reshape(out, channels, *spatial)
    return np.ascontiguousarray(np.moveaxis(moved, 1, -1).reshape(out, -1))


def unflatten_rows_to_channels_first(weight: np.ndarray, bias: np.ndarray | None, map_shape: Sequence[int]):
    """A dense layer (out = H·W·C rows, read as a channels-last map) with its rows, and its
    bias, in channels-first order. ``map_shape``: (H, W, C), or (W, C)."""
    *spatial, channels = map_shape
    order = np.moveaxis(np.arange(int(np.prod(map_shape))).reshape(*spatial, channels), -1, 0).ravel()
    return weight[order], (None if bias is None else bias[order])


def unflatten_rows_to_channels_last(weight: np.ndarray, bias: np.ndarray | None, map_shape: Sequence[int]):
    """The inverse of :func:`unflatten_rows_to_channels_first`."""
    *spatial, channels = map_shape
    order = np.moveaxis(np.arange(int(np.prod(map_shape))).reshape(*spatial, channels), -1, 0).ravel()
    inverse = np.argsort(order)
    return weight[inverse], (None if bias is None else bias[inverse])
