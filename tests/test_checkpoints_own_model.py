"""The checkpoint command on a reader's own model (``python -m rosetta_utils.checkpoints
module:function ...``): given the model's code, a checkpoint moves from one framework's
format into another's, through either environment, and computes what the source computed;
a checkpoint of another structure is refused, naming the layer, with nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE
from rosetta_book.environments import python_for

ROOT = Path(__file__).resolve().parents[1]

#: A reader's model code: a small conv net with a batch norm, a flatten and two dense
#: layers, in PyTorch, Keras, Flax and Gluon (``WIDE`` builds one with a wider dense).
CODE = textwrap.dedent('''
    import os
    import numpy as np

    WIDE = os.environ.get("NET_WIDE") == "1"
    HIDDEN = 24 if WIDE else 16
    X = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)


    def build(framework):
        if framework == "pytorch":
            import torch

            torch.manual_seed(0)
            net = torch.nn.Sequential()
            net.add_module("conv", torch.nn.Conv2d(3, 4, 3, padding=1))
            net.add_module("bn", torch.nn.BatchNorm2d(4))
            net.add_module("relu", torch.nn.ReLU())
            net.add_module("flatten", torch.nn.Flatten())
            net.add_module("fc1", torch.nn.Linear(4 * 8 * 8, HIDDEN))
            net.add_module("fc2", torch.nn.Linear(HIDDEN, 5))
            with torch.no_grad():
                net.bn.running_mean.uniform_(-1, 1)
                net.bn.running_var.uniform_(0.5, 2)
            return net.eval(), X
        if framework == "tensorflow":
            import keras

            net = keras.Sequential([
                keras.Input((8, 8, 3)),
                keras.layers.Conv2D(4, 3, padding="same", name="conv"),
                keras.layers.BatchNormalization(epsilon=1e-5, name="bn"),
                keras.layers.ReLU(),
                keras.layers.Flatten(),
                keras.layers.Dense(HIDDEN, name="fc1"),
                keras.layers.Dense(5, name="fc2"),
            ])
            return net, X.transpose(0, 2, 3, 1)
        if framework == "jax":
            from flax import nnx

            class Net(nnx.Module):
                def __init__(self, rngs):
                    self.conv = nnx.Conv(3, 4, (3, 3), padding=1, rngs=rngs)
                    self.bn = nnx.BatchNorm(4, epsilon=1e-5, rngs=rngs)
                    self.fc1 = nnx.Linear(4 * 8 * 8, HIDDEN, rngs=rngs)
                    self.fc2 = nnx.Linear(HIDDEN, 5, rngs=rngs)

                def __call__(self, x):
                    x = nnx.relu(self.bn(self.conv(x)))
                    return self.fc2(self.fc1(x.reshape(len(x), -1)))

            net = Net(nnx.Rngs(1))
            net.eval()
            return net, X.transpose(0, 2, 3, 1)
        if framework == "mxnet":
            np.bool = bool
            import mxnet as mx
            from mxnet.gluon import nn

            class Net(nn.HybridBlock):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2D(4, 3, padding=1, in_channels=3)
                    self.bn = nn.BatchNorm(in_channels=4)
                    self.fc1 = nn.Dense(HIDDEN, in_units=4 * 8 * 8)
                    self.fc2 = nn.Dense(5, in_units=HIDDEN)

                def hybrid_forward(self, F, x):
                    return self.fc2(self.fc1(F.relu(self.bn(self.conv(x)))))

            net = Net()
            net.initialize()
            return net, mx.nd.array(X)
        raise ValueError(framework)
''')

OUTPUTS = textwrap.dedent('''
    import sys
    import numpy as np
    import mynet

    framework, path, out = sys.argv[1:]
    net, x = mynet.build(framework)
    if framework == "pytorch":
        import torch
        if path != "-":
            net.load_state_dict(torch.load(path, weights_only=True))
        with torch.no_grad():
            y = net(torch.from_numpy(x)).numpy()
    elif framework == "tensorflow":
        net.load_weights(path)
        y = np.asarray(net(x, training=False))
    elif framework == "jax":
        from rosetta_utils.checkpoints.own_model import load_native
        from pathlib import Path
        load_native("jax", net, Path(path))
        y = np.asarray(net(x))
    elif framework == "mxnet":
        net.load_parameters(path)
        y = net(x).asnumpy()
    np.save(out, y)
''')


def command(folder, *args, framework="pytorch", env_extra=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env_extra or {})}
    return subprocess.run([python_for(framework), "-m", "rosetta_utils.checkpoints", "mynet:build", *map(str, args)],
                          capture_output=True, text=True, cwd=folder, env=env)


def outputs(folder, framework, path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT / "src")])}
    out = folder / f"y-{framework}.npy"
    done = subprocess.run([python_for(framework), "-c", OUTPUTS, framework, str(path), str(out)],
                          capture_output=True, text=True, cwd=folder, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return np.load(out)


@pytest.fixture
def folder(tmp_path):
    if "pytorch" not in AVAILABLE:
        pytest.skip("the source here is a PyTorch checkpoint")
    (tmp_path / "mynet.py").write_text(CODE)
    code = ("import torch, mynet\nnet, _ = mynet.build('pytorch')\n"
            "torch.save(net.state_dict(), 'net.pt')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    subprocess.run([python_for("pytorch"), "-c", code], check=True, cwd=tmp_path, env=env)
    return tmp_path


def test_a_state_dict_moves_into_each_current_framework_and_computes_the_same(folder):
    expected = outputs(folder, "pytorch", folder / "net.pt")
    for framework, target in (("tensorflow", "net.weights.h5"), ("jax", "net-flax")):
        if framework not in AVAILABLE:
            continue
        done = command(folder, "net.pt", target, "--from", "pytorch", "--to", framework)
        assert done.returncode == 0, done.stderr
        assert "fc1" in done.stdout and "columns" in done.stdout  # the flatten's permutation, in the table
        got = outputs(folder, framework, folder / target)
        assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max(), framework


def test_a_checkpoint_crosses_the_environments_through_the_canonical_file(folder):
    if "mxnet" not in AVAILABLE:
        pytest.skip("needs MXNet (the legacy environment)")
    done = command(folder, "net.pt", "net.canonical.npz", "--from", "pytorch", "--to", "canonical")
    assert done.returncode == 0, done.stderr
    done = command(folder, "net.canonical.npz", "net.params", "--from", "canonical", "--to", "mxnet",
                   framework="mxnet")
    assert done.returncode == 0, done.stderr
    expected = outputs(folder, "pytorch", folder / "net.pt")
    got = outputs(folder, "mxnet", folder / "net.params")
    assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


def test_a_checkpoint_of_another_structure_is_refused_naming_the_layer_with_nothing_written(folder):
    if "tensorflow" not in AVAILABLE:
        pytest.skip("needs Keras")
    done = command(folder, "net.pt", "net.weights.h5", "--from", "pytorch", "--to", "tensorflow",
                   env_extra={"NET_WIDE": "1"})
    assert done.returncode == 1
    assert "fc1" in done.stderr and "(24, 256)" in done.stderr and "nothing was written" in done.stderr
    assert not (folder / "net.weights.h5").exists() and "Traceback" not in done.stderr
    done = command(folder, "net.pt", "net.weights.h5", "--from", "pytorch", "--to", "tensorflow")
    assert done.returncode == 0
    again = command(folder, "net.pt", "net.weights.h5", "--from", "pytorch", "--to", "tensorflow")
    assert again.returncode == 1 and "exists" in again.stderr


def test_a_checkpoint_in_keras_or_flax_format_moves_back_into_pytorch(folder):
    """The source read with its own framework's loader into the source's port (the model's
    code builds it), then moved: a Keras .weights.h5 file and a Flax Orbax folder, each made
    from the PyTorch checkpoint, back into PyTorch compute what the original did."""
    expected = outputs(folder, "pytorch", folder / "net.pt")
    for framework, middle in (("tensorflow", "net.weights.h5"), ("jax", "net-flax")):
        if framework not in AVAILABLE:
            continue
        assert command(folder, "net.pt", middle, "--from", "pytorch", "--to", framework).returncode == 0
        back = folder / f"back-from-{framework}.pt"
        done = command(folder, middle, back, "--from", framework, "--to", "pytorch")
        assert done.returncode == 0, done.stderr
        got = outputs(folder, "pytorch", back)
        assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max(), framework
