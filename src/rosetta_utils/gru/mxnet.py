"""GRU weights of MXNet Gluon's rnn.GRU (one layer) and rnn.GRUCell: PyTorch's layout and gate order."""

from __future__ import annotations

from typing import Any

import mxnet as mx
from mxnet.gluon import rnn

from .canonical import LBR, as_float32
from .errors import GRUConversionError, unsupported

_GLUON_KEYS = {"weight_ih": "i2h_weight", "weight_hh": "h2h_weight", "bias_ih": "i2h_bias", "bias_hh": "h2h_bias"}


def _parameters(layer: Any) -> dict[str, dict[str, Any]]:
    """The Gluon Parameters per direction, keyed by canonical name."""
    if isinstance(layer, rnn.GRUCell):
        return {"forward": {key: getattr(layer, name) for key, name in _GLUON_KEYS.items()}}
    if isinstance(layer, rnn.GRU):
        if layer._num_layers != 1:
            raise unsupported(layer, f"num_layers={layer._num_layers}; only single-layer GRUs are handled")
        if getattr(layer, "_projection_size", None):
            raise unsupported(layer, "projection_size is set")
        prefixes = {"forward": "l0_", "backward": "r0_"}
        directions = ("forward", "backward")[: layer._dir]
        return {
            direction: {key: layer._reg_params[prefixes[direction] + name] for key, name in _GLUON_KEYS.items()}
            for direction in directions
        }
    raise unsupported(layer)


def _initialized_parameters(layer: Any) -> dict[str, dict[str, Any]]:
    parameters = _parameters(layer)
    for named in parameters.values():
        for parameter in named.values():
            if parameter._data is None or 0 in parameter.shape:
                raise GRUConversionError(
                    f"the parameters of {type(layer).__name__} are not initialized yet (parameter "
                    f"{parameter.name} has shape {parameter.shape}): call layer.initialize() and give the "
                    "input size (input_size=...) or run the layer once on an input, so Gluon's deferred "
                    "initialization knows the shapes"
                )
    return parameters


def layer_info(layer: Any) -> dict[str, Any]:
    """What a gluon.rnn.GRU / GRUCell holds: an LBR GRU with all biases."""
    parameters = _initialized_parameters(layer)
    weight_ih = parameters["forward"]["weight_ih"]
    return {
        "flavor": LBR,
        "directions": len(parameters),
        "input_size": weight_ih.shape[1],
        "hidden_size": weight_ih.shape[0] // 3,
        "holds_b_hn": True,
        "has_bias": True,
    }


def read_weights(layer: Any) -> dict[str, Any]:
    """Canonical weights of a gluon.rnn.GRU (num_layers=1) or GRUCell: a direct copy."""
    weights: dict[str, Any] = {
        direction: {key: as_float32(parameter.data().asnumpy()) for key, parameter in named.items()}
        for direction, named in _initialized_parameters(layer).items()
    }
    weights["flavor"] = LBR
    return weights


def write_weights(layer: Any, weights: dict[str, Any]) -> Any:
    """Copy canonical weights (already fitted to the layer) into its Parameters."""
    for direction, named in _initialized_parameters(layer).items():
        for key, parameter in named.items():
            parameter.set_data(mx.nd.array(weights[direction][key], ctx=parameter.list_ctx()[0], dtype="float32"))
    return layer
