"""The variable-length page's claims, checked through the code it shows (the chapter loader).

Each framework's page runs up to its Timing section in the smoke profile,
offline. The tests then call each framework's ``make_bigru``,
``run_bigru`` and ``mean_gradients`` on a batch of their own (another seed,
other lengths, other sizes, garbage padding, non-zero biases) and compare it
with the same framework running every sequence alone, and with PyTorch.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import run_page_offline
from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import is_installed
from rosetta_utils.gru import random_gru_weights

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "variable_length_sequences.md"
INSTALLED = [name for name in FRAMEWORKS if is_installed(name)]

LENGTHS = [3, 7, 1, 6, 2]  # unsorted, longest not first, a length-1 row
STEPS, INPUT_SIZE, HIDDEN_SIZE = 7, 5, 3
QUANTITIES = ("outputs", "last forward", "last backward", "mean")


def make_test_batch():
    rng = np.random.default_rng(99)
    x = rng.standard_normal((len(LENGTHS), STEPS, INPUT_SIZE)).astype(np.float32)
    valid = np.arange(STEPS)[None, :] < np.array(LENGTHS)[:, None]
    x[~valid] = rng.uniform(-20, 20, x[~valid].shape)  # garbage, never zeros
    weights = random_gru_weights(INPUT_SIZE, HIDDEN_SIZE, bidirectional=True, seed=1234)
    for direction in ("forward", "backward"):
        for name in ("bias_ih", "bias_hh"):
            assert np.abs(weights[direction][name]).min() > 0, "the test needs non-zero biases"
    projection = rng.standard_normal((len(LENGTHS), 2 * HIDDEN_SIZE)).astype(np.float32)
    return x, valid, weights, projection


X, VALID, WEIGHTS, PROJECTION = make_test_batch()


@pytest.fixture(scope="module")
def runs():
    names = ("make_bigru", "run_bigru", "mean_gradients", "results", "alone_errors", "trap_errors",
             "equivalence_rows", "LENGTHS")
    kept = run_page_offline(PAGE, INSTALLED, names, until="Timing")
    for framework, run in kept.items():  # the test's own batch, through the page's functions
        model = run["make_bigru"](INPUT_SIZE, HIDDEN_SIZE, WEIGHTS["forward"], WEIGHTS["backward"])
        run["batch"] = dict(zip(QUANTITIES, run["run_bigru"](model, X.copy(), LENGTHS)))
        run["batch"]["x gradient"], run["batch"]["weight gradients"] = run["mean_gradients"](
            model, X.copy(), LENGTHS, PROJECTION)
        run["alone"] = run_each_alone(run, model)
    return kept


def run_each_alone(run, model):
    """Every sequence as a batch of one, unpadded: the reference."""
    alone = {name: [] for name in (*QUANTITIES, "x gradient", "weight gradients")}
    for row, length in enumerate(LENGTHS):
        single = X[row : row + 1, :length].copy()
        for name, value in zip(QUANTITIES, run["run_bigru"](model, single, [length])):
            alone[name].append(value[0])
        x_gradient, weight_gradients = run["mean_gradients"](model, single, [length], PROJECTION[row : row + 1])
        alone["x gradient"].append(x_gradient[0])
        alone["weight gradients"].append(weight_gradients)
    return alone


def weight_sum(gradients):
    return {direction: {name: sum(g[direction][name] for g in gradients) for name in gradients[0][direction]}
            for direction in ("forward", "backward")}


def max_weight_difference(a, b):
    return max(float(np.max(np.abs(a[d][n] - b[d][n]))) for d in ("forward", "backward") for n in a[d])


@pytest.mark.parametrize("framework", INSTALLED)
def test_the_batch_equals_each_sequence_alone(runs, framework):
    batch, alone = runs[framework]["batch"], runs[framework]["alone"]
    assert batch["outputs"].shape == (len(LENGTHS), STEPS, 2 * HIDDEN_SIZE)
    for row, length in enumerate(LENGTHS):
        assert np.max(np.abs(batch["outputs"][row, :length] - alone["outputs"][row])) <= 1e-5
        for name in ("last forward", "last backward", "mean"):
            assert np.max(np.abs(batch[name][row] - alone[name][row])) <= 1e-5, name
    assert np.all(batch["outputs"][~VALID] == 0.0), "outputs at padded steps must be exactly zero"


@pytest.mark.parametrize("framework", INSTALLED)
def test_the_last_states_are_where_each_direction_ends(runs, framework):
    """Forward: the output at step length - 1; backward: the output at step 0."""
    batch = runs[framework]["batch"]
    rows, last = np.arange(len(LENGTHS)), np.array(LENGTHS) - 1
    assert np.max(np.abs(batch["last forward"] - batch["outputs"][rows, last, :HIDDEN_SIZE])) <= 1e-6
    assert np.max(np.abs(batch["last backward"] - batch["outputs"][:, 0, HIDDEN_SIZE:])) <= 1e-6


@pytest.mark.parametrize("framework", INSTALLED)
def test_gradients_equal_each_sequence_alone_and_ignore_the_padding(runs, framework):
    batch, alone = runs[framework]["batch"], runs[framework]["alone"]
    assert batch["x gradient"].shape == X.shape
    assert np.abs(batch["x gradient"]).max() > 1e-3, "a gradient that is all zeros proves nothing"
    for row, length in enumerate(LENGTHS):
        assert np.max(np.abs(batch["x gradient"][row, :length] - alone["x gradient"][row])) <= 1e-4
    assert np.all(batch["x gradient"][~VALID] == 0.0), "the gradient w.r.t. padded steps must be exactly zero"
    summed = weight_sum(alone["weight gradients"])
    assert max_weight_difference(batch["weight gradients"], summed) <= 1e-4


@pytest.mark.parametrize("framework", INSTALLED)
def test_every_framework_agrees_with_pytorch(runs, framework):
    if "pytorch" not in runs:
        pytest.skip("PyTorch is the yardstick")
    ours, reference = runs[framework]["batch"], runs["pytorch"]["batch"]
    for name in QUANTITIES:
        assert np.max(np.abs(ours[name] - reference[name])) <= 1e-5, name
    assert np.max(np.abs(ours["x gradient"] - reference["x gradient"])) <= 1e-4
    assert max_weight_difference(ours["weight gradients"], reference["weight gradients"]) <= 1e-4


@pytest.mark.parametrize("framework", INSTALLED)
def test_the_pages_own_proof_table(runs, framework):
    errors = runs[framework]["alone_errors"][framework]
    for name in QUANTITIES:
        assert errors[name] <= 1e-5, name
    assert errors["x gradient"] <= 1e-4 and errors["weight gradients"] <= 1e-4
    assert errors["padded outputs"] == 0.0 and errors["padded x gradient"] == 0.0
    assert runs[framework]["LENGTHS"] != LENGTHS, "the test must use a batch of its own"


def test_the_pages_equivalence_table(runs):
    if "pytorch" not in runs:
        pytest.skip("PyTorch is the yardstick")
    results = {framework: runs[framework]["results"][framework] for framework in runs}
    rows = runs["pytorch"]["equivalence_rows"](results)
    assert [row[0] for row in rows] == list(runs)
    for framework, outputs, last_forward, last_backward, mean, x_gradient, weight_gradients in rows:
        assert max(outputs, last_forward, last_backward, mean) <= 1e-5, framework
        assert max(x_gradient, weight_gradients) <= 1e-4, framework


@pytest.mark.parametrize("framework", INSTALLED)
def test_the_padded_batch_without_lengths_is_wrong(runs, framework):
    """The trap every framework shares, measured on the page: large, not rounding."""
    traps = runs[framework]["trap_errors"][framework]
    padded = next(error for name, error in traps.items() if name.startswith("padded"))
    assert padded > 0.1


def test_each_frameworks_own_trap_is_real(runs):
    if "pytorch" in runs:
        traps = runs["pytorch"]["trap_errors"]["pytorch"]
        assert traps["outputs[:, -1] of the padded batch as the last state"] > 0.1
        assert traps["outputs[:, -1] of the packed batch as the last state"] > 0.1
        assert traps["outputs[b, length - 1, :H] and outputs[b, 0, H:] (right)"] <= 1e-5
    if "tensorflow" in runs:
        assert runs["tensorflow"]["trap_errors"]["tensorflow"]["plain GRU with a mask: outputs at padded steps"] > 0.1
    if "jax" in runs:
        traps = runs["jax"]["trap_errors"]["jax"]
        assert traps["nnx.Bidirectional(seq_lengths): outputs at padded steps"] > 0.1
        assert traps["plain nnx.GRUCell (no b_hn), forward outputs of the full row"] > 1e-3
    if "mxnet" in runs:
        traps = runs["mxnet"]["trap_errors"]["mxnet"]
        assert traps["GRU(use_sequence_length=True), zero biases, zero padding: outputs"] <= 1e-6, "the bug hides"
        assert traps["GRU(use_sequence_length=True), non-zero biases, garbage padding: outputs"] > 0.1, "and shows"
        assert traps["GRU(use_sequence_length=True), non-zero biases, garbage padding: last states"] > 0.1
