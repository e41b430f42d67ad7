"""PyTorch: device, threads and synchronization."""

from __future__ import annotations

from typing import Any

from ..frameworks import import_framework


def version() -> dict[str, str]:
    torch = import_framework("pytorch")
    return {"torch": torch.__version__}


def device() -> str:
    torch = import_framework("pytorch")
    if torch.cuda.is_available():
        return f"cuda:0 ({torch.cuda.get_device_name(0)})"
    return "cpu"


def threads() -> int:
    return import_framework("pytorch").get_num_threads()


def synchronize(value: Any = None) -> None:
    """CUDA kernels run asynchronously: wait for the whole stream."""
    torch = import_framework("pytorch")
    if torch.cuda.is_available():
        torch.cuda.synchronize()


# --- GRU weights (rosetta_utils.gru): canonical dicts are PyTorch's own layout ---


def _gru_parameters(layer: Any) -> tuple[Any, dict[str, dict[str, Any]]]:
    """The layer's GRU parameters per direction, keyed by canonical name (None if bias=False)."""
    torch = import_framework("pytorch")
    from ..gru import CANONICAL_KEYS, unsupported

    if isinstance(layer, torch.nn.GRUCell):
        return torch, {"forward": {key: getattr(layer, key, None) for key in CANONICAL_KEYS}}
    if isinstance(layer, torch.nn.GRU):
        if layer.num_layers != 1:
            raise unsupported(layer, f"num_layers={layer.num_layers}; only single-layer GRUs are handled")
        suffixes = {"forward": "_l0", "backward": "_l0_reverse"}
        directions = ("forward", "backward") if layer.bidirectional else ("forward",)
        return torch, {
            direction: {key: getattr(layer, key + suffixes[direction], None) for key in CANONICAL_KEYS}
            for direction in directions
        }
    raise unsupported(layer)


def gru_info(layer: Any) -> dict[str, Any]:
    """What a torch.nn.GRU / GRUCell holds: an LBR GRU, with or without biases."""
    from ..gru import LBR

    _, parameters = _gru_parameters(layer)
    return {
        "flavor": LBR,
        "directions": len(parameters),
        "input_size": layer.input_size,
        "hidden_size": layer.hidden_size,
        "holds_b_hn": True,
        "has_bias": bool(layer.bias),
    }


def gru_weights(layer: Any) -> dict[str, Any]:
    """Canonical weights of a torch.nn.GRU (num_layers=1) or GRUCell."""
    from ..gru import LBR, as_float32

    _, parameters = _gru_parameters(layer)
    weights: dict[str, Any] = {}
    for direction, named in parameters.items():
        canonical = {}
        for key, parameter in named.items():
            if parameter is None:  # bias=False
                canonical[key] = as_float32(_float32_zeros(3 * layer.hidden_size))
            else:
                canonical[key] = as_float32(parameter.detach().cpu().numpy())
        weights[direction] = canonical
    weights["flavor"] = LBR
    return weights


def load_gru_weights(layer: Any, weights: dict[str, Any]) -> Any:
    """Copy canonical weights (already fitted to the layer) into its parameters, in place."""
    torch, parameters = _gru_parameters(layer)
    with torch.no_grad():
        for direction, named in parameters.items():
            for key, parameter in named.items():
                if parameter is not None:
                    parameter.copy_(torch.from_numpy(weights[direction][key]))
    return layer


def _float32_zeros(size: int) -> Any:
    import numpy

    return numpy.zeros(size, dtype=numpy.float32)
