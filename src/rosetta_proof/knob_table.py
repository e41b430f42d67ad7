"""The knob table at the top of a lessons page: one row per knob, one column per framework.

Each framework's part of a lessons page reads its own defaults from the
installed framework and leaves them as the tab result ``knobs``: ``{knob:
text}``, where the text names the framework's switch and the value it read
(``"torch.backends.cudnn.benchmark = False"``), or says that the framework
has no such switch. A comparison cell lays them out with :func:`knob_table`;
a cell a part did not fill says so instead of staying blank, and
:func:`missing_cells` lists those, so that a page (and its test) can fail on
them.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rosetta_utils import FRAMEWORKS

#: What a cell shows when a framework's part did not report a knob.
NOT_REPORTED = "NOT REPORTED by this part"


def knob_names(runs: Mapping[str, Mapping[str, Any]], order: Sequence[str] = ()) -> list[str]:
    """The knobs in ``order``, then any other knob a part reported, in the order seen."""
    names = list(order)
    for run in runs.values():
        names += [name for name in run["knobs"] if name not in names]
    return names


def knob_rows(runs: Mapping[str, Mapping[str, Any]], order: Sequence[str] = (),
              links: Mapping[str, str] | None = None) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one row per knob, one column per framework that ran (in the
    book's tab order), and a last column ``measured`` from ``links`` (knob: text,
    e.g. a MyST reference to the section that measures it; "" where none)."""
    frameworks = [name for name in FRAMEWORKS if name in runs]
    headers = ["knob", *frameworks, "measured"]
    rows = [[name, *(str(runs[fw]["knobs"].get(name, NOT_REPORTED)) for fw in frameworks),
             (links or {}).get(name, "")] for name in knob_names(runs, order)]
    return headers, rows


def missing_cells(runs: Mapping[str, Mapping[str, Any]], order: Sequence[str] = ()) -> list[str]:
    """``"framework: knob"`` for every knob a framework's part left unreported."""
    return [f"{fw}: {name}" for name in knob_names(runs, order) for fw in FRAMEWORKS
            if fw in runs and name not in runs[fw]["knobs"]]


def knob_table(runs: Mapping[str, Mapping[str, Any]], order: Sequence[str] = (),
               links: Mapping[str, str] | None = None) -> Any:
    """:func:`knob_rows` as a displayable Markdown table."""
    from .tables import show_table

    return show_table(*knob_rows(runs, order, links))
