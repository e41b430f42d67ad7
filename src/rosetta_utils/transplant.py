"""Move weights between frameworks' layouts, as numpy arrays.

The book's canonical layout is PyTorch's: convolution kernels OIHW
(out, in, height, width), dense weights (out, in), and a dense layer after a
flatten that reads the features in NCHW order (channel, row, column).
Keras and Flax keep kernels HWIO and dense weights (in, out), and their
flatten reads NHWC order (row, column, channel). MXNet Gluon and Chainer use
PyTorch's layouts. Each function below has its inverse next to it.
"""

from __future__ import annotations

import numpy as np

from .resnet50_layout import resnet50_weight_shapes


def conv_oihw_to_hwio(kernel: np.ndarray) -> np.ndarray:
    """(out, in, h, w) → (h, w, in, out)."""
    _require_ndim(kernel, 4, "convolution kernel")
    return np.ascontiguousarray(kernel.transpose(2, 3, 1, 0))


def conv_hwio_to_oihw(kernel: np.ndarray) -> np.ndarray:
    """(h, w, in, out) → (out, in, h, w)."""
    _require_ndim(kernel, 4, "convolution kernel")
    return np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))


def dense_out_in_to_in_out(weight: np.ndarray) -> np.ndarray:
    """(out, in) → (in, out)."""
    _require_ndim(weight, 2, "dense weight")
    return np.ascontiguousarray(weight.T)


dense_in_out_to_out_in = dense_out_in_to_in_out  # a transpose is its own inverse


def flattened_dense_nchw_to_nhwc(weight: np.ndarray, channels: int, height: int, width: int) -> np.ndarray:
    """Reorder the inputs of an (out, C·H·W) dense weight from NCHW to NHWC flatten order."""
    _require_flattened(weight, channels, height, width)
    out = weight.shape[0]
    return np.ascontiguousarray(
        weight.reshape(out, channels, height, width).transpose(0, 2, 3, 1).reshape(out, -1)
    )


def flattened_dense_nhwc_to_nchw(weight: np.ndarray, channels: int, height: int, width: int) -> np.ndarray:
    """Reorder the inputs of an (out, H·W·C) dense weight from NHWC to NCHW flatten order."""
    _require_flattened(weight, channels, height, width)
    out = weight.shape[0]
    return np.ascontiguousarray(
        weight.reshape(out, height, width, channels).transpose(0, 3, 1, 2).reshape(out, -1)
    )


def glorot_uniform(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Glorot (Xavier) uniform weights for a PyTorch-layout shape, as every framework defines them.

    fan_in and fan_out count the receptive field: ``in·h·w`` and ``out·h·w``
    for an OIHW kernel, ``in`` and ``out`` for an (out, in) dense weight.
    """
    if len(shape) not in (2, 4):
        raise ValueError(f"glorot_uniform takes (out, in) or (out, in, h, w) shapes, got {shape}")
    receptive = int(np.prod(shape[2:])) if len(shape) == 4 else 1
    fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(np.float32)


def _require_ndim(array: np.ndarray, ndim: int, what: str) -> None:
    if np.ndim(array) != ndim:
        raise ValueError(f"a {what} must have {ndim} dimensions, got shape {np.shape(array)}")


def _require_flattened(weight: np.ndarray, channels: int, height: int, width: int) -> None:
    _require_ndim(weight, 2, "dense weight")
    if weight.shape[1] != channels * height * width:
        raise ValueError(
            f"a dense weight after flattening {channels}×{height}×{width} features needs "
            f"{channels * height * width} inputs, got shape {weight.shape}"
        )


def random_resnet50_weights(seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded ResNet-50 weights for proofs: He-normal kernels, and batch-norm
    scales, shifts and running statistics that are far from the identity, so
    that a mistake in any of them (or in epsilon) shows."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in resnet50_weight_shapes().items():
        if len(shape) == 4:
            fan_in = int(np.prod(shape[1:]))
            weights[name] = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        elif name.endswith("running_var"):
            weights[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        elif name.endswith(("running_mean", "bias")):
            weights[name] = rng.uniform(-0.1, 0.1, shape).astype(np.float32)
        else:  # batch-norm scale
            weights[name] = rng.uniform(0.5, 1.0, shape).astype(np.float32)
    return weights
