"""The variable-length page's claims, checked through the code it shows.

Two routes, both the page's own code:

- each framework's part, up to its Timing section, is loaded in this process
  (``load_chapter``); the tests call its ``make_bigru``, ``run_bigru`` and
  ``mean_gradients`` on a batch of their own (another seed, other lengths,
  other sizes, garbage padding, non-zero biases) and compare it with the
  same framework running every sequence alone, and with PyTorch;
- every part runs in its own process as the build runs it
  (``run_framework_parts``), and the page's comparison cells run on what the
  parts left (``load_comparisons``): the tests check the verdicts the page
  prints, then feed each check a wrong case and see it fail.
"""

from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS
from page_checks import assert_a_failed_proof_stops_the_page, smoke_offline
from rosetta_book.chapter import load_chapter, load_comparisons, run_framework_parts
from rosetta_proof.equivalence import equivalence_table, failures
from rosetta_proof.tab_results import TabRun
from rosetta_utils import FRAMEWORKS
from rosetta_utils.differences import max_abs_difference
from rosetta_utils.frameworks import is_installed
from rosetta_utils.gru import random_gru_weights

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "variable_length_sequences.md"

LENGTHS = [3, 7, 1, 6, 2]  # unsorted, longest not first, a length-1 row
STEPS, INPUT_SIZE, HIDDEN_SIZE = 7, 5, 3
QUANTITIES = ("outputs", "last forward", "last backward", "mean")

#: The traps each framework's part must leave (a trap cannot vanish silently).
TRAPS = {
    "pytorch": {"padded batch, not packed", "outputs[:, -1] of the padded batch as the last state",
                "outputs[:, -1] of the packed batch as the last state",
                "outputs[b, length - 1, :H] and outputs[b, 0, H:]"},
    "tensorflow": {"padded batch, no mask", "plain GRU with a mask: outputs at padded steps",
                   "plain GRU with a mask: padded steps repeat the last valid output"},
    "jax": {"padded batch, no seq_lengths", "nnx.Bidirectional(seq_lengths): outputs at padded steps",
            "plain nnx.GRUCell (no b_hn), forward outputs of the full row"},
    "mxnet": {"padded batch, all lengths taken as T",
              "GRU(use_sequence_length=True) told the lengths vs told every row is full",
              "GRU(use_sequence_length=True), zero biases, zero padding: outputs",
              "GRU(use_sequence_length=True), zero biases, zero padding: last states",
              "GRU(use_sequence_length=True), non-zero biases, garbage padding: outputs",
              "GRU(use_sequence_length=True), non-zero biases, garbage padding: last states"},
    "chainer": {"padded rows as full-length sequences"},
}


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
def smoke(tmp_path_factory):
    """The build's conditions: smoke profile, offline, no official weights; records
    go to a folder of the test's own."""
    patch = pytest.MonkeyPatch()
    results = tmp_path_factory.mktemp("results")
    smoke_offline(patch, results)
    yield results
    patch.undo()


@pytest.fixture(scope="module")
def chapters(smoke):
    """Each framework's part up to its Timing section, loaded in this process, with the
    test's own batch run through the part's functions."""
    loaded = {}
    for framework in IN_PROCESS:
        run = load_chapter(PAGE, framework, until="Timing")
        model = run["make_bigru"](INPUT_SIZE, HIDDEN_SIZE, WEIGHTS["forward"], WEIGHTS["backward"])
        run["fresh"] = dict(zip(QUANTITIES, run["run_bigru"](model, X.copy(), LENGTHS)))
        run["fresh"]["x gradient"], run["fresh"]["weight gradients"] = run["mean_gradients"](
            model, X.copy(), LENGTHS, PROJECTION)
        run["fresh alone"] = run_each_alone(run, model)
        loaded[framework] = run
    return loaded


@pytest.fixture(scope="module")
def parts(smoke):
    """What each framework's part left, each run in its own process as in the build."""
    return run_framework_parts(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(parts):
    """The page's comparison cells, run on what the parts left."""
    import matplotlib

    matplotlib.use("Agg")
    return load_comparisons(PAGE, parts)


def test_a_batch_that_reads_its_padding_stops_the_page(parts):
    """The proof that the batch equals each sequence alone gates the build: outputs moved at
    one valid step of one sequence stop the page, naming the check and the framework."""
    framework = AVAILABLE[-1]
    batch = {name: (np.array(value, copy=True) if isinstance(value, np.ndarray) else value)
             for name, value in parts[framework]["batch"].items()}
    batch["outputs"][0, 0] += 1e-2
    assert_a_failed_proof_stops_the_page(PAGE, parts, framework, {"batch": batch},
                                         r"the batch against each alone failed for .*outputs.*DIFFERS")


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


def padded_variant(run):
    """The page's own batch through the part's functions without lengths: the trap."""
    model, x, projection = run["model"], run["x"], run["projection"]
    wrong = dict(zip(QUANTITIES, run["run_bigru"](model, x, None)))
    wrong["x gradient"], wrong["weight gradients"] = run["mean_gradients"](model, x, None, projection)
    return wrong


def with_values(run, **values):
    """A copy of a framework's tab results with some values replaced."""
    return TabRun(run.framework, {**run.as_dict(), **values})


# -- the test's own batch, through each part's functions ---------------------------------


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_batch_equals_each_sequence_alone(chapters, framework):
    batch, alone = chapters[framework]["fresh"], chapters[framework]["fresh alone"]
    assert batch["outputs"].shape == (len(LENGTHS), STEPS, 2 * HIDDEN_SIZE)
    for row, length in enumerate(LENGTHS):
        assert np.max(np.abs(batch["outputs"][row, :length] - alone["outputs"][row])) <= 1e-5
        for name in ("last forward", "last backward", "mean"):
            assert np.max(np.abs(batch[name][row] - alone[name][row])) <= 1e-5, name
    assert np.all(batch["outputs"][~VALID] == 0.0), "outputs at padded steps must be exactly zero"


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_last_states_are_where_each_direction_ends(chapters, framework):
    """Forward: the output at step length - 1; backward: the output at step 0."""
    batch = chapters[framework]["fresh"]
    rows, last = np.arange(len(LENGTHS)), np.array(LENGTHS) - 1
    assert np.max(np.abs(batch["last forward"] - batch["outputs"][rows, last, :HIDDEN_SIZE])) <= 1e-6
    assert np.max(np.abs(batch["last backward"] - batch["outputs"][:, 0, HIDDEN_SIZE:])) <= 1e-6


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_gradients_equal_each_sequence_alone_and_ignore_the_padding(chapters, framework):
    batch, alone = chapters[framework]["fresh"], chapters[framework]["fresh alone"]
    assert batch["x gradient"].shape == X.shape
    assert np.abs(batch["x gradient"]).max() > 1e-3, "a gradient that is all zeros proves nothing"
    for row, length in enumerate(LENGTHS):
        assert np.max(np.abs(batch["x gradient"][row, :length] - alone["x gradient"][row])) <= 1e-4
    assert np.all(batch["x gradient"][~VALID] == 0.0), "the gradient w.r.t. padded steps must be exactly zero"
    summed = weight_sum(alone["weight gradients"])
    assert max_weight_difference(batch["weight gradients"], summed) <= 1e-4


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_every_framework_agrees_with_pytorch(chapters, framework):
    if "pytorch" not in chapters:
        pytest.skip("PyTorch is the yardstick")
    ours, reference = chapters[framework]["fresh"], chapters["pytorch"]["fresh"]
    for name in QUANTITIES:
        assert np.max(np.abs(ours[name] - reference[name])) <= 1e-5, name
    assert np.max(np.abs(ours["x gradient"] - reference["x gradient"])) <= 1e-4
    assert max_weight_difference(ours["weight gradients"], reference["weight gradients"]) <= 1e-4


def test_the_test_uses_a_batch_of_its_own(chapters):
    for run in chapters.values():
        assert run["LENGTHS"] != LENGTHS and run["x"].shape != X.shape


# -- the page's proof table ---------------------------------------------------------------


@pytest.mark.parametrize("framework", AVAILABLE)
def test_the_pages_proof_table_agrees(comparison, framework):
    found = comparison["proof"][framework]
    for name in QUANTITIES:
        assert found[name] <= 1e-5, name
    assert found["x gradient"] <= 1e-4 and found["weight gradients"] <= 1e-4
    assert found["|outputs| at padded steps"] == 0.0 and found["|x gradient| at padded steps"] == 0.0
    assert comparison["combined_verdict"](found, comparison["TOLERANCES"]) == "agrees"


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_proof_fails_the_padded_batch_without_lengths(chapters, comparison, framework):
    """The proof's verdict is not vacuous: the padded batch, through the part's own
    functions, fails on the outputs, the states, the mean, the gradients and the padding."""
    run = comparison["runs"][framework]
    found = comparison["proof_differences"](padded_variant(chapters[framework]), run.alone)
    result = comparison["combined_verdict"](found, comparison["TOLERANCES"])
    for name in ("outputs", "last forward", "mean", "x gradient", "|outputs| at padded steps",
                 "|x gradient| at padded steps"):
        assert f"{name}: DIFFERS" in result, (name, result)


def test_the_proof_fails_outputs_left_at_padded_steps(comparison):
    """Outputs right at every valid step but not zero at the padded ones (Flax's raw
    outputs) fail the outputs and the padding columns, and nothing else."""
    framework = AVAILABLE[0]
    run = comparison["runs"][framework]
    batch = dict(run.batch)
    batch["outputs"] = np.where(comparison["valid"][:, :, None], batch["outputs"], 1e-3)
    result = comparison["combined_verdict"](comparison["proof_differences"](batch, run.alone),
                                            comparison["TOLERANCES"])
    failing = [part.split(":")[0] for part in result.split("; ")]
    assert failing == ["outputs", "|outputs| at padded steps"], result


# -- the traps -------------------------------------------------------------------------


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_trap_is_as_the_page_says(comparison, framework):
    rows = [row for row in comparison["all_traps"] if row[0] == framework]
    assert {row[1] for row in rows} == TRAPS[framework] | {"mean over T of the zeroed outputs"}
    for _, name, difference, fix, measured, check in rows:
        assert check == "as the page says", (name, difference, measured)
        if measured == "differs":
            assert difference >= comparison["DIFFERS"]
        if fix != "-":
            assert fix <= 1e-5, f"{name}: the page's way is wrong too"


def test_the_padded_batch_trap_is_large_everywhere(comparison):
    for row in comparison["all_traps"]:
        if row[1].startswith("padded"):
            assert row[2] > 0.1, row


def test_mxnets_fused_layer_ignores_the_lengths_and_hides_it(comparison):
    if "mxnet" not in comparison["runs"]:
        pytest.skip("MXNet is not installed")
    measured = {row[1]: row[2] for row in comparison["all_traps"] if row[0] == "mxnet"}
    fused = "GRU(use_sequence_length=True)"
    assert measured[f"{fused} told the lengths vs told every row is full"] == 0.0
    assert measured[f"{fused}, zero biases, zero padding: outputs"] <= 1e-6, "the bug hides"
    assert measured[f"{fused}, zero biases, zero padding: last states"] > 0.1, "except in h_n"
    assert measured[f"{fused}, non-zero biases, garbage padding: outputs"] > 0.1, "and shows"


def test_the_trap_check_fails_when_a_trap_is_not_one(comparison):
    """A 'trap' that is the right way measures 'agrees', and the check says the page is wrong."""
    framework = AVAILABLE[0]
    run = comparison["runs"][framework]
    name, case = next((name, case) for name, case in run.traps.items() if case["claim"] == "differs")
    traps = {name: {**case, "got": case["expected"]}}
    (row, _mean_row) = comparison["trap_rows"](framework, with_values(run, traps=traps))
    assert row[4] == "agrees" and row[5].startswith("NOT as the page says")


def test_the_trap_check_fails_when_a_right_reading_is_wrong(comparison):
    agreeing = [(framework, name, case) for framework, run in comparison["runs"].items()
                for name, case in run.traps.items() if case["claim"] == "agrees"]
    if not agreeing:
        pytest.skip("no installed framework has a trap the page says agrees")
    framework, name, case = agreeing[0]
    got = np.asarray(case["got"]) + 0.5 if not isinstance(case["got"], dict) else {
        key: np.asarray(value) + 0.5 for key, value in case["got"].items()}
    run = with_values(comparison["runs"][framework], traps={name: {**case, "got": got}})
    (row, _mean_row) = comparison["trap_rows"](framework, run)
    assert row[4] == "differs" and row[5].startswith("NOT as the page says")


def test_a_difference_between_rounding_and_an_error_is_unclear(comparison):
    assert comparison["outcome"](0.0) == "agrees"
    assert comparison["outcome"](1e-3) == "unclear"
    assert comparison["outcome"](0.5) == "differs"


def test_the_mean_over_t_check_fails_a_mean_that_is_right(comparison):
    """Were the mean over T right (no padding at all), the page's claim would fail."""
    framework = AVAILABLE[0]
    run = comparison["runs"][framework]
    batch = {**run.batch, "mean": run.batch["outputs"].mean(axis=1)}
    rows = comparison["trap_rows"](framework, with_values(run, batch=batch, traps={}))
    (mean_row,) = rows
    assert mean_row[1] == "mean over T of the zeroed outputs"
    assert mean_row[4] == "agrees" and mean_row[5].startswith("NOT as the page says")


# -- equivalence with PyTorch ---------------------------------------------------------------


def test_the_forms_check_fails_when_a_framework_is_not_what_the_prose_says(comparison):
    """The page says Keras's two forms differ and every other framework's agree: a Keras
    that fixed its unrolled path, or another framework whose forms differ, fails the check."""
    says = comparison["as_the_page_says"]
    assert says("tensorflow", "NOT the same model (outputs differ)") == "as the page says"
    assert says("tensorflow", "the same model").startswith("NOT as the page says")
    assert says("pytorch", "the same model") == "as the page says"
    assert says("pytorch", "NOT the same model (mean differs)").startswith("NOT as the page says")


def test_the_pages_equivalence_table_agrees(comparison):
    if "pytorch" not in comparison["runs"]:
        pytest.skip("PyTorch is the yardstick")
    assert comparison["reference"] == "pytorch"
    rows = comparison["equivalence_rows"]
    assert [row[0] for row in rows] == AVAILABLE
    assert failures(rows) == []
    for framework, *values, verdict in rows:
        if framework == "pytorch":  # the reference is compared with nothing
            assert verdict == "reference" and set(values) == {"reference"}
            continue
        assert max(values[:4]) <= 1e-5 and max(values[4:]) <= 1e-4, framework


@pytest.mark.legacy
def test_the_equivalence_table_fails_a_framework_that_ignores_the_lengths(chapters, comparison):
    if "pytorch" not in comparison["runs"] or IN_PROCESS[-1:] in ([], ["pytorch"]):
        pytest.skip("needs PyTorch's results and another framework in this process")
    framework = IN_PROCESS[-1]
    runs = dict(comparison["runs"])
    runs[framework] = with_values(runs[framework], batch=padded_variant(chapters[framework]))
    _, rows = equivalence_table(runs, comparison["columns"], comparison["bounds"])
    assert failures(rows) == [framework]


# -- timing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", AVAILABLE)
def test_each_part_timed_every_spread_both_ways(comparison, framework):
    seconds = comparison["runs"][framework].step_seconds
    assert list(seconds) == list(comparison["SPREADS"])
    for paths in seconds.values():
        assert set(paths) == {"padded", "lengths"} and all(np.isfinite(s) and s > 0 for s in paths.values())
    assert "× the padded step" in comparison["timing_summary"](seconds)


def test_the_timing_summary_says_only_what_the_times_show(comparison):
    summary = comparison["timing_summary"]
    spreads = list(comparison["SPREADS"])

    def seconds(padded, lengths):
        return {spread: {"padded": p, "lengths": n} for spread, p, n in zip(spreads, padded, lengths)}

    skipping = summary(seconds([1.0, 1.0, 1.0], [1.2, 0.9, 0.6]))
    assert "1.20× the padded step" in skipping and "50% faster" in skipping and "noise: 0%" in skipping
    assert "25% slower" in summary(seconds([1.0, 1.0, 1.0], [1.0, 1.1, 1.25]))
    noisy = summary(seconds([1.0, 1.6, 1.2], [1.0, 0.9, 0.6]))  # a 40% saving within 60% noise
    assert "less than the noise" in noisy and "noise: 60%" in noisy


def test_the_build_records_the_step_times(comparison, smoke):
    import json

    records = [json.loads(line) for line in (smoke / "variable_length.jsonl").read_text().splitlines()]
    assert sorted(record["framework"] for record in records) == sorted(AVAILABLE)
    for record in records:
        assert record["config"]["data"] == "synthetic"
        assert len(record["metrics"]) == 2 * len(comparison["SPREADS"])


# -- the 2016 study: loop against unrolled forms ----------------------------------------------


def study_verdicts(comparison):
    return {framework: found[1] for framework, found in comparison["study_verdicts"].items()}


def test_the_loop_and_unrolled_forms(comparison):
    """PyTorch, Flax and MXNet: the same model; Keras 3's unrolled masked Bidirectional is
    not (the Lessons' claim about this build); Chainer has one form only."""
    verdicts = study_verdicts(comparison)
    for framework in ("pytorch", "jax", "mxnet"):
        if framework in verdicts:
            assert verdicts[framework] == "the same model", framework
    if "tensorflow" in verdicts:
        # the last states right, the outputs wrong, and the gradient inherits the error
        assert verdicts["tensorflow"].startswith("NOT the same model (outputs, mean, x gradient differ")
        forms = comparison["runs"]["tensorflow"].study["go_backwards alone"]
        assert np.abs(forms["loop"] - forms["unrolled"]).max() > 0.1
    if "chainer" in comparison["runs"]:
        assert "chainer" not in verdicts and "unrolled" not in comparison["runs"]["chainer"].study


def test_the_study_verdict_can_go_either_way(comparison):
    same_model, differences = comparison["same_model"], comparison["form_differences"]
    for framework, run in comparison["runs"].items():
        if "unrolled" not in run.study:
            continue
        loop = run.study["loop"]
        agreeing = {**run.study, "unrolled": loop}
        assert same_model(differences(agreeing)) == "the same model", framework
        shifted = {**loop, "mean": loop["mean"] + 1e-3}
        assert same_model(differences({**run.study, "unrolled": shifted})).startswith("NOT"), framework


# -- the Summary ------------------------------------------------------------------------------


def measured_trap(run, name):
    """A trap's difference from what is right, measured here from a part's results."""
    trap = run["traps"][name]
    return max_abs_difference(trap["got"], trap["expected"])


def span(values):
    low, high = f"{min(values):.2g}", f"{max(values):.2g}"
    return low if low == high else f"{low} to {high}"


def test_the_summary_states_what_the_parts_computed(parts, comparison):
    """The Summary's numbers against the parts' own results, recomputed here."""
    summary = "\n".join(comparison["SUMMARY"])
    alone = max(max_abs_difference(run["batch"][name], run["alone"][name])
                for run in parts.values() for name in QUANTITIES)
    assert f"outputs, last states and mean within {alone:.1e}" in summary
    no_lengths = [measured_trap(run, next(name for name in TRAPS[fw] if name.startswith("padded")))
                  for fw, run in parts.items()]
    assert f"every framework reads the padding: off by {span(no_lengths)}." in summary
    over_t = [max_abs_difference(np.asarray(run["batch"]["outputs"]).mean(axis=1), run["batch"]["mean"])
              for run in parts.values()]
    assert f"zeroed outputs is off by {span(over_t)} in every framework" in summary
    if "pytorch" in parts:
        last = measured_trap(parts["pytorch"], "outputs[:, -1] of the padded batch as the last state")
        assert f"`outputs[:, -1]` as the last state is off by {last:.2g}" in summary
    if "mxnet" in parts:
        ignored = measured_trap(parts["mxnet"], "GRU(use_sequence_length=True) told the lengths vs told "
                                                "every row is full")
        assert f"told them or not, it differs by {ignored:.2g})" in summary
    for fw, run in parts.items():
        full = run["step_seconds"]["all T"]
        assert f"{fw} {full['lengths'] / full['padded']:.2f}×" in summary, fw
        if "unrolled seconds" in run["study"]:
            ratio = run["study"]["unrolled seconds"] / run["study"]["loop seconds"]
            assert f"{fw} {ratio:.2f}×" in summary, fw


def test_the_summary_follows_the_runs(parts, monkeypatch, tmp_path):
    """Changed results give a changed Summary: lengths that cost 1.2× with every row
    full and save half the step at lengths in [1, T], with no noise, are said so, and so
    is a padded batch 4.5 off."""
    monkeypatch.setenv("ROSETTA_RESULTS_DIR", str(tmp_path))  # these records go nowhere
    framework = AVAILABLE[0]
    changed = {name: dict(values) for name, values in parts.items()}
    changed[framework]["step_seconds"] = {
        "all T": {"padded": 1.0, "lengths": 1.2},
        "uniform in [T/2, T]": {"padded": 1.0, "lengths": 0.9},
        "uniform in [1, T]": {"padded": 1.0, "lengths": 0.6},
    }
    import matplotlib

    matplotlib.use("Agg")
    padded = next(name for name in TRAPS[framework] if name.startswith("padded"))
    expected = parts[framework]["traps"][padded]["expected"]
    wrong = {name: np.asarray(value) + 4.5 for name, value in expected.items()}
    traps = dict(parts[framework]["traps"])
    traps[padded] = {**traps[padded], "got": wrong}  # the padding read as 4.5 off
    changed[framework]["traps"] = traps
    summary = "\n".join(load_comparisons(PAGE, changed)["SUMMARY"])
    assert f"{framework} 1.20×" in summary
    assert f"beyond this run's noise: {framework} 50% faster" in summary
    assert "every framework reads the padding: off by " in summary and " to 4.5." in summary
