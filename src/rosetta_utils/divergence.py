"""Where two runs of one model part ways: the first layer whose outputs differ by more
than float32 can explain, and what the difference looks like.

Two runs (a model and its port, each in its own framework) save every layer's
output, in the order the layers run, under the same names
(:func:`save_activations`, one ``.npz`` file per run). :func:`find_divergence`
walks the layers in that order and stops at the first whose difference exceeds
its bound, then names the likely causes from the difference's shape. From a
shell, in either environment::

    python -m rosetta_utils.divergence pytorch.npz mxnet.npz

The bound is float32's error model. A sum of ``n`` float32 terms is off by at
most about ``n·u`` of the sum of their magnitudes (``u = 2**-24``, the unit
roundoff), and a correct port passes what each layer is off on to the next:
layer ``l``'s output may differ by ``u · (n_1 + ... + n_l) · max|y_l|``, where
``n_i`` is the longest sum one output element of layer ``i`` takes (its fan-in,
which the run saves beside the outputs) and ``max|y_l|`` the layer's largest
output. A file saved without fan-ins is compared with each layer's element
count per example in their place, a looser bound that the report states.

What a difference looks like points at its cause (:data:`CAUSES`): only at the
borders of an image (padding), a scale or offset per channel (normalisation),
the same values in another order (layout or flatten order), exact zeros in one
run where the other has values, the kept ones scaled (dropout or a training
mode left on), one factor for the whole tensor (a reduction or a scale), NaN
or infinity (never skipped: it is reported as the divergence), and, for
training runs whose names start with their step (``step2/fc``), a first
difference after the first step (the optimiser's form). Each cause lists the
rows of the book's translation tables that check it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

#: float32's unit roundoff.
UNIT_ROUNDOFF = 2.0**-24
#: The key of the file's description (the fan-ins) in a saved ``.npz``.
_META = "__rosetta_divergence__"


class DivergenceInputError(ValueError):
    """Two runs that cannot be compared: names the file, the layer and what differs."""


@dataclass(frozen=True)
class Cause:
    """A likely reason for a difference of one shape, and the table rows that check it."""

    name: str
    evidence: str
    rows: tuple[str, ...]


#: Each cause: what it is, and the labels of the translation-table rows that check it.
CAUSES = {
    "not finite": ("a NaN or an infinity: an overflow, a log of 0, a label or id outside its range",
                   ("tables-losses-label-range", "tables-layers-embedding-range", "tables-mixed-bfloat16")),
    "padding": ("padding: where it goes, how much, and with what value",
                ("tables-layers-conv-same-stride2", "tables-layers-conv-asymmetric", "tables-layers-max-pool-padding",
                 "tables-layers-avg-pool-excluded", "tables-layers-max-pool-ceil")),
    "normalisation": ("normalisation: epsilon, the statistics used (batch or running), their momentum, the axis",
                      ("tables-defaults-batch-norm", "tables-layers-bn-axis", "tables-layers-batch-norm-eval",
                       "tables-modes-batchnorm-default", "tables-layers-bn-running",
                       "tables-transformer-layers-layer-norm-default-eps")),
    "order": ("the same values in another order: a layout (channels first or last), a flatten order, "
              "a transposed kernel, gates in another order",
              ("tables-layers-flatten", "tables-layers-bn-axis", "tables-tensors-permute",
               "tables-recurrent-gru-sequence")),
    "dropout": ("exact zeros in one run only, the other values scaled: dropout left on, a training mode",
                ("tables-layers-dropout-eval", "tables-modes-dropout-default", "tables-defaults-dropout-scale")),
    "factor": ("one factor for the whole tensor: a loss's reduction (mean or sum), a scale left out",
               ("tables-losses-reductions", "tables-losses-reduction-gradient", "tables-losses-default-gradient")),
    "optimiser": ("equal at the first step, different after it: the optimiser's form (epsilon's place, "
                  "momentum's convention, weight decay coupled or decoupled)",
                  ("tables-optimizers-adam-epsilon", "tables-optimizers-adamw", "tables-optimizers-adam-l2",
                   "tables-optimizers-momentum", "tables-defaults-adam")),
    "everywhere": ("a difference with no simpler shape: weights moved into the wrong places (gate order, "
                   "a kernel's layout), another formula (an activation's form or slope, reset placement)",
                   ("tables-recurrent-gru-reset-before", "tables-transformer-layers-gelu-exact",
                    "tables-transformer-layers-leaky-relu", "tables-layers-conv-valid")),
}


#: Layer kinds a run may save, and the causes a difference no simpler shape explains
#: most likely has in a layer of that kind, most likely first.
KINDS = {
    "conv": ("padding", "order"),  # padding and stride placement, then the kernel's layout
    "pool": ("padding",),
    "norm": ("normalisation",),
    "dense": ("order",),  # a flatten in another order before it
    "recurrent": ("everywhere",),  # gate order, reset placement
    "dropout": ("dropout",),
    "activation": ("everywhere",),
    "loss": ("factor",),
    "other": (),
}


@dataclass(frozen=True)
class LayerCheck:
    """One layer of the two runs: its largest difference and its bound."""

    name: str
    shape: tuple[int, ...]
    difference: float  # the largest absolute difference (inf where either is not finite)
    bound: float
    sums: int  # the longest sums up to this layer, n_1 + ... + n_l

    @property
    def diverges(self) -> bool:
        return not self.difference <= self.bound  # NaN too


@dataclass
class Report:
    """Every layer compared up to the first divergence (all of them if there is none)."""

    layers: list[LayerCheck]
    first: LayerCheck | None
    causes: list[Cause] = field(default_factory=list)
    fan_ins_recorded: bool = True

    def lines(self) -> list[str]:
        """The report as a reader's terminal shows it."""
        out = [f"{len(self.layers)} layers compared; bound: float32's u·(n_1 + ... + n_l)·max|y_l|"
               + ("" if self.fan_ins_recorded else " (no fan-ins saved: each layer's size per example "
                  "stands for its fan-in, a looser bound)")]
        if self.first is None:
            out.append("no divergence: every layer within its bound")
            return out
        first = self.first
        out.append(f"first divergence: layer {first.name!r} (number {len(self.layers)} in order; the "
                   f"{len(self.layers) - 1} before it agree), difference {first.difference:.3g} > bound "
                   f"{first.bound:.3g}")
        for rank, cause in enumerate(self.causes, 1):
            out.append(f"  {rank}. {cause.name}: {cause.evidence}")
            out.append(f"     rows: {', '.join(cause.rows)}")
        return out


def save_activations(path: str | Path, outputs: Mapping[str, np.ndarray],
                     fan_ins: Mapping[str, int] | None = None, kinds: Mapping[str, str] | None = None) -> Path:
    """Save one run's layer outputs, in the order the layers ran, with each layer's fan-in
    (the longest sum an output element takes) and kind (a key of :data:`KINDS`) where known."""
    outputs = {str(name): np.asarray(value) for name, value in outputs.items()}
    if _META in outputs:
        raise DivergenceInputError(f"{path}: {_META!r} is the file's own key, not a layer name")
    unknown = (set(fan_ins or {}) | set(kinds or {})) - set(outputs)
    if unknown:
        raise DivergenceInputError(f"{path}: fan-ins or kinds for layers without outputs: {sorted(unknown)}")
    strange = {name: kind for name, kind in (kinds or {}).items() if kind not in KINDS}
    if strange:
        raise DivergenceInputError(f"{path}: unknown layer kinds {strange} (known: {', '.join(KINDS)})")
    meta = {"order": list(outputs), "fan_ins": {name: int(n) for name, n in (fan_ins or {}).items()},
            "kinds": dict(kinds or {})}
    path = Path(path)
    with open(path, "wb") as file:
        np.savez(file, **outputs, **{_META: np.array(json.dumps(meta))})
    return path


@dataclass
class Run:
    """One run's saved outputs in their order, and the fan-ins and kinds saved with them."""

    outputs: dict[str, np.ndarray]
    fan_ins: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)


def load_activations(path: str | Path) -> Run:
    """One run as :func:`save_activations` saved it (read without pickle)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = list(archive.files)
            meta = json.loads(str(archive[_META])) if _META in names else {}
            order = meta.get("order") or [name for name in names if name != _META]
            missing = [name for name in order if name not in names]
            if missing:
                raise DivergenceInputError(f"{path}: its order names layers it does not hold: {missing[:3]}")
            outputs = {name: archive[name] for name in order}
    except (OSError, ValueError, KeyError) as error:
        if isinstance(error, DivergenceInputError):
            raise
        raise DivergenceInputError(f"{path}: not a file of saved activations (.npz): {error}") from None
    return Run(outputs, {str(k): int(v) for k, v in meta.get("fan_ins", {}).items()},
               {str(k): str(v) for k, v in meta.get("kinds", {}).items()})


def check_alignment(first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray],
                    names: tuple[str, str] = ("the first run", "the second run")) -> None:
    """Refuse two runs whose layers differ in name, order or shape, naming the first mismatch."""
    a, b = list(first), list(second)
    for index, (left, right) in enumerate(zip(a, b)):
        if left != right:
            raise DivergenceInputError(f"layer {index}: {names[0]} has {left!r} where {names[1]} has {right!r}")
        if np.shape(first[left]) != np.shape(second[right]):
            raise DivergenceInputError(f"layer {index} ({left!r}): shape {np.shape(first[left])} in {names[0]}, "
                                       f"{np.shape(second[right])} in {names[1]}")
    if len(a) != len(b):
        longer, extra = (names[0], a[len(b)]) if len(a) > len(b) else (names[1], b[len(a)])
        raise DivergenceInputError(f"{longer} has more layers: {extra!r} (layer {min(len(a), len(b))}) "
                                   "is missing from the other")


def _largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("inf")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def layer_checks(first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray],
                 fan_ins: Mapping[str, int] | None = None, unit_roundoff: float = UNIT_ROUNDOFF,
                 stop: bool = True) -> list[LayerCheck]:
    """Each layer's difference and bound, in order; up to the first divergence if ``stop``.
    A layer without a fan-in counts its size per example (all but the first axis)."""
    check_alignment(first, second)
    fan_ins = dict(fan_ins or {})
    checks, sums = [], 0
    for name, a in first.items():  # a training run's later steps carry the earlier steps' errors
        a, b = np.asarray(a), np.asarray(second[name])
        sums += fan_ins.get(name, int(np.prod(a.shape[1:])) if a.ndim > 1 else max(a.size, 1))
        scale = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0))) \
            if np.isfinite(a).all() and np.isfinite(b).all() else 0.0
        check = LayerCheck(name, tuple(a.shape), _largest_difference(a, b), unit_roundoff * sums * scale, sums)
        checks.append(check)
        if stop and check.diverges:
            break
    return checks


def _fit_error(target: np.ndarray, design: np.ndarray) -> float:
    """The largest residual of ``target`` fitted by least squares on ``design``'s columns."""
    coefficients, *_ = np.linalg.lstsq(design, target, rcond=None)
    return float(np.max(np.abs(design @ coefficients - target), initial=0.0))


def _channel_axis(shape: tuple[int, ...]) -> list[int]:
    """The axes that may hold channels: 1 (channels first) and the last (channels last)."""
    return sorted({1, len(shape) - 1}) if len(shape) >= 2 else []


def likely_causes(a: np.ndarray, b: np.ndarray, bound: float, steps: tuple[str | None, bool] = (None, False),
             kind: str | None = None) -> list[Cause]:
    """The likely causes of a difference between ``a`` and ``b`` (same shape), most likely
    first; ``bound`` is what float32 allows at this layer. ``steps``: the step the
    difference appears at, and whether an earlier step was compared without one; ``kind``:
    the layer's kind (:data:`KINDS`), which ranks the causes of a shapeless difference."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    causes: list[Cause] = []

    def found(name: str, evidence: str) -> None:
        causes.append(Cause(name, evidence, CAUSES[name][1]))

    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        where = "the first run" if not np.isfinite(a).all() else "the second run"
        count = int(np.size(a) - np.isfinite(a).sum()) + int(np.size(b) - np.isfinite(b).sum())
        found("not finite", f"{count} NaN or infinite values, first in {where}")
        return causes
    step, earlier_agreed = steps
    if step is not None and earlier_agreed:
        found("optimiser", f"every layer agreed before {step}")
    tolerance = 4 * bound + 1e-12
    difference = np.abs(a64 - b64)
    differs = difference > tolerance
    # padding: the difference sits on the borders of the spatial axes
    if a.ndim >= 3 and differs.any():
        for spatial in ([2, 3] if a.ndim == 4 else [2]), ([1, 2] if a.ndim == 4 else [1]):
            if max(spatial) >= a.ndim:
                continue
            border = np.zeros(a.shape, bool)
            for axis in spatial:
                index = [slice(None)] * a.ndim
                for edge in (0, -1):
                    index[axis] = edge
                    border[tuple(index)] = True
            if not border.all() and differs[border].any() and not differs[~border].any():
                found("padding", f"every one of the {int(differs.sum())} differing values lies on the border "
                                 f"of axes {spatial}, none inside")
                break
    # the same values in another order
    # (sorted, they agree within float32's bound, and far closer than in place)
    sorted_apart = float(np.abs(np.sort(a64, axis=None) - np.sort(b64, axis=None)).max())
    if sorted_apart <= min(bound, 0.1 * float(difference.max())):
        found("order", "the two runs hold the same values, in another order")
    # exact zeros in one run only, the other values scaled alike
    zeros_a, zeros_b = (a64 == 0) & (b64 != 0), (b64 == 0) & (a64 != 0)
    for zeros, other, mine in ((zeros_a, b64, a64), (zeros_b, a64, b64)):
        if zeros.sum() >= 0.01 * a.size and zeros.any():
            kept = (mine != 0) & (other != 0)
            if kept.any():
                ratio = mine[kept] / other[kept]
                if np.ptp(ratio) <= 1e-4 * max(1.0, float(np.abs(ratio).max())):
                    found("dropout", f"{int(zeros.sum())} values are 0 in one run only; the others are "
                                     f"{float(ratio.mean()):.4g} times as large")
                    break
    # one factor for the whole tensor
    if a64.any() and all(cause.name == "optimiser" for cause in causes):
        factor = float((a64 * b64).sum() / (a64 * a64).sum())
        if abs(factor - 1) > 1e-4 and np.abs(b64 - factor * a64).max() <= tolerance * max(1.0, abs(factor)):
            found("factor", f"the second run is {factor:.6g} times the first")
    # an affine map per channel (scale and offset)
    if not any(c.name in ("factor", "order", "padding", "dropout") for c in causes) and a.ndim >= 2:
        for axis in _channel_axis(a.shape):
            moved_a, moved_b = np.moveaxis(a64, axis, 0), np.moveaxis(b64, axis, 0)
            if moved_a[0].size < 3:
                continue
            worst = max(_fit_error(moved_b[c].ravel(), np.stack([moved_a[c].ravel(), np.ones(moved_a[c].size)], 1))
                        for c in range(moved_a.shape[0]))
            if worst <= bound:  # exact up to float32's rounding, as a normalisation's change is
                found("normalisation", f"per channel along axis {axis}, the second run is a scale and an "
                                       "offset of the first")
                break
    if all(cause.name == "optimiser" for cause in causes):
        spread = f"{int(differs.sum())} of {a.size} values differ, with no simpler shape"
        for name in KINDS.get(kind or "other", ()):
            found(name, f"{spread}, in a layer of kind {kind!r}")
        if not any(cause.name == "everywhere" for cause in causes):
            found("everywhere", spread)
    return causes


def find_divergence(first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray],
                    fan_ins: Mapping[str, int] | None = None, unit_roundoff: float = UNIT_ROUNDOFF,
                    kinds: Mapping[str, str] | None = None) -> Report:
    """Compare two runs layer by layer (:func:`layer_checks`) and name the likely causes at
    the first layer that exceeds its bound (:func:`likely_causes`)."""
    checks = layer_checks(first, second, fan_ins, unit_roundoff)
    report = Report(checks, None, fan_ins_recorded=bool(fan_ins) and all(name in fan_ins for name in first))
    if not checks or not checks[-1].diverges:
        return report
    last = checks[-1]
    step = last.name.split("/", 1)[0] if "/" in last.name else None
    earlier = step is not None and any(c.name.split("/", 1)[0] != step for c in checks[:-1])
    report.first = last
    report.causes = likely_causes(np.asarray(first[last.name]), np.asarray(second[last.name]), last.bound,
                             (step, earlier), (kinds or {}).get(last.name))
    return report


def compare_files(first: str | Path, second: str | Path) -> Report:
    """:func:`find_divergence` on two saved runs; the fan-ins and kinds are the first file's,
    else the second's."""
    a, b = load_activations(first), load_activations(second)
    check_alignment(a.outputs, b.outputs, (str(first), str(second)))
    return find_divergence(a.outputs, b.outputs, a.fan_ins or b.fan_ins, kinds=a.kinds or b.kinds)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rosetta_utils.divergence",
        description="Find the first layer where two runs' saved outputs differ by more than float32 allows, "
                    "and what the difference looks like.")
    parser.add_argument("first", help="one run's activations (.npz, from save_activations)")
    parser.add_argument("second", help="the other run's, with the same layer names in the same order")
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        report = compare_files(args.first, args.second)
    except DivergenceInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    return 1 if report.first is not None else 0


if __name__ == "__main__":
    sys.exit(main())
