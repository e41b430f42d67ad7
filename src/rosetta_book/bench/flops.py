"""How much arithmetic each task's model does: FLOP per image (2 per multiply-add)."""

from __future__ import annotations

from rosetta_utils.transplant import RESNET50_STAGES


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


def model_flops_per_image(task: str) -> int:
    """Forward-pass FLOP per image (per review, for IMDB) of a task's model; a
    training step counts 3× that (forward, and a backward pass of twice the work).

    IMDB: the GRU(125 → 100) over all 150 steps plus the Dense(100 → 2); an
    embedding lookup does no arithmetic.
    """
    if task == "imdb":
        return gru_flops(125, 100, 150) + dense_flops(100, 2)
    if task == "resnet50":
        return resnet50_flops("v1")
    if task == "cifar10":
        return (
            conv2d_flops(32, 32, 3, 50, 3) + conv2d_flops(32, 32, 50, 50, 3)
            + conv2d_flops(16, 16, 50, 100, 3) + conv2d_flops(16, 16, 100, 100, 3)
            + dense_flops(100 * 8 * 8, 512) + dense_flops(512, 10)
        )
    raise ValueError(f"no FLOP count for task {task!r}: expected one of cifar10, imdb, resnet50")
