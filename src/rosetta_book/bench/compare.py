"""Time a page's builder under each of its alternatives, taking turns step by step."""

from __future__ import annotations

import gc
import time
from typing import Any, Callable, Mapping

from rosetta_utils.backends import backend
from rosetta_utils.timing import Timing


def compare_configurations(
    make_training: Callable[..., tuple[Any, Callable, Callable]],
    alternatives: Mapping[str, Mapping[str, Any]],
    framework: str,
    inputs: Any,
    labels: Any,
    *,
    warmup: int = 2,
    repeats: int = 5,
) -> dict[str, Timing]:
    """Time one training step on ``inputs``/``labels`` for every configuration.

    ``make_training(**options)`` is the page's own builder, returning
    ``(model, train_step, to_device)``; ``inputs`` is whatever the page's
    ``to_device`` takes first. Every configuration is built and warmed up
    first; the timed steps then take turns, one step of each configuration
    per round, so that a change in the machine's load during the comparison
    weighs on all of them alike. Returns ``{name: Timing}``.
    """
    if warmup < 0 or repeats < 1:
        raise ValueError(f"need warmup >= 0 and repeats >= 1, got {warmup} and {repeats}")
    synchronize = backend(framework).synchronize
    runs = {}
    for name, options in alternatives.items():
        model, train_step, to_device = make_training(**options)
        x, y = to_device(inputs, labels)
        for _ in range(warmup):
            synchronize(train_step(x, y))
        runs[name] = (model, train_step, x, y)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (_, train_step, x, y) in runs.items():
            start = time.perf_counter()
            synchronize(train_step(x, y))
            seconds[name].append(time.perf_counter() - start)
    del runs
    gc.collect()
    return {name: Timing(tuple(values)) for name, values in seconds.items()}


def compare_inference_configurations(
    make_model: Callable[..., tuple[Any, Callable[[Any], Any]]],
    alternatives: Mapping[str, Mapping[str, Any]],
    framework: str,
    images: Any,
    *,
    warmup: int = 1,
    repeats: int = 3,
) -> dict[str, Timing]:
    """Time ``extract(images)`` for every configuration, taking turns as above;
    ``make_model(**options)`` is the page's builder, returning ``(model, extract)``."""
    if warmup < 0 or repeats < 1:
        raise ValueError(f"need warmup >= 0 and repeats >= 1, got {warmup} and {repeats}")
    synchronize = backend(framework).synchronize
    extractors = {}
    for name, options in alternatives.items():
        model, extract = make_model(**options)
        for _ in range(warmup):
            synchronize(extract(images))
        extractors[name] = (model, extract)
    seconds: dict[str, list[float]] = {name: [] for name in extractors}
    for _ in range(repeats):
        for name, (_, extract) in extractors.items():
            start = time.perf_counter()
            synchronize(extract(images))
            seconds[name].append(time.perf_counter() - start)
    del extractors
    gc.collect()
    return {name: Timing(tuple(values)) for name, values in seconds.items()}
