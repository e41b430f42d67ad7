"""A PyTorch model's weighted layers for :mod:`rosetta_utils.porting`.

PyTorch's names and layouts are the canonical ones, so every array is read and
written as it is (float32 numpy copies; written back in the parameter's own dtype).
The layers and their order come from :func:`rosetta_utils.recorders.pytorch.record`:
each leaf module that ran, and ``nn.MultiheadAttention`` and the recurrent modules
whole. A ``torch.compile``-d model is read through the module it compiled.

Known: ``nn.Linear``; ``nn.Conv1d/2d/3d`` (grouped and depthwise too);
``nn.ConvTranspose1d/2d/3d``; ``nn.BatchNorm1d/2d/3d`` with running statistics;
``nn.LayerNorm``; ``nn.Embedding``; ``nn.LSTM`` and ``nn.GRU`` (stacked and
bidirectional), ``nn.LSTMCell`` and ``nn.GRUCell`` (named as a one-layer LSTM or GRU,
``weight_ih_l0``, ...); ``nn.MultiheadAttention`` with one packed ``in_proj_weight``.
Refused, naming the module: any other module holding parameters (``nn.PReLU``,
``nn.GroupNorm``, ``nn.RNN``, ...), an LSTM with ``proj_size``, an attention whose keys
or values have their own sizes (``kdim``/``vdim``: separate ``q/k/v_proj_weight``) or
with ``add_bias_kv``/``add_zero_attn``, a batch norm without running statistics, a
module whose parameters are not its type's (weight normalisation's ``weight_g``), and a
container holding parameters of its own, which no layer holds.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from rosetta_utils.gru import LBR
from rosetta_utils.porting import Layer, PortingError
from rosetta_utils.recorders.pytorch import _recorded_modules, record

FRAMEWORK = "pytorch"

#: The module classes each kind is read from (:func:`rosetta_utils.porting.available_kinds`).
LAYER_CLASSES = {
    "dense": ["torch.nn.Linear"],
    "conv": ["torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d"],
    "conv_transpose": ["torch.nn.ConvTranspose1d", "torch.nn.ConvTranspose2d", "torch.nn.ConvTranspose3d"],
    "batch_norm": ["torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d", "torch.nn.SyncBatchNorm"],
    "layer_norm": ["torch.nn.LayerNorm"],
    "embedding": ["torch.nn.Embedding"],
    "lstm": ["torch.nn.LSTM", "torch.nn.LSTMCell"],
    "gru": ["torch.nn.GRU", "torch.nn.GRUCell"],
    "attention": ["torch.nn.MultiheadAttention"],
}


def _tensor(module: nn.Module, name: str) -> torch.Tensor:
    owner, _, leaf = name.rpartition(".")
    return getattr(module.get_submodule(owner) if owner else module, leaf)


def _reader(module: nn.Module, path: str, kind: str, names: Mapping[str, str], config: dict) -> Layer:
    """A layer whose canonical arrays are ``module``'s tensors as they are: ``names`` maps
    each canonical name to the module's own (``weight_ih_l0`` -> ``weight_ih`` for a cell)."""
    tensors = {canonical: _tensor(module, own) for canonical, own in names.items()}
    arrays = {canonical: tensor.detach().cpu().float().numpy().copy() for canonical, tensor in tensors.items()}

    def write(values: Mapping[str, np.ndarray]) -> None:
        with torch.no_grad():
            for canonical, tensor in tensors.items():
                value = torch.from_numpy(np.ascontiguousarray(values[canonical], dtype=np.float32))
                if tuple(value.shape) != tuple(tensor.shape):
                    raise PortingError(f"{FRAMEWORK}: {path}: {canonical} {tuple(value.shape)} for a tensor of "
                                       f"{tuple(tensor.shape)}")
                tensor.copy_(value.to(device=tensor.device, dtype=tensor.dtype))

    return Layer(path, kind, arrays, config, "", write)


def _own(module: nn.Module) -> list[str]:
    return [name for name, _ in module.named_parameters(recurse=False)]


def _expect(module: nn.Module, path: str, allowed: set[str]) -> None:
    extra = sorted(set(_own(module)) - allowed)
    if extra:
        raise PortingError(f"{FRAMEWORK}: {path} ({type(module).__name__}) holds parameters {extra} that a "
                           f"{type(module).__name__} does not (weight normalisation? a parametrisation?): the move "
                           "knows only the layer's own weight and bias")


def _present(module: nn.Module, names: tuple[str, ...]) -> dict[str, str]:
    return {name: name for name in names if isinstance(getattr(module, name, None), torch.Tensor)}


def _recurrent(module: nn.Module, path: str) -> Layer:
    kind = "lstm" if isinstance(module, (nn.LSTM, nn.LSTMCell)) else "gru"
    if isinstance(module, nn.RNNCellBase):
        _expect(module, path, {"weight_ih", "weight_hh", "bias_ih", "bias_hh"})
        names = {f"{name}_l0": name for name in _own(module)}
        config = {"layers": 1, "directions": 1}
    else:
        if getattr(module, "proj_size", 0):
            raise PortingError(f"{FRAMEWORK}: {path}: an LSTM with proj_size={module.proj_size} (weight_hr) has no "
                               "counterpart the move knows")
        names = {name: name for name in _own(module)}
        config = {"layers": module.num_layers, "directions": 2 if module.bidirectional else 1}
    if kind == "gru":
        config.update(flavor=LBR, holds_b_hn=True)
    return _reader(module, path, kind, names, config)


def _attention(module: nn.MultiheadAttention, path: str) -> Layer:
    if not module._qkv_same_embed_dim:
        raise PortingError(f"{FRAMEWORK}: {path}: a MultiheadAttention with kdim={module.kdim}, vdim={module.vdim} "
                           f"(embed_dim {module.embed_dim}) holds q_proj_weight, k_proj_weight, v_proj_weight "
                           "apart, not the packed in_proj_weight the move knows")
    if module.bias_k is not None or module.add_zero_attn:
        raise PortingError(f"{FRAMEWORK}: {path}: a MultiheadAttention with add_bias_kv or add_zero_attn adds a key "
                           "of its own, which no other framework's attention has")
    names = {"in_proj_weight": "in_proj_weight", "out_proj.weight": "out_proj.weight"}
    if module.in_proj_bias is not None:
        names["in_proj_bias"] = "in_proj_bias"
    if module.out_proj.bias is not None:
        names["out_proj.bias"] = "out_proj.bias"
    return _reader(module, path, "attention", names, {"heads": module.num_heads})


def _layer(module: nn.Module, path: str) -> Layer | None:
    """The canonical layer of one recorded module; None for a module without weights."""
    if isinstance(module, nn.MultiheadAttention):
        return _attention(module, path)
    if isinstance(module, (nn.LSTM, nn.GRU, nn.LSTMCell, nn.GRUCell)):
        return _recurrent(module, path)
    if isinstance(module, nn.Linear):
        _expect(module, path, {"weight", "bias"})
        return _reader(module, path, "dense", _present(module, ("weight", "bias")), {})
    if isinstance(module, nn.modules.conv._ConvNd):
        _expect(module, path, {"weight", "bias"})
        kind = "conv_transpose" if module.transposed else "conv"
        config = {"groups": module.groups, "stride": tuple(module.stride), "dilation": tuple(module.dilation)}
        return _reader(module, path, kind, _present(module, ("weight", "bias")), config)
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        _expect(module, path, {"weight", "bias"})
        if module.running_mean is None:
            raise PortingError(f"{FRAMEWORK}: {path}: a {type(module).__name__} with track_running_stats=False "
                               "normalises with each batch's statistics even in eval mode: no running statistics "
                               "to move")
        names = _present(module, ("weight", "bias", "running_mean", "running_var"))
        return _reader(module, path, "batch_norm", names, {"epsilon": float(module.eps)})
    if isinstance(module, nn.LayerNorm):
        _expect(module, path, {"weight", "bias"})
        names = _present(module, ("weight", "bias"))
        return _reader(module, path, "layer_norm", names, {"epsilon": float(module.eps)}) if names else None
    if isinstance(module, nn.Embedding):
        _expect(module, path, {"weight"})
        return _reader(module, path, "embedding", {"weight": "weight"}, {})
    if isinstance(module, (nn.RNNBase, nn.RNNCellBase)) or _own(module):
        held = ", ".join(name for name, _ in module.named_parameters())
        raise PortingError(f"{FRAMEWORK}: {path} is a {type(module).__module__}.{type(module).__name__} holding "
                           f"weights ({held}): not a layer the move knows (dense, conv, conv_transpose, "
                           "batch_norm, layer_norm, embedding, lstm, gru, attention)")
    return None


def _refuse_loose_parameters(model: nn.Module, recorded: set[int]) -> None:
    """A container (a module recorded through its children) holding parameters of its own,
    which no layer would move: refused, naming it."""

    def visit(module: nn.Module, path: str) -> None:
        if id(module) in recorded:
            return
        if getattr(module, "parametrizations", None) is not None:
            raise PortingError(f"{FRAMEWORK}: {path or type(module).__name__} ({type(module).__name__}) is "
                               f"parametrized ({', '.join(module.parametrizations)}: a weight or spectral norm?): "
                               "remove the parametrization first (torch.nn.utils.parametrize."
                               "remove_parametrizations), then move its plain weights")
        own = _own(module)
        if own:
            where = path or type(module).__name__
            raise PortingError(f"{FRAMEWORK}: {where} ({type(module).__name__}) holds parameters of its own "
                               f"({', '.join(own)}) outside any layer: the move cannot pair them; hold them in a "
                               "layer of their own (an nn.Embedding, an nn.Linear) or move them by hand")
        for name, child in module.named_children():
            visit(child, f"{path}.{name}" if path else name)

    visit(model, "")


def weighted_layers(model: nn.Module, inputs: object) -> list[Layer]:
    """The weighted layers of ``model`` that ran on ``inputs`` (numpy arrays or tensors, a
    tuple for several), in the order they ran, with their arrays as PyTorch holds them.
    Runs the model once in eval mode (:func:`rosetta_utils.recorders.pytorch.record`);
    changes nothing until a layer's ``write`` is called."""
    original = getattr(model, "_orig_mod", None)
    if isinstance(original, nn.Module) and type(model).__name__ == "OptimizedModule":
        model = original
    recording = record(model, inputs, layout="native")
    modules = dict(_recorded_modules(model))
    _refuse_loose_parameters(model, {id(module) for module in modules.values()})
    layers = []
    for path, kind in recording.kinds.items():
        if kind == "input" or path not in modules:
            continue
        layer = _layer(modules[path], path)
        if layer is not None:
            layers.append(layer)
    return layers
