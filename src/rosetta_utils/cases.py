"""The cases a translation table checks a row on: a grid of parameters.

A table page builds, for a concept, every combination of the values that cross
the concept's boundaries (odd and even sizes, strides below, at and above the
window ...) with :func:`grid`; every framework's cells then compute the concept
once per case, in the grid's order. The checks of the book
(``rosetta_proof.translation_checks``) read each case's parameters to test a
condition such as ``size % 2 == 0``.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence


class Case:
    """One point of a grid: its parameters as attributes (``case.size``), values derived
    from them for conditions to read (:meth:`derive`), and whatever arrays the page
    attaches to it (``case.x = ...``), which are neither."""

    def __init__(self, **parameters: Any):
        self.parameters = dict(parameters)
        self.derived: dict[str, Any] = {}
        for name, value in parameters.items():
            setattr(self, name, value)

    def derive(self, **values: Any) -> "Case":
        """Name values computed from the parameters (``same_pad=...``), for conditions."""
        self.derived.update(values)
        for name, value in values.items():
            setattr(self, name, value)
        return self

    def holds(self, condition: str) -> bool:
        """Whether the Python expression ``condition`` is true of this case's parameters and
        derived values."""
        try:
            return bool(eval(condition, {"__builtins__": {"abs": abs, "min": min, "max": max}},  # noqa: S307
                             {**self.parameters, **self.derived}))
        except Exception as error:
            raise ValueError(f"the condition {condition!r} cannot be evaluated on the case {self}: "
                             f"{type(error).__name__}: {error}") from None

    def __str__(self) -> str:
        return ", ".join(f"{name} {value}" for name, value in self.parameters.items())

    __repr__ = __str__


def grid(**axes: Sequence[Any]) -> list[Case]:
    """Every combination of the values given for each parameter, in order:
    ``grid(size=(6, 7), stride=(1, 2))`` is four cases."""
    if not axes:
        raise ValueError("a grid needs at least one parameter")
    for name, values in axes.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"the grid's parameter {name!r} needs a sequence of values, not {values!r}")
    names = list(axes)
    return [Case(**dict(zip(names, values))) for values in itertools.product(*axes.values())]


def grid_axes(cases: Sequence[Case]) -> str:
    """What a grid covers, for a reader: ``"size 6, 7 · stride 1, 2 (4 cases)"``."""
    axes: dict[str, list[Any]] = {}
    for case in cases:
        for name, value in case.parameters.items():
            if value not in axes.setdefault(name, []):
                axes[name].append(value)
    text = " · ".join(f"{name} {', '.join(str(value) for value in values)}" for name, values in axes.items())
    return f"{text} ({len(cases)} cases)"
