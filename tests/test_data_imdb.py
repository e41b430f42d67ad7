"""rosetta_utils.data.imdb: Keras's conventions, verify before unpickling, fail cleanly, stand in offline.

Every ``imdb.npz`` here is made by the test in the official format (an npz of
object arrays of Python int lists, and int64 labels), small, and served from
127.0.0.1 with its word index; nothing touches the network.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rosetta_utils.data import DataError, StandInWarning, imdb, imdb_loader, pre_padded, safe_npz
from rosetta_utils.data.standins import synthetic_imdb

from page_checks import snapshot
from local_http_server import unused_port_url

NUM_WORDS, MAXLEN = 30_000, 150
# Lengths around every boundary: empty, 1, maxlen - 1 (+ start = maxlen), maxlen, long.
TRAIN_LENGTHS = [0, 1, 5, 148, 149, 150, 151, 300, 37, 2, 149, 400, 12, 160, 90, 75]
TEST_LENGTHS = [3, 149, 150, 0, 220, 64, 1, 151, 149, 10, 33]
FIRST_WORDS = ["the", "and", "a", "of", "to", "is", "br", "in", "it", "i"]


pytestmark = pytest.mark.usefixtures("download_environment")


def sha(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def object_array(reviews: list) -> np.ndarray:
    array = np.empty(len(reviews), dtype=object)
    for i, review in enumerate(reviews):
        array[i] = review
    return array


def npz_bytes(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def random_reviews(lengths: list[int], rng) -> list[list[int]]:
    """Word ranks (>= 1) as Python ints, most frequent words most often, some past the vocabulary."""
    reviews = []
    for n in lengths:
        ranks = np.minimum(rng.zipf(1.3, size=n), 40_000)
        ranks[rng.random(n) < 0.05] = rng.choice([29_996, 29_997, 29_998, 35_000], size=1)[0]  # OOV border
        reviews.append([int(r) for r in ranks])
    return reviews


@dataclass
class Files:
    npz: bytes
    index: bytes
    x_train: list  # word ranks, in file order
    y_train: np.ndarray
    x_test: list
    y_test: np.ndarray
    words: dict  # word -> rank

    @property
    def sha256(self) -> str:
        return sha(self.npz)

    @property
    def index_md5(self) -> str:
        return "md5:" + hashlib.md5(self.index).hexdigest()


def make_files(seed: int = 0, **change) -> Files:
    """Official-format files; ``change`` replaces (array) or drops (None) an npz member."""
    rng = np.random.default_rng(seed)
    x_train, x_test = random_reviews(TRAIN_LENGTHS, rng), random_reviews(TEST_LENGTHS, rng)
    y_train = rng.permutation(np.arange(len(x_train)) % 2).astype(np.int64)
    y_test = rng.permutation(np.arange(len(x_test)) % 2).astype(np.int64)
    arrays = dict(x_train=object_array(x_train), y_train=y_train, x_test=object_array(x_test), y_test=y_test)
    for name, value in change.items():
        if value is None:
            del arrays[name]
        else:
            arrays[name] = value
    words = {word: rank for rank, word in enumerate(FIRST_WORDS, start=1)}
    words.update({f"w{rank}": rank for rank in range(len(FIRST_WORDS) + 1, 40_001)})
    index = json.dumps(words).encode()
    return Files(npz_bytes(**arrays), index, x_train, y_train, x_test, y_test, words)


def keras_way(reviews, labels, order, num_words=NUM_WORDS, maxlen=MAXLEN):
    """The oracle, one review at a time in plain Python: shuffle, [1] + rank+3, cap, keep the tail, pad right."""
    x = np.zeros((len(reviews), maxlen), dtype=np.int32)
    lengths = []
    for row, i in enumerate(order):
        ids = [1] + [r + 3 for r in reviews[i]]
        ids = [w if w < num_words else 2 for w in ids][-maxlen:]
        x[row, : len(ids)] = ids
        lengths.append(len(ids))
    return x, np.array(lengths), np.asarray(labels)[order]


def keras_orders(n_train, n_test):
    generator = np.random.RandomState(113)
    train, test = np.arange(n_train), np.arange(n_test)
    generator.shuffle(train)
    generator.shuffle(test)
    return train, test



@pytest.fixture(scope="module")
def good() -> Files:
    return make_files()


def serve(server, files: Files, npz_path="/imdb.npz", index_path="/imdb_word_index.json"):
    return server.add(npz_path, files.npz), server.add(index_path, files.index, content_type="application/json")


def load(server, files: Files, cache: Path, **kwargs):
    url, index_url = serve(server, files)
    return imdb(url=url, sha256=files.sha256, word_index_url=index_url, word_index_hash=files.index_md5,
                data_dir=cache, **kwargs)


def test_download_follows_keras_conventions(server, good, tmp_path):
    cache = tmp_path / "cache"
    ds = load(server, good, cache)

    assert not ds.synthetic and ds.num_words == NUM_WORDS and ds.maxlen == MAXLEN
    order_train, order_test = keras_orders(len(TRAIN_LENGTHS), len(TEST_LENGTHS))
    for x, lengths, y, reviews, labels, order in [
        (ds.x_train, ds.len_train, ds.y_train, good.x_train, good.y_train, order_train),
        (ds.x_test, ds.len_test, ds.y_test, good.x_test, good.y_test, order_test),
    ]:
        want_x, want_len, want_y = keras_way(reviews, labels, order)
        assert x.dtype == np.int32 and x.shape == (len(reviews), MAXLEN)
        assert lengths.dtype == np.int64 and y.dtype == np.int64
        np.testing.assert_array_equal(x, want_x)
        np.testing.assert_array_equal(lengths, want_len)
        np.testing.assert_array_equal(y, want_y)
        assert lengths.min() >= 1 and lengths.max() == MAXLEN
        assert x.max() == NUM_WORDS - 1  # rank 29996 is the last word kept; 29997 on is OOV
        assert np.all((x == 2).sum(axis=1)[lengths > 20] > 0)
    # Shorter reviews start with 1; cut ones begin mid-review. Everything after the length is 0.
    short = ds.len_train < MAXLEN
    assert np.all(ds.x_train[short, 0] == 1)
    valid = np.arange(MAXLEN)[None, :] < ds.len_train[:, None]
    assert np.all(ds.x_train[~valid] == 0) and np.all(ds.x_train[valid] > 0)
    # The page's line names the files and their checksums.
    assert "imdb.npz" in ds.source and good.sha256 in ds.source and good.index_md5.split(":")[1] in ds.source
    assert "imdb_word_index.json" in ds.source and ds.describe() == ds.source == str(ds) and "\n" not in ds.source
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [f"imdb-{good.sha256[:16]}.npz", f"imdb_word_index-{good.index_md5[4:20]}.json"]
    )


def test_smaller_vocabulary_and_length(server, good, tmp_path):
    ds = load(server, good, tmp_path / "cache", num_words=100, maxlen=20)
    order_train, order_test = keras_orders(len(TRAIN_LENGTHS), len(TEST_LENGTHS))
    for x, lengths, reviews, labels, order in [
        (ds.x_train, ds.len_train, good.x_train, good.y_train, order_train),
        (ds.x_test, ds.len_test, good.x_test, good.y_test, order_test),
    ]:
        want_x, want_len, _ = keras_way(reviews, labels, order, num_words=100, maxlen=20)
        np.testing.assert_array_equal(x, want_x)
        np.testing.assert_array_equal(lengths, want_len)
        assert x.shape == (len(reviews), 20) and x.max() < 100
    assert len(ds.words) == 100


def test_equals_keras_load_data(server, good, tmp_path, monkeypatch):
    keras_imdb = pytest.importorskip("keras.src.datasets.imdb")
    keras = pytest.importorskip("keras")
    fixture = tmp_path / "keras-fixture.npz"
    fixture.write_bytes(good.npz)
    asked = []

    def fake_get_file(*args, **kwargs):
        asked.append(kwargs.get("origin"))
        return str(fixture)

    monkeypatch.setattr(keras_imdb, "get_file", fake_get_file)
    (kx_train, ky_train), (kx_test, ky_test) = keras.datasets.imdb.load_data(num_words=NUM_WORDS)
    assert asked and asked[0].endswith("/imdb.npz")  # Keras's own loader read our file

    ds = load(server, good, tmp_path / "cache")
    for ours, lengths, labels, theirs, their_labels in [
        (ds.x_train, ds.len_train, ds.y_train, kx_train, ky_train),
        (ds.x_test, ds.len_test, ds.y_test, kx_test, ky_test),
    ]:
        assert len(ours) == len(theirs)
        for row, length, review in zip(ours, lengths, theirs):
            tail = list(review)[-MAXLEN:]
            assert row[:length].tolist() == tail and not row[length:].any()
        np.testing.assert_array_equal(labels, their_labels)
        # Left padding equals Keras's pad_sequences(truncating="pre", padding="pre") of its own lists.
        padded = keras.utils.pad_sequences(list(theirs), maxlen=MAXLEN, padding="pre", truncating="pre")
        np.testing.assert_array_equal(pre_padded(ours, lengths), padded)


def test_decode_uses_the_word_index(server, good, tmp_path):
    ds = load(server, good, tmp_path / "cache")
    assert ds.words[:7] == ("<PAD>", "<START>", "<OOV>", "<UNUSED>", "the", "and", "a")
    assert len(ds.words) == NUM_WORDS and ds.words[NUM_WORDS - 1] == f"w{NUM_WORDS - 4}"
    assert ds.decode([0, 0, 1, 4, 6, 2, 7, 0]) == "<START> the a <OOV> of"
    assert ds.decode([]) == ""
    order_train, _ = keras_orders(len(TRAIN_LENGTHS), len(TEST_LENGTHS))
    rank_word = {rank: word for word, rank in good.words.items()}
    for row, source in enumerate(order_train):
        ranks = good.x_train[source]
        text = ["<START>"] + [rank_word[r] if r + 3 < NUM_WORDS else "<OOV>" for r in ranks]
        assert ds.decode(ds.x_train[row]) == " ".join(text[-MAXLEN:])
        assert ds.decode(pre_padded(ds.x_train, ds.len_train)[row]) == ds.decode(ds.x_train[row])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ds.decode([1, NUM_WORDS])


def test_pre_padded_moves_the_padding_to_the_front():
    x = np.array([[5, 6, 7, 0], [8, 0, 0, 0], [1, 2, 3, 4], [0, 0, 0, 0]], dtype=np.int32)
    lengths = np.array([3, 1, 4, 0])
    left = pre_padded(x, lengths)
    np.testing.assert_array_equal(left, [[0, 5, 6, 7], [0, 0, 0, 8], [1, 2, 3, 4], [0, 0, 0, 0]])
    assert left.dtype == np.int32 and x[0, 0] == 5  # a copy; the input is untouched
    with pytest.raises(ValueError, match="lengths"):
        pre_padded(x, np.array([5, 1, 1, 1]))
    with pytest.raises(ValueError, match="expected rows"):
        pre_padded(x, lengths[:2])


def test_second_call_and_offline_use_the_cache(server, good, tmp_path):
    cache = tmp_path / "cache"
    first = load(server, good, cache)
    url, index_url = server.url("/imdb.npz"), server.url("/imdb_word_index.json")
    server.stop()
    assert sorted(server.requests) == ["/imdb.npz", "/imdb_word_index.json"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback: the cache answers
        kwargs = dict(url=url, sha256=good.sha256, word_index_url=index_url, word_index_hash=good.index_md5,
                      data_dir=cache)
        again = imdb(**kwargs)
        offline = imdb(**kwargs, offline=True)
    for ds in (again, offline):
        assert not ds.synthetic and ds.words == first.words
        np.testing.assert_array_equal(ds.x_train, first.x_train)
        np.testing.assert_array_equal(ds.len_test, first.len_test)


def test_hash_forms_accepted_for_the_word_index(server, good, tmp_path):
    url, index_url = serve(server, good)
    index_sha = sha(good.index)
    for i, form in enumerate([index_sha, "sha256:" + index_sha, index_sha.upper(), good.index_md5.upper()]):
        ds = imdb(url=url, sha256="SHA256:" + good.sha256.upper(), word_index_url=index_url,
                  word_index_hash=form, data_dir=tmp_path / str(i))
        assert not ds.synthetic and ds.words[4] == "the"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(sha256="c32a1d4ab5d03f1284b67883e8d87530"), "64 hexadecimal"),
        (dict(word_index_hash="bfafd718b763782e994055a2d397834f"), "an MD5"),
        (dict(word_index_hash="sha1:" + "0" * 40), "word_index_hash"),
        (dict(word_index_hash="md5:" + "0" * 31), "word_index_hash"),
        (dict(num_words=10), "num_words"),
        (dict(maxlen=0), "maxlen"),
    ],
    ids=["npz-md5", "bare-md5", "sha1", "short-md5", "num-words", "maxlen"],
)
def test_bad_arguments_are_refused(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        imdb(data_dir=tmp_path, offline=True, **kwargs)
    assert snapshot(tmp_path) == {}


def pickled_object_array_with(global_module: str, global_name: str) -> bytes:
    """An npz whose x_train pickle calls ``global_module.global_name``: it must never be unpickled."""

    class Gadget:
        def __reduce__(self):
            return (getattr(__import__(global_module), global_name), ("rosetta-gadget",))

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|O", "fortran_order": False, "shape": (1,)})
    payload = header.getvalue() + pickle.dumps(Gadget(), protocol=3)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("x_train.npy", payload)
        for name, value in [("y_train", np.array([1])), ("x_test", object_array([[1, 2]])), ("y_test", np.array([0]))]:
            inner = io.BytesIO()
            np.save(inner, value)
            archive.writestr(f"{name}.npy", inner.getvalue())
    return buffer.getvalue()


def _failure_cases():
    """(id, npz route or None, word index route or None (the good files then), message fragments)."""
    files = make_files(seed=1)
    two = object_array([[1, 2], [3]])
    cases = {
        "npz-404": (dict(body=b"gone", status=404), None, ["HTTP 404", "/imdb.npz"]),
        "index-404": (None, dict(body=b"gone", status=404), ["HTTP 404", "/imdb_word_index.json"]),
        "npz-500": (dict(body=b"oops", status=500), None, ["HTTP 500"]),
        "npz-dropped": (dict(body=files.npz[:500], announce_length=len(files.npz)), None,
                        ["connection dropped", "/imdb.npz"]),
        "index-dropped": (None, dict(body=files.index[:100], announce_length=len(files.index)),
                          ["connection dropped", "/imdb_word_index.json"]),
        "not-a-zip": (dict(body=b"<html>not here</html>"), None, ["not an .npz (zip) file"]),
        "truncated-zip": (dict(body=files.npz[: len(files.npz) // 2]), None, ["not an .npz (zip) file"]),
        "missing-array": (dict(body=make_files(seed=1, y_test=None).npz), None, ["lacks the array(s) y_test"]),
        "labels-not-binary": (dict(body=make_files(seed=1, y_train=np.arange(16)).npz), None,
                              ["y_train", "is 2, not 0 or 1"]),
        "labels-float": (dict(body=make_files(seed=1, y_test=np.zeros(11)).npz), None,
                         ["y_test", "float64", "not integer labels"]),
        "negative-id": (dict(body=make_files(seed=1, x_test=object_array([[4, 5]] * 10 + [[7, -1, 3]])).npz), None,
                        ["x_test", "review 10", "negative word id -1"]),
        "length-mismatch": (dict(body=make_files(seed=1, y_train=np.zeros(15, np.int64)).npz), None,
                            ["y_train", "(15,)", "16 reviews"]),
        "float-ids": (dict(body=make_files(seed=1, x_test=object_array([[1.5, 2.0]] * 11)).npz), None,
                      ["x_test", "float values"]),
        "review-not-a-list": (dict(body=make_files(seed=1, x_train=object_array([7] * 16)).npz), None,
                              ["x_train", "review 0 is a int"]),
        "numeric-reviews": (dict(body=make_files(seed=1, x_train=np.ones((16, 3), np.int64)).npz), None,
                            ["x_train", "not a 1-D object array"]),
        "no-reviews": (dict(body=npz_bytes(x_train=object_array([]), y_train=np.zeros(0, np.int64),
                                           x_test=two, y_test=np.array([0, 1]))), None, ["x_train", "no reviews"]),
        "pickle-gadget": (dict(body=pickled_object_array_with("os", "system")), None,
                          ["x_train", "refused to unpickle", "system"]),
        "index-not-json": (None, dict(body=b"\xff{not json"), ["not a JSON word index"]),
        "index-not-object": (None, dict(body=b"[1, 2, 3]"), ["not a JSON object"]),
        "index-bad-rank": (None, dict(body=b'{"the": 1, "a": 0}'), ["'a'", "rank 0"]),
        "index-duplicate-rank": (None, dict(body=b'{"the": 1, "a": 1}'), ["same rank"]),
    }
    return [(name, *case) for name, case in cases.items()]


FAILURES = _failure_cases()


@pytest.mark.parametrize("with_good_cache", [False, True], ids=["empty-cache", "good-cache"])
@pytest.mark.parametrize("npz_route, index_route, fragments", [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_failures_raise_and_leave_the_cache_clean(
    server, good, tmp_path, npz_route, index_route, fragments, with_good_cache
):
    cache = tmp_path / "cache"
    if with_good_cache:
        load(server, good, cache)
    before = snapshot(cache)
    files = make_files(seed=1)
    npz_route = npz_route or dict(body=files.npz)
    index_route = index_route or dict(body=files.index)
    url = server.add("/bad/imdb.npz", **npz_route)
    index_url = server.add("/bad/imdb_word_index.json", **index_route)
    # The right checksum of what is served, so that the content checks are reached.
    npz_hash, index_hash = sha(npz_route["body"]), "sha256:" + sha(index_route["body"])
    if npz_route.get("announce_length"):
        npz_hash = files.sha256
    if index_route.get("announce_length"):
        index_hash = "sha256:" + sha(files.index)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a real failure never falls back to the stand-in
        with pytest.raises(DataError) as raised:
            imdb(url=url, sha256=npz_hash, word_index_url=index_url, word_index_hash=index_hash, data_dir=cache)

    for fragment in fragments:
        assert fragment in str(raised.value)
    assert "/bad/imdb" in str(raised.value)  # where the bad file came from
    assert snapshot(cache) == before  # nothing half-written, nothing of this call kept
    if with_good_cache:
        server.stop()
        kept = imdb(url=unused_port_url("/imdb.npz"), sha256=good.sha256, word_index_url=unused_port_url("/i.json"),
                    word_index_hash=good.index_md5, data_dir=cache, offline=True)
        assert not kept.synthetic and len(kept.y_train) == len(TRAIN_LENGTHS)


@pytest.mark.parametrize("name", ["/imdb.npz", "/imdb_word_index.json"])
def test_checksum_mismatch_of_a_download(server, good, tmp_path, monkeypatch, name):
    cache = tmp_path / "cache"
    url, index_url = serve(server, good)
    for parser in ("_read_imdb_npz", "_read_word_index"):  # a file with the wrong checksum is never parsed
        monkeypatch.setattr(imdb_loader, parser, lambda *args: pytest.fail("parsed before its checksum was verified"))
    wrong = dict(sha256=sha(b"another file")) if name == "/imdb.npz" else dict(word_index_hash="md5:" + "0" * 32)
    kwargs = dict(sha256=good.sha256, word_index_hash=good.index_md5) | wrong
    with pytest.raises(DataError) as raised:
        imdb(url=url, word_index_url=index_url, data_dir=cache, **kwargs)
    assert "checksum mismatch" in str(raised.value) and name in str(raised.value)
    assert snapshot(cache) == {}


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/imdb.npz", "file:///tmp/imdb.npz", "imdb.npz"])
def test_non_http_url_is_refused(good, tmp_path, url):
    with pytest.raises(DataError, match="only http and https"):
        imdb(url=url, sha256=good.sha256, word_index_hash=good.index_md5, data_dir=tmp_path / "cache")
    assert snapshot(tmp_path / "cache") == {}


@pytest.mark.parametrize("which", ["npz", "index"])
@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
def test_tampered_cache_raises_and_is_never_parsed(server, good, tmp_path, monkeypatch, which, offline):
    cache = tmp_path / "cache"
    load(server, good, cache)
    pattern = "imdb-*.npz" if which == "npz" else "imdb_word_index-*.json"
    (target,) = cache.glob(pattern)
    altered = bytearray(target.read_bytes())
    altered[len(altered) // 2] ^= 0xFF
    target.write_bytes(bytes(altered))
    requests_before = list(server.requests)

    def never(*args, **kwargs):
        raise AssertionError("an altered cache file was read")

    monkeypatch.setattr(imdb_loader, "_read_imdb_npz", never)
    monkeypatch.setattr(safe_npz, "ArrayUnpickler", never)
    monkeypatch.setattr(imdb_loader, "_read_word_index", never)
    monkeypatch.setattr(np, "load", never)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DataError) as raised:
            load(server, good, cache, offline=offline)
    message = str(raised.value)
    assert str(target) in message and "checksum mismatch" in message and "delete that file" in message
    assert hashlib.new("sha256" if which == "npz" else "md5", bytes(altered)).hexdigest() in message
    assert server.requests == requests_before  # no silent re-download either
    assert target.read_bytes() == bytes(altered)  # left for the reader to inspect


def check_stand_in(ds, reason: str, num_words=NUM_WORDS, maxlen=MAXLEN) -> None:
    assert ds.synthetic
    assert ds.source.startswith("SYNTHETIC STAND-IN") and reason in ds.source
    assert "not IMDB results" in ds.source and "\n" not in ds.source
    assert ds.x_train.shape == ds.x_test.shape == (25_000, maxlen)
    assert ds.x_train.dtype == ds.x_test.dtype == np.int32
    for x, lengths, y in [(ds.x_train, ds.len_train, ds.y_train), (ds.x_test, ds.len_test, ds.y_test)]:
        assert lengths.dtype == y.dtype == np.int64
        assert np.bincount(y).tolist() == [12_500, 12_500]
        assert 1 <= lengths.min() and lengths.max() == maxlen
        if maxlen == MAXLEN:  # IMDB-like lengths: padding matters for many, the rest are cut
            assert 0.25 < np.mean(lengths < maxlen) < 0.6
        valid = np.arange(maxlen)[None, :] < lengths[:, None]
        assert np.all(x[~valid] == 0) and np.all(x[valid] > 0) and x.max() < num_words
        # Every review that fits starts with 1; most full rows were cut and lost their start, as real ones do.
        assert np.all(x[lengths < maxlen, 0] == 1) and np.mean(x[lengths == maxlen, 0] == 1) < 0.2
        assert np.all(x[:, 1:][(x[:, 1:] > 0)] != 1)  # 1 only ever starts a review
        oov = np.mean(x[valid] == 2)  # some words are out of the vocabulary; many if it is small
        assert 0.005 < oov < 0.1 if num_words == NUM_WORDS else oov > 0.1
    assert len(ds.words) == num_words and ds.words[:4] == ("<PAD>", "<START>", "<OOV>", "<UNUSED>")


def probe_accuracy(ds, n_train: int = 3000, n_test: int = 1000, k: int = 40) -> float:
    """Least squares on counts of the k ids whose frequency differs most between classes in training."""
    x, y = ds.x_train[:n_train], ds.y_train[:n_train]
    counts = np.zeros((2, ds.num_words))
    np.add.at(counts, (np.repeat(y, x.shape[1]), x.ravel()), 1)
    counts[:, 0] = 0
    rates = counts / counts.sum(axis=1, keepdims=True)
    ids = np.argsort(-np.abs(rates[1] - rates[0]))[:k]

    def features(rows):
        return np.hstack([(rows[:, :, None] == ids).sum(axis=1), np.ones((len(rows), 1))])

    weights, *_ = np.linalg.lstsq(features(x), 2.0 * y - 1, rcond=None)
    return float(np.mean((features(ds.x_test[:n_test]) @ weights > 0) == ds.y_test[:n_test]))


def test_offline_without_cache_gives_a_labelled_learnable_stand_in(server, good, tmp_path):
    cache = tmp_path / "cache"
    url, index_url = serve(server, good)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # asked for: no warning
        ds = imdb(url=url, sha256=good.sha256, word_index_url=index_url, word_index_hash=good.index_md5,
                  data_dir=cache, offline=True)
    check_stand_in(ds, "offline=True")
    assert server.requests == [] and snapshot(cache) == {}
    assert probe_accuracy(ds) > 0.8
    # Words are visibly synthetic, the sentiment markers named as such.
    text = ds.decode(ds.x_train[int(np.argmin(ds.len_train))])
    assert text.startswith("<START> ") and "word" in text and ("pos" in text or "neg" in text)
    markers = [w for w in ds.words if w.startswith(("pos", "neg"))]
    assert len(markers) == 6 and "6 marker words" in ds.source


def test_stand_in_with_other_sizes_and_seeds():
    a = synthetic_imdb(seed=3, reason="test", num_words=100, maxlen=20)
    b = synthetic_imdb(seed=3, reason="test", num_words=100, maxlen=20)
    c = synthetic_imdb(seed=4, reason="test", num_words=100, maxlen=20)
    check_stand_in(a, "test", num_words=100, maxlen=20)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.len_test, b.len_test)
    assert a.words == b.words and "seed 3" in a.source
    assert not np.array_equal(a.x_train, c.x_train)


def test_unreachable_network_falls_back_with_a_warning(tmp_path):
    cache = tmp_path / "cache"
    with pytest.warns(StandInWarning, match="network is unreachable"):
        ds = imdb(url=unused_port_url("/imdb.npz"), word_index_url=unused_port_url("/imdb_word_index.json"),
                  data_dir=cache)
    check_stand_in(ds, "no network")
    assert snapshot(cache) == {}


def test_unreachable_after_one_file_keeps_the_cache_as_it_was(server, good, tmp_path):
    cache = tmp_path / "cache"
    url = server.add("/imdb.npz", good.npz)
    with pytest.warns(StandInWarning):
        ds = imdb(url=url, sha256=good.sha256, word_index_url=unused_port_url("/imdb_word_index.json"),
                  word_index_hash=good.index_md5, data_dir=cache)
    assert ds.synthetic and server.requests == ["/imdb.npz"] and snapshot(cache) == {}


def test_rosetta_offline_environment_variable(server, good, tmp_path, monkeypatch):
    monkeypatch.setenv("ROSETTA_OFFLINE", "1")
    ds = load(server, good, tmp_path / "cache")
    check_stand_in(ds, "ROSETTA_OFFLINE=1")
    assert server.requests == []
    real = load(server, good, tmp_path / "cache", offline=False)  # offline=False overrides the environment
    assert not real.synthetic and sorted(server.requests) == ["/imdb.npz", "/imdb_word_index.json"]


def test_importing_the_module_imports_no_framework():
    import subprocess
    import sys

    code = (
        "import sys, rosetta_utils.data\n"
        "bad = [m for m in ('torch', 'tensorflow', 'keras', 'jax', 'flax', 'mxnet', 'chainer') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.stdout.strip() == "[]"


def test_a_missing_word_index_alone_is_downloaded(server, good, tmp_path):
    cache = tmp_path / "cache"
    first = load(server, good, cache)
    (index_file,) = cache.glob("imdb_word_index-*.json")
    index_file.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        offline = load(server, good, cache, offline=True)  # half a cache offline: the stand-in, said so
    assert offline.synthetic and "offline=True" in offline.source
    server.requests.clear()
    again = load(server, good, cache)
    assert server.requests == ["/imdb_word_index.json"] and index_file.is_file()
    assert not again.synthetic and again.words == first.words
    np.testing.assert_array_equal(again.x_test, first.x_test)
