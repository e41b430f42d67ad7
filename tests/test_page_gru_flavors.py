"""The GRU flavors page's claims, checked through the code it shows.

Each installed framework's part of the page runs in its own process, as in the
book build (``run_framework_parts``), and the page's comparison cells run on
what the parts left (``load_comparisons``): the tests read the page's tables
and feed each of its checks a wrong case. The tabs' own functions
(``make_layer``, ``inference_outputs``, ``forward_kept_bytes``) are then
called on fresh inputs and weights through ``load_chapter``, all frameworks
in this one process, so that weights can also be moved literally from one
framework's layer into another's, which the page itself does through
canonical numpy weights.
"""

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS
from page_checks import assert_a_failed_proof_stops_the_page, smoke_offline
from rosetta_book.chapter import load_chapter, load_comparisons, run_framework_parts
from rosetta_proof.tab_results import TabRun
from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import is_installed
from rosetta_utils.gru import RB, GRUConversionError, get_weights, random_gru_weights, set_weights

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "gru_flavors.md"
FLOAT32_EXACT = 1e-6  # what "exact" means for float32 outputs of a few steps
CLEAR_MARGIN = 1e-2  # the other family must be at least this far away
#: Each framework's layer kinds and the flavor each claims, as the page's table says.
EXPECTED_KINDS = {
    "pytorch": {"nn.GRU": "LBR", "nn.GRUCell": "LBR"},
    "tensorflow": {"GRU(reset_after=True)": "LBR", "GRUCell(reset_after=True)": "LBR",
                   "GRU(reset_after=False)": "RB"},
    "jax": {"nnx.RNN(nnx.GRUCell)": "LBR without b_hn", "nnx.GRUCell": "LBR without b_hn",
            "nnx.GRUCell + dense_h bias": "LBR", "linen.GRUCell": "LBR"},
    "mxnet": {"gluon.rnn.GRU": "LBR", "gluon.rnn.GRUCell": "LBR"},
    "chainer": {"L.NStepGRU": "LBR", "L.StatelessGRU": "RB"},
}


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    """Smoke profile, offline, records into a temporary folder, for the whole module."""
    patch = pytest.MonkeyPatch()
    folder = tmp_path_factory.mktemp("gru-flavors-results")
    smoke_offline(patch, folder)
    patch.setenv("MPLBACKEND", "Agg")
    # the MXNet tab sets it with setdefault: keep this process's value, restored at the end
    patch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0)))))
    yield folder
    patch.undo()


@pytest.fixture(scope="module")
def results(results_dir):
    """What each framework's part left, each run in its own process as in the build."""
    return run_framework_parts(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(results):
    """The namespace of the page's comparison cells, run on the parts' results."""
    return load_comparisons(PAGE, results)


@pytest.fixture(scope="module")
def parts(results_dir):
    """Each framework's part up to its Evaluation section, in this process (the frameworks
    of this test run's environment)."""
    return {framework: load_chapter(PAGE, framework, until="Evaluation") for framework in IN_PROCESS}


def claimed_weights(part, claim, weights):
    """``weights`` read as the flavor ``claim``, as the page's CANONICAL reads its own."""
    return {"LBR": weights, "RB": {**weights, "flavor": RB},
            "LBR without b_hn": part["without_b_hn"](weights)}[claim]


# ---------------------------------------------------------------- flavors

def test_each_part_names_the_kinds_the_table_lists(results):
    for framework, run in results.items():
        assert run["KINDS"] == EXPECTED_KINDS[framework]
        assert set(run["LAYERS"]) == {"fused", "loop"} and set(run["LAYERS"].values()) <= set(run["KINDS"])


def test_every_layer_kind_computes_the_flavor_it_claims(comparison):
    rows = comparison["flavor_rows"]
    assert [row[0] for row in rows] == [name for fw in AVAILABLE for name in EXPECTED_KINDS[fw]]
    for name, framework, claim, claimed, other, verdict in rows:
        assert claimed <= FLOAT32_EXACT, f"{name} does not compute {claim}"
        assert other >= CLEAR_MARGIN, f"{name} is not told apart from the other family"
        assert verdict == "agrees", (name, verdict)


def test_the_flavor_check_fails_a_layer_of_the_other_family(comparison):
    ns = comparison
    rb_outputs = ns["numpy_gru"](ns["gru_rb_step"], ns["x_small"], ns["CANONICAL"]["RB"])
    claimed, other = ns["flavor_differences"](rb_outputs.astype(np.float32), "LBR")
    assert claimed > CLEAR_MARGIN and other <= FLOAT32_EXACT
    assert ns["flavor_verdict"](claimed, other).startswith("DIFFERS")
    assert ns["flavor_verdict"](1e-8, 1e-4).startswith("NOT TOLD APART")
    assert ns["flavor_verdict"](float("nan"), 0.5).startswith("DIFFERS")
    assert ns["flavor_verdict"](1e-8, 0.5) == "agrees"


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_tabs_layers_match_numpy_on_fresh_weights_and_inputs(parts, framework):
    part = parts[framework]
    inputs, hidden = part["SMALL_INPUT"], part["SMALL_HIDDEN"]
    x = np.random.default_rng(7).standard_normal((2, 4, inputs)).astype(np.float32)
    weights = random_gru_weights(inputs, hidden, seed=7, scale=0.8)
    for name, claim in part["KINDS"].items():
        claimed = claimed_weights(part, claim, weights)
        outputs = part["inference_outputs"](set_weights(part["make_layer"](name), claimed), x)
        assert outputs.shape == (2, 4, hidden)
        difference, other = part["flavor_differences"](outputs, claim, x=x, weights=claimed)
        assert difference <= FLOAT32_EXACT, name
        assert other >= CLEAR_MARGIN, name


def test_the_z_flip_is_a_sign_change_of_the_z_rows(comparison):
    ns = comparison
    weights = random_gru_weights(3, 4, seed=11, flavor=RB)
    flipped = {key: array.copy() for key, array in weights["forward"].items()}
    for key in flipped:
        flipped[key][4:8] *= -1  # the z rows (gates r, z, n, hidden size 4)
    x = np.random.default_rng(11).standard_normal((2, 5, 3)).astype(np.float32)
    plain = ns["numpy_gru"](ns["gru_rb_step"], x, weights)
    assert ns["max_abs_difference"](plain, ns["numpy_gru"](ns["gru_rb_z_flipped_step"], x, {"forward": flipped})) <= 1e-12
    assert ns["max_abs_difference"](plain, ns["numpy_gru"](ns["gru_rb_z_flipped_step"], x, weights)) >= CLEAR_MARGIN


@pytest.mark.legacy
def test_chainer_stores_z_negated_and_its_stateful_gru_skips_biases_at_first(parts):
    if "chainer" not in parts:
        pytest.skip("Chainer is not installed in this environment (the legacy one has it)")
    checks = parts["chainer"]["chainer_checks"]
    assert checks["raw links vs z flipped"] <= FLOAT32_EXACT
    assert checks["raw links vs plain RB"] >= CLEAR_MARGIN
    assert checks["L.GRU from set_state(zeros) vs RB"] <= FLOAT32_EXACT
    assert checks["L.GRU from h=None vs RB"] >= CLEAR_MARGIN


# ---------------------------------------------------------------- layouts and round trips

#: The gate order each kind stores, as its framework's sources say (all others: r, z, n).
DOCUMENTED_GATE_ORDER = {
    "GRU(reset_after=True)": "z, r, n",
    "GRUCell(reset_after=True)": "z, r, n",
    "GRU(reset_after=False)": "z, r, n",
    "L.StatelessGRU": "r, -z, n",
}


def test_weights_come_back_with_the_same_effective_parameters_and_the_documented_gate_order(comparison):
    for name, framework, order, flavor, difference, verdict in comparison["layout_rows"]:
        assert difference == 0.0, f"{name} changed its weights on the way back"
        assert flavor == comparison["FAMILY"][EXPECTED_KINDS[framework][name]], name
        assert order == DOCUMENTED_GATE_ORDER.get(name, "r, z, n"), name
        assert verdict == "agrees", (name, verdict)


def test_the_storage_table_is_written_from_what_the_layers_hold(comparison, results):
    """The Model section's table: one row per kind that ran, its gate order as found and its
    parameters as the part printed them, in the sizes' names; then the rows not run."""
    table = comparison["storage_rows"]
    assert len(table) == len(comparison["kinds"])
    for (implementation, claim, order, stored, computes), (name, (framework, kind_claim)) in zip(
            table, comparison["kinds"].items()):
        assert f"`{name}`" in implementation and claim == kind_claim
        assert order == DOCUMENTED_GATE_ORDER.get(name, "r, z, n"), name
        parameters = results[framework]["layouts"][name]["parameters"]
        first, last = list(parameters)[0], list(parameters)[-1]
        assert f"`{first}`" in stored and f"`{last}`" in stored, (name, stored)
        shapes = re.sub(r"`[^`]*`", "", stored)  # the sizes 4, 5, 10, 15 read I, H, 2H, 3H
        assert not re.search(r"\b(4|5|10|15)\b", shapes) and "H" in shapes, stored
    # the Summary names the kinds that keep another order than PyTorch's
    assert set(comparison["reordered"]) == {f"`{name}` {order}" for name, order in DOCUMENTED_GATE_ORDER.items()
                                            if name in comparison["kinds"]}
    expected = {"pytorch": "$W x$", "tensorflow": "$x K$", "jax": "$x K$", "mxnet": "$W x$", "chainer": "$W x$"}
    for row, (framework, _) in zip(table, comparison["kinds"].values()):
        assert row[-1] == expected[framework], row


def test_the_layout_checks_fail_wrong_cases(comparison):
    ns = comparison
    weights = ns["CANONICAL"]["LBR"]
    blocks = np.split(weights["forward"]["weight_ih"], 3)
    assert ns["gate_order"]([blocks[1], blocks[0], -blocks[2]], weights) == "z, r, -n"
    assert ns["gate_order"]([blocks[0] + 1, blocks[1], blocks[2]], weights) == "?, z, n"
    assert ns["layout_verdict"]("nn.GRU", "r, z, n", ns["FAMILY"]["LBR"], 0.0) == "agrees"
    assert "a block is no gate's" in ns["layout_verdict"]("nn.GRU", "?, z, n", ns["FAMILY"]["LBR"], 0.0)
    assert "read back as" in ns["layout_verdict"]("nn.GRU", "r, z, n", RB, 0.0)
    assert "effective parameters" in ns["layout_verdict"]("nn.GRU", "r, z, n", ns["FAMILY"]["LBR"], 1e-3)
    changed = {"forward": {key: array.copy() for key, array in weights["forward"].items()},
               "flavor": weights["flavor"]}
    changed["forward"]["bias_hh"][-1] += 0.25  # b_hn, which an LBR layer must keep
    assert ns["round_trip"](changed, "LBR")[1] == pytest.approx(0.25)
    assert ns["round_trip"]({**weights, "flavor": RB}, "LBR")[1] == float("inf")


# ---------------------------------------------------------------- the conversion matrix

def test_the_conversion_matrix_is_exact_or_refused_where_the_flavors_say(comparison):
    kinds, conversions = comparison["kinds"], comparison["conversions"]
    assert set(conversions) == {(source, target) for source in kinds for target in kinds}
    for (source, target), entry in conversions.items():
        source_claim, target_claim = kinds[source][1], kinds[target][1]
        refused = (comparison["FAMILY"][source_claim] != comparison["FAMILY"][target_claim]
                   or (source_claim == "LBR" and target_claim == "LBR without b_hn"))
        if refused:
            assert isinstance(entry, str) and entry.startswith("refused: "), f"{source} -> {target}: {entry}"
            because = "not diagonal" if comparison["FAMILY"][source_claim] != comparison["FAMILY"][target_claim] \
                else "dense_h"
            assert because in entry, entry
        else:
            assert isinstance(entry, float) and entry <= FLOAT32_EXACT, f"{source} -> {target}: {entry}"
    assert set(comparison["conversion_verdicts"].values()) == {"agrees"}


def test_a_flavor_or_a_conversion_as_the_flavors_do_not_say_stops_the_page(results):
    """The page's verdicts gate the build: a layer whose outputs are another flavor's, and a
    refused conversion that ran, each stop the page naming the check."""
    framework = next(iter(results))
    outputs = dict(results[framework]["flavor_outputs"])
    name = next(iter(outputs))
    shifted = outputs[name]
    outputs[name] = ({key: np.asarray(value) + 1e-2 for key, value in shifted.items()}
                     if isinstance(shifted, dict) else np.asarray(shifted) + 1e-2)
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"flavor_outputs": outputs},
                                         r"each layer computes its flavor failed", failing=name)


def test_the_conversion_verdict_fails_wrong_cases(comparison):
    verdict = comparison["conversion_verdict"]
    assert verdict("LBR", "RB", "refused: U_n is not diagonal") == "agrees"
    assert verdict("LBR", "LBR without b_hn", "refused: dense_h") == "agrees"
    assert verdict("LBR without b_hn", "LBR", 1e-7) == "agrees"
    assert verdict("LBR", "RB", 0.0).startswith("DIFFERS")  # ran where the flavors refuse
    assert verdict("RB", "RB", "refused: something").startswith("DIFFERS")
    assert verdict("LBR", "LBR", 1e-3).startswith("DIFFERS")


def test_a_moved_layer_that_computes_something_else_fails_the_matrix(comparison):
    """The page's matrix entry is measured: perturb what one part left and the entry says so."""
    ns = comparison
    lbr = [name for name, (framework, claim) in ns["kinds"].items() if claim == "LBR"]
    source, target = lbr[0], lbr[-1]
    source_fw, target_fw = ns["kinds"][source][0], ns["kinds"][target][0]
    key = (source, target) if source_fw == target_fw else ("LBR", target)
    runs = ns["runs"]
    original = runs[target_fw]
    moved = dict(original.moved)
    moved[key] = moved[key] + 1e-2
    runs[target_fw] = TabRun(target_fw, {**original.as_dict(), "moved": moved})
    try:
        entry = ns["conversion"](source, target)
    finally:
        runs[target_fw] = original
    assert entry == pytest.approx(1e-2, rel=1e-3)
    assert ns["conversion_verdict"]("LBR", "LBR", entry).startswith("DIFFERS")


@pytest.mark.legacy
def test_weights_move_literally_between_every_pair_of_frameworks(parts, comparison):
    """What the page proves through canonical weights, done directly in one process: fresh
    weights loaded into a layer of one framework, read back with get_weights, loaded into a
    layer of every other; exact where the flavors allow, refused where they do not. One
    process holds one environment's frameworks (the current run moves among PyTorch,
    TensorFlow and JAX, the legacy run between MXNet and Chainer); the page's matrix
    covers every pair."""
    layers = [(framework, name, claim) for framework in IN_PROCESS
              for name, claim in parts[framework]["KINDS"].items()]
    inputs, hidden = parts[IN_PROCESS[0]]["SMALL_INPUT"], parts[IN_PROCESS[0]]["SMALL_HIDDEN"]
    x = np.random.default_rng(13).standard_normal((2, 5, inputs)).astype(np.float32)
    fresh = random_gru_weights(inputs, hidden, seed=13, scale=0.6)
    for source_fw, source, source_claim in layers:
        part = parts[source_fw]
        layer = set_weights(part["make_layer"](source), claimed_weights(part, source_claim, fresh))
        expected, weights = part["inference_outputs"](layer, x), get_weights(layer)
        for target_fw, target, target_claim in layers:
            make_layer, inference_outputs = parts[target_fw]["make_layer"], parts[target_fw]["inference_outputs"]
            if comparison["refusal_expected"](source_claim, target_claim):
                with pytest.raises(GRUConversionError):
                    set_weights(make_layer(target), weights)
                continue
            outputs = inference_outputs(set_weights(make_layer(target), weights), x)
            difference = float(np.max(np.abs(outputs.astype(np.float64) - expected)))
            assert difference <= FLOAT32_EXACT, f"{source} ({source_fw}) -> {target} ({target_fw}): {difference}"


# ---------------------------------------------------------------- forced conversions

def test_forced_conversions_are_measurably_wrong_and_worse_with_larger_weights(comparison):
    """approximate=True never gives the refused function back: every error is far above
    float32 rounding, above 1e-3 from scale 0.25 on (at scale 0.1 the RB-into-LBR error
    is below 1e-3), and it grows with the scale of the weights."""
    scales = comparison["APPROXIMATION_SCALES"]
    forced = comparison["forced"]
    assert set(forced) == set(comparison["kinds"])
    for name, errors in forced.items():
        assert len(errors) == len(scales)
        assert all(error > 1e-5 for error in errors), name
        assert all(error > 1e-3 for scale, error in zip(scales, errors) if scale >= 0.25), name
        assert errors[-1] > 10 * errors[0], name
        assert comparison["forced_verdict"](errors) == "never exact", name


def test_the_forced_check_fails_an_exact_copy(comparison):
    scales = comparison["APPROXIMATION_SCALES"]
    errors = [1e-8] + [0.1] * (len(scales) - 1)
    assert comparison["forced_verdict"](errors) == f"EXACT at scale {scales[0]}"


# ---------------------------------------------------------------- kept memory and oneDNN

@pytest.mark.parametrize("framework", AVAILABLE)
def test_a_training_mode_forward_keeps_more_than_an_inference_mode_one(comparison, framework):
    run = comparison["runs"][framework]
    hidden_states = comparison["HIDDEN_STATE_BYTES"]
    for layer in ("fused", "loop"):
        measured = run.kept_memory[layer]
        assert hidden_states <= measured["inference"] < 3 * hidden_states, (layer, measured)
        assert measured["training"] - measured["inference"] >= hidden_states, (layer, measured)
    verdicts = [row[-1] for row in comparison["memory_rows"] if row[0] == framework]
    assert verdicts == ["agrees", "agrees"]


def test_the_memory_check_fails_wrong_cases(comparison):
    check, hidden_states = comparison["memory_verdict"], comparison["HIDDEN_STATE_BYTES"]
    assert check(5 * hidden_states, hidden_states) == "agrees"
    assert check(hidden_states, hidden_states).startswith("DIFFERS")  # nothing kept for backward
    assert check(5 * hidden_states, hidden_states // 2).startswith("DIFFERS")  # output not counted


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_memory_counter_on_fresh_data(parts, framework):
    part = parts[framework]
    x = np.random.default_rng(3).standard_normal((8, 12, part["INPUT"])).astype(np.float32)
    output_bytes = 8 * 12 * part["HIDDEN"] * 4
    layer = part["make_layer"](part["LAYERS"]["fused"], part["INPUT"], part["HIDDEN"])
    training = part["forward_kept_bytes"](layer, x, True)
    inference = part["forward_kept_bytes"](layer, x, False)
    assert inference >= output_bytes
    assert training > inference + output_bytes


def test_the_onednn_log_shows_which_gru_runs_a_primitive(comparison):
    runs = comparison["runs"]
    if "mxnet" in runs:
        calls = runs["mxnet"].onednn_calls
        assert {("forward_training", "lbr_gru"), ("forward_inference", "lbr_gru"),
                ("backward", "lbr_gru")} <= {tuple(call) for call in calls}
        assert comparison["primitive_verdict"](calls, "LBR") == "agrees"
    for framework in ("pytorch", "tensorflow", "jax", "chainer"):
        if framework in runs:
            calls = runs[framework].onednn_calls
            assert list(calls) == [], f"{framework}'s GRU ran oneDNN RNN primitives: {calls}"
    wrong = [("forward_training", "vanilla_gru")]
    assert comparison["primitive_verdict"](wrong, "LBR").startswith("DIFFERS")
    assert comparison["primitive_verdict"](wrong, "RB") == "agrees"
    assert comparison["primitive_verdict"]([], "LBR") == "no primitive"


# ---------------------------------------------------------------- timing

def test_fused_and_loop_times_are_measured_and_recorded(comparison, results_dir):
    repeats = comparison["REPEATS"]
    for framework, run in comparison["runs"].items():
        for name in ("fused", "loop"):
            seconds = run.step_seconds[name]
            assert len(seconds) == repeats and all(second > 0 for second in seconds), (framework, name)
    records = [json.loads(line) for line in (results_dir / "gru_flavors.jsonl").read_text().splitlines()]
    assert {record["framework"] for record in records} == set(AVAILABLE)
    for record in records:
        metrics = record["metrics"]
        assert metrics["loop_over_fused"] == pytest.approx(metrics["loop_seconds"] / metrics["fused_seconds"])
        assert record["config"]["steps"] == comparison["TIMING_STEPS"]


# ---------------------------------------------------------------- the Summary

def test_the_summary_states_what_the_parts_computed(results, comparison):
    """The Summary's numbers against the parts' own results, recomputed here."""
    summary = "\n".join(comparison["SUMMARY"])
    kinds = {name: claim for run in results.values() for name, claim in run["KINDS"].items()}
    assert f"Each of {len(kinds)} layer kinds" in summary
    for claim in set(kinds.values()):
        assert f"{claim}: " + ", ".join(f"`{name}`" for name, c in kinds.items() if c == claim) in summary
    # the conversions: every entry of the matrix, ran or refused
    entries = list(comparison["conversions"].values())
    ran = [entry for entry in entries if not isinstance(entry, str)]
    assert f"{len(ran)} ran, within a family, the largest output difference {max(ran):.1e}" in summary
    assert f"{len(entries) - len(ran)} were refused" in summary
    # forced copies: the smallest error at the smallest scale, the largest at the largest,
    # by the flavor of the weights forced in (those the layer's own flavor refuses)
    refused = {"RB": "LBR", "LBR": "RB", "LBR without b_hn": "LBR"}
    by_weights = {}
    for run in results.values():
        for name, errors in run["forced_errors"].items():
            by_weights.setdefault(refused[run["KINDS"][name]], []).append(errors)
    for weights, errors in by_weights.items():
        span = f"off by {min(e[0] for e in errors):.2g} to {max(e[-1] for e in errors):.2g}"
        assert f"{weights} weights into" in summary and span in summary, (weights, span)
    # memory: what a training forward kept beyond an inference one, in hidden states
    hidden_states = comparison["HIDDEN_STATE_BYTES"]
    kept = {f"{fw} `{run['LAYERS'][layer]}`": (run["kept_memory"][layer]["training"]
                                               - run["kept_memory"][layer]["inference"]) / hidden_states
            for fw, run in results.items() for layer in ("fused", "loop")}
    least, most = min(kept, key=kept.get), max(kept, key=kept.get)
    assert f"from {kept[least]:.1f} ({least}) to {kept[most]:.1f} ({most})" in summary
    # timing: the loop's median over the fused layer's, each framework
    for fw, run in results.items():
        ratio = np.median(run["step_seconds"]["loop"]) / np.median(run["step_seconds"]["fused"])
        assert f"{fw} {ratio:.2f} (" in summary, fw


def test_the_summary_follows_the_runs(results, comparison, monkeypatch, tmp_path):
    """Changed results give a changed Summary: timings read by quartiles (a loop three
    times the fused layer's time is 'fused faster', overlapping repeats neither), a forced
    copy's larger error, a training forward that keeps more."""
    monkeypatch.setenv("ROSETTA_RESULTS_DIR", str(tmp_path))  # these records go nowhere
    first, last = AVAILABLE[0], AVAILABLE[-1]
    changed = {name: dict(values) for name, values in results.items()}
    changed[first]["step_seconds"] = {"fused": [1.0, 1.1, 0.9], "loop": [3.0, 3.1, 2.9]}
    changed[last]["step_seconds"] = {"fused": [1.0, 2.0, 3.0], "loop": [1.5, 2.5, 3.5]}
    kind = next(iter(changed[first]["forced_errors"]))
    changed[first]["forced_errors"] = {**changed[first]["forced_errors"],
                                       kind: [0.5, 1.0, 2.0, 4.0, 7.5]}
    hidden_states = comparison["HIDDEN_STATE_BYTES"]
    kept = {layer: dict(values) for layer, values in changed[first]["kept_memory"].items()}
    kept["loop"]["training"] = kept["loop"]["inference"] + 50 * hidden_states
    changed[first]["kept_memory"] = {**changed[first]["kept_memory"], **kept}
    summary = "\n".join(load_comparisons(PAGE, changed)["SUMMARY"])
    assert f"{first} 3.00 (fused faster)" in summary
    if last != first:
        assert f"{last} 1.25 (quartiles overlap)" in summary
    assert " to 7.5" in summary
    assert f"to 50.0 ({first} `{changed[first]['LAYERS']['loop']}`)" in summary
