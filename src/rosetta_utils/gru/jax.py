"""GRU weights of Flax: flax.nnx's GRUCell (alone, in nnx.RNN, in nnx.Bidirectional) and a
flax.linen GRUCell's params dict.

flax.nnx.GRUCell: dense_i (I, 3H) with bias and dense_h (H, 3H) without bias,
x·K with gates r, z, n in column blocks: an LBR GRU whose b_hn is missing, so
b_hr and b_hz live in dense_i's bias. Given a dense_h with a bias, it is exact.
flax.linen.GRUCell params: six Dense layers ir, iz, in (with bias), hr, hz
(without), hn (with bias).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from flax.core import FrozenDict

from .canonical import LBR, as_float32
from .errors import GRUConversionError, unsupported

_LINEN_NAMES = ("ir", "iz", "in", "hr", "hz", "hn")


def layer_info(layer: Any) -> dict[str, Any]:
    """flax.nnx: LBR; it holds b_hn only if every cell's dense_h was given a bias.
    A flax.linen params dict: LBR, with b_hn (in "hn") and b_hr + b_ir folded in "ir"."""
    if isinstance(layer, Mapping):
        return _linen_info(layer)
    cells = _nnx_cells(layer)
    forward = cells["forward"]
    return {
        "flavor": LBR,
        "directions": len(cells),
        "input_size": int(forward.in_features),
        "hidden_size": int(forward.hidden_features),
        "holds_b_hn": all(_dense_h_bias(cell) is not None for cell in cells.values()),
        "has_bias": True,
    }


def read_weights(layer: Any) -> dict[str, Any]:
    """Canonical weights of an nnx.GRUCell, nnx.RNN(GRUCell), nnx.Bidirectional of two,
    or a flax.linen GRUCell params dict (whose b_hr, b_hz read as zero)."""
    if isinstance(layer, Mapping):
        return _linen_weights(layer)
    weights: dict[str, Any] = {}
    for direction, cell in _nnx_cells(layer).items():
        hidden = int(cell.hidden_features)
        bias_h = _dense_h_bias(cell)
        weights[direction] = {
            "weight_ih": as_float32(np.asarray(cell.dense_i.kernel[...]).T),
            "weight_hh": as_float32(np.asarray(cell.dense_h.kernel[...]).T),
            "bias_ih": as_float32(np.asarray(cell.dense_i.bias[...])),
            "bias_hh": as_float32(
                np.zeros(3 * hidden, np.float32) if bias_h is None else np.asarray(bias_h[...])
            ),
        }
    weights["flavor"] = LBR
    return weights


def write_weights(layer: Any, weights: dict[str, Any]) -> Any:
    """Set canonical LBR weights in place and return the layer; for a flax.linen params
    dict, return new params of the same nesting and mapping type.

    Without a dense_h bias, b_hr and b_hz go into dense_i's bias (they add up)
    and b_hn must already be zero (:func:`rosetta_utils.gru.adapt.adapt_weights`
    checks it).
    """
    if isinstance(layer, Mapping):
        return _linen_params(layer, weights)
    for direction, cell in _nnx_cells(layer).items():
        canonical = weights[direction]
        hidden = int(cell.hidden_features)
        bias_h = _dense_h_bias(cell)
        cell.dense_i.kernel[...] = jnp.asarray(np.ascontiguousarray(canonical["weight_ih"].T))
        cell.dense_h.kernel[...] = jnp.asarray(np.ascontiguousarray(canonical["weight_hh"].T))
        if bias_h is None:
            if np.any(canonical["bias_hh"][2 * hidden :] != 0):
                raise GRUConversionError("this nnx.GRUCell has no dense_h bias to hold a non-zero b_hn")
            folded = canonical["bias_ih"].copy()
            folded[: 2 * hidden] += canonical["bias_hh"][: 2 * hidden]
            cell.dense_i.bias[...] = jnp.asarray(folded)
        else:
            cell.dense_i.bias[...] = jnp.asarray(canonical["bias_ih"])
            bias_h[...] = jnp.asarray(canonical["bias_hh"])
    return layer


# --- flax.nnx -----------------------------------------------------------------------------


def _nnx_cells(layer: Any) -> dict[str, Any]:
    def cell_of(module: Any) -> Any:
        if isinstance(module, nnx.RNN):
            module = module.cell
        if not isinstance(module, nnx.GRUCell):
            raise unsupported(layer, f"it holds a {type(module).__name__}, not a GRUCell")
        if module.gate_fn is not jax.nn.sigmoid and module.gate_fn is not nnx.sigmoid:
            raise unsupported(layer, "its gate_fn is not sigmoid")
        if module.activation_fn is not jnp.tanh and module.activation_fn is not nnx.tanh:
            raise unsupported(layer, "its activation_fn is not tanh")
        return module

    if isinstance(layer, nnx.Bidirectional):
        return {"forward": cell_of(layer.forward_rnn), "backward": cell_of(layer.backward_rnn)}
    if isinstance(layer, (nnx.RNN, nnx.GRUCell)):
        return {"forward": cell_of(layer)}
    raise unsupported(layer)


def _dense_h_bias(cell: Any) -> Any:
    bias = getattr(cell.dense_h, "bias", None)
    return None if bias is None or (isinstance(bias, nnx.Variable) and bias.get_value() is None) else bias


# --- flax.linen params --------------------------------------------------------------------


def _linen_inner(params: Any) -> Any:
    return params["params"] if "params" in params and len(params) == 1 else params


def _linen_info(params: Any) -> dict[str, Any]:
    inner = _linen_inner(params)
    try:
        kernel = inner["ir"]["kernel"]
        for name in _LINEN_NAMES:
            inner[name]["kernel"]
        for name in ("ir", "iz", "in", "hn"):
            inner[name]["bias"]
    except (KeyError, TypeError) as error:
        raise GRUConversionError(
            f"not a flax.linen GRUCell params dict: missing {error}; expected "
            "{'ir': {'kernel', 'bias'}, 'iz': ..., 'in': ..., 'hr': {'kernel'}, 'hz': ..., 'hn': {'kernel', 'bias'}}"
        ) from None
    return {
        "flavor": LBR,
        "directions": 1,
        "input_size": int(kernel.shape[0]),
        "hidden_size": int(kernel.shape[1]),
        "holds_b_hn": True,
        "has_bias": True,
    }


def _linen_weights(params: Any) -> dict[str, Any]:
    info = _linen_info(params)
    inner = _linen_inner(params)
    zeros = np.zeros(info["hidden_size"], np.float32)

    def rows(names: tuple[str, ...], part: str) -> np.ndarray:
        blocks = []
        for name in names:
            if part == "kernel":
                blocks.append(np.asarray(inner[name]["kernel"]).T)
            else:
                blocks.append(np.asarray(inner[name]["bias"]) if "bias" in inner[name] else zeros)
        return as_float32(np.concatenate(blocks))

    return {
        "forward": {
            "weight_ih": rows(("ir", "iz", "in"), "kernel"),
            "weight_hh": rows(("hr", "hz", "hn"), "kernel"),
            "bias_ih": rows(("ir", "iz", "in"), "bias"),
            "bias_hh": rows(("hr", "hz", "hn"), "bias"),
        },
        "flavor": LBR,
    }


def _linen_params(params: Any, weights: dict[str, Any]) -> Any:
    _linen_info(params)
    canonical = weights["forward"]
    w_i = np.split(canonical["weight_ih"], 3)
    w_h = np.split(canonical["weight_hh"], 3)
    b_i = np.split(canonical["bias_ih"], 3)
    b_h = np.split(canonical["bias_hh"], 3)

    def dense(kernel: Any, bias: Any = None) -> dict[str, Any]:
        entry = {"kernel": jnp.asarray(np.ascontiguousarray(kernel.T))}
        if bias is not None:
            entry["bias"] = jnp.asarray(bias)
        return entry

    inner = {
        "ir": dense(w_i[0], b_i[0] + b_h[0]),
        "iz": dense(w_i[1], b_i[1] + b_h[1]),
        "in": dense(w_i[2], b_i[2]),
        "hr": dense(w_h[0]),
        "hz": dense(w_h[1]),
        "hn": dense(w_h[2], b_h[2]),
    }
    result: Any = {"params": inner} if _linen_inner(params) is not params else inner
    return FrozenDict(result) if isinstance(params, FrozenDict) else result
