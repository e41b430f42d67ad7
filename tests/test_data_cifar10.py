"""rosetta_utils.data.cifar10: download, verify, cache, fail cleanly, stand in offline.

Every archive is built here in the official layout with a few records per
file and served from 127.0.0.1; nothing touches the network.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rosetta_utils import data
from rosetta_utils.data import DataError, StandInWarning, cifar10
from rosetta_utils.data.standins import synthetic_cifar10

from page_checks import snapshot
from local_http_server import unused_port_url

RECORD = 3073
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
TRAIN_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)]
TRAIN_COUNTS = [3, 2, 4, 1, 2]
TEST_COUNT = 3


pytestmark = pytest.mark.usefixtures("download_environment")


def records(labels, rng) -> tuple[bytes, np.ndarray]:
    """Records for ``labels`` with random pixels; the first image is a recognisable test card."""
    pixels = rng.integers(0, 256, size=(len(labels), 3, 32, 32), dtype=np.uint8)
    pixels[0, 0] = 255  # red channel all on
    pixels[0, 1] = 0  # green all off
    pixels[0, 2] = np.arange(32, dtype=np.uint8)[None, :] * 8  # blue rises along each row
    raw = b"".join(bytes([label]) + image.tobytes() for label, image in zip(labels, pixels))
    return raw, pixels


def tar_gz(members: dict[str, bytes], special: list[tarfile.TarInfo] = ()) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folder = tarfile.TarInfo("cifar-10-batches-bin")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(folder)
        for name, payload in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(payload), 0o644
            tar.addfile(info, io.BytesIO(payload))
        for info in special:
            tar.addfile(info)
    return gzip.compress(buffer.getvalue(), mtime=0)


def sha(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


@dataclass
class Archive:
    payload: bytes
    members: dict[str, bytes]
    x_train: np.ndarray  # uint8 NCHW, as written
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def sha256(self) -> str:
        return sha(self.payload)


def make_archive(seed: int = 0, **replace: bytes | None) -> Archive:
    """A small archive in the official layout; ``replace`` swaps (bytes) or drops (None) a file."""
    rng = np.random.default_rng(seed)
    members, xs, ys = {}, [], []
    for name, count in zip(TRAIN_FILES, TRAIN_COUNTS):
        labels = rng.integers(0, 10, size=count).astype(np.uint8)
        raw, pixels = records(labels, rng)
        members[f"cifar-10-batches-bin/{name}"] = raw
        xs.append(pixels)
        ys.append(labels)
    test_labels = np.array([9, 0, 5], dtype=np.uint8)
    test_raw, test_pixels = records(test_labels, rng)
    members["cifar-10-batches-bin/test_batch.bin"] = test_raw
    members["cifar-10-batches-bin/batches.meta.txt"] = ("\n".join(CLASSES) + "\n\n").encode()
    for name, payload in replace.items():
        key = f"cifar-10-batches-bin/{name.replace('__', '.')}"
        if payload is None:
            del members[key]
        else:
            members[key] = payload
    return Archive(tar_gz(members), members, np.concatenate(xs), np.concatenate(ys), test_pixels, test_labels)



@pytest.fixture(scope="module")
def good() -> Archive:
    return make_archive()


def test_download_gives_exactly_the_archived_images(server, good, tmp_path):
    cache = tmp_path / "cache"
    url = server.add("/cifar-10-binary.tar.gz", good.payload)

    ds = cifar10(url=url, sha256=good.sha256, data_dir=cache)

    assert not ds.synthetic
    assert ds.classes == CLASSES
    assert ds.x_train.shape == (sum(TRAIN_COUNTS), 3, 32, 32) and ds.x_test.shape == (TEST_COUNT, 3, 32, 32)
    assert ds.x_train.dtype == ds.x_test.dtype == np.float32
    assert ds.y_train.dtype == ds.y_test.dtype == np.int64
    np.testing.assert_array_equal(ds.y_train, good.y_train.astype(np.int64))
    np.testing.assert_array_equal(ds.y_test, [9, 0, 5])
    np.testing.assert_array_equal(ds.x_train, good.x_train.astype(np.float32) / np.float32(255))
    np.testing.assert_array_equal(ds.x_test, good.x_test.astype(np.float32) / np.float32(255))
    # NCHW straight from the record bytes: 1 label byte, then 1024 red, 1024 green, 1024 blue, row-major.
    first = good.members["cifar-10-batches-bin/data_batch_1.bin"][:RECORD]
    assert ds.y_train[0] == first[0]
    assert ds.x_train[0, 2, 5, 7] == np.float32(first[1 + 2 * 1024 + 5 * 32 + 7]) / np.float32(255)
    assert np.all(ds.x_train[0, 0] == 1.0) and np.all(ds.x_train[0, 1] == 0.0)
    np.testing.assert_allclose(ds.x_test[0, 2, 3], np.arange(32) * 8 / 255, rtol=1e-6)
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    # The page's line names the archive and its checksum.
    assert "cifar-10-binary.tar.gz" in ds.source and good.sha256 in ds.source
    assert ds.describe() == ds.source == str(ds) and "\n" not in ds.source
    # The cache holds the archive (its name carries the checksum) and the extraction, nothing else.
    tag = good.sha256[:16]
    top = sorted(p.name for p in cache.iterdir())
    assert top == sorted([f"cifar-10-{tag}", f"cifar-10-binary-{tag}.tar.gz"])


def test_second_call_uses_the_cache_without_the_server(server, good, tmp_path):
    cache = tmp_path / "cache"
    url = server.add("/cifar-10-binary.tar.gz", good.payload)
    first = cifar10(url=url, sha256=good.sha256, data_dir=cache)
    server.stop()
    assert server.requests == ["/cifar-10-binary.tar.gz"]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: the cache answers
        again = cifar10(url=url, sha256=good.sha256, data_dir=cache)
        offline = cifar10(url=url, sha256=good.sha256, data_dir=cache, offline=True)
    for ds in (again, offline):
        assert not ds.synthetic
        np.testing.assert_array_equal(ds.x_train, first.x_train)
        np.testing.assert_array_equal(ds.y_test, first.y_test)


def test_data_dir_from_environment(server, good, tmp_path, monkeypatch):
    cache = tmp_path / "from-env"
    monkeypatch.setenv("ROSETTA_DATA_DIR", str(cache))
    assert data.cache_dir() == cache
    assert data.cache_dir(tmp_path / "arg") == tmp_path / "arg"
    ds = cifar10(url=server.add("/c.tar.gz", good.payload), sha256=good.sha256)
    assert not ds.synthetic
    assert (cache / f"cifar-10-{good.sha256[:16]}" / "cifar-10-batches-bin" / "test_batch.bin").is_file()


def _escaping(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return tar_gz(make_archive().members, [info])


def _failure_cases():
    """(id, route kwargs or None for a closed port, payload's checksum to pass, message fragments)."""
    archive = make_archive(seed=1)
    cut = archive.payload[: len(archive.payload) // 2]
    no_trailer = archive.payload[:-4]
    short_record = make_archive(seed=1, data_batch_3__bin=b"\x01" * (2 * RECORD + 5))
    empty_file = make_archive(seed=1, test_batch__bin=b"")
    bad_label = make_archive(seed=1, data_batch_2__bin=bytes([10]) + bytes(3072))
    missing = make_archive(seed=1, test_batch__bin=None)
    nine_classes = make_archive(seed=1, batches__meta__txt="\n".join(CLASSES[:9]).encode())
    dotdot = _escaping("cifar-10-batches-bin/../../evil.bin")
    absolute = _escaping("/tmp/rosetta-evil.bin")
    symlink = _escaping("cifar-10-batches-bin/link", tarfile.SYMTYPE, "/etc/passwd")
    hardlink = _escaping("cifar-10-batches-bin/hard", tarfile.LNKTYPE, "/etc/passwd")
    device = _escaping("cifar-10-batches-bin/dev", tarfile.CHRTYPE)
    return [
        ("wrong-checksum", dict(body=archive.payload), sha(b"another archive"), ["checksum mismatch", "/c.tar.gz"]),
        ("truncated-half", dict(body=cut), sha(cut), ["truncated or corrupt", ".tar.gz"]),
        ("truncated-trailer", dict(body=no_trailer), sha(no_trailer), ["truncated or corrupt"]),
        ("http-404", dict(body=b"gone", status=404), archive.sha256, ["HTTP 404", "/c.tar.gz"]),
        ("http-500", dict(body=b"oops", status=500), archive.sha256, ["HTTP 500", "/c.tar.gz"]),
        (
            "dropped-mid-transfer",
            dict(body=archive.payload[:1000], announce_length=len(archive.payload)),
            archive.sha256,
            ["connection dropped", "/c.tar.gz"],
        ),
        ("record-size", dict(body=short_record.payload), short_record.sha256, ["data_batch_3.bin", "6,151 bytes"]),
        ("empty-file", dict(body=empty_file.payload), empty_file.sha256, ["test_batch.bin", "0 bytes"]),
        ("label-out-of-range", dict(body=bad_label.payload), bad_label.sha256, ["data_batch_2.bin", "label 10"]),
        ("missing-member", dict(body=missing.payload), missing.sha256, ["lacks test_batch.bin"]),
        ("nine-classes", dict(body=nine_classes.payload), nine_classes.sha256, ["batches.meta.txt", "9 classes"]),
        ("member-dotdot", dict(body=dotdot), sha(dotdot), ["../../evil.bin", "outside"]),
        ("member-absolute", dict(body=absolute), sha(absolute), ["/tmp/rosetta-evil.bin", "outside"]),
        ("member-symlink", dict(body=symlink), sha(symlink), ["cifar-10-batches-bin/link", "link"]),
        ("member-hardlink", dict(body=hardlink), sha(hardlink), ["cifar-10-batches-bin/hard", "link"]),
        ("member-device", dict(body=device), sha(device), ["cifar-10-batches-bin/dev", "special file"]),
    ]


FAILURES = _failure_cases()


@pytest.mark.parametrize("with_good_cache", [False, True], ids=["empty-cache", "good-cache"])
@pytest.mark.parametrize("route, checksum, fragments", [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_failures_raise_and_leave_the_cache_clean(server, good, tmp_path, route, checksum, fragments, with_good_cache):
    cache = tmp_path / "cache"
    if with_good_cache:
        cifar10(url=server.add("/good.tar.gz", good.payload), sha256=good.sha256, data_dir=cache)
    before = snapshot(cache)
    url = server.add("/c.tar.gz", **route)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a real failure never falls back to the stand-in
        with pytest.raises(DataError) as raised:
            cifar10(url=url, sha256=checksum, data_dir=cache)

    for fragment in [*fragments, url]:  # the problem, and where the data came from
        assert fragment in str(raised.value)
    assert snapshot(cache) == before  # no partial archive, temp folder or half extraction
    assert not (tmp_path / "evil.bin").exists() and not Path("/tmp/rosetta-evil.bin").exists()
    if with_good_cache:
        server.stop()
        kept = cifar10(url="http://127.0.0.1:9/good.tar.gz", sha256=good.sha256, data_dir=cache, offline=True)
        assert not kept.synthetic
        np.testing.assert_array_equal(kept.y_train, good.y_train)


def linear_probe_accuracy(ds, n_train: int = 3000, n_test: int = 1000) -> float:
    """Least squares on 8x8 average-pooled pixels, one-hot targets; accuracy on test images."""

    def features(x):
        pooled = x.reshape(len(x), 3, 8, 4, 8, 4).mean(axis=(3, 5)).reshape(len(x), -1)
        return np.hstack([pooled, np.ones((len(x), 1), np.float32)])

    weights, *_ = np.linalg.lstsq(features(ds.x_train[:n_train]), np.eye(10)[ds.y_train[:n_train]], rcond=None)
    predicted = (features(ds.x_test[:n_test]) @ weights).argmax(axis=1)
    return float(np.mean(predicted == ds.y_test[:n_test]))


def check_stand_in(ds, reason: str) -> None:
    assert ds.synthetic
    assert ds.source.startswith("SYNTHETIC STAND-IN") and reason in ds.source
    assert "not CIFAR-10 results" in ds.source and "\n" not in ds.source
    assert ds.x_train.shape == (50_000, 3, 32, 32) and ds.x_test.shape == (10_000, 3, 32, 32)
    assert ds.x_train.dtype == ds.x_test.dtype == np.float32
    assert ds.y_train.dtype == ds.y_test.dtype == np.int64
    assert len(ds.classes) == 10


def test_offline_without_cache_gives_a_labelled_learnable_stand_in(server, good, tmp_path):
    cache = tmp_path / "cache"
    url = server.add("/c.tar.gz", good.payload)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # asked for: no warning
        ds = cifar10(url=url, sha256=good.sha256, data_dir=cache, offline=True)
    check_stand_in(ds, "offline")
    assert server.requests == [] and snapshot(cache) == {}
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    assert np.bincount(ds.y_train).tolist() == [5000] * 10
    assert np.bincount(ds.y_test).tolist() == [1000] * 10
    assert linear_probe_accuracy(ds) > 0.4  # chance is 0.1


def test_stand_in_is_seeded():
    a = synthetic_cifar10(seed=3, reason="test", n_train=200, n_test=50)
    b = synthetic_cifar10(seed=3, reason="test", n_train=200, n_test=50)
    c = synthetic_cifar10(seed=4, reason="test", n_train=200, n_test=50)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.x_train, c.x_train)
    assert "seed 3" in a.source


def test_unreachable_network_falls_back_with_a_warning(tmp_path):
    cache = tmp_path / "cache"
    with pytest.warns(StandInWarning, match="network is unreachable"):
        ds = cifar10(url=unused_port_url("/cifar-10-binary.tar.gz"), data_dir=cache)
    check_stand_in(ds, "no network")
    assert snapshot(cache) == {}


def test_rosetta_offline_environment_variable(server, good, tmp_path, monkeypatch):
    url = server.add("/c.tar.gz", good.payload)
    monkeypatch.setenv("ROSETTA_OFFLINE", "1")
    ds = cifar10(url=url, sha256=good.sha256, data_dir=tmp_path / "cache")
    check_stand_in(ds, "ROSETTA_OFFLINE=1")
    assert server.requests == []
    # offline=False overrides the environment.
    real = cifar10(url=url, sha256=good.sha256, data_dir=tmp_path / "cache", offline=False)
    assert not real.synthetic and server.requests == ["/c.tar.gz"]


def test_bad_checksum_argument_is_refused(tmp_path):
    with pytest.raises(ValueError, match="64 hexadecimal"):
        cifar10(sha256="c32a1d4ab5d03f1284b67883e8d87530", data_dir=tmp_path)  # an MD5, not a SHA-256
