"""Where two runs of one model part ways: the first layer whose outputs differ by more
than float32 can explain, and what the difference looks like.

Two runs (a model and its port, each in its own framework) save every layer's
output, in the order the layers run, under the same names (a recorder of
:mod:`rosetta_utils.recorders` in one call, or :func:`save_activations`; one
``.npz`` file per run). :func:`find_divergence` walks the layers in that order
and stops at the first whose difference exceeds its bound, then names the likely
causes from the difference's shape and the layer's kind. From a shell, in either
environment::

    python -m rosetta_utils.divergence pytorch.npz mxnet.npz

The bound is float32's error model, for the difference of two correct runs. A
sum of ``n`` float32 terms is off by about ``n·u`` of its terms' size (``u =
2**-24``, the unit roundoff); a layer passes on what its input is off by, grown
by the layer's gain ``g`` (a normalisation divides by its input's spread, so an
input far from zero magnifies its error; 1 for most layers). Relative to layer
``l``'s largest output, one run is off by ``u·E_l`` with ``E_l = g_l·E_{l-1} +
n_l``, where ``n_l`` is the layer's fan-in (the longest sum one output value takes). Each
run carries its own error, ``u·E_l·max|y_l|`` from its own fan-ins and gains
(a Flax layer norm's variance formula loses more than PyTorch's), and may round
an element-wise result once more (one unit in the last place, ``2·u·max|y_l|``
at most), so two runs differ by up to ``u·(E_l + E'_l + 2)·max|y_l|``: the
bound, ``2·u·(E_l + 1)·max|y_l|`` where both runs carry the same terms. Fan-ins
and gains are saved with the run; a file saved without fan-ins is compared with
each layer's element count per example in their place, a looser bound that the
report states.
NaN and infinities count as equal where both runs hold the same one at the same
place, and as the divergence where they do not.

What a difference looks like points at its cause (:data:`CAUSES`): only at the
borders of an image (padding), an offset per channel (a bias), a scale and
offset per channel (normalisation), the same values in another order (layout or
flatten order), exact zeros in one run where the other has values, the kept ones
scaled (dropout or a training mode left on), one factor for the whole tensor (a
reduction or a scale), another shape (padding or a pool's rounding), NaN or
infinity, and, for training runs whose names start with their step
(``step2/fc``), a first difference after the first step (the optimiser's form).
A difference with no such shape ranks the causes its layer's kind has
(:data:`KINDS`): gates at a recurrent layer, the mask at an attention layer, the
form at an activation. Each cause lists the rows of the book's translation tables
that check it, with the page that holds each (:mod:`.divergence_rows`, written from
the tables' own front matter).
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from .differences import UNIT_ROUNDOFF, float64_difference
from .divergence_rows import ROWS

#: The key of the file's description (order, fan-ins, kinds, gains) in a saved ``.npz``.
_META = "__rosetta_divergence__"


class DivergenceInputError(ValueError):
    """Two runs that cannot be compared: names the file, the layer and what differs."""


@dataclass(frozen=True)
class Cause:
    """A likely reason for a difference of one shape, and the table rows that check it."""

    name: str
    evidence: str
    rows: tuple[str, ...]


#: Each cause: what a difference of its shape most likely is. The translation-table rows that
#: check each (:data:`CAUSES`) come from the tables themselves (:mod:`.divergence_rows`).
EVIDENCE = {
    'not finite': 'a NaN or an infinity: an overflow, a log of 0, a label or id outside its range',
    'input': "the input pipeline: the channels' mean and spread (or their RGB/BGR order), a scale (0-255 or 0-1), a layout or a dtype handed to the model",
    'padding': 'padding: where it goes, how much, and with what value',
    'pooling': 'another pooling: a size rounded down for up (ceil mode), max for average, the window or stride',
    'bias': 'a bias left out, left at zero or moved in part (one of two recurrent biases)',
    'normalisation': 'normalisation: epsilon, the statistics used (batch or running), their momentum, the axis',
    'order': "the same values in another order: a layout (channels first or last), a flatten order, a transposed or flipped kernel, an embedding's rows, channels in another order",
    'gates': "a recurrent layer's weights in the wrong places: its gates' order (PyTorch's i, f, g, o and r, z, n; Flax's separate kernels per gate), its directions, the reset's placement, a bias split",
    'forget bias': "an LSTM's forget-gate bias: 1 added at initialisation (Keras's unit_forget_bias) or two biases summed twice",
    'attention': "attention: the mask's polarity (True as attend or as ignore), the scale 1/sqrt(d), the packed projections' order (query, key, value), the heads' split",
    'softmax axis': "a softmax over another axis than the classes' (a default axis, channels first or last)",
    'activation': "an activation's form: GELU's tanh approximation for erf, a leaky slope's default, a hard sigmoid, a cap (ReLU6) left out",
    'dropout': 'exact zeros in one run only, the other values scaled: dropout left on, a training mode',
    'factor': "one factor for the whole tensor: a loss's reduction (mean or sum), a scale left out",
    'optimiser': "equal at the first step, different after it: the optimiser's form (epsilon's place, momentum's convention, weight decay coupled or decoupled)",
    'everywhere': "a difference with no simpler shape: weights moved into the wrong places, another formula (an activation's form or slope, reset placement)",
}

#: Each cause: what it is, and the labels of the translation-table rows that check it.
CAUSES = {name: (evidence, tuple(label for label, _ in ROWS.get(name, ()))) for name, evidence in EVIDENCE.items()}
_ROW_PAGES = {label: page for rows in ROWS.values() for label, page in rows}


def row_page(label: str) -> str:
    """The table page a row label is on (``tables/layers``)."""
    if label not in _ROW_PAGES:
        raise KeyError(f"no table page for the row {label!r}")
    return _ROW_PAGES[label]


#: The kinds whose fan-in a run measures or configures its own way, so two runs' may differ.
OWN_FAN_IN_KINDS = ("norm", "pool", "softmax")

#: Layer kinds a run may save, and the causes a difference no simpler shape explains
#: most likely has in a layer of that kind, most likely first.
KINDS = {
    "input": ("input",),
    "conv": ("order", "padding", "bias"),  # the kernel's layout first: padding shows on the borders
    "pool": ("pooling", "padding"),
    "norm": ("normalisation",),
    "dense": ("order", "bias"),  # a flatten in another order before it, a transposed kernel
    "recurrent": ("gates", "forget bias"),
    "dropout": ("dropout",),
    "activation": ("activation",),
    "softmax": ("softmax axis",),
    "attention": ("attention",),
    "embedding": ("order",),
    "reshape": ("order",),
    "loss": ("factor",),
    "other": (),
}


@dataclass(frozen=True)
class LayerCheck:
    """One layer of the two runs: its largest difference, its bound, how many values
    differ by more than the bound, and the error terms up to it (``E_l``)."""

    name: str
    shape: tuple[int, ...]
    difference: float  # the largest absolute difference (inf where only one run is not finite)
    bound: float
    sums: float  # E_l = g_l·E_{l-1} + n_l, the mean of the two runs' own
    differing: int = 0  # values beyond the bound
    other_shape: tuple[int, ...] | None = None  # the second run's, where it differs

    @property
    def diverges(self) -> bool:
        return self.other_shape is not None or not self.difference <= self.bound  # NaN too

    @property
    def share(self) -> float:
        """The difference as a share of the bound (0 where both are 0)."""
        if self.other_shape is not None:
            return float("inf")
        return self.difference / self.bound if self.bound > 0 else (0.0 if self.difference == 0 else float("inf"))


@dataclass
class Report:
    """Every layer compared up to the first divergence (all of them if there is none, or
    if asked to go on), and the causes named at the first."""

    layers: list[LayerCheck]
    first: LayerCheck | None
    causes: list[Cause] = field(default_factory=list)
    fan_ins_recorded: bool = True
    left_out: list[str] = field(default_factory=list)  # layers only one run recorded (common=True)
    notes: list[str] = field(default_factory=list)

    @property
    def divergences(self) -> list[LayerCheck]:
        return [check for check in self.layers if check.diverges]

    def lines(self, every_layer: bool = False) -> list[str]:
        """The report as a reader's terminal shows it; ``every_layer`` lists each layer."""
        out = [f"{len(self.layers)} layers compared; bound: float32's u·(E_l + E'_l + 2)·max|y_l|, each run's "
               "E_l = gain_l·E_(l-1) + fan-in_l"
               + ("" if self.fan_ins_recorded else " (no fan-ins saved: each layer's size per example "
                  "stands for its fan-in, a looser bound)")]
        if self.left_out:
            out.append(f"left out (recorded by one run only): {', '.join(self.left_out)}")
        out += [f"note: {note}" for note in self.notes]
        if every_layer:
            for check in self.layers:
                verdict = "DIVERGES" if check.diverges else "agrees"
                shape = (f"shapes {check.shape} and {check.other_shape}" if check.other_shape is not None
                         else f"difference {check.difference:.3g}, bound {check.bound:.3g}, "
                              f"{check.share:.3g} of it")
                out.append(f"  {check.name:<30} {verdict:<8} {shape}; {check.differing} values beyond")
        if self.first is None:
            worst = max(self.layers, key=lambda check: check.share, default=None)
            out.append("no divergence: every layer within its bound"
                       + (f"; the closest, {worst.name!r}, uses {worst.share:.3g} of its bound "
                          f"(difference {worst.difference:.3g}, bound {worst.bound:.3g})" if worst else ""))
            return out
        first = self.first
        number = self.layers.index(first) + 1
        if first.other_shape is not None:
            what = f"shape {first.shape} in the first run, {first.other_shape} in the second"
        else:
            size = int(np.prod(first.shape))
            what = (f"difference {first.difference:.3g} > bound {first.bound:.3g}; {first.differing} of "
                    f"{size} values beyond the bound")
        out.append(f"first divergence: layer {first.name!r} (number {number} in order; the {number - 1} before "
                   f"it agree), {what}")
        for rank, cause in enumerate(self.causes, 1):
            out.append(f"  {rank}. {cause.name}: {cause.evidence}")
            out.append("     rows: " + ", ".join(f"{row} ({row_page(row)})" for row in cause.rows))
        later = [check.name for check in self.divergences if check is not first]
        if later:
            out.append(f"later layers beyond their bounds too: {', '.join(later)}")
        return out


def _as_numbers(path: object, name: str, value: object) -> np.ndarray:
    """A layer's output as a numpy array of numbers: numpy arrays and what converts to one
    without a copy of objects; a framework's tensor is refused naming its type."""
    if isinstance(value, np.ndarray):
        array = value
    elif hasattr(value, "asnumpy"):  # an MXNet NDArray
        array = value.asnumpy()
    elif type(value).__module__.startswith("chainer") and hasattr(value, "array"):  # a chainer.Variable
        array = np.asarray(value.array)
    elif hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch.Tensor
        array = value.detach().cpu().numpy()
    else:
        try:
            array = np.asarray(value)
        except Exception as error:  # a type numpy cannot take
            raise DivergenceInputError(f"{path}: layer {name!r}: a {type(value).__name__} is no array "
                                       f"({error})") from None
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise DivergenceInputError(f"{path}: layer {name!r}: a {type(value).__module__}.{type(value).__name__} "
                                   f"holding {array.dtype} is not an array of numbers; convert it "
                                   "(tensor.numpy(), ndarray.asnumpy(), variable.array)")
    return array


def save_activations(path: str | Path, outputs: Mapping[str, np.ndarray],
                     fan_ins: Mapping[str, int] | None = None, kinds: Mapping[str, str] | None = None,
                     gains: Mapping[str, float] | None = None) -> Path:
    """Save one run's layer outputs, in the order the layers ran, with each layer's fan-in
    (the longest sum an output element takes), kind (a key of :data:`KINDS`) and gain
    (how much it magnifies its input's error, 1 if not given) where known. Framework
    tensors (PyTorch, MXNet, Chainer) are converted; anything else that is not an array
    of numbers is refused naming its type. Nothing is written if anything is refused."""
    if not outputs:
        raise DivergenceInputError(f"{path}: no layers to save")
    outputs = {str(name): _as_numbers(path, str(name), value) for name, value in outputs.items()}
    if _META in outputs:
        raise DivergenceInputError(f"{path}: {_META!r} is the file's own key, not a layer name")
    unknown = (set(fan_ins or {}) | set(kinds or {}) | set(gains or {})) - set(outputs)
    if unknown:
        raise DivergenceInputError(f"{path}: fan-ins, kinds or gains for layers without outputs: {sorted(unknown)}")
    strange = {name: kind for name, kind in (kinds or {}).items() if kind not in KINDS}
    if strange:
        raise DivergenceInputError(f"{path}: unknown layer kinds {strange} (known: {', '.join(KINDS)})")
    low = {name: gain for name, gain in (gains or {}).items() if not float(gain) >= 1.0}
    if low:
        raise DivergenceInputError(f"{path}: gains below 1 {low}: a layer's gain is at least 1")
    meta = {"order": list(outputs), "fan_ins": {name: int(n) for name, n in (fan_ins or {}).items()},
            "kinds": dict(kinds or {}), "gains": {name: float(g) for name, g in (gains or {}).items()}}
    path = Path(path)
    with open(path, "wb") as file:
        np.savez(file, **outputs, **{_META: np.array(json.dumps(meta))})
    return path


@dataclass
class Run:
    """One run's saved outputs in their order, and the fan-ins, kinds and gains saved with them."""

    outputs: dict[str, np.ndarray]
    fan_ins: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    gains: dict[str, float] = field(default_factory=dict)


def load_activations(path: str | Path) -> Run:
    """One run as :func:`save_activations` saved it (read without pickle). A file that is
    missing, empty, truncated, a ``.npy``, not numpy's at all, or holds no layers is refused
    naming what it is."""
    path = Path(path)
    if not path.is_file():
        raise DivergenceInputError(f"{path}: no such file")
    size = path.stat().st_size
    if size == 0:
        raise DivergenceInputError(f"{path}: the file is empty (0 bytes), not a file of saved activations (.npz)")
    with open(path, "rb") as file:
        head = file.read(6)
    if head == b"\x93NUMPY":
        raise DivergenceInputError(f"{path}: a single numpy array (.npy), not a file of saved activations (.npz, "
                                   "one array a layer, from save_activations or a recorder)")
    if not zipfile.is_zipfile(path):
        raise DivergenceInputError(f"{path}: not a file of saved activations (.npz): not a zip archive "
                                   f"({size} bytes{', truncated?' if head.startswith(b'PK') else ''})")
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = list(archive.files)
            meta = json.loads(str(archive[_META])) if _META in names else {}
            order = meta.get("order") or [name for name in names if name != _META]
            missing = [name for name in order if name not in names]
            if missing:
                raise DivergenceInputError(f"{path}: its order names layers it does not hold: {missing[:3]}")
            outputs = {name: archive[name] for name in order}
    except DivergenceInputError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise DivergenceInputError(f"{path}: not a file of saved activations (.npz): {error}") from None
    if not outputs:
        raise DivergenceInputError(f"{path}: holds no layers")
    return Run(outputs, {str(k): int(v) for k, v in meta.get("fan_ins", {}).items()},
               {str(k): str(v) for k, v in meta.get("kinds", {}).items()},
               {str(k): float(v) for k, v in meta.get("gains", {}).items()})


def check_alignment(first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray],
                    names: tuple[str, str] = ("the first run", "the second run")) -> None:
    """Refuse two runs whose layers differ in name or order, naming the first mismatch (a
    shape that differs is a divergence, found by :func:`layer_checks`)."""
    a, b = list(first), list(second)
    if not a or not b:
        raise DivergenceInputError(f"{names[0] if not a else names[1]} holds no layers")
    for index, (left, right) in enumerate(zip(a, b)):
        if left != right:
            raise DivergenceInputError(f"layer {index}: {names[0]} has {left!r} where {names[1]} has {right!r}")
    if len(a) != len(b):
        longer, extra = (names[0], a[len(b)]) if len(a) > len(b) else (names[1], b[len(a)])
        raise DivergenceInputError(f"{longer} has more layers: {extra!r} (layer {min(len(a), len(b))}) "
                                   "is missing from the other")


def _difference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """Each value's absolute difference (0 where both runs hold the same NaN or infinity,
    inf where only one is not finite), and the largest magnitude among the finite values."""
    difference, all_finite = float64_difference(a, b)
    if all_finite:  # every value of both finite: the common case
        scale = max(float(a.max()), -float(a.min()), float(b.max()), -float(b.min()), 0.0) if a.size else 0.0
        return np.abs(difference, out=difference), scale
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    finite = np.isfinite(a64) & np.isfinite(b64)
    both_same = ~finite & ((a64 == b64) | (np.isnan(a64) & np.isnan(b64)))
    difference = np.where(finite, np.abs(difference), np.inf)
    difference[both_same] = 0.0
    scale = max(float(np.max(np.abs(a64[finite]), initial=0.0)), float(np.max(np.abs(b64[finite]), initial=0.0)))
    return difference, scale


def layer_checks(first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray],
                 fan_ins: Mapping[str, int] | None = None, unit_roundoff: float = UNIT_ROUNDOFF,
                 stop: bool = True, gains: Mapping[str, float] | None = None,
                 second_terms: tuple[Mapping[str, int], Mapping[str, float]] | None = None) -> list[LayerCheck]:
    """Each layer's difference and bound, in order; up to the first divergence if ``stop``.
    A layer without a fan-in counts its size per example (all but the first axis); a
    layer without a gain passes its input's error on unchanged (gain 1). Each run carries
    its own error: ``second_terms`` (fan-ins, gains) are the second run's where they
    differ from the first's (a normalisation's, measured on each run's input); the bound
    is ``u·(E_first + E_second + 2)·max|y|``, twice one run's where both are the same."""
    check_alignment(first, second)
    own = (dict(fan_ins or {}), dict(gains or {}))
    other = (dict(second_terms[0]), dict(second_terms[1])) if second_terms is not None else own
    checks, errors = [], [0.0, 0.0]
    for name, a in first.items():  # a training run's later steps carry the earlier steps' errors
        a, b = np.asarray(a), np.asarray(second[name])
        size = int(np.prod(a.shape[1:])) if a.ndim > 1 else max(a.size, 1)
        for run, (run_fan_ins, run_gains) in enumerate((own, other)):
            fan_in = run_fan_ins.get(name, own[0].get(name, size))
            errors[run] = run_gains.get(name, 1.0) * errors[run] + fan_in
        terms = (errors[0] + errors[1]) / 2
        if a.shape != b.shape:
            check = LayerCheck(name, tuple(a.shape), float("inf"), 0.0, terms, 0, tuple(b.shape))
        else:
            difference, scale = _difference(a, b)
            bound = 2 * unit_roundoff * (terms + 1) * scale
            largest = float(difference.max(initial=0.0))
            check = LayerCheck(name, tuple(a.shape), largest, bound, terms, int((difference > bound).sum()))
        checks.append(check)
        if stop and check.diverges:
            break
    return checks


def _fit_error(target: np.ndarray, design: np.ndarray) -> float:
    """The largest residual of ``target`` fitted by least squares on ``design``'s columns."""
    coefficients, *_ = np.linalg.lstsq(design, target, rcond=None)
    return float(np.max(np.abs(design @ coefficients - target), initial=0.0))


def _channel_axes(shape: tuple[int, ...]) -> list[int]:
    """The axes that may hold channels or features: 1 (channels first) and the last."""
    return sorted({1, len(shape) - 1}) if len(shape) >= 2 else []


def _per_channel(a64: np.ndarray, b64: np.ndarray, bound: float, offset_only: bool) -> int | None:
    """The channel axis along which ``b`` is ``a`` times a scale plus an offset per channel
    (``offset_only``: plus an offset alone), up to float32's bound; None if none is."""
    for axis in _channel_axes(a64.shape):
        moved_a, moved_b = np.moveaxis(a64, axis, 0), np.moveaxis(b64, axis, 0)
        if moved_a[0].size < 3:
            continue
        worst = 0.0
        for c in range(moved_a.shape[0]):
            x, y = moved_a[c].ravel(), moved_b[c].ravel()
            if offset_only:
                shift = y - x
                worst = max(worst, float(np.ptp(shift)) / 2)
            else:
                worst = max(worst, _fit_error(y, np.stack([x, np.ones(x.size)], 1)))
            if worst > bound:
                break
        if worst <= bound:
            return axis
    return None


def _is_permutation(a64: np.ndarray, b64: np.ndarray, bound: float, largest: float) -> bool:
    """The two hold the same values in another order (sorted, they agree within the bound
    and far closer than in place), in the whole tensor or within each example."""
    if np.abs(np.sort(a64, axis=None) - np.sort(b64, axis=None)).max() <= min(bound, 0.1 * largest):
        return True
    if a64.ndim >= 2:
        flat_a, flat_b = a64.reshape(len(a64), -1), b64.reshape(len(b64), -1)
        apart = np.abs(np.sort(flat_a, axis=1) - np.sort(flat_b, axis=1)).max()
        return bool(apart <= min(bound, 0.1 * largest))
    return False


def likely_causes(a: np.ndarray, b: np.ndarray, bound: float, steps: tuple[str | None, bool] = (None, False),
                  kind: str | None = None) -> list[Cause]:
    """The likely causes of a difference between ``a`` and ``b``, most likely first;
    ``bound`` is what float32 allows at this layer. ``steps``: the step the difference
    appears at, and whether an earlier step was compared without one; ``kind``: the
    layer's kind (:data:`KINDS`), which ranks the causes of a difference whose shape
    names none, and of a shape that differs."""
    a, b = np.asarray(a), np.asarray(b)
    causes: list[Cause] = []

    def found(name: str, evidence: str) -> None:
        if all(cause.name != name for cause in causes):
            causes.append(Cause(name, evidence, CAUSES[name][1]))

    def by_kind(evidence: str) -> None:
        for name in KINDS.get(kind or "other", ()):
            found(name, f"{evidence}, in a layer of kind {kind!r}")

    if a.shape != b.shape:
        if a.size == b.size and _is_permutation(a.astype(np.float64).ravel(), b.astype(np.float64).ravel(),
                                                bound, float("inf")):
            found("order", f"the same values in the shapes {a.shape} and {b.shape}: a layout")
        if kind in ("pool", "conv", "reshape"):
            first = "pooling" if kind == "pool" else "padding" if kind == "conv" else "order"
            found(first, f"shape {a.shape} in one run, {b.shape} in the other, at a layer of kind {kind!r}")
        by_kind(f"shape {a.shape} in one run, {b.shape} in the other")
        found("everywhere", f"shape {a.shape} in one run, {b.shape} in the other")
        return causes
    difference, _ = _difference(a, b)
    if np.isinf(difference).any():
        where = "the first run" if not np.isfinite(a[np.isinf(difference)]).all() else "the second run"
        count = int(np.isinf(difference).sum())
        found("not finite", f"{count} NaN or infinite values in one run only, first in {where}")
        return causes
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    step, earlier_agreed = steps
    if step is not None and earlier_agreed:
        found("optimiser", f"every layer agreed before {step}")
    tolerance = 4 * bound + 1e-12
    largest = float(difference.max(initial=0.0))
    differs = difference > tolerance
    plain = lambda: all(cause.name == "optimiser" for cause in causes)  # noqa: E731 - no shape named yet
    if kind == "input" and differs.any():
        if _per_channel(a64, b64, bound, offset_only=False) is not None or _is_permutation(a64, b64, bound, largest):
            found("input", "per channel, the second run's input is a scale and an offset of the first's, or the "
                           "same values in another order")
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
    if _is_permutation(a64, b64, bound, largest):
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
    if a64.any() and plain():
        factor = float((a64 * b64).sum() / (a64 * a64).sum())
        if abs(factor - 1) > 1e-4 and np.abs(b64 - factor * a64).max() <= tolerance * max(1.0, abs(factor)):
            found("factor", f"the second run is {factor:.6g} times the first")
    # an offset per channel (a bias), then a scale and an offset (a normalisation)
    if plain() and a.ndim >= 2:
        axis = _per_channel(a64, b64, bound, offset_only=True)
        if axis is not None:
            evidence = f"per channel along axis {axis}, the second run is the first plus an offset"
            if kind == "norm":  # a running mean, or a bias folded into one
                found("normalisation", evidence)
            found("bias", evidence)
        else:
            axis = _per_channel(a64, b64, bound, offset_only=False)
            if axis is not None:
                found("normalisation", f"per channel along axis {axis}, the second run is a scale and an "
                                       "offset of the first")
    if kind == "softmax" and plain():
        sums_a = [np.abs(a64.sum(axis=k) - 1).max() for k in range(a.ndim)]
        sums_b = [np.abs(b64.sum(axis=k) - 1).max() for k in range(a.ndim)]
        axis_a, axis_b = int(np.argmin(sums_a)), int(np.argmin(sums_b))
        if axis_a != axis_b and min(sums_a) < 1e-3 and min(sums_b) < 1e-3:
            found("softmax axis", f"the first run's values sum to 1 along axis {axis_a}, the second's along "
                                  f"axis {axis_b}")
    if plain():
        spread = f"{int(differs.sum())} of {a.size} values differ, with no simpler shape"
        by_kind(spread)
        found("everywhere", spread)
    return causes


def _common(first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray]):
    """The layers both runs recorded, in the first run's order, and those left out."""
    both = [name for name in first if name in second]
    order_b = [name for name in second if name in first]
    if both != order_b:
        index = next(i for i, (x, y) in enumerate(zip(both, order_b)) if x != y)
        raise DivergenceInputError(f"the layers both runs recorded run in another order: {both[index]!r} where "
                                   f"the second has {order_b[index]!r}")
    left_out = [name for name in first if name not in second] + [name for name in second if name not in first]
    if not both:
        raise DivergenceInputError("the two runs recorded no layer under the same name")
    return ({name: first[name] for name in both}, {name: second[name] for name in both}, left_out)


def find_divergence(first: Mapping[str, np.ndarray], second: Mapping[str, np.ndarray],
                    fan_ins: Mapping[str, int] | None = None, unit_roundoff: float = UNIT_ROUNDOFF,
                    kinds: Mapping[str, str] | None = None, gains: Mapping[str, float] | None = None,
                    keep_going: bool = False, common: bool = False,
                    second_terms: tuple[Mapping[str, int], Mapping[str, float]] | None = None) -> Report:
    """Compare two runs layer by layer (:func:`layer_checks`) and name the likely causes at
    the first layer that exceeds its bound (:func:`likely_causes`). ``keep_going``: compare
    every layer, past the first divergence; ``common``: compare only the layers both runs
    recorded (the report lists the others); ``second_terms``: the second run's own fan-ins
    and gains, where they differ from the first's (:func:`layer_checks`)."""
    left_out: list[str] = []
    if common:
        first, second, left_out = _common(first, second)
    checks = layer_checks(first, second, fan_ins, unit_roundoff, stop=not keep_going, gains=gains,
                          second_terms=second_terms)
    report = Report(checks, None, fan_ins_recorded=bool(fan_ins) and all(name in fan_ins for name in first),
                    left_out=left_out)
    diverged = [check for check in checks if check.diverges]
    if not diverged:
        return report
    at = diverged[0]
    step = at.name.split("/", 1)[0] if "/" in at.name else None
    before = checks[: checks.index(at)]
    earlier = step is not None and any(c.name.split("/", 1)[0] != step for c in before)
    report.first = at
    report.causes = likely_causes(np.asarray(first[at.name]), np.asarray(second[at.name]), at.bound,
                                  (step, earlier), (kinds or {}).get(at.name))
    return report


def _agree_or_refuse(label: str, a: Mapping, b: Mapping, names: tuple[str, str], layers: Iterable[str]) -> None:
    """Two files' descriptions of the same layers must agree: refuse naming the first that does not."""
    for layer in layers:
        if layer in a and layer in b and a[layer] != b[layer]:
            raise DivergenceInputError(f"the two files disagree on layer {layer!r}'s {label}: {a[layer]!r} in "
                                       f"{names[0]}, {b[layer]!r} in {names[1]}")


def compare_files(first: str | Path, second: str | Path, keep_going: bool = False, common: bool = False) -> Report:
    """:func:`find_divergence` on two saved runs, each run's error from its own fan-ins and
    gains. Where both files describe a layer, they must agree on its kind, and on its fan-in
    except at a normalisation (whose terms are measured on each run's input, and whose
    variance formula is the framework's own), a pool or a softmax; a disagreement is
    refused, naming the layer.
    A description one file lacks is taken from the other. A pool's or a softmax's fan-in
    may differ too (a max pool sums nothing, an average pool its window; a softmax sums
    its axis): each run is held to its own, and the report says so, since another pooling
    or axis is itself a likely cause."""
    a, b = load_activations(first), load_activations(second)
    names = (str(first), str(second))
    outputs_a, outputs_b = a.outputs, b.outputs
    if common:
        outputs_a, outputs_b, _ = _common(outputs_a, outputs_b)
    else:
        check_alignment(outputs_a, outputs_b, names)
    _agree_or_refuse("kind", a.kinds, b.kinds, names, outputs_a)
    kinds = {**b.kinds, **a.kinds}
    structural = [layer for layer in outputs_a if kinds.get(layer) not in OWN_FAN_IN_KINDS]
    _agree_or_refuse("fan-in", a.fan_ins, b.fan_ins, names, structural)
    notes = [f"{layer!r} ({kinds[layer]}): fan-in {a.fan_ins[layer]} in the first run, {b.fan_ins[layer]} in the "
             "second, each run held to its own" for layer in outputs_a
             if kinds.get(layer) in OWN_FAN_IN_KINDS and layer in a.fan_ins and layer in b.fan_ins
             and a.fan_ins[layer] != b.fan_ins[layer] and kinds[layer] != "norm"]
    fan_ins_a, fan_ins_b = {**b.fan_ins, **a.fan_ins}, {**a.fan_ins, **b.fan_ins}
    report = find_divergence(a.outputs, b.outputs, fan_ins_a, kinds=kinds, gains=a.gains, keep_going=keep_going,
                             common=common, second_terms=(fan_ins_b, b.gains))
    report.notes.extend(notes)
    return report


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rosetta_utils.divergence",
        description="Find the first layer where two runs' saved outputs differ by more than float32 allows, "
                    "and what the difference looks like. Exit status: 0 every layer agrees, 1 a divergence, "
                    "2 files that cannot be compared.")
    parser.add_argument("first", help="one run's activations (.npz, from a recorder or save_activations)")
    parser.add_argument("second", help="the other run's, with the same layer names in the same order")
    parser.add_argument("--all", action="store_true", dest="every_layer",
                        help="list every layer compared, with its difference and bound")
    parser.add_argument("--keep-going", action="store_true",
                        help="compare every layer, past the first divergence, and list those beyond their bounds")
    parser.add_argument("--common", action="store_true",
                        help="compare only the layers both runs recorded (a framework that computes an "
                             "activation as a function records no layer for it)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        report = compare_files(args.first, args.second, keep_going=args.keep_going, common=args.common)
    except DivergenceInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(report.lines(every_layer=args.every_layer)))
    return 1 if report.first is not None else 0


if __name__ == "__main__":
    sys.exit(main())
