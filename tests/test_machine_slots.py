"""The build's share of the machine: slots taken side by side, alone, and in priority order."""

import os
import threading
import time

import pytest

from rosetta_book.machine_slots import Abandoned, Slots, SlotsError, runs_alone, slot_count
from rosetta_utils.run_profile import UnknownProfileError, is_test_build, timed_rounds


def holders(slots, plans):
    """Start one thread per ``(name, alone, priority)`` in order, each holding a slot until
    told to let go; returns (the order they got their slots in, a function that lets one go)."""
    got, lock = [], threading.Lock()
    release = {name: threading.Event() for name, _, _ in plans}

    def hold(name, alone, priority):
        with slots.hold(alone=alone, priority=priority):
            with lock:
                got.append(name)
            release[name].wait(10)

    threads = [threading.Thread(target=hold, args=plan, daemon=True) for plan in plans]
    for thread in threads:
        thread.start()
        time.sleep(0.05)  # they ask in this order

    def let_go(name):
        release[name].set()
        time.sleep(0.1)

    return got, let_go, threads


def test_parts_share_the_slots_and_a_part_that_runs_alone_waits_for_all_of_them():
    slots = Slots(2)
    got, let_go, threads = holders(slots, [("a", False, 0), ("b", False, 0), ("alone", True, 0), ("c", False, 0)])
    assert got == ["a", "b"]
    let_go("a")
    assert got == ["a", "b"], "the part that runs alone needs both slots, and c may not overtake it"
    let_go("b")
    assert got == ["a", "b", "alone"]
    let_go("alone")
    assert got == ["a", "b", "alone", "c"]
    let_go("c")
    for thread in threads:
        thread.join(5)


def test_waiting_parts_take_a_free_slot_longest_first():
    slots = Slots(1)
    got, let_go, threads = holders(slots, [("first", False, 0), ("short", False, 1.0), ("long", False, 50.0)])
    let_go("first")
    let_go("long")
    let_go("short")
    assert got == ["first", "long", "short"]
    for thread in threads:
        thread.join(5)


def test_a_part_stops_waiting_when_its_page_failed():
    slots = Slots(1)
    failed = threading.Event()
    with slots.hold():
        outcome = []

        def wait():
            try:
                with slots.hold(abandon=failed):
                    outcome.append("ran")
            except Abandoned:
                outcome.append("abandoned")

        thread = threading.Thread(target=wait)
        thread.start()
        failed.set()
        thread.join(5)
    assert outcome == ["abandoned"]
    with slots.hold():  # the abandoned ticket left nothing behind
        pass


def test_the_slot_count_is_the_cores_capped_or_what_the_variable_says(monkeypatch):
    monkeypatch.delenv("ROSETTA_BUILD_SLOTS", raising=False)
    monkeypatch.delenv("ROSETTA_TEST_BUILD", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert slot_count() == 2
    monkeypatch.setenv("ROSETTA_TEST_BUILD", "1")  # timing nothing: one slot more than the cores
    assert slot_count() == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert slot_count() == 4
    monkeypatch.setenv("ROSETTA_BUILD_SLOTS", "3")
    assert slot_count() == 3
    for wrong in ("0", "two", "-1", "1.5"):
        monkeypatch.setenv("ROSETTA_BUILD_SLOTS", wrong)
        with pytest.raises(SlotsError, match="ROSETTA_BUILD_SLOTS=.* is not valid"):
            slot_count()
    with pytest.raises(SlotsError):
        Slots(0)


def test_only_the_test_build_lets_a_timed_page_share_the_machine(monkeypatch):
    monkeypatch.setenv("ROSETTA_TEST_BUILD", "0")
    assert not is_test_build()
    assert runs_alone(untimed=False) and not runs_alone(untimed=True)
    assert timed_rounds(5) == 5 and timed_rounds(1) == 1
    monkeypatch.setenv("ROSETTA_TEST_BUILD", "1")
    assert is_test_build()
    assert not runs_alone(untimed=False) and not runs_alone(untimed=True)
    assert timed_rounds(5) == 2 and timed_rounds(1) == 1  # a spread still computes
    with pytest.raises(ValueError, match="at least one round"):
        timed_rounds(0)
    monkeypatch.setenv("ROSETTA_TEST_BUILD", "yes")
    with pytest.raises(UnknownProfileError, match="ROSETTA_TEST_BUILD='yes' is not valid"):
        is_test_build()


def test_a_kernel_takes_a_slot_per_cell_and_every_slot_for_a_timed_one():
    """Two kernels share two slots cell by cell; the second's timed cell waits until the
    first's running cell is done, holds the machine through its next timed cell, and gives
    it back before an untimed one."""
    slots = Slots(2)
    events, lock, kept = [], threading.Lock(), {}
    go = {name: threading.Event() for name in ("a0", "a1", "b0", "b1", "b2", "b3")}

    def kernel(name, timed):
        with slots.kernel(timed) as turns:
            kept[name] = turns
            for index in range(len(timed)):
                turns.before(index)
                with lock:
                    events.append(f"{name}{index}")
                go.get(f"{name}{index}", threading.Event()).wait(10)
                turns.after()

    def until(expected):  # a thread's next step, however loaded the machine
        deadline = time.monotonic() + 10
        while events != expected and time.monotonic() < deadline:
            time.sleep(0.02)
        return events

    a = threading.Thread(target=kernel, args=("a", [False, False]), daemon=True)
    b = threading.Thread(target=kernel, args=("b", [False, True, True, False]), daemon=True)
    a.start()
    assert until(["a0"]) == ["a0"]
    b.start()
    assert until(["a0", "b0"]) == ["a0", "b0"], "untimed cells share the machine"
    go["b0"].set()
    time.sleep(0.3)
    assert events == ["a0", "b0"], "b's timed cell waits for a's running cell"
    go["a0"].set()
    assert until(["a0", "b0", "b1"]) == ["a0", "b0", "b1"]
    time.sleep(0.3)
    assert events == ["a0", "b0", "b1"], "and a's next cell waits for it"
    go["b1"].set()
    assert until(["a0", "b0", "b1", "b2"]) == ["a0", "b0", "b1", "b2"]
    time.sleep(0.3)
    assert events == ["a0", "b0", "b1", "b2"], "b keeps the machine from one timed cell to the next"
    go["b2"].set()
    deadline = time.monotonic() + 10
    while len(events) < 6 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sorted(events[4:]) == ["a1", "b3"]
    go["a1"].set()
    go["b3"].set()
    for thread in (a, b):
        thread.join(5)
    with slots.hold(alone=True):  # every slot came back
        pass
    assert (kept["a"].alone_cells, kept["a"].alone_seconds) == (0, 0.0)
    assert kept["b"].alone_cells == 2
    assert kept["b"].alone_seconds >= 0.6, "b held the machine through two waits of 0.3 s"


def test_kernels_beyond_the_seats_wait_for_one_to_end():
    slots = Slots(1)
    assert slots.kernels == 2
    started, lock, release = [], threading.Lock(), threading.Event()

    def kernel(name):
        with slots.kernel([]):
            with lock:
                started.append(name)
            release.wait(10)

    threads = [threading.Thread(target=kernel, args=(name,), daemon=True) for name in "abc"]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    deadline = time.monotonic() + 10
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    assert started == ["a", "b"]
    release.set()
    for thread in threads:
        thread.join(5)
    assert started == ["a", "b", "c"]
