"""GRU weights of Chainer's links.

NStepGRU / NStepBiGRU: child link 2·layer + direction holds w0..w2 (input
side, gates r, z, n), w3..w5 (hidden side) and b0..b5, each (H, in) or (H,):
an LBR GRU. StatelessGRU / StatefulGRU (``L.GRU``): six Linear links W_r,
W_z, W, U_r, U_z, U computing an RB GRU with h' = (1 - z) h + z n, i.e. with
z negated.
"""

from __future__ import annotations

from typing import Any

import chainer
import chainer.links as L
import numpy as np

from .canonical import LBR, RB, as_float32
from .errors import GRUConversionError, unsupported


def _kind(layer: Any) -> str:
    """``"nstep"`` or ``"linear"``, once the layer is known to be initialized and single-layer."""
    if isinstance(layer, (L.NStepGRU, L.NStepBiGRU)):
        directions = 2 if isinstance(layer, L.NStepBiGRU) else 1
        if len(layer) != directions:
            raise unsupported(layer, f"n_layers={len(layer) // directions}; only single-layer GRUs are handled")
        kind = "nstep"
    elif isinstance(layer, (L.StatelessGRU, L.StatefulGRU)):
        kind = "linear"
    else:
        raise unsupported(layer)
    for name, parameter in layer.namedparams():
        if parameter.array is None:
            raise GRUConversionError(
                f"the parameters of {type(layer).__name__} are not initialized yet ({name} has no array): "
                "give the input size when creating the link, or run it once on an input"
            )
    return kind


def _linear_links(layer: Any) -> tuple[Any, ...]:
    """W_r, W_z, W, U_r, U_z, U: input side then hidden side, gates r, z, n."""
    return (layer.W_r, layer.W_z, layer.W, layer.U_r, layer.U_z, layer.U)


def layer_info(layer: Any) -> dict[str, Any]:
    """NStepGRU / NStepBiGRU: LBR with every bias; StatelessGRU / GRU: RB."""
    if _kind(layer) == "nstep":
        first = layer[0]
        return {
            "flavor": LBR,
            "directions": len(layer),
            "input_size": int(first.w0.shape[1]),
            "hidden_size": int(first.w0.shape[0]),
            "holds_b_hn": True,
            "has_bias": True,
        }
    return {
        "flavor": RB,
        "directions": 1,
        "input_size": int(layer.W.W.shape[1]),
        "hidden_size": int(layer.W.W.shape[0]),
        "holds_b_hn": True,
        "has_bias": all(getattr(link, "b", None) is not None for link in _linear_links(layer)),
    }


def _to_numpy(array: Any) -> np.ndarray:
    return chainer.backend.CpuDevice().send(array)


def read_weights(layer: Any) -> dict[str, Any]:
    """Canonical weights of a Chainer NStepGRU/NStepBiGRU (n_layers=1), StatelessGRU or GRU."""
    info = layer_info(layer)
    weights: dict[str, Any] = {}
    if _kind(layer) == "nstep":
        for direction, link in zip(("forward", "backward"), layer):
            w = [_to_numpy(getattr(link, f"w{i}").array) for i in range(6)]
            b = [_to_numpy(getattr(link, f"b{i}").array) for i in range(6)]
            weights[direction] = {
                "weight_ih": as_float32(np.concatenate(w[:3])),
                "weight_hh": as_float32(np.concatenate(w[3:])),
                "bias_ih": as_float32(np.concatenate(b[:3])),
                "bias_hh": as_float32(np.concatenate(b[3:])),
            }
    else:
        hidden = info["hidden_size"]
        matrices, biases = [], []
        for index, link in enumerate(_linear_links(layer)):
            sign = -1.0 if index in (1, 4) else 1.0  # the z gate is stored negated
            matrices.append(sign * _to_numpy(link.W.array))
            bias = np.zeros(hidden, np.float32) if link.b is None else _to_numpy(link.b.array)
            biases.append(sign * bias)
        weights["forward"] = {
            "weight_ih": as_float32(np.concatenate(matrices[:3])),
            "weight_hh": as_float32(np.concatenate(matrices[3:])),
            "bias_ih": as_float32(np.concatenate(biases[:3])),
            "bias_hh": as_float32(np.concatenate(biases[3:])),
        }
    weights["flavor"] = info["flavor"]
    return weights


def _assign(parameter: Any, value: Any) -> None:
    parameter.array[...] = chainer.backend.get_device_from_array(parameter.array).send(value)


def write_weights(layer: Any, weights: dict[str, Any]) -> Any:
    """Copy canonical weights (already fitted to the layer's flavor) into its parameters."""
    if _kind(layer) == "nstep":
        for direction, link in zip(("forward", "backward"), layer):
            canonical = weights[direction]
            for i, block in enumerate(np.split(canonical["weight_ih"], 3) + np.split(canonical["weight_hh"], 3)):
                _assign(getattr(link, f"w{i}"), block)
            for i, block in enumerate(np.split(canonical["bias_ih"], 3) + np.split(canonical["bias_hh"], 3)):
                _assign(getattr(link, f"b{i}"), block)
        return layer
    canonical = weights["forward"]
    matrices = np.split(canonical["weight_ih"], 3) + np.split(canonical["weight_hh"], 3)
    biases = np.split(canonical["bias_ih"], 3) + np.split(canonical["bias_hh"], 3)
    for index, link in enumerate(_linear_links(layer)):
        sign = np.float32(-1.0 if index in (1, 4) else 1.0)
        _assign(link.W, sign * matrices[index])
        if link.b is not None:
            _assign(link.b, sign * biases[index])
    return layer
