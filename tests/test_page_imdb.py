"""The IMDB GRU page's claims, checked through the code it shows.

Each framework's part of the page runs in its own process, as in the book
build (smoke profile, offline: the labelled synthetic stand-in), and the
page's comparison cells then run on what the parts left. Every check those
cells print is also fed a wrong case here, and must fail on it. A tab's own
functions (its builder and ``predict_logits``) are called through the chapter
loader for checks on reviews the page never used.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS
from page_checks import (
    summary_shown,
    parts_as_built,
    assert_a_failed_proof_stops_the_page,
    assert_true_float32_equivalence,
    smoke_offline,
)
from rosetta_book.bench.tasks import TASKS, page_configuration
from rosetta_book.chapter import load_chapter, load_comparisons
from rosetta_proof.equivalence import VerdictFailed
from rosetta_proof.tab_results import TabRun
from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import is_installed

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "imdb_gru.md"
PARAMETERS = 3_818_302  # the reference's count
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    """Where the page's Timing section records its results during these tests."""
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def results():
    """What each framework's part left, each run in its own process as the build runs it."""
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def page(results_dir, results):
    """The page as the build runs it: the comparison cells on what the parts left."""
    patch = pytest.MonkeyPatch()
    smoke_offline(patch, results_dir)
    try:
        yield load_comparisons(PAGE, results)
    finally:
        patch.undo()


@pytest.fixture(scope="module")
def models():
    """Each framework's Setup, Data and Model sections, run in this process:
    the tab's builder and predict_logits, the model at its starting weights."""
    patch = pytest.MonkeyPatch()
    smoke_offline(patch)
    try:
        yield {framework: load_chapter(PAGE, framework, until="Training") for framework in IN_PROCESS}
    finally:
        patch.undo()


def wrong(run, **changes):
    """A copy of a framework's results with some values replaced."""
    return TabRun(run.framework, dict(run.as_dict(), **changes))


def equivalence_rows(page, runs):
    """The page's equivalence table for ``runs``, as {framework: row}."""
    _, rows = page["equivalence_table"](runs, page["EQUIVALENCE_COLUMNS"], page["EQUIVALENCE_TOLERANCES"])
    return {row[0]: row for row in rows}


def needs_pytorch():
    if "pytorch" not in AVAILABLE:
        pytest.skip("PyTorch is the yardstick")


# --- Model ------------------------------------------------------------------


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_framework_builds_the_reference_parameter_count(page, framework):
    run = page["runs"][framework]
    assert run.parameter_count == PARAMETERS
    assert isinstance(run.gru_kernel, str) and run.gru_kernel, "each tab names the GRU kernel that ran"


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_builders_defaults_are_one_of_the_benchmarks_configurations(models, framework):
    alternatives = TASKS["imdb"].alternatives[framework]
    assert page_configuration(models[framework]["make_training"], alternatives) in alternatives


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_every_benchmark_alternative_is_the_pages_model(models, framework):
    """The benchmark times the same model: each alternative, built by the tab's own builder
    from the starting weights, gives the page's logits on reviews of every length."""
    namespace = models[framework]
    data, make_training = namespace["data"], namespace["make_training"]
    rows = np.linspace(5_000, 5_999, 16).astype(int)
    reviews, labels = (data.x_test[rows], data.len_test[rows]), data.y_test[rows]
    logits = {}
    for name, alternative in TASKS["imdb"].alternatives[framework].items():
        if alternative.dropped:  # not timed (another computation, or an option to come)
            continue
        model, _, to_device = make_training(**alternative.options)
        logits[name] = namespace["predict_logits"](model, to_device(reviews, labels)[0])
    first = next(iter(logits.values()))
    for name, values in logits.items():
        assert np.max(np.abs(values - first)) <= 1e-5, f"{framework}: {name} computes another model"


# --- Training and Evaluation ------------------------------------------------


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_framework_trained_and_was_tested_on_labelled_data(page, framework):
    run = page["runs"][framework]
    assert len(run.epoch_seconds) == page["EPOCHS"]
    assert all(seconds > 0 for seconds in run.epoch_seconds)
    assert 0.6 < run.test_accuracy <= 1.0, "the stand-in is learnable: training must have learnt"
    assert page["data"].synthetic, "offline, the page runs on the stand-in"
    assert "synthetic" in page["DATA_NOTE"], "results must say what data they rest on"


def test_each_run_recorded_its_result(page, results_dir):
    records = [json.loads(line) for line in (results_dir / "imdb.jsonl").read_text().splitlines()]
    assert [record["framework"] for record in records] == AVAILABLE
    for record in records:
        run = page["runs"][record["framework"]]
        assert record["metrics"]["test_accuracy"] == run.test_accuracy
        assert record["metrics"]["sequences_per_second"] > 0
        assert record["config"]["gru_kernel"] == run.gru_kernel
        assert record["config"]["data"].startswith("SYNTHETIC")
        assert record["device"] == run.environment["device"]


# --- Equivalence ------------------------------------------------------------


@pytest.mark.parametrize("framework", AVAILABLE)
def test_transplanted_weights_give_pytorchs_logits_and_gradients(page, framework):
    needs_pytorch()
    runs = page["runs"]
    run, reference = runs[framework], runs["pytorch"]
    assert page["max_abs_difference"](run.logits, reference.logits) <= TOLERANCE
    gradients = page["gradients_of"](run)
    assert max(np.abs(g).max() for g in gradients.values()) > 1e-2, "the SGD step must move the weights"
    assert page["max_abs_difference"](gradients, page["gradients_of"](reference)) <= TOLERANCE
    assert equivalence_rows(page, runs)[framework][-1] == ("reference" if framework == "pytorch" else "agrees")


@pytest.mark.parametrize("framework", AVAILABLE)
def test_each_adam_step_is_its_conventions_closed_form(page, framework):
    run = page["runs"][framework]
    moved = page["max_abs_difference"](run.after_adam, page["initial_weights"])
    assert moved > TOLERANCE, "the Adam step must move the weights"
    assert page["adam_closed_form_difference"](run) <= 1  # the worst tensor, over its bound
    if "pytorch" in page["runs"] and run.adam_epsilon == page["runs"]["pytorch"].adam_epsilon:
        assert page["max_abs_difference"](run.after_adam, page["runs"]["pytorch"].after_adam) <= TOLERANCE


def test_the_conventions_are_the_documented_ones(page):
    """PyTorch and optax add ε after bias correction; Keras, MXNet and Chainer before."""
    after = {"pytorch", "jax"}
    for framework, run in page["runs"].items():
        expected = "after bias correction" if framework in after else "before bias correction"
        assert run.adam_epsilon == expected, framework
        assert run.embedding_gradient == ("sparse" if framework == "tensorflow" else "dense"), framework


def test_every_framework_agrees_and_the_reference_is_compared_with_nothing(page):
    needs_pytorch()
    verdicts = page["verdicts_of"](page["headers"], page["equivalence_rows"])
    assert verdicts == {name: "reference" if name == "pytorch" else "agrees" for name in AVAILABLE}


def test_a_framework_that_differs_or_reads_the_padding_stops_the_page(results):
    needs_pytorch()
    framework = AVAILABLE[-1]
    logits = np.asarray(results[framework]["logits"])[::-1]
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"logits": logits},
                                         r"section 'Equivalence'.*equivalence with PyTorch failed .*logits")
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"padded_difference": 1e-3},
                                         r"padding left unread failed for .*DIFFERS \(0\.001 > 1e-05\)")


def test_the_equivalence_verdict_fails_wrong_logits_gradients_and_counts(page):
    needs_pytorch()
    runs = dict(page["runs"])
    framework = AVAILABLE[-1]
    run = runs[framework]
    cases = {
        "logits": wrong(run, logits=run.logits[::-1]),
        "gradients": wrong(run, after_sgd=dict(run.after_sgd, **{
            "gru.weight_hh_l0": run.after_sgd["gru.weight_hh_l0"] + 1e-3})),
        "parameters": wrong(run, parameter_count=run.parameter_count - 300),  # Flax's GRUCell without b_hn
    }
    for column, case in cases.items():
        row = equivalence_rows(page, dict(runs, **{framework: case}))[framework]
        assert column in row[-1] and "DIFFERS" in row[-1], (column, row[-1])
        with pytest.raises(VerdictFailed, match=f"failed for {framework}"):
            page["require"]({framework: row[-1]}, "equivalence with PyTorch")


@pytest.mark.parametrize("framework", AVAILABLE)
def test_the_closed_form_tells_the_epsilon_conventions_apart(page, framework):
    run = page["runs"][framework]
    flipped = {"after bias correction": "before bias correction",
               "before bias correction": "after bias correction"}[run.adam_epsilon]
    assert page["adam_closed_form_difference"](wrong(run, adam_epsilon=flipped)) > 3


def test_three_percent_off_in_the_smallest_tensors_adam_step_stops_the_page(page, results):
    """Each tensor is held to its own step: 3% off the dense layer's bias (one number)
    fails the closed-form check, and the page stops."""
    needs_pytorch()
    framework = AVAILABLE[-1]
    initial = page["initial_weights"]
    run = page["runs"][framework]
    name = min(initial, key=lambda n: initial[n].size)
    assert name == "dense.bias"
    step = run.after_adam[name] - initial[name]
    after = dict(run.after_adam, **{name: initial[name] + 1.03 * step})
    assert page["adam_closed_form_difference"](wrong(run, after_adam=after)) > 1
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"after_adam": after},
                                         r"equivalence with PyTorch failed .*Adam step vs its closed form")


def test_keras_adam_squares_a_repeated_tokens_gradient_slices_apart(page):
    if "tensorflow" not in AVAILABLE:
        pytest.skip("Keras only")
    run = page["runs"]["tensorflow"]
    rows = page["repeated_tokens"]
    step = np.abs(run.after_adam["embedding.weight"][rows] - page["initial_weights"]["embedding.weight"][rows])
    # With v = (Σg)², Adam's first step cannot exceed the learning rate; with Σ(g²) it can.
    assert step.max() > page["LR"] * 1.01
    # Taken for a dense gradient, those rows fail the closed form.
    assert page["adam_closed_form_difference"](wrong(run, embedding_gradient="dense")) > 3


# --- Lessons: reading the state after the padding ----------------------------


def fresh_readout_difference(namespace, model, used):
    """Reviews the page never used (not in its test slice, not in ``used``), padded in one
    batch, against each run alone, through the tab's own predict_logits:
    (max abs difference, padded reviews checked)."""
    data, predict, to_device = namespace["data"], namespace["predict_logits"], namespace["to_device"]
    rng = np.random.default_rng(11)
    pool = np.setdiff1d(np.arange(namespace["N_TEST"], len(data.len_test)), used)
    padded = rng.choice(pool[data.len_test[pool] < 60], size=6, replace=False)
    chosen = np.concatenate([padded, rng.choice(pool, size=10, replace=False)])
    labels = data.y_test[chosen]
    in_batch = predict(model, to_device((data.x_test[chosen], data.len_test[chosen]), labels)[0])
    worst = 0.0
    for row, index in enumerate(padded):
        n = int(data.len_test[index])
        alone = (data.x_test[index : index + 1, :n], data.len_test[index : index + 1])
        logits = predict(model, to_device(alone, labels[row : row + 1])[0])
        worst = max(worst, float(np.max(np.abs(logits[0] - in_batch[row]))))
    return worst, len(padded)


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_a_padded_review_gives_its_logits_alone_in_every_framework(page, models, framework):
    run = page["runs"][framework]
    assert run.padded_difference <= page["PADDING_TOLERANCE"], "the page's own check"
    assert page["verdict"](run.padded_difference, page["PADDING_TOLERANCE"]) == "agrees"
    namespace = models[framework]
    worst, checked = fresh_readout_difference(namespace, namespace["model"], page["probe"])
    assert checked == 6
    assert worst <= page["PADDING_TOLERANCE"], "a padded review's logits must equal its logits alone"


def test_the_fresh_check_catches_a_model_that_reads_the_padding(page, models):
    if "pytorch" not in IN_PROCESS:
        pytest.skip("the step-150 reading is built in the PyTorch tab")
    namespace = models["pytorch"]
    mistaken, _, _ = namespace["make_training"](readout="step 150")
    worst, _ = fresh_readout_difference(namespace, mistaken, page["probe"])
    assert worst > 1e-3


def test_the_padding_verdict_fails_a_large_difference(page):
    assert page["verdict"](1e-2, page["PADDING_TOLERANCE"]).startswith("DIFFERS")


def test_the_padding_mistake_was_measured_once_against_the_page(page):
    needs_pytorch()
    mistake = page["runs"]["pytorch"].padding_mistake
    assert list(mistake) == ["last valid state (this page)", "step 150 (the reference)"]
    for result in mistake.values():
        assert all(0.0 <= accuracy <= 1.0 for accuracy in result.values())
    assert mistake["last valid state (this page)"]["all"] == page["runs"]["pytorch"].test_accuracy
    # On the stand-in, the short reviews carry the mistake: reading step 150 loses accuracy there.
    page_short = mistake["last valid state (this page)"]["shorter than 150"]
    assert mistake["step 150 (the reference)"]["shorter than 150"] < page_short
    for framework in AVAILABLE:  # the other parts measure nothing of it (tab_results_by_framework)
        if framework != "pytorch":
            assert "padding_mistake" not in page["runs"][framework]


def test_the_equivalence_check_runs_in_true_float32_and_timing_with_the_defaults(page):
    assert_true_float32_equivalence(page["runs"])


# --- Summary ----------------------------------------------------------------


def test_the_summary_shows_what_the_parts_computed(page, monkeypatch):
    """The Summary's bullets, as the page shows them, against the parts' own results; and a
    framework whose verdict failed is counted out."""
    needs_pytorch()
    summary = summary_shown(PAGE, page, monkeypatch)
    assert summary == "\n".join(f"- {line}" for line in page["SUMMARY"])  # what the page shows
    runs = page["runs"]
    assert summary.count("\n- ") == 5 and f"smoke profile on {runs['pytorch'].environment['device']}" in summary
    assert "data: synthetic stand-in, not IMDB (labelled synthetic data" in summary
    assert f"Parameters: {PARAMETERS:,} in all {len(AVAILABLE)} frameworks" in summary
    others = len(AVAILABLE) - 1
    assert f"Equivalence: {others} of {others} frameworks agree with PyTorch" in summary
    for convention in ("after bias correction", "before bias correction"):
        named = [fw for fw, run in runs.items() if run.adam_epsilon == convention]
        assert not named or f"{convention}: {', '.join(named)}" in summary, convention
    largest = max(run.padded_difference for run in runs.values())
    assert f"alone in {len(AVAILABLE)} of {len(AVAILABLE)} frameworks, within {largest:.1e}" in summary
    mistake = runs["pytorch"].padding_mistake
    cost = mistake["step 150 (the reference)"]["shorter than 150"] \
        - mistake["last valid state (this page)"]["shorter than 150"]
    assert f"on the shorter reviews by {cost:+.4f}" in summary
    for framework, run in runs.items():
        assert f"{framework} {page['reviews_per_second'][framework]:,.0f} (" in summary, framework
        assert f"{framework} {run.test_accuracy:.4f}" in summary, framework
    rows = [[*row[:-1], "DIFFERS (1 > 1e-05)"] if row[0] == "pytorch" else row for row in page["padding_rows"]]
    failed = summary_shown(PAGE, dict(page, padding_rows=rows), monkeypatch)
    assert f"alone in {len(AVAILABLE) - 1} of {len(AVAILABLE)} frameworks" in failed
    if others:
        framework = next(fw for fw in AVAILABLE if fw != "pytorch")
        rows = [[*row[:-1], "DIFFERS (1 > 0.0001)"] if row[0] == framework else row
                for row in page["equivalence_rows"]]
        failed = summary_shown(PAGE, dict(page, equivalence_rows=rows), monkeypatch)
        assert f"Equivalence: {others - 1} of {others} frameworks" in failed
