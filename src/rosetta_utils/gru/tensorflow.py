"""GRU weights of Keras 3's GRU, GRUCell and Bidirectional(GRU).

Keras stores x·K: kernel (I, 3U) and recurrent_kernel (U, 3U), gates z, r, h
in column blocks. ``reset_after=True`` (LBR) keeps a bias (2, 3U): row 0 for
the input, row 1 for the recurrent side; ``reset_after=False`` (RB) keeps one
(3U,) bias.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from .canonical import LBR, RB, as_float32
from .errors import GRUConversionError, unsupported


def _cells(layer: Any) -> dict[str, Any]:
    """The GRUCell of each direction of a Keras GRU, GRUCell or Bidirectional(GRU)."""
    if isinstance(layer, keras.layers.Bidirectional):
        inner = {"forward": layer.forward_layer, "backward": layer.backward_layer}
        for sublayer in inner.values():
            if not isinstance(sublayer, keras.layers.GRU):
                raise unsupported(layer, f"it wraps a {type(sublayer).__name__}, not a GRU")
        if not (inner["forward"].built and inner["backward"].built):
            raise GRUConversionError(
                "the Keras Bidirectional layer is not built yet: call layer.build((None, T, I)) "
                "or run it once on an input first"
            )
        cells = {direction: sublayer.cell for direction, sublayer in inner.items()}
    elif isinstance(layer, keras.layers.GRU):
        if not layer.built:
            raise GRUConversionError(
                "the Keras GRU layer is not built yet: call layer.build((None, T, I)) or run it "
                "once on an input first"
            )
        cells = {"forward": layer.cell}
    elif isinstance(layer, keras.layers.GRUCell):
        if not layer.built:
            raise GRUConversionError("the Keras GRUCell is not built yet: call cell.build((None, I)) first")
        cells = {"forward": layer}
    else:
        raise unsupported(layer)
    for cell in cells.values():
        activation = keras.activations.serialize(cell.activation)
        recurrent = keras.activations.serialize(cell.recurrent_activation)
        if activation != "tanh" or recurrent != "sigmoid":
            raise unsupported(
                layer, f"activation={activation!r}, recurrent_activation={recurrent!r}; a GRU uses tanh and sigmoid"
            )
    return cells


def layer_info(layer: Any) -> dict[str, Any]:
    """Keras: reset_after=True is an LBR GRU, reset_after=False an RB GRU."""
    cells = _cells(layer)
    flavors = {cell.reset_after for cell in cells.values()}
    if len(flavors) != 1:
        raise GRUConversionError("the Bidirectional layer's two GRUs differ in reset_after")
    forward = cells["forward"]
    return {
        "flavor": LBR if forward.reset_after else RB,
        "directions": len(cells),
        "input_size": int(forward.kernel.shape[0]),
        "hidden_size": int(forward.units),
        "holds_b_hn": True,  # LBR: its own row; RB: the n biases add up anyway
        "has_bias": bool(forward.use_bias),
    }


def _zrh_columns_to_rzn_rows(matrix: Any, units: int) -> np.ndarray:
    z, r, h = (matrix[..., i * units : (i + 1) * units] for i in range(3))
    return np.concatenate([r, z, h], axis=-1).T


def _rzn_rows_to_zrh_columns(matrix: Any, units: int) -> np.ndarray:
    r, z, n = (matrix[i * units : (i + 1) * units] for i in range(3))
    return np.ascontiguousarray(np.concatenate([z, r, n], axis=0).T)


def read_weights(layer: Any) -> dict[str, Any]:
    """Canonical weights of a built Keras GRU, GRUCell or Bidirectional(GRU)."""
    info = layer_info(layer)
    units = info["hidden_size"]
    weights: dict[str, Any] = {}
    for direction, cell in _cells(layer).items():
        kernel = np.asarray(cell.kernel)
        recurrent = np.asarray(cell.recurrent_kernel)
        if cell.use_bias:
            bias = np.asarray(cell.bias)
            if cell.reset_after:
                bias_ih, bias_hh = bias[0], bias[1]
            else:
                bias_ih, bias_hh = bias, np.zeros_like(bias)
        else:
            bias_ih = bias_hh = np.zeros(3 * units, dtype=np.float32)
        weights[direction] = {
            "weight_ih": as_float32(_zrh_columns_to_rzn_rows(kernel, units)),
            "weight_hh": as_float32(_zrh_columns_to_rzn_rows(recurrent, units)),
            "bias_ih": as_float32(_zrh_columns_to_rzn_rows(bias_ih, units)),
            "bias_hh": as_float32(_zrh_columns_to_rzn_rows(bias_hh, units)),
        }
    weights["flavor"] = info["flavor"]
    return weights


def write_weights(layer: Any, weights: dict[str, Any]) -> Any:
    """Assign canonical weights (already fitted to the layer's flavor) to its variables."""
    units = layer_info(layer)["hidden_size"]
    for direction, cell in _cells(layer).items():
        canonical = weights[direction]
        cell.kernel.assign(_rzn_rows_to_zrh_columns(canonical["weight_ih"], units))
        cell.recurrent_kernel.assign(_rzn_rows_to_zrh_columns(canonical["weight_hh"], units))
        if cell.use_bias:
            bias_ih = _rzn_rows_to_zrh_columns(canonical["bias_ih"], units)
            bias_hh = _rzn_rows_to_zrh_columns(canonical["bias_hh"], units)
            if cell.reset_after:
                cell.bias.assign(np.stack([bias_ih, bias_hh]))
            else:  # reset_before: the two biases of every gate simply add up
                cell.bias.assign(bias_ih + bias_hh)
    return layer
