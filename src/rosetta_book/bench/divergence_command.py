"""How long the divergence command takes on two large recordings, against its target.

    python -m rosetta_book.bench.divergence_command [--layers 100] [--shape 16,64,32,32]
        [--rounds 5] [--target 5]

It writes two runs of ``--layers`` layers, each output of ``--shape``, with
:func:`rosetta_utils.divergence.save_activations`, then times the reader's command,
``python -m rosetta_utils.divergence A.npz B.npz``, as a reader runs it: a process of
its own, its interpreter's start and its imports included. The runs are labelled
stand-ins: random float32 outputs, the second the first moved by a few units in the
last place (every layer within its bound, so the command walks all of them), and
once more with the last layer moved beyond its bound, so that it also names the
causes. It prints each case's median and spread over ``--rounds`` runs and its
ratio to ``--target`` seconds (the chapter's: 5 s for two files of 100 layers). It
checks each run's exit status (0 agree, 1 a divergence) and stops on any other.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rosetta_utils.divergence import save_activations

#: The CIFAR-10 network's first convolution's output on 16 probe images, rounded up
#: to 64 channels: larger than any layer the chapter records.
DEFAULT_SHAPE = (16, 64, 32, 32)


def write_runs(folder: Path, layers: int, shape: tuple[int, ...], seed: int = 0):
    """Three files: a run, the same run moved within float32's bound at every layer,
    and that one with its last layer moved beyond it. Returns their paths."""
    rng = np.random.default_rng(seed)
    fan_in = 9 * shape[1]
    first, close, far = {}, {}, {}
    for index in range(layers):
        name = f"layer{index:03d}"
        output = rng.standard_normal(shape, dtype=np.float32)
        first[name] = output
        close[name] = output + np.float32(4 * 2.0**-24) * np.abs(output)
        far[name] = close[name]
    last = f"layer{layers - 1:03d}"
    far[last] = close[last] * np.float32(1.01)  # one factor: a cause the command names
    fan_ins = {name: fan_in for name in first}
    kinds = {name: "conv" for name in first}
    return tuple(
        save_activations(folder / f"{label}.npz", run, fan_ins, kinds)
        for label, run in (("first", first), ("close", close), ("far", far))
    )


def time_command(a: Path, b: Path, expect: int) -> float:
    """Seconds one run of the reader's command takes on two files."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rosetta_utils.divergence", str(a), str(b)],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != expect:
        raise SystemExit(f"the command exited {done.returncode}, expected {expect}:\n"
                         f"{done.stdout}{done.stderr}")
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_book.bench.divergence_command",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--shape", default=",".join(map(str, DEFAULT_SHAPE)),
                        help="each layer's output shape, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target", type=float, default=5.0, help="seconds")
    args = parser.parse_args(argv)
    shape = tuple(int(n) for n in args.shape.split(","))
    if args.layers < 1 or args.rounds < 1 or min(shape) < 1:
        parser.error("--layers, --rounds and every size of --shape must be at least 1")
    with tempfile.TemporaryDirectory(prefix="divergence-bench-") as folder:
        first, close, far = write_runs(Path(folder), args.layers, shape)
        size = first.stat().st_size / 2**20
        print(f"two files of {args.layers} layers of {shape} float32 each ({size:.0f} MiB a file; "
              "labelled stand-ins: random outputs)")
        for case, other, expect in (("every layer within its bound", close, 0),
                                    ("the last layer beyond it, causes named", far, 1)):
            time_command(first, other, expect)  # the files into the page cache
            times = [time_command(first, other, expect) for _ in range(args.rounds)]
            median = statistics.median(times)
            print(f"{case}: median {median:.2f} s (from {min(times):.2f} to {max(times):.2f} s, "
                  f"{args.rounds} runs); {median / args.target:.2f} of the {args.target:g} s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
