"""ImageNet's mean-and-deviation preprocessing (torchvision's, for weights trained with it), in numpy."""

from __future__ import annotations

import numpy as np

#: ImageNet's per-channel mean and standard deviation (RGB, pixels in [0, 1]).
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def imagenet_preprocess(images: np.ndarray, resize: int = 256, crop: int = 224) -> np.ndarray:
    """ImageNet preprocessing as torchvision's weights expect it, the same for every framework.

    ``images``: float32 NCHW in [0, 1]. Each image is resized and cropped at the
    centre (:func:`rosetta_utils.image_crops.center_crops`) and normalised with ImageNet's mean and standard deviation.
    Returns float32 NCHW.
    """
    from ..image_crops import center_crops

    out = center_crops(images, resize, crop)
    return (out - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]
