"""Keras 2's HDF5 weights files (``model.save_weights("....h5")``), read and written with h5py alone.

Keras Applications publishes its ImageNet weights in this format, and Keras 3
still reads it (``keras/src/legacy/saving/legacy_h5_format.py``,
``load_weights_from_hdf5_group``). Reading it needs no Keras, so every
framework's environment can (MXNet and Chainer run on numpy 1.26 without
Keras). The layout, as Keras 2 wrote it and Keras 3 reads it:

- the root's attribute ``layer_names``: every layer of the model, weightless
  ones too, in the model's order, as UTF-8 bytes; a list too long for one
  HDF5 object header (64 KiB) is split into ``layer_names0``,
  ``layer_names1``, ...; attributes ``backend`` and ``keras_version`` beside;
- one group per layer, named as the layer, whose attribute ``weight_names``
  (split the same way) lists its weights in Keras's legacy order (trainable,
  then non-trainable: a convolution's ``kernel`` and ``bias``; a batch norm's
  ``gamma``, ``beta``, ``moving_mean``, ``moving_variance``), each a dataset
  at that path inside the layer's group. Keras 2 named a weight by its
  TensorFlow variable, ``conv1_conv/kernel:0``, whose ``/`` makes a group.

Keras itself matches the file's layers with weights to the model's by order;
:func:`read_keras_weights` returns them by name, in the file's order, and
:func:`weight_key` strips a weight's name to what it is (``kernel``).
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .data.errors import DataError

#: HDF5's object header limit that makes Keras split a long attribute into numbered chunks.
HDF5_OBJECT_HEADER_LIMIT = 64512

#: What a file records as its writer, as the published Keras Applications files do.
KERAS_2_VERSION = "2.2.4"
KERAS_2_BACKEND = "tensorflow"

Layers = Mapping[str, Mapping[str, np.ndarray]]


def weight_key(weight_name: str) -> str:
    """``'conv1_conv/kernel:0'`` → ``'kernel'``: the last part of a weight's name, without its
    TensorFlow output index (Keras 3 writes ``'conv1_conv/kernel'``, the same key)."""
    last = weight_name.rsplit("/", 1)[-1]
    stem, colon, index = last.rpartition(":")
    return stem if colon and index.isdigit() else last


def read_keras_weights(source: bytes | str | os.PathLike[str], label: str = "the weights file") -> dict[str, dict[str, np.ndarray]]:
    """Every layer with weights in a Keras 2 HDF5 weights file: ``{layer: {weight name: array}}``,
    layers in the file's order, weights in Keras's legacy order.

    ``source`` is the file's bytes (as :func:`rosetta_utils.data.fetch.verified_bytes` returns
    them, so the bytes checked are the bytes read) or its path. Raises
    :class:`~rosetta_utils.data.errors.DataError` naming what is wrong: not an HDF5 file (a
    download cut short is not), no ``layer_names``, a listed layer or weight that is not there.
    """
    import h5py  # a dependency of rosetta_utils, imported where it is needed

    handle = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else Path(source)
    try:
        file = h5py.File(handle, "r")
    except (OSError, ValueError) as exc:
        raise DataError(f"{label} is not a readable HDF5 file ({exc}); it was not loaded") from exc
    with file:
        layer_names = _attribute_list(file, "layer_names")
        if not layer_names:
            raise DataError(f"{label} has no 'layer_names' attribute: not a Keras weights file")
        layers: dict[str, dict[str, np.ndarray]] = {}
        for layer in layer_names:
            group = file.get(layer)
            if not isinstance(group, h5py.Group):
                raise DataError(f"{label} lists layer {layer!r} in 'layer_names' but holds no group of that name")
            weights = {}
            for name in _attribute_list(group, "weight_names"):
                dataset = group.get(name)
                if not isinstance(dataset, h5py.Dataset):
                    raise DataError(f"{label}: layer {layer!r} lists weight {name!r} but holds no such dataset")
                weights[name] = np.asarray(dataset[()])
            if weights:
                layers[layer] = weights
    return layers


def write_keras_weights(
    path: str | os.PathLike[str],
    layers: Layers,
    *,
    keras_version: str = KERAS_2_VERSION,
    backend: str = KERAS_2_BACKEND,
) -> Path:
    """Write ``{layer: {weight name: array}}`` (a layer with no weights maps to ``{}``) as Keras 2
    did: the inverse of :func:`read_keras_weights`, layers and weights in the order given."""
    import h5py

    path = Path(path)
    with h5py.File(path, "w") as file:
        _write_attribute_list(file, "layer_names", list(layers))
        file.attrs["backend"] = backend.encode("utf8")
        file.attrs["keras_version"] = keras_version.encode("utf8")
        for layer, weights in layers.items():
            group = file.create_group(layer)
            _write_attribute_list(group, "weight_names", list(weights))
            for name, value in weights.items():
                group.create_dataset(name, data=np.asarray(value))
    return path


def _attribute_list(node, name: str) -> list[str]:
    """A list attribute as Keras reads it: whole, or in numbered chunks; bytes decoded."""
    if name in node.attrs:
        values = list(node.attrs[name])
    else:
        values, chunk = [], 0
        while f"{name}{chunk}" in node.attrs:
            values.extend(node.attrs[f"{name}{chunk}"])
            chunk += 1
    return [value.decode("utf8") if isinstance(value, bytes) else str(value) for value in values]


def _write_attribute_list(node, name: str, values: list[str]) -> None:
    """Write a list attribute as Keras does: bytes, split into chunks only when too long."""
    data = np.array([value.encode("utf8") for value in values])
    chunks = 1
    while any(part.nbytes > HDF5_OBJECT_HEADER_LIMIT for part in np.array_split(data, chunks)):
        chunks += 1
    if chunks == 1:
        node.attrs[name] = data
    else:
        for index, part in enumerate(np.array_split(data, chunks)):
            node.attrs[f"{name}{index}"] = part
