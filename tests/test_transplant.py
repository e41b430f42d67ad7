"""Layout conversions between frameworks, checked against the computation they must preserve."""

import numpy as np
import pytest

from rosetta_utils.transplant import (
    conv_hwio_to_oihw,
    conv_oihw_to_hwio,
    dense_in_out_to_out_in,
    dense_out_in_to_in_out,
    flattened_dense_nchw_to_nhwc,
    flattened_dense_nhwc_to_nchw,
    glorot_uniform,
)

rng = np.random.default_rng(0)


def test_conv_kernel_round_trip_and_meaning():
    kernel = rng.standard_normal((5, 3, 2, 4)).astype(np.float32)  # O, I, H, W
    hwio = conv_oihw_to_hwio(kernel)
    assert hwio.shape == (2, 4, 3, 5)
    assert hwio[1, 3, 2, 4] == kernel[4, 2, 1, 3]
    np.testing.assert_array_equal(conv_hwio_to_oihw(hwio), kernel)


def test_dense_transpose_round_trip():
    weight = rng.standard_normal((3, 7)).astype(np.float32)
    np.testing.assert_array_equal(dense_in_out_to_out_in(dense_out_in_to_in_out(weight)), weight)


def test_flatten_order_conversion_preserves_the_layer_and_is_needed():
    channels, height, width, out = 4, 3, 5, 6
    features_nchw = rng.standard_normal((2, channels, height, width)).astype(np.float32)
    features_nhwc = features_nchw.transpose(0, 2, 3, 1)
    weight = rng.standard_normal((out, channels * height * width)).astype(np.float32)
    expected = features_nchw.reshape(2, -1) @ weight.T  # what PyTorch computes
    converted = flattened_dense_nchw_to_nhwc(weight, channels, height, width)
    np.testing.assert_allclose(features_nhwc.reshape(2, -1) @ converted.T, expected, rtol=1e-5, atol=1e-5)
    wrong = features_nhwc.reshape(2, -1) @ weight.T  # forgetting the reorder
    assert np.max(np.abs(wrong - expected)) > 0.1
    np.testing.assert_array_equal(flattened_dense_nhwc_to_nchw(converted, channels, height, width), weight)


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="must have 4 dimensions"):
        conv_oihw_to_hwio(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="needs 60 inputs, got shape"):
        flattened_dense_nchw_to_nhwc(np.zeros((2, 59)), 4, 3, 5)


def test_glorot_uniform_uses_the_receptive_field():
    kernel = glorot_uniform((50, 3, 3, 3), np.random.default_rng(1))
    limit = np.sqrt(6 / (3 * 9 + 50 * 9))
    assert kernel.dtype == np.float32 and np.abs(kernel).max() <= limit
    assert np.abs(kernel).max() > 0.9 * limit
    with pytest.raises(ValueError, match="shapes"):
        glorot_uniform((3,), np.random.default_rng(1))


def test_resnet50_canonical_weights_have_torchvisions_names_and_count():
    from rosetta_utils.resnet50_layout import resnet50_weight_shapes
    from rosetta_utils.transplant import random_resnet50_weights

    shapes = resnet50_weight_shapes()
    assert len(shapes) == 265
    assert shapes["layer2.0.conv1.weight"] == (128, 256, 1, 1)
    assert shapes["layer4.0.downsample.0.weight"] == (2048, 1024, 1, 1)
    trainable = sum(int(np.prod(s)) for name, s in shapes.items() if "running" not in name)
    assert trainable == 23_508_032  # torchvision's ResNet-50 without its 2,049,000-parameter classifier
    weights = random_resnet50_weights(3)
    assert all(weights[name].shape == shape and weights[name].dtype == np.float32 for name, shape in shapes.items())
    assert (weights["bn1.running_var"] > 0).all()
    np.testing.assert_array_equal(weights["conv1.weight"], random_resnet50_weights(3)["conv1.weight"])
