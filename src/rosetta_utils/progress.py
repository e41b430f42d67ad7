"""Progress for long loops: a live bar where someone watches, compact lines in the book.

In a terminal or a live notebook, :func:`progress` wraps an iterable in a tqdm
bar. While the book is being built (``ROSETTA_BOOK_BUILD=1``, set by
``make book``) nobody watches, and a bar would only litter the page, so it
returns the iterable unchanged; :func:`report_epoch` prints the one line per
epoch that the page keeps.
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def building_book() -> bool:
    """Whether this process runs inside a book build."""
    return os.environ.get("ROSETTA_BOOK_BUILD") == "1"


def progress(items: Iterable[T], description: str = "", total: int | None = None) -> Iterator[T]:
    """``items`` with a progress bar, unless the book is being built."""
    if building_book():
        return iter(items)
    from tqdm.auto import tqdm

    return iter(tqdm(items, desc=description, total=total, leave=False))


def report_epoch(framework: str, epoch: int, epochs: int, *, data: str = "", **metrics: float) -> str:
    """Print and return one compact line, e.g. ``pytorch epoch 1/10: loss 1.52, 31.2 s``.

    ``data`` names what the numbers rest on (e.g. a synthetic stand-in); it
    ends the line in brackets.
    """
    parts = []
    for name, value in metrics.items():
        if name == "seconds":
            parts.append(f"{value:.1f} s")
        else:
            parts.append(f"{name} {value:.4g}")
    line = f"{framework} epoch {epoch}/{epochs}: {', '.join(parts)}" + (f" ({data})" if data else "")
    print(line, flush=True)
    return line
