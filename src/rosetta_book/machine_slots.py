"""The build's share of the machine: how many kernels and cells run at once, and which run alone.

The build runs the parts of every page it must execute side by side. A part's
kernel takes a seat (at most :attr:`Slots.kernels` kernels live at once: each
holds a framework and its model, up to a few GB), and each of its cells takes
a slot while it runs (default: one slot per core, at most
:data:`MAX_DEFAULT_SLOTS`, one more in the test build; ``ROSETTA_BUILD_SLOTS``
sets another number), its kernel's start too. A cell that times something takes every slot, so that
nothing beside it slows what it times; which cells do is
:mod:`rosetta_book.timed_cells`' scan, and :func:`runs_alone` says on which
pages they run alone. The test build (``make test``, see
:func:`rosetta_utils.run_profile.is_test_build`) reads no timing, so there every
cell shares the machine, and its pages say so; and there a slot more than the
cores keeps them busy while a cell waits on its disk, a subprocess or a kernel's
start (on a 2-core machine, three slots built the test build in 1,027 s where
two took 1,180 s).

Waiting cells are served in priority order, their part's expected length, the
longest first (so that the build does not end on one long part running by
itself); a cell that runs alone is never overtaken: it holds back those behind
it until the machine is free. A part keeps every slot from one timed cell to
the next, and gives its slot back after every other cell, so that a cell
waiting to run alone waits for the cells running then, not for whole parts.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import threading
import time
from typing import Iterator, Sequence

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
        cores = (os.cpu_count() or 1) + (1 if is_test_build() else 0)
        return max(1, min(cores, MAX_DEFAULT_SLOTS))
    if not value.isdigit() or int(value) < 1:
        raise SlotsError(f"{SLOTS_VARIABLE}={value!r} is not valid: use a whole number of at least 1")
    return int(value)


def runs_alone(untimed: bool) -> bool:
    """Whether a part of a page runs alone on the machine: a timed page's part, except in
    the test build."""
    return not untimed and not is_test_build()


class Abandoned(RuntimeError):
    """A part that gave up its wait for a slot: another part of its page had failed."""


class _Queue:
    """``count`` interchangeable places, taken in priority order (see the module docstring)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._free = count
        self._waiting: list[tuple[float, int]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()

    def take(self, needed: int, priority: float, abandon: threading.Event | None) -> int:
        """Wait for ``needed`` places, served by ``priority`` (higher first; equal ones in the
        order they asked), and take them; ``abandon``, once set, ends the wait with
        :class:`Abandoned`."""
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
        return needed

    def give(self, count: int) -> None:
        with self._changed:
            self._free += count
            self._changed.notify_all()


class Slots:
    """``count`` slots for cells and ``count + 1`` seats for kernels, taken in priority order
    (see the module docstring)."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise SlotsError(f"a build needs at least one slot, not {count}")
        self.count = count
        self.kernels = count + 1  # one more than the slots: a kernel waits for its next cell ready
        self._slots = _Queue(count)
        self._seats = _Queue(self.kernels)

    @contextlib.contextmanager
    def hold(self, alone: bool = False, priority: float = 0.0,
             abandon: threading.Event | None = None) -> Iterator[None]:
        """Wait for a slot (every slot when ``alone``) and hold it for the ``with`` block."""
        taken = self._slots.take(self.count if alone else 1, priority, abandon)
        try:
            yield
        finally:
            self._slots.give(taken)

    @contextlib.contextmanager
    def kernel(self, timed: Sequence[bool], priority: float = 0.0,
               abandon: threading.Event | None = None) -> Iterator["Turns"]:
        """Wait for a kernel's seat and hold it for the ``with`` block, which runs the kernel's
        cells in the :class:`Turns` it is given (``timed[i]``: whether cell ``i`` runs alone)."""
        self._seats.take(1, priority, abandon)
        turns = Turns(self._slots, self.count, timed, priority, abandon)
        try:
            yield turns
        finally:
            turns.done()
            self._seats.give(1)


class Turns:
    """One kernel's turns at the machine: before its start and before each of its cells it
    takes a slot, or every slot for a cell that runs alone, keeping every slot from one such
    cell to the next; it gives them back after each other cell, and when it is done."""

    def __init__(self, slots: _Queue, count: int, timed: Sequence[bool], priority: float,
                 abandon: threading.Event | None) -> None:
        self._slots, self._count, self.timed = slots, count, list(timed)
        self._priority, self._abandon = priority, abandon
        self._held, self._alone = 0, False
        self.alone_cells = 0  # how many cells ran alone
        self.alone_seconds = 0.0  # how long this kernel held the whole machine
        self._since = 0.0

    def before(self, index: int | None) -> None:
        """Wait for cell ``index``'s turn (None: the kernel's start)."""
        alone = index is not None and index < len(self.timed) and self.timed[index]
        self.alone_cells += alone
        if alone and self._held and self._alone:
            return  # the machine is this kernel's already
        self.done()
        self._held = self._slots.take(self._count if alone else 1, self._priority, self._abandon)
        self._alone, self._since = alone, time.monotonic()

    def after(self) -> None:
        """A cell has run: give its slot back, unless it ran alone (the next may too)."""
        if not self._alone:
            self.done()

    def done(self) -> None:
        """Give back whatever this kernel holds."""
        if self._held:
            if self._alone:
                self.alone_seconds += time.monotonic() - self._since
            self._slots.give(self._held)
            self._held, self._alone = 0, False
