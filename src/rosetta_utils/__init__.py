"""The Rosetta book's reader library: what its framework tabs and downloads import.

Data sets, weight layouts and converters, checkpoints, pretrained weights,
small timing and profile helpers, and the registry of the book's frameworks
(:mod:`rosetta_utils.frameworks`). Importing this package imports no deep learning framework: each helper
module imports a framework only when a function that needs it is called, so a
machine with only PyTorch (or only JAX, ...) can build the tabs it has.
"""

__version__ = "0.2.0"

from .frameworks import FRAMEWORK_TITLES, FRAMEWORKS  # noqa: E402 (the registry's names)
