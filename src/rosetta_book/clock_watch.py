"""The check that a part reads its clocks only in the cells that run alone.

The build decides before a part runs which of its cells time something
(:mod:`rosetta_book.timed_cells`, a scan of their code) and, on a timed page,
runs those alone (:mod:`rosetta_book.machine_slots`). This module checks the
decision as the cells run: every kernel the build starts watches the
standard library's clocks (``time.perf_counter``, ``time.time``,
``time.monotonic``, ``time.process_time`` and their ``_ns`` forms), and keeps
each read made by a cell's own code, by code it ran from a string, or by the
reader's library (``rosetta_utils``), with the cell it happened in. After the
part, :func:`check_clock_reads` stops the build for a read in a cell the scan
did not find (it would have run beside other parts) or on a page whose parts
may read no clock at all (an untimed page, the comparisons).

Clocks read inside the frameworks themselves (a progress bar's rate, an
optimiser's own bookkeeping) time nothing a page shows, and are left out, as
are other processes' (a script a cell starts carries its clock in its code,
which the scan reads).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Sequence

#: Names the file a kernel keeps its clock reads in (one JSON object a line).
WATCH_VARIABLE = "ROSETTA_CLOCK_LOG"
#: The clocks watched, in :mod:`time`.
CLOCKS = ("perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns", "process_time",
          "process_time_ns")


class ClockOutsideItsWindow(RuntimeError):
    """A cell read a clock where the build did not let it: the message names the cell."""


def watch_argument() -> str:
    """The kernel option that starts the watch before the first cell (binding no name)."""
    return "--IPKernelApp.exec_lines=__import__('rosetta_book.clock_watch').clock_watch.watch()"


def watch() -> None:
    """In a kernel: replace the clocks of :mod:`time` by ones that note who read them, in the
    file :data:`WATCH_VARIABLE` names (none: nothing is watched)."""
    import importlib.util
    import sys
    import time

    from IPython import get_ipython

    path, shell = os.environ.get(WATCH_VARIABLE), get_ipython()
    if not path or shell is None:
        return
    # where the cells' code "lives": ipykernel's folder of cell files, or IPython's pseudo-files
    cells = os.path.dirname(shell.compile.get_code_name("", "", 0)) + os.sep
    library = importlib.util.find_spec("rosetta_utils")
    folders = [os.path.join(folder, "") for folder in (library.submodule_search_locations if library else [])]
    places = tuple(place for place in [cells, "<ipython-input-", *folders] if place != os.sep)
    log = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - open for the kernel's life
    log.write(json.dumps({"watching": places}) + "\n")  # the watch started: no log is no watch
    seen: set[tuple[str, str, int]] = set()
    running: dict[str, str | None] = {"cell": None}  # the cell running now (None: none yet)

    def started(info: Any) -> None:
        running["cell"] = cell_key(info.raw_cell)

    shell.events.register("pre_run_cell", started)

    def watched(name: str, clock: Any) -> Any:
        def read() -> Any:
            frame = sys._getframe(1)
            where = frame.f_code.co_filename
            if running["cell"] is not None and (where == "<string>" or where.startswith(places)):
                key = (running["cell"], where, frame.f_lineno)
                if key not in seen:
                    seen.add(key)
                    shown = "the cell's code" if where.startswith(cells) else where
                    log.write(json.dumps({"cell": key[0], "read": f"time.{name} in {shown}, line {key[2]}"}) + "\n")
            return clock()

        return read

    for name in CLOCKS:
        setattr(time, name, watched(name, getattr(time, name)))


def cell_key(source: str) -> str:
    """How the watch names a cell: a digest of its code (two cells with the same code are
    scanned alike)."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def read_clock_log(path: str | Path) -> dict[str, list[str]]:
    """``{cell key: ["time.perf_counter in the cell's code, line 3", ...]}`` from a
    kernel's log (empty if it read none). Raises :class:`ClockOutsideItsWindow` if the
    kernel never started its watch (its start-up could not import this module)."""
    reads: dict[str, list[str]] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    if not lines or "watching" not in json.loads(lines[0]):
        raise ClockOutsideItsWindow(f"the kernel did not watch its clocks (no {path}): its Python could not "
                                    "import rosetta_book.clock_watch at its start")
    for line in lines[1:]:
        entry = json.loads(line)
        reads.setdefault(entry["cell"], []).append(entry["read"])
    return reads


def check_clock_reads(notebook: Any, reads: dict[str, list[str]], timed: Sequence[Sequence[str]],
                      allowed: bool, where: Callable[[int], str], part: str) -> None:
    """Raise :class:`ClockOutsideItsWindow` for a cell of the executed ``notebook`` (of the
    ``part``) that read a clock (``reads``, by :func:`cell_key`) although the scan found no
    clock in it (``timed[i]`` empty), or at all when clocks are not ``allowed``; ``where(i)``
    names cell ``i``'s place on the page. A read in code that is none of the notebook's
    cells is refused too."""
    cells = {cell_key(cell.source): index for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"}
    unplaced = [cell for cell in reads if cell not in cells]
    if unplaced:
        raise ClockOutsideItsWindow(f"the {part} read a clock in code that is none of its cells "
                                    f"({reads[unplaced[0]][0]})")
    for cell, index in cells.items():
        if cell not in reads:
            continue
        seen = "; ".join(reads[cell][:3])
        if not allowed:
            raise ClockOutsideItsWindow(f"{where(index)}: a cell of the {part} read a clock ({seen}), where none "
                                        "may be read (its page declares `untimed: true`, or it is a comparison)")
        if index >= len(timed) or not timed[index]:
            raise ClockOutsideItsWindow(
                f"{where(index)}: a cell of the {part} read a clock ({seen}), but the scan of its code "
                "(rosetta_book.timed_cells) found none, so it ran beside other parts: call the clock, or the "
                "function that reads it, by its name in the cell")
