"""Finding where two runs part ways (rosetta_utils.divergence): float32's error model
holds a correct port and stops holding when the model is changed; each shape of a
difference names its cause; bad files are refused naming the first mismatch; the command
compares files written in the two environments."""

import os
import re
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
    assert planted(shapeless, kind="conv")[:2] == ["order", "padding"]  # padding shows on the borders
    assert planted(shapeless, kind="norm")[0] == "normalisation"
    assert planted(shapeless)[0] == "everywhere"


def test_a_difference_after_the_first_step_names_the_optimiser():
    steps = {f"step{step}/{name}": rng.standard_normal((4, 5)).astype(np.float32)
             for step in range(3) for name in ("dense", "loss")}
    other = dict(steps)
    other["step1/dense"] = steps["step1/dense"] + 1e-2 * rng.standard_normal((4, 5)).astype(np.float32)
    report = find_divergence(steps, other, {name: 5 for name in steps})
    assert report.first.name == "step1/dense" and report.causes[0].name == "optimiser"


def test_the_same_nan_or_infinity_in_both_runs_agrees_and_one_in_one_run_only_is_the_divergence():
    layers = {"a": np.ones((2, 3), np.float32),
              "b": np.array([[np.nan, 1, np.inf], [-np.inf, 2, 3]], np.float32), "c": np.ones((2, 3), np.float32)}
    assert find_divergence(layers, dict(layers), {"a": 3, "b": 3, "c": 3}).first is None
    other = dict(layers, b=layers["b"].copy())
    other["b"][0, 2] = -np.inf  # another infinity at the same place
    report = find_divergence(layers, other, {"a": 3, "b": 3, "c": 3})
    assert report.first.name == "b" and report.causes[0].name == "not finite"
    other["b"] = np.where(np.isnan(layers["b"]), 0, layers["b"]).astype(np.float32)  # the NaN in one run only
    report = find_divergence(layers, other, {"a": 3, "b": 3, "c": 3})
    assert report.first.name == "b" and report.causes[0].name == "not finite" and report.first.differing == 1


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
    reshaped = compare_files(tmp_path / "a.npz", tmp_path / "reshaped.npz")  # a divergence, not bad input
    assert reshaped.first.name == "fc" and reshaped.first.other_shape == (3, 1)
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


def bad_files(folder, good):
    """Each kind of file a reader may hand the command by mistake, with what its message
    must say."""
    (folder / "empty.npz").write_bytes(b"")
    (folder / "truncated.npz").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    (folder / "text.npz").write_text("layer,value\nconv1,0.5\n")
    np.save(folder / "array.npy", np.zeros((2, 3), np.float32))
    np.savez(folder / "nothing.npz")
    return {"empty.npz": "empty", "truncated.npz": "not a file of saved activations",
            "text.npz": "not a zip archive", "array.npy": r"single numpy array \(\.npy\)",
            "nothing.npz": "holds no layers", "missing.npz": "no such file"}


def test_every_bad_file_exits_2_with_a_message_that_names_the_problem(tmp_path):
    good = save_activations(tmp_path / "good.npz", {"dense": np.ones((2, 3), np.float32)}, {"dense": 3})
    for name, message in bad_files(tmp_path, good).items():
        for pair in ((good, tmp_path / name), (tmp_path / name, good)):
            done = run_command(*pair)
            assert done.returncode == 2, (name, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr and re.search(message, done.stderr), (name, done.stderr)
            assert name in done.stderr


def test_files_that_describe_a_layer_differently_are_refused_naming_it(tmp_path):
    layers = {"conv": np.ones((2, 4, 3, 3), np.float32), "fc": np.ones((2, 5), np.float32)}
    a = save_activations(tmp_path / "a.npz", layers, {"conv": 28, "fc": 37}, {"conv": "conv", "fc": "dense"})
    b = save_activations(tmp_path / "b.npz", layers, {"conv": 28, "fc": 36}, {"conv": "conv", "fc": "dense"})
    c = save_activations(tmp_path / "c.npz", layers, {"conv": 28, "fc": 37}, {"conv": "conv", "fc": "other"})
    d = save_activations(tmp_path / "d.npz", layers)  # no description: takes the other file's
    with pytest.raises(DivergenceInputError, match=r"disagree on layer 'fc''s fan-in: 37 in .*a\.npz, 36 in"):
        compare_files(a, b)
    with pytest.raises(DivergenceInputError, match=r"disagree on layer 'fc''s kind: 'dense' in"):
        compare_files(a, c)
    assert compare_files(a, d).first is None and compare_files(d, a).fan_ins_recorded


def test_framework_arrays_are_converted_and_anything_else_is_refused_naming_its_type(tmp_path):
    class Tensorish:  # an object numpy keeps as an object array
        pass

    with pytest.raises(DivergenceInputError, match=r"layer 'fc'.*Tensorish.*not an array of numbers"):
        save_activations(tmp_path / "x.npz", {"fc": Tensorish()})
    with pytest.raises(DivergenceInputError, match="no layers to save"):
        save_activations(tmp_path / "x.npz", {})
    assert not (tmp_path / "x.npz").exists()
    torch = pytest.importorskip("torch")
    path = save_activations(tmp_path / "t.npz", {"fc": torch.ones(2, 3, requires_grad=True) * 2})
    assert load_activations(path).outputs["fc"].dtype == np.float32


def test_the_report_says_the_margin_counts_what_differs_and_names_each_rows_page(tmp_path):
    first, second, fan_ins = mlp_runs()
    agree = find_divergence(first, second, fan_ins)
    line = agree.lines()[-1]
    worst = max(agree.layers, key=lambda check: check.share)
    assert f"the closest, {worst.name!r}, uses {worst.share:.3g} of its bound" in line
    planted_second = dict(second)
    planted_second["dense3"] = second["dense3"] + np.float32(0.5) * (np.arange(256) == 7).astype(np.float32)
    report = find_divergence(first, planted_second, fan_ins, kinds={name: "dense" for name in first})
    assert report.first.name == "dense3" and report.first.differing == int((second["dense3"][:, 7] >= 0).size)
    text = "\n".join(report.lines())
    assert f"{report.first.differing} of {first['dense3'].size} values beyond the bound" in text
    assert report.causes[0].name == "bias" and "tables-layers-dense (tables/layers)" in text
    every = "\n".join(report.lines(every_layer=True))
    assert all(name in every for name in list(first)[:4]) and "DIVERGES" in every


def test_the_command_goes_past_the_first_divergence_and_compares_common_layers_when_asked(tmp_path):
    first, second, fan_ins = mlp_runs()
    far = dict(second, dense2=second["dense2"] * 3, dense4=second["dense4"] * 3)
    a = save_activations(tmp_path / "a.npz", first, fan_ins)
    b = save_activations(tmp_path / "b.npz", far, fan_ins)
    done = run_command(a, b, "--keep-going")
    assert done.returncode == 1 and "later layers beyond their bounds too: dense4" in done.stdout
    listed = run_command(a, b, "--all")
    assert listed.returncode == 1 and "dense2" in listed.stdout and "dense3" not in listed.stdout
    fewer = {name: array for name, array in second.items() if name != "dense1"}  # one layer not recorded
    c = save_activations(tmp_path / "c.npz", fewer, {name: fan_ins[name] for name in fewer})
    assert run_command(a, c).returncode == 2
    common = run_command(a, c, "--common")
    assert common.returncode == 0 and "left out (recorded by one run only): dense1" in common.stdout


def test_a_shape_that_changes_at_a_pool_is_a_divergence_named_by_its_rounding():
    x = rng.standard_normal((2, 4, 15, 15)).astype(np.float32)
    ceil = {"conv": x, "pool": np.zeros((2, 4, 8, 8), np.float32)}
    floor = {"conv": x, "pool": np.zeros((2, 4, 7, 7), np.float32)}
    report = find_divergence(ceil, floor, {"conv": 27, "pool": 1}, kinds={"conv": "conv", "pool": "pool"})
    assert report.first.name == "pool" and report.causes[0].name == "pooling"
    assert "shape (2, 4, 8, 8) in the first run, (2, 4, 7, 7) in the second" in "\n".join(report.lines())


@pytest.mark.legacy
def test_an_mxnet_ndarray_and_a_chainer_variable_are_saved_as_their_numbers(tmp_path):
    if not hasattr(np, "bool"):  # numpy 1.26, MXNet 1.9's: the old alias it reads (numpy 2 has its own np.bool)
        np.bool = bool
    mx = pytest.importorskip("mxnet")
    from rosetta_utils.frameworks import _use_stdlib_distutils

    _use_stdlib_distutils()
    chainer = pytest.importorskip("chainer")
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = save_activations(tmp_path / "legacy.npz", {"gluon": mx.nd.array(values),
                                                      "chainer": chainer.Variable(values * 2)})
    run = load_activations(path)
    assert np.array_equal(run.outputs["gluon"], values) and np.array_equal(run.outputs["chainer"], values * 2)
