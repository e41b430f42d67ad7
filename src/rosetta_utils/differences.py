"""How far apart two results are: the one difference measure of the book.

A page's own code uses it where a reader's port would (weights moved from one
framework to another give the same outputs); the book's proofs build their
verdicts on the same function (``rosetta_proof.equivalence``).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

#: float32's unit roundoff: the largest relative error of one rounding to float32.
UNIT_ROUNDOFF = 2.0**-24


def max_abs_difference(first: Any, second: Any) -> float:
    """The largest absolute difference between two arrays, or between two mappings of
    arrays with the same keys (the largest over all of them); NaN where either holds a
    NaN that the other does not match, so that no verdict takes it for agreement."""
    if isinstance(first, Mapping) or isinstance(second, Mapping):
        if not (isinstance(first, Mapping) and isinstance(second, Mapping)):
            raise TypeError("compare a mapping of arrays with another mapping of arrays")
        if set(first) != set(second):
            raise ValueError(f"the two sets of arrays differ in names: {sorted(set(first) ^ set(second))}")
        differences = [max_abs_difference(first[name], second[name]) for name in first]
        if any(np.isnan(difference) for difference in differences):
            return float("nan")  # max() would drop a NaN that is not first
        return max(differences, default=0.0)
    a, b = np.asarray(first), np.asarray(second)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} and {b.shape}")
    if a.size == 0:
        return 0.0
    difference, finite = float64_difference(a, b)
    if finite:  # the common case: one array
        return float(np.abs(difference, out=difference).max())
    a, b = a.astype(np.float64), b.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))  # NaN matches NaN, inf the same inf
    if same.all():
        return 0.0
    a, b = a[~same], b[~same]
    if np.isnan(a).any() or np.isnan(b).any():
        return float("nan")
    return float(np.max(np.abs(a - b)))


def float64_difference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, bool]:
    """``a - b`` computed pair by pair in float64 (no float64 copies of either), and whether
    both hold finite values everywhere (a NaN or infinity anywhere stays in the sum; the
    difference is then the caller's to mask)."""
    with np.errstate(invalid="ignore", over="ignore"):
        difference = np.asarray(np.subtract(a, b, dtype=np.float64))
        return difference, bool(np.isfinite(difference.sum()))
