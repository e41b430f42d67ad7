"""The GRU flavors page's claims, checked through the code it shows (the chapter loader).

Each installed framework's run of the page goes up to its Timing section
(Setup, Data, Model, Training, Evaluation, Equivalence) in the smoke profile;
the tests read what the page measured and call the page's own functions on
fresh inputs and weights.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import run_page_offline
from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import is_installed
from rosetta_utils.gru import LBR, RB, GRUConversionError, random_gru_weights, set_weights

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "gru_flavors.md"
INSTALLED = [name for name in FRAMEWORKS if is_installed(name)]
FLOAT32_EXACT = 1e-6  # what "exact" means for float32 outputs of a few steps
CLEAR_MARGIN = 1e-2  # the other family must be at least this far away
FAMILY = {"LBR": LBR, "LBR without b_hn": LBR, "RB": RB}


@pytest.fixture(scope="module")
def runs():
    """What each framework's run of the page produced, with the functions it defined."""
    return run_page_offline(PAGE, INSTALLED, (
        "KINDS", "FUSED_KIND", "CELL_KIND", "flavor_checks", "conversions", "approximations",
        "APPROXIMATION_SCALES", "round_trips", "kept_memory", "onednn_calls", "HIDDEN_STATE_BYTES",
        "chainer_checks", "make_layer", "inference_outputs", "forward_kept_bytes", "without_b_hn",
        "numpy_gru", "gru_lbr_step", "gru_rb_step", "gru_rb_z_flipped_step", "max_difference",
        "SMALL_INPUT", "SMALL_HIDDEN", "INPUT", "HIDDEN", "exported", "gate_orders",
    ))


@pytest.mark.parametrize("framework", INSTALLED)
def test_every_layer_kind_computes_the_flavor_it_claims(runs, framework):
    run = runs[framework]
    assert set(run["flavor_checks"]) == set(run["KINDS"]), "each framework's run checks exactly its own kinds"
    for name, check in run["flavor_checks"].items():
        assert check["claimed"] <= FLOAT32_EXACT, f"{name} does not compute {run['KINDS'][name]}"
        assert check["other"] >= CLEAR_MARGIN, f"{name} is not told apart from the other family"


@pytest.mark.parametrize("framework", INSTALLED)
def test_the_pages_layers_match_numpy_on_fresh_weights_and_inputs(runs, framework):
    run = runs[framework]
    inputs, hidden = run["SMALL_INPUT"], run["SMALL_HIDDEN"]
    x = np.random.default_rng(7).standard_normal((2, 4, inputs)).astype(np.float32)
    weights = random_gru_weights(inputs, hidden, seed=7, scale=0.8)
    for name, claim in run["KINDS"].items():
        claimed = {"LBR": weights, "RB": {**weights, "flavor": RB}, "LBR without b_hn": run["without_b_hn"](weights)}[claim]
        step, other = (run["gru_rb_step"], run["gru_lbr_step"]) if claim == "RB" else (run["gru_lbr_step"], run["gru_rb_step"])
        layer = set_weights(run["make_layer"](name), claimed)
        outputs = run["inference_outputs"](layer, x)
        assert outputs.shape == (2, 4, hidden)
        assert run["max_difference"](outputs, run["numpy_gru"](step, x, claimed)) <= FLOAT32_EXACT, name
        assert run["max_difference"](outputs, run["numpy_gru"](other, x, claimed)) >= CLEAR_MARGIN, name


def test_the_z_flip_is_a_sign_change_of_the_z_rows(runs):
    run = next(iter(runs.values()))
    weights = random_gru_weights(3, 4, seed=11, flavor=RB)
    flipped = {key: array.copy() for key, array in weights["forward"].items()}
    for key in flipped:
        flipped[key][4:8] *= -1  # the z rows (gates r, z, n, hidden size 4)
    x = np.random.default_rng(11).standard_normal((2, 5, 3)).astype(np.float32)
    plain = run["numpy_gru"](run["gru_rb_step"], x, weights)
    assert run["max_difference"](plain, run["numpy_gru"](run["gru_rb_z_flipped_step"], x, {"forward": flipped})) <= 1e-12
    assert run["max_difference"](plain, run["numpy_gru"](run["gru_rb_z_flipped_step"], x, weights)) >= CLEAR_MARGIN


@pytest.mark.parametrize("framework", INSTALLED)
def test_weights_come_back_with_the_same_effective_parameters(runs, framework):
    run = runs[framework]
    assert set(run["round_trips"]) == set(run["KINDS"])
    for name, (flavor, difference) in run["round_trips"].items():
        assert flavor == FAMILY[run["KINDS"][name]], name
        assert difference == 0.0, f"{name} changed its weights on the way back"


STORED_GATE_ORDER = {  # as the equations table of the page says
    "GRU(reset_after=True)": "z, r, n", "GRUCell(reset_after=True)": "z, r, n", "GRU(reset_after=False)": "z, r, n",
    "L.StatelessGRU": "r, -z, n",
}


@pytest.mark.parametrize("framework", INSTALLED)
def test_the_gate_order_read_from_each_layer_is_the_one_the_table_gives(runs, framework):
    run = runs[framework]
    assert set(run["gate_orders"]) == set(run["KINDS"])
    for name, order in run["gate_orders"].items():
        assert order == STORED_GATE_ORDER.get(name, "r, z, n"), name


@pytest.mark.parametrize("framework", INSTALLED)
def test_the_conversion_matrix_is_exact_or_refused_for_the_right_reason(runs, framework):
    run = runs[framework]
    kinds = run["KINDS"]
    entries = {(source, target): value for (source, target), value in run["conversions"].items() if target in kinds}
    assert set(entries) == {(source, target) for source in run["exported"] for target in kinds}
    for (source, target), value in entries.items():
        source_claim, target_claim = kinds[source], kinds[target]
        refusable = FAMILY[source_claim] != FAMILY[target_claim] or (
            target_claim == "LBR without b_hn" and source_claim == "LBR")  # b_hn != 0 with nowhere to go
        if refusable:
            assert isinstance(value, GRUConversionError), f"{source} -> {target} should have been refused"
        else:
            assert isinstance(value, float) and value <= FLOAT32_EXACT, f"{source} -> {target}: {value}"


@pytest.mark.parametrize("framework", INSTALLED)
def test_forced_conversions_are_measurably_wrong_and_worse_with_larger_weights(runs, framework):
    """approximate=True never gives the refused function back: every error is far above
    float32 rounding, above 1e-3 from scale 0.25 on (at scale 0.1 the RB-into-LBR error
    is about 9e-4), and it grows with the scale of the weights."""
    run = runs[framework]
    scales = run["APPROXIMATION_SCALES"]
    assert set(run["approximations"]) == set(run["KINDS"])
    for name, errors in run["approximations"].items():
        assert len(errors) == len(scales)
        assert all(error > 1e-5 for error in errors), name
        assert all(error > 1e-3 for scale, error in zip(scales, errors) if scale >= 0.25), name
        assert errors[-1] > 10 * errors[0], name


@pytest.mark.parametrize("framework", INSTALLED)
def test_a_training_mode_forward_keeps_more_than_an_inference_mode_one(runs, framework):
    run = runs[framework]
    hidden_states = run["HIDDEN_STATE_BYTES"]
    for layer in ("fused", "loop"):
        measured = run["kept_memory"][framework][layer]
        assert hidden_states <= measured["inference"] < 3 * hidden_states, (layer, measured)
        assert measured["training"] - measured["inference"] >= hidden_states, (layer, measured)


@pytest.mark.parametrize("framework", INSTALLED)
def test_the_memory_counter_on_fresh_data(runs, framework):
    run = runs[framework]
    x = np.random.default_rng(3).standard_normal((8, 12, run["INPUT"])).astype(np.float32)
    output_bytes = 8 * 12 * run["HIDDEN"] * 4
    layer = run["make_layer"](run["FUSED_KIND"], run["INPUT"], run["HIDDEN"])
    training = run["forward_kept_bytes"](layer, x, True)
    inference = run["forward_kept_bytes"](layer, x, False)
    assert inference >= output_bytes
    assert training > inference + output_bytes


def test_the_onednn_log_shows_which_gru_runs_a_primitive(runs):
    if "mxnet" in runs:
        how, calls = runs["mxnet"]["onednn_calls"]["mxnet"]
        assert {("forward_training", "lbr_gru"), ("forward_inference", "lbr_gru"), ("backward", "lbr_gru")} <= set(calls)
    for framework in ("pytorch", "tensorflow", "jax", "chainer"):
        if framework in runs:
            how, calls = runs[framework]["onednn_calls"][framework]
            assert calls == [], f"{framework}'s GRU ran oneDNN RNN primitives: {calls}"


def test_chainer_stores_z_negated_and_its_stateful_gru_skips_biases_at_first(runs):
    if "chainer" not in runs:
        pytest.skip("Chainer is not installed")
    checks = runs["chainer"]["chainer_checks"]
    assert checks["raw links vs z flipped"] <= FLOAT32_EXACT
    assert checks["raw links vs plain RB"] >= CLEAR_MARGIN
    assert checks["L.GRU from set_state(zeros) vs RB"] <= FLOAT32_EXACT
    assert checks["L.GRU from h=None vs RB"] >= CLEAR_MARGIN
