"""What the GPU lessons' measurements share, with no framework: the timing rule, the
comparison of two runs' arrays, errors against a reference, and reading from XLA's
compiled HLO which memory layout it chose for each convolution.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

#: Steady calls timed after the warm-up (the records' contract: at least 5).
REPEATS = 10
WARMUP = 3


@dataclass(frozen=True)
class Timed:
    """One configuration's timing: the first call alone (compiling, autotuning and
    allocating included), then ``steady`` calls after the warm-up, each waited for."""

    first_seconds: float
    steady: tuple[float, ...]

    @property
    def median_seconds(self) -> float:
        return float(np.median(self.steady))

    @property
    def iqr_seconds(self) -> float:
        low, high = np.percentile(self.steady, [25, 75])
        return float(high - low)

    def metrics(self, first: bool = False) -> dict[str, float | int]:
        numbers: dict[str, float | int] = {"median_seconds": self.median_seconds, "iqr_seconds": self.iqr_seconds,
                                           "repeats": len(self.steady)}
        if first:
            numbers["first_step_seconds"] = self.first_seconds
        return numbers


def time_calls(call: Callable[[], Any], wait: Callable[[Any], Any], warmup: int = WARMUP,
               repeats: int = REPEATS) -> tuple[Timed, Any]:
    """Time ``call``: the first call, ``warmup`` untimed calls, then ``repeats`` timed ones;
    ``wait(result)`` returns once the device finished the call (``torch.cuda.synchronize``,
    ``jax.block_until_ready``). Returns the timing and the last call's result."""
    if repeats < 5:
        raise ValueError(f"a steady time needs at least 5 repeats, not {repeats}")
    start = time.perf_counter()
    result = call()
    wait(result)
    first = time.perf_counter() - start
    for _ in range(warmup):
        result = call()
        wait(result)
    steady = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        wait(result)
        steady.append(time.perf_counter() - start)
    return Timed(first, tuple(steady)), result


def runs_compared(first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray]) -> dict[str, float | bool]:
    """Two runs' arrays (same names): whether every one is bitwise equal, and the largest
    absolute difference between them."""
    if set(first) != set(second):
        raise ValueError(f"the two runs saved different arrays: {sorted(set(first) ^ set(second))}")
    equal = all(first[name].dtype == second[name].dtype and first[name].shape == second[name].shape
                and first[name].tobytes() == second[name].tobytes() for name in first)
    largest = max((float(np.max(np.abs(first[name].astype(np.float64) - second[name].astype(np.float64))))
                   for name in first if first[name].size), default=0.0)
    return {"bitwise_equal_runs": equal, "max_abs_difference_between_runs": largest}


def errors_against(values: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> dict[str, float]:
    """``max_abs_error`` and ``relative_error`` (the norm of the difference over the
    reference's norm) of ``values`` against ``reference``, over all the arrays together."""
    if len(values) != len(reference):
        raise ValueError(f"{len(values)} arrays to compare with {len(reference)}")
    flat = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in values])
    exact = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in reference])
    if flat.shape != exact.shape:
        raise ValueError(f"{flat.size} values to compare with {exact.size}")
    difference = flat - exact
    return {"max_abs_error": float(np.max(np.abs(difference))),
            "relative_error": float(np.linalg.norm(difference) / np.linalg.norm(exact))}


# ---- XLA's layouts, read from the text of a compiled HLO module ---------------------------

_DEFINITION = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<rest>.*)$")
_ARRAY_SHAPE = re.compile(r"(?P<type>[a-z]+\d*)\[(?P<dims>[\d,]*)\](?:\{(?P<layout>[\d,]*)[^}]*\})?")
_DIM_LABELS = re.compile(r"dim_labels=(?P<input>[^_\s,]+)_(?P<kernel>[^-\s,]+)->(?P<output>[^\s,]+)")
_LETTERS = {"b": "N", "f": "C", "0": "H", "1": "W", "2": "D"}


def _operands(rest: str, opcode_at: int) -> list[str]:
    """The operand texts of an instruction (what its first parentheses hold)."""
    depth, start, items = 0, opcode_at, []
    for index in range(opcode_at, len(rest)):
        char = rest[index]
        if char in "([{":
            depth += 1
            if depth == 1 and char == "(":
                start = index + 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                items.append(rest[start:index])
                break
        elif char == "," and depth == 1:
            items.append(rest[start:index])
            start = index + 1
    return [item.strip() for item in items if item.strip()]


def physical_order(labels: str, dims: int, layout: Sequence[int] | None) -> str:
    """The order in memory, outermost first, of an operand whose logical dimensions are
    ``labels`` (XLA's ``b``, ``f``, ``0``, ``1``): ``"NHWC"``, ``"NCHW"``, ... ``layout``
    is XLA's minor-to-major list (None: the default, the last dimension innermost)."""
    if len(labels) != dims:
        raise ValueError(f"dim_labels {labels!r} do not match {dims} dimensions")
    minor_to_major = list(layout) if layout else list(range(dims - 1, -1, -1))
    if sorted(minor_to_major) != list(range(dims)):
        raise ValueError(f"layout {{{','.join(map(str, minor_to_major))}}} is not a permutation of {dims} dimensions")
    return "".join(_LETTERS.get(labels[dimension], labels[dimension]) for dimension in reversed(minor_to_major))


def convolution_layouts(hlo_text: str) -> list[str]:
    """For every convolution of a compiled HLO module (XLA's ``convolution`` or a cuDNN
    convolution custom call), the memory order of its input: ``["NHWC", ...]``."""
    shapes: dict[str, tuple[int, list[int] | None]] = {}
    convolutions: list[tuple[str, str]] = []  # (input operand, input dim labels)
    for line in hlo_text.splitlines():
        definition = _DEFINITION.match(line)
        if not definition:
            continue
        rest = definition["rest"]
        shape = _ARRAY_SHAPE.match(rest)
        if shape:
            layout = shape["layout"]
            shapes[definition["name"]] = (len([d for d in shape["dims"].split(",") if d]),
                                          [int(d) for d in layout.split(",")] if layout else None)
        labels = _DIM_LABELS.search(rest)
        is_convolution = " convolution(" in rest or re.search(r'custom_call_target="__cudnn\$conv', rest)
        if not (labels and is_convolution):
            continue
        opcode = rest.find(" convolution(") if " convolution(" in rest else rest.find(" custom-call(")
        operands = _operands(rest, opcode + 1)
        if not operands:
            raise ValueError(f"a convolution without operands in the HLO: {line.strip()[:200]}")
        convolutions.append((operands[0], labels["input"]))
    orders = []
    for operand, labels in convolutions:
        inline = _ARRAY_SHAPE.match(operand)
        if inline:
            dims = len([d for d in inline["dims"].split(",") if d])
            layout = [int(d) for d in inline["layout"].split(",")] if inline["layout"] else None
        else:
            name = operand.split()[-1].lstrip("%")
            if name not in shapes:
                raise ValueError(f"the HLO never defines the convolution's input {name!r}")
            dims, layout = shapes[name]
        orders.append(physical_order(labels, dims, layout))
    return orders


def describe_layouts(orders: Sequence[str]) -> str:
    """``"NHWC (53 of 53 convolutions)"``, or each order with its count when they differ."""
    if not orders:
        raise ValueError("the compiled module has no convolution: nothing to read a layout from")
    counts = Counter(orders)
    return ", ".join(f"{order} ({count} of {len(orders)} convolutions)" for order, count in counts.most_common())
