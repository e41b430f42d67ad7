"""Moving a reader's own model's weights (rosetta_utils.porting) on the zoo (tests/zoo/spec.py):
eight architectures of our own, every directed pair of the frameworks that have the model's
layers, each move one call into a fresh port (the framework's own random initialisation),
then recorded and compared with the source's recording: every layer within its bound. The
source's PyTorch state dict moves in too. A conversion left out, planted in the moved
arrays kind by kind, is named at its layer by the comparison; models whose structures
differ are refused naming the first difference, with nothing written.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE
from rosetta_book.environments import python_for
from rosetta_utils.divergence import compare_files
from rosetta_utils.porting import PortingError, pair_layers, read_saved, write_saved

ZOO = Path(__file__).parent / "zoo"
sys.path.insert(0, str(ZOO))
import spec  # noqa: E402

FRAMEWORKS = [name for name in spec.FRAMEWORKS if name in AVAILABLE]


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """The zoo recorded with its hand-written ports, each port's weights saved, then every
    other framework's moved into a fresh port of each framework and recorded."""
    if spec.SOURCE not in FRAMEWORKS:
        pytest.skip("the zoo's source framework, PyTorch, is not selected")
    out = tmp_path_factory.mktemp("zoo-porting")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ZOO), os.environ.get("PYTHONPATH", "")])}
    lines = {}
    for step, script in (("record", "record.py"), ("export", "move.py"), ("import", "move.py")):
        for framework in FRAMEWORKS:
            command = [python_for(framework), str(ZOO / script)]
            command += [framework, str(out), "--no-traps"] if step == "record" else [step, framework, str(out)]
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            lines[(step, framework)] = done.stdout
            assert done.returncode == 0, f"{step} {framework}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return out


def directed_pairs():
    for model, about in spec.MODELS.items():
        for a, b in itertools.permutations(about["frameworks"], 2):
            yield model, a, b
        for b in about["frameworks"]:
            yield model, "statedict", b


def test_every_directed_pair_moves_in_one_call_and_agrees_at_every_layer(moved):
    verdicts = {}
    for model, a, b in directed_pairs():
        if b not in FRAMEWORKS or (a != "statedict" and a not in FRAMEWORKS):
            continue
        probe = spec.MODELS[model]["probes"][0]
        source = moved / f"{model}.{probe}.{spec.SOURCE if a == 'statedict' else a}.npz"
        report = compare_files(source, moved / f"{model}.{probe}.{a}-to-{b}.npz", common=True)
        verdicts[f"{model}: {a} -> {b}"] = report.first.name if report.first else None
    assert len(verdicts) >= 8 * 2
    assert {key: value for key, value in verdicts.items() if value is not None} == {}


#: Each kind's conversion left out, as the canonical arrays a buggy move would hand on:
#: (model, layer path in the source's file, what is planted, the layer the comparison names).
OMISSIONS = {
    "dense": ("mlp", "fc2", lambda a: {**a, "weight": a["weight"].T.copy()}, "fc2"),
    "conv": ("cnn", "conv1", lambda a: {**a, "weight": a["weight"][:, :, ::-1, :].copy()}, "conv1"),
    "conv_transpose": ("decoder", "up1", lambda a: {**a, "weight": a["weight"][:, :, ::-1, ::-1].copy()}, "up1"),
    "batch_norm": ("cnn", "bn1", lambda a: {**a, "running_var": np.ones_like(a["running_var"])}, "bn1"),
    "layer_norm": ("mlp", "norm_in", lambda a: {"weight": a["bias"], "bias": a["weight"]}, "norm_in"),
    "embedding": ("textconv", "embed", lambda a: {"weight": np.roll(a["weight"], 1, axis=0)}, "embed"),
    "lstm": ("lstm", "lstm", lambda a: {k: _swap_blocks(v, 4, 0, 1) for k, v in a.items()}, "lstm"),
    "gru": ("bigru", "gru", lambda a: {k: _swap_blocks(v, 3, 0, 1) for k, v in a.items()}, "gru"),
    "attention": ("attention", "attn", lambda a: {**a, "in_proj_weight": _swap_blocks(a["in_proj_weight"], 3, 0, 1)},
                  "attn"),
    "flatten": ("cnn", "fc", lambda a: {**a, "weight": _nhwc_columns(a["weight"], (16, 4, 4))}, "fc"),
}


def _swap_blocks(array, blocks, i, j):
    """Gates (or projections) i and j of a stacked array swapped: an order left as it was."""
    parts = np.split(array, blocks, axis=0)
    parts[i], parts[j] = parts[j], parts[i]
    return np.concatenate(parts, axis=0)


def _nhwc_columns(weight, chw):
    c, h, w = chw
    return np.ascontiguousarray(weight.reshape(len(weight), c, h, w).transpose(0, 2, 3, 1).reshape(len(weight), -1))


@pytest.mark.parametrize("kind", list(OMISSIONS))
def test_a_conversion_left_out_is_named_at_its_layer(moved, kind, tmp_path):
    model, path, plant, layer = OMISSIONS[kind]
    framework, layers = read_saved(moved / "moved" / f"{model}.{spec.SOURCE}.npz")
    target = next(name for name in ("tensorflow", "jax", "mxnet", "chainer", "pytorch")
                  if name in FRAMEWORKS and name in spec.MODELS[model]["frameworks"])
    for item in layers:
        if item.path == path:
            item.arrays = plant(item.arrays)
    planted = write_saved(tmp_path / f"{model}.planted.npz", framework, layers)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ZOO), os.environ.get("PYTHONPATH", "")])}
    probe = spec.MODELS[model]["probes"][0]
    code = (
        "import sys, contextlib, io, importlib\n"
        f"sys.path.insert(0, {str(ZOO)!r})\n"
        "import spec\n"
        f"zoo = importlib.import_module('zoo_{target}')\n"
        f"from rosetta_utils.recorders.{target} import record\n"
        "from rosetta_utils.porting import load_weights\n"
        f"inputs = zoo.framework_inputs({model!r}, spec.probe({model!r}, {probe!r}))\n"
        f"fresh, names = zoo.port({model!r})\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    load_weights(fresh, inputs, {str(planted)!r})\n"
        f"record(fresh, inputs, names=names, path={str(tmp_path / 'planted-recording.npz')!r})\n"
    )
    done = subprocess.run([python_for(target), "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    report = compare_files(moved / f"{model}.{probe}.{spec.SOURCE}.npz", tmp_path / "planted-recording.npz",
                           common=True)
    assert report.first is not None and report.first.name == layer, (kind, target, report.lines())


def test_structures_that_differ_are_refused_naming_the_first_difference_with_nothing_written(moved):
    _, layers = read_saved(moved / "moved" / f"mlp.{spec.SOURCE}.npz")
    pair_layers(layers, layers)  # the same structure pairs
    missing = [layer for layer in layers if layer.path != "fc2"]
    with pytest.raises(PortingError, match=r"layer 3 \(source 'fc2', target 'norm'\): a dense layer in the source"):
        pair_layers(layers, missing)
    _, cnn = read_saved(moved / "moved" / f"cnn.{spec.SOURCE}.npz")
    bigger = [type(layer)(layer.path, layer.kind, dict(layer.arrays), dict(layer.config)) for layer in cnn]
    bigger[0].arrays["weight"] = np.zeros((8, 3, 5, 5), np.float32)  # a 5x5 kernel for 3x3
    five = r"layer 1 .*'conv1'.*weight is \(8, 3, 3, 3\) in the source, \(8, 3, 5, 5\)"
    with pytest.raises(PortingError, match=five):
        pair_layers(cnn, bigger)
    _, gru = read_saved(moved / "moved" / f"bigru.{spec.SOURCE}.npz")
    other = [type(layer)(layer.path, layer.kind, dict(layer.arrays), {**layer.config, "flavor": "reset_before"})
             for layer in gru]
    with pytest.raises(PortingError, match=r"flavor 'linear_before_reset' in the source, 'reset_before' in the target"):
        pair_layers(gru, other)
