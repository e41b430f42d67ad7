"""CIFAR-10 from the official binary archive: :func:`cifar10`.

The archive (``cifar-10-binary.tar.gz``, pinned by its SHA-256) is fetched
into the cache (:mod:`.fetch`), extracted into a temporary folder and renamed
into place once every file was read and validated (:mod:`.safe_tar`); its
records are parsed from their raw bytes, no unpickling. Images come out NCHW
``float32`` in [0, 1], labels ``int64``. Offline, or without a network, and
with nothing cached, :func:`cifar10` returns the stand-in of
:mod:`.standins`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import numpy as np

from .datasets import IMAGE_SHAPE, ImageDataset
from .errors import DataError, StandInWarning
from .fetch import NetworkUnavailable, cache_dir, checked_sha256, fetch, offline_reason
from .safe_tar import extract_validated
from .standins import synthetic_cifar10

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
#: SHA-256 of the official archive (170,052,171 bytes; MD5 c32a1d4ab5d03f1284b67883e8d87530).
CIFAR10_SHA256 = "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"

_CIFAR10_FOLDER = "cifar-10-batches-bin"
_CIFAR10_TRAIN = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
_CIFAR10_TEST = "test_batch.bin"
_CIFAR10_META = "batches.meta.txt"
_RECORD_BYTES = 1 + 3 * 32 * 32


def cifar10(
    *,
    url: str = CIFAR10_URL,
    sha256: str = CIFAR10_SHA256,
    data_dir: str | os.PathLike[str] | None = None,
    offline: bool | None = None,
    seed: int = 0,
) -> ImageDataset:
    """CIFAR-10 from the binary archive at ``url`` whose SHA-256 is ``sha256``.

    A cached, validated extraction is used whenever it exists, offline too.
    Otherwise the archive is downloaded, unless ``offline`` is True (or None
    with ``ROSETTA_OFFLINE=1``); then, or when the network is unreachable (a
    :class:`StandInWarning` says so), a synthetic stand-in seeded with ``seed``
    is returned, its ``synthetic`` flag set and its ``source`` starting with
    ``SYNTHETIC STAND-IN``. Raises :class:`DataError` for a download or archive
    that is wrong (HTTP error, checksum mismatch, dropped transfer, unreadable
    or unsafe archive, malformed records).
    """
    sha256 = checked_sha256(sha256)
    cache = cache_dir(data_dir)
    tag = sha256[:16]
    folder = cache / f"cifar-10-{tag}"
    archive_name = PurePosixPath(urlsplit(url).path).name or "archive"
    source = f"CIFAR-10 from {archive_name} (sha256 {sha256})"

    if folder.is_dir():
        try:
            arrays = _read_cifar10(folder, f"the cached folder {folder}")
        except DataError as exc:
            raise DataError(f"{exc}; delete that folder to download the archive again") from exc
        return _cifar10_dataset(arrays, source)

    reason = offline_reason(offline)
    if reason is None:
        try:
            archive = fetch(url, f"sha256:{sha256}", f"cifar-10-binary-{tag}.tar.gz", cache)
        except NetworkUnavailable as exc:
            host = urlsplit(url).hostname or url
            reason = f"no network: {host} could not be reached"
            warnings.warn(
                f"CIFAR-10 could not be downloaded because the network is unreachable ({exc}); "
                "using a SYNTHETIC STAND-IN instead, whose results are not CIFAR-10 results.",
                StandInWarning,
                stacklevel=2,
            )
        else:
            origin = f"the archive from {url}"
            arrays = extract_validated(archive, folder, lambda root: _read_cifar10(root, origin), origin)
            return _cifar10_dataset(arrays, source)
    return synthetic_cifar10(seed=seed, reason=reason)


def _read_records(path: Path, label: str) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images (N, 3, 32, 32) and int64 labels from one CIFAR-10 ``.bin`` file."""
    if not path.is_file():
        raise DataError(f"{label} lacks {path.name}")
    raw = path.read_bytes()
    size = len(raw)
    if size == 0 or size % _RECORD_BYTES:
        raise DataError(
            f"{path.name} in {label} has {size:,} bytes, not a whole non-zero number "
            f"of {_RECORD_BYTES}-byte records"
        )
    records = np.frombuffer(raw, dtype=np.uint8).reshape(-1, _RECORD_BYTES)
    labels = records[:, 0].astype(np.int64)
    bad = np.flatnonzero(labels > 9)
    if bad.size:
        raise DataError(f"{path.name} in {label}: record {bad[0]} has label {labels[bad[0]]}, not 0..9")
    return records[:, 1:].reshape(-1, *IMAGE_SHAPE), labels


def _read_cifar10(root: Path, label: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """Validated uint8 images, labels and class names from an extracted archive."""
    folder = root / _CIFAR10_FOLDER
    train = [_read_records(folder / name, label) for name in _CIFAR10_TRAIN]
    x_test, y_test = _read_records(folder / _CIFAR10_TEST, label)
    meta = folder / _CIFAR10_META
    if not meta.is_file():
        raise DataError(f"{label} lacks {_CIFAR10_META}")
    classes = tuple(line.strip() for line in meta.read_text(encoding="utf-8").splitlines() if line.strip())
    if len(classes) != 10:
        raise DataError(f"{_CIFAR10_META} in {label} names {len(classes)} classes, not 10")
    x_train = np.concatenate([x for x, _ in train])
    y_train = np.concatenate([y for _, y in train])
    return x_train, y_train, x_test, y_test, classes


def _to_unit_float(images: np.ndarray) -> np.ndarray:
    scaled = images.astype(np.float32)
    scaled /= np.float32(255)
    return scaled


def _cifar10_dataset(
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]], source: str
) -> ImageDataset:
    x_train, y_train, x_test, y_test, classes = arrays
    return ImageDataset(
        x_train=_to_unit_float(x_train),
        y_train=y_train,
        x_test=_to_unit_float(x_test),
        y_test=y_test,
        classes=classes,
        synthetic=False,
        source=f"{source}: {len(y_train):,} training and {len(y_test):,} test images",
    )
