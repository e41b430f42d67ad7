"""How much arithmetic each task's model does: FLOP per image (2 per multiply-add)."""

from __future__ import annotations

from typing import Any, Mapping

from rosetta_utils.resnet50_layout import RESNET50_STAGES


def conv2d_flops(height: int, width: int, channels_in: int, channels_out: int, kernel: int) -> int:
    """FLOP of a convolution's forward pass on one image, output ``height`` × ``width``."""
    return 2 * height * width * channels_out * channels_in * kernel * kernel


def dense_flops(features_in: int, features_out: int) -> int:
    return 2 * features_in * features_out


def resnet50_flops(variant: str = "v1", size: int = 224) -> int:
    """Forward FLOP of ResNet-50's feature extractor on one image.

    v1 puts a down-sampling block's stride in its first 1×1 convolution, so
    that convolution already runs at the reduced resolution; v1.5 puts it in
    the 3×3, which makes the 1×1 run at the full one: about 7.7 versus 8.2
    GFLOP at 224×224.
    """
    if variant not in ("v1", "v1.5"):
        raise ValueError(f"ResNet-50 variant must be 'v1' or 'v1.5', got {variant!r}")
    resolution = size // 2
    total = conv2d_flops(resolution, resolution, 3, 64, 7)  # the stem
    resolution //= 2  # max-pool
    channels = 64
    for width, blocks, stride in RESNET50_STAGES:
        for block in range(blocks):
            step = stride if block == 0 else 1
            out = resolution // step
            first = out if variant == "v1" else resolution
            total += conv2d_flops(first, first, channels, width, 1)
            total += conv2d_flops(out, out, width, width, 3)
            total += conv2d_flops(out, out, width, 4 * width, 1)
            if block == 0:
                total += conv2d_flops(out, out, channels, 4 * width, 1)
            channels, resolution = 4 * width, out
    return total


def gru_flops(input_size: int, hidden_size: int, steps: int) -> int:
    """FLOP of a one-layer GRU's forward pass over ``steps`` time steps of one sequence.

    Counts the matrix products only: per step, the three gates each multiply
    the input (``input_size``) and the state (``hidden_size``) by their
    weights, ``3 * (2*I*H + 2*H*H)``. Every step counts, padded or not,
    because a fused kernel over a padded batch computes them all.
    """
    return steps * 3 * (2 * input_size * hidden_size + 2 * hidden_size * hidden_size)


def model_flops_per_image(task: str, page: Mapping[str, Any]) -> int:
    """Forward-pass FLOP per image (per review, for IMDB) of a task's model, from the
    sizes its page declares (``page``: the namespace the chapter loader returns); a
    training step counts 3× that (forward, and a backward pass of twice the work).

    CIFAR-10: the page's ``FLOP_PER_IMAGE`` (its ``LAYERS`` table). IMDB: the
    GRU (``EMBEDDING`` → ``HIDDEN``) over all ``MAXLEN`` steps plus the dense
    ``HIDDEN`` → ``N_CLASSES``; an embedding lookup does no arithmetic.
    ResNet-50: the v1 network on the page's images (their side, e.g. 224).
    """
    def declared(name: str) -> Any:
        if name not in page:
            raise ValueError(f"the {task} page declares no {name}, which its FLOP count needs")
        return page[name]

    if task == "imdb":
        hidden = declared("HIDDEN")
        return gru_flops(declared("EMBEDDING"), hidden, declared("MAXLEN")) + dense_flops(hidden, declared("N_CLASSES"))
    if task == "resnet50":
        sides = {side for side in declared("images").shape[1:] if side != 3}  # NCHW or NHWC
        if len(sides) != 1:
            raise ValueError(f"the resnet50 page's images are not square: {declared('images').shape}")
        return resnet50_flops("v1", sides.pop())
    if task == "cifar10":
        return int(declared("FLOP_PER_IMAGE"))
    raise ValueError(f"no FLOP count for task {task!r}: expected one of cifar10, imdb, resnet50")
