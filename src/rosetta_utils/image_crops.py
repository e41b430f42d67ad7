"""Images resized and centre-cropped as ImageNet's networks are evaluated, before any normalisation.

Every ImageNet-trained ResNet-50 is evaluated on a centre crop of 224x224 pixels
of the image resized so that its shorter side is 256; what comes next depends
on the weights (Caffe's BGR and mean subtraction, or torchvision's mean and
standard deviation), so :func:`center_crops` stops before it and each page
states its own.
"""

from __future__ import annotations

import numpy as np


def center_crops(images: np.ndarray, resize: int = 256, crop: int = 224) -> np.ndarray:
    """``images`` (float NCHW, RGB in [0, 1]) resized (bilinear, PIL) so that their shorter side
    is ``resize`` pixels, then cropped to the central ``crop`` x ``crop``: float32 NCHW, same
    channel order, same range."""
    from PIL import Image

    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"expected float NCHW RGB images, got shape {images.shape}")
    if crop > resize:
        raise ValueError(f"crop {crop} is larger than the resized image {resize}")
    height, width = images.shape[2:]
    scale = resize / min(height, width)
    size = (round(width * scale), round(height * scale))  # PIL: (width, height)
    top, left = (size[1] - crop) // 2, (size[0] - crop) // 2
    out = np.empty((len(images), 3, crop, crop), dtype=np.float32)
    for index, image in enumerate(images):
        for channel in range(3):
            plane = Image.fromarray(np.ascontiguousarray(image[channel], dtype=np.float32), mode="F")
            resized = np.asarray(plane.resize(size, Image.BILINEAR), dtype=np.float32)
            out[index, channel] = resized[top : top + crop, left : left + crop]
    return out
