"""The book's data sets: downloaded once, verified against a pinned checksum, cached.

:func:`cifar10` returns CIFAR-10 as numpy arrays (images NCHW ``float32`` in
[0, 1], labels ``int64``) in an :class:`ImageDataset`; :func:`imdb` returns
the IMDB reviews of Keras's ``imdb.npz`` with Keras's conventions, cut to
their last ``maxlen`` tokens and right-padded, in a :class:`TextDataset`
(:func:`pre_padded` moves the padding to the front). Offline
(``offline=True`` or ``ROSETTA_OFFLINE=1``), or when the network is
unreachable, and with no cached copy, both return a learnable synthetic
stand-in of the same shapes whose ``synthetic`` flag is set and whose
``source`` line says so. The stand-in never hides a real problem: HTTP
errors, checksum mismatches and broken files raise :class:`DataError` and
leave the cache as it was. :func:`imagenet_preprocess` is the ResNet-50
chapter's preprocessing.

One module per job:

``datasets``
    :class:`ImageDataset`, :class:`TextDataset`, :func:`pre_padded`, and the
    conventions of their arrays (CIFAR-10's classes, Keras's token ids);
``errors``
    :class:`DataError` and :class:`StandInWarning`;
``fetch``
    the cache folder (:func:`cache_dir`), downloads verified against pinned
    checksums, offline mode;
``safe_tar``
    extraction of an archive into the cache: checked member by member,
    renamed into place only once read and valid;
``safe_npz``
    ``.npz`` arrays read without letting a pickle run code;
``cifar10_loader``, ``imdb_loader``
    the two data sets, from their official files;
``standins``
    the synthetic stand-ins;
``preprocess``
    ImageNet preprocessing.

Importing this package imports no deep learning framework.
"""

from __future__ import annotations

from .cifar10_loader import CIFAR10_SHA256, CIFAR10_URL, cifar10
from .datasets import (
    CIFAR10_CLASSES,
    IMDB_INDEX_FROM,
    IMDB_OOV,
    IMDB_PAD,
    IMDB_START,
    ImageDataset,
    TextDataset,
    pre_padded,
)
from .errors import DataError, StandInWarning
from .fetch import TIMEOUT, cache_dir
from .imdb_loader import (
    IMDB_SHA256,
    IMDB_SHUFFLE_SEED,
    IMDB_URL,
    IMDB_WORD_INDEX_HASH,
    IMDB_WORD_INDEX_URL,
    imdb,
)
from .preprocess import IMAGENET_MEAN, IMAGENET_STD, imagenet_preprocess

__all__ = [
    "CIFAR10_CLASSES",
    "CIFAR10_SHA256",
    "CIFAR10_URL",
    "DataError",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
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
    "TIMEOUT",
    "TextDataset",
    "cache_dir",
    "cifar10",
    "imagenet_preprocess",
    "imdb",
    "pre_padded",
]
