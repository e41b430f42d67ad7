"""ResNet-50's ImageNet weights, one published set for every framework: :func:`resnet50_imagenet_weights`.

The set is the one Keras Applications publishes for ``keras.applications.ResNet50``
without its classifier (``resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5``,
MD5 below, as ``keras/src/applications/resnet.py`` pins it): MSRA's original
Caffe ResNet-50 (He et al., 2015), converted by Keras, so the network is "v1"
(the stride in the first 1x1 convolution) and the inputs it expects are
Caffe's: BGR, 0-255, each channel's ImageNet mean subtracted, no scaling.

The file is downloaded once with pooch into the data cache
(:mod:`rosetta_utils.data.fetch`), checked against its MD5 on the bytes that
are read, read without Keras (:mod:`rosetta_utils.keras_h5`) and converted to
the book's canonical layout (torchvision's names, OIHW kernels, no
convolution biases: :func:`rosetta_utils.resnet50_layout.resnet50_weight_shapes`).
Keras's convolutions carry biases; each is folded into the batch norm that
follows it (``BN(conv(x) + b)`` is ``BN(conv(x))`` with ``running_mean - b``),
so the canonical set computes exactly what Keras's model computes.

Offline (``offline=True`` or ``ROSETTA_OFFLINE=1``), or without a network,
and with no cached copy, the result is a labelled stand-in: seeded random
weights whose ``source`` starts with ``SYNTHETIC STAND-IN``
(:data:`rosetta_utils.data.standins.STAND_IN_MARK`). A wrong checksum, a file
cut short, or arrays missing, extra or of the wrong shape raise
:class:`~rosetta_utils.data.errors.DataError` naming the problem, and leave
nothing in the cache.

``ROSETTA_RESNET50_WEIGHTS="<url> md5:<hex>"`` names another copy of the
file (a mirror); a hash other than the published one marks the weights as a
stand-in, since results resting on them are not the published weights'.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import numpy as np

from .data.errors import DataError, StandInWarning
from .data.fetch import NetworkUnavailable, cache_dir, discard, fetch, offline_reason, verified_bytes
from .data.standins import STAND_IN_MARK
from .keras_h5 import read_keras_weights, weight_key
from .resnet50_layout import KERAS_BATCH_NORM, keras_layer_pairs, keras_resnet50_layout, resnet50_weight_shapes
from .transplant import conv_hwio_to_oihw, conv_oihw_to_hwio, random_resnet50_weights

KERAS_RESNET50_FILE = "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5"
KERAS_RESNET50_URL = f"https://storage.googleapis.com/tensorflow/keras-applications/resnet/{KERAS_RESNET50_FILE}"
#: The MD5 that Keras pins for the file (keras/src/applications/resnet.py, WEIGHTS_HASHES["resnet50"][1]).
KERAS_RESNET50_MD5 = "4d473c1dd8becc155b73f8504c6f6626"

#: Top-1 accuracy on ImageNet's validation set, single centre crop, as published:
#: Keras's, for this file (the table of keras.io/api/applications/), and MSRA's, for
#: the Caffe model it was converted from (github.com/KaimingHe/deep-residual-networks,
#: README, "1-crop validation error": 24.7%).
KERAS_RESNET50_TOP1 = 0.749
MSRA_RESNET50_TOP1 = 0.753
#: Gluon's own ``resnet50_v1`` weights (another training, not this file): the table of
#: MXNet's Gluon model zoo documentation (docs/api/python/gluon/model_zoo.md).
GLUON_RESNET50_V1_TOP1 = 0.7647

#: Names another copy of the weights file: ``"<url> md5:<32 hex digits>"``.
MIRROR_VARIABLE = "ROSETTA_RESNET50_WEIGHTS"


def check_weight_set(
    found: dict[str, tuple[int, ...]], expected: dict[str, tuple[int, ...]], label: str
) -> None:
    """Raise :class:`DataError` naming every missing, extra and misshapen array of ``found``
    (name → shape) against ``expected``; nothing when they match."""
    missing = [name for name in expected if name not in found]
    extra = [name for name in found if name not in expected]
    misshapen = [
        f"{name} {tuple(found[name])} (expected {tuple(expected[name])})"
        for name in expected
        if name in found and tuple(found[name]) != tuple(expected[name])
    ]
    problems = []
    for what, names in (("missing", missing), ("extra", extra), ("of the wrong shape", misshapen)):
        if names:
            problems.append(f"{len(names)} {what}: {', '.join(names)}")
    if problems:
        raise DataError(f"{label} does not hold ResNet-50's weights: " + "; ".join(problems) + "; it was not used")


def canonical_from_keras(layers: dict[str, dict[str, np.ndarray]], label: str = "the weights file") -> dict[str, np.ndarray]:
    """Keras's ResNet-50 weights (``{layer: {weight name: array}}``, as read from its file) in the
    canonical layout: torchvision's names, OIHW kernels, each convolution's bias folded into the
    running mean of the batch norm after it. Refuses missing, extra or misshapen arrays, naming them."""
    found = {
        f"{layer}/{weight_key(name)}": np.asarray(value)
        for layer, weights in layers.items()
        for name, value in weights.items()
    }
    expected = {
        f"{layer}/{weight_key(name)}": shape for layer, weights in keras_resnet50_layout().items() for name, shape in weights
    }
    check_weight_set({name: value.shape for name, value in found.items()}, expected, label)
    canonical: dict[str, np.ndarray] = {}
    for keras_conv, keras_bn, torch_conv, torch_bn in keras_layer_pairs():
        canonical[f"{torch_conv}.weight"] = conv_hwio_to_oihw(found[f"{keras_conv}/kernel"].astype(np.float32))
        bias = found[f"{keras_conv}/bias"].astype(np.float32)
        for keras, torch in KERAS_BATCH_NORM:
            canonical[f"{torch_bn}.{torch}"] = found[f"{keras_bn}/{keras}"].astype(np.float32)
        canonical[f"{torch_bn}.running_mean"] = canonical[f"{torch_bn}.running_mean"] - bias
    check_resnet50_weights(canonical, label)
    return canonical


def keras_from_canonical(
    weights: dict[str, np.ndarray], conv_biases: dict[str, np.ndarray] | None = None
) -> dict[str, dict[str, np.ndarray]]:
    """The inverse of :func:`canonical_from_keras`: ``{layer: {weight name: array}}`` in the
    published file's layout (weightless layers as ``{}``), ready for
    :func:`rosetta_utils.keras_h5.write_keras_weights`. ``conv_biases`` (Keras's conv layer name
    → bias, zero where not given) are unfolded from the running means."""
    check_resnet50_weights(weights, "the canonical weights")
    conv_biases = conv_biases or {}
    by_keras = {}
    for keras_conv, keras_bn, torch_conv, torch_bn in keras_layer_pairs():
        bias = np.asarray(conv_biases.get(keras_conv, np.zeros(weights[f"{torch_conv}.weight"].shape[0])), np.float32)
        by_keras[f"{keras_conv}/kernel"] = conv_oihw_to_hwio(weights[f"{torch_conv}.weight"])
        by_keras[f"{keras_conv}/bias"] = bias
        for keras, torch in KERAS_BATCH_NORM:
            by_keras[f"{keras_bn}/{keras}"] = weights[f"{torch_bn}.{torch}"]
        by_keras[f"{keras_bn}/moving_mean"] = weights[f"{torch_bn}.running_mean"] + bias
    return {
        layer: {name: by_keras[f"{layer}/{weight_key(name)}"] for name, _ in entries}
        for layer, entries in keras_resnet50_layout().items()
    }


def check_resnet50_weights(weights: dict[str, np.ndarray], label: str = "the weights") -> None:
    """Refuse a canonical ResNet-50 state dict with missing, extra or misshapen arrays, naming them."""
    check_weight_set({name: np.shape(value) for name, value in weights.items()}, resnet50_weight_shapes(), label)


@dataclass(frozen=True)
class PretrainedWeights:
    """ResNet-50 weights in the canonical layout, and where they come from.

    ``stand_in`` is True unless they are the published file's (``source`` then starts with
    ``SYNTHETIC STAND-IN`` and says why); ``path`` is the verified file in the cache (None for
    seeded random weights), which Keras's own loader can read too.
    """

    weights: dict[str, np.ndarray] = field(repr=False)
    source: str
    stand_in: bool
    path: Path | None = None
    md5: str | None = None

    @property
    def note(self) -> str:
        """A few words to put beside a result that rests on these weights."""
        if self.stand_in:
            return f"{STAND_IN_MARK} for ImageNet's weights"
        return "ImageNet weights (Keras's file, MSRA's Caffe model)"


def weights_location(url: str | None = None, md5: str | None = None) -> tuple[str, str]:
    """The URL and MD5 to fetch: the arguments, else ``$ROSETTA_RESNET50_WEIGHTS``, else the
    published file's."""
    if url is None and md5 is None:
        mirror = os.environ.get(MIRROR_VARIABLE, "").strip()
        if mirror:
            match = re.fullmatch(r"(\S+)\s+md5:([0-9a-fA-F]{32})", mirror)
            if not match:
                raise ValueError(
                    f"{MIRROR_VARIABLE} must be '<url> md5:<32 hex digits>', not {mirror!r}"
                )
            return match.group(1), match.group(2).lower()
    url = url or KERAS_RESNET50_URL
    md5 = (md5 or KERAS_RESNET50_MD5).lower().removeprefix("md5:")
    if not re.fullmatch(r"[0-9a-f]{32}", md5):
        raise ValueError(f"md5 must be 32 hexadecimal digits, not {md5!r}")
    return url, md5


def cached_weights_path(url: str, md5: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where the file with this MD5 lives in the cache (its name carries the hash's start, so
    two copies with different contents never share a name)."""
    name = PurePosixPath(urlsplit(url).path).name or KERAS_RESNET50_FILE
    stem, dot, suffix = name.rpartition(".")
    return cache_dir(data_dir) / "weights" / (f"{stem}-{md5[:12]}.{suffix}" if dot else f"{name}-{md5[:12]}")


def downloads_allowed(offline: bool | None = None) -> bool:
    """Whether the page may download (neither ``offline=True`` nor ``ROSETTA_OFFLINE=1``)."""
    return offline_reason(offline) is None


def resnet50_imagenet_weights(
    *,
    seed: int = 0,
    url: str | None = None,
    md5: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    offline: bool | None = None,
) -> PretrainedWeights:
    """Keras's ImageNet ResNet-50 weights in the canonical layout, or a labelled stand-in.

    A cached copy whose MD5 matches is used, offline too. Otherwise the file is downloaded
    (pooch, into ``<cache>/weights``), unless downloads are off; then, or when the network is
    unreachable (a :class:`StandInWarning` says so), seeded random weights (``seed``) come back
    as a stand-in. Raises :class:`DataError`, leaving nothing cached, for a download that fails
    (HTTP error, checksum mismatch, a transfer cut short) or a file that is not ResNet-50's
    weights (not HDF5, arrays missing, extra or misshapen).
    """
    url, md5 = weights_location(url, md5)
    path = cached_weights_path(url, md5, data_dir)
    label = f"{path.name} (from {url})"
    if not path.is_file():
        reason = offline_reason(offline)
        if reason is None:
            try:
                path = fetch(url, f"md5:{md5}", path.name, path.parent)
            except NetworkUnavailable as exc:
                reason = f"no network: {urlsplit(url).hostname or url} could not be reached"
                warnings.warn(
                    f"ResNet-50's weights could not be downloaded because the network is unreachable ({exc}); "
                    "using a SYNTHETIC STAND-IN of seeded random weights, whose features are not ImageNet features.",
                    StandInWarning,
                    stacklevel=2,
                )
        if reason is not None:
            return PretrainedWeights(
                random_resnet50_weights(seed),
                f"{STAND_IN_MARK} for ImageNet's weights ({reason}; no cached copy of {path.name}): "
                f"seeded random weights (seed {seed}); features resting on them are not ImageNet features",
                stand_in=True,
            )
    try:
        weights = canonical_from_keras(read_keras_weights(verified_bytes(path, "md5", md5, label), label), label)
    except DataError:
        discard([path])  # nothing unusable stays in the cache
        raise
    if md5 == KERAS_RESNET50_MD5:
        source = (
            f"ImageNet weights: Keras's ResNet-50, converted from MSRA's Caffe model, "
            f"{KERAS_RESNET50_FILE} (md5 {md5}, as published)"
        )
        return PretrainedWeights(weights, source, stand_in=False, path=path, md5=md5)
    source = (
        f"{STAND_IN_MARK} for ImageNet's weights: {path.name} from {url} has md5 {md5}, not the "
        f"published file's {KERAS_RESNET50_MD5}; features resting on it are not ImageNet features"
    )
    return PretrainedWeights(weights, source, stand_in=True, path=path, md5=md5)
