"""Where two float32 runs of a ReLU network take the same decisions, and which gradients
float32 therefore determines.

A ReLU and a max pool are continuous, their gradients are not: the side of zero an input
falls on, and the largest value of a pool's window, decide where a gradient flows. Two
correct ports round differently, so an input within rounding of such a decision can be
decided one way in one run and the other way in the other; a gradient then moves by a
whole example's share, which no float32 bound covers. Two runs' gradients are held to
float32's error only where every decision between the weights and the loss was taken
alike: on the examples both decide alike (:func:`decided_alike`), and for a batch's
weight gradients, on the layers after which no example was decided otherwise
(:func:`determined_layers`).

Each run gives its layers' outputs, NCHW for images, as the layers return them (before or
after their own ReLU: only the sign is read).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np


#: A window whose largest value is not positive: the ReLU after the pool passes no gradient.
NO_GRADIENT = -2
#: A window whose two largest values are equal and positive: each framework's rule chooses.
TIED = -1


def pool_choices(output: np.ndarray, size: int = 2) -> np.ndarray:
    """What a ``size`` × ``size`` max pool followed by a ReLU decides, per image and window:
    the index of the window's largest value, :data:`TIED` where its two largest are equal
    and positive, :data:`NO_GRADIENT` where its largest is not positive."""
    n, c, h, w = output.shape
    windows = np.asarray(output).reshape(n, c, h // size, size, w // size, size)
    windows = windows.transpose(0, 1, 2, 4, 3, 5).reshape(n, -1, size * size)
    top = np.sort(windows, axis=-1)
    choices = np.where(top[..., -1] == top[..., -2], TIED, windows.argmax(axis=-1))
    return np.where(top[..., -1] > 0, choices, NO_GRADIENT)


def decided_otherwise(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], relus: Iterable[str],
                      pools: Iterable[str] = ()) -> dict[str, np.ndarray]:
    """Per layer, the images on which the two runs decide otherwise: the sign of an output
    of one of ``relus`` (a ReLU follows each output), or the choice of one of ``pools``
    (a 2×2 max pool, then a ReLU, follow: :func:`pool_choices`; an exact tie counts as
    decided otherwise). Layers in the order given, relus first."""
    relus, pools = list(relus), list(pools)
    missing = [layer for layer in relus + pools if layer not in a or layer not in b]
    if missing:
        raise KeyError(f"no recorded output of {missing} in both runs")
    otherwise = {}
    for layer in relus:
        signs = (np.asarray(a[layer]) > 0) != (np.asarray(b[layer]) > 0)
        otherwise[layer] = signs.reshape(len(signs), -1).any(axis=1)
    for layer in pools:
        choice_a, choice_b = pool_choices(np.asarray(a[layer])), pool_choices(np.asarray(b[layer]))
        moved = ((choice_a != choice_b) | (choice_a == TIED)).any(axis=1)
        otherwise[layer] = otherwise.get(layer, np.zeros_like(moved)) | moved
    return otherwise


def decided_alike(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], relus: Iterable[str],
                  pools: Iterable[str] = ()) -> np.ndarray:
    """The images on which two runs take every decision alike (see :func:`decided_otherwise`)."""
    otherwise = decided_otherwise(a, b, relus, pools)
    if not otherwise:
        raise ValueError("no layer named whose decisions to compare")
    return ~np.any(list(otherwise.values()), axis=0)


def determined_layers(order: Sequence[str], otherwise: Mapping[str, np.ndarray]) -> list[str]:
    """The layers of ``order`` (the network's weighted layers, input to loss) whose weights'
    gradients on a batch float32 determines: those after which, up to the loss, no image
    was decided otherwise (a layer's own ReLU or pool counts as after it)."""
    determined, clear = [], True
    for layer in reversed(order):
        clear = clear and not np.any(otherwise.get(layer, False))
        if clear:
            determined.append(layer)
    return determined[::-1]
