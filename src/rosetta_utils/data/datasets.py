"""What the loaders return: :class:`ImageDataset` and :class:`TextDataset`, and the
conventions their arrays follow (CIFAR-10's classes, Keras's IMDB token ids).

:func:`pre_padded` moves a :class:`TextDataset`'s padding from the end of each
row to its front.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
#: One CIFAR-10 image, channels first.
IMAGE_SHAPE = (3, 32, 32)

#: Keras's token conventions: 0 pads, 1 starts a review, 2 replaces words outside
#: the vocabulary, and the word of frequency rank r (1 = most frequent) is id r + 3.
IMDB_PAD, IMDB_START, IMDB_OOV, IMDB_INDEX_FROM = 0, 1, 2, 3
#: The text of the special ids in :attr:`TextDataset.words`.
IMDB_SPECIAL = {IMDB_PAD: "<PAD>", IMDB_START: "<START>", IMDB_OOV: "<OOV>"}
#: The text of an id whose rank no word has (id 3: rank 0 is never used).
IMDB_UNUSED = "<UNUSED>"


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
