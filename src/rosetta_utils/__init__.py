"""Shared helpers of the Rosetta book.

Importing this package imports no deep learning framework: each helper
module imports a framework only when a function that needs it is called, so a
machine with only PyTorch (or only JAX, ...) can build the tabs it has.
"""

__version__ = "0.2.0"

#: The five frameworks of the book, in the order their tabs appear.
FRAMEWORKS = ("pytorch", "tensorflow", "jax", "mxnet", "chainer")

#: How each framework is named where a reader sees it.
FRAMEWORK_TITLES = {
    "pytorch": "PyTorch",
    "tensorflow": "TensorFlow (Keras 3)",
    "jax": "JAX (Flax)",
    "mxnet": "MXNet (Gluon)",
    "chainer": "Chainer",
}
