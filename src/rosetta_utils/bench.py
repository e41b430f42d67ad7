"""Benchmarks: a page's configuration against the alternatives its framework offers.

``python -m rosetta_utils.bench cifar10|imdb|resnet50 [--profile smoke] [--json PATH]``
loads each framework's Setup, Data and Model sections from the chapter page
(through the chapter loader, so it times exactly the code the page shows),
times one training step (CIFAR-10, IMDB) or one batch of feature extraction
(ResNet-50) for the page's configuration and for every alternative the tab
lists, and prints, per framework, how far the page's
configuration is from the fastest one (target: within 1.25×) and what share
of this machine's peak its model FLOP/s reach. The peak is the fastest
single-precision matrix multiply measured in the same run across every
BLAS/oneDNN path at hand (numpy, PyTorch, TensorFlow, JAX, MXNet), at
2 FLOP per multiply-add.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from . import FRAMEWORKS
from .backends import backend
from .frameworks import is_installed, selected_frameworks
from .timing import Timing, measure

#: Page of each benchmarked task, relative to the project root.
PAGES = {
    "cifar10": "book/chapters/cifar10_cnn.md",
    "imdb": "book/chapters/imdb_gru.md",
    "resnet50": "book/chapters/resnet50_features.md",
}
#: The section of each page before which the benchmark stops loading it (no training, no timing).
STOP_BEFORE = {"cifar10": "Training", "imdb": "Training", "resnet50": "Training"}
#: Tasks whose benchmark times a training step (3 forward passes of work) rather than inference.
TRAINING_TASKS = ("cifar10", "imdb")
TARGET_RATIO = 1.25


def conv2d_flops(height: int, width: int, channels_in: int, channels_out: int, kernel: int) -> int:
    """FLOP of a 'same' convolution's forward pass on one image (2 per multiply-add)."""
    return 2 * height * width * channels_out * channels_in * kernel * kernel


def dense_flops(features_in: int, features_out: int) -> int:
    return 2 * features_in * features_out


def resnet50_flops(variant: str = "v1", size: int = 224) -> int:
    """Forward FLOP of ResNet-50's feature extractor on one image.

    v1 puts a down-sampling block's stride in its first 1×1 convolution, so
    that convolution already runs at the reduced resolution; v1.5 puts it in
    the 3×3, which makes the 1×1 run at the full one: about 7.7 versus 8.2
    GFLOP at 224×224 (2 FLOP per multiply-add).
    """
    if variant not in ("v1", "v1.5"):
        raise ValueError(f"ResNet-50 variant must be 'v1' or 'v1.5', got {variant!r}")
    from .transplant import RESNET50_STAGES

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

    Counts the matrix products only, at 2 FLOP per multiply-add: per step, the
    three gates each multiply the input (``input_size``) and the state
    (``hidden_size``) by their weights, ``3 * (2*I*H + 2*H*H)``. The gates'
    element-wise work and the biases are left out. Every step counts, padded
    or not, because a fused kernel over a padded batch computes them all.
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
    raise ValueError(f"no FLOP count for task {task!r}: expected one of {', '.join(PAGES)}")


def compare_configurations(
    make_training: Callable[..., tuple[Any, Callable, Callable]],
    alternatives: Mapping[str, Mapping[str, Any]],
    page_options: Mapping[str, Any],
    framework: str,
    images: Any,
    labels: np.ndarray,
    *,
    warmup: int = 2,
    repeats: int = 5,
) -> dict[str, Timing]:
    """Time one training step on ``images``/``labels`` for every configuration.

    ``make_training(**options)`` is the page's own builder, returning
    ``(model, train_step, to_device)``; ``images`` is whatever the page's
    ``to_device`` takes first (numpy images, or for IMDB the pair of token ids
    and valid lengths). Every configuration is built and warmed up first;
    the timed steps then take turns, one step of each configuration per
    round, so that a change in the machine's load (other processes, clock
    speed) during the comparison weighs on all of them alike. Prints one line
    per configuration, marking the page's; returns ``{name: Timing}``.
    """
    if warmup < 0 or repeats < 1:
        raise ValueError(f"need warmup >= 0 and repeats >= 1, got {warmup} and {repeats}")
    synchronize = backend(framework).synchronize
    runs = {}
    for name, options in alternatives.items():
        model, train_step, to_device = make_training(**options)
        x, y = to_device(images, labels)
        for _ in range(warmup):
            synchronize(train_step(x, y))
        runs[name] = (model, train_step, x, y)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (_, train_step, x, y) in runs.items():
            start = time.perf_counter()
            synchronize(train_step(x, y))
            seconds[name].append(time.perf_counter() - start)
    timings = {name: Timing(tuple(values)) for name, values in seconds.items()}
    for name, options in alternatives.items():
        marker = " (page)" if dict(options) == dict(page_options) else ""
        print(f"{framework} {name}{marker}: {timings[name]}")
    del runs
    gc.collect()
    return timings


def compare_inference_configurations(
    make_model: Callable[..., tuple[Any, Callable[[np.ndarray], np.ndarray]]],
    alternatives: Mapping[str, Mapping[str, Any]],
    page_options: Mapping[str, Any],
    framework: str,
    images: np.ndarray,
    *,
    warmup: int = 1,
    repeats: int = 3,
) -> dict[str, Timing]:
    """Time ``extract(images)`` for every configuration; ``make_model(**options)``
    is the page's builder, returning ``(model, extract)``. Prints one line each."""
    timings = {}
    for name, options in alternatives.items():
        model, extract = make_model(**options)
        timings[name] = measure(lambda: extract(images), framework, warmup=warmup, repeats=repeats)
        marker = " (page)" if dict(options) == dict(page_options) else ""
        print(f"{framework} {name}{marker}: {timings[name]}")
        del model, extract
        gc.collect()
    return timings


def _matmul_paths(size: int) -> dict[str, Callable[[], Callable[[], Any]]]:
    """Builders of a ``size``² float32 matrix product per library: each returns a
    no-argument function that computes it and waits for the result."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)

    def numpy_path():
        return lambda: a @ b

    def torch_path():
        from .frameworks import import_framework

        torch = import_framework("pytorch")
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        return lambda: torch.mm(ta, tb)

    def torch_onednn_path():
        from .frameworks import import_framework

        torch = import_framework("pytorch")
        ta, tb = torch.from_numpy(a).to_mkldnn(), torch.from_numpy(b)
        return lambda: torch._C._nn.mkldnn_linear(ta, tb, None)  # oneDNN's GEMM: ta @ tb.T

    def tensorflow_path():
        from .frameworks import import_framework

        import_framework("tensorflow")
        import tensorflow as tf

        ta, tb = tf.constant(a), tf.constant(b)
        product = tf.function(lambda: tf.matmul(ta, tb))
        return lambda: product().numpy()

    def jax_path():
        from .frameworks import import_framework

        import_framework("jax")
        import jax

        ja, jb = jax.numpy.asarray(a), jax.numpy.asarray(b)
        product = jax.jit(lambda x, y: x @ y)
        return lambda: product(ja, jb).block_until_ready()

    def mxnet_path():
        from .frameworks import import_framework

        mx = import_framework("mxnet")
        ma, mb = mx.nd.array(a), mx.nd.array(b)
        return lambda: mx.nd.dot(ma, mb).wait_to_read()

    paths: dict[str, Callable[[], Callable[[], Any]]] = {"numpy (its BLAS)": numpy_path}
    available = {name for name in selected_frameworks() if is_installed(name)}
    if "pytorch" in available:
        paths["torch.mm"] = torch_path
        if torch_has_onednn():
            paths["torch oneDNN linear"] = torch_onednn_path
    if "tensorflow" in available:
        paths["tf.matmul"] = tensorflow_path
    if "jax" in available:
        paths["jax.numpy.dot (XLA)"] = jax_path
    if "mxnet" in available:
        paths["mxnet.nd.dot"] = mxnet_path
    return paths


def torch_has_onednn() -> bool:
    """Whether this PyTorch build has oneDNN (MKL-DNN) on the CPU."""
    from .frameworks import import_framework

    return bool(import_framework("pytorch").backends.mkldnn.is_available())


def measure_peak_flops(size: int = 2048, repeats: int = 5) -> tuple[float, dict[str, float]]:
    """The fastest float32 matrix multiply here: (peak FLOP/s, {path: FLOP/s})."""
    work = 2 * size**3
    rates = {}
    for name, build in _matmul_paths(size).items():
        product = build()
        timing = measure(product, "pytorch", warmup=1, repeats=repeats, synchronize=lambda value: None)
        rates[name] = work / timing.best
    return max(rates.values()), rates


def _time_page_configurations(task: str, namespace: dict[str, Any], framework: str, repeats: int):
    """Time the page's configurations of ``framework``.

    Returns ``{name: (Timing, items per call)}``: a training step of one batch
    (CIFAR-10, IMDB), or feature extraction of one batch (ResNet-50), where the
    page's configuration is also timed at half and double its batch size.
    """
    if task in TRAINING_TASKS:
        batch = namespace["epoch_batches"](1)[0]
        data = namespace["data"]
        # IMDB's step takes the pair (token ids, valid lengths); CIFAR-10's the images.
        inputs = (data.x_train[batch], data.len_train[batch]) if task == "imdb" else data.x_train[batch]
        timings = compare_configurations(
            namespace["make_training"], namespace["ALTERNATIVES"], namespace["PAGE_OPTIONS"],
            framework, inputs, data.y_train[batch], warmup=3, repeats=repeats,
        )
        return {name: (timing, len(batch)) for name, timing in timings.items()}
    batch = namespace["BATCH"]
    images = namespace["images"]
    timings = compare_inference_configurations(
        namespace["make_resnet50"], namespace["ALTERNATIVES"], namespace["PAGE_OPTIONS"],
        framework, images[:batch], warmup=1, repeats=repeats,
    )
    results = {name: (timing, batch) for name, timing in timings.items()}
    for size in (batch // 2, 2 * batch):
        if size <= len(images):
            sized = compare_inference_configurations(
                namespace["make_resnet50"], {f"page, batch {size}": namespace["PAGE_OPTIONS"]},
                namespace["PAGE_OPTIONS"], framework, images[:size], warmup=1, repeats=repeats,
            )
            results.update({name: (timing, size) for name, timing in sized.items()})
    return results


def benchmark_task(task: str, frameworks: tuple[str, ...], repeats: int) -> dict[str, Any]:
    """Time every framework's configurations for ``task``; return a JSON-ready report."""
    from .chapter import load_chapter
    from .results import project_root

    page = Path(__file__).resolve().parents[2] / PAGES[task]
    if not page.is_file():
        page = project_root() / PAGES[task]
    peak, rates = measure_peak_flops()
    report: dict[str, Any] = {"task": task, "peak_flops": peak, "matmul_flops": rates, "frameworks": {}}
    for framework in frameworks:
        namespace = load_chapter(page, framework, until=STOP_BEFORE[task])
        timings = _time_page_configurations(task, namespace, framework, repeats)
        flops_per_item = model_flops_per_image(task) * (3 if task in TRAINING_TASKS else 1)
        per_item = {name: timing.median / items for name, (timing, items) in timings.items()}
        page_name = next(
            (name for name, options in namespace["ALTERNATIVES"].items() if dict(options) == dict(namespace["PAGE_OPTIONS"])),
            None,
        )
        if page_name is None:
            raise RuntimeError(f"{page}: the {framework} tab's PAGE_OPTIONS is not among its ALTERNATIVES")
        fastest = min(per_item, key=per_item.get)
        report["frameworks"][framework] = {
            "page_configuration": page_name,
            "fastest_configuration": fastest,
            "ratio": per_item[page_name] / per_item[fastest],  # time per image, so batch sizes compare
            "configurations": {
                name: {"median_seconds": t.median, "spread_seconds": t.spread, "items": items,
                       "flops_per_second": flops_per_item / per_item[name],
                       "fraction_of_peak": flops_per_item / per_item[name] / peak}
                for name, (t, items) in timings.items()
            },
            "data": namespace["data"].source,
        }
        del namespace
        gc.collect()
    return report


def format_report(report: Mapping[str, Any]) -> str:
    lines = [f"peak: {report['peak_flops'] / 1e9:.1f} GFLOP/s, the fastest float32 matrix multiply of: "
             + ", ".join(f"{name} {rate / 1e9:.1f}" for name, rate in report["matmul_flops"].items())]
    width = max([30] + [len(name) + 2 for result in report["frameworks"].values() for name in result["configurations"]])
    lines.append(f"{'framework':<11} {'configuration':<{width}} {'call (ms)':>10} {'GFLOP/s':>9} {'of peak':>8}")
    for framework, result in report["frameworks"].items():
        for name, numbers in result["configurations"].items():
            marker = " *" if name == result["page_configuration"] else ""
            lines.append(
                f"{framework:<11} {name + marker:<{width}} {numbers['median_seconds'] * 1e3:>10.1f} "
                f"{numbers['flops_per_second'] / 1e9:>9.1f} {numbers['fraction_of_peak']:>8.1%}"
            )
    lines.append(f"* the page's configuration; target: within {TARGET_RATIO}× of the framework's fastest")
    for framework, result in report["frameworks"].items():
        verdict = "meets" if result["ratio"] <= TARGET_RATIO else "MISSES"
        lines.append(f"{framework}: page / fastest = {result['ratio']:.2f} ({verdict} the target; "
                     f"fastest: {result['fastest_configuration']})")
    if report.get("task") == "resnet50":
        lines += peak_verdicts({fw: max(c["fraction_of_peak"] for c in r["configurations"].values())
                                for fw, r in report["frameworks"].items()})
    return "\n".join(lines)


def peak_verdicts(best_shares: Mapping[str, float]) -> list[str]:
    """ResNet-50's targets, given each framework's best share of peak: the fastest
    framework at 80% or more, every other one but Chainer at 50% or more."""
    leader = max(best_shares, key=best_shares.get)
    lines = []
    for framework, share in best_shares.items():
        target = 0.8 if framework == leader else (None if framework == "chainer" else 0.5)
        verdict = "no target" if target is None else f"{'meets' if share >= target else 'MISSES'} {target:.0%}"
        lines.append(f"{framework}: {share:.1%} of peak at best ({verdict})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rosetta_utils.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("task", choices=sorted(PAGES))
    parser.add_argument("--profile", choices=["smoke", "full"], help="sets ROSETTA_PROFILE for the pages' sizes")
    parser.add_argument("--frameworks", help="comma-separated subset, e.g. pytorch,jax (default: all installed)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per configuration (default 10)")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    if args.profile:
        os.environ["ROSETTA_PROFILE"] = args.profile
    if args.frameworks:
        os.environ["ROSETTA_FRAMEWORKS"] = args.frameworks
    frameworks = tuple(name for name in selected_frameworks() if is_installed(name))
    if not frameworks:
        parser.error("none of the selected frameworks is installed")
    report = benchmark_task(args.task, frameworks, args.repeats)
    print(format_report(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
