"""The chapter on finding where a port goes wrong: every framework's recordings of the book's
three models (outputs, then gradients) agree pair by pair, the layers' gradients on the
probes both runs decide alike, every planted trap is found at its layer with its cause,
and a wrong recording or a trap the command misses stops the page.

The parts come from the build's cache where `make test` built the page (conftest's
parts_as_built); each test that feeds the comparisons a changed result expects the page's
gate to stop them, naming the pair or the trap.
"""

import re
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE
from page_checks import assert_a_failed_proof_stops_the_page, comparisons_as_built, parts_as_built

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "finding_divergence.md"
MODELS = ("cifar10", "imdb", "resnet50")
TRAPS_PROMISED = 12  # issue 36: at least twelve different traps


@pytest.fixture(scope="module")
def runs():
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(runs):
    yield from comparisons_as_built(PAGE, runs)


def test_every_directed_pair_of_every_model_agrees(comparison):
    n = len(AVAILABLE)
    verdicts = comparison["pair_verdicts"]
    assert len(verdicts) == len(MODELS) * n * (n - 1)
    assert set(verdicts.values()) == {"agrees"}, {k: v for k, v in verdicts.items() if v != "agrees"}


def test_every_planted_trap_is_found_at_its_layer_with_its_cause(comparison):
    traps = comparison["TRAPS"]
    assert len(traps) >= TRAPS_PROMISED and {model for model, _, _ in traps.values()} == set(MODELS)
    at_layer, named = comparison["at_layer"], comparison["named"]
    # each trap in every framework that ports PyTorch's model, and in PyTorch as a port of Keras's
    ports = [fw for fw in AVAILABLE if ("tensorflow" if fw == "pytorch" else "pytorch") in AVAILABLE]
    assert len(at_layer) == len(traps) * len(ports)
    assert set(at_layer.values()) <= {"agrees"}, {k: v for k, v in at_layer.items() if v != "agrees"}
    assert sum(named.values()) >= 0.9 * len(named)
    # a trap that shows only after a step is found at the step's first array, the optimiser named first
    training = [row for row in comparison["trap_rows"] if row[0] == "SGD without its momentum"]
    assert len(training) == len(ports)
    assert all(row[2] == "step2/embedding.weight.update" and row[4].startswith("optimiser") for row in training)


def test_every_part_recorded_the_same_arrays_in_the_same_order(runs):
    first = runs[AVAILABLE[0]]
    for framework, run in runs.items():
        assert run["stand_in_digests"] == first["stand_in_digests"], framework
        for name in MODELS:
            recorded, expected = run["captured"][name], first["captured"][name]
            assert list(recorded) == list(expected), (framework, name)
            assert all(recorded[k].shape == expected[k].shape for k in recorded), (framework, name)
    # every model carries its weights' gradients after its outputs, last layer first
    # (the CIFAR-10 network's and the GRU's after the gradients of their layers' outputs)
    cifar = list(first["captured"]["cifar10"])
    layers = ["conv1", "conv2", "conv3", "conv4", "fc1", "fc2"]
    assert cifar[:12] == layers + [f"{layer}.output.grad" for layer in reversed(layers)]
    assert cifar[12:14] == ["fc2.bias.grad", "fc2.weight.grad"] and cifar[-1] == "conv1.weight.grad"
    imdb = list(first["captured"]["imdb"])
    assert imdb[:5] == ["gru", "dense", "dense.output.grad", "gru.output.grad", "dense.bias.grad"]
    # and the GRU classifier's SGD steps, each step's change of every weight, the first step first
    assert imdb[-1] == "step2/dense.bias.update" and imdb.index("step1/embedding.weight.update") == 11
    resnet = list(first["captured"]["resnet50"])
    assert resnet[:2] == ["bn1", "layer1.0"] and resnet[17] == "layer4.2.bn3.bias.grad"
    assert resnet[-1] == "conv1.weight.grad" and not any("running_" in name for name in resnet)


@pytest.mark.parametrize("layer, share", [("conv3", 3e-4), ("conv3.output.grad", 3e-2)])
def test_an_array_off_by_more_than_its_bound_in_one_framework_stops_the_page(runs, layer, share):
    """conv3's outputs scaled by 1 + 3e-4, or its output's gradient by 1 + 3e-2, on every
    probe (after the whole forward pass and conv4's gradient, its bound is wider), in a
    framework the command's cell does not read (neither the first nor the last): above
    float32's bound there (twice one run's error, and an ulp), so every pair with that
    framework diverges at that array. A scale keeps every ReLU's sign and every pool's
    choice, so no probe leaves the comparison for a decision taken otherwise."""
    if len(AVAILABLE) < 3:
        pytest.skip("needs a framework between the first and the last")
    framework = AVAILABLE[1]
    captured = {name: dict(arrays) for name, arrays in runs[framework]["captured"].items()}
    array = captured["cifar10"][layer]
    captured["cifar10"][layer] = array * np.float32(1 + share)
    message = assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"captured": captured},
                                                   rf"DIFFERS \(at {re.escape(layer)}\)", failing="cifar10: ")
    assert "no divergence between correct ports" in message


def test_only_probes_whose_decisions_differ_are_left_out_of_the_layer_gradients(runs, comparison):
    """The page's own decided_alike on a recording against a copy of it changed in two
    probes: a ReLU's input across 0 in one, a max pool's window tied in another. Those two
    are left out, with the probes a tie leaves out of the recording against itself (its
    own equal largest values, which each framework's rule breaks its own way), and no
    other."""
    def decided_alike(a, b):
        return comparison["decided_alike"](a, b, comparison["CIFAR_RELUS"], comparison["CIFAR_POOLS"])

    a = {layer: np.array(array) for layer, array in runs[AVAILABLE[0]]["captured"]["cifar10"].items()}
    itself = decided_alike(a, a)
    assert itself.sum() >= 2, "the probes need two without a tie of their own"
    sign, tie = np.flatnonzero(itself)[:2]
    b = {layer: array.copy() for layer, array in a.items()}
    b["conv3"][sign, 7, 2, 2] = -b["conv3"][sign, 7, 2, 2]  # a sign the ReLU decides on
    conv4 = b["conv4"][tie]  # a window of positive values, each set to its largest: a tie
    c, i, j = next((c, i, j) for c in range(len(conv4)) for i in range(0, conv4.shape[1], 2)
                   for j in range(0, conv4.shape[2], 2) if (conv4[c, i:i + 2, j:j + 2] > 0).all())
    conv4[c, i:i + 2, j:j + 2] = conv4[c, i:i + 2, j:j + 2].max()
    expected = itself.copy()
    expected[[sign, tie]] = False
    assert (decided_alike(a, b) == expected).all()


def test_a_trap_the_command_would_miss_stops_the_page(runs):
    """A planted recording replaced by the framework's correct one: the command finds no
    divergence, and the page stops, naming the trap the command missed."""
    if "pytorch" not in AVAILABLE or len(AVAILABLE) < 2:
        pytest.skip("the traps are planted in ports of PyTorch's models")
    framework = AVAILABLE[-1]
    planted = dict(runs[framework]["planted"])
    correct = runs[framework]["captured"]["imdb"]
    planted["GRU gates r and z swapped"] = {layer: correct[layer] for layer in ("gru", "dense")}
    message = assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"planted": planted},
                                                   r"DIFFERS \(at none\)", failing="GRU gates r and z swapped")
    assert "every planted trap found at its layer" in message
