"""The checkpoint converter, ``python -m rosetta_utils.checkpoints``: what it checks and refuses.

The chapter on moving models runs the command on every framework's own format for the
three models (its round trips, ``tests/test_page_moving_models.py``); here, at tiny
sizes and without frameworks where none is needed: the layouts it converts between, a
checkpoint of another model or another GRU variant refused with every mismatched name and
shape listed and nothing written, unknown models and formats named with the valid ones,
and the command line itself. Keras's and Flax's GRU go through rosetta_utils.gru in a
layer of their own; those tests run where Keras and Flax import.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import IN_PROCESS
from rosetta_utils.checkpoints import CheckpointError, canonical_names, convert, mismatches, write_canonical
from rosetta_utils.checkpoints.formats import read, write
from rosetta_utils.checkpoints.layouts import FRAMEWORKS, from_canonical, keras_groups, layout, to_canonical
from rosetta_utils.resnet50_layout import resnet50_weight_shapes

NUMPY_FORMATS = ["chainer"]  # formats written and read with numpy alone


def cifar10_arrays(seed=0, channels=(4, 5, 6, 7), grid=2, hidden=8, classes=3):
    """A CIFAR-10 network of tiny sizes in canonical names and layouts."""
    rng = np.random.default_rng(seed)
    arrays, previous = {}, 3
    for index, out in enumerate(channels, start=1):
        arrays[f"conv{index}.weight"] = rng.standard_normal((out, previous, 3, 3)).astype(np.float32)
        arrays[f"conv{index}.bias"] = rng.standard_normal(out).astype(np.float32)
        previous = out
    arrays["fc1.weight"] = rng.standard_normal((hidden, previous * grid * grid)).astype(np.float32)
    arrays["fc1.bias"] = rng.standard_normal(hidden).astype(np.float32)
    arrays["fc2.weight"] = rng.standard_normal((classes, hidden)).astype(np.float32)
    arrays["fc2.bias"] = rng.standard_normal(classes).astype(np.float32)
    return arrays


def imdb_arrays(seed=0, vocabulary=11, embedding=4, hidden=3, classes=2):
    rng = np.random.default_rng(seed)

    def uniform(*shape):
        return rng.uniform(-0.5, 0.5, shape).astype(np.float32)

    return {"embedding.weight": uniform(vocabulary, embedding), "gru.weight_ih_l0": uniform(3 * hidden, embedding),
            "gru.weight_hh_l0": uniform(3 * hidden, hidden), "gru.bias_ih_l0": uniform(3 * hidden),
            "gru.bias_hh_l0": uniform(3 * hidden), "dense.weight": uniform(classes, hidden),
            "dense.bias": uniform(classes)}


def resnet50_arrays(seed=0):
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(0.5, 1.5, shape).astype(np.float32)
            for name, shape in resnet50_weight_shapes().items()}


MODELS = {"cifar10": cifar10_arrays, "imdb": imdb_arrays, "resnet50": resnet50_arrays}


def no_leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


# --- the models' names and shapes ---------------------------------------------------------


@pytest.mark.parametrize("model", list(MODELS))
def test_a_models_own_arrays_fit_it_at_any_size(model):
    assert mismatches(model, MODELS[model]()) == []
    assert list(MODELS[model]()) == canonical_names(model) or model == "resnet50"


def test_shapes_must_fit_together_each_layer_reading_the_previous_ones_outputs():
    arrays = cifar10_arrays()
    arrays["conv3.weight"] = arrays["conv3.weight"][:, :4]  # reads 4 channels, conv2 gives 5
    arrays["fc1.weight"] = arrays["fc1.weight"][:, :27]  # 27 inputs: no square grid of conv4's 7 channels
    problems = mismatches("cifar10", arrays)
    assert "conv3.weight is (6, 4, 3, 3), expected (6, 5, 3, 3)" in problems
    assert "fc1.weight is (8, 27), expected (8, 7·s·s)" in problems


def test_a_swapped_or_transposed_array_that_changes_a_shape_is_named():
    arrays = imdb_arrays()
    arrays["dense.weight"] = arrays["dense.weight"].T.copy()  # (in, out) where (out, in) belongs
    arrays["gru.weight_ih_l0"] = arrays["gru.weight_ih_l0"][:6]  # two gates only
    problems = mismatches("imdb", arrays)
    assert "dense.weight is (3, 2), expected (2, 3)" in problems
    assert "gru.weight_ih_l0 is (6, 4), expected (9, 4)" in problems
    arrays = imdb_arrays()
    arrays["dense.bias"] = arrays["dense.bias"].astype(np.float64)
    assert mismatches("imdb", arrays) == ["dense.bias is float64, expected float32"]


# --- the layouts, both ways, every framework ---------------------------------------------


def _layout_round_trip(model, framework, arrays):
    native = from_canonical(model, framework, arrays)
    back = to_canonical(model, framework, native.arrays)
    assert back.problems == []
    return native, back


@pytest.mark.parametrize("framework", ["pytorch", "mxnet", "chainer"])
@pytest.mark.parametrize("model", list(MODELS))
def test_each_layout_without_a_framework_round_trips_exactly(model, framework):
    arrays = MODELS[model]()
    native, back = _layout_round_trip(model, framework, arrays)
    assert set(back.arrays) == set(arrays)
    for name in arrays:
        assert back.arrays[name].tobytes() == arrays[name].tobytes(), name


def test_the_flatten_order_and_kernel_layouts_are_what_keras_and_flax_keep():
    arrays = cifar10_arrays()
    native = from_canonical("cifar10", "jax", arrays).arrays
    assert native["conv2/kernel"].shape == (3, 3, 4, 5)  # HWIO
    assert native["conv2/kernel"][1, 2, 3, 4] == arrays["conv2.weight"][4, 3, 1, 2]
    # fc1 reads conv4's 7 channels on a 2x2 grid: NHWC input (row, column, channel) = NCHW (channel, row, column)
    row, column, channel, out = 1, 0, 5, 6
    assert native["fc1/kernel"][(row * 2 + column) * 7 + channel, out] == arrays["fc1.weight"][out, channel * 4 + row * 2 + column]
    assert to_canonical("cifar10", "jax", native).arrays["fc1.weight"].tobytes() == arrays["fc1.weight"].tobytes()


def test_resnet50_convolution_biases_fold_into_the_running_mean():
    arrays = resnet50_arrays()
    native = from_canonical("resnet50", "tensorflow", arrays).arrays
    assert not np.any(native["conv2_block1_1_conv/1"])  # written as zeros
    native["conv2_block1_1_conv/1"] = np.full(64, 0.25, np.float32)
    back = to_canonical("resnet50", "tensorflow", native)
    assert back.problems == []
    np.testing.assert_allclose(back.arrays["layer1.0.bn1.running_mean"], arrays["layer1.0.bn1.running_mean"] - 0.25)
    assert any("folded into layer1.0.bn1.running_mean" in note for note in back.notes)


def test_chainers_classifier_and_counters_are_left_out_and_written_as_zeros():
    native = from_canonical("resnet50", "chainer", resnet50_arrays())
    assert native.arrays["fc6/W"].shape == (1000, 2048) and not np.any(native.arrays["fc6/W"])
    assert native.arrays["res2/a/bn1/N"].dtype == np.int64
    back = to_canonical("resnet50", "chainer", native.arrays)
    assert "fc6/W" not in back.arrays and any("left out" in note for note in back.notes)


def test_keras_groups_follow_keras_order_of_layers_of_each_class():
    groups = keras_groups("cifar10", ["conv1", "conv4", "fc2"])
    assert groups["conv1"] == "layers/conv2d/vars" and groups["conv4"] == "layers/conv2d_3/vars"
    assert groups["fc2"] == "layers/dense_1/vars"
    assert keras_groups("imdb", ["gru"])["gru"] == "layers/gru/cell/vars"
    resnet = keras_groups("resnet50", ["conv2_block1_0_conv", "conv2_block1_3_conv", "conv2_block2_1_bn"])
    # a block's shortcut comes after its second convolution in Keras's functional model
    assert resnet["conv2_block1_0_conv"] == "layers/conv2d_3/vars"
    assert resnet["conv2_block1_3_conv"] == "layers/conv2d_4/vars"
    assert resnet["conv2_block2_1_bn"] == "layers/batch_normalization_5/vars"


# --- files, and what is refused -----------------------------------------------------------


@pytest.mark.parametrize("model", list(MODELS))
def test_canonical_and_chainer_files_round_trip_bit_for_bit(model, tmp_path):
    arrays = MODELS[model]()
    write_canonical(model, arrays, tmp_path / "a.npz", "canonical")
    convert(model, tmp_path / "a.npz", "canonical", tmp_path / "b.npz", "chainer")
    done = convert(model, tmp_path / "b.npz", "chainer", tmp_path / "c.npz", "canonical")
    for name in arrays:
        assert done.canonical[name].tobytes() == arrays[name].tobytes(), name
    read_back, named = read("canonical", tmp_path / "c.npz")
    assert named == model and set(read_back) == set(arrays)


@pytest.mark.parametrize("model", list(MODELS))
def test_safetensors_files_hold_pytorchs_state_dict_names_and_round_trip_bit_for_bit(model, tmp_path):
    """A .safetensors file of the canonical arrays keeps PyTorch's state-dict names, layouts and
    dtypes (ResNet-50's num_batches_tracked as int64), and comes back bit for bit."""
    from safetensors.numpy import load_file

    arrays = MODELS[model]()
    write_canonical(model, arrays, tmp_path / "a.npz", "canonical")
    convert(model, tmp_path / "a.npz", "canonical", tmp_path / "m.safetensors", "safetensors")
    stored = load_file(str(tmp_path / "m.safetensors"))
    assert set(stored) == set(from_canonical(model, "pytorch", arrays).arrays)  # PyTorch's names
    if model == "resnet50":
        assert stored["bn1.num_batches_tracked"].dtype == np.int64
    done = convert(model, tmp_path / "m.safetensors", "safetensors", tmp_path / "b.npz", "canonical")
    for name in arrays:
        assert done.canonical[name].tobytes() == arrays[name].tobytes(), name


def test_a_safetensors_file_with_a_transposed_kernel_or_not_safetensors_is_refused(tmp_path):
    from safetensors.numpy import save_file

    write_canonical("imdb", imdb_arrays(), tmp_path / "imdb.safetensors", "safetensors")
    before = no_leftovers(tmp_path)
    transposed = from_canonical("cifar10", "pytorch", cifar10_arrays()).arrays
    transposed["fc1.weight"] = np.ascontiguousarray(transposed["fc1.weight"].T)
    save_file(transposed, str(tmp_path / "t.safetensors"))
    with pytest.raises(CheckpointError, match="fc1.weight is"):
        convert("cifar10", tmp_path / "t.safetensors", "safetensors", tmp_path / "out.pt", "pytorch")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="junk.safetensors cannot be read as a safetensors checkpoint"):
        convert("imdb", tmp_path / "junk.safetensors", "safetensors", tmp_path / "out.npz", "canonical")
    with pytest.raises(CheckpointError, match=r"a safetensors checkpoint's name ends in \.safetensors"):
        convert("imdb", tmp_path / "imdb.safetensors", "safetensors", tmp_path / "x.st", "safetensors")
    assert no_leftovers(tmp_path) == before + ["junk.safetensors", "t.safetensors"]


@pytest.mark.skipif("pytorch" not in IN_PROCESS, reason="PyTorch is not installed in this environment")
def test_pytorch_loads_a_safetensors_file_the_command_wrote_into_its_own_model(tmp_path):
    """strict load_state_dict: every name and shape is the state dict's own."""
    import torch
    from safetensors.torch import load_file

    model = torch.nn.GRU(4, 3, batch_first=True)
    arrays = {f"gru.{key}": value.detach().numpy() for key, value in model.state_dict().items()}
    arrays |= {"embedding.weight": np.ones((11, 4), np.float32), "dense.weight": np.ones((2, 3), np.float32),
               "dense.bias": np.zeros(2, np.float32)}
    write_canonical("imdb", arrays, tmp_path / "m.safetensors", "safetensors")
    loaded = load_file(str(tmp_path / "m.safetensors"))
    model.load_state_dict({key[4:]: value for key, value in loaded.items() if key.startswith("gru.")}, strict=True)
    assert all(np.array_equal(loaded[name].numpy(), arrays[name]) for name in arrays)


@pytest.mark.parametrize("format_name, suffix, missing, unexpected", [
    ("chainer", ".npz", "conv1/W", "embedding/W (11, 4)"),
    ("safetensors", ".safetensors", "conv1.weight", "embedding.weight (11, 4)"),
])
def test_a_checkpoint_of_another_model_is_refused_listing_names_and_shapes_and_nothing_is_written(
        tmp_path, format_name, suffix, missing, unexpected):
    write_canonical("imdb", imdb_arrays(), tmp_path / f"imdb{suffix}", format_name)
    before = no_leftovers(tmp_path)
    with pytest.raises(CheckpointError) as refused:
        convert("cifar10", tmp_path / f"imdb{suffix}", format_name, tmp_path / "out.npz", "canonical")
    message = str(refused.value)
    assert "is not the cifar10 model" in message and "nothing was written" in message
    assert f"missing {missing}" in message and f"unexpected {unexpected}" in message
    assert no_leftovers(tmp_path) == before  # no target, no temporary file


def test_a_canonical_file_of_another_model_is_refused(tmp_path):
    write_canonical("cifar10", cifar10_arrays(), tmp_path / "c.npz", "canonical")
    with pytest.raises(CheckpointError, match="holds the cifar10 model, not imdb"):
        convert("imdb", tmp_path / "c.npz", "canonical", tmp_path / "x.npz", "chainer")
    assert not (tmp_path / "x.npz").exists()


def test_another_gru_variant_is_refused_by_the_array_that_gives_it_away(tmp_path):
    """Chainer's L.GRU (StatelessGRU: W_r, W_z, W, U_r, U_z, U) is the other GRU: its names differ."""
    arrays = imdb_arrays()
    native = from_canonical("imdb", "chainer", arrays).arrays
    stateless = {key: value for key, value in native.items() if not key.startswith("gru/")}
    for link in ("W_r", "W_z", "W", "U_r", "U_z", "U"):
        stateless[f"gru/{link}/W"] = np.zeros((3, 3), np.float32)
    path = tmp_path / "stateless.npz"
    np.savez(path, **stateless)
    with pytest.raises(CheckpointError) as refused:
        convert("imdb", path, "chainer", tmp_path / "out.npz", "canonical")
    assert "missing gru/0/w0" in str(refused.value) and "unexpected gru/W_r/W (3, 3)" in str(refused.value)
    assert not (tmp_path / "out.npz").exists()


def test_keras_reset_after_false_is_named_as_the_other_variant_before_keras_is_needed():
    native = {"embedding/0": np.zeros((11, 4), np.float32), "gru/0": np.zeros((4, 9), np.float32),
              "gru/1": np.zeros((3, 9), np.float32), "gru/2": np.zeros(9, np.float32),
              "dense/0": np.zeros((3, 2), np.float32), "dense/1": np.zeros(2, np.float32)}
    problems = to_canonical("imdb", "tensorflow", native).problems
    assert problems == ["gru/2 is (9,), expected (2, 9): a GRU with reset_after=False, the other GRU variant "
                        "(reset before), which the model's GRU is not"]


def test_a_kernel_kept_in_the_wrong_layout_is_refused():
    """A Keras convolution kernel saved (out, in, h, w), as PyTorch keeps it, reads as the wrong shape."""
    native = from_canonical("cifar10", "tensorflow", cifar10_arrays()).arrays
    native["conv2/0"] = np.ascontiguousarray(native["conv2/0"].transpose(3, 2, 0, 1))
    converted = to_canonical("cifar10", "tensorflow", native)
    assert any(problem.startswith("conv2.weight is (3, 3, 5, 4), expected (5, 4, ")
               for problem in mismatches("cifar10", converted.arrays))


def test_unknown_models_and_formats_are_errors_listing_the_valid_ones(tmp_path):
    write_canonical("imdb", imdb_arrays(), tmp_path / "a.npz", "canonical")
    with pytest.raises(CheckpointError, match="unknown model 'vgg': the models are cifar10, imdb, resnet50"):
        convert("vgg", tmp_path / "a.npz", "canonical", tmp_path / "b.npz", "chainer")
    with pytest.raises(CheckpointError, match="unknown format 'keras': the formats are pytorch, tensorflow, jax, "
                                              "mxnet, chainer, safetensors, canonical"):
        convert("imdb", tmp_path / "a.npz", "canonical", tmp_path / "b.npz", "keras")
    with pytest.raises(CheckpointError, match="unknown framework 'keras'"):
        layout("imdb", "keras")
    assert not (tmp_path / "b.npz").exists()


def test_an_existing_target_is_kept_unless_overwrite_and_a_wrong_suffix_is_named(tmp_path):
    write_canonical("imdb", imdb_arrays(), tmp_path / "a.npz", "canonical")
    (tmp_path / "b.npz").write_bytes(b"keep me")
    with pytest.raises(CheckpointError, match="exists: pass overwrite=True"):
        convert("imdb", tmp_path / "a.npz", "canonical", tmp_path / "b.npz", "chainer")
    assert (tmp_path / "b.npz").read_bytes() == b"keep me"
    convert("imdb", tmp_path / "a.npz", "canonical", tmp_path / "b.npz", "chainer", overwrite=True)
    assert read("chainer", tmp_path / "b.npz")[0]["gru/0/w0"].shape == (3, 4)
    with pytest.raises(CheckpointError, match=r"a tensorflow checkpoint's name ends in \.weights\.h5"):
        convert("imdb", tmp_path / "a.npz", "canonical", tmp_path / "model.h5", "tensorflow")


def test_a_file_that_is_not_its_format_is_an_error_naming_it(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"not an archive")
    with pytest.raises(CheckpointError, match="junk.npz cannot be read as a chainer checkpoint"):
        convert("imdb", tmp_path / "junk.npz", "chainer", tmp_path / "x.npz", "canonical")


def test_a_format_whose_framework_is_elsewhere_says_where_to_convert():
    missing = [name for name in ("mxnet", "torch") if not _importable(name)]
    if not missing:
        pytest.skip("both MXNet and PyTorch import here")
    format_name = "mxnet" if "mxnet" in missing else "pytorch"
    with pytest.raises(CheckpointError, match=f"the {format_name} format needs .*Convert to the canonical format here"):
        write(format_name, Path("/nonexistent/x") / ("m.params" if format_name == "mxnet" else "m.pt"), {}, "imdb")


def _importable(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_the_command_line_converts_refuses_and_lists_choices(tmp_path):
    write_canonical("imdb", imdb_arrays(), tmp_path / "a.npz", "canonical")
    command = [sys.executable, "-m", "rosetta_utils.checkpoints"]
    done = subprocess.run(command + ["imdb", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"), "--from", "canonical",
                                     "--to", "chainer"], capture_output=True, text=True)
    assert done.returncode == 0 and "wrote" in done.stdout and "the imdb model, 7 arrays" in done.stdout
    done = subprocess.run(command + ["cifar10", str(tmp_path / "b.npz"), str(tmp_path / "c.npz"), "--from",
                                     "chainer", "--to", "canonical"], capture_output=True, text=True)
    assert done.returncode == 1 and "is not the cifar10 model" in done.stderr and "missing conv1/W" in done.stderr
    assert not (tmp_path / "c.npz").exists()
    done = subprocess.run(command + ["imdb", "a", "b", "--from", "keras", "--to", "chainer"], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "invalid choice: 'keras'" in done.stderr and "'canonical'" in done.stderr


# --- the GRU of Keras and Flax, through rosetta_utils.gru ---------------------------------------


@pytest.mark.parametrize("framework", [name for name in ("tensorflow", "jax") if name in IN_PROCESS])
def test_keras_and_flax_grus_round_trip_and_compute_pytorchs_gru(framework):
    arrays = imdb_arrays()
    native, back = _layout_round_trip("imdb", framework, arrays)
    for name in arrays:
        np.testing.assert_array_equal(back.arrays[name], arrays[name], err_msg=name)
    if framework == "tensorflow":  # gates z, r, h in column blocks; biases in two rows
        kernel = native.arrays["gru/0"]
        np.testing.assert_array_equal(kernel[:, :3], arrays["gru.weight_ih_l0"][3:6].T)  # z
        assert native.arrays["gru/2"].shape == (2, 9)
    swapped = dict(native.arrays)
    key = "gru/0" if framework == "tensorflow" else "gru/cell/dense_i/kernel"
    swapped[key] = np.concatenate([swapped[key][:, 3:6], swapped[key][:, :3], swapped[key][:, 6:]], axis=1)
    moved = to_canonical("imdb", framework, swapped).arrays["gru.weight_ih_l0"]
    assert not np.array_equal(moved, arrays["gru.weight_ih_l0"])  # a swapped gate does not come back


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_framework_has_a_layout_for_every_model(framework):
    for model in MODELS:
        moves = layout(model, framework)
        names = {name for move in moves for name in move.canonical if move.kind != "fold"}
        assert names == set(canonical_names(model)), (model, framework)


def test_an_nnx_gru_cell_without_its_recurrent_bias_is_the_other_variant_and_refused():
    """flax.nnx's own GRUCell has no b_hn (no bias in dense_h): not the model's GRU."""
    native = from_canonical("imdb", "jax", imdb_arrays()).arrays
    del native["gru/cell/dense_h/bias"]
    assert to_canonical("imdb", "jax", native).problems == ["missing gru/cell/dense_h/bias"]


def test_a_keras_file_holds_each_layers_variables_in_its_group_with_its_name(tmp_path):
    h5py = pytest.importorskip("h5py")
    arrays = imdb_arrays()
    if not _importable("keras"):
        pytest.skip("Keras converts the GRU's gates")
    write_canonical("imdb", arrays, tmp_path / "m.weights.h5", "tensorflow")
    with h5py.File(tmp_path / "m.weights.h5", "r") as file:
        assert file["layers/embedding/vars"].attrs["name"] == "embedding"
        assert file["layers/gru/vars"].attrs["name"] == "gru"
        assert file["layers/gru/cell/vars/2"].shape == (2, 9)
        assert file["layers/dense/vars/0"].shape == (3, 2)  # (in, out)
    native, _ = read("tensorflow", tmp_path / "m.weights.h5")
    assert sorted(native) == ["dense/0", "dense/1", "embedding/0", "gru/0", "gru/1", "gru/2"]


def test_an_array_the_model_has_not_is_named_unexpected():
    arrays = dict(imdb_arrays(), **{"extra.weight": np.zeros(2, np.float32)})
    assert mismatches("imdb", arrays) == ["unexpected extra.weight (2,)"]
