"""Interleaved timing (rosetta_utils.timing.interleave) and the quartiles of a Timing."""

import math

import pytest

from rosetta_utils import timing as timing_module
from rosetta_utils.timing import Timing, interleave


def test_quartiles_and_iqr_of_a_timing():
    timing = Timing((0.010, 0.011, 0.012, 0.013, 0.100))
    assert timing.quartiles == pytest.approx((0.011, 0.013))
    assert timing.iqr == pytest.approx(0.002)
    assert timing.spread == pytest.approx(timing.iqr / 2)
    assert Timing((0.5,)).quartiles == (0.5, 0.5) and Timing((0.5,)).iqr == 0.0


def test_turns_rotate_round_by_round_after_untimed_warm_up_rounds():
    calls = []

    def turn(name, seconds):
        def run(number):
            calls.append((name, number))
            return seconds[number]
        return run

    timings = interleave({"a": turn("a", [9.0, 1.0, 2.0, 3.0]), "b": turn("b", [9.0, 4.0, 5.0, 6.0]),
                          "c": turn("c", [9.0, 7.0, 8.0, 9.5])}, repeats=3, warmup=1)
    assert calls == [("a", 0), ("b", 0), ("c", 0),  # the warm-up round, untimed
                     ("b", 1), ("c", 1), ("a", 1),  # each round starts one turn later
                     ("c", 2), ("a", 2), ("b", 2),
                     ("a", 3), ("b", 3), ("c", 3)]
    # the i-th value of every alternative comes from round i (after the warm-up)
    assert timings == {"a": Timing((1.0, 2.0, 3.0)), "b": Timing((4.0, 5.0, 6.0)), "c": Timing((7.0, 8.0, 9.5))}


def test_a_pause_comes_before_every_turn(monkeypatch):
    slept = []
    monkeypatch.setattr(timing_module.time, "sleep", slept.append)
    interleave({"a": lambda _: 1.0, "b": lambda _: 1.0}, repeats=2, warmup=0, pause=0.25)
    assert slept == [0.25] * 4
    interleave({"a": lambda _: 1.0}, repeats=2, warmup=0)
    assert slept == [0.25] * 4  # no pause unless asked


@pytest.mark.parametrize("kwargs, message", [
    ({"repeats": 0}, "repeats must be >= 1"),
    ({"repeats": 2, "warmup": -1}, "warmup must be >= 0"),
])
def test_impossible_counts_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        interleave({"a": lambda _: 1.0}, **kwargs)


def test_nothing_to_time_and_a_turn_that_measured_nothing_are_refused():
    with pytest.raises(ValueError, match="no turns"):
        interleave({}, repeats=3)
    for measured in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="turn 'b' measured"):
            interleave({"a": lambda _: 1.0, "b": lambda _, m=measured: m}, repeats=2)
