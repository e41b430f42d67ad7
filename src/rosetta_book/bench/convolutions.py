"""A network's convolutions alone: what its framework's convolution kernels reach.

When a page's network stays below a share of the machine's peak although the
framework's own matrix product reaches it, the question is whether the
convolutions themselves are slower (the framework's kernels) or the layers
between them take the time (batch norm, activations, additions, pooling).
:func:`convolutions_alone` answers it from the page's own model: it runs the
model once on the page's batch (JAX: traces it, in Flax's NHWC layout),
notes every convolution with the shape of its input and output, and returns a call
that runs each of those convolutions once, on an input of that shape in the
layout the model gave it, as the framework runs a single layer (eager in
PyTorch, in one ``tf.function`` in TensorFlow, in one ``jax.jit`` in JAX,
every convolution's operands passed in so that none is folded as a
constant; imperatively in MXNet, from the Gluon block's symbol graph),
together with the FLOP of one such call (2 per multiply-add). The
benchmark times it in the same rounds as the page's configuration.

Frameworks without a way here to find a model's convolutions and their
shapes (Chainer) raise :class:`NotImplementedError`, which the
benchmark reports as "not measured".
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

#: The name under which a benchmark process times its page's convolutions alone.
CONVOLUTIONS_ALONE = "the page's convolutions alone"
#: The frameworks :func:`convolutions_alone` can take apart.
PROBED = ("pytorch", "tensorflow", "jax", "mxnet")


def conv_call_flops(output_shape: tuple[int, ...], channels_in: int, groups: int,
                    kernel: tuple[int, ...]) -> int:
    """FLOP of one convolution call: every output element is ``channels_in / groups``
    times the kernel's window of multiply-adds."""
    if channels_in % groups:
        raise ValueError(f"{channels_in} input channels do not split into {groups} groups")
    return 2 * math.prod(output_shape) * (channels_in // groups) * math.prod(kernel)


def convolutions_alone(framework: str, model: Any, images: np.ndarray) -> tuple[Callable[[], Any], int, int]:
    """``(call, flops, count)`` for the convolutions of ``model`` (the page's, as its
    builder returns it) on ``images`` (the page's batch, NCHW, as its feature extractor
    takes them): ``call()`` runs each of the ``count`` convolutions once and waits for
    them; ``flops`` is the arithmetic of one call. A model with no convolution is an error."""
    if framework == "pytorch":
        return _pytorch(model, images)
    if framework == "tensorflow":
        return _tensorflow(model, images)
    if framework == "jax":
        return _jax(model, images)
    if framework == "mxnet":
        return _mxnet(model, images)
    raise NotImplementedError(f"{framework}: the benchmark cannot take a model apart into its convolutions "
                              f"(only {', '.join(PROBED)})")


def _pytorch(model: Any, images: np.ndarray) -> tuple[Callable[[], Any], int, int]:
    import torch

    convolutions = [module for module in model.modules() if isinstance(module, torch.nn.Conv2d)]
    if not convolutions:
        raise ValueError("the model has no torch.nn.Conv2d")
    seen: list[tuple[Any, tuple[int, ...], bool, tuple[int, ...]]] = []

    def note(module: Any, inputs: tuple[Any, ...], output: Any) -> None:
        (x,) = inputs
        channels_last = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
        seen.append((module, tuple(x.shape), channels_last, tuple(output.shape)))

    hooks = [module.register_forward_hook(note) for module in convolutions]
    weight = convolutions[0].weight
    layout = (torch.channels_last if weight.is_contiguous(memory_format=torch.channels_last)
              and not weight.is_contiguous() else torch.contiguous_format)
    try:
        with torch.inference_mode():
            model(torch.from_numpy(images).to(weight.device, memory_format=layout))
    finally:
        for hook in hooks:
            hook.remove()
    generator = torch.Generator(device=weight.device).manual_seed(0)
    inputs: dict[tuple[tuple[int, ...], bool], Any] = {}  # one input per shape and layout
    calls, flops = [], 0
    for module, shape, channels_last, output in seen:
        if (shape, channels_last) not in inputs:
            x = torch.randn(shape, generator=generator, device=weight.device)
            inputs[shape, channels_last] = x.contiguous(
                memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        calls.append((module, inputs[shape, channels_last]))
        flops += conv_call_flops(output, module.in_channels, module.groups, module.kernel_size)

    def call() -> Any:
        with torch.inference_mode():
            for module, x in calls:
                result = module(x)
        if result.is_cuda:
            torch.cuda.synchronize()
        return result

    return call, flops, len(calls)


def _tensorflow(model: Any, images: np.ndarray) -> tuple[Callable[[], Any], int, int]:
    import keras
    import tensorflow as tf

    convolutions = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)]
    if not convolutions:
        raise ValueError("the model has no keras.layers.Conv2D")
    batch = len(images)
    calls, flops = [], 0
    inputs: dict[tuple[int, ...], Any] = {}  # one input per shape
    generator = tf.random.Generator.from_seed(0)
    for layer in convolutions:  # a functional model knows each layer's input and output shapes
        shape = (batch, *layer.input.shape[1:])
        output = (batch, *layer.output.shape[1:])
        if shape not in inputs:
            inputs[shape] = generator.normal(shape)
        channels = shape[-1] if layer.data_format == "channels_last" else shape[1]
        calls.append((layer, inputs[shape]))
        flops += conv_call_flops(output, channels, layer.groups, layer.kernel_size)

    @tf.function(jit_compile=False)
    def run() -> Any:
        return [layer(x) for layer, x in calls]

    def call() -> Any:
        return run()[-1].numpy()  # TensorFlow has run every convolution when it hands the last back

    return call, flops, len(calls)


def _jax(model: Any, images: np.ndarray) -> tuple[Callable[[], Any], int, int]:
    import jax
    from flax import nnx
    from jax.extend import core

    graphdef, state = nnx.split(model)  # traced as a pure function of its state (eval mode kept)

    found = []

    def walk(jaxpr: Any) -> None:
        for equation in jaxpr.eqns:
            if equation.primitive is jax.lax.conv_general_dilated_p:
                found.append(equation)
        for inner in core.subjaxprs(jaxpr):  # the jit-compiled forward pass, scans, ...
            walk(inner)

    forward = jax.make_jaxpr(lambda state, x: nnx.merge(graphdef, state)(x))
    walk(forward(state, images.transpose(0, 2, 3, 1)).jaxpr)  # Flax's layout: NHWC
    if not found:
        raise ValueError("the model has no convolution (no conv_general_dilated in its trace)")
    key, operands, flops = jax.random.key(0), [], 0
    for equation in found:
        arrays = []
        for variable in equation.invars:
            key, draw = jax.random.split(key)
            arrays.append(jax.random.normal(draw, variable.aval.shape, variable.aval.dtype))
        operands.append(arrays)
        kernel = equation.invars[1].aval.shape
        out_spec, in_spec, *spatial = equation.params["dimension_numbers"].rhs_spec
        flops += conv_call_flops(equation.outvars[0].aval.shape, kernel[in_spec], 1,
                                 tuple(kernel[axis] for axis in spatial))

    @jax.jit
    def run(operands: list[list[Any]]) -> list[Any]:
        return [equation.primitive.bind(*arrays, **equation.params) for equation, arrays in zip(found, operands)]

    def call() -> Any:
        return jax.block_until_ready(run(operands))[-1]

    return call, flops, len(found)


def _mxnet(model: Any, images: np.ndarray) -> tuple[Callable[[], Any], int, int]:
    import ast
    import json

    from rosetta_utils.backends.mxnet import _mxnet as imported

    mx = imported()
    graph = model(mx.sym.var("data"))  # a hybrid block called on a symbol gives its graph
    nodes = json.loads(graph.tojson())["nodes"]
    internals = graph.get_internals()
    _, shapes, _ = internals.infer_shape(data=images.shape)
    shape_of = dict(zip(internals.list_outputs(), shapes))
    context = next(iter(model.collect_params().values())).list_ctx()[0]
    calls, flops, inputs = [], 0, {}
    for node in nodes:
        if node["op"] != "Convolution":
            continue
        attrs = {key: ast.literal_eval(value) if value[:1] in "([0123456789" else value
                 for key, value in node["attrs"].items()}
        source = nodes[node["inputs"][0][0]]
        shape = shape_of[source["name"] if source["op"] == "null" else f"{source['name']}_output"]
        output = shape_of[f"{node['name']}_output"]
        groups = attrs.get("num_group", 1)
        kernel, channels = tuple(attrs["kernel"]), attrs["num_filter"]
        if shape not in inputs:
            inputs[shape] = mx.nd.random.normal(shape=shape, ctx=context)
        weight = mx.nd.random.normal(shape=(channels, shape[1] // groups, *kernel), ctx=context)
        options = {key: attrs[key] for key in ("kernel", "stride", "pad", "dilate", "num_filter", "num_group")
                   if key in attrs}
        bias = None if attrs.get("no_bias") in (True, "True", "true", 1) else mx.nd.zeros(channels, ctx=context)
        calls.append((inputs[shape], weight, bias, options))
        flops += conv_call_flops(output, shape[1], groups, kernel)
    if not calls:
        raise ValueError("the model has no Convolution in its graph")

    def call() -> Any:
        for data, weight, bias, options in calls:
            result = mx.nd.Convolution(data=data, weight=weight, bias=bias, no_bias=bias is None, **options)
        result.wait_to_read()  # MXNet's engine runs them in order: the last one waits for all
        return result

    return call, flops, len(calls)
