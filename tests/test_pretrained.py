"""ResNet-50's published ImageNet weights: Keras 2's HDF5 format read without Keras, the
conversion to the canonical layout, the download (pooch, MD5, the cache) and its refusals.

Every file here is made by the test in the published file's exact layout (layer names,
weight names, shapes; random values) and served on 127.0.0.1 (tests/local_http_server.py).
"""

import hashlib

import numpy as np
import pytest

from page_checks import snapshot
from local_http_server import unused_port_url
from rosetta_utils import pretrained
from rosetta_utils.data import DataError, StandInWarning
from rosetta_utils.data.standins import STAND_IN_MARK
from rosetta_utils.image_crops import center_crops
from rosetta_utils.keras_h5 import HDF5_OBJECT_HEADER_LIMIT, read_keras_weights, weight_key, write_keras_weights
from rosetta_utils.pretrained import (
    KERAS_RESNET50_MD5,
    MIRROR_VARIABLE,
    canonical_from_keras,
    check_resnet50_weights,
    keras_from_canonical,
    resnet50_imagenet_weights,
    weights_location,
)
from rosetta_utils.resnet50_layout import keras_layer_pairs, keras_resnet50_layout, resnet50_weight_shapes
from rosetta_utils.transplant import random_resnet50_weights


def conv_biases(seed=7):
    """Non-zero biases for every convolution (Keras's layers have them; MSRA's conv1 does)."""
    rng = np.random.default_rng(seed)
    shapes = resnet50_weight_shapes()
    return {keras: rng.normal(0, 0.5, shapes[f"{torch}.weight"][0]).astype(np.float32)
            for keras, _, torch, _ in keras_layer_pairs()}


@pytest.fixture(scope="module")
def canonical():
    return random_resnet50_weights(11)


@pytest.fixture(scope="module")
def official_file(tmp_path_factory, canonical):
    """A file in the published layout, random values: ``(bytes, md5)``."""
    path = write_keras_weights(tmp_path_factory.mktemp("h5") / "notop.h5", keras_from_canonical(canonical, conv_biases()))
    payload = path.read_bytes()
    return payload, hashlib.md5(payload).hexdigest()


def serve(server, payload, path="/resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5", **options):
    return server.add(path, payload, **options)


# --- The format --------------------------------------------------------------------------------


def test_the_layout_is_keras_resnet50s_file(official_file):
    """175 layers (the weightless ones listed too), 106 with weights, Keras 2's weight names, and
    Keras's order: the shortcut's convolution after the block's second one."""
    layout = keras_resnet50_layout()
    assert len(layout) == 175 and sum(bool(weights) for weights in layout.values()) == 106
    names = list(layout)
    assert names[:4] == ["input_1", "conv1_pad", "conv1_conv", "conv1_bn"]
    assert names.index("conv2_block1_0_conv") == names.index("conv2_block1_2_relu") + 1
    assert names.index("conv2_block1_0_bn") == names.index("conv2_block1_3_conv") + 1
    assert layout["conv3_block1_1_conv"] == [("conv3_block1_1_conv/kernel:0", (1, 1, 256, 128)),
                                             ("conv3_block1_1_conv/bias:0", (128,))]
    assert [name for name, _ in layout["conv1_bn"]] == [
        "conv1_bn/gamma:0", "conv1_bn/beta:0", "conv1_bn/moving_mean:0", "conv1_bn/moving_variance:0"]
    payload, _ = official_file
    read = read_keras_weights(payload)
    assert list(read) == [name for name, weights in layout.items() if weights]
    assert {name: [(w, v.shape) for w, v in weights.items()] for name, weights in read.items()} == {
        name: weights for name, weights in layout.items() if weights}


def test_keras_itself_loads_the_file_by_its_order(official_file, tmp_path):
    """Keras 3 reads the file with its own legacy loader, which matches layers by order: every
    layer ends up with the arrays written under its name."""
    keras = pytest.importorskip("keras")
    payload, _ = official_file
    path = tmp_path / "notop.h5"
    path.write_bytes(payload)
    model = keras.applications.ResNet50(weights=str(path), include_top=False, input_shape=(64, 64, 3))
    written = read_keras_weights(payload)
    with_weights = [layer for layer in model.layers if layer.weights]
    assert [layer.name for layer in with_weights] == list(written)
    for layer in with_weights:
        for variable, value in zip(layer.trainable_weights + layer.non_trainable_weights, written[layer.name].values()):
            np.testing.assert_array_equal(np.asarray(variable), value)


def test_weight_names_keep_what_they_are():
    assert weight_key("conv1_conv/kernel:0") == "kernel"
    assert weight_key("conv1_conv/kernel") == "kernel"  # Keras 3's path
    assert weight_key("moving_variance:0") == "moving_variance"


def test_long_name_lists_are_split_into_chunks_as_keras_does(tmp_path):
    layers = {f"layer_with_a_rather_long_name_{i:05d}": {} for i in range(3000)}
    layers["dense"] = {"dense/kernel:0": np.ones((2, 3), np.float32), "dense/bias:0": np.zeros(3, np.float32)}
    path = write_keras_weights(tmp_path / "long.h5", layers)
    import h5py

    with h5py.File(path) as file:
        assert "layer_names" not in file.attrs and "layer_names1" in file.attrs
        assert all(file.attrs[f"layer_names{i}"].nbytes <= HDF5_OBJECT_HEADER_LIMIT for i in range(2))
    read = read_keras_weights(path)
    assert list(read) == ["dense"] and read["dense"]["dense/kernel:0"].shape == (2, 3)


def test_a_file_that_is_not_keras_weights_is_named(tmp_path):
    with pytest.raises(DataError, match="not a readable HDF5 file"):
        read_keras_weights(b"<html>not found</html>", "the download")
    import h5py

    with h5py.File(tmp_path / "plain.h5", "w") as file:
        file.create_dataset("x", data=np.zeros(3))
    with pytest.raises(DataError, match="no 'layer_names' attribute"):
        read_keras_weights(tmp_path / "plain.h5")
    with h5py.File(tmp_path / "hollow.h5", "w") as file:
        file.attrs["layer_names"] = np.array([b"conv1_conv"])
    with pytest.raises(DataError, match="lists layer 'conv1_conv'.*no group"):
        read_keras_weights(tmp_path / "hollow.h5")


# --- The conversion ----------------------------------------------------------------------------


def test_conversion_folds_each_bias_into_its_batch_norm_exactly(canonical):
    """Keras's layer (conv with a bias, then batch norm) and the canonical one (no bias, the
    running mean moved) give the same output; dropping the bias instead would not."""
    biases = conv_biases()
    layers = keras_from_canonical(canonical, biases)
    back = canonical_from_keras(layers)
    assert set(back) == set(canonical)
    for name in canonical:
        np.testing.assert_allclose(back[name], canonical[name], rtol=0, atol=1e-6)
    rng = np.random.default_rng(0)
    patch = rng.normal(size=(5, 7, 7, 3)).astype(np.float32)  # one 7×7 window of conv1 per image
    kernel, bias = layers["conv1_conv"]["conv1_conv/kernel:0"], layers["conv1_conv"]["conv1_conv/bias:0"]
    gamma, beta, mean, var = layers["conv1_bn"].values()
    eps = 1e-5
    z = np.einsum("nhwc,hwco->no", patch, kernel)  # one output pixel per image
    keras_out = gamma * (z + bias - mean) / np.sqrt(var + eps) + beta
    ours = np.einsum("nhwc,ochw->no", patch, back["conv1.weight"])
    canonical_out = back["bn1.weight"] * (ours - back["bn1.running_mean"]) / np.sqrt(
        back["bn1.running_var"] + eps) + back["bn1.bias"]
    np.testing.assert_allclose(canonical_out, keras_out, rtol=1e-4, atol=1e-4)
    unfolded = back["bn1.weight"] * (ours - mean) / np.sqrt(var + eps) + back["bn1.bias"]
    assert np.abs(unfolded - keras_out).max() > 0.1


def test_missing_extra_or_misshapen_arrays_are_refused_naming_them(canonical):
    layers = keras_from_canonical(canonical)
    del layers["conv2_block1_1_bn"]["conv2_block1_1_bn/gamma:0"]
    layers["predictions"] = {"predictions/kernel:0": np.zeros((2048, 1000), np.float32)}
    layers["conv1_conv"]["conv1_conv/kernel:0"] = np.zeros((3, 7, 7, 64), np.float32)
    with pytest.raises(DataError) as refused:
        canonical_from_keras({name: weights for name, weights in layers.items() if weights}, "the test's file")
    message = str(refused.value)
    assert "the test's file does not hold ResNet-50's weights" in message
    assert "1 missing: conv2_block1_1_bn/gamma" in message
    assert "1 extra: predictions/kernel" in message
    assert "1 of the wrong shape: conv1_conv/kernel (3, 7, 7, 64) (expected (7, 7, 3, 64))" in message
    state = dict(canonical)
    del state["layer4.2.bn3.running_var"]
    state["fc.weight"] = np.zeros((1000, 2048), np.float32)
    state["layer1.0.conv1.weight"] = np.zeros((64, 64, 3, 3), np.float32)
    with pytest.raises(DataError, match=r"missing: layer4\.2\.bn3\.running_var; 1 extra: fc\.weight; "
                                        r"1 of the wrong shape: layer1\.0\.conv1\.weight \(64, 64, 3, 3\)"):
        check_resnet50_weights(state)
    check_resnet50_weights(canonical)  # the right set passes


# --- The download ------------------------------------------------------------------------------


def test_the_loader_fetches_verifies_converts_and_then_uses_its_cache(
        server, tmp_path, official_file, canonical, download_environment, monkeypatch):
    payload, md5 = official_file
    url = serve(server, payload)
    got = resnet50_imagenet_weights(url=url, md5=md5, data_dir=tmp_path)
    assert got.path.parent == tmp_path / "weights" and got.path.read_bytes() == payload
    assert set(got.weights) == set(canonical)
    assert all(np.allclose(got.weights[name], canonical[name], atol=1e-6) for name in canonical)
    # a file other than the published one is labelled, even when it is intact
    assert got.stand_in and got.source.startswith(STAND_IN_MARK) and KERAS_RESNET50_MD5 in got.source
    assert STAND_IN_MARK in got.note
    again = resnet50_imagenet_weights(url=url, md5=md5, data_dir=tmp_path, offline=True)
    assert again.path == got.path and server.requests == ["/resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5"]
    # with the published MD5 the same code says ImageNet
    monkeypatch.setattr(pretrained, "KERAS_RESNET50_MD5", md5)
    published = resnet50_imagenet_weights(url=url, md5=md5, data_dir=tmp_path, offline=True)
    assert not published.stand_in and published.source.startswith("ImageNet weights")
    assert STAND_IN_MARK not in published.note + published.source


@pytest.mark.parametrize("case", ["wrong checksum", "cut short", "cut, with its own checksum", "arrays missing"])
def test_a_bad_file_is_refused_and_nothing_is_cached(server, tmp_path, official_file, canonical, case,
                                                     download_environment):
    payload, md5 = official_file
    if case == "wrong checksum":
        url, expect = serve(server, payload), "0" * 32
        match = f"checksum mismatch.*expected md5 {expect}, got {md5}"
    elif case == "cut short":
        url, expect = serve(server, payload[: len(payload) // 2], announce_length=len(payload)), md5
        match = "connection dropped|checksum mismatch"
    elif case == "cut, with its own checksum":  # the hash was taken of the cut file
        cut = payload[: len(payload) // 2]
        url, expect = serve(server, cut), hashlib.md5(cut).hexdigest()
        match = "not a readable HDF5 file"
    else:
        layers = keras_from_canonical(canonical)
        del layers["conv5_block3_3_bn"]["conv5_block3_3_bn/moving_variance:0"]
        broken = write_keras_weights(tmp_path / "broken.h5", layers).read_bytes()
        url, expect = serve(server, broken), hashlib.md5(broken).hexdigest()
        match = "1 missing: conv5_block3_3_bn/moving_variance"
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match=match):
        resnet50_imagenet_weights(url=url, md5=expect, data_dir=cache)
    assert [path for path, digest in snapshot(cache).items() if digest != "<dir>"] == []  # no file, partial or not
    assert server.requests  # it was asked for


def test_offline_without_a_cached_copy_gives_the_labelled_stand_in(server, tmp_path, official_file):
    payload, md5 = official_file
    url = serve(server, payload)
    got = resnet50_imagenet_weights(url=url, md5=md5, data_dir=tmp_path, offline=True, seed=5)
    assert got.stand_in and got.path is None and server.requests == []
    assert got.source.startswith(f"{STAND_IN_MARK} for ImageNet's weights (offline=True")
    assert "seeded random weights (seed 5)" in got.source
    reference = random_resnet50_weights(5)
    assert all(np.array_equal(got.weights[name], reference[name]) for name in reference)


def test_without_a_network_the_stand_in_comes_with_a_warning(tmp_path, download_environment):
    with pytest.warns(StandInWarning, match="network is unreachable"):
        got = resnet50_imagenet_weights(url=unused_port_url("/w.h5"), md5="1" * 32, data_dir=tmp_path)
    assert got.stand_in and "no network: 127.0.0.1 could not be reached" in got.source
    assert [path for path, digest in snapshot(tmp_path).items() if digest != "<dir>"] == []


def test_another_copy_is_named_by_the_mirror_variable(monkeypatch):
    monkeypatch.delenv(MIRROR_VARIABLE, raising=False)
    assert weights_location() == (pretrained.KERAS_RESNET50_URL, KERAS_RESNET50_MD5)
    monkeypatch.setenv(MIRROR_VARIABLE, "http://127.0.0.1:9/w.h5 md5:" + "AB" * 16)
    assert weights_location() == ("http://127.0.0.1:9/w.h5", "ab" * 16)
    monkeypatch.setenv(MIRROR_VARIABLE, "http://127.0.0.1:9/w.h5")
    with pytest.raises(ValueError, match=f"{MIRROR_VARIABLE} must be '<url> md5:<32 hex digits>'"):
        weights_location()
    with pytest.raises(ValueError, match="md5 must be 32 hexadecimal digits"):
        weights_location(md5="sha256:" + "0" * 64)


# --- Images ------------------------------------------------------------------------------------


def test_center_crops_are_imagenet_preprocess_before_its_normalisation():
    from rosetta_utils.data import IMAGENET_MEAN, IMAGENET_STD, imagenet_preprocess

    rng = np.random.default_rng(3)
    images = rng.random((2, 3, 32, 40), dtype=np.float32)
    crops = center_crops(images)
    assert crops.shape == (2, 3, 224, 224) and crops.dtype == np.float32
    normalised = (crops - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]
    np.testing.assert_allclose(normalised, imagenet_preprocess(images), rtol=0, atol=1e-5)
    flat = np.broadcast_to(np.array([0.2, 0.5, 0.8], np.float32)[None, :, None, None], (1, 3, 32, 32))
    np.testing.assert_allclose(center_crops(flat)[0, :, 100, 7], [0.2, 0.5, 0.8], atol=1e-6)
    with pytest.raises(ValueError, match="NCHW"):
        center_crops(np.zeros((1, 32, 32, 3), np.float32))
