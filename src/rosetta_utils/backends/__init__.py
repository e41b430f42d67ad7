"""One small module per framework: what it runs on, how many threads, how to wait for it.

``backend("pytorch")`` returns :mod:`rosetta_utils.backends.pytorch`, and so on.
Each module offers the same functions:

``version()``
    the framework's version and those of its main companions, as a dict;
``device()``
    where the framework puts new arrays, e.g. ``"cpu"`` or ``"cuda:0 (NVIDIA H200)"``;
``array_device(value)``
    where ``value`` lives if it is one of the framework's arrays or models (its first
    parameter), else None: what the book reports as a part's device;
``float32_precision()``
    how float32 arithmetic is set to compute now (TF32 allowed or not), as a short line;
``threads()``
    how many CPU threads its kernels use, as the framework reports it;
``synchronize(value)``
    block until ``value`` (and all work queued before it) is really computed;
``gpu_build(installed)``
    which GPU build of the framework the installed distributions (name: version) hold,
    or None, read without importing the framework
    (:func:`rosetta_utils.frameworks.installed_gpu_build`).

They use the framework the page already imported (an ``import`` finds it in
``sys.modules``, so the one-framework guard of
:mod:`rosetta_book.one_framework` never sees it again). Only when a function is
called before anything imported the framework does the module import it,
with the same lines the pages carry for MXNet and Chainer (see the appendix
"Running retired frameworks today"). Importing this package imports no
framework.
"""

from __future__ import annotations

import importlib
import types

from ..frameworks import REGISTRY, check_framework


def backend(name: str) -> types.ModuleType:
    """The helper module of framework ``name``, the one its registry entry names (raises
    for an unknown name)."""
    return importlib.import_module(REGISTRY[check_framework(name)].backend_module)
