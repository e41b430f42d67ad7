"""Reading and writing each framework's own checkpoint file, as flat ``{key: array}`` dicts.

Each framework is imported inside the functions that need it, so this module
imports none. What a format needs, and where the book has it:

``pytorch`` (``.pt``): ``torch.save(model.state_dict(), path)``, read with
    ``torch.load(path, weights_only=True)``: PyTorch (the current environment);
``tensorflow`` (``.weights.h5``): Keras 3's ``model.save_weights(path)``, an
    HDF5 file read and written with h5py (the current environment);
``jax`` (a folder): a Flax nnx state saved with Orbax's ``StandardCheckpointer``,
    as Flax's guide "Save and load checkpoints" does it (the current environment);
``mxnet`` (``.params``): Gluon's ``model.save_parameters(path)``, read with
    ``mx.nd.load``: MXNet (the legacy environment);
``chainer`` (``.npz``): ``chainer.serializers.save_npz(path, model)``, a numpy
    archive (either environment);
``safetensors`` (``.safetensors``): a PyTorch state dict's names, layouts and
    dtypes in a safetensors file, the layout most published checkpoints use
    (``safetensors.torch.save_file(model.state_dict(), path)`` writes one), read and
    written with ``safetensors.numpy`` (either environment), never with pickle;
``canonical`` (``.npz``): the canonical arrays and the model's name, a numpy
    archive read without pickle (either environment): what carries a model from
    one environment to the other.

Writes go to a temporary name beside the target, renamed into place when
complete: a failed conversion leaves no file behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..frameworks import ENVIRONMENT_FOLDERS, FRAMEWORKS, REGISTRY
from .errors import CheckpointError

#: The formats read and written with numpy alone (Chainer's ``.npz`` is a numpy archive).
NUMPY_ALONE = ("chainer", "safetensors", "canonical")
#: Every format the command reads and writes: the frameworks' own, and the canonical arrays.
FORMATS = FRAMEWORKS + tuple(name for name in NUMPY_ALONE if name not in FRAMEWORKS)
#: What each format's path looks like.
SUFFIXES = {"pytorch": ".pt", "tensorflow": ".weights.h5", "jax": "(a folder)", "mxnet": ".params",
            "chainer": ".npz", "safetensors": ".safetensors", "canonical": ".npz"}
#: Where each format can be read and written: either environment where numpy suffices, else the
#: one whose framework it is (the registry's).
ENVIRONMENT_OF_FORMAT = {name: "either" if name in NUMPY_ALONE else
                         f"the {REGISTRY[name].environment} one ({ENVIRONMENT_FOLDERS[REGISTRY[name].environment]})"
                         for name in FORMATS}
#: Formats that keep a framework's names and layouts in another file: a safetensors file
#: holds what a PyTorch state dict holds.
SAME_LAYOUT_AS = {"safetensors": "pytorch"}
MODEL_KEY = "__model__"
#: Marks a Keras file that also holds its optimizer's variables (which no conversion carries).
OPTIMIZER_KEY = "__optimizer__"


def check_format(name: str) -> str:
    if name not in FORMATS:
        raise CheckpointError(f"unknown format {name!r}: the formats are {', '.join(FORMATS)}")
    return name


def layout_of(format_name: str) -> str:
    """The framework whose names and layouts a format's file keeps."""
    return SAME_LAYOUT_AS.get(check_format(format_name), format_name)


def _needs(package: str, format_name: str) -> Any:
    """Import what a format needs, or say where it is."""
    import importlib

    try:
        if package == "mxnet" and not hasattr(np, "bool"):  # MXNet 1.9 on numpy 1.26 (the book's
            np.bool = bool  # type: ignore[attr-defined]  # appendix): numpy's old alias, gone in 1.24
        return importlib.import_module(package)
    except ImportError as error:
        raise CheckpointError(
            f"the {format_name} format needs {package}, which this Python cannot import ({error}); "
            f"it is installed in {ENVIRONMENT_OF_FORMAT[format_name]} environment of the book. Convert to the "
            "canonical format here, then from it there: the canonical .npz needs numpy alone") from None


# --- reading ----------------------------------------------------------------------------


def read(format_name: str, path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], str | None]:
    """The checkpoint's arrays by native key, and the model it names (canonical files only)."""
    check_format(format_name)
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such file or folder")
    try:
        return _READERS[format_name](path)
    except CheckpointError:
        raise
    except Exception as error:  # a file that is not what its format says
        raise CheckpointError(f"{path} cannot be read as a {format_name} checkpoint: "
                              f"{type(error).__name__}: {error}") from None


def _read_pytorch(path: Path) -> tuple[dict[str, np.ndarray], None]:
    torch = _needs("torch", "pytorch")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{path} holds a {type(state).__name__}, not a state dict")
    return {key: value.detach().cpu().numpy() for key, value in state.items()}, None


def _read_keras(path: Path) -> tuple[dict[str, np.ndarray], None]:
    h5py = _needs("h5py", "tensorflow")
    arrays = {}
    with h5py.File(path, "r") as file:
        if "layers" not in file:
            raise CheckpointError(f"{path} has no 'layers' group: not a Keras 3 .weights.h5 file")
        for group in file["layers"].values():
            if "vars" not in group:
                continue
            name = group["vars"].attrs.get("name", group.name.rsplit("/", 1)[-1])
            name = name.decode() if isinstance(name, bytes) else str(name)
            for inner in ("vars", "cell/vars"):
                if inner in group:
                    for index in sorted(group[inner], key=int):
                        arrays[f"{name}/{index}"] = np.asarray(group[inner][index])
        if "optimizer" in file:  # a model's checkpoint, not its optimizer's: left out, and said
            arrays[OPTIMIZER_KEY] = np.zeros(0, np.float32)
    return arrays, None


def _read_flax(path: Path) -> tuple[dict[str, np.ndarray], None]:
    ocp = _needs("orbax.checkpoint", "jax")
    restored = ocp.StandardCheckpointer().restore(path.absolute())
    arrays: dict[str, np.ndarray] = {}

    def walk(node: Any, prefix: tuple[str, ...]) -> None:
        if isinstance(node, Mapping):
            if set(node) == {"value"} and not isinstance(node["value"], Mapping):
                arrays["/".join(prefix)] = np.asarray(node["value"])
                return
            for key, value in node.items():
                walk(value, (*prefix, str(key)))
        else:
            arrays["/".join(prefix)] = np.asarray(node)

    walk(restored, ())
    return arrays, None


def _read_mxnet(path: Path) -> tuple[dict[str, np.ndarray], None]:
    mx = _needs("mxnet", "mxnet")
    loaded = mx.nd.load(str(path))
    if not isinstance(loaded, Mapping):
        raise CheckpointError(f"{path} holds a list of arrays without names, not Gluon's parameters")
    return {key: value.asnumpy() for key, value in loaded.items()}, None


def _read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], None]:
    _needs("safetensors.numpy", "safetensors")  # or say where it is installed
    from safetensors.numpy import load_file

    return dict(load_file(str(path))), None


def _read_npz(path: Path) -> tuple[dict[str, np.ndarray], str | None]:
    with np.load(path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    model = arrays.pop(MODEL_KEY, None)
    return arrays, None if model is None else str(model)


_READERS: dict[str, Callable[[Path], tuple[dict[str, np.ndarray], str | None]]] = {
    "pytorch": _read_pytorch, "tensorflow": _read_keras, "jax": _read_flax, "mxnet": _read_mxnet,
    "chainer": _read_npz, "safetensors": _read_safetensors, "canonical": _read_npz,
}


# --- writing ----------------------------------------------------------------------------


@contextlib.contextmanager
def _into_place(target: Path, overwrite: bool, folder: bool = False) -> Iterator[Path]:
    """A temporary path beside ``target``, moved onto it once written; removed on failure."""
    if target.exists() and not overwrite:
        raise CheckpointError(f"{target} exists: pass overwrite=True (--overwrite) to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    written = scratch / target.name
    try:
        yield written
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(written, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def write(format_name: str, path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray], model: str,
          keras_groups: Mapping[str, str] | None = None, overwrite: bool = False) -> Path:
    """Write ``arrays`` (native keys of ``format_name``) to ``path``; returns the path."""
    check_format(format_name)
    target = Path(path)
    _check_suffix(format_name, target)
    module = {"pytorch": "torch", "tensorflow": "h5py", "jax": "orbax.checkpoint", "mxnet": "mxnet",
              "safetensors": "safetensors.numpy"}.get(format_name)
    if module is not None:
        _needs(module, format_name)  # before anything is written
    with _into_place(target, overwrite) as written:
        if format_name == "pytorch":
            _write_pytorch(written, arrays)
        elif format_name == "tensorflow":
            _write_keras(written, arrays, keras_groups or {})
        elif format_name == "jax":
            _write_flax(written, arrays)
        elif format_name == "mxnet":
            _write_mxnet(written, arrays)
        elif format_name == "safetensors":
            _write_safetensors(written, arrays)
        else:
            extra = {MODEL_KEY: np.array(model)} if format_name == "canonical" else {}
            with open(written, "wb") as handle:  # np.savez would add .npz to a name without it
                np.savez(handle, **arrays, **extra)
    return target


def _check_suffix(format_name: str, target: Path) -> None:
    suffix = SUFFIXES[format_name]
    if suffix.startswith(".") and not target.name.endswith(suffix):
        raise CheckpointError(f"{target}: a {format_name} checkpoint's name ends in {suffix}")


def _write_pytorch(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    torch = _needs("torch", "pytorch")
    state = {key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in arrays.items()}
    state = {key: value.reshape(()) if value.numel() == 1 and key.endswith("num_batches_tracked") else value
             for key, value in state.items()}
    torch.save(state, path)


def _write_keras(path: Path, arrays: Mapping[str, np.ndarray], groups: Mapping[str, str]) -> None:
    h5py = _needs("h5py", "tensorflow")
    layers: dict[str, dict[int, np.ndarray]] = {}
    for key, value in arrays.items():
        name, index = key.rsplit("/", 1)
        layers.setdefault(name, {})[int(index)] = value
    with h5py.File(path, "w") as file:
        file.create_group("vars")
        for name, values in layers.items():
            group = file.require_group(groups[name])
            group.attrs["name"] = name
            outer = groups[name].split("/")[:2]
            file.require_group("/".join(outer) + "/vars").attrs["name"] = name
            if groups[name].endswith("cell/vars"):
                group.attrs["name"] = f"{name}_cell"
            for index in sorted(values):
                group.create_dataset(str(index), data=values[index])


def _write_flax(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    ocp = _needs("orbax.checkpoint", "jax")
    tree: dict[str, Any] = {}
    for key, value in arrays.items():
        node = tree
        *parents, leaf = key.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = {"value": np.asarray(value)}  # as an nnx.State's variables are saved
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path.absolute(), tree)
    checkpointer.wait_until_finished()


def _write_mxnet(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    mx = _needs("mxnet", "mxnet")
    mx.nd.save(str(path), {key: mx.nd.array(value, dtype=value.dtype) for key, value in arrays.items()})


def _write_safetensors(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    _needs("safetensors.numpy", "safetensors")  # or say where it is installed
    from safetensors.numpy import save_file

    tensors = {key: np.ascontiguousarray(value) for key, value in arrays.items()}
    # "pt": the metadata Hugging Face's loaders look for in a PyTorch checkpoint
    save_file(tensors, str(path), metadata={"format": "pt"})
