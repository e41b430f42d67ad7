"""Record a PyTorch model's layer outputs (:mod:`rosetta_utils.recorders`) with forward hooks.

``record(model, x)`` puts a forward hook on every leaf module of ``model`` (a module
without children) and on the composite modules recorded whole (``nn.MultiheadAttention``,
the recurrent modules and cells), runs the model once under ``torch.no_grad()`` in
``eval()`` mode, and takes the hooks off again. Each layer's path is its attribute path
(``"features.0"``, ``"encoder.attn"``); a model that is itself a leaf is recorded under its
class's name. A module reached through two paths keeps the first; a module run twice keeps
its first call.

What runs between modules (``F.relu``, ``torch.flatten``, a residual ``+``) is not a layer
and shows in the next layer's output. While recording, PyTorch's fast path for attention
and transformer layers is turned off (``torch.backends.mha``), so that a
``nn.TransformerEncoderLayer`` runs its children, whose hooks then see their outputs.

A ``torch.compile``-d module is recorded through the module it compiled, run eagerly; a
TorchScript module cannot be (its hooks are fixed when it is scripted): record the module
it was scripted from.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

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
    softmax_gain,
)

FRAMEWORK = "pytorch"

#: Modules with children recorded as one layer, their children not hooked.
COMPOSITES = (nn.MultiheadAttention, nn.RNNBase, nn.RNNCellBase)

ACTIVATIONS = (nn.ReLU, nn.ReLU6, nn.GELU, nn.Tanh, nn.Sigmoid, nn.LeakyReLU, nn.ELU, nn.SELU, nn.CELU, nn.SiLU,
               nn.Mish, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.Hardshrink, nn.Softshrink, nn.Softplus,
               nn.Softsign, nn.Tanhshrink, nn.PReLU, nn.RReLU, nn.Threshold, nn.LogSigmoid, nn.GLU)
SOFTMAXES = (nn.Softmax, nn.LogSoftmax, nn.Softmin, nn.Softmax2d)
MAX_POOLS = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d,
             nn.AdaptiveMaxPool3d, nn.FractionalMaxPool2d, nn.FractionalMaxPool3d)
AVERAGE_POOLS = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3, nn.LPPool1d: 1, nn.LPPool2d: 2, nn.LPPool3d: 3}
ADAPTIVE_AVERAGE_POOLS = {nn.AdaptiveAvgPool1d: 1, nn.AdaptiveAvgPool2d: 2, nn.AdaptiveAvgPool3d: 3}
DROPOUTS = (nn.modules.dropout._DropoutNd,)
NORMS_OVER_FEATURES = (nn.LayerNorm, nn.RMSNorm)


def to_numpy(tensor: object) -> np.ndarray:
    """A tensor as a numpy array (bfloat16 as float32); a packed sequence's data."""
    if isinstance(tensor, nn.utils.rnn.PackedSequence):
        tensor = tensor.data
    if not isinstance(tensor, torch.Tensor):
        return np.asarray(tensor)
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.numpy()


def _primary(output: object, batch_first: bool = False) -> object:
    """The output the next layer reads: a sequence (padded back from a packed one), the
    attended values, the first of a tuple."""
    while True:
        if isinstance(output, nn.utils.rnn.PackedSequence):
            return nn.utils.rnn.pad_packed_sequence(output, batch_first=batch_first)[0]
        if isinstance(output, (tuple, list)) and output:
            output = output[0]
        else:
            return output


def _first_input(args: tuple, kwargs: dict) -> object:
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, (torch.Tensor, nn.utils.rnn.PackedSequence)):
            return value
    return args[0] if args else None


def _argument(args: tuple, kwargs: dict, index: int, name: str) -> object:
    return args[index] if len(args) > index else kwargs.get(name)


def _per_example(x: object) -> int:
    shape = tuple(getattr(x, "shape", ()))
    return int(np.prod(shape[1:])) if len(shape) > 1 else int(np.prod(shape))


def _steps(x: object, batch_first: bool) -> int:
    if isinstance(x, nn.utils.rnn.PackedSequence):
        return len(x.batch_sizes)
    if x.dim() == 3:
        return int(x.shape[1] if batch_first else x.shape[0])
    return int(x.shape[0])


def _adaptive_window(size: int, out: int) -> int:
    """The widest window an adaptive pool takes to make ``out`` values of ``size``."""
    return max(math.ceil((i + 1) * size / out) - (i * size) // out for i in range(out))


def _norm(module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[int, float]:
    """A normalisation's fan-in and gain from its input and output (numpy copies)."""
    xs, ys = to_numpy(x).astype(np.float64), to_numpy(y).astype(np.float64)
    weight = getattr(module, "weight", None)
    gamma = to_numpy(weight).astype(np.float64) if isinstance(weight, torch.Tensor) else None
    channel_shape = [1] * xs.ndim
    if xs.ndim > 1:
        channel_shape[1] = -1
    if isinstance(module, (nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)):
        running = module.running_var is not None and not module.training
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and running:
            scale = 1.0 / np.sqrt(to_numpy(module.running_var).astype(np.float64) + module.eps)
            if gamma is not None:
                scale = scale * gamma
            return norm_terms(xs, ys, (), scale.reshape(channel_shape))
        if isinstance(module, nn.modules.instancenorm._InstanceNorm) and running:
            scale = 1.0 / np.sqrt(to_numpy(module.running_var).astype(np.float64) + module.eps)
            scale = scale if gamma is None else scale * gamma
            return norm_terms(xs, ys, (), scale.reshape(channel_shape))
        first = 2 if isinstance(module, nn.modules.instancenorm._InstanceNorm) else 0
        axes = tuple(a for a in range(first, xs.ndim) if a != 1)
        scale = 1.0 if gamma is None else gamma.reshape(channel_shape)
        return norm_terms(xs, ys, axes, scale)
    if isinstance(module, nn.GroupNorm):
        groups = module.num_groups
        shape = (xs.shape[0], groups, xs.shape[1] // groups) + xs.shape[2:]
        xs, ys = xs.reshape(shape), ys.reshape(shape)
        scale = 1.0 if gamma is None else gamma.reshape((1, groups, -1) + (1,) * (xs.ndim - 3))
        return norm_terms(xs, ys, tuple(range(2, xs.ndim)), scale)
    axes = tuple(range(-len(module.normalized_shape), 0))
    return norm_terms(xs, ys, axes, 1.0 if gamma is None else gamma)


def _describe(module: nn.Module, args: tuple, kwargs: dict, x: object, y: object,
             measure: bool = True) -> dict:
    """A module's kind, fan-in, gain and layout flags for :meth:`Collector.add`, from its
    type and configuration (and, for norms, softmaxes and activations, its input ``x`` and
    output ``y``; ``measure=False`` leaves those gains at 1)."""
    if isinstance(module, nn.Linear):
        return dict(kind="dense", fan_in=dense_fan_in(module.in_features, module.bias is not None))
    if isinstance(module, nn.Bilinear):
        return dict(kind="dense", fan_in=dense_fan_in(module.in1_features * module.in2_features,
                                                      module.bias is not None))
    if isinstance(module, nn.modules.conv._ConvNd):
        return dict(kind="conv", spatial=True,
                    fan_in=conv_fan_in(module.in_channels, module.groups, module.kernel_size, module.bias is not None))
    if isinstance(module, (nn.modules.batchnorm._NormBase, nn.GroupNorm) + NORMS_OVER_FEATURES):
        fan_in, gain = _norm(module, x, y) if measure else (4, 1.0)
        return dict(kind="norm", fan_in=fan_in, gain=gain)
    if isinstance(module, nn.Embedding):
        return dict(kind="embedding", fan_in=0)
    if isinstance(module, nn.EmbeddingBag):
        return dict(kind="embedding", fan_in=int(x.shape[-1]) if x.dim() == 2 else 1)
    if isinstance(module, nn.RNNBase):
        directions = 2 if module.bidirectional else 1
        state = module.proj_size or module.hidden_size
        steps = _steps(x, module.batch_first)
        fan_in = recurrent_fan_in(module.input_size, state, steps, directions)
        fan_in += (module.num_layers - 1) * recurrent_fan_in(state * directions, state, steps, directions)
        return dict(kind="recurrent", fan_in=fan_in, spatial=False)
    if isinstance(module, nn.RNNCellBase):
        return dict(kind="recurrent", fan_in=recurrent_fan_in(module.input_size, module.hidden_size, 1), spatial=False)
    if isinstance(module, nn.MultiheadAttention):
        key = _argument(args, kwargs, 1, "key")
        keys = int(key.shape[1] if key.dim() == 3 and module.batch_first else key.shape[0])
        embed = max(module.embed_dim, module.kdim, module.vdim)
        return dict(kind="attention", spatial=False,
                    fan_in=attention_fan_in(embed, module.embed_dim // module.num_heads, keys))
    if isinstance(module, MAX_POOLS):
        return dict(kind="pool", fan_in=1, spatial=True)
    if isinstance(module, tuple(AVERAGE_POOLS)):
        kernel = module.kernel_size
        if isinstance(kernel, int):
            kernel = (kernel,) * AVERAGE_POOLS[type(module)]
        return dict(kind="pool", fan_in=int(np.prod(kernel)) + (2 if isinstance(module, nn.modules.pooling._LPPoolNd)
                                                                else 0), spatial=True)
    if isinstance(module, tuple(ADAPTIVE_AVERAGE_POOLS)):
        dims = ADAPTIVE_AVERAGE_POOLS[type(module)]
        windows = [_adaptive_window(int(a), int(b)) for a, b in zip(x.shape[-dims:], y.shape[-dims:])]
        return dict(kind="pool", fan_in=int(np.prod(windows)), spatial=True)
    if isinstance(module, DROPOUTS):
        return dict(kind="dropout", fan_in=0)
    if isinstance(module, nn.Flatten):
        return dict(kind="reshape", fan_in=0, flatten=True, spatial=False)
    if isinstance(module, nn.Unflatten):
        return dict(kind="reshape", fan_in=0, spatial=False)
    if isinstance(module, nn.Identity):
        return dict(kind="other", fan_in=0)
    if isinstance(module, SOFTMAXES):
        dim = -3 if isinstance(module, nn.Softmax2d) else module.dim
        if dim is None:
            dim = 0 if x.dim() in (0, 1, 3) else 1
        gain = softmax_gain(to_numpy(x), to_numpy(y)) if measure else 1.0
        return dict(kind="softmax", fan_in=int(x.shape[dim]) + 2, gain=gain)
    if isinstance(module, ACTIVATIONS):
        return dict(kind="activation", fan_in=1, gain=elementwise_gain(to_numpy(x), to_numpy(y)) if measure else 1.0)
    if any(True for _ in module.parameters(recurse=False)):
        return dict(kind="other", fan_in=_per_example(x), unknown=True)
    return dict(kind="other", fan_in=1)


def _recorded_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(path, module) of every leaf and composite module, each module once (its first path)."""
    found: list[tuple[str, nn.Module]] = []
    seen: set[int] = set()

    def visit(module: nn.Module, path: str) -> None:
        if id(module) in seen:
            return
        seen.add(id(module))
        children = list(module.named_children())
        if isinstance(module, COMPOSITES) or not children:
            found.append((path or type(module).__name__, module))
            return
        for name, child in children:
            visit(child, f"{path}.{name}" if path else name)

    visit(model, "")
    return found


def _as_tensors(model: nn.Module, inputs: object) -> tuple[torch.Tensor, ...]:
    """The inputs as tensors: numpy arrays (and array-likes) moved to the model's device,
    floating ones cast to its floating dtype; tensors as they are."""
    items = inputs if isinstance(inputs, tuple) else (inputs,)
    reference = next((t for t in list(model.parameters()) + list(model.buffers()) if t.is_floating_point()), None)
    tensors = []
    for index, item in enumerate(items):
        if item is None:
            tensors.append(item)
            continue
        if isinstance(item, (torch.Tensor, nn.utils.rnn.PackedSequence)):
            tensors.append(item)
            continue
        array = input_array(FRAMEWORK, index, item)
        tensor = torch.tensor(array)
        if reference is not None:
            tensor = tensor.to(reference.device)
            if tensor.is_floating_point():
                tensor = tensor.to(reference.dtype)
        tensors.append(tensor)
    return tuple(tensors)


def record(model: nn.Module, inputs: object, *, names: dict[str, str] | None = None, layout: str = "NCHW",
           path: str | None = None) -> Recording:
    """Run ``model`` once on ``inputs`` (an array or tensor, or a tuple of them: the
    forward's positional arguments) in eval mode without gradients, and record the input
    and every layer's output in the order the layers ran, with each one's kind and
    fan-in. ``names`` maps a module's path to the name it is saved under and keeps only
    those; ``path`` saves the recording there. The model's modes are restored and its
    hooks removed afterwards, also when the forward raises."""
    if isinstance(model, torch.jit.ScriptModule):
        raise RecordingError(f"{FRAMEWORK}: {type(model).__name__} is a TorchScript module, whose hooks cannot be "
                             "added: record the nn.Module it was scripted from")
    if not isinstance(model, nn.Module):
        raise RecordingError(f"{FRAMEWORK}: a model must be a torch.nn.Module, not {type(model).__name__}")
    collector = Collector(FRAMEWORK, names, layout, channels_last=False, to_numpy=to_numpy)
    original = getattr(model, "_orig_mod", None)
    if isinstance(original, nn.Module) and type(model).__name__ == "OptimizedModule":
        collector.note(f"a torch.compile-d module: its original {type(original).__name__} was recorded, run eagerly")
        model = original
    tensors = _as_tensors(model, inputs)
    collector.add_inputs(tensors)
    done: set[str] = set()

    def hook_for(layer: str):
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: object) -> None:
            if layer in done:
                collector.note(f"{layer} ran more than once: its first call is recorded")
                return
            done.add(layer)
            x = _first_input(args, kwargs)
            y = _primary(output, getattr(module, "batch_first", False))
            if not isinstance(y, torch.Tensor):
                raise RecordingError(f"{FRAMEWORK}: {layer} ({type(module).__name__}) returned "
                                     f"{type(output).__name__}, not a tensor the recorder can record")
            about = _describe(module, args, kwargs, x, y, measure=collector.keeps(layer))
            if about.pop("unknown", False):
                collector.note(f"{layer}: {type(module).__name__} is not a layer the recorder knows; its fan-in is "
                               "taken as its input's size per example")
            collector.add(layer, about.pop("kind"), y, about.pop("fan_in"), source=x, **about)
        return hook

    modes = {module: module.training for module in model.modules()}
    fast_path = torch.backends.mha.get_fastpath_enabled()
    handles = []
    try:
        for layer_path, module in _recorded_modules(model):
            handles.append(module.register_forward_hook(hook_for(layer_path), with_kwargs=True))
        torch.backends.mha.set_fastpath_enabled(False)
        model.eval()
        with torch.no_grad():
            model(*tensors)
    finally:
        for handle in handles:
            handle.remove()
        torch.backends.mha.set_fastpath_enabled(fast_path)
        for module, training in modes.items():
            module.training = training
    return collector.finish(path)
