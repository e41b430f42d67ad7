"""The shared ImageNet preprocessing."""

import numpy as np
import pytest

from rosetta_utils.data import IMAGENET_MEAN, IMAGENET_STD, imagenet_preprocess


def test_preprocess_resizes_crops_and_normalises():
    images = np.full((2, 3, 32, 32), 0.5, dtype=np.float32)
    images[1, 0] = 1.0
    out = imagenet_preprocess(images)
    assert out.shape == (2, 3, 224, 224) and out.dtype == np.float32
    np.testing.assert_allclose(out[0, :, 100, 100], (0.5 - IMAGENET_MEAN) / IMAGENET_STD, rtol=1e-5)
    assert out[1, 0, 0, 0] == pytest.approx((1.0 - IMAGENET_MEAN[0]) / IMAGENET_STD[0], rel=1e-5)


def test_preprocess_keeps_the_centre():
    images = np.zeros((1, 3, 32, 48), dtype=np.float32)  # wider than tall: the sides are cropped
    images[..., 24] = 1.0  # a bright vertical line in the middle column
    out = imagenet_preprocess(images, resize=64, crop=56)
    column = out[0, 0].mean(axis=0)
    assert abs(int(np.argmax(column)) - 28) <= 2


def test_preprocess_rejects_bad_input():
    with pytest.raises(ValueError, match="NCHW RGB"):
        imagenet_preprocess(np.zeros((2, 32, 32, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="larger than"):
        imagenet_preprocess(np.zeros((1, 3, 8, 8), dtype=np.float32), resize=100, crop=200)

