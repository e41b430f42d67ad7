"""The checkpoint command for a reader's own model: convert a checkpoint of it from one
framework's format into another's, given the model's code.

The code is a function named ``module:function`` (importable from the working folder)
that takes a framework's name and returns that framework's port of the model and an
example input in its layout::

    def build(framework):
        if framework == "pytorch":
            return Net(), np.zeros((1, 3, 32, 32), np.float32)
        if framework == "tensorflow":
            return keras_net(), np.zeros((1, 32, 32, 3), np.float32)

    python -m rosetta_utils.checkpoints mymodels:build net.pt net.weights.h5 --from pytorch --to tensorflow

The source is read with its framework's own loader into the source's port (a PyTorch
state dict, a ``.safetensors`` file and a canonical file need no port: they carry
PyTorch's names, or the structure itself); the weights then move into the target's port
with :func:`rosetta_utils.porting.load_weights` (every layer paired and checked before
anything is written) and are saved with the target framework's own saver. ``--to
canonical`` saves the source's layers and structure for the other environment, where
``--from canonical`` reads them.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..porting import PortingError, WeightMove, load_weights, read_file, save_weights, write_saved
from .errors import CheckpointError
from .formats import _check_suffix, _into_place, _needs, check_format

#: The formats that carry what a port needs without one: PyTorch's names, or the structure.
NEEDS_NO_SOURCE_PORT = ("pytorch", "safetensors", "canonical")


def is_model_code(model: str) -> bool:
    """Whether the command's model is a reader's code (``module:function``)."""
    return ":" in model


def model_code(spec: str) -> Callable[[str], tuple[Any, Any]]:
    """The function ``module:function`` names, imported from the working folder."""
    module_name, _, function = spec.partition(":")
    if not module_name or not function:
        raise CheckpointError(f"{spec!r}: name the model's code as module:function")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise CheckpointError(f"{spec}: cannot import {module_name}: {error}") from None
    finally:
        sys.path.remove(os.getcwd())
    if not callable(getattr(module, function, None)):
        raise CheckpointError(f"{spec}: {module_name} has no function {function}")
    return getattr(module, function)


def _port(build: Callable, framework: str, spec: str) -> tuple[Any, Any]:
    built = build(framework)
    if not (isinstance(built, tuple) and len(built) == 2):
        raise CheckpointError(f"{spec}({framework!r}) must return (model, example input), not {type(built).__name__}")
    return built


def load_native(framework: str, model: Any, path: Path) -> None:
    """Load a checkpoint into a live model with the framework's own loader."""
    if framework == "tensorflow":
        model.load_weights(str(path))
    elif framework == "jax":
        ocp = _needs("orbax.checkpoint", "jax")
        from flax import nnx

        abstract = nnx.state(model)
        nnx.update(model, ocp.StandardCheckpointer().restore(path.absolute(), abstract))
    elif framework == "mxnet":
        model.load_parameters(str(path))
    elif framework == "chainer":
        import chainer

        chainer.serializers.load_npz(str(path), model)
    else:
        raise CheckpointError(f"{framework}: no loader of a live model here")


def save_native(framework: str, model: Any, path: Path, overwrite: bool) -> Path:
    """Save a live model with the framework's own saver (written beside the target, then
    moved into place: a failed save leaves no file)."""
    check_format(framework)
    _check_suffix(framework, path)
    with _into_place(path, overwrite) as written:
        if framework == "pytorch":
            import torch

            torch.save(model.state_dict(), written)
        elif framework == "safetensors":
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(written),
                      metadata={"format": "pt"})
        elif framework == "tensorflow":
            model.save_weights(str(written))
        elif framework == "jax":
            ocp = _needs("orbax.checkpoint", "jax")
            from flax import nnx

            checkpointer = ocp.StandardCheckpointer()
            checkpointer.save(written.absolute(), nnx.state(model))
            checkpointer.wait_until_finished()
        elif framework == "mxnet":
            model.save_parameters(str(written))
        elif framework == "chainer":
            import chainer

            chainer.serializers.save_npz(str(written), model)
        else:
            raise CheckpointError(f"{framework}: no saver of a live model")
    return path


def convert_own(spec: str, source: str | os.PathLike[str], source_format: str, target: str | os.PathLike[str],
                target_format: str, overwrite: bool = False) -> WeightMove | Path:
    """Convert a checkpoint of the reader's model ``spec`` (``module:function``). Returns
    the move (its pairing table), or the canonical file's path for ``--to canonical``."""
    check_format(source_format)
    check_format(target_format)
    source, target = Path(source), Path(target)
    if target.exists() and not overwrite:
        raise CheckpointError(f"{target} exists: pass overwrite=True (--overwrite) to replace it")
    if not source.exists():
        raise CheckpointError(f"{source}: no such file or folder")
    build = model_code(spec)
    with tempfile.TemporaryDirectory(prefix="rosetta-checkpoint-") as scratch:
        if source_format in NEEDS_NO_SOURCE_PORT:
            moved_from = source
            if source_format == "pytorch" and source.suffix not in (".pt", ".pth"):
                raise CheckpointError(f"{source}: a pytorch checkpoint's name ends in .pt")
        else:
            source_model, source_inputs = _port(build, source_format, spec)
            try:
                load_native(source_format, source_model, source)
            except Exception as error:  # the framework's own loader's message
                raise CheckpointError(f"{source} does not load into {spec}({source_format!r}): {error}") from None
            moved_from = Path(scratch) / "source.npz"
            try:
                save_weights(source_model, source_inputs, moved_from)
            except PortingError as error:
                raise CheckpointError(str(error)) from None
        if target_format == "canonical":
            try:
                if moved_from == source and source_format == "canonical":
                    raise CheckpointError(f"{source} is canonical already")
                if source_format in ("pytorch", "safetensors"):
                    framework, layers, _ = read_file(moved_from)
                    with _into_place(target, overwrite) as written:
                        write_saved(written, framework, layers)
                    return target
                with _into_place(target, overwrite) as written:
                    os.replace(moved_from, written)
                return target
            except PortingError as error:
                raise CheckpointError(str(error)) from None
        framework = "pytorch" if target_format == "safetensors" else target_format
        target_model, target_inputs = _port(build, framework, spec)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                move = load_weights(target_model, target_inputs, moved_from)
        except PortingError as error:
            raise CheckpointError(f"{error}; nothing was written") from None
        save_native(target_format, target_model, target, overwrite)
        return move
