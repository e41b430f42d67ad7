"""Fit canonical weights to what one layer can hold: its flavor, its biases.

:func:`adapt_weights` takes validated weights and a layer's description (the
``layer_info`` of its converter) and returns weights of the layer's flavor
that it can hold, or raises :class:`GRUConversionError` for a conversion that
would not be exact (a flavor change with a ``U_n`` that is not diagonal or,
from LBR, a non-zero ``b_hn``; a ``b_hn`` or biases the layer has no place
for), unless ``approximate``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .canonical import DIRECTIONS, LBR
from .errors import GRUConversionError


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

