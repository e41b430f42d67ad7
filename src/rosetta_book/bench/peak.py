"""This machine's peak: the fastest float32 matrix multiply each library reaches here.

The libraries' BLAS and oneDNN paths differ by up to 2× on some CPUs, so the
peak is taken over every path at hand, at 2 FLOP per multiply-add. Each
framework's paths are measured in that framework's own benchmark process.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rosetta_utils.timing import measure


def _operands(size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((size, size), dtype=np.float32),
            rng.standard_normal((size, size), dtype=np.float32))


def matmul_paths(framework: str | None, size: int) -> dict[str, Callable[[], Callable[[], Any]]]:
    """Builders of a ``size``² float32 product per path of ``framework`` (``None``: numpy);
    each returns a no-argument function that computes it and waits for the result. The
    reports name each path's framework (``matmul_frameworks``: the process that timed it)."""
    a, b = _operands(size)
    if framework is None:
        return {"numpy (its BLAS)": lambda: (lambda: a @ b)}
    if framework == "pytorch":
        import torch

        def onednn():
            ta, tb = torch.from_numpy(a).to_mkldnn(), torch.from_numpy(b)
            return lambda: torch._C._nn.mkldnn_linear(ta, tb, None)  # oneDNN's GEMM: ta @ tb.T

        paths = {"torch.mm": lambda: (lambda ta=torch.from_numpy(a), tb=torch.from_numpy(b): torch.mm(ta, tb))}
        if torch.backends.mkldnn.is_available():
            paths["torch oneDNN linear"] = onednn
        return paths
    if framework == "tensorflow":
        import tensorflow as tf

        def tensorflow():
            ta, tb = tf.constant(a), tf.constant(b)
            product = tf.function(lambda: tf.matmul(ta, tb))
            return lambda: product().numpy()

        return {"tf.matmul": tensorflow}
    if framework == "jax":
        import jax

        def xla():
            ja, jb = jax.numpy.asarray(a), jax.numpy.asarray(b)
            product = jax.jit(lambda x, y: x @ y)
            return lambda: product(ja, jb).block_until_ready()

        return {"jax.numpy.dot (XLA)": xla}
    if framework == "mxnet":
        from rosetta_utils.backends.mxnet import _mxnet

        mx = _mxnet()  # the page's own import if it ran, else with the page's two fix lines

        def mxnet():
            ma, mb = mx.nd.array(a), mx.nd.array(b)
            return lambda: mx.nd.dot(ma, mb).wait_to_read()

        return {"mxnet.nd.dot": mxnet}
    if framework == "chainer":  # Chainer multiplies with numpy on a CPU: the numpy of its environment
        return {"numpy (Chainer's environment)": lambda: (lambda: a @ b)}
    return {}


def measure_matmul_flops(framework: str | None, size: int = 2048, repeats: int = 5) -> dict[str, float]:
    """FLOP/s of each matrix-multiply path of ``framework`` (``None``: numpy)."""
    work = 2 * size**3
    rates = {}
    for name, build in matmul_paths(framework, size).items():
        product = build()
        timing = measure(product, "pytorch", warmup=1, repeats=repeats, synchronize=lambda value: None)
        rates[name] = work / timing.best
    return rates
