"""IMDB reviews from Keras's ``imdb.npz`` and its word index: :func:`imdb`.

The conventions are Keras's ``imdb.load_data`` (start 1, OOV 2, word ranks
shifted by 3, vocabulary ``num_words``, Keras's shuffle); each review is then
cut to its last ``maxlen`` tokens and right-padded with 0, and its valid
length kept. Both files are fetched into the cache (:mod:`.fetch`) and pinned
by the checksums Keras pins. ``imdb.npz`` holds object arrays of lists, which
only a pickle can store: its checksum is verified on the bytes in memory
before anything is unpickled (a cached copy too, every time), and
:mod:`.safe_npz` then accepts nothing but numpy arrays. Offline, or without a
network, and with nothing cached, :func:`imdb` returns the stand-in of
:mod:`.standins`.
"""

from __future__ import annotations

import itertools
import json
import os
import warnings
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import numpy as np

from .datasets import IMDB_INDEX_FROM, IMDB_OOV, IMDB_SPECIAL, IMDB_START, IMDB_UNUSED, TextDataset
from .errors import DataError, StandInWarning
from .fetch import (
    NetworkUnavailable,
    cache_dir,
    checked_known_hash,
    checked_sha256,
    discard,
    fetch,
    offline_reason,
    verified_bytes,
)
from .safe_npz import read_npz
from .standins import synthetic_imdb

_IMDB_FOLDER_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
IMDB_URL = _IMDB_FOLDER_URL + "imdb.npz"
#: SHA-256 of Keras's ``imdb.npz`` (the hash ``keras.datasets.imdb.load_data`` pins).
IMDB_SHA256 = "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f"
IMDB_WORD_INDEX_URL = _IMDB_FOLDER_URL + "imdb_word_index.json"
#: Keras pins the word index by its MD5 (``keras.datasets.imdb.get_word_index``).
IMDB_WORD_INDEX_HASH = "md5:bfafd718b763782e994055a2d397834f"

#: Keras shuffles the training reviews, then the test reviews, with one ``RandomState(113)``.
IMDB_SHUFFLE_SEED = 113

_IMDB_ARRAYS = ("x_train", "y_train", "x_test", "y_test")


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
    sha256 = checked_sha256(sha256)
    index_algorithm, index_digest = checked_known_hash(word_index_hash, "word_index_hash")
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
                payloads[path] = verified_bytes(path, algorithm, digest, origins[path])
            except DataError as exc:
                raise DataError(f"{exc}; delete that file to download it again") from exc

    downloaded: list[Path] = []  # removed again if this call fails
    missing = [item for item in wanted if item[3] not in payloads]
    if missing:
        reason = offline_reason(offline)
        if reason is None:
            file_url = url
            try:
                for file_url, algorithm, digest, path in missing:
                    fetched = fetch(file_url, f"{algorithm}:{digest}", path.name, cache)
                    downloaded.append(fetched)
                    origins[path] = f"the download from {file_url}"
                    payloads[path] = verified_bytes(fetched, algorithm, digest, origins[path])
            except NetworkUnavailable as exc:
                discard(downloaded)
                reason = f"no network: {urlsplit(file_url).hostname or file_url} could not be reached"
                warnings.warn(
                    f"IMDB could not be downloaded because the network is unreachable ({exc}); "
                    "using a SYNTHETIC STAND-IN instead, whose results are not IMDB results.",
                    StandInWarning,
                    stacklevel=2,
                )
            except BaseException:
                discard(downloaded)
                raise
        if reason is not None:
            return synthetic_imdb(seed=seed, reason=reason, num_words=num_words, maxlen=maxlen)

    npz_path, index_path = wanted[0][3], wanted[1][3]
    try:
        arrays = _read_imdb_npz(payloads[npz_path], origins[npz_path])
        words = _imdb_words(_read_word_index(payloads[index_path], origins[index_path]), num_words)
    except DataError as exc:
        if downloaded:
            discard(downloaded)
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
    """``num_words`` (at least 20) and ``maxlen`` (at least 1) as ints, else a ValueError."""
    if isinstance(num_words, bool) or not isinstance(num_words, (int, np.integer)) or num_words < 20:
        raise ValueError(f"num_words must be an integer of at least 20, not {num_words!r}")
    if isinstance(maxlen, bool) or not isinstance(maxlen, (int, np.integer)) or maxlen < 1:
        raise ValueError(f"maxlen must be a positive integer, not {maxlen!r}")
    return int(num_words), int(maxlen)


def _read_imdb_npz(payload: bytes, origin: str) -> dict[str, np.ndarray]:
    """The arrays of a verified ``imdb.npz``, checked: reviews as lists of ids >= 0, labels 0/1.

    Returns ``y_train``/``y_test`` as int64 and, instead of the object arrays,
    ``ranks_train``/``ranks_test`` (every review's word ranks end to end) and
    ``lengths_train``/``lengths_test``.
    """
    arrays = read_npz(payload, _IMDB_ARRAYS, origin)
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
    words = [IMDB_UNUSED] * num_words
    for special, text in IMDB_SPECIAL.items():
        words[special] = text
    for word, rank in index.items():
        if rank + IMDB_INDEX_FROM < num_words:
            words[rank + IMDB_INDEX_FROM] = word
    return tuple(words)
