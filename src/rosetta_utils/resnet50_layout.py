"""ResNet-50's layout, said once: its stages, its layers, each framework's names for them,
and the shape of every weight.

The book's canonical ResNet-50 is torchvision's feature extractor: its names
(``layer1.0.conv1.weight``), OIHW kernels, convolutions without biases, each
followed by a batch norm. Every other description of the network in the
book derives from this module: the published Keras file's layers
(:mod:`rosetta_utils.pretrained`), the checkpoint converters' moves
(:mod:`rosetta_utils.checkpoints.layouts`), the seeded stand-in weights
(:mod:`rosetta_utils.transplant`). A layer's place is ``(stage, block,
branch)``: stage 0 is the stem, branch 0 a first block's shortcut
(``downsample``), branches 1 to 3 its three convolutions.
"""

from __future__ import annotations

#: ResNet-50's four stages: bottleneck width, number of blocks, stride of the first block.
RESNET50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))


def resnet50_weight_shapes() -> dict[str, tuple[int, ...]]:
    """Name → shape of ResNet-50's feature extractor in torchvision's names and layouts.

    Convolutions (OIHW, no biases) and batch norms (``weight`` = scale,
    ``bias`` = shift, ``running_mean``, ``running_var``); no classifier. The
    shapes are the same for v1 and v1.5, which differ only in where a
    down-sampling block puts its stride.
    """
    shapes: dict[str, tuple[int, ...]] = {"conv1.weight": (64, 3, 7, 7)}

    def batch_norm(prefix: str, channels: int) -> None:
        for field in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{prefix}.{field}"] = (channels,)

    batch_norm("bn1", 64)
    channels_in = 64
    for stage, (width, blocks, _) in enumerate(RESNET50_STAGES, start=1):
        for block in range(blocks):
            prefix = f"layer{stage}.{block}"
            shapes[f"{prefix}.conv1.weight"] = (width, channels_in, 1, 1)
            batch_norm(f"{prefix}.bn1", width)
            shapes[f"{prefix}.conv2.weight"] = (width, width, 3, 3)
            batch_norm(f"{prefix}.bn2", width)
            shapes[f"{prefix}.conv3.weight"] = (4 * width, width, 1, 1)
            batch_norm(f"{prefix}.bn3", 4 * width)
            if block == 0:
                shapes[f"{prefix}.downsample.0.weight"] = (4 * width, channels_in, 1, 1)
                batch_norm(f"{prefix}.downsample.1", 4 * width)
            channels_in = 4 * width
    return shapes


def resnet50_layers() -> list[tuple[str, str, tuple[int, int, int]]]:
    """(torchvision conv, its batch norm, (stage, block, branch)) in torchvision's order;
    branch 0 is the shortcut's (``downsample``), the stem is (0, 0, 0)."""
    layers = [("conv1", "bn1", (0, 0, 0))]
    for stage, (_, blocks, _) in enumerate(RESNET50_STAGES, start=1):
        for block in range(blocks):
            prefix = f"layer{stage}.{block}"
            layers += [(f"{prefix}.conv{i}", f"{prefix}.bn{i}", (stage, block, i)) for i in (1, 2, 3)]
            if block == 0:
                layers.append((f"{prefix}.downsample.0", f"{prefix}.downsample.1", (stage, block, 0)))
    return layers


def native_names(framework: str, stage: int, block: int, branch: int) -> tuple[str, str, bool]:
    """(native conv, native batch norm, whether the conv has a bias) of one layer."""
    stem = stage == 0
    if framework == "tensorflow":  # keras.applications.ResNet50
        base = "conv1" if stem else f"conv{stage + 1}_block{block + 1}_{branch}"
        return f"{base}_conv", f"{base}_bn", True
    if framework == "jax":  # the chapter's nnx ResNet50: torchvision's names, nnx.Sequential's "layers"
        if stem:
            return "conv1", "bn1", False
        prefix = f"layer{stage}/layers/{block}"
        if branch == 0:
            return f"{prefix}/downsample/layers/0", f"{prefix}/downsample/layers/1", False
        return f"{prefix}/conv{branch}", f"{prefix}/bn{branch}", False
    if framework == "mxnet":  # gluon.model_zoo.vision.resnet50_v1().features
        if stem:
            return "0", "1", False
        prefix = f"{3 + stage}.{block}"
        if branch == 0:
            return f"{prefix}.downsample.0", f"{prefix}.downsample.1", False
        conv = {1: 0, 2: 3, 3: 6}[branch]
        return f"{prefix}.body.{conv}", f"{prefix}.body.{conv + 1}", branch != 2
    if framework == "chainer":  # L.ResNet50Layers
        if stem:
            return "conv1", "bn1", True
        name = f"res{stage + 1}/{'a' if block == 0 else f'b{block}'}"
        branch = 4 if branch == 0 else branch
        return f"{name}/conv{branch}", f"{name}/bn{branch}", False
    raise AssertionError(framework)


def block_paths(framework: str) -> dict[str, str]:
    """Where a framework's ResNet-50 computes the stem's batch norm and each of the 16
    bottleneck blocks: canonical (torchvision's) name → the path of that layer in the
    framework's model, in the order they run. A recording of layer outputs reads these,
    not the convolutions: Keras's and Gluon's convolutions keep biases that the canonical
    network folds into the next batch norm, so only the batch norm's output is the same
    array everywhere."""
    paths = {"bn1": {"tensorflow": "conv1_bn", "mxnet": "1"}.get(framework, "bn1")}
    for stage, (_, blocks, _) in enumerate(RESNET50_STAGES, start=1):
        for block in range(blocks):
            paths[f"layer{stage}.{block}"] = {
                "pytorch": f"layer{stage}.{block}",
                "tensorflow": f"conv{stage + 1}_block{block + 1}_out",
                "jax": f"layer{stage}/layers/{block}",
                "mxnet": f"{3 + stage}.{block}",
                "chainer": f"res{stage + 1}/{'a' if block == 0 else f'b{block}'}",
            }[framework]
    return paths


#: Keras's names of a batch norm's arrays, in its legacy order, and torchvision's.
KERAS_BATCH_NORM = (("gamma", "weight"), ("beta", "bias"), ("moving_mean", "running_mean"), ("moving_variance", "running_var"))


#: The order Keras's functional ResNet50 builds a block's convolutions in: the shortcut third.
KERAS_BRANCH_ORDER = {1: 0, 2: 1, 0: 2, 3: 3}


def keras_order() -> list[tuple[str, str, tuple[int, int, int]]]:
    """:func:`resnet50_layers` in the order of Keras's model and published file."""
    return sorted(resnet50_layers(), key=lambda layer: (layer[2][0], layer[2][1], KERAS_BRANCH_ORDER[layer[2][2]]))


def keras_layer_pairs() -> list[tuple[str, str, str, str]]:
    """``(Keras conv, Keras batch norm, torchvision conv, torchvision batch norm)`` for every
    convolution of ResNet-50's feature extractor, in the order of Keras's file."""
    return [(*native_names("tensorflow", *place)[:2], conv, bn) for conv, bn, place in keras_order()]


def keras_resnet50_layout() -> dict[str, list[tuple[str, tuple[int, ...]]]]:
    """The published file's layers in its order: ``{layer: [(weight name, shape), ...]}``, the
    weightless layers (``[]``) included, names as Keras 2 wrote them (``conv1_conv/kernel:0``)."""
    shapes = resnet50_weight_shapes()

    def conv(name: str, torch_conv: str) -> list[tuple[str, tuple[int, ...]]]:
        out, inp, height, width = shapes[f"{torch_conv}.weight"]
        return [(f"{name}/kernel:0", (height, width, inp, out)), (f"{name}/bias:0", (out,))]

    def batch_norm(name: str, torch_bn: str) -> list[tuple[str, tuple[int, ...]]]:
        return [(f"{name}/{keras}:0", shapes[f"{torch_bn}.{torch}"]) for keras, torch in KERAS_BATCH_NORM]

    pairs = {keras_conv: (keras_bn, torch_conv, torch_bn) for keras_conv, keras_bn, torch_conv, torch_bn in keras_layer_pairs()}
    layout: dict[str, list[tuple[str, tuple[int, ...]]]] = {"input_1": [], "conv1_pad": []}

    def add_conv(keras_conv: str) -> None:
        keras_bn, torch_conv, torch_bn = pairs[keras_conv]
        layout[keras_conv] = conv(keras_conv, torch_conv)
        layout[keras_bn] = batch_norm(keras_bn, torch_bn)

    add_conv("conv1_conv")
    layout["conv1_relu"], layout["pool1_pad"], layout["pool1_pool"] = [], [], []
    for stage, (_, blocks, _) in enumerate(RESNET50_STAGES, start=1):
        for block in range(blocks):
            name = f"conv{stage + 1}_block{block + 1}"
            for branch in (1, 2):
                add_conv(f"{name}_{branch}_conv")
                layout[f"{name}_{branch}_relu"] = []
            if block == 0:  # Keras's order: 0_conv, 3_conv, 0_bn, 3_bn
                keras_bn0, torch_conv0, torch_bn0 = pairs[f"{name}_0_conv"]
                keras_bn3, torch_conv3, torch_bn3 = pairs[f"{name}_3_conv"]
                layout[f"{name}_0_conv"] = conv(f"{name}_0_conv", torch_conv0)
                layout[f"{name}_3_conv"] = conv(f"{name}_3_conv", torch_conv3)
                layout[keras_bn0] = batch_norm(keras_bn0, torch_bn0)
                layout[keras_bn3] = batch_norm(keras_bn3, torch_bn3)
            else:
                add_conv(f"{name}_3_conv")
            layout[f"{name}_add"], layout[f"{name}_out"] = [], []
    return layout
