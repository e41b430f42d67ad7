"""Read named arrays from an ``.npz`` file without letting its pickles run code.

An ``.npz`` is a zip of ``.npy`` files. Numeric arrays are read without
pickle at all; object arrays (Keras's ``imdb.npz`` stores its reviews as
lists) can only be stored as pickles, and are unpickled by
:class:`ArrayUnpickler`, which builds numpy arrays of plain Python values and
refuses every other global. Callers verify the file's checksum on the bytes
in memory first (:func:`rosetta_utils.data.fetch.verified_bytes`) and pass
those bytes here.
"""

from __future__ import annotations

import io
import pickle
import zipfile
import zlib
from typing import Iterable

import numpy as np

from .errors import DataError


class ArrayUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays (of plain Python values) and refuses every other global."""

    _ALLOWED = frozenset(
        {
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "_reconstruct"),  # written by numpy 1.x
            ("numpy._core.multiarray", "_reconstruct"),  # written by numpy 2.x
        }
    )

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refused to unpickle {module}.{name}: only numpy arrays are expected")
        return super().find_class(module, name)


def read_npy(raw: bytes, label: str) -> np.ndarray:
    """One ``.npy`` member: numeric arrays without pickle, object arrays through :class:`ArrayUnpickler`."""
    stream = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
        if not dtype.hasobject:
            stream.seek(0)
            return np.lib.format.read_array(stream, allow_pickle=False)
        array = ArrayUnpickler(stream).load()
    except Exception as exc:  # whatever a malformed file makes numpy or pickle raise
        raise DataError(f"{label} is not a readable .npy array ({type(exc).__name__}: {exc})") from exc
    if not isinstance(array, np.ndarray) or array.shape != shape or array.dtype != dtype:
        raise DataError(f"{label} does not hold the {dtype} array of shape {shape} its header announces")
    return array


def read_npz(payload: bytes, names: Iterable[str], origin: str) -> dict[str, np.ndarray]:
    """The arrays ``names`` of the ``.npz`` file whose bytes are ``payload``; other members are never read.

    Raises :class:`DataError` naming ``origin`` for a file that is not a zip,
    lacks one of the arrays, or holds one that is truncated or unreadable.
    """
    names = tuple(names)
    try:
        archive = zipfile.ZipFile(io.BytesIO(payload))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DataError(f"{origin} is not an .npz (zip) file ({exc})") from exc
    arrays: dict[str, np.ndarray] = {}
    with archive:
        present = set(archive.namelist())
        absent = [name for name in names if f"{name}.npy" not in present]
        if absent:
            raise DataError(f"{origin} lacks the array(s) {', '.join(absent)}")
        for name in names:
            try:
                raw = archive.read(f"{name}.npy")
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
                raise DataError(f"{name} in {origin} is truncated or corrupt ({exc})") from exc
            arrays[name] = read_npy(raw, f"{name} in {origin}")
    return arrays
