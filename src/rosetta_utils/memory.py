"""Peak memory of a block of work, for any framework.

On a CPU the frameworks allocate through their own C++ allocators, which
Python's ``tracemalloc`` does not see, so :class:`PeakMemory` samples the
process's resident set size (RSS) in a background thread and reports the
peak above the level at entry. It measures what the work added, not what the
process held before (other frameworks, the data).
"""

from __future__ import annotations

import os
import threading
from typing import Any

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """The process's resident set size now (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE_BYTES


class PeakMemory:
    """``with PeakMemory() as peak: work()`` → ``peak.bytes``: the largest RSS growth seen."""

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.bytes = 0

    def __enter__(self) -> "PeakMemory":
        self._baseline = self._peak = resident_bytes()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(self.interval):
            self._peak = max(self._peak, resident_bytes())

    def __exit__(self, *exc_info: Any) -> None:
        self._done.set()
        self._thread.join()
        self._peak = max(self._peak, resident_bytes())
        self.bytes = self._peak - self._baseline

    @property
    def megabytes(self) -> float:
        return self.bytes / 2**20
