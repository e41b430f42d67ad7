"""The book's data sets: downloaded once, verified against a pinned checksum, cached.

:func:`cifar10` returns CIFAR-10 as numpy arrays (images NCHW ``float32`` in
[0, 1], labels ``int64``), parsed from the raw bytes of the official binary
archive: no unpickling. The archive is fetched with :mod:`pooch` into a cache
folder (``data_dir``, else ``$ROSETTA_DATA_DIR``, else ``pooch.os_cache("rosetta")``)
and extracted into a temporary folder there, which is renamed into place only
once every file was read and validated: the cache never holds a half-extracted
copy. Every failure raises :class:`DataError` and leaves the cache as it was.

Offline (``offline=True`` or ``ROSETTA_OFFLINE=1``), or when the network is
unreachable, and with no cached copy, :func:`cifar10` returns a learnable
synthetic stand-in of the same shapes whose ``source`` line says so. The
stand-in is never used to hide a real problem: HTTP errors, checksum
mismatches and broken archives raise.

This module imports no deep learning framework.
"""

from __future__ import annotations

import gzip
import logging
import os
import re
import shutil
import sys
import tarfile
import tempfile
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, TypeVar
from urllib.parse import urlsplit

import numpy as np
import pooch
import requests

__all__ = [
    "CIFAR10_CLASSES",
    "CIFAR10_SHA256",
    "CIFAR10_URL",
    "DataError",
    "ImageDataset",
    "StandInWarning",
    "cifar10",
    "cache_dir",
]

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
#: SHA-256 of the official archive (170,052,171 bytes; MD5 c32a1d4ab5d03f1284b67883e8d87530).
CIFAR10_SHA256 = "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

#: (connect, read) timeouts of a download, in seconds.
TIMEOUT = (10, 60)

_CIFAR10_FOLDER = "cifar-10-batches-bin"
_CIFAR10_TRAIN = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
_CIFAR10_TEST = "test_batch.bin"
_CIFAR10_META = "batches.meta.txt"
_IMAGE_SHAPE = (3, 32, 32)
_RECORD_BYTES = 1 + 3 * 32 * 32

_T = TypeVar("_T")


class DataError(ValueError):
    """A data set could not be downloaded, verified, extracted or read."""


class StandInWarning(UserWarning):
    """The network was unreachable: a synthetic stand-in replaces the real data."""


class _NetworkUnavailable(Exception):
    """No connection could be made (refused, DNS failure, connect timeout) and no response arrived."""


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """Images as NCHW ``float32`` in [0, 1] with ``int64`` labels, and where they come from."""

    x_train: np.ndarray = field(repr=False)
    y_train: np.ndarray = field(repr=False)
    x_test: np.ndarray = field(repr=False)
    y_test: np.ndarray = field(repr=False)
    classes: tuple[str, ...]
    #: True for the synthetic stand-in: nothing measured on it is a CIFAR-10 result.
    synthetic: bool
    #: One line for a reader: the archive and its checksum, or why this is a stand-in.
    source: str

    def describe(self) -> str:
        """The line to print on a page (``source``)."""
        return self.source

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return (
            f"ImageDataset(train={self.x_train.shape}, test={self.x_test.shape}, "
            f"synthetic={self.synthetic}, source={self.source!r})"
        )


def cache_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: ``data_dir``, else ``$ROSETTA_DATA_DIR``, else ``pooch.os_cache("rosetta")``."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    configured = os.environ.get("ROSETTA_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path(pooch.os_cache("rosetta"))


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
    sha256 = _checked_sha256(sha256)
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

    reason = _offline_reason(offline)
    if reason is None:
        try:
            archive = _fetch(url, sha256, f"cifar-10-binary-{tag}.tar.gz", cache)
        except _NetworkUnavailable as exc:
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
            arrays = _extract_validated(archive, folder, lambda root: _read_cifar10(root, origin), origin)
            return _cifar10_dataset(arrays, source)
    return _synthetic_cifar10(seed=seed, reason=reason)


# --- download and cache, shared by the loaders ---------------------------------------------


def _checked_sha256(sha256: str) -> str:
    value = sha256.lower().removeprefix("sha256:")
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise ValueError(f"sha256 must be 64 hexadecimal digits, not {sha256!r}")
    return value


def _offline_reason(offline: bool | None) -> str | None:
    if offline:
        return "offline=True"
    if offline is None and os.environ.get("ROSETTA_OFFLINE") == "1":
        return "offline: ROSETTA_OFFLINE=1"
    return None


def _fetch(url: str, sha256: str, fname: str, cache: Path) -> Path:
    """``cache/fname``, downloaded from ``url`` with pooch unless a copy with checksum ``sha256`` is there.

    A failed download leaves nothing behind (pooch writes to a temporary file
    and moves it into place only when its checksum matches). Raises
    :class:`DataError`, or :class:`_NetworkUnavailable` when no connection
    could be made at all.
    """
    if urlsplit(url).scheme not in ("http", "https"):
        raise DataError(f"cannot download {url!r}: only http and https URLs are supported")
    responses: list[requests.Response] = []  # any means the server answered: not a network outage

    def on_response(response: requests.Response, *args: object, **kwargs: object) -> None:
        responses.append(response)

    downloader = pooch.HTTPDownloader(
        progressbar=_stderr_is_terminal(), timeout=TIMEOUT, hooks={"response": on_response}
    )
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        path = pooch.retrieve(url, known_hash=f"sha256:{sha256}", fname=fname, path=cache, downloader=downloader)
    except requests.exceptions.HTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "error"
        reason = exc.response.reason if exc.response is not None else exc
        raise DataError(f"HTTP {status} ({reason}) from {url}; nothing was cached") from exc
    except requests.exceptions.SSLError as exc:
        raise DataError(f"TLS error connecting to {url}: {exc}") from exc
    except requests.exceptions.ConnectionError as exc:
        if not responses:
            raise _NetworkUnavailable(f"could not connect to {url}: {exc}") from exc
        raise DataError(f"connection dropped during the download of {url} ({exc}); nothing was cached") from exc
    except requests.exceptions.ChunkedEncodingError as exc:
        raise DataError(f"connection dropped during the download of {url} ({exc}); nothing was cached") from exc
    except requests.exceptions.RequestException as exc:
        raise DataError(f"download of {url} failed ({type(exc).__name__}: {exc}); nothing was cached") from exc
    except ValueError as exc:
        if "does not match the known hash" in str(exc):  # pooch's wording: "... but got <hash>. Deleted ..."
            got = re.search(r"but got (\S+?)\.? ", f"{exc} ")
            actual = got.group(1) if got else "another checksum"
            raise DataError(
                f"checksum mismatch for {url}: expected sha256 {sha256}, got {actual}; the download was discarded"
            ) from exc
        raise DataError(f"could not download {url}: {exc}") from exc
    finally:
        logger.setLevel(level)
        for response in responses:  # pooch leaves a failed streaming response open
            response.close()
    return Path(path)


def _stderr_is_terminal() -> bool:
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


def _extract_validated(archive: Path, dest: Path, read: Callable[[Path], _T], origin: str) -> _T:
    """Extract ``archive`` into a temporary folder beside ``dest``, ``read`` it, then rename it to ``dest``.

    ``read`` validates the extracted files and returns what they hold. If
    anything fails the temporary folder is removed; a :class:`DataError`
    (the archive is unreadable, unsafe or malformed) removes the archive too,
    so the cache is as before the download. ``origin`` names the archive in messages.
    """
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        _safe_extract_tar_gz(archive, tmp, origin)
        result = read(tmp)
        try:
            os.rename(tmp, dest)
        except OSError:
            if not dest.is_dir():  # else another process finished the same extraction first
                raise
        return result
    except DataError as exc:
        archive.unlink(missing_ok=True)
        raise DataError(f"{exc}; nothing was cached") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _safe_extract_tar_gz(archive: Path, target: Path, origin: str) -> None:
    """Extract a ``.tar.gz`` into ``target`` after checking the whole stream and every member.

    Refuses, before writing anything, members with an absolute path, a ``..``
    component, or that are links or special files.
    """
    try:
        # tarfile can take a cut archive for a shorter one; gzip checks the stream's end and CRC.
        with gzip.open(archive, "rb") as stream:
            while stream.read(1 << 20):
                pass
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member, origin)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(target, members=members, filter="data")
            else:  # pragma: no cover - Python without extraction filters; members were checked above
                tar.extractall(target, members=members)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DataError(f"{origin} is truncated or corrupt ({exc})") from exc


def _check_member(member: tarfile.TarInfo, origin: str) -> None:
    name = member.name
    parts = re.split(r"[\\/]+", name)
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name) or ".." in parts:
        raise DataError(f"{origin} has a member {name!r} that would be written outside the extraction folder")
    if not (member.isfile() or member.isdir()):
        raise DataError(f"{origin} has a member {name!r} that is a link or special file, which is refused")


# --- CIFAR-10 -------------------------------------------------------------------------------


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
    return records[:, 1:].reshape(-1, *_IMAGE_SHAPE), labels


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


def _synthetic_cifar10(*, seed: int, reason: str, n_train: int = 50_000, n_test: int = 10_000) -> ImageDataset:
    """A learnable stand-in with CIFAR-10's shapes: one coloured, oriented grating per class plus noise.

    Each image shows its class's pattern shifted by up to 4 pixels, at a
    random contrast, mixed with uniform noise. Classes are balanced.
    """
    rng = np.random.default_rng(seed)
    k = len(CIFAR10_CLASSES)
    colours = rng.uniform(0.3, 0.7, size=(k, 3, 1, 1))
    angles = (rng.permutation(k) + rng.uniform(0, 0.5, size=k)) * np.pi / k
    periods = rng.uniform(6.0, 14.0, size=k)
    phases = rng.uniform(0, 2 * np.pi, size=(k, 3, 1, 1))
    shifts = np.arange(-4, 5)
    dy, dx = np.meshgrid(shifts, shifts, indexing="ij")
    yy, xx = np.mgrid[0:32, 0:32]
    # (class, shift, channel, row, column): every class's pattern at every shift.
    coords = (
        (yy[None, None] + dy.reshape(1, -1, 1, 1)) * np.sin(angles)[:, None, None, None]
        + (xx[None, None] + dx.reshape(1, -1, 1, 1)) * np.cos(angles)[:, None, None, None]
    )
    wave = np.sin(2 * np.pi * coords[:, :, None] / periods[:, None, None, None, None] + phases[:, None])
    bank = (colours[:, None] + 0.3 * wave).astype(np.float32).reshape(-1, *_IMAGE_SHAPE)
    n_shifts = dy.size
    block = 4096
    noise = np.empty((block, *_IMAGE_SHAPE), dtype=np.float32)

    def images(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.permutation(np.arange(n) % k).astype(np.int64)
        x = np.empty((n, *_IMAGE_SHAPE), dtype=np.float32)
        for start in range(0, n, block):
            stop = min(start + block, n)
            m = stop - start
            chunk, grain = x[start:stop], noise[:m]
            np.take(bank, labels[start:stop] * n_shifts + rng.integers(0, n_shifts, size=m), axis=0, out=chunk)
            contrast = rng.uniform(0.4, 0.7, size=(m, 1, 1, 1)).astype(np.float32)
            chunk *= contrast
            rng.random(out=grain, dtype=np.float32)
            grain *= 1 - contrast
            chunk += grain
            np.clip(chunk, 0.0, 1.0, out=chunk)
        return x, labels

    x_train, y_train = images(n_train)
    x_test, y_test = images(n_test)
    source = (
        f"SYNTHETIC STAND-IN, not CIFAR-10 ({reason}): {n_train:,} training and {n_test:,} test images "
        f"of class patterns plus noise (seed {seed}); results resting on it are not CIFAR-10 results"
    )
    return ImageDataset(x_train, y_train, x_test, y_test, CIFAR10_CLASSES, True, source)


#: ImageNet's per-channel mean and standard deviation (RGB, pixels in [0, 1]).
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def imagenet_preprocess(images: np.ndarray, resize: int = 256, crop: int = 224) -> np.ndarray:
    """The one preprocessing pipeline of the ResNet-50 chapter, shared by every framework.

    ``images``: float32 NCHW in [0, 1]. Each image is resized (bilinear) so
    that its shorter side is ``resize`` pixels, cropped to ``crop``×``crop``
    at the centre, and normalised with ImageNet's mean and standard deviation.
    Returns float32 NCHW.
    """
    from PIL import Image

    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"expected float NCHW RGB images, got shape {images.shape}")
    if crop > resize:
        raise ValueError(f"crop {crop} is larger than the resized image {resize}")
    height, width = images.shape[2:]
    scale = resize / min(height, width)
    new_size = (round(width * scale), round(height * scale))  # PIL wants (width, height)
    top, left = (new_size[1] - crop) // 2, (new_size[0] - crop) // 2
    out = np.empty((len(images), 3, crop, crop), dtype=np.float32)
    for index, image in enumerate(images):
        for channel in range(3):
            plane = Image.fromarray(np.ascontiguousarray(image[channel], dtype=np.float32), mode="F")
            resized = np.asarray(plane.resize(new_size, Image.BILINEAR), dtype=np.float32)
            out[index, channel] = resized[top : top + crop, left : left + crop]
    return (out - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]
