"""Record every layer's output of your own model in one call, in its framework's idiom.

One module per framework, each with the same function::

    from rosetta_utils.recorders.pytorch import record     # or .tensorflow, .jax,
    recording = record(model, x)                            # .mxnet, .chainer
    recording.save("pytorch.npz")

then, in either environment, ``python -m rosetta_utils.divergence pytorch.npz
keras.npz`` finds the first layer where two recordings part ways
(:mod:`rosetta_utils.divergence`).

``record(model, inputs, names=None, layout="NCHW", path=None)`` runs the model
once in inference mode on ``inputs`` (an array, or a tuple of arrays for a model
with several inputs) and returns a :class:`Recording`: the inputs (``"input"``,
``"input.1"``, ...), then the output of every layer in the order the layers ran,
each with the kind of layer and the longest sum one of its output values takes
(its fan-in), both read from the layer's own type and configuration.

``names`` maps the framework's path of a layer (its attribute path from the
model, ``"encoder.0"``; a Keras layer's name in a ``Sequential`` or functional
model) to the name it is saved under; with it, only those layers are kept (and
a path the run never reached is an error that names it). Two ports line up when
their recordings hold the same names in the same order.

``layout`` is the layout the recording is saved in: ``"NCHW"`` (channels
first, PyTorch's, the default everywhere) moves a channels-last framework's
image and feature-map outputs (Keras, Flax) to channels first, and flattens a
channels-last feature map in channels-first order, so that a correct port
records the same arrays; ``"native"`` keeps every array as the framework
computed it.

A recorder records what the framework calls a layer (a module, a layer, a
block, a link) and nothing between layers: a function called in a model's own
code (``torch.flatten``, ``nnx.relu``, ``F.relu``, a residual ``+``) shows in
the next layer's output. Where a layer returns several arrays (an LSTM's
sequence and states, an attention layer's output and weights), the recording
keeps the one the next layer reads, the sequence or the attended values.

This module holds what the five recorders share: :class:`Recording`, the
collector they fill, and each kind's fan-in and error gain (the float32
error model of :mod:`rosetta_utils.divergence`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from rosetta_utils.divergence import KINDS, save_activations

#: The layouts a recording can be saved in.
LAYOUTS = ("NCHW", "native")


class RecordingError(ValueError):
    """A model or an argument the recorder cannot record: says which and why."""


@dataclass
class Recording:
    """One run's layer outputs in the order they ran, with each layer's kind, fan-in and
    error gain (what the divergence command's bound needs), and what the recorder did."""

    framework: str
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    fan_ins: dict[str, int] = field(default_factory=dict)
    gains: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.outputs)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.outputs[name]

    def save(self, path: str | Path) -> Path:
        """Save it for ``python -m rosetta_utils.divergence`` (a numpy ``.npz``)."""
        return save_activations(path, self.outputs, self.fan_ins, self.kinds, self.gains)

    def as_data(self) -> dict:
        """The recording as plain data (strings, numbers, numpy arrays): what it holds."""
        return {"framework": self.framework, "outputs": dict(self.outputs), "kinds": dict(self.kinds),
                "fan_ins": dict(self.fan_ins), "gains": dict(self.gains), "notes": list(self.notes)}

    def summary(self) -> str:
        """One line a layer: name, kind, shape, fan-in, gain."""
        lines = [f"{self.framework}: {len(self)} layers recorded"]
        for name, array in self.outputs.items():
            gain = self.gains.get(name, 1.0)
            lines.append(f"  {name:<28} {self.kinds[name]:<10} {str(tuple(array.shape)):<20} "
                         f"fan-in {self.fan_ins[name]}" + (f", gain {gain:.3g}" if gain >= 1.005 else ""))
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


# --- each kind's fan-in: the longest float32 sum one output value takes ---------------

def dense_fan_in(in_features: int, bias: bool) -> int:
    """A dense layer: one product per input feature, and its bias."""
    return int(in_features) + int(bool(bias))


def conv_fan_in(in_channels: int, groups: int, kernel: Sequence[int], bias: bool) -> int:
    """A convolution (plain, grouped, depthwise, transposed): the channels of one group
    times the kernel's taps, and its bias."""
    return int(in_channels) // max(int(groups), 1) * int(np.prod(kernel)) + int(bool(bias))


def recurrent_fan_in(input_size: int, hidden_size: int, steps: int, directions: int = 1) -> int:
    """One recurrent layer: each step sums the input's and the state's products, and the
    last state carries every step's rounding (the gates' few operations counted too). The
    ``directions`` of a bidirectional layer take the same sums each, so they change nothing;
    stacked layers add theirs
    (the recorders sum this over the layers, each with its own input size)."""
    return int(steps) * (int(input_size) + int(hidden_size) + 8)


def attention_fan_in(embed: int, head: int, keys: int) -> int:
    """Multi-head attention: the projections (``embed`` terms each, three in a row),
    the scores (``head`` terms), the softmax's sum and the weighted sum (``keys`` each)."""
    return 3 * int(embed) + int(head) + 2 * int(keys) + 8


def _largest(array: np.ndarray) -> float:
    array = np.asarray(array, dtype=np.float64)
    return float(np.max(np.abs(array), initial=0.0)) if np.isfinite(array).all() else 0.0


def elementwise_gain(x: np.ndarray, y: np.ndarray) -> float:
    """How much an element-wise layer (an activation, an addition) may magnify the error
    its input carries, relative to its own largest output: its input's largest magnitude
    over its output's (a slope of at most 1; ReLU's, tanh's, GELU's about that)."""
    big_y = _largest(y)
    return max(1.0, _largest(x) / big_y) if big_y > 0 else 1.0


def softmax_gain(x: np.ndarray, y: np.ndarray) -> float:
    """A softmax turns its input's absolute error into a relative one: an input off by
    ``d`` moves a probability by up to ``2·d`` of its largest one."""
    big_y = _largest(y)
    return max(1.0, 2.0 * _largest(x) * _largest(y) / big_y) if big_y > 0 else 1.0


def norm_terms(x: np.ndarray, y: np.ndarray, axes: Sequence[int], scale: np.ndarray | float = 1.0,
               statistics: str = "two-pass") -> tuple[int, float]:
    """A normalisation's fan-in and gain, from its input ``x`` and output ``y``.

    ``axes``: the axes of ``x`` it reduces over (a layer norm's features, a batch norm's
    batch and spatial axes; none for a batch norm in inference mode, which uses its
    running statistics). ``scale``: the factor each input value is multiplied by (a
    batch norm's ``gamma / sqrt(running_var + eps)`` per channel, broadcast against
    ``x``); for a reducing norm ``gamma`` alone, the ``1/sigma`` coming from ``x``.
    ``statistics``: ``"two-pass"`` (the mean, then the mean square of ``x - mean``) or
    ``"fast"`` (``E[x²] - E[x]²``, Flax's ``use_fast_variance=True``, its default).

    The gain is how far an error in ``x`` grows relative to ``y``'s largest value:
    ``max|x| · max|scale/sigma| / max|y|``, large where the input sits far from zero
    (a mean of 20 and a spread of 1: 20 times). A reducing norm adds its own sums: the
    mean's ``n`` terms (magnified as its input's error is), and its variance's, which
    the fast formula magnifies by ``E[x²] / Var[x]`` (the cancellation of two large,
    nearly equal terms)."""
    x = np.asarray(x, dtype=np.float64)
    big_y = _largest(y)
    if big_y == 0 or not np.isfinite(x).all():
        return 4, 1.0
    axes = tuple(int(a) % x.ndim for a in axes)
    scale = np.abs(np.asarray(scale, dtype=np.float64))
    if axes:
        count = int(np.prod([x.shape[a] for a in axes]))
        variance = x.var(axis=axes, keepdims=True)
        sigma = np.sqrt(np.maximum(variance, np.finfo(np.float32).tiny))
        gain = float(np.max(np.abs(x) * scale / sigma)) / big_y
        if statistics == "fast":
            condition = float(np.max((x * x).mean(axis=axes, keepdims=True) / np.maximum(variance, 1e-300)))
        elif statistics == "two-pass":
            condition = 1.0
        else:
            raise RecordingError(f"statistics {statistics!r}: 'two-pass' or 'fast'")
        gain = max(1.0, gain)
        return int(math.ceil(gain * (count + 4) + condition * count - 1e-6)), gain
    gain = max(1.0, float(np.max(np.abs(x) * scale)) / big_y)
    return int(math.ceil(4 * gain - 1e-6)), gain


def input_array(framework: str, index: int, item: object) -> np.ndarray:
    """A model input given as something numpy reads (a numpy array, a list), as a numpy
    array of numbers; anything else is refused naming the input and its type."""
    try:
        array = np.asarray(item)
    except (TypeError, ValueError) as error:
        raise RecordingError(f"{framework}: input {index} ({type(item).__name__}) is not an array: "
                             f"{error}") from None
    if array.dtype.kind not in "biuf":
        raise RecordingError(f"{framework}: input {index} ({type(item).__name__}, dtype {array.dtype}) is not an "
                             "array of numbers (give numpy arrays, the framework's tensors, or a tuple of them)")
    return array


# --- layouts ----------------------------------------------------------------------------

def channels_first(array: np.ndarray) -> np.ndarray:
    """A channels-last feature map (N, ..., C) as channels first (N, C, ...)."""
    array = np.asarray(array)
    return np.moveaxis(array, -1, 1) if array.ndim >= 3 else array


# --- the collector every recorder fills ---------------------------------------------------

class Collector:
    """What a recorder fills as the model runs: :meth:`add` each layer's output (in the
    framework's layout) as it is computed; :meth:`recording` then keeps the named layers.

    ``channels_last``: the framework computes feature maps channels last (its outputs are
    moved when the recording is saved in ``"NCHW"``). A layer's output is a feature map
    when the layer makes one (``spatial=True``: a convolution, a pool) or when the array
    it reads is one (an activation, a normalisation, a dropout after a convolution):
    :meth:`add` follows that through the arrays it has seen (``source``: the input)."""

    def __init__(self, framework: str, names: Mapping[str, str] | None = None, layout: str = "NCHW",
                 channels_last: bool = False, to_numpy: Callable[[object], np.ndarray] = np.asarray):
        if layout not in LAYOUTS:
            raise RecordingError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
        if names is not None and not isinstance(names, Mapping):
            raise RecordingError(f"names must map a layer's path to its name, not {type(names).__name__}")
        self.framework, self.names, self.layout = framework, dict(names) if names is not None else None, layout
        self.move = channels_last and layout == "NCHW"
        self.to_numpy = to_numpy
        self.recording = Recording(framework)
        self._spatial: dict[int, bool] = {}  # id of an array seen -> is a channels-last feature map
        self._kept: list[object] = []  # keep the arrays alive while their ids are looked up
        self.seen: list[str] = []

    def _is_spatial(self, array: object) -> bool:
        return self._spatial.get(id(array), False)

    def _mark(self, array: object, spatial: bool) -> None:
        self._spatial[id(array)] = spatial
        self._kept.append(array)

    def add_inputs(self, inputs: Sequence[object]) -> None:
        """The model's inputs, first in the recording: an image batch (4 or 5 axes) is a
        feature map."""
        for index, array in enumerate(item for item in inputs if item is not None):
            values = self.to_numpy(array)
            spatial = values.ndim >= 4
            self._mark(array, spatial)
            name = "input" if index == 0 else f"input.{index}"
            self._store(name, name, "input", values, 0, 1.0, spatial)

    def keeps(self, path: str) -> bool:
        """Whether :meth:`add` keeps ``path`` (what ``names`` keeps): a recorder may skip the
        work of measuring a layer it does not keep."""
        return self.names is None or path in self.names

    def add(self, path: str, kind: str, output: object, fan_in: int, *, gain: float = 1.0,
            source: object = None, spatial: bool | None = None, flatten: bool = False) -> None:
        """One layer's output as the model computed it. ``kind``: a key of
        :data:`rosetta_utils.divergence.KINDS`. ``spatial``: True where the layer makes a
        feature map, False where it makes anything else, None where it keeps what its input
        ``source`` is. ``flatten``: the layer flattens ``source`` (its output is saved in
        channels-first order where ``source`` was a channels-last feature map)."""
        if kind not in KINDS:
            raise RecordingError(f"{path}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
        from_map = source is not None and self._is_spatial(source)
        is_map = from_map if spatial is None else spatial
        self._mark(output, is_map)
        self.seen.append(path)
        if self.names is not None and path not in self.names:
            return
        values = self.to_numpy(output)
        if flatten and from_map and self.move:
            values = channels_first(self.to_numpy(source)).reshape(values.shape[0], -1)
            is_map = False
        name = path if self.names is None else self.names[path]
        self._store(path, name, kind, values, fan_in, gain, is_map)

    def _store(self, path: str, name: str, kind: str, values: np.ndarray, fan_in: int, gain: float,
               is_map: bool) -> None:
        if name in self.recording.outputs:
            raise RecordingError(f"{path}: the name {name!r} is recorded twice (a layer called twice keeps "
                                 "its first call; map another name to the second)")
        if is_map and self.move:
            values = channels_first(values)
        values = np.array(values, copy=True)
        if values.dtype == object:
            raise RecordingError(f"{path}: its output is not an array of numbers")
        self.recording.outputs[name] = values
        self.recording.kinds[name] = kind
        self.recording.fan_ins[name] = int(fan_in)
        if gain != 1.0:
            self.recording.gains[name] = float(gain)

    def note(self, text: str) -> None:
        if text not in self.recording.notes:
            self.recording.notes.append(text)

    def finish(self, path: str | Path | None = None) -> Recording:
        """The recording, after checking that every named layer ran; saved where asked."""
        if self.names is not None:
            never = [p for p in self.names if p not in self.seen and not p.startswith("input")]
            if never:
                ran = ", ".join(self.seen[:12]) + (" ..." if len(self.seen) > 12 else "")
                raise RecordingError(f"{self.framework}: layers named but never run: {never} "
                                     f"(the layers that ran: {ran})")
        if not any(kind != "input" for kind in self.recording.kinds.values()):
            raise RecordingError(f"{self.framework}: no layer was recorded (the model ran no layer the "
                                 "recorder knows, or names kept none)")
        if path is not None:
            self.recording.save(path)
        return self.recording
