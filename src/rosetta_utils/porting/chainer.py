"""The weighted layers of a Chainer model (Chainer 7), in the canonical layout.

``weighted_layers(model, x)`` records the model once on ``x`` with
:func:`rosetta_utils.recorders.chainer.record` (test mode, no graph) and reads, in the
order the links ran, each one that holds weights. Running it first also initialises the
links built without their input size (``L.Linear(None, 10)``).

Chainer keeps PyTorch's layouts for most links, so their arrays are copies under another
name: ``L.Linear`` ``W`` (out, in), ``L.Convolution1D`` / ``2D`` / ``ND`` and
``L.DilatedConvolution2D`` (out, in/groups, k...), ``L.Deconvolution2D`` / ``ND`` (in,
out/groups, k...), ``L.BatchNormalization`` (gamma, beta, avg_mean, avg_var -> weight,
bias, running_mean, running_var), ``L.LayerNormalization``, ``L.EmbedID``. Two need more:
``L.DepthwiseConvolution2D``'s ``W`` is (multiplier, in, kh, kw) and its output channel
``c·multiplier + j`` reads input channel ``c`` with ``W[j, c]``: canonically (in·multiplier,
1, kh, kw); ``L.NStepLSTM`` / ``NStepBiLSTM`` / ``NStepGRU`` / ``NStepBiGRU`` hold one array
per gate, child ``layer·directions + direction``: ``w0``..``w3`` on the input and ``w4``..``w7``
on the state (LSTM gates i, f, g, o in this order, as ``n_step_lstm`` computes them), or
``w0``..``w2`` / ``w3``..``w5`` (GRU r, z, n), and ``b`` likewise: stacked into PyTorch's
``weight_ih_l0`` and the rest.

Refused, naming the link: the step links (``L.LSTM``, ``L.GRU``, ``L.StatelessLSTM``, ...),
the ``NStepRNN`` links, every other link with parameters (``L.PReLU``, ``L.Scale``,
``L.GroupNormalization``, ``L.Bilinear``, ...), and a chain of your own that holds
parameters of its own beside its children.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rosetta_utils import gru
from rosetta_utils.porting import Layer, PortingError
from rosetta_utils.recorders import chainer as recorder

# Chainer as the recorder imported it (with the standard library's distutils)
chainer, L = recorder.chainer, recorder.L

__all__ = ["weighted_layers"]

#: The installed release's layer classes each kind is read from (what ``available_kinds`` checks).
LAYER_CLASSES = {
    "dense": ("chainer.links.Linear",),
    "conv": ("chainer.links.Convolution1D", "chainer.links.Convolution2D", "chainer.links.DilatedConvolution2D",
             "chainer.links.DepthwiseConvolution2D"),
    "conv_transpose": ("chainer.links.Deconvolution1D", "chainer.links.Deconvolution2D"),
    "batch_norm": ("chainer.links.BatchNormalization",),
    "layer_norm": ("chainer.links.LayerNormalization",),
    "embedding": ("chainer.links.EmbedID",),
    "lstm": ("chainer.links.NStepLSTM", "chainer.links.NStepBiLSTM"),
    "gru": ("chainer.links.NStepGRU", "chainer.links.NStepBiGRU"),
}
_LSTMS = (L.NStepLSTM, L.NStepBiLSTM)
_GRUS = (L.NStepGRU, L.NStepBiGRU)
_CONVOLUTIONS = (L.Convolution2D, L.ConvolutionND, L.DilatedConvolution2D)
_DECONVOLUTIONS = (L.Deconvolution2D, L.DeconvolutionND)
#: Canonical recurrent array names -> (Chainer's letter, the first gate's index), per gate count.
_GATE_ARRAYS = {"weight_ih": ("w", 0), "weight_hh": ("w", 1), "bias_ih": ("b", 0), "bias_hh": ("b", 1)}


def _host(array) -> np.ndarray:
    return np.array(chainer.backend.CpuDevice().send(array), dtype=np.float32)


def _assign(target, value: np.ndarray) -> None:
    """Copy ``value`` into a parameter (or a persistent array such as ``avg_mean``), on its device."""
    array = target.array if isinstance(target, chainer.Variable) else target
    array[...] = chainer.backend.get_device_from_array(array).send(np.asarray(value, dtype=array.dtype))


def _shape(target) -> tuple[int, ...]:
    return tuple((target.array if isinstance(target, chainer.Variable) else target).shape)


def _writer(path: str, targets: Mapping[str, object], convert=None):
    """A write that copies each canonical array (through ``convert`` where given) into its
    parameter, checking every shape first."""
    def write(arrays: Mapping[str, np.ndarray]) -> None:
        values = {name: (convert or {}).get(name, np.asarray)(arrays[name]) for name in targets}
        for name, target in targets.items():
            if tuple(values[name].shape) != _shape(target):
                raise PortingError(f"chainer: {path}: {name} is {arrays[name].shape}, the link holds "
                                   f"{_shape(target)}")
        for name, target in targets.items():
            _assign(target, values[name])
    return write


def _plain(path: str, kind: str, targets: Mapping[str, object], config=None, conversion: str = "") -> Layer:
    """A link whose canonical arrays are its parameters as they are."""
    targets = {name: target for name, target in targets.items() if target is not None}
    arrays = {name: _host(target.array if isinstance(target, chainer.Variable) else target)
              for name, target in targets.items()}
    return Layer(path, kind, arrays, dict(config or {}), conversion, _writer(path, targets))


def _tuple(value, axes: int) -> tuple[int, ...]:
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),) * axes


def _convolution(path: str, link: chainer.Link) -> Layer:
    axes = link.W.ndim - 2
    config = {"groups": int(getattr(link, "groups", 1)), "stride": _tuple(link.stride, axes),
              "dilation": _tuple(getattr(link, "dilate", 1), axes)}
    kind = "conv_transpose" if isinstance(link, _DECONVOLUTIONS) else "conv"
    return _plain(path, kind, {"weight": link.W, "bias": link.b}, config)


def _depthwise(path: str, link: L.DepthwiseConvolution2D) -> Layer:
    multiplier, channels, *kernel = link.W.shape
    config = {"groups": channels, "stride": _tuple(link.stride, 2), "dilation": (1, 1)}
    targets = {"weight": link.W, "bias": link.b}
    targets = {name: target for name, target in targets.items() if target is not None}
    weight = _host(link.W.array).transpose(1, 0, 2, 3).reshape(channels * multiplier, 1, *kernel)
    arrays = {"weight": weight, **({"bias": _host(link.b.array)} if link.b is not None else {})}
    back = {"weight": lambda w: np.asarray(w).reshape(channels, multiplier, *kernel).transpose(1, 0, 2, 3)}
    conversion = "W (multiplier, in, kh, kw) -> (in·multiplier, 1, kh, kw)"
    return Layer(path, "conv", arrays, config, conversion, _writer(path, targets, back))


def _batch_norm(path: str, link: L.BatchNormalization) -> Layer:
    targets = {"weight": link.gamma, "bias": link.beta, "running_mean": link.avg_mean, "running_var": link.avg_var}
    missing = {name: fill for name, fill in (("weight", 1.0), ("bias", 0.0)) if targets[name] is None}
    layer = _plain(path, "batch_norm", targets, {"epsilon": float(link.eps)})
    if not missing:
        return layer
    held = {"weight": "gamma", "bias": "beta"}
    layer.arrays = {name: layer.arrays[name] if name not in missing
                    else np.full_like(layer.arrays["running_mean"], missing[name]) for name in targets}
    layer.conversion = ", ".join(f"no {held[name]}: {name} read as {'ones' if fill else 'zeros'}"
                                 for name, fill in missing.items())
    write = layer.write

    def write_held(arrays: Mapping[str, np.ndarray]) -> None:
        for name, fill in missing.items():
            if np.any(arrays[name] != fill):
                raise PortingError(f"chainer: {path}: a BatchNormalization without its {held[name]} cannot hold "
                                   f"a {name} other than {'ones' if fill else 'zeros'}")
        write(arrays)

    layer.write = write_held
    return layer


def _recurrent(path: str, link: chainer.Link) -> Layer:
    """An NStep LSTM or GRU: child ``layer·directions + direction`` holds one array per gate."""
    gates = 4 if isinstance(link, _LSTMS) else 3
    layers, directions = link.n_layers, link.direction
    targets: dict[str, list] = {}
    for index in range(layers):
        for direction in range(directions):
            child = link[index * directions + direction]
            suffix = f"_l{index}" + ("_reverse" if direction else "")
            for name, (letter, side) in _GATE_ARRAYS.items():
                targets[name + suffix] = [getattr(child, f"{letter}{side * gates + gate}") for gate in range(gates)]
    arrays = {name: np.concatenate([_host(p.array) for p in parameters]) for name, parameters in targets.items()}
    config = {"layers": layers, "directions": directions}
    order = "i, f, g, o" if gates == 4 else "r, z, n"
    conversion = (f"w0..w{gates - 1} / w{gates}..w{2 * gates - 1} (gates {order}) stacked into weight_ih / "
                  "weight_hh, b likewise")
    if gates == 3:
        config.update(flavor=gru.LBR, holds_b_hn=True)

    def write(canonical: Mapping[str, np.ndarray]) -> None:
        for name, parameters in targets.items():
            if canonical[name].shape != arrays[name].shape:
                raise PortingError(f"chainer: {path}: {name} is {canonical[name].shape}, the link holds "
                                   f"{arrays[name].shape}")
        if gates == 3 and layers == 1:  # through rosetta_utils.gru, which checks the values it moves
            given = {direction: {name: np.asarray(canonical[name + suffix], np.float32) for name in _GATE_ARRAYS}
                     for direction, suffix in (("forward", "_l0"), ("backward", "_l0_reverse"))[:directions]}
            try:
                gru.set_weights(link, {**given, "flavor": gru.LBR})
            except gru.GRUConversionError as error:
                raise PortingError(f"chainer: {path}: {error}") from None
            return
        for name, parameters in targets.items():
            for parameter, block in zip(parameters, np.split(np.asarray(canonical[name]), gates)):
                _assign(parameter, block)

    return Layer(path, "lstm" if gates == 4 else "gru", arrays, config, conversion, write)


def _layer(path: str, link: chainer.Link) -> Layer:
    """The canonical reading of one recorded link that holds parameters."""
    if isinstance(link, L.Linear):
        return _plain(path, "dense", {"weight": link.W, "bias": link.b})
    if isinstance(link, L.DepthwiseConvolution2D):
        return _depthwise(path, link)
    if isinstance(link, _CONVOLUTIONS + _DECONVOLUTIONS):
        return _convolution(path, link)
    if isinstance(link, L.BatchNormalization):
        return _batch_norm(path, link)
    if isinstance(link, L.LayerNormalization):
        return _plain(path, "layer_norm", {"weight": link.gamma, "bias": link.beta}, {"epsilon": float(link.eps)})
    if isinstance(link, L.EmbedID):
        return _plain(path, "embedding", {"weight": link.W})
    if isinstance(link, _LSTMS + _GRUS):
        return _recurrent(path, link)
    if isinstance(link, recorder._NSTEP + recorder._STEPS):
        raise PortingError(f"chainer: {path}: a {type(link).__name__}: not handled (an LSTM or a GRU moves as "
                           "L.NStepLSTM / NStepBiLSTM / NStepGRU / NStepBiGRU)")
    names = ", ".join(sorted(name for name, _ in link.namedparams()))
    raise PortingError(f"chainer: {path}: a {type(link).__module__}.{type(link).__name__} holds weights ({names}) "
                       "and is no link this module knows")


def _refuse_loose_parameters(model: chainer.Link, paths: Mapping[int, str]) -> None:
    """Refuse a chain that also holds parameters of its own (they would not move)."""
    for name, link in model.namedlinks():
        if id(link) in paths or not recorder._has_children(link) or not link._params:
            continue
        if any(name.startswith(f"/{layer.replace('.', '/')}/") for layer in paths.values()):
            continue  # inside a recorded link (an NStep link's children)
        where = name.strip("/").replace("/", ".") or type(link).__name__
        raise PortingError(f"chainer: {where}: a {type(link).__name__} holds parameters of its own "
                           f"({', '.join(sorted(link._params))}) beside its children: no link this module knows")


def weighted_layers(model: chainer.Link, inputs: object) -> list[Layer]:
    """The Chainer model's links that hold weights, in the order they ran on ``inputs`` (as
    :func:`rosetta_utils.recorders.chainer.record` takes them; an NStep link's sequences of
    one length), each with its arrays in PyTorch's layout and a ``write`` that copies
    canonical arrays back in place. The model is run once in test mode and otherwise left
    as it was."""
    if not isinstance(model, chainer.Link):
        raise PortingError(f"chainer: a chainer.Link is needed, not a {type(model).__name__}")
    paths = recorder._layers(model)
    _refuse_loose_parameters(model, paths)
    links = {paths[id(link)]: link for link in model.links() if id(link) in paths}
    recording = recorder.record(model, inputs, layout="native")
    layers = []
    for path in recording.outputs:
        link = links.get(path)
        if link is not None and any(True for _ in link.params(include_uninit=True)):
            layers.append(_layer(path, link))
    return layers
