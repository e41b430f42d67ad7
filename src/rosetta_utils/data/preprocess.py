"""ImageNet preprocessing for the ResNet-50 chapter, the same numpy code for every framework."""

from __future__ import annotations

import numpy as np

#: ImageNet's per-channel mean and standard deviation (RGB, pixels in [0, 1]).
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def imagenet_preprocess(images: np.ndarray, resize: int = 256, crop: int = 224) -> np.ndarray:
    """The one preprocessing pipeline of the ResNet-50 chapter, shared by every framework.

    ``images``: float32 NCHW in [0, 1]. Each image is resized (bilinear) so
    that its shorter side is ``resize`` pixels, cropped to ``crop``×``crop``
    at the centre, and normalised with ImageNet's mean and standard deviation.
    Returns float32 NCHW.
    """
    from PIL import Image

    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"expected float NCHW RGB images, got shape {images.shape}")
    if crop > resize:
        raise ValueError(f"crop {crop} is larger than the resized image {resize}")
    height, width = images.shape[2:]
    scale = resize / min(height, width)
    new_size = (round(width * scale), round(height * scale))  # PIL wants (width, height)
    top, left = (new_size[1] - crop) // 2, (new_size[0] - crop) // 2
    out = np.empty((len(images), 3, crop, crop), dtype=np.float32)
    for index, image in enumerate(images):
        for channel in range(3):
            plane = Image.fromarray(np.ascontiguousarray(image[channel], dtype=np.float32), mode="F")
            resized = np.asarray(plane.resize(new_size, Image.BILINEAR), dtype=np.float32)
            out[index, channel] = resized[top : top + crop, left : left + crop]
    return (out - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]
