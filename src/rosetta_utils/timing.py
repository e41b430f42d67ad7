"""Time a piece of framework work honestly: warm-up, repeats, median and spread.

The framework's own synchronization runs inside the timed region, so that no
asynchronous work (CUDA streams, MXNet's engine, JAX's dispatch) escapes it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .backends import backend


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of each timed repeat, with their median and spread."""

    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """Half the interquartile range: robust to the odd repeat a busy machine slows down."""
        if len(self.seconds) < 2:
            return 0.0
        lower, _, upper = statistics.quantiles(self.seconds, n=4, method="inclusive")
        return (upper - lower) / 2

    @property
    def best(self) -> float:
        return min(self.seconds)

    def __str__(self) -> str:
        """One run is one number; several are their median, their spread and how many."""
        if len(self.seconds) == 1:
            return f"{format_seconds(self.seconds[0])} (one run)"
        return f"{format_seconds(self.median)} ± {format_seconds(self.spread)} (median of {len(self.seconds)})"


def steady_epoch_seconds(seconds: Sequence[float]) -> float:
    """The time of an epoch once warmed up: the fastest epoch after the first, whose
    time includes compilation and tracing (the only one, if there is one)."""
    if not seconds:
        raise ValueError("no epoch was timed")
    return min(seconds[1:]) if len(seconds) > 1 else seconds[0]


def format_seconds(seconds: float) -> str:
    """``0.00123`` → ``"1.23 ms"``: a duration in the unit that reads best."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def measure(
    work: Callable[[], Any],
    framework: str,
    *,
    warmup: int = 1,
    repeats: int = 5,
    synchronize: Callable[[Any], None] | None = None,
) -> Timing:
    """Run ``work`` ``warmup`` times untimed, then ``repeats`` times timed.

    Each timed run ends with the framework's synchronization applied to what
    ``work`` returned (``synchronize`` replaces it, e.g. in tests).
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    sync = synchronize or backend(framework).synchronize
    for _ in range(warmup):
        sync(work())
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        sync(work())
        seconds.append(time.perf_counter() - start)
    return Timing(tuple(seconds))
