"""The chapter on finding where a port goes wrong: every framework's recordings of the book's
three models agree pair by pair, every planted trap is found at its layer with its cause,
and a wrong recording or a trap the command misses stops the page.

The parts come from the build's cache where `make test` built the page (conftest's
parts_as_built); each test that feeds the comparisons a changed result expects the page's
gate to stop them, naming the pair or the trap.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import AVAILABLE, assert_a_failed_proof_stops_the_page, comparisons_as_built, parts_as_built

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


def test_every_part_recorded_the_same_arrays_in_the_same_order(runs):
    first = runs[AVAILABLE[0]]
    for framework, run in runs.items():
        assert run["stand_in_digests"] == first["stand_in_digests"], framework
        for name in MODELS:
            recorded, expected = run["captured"][name], first["captured"][name]
            assert list(recorded) == list(expected), (framework, name)
            assert all(recorded[k].shape == expected[k].shape for k in recorded), (framework, name)
    # every model carries its weights' gradients after its outputs, last layer first
    cifar = list(first["captured"]["cifar10"])
    assert cifar[:6] == ["conv1", "conv2", "conv3", "conv4", "fc1", "fc2"]
    assert cifar[6:8] == ["fc2.bias.grad", "fc2.weight.grad"] and cifar[-1] == "conv1.weight.grad"
    assert list(first["captured"]["imdb"])[:2] == ["gru", "dense"]
    resnet = list(first["captured"]["resnet50"])
    assert resnet[:2] == ["bn1", "layer1.0"] and resnet[17] == "layer4.2.bn3.bias.grad"
    assert resnet[-1] == "conv1.weight.grad" and not any("running_" in name for name in resnet)


def test_a_layer_off_by_more_than_its_bound_in_one_framework_stops_the_page(runs):
    """conv3's outputs moved by 1e-4 of their largest value in a framework the command's
    cell does not read (neither the first nor the last): above float32's bound at that
    layer, so every pair with that framework diverges at conv3."""
    if len(AVAILABLE) < 3:
        pytest.skip("needs a framework between the first and the last")
    framework = AVAILABLE[1]
    captured = {name: dict(arrays) for name, arrays in runs[framework]["captured"].items()}
    conv3 = captured["cifar10"]["conv3"]
    captured["cifar10"]["conv3"] = conv3 + np.float32(1e-4 * np.abs(conv3).max())
    message = assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"captured": captured},
                                                   r"DIFFERS \(at conv3\)", failing="cifar10: ")
    assert "no divergence between correct ports" in message


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
