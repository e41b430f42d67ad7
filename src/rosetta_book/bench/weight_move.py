"""How long one weight move takes on a model of 25 million parameters, against its target.

    python -m rosetta_book.bench.weight_move [--rounds 3] [--target 10] [--width 1.0]

It builds one architecture twice, in PyTorch and in Keras (a VGG-style network: five
3x3 convolutions of 64 to 512 channels, each with a batch norm, max pools, then a
flatten, two dense layers of 3,700 units and the logits: 25.2 million parameters at ``--width 1``), each
framework's own random initialisation (labelled stand-ins: no trained weights), and times
the reader's one call, ``rosetta_utils.porting.move_weights(torch_model, keras_model,
x, target_inputs=x_nhwc)``: both models run once on the example input (one image) to
find their layers in order, every array is converted (the flatten's columns permuted for
Keras's channels-last order included) and written. It prints the parameter count, each
round's time, the median and its ratio to ``--target`` seconds (the issue's 10 s), and
checks after the last round that the two models compute the same logits to float32's
error: a move that was fast but wrong is no result.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time

import numpy as np

CHANNELS = (64, 128, 256, 512, 512)
SIDE = 32  # the input's height and width: five pools down to 1, the last one skipped (2x2 left)


def build_torch(width: float):
    import torch

    channels = [max(1, int(c * width)) for c in CHANNELS]
    layers, before = [], 3
    for index, after in enumerate(channels):
        layers += [torch.nn.Conv2d(before, after, 3, padding=1), torch.nn.BatchNorm2d(after), torch.nn.ReLU()]
        if index < len(channels) - 1:
            layers.append(torch.nn.MaxPool2d(2))
        before = after
    hidden = max(1, int(3700 * width))
    layers += [torch.nn.Flatten(), torch.nn.Linear(before * 2 * 2, hidden), torch.nn.ReLU(),
               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10)]
    return torch.nn.Sequential(*layers).eval()


def build_keras(width: float):
    import keras

    channels = [max(1, int(c * width)) for c in CHANNELS]
    layers = [keras.Input((SIDE, SIDE, 3))]
    for index, after in enumerate(channels):
        layers += [keras.layers.Conv2D(after, 3, padding="same"), keras.layers.BatchNormalization(epsilon=1e-5),
                   keras.layers.ReLU()]
        if index < len(channels) - 1:
            layers.append(keras.layers.MaxPooling2D(2))
    hidden = max(1, int(3700 * width))
    layers += [keras.layers.Flatten(), keras.layers.Dense(hidden, activation="relu"),
               keras.layers.Dense(hidden, activation="relu"), keras.layers.Dense(10)]
    return keras.Sequential(layers)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.bench.weight_move",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", type=float, default=10.0, help="seconds")
    parser.add_argument("--width", type=float, default=1.0, help="the channels' and units' multiplier")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.width <= 0:
        parser.error("--rounds must be at least 1 and --width positive")
    import torch

    from rosetta_utils.porting import move_weights

    source, target = build_torch(args.width), build_keras(args.width)
    with torch.no_grad():  # random running statistics, so that the batch norms move something
        for module in source.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.normal_(0, 0.1)
                module.running_var.uniform_(0.5, 2.0)
    parameters = sum(p.numel() for p in source.state_dict().values() if p.is_floating_point())
    x = np.random.default_rng(0).standard_normal((1, 3, SIDE, SIDE)).astype(np.float32)
    x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    print(f"one VGG-style network, PyTorch -> Keras: {parameters:,} parameters (labelled stand-ins: each "
          "framework's random initialisation)")
    times = []
    for round_number in range(args.rounds):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            move = move_weights(source, target, x, target_inputs=x_nhwc)
        times.append(time.perf_counter() - start)
        print(f"round {round_number + 1}: {times[-1]:.2f} s ({len(move.pairs)} layers)")
    with torch.no_grad():
        expected = source(torch.from_numpy(x)).numpy()
    got = np.asarray(target(x_nhwc, training=False))
    difference = float(np.abs(expected - got).max() / np.abs(expected).max())
    if not difference < 1e-4:
        print(f"error: the moved model's logits differ from the source's by {difference:.3g} of their size")
        return 1
    median = statistics.median(times)
    print(f"median {median:.2f} s (from {min(times):.2f} to {max(times):.2f} s, {args.rounds} rounds); "
          f"{median / args.target:.2f} of the {args.target:g} s target; logits equal to {difference:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
