"""The book's data sets: downloaded once, verified against a pinned checksum, cached.

:func:`cifar10` returns CIFAR-10 as numpy arrays (images NCHW ``float32`` in
[0, 1], labels ``int64``), parsed from the raw bytes of the official binary
archive: no unpickling. The archive is fetched with :mod:`pooch` into a cache
folder (``data_dir``, else ``$ROSETTA_DATA_DIR``, else ``pooch.os_cache("rosetta")``)
and extracted into a temporary folder there, which is renamed into place only
once every file was read and validated: the cache never holds a half-extracted
copy. Every failure raises :class:`DataError` and leaves the cache as it was.

:func:`imdb` returns the IMDB reviews of Keras's ``imdb.npz`` as a
:class:`TextDataset`: token ids with Keras's conventions (start 1, OOV 2, word
ranks shifted by 3, vocabulary ``num_words``, Keras's shuffle), each review cut
to its last ``maxlen`` tokens and right-padded with 0, plus the valid lengths.
``imdb.npz`` holds object arrays of lists, which only a pickle can store: its
checksum is verified on the bytes in memory before anything is unpickled (a
cached copy too, every time), and the unpickler then accepts nothing but numpy
arrays. :func:`pre_padded` moves the padding to the front.

Offline (``offline=True`` or ``ROSETTA_OFFLINE=1``), or when the network is
unreachable, and with no cached copy, both loaders return a learnable
synthetic stand-in of the same shapes whose ``source`` line says so. The
stand-in is never used to hide a real problem: HTTP errors, checksum
mismatches and broken files raise.

This module imports no deep learning framework.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import itertools
import json
import logging
import os
import pickle
import re
import shutil
import sys
import tarfile
import tempfile
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, TypeVar
from urllib.parse import urlsplit

import numpy as np
import requests

with warnings.catch_warnings():
    # pooch imports tqdm.auto, which in a notebook kernel without ipywidgets warns that
    # it cannot draw widget bars; downloads draw a bar only on a terminal (see _fetch).
    warnings.filterwarnings("ignore", message="IProgress not found")
    import pooch

__all__ = [
    "CIFAR10_CLASSES",
    "CIFAR10_SHA256",
    "CIFAR10_URL",
    "DataError",
    "IMDB_INDEX_FROM",
    "IMDB_OOV",
    "IMDB_PAD",
    "IMDB_SHA256",
    "IMDB_SHUFFLE_SEED",
    "IMDB_START",
    "IMDB_URL",
    "IMDB_WORD_INDEX_HASH",
    "IMDB_WORD_INDEX_URL",
    "ImageDataset",
    "StandInWarning",
    "TextDataset",
    "cache_dir",
    "cifar10",
    "imdb",
    "pre_padded",
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


class _Sourced:
    """A data set that prints as its ``source`` line (what it is, or why it is a stand-in)."""

    source: str

    def describe(self) -> str:
        """The line to print on a page (``source``)."""
        return self.source

    def __str__(self) -> str:
        return self.source


@dataclass(frozen=True, eq=False)
class ImageDataset(_Sourced):
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
            archive = _fetch(url, f"sha256:{sha256}", f"cifar-10-binary-{tag}.tar.gz", cache)
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


_DIGEST_LENGTHS = {"sha256": 64, "md5": 32}


def _checked_known_hash(value: str, name: str) -> tuple[str, str]:
    """``(algorithm, hex digest)`` from ``"sha256:<hex>"``, ``"md5:<hex>"`` or a bare SHA-256."""
    text = value.strip().lower()
    algorithm, colon, digest = text.partition(":")
    if not colon:
        algorithm, digest = "sha256", text
    length = _DIGEST_LENGTHS.get(algorithm)
    if length is None or not re.fullmatch(f"[0-9a-f]{{{length}}}", digest):
        hint = " (an MD5? write it as 'md5:<hex>')" if re.fullmatch(r"[0-9a-f]{32}", text) else ""
        raise ValueError(
            f"{name} must be 'sha256:<64 hex digits>', 'md5:<32 hex digits>' "
            f"or 64 bare hex digits, not {value!r}{hint}"
        )
    return algorithm, digest


def _verified_bytes(path: Path, algorithm: str, digest: str, label: str) -> bytes:
    """The bytes of ``path``, once their checksum is known to be ``digest``: the bytes that get parsed.

    Reading and hashing the same bytes in memory leaves no moment at which the
    file could change between the check and its use.
    """
    try:
        payload = path.read_bytes()
    except OSError as exc:
        raise DataError(f"could not read {label} ({exc})") from exc
    actual = hashlib.new(algorithm, payload).hexdigest()
    if actual != digest:
        raise DataError(
            f"checksum mismatch for {label}: expected {algorithm} {digest}, got {actual}; "
            "it was not loaded"
        )
    return payload


def _fetch(url: str, known_hash: str, fname: str, cache: Path) -> Path:
    """``cache/fname``, downloaded from ``url`` with pooch unless a copy with checksum ``known_hash`` is there.

    ``known_hash`` is ``"<algorithm>:<hex digest>"`` (``sha256`` or ``md5``).
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
        path = pooch.retrieve(url, known_hash=known_hash, fname=fname, path=cache, downloader=downloader)
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
            algorithm, _, expected = known_hash.partition(":")
            raise DataError(
                f"checksum mismatch for {url}: expected {algorithm} {expected}, got {actual}; "
                "the download was discarded"
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


# --- IMDB -----------------------------------------------------------------------------------

_IMDB_FOLDER_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
IMDB_URL = _IMDB_FOLDER_URL + "imdb.npz"
#: SHA-256 of Keras's ``imdb.npz`` (the hash ``keras.datasets.imdb.load_data`` pins).
IMDB_SHA256 = "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f"
IMDB_WORD_INDEX_URL = _IMDB_FOLDER_URL + "imdb_word_index.json"
#: Keras pins the word index by its MD5 (``keras.datasets.imdb.get_word_index``).
IMDB_WORD_INDEX_HASH = "md5:bfafd718b763782e994055a2d397834f"

#: Keras's token conventions: 0 pads, 1 starts a review, 2 replaces words outside
#: the vocabulary, and the word of frequency rank r (1 = most frequent) is id r + 3.
IMDB_PAD, IMDB_START, IMDB_OOV, IMDB_INDEX_FROM = 0, 1, 2, 3
#: Keras shuffles the training reviews, then the test reviews, with one ``RandomState(113)``.
IMDB_SHUFFLE_SEED = 113

_IMDB_ARRAYS = ("x_train", "y_train", "x_test", "y_test")
_IMDB_TRAIN, _IMDB_TEST = 25_000, 25_000
_IMDB_SPECIAL = {IMDB_PAD: "<PAD>", IMDB_START: "<START>", IMDB_OOV: "<OOV>"}
#: The text of an id whose rank no word has (id 3: rank 0 is never used).
_IMDB_UNUSED = "<UNUSED>"


@dataclass(frozen=True, eq=False)
class TextDataset(_Sourced):
    """Reviews as right-padded token ids with their lengths and ``int64`` labels, and where they come from.

    ``x_train[i, :len_train[i]]`` is review ``i`` (its last ``maxlen``
    tokens); the rest of the row is 0. :func:`pre_padded` gives the layout
    with the padding in front.
    """

    #: int32 (N, maxlen): token ids, right-padded with 0.
    x_train: np.ndarray = field(repr=False)
    #: int64 (N,): the number of valid tokens of each row, 1..maxlen.
    len_train: np.ndarray = field(repr=False)
    #: int64 (N,): 0 negative, 1 positive.
    y_train: np.ndarray = field(repr=False)
    x_test: np.ndarray = field(repr=False)
    len_test: np.ndarray = field(repr=False)
    y_test: np.ndarray = field(repr=False)
    #: Ids are below ``num_words``.
    num_words: int
    maxlen: int
    #: ``words[i]`` is the text of token id ``i`` (``"<PAD>"``, ``"<START>"``, ``"<OOV>"``, then words).
    words: tuple[str, ...] = field(repr=False)
    #: True for the synthetic stand-in: nothing measured on it is an IMDB result.
    synthetic: bool
    #: One line for a reader: the files and their checksums, or why this is a stand-in.
    source: str

    def decode(self, ids: Iterable[int]) -> str:
        """The words of ``ids`` separated by spaces; padding (0) is skipped, 1 is ``<START>``, 2 ``<OOV>``."""
        tokens = np.asarray(ids).astype(np.int64, copy=False).ravel()
        bad = tokens[(tokens < 0) | (tokens >= len(self.words))]
        if bad.size:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary 0..{len(self.words) - 1}")
        return " ".join(self.words[i] for i in tokens.tolist() if i != IMDB_PAD)

    def __repr__(self) -> str:
        return (
            f"TextDataset(train={self.x_train.shape}, test={self.x_test.shape}, num_words={self.num_words}, "
            f"synthetic={self.synthetic}, source={self.source!r})"
        )


def pre_padded(x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A copy of right-padded rows with the padding moved to the front.

    Row ``i`` of the result ends with ``x[i, :lengths[i]]`` and starts with
    zeros: the layout of Keras's ``pad_sequences(..., padding="pre")``.
    """
    x = np.asarray(x)
    lengths = np.asarray(lengths)
    if x.ndim != 2 or lengths.shape != (len(x),):
        raise ValueError(f"expected rows (N, T) and lengths (N,), got {x.shape} and {lengths.shape}")
    width = x.shape[1]
    if lengths.size and (lengths.min() < 0 or lengths.max() > width):
        raise ValueError(f"lengths must lie in 0..{width}")
    source = np.arange(width)[None, :] - (width - lengths)[:, None]  # column each entry comes from
    gathered = np.take_along_axis(x, np.maximum(source, 0), axis=1)
    return np.where(source >= 0, gathered, np.zeros((), dtype=x.dtype))


def imdb(
    *,
    url: str = IMDB_URL,
    sha256: str = IMDB_SHA256,
    word_index_url: str = IMDB_WORD_INDEX_URL,
    word_index_hash: str = IMDB_WORD_INDEX_HASH,
    data_dir: str | os.PathLike[str] | None = None,
    offline: bool | None = None,
    seed: int = 0,
    num_words: int = 30_000,
    maxlen: int = 150,
) -> TextDataset:
    """IMDB reviews from Keras's ``imdb.npz`` at ``url`` (SHA-256 ``sha256``) and its word index.

    The conventions are exactly Keras's ``imdb.load_data(num_words=num_words)``
    (start 1, OOV 2, ``index_from=3``, ids >= ``num_words`` become 2, the
    training reviews shuffled by ``RandomState(113)`` and then the test reviews
    by the same generator), each review then cut to its last ``maxlen`` tokens
    and right-padded with 0. ``word_index_hash`` is ``"md5:<hex>"``,
    ``"sha256:<hex>"`` or a bare SHA-256.

    Cached files are used whenever they are there, offline too, after their
    checksum was verified again (an altered file raises :class:`DataError`
    and is never unpickled). Otherwise they are downloaded, unless ``offline``
    is True (or None with ``ROSETTA_OFFLINE=1``); then, or when the network is
    unreachable (a :class:`StandInWarning` says so), a synthetic stand-in
    seeded with ``seed`` is returned, its ``synthetic`` flag set and its
    ``source`` starting with ``SYNTHETIC STAND-IN``. Raises :class:`DataError`
    for a download or file that is wrong (HTTP error, checksum mismatch,
    dropped transfer, malformed content); the cache is then as it was.
    """
    sha256 = _checked_sha256(sha256)
    index_algorithm, index_digest = _checked_known_hash(word_index_hash, "word_index_hash")
    num_words, maxlen = _checked_text_sizes(num_words, maxlen)
    cache = cache_dir(data_dir)
    npz_name = PurePosixPath(urlsplit(url).path).name or "imdb.npz"
    index_name = PurePosixPath(urlsplit(word_index_url).path).name or "imdb_word_index.json"
    wanted = [  # (url, algorithm, digest, cache file)
        (url, "sha256", sha256, cache / f"imdb-{sha256[:16]}.npz"),
        (word_index_url, index_algorithm, index_digest, cache / f"imdb_word_index-{index_digest[:16]}.json"),
    ]

    # Cached copies first: a file changed since its download raises here, before anything reads it.
    payloads: dict[Path, bytes] = {}
    origins: dict[Path, str] = {}  # how messages name each file
    for _, algorithm, digest, path in wanted:
        if path.is_file():
            origins[path] = f"the cached file {path}"
            try:
                payloads[path] = _verified_bytes(path, algorithm, digest, origins[path])
            except DataError as exc:
                raise DataError(f"{exc}; delete that file to download it again") from exc

    downloaded: list[Path] = []  # removed again if this call fails
    missing = [item for item in wanted if item[3] not in payloads]
    if missing:
        reason = _offline_reason(offline)
        if reason is None:
            file_url = url
            try:
                for file_url, algorithm, digest, path in missing:
                    fetched = _fetch(file_url, f"{algorithm}:{digest}", path.name, cache)
                    downloaded.append(fetched)
                    origins[path] = f"the download from {file_url}"
                    payloads[path] = _verified_bytes(fetched, algorithm, digest, origins[path])
            except _NetworkUnavailable as exc:
                _discard(downloaded)
                reason = f"no network: {urlsplit(file_url).hostname or file_url} could not be reached"
                warnings.warn(
                    f"IMDB could not be downloaded because the network is unreachable ({exc}); "
                    "using a SYNTHETIC STAND-IN instead, whose results are not IMDB results.",
                    StandInWarning,
                    stacklevel=2,
                )
            except BaseException:
                _discard(downloaded)
                raise
        if reason is not None:
            return _synthetic_imdb(seed=seed, reason=reason, num_words=num_words, maxlen=maxlen)

    npz_path, index_path = wanted[0][3], wanted[1][3]
    try:
        arrays = _read_imdb_npz(payloads[npz_path], origins[npz_path])
        words = _imdb_words(_read_word_index(payloads[index_path], origins[index_path]), num_words)
    except DataError as exc:
        if downloaded:
            _discard(downloaded)
            raise DataError(f"{exc}; nothing was cached") from exc
        raise
    # Cutting and padding act on each review alone, so Keras's shuffle can come last, as a row permutation.
    order_train, order_test = _keras_orders(len(arrays["y_train"]), len(arrays["y_test"]))
    x_train, len_train = _tail_right_padded(arrays["ranks_train"], arrays["lengths_train"], num_words, maxlen)
    x_test, len_test = _tail_right_padded(arrays["ranks_test"], arrays["lengths_test"], num_words, maxlen)
    x_train, len_train, y_train = x_train[order_train], len_train[order_train], arrays["y_train"][order_train]
    x_test, len_test, y_test = x_test[order_test], len_test[order_test], arrays["y_test"][order_test]
    source = (
        f"IMDB from {npz_name} (sha256 {sha256}) and {index_name} ({index_algorithm} {index_digest}): "
        f"{len(y_train):,} training and {len(y_test):,} test reviews, vocabulary {num_words:,}, "
        f"last {maxlen} tokens, shuffled as Keras does"
    )
    return TextDataset(
        x_train, len_train, y_train, x_test, len_test, y_test, num_words, maxlen, words, False, source
    )


def _checked_text_sizes(num_words: int, maxlen: int) -> tuple[int, int]:
    if isinstance(num_words, bool) or not isinstance(num_words, (int, np.integer)) or num_words < 20:
        raise ValueError(f"num_words must be an integer of at least 20, not {num_words!r}")
    if isinstance(maxlen, bool) or not isinstance(maxlen, (int, np.integer)) or maxlen < 1:
        raise ValueError(f"maxlen must be a positive integer, not {maxlen!r}")
    return int(num_words), int(maxlen)


def _discard(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


class _ArrayUnpickler(pickle.Unpickler):
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


def _read_npy(raw: bytes, label: str) -> np.ndarray:
    """One ``.npy`` member: numeric arrays without pickle, object arrays through :class:`_ArrayUnpickler`."""
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
        array = _ArrayUnpickler(stream).load()
    except Exception as exc:  # whatever a malformed file makes numpy or pickle raise
        raise DataError(f"{label} is not a readable .npy array ({type(exc).__name__}: {exc})") from exc
    if not isinstance(array, np.ndarray) or array.shape != shape or array.dtype != dtype:
        raise DataError(f"{label} does not hold the {dtype} array of shape {shape} its header announces")
    return array


def _read_imdb_npz(payload: bytes, origin: str) -> dict[str, np.ndarray]:
    """The arrays of a verified ``imdb.npz``, checked: reviews as lists of ids >= 0, labels 0/1.

    Returns ``y_train``/``y_test`` as int64 and, instead of the object arrays,
    ``ranks_train``/``ranks_test`` (every review's word ranks end to end) and
    ``lengths_train``/``lengths_test``.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(payload))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise DataError(f"{origin} is not an .npz (zip) file ({exc})") from exc
    arrays: dict[str, np.ndarray] = {}
    with archive:
        present = set(archive.namelist())
        absent = [name for name in _IMDB_ARRAYS if f"{name}.npy" not in present]
        if absent:
            raise DataError(f"{origin} lacks the array(s) {', '.join(absent)}")
        for name in _IMDB_ARRAYS:  # other members are never read
            try:
                raw = archive.read(f"{name}.npy")
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
                raise DataError(f"{name} in {origin} is truncated or corrupt ({exc})") from exc
            arrays[name] = _read_npy(raw, f"{name} in {origin}")
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        label = f"x_{split} in {origin}"
        if x.ndim != 1 or x.dtype != object:
            raise DataError(f"{label} is a {x.dtype} array of shape {x.shape}, not a 1-D object array of reviews")
        if len(x) == 0:
            raise DataError(f"{label} holds no reviews")
        if y.ndim != 1 or len(y) != len(x):
            raise DataError(f"y_{split} in {origin} has shape {y.shape}, but x_{split} holds {len(x):,} reviews")
        if y.dtype == bool or not np.issubdtype(y.dtype, np.integer):
            raise DataError(f"y_{split} in {origin} is a {y.dtype} array, not integer labels")
        wrong = np.flatnonzero((y != 0) & (y != 1))
        if wrong.size:
            raise DataError(f"y_{split} in {origin}: label {wrong[0]} is {y[wrong[0]]}, not 0 or 1")
        arrays[f"y_{split}"] = y.astype(np.int64)
        arrays[f"ranks_{split}"], arrays[f"lengths_{split}"] = _flat_reviews(x, label)
        del arrays[f"x_{split}"]
    return arrays


def _flat_reviews(reviews: np.ndarray, label: str) -> tuple[np.ndarray, np.ndarray]:
    """All word ranks of ``reviews`` end to end (int64) and each review's length; raises for malformed ones."""
    try:
        lengths = np.fromiter(map(len, reviews), dtype=np.int64, count=len(reviews))
    except TypeError:
        first = next(i for i, review in enumerate(reviews) if not hasattr(review, "__len__"))
        raise DataError(f"{label}: review {first} is a {type(reviews[first]).__name__}, not a list of ids") from None
    kinds = set(map(type, itertools.chain.from_iterable(reviews)))
    odd = sorted(k.__name__ for k in kinds if not issubclass(k, (int, np.integer)) or issubclass(k, (bool, np.bool_)))
    if odd:
        raise DataError(f"{label} holds {', '.join(odd)} values where word ids (integers) belong")
    try:
        flat = np.fromiter(itertools.chain.from_iterable(reviews), dtype=np.int64, count=int(lengths.sum()))
    except (OverflowError, ValueError) as exc:
        raise DataError(f"{label} holds a word id that is not a 64-bit integer ({exc})") from exc
    if flat.size and flat.min() < 0:
        where = int(np.argmax(flat < 0))
        review = int(np.searchsorted(np.cumsum(lengths), where, side="right"))
        raise DataError(f"{label}: review {review} holds the negative word id {flat[where]}")
    return flat, lengths


def _keras_orders(n_train: int, n_test: int) -> tuple[np.ndarray, np.ndarray]:
    """Keras's order: one ``RandomState(113)`` permutes the training reviews, then the test reviews."""
    generator = np.random.RandomState(IMDB_SHUFFLE_SEED)
    train, test = np.arange(n_train), np.arange(n_test)
    generator.shuffle(train)
    generator.shuffle(test)
    return train, test


def _tail_right_padded(
    ranks: np.ndarray, lengths: np.ndarray, num_words: int, maxlen: int
) -> tuple[np.ndarray, np.ndarray]:
    """Keras's ids for each review (start 1, rank + 3, ids >= num_words -> 2), its last ``maxlen`` kept, padded right.

    ``ranks`` holds every review's word ranks end to end, ``lengths`` how many
    belong to each review. Returns int32 rows and int64 kept lengths.
    """
    ids = np.where(ranks >= num_words - IMDB_INDEX_FROM, IMDB_OOV, ranks + IMDB_INDEX_FROM).astype(np.int32)
    n = len(lengths)
    kept = np.minimum(lengths + 1, maxlen)  # with the start token
    has_start = lengths + 1 <= maxlen  # the start token survives only when nothing is cut
    words_kept = kept - has_start
    ends = np.cumsum(lengths)  # one past each review's last word in ``ids``
    rows = np.repeat(np.arange(n), words_kept)
    step = np.arange(int(words_kept.sum())) - np.repeat(np.cumsum(words_kept) - words_kept, words_kept)
    columns = np.repeat(has_start.astype(np.int64), words_kept) + step
    x = np.zeros((n, maxlen), dtype=np.int32)
    x[rows, columns] = ids[np.repeat(ends - words_kept, words_kept) + step]
    x[has_start, 0] = IMDB_START
    return x, kept.astype(np.int64)


def _read_word_index(payload: bytes, origin: str) -> dict[str, int]:
    """A word index: a JSON object from words to distinct frequency ranks >= 1."""
    try:
        index = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{origin} is not a JSON word index ({exc})") from exc
    if not isinstance(index, dict) or not index:
        raise DataError(f"{origin} is not a JSON object mapping words to ranks")
    for word, rank in index.items():
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise DataError(f"{origin}: the word {word!r} has rank {rank!r}, not an integer >= 1")
    if len(set(index.values())) != len(index):
        raise DataError(f"{origin} gives the same rank to more than one word")
    return index


def _imdb_words(index: dict[str, int], num_words: int) -> tuple[str, ...]:
    """The text of every id below ``num_words`` under Keras's conventions."""
    words = [_IMDB_UNUSED] * num_words
    for special, text in _IMDB_SPECIAL.items():
        words[special] = text
    for word, rank in index.items():
        if rank + IMDB_INDEX_FROM < num_words:
            words[rank + IMDB_INDEX_FROM] = word
    return tuple(words)


def _synthetic_imdb(
    *,
    seed: int,
    reason: str,
    num_words: int = 30_000,
    maxlen: int = 150,
    n_train: int = _IMDB_TRAIN,
    n_test: int = _IMDB_TEST,
    markers: int = 3,
    spacing: float = 8.0,
) -> TextDataset:
    """A learnable stand-in with IMDB's shapes, ids and layout: random words plus sentiment markers.

    Review lengths (with the start token) follow a log-normal around IMDB's
    median of about 180 tokens, so about 40% of reviews are shorter than 150
    and the rest are cut to their last ``maxlen`` tokens (losing the start
    token, as real long reviews do). Words are drawn by a Zipf law over
    88,583 ranks, so ids >= ``num_words`` become OOV (2) as in the real data.
    ``markers`` positive and as many negative marker words (named ``pos1``...
    and ``neg1``... in ``words``) are scattered through each review, about one
    per ``spacing`` tokens and at least one, each agreeing with the label with
    probability 0.9. Labels are balanced.

    With the defaults a GRU (embedding 125, 100 units, Adam 1e-3, batch 64)
    learns it in one epoch on 3,000 reviews when it reads the last real token
    (test accuracy 0.99 with left padding); reading step ``maxlen`` of
    right-padded rows leaves the short reviews at chance (0.50) after that epoch.
    """
    rng = np.random.default_rng(seed)
    ranks_total = 88_583
    # Ranks with density ~ r**-1.1 on [1, ranks_total + 1), by inverting the cumulative distribution.
    tail = 1.0 - (ranks_total + 1.0) ** -0.1
    low = max(1, (num_words - IMDB_INDEX_FROM) // 30)
    high = min(num_words - IMDB_INDEX_FROM, max(low + 2 * markers, (num_words - IMDB_INDEX_FROM) // 10))
    marker_ids = rng.choice(np.arange(low, high), size=2 * markers, replace=False) + IMDB_INDEX_FROM
    negative_ids, positive_ids = marker_ids[:markers], marker_ids[markers:]

    def reviews(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        labels = rng.permutation(np.arange(n) % 2).astype(np.int64)
        full = np.clip(np.rint(rng.lognormal(np.log(180.0), 0.6, size=n)), 11, 2500).astype(np.int64)
        kept = np.minimum(full, maxlen)
        has_start = full <= maxlen
        valid = np.arange(maxlen)[None, :] < kept[:, None]
        ranks = np.minimum((1.0 - tail * rng.random(int(kept.sum()))) ** -10.0, ranks_total).astype(np.int64)
        x = np.zeros((n, maxlen), dtype=np.int32)
        x[valid] = np.where(ranks >= num_words - IMDB_INDEX_FROM, IMDB_OOV, ranks + IMDB_INDEX_FROM)
        x[has_start, 0] = IMDB_START
        first = has_start.astype(np.int64)  # first word column
        count = 1 + rng.poisson(kept / spacing)
        rows = np.repeat(np.arange(n), count)
        columns = first[rows] + (rng.random(rows.size) * (kept[rows] - first[rows])).astype(np.int64)
        agrees = rng.random(rows.size) < 0.9
        positive = (labels[rows] == 1) == agrees
        chosen = rng.integers(0, markers, size=rows.size)
        x[rows, columns] = np.where(positive, positive_ids[chosen], negative_ids[chosen])
        return x, kept, labels

    x_train, len_train, y_train = reviews(n_train)
    x_test, len_test, y_test = reviews(n_test)
    words = [f"word{i - IMDB_INDEX_FROM}" for i in range(num_words)]
    for special, text in _IMDB_SPECIAL.items():
        words[special] = text
    words[IMDB_INDEX_FROM] = _IMDB_UNUSED
    for j, (neg, pos) in enumerate(zip(negative_ids, positive_ids), start=1):
        words[neg], words[pos] = f"neg{j}", f"pos{j}"
    source = (
        f"SYNTHETIC STAND-IN, not IMDB ({reason}): {n_train:,} training and {n_test:,} test reviews of "
        f"random words whose sentiment is carried by {2 * markers} marker words (seed {seed}); "
        "results resting on it are not IMDB results"
    )
    return TextDataset(
        x_train, len_train, y_train, x_test, len_test, y_test, num_words, maxlen, tuple(words), True, source
    )
