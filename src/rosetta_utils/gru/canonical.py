"""The canonical form of a GRU's weights, which every converter reads and writes.

One direction is PyTorch's layout, numpy float32, gates in the order r, z, n::

    weight_ih (3H, I)   weight_hh (3H, H)   bias_ih (3H,)   bias_hh (3H,)

A layer's weights are ``{"forward": canonical, "backward": canonical,
"flavor": LBR or RB}``, ``"backward"`` only for a bidirectional layer.
:func:`validate_weights` checks that structure; :func:`random_gru_weights`
makes one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import GRUConversionError

#: PyTorch's and cuDNN's GRU: the reset gate multiplies ``U_n h + b_hn``.
LBR = "linear_before_reset"
#: The GRU of the later paper versions: the reset gate multiplies ``h`` before ``U_n``.
RB = "reset_before"
FLAVORS = (LBR, RB)

#: The four arrays of one direction, in PyTorch's names.
CANONICAL_KEYS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
DIRECTIONS = ("forward", "backward")


def random_gru_weights(
    input_size: int,
    hidden_size: int,
    bidirectional: bool = False,
    seed: int = 0,
    scale: float = 0.5,
    flavor: str = LBR,
) -> dict[str, Any]:
    """Random canonical weights, biases included (all non-zero), uniform in ``[-scale, scale]``.

    With inputs of unit size, ``scale=0.5`` keeps the gates away from saturation
    for small layers, so a wrong gate order or a missing bias shows in the outputs.
    """
    if input_size < 1 or hidden_size < 1:
        raise ValueError(f"input_size and hidden_size must be positive, got {input_size}, {hidden_size}")
    _check_flavor(flavor)
    rng = np.random.default_rng(seed)

    def uniform(*shape: int) -> np.ndarray:
        return rng.uniform(-scale, scale, size=shape).astype(np.float32)

    weights: dict[str, Any] = {}
    for direction in DIRECTIONS[: 2 if bidirectional else 1]:
        weights[direction] = {
            "weight_ih": uniform(3 * hidden_size, input_size),
            "weight_hh": uniform(3 * hidden_size, hidden_size),
            "bias_ih": uniform(3 * hidden_size),
            "bias_hh": uniform(3 * hidden_size),
        }
    weights["flavor"] = flavor
    return weights


def validate_weights(weights: Any, what: str = "weights") -> dict[str, Any]:
    """Check the structure, shapes, dtype and values; return a copy with ``"flavor"`` filled in.

    Raises :class:`GRUConversionError` naming the key, shape or value that is wrong.
    """
    if not isinstance(weights, Mapping):
        raise GRUConversionError(
            f"{what} must be a dict with 'forward' (and 'backward' for a bidirectional "
            f"layer) and optionally 'flavor'; got {type(weights).__name__}"
        )
    unknown = [key for key in weights if key not in (*DIRECTIONS, "flavor")]
    if unknown:
        raise GRUConversionError(
            f"{what}: unknown key(s) {', '.join(map(repr, unknown))}; expected 'forward', "
            "'backward' (bidirectional only) and 'flavor'"
        )
    if "forward" not in weights:
        raise GRUConversionError(f"{what}: missing key 'forward'")
    flavor = weights.get("flavor", LBR)
    _check_flavor(flavor, what)
    checked: dict[str, Any] = {}
    for direction in DIRECTIONS:
        if direction in weights:
            checked[direction] = _validate_direction(weights[direction], f"{what}[{direction!r}]")
    if "backward" in checked:
        forward_shapes = {key: a.shape for key, a in checked["forward"].items()}
        backward_shapes = {key: a.shape for key, a in checked["backward"].items()}
        if forward_shapes != backward_shapes:
            raise GRUConversionError(
                f"{what}: 'backward' shapes {backward_shapes} differ from 'forward' shapes {forward_shapes}"
            )
    checked["flavor"] = flavor
    return checked


def _check_flavor(flavor: Any, what: str = "flavor") -> None:
    if flavor not in FLAVORS:
        raise GRUConversionError(f"{what}: unknown flavor {flavor!r}; expected {LBR!r} or {RB!r}")


def _validate_direction(direction: Any, what: str) -> dict[str, np.ndarray]:
    if not isinstance(direction, Mapping):
        raise GRUConversionError(f"{what} must be a dict of {', '.join(CANONICAL_KEYS)}; got {type(direction).__name__}")
    missing = [key for key in CANONICAL_KEYS if key not in direction]
    extra = [key for key in direction if key not in CANONICAL_KEYS]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing key(s) {', '.join(map(repr, missing))}")
        if extra:
            parts.append(f"unknown key(s) {', '.join(map(repr, extra))}")
        raise GRUConversionError(f"{what}: {'; '.join(parts)}; expected exactly {', '.join(CANONICAL_KEYS)}")
    arrays = {}
    for key in CANONICAL_KEYS:
        value = direction[key]
        if not isinstance(value, np.ndarray):
            raise GRUConversionError(f"{what}[{key!r}] must be a numpy array, got {type(value).__name__}")
        if value.dtype != np.float32:
            raise GRUConversionError(f"{what}[{key!r}] must be float32, got {value.dtype}")
        if not np.all(np.isfinite(value)):
            raise GRUConversionError(f"{what}[{key!r}] has non-finite values (nan or inf)")
        arrays[key] = value
    weight_ih, weight_hh = arrays["weight_ih"], arrays["weight_hh"]
    if weight_hh.ndim != 2 or weight_hh.shape[0] != 3 * weight_hh.shape[1] or weight_hh.shape[1] == 0:
        raise GRUConversionError(
            f"{what}['weight_hh'] must have shape (3H, H), gates r, z, n stacked; got shape {weight_hh.shape}"
        )
    hidden = weight_hh.shape[1]
    if weight_ih.ndim != 2 or weight_ih.shape[0] != 3 * hidden or weight_ih.shape[1] == 0:
        raise GRUConversionError(
            f"{what}['weight_ih'] must have shape (3H, I) = ({3 * hidden}, I) for H = {hidden} "
            f"(from weight_hh); got shape {weight_ih.shape}"
        )
    for key in ("bias_ih", "bias_hh"):
        if arrays[key].shape != (3 * hidden,):
            raise GRUConversionError(
                f"{what}[{key!r}] must have shape (3H,) = ({3 * hidden},); got shape {arrays[key].shape}"
            )
    return {key: arrays[key].copy() for key in CANONICAL_KEYS}


def as_float32(array: Any) -> np.ndarray:
    """A fresh contiguous float32 numpy copy."""
    return np.array(array, dtype=np.float32, copy=True, order="C")

