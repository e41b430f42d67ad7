"""The chapter on porting your own model: every framework's port, its weights moved from a
PyTorch checkpoint in one call, agrees with PyTorch's at every layer; the ports moved by
hand with the flatten's order forgotten are found at their first dense layer; a wrong
recording or a mistake the command would miss stops the page.

The parts come from the build's cache where `make test` built the page (conftest's
parts_as_built); each test that feeds the comparisons a changed result expects the page's
gate to stop them.
"""

from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE
from page_checks import assert_a_failed_proof_stops_the_page, comparisons_as_built, parts_as_built

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "porting_your_model.md"


@pytest.fixture(scope="module")
def runs():
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(runs):
    yield from comparisons_as_built(PAGE, runs)


def test_every_port_moved_in_one_call_agrees_with_pytorchs(comparison):
    verdicts = comparison["moved_verdicts"]
    assert len(verdicts) == len(AVAILABLE) - 1
    assert set(verdicts.values()) == {"agrees"}, verdicts


def test_each_pairing_names_every_layer_and_the_flatten_where_it_was_permuted(runs):
    for framework, run in runs.items():
        table = run["pairing"]
        for layer in ("conv1", "bn1", "depthwise", "pointwise", "bn2", "fc1", "fc2"):
            assert layer in table, (framework, table)
        assert "7 layers" in table and "moved" in table
        if framework in ("tensorflow", "jax"):
            assert "columns" in table.split("fc1", 1)[1].splitlines()[0], table


def test_the_ports_moved_by_hand_are_found_at_their_first_dense_layer(comparison):
    verdicts = comparison["by_hand_verdicts"]
    assert set(verdicts) == {fw for fw in ("tensorflow", "jax") if fw in AVAILABLE}
    assert set(verdicts.values()) <= {"agrees"}, verdicts


def test_a_moved_port_off_by_more_than_its_bound_stops_the_page(runs):
    framework = AVAILABLE[-1]
    recording = {**runs[framework]["recording"]}
    outputs = dict(recording["outputs"])
    outputs["fc2"] = outputs["fc2"] * np.float32(1 + 1e-3)
    recording["outputs"] = outputs
    assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"recording": recording}, r"DIFFERS \(at fc2\)",
                                         failing=f"pytorch -> {framework}")


def test_a_port_by_hand_that_the_command_would_not_stop_at_fc1_stops_the_page(runs):
    if "tensorflow" not in AVAILABLE or "pytorch" not in AVAILABLE:
        pytest.skip("needs the Keras port by hand and PyTorch's")
    by_hand = {**runs["tensorflow"]["by_hand"]}
    by_hand["outputs"] = dict(runs["pytorch"]["recording"]["outputs"])  # as if the flatten had been permuted
    assert_a_failed_proof_stops_the_page(PAGE, runs, "tensorflow", {"by_hand": by_hand}, r"DIFFERS \(at none",
                                         failing="tensorflow")
