"""The error of a conversion that cannot be done, or not exactly, and how it names a layer."""

from __future__ import annotations

from typing import Any

#: What the converters handle, for the message of an unsupported layer.
SUPPORTED = (
    "torch.nn.GRU, torch.nn.GRUCell; keras.layers.GRU, keras.layers.GRUCell, "
    "keras.layers.Bidirectional(GRU); mxnet.gluon.rnn.GRU, mxnet.gluon.rnn.GRUCell; "
    "chainer.links.NStepGRU, NStepBiGRU, StatelessGRU, GRU (StatefulGRU); "
    "flax.nnx.GRUCell, nnx.RNN(GRUCell), nnx.Bidirectional of two of those; "
    "a flax.linen GRUCell params dict"
)


class GRUConversionError(ValueError):
    """Weights that cannot go into (or come out of) a layer, or not exactly."""


def type_name(layer: Any) -> str:
    """The full name of ``layer``'s type, e.g. ``torch.nn.modules.rnn.GRU``."""
    kind = type(layer)
    return f"{kind.__module__}.{kind.__qualname__}"


def unsupported(layer: Any, why: str = "") -> GRUConversionError:
    """The error for a layer no converter handles (``why`` adds the reason)."""
    detail = f" ({why})" if why else ""
    return GRUConversionError(f"unsupported layer type {type_name(layer)}{detail}: supported are {SUPPORTED}")
