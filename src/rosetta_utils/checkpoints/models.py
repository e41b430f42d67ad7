"""The book's three models as canonical arrays: their names, and the shapes that make them the model.

The canonical layout is PyTorch's: ``state_dict`` names, convolution kernels
OIHW, dense weights (out, in), a GRU's packed r, z, n gates
(:mod:`rosetta_utils.gru`), and no entry that is not a weight or a running
statistic. Sizes are not fixed here (the chapters choose them): a checkpoint
is the model when it has exactly the model's names and its shapes fit
together, each layer's inputs being the previous layer's outputs. ResNet-50 is
one network whose shapes are its definition
(:func:`rosetta_utils.transplant.resnet50_weight_shapes`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..resnet50_layout import resnet50_weight_shapes
from .errors import CheckpointError, mismatch_error

#: The CIFAR-10 network's layers, in order: four convolutions, then two dense layers.
CIFAR10_CONVOLUTIONS = ("conv1", "conv2", "conv3", "conv4")
CIFAR10_DENSES = ("fc1", "fc2")
#: The IMDB classifier's GRU arrays, in PyTorch's names (one layer, one direction).
IMDB_GRU = ("gru.weight_ih_l0", "gru.weight_hh_l0", "gru.bias_ih_l0", "gru.bias_hh_l0")

Shapes = dict[str, tuple[Any, ...]]


def _dim(arrays: Mapping[str, np.ndarray], name: str, axis: int, ndim: int) -> int | None:
    """A size read from another array, when it is there with the rank it should have."""
    array = arrays.get(name)
    return int(array.shape[axis]) if array is not None and np.ndim(array) == ndim else None


def _free(arrays: Mapping[str, np.ndarray], name: str, ndim: int) -> tuple[Any, ...]:
    """The array's own sizes where it has the right rank (they are free), else named axes."""
    array = arrays.get(name)
    if array is not None and np.ndim(array) == ndim:
        return tuple(int(size) for size in array.shape)
    return tuple("?" for _ in range(ndim))


def _outputs(arrays: Mapping[str, np.ndarray], layer: str, weight_ndim: int) -> Any:
    """A layer's number of outputs: its bias's size, else its weight's first axis."""
    bias = _dim(arrays, f"{layer}.bias", 0, 1)
    return bias if bias is not None else _free(arrays, f"{layer}.weight", weight_ndim)[0]


def cifar10_shapes(arrays: Mapping[str, np.ndarray]) -> Shapes:
    """What each array of the CIFAR-10 network must be, given the others: 3 input
    channels, each convolution reading its predecessor's channels, square kernels, fc1
    reading conv4's channels over a square grid, fc2 reading fc1's outputs."""
    shapes: Shapes = {}
    channels = 3
    for name in CIFAR10_CONVOLUTIONS:
        out = _outputs(arrays, name, 4)
        side = _free(arrays, f"{name}.weight", 4)[2]
        shapes[f"{name}.weight"] = (out, channels, side, side)
        shapes[f"{name}.bias"] = (out,)
        channels = out
    hidden = _outputs(arrays, "fc1", 2)
    inputs = _free(arrays, "fc1.weight", 2)[1]
    if isinstance(channels, int) and isinstance(inputs, int):
        grid = int(round(np.sqrt(inputs / channels))) if inputs >= channels else 0
        if channels * grid * grid != inputs:
            inputs = f"{channels}·s·s"  # no square grid fits: named, and so a mismatch
    shapes["fc1.weight"] = (hidden, inputs)
    shapes["fc1.bias"] = (hidden,)
    classes = _outputs(arrays, "fc2", 2)
    shapes["fc2.weight"] = (classes, hidden)
    shapes["fc2.bias"] = (classes,)
    return shapes


def cifar10_flatten(arrays: Mapping[str, np.ndarray]) -> tuple[int, int, int]:
    """(channels, height, width) that fc1 reads after the flatten."""
    channels = int(arrays["conv4.weight"].shape[0])
    side = int(round(np.sqrt(arrays["fc1.weight"].shape[1] / channels)))
    return channels, side, side


def imdb_shapes(arrays: Mapping[str, np.ndarray]) -> Shapes:
    """Embedding (V, E) → GRU with H units, gates r, z, n: (3H, E), (3H, H), (3H,), (3H,)
    → dense (classes, H)."""
    vocabulary, embedding = _free(arrays, "embedding.weight", 2)
    hidden = _dim(arrays, "gru.weight_hh_l0", 1, 2)
    gates = 3 * hidden if hidden is not None else "3H"
    hidden = hidden if hidden is not None else "H"
    classes = _outputs(arrays, "dense", 2)
    return {
        "embedding.weight": (vocabulary, embedding),
        "gru.weight_ih_l0": (gates, embedding),
        "gru.weight_hh_l0": (gates, hidden),
        "gru.bias_ih_l0": (gates,),
        "gru.bias_hh_l0": (gates,),
        "dense.weight": (classes, hidden),
        "dense.bias": (classes,),
    }


def resnet50_shapes(arrays: Mapping[str, np.ndarray]) -> Shapes:
    """ResNet-50's feature extractor in torchvision's names: its shapes are its definition."""
    return dict(resnet50_weight_shapes())


#: Each model's rule: the shape every canonical array must have, given the arrays.
MODELS: dict[str, Callable[[Mapping[str, np.ndarray]], Shapes]] = {
    "cifar10": cifar10_shapes,
    "imdb": imdb_shapes,
    "resnet50": resnet50_shapes,
}


def check_model(model: str) -> str:
    if model not in MODELS:
        raise CheckpointError(f"unknown model {model!r}: the models are {', '.join(MODELS)}")
    return model


def canonical_names(model: str) -> list[str]:
    """The model's canonical array names, in the model's order."""
    return list(MODELS[check_model(model)]({}))


def describe(shape: tuple[Any, ...] | None) -> str:
    return "absent" if shape is None else "(" + ", ".join(str(size) for size in shape) + (",)" if len(shape) == 1 else ")")


def mismatches(model: str, arrays: Mapping[str, np.ndarray]) -> list[str]:
    """Every name and shape of ``arrays`` that does not fit ``model``: missing names,
    unexpected names, wrong shapes and dtypes other than float32."""
    expected = MODELS[check_model(model)](arrays)
    problems = [f"missing {name} {describe(shape)}" for name, shape in expected.items() if name not in arrays]
    problems += [f"unexpected {name} {describe(np.shape(array))}" for name, array in arrays.items()
                 if name not in expected]
    for name, shape in expected.items():
        if name in arrays and tuple(np.shape(arrays[name])) != shape:
            problems.append(f"{name} is {describe(np.shape(arrays[name]))}, expected {describe(shape)}")
        elif name in arrays and np.asarray(arrays[name]).dtype != np.float32:
            problems.append(f"{name} is {np.asarray(arrays[name]).dtype}, expected float32")
    return problems


def check_canonical(model: str, arrays: Mapping[str, np.ndarray], what: str = "the arrays") -> dict[str, np.ndarray]:
    """``arrays`` in the model's order, or :class:`CheckpointError` listing every mismatch."""
    problems = mismatches(model, arrays)
    if problems:
        raise mismatch_error(model, what, problems)
    return {name: np.asarray(arrays[name]) for name in canonical_names(model)}
