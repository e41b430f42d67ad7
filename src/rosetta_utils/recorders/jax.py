"""Record every layer's output of a Flax NNX model (``flax.nnx``) in one call.

::

    from rosetta_utils.recorders.jax import record
    recording = record(model, x)          # x: channels last (NHWC), as the model reads it
    recording.save("jax.npz")

What is recorded: every leaf module (a module without submodules: ``nnx.Linear``,
``nnx.Conv``, ``nnx.ConvTranspose``, ``nnx.BatchNorm``, ``nnx.LayerNorm``, ``nnx.Embed``,
``nnx.Dropout``, ...), and ``nnx.MultiHeadAttention``, ``nnx.RNN``, ``nnx.Bidirectional``
and a recurrent cell called on its own, each as one layer (their submodules are not
recorded). ``nnx.Sequential`` and your own modules are containers: their modules are
recorded, not they. A layer's path is its attribute path from the model, list indices
as numbers (``"encoder.layers.0"``; an ``nnx.Sequential``'s modules are ``"layers.0"``...);
a module shared by two attributes is recorded under the first path Flax finds; a model
that is itself one layer is recorded under its class's name in lower case (``"linear"``).

What is not: activations and pools are functions in Flax (``nnx.relu``, ``nnx.max_pool``,
``jnp.reshape``), not modules, so they are not recorded; a wrong one shows in the next
recorded layer's output. A layer's other methods (``Embed.attend``) are not recorded
either, only its ``__call__``.

How: for the one call, each recorded module's class is swapped for a subclass of it
whose ``__call__`` runs the original and records its output; the original classes are
put back afterwards, and the modules' modes (``deterministic``, ``use_running_average``)
are restored, even when the forward raises. ``nnx.capture`` is not used: it cannot record
inside ``nnx.RNN``'s scan, and it records containers' methods too.

A model whose forward is jitted (``nnx.jit``, ``jax.jit`` with the model as an argument)
or scanned is traced again with those subclasses (they change the model's graph
definition), and a layer whose output is traced sends it out through an ordered
``jax.debug.callback``: the values are those of the compiled program (which may fuse a
little differently from an unrecorded run). A layer run several times (a loop, a scan
over stacked layers, a shared module) keeps its first call, with a note; under
``nnx.vmap`` a layer's output arrives one example at a time, so only the first example
is kept. A function jitted with ``jax.jit`` that closes over the model and was compiled before is
not traced again: nothing inside it is recorded.

Inputs: a numpy or JAX array, or a tuple of them for several inputs, in the model's own
layout (Flax's convolutions are channels last: ``layout="NCHW"`` moves the recorded
feature maps to channels first: a convolution's output, and a norm's, a dropout's or an
unknown layer's whose input is the array a feature map was last seen as, by its number
of axes and channels, since the pools and activations between are functions). The
model runs in inference mode (``model.eval()``); JAX computes no gradient unless asked.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx

from rosetta_utils.recorders import (
    Collector,
    Recording,
    RecordingError,
    attention_fan_in,
    conv_fan_in,
    dense_fan_in,
    elementwise_gain,
    input_array,
    norm_terms,
    recurrent_fan_in,
)

__all__ = ["record"]

FRAMEWORK = "jax"

#: Layers recorded as one layer, their submodules not recorded.
_WHOLE = (nnx.Linear, nnx.LinearGeneral, nnx.Conv, nnx.ConvTranspose, nnx.Embed, nnx.Dropout, nnx.BatchNorm,
          nnx.LayerNorm, nnx.GroupNorm, nnx.RMSNorm, nnx.InstanceNorm, nnx.PReLU, nnx.MultiHeadAttention,
          nnx.RNN, nnx.Bidirectional, nnx.RNNCellBase)

#: The attributes ``model.eval()`` sets, restored after the call.
_MODES = ("deterministic", "use_running_average")


@dataclass(frozen=True)
class _Layer:
    """What is known of one layer's call when it is made (at trace time under jit)."""

    path: str
    kind: str
    fan_in: int
    spatial: bool | None  # None: a feature map when its input is one
    x_shape: tuple
    norm: tuple | None = None  # a norm: (reduced axes, statistics, the scale's axes, epsilon, groups)
    gain: str | None = None  # "elementwise": gain from x and y
    note: str | None = None


class _Session:
    """One ``record`` call: the collector, and which arrays are feature maps."""

    def __init__(self, collector: Collector):
        self.collector = collector
        self.counts: dict[str, int] = {}
        self.maps: dict[int, bool] = {}  # id of an array seen -> is a channels-last feature map
        self.kept: list[object] = []
        self.history: list[tuple[int, int, bool]] = []  # (ndim, last axis, feature map) of each array seen
        self.errors: list[BaseException] = []
        self.traced = False

    def saw(self, array: object, spatial: bool) -> None:
        shape = np.shape(array)
        self.maps[id(array)] = spatial
        self.kept.append(array)
        self.history.append((len(shape), shape[-1] if shape else 0, spatial))

    def follows_map(self, x: object, shape: tuple) -> bool:
        """Whether a layer's input is a feature map: the array itself when it was seen,
        else the latest array seen with its number of axes and its channels (a function
        between layers, a pool or an activation, keeps both)."""
        if x is not None and id(x) in self.maps:
            return self.maps[id(x)]
        if len(shape) < 3:
            return False
        for ndim, last, spatial in reversed(self.history):
            if ndim == len(shape) and last == shape[-1]:
                return spatial
        return False

    def deliver(self, layer: _Layer, arrays: dict, eager: bool) -> None:
        try:
            self._deliver(layer, arrays, eager)
        except Exception as error:  # noqa: BLE001 (raised after the call: a callback must not raise)
            self.errors.append(error)

    def _deliver(self, layer: _Layer, arrays: dict, eager: bool) -> None:
        count = self.counts.get(layer.path, 0) + 1
        self.counts[layer.path] = count
        if count > 1:
            return
        x, y = arrays.get("x"), arrays["y"]
        spatial = layer.spatial
        if spatial is None:
            spatial = self.follows_map(x if eager else None, layer.x_shape)
        fan_in, gain = layer.fan_in, 1.0
        measure = self.collector.keeps(layer.path)
        if measure and layer.norm is not None:
            fan_in, gain = _norm_terms(layer, arrays)
        elif measure and layer.gain == "elementwise":
            gain = elementwise_gain(_numpy(x), _numpy(y))
        if layer.note:
            self.collector.note(layer.note)
        self.saw(y, spatial)
        self.collector.add(layer.path, layer.kind, y, fan_in, gain=gain, spatial=spatial)

    def close(self) -> None:
        for path, count in self.counts.items():
            if count > 1:
                self.collector.note(f"{path} ran {count} times (a loop, a scan, vmap or a shared module): "
                                    "its first call is kept")
        if self.traced:
            self.collector.note("some layers ran inside a traced function (jit, scan): their outputs were "
                                "recorded through jax.debug.callback")


_SESSION: _Session | None = None
_CLASSES: dict[tuple[type, str], type] = {}


def _numpy(array: object) -> np.ndarray:
    values = np.asarray(array)
    return values.astype(np.float32) if values.dtype.name == "bfloat16" else values


def _deliver(layer: _Layer, arrays: dict) -> None:
    """Where an ordered debug callback sends a traced layer's values (a compiled program
    recorded in an earlier call calls it too: no session, nothing to do)."""
    if _SESSION is not None:
        _SESSION.deliver(layer, arrays, eager=False)


def _is_traced(tree: object) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(tree))


def _observe(module: nnx.Module, path: str, args: tuple, kwargs: dict, out: object) -> None:
    session = _SESSION
    if session is None:
        return
    x = args[0] if args else next((v for v in kwargs.values() if hasattr(v, "shape")), None)
    y = _primary(module, out)
    if y is None:
        session.collector.note(f"{path} ({type(module).__name__}) returned no array: not recorded")
        return
    try:
        layer, extra = _describe(module, path, x, y, args, kwargs)
    except (AttributeError, TypeError, ValueError, IndexError) as error:
        raise RecordingError(f"{path}: cannot read the configuration of this {type(module).__name__} "
                             f"({error})") from error
    arrays = {"y": y, **extra}
    if layer.norm is not None or layer.gain:
        arrays["x"] = x
    if _is_traced(arrays):
        session.traced = True
        try:
            jax.debug.callback(functools.partial(_deliver, layer), arrays, ordered=True)
        except Exception:  # noqa: BLE001 (a transformation that refuses ordered effects)
            jax.debug.callback(functools.partial(_deliver, layer), arrays)
        return
    session.deliver(layer, dict(arrays, x=x), eager=True)
    if session.errors:
        raise session.errors[0]


def _recording_class(cls: type, path: str) -> type:
    """A subclass of ``cls`` whose ``__call__`` records the layer at ``path`` (one per
    class and path, so a compiled program recorded once is found again)."""
    key = (cls, path)
    if key not in _CLASSES:
        def __call__(self, *args, **kwargs):
            out = cls.__call__(self, *args, **kwargs)
            _observe(self, path, args, kwargs, out)
            return out

        namespace = {"__call__": __call__, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        _CLASSES[key] = type(cls)(cls.__name__, (cls,), namespace,
                                  pytree=getattr(cls, "_pytree__is_pytree", False))
    return _CLASSES[key]


# --- what each layer is -------------------------------------------------------------------

def _primary(module: nnx.Module, out: object) -> object:
    """The output the next layer reads: a recurrent layer's sequence (not its carry), a
    cell's output, else the array or the first array of a tuple."""
    if isinstance(module, (nnx.RNN, nnx.Bidirectional, nnx.RNNCellBase)) and isinstance(out, tuple):
        out = out[1]
    if hasattr(out, "shape") and hasattr(out, "dtype"):
        return out
    if isinstance(out, (tuple, list)):
        return next((leaf for leaf in jax.tree_util.tree_leaves(out) if hasattr(leaf, "shape")), None)
    return None


def _axes(axes: object, ndim: int) -> tuple[int, ...]:
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    return tuple(sorted(int(a) % ndim for a in axes))


def _param(module: nnx.Module, name: str) -> object:
    value = getattr(module, name, None)
    return None if value is None else value[...]


def _override(module: nnx.Module, name: str, kwargs: dict, position: int | None = None,
              args: tuple = ()) -> object:
    if name in kwargs and kwargs[name] is not None:
        return kwargs[name]
    if position is not None and len(args) > position and args[position] is not None:
        return args[position]
    return getattr(module, name, None)


def _describe(module: nnx.Module, path: str, x: object, y: object, args: tuple,
              kwargs: dict) -> tuple[_Layer, dict]:
    """The layer's kind and fan-in from its type and configuration, and the arrays a norm's
    terms need (sent with its output)."""
    shape = tuple(np.shape(x)) if x is not None else ()
    name = type(module).__name__
    layer = functools.partial(_Layer, path, x_shape=shape)
    statistics = "fast" if getattr(module, "use_fast_variance", True) else "two-pass"
    if isinstance(module, nnx.Conv):
        return layer("conv", conv_fan_in(module.in_features, module.feature_group_count, module.kernel_size,
                                         module.use_bias), True), {}
    if isinstance(module, nnx.ConvTranspose):  # the same taps whether transpose_kernel or not
        return layer("conv", conv_fan_in(module.in_features, 1, module.kernel_size, module.use_bias), True), {}
    if isinstance(module, nnx.Linear):
        return layer("dense", dense_fan_in(module.in_features, module.use_bias), False), {}
    if isinstance(module, nnx.LinearGeneral):
        size = int(np.prod(module.in_features))
        return layer("dense", dense_fan_in(size, module.use_bias), False), {}
    if isinstance(module, nnx.Embed):
        return layer("embedding", 0, False), {}
    if isinstance(module, nnx.Dropout):
        return layer("dropout", 0, None), {}
    if isinstance(module, nnx.PReLU):
        return layer("activation", 1, None, gain="elementwise"), {}
    if isinstance(module, nnx.MultiHeadAttention):
        keys = kwargs.get("inputs_k", args[1] if len(args) > 1 else None)
        keys = x if keys is None else keys
        embed = max(int(module.in_features), int(module.qkv_features))
        return layer("attention", attention_fan_in(embed, module.head_dim, np.shape(keys)[-2]), False), {}
    if isinstance(module, (nnx.RNN, nnx.Bidirectional, nnx.RNNCellBase)):
        return _recurrent(module, layer, shape, np.shape(y), kwargs), {}
    ndim = len(shape)
    if isinstance(module, nnx.BatchNorm):
        features = _axes(module.axis, ndim)
        scale = _param(module, "scale")
        if _override(module, "use_running_average", kwargs, 1, args):
            arrays = {"gamma": scale, "var": module.var[...]}
            return layer("norm", 0, None, norm=((), "running", features, float(module.epsilon), 0)), arrays
        reduced = tuple(a for a in range(ndim) if a not in features)
        note = f"{path}: a batch norm run on the batch's statistics (use_running_average=False)"
        return layer("norm", 0, None, norm=(reduced, statistics, features, 0.0, 0), note=note), {"gamma": scale}
    if isinstance(module, nnx.GroupNorm):
        reduced = list(range(1, ndim - 1)) + [ndim - 1] if module.reduction_axes is None else module.reduction_axes
        reduced = _axes(reduced, ndim)
        grouped = tuple(reduced[:-1]) + (ndim,)  # axes of x reshaped to (..., groups, group size)
        return (layer("norm", 0, None, norm=(grouped, statistics, (ndim - 1, ndim), 0.0, module.num_groups)),
                {"gamma": _param(module, "scale")})
    if isinstance(module, nnx.InstanceNorm):
        features = _axes(module.feature_axes, ndim)
        reduced = tuple(a for a in range(1, ndim) if a not in features)
        return layer("norm", 0, None, norm=(reduced, statistics, features, 0.0, 0)), {"gamma": _param(module, "scale")}
    if isinstance(module, (nnx.LayerNorm, nnx.RMSNorm)):
        statistics = "rms" if isinstance(module, nnx.RMSNorm) else statistics
        norm = (_axes(module.reduction_axes, ndim), statistics, _axes(module.feature_axes, ndim), 0.0, 0)
        return layer("norm", 0, None, norm=norm), {"gamma": _param(module, "scale")}
    if nnx.state(module, nnx.Param):
        size = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        note = (f"{path} ({name}): a layer the recorder does not know, with weights: recorded as 'other' "
                "with its input's size per example as fan-in")
        return layer("other", size, None, note=note), {}
    return layer("other", 1, None, note=f"{path} ({name}): a layer the recorder does not know: "
                                        "recorded as 'other'"), {}


def _recurrent(module: nnx.Module, layer: Any, shape: tuple, out_shape: tuple, kwargs: dict) -> _Layer:
    if isinstance(module, nnx.RNNCellBase):
        cell, steps, directions = module, 1, 1
    else:
        rnn = module.forward_rnn if isinstance(module, nnx.Bidirectional) else module
        cell, directions = rnn.cell, 2 if isinstance(module, nnx.Bidirectional) else 1
        time_major = _override(module, "time_major", kwargs)
        steps = shape[0] if time_major else shape[-2]
    input_size = getattr(cell, "in_features", shape[-1] if shape else 0)
    hidden = getattr(cell, "hidden_features", out_shape[-1] // directions if out_shape else 0)
    return layer("recurrent", recurrent_fan_in(input_size, hidden, steps), False)


def _norm_terms(layer: _Layer, arrays: dict) -> tuple[int, float]:
    """A norm's fan-in and gain from its input and output (``norm_terms``)."""
    reduced, statistics, features, epsilon, groups = layer.norm
    x, y = _numpy(arrays["x"]), _numpy(arrays["y"])
    gamma = arrays.get("gamma")
    gamma = np.ones(()) if gamma is None else np.asarray(gamma, np.float64)
    if statistics == "running":
        gamma = gamma / np.sqrt(np.asarray(arrays["var"], np.float64) + epsilon)
        statistics = "two-pass"
    if groups:
        x = x.reshape(x.shape[:-1] + (groups, -1))
        y = y.reshape(x.shape)
        gamma = gamma.reshape(groups, -1)
    broadcast = [1] * x.ndim
    for axis in features:
        broadcast[axis] = x.shape[axis]
    scale = gamma.reshape(broadcast) if gamma.ndim else gamma
    if statistics == "rms":
        return _rms_terms(x, y, reduced, scale)
    return norm_terms(x, y, reduced, scale, statistics)


def _rms_terms(x: np.ndarray, y: np.ndarray, axes: tuple, scale: np.ndarray) -> tuple[int, float]:
    """An RMS norm's terms: ``norm_terms``'s two-pass count, its spread the root mean
    square (no mean is taken off)."""
    x = np.asarray(x, np.float64)
    big_y = float(np.max(np.abs(y), initial=0.0))
    if big_y == 0 or not np.isfinite(x).all():
        return 4, 1.0
    count = int(np.prod([x.shape[a] for a in axes]))
    rms = np.sqrt(np.maximum((x * x).mean(axis=axes, keepdims=True), np.finfo(np.float32).tiny))
    gain = max(1.0, float(np.max(np.abs(x) * np.abs(scale) / rms)) / big_y)
    return math.ceil(gain * (count + 4) + count), gain


# --- the model ----------------------------------------------------------------------------

def _layers(model: nnx.Module) -> list[tuple[str, nnx.Module]]:
    """The modules recorded, with their paths: leaves and whole layers, not what is inside
    a whole layer, nor containers."""
    found = list(nnx.iter_modules(model))
    paths = [p for p, _ in found]
    whole = [p for p, m in found if isinstance(m, _WHOLE)]
    layers = []
    for path, module in found:
        if any(len(path) > len(w) and path[:len(w)] == w for w in whole):
            continue
        container = any(len(q) > len(path) and q[:len(path)] == path for q in paths)
        if not isinstance(module, _WHOLE) and (container or not callable(module)):
            continue
        name = ".".join(str(part) for part in path) if path else type(module).__name__.lower()
        layers.append((name, module))
    return layers


def _inputs(inputs: object) -> tuple:
    items = inputs if isinstance(inputs, tuple) else (inputs,)
    arrays = []
    for index, item in enumerate(items):
        if isinstance(item, jax.Array):
            arrays.append(item)
            continue
        arrays.append(jax.numpy.asarray(input_array("jax", index, item)))
    return tuple(arrays)


def record(model: nnx.Module, inputs: object, *, names: Mapping[str, str] | None = None, layout: str = "NCHW",
           path: str | Path | None = None) -> Recording:
    """Run a Flax NNX ``model`` once on ``inputs`` in inference mode and record every
    layer's output, in the order the layers ran (see the module's docstring).

    ``inputs``: an array (numpy or JAX) or a tuple of them, passed as the model's
    positional arguments. ``names``: the layers' paths to keep, each mapped to the name
    it is saved under. ``layout``: ``"NCHW"`` moves feature maps to channels first,
    ``"native"`` keeps them channels last. ``path``: where to save it, if anywhere."""
    global _SESSION
    if not isinstance(model, nnx.Module):
        raise RecordingError(f"a {type(model).__name__} is not a Flax NNX module (flax.nnx.Module); a Linen "
                             "module or a function cannot be recorded")
    if _SESSION is not None:
        raise RecordingError("record is already running (a model recorded inside another's recording)")
    arrays = _inputs(inputs)
    collector = Collector(FRAMEWORK, names, layout, channels_last=True, to_numpy=_numpy)
    collector.add_inputs(arrays)
    session = _Session(collector)
    for array in arrays:
        session.saw(array, np.ndim(array) >= 4)
    modes = [(module, attribute, getattr(module, attribute)) for _, module in nnx.iter_modules(model)
             for attribute in _MODES if attribute in vars(module)]
    swapped: list[tuple[nnx.Module, type]] = []
    try:
        model.eval()
        for name, module in _layers(model):
            cls = type(module)
            module.__class__ = _recording_class(cls, name)
            swapped.append((module, cls))
        _SESSION = session
        jax.block_until_ready(model(*arrays))
        jax.effects_barrier()
    finally:
        _SESSION = None
        for module, cls in reversed(swapped):
            module.__class__ = cls
        for module, attribute, value in modes:
            setattr(module, attribute, value)
    if session.errors:
        raise session.errors[0]
    session.close()
    return collector.finish(path)
