"""The build's share of the machine: how many page parts run at once, and which run alone.

The build runs the parts of every page it must execute side by side, one per
slot (default: one per core, at most :data:`MAX_DEFAULT_SLOTS`;
``ROSETTA_BUILD_SLOTS`` sets another number). A part that times anything runs
alone, holding every slot, so that nothing beside it slows what it times;
:func:`runs_alone` says which. The test build (``make test``, see
:func:`rosetta_utils.run_profile.is_test_build`) reads no timing, so there every
part shares the machine, and its pages say so.

Waiting parts are served in priority order, the longest first (so that the
build does not end on one long part running by itself); a part that runs
alone is never overtaken: it holds back those behind it until the machine is
free.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import threading
from typing import Iterator

from rosetta_utils.run_profile import is_test_build

#: Names the number of slots (a whole number of at least 1).
SLOTS_VARIABLE = "ROSETTA_BUILD_SLOTS"
#: The default's cap: each part holds a framework and its model (up to a few GB each).
MAX_DEFAULT_SLOTS = 4


class SlotsError(ValueError):
    """A ``ROSETTA_BUILD_SLOTS`` that is not a whole number of at least 1."""


def slot_count() -> int:
    """How many parts run at once (see the module docstring)."""
    value = os.environ.get(SLOTS_VARIABLE, "").strip()
    if not value:
        return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_SLOTS))
    if not value.isdigit() or int(value) < 1:
        raise SlotsError(f"{SLOTS_VARIABLE}={value!r} is not valid: use a whole number of at least 1")
    return int(value)


def runs_alone(untimed: bool) -> bool:
    """Whether a part of a page runs alone on the machine: a timed page's part, except in
    the test build."""
    return not untimed and not is_test_build()


class Abandoned(RuntimeError):
    """A part that gave up its wait for a slot: another part of its page had failed."""


class Slots:
    """``count`` slots, taken by parts in priority order (see the module docstring)."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise SlotsError(f"a build needs at least one slot, not {count}")
        self.count = count
        self._free = count
        self._waiting: list[tuple[float, int]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, alone: bool = False, priority: float = 0.0,
             abandon: threading.Event | None = None) -> Iterator[None]:
        """Wait for a slot (every slot when ``alone``), served by ``priority`` (higher
        first; equal ones in the order they asked), and hold it for the ``with`` block.
        ``abandon``, once set, ends the wait with :class:`Abandoned`."""
        needed = self.count if alone else 1
        ticket = (-priority, next(self._order))
        with self._changed:
            heapq.heappush(self._waiting, ticket)
            try:
                while self._waiting[0] != ticket or self._free < needed:
                    if abandon is not None and abandon.is_set():
                        raise Abandoned("another part of the page failed")
                    self._changed.wait(timeout=None if abandon is None else 0.2)
            except BaseException:
                self._waiting.remove(ticket)
                heapq.heapify(self._waiting)
                self._changed.notify_all()
                raise
            heapq.heappop(self._waiting)
            self._free -= needed
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self._free += needed
                self._changed.notify_all()
