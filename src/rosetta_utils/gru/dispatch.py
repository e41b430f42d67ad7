"""Read and load a layer's GRU weights through the converter of the layer's framework.

The converter is found from the layer's type alone (the first part of
``type(layer).__module__``; a flax.linen params dict by its keys) and imported
only then, so importing this module imports no framework. Each converter
module (:mod:`.pytorch`, :mod:`.tensorflow`, :mod:`.jax`, :mod:`.mxnet`,
:mod:`.chainer`) offers the same three functions:

``layer_info(layer)``
    what the layer computes and holds: ``flavor``, ``directions``,
    ``input_size``, ``hidden_size``, ``holds_b_hn``, ``has_bias``;
``read_weights(layer)``
    its weights in the canonical form (:mod:`.canonical`);
``write_weights(layer, weights)``
    copy weights already fitted to it (:func:`.adapt.adapt_weights`) into it;
    returns the layer, or for a flax.linen params dict the new dict.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping
from typing import Any

from ..frameworks import REGISTRY
from .adapt import adapt_weights
from .canonical import validate_weights
from .errors import GRUConversionError, type_name, unsupported

#: The first part of a layer type's module, mapped to the converter that handles it (the
#: framework whose registry entry lists the module).
_PACKAGE_CONVERTERS = {module: name for name, framework in REGISTRY.items() for module in framework.all_modules}

#: The six Dense layers of a flax.linen GRUCell's params.
_LINEN_NAMES = frozenset({"ir", "iz", "in", "hr", "hz", "hn"})


def get_weights(layer: Any) -> dict[str, Any]:
    """A single-layer GRU's weights: ``{"forward": {...}, ["backward": {...},] "flavor": ...}``.

    Arrays are fresh numpy float32 copies in PyTorch's layout (gates r, z, n).
    """
    weights = converter_for(layer).read_weights(layer)
    return validate_weights(weights, what=f"weights read from {type_name(layer)}")


def set_weights(layer: Any, weights: Mapping[str, Any], approximate: bool = False) -> Any:
    """Load ``weights`` (the structure :func:`get_weights` returns) into a built layer.

    Returns the layer; for a flax.linen params dict, returns the new params dict.
    A conversion that cannot be exact raises :class:`GRUConversionError` saying
    why, unless ``approximate=True``: then the matrices are copied as they are,
    a ``b_hn`` the layer cannot hold is added to ``b_in`` (flavor change) or
    dropped (flax.nnx cell without a recurrent bias).
    """
    weights = validate_weights(weights)
    converter = converter_for(layer)
    info = converter.layer_info(layer)
    adapted = adapt_weights(weights, info, approximate=approximate, target=type_name(layer))
    return converter.write_weights(layer, adapted)


def conversion_is_exact(weights: Mapping[str, Any], layer: Any) -> bool:
    """Whether :func:`set_weights` would load ``weights`` into ``layer`` without approximating."""
    weights = validate_weights(weights)
    info = converter_for(layer).layer_info(layer)
    try:
        adapt_weights(weights, info, approximate=False, target=type_name(layer))
    except GRUConversionError:
        return False
    return True


def converter_for(layer: Any) -> types.ModuleType:
    """The converter module of ``layer``'s framework (imported now, with its framework)."""
    if is_linen_params(layer):
        name = "jax"
    else:
        name = _PACKAGE_CONVERTERS.get((type(layer).__module__ or "").split(".")[0])
    module = None if name is None else REGISTRY[name].gru_module
    if module is None:  # no framework's, or a framework without a GRU converter
        raise unsupported(layer)
    return importlib.import_module(module)


def is_linen_params(layer: Any) -> bool:
    """Whether ``layer`` is a flax.linen GRUCell params dict (``{"params": {...}}`` or the inner dict)."""
    if not isinstance(layer, Mapping):
        return False
    inner = layer.get("params", layer) if "params" in layer and len(layer) == 1 else layer
    return isinstance(inner, Mapping) and _LINEN_NAMES <= set(inner)
