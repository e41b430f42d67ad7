"""Move the weights of a single-layer GRU between the five frameworks.

The canonical weights of one direction are PyTorch's layout, as numpy float32
arrays, with the gates in the order r, z, n::

    weight_ih (3H, I)   weight_hh (3H, H)   bias_ih (3H,)   bias_hh (3H,)

A layer's weights are ``{"forward": canonical, "backward": canonical,
"flavor": ...}``; ``"backward"`` only for a bidirectional layer. The flavor
says which GRU the numbers belong to:

``LBR`` ("linear_before_reset", the cuDNN form of PyTorch, MXNet, Chainer's
NStepGRU, Keras ``reset_after=True`` and Flax)
    ``n = tanh(W_n x + b_in + r * (U_n h + b_hn))``
``RB`` ("reset_before", Keras ``reset_after=False``, Chainer's ``L.GRU``)
    ``n = tanh(W_n x + b_in + U_n (r * h) + b_hn)``: the two n biases add up.

Both update ``h' = z * h + (1 - z) * n``. Chainer's ``L.GRU`` and
``L.StatelessGRU`` use ``h' = (1 - z) * h + z * n``: their z gate is stored
negated, since ``1 - sigmoid(a) = sigmoid(-a)``.

Converting between flavors is exact only when ``U_n`` is diagonal (then
``r * (U_n h) = U_n (r * h)``) and, from LBR, ``b_hn`` is zero (RB has no
bias inside the reset). A flax.nnx ``GRUCell`` has no ``b_hn`` at all. Such
conversions raise :class:`GRUConversionError` unless ``approximate=True``.
Exactness is judged on the values: a ``b_hn`` that is all zeros converts
exactly.

This module imports no framework: it finds the framework from the layer's
type (``type(layer).__module__``) and calls that framework's functions in
:mod:`rosetta_utils.backends`, which import it when called.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import numpy as np

#: PyTorch's and cuDNN's GRU: the reset gate multiplies ``U_n h + b_hn``.
LBR = "linear_before_reset"
#: The GRU of the later paper versions: the reset gate multiplies ``h`` before ``U_n``.
RB = "reset_before"
FLAVORS = (LBR, RB)

#: The four arrays of one direction, in PyTorch's names.
CANONICAL_KEYS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
DIRECTIONS = ("forward", "backward")

#: The first part of a layer type's module, mapped to the backend that handles it.
_PACKAGE_BACKENDS = {
    "torch": "pytorch",
    "keras": "tensorflow",
    "tensorflow": "tensorflow",
    "tf_keras": "tensorflow",
    "flax": "jax",
    "mxnet": "mxnet",
    "chainer": "chainer",
}

SUPPORTED = (
    "torch.nn.GRU, torch.nn.GRUCell; keras.layers.GRU, keras.layers.GRUCell, "
    "keras.layers.Bidirectional(GRU); mxnet.gluon.rnn.GRU, mxnet.gluon.rnn.GRUCell; "
    "chainer.links.NStepGRU, NStepBiGRU, StatelessGRU, GRU (StatefulGRU); "
    "flax.nnx.GRUCell, nnx.RNN(GRUCell), nnx.Bidirectional of two of those; "
    "a flax.linen GRUCell params dict"
)


class GRUConversionError(ValueError):
    """Weights that cannot go into (or come out of) a layer, or not exactly."""


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def get_weights(layer: Any) -> dict[str, Any]:
    """A single-layer GRU's weights: ``{"forward": {...}, ["backward": {...},] "flavor": ...}``.

    Arrays are fresh numpy float32 copies in PyTorch's layout (gates r, z, n).
    """
    backend, kind = _backend_for(layer)
    if kind == "linen":
        weights = backend.linen_gru_weights(layer)
    else:
        weights = backend.gru_weights(layer)
    return validate_weights(weights, what=f"weights read from {_type_name(layer)}")


def set_weights(layer: Any, weights: Mapping[str, Any], approximate: bool = False) -> Any:
    """Load ``weights`` (the structure :func:`get_weights` returns) into a built layer.

    Returns the layer; for a flax.linen params dict, returns the new params dict.
    A conversion that cannot be exact raises :class:`GRUConversionError` saying
    why, unless ``approximate=True``: then the matrices are copied as they are,
    a ``b_hn`` the layer cannot hold is added to ``b_in`` (flavor change) or
    dropped (flax.nnx cell without a recurrent bias).
    """
    weights = validate_weights(weights)
    backend, kind = _backend_for(layer)
    if kind == "linen":
        info = backend.linen_gru_info(layer)
    else:
        info = backend.gru_info(layer)
    adapted = adapt_weights(weights, info, approximate=approximate, target=_type_name(layer))
    if kind == "linen":
        return backend.load_linen_gru_weights(layer, adapted)
    backend.load_gru_weights(layer, adapted)
    return layer


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


# --------------------------------------------------------------------------
# Validation of the canonical structure
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# Fitting weights to what a layer can hold
# --------------------------------------------------------------------------


def adapt_weights(
    weights: Mapping[str, Any], info: Mapping[str, Any], approximate: bool = False, target: str = "the layer"
) -> dict[str, Any]:
    """Turn validated ``weights`` into weights of the layer's flavor that the layer can hold.

    ``info`` describes the layer: ``flavor``, ``directions`` (1 or 2),
    ``input_size``, ``hidden_size``, ``holds_b_hn`` (False for a flax.nnx cell
    without a recurrent bias) and ``has_bias`` (False for layers built without
    biases). Raises :class:`GRUConversionError` for a conversion that is not
    exact, unless ``approximate``.
    """
    directions = DIRECTIONS[: info["directions"]]
    present = tuple(d for d in DIRECTIONS if d in weights)
    if present != directions:
        layer_kind = "bidirectional" if len(directions) == 2 else "one-directional"
        raise GRUConversionError(
            f"{target} is {layer_kind} and needs key(s) {', '.join(map(repr, directions))}; "
            f"the weights have {', '.join(map(repr, present))}"
        )
    expected = {
        "weight_ih": (3 * info["hidden_size"], info["input_size"]),
        "weight_hh": (3 * info["hidden_size"], info["hidden_size"]),
    }
    for direction in directions:
        for key, shape in expected.items():
            if weights[direction][key].shape != shape:
                raise GRUConversionError(
                    f"weights[{direction!r}][{key!r}] has shape {weights[direction][key].shape}, but {target} "
                    f"(input size {info['input_size']}, hidden size {info['hidden_size']}) needs {shape}"
                )
    source, wanted = weights["flavor"], info["flavor"]
    hidden = info["hidden_size"]
    n_rows = slice(2 * hidden, 3 * hidden)
    adapted: dict[str, Any] = {"flavor": wanted}
    for direction in directions:
        canonical = {key: array.copy() for key, array in weights[direction].items()}
        where = f"weights[{direction!r}]"
        if source != wanted:
            u_n = canonical["weight_hh"][n_rows]
            b_hn = canonical["bias_hh"][n_rows]
            reasons = []
            if np.any(u_n != np.diag(np.diag(u_n))):
                reasons.append(
                    "U_n (the n rows of weight_hh) is not diagonal, and r * (U_n h) != U_n (r * h)"
                )
            if source == LBR and np.any(b_hn != 0):
                reasons.append("b_hn is not zero, and reset_before has no bias inside the reset")
            if reasons and not approximate:
                raise GRUConversionError(
                    f"cannot convert {source} weights into {target}, which computes a {wanted} GRU, "
                    f"exactly: {where}: {'; '.join(reasons)}. Pass approximate=True to copy the "
                    "matrices anyway (b_hn is added to b_in)"
                )
            # Where the two flavors agree, a bias outside the reset is b_in's business.
            canonical["bias_ih"][n_rows] += b_hn
            canonical["bias_hh"][n_rows] = 0.0
        if not info["holds_b_hn"] and np.any(canonical["bias_hh"][n_rows] != 0):
            if not approximate:
                raise GRUConversionError(
                    f"cannot load {where} into {target} exactly: its b_hn (bias_hh[{2 * hidden}:{3 * hidden}]) "
                    "is not zero, and the layer has no bias inside the reset (flax.nnx's GRUCell "
                    "has no bias in dense_h; give it one with dense_h = nnx.Linear(H, 3 * H, "
                    "use_bias=True, rngs=...)). Pass approximate=True to drop b_hn"
                )
            canonical["bias_hh"][n_rows] = 0.0
        if not info["has_bias"]:
            if np.any(canonical["bias_ih"] != 0) or np.any(canonical["bias_hh"] != 0):
                if not approximate:
                    raise GRUConversionError(
                        f"cannot load {where} into {target} exactly: the layer has no biases and "
                        "the weights' biases are not zero. Pass approximate=True to drop them"
                    )
            canonical["bias_ih"][:] = 0.0
            canonical["bias_hh"][:] = 0.0
        adapted[direction] = canonical
    return adapted


def conversion_is_exact(weights: Mapping[str, Any], layer: Any) -> bool:
    """Whether :func:`set_weights` would load ``weights`` into ``layer`` without approximating."""
    weights = validate_weights(weights)
    backend, kind = _backend_for(layer)
    info = backend.linen_gru_info(layer) if kind == "linen" else backend.gru_info(layer)
    try:
        adapt_weights(weights, info, approximate=False, target=_type_name(layer))
    except GRUConversionError:
        return False
    return True


# --------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------


def _type_name(layer: Any) -> str:
    kind = type(layer)
    return f"{kind.__module__}.{kind.__qualname__}"


def _is_linen_params(layer: Any) -> bool:
    if not isinstance(layer, Mapping):
        return False
    inner = layer.get("params", layer) if "params" in layer and len(layer) == 1 else layer
    return isinstance(inner, Mapping) and {"ir", "iz", "in", "hr", "hz", "hn"} <= set(inner)


def _backend_for(layer: Any) -> tuple[Any, str]:
    """The backend module that handles ``layer``, and ``"layer"`` or ``"linen"``."""
    if _is_linen_params(layer):
        return importlib.import_module("rosetta_utils.backends.jax"), "linen"
    package = (type(layer).__module__ or "").split(".")[0]
    name = _PACKAGE_BACKENDS.get(package)
    if name is None:
        raise GRUConversionError(f"unsupported layer type {_type_name(layer)}: supported are {SUPPORTED}")
    return importlib.import_module(f"rosetta_utils.backends.{name}"), "layer"


def unsupported(layer: Any, why: str = "") -> GRUConversionError:
    """The error a backend raises for a layer it cannot handle (``why`` adds the reason)."""
    detail = f" ({why})" if why else ""
    return GRUConversionError(f"unsupported layer type {_type_name(layer)}{detail}: supported are {SUPPORTED}")


def as_float32(array: Any) -> np.ndarray:
    """A fresh contiguous float32 numpy copy."""
    return np.array(array, dtype=np.float32, copy=True, order="C")
