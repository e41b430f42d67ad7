"""MXNet Gluon: device, threads and synchronization."""

from __future__ import annotations

import os
from typing import Any

from ..frameworks import import_framework


def version() -> dict[str, str]:
    return {"mxnet": import_framework("mxnet").__version__}


def context() -> Any:
    """The context new arrays should live in: the first GPU if MXNet sees one."""
    mx = import_framework("mxnet")
    return mx.gpu(0) if mx.context.num_gpus() > 0 else mx.cpu()


def device() -> str:
    ctx = context()
    return "cpu" if ctx.device_type == "cpu" else f"gpu:{ctx.device_id}"


def threads() -> int:
    """MXNet's operators use the OpenMP thread count fixed when it was imported."""
    import_framework("mxnet")
    return int(os.environ["OMP_NUM_THREADS"])


def synchronize(value: Any = None) -> None:
    """MXNet's engine runs every operator asynchronously, on CPU too: wait for all."""
    import_framework("mxnet").nd.waitall()


# --- GRU weights (rosetta_utils.gru): Gluon keeps PyTorch's layout and gate order ---

_GLUON_KEYS = {"weight_ih": "i2h_weight", "weight_hh": "h2h_weight", "bias_ih": "i2h_bias", "bias_hh": "h2h_bias"}


def _gru_parameters(layer: Any) -> dict[str, dict[str, Any]]:
    """The Gluon Parameters per direction, keyed by canonical name."""
    import_framework("mxnet")
    from mxnet.gluon import rnn

    from ..gru import unsupported

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


def _require_initialized(layer: Any, parameters: dict[str, dict[str, Any]]) -> None:
    from ..gru import GRUConversionError

    for named in parameters.values():
        for parameter in named.values():
            if parameter._data is None or 0 in parameter.shape:
                raise GRUConversionError(
                    f"the parameters of {type(layer).__name__} are not initialized yet (parameter "
                    f"{parameter.name} has shape {parameter.shape}): call layer.initialize() and give the "
                    "input size (input_size=...) or run the layer once on an input, so Gluon's deferred "
                    "initialization knows the shapes"
                )


def gru_info(layer: Any) -> dict[str, Any]:
    """What a gluon.rnn.GRU / GRUCell holds: an LBR GRU with all biases."""
    from ..gru import LBR

    parameters = _gru_parameters(layer)
    _require_initialized(layer, parameters)
    weight_ih = parameters["forward"]["weight_ih"]
    return {
        "flavor": LBR,
        "directions": len(parameters),
        "input_size": weight_ih.shape[1],
        "hidden_size": weight_ih.shape[0] // 3,
        "holds_b_hn": True,
        "has_bias": True,
    }


def gru_weights(layer: Any) -> dict[str, Any]:
    """Canonical weights of a gluon.rnn.GRU (num_layers=1) or GRUCell: a direct copy."""
    from ..gru import LBR, as_float32

    parameters = _gru_parameters(layer)
    _require_initialized(layer, parameters)
    weights: dict[str, Any] = {
        direction: {key: as_float32(parameter.data().asnumpy()) for key, parameter in named.items()}
        for direction, named in parameters.items()
    }
    weights["flavor"] = LBR
    return weights


def load_gru_weights(layer: Any, weights: dict[str, Any]) -> Any:
    """Copy canonical weights (already fitted to the layer) into its Parameters."""
    mx = import_framework("mxnet")
    parameters = _gru_parameters(layer)
    _require_initialized(layer, parameters)
    for direction, named in parameters.items():
        for key, parameter in named.items():
            parameter.set_data(mx.nd.array(weights[direction][key], ctx=parameter.list_ctx()[0], dtype="float32"))
    return layer
