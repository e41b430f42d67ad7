"""GRU weights of torch.nn.GRU (one layer) and torch.nn.GRUCell: the canonical layout is PyTorch's own."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .canonical import CANONICAL_KEYS, LBR, as_float32
from .errors import unsupported


def _parameters(layer: Any) -> dict[str, dict[str, Any]]:
    """The layer's GRU parameters per direction, keyed by canonical name (None if bias=False)."""
    if isinstance(layer, torch.nn.GRUCell):
        return {"forward": {key: getattr(layer, key, None) for key in CANONICAL_KEYS}}
    if isinstance(layer, torch.nn.GRU):
        if layer.num_layers != 1:
            raise unsupported(layer, f"num_layers={layer.num_layers}; only single-layer GRUs are handled")
        suffixes = {"forward": "_l0", "backward": "_l0_reverse"}
        directions = ("forward", "backward") if layer.bidirectional else ("forward",)
        return {
            direction: {key: getattr(layer, key + suffixes[direction], None) for key in CANONICAL_KEYS}
            for direction in directions
        }
    raise unsupported(layer)


def layer_info(layer: Any) -> dict[str, Any]:
    """What a torch.nn.GRU / GRUCell holds: an LBR GRU, with or without biases."""
    parameters = _parameters(layer)
    return {
        "flavor": LBR,
        "directions": len(parameters),
        "input_size": layer.input_size,
        "hidden_size": layer.hidden_size,
        "holds_b_hn": True,
        "has_bias": bool(layer.bias),
    }


def read_weights(layer: Any) -> dict[str, Any]:
    """Canonical weights of a torch.nn.GRU (num_layers=1) or GRUCell."""
    weights: dict[str, Any] = {}
    for direction, named in _parameters(layer).items():
        canonical = {}
        for key, parameter in named.items():
            if parameter is None:  # bias=False
                canonical[key] = np.zeros(3 * layer.hidden_size, dtype=np.float32)
            else:
                canonical[key] = as_float32(parameter.detach().cpu().numpy())
        weights[direction] = canonical
    weights["flavor"] = LBR
    return weights


def write_weights(layer: Any, weights: dict[str, Any]) -> Any:
    """Copy canonical weights (already fitted to the layer) into its parameters, in place."""
    with torch.no_grad():
        for direction, named in _parameters(layer).items():
            for key, parameter in named.items():
                if parameter is not None:
                    parameter.copy_(torch.from_numpy(weights[direction][key]))
    return layer
