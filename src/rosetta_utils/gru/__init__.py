"""Move the weights of a single-layer GRU between the five frameworks.

The canonical weights of one direction are PyTorch's layout, as numpy float32
arrays, with the gates in the order r, z, n::

    weight_ih (3H, I)   weight_hh (3H, H)   bias_ih (3H,)   bias_hh (3H,)

A layer's weights are ``{"forward": canonical, "backward": canonical,
"flavor": ...}``; ``"backward"`` only for a bidirectional layer. The flavor
says which GRU the numbers belong to:

``LBR`` ("linear_before_reset", the cuDNN form of PyTorch, MXNet, Chainer's
NStepGRU, Keras ``reset_after=True`` and Flax)
    ``n = tanh(W_n x + b_in + r * (U_n h + b_hn))``
``RB`` ("reset_before", Keras ``reset_after=False``, Chainer's ``L.GRU``)
    ``n = tanh(W_n x + b_in + U_n (r * h) + b_hn)``: the two n biases add up.

Both update ``h' = z * h + (1 - z) * n``. Chainer's ``L.GRU`` and
``L.StatelessGRU`` use ``h' = (1 - z) * h + z * n``: their z gate is stored
negated, since ``1 - sigmoid(a) = sigmoid(-a)``.

Converting between flavors is exact only when ``U_n`` is diagonal (then
``r * (U_n h) = U_n (r * h)``) and, from LBR, ``b_hn`` is zero (RB has no
bias inside the reset). A flax.nnx ``GRUCell`` has no ``b_hn`` at all. Such
conversions raise :class:`GRUConversionError` unless ``approximate=True``.
Exactness is judged on the values: a ``b_hn`` that is all zeros converts
exactly.

The package, one module per job:

``canonical``
    the flavors, the canonical layout, :func:`validate_weights`,
    :func:`random_gru_weights`;
``errors``
    :class:`GRUConversionError` and the message for an unsupported layer;
``adapt``
    :func:`adapt_weights`: fit weights to what a layer can hold;
``dispatch``
    :func:`get_weights`, :func:`set_weights`, :func:`conversion_is_exact`:
    find the layer's converter from its type and call it;
``pytorch``, ``tensorflow``, ``jax``, ``mxnet``, ``chainer``
    one converter per framework, between its layers and the canonical form.

Importing this package imports no framework: a converter, and with it its
framework, is imported when a layer of that framework is first converted.
"""

from __future__ import annotations

from .adapt import adapt_weights
from .canonical import (
    CANONICAL_KEYS,
    DIRECTIONS,
    FLAVORS,
    LBR,
    RB,
    as_float32,
    random_gru_weights,
    validate_weights,
)
from .dispatch import conversion_is_exact, get_weights, set_weights
from .errors import SUPPORTED, GRUConversionError, unsupported

__all__ = [
    "CANONICAL_KEYS",
    "DIRECTIONS",
    "FLAVORS",
    "GRUConversionError",
    "LBR",
    "RB",
    "SUPPORTED",
    "adapt_weights",
    "as_float32",
    "conversion_is_exact",
    "get_weights",
    "random_gru_weights",
    "set_weights",
    "unsupported",
    "validate_weights",
]
