"""Finding where two runs part ways (rosetta_utils.divergence): float32's error model
holds a correct port and stops holding when the model is changed; each shape of a
difference names its cause; bad files are refused naming the first mismatch; the command
compares files written in the two environments."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rosetta_book.environments import python_for
from rosetta_utils.divergence import (CAUSES, DivergenceInputError, compare_files, find_divergence,
                                      load_activations, save_activations)

ROOT = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(3)


def mlp_runs(depth=6, width=256, batch=8):
    """One network's layer outputs computed twice in float32, the sums taken in two orders
    (as two frameworks' kernels would): a correct port. Returns both runs and the fan-ins."""
    weights = [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32) for _ in range(depth)]
    x = rng.standard_normal((batch, width)).astype(np.float32)
    first, second, fan_ins = {}, {}, {}
    a = b = x
    for number, w in enumerate(weights):
        a = np.maximum(a @ w, 0)
        halves = b[:, width // 2:] @ w[width // 2:] + b[:, : width // 2] @ w[: width // 2]  # another order
        b = np.maximum(halves.astype(np.float32), 0)
        name = f"dense{number}"
        first[name], second[name], fan_ins[name] = a, b, width
    return first, second, fan_ins


def test_a_correct_port_stays_within_float32s_bound_at_every_layer():
    first, second, fan_ins = mlp_runs()
    report = find_divergence(first, second, fan_ins)
    assert report.first is None and len(report.layers) == 6
    assert any(check.difference > 0 for check in report.layers)  # the orders do round differently
    worst = max(check.difference / check.bound for check in report.layers)
    assert worst < 0.5, worst


def test_a_changed_error_model_flags_the_same_correct_port():
    """The bound is the model's, not a fixed number: fan-ins of 1, or a unit roundoff a
    thousand times smaller, make the same two runs diverge."""
    first, second, fan_ins = mlp_runs()
    assert find_divergence(first, second, {name: 1 for name in fan_ins}).first is not None
    assert find_divergence(first, second, fan_ins, unit_roundoff=2.0**-34).first is not None


def planted(change, shape=(2, 3, 6, 6), kind=None):
    """Three layers equal in both runs but the middle one, which ``change`` alters."""
    layers = {name: rng.standard_normal(shape).astype(np.float32) for name in ("stem", "middle", "head")}
    other = dict(layers)
    other["middle"] = change(layers["middle"].copy()).astype(np.float32)
    fan_ins = {name: 27 for name in layers}
    report = find_divergence(layers, other, fan_ins, kinds={"middle": kind} if kind else None)
    assert report.first is not None and report.first.name == "middle", report.lines()
    return [cause.name for cause in report.causes]


def border_only(y):
    y[:, :, 0, :] += 0.5
    y[:, :, :, -1] -= 0.25
    return y


def dropped(y):
    keep = rng.random(y.shape) >= 0.3
    return y * keep / 0.7


@pytest.mark.parametrize("change, cause", [
    (border_only, "padding"),
    (lambda y: y * np.array([1.1, 0.9, 1.0])[None, :, None, None] + np.array([0.1, 0.0, -0.2])[None, :, None, None],
     "normalisation"),
    (lambda y: np.ascontiguousarray(np.moveaxis(y, 1, -1)).reshape(y.shape), "order"),
    (dropped, "dropout"),
    (lambda y: y * 4.0, "factor"),
    (lambda y: np.where(np.arange(y.size).reshape(y.shape) == 7, np.nan, y), "not finite"),
])
def test_each_shape_of_a_difference_names_its_cause_first(change, cause):
    assert planted(change)[0] == cause


def test_a_shape_is_named_only_where_it_explains_the_difference_within_float32s_bound():
    """A uniform offset barely beyond the bound is no reordering (sorted, the runs still
    differ by the offset), and a per-channel change that an affine map explains only up
    to a residual above the bound is no normalisation."""
    def offset(y):  # about twice the middle layer's bound: the values sort alike but apart
        return y + np.float32(1e-5 * np.abs(y).max())

    assert "order" not in planted(offset)

    def nearly_affine(y):
        return y * np.array([1.1, 0.9, 1.0])[None, :, None, None] + 0.05 * np.tanh(y)

    assert "normalisation" not in planted(nearly_affine)


def test_a_shapeless_difference_names_the_causes_of_its_layers_kind():
    shapeless = lambda y: y + rng.standard_normal(y.shape) * 0.1  # noqa: E731
    assert planted(shapeless, kind="conv")[:2] == ["padding", "order"]
    assert planted(shapeless, kind="norm")[0] == "normalisation"
    assert planted(shapeless)[0] == "everywhere"


def test_a_difference_after_the_first_step_names_the_optimiser():
    steps = {f"step{step}/{name}": rng.standard_normal((4, 5)).astype(np.float32)
             for step in range(3) for name in ("dense", "loss")}
    other = dict(steps)
    other["step1/dense"] = steps["step1/dense"] + 1e-2 * rng.standard_normal((4, 5)).astype(np.float32)
    report = find_divergence(steps, other, {name: 5 for name in steps})
    assert report.first.name == "step1/dense" and report.causes[0].name == "optimiser"


def test_a_nan_is_the_first_divergence_even_where_the_values_match():
    layers = {"a": np.ones((2, 3), np.float32), "b": np.full((2, 3), np.nan, np.float32)}
    report = find_divergence(layers, dict(layers), {"a": 3, "b": 3})
    assert report.first.name == "b" and report.causes[0].name == "not finite"


def test_every_cause_links_rows_that_the_tables_have():
    labels = {line.strip()[1:-2] for path in (ROOT / "book" / "tables").glob("*.md")
              for line in path.read_text().splitlines() if line.startswith("(tables-")}
    for name, (_, rows) in CAUSES.items():
        assert rows and set(rows) <= labels, (name, set(rows) - labels)


def test_files_whose_layers_do_not_match_are_refused_naming_the_first_mismatch(tmp_path):
    layers = {"conv1": np.zeros((1, 2)), "fc": np.zeros((1, 3))}
    save_activations(tmp_path / "a.npz", layers)
    save_activations(tmp_path / "renamed.npz", {"conv1": np.zeros((1, 2)), "dense": np.zeros((1, 3))})
    save_activations(tmp_path / "reshaped.npz", {"conv1": np.zeros((1, 2)), "fc": np.zeros((3, 1))})
    save_activations(tmp_path / "short.npz", {"conv1": np.zeros((1, 2))})
    with pytest.raises(DivergenceInputError, match=r"layer 1: .*a\.npz has 'fc' where .*renamed\.npz has 'dense'"):
        compare_files(tmp_path / "a.npz", tmp_path / "renamed.npz")
    with pytest.raises(DivergenceInputError, match=r"layer 1 \('fc'\): shape \(1, 3\) in .*, \(3, 1\) in"):
        compare_files(tmp_path / "a.npz", tmp_path / "reshaped.npz")
    with pytest.raises(DivergenceInputError, match=r"a\.npz has more layers: 'fc' \(layer 1\)"):
        compare_files(tmp_path / "a.npz", tmp_path / "short.npz")
    (tmp_path / "text.npz").write_text("not an archive")
    with pytest.raises(DivergenceInputError, match=r"text\.npz: not a file of saved activations"):
        load_activations(tmp_path / "text.npz")
    with pytest.raises(DivergenceInputError, match="unknown layer kinds"):
        save_activations(tmp_path / "kind.npz", layers, kinds={"fc": "fully connected"})


def test_the_order_the_layers_ran_in_is_kept_through_the_file(tmp_path):
    names = [f"layer{n}" for n in (3, 1, 2, 10)]
    save_activations(tmp_path / "run.npz", {name: np.zeros(1) for name in names}, {"layer1": 9}, {"layer2": "conv"})
    run = load_activations(tmp_path / "run.npz")
    assert list(run.outputs) == names and run.fan_ins == {"layer1": 9} and run.kinds == {"layer2": "conv"}


WRITE = """
import sys
import numpy as np
from rosetta_utils.divergence import save_activations
rng = np.random.default_rng(0)
x = rng.standard_normal((4, 64)).astype(np.float32)
w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
h = np.maximum(x @ w, 0)
y = h @ w
if sys.argv[2] == "planted":
    y = y * 2
save_activations(sys.argv[1], {"dense1": h, "dense2": y}, {"dense1": 64, "dense2": 64})
print(np.__version__)
"""


def run_command(*files):
    return subprocess.run([sys.executable, "-m", "rosetta_utils.divergence", *map(str, files)],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def test_the_command_compares_files_written_in_the_two_environments(tmp_path):
    """The current environment writes one run (numpy 2), the legacy one the other (numpy
    1.x, where MXNet and Chainer run); the command reads both."""
    legacy = python_for("mxnet") or python_for("chainer")
    if legacy is None or legacy == python_for("pytorch"):
        pytest.skip("no legacy environment here")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    versions = []
    for python, name, variant in ((sys.executable, "current.npz", "correct"), (legacy, "legacy.npz", "correct"),
                                  (legacy, "planted.npz", "planted")):
        done = subprocess.run([python, "-c", WRITE, str(tmp_path / name), variant], capture_output=True, text=True,
                              env=env, check=True)
        versions.append(done.stdout.strip())
    assert versions[0].split(".")[0] != versions[1].split(".")[0]  # numpy 2 and numpy 1
    same = run_command(tmp_path / "current.npz", tmp_path / "legacy.npz")
    assert same.returncode == 0 and "no divergence" in same.stdout, same.stdout + same.stderr
    found = run_command(tmp_path / "current.npz", tmp_path / "planted.npz")
    assert found.returncode == 1, found.stdout + found.stderr
    assert "first divergence: layer 'dense2'" in found.stdout and "1. factor" in found.stdout


def test_the_command_names_a_bad_file_and_exits_2(tmp_path):
    (tmp_path / "a.npz").write_text("nothing")
    done = run_command(tmp_path / "a.npz", tmp_path / "a.npz")
    assert done.returncode == 2 and "not a file of saved activations" in done.stderr
