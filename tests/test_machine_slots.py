"""The build's share of the machine: slots taken side by side, alone, and in priority order."""

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
    assert 1 <= slot_count() <= 4
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
