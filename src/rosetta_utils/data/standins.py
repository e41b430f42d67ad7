"""Synthetic stand-ins with the shapes and conventions of the real data sets.

When a loader may not download (``offline=True``, ``ROSETTA_OFFLINE=1``) or
cannot reach the network, and nothing is cached, it returns one of these
instead: learnable, seeded, of the real data's shapes, with ``synthetic=True``
and a ``source`` line that starts with ``SYNTHETIC STAND-IN`` and says why, so
that every result resting on it can say so.
"""

from __future__ import annotations

import numpy as np

from .datasets import (
    CIFAR10_CLASSES,
    IMAGE_SHAPE,
    IMDB_INDEX_FROM,
    IMDB_OOV,
    IMDB_SPECIAL,
    IMDB_START,
    IMDB_UNUSED,
    ImageDataset,
    TextDataset,
)

#: How every stand-in's ``source`` line starts (the build looks for it in a page's outputs).
STAND_IN_MARK = "SYNTHETIC STAND-IN"

#: The real data sets' sizes: CIFAR-10's training and test images, IMDB's reviews.
CIFAR10_TRAIN, CIFAR10_TEST = 50_000, 10_000
IMDB_TRAIN, IMDB_TEST = 25_000, 25_000


def synthetic_cifar10(
    *, seed: int, reason: str, n_train: int = CIFAR10_TRAIN, n_test: int = CIFAR10_TEST
) -> ImageDataset:
    """A learnable stand-in with CIFAR-10's shapes: one coloured, oriented grating per class plus noise.

    Each image shows its class's pattern shifted by up to 4 pixels, at a
    random contrast of 0.7 to 0.9, mixed with uniform noise: learnable enough
    that the smoke profile's two short epochs beat chance clearly in every
    framework (tests/test_page_cifar10.py holds them to it). Classes are
    balanced.
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
    bank = (colours[:, None] + 0.3 * wave).astype(np.float32).reshape(-1, *IMAGE_SHAPE)
    n_shifts = dy.size
    block = 4096
    noise = np.empty((block, *IMAGE_SHAPE), dtype=np.float32)

    def images(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.permutation(np.arange(n) % k).astype(np.int64)
        x = np.empty((n, *IMAGE_SHAPE), dtype=np.float32)
        for start in range(0, n, block):
            stop = min(start + block, n)
            m = stop - start
            chunk, grain = x[start:stop], noise[:m]
            np.take(bank, labels[start:stop] * n_shifts + rng.integers(0, n_shifts, size=m), axis=0, out=chunk,
                    mode="clip")  # the indices are in range; "raise" would copy through a buffer
            contrast = rng.uniform(0.7, 0.9, size=(m, 1, 1, 1)).astype(np.float32)
            chunk *= contrast
            rng.random(out=grain, dtype=np.float32)
            grain *= 1 - contrast
            chunk += grain
            np.clip(chunk, 0.0, 1.0, out=chunk)
        return x, labels

    x_train, y_train = images(n_train)
    x_test, y_test = images(n_test)
    source = (
        f"{STAND_IN_MARK}, not CIFAR-10 ({reason}): {n_train:,} training and {n_test:,} test images "
        f"of class patterns plus noise (seed {seed}); results resting on it are not CIFAR-10 results"
    )
    return ImageDataset(x_train, y_train, x_test, y_test, CIFAR10_CLASSES, True, source)


def synthetic_imdb(
    *,
    seed: int,
    reason: str,
    num_words: int = 30_000,
    maxlen: int = 150,
    n_train: int = IMDB_TRAIN,
    n_test: int = IMDB_TEST,
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
    for special, text in IMDB_SPECIAL.items():
        words[special] = text
    words[IMDB_INDEX_FROM] = IMDB_UNUSED
    for j, (neg, pos) in enumerate(zip(negative_ids, positive_ids), start=1):
        words[neg], words[pos] = f"neg{j}", f"pos{j}"
    source = (
        f"{STAND_IN_MARK}, not IMDB ({reason}): {n_train:,} training and {n_test:,} test reviews of "
        f"random words whose sentiment is carried by {2 * markers} marker words (seed {seed}); "
        "results resting on it are not IMDB results"
    )
    return TextDataset(
        x_train, len_train, y_train, x_test, len_test, y_test, num_words, maxlen, tuple(words), True, source
    )
