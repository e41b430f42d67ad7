"""Time a piece of framework work honestly: warm-up, repeats, median and spread.

The framework's own synchronization runs inside the timed region, so that no
asynchronous work (CUDA streams, MXNet's engine, JAX's dispatch) escapes it.
:func:`interleave` times several alternatives by taking turns, so that a
machine that slows down or speeds up during the run does so for all of them
alike; each alternative's repeats come back as a :class:`Timing`, round by
round, so that two alternatives can be compared repeat by repeat.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

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
        return self.iqr / 2

    @property
    def quartiles(self) -> tuple[float, float]:
        """The lower and upper quartile of the repeats (both the one value, for one run)."""
        if len(self.seconds) < 2:
            return self.seconds[0], self.seconds[0]
        lower, _, upper = statistics.quantiles(self.seconds, n=4, method="inclusive")
        return lower, upper

    @property
    def iqr(self) -> float:
        """The interquartile range: upper quartile minus lower quartile."""
        lower, upper = self.quartiles
        return upper - lower

    @property
    def best(self) -> float:
        return min(self.seconds)

    def __str__(self) -> str:
        """One run is one number; several are their median, their spread and how many."""
        if len(self.seconds) == 1:
            return f"{format_seconds(self.seconds[0])} (one run)"
        return f"{format_seconds(self.median)} ± {format_seconds(self.spread)} (median of {len(self.seconds)})"


def median_and_iqr(seconds: Sequence[float]) -> tuple[float, float]:
    """The median and the interquartile range of repeated timings (numpy's default,
    linear, quartiles)."""
    timing = Timing(tuple(float(value) for value in seconds))
    return timing.median, timing.iqr


#: What :func:`faster` says when neither alternative's quartiles lie clear of the other's.
NEITHER_FASTER = "neither (the IQRs overlap)"


def faster(first: Sequence[float], second: Sequence[float]) -> str:
    """Which of two timed alternatives was faster: ``"first"`` or ``"second"``, the one
    whose upper quartile lies below the other's lower quartile; else
    :data:`NEITHER_FASTER`. A difference inside the spread is no verdict."""
    low_1, high_1 = Timing(tuple(first)).quartiles
    low_2, high_2 = Timing(tuple(second)).quartiles
    if high_1 < low_2:
        return "first"
    if high_2 < low_1:
        return "second"
    return NEITHER_FASTER


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


def interleave(
    turns: Mapping[str, Callable[[int], float]],
    repeats: int,
    *,
    warmup: int = 1,
    pause: float = 0.0,
) -> dict[str, Timing]:
    """Time alternatives by taking turns, and return each one's :class:`Timing`.

    ``turns`` maps a name to ``turn(round)``, which runs that alternative once
    and returns the seconds it measured (the turn times itself, so that it can
    leave out what is not the work: a message to another process, say).
    ``warmup`` rounds run every turn untimed, then ``repeats`` rounds run every
    turn once each; each round starts one turn later than the round before, so
    that no alternative always runs first. ``round`` counts every round from 0,
    warm-up ones included (an epoch number, say). ``pause`` seconds pass before
    each turn, so that threads another turn left spinning have gone idle. The
    i-th value of every Timing comes from the same round: values of two
    alternatives with the same index were measured side by side.
    """
    if not turns:
        raise ValueError("nothing to time: no turns")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    names = list(turns)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for number in range(warmup + repeats):
        first = number % len(names)
        for name in names[first:] + names[:first]:
            if pause:
                time.sleep(pause)
            measured = float(turns[name](number))
            if not measured > 0:  # also refuses NaN
                raise ValueError(f"turn {name!r} measured {measured} seconds in round {number}")
            if number >= warmup:
                seconds[name].append(measured)
    return {name: Timing(tuple(values)) for name, values in seconds.items()}
