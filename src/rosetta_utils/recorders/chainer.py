"""Record every layer's output of a Chainer model (Chainer 7).

``record(model, x)`` runs a link once under ``chainer.using_config("train", False)`` and
``chainer.no_backprop_mode()`` (dropout off, batch norms on ``avg_mean``/``avg_var``, no
graph kept) with a :class:`chainer.LinkHook` around the call (``with hook:``), which sees
every link's call and its output; the hook is removed when the call ends, raised or not.

What is recorded: every link without children (``L.Linear``, convolutions, normalisations,
``L.EmbedID``, ...) and, as one layer each, the recurrent links: ``L.NStepLSTM``,
``L.NStepGRU``, ``L.NStepBiLSTM``, ``L.NStepBiGRU`` and the ``NStepRNN`` ones (their
sequences ``ys``, stacked into one array (N, T, H) when every sequence has one length; a
recording of sequences of several lengths is refused), and the step links ``L.LSTM``,
``L.GRU``, ``L.StatelessLSTM``, ``L.StatelessGRU``, ``L.StatefulPeepholeLSTM``,
``L.StatefulZoneoutLSTM`` and the MGUs (their new hidden state; a step link called once a
step keeps its first step). Chains of your own are not recorded; their links are.

Chainer's activations, pools, reshapes and softmax are functions (``F.relu``,
``F.max_pooling_2d``, ``F.softmax``), not links: they are not recorded, and show in the next
link's output. A layer's path is its path in ``model.namedlinks()``, dotted (``/conv/0`` is
``conv.0``; a ``ChainList``'s children by index); a model that is itself one link is recorded
under its class's name in lower case. Numpy inputs go to the model's device.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

from rosetta_utils.frameworks import _use_stdlib_distutils

if "chainer" not in sys.modules:
    _use_stdlib_distutils()  # Chainer 7 needs the standard library's distutils, not setuptools' copy
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "pkg_resources is deprecated")
    import chainer
    import chainer.links as L

from rosetta_utils.recorders import (
    Collector,
    Recording,
    RecordingError,
    conv_fan_in,
    dense_fan_in,
    elementwise_gain,
    norm_terms,
    recurrent_fan_in,
)

__all__ = ["record", "to_numpy"]

_NSTEP = (L.NStepLSTM, L.NStepBiLSTM, L.NStepGRU, L.NStepBiGRU, L.NStepRNNTanh, L.NStepRNNReLU,
          L.NStepBiRNNTanh, L.NStepBiRNNReLU)
_STEPS = (L.LSTM, L.StatelessLSTM, L.StatefulPeepholeLSTM, L.StatefulZoneoutLSTM, L.StatefulGRU, L.StatelessGRU,
          L.StatefulMGU, L.StatelessMGU)
_CONVOLUTIONS = (L.Convolution2D, L.ConvolutionND, L.DilatedConvolution2D)
_DECONVOLUTIONS = (L.Deconvolution2D, L.DeconvolutionND)


def to_numpy(value: object) -> np.ndarray:
    """A ``chainer.Variable``, a numpy, cupy or chainerx array (or a list of equal-shaped
    ones) as a numpy array on the host."""
    if isinstance(value, (list, tuple)):
        arrays = [to_numpy(item) for item in value]
        if len({array.shape for array in arrays}) > 1:
            raise RecordingError(f"chainer: a list of arrays of different shapes "
                                 f"{[array.shape for array in arrays]} is not one array")
        return np.stack(arrays)
    if value is None:
        raise RecordingError("chainer: None is not an array")
    array = chainer.as_array(value) if isinstance(value, chainer.Variable) else value
    array = np.asarray(chainer.backend.CpuDevice().send(array))
    if array.dtype == object:
        raise RecordingError(f"chainer: a {type(value).__name__} is not an array of numbers")
    return array


def _as_it_is(item: object) -> bool:
    if item is None or isinstance(item, chainer.Variable):
        return True
    if isinstance(item, list):
        return all(hasattr(element, "shape") for element in item)
    return hasattr(item, "shape") and not isinstance(item, (np.ndarray, np.generic))


def _as_inputs(model: chainer.Link, inputs: object) -> list:
    """Numpy arrays sent to the model's device; variables, device arrays, lists of
    sequences (an NStep link's ``xs``) and ``None`` (its initial states) as they are."""
    items = list(inputs) if isinstance(inputs, tuple) else [inputs]
    converted = []
    for item in items:
        if _as_it_is(item):
            converted.append(item)
            continue
        array = np.asarray(item)
        if array.dtype.kind not in "biuf":
            raise RecordingError(f"chainer: an input of type {type(item).__name__} ({array.dtype}) is not an "
                                 "array of numbers")
        converted.append(model.device.send(array))
    return converted


# --- which links are layers --------------------------------------------------------------

def _has_children(link: chainer.Link) -> bool:
    return next(iter(link.children()), None) is not None


def _is_layer(link: chainer.Link) -> bool:
    return isinstance(link, _NSTEP + _STEPS) or not _has_children(link)


def _layers(model: chainer.Link) -> dict[int, str]:
    """id of each link to record -> its dotted path."""
    if _is_layer(model):
        return {id(model): type(model).__name__.lower()}
    found: dict[int, str] = {}
    inside: list[str] = []
    for name, link in model.namedlinks(skipself=True):
        if any(name.startswith(prefix) for prefix in inside) or id(link) in found:
            continue
        if _is_layer(link):
            found[id(link)] = name.strip("/").replace("/", ".")
            inside.append(name + "/")
    return found


# --- kinds and fan-ins -------------------------------------------------------------------

def _values(variable) -> np.ndarray:
    return to_numpy(variable).astype(np.float64)


def _bias(link: chainer.Link) -> bool:
    return getattr(link, "b", None) is not None


def _norm(link: chainer.Link, x: np.ndarray, y: np.ndarray) -> tuple[int, float]:
    gamma = getattr(link, "gamma", None)
    if isinstance(link, L.BatchNormalization):
        axis = link.axis
        reduced = (0,) + tuple(range(2, x.ndim)) if axis is None else ((axis,) if isinstance(axis, int) else axis)
        kept = [a for a in range(x.ndim) if a not in {r % x.ndim for r in reduced}]
        shape = [x.shape[a] if a in kept else 1 for a in range(x.ndim)]
        scale = (1.0 if gamma is None else _values(gamma)) / np.sqrt(_values(link.avg_var) + link.eps)
        return norm_terms(x, y, (), np.broadcast_to(scale, link.avg_var.shape).reshape(shape))
    if isinstance(link, L.LayerNormalization):
        return norm_terms(x, y, (-1,), 1.0 if gamma is None else _values(gamma))
    grouped = (x.shape[0], link.groups, -1)  # GroupNormalization: channels (axis 1) in groups
    scale = 1.0 if gamma is None else np.broadcast_to(_values(gamma).reshape((1, -1) + (1,) * (x.ndim - 2)), x.shape)
    scale = scale if np.isscalar(scale) else scale.reshape(grouped)
    return norm_terms(x.reshape(grouped), y.reshape(grouped), (2,), scale)


class _Hook(chainer.LinkHook):
    """Adds each recorded link's output to the collector after the link ran."""

    def __init__(self, collector: Collector, paths: dict[int, str]):
        self.name = f"rosetta_recorder_{id(self)}"
        self.collector, self.paths = collector, paths
        self.done: set[str] = set()

    def forward_postprocess(self, args) -> None:
        path = self.paths.get(id(args.link))
        if path is None:
            return
        if path in self.done:
            self.collector.note(f"{path} ran more than once: its first call is kept")
            return
        self.done.add(path)
        keep = self.collector.names is None or path in self.collector.names
        link, out = args.link, args.out
        x = args.args[0] if args.args else next(iter(args.kwargs.values()), None)
        if isinstance(link, _NSTEP):
            xs, ys = args.args[-1] if args.args else args.kwargs["xs"], out[-1]
            lengths = [len(y) for y in ys]
            if keep and len(set(lengths)) > 1:
                raise RecordingError(f"chainer: {path} ({type(link).__name__}) returned sequences of lengths "
                                     f"{lengths}; a recording holds one array: record it on sequences of one "
                                     "length")
            size, hidden, steps, total = xs[0].shape[-1], link.out_size, max(lengths), 0
            for _ in range(link.n_layers):
                total += recurrent_fan_in(size, hidden, steps, link.direction)
                size = hidden * link.direction
            self.collector.add(path, "recurrent", list(ys), total, spatial=False)
            return
        if isinstance(link, _STEPS):
            y = out[1] if isinstance(link, L.StatelessLSTM) else out
            x = args.args[-1]
            self.collector.add(path, "recurrent", y, recurrent_fan_in(x.shape[-1], y.shape[-1], 1), spatial=False)
            return
        y = out[0] if isinstance(out, (list, tuple)) else out
        kind, fan_in, gain, spatial = self.describe(path, link, args, x, y, keep)
        self.collector.add(path, kind, y, fan_in, gain=gain, source=x, spatial=spatial)

    def describe(self, path: str, link: chainer.Link, args, x: object, y: object, keep: bool):
        """kind, fan-in, gain, spatial of one link's call (``args``: the hook's)."""
        shape = getattr(x, "shape", ())
        per_example = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        if isinstance(link, L.Linear):
            batch_axes = args.kwargs.get("n_batch_axes", args.args[1] if len(args.args) > 1 else 1)
            if keep and len(shape) > batch_axes + 1:
                self.collector.note(f"{path}: Linear flattens its {tuple(shape)} input, so its fan-in counts the "
                                    f"flattened {link.W.shape[1]} features")
            return "dense", dense_fan_in(link.W.shape[1], _bias(link)), 1.0, False
        if isinstance(link, L.DepthwiseConvolution2D):
            channels = link.W.shape[1]
            return "conv", conv_fan_in(channels, channels, link.W.shape[2:], _bias(link)), 1.0, True
        if isinstance(link, _CONVOLUTIONS):
            groups = getattr(link, "groups", 1)
            fan_in = conv_fan_in(link.W.shape[1] * groups, groups, link.W.shape[2:], _bias(link))
            return "conv", fan_in, 1.0, True
        if isinstance(link, _DECONVOLUTIONS):
            groups = getattr(link, "groups", 1)
            return "conv", conv_fan_in(link.W.shape[0], groups, link.W.shape[2:], _bias(link)), 1.0, True
        if isinstance(link, (L.BatchNormalization, L.LayerNormalization, L.GroupNormalization)):
            fan_in, gain = _norm(link, to_numpy(x), to_numpy(y)) if keep else (0, 1.0)
            return "norm", fan_in, gain, None
        if isinstance(link, L.EmbedID):
            return "embedding", 0, 1.0, False
        if isinstance(link, (L.PReLU, L.Swish)):
            return "activation", 1, elementwise_gain(to_numpy(x), to_numpy(y)) if keep else 1.0, None
        if any(True for _ in link.params()):
            if keep:
                self.collector.note(f"{path}: {type(link).__name__} is not a link the recorder knows; its "
                                    "fan-in is taken as its input's size per example")
            return "other", per_example, 1.0, None
        return "other", 1, 1.0, None


def record(model: chainer.Link, inputs: object, *, names: dict[str, str] | None = None, layout: str = "NCHW",
           path: str | Path | None = None) -> Recording:
    """Run a Chainer link once in test mode, without a graph, on ``inputs`` (an array or a
    tuple of arrays: numpy, cupy or ``chainer.Variable``) and return every link's output with
    its kind and fan-in.

    ``names`` maps a link's dotted path to the name it is saved under (only those are kept);
    Chainer computes channels first, so ``layout`` changes nothing; ``path`` saves the
    recording there. Functions (``F.relu``, pools) are not recorded."""
    if not isinstance(model, chainer.Link):
        raise RecordingError(f"chainer: record needs a chainer.Link, not a {type(model).__name__}")
    arguments = _as_inputs(model, inputs)
    collector = Collector("chainer", names, layout, channels_last=False, to_numpy=to_numpy)
    collector.add_inputs([item for item in arguments if item is not None])
    hook = _Hook(collector, _layers(model))
    with chainer.using_config("train", False), chainer.no_backprop_mode(), hook:
        model(*arguments)
    return collector.finish(path)
