"""One small module per framework: what it runs on, how many threads, how to wait for it.

``backend("pytorch")`` returns :mod:`rosetta_utils.backends.pytorch`, and so on.
Each module imports its framework (through :mod:`rosetta_utils.frameworks`)
only when one of its functions is called, and offers the same functions:

``version()``
    the framework's version and those of its main companions, as a dict;
``device()``
    where the framework puts new arrays, e.g. ``"cpu"`` or ``"cuda:0 (NVIDIA H200)"``;
``threads()``
    how many CPU threads its kernels use;
``synchronize(value)``
    block until ``value`` (and all work queued before it) is really computed.
"""

from __future__ import annotations

import importlib
import types

from ..frameworks import check_framework


def backend(name: str) -> types.ModuleType:
    """The helper module of framework ``name`` (raises for an unknown name)."""
    return importlib.import_module(f"{__name__}.{check_framework(name)}")
