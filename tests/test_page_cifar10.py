"""The CIFAR-10 page's claims, checked through the code it shows.

Each framework's part of the page runs on its own, in its own process, as in
the book build (smoke profile, offline); the page's comparison cells then
build the equivalence, timing and dropout tables from what the parts left.
The page's own equivalence check is also fed wrong cases, which it must fail.
"""

from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS
from page_checks import (
    summary_shown,
    comparisons_as_built,
    parts_as_built,
    assert_a_failed_proof_stops_the_page,
    assert_true_float32_equivalence,
    smoke_offline,
)
from rosetta_book.bench.tasks import TASKS, page_configuration
from rosetta_book.chapter import load_chapter
from rosetta_proof.records import load_results
from rosetta_proof.tab_results import where_and_precision
from rosetta_proof.tab_results import TabRun
from rosetta_utils import FRAMEWORKS
from rosetta_utils.differences import max_abs_difference
from rosetta_utils.frameworks import is_installed
from rosetta_utils.transplant import flattened_dense_nhwc_to_nchw

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "cifar10_cnn.md"
PARAMETERS = 3_441_592

if "pytorch" not in AVAILABLE:
    pytest.skip("PyTorch is the page's yardstick", allow_module_level=True)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    """Where the page's Timing cell records its results during these tests."""
    return tmp_path_factory.mktemp("cifar10-results")


@pytest.fixture(scope="module")
def results():
    """What each framework's part left, each run in its own process as the build runs it."""
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(results_dir, results):
    """The page's comparison cells, run on what each framework's part left."""
    yield from comparisons_as_built(PAGE, results, results_dir)


@pytest.fixture(scope="module")
def tensorflow_part():
    """The TensorFlow part's namespace, run in this process, to call its own functions."""
    if "tensorflow" not in IN_PROCESS:
        pytest.skip("TensorFlow is not installed")
    patch = pytest.MonkeyPatch()
    smoke_offline(patch)
    try:
        yield load_chapter(PAGE, "tensorflow", until="Timing")
    finally:
        patch.undo()


def table_row(comparison, framework):
    """The page's equivalence table row of ``framework``, keyed by column title."""
    headers, rows = comparison["equivalence_headers"], comparison["equivalence_rows"]
    (row,) = [row for row in rows if row[0] == framework]
    return dict(zip(headers, row))


def rebuilt_table(comparison, framework, **changed):
    """The page's equivalence table for PyTorch and ``framework``, whose results are
    replaced by ``changed``."""
    runs = comparison["runs"]
    wrong = TabRun(framework, {**runs[framework].as_dict(), **changed})
    headers, rows = comparison["equivalence_table"](
        {"pytorch": runs["pytorch"], framework: wrong}, comparison["COLUMNS"], comparison["TOLERANCES"])
    verdicts = comparison["verdicts_of"](headers, rows)
    return [dict(zip(headers, row)) for row in rows], [name for name, text in verdicts.items()
                                                       if text not in ("agrees", "reference")]


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_framework_builds_the_reference_parameter_count(comparison, framework):
    assert comparison["runs"][framework].parameter_count == PARAMETERS == comparison["PARAMETERS"]
    assert table_row(comparison, framework)["parameters"] == PARAMETERS
    assert comparison["parameter_verdicts"][framework] == "agrees"  # the page's own LAYERS check


@pytest.mark.parametrize("framework", [name for name in AVAILABLE if name != "pytorch"])
def test_the_pages_table_says_each_framework_computes_pytorchs_function(comparison, framework):
    row = table_row(comparison, framework)
    assert row["verdict"] == "agrees"
    assert set(comparison["TOLERANCES"]) == {comparison[name] for name in ("LOGITS", "WEIGHTS", "UPDATE")}
    for title, tolerance in comparison["TOLERANCES"].items():
        assert 0 <= row[title] <= tolerance, f"{framework}: {title} = {row[title]}"


def test_the_reference_row_is_compared_with_nothing(comparison):
    row = table_row(comparison, "pytorch")
    assert row["verdict"] == "reference"
    assert all(row[title] == "reference" for title in comparison["TOLERANCES"])
    assert row["parameters"] == PARAMETERS


def test_a_framework_that_differs_stops_the_page(results):
    """The build stops on a failed proof: the comparison cells, run as the build runs them on
    one framework's logits moved by 1e-3 (ten times the bound), raise, naming the check."""
    framework = next(fw for fw in AVAILABLE if fw != "pytorch")
    moved = np.asarray(results[framework]["probe_logits"]) + 1e-3
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"probe_logits": moved},
                                         r"section 'Equivalence'.*equivalence with PyTorch failed for "
                                         rf"{framework}: {framework}: logits: max abs diff: DIFFERS \(0\.001")
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"parameter_count": PARAMETERS + 1},
                                         r"parameter count against LAYERS .*DIFFERS \(1 > 0\)")


def test_the_tolerances_are_tight(comparison):
    """The update's bound is float32's n·u for the longest gradient sum, under half a
    percent; its floor is two unit roundoffs of each tensor's largest weight."""
    assert comparison["TOLERANCE"] <= 1e-4 and comparison["TOLERANCES"][comparison["UPDATE"]] == 1.0
    assert comparison["UPDATE_RELATIVE"] == pytest.approx(64 * 32 * 32 * 2.0**-24)
    assert comparison["UPDATE_RELATIVE"] < 5e-3
    for name, weight in comparison["initial_weights"].items():
        assert comparison["UPDATE_FLOORS"][name] == pytest.approx(2 * 2.0**-24 * np.abs(weight).max())


@pytest.mark.parametrize("framework", AVAILABLE)
def test_the_step_moved_the_weights_by_more_than_the_tolerance(comparison, framework):
    moved = max_abs_difference(comparison["runs"][framework].weights_after_step, comparison["initial_weights"])
    assert moved > comparison["TOLERANCE"]
    assert comparison["largest_update"] > comparison["TOLERANCE"]


#: Ten balanced classes, and how far above chance two smoke epochs on the stand-in must get
#: every framework (measured when it was set: 0.36 to 0.52, TensorFlow lowest).
CHANCE, STAND_IN_MARGIN = 0.1, 0.15


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_framework_trained_and_was_tested(comparison, framework):
    run = comparison["runs"][framework]
    assert len(run.epoch_seconds) == comparison["EPOCHS"]
    assert all(isinstance(s, float) and s > 0 for s in run.epoch_seconds)
    assert isinstance(run.test_accuracy, float) and 0 <= run.test_accuracy <= 1
    assert isinstance(run.accuracy_dropout_on, float) and 0 <= run.accuracy_dropout_on <= 1
    if comparison["data"].synthetic:  # the stand-in is learnable: training must show it
        assert run.test_accuracy >= CHANCE + STAND_IN_MARGIN, (framework, run.test_accuracy)
    (row,) = [row for row in comparison["timing_rows"] if row[0] == framework]
    assert row[1] == where_and_precision(run)  # the device and the float32 mode the timing used
    assert row[2:] == [run.epoch_seconds[0], min(run.epoch_seconds[1:]),
                       comparison["images_per_epoch"] / min(run.epoch_seconds[1:]), run.test_accuracy]
    (row,) = [row for row in comparison["dropout_rows"] if row[0] == framework]
    assert row[1:3] == [run.test_accuracy, run.accuracy_dropout_on]


def test_results_resting_on_the_stand_in_say_so(comparison):
    data = comparison["data"]
    assert data.synthetic, "offline, the page runs on the synthetic stand-in"
    assert "stand-in" in comparison["DATA_NOTE"] and "stand-in" in comparison["STAND_IN"]
    assert comparison["DATA_NOTE"] in comparison["timing_headers"][-1]
    assert comparison["DATA_NOTE"] in comparison["dropout_headers"][1]


def test_the_timing_cell_records_one_result_per_framework(comparison, results_dir):
    records = load_results([results_dir], task="cifar10").records
    assert sorted(r["framework"] for r in records) == sorted(AVAILABLE)
    for record in records:
        run = comparison["runs"][record["framework"]]
        assert record["metrics"]["test_accuracy"] == run.test_accuracy
        assert record["metrics"]["first_epoch_seconds"] == run.epoch_seconds[0]
        assert record["device"] == run.environment["device"]
        assert record["profile"] == "smoke" and "SYNTHETIC" in record["config"]["data"]


def test_a_gradient_a_few_percent_off_fails_the_update_check(comparison):
    """The weights alone would let it pass; the update column is what catches it."""
    framework = next(fw for fw in AVAILABLE if fw != "pytorch")
    initial = comparison["initial_weights"]
    after = comparison["runs"][framework].weights_after_step
    compared = comparison["compared_layers"](comparison["runs"][framework], comparison["runs"]["pytorch"])
    updates = {name: after[name] - initial[name] for name in initial if name.split(".")[0] in compared}
    name = max(updates, key=lambda n: np.max(np.abs(updates[n])))  # the compared layer that moved most
    wrong = dict(after, **{name: initial[name] + 1.05 * updates[name]})
    (_, row), failing = rebuilt_table(comparison, framework, weights_after_step=wrong)
    assert failing == [framework]
    assert row[comparison["WEIGHTS"]] <= comparison["TOLERANCE"], "hidden in the weights"
    assert row[comparison["UPDATE"]] > 10
    assert comparison["UPDATE"] in row["verdict"] and comparison["WEIGHTS"] not in row["verdict"]


def test_three_percent_off_in_the_smallest_tensor_stops_the_page(results, comparison):
    """Held to its own scale, the smallest tensor's update cannot hide behind the largest:
    3% off in the last layer's bias (ten numbers) fails the check and stops the page."""
    framework = next(fw for fw in AVAILABLE if fw != "pytorch")
    initial = comparison["initial_weights"]
    after = comparison["runs"][framework].weights_after_step
    name = min(initial, key=lambda n: initial[n].size)
    assert name == "fc2.bias"
    wrong = dict(after, **{name: initial[name] + 1.03 * (after[name] - initial[name])})
    (_, row), failing = rebuilt_table(comparison, framework, weights_after_step=wrong)
    assert failing == [framework] and row["verdict"].startswith(comparison["UPDATE"])
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"weights_after_step": wrong},
                                         rf"equivalence with PyTorch failed for {framework}: "
                                         rf"{framework}: the step's update")


def test_weights_transplanted_without_the_flatten_reordering_fail(comparison, tensorflow_part):
    """Keras flattens NHWC: a first dense layer loaded in PyTorch's NCHW order computes
    another function, and the page's check says so."""
    initial = tensorflow_part["initial_weights"]
    # load_weights reorders fc1 from NCHW to NHWC; hand it the inverse, so that Keras gets
    # PyTorch's fc1 as it is, as a transplant that forgot the reordering would.
    unreordered = dict(initial, **{"fc1.weight": flattened_dense_nhwc_to_nchw(initial["fc1.weight"], 100, 8, 8)})
    logits, _, after = tensorflow_part["probe"](unreordered)
    (_, row), failing = rebuilt_table(comparison, "tensorflow", probe_logits=logits, weights_after_step=after)
    assert failing == ["tensorflow"]
    assert row[comparison["LOGITS"]] > 100 * comparison["TOLERANCE"]
    assert row["verdict"].startswith(comparison["LOGITS"])
    # and the page's own transplant, called the same way, agrees
    logits, _, after = tensorflow_part["probe"](initial)
    (_, row), failing = rebuilt_table(comparison, "tensorflow", probe_logits=logits, weights_after_step=after)
    assert failing == [] and row["verdict"] == "agrees"


def test_the_bench_finds_the_pages_configuration_in_pytorch(offline_smoke):
    namespace = load_chapter(PAGE, "pytorch", until="Training")
    name = page_configuration(namespace["make_training"], TASKS["cifar10"].alternatives["pytorch"])
    assert name == ("NHWC (channels_last)" if namespace["device"].type == "cpu" else "NCHW")


def test_the_bench_finds_the_pages_configuration_in_tensorflow(tensorflow_part):
    name = page_configuration(tensorflow_part["make_training"], TASKS["cifar10"].alternatives["tensorflow"])
    assert name == ("XLA on" if tensorflow_part["gpus"] else "XLA off")


def test_the_equivalence_check_runs_in_true_float32_and_timing_with_the_defaults(comparison):
    assert_true_float32_equivalence(comparison["runs"])


# ---- the Summary -----------------------------------------------------------------------


def test_the_summary_shows_what_the_parts_computed(comparison, monkeypatch):
    """The Summary's bullets, as the page shows them, against the parts' own results; and a
    framework whose verdict failed is counted out."""
    summary = summary_shown(PAGE, comparison, monkeypatch)
    assert summary == "\n".join(f"- {line}" for line in comparison["SUMMARY"])  # what the page shows
    runs = comparison["runs"]
    assert summary.count("\n- ") == 5 and f"smoke profile on {runs['pytorch'].environment['device']}" in summary
    assert "data: synthetic stand-in, not CIFAR-10 (labelled synthetic data" in summary
    assert f"Parameters: {PARAMETERS:,} in all {len(AVAILABLE)} frameworks" in summary
    others = len(AVAILABLE) - 1
    assert f"Equivalence: {others} of {others} frameworks compute PyTorch's function" in summary
    for framework, run in runs.items():
        steady = comparison["images_per_epoch"] / min(run.epoch_seconds[1:])
        assert f"{framework} {steady:,.0f} (later epoch" in summary, framework
        assert f"{framework} {run.test_accuracy:.4f}" in summary, framework
        assert f"{framework} {run.test_accuracy - run.accuracy_dropout_on:+.4f}" in summary, framework
    if others:
        framework = next(fw for fw in AVAILABLE if fw != "pytorch")
        rows = [[*row[:-1], "DIFFERS (1 > 0.0001)"] if row[0] == framework else row
                for row in comparison["equivalence_rows"]]
        failed = summary_shown(PAGE, dict(comparison, equivalence_rows=rows), monkeypatch)
        assert f"Equivalence: {others - 1} of {others} frameworks" in failed
        still = [fw for fw in AVAILABLE if fw not in ("pytorch", framework)]
        assert not still or f"PyTorch's function ({', '.join(still)}):" in failed


def test_a_decision_taken_otherwise_leaves_its_layer_and_those_before_it_uncompared(comparison):
    """A ReLU input moved across zero in conv3's output of one step image: conv3's update
    and those of conv1 and conv2 are no longer held to float32's bound (a gradient goes
    elsewhere there), conv4's, fc1's and fc2's still are, and the table says so. The same
    for a max pool's choice in conv4's output, which leaves only fc1 and fc2."""
    framework = next(fw for fw in AVAILABLE if fw != "pytorch")
    runs = comparison["runs"]
    assert comparison["compared_layers"](runs["pytorch"], runs["pytorch"]) == list(comparison["ORDER"])

    def outputs(change=None):
        """PyTorch's step outputs, one of them changed in place by ``change``."""
        copied = {name: array.copy() for name, array in runs["pytorch"].step_outputs.items()}
        if change:
            change(copied)
        return copied

    def window(order):
        def change(copied):  # conv4's first 2x2 window of image 0, channel 0
            copied["conv4"][0, 0, :2, :2] = order
        return change

    def flip(copied):
        copied["conv3"][3, 7, 5, 5] = -copied["conv3"][3, 7, 5, 5] or 1.0

    for (mine, theirs), layers, where in (((outputs(flip), outputs()), ["conv4", "fc1", "fc2"], "conv3 on 1"),
                                          ((outputs(window([[1.0, 2.0], [0.5, 0.25]])),
                                            outputs(window([[2.0, 1.0], [0.5, 0.25]]))), ["fc1", "fc2"],
                                           "conv4 on 1")):
        run = TabRun(framework, {**runs[framework].as_dict(), "step_outputs": mine})
        reference = TabRun("pytorch", {**runs["pytorch"].as_dict(), "step_outputs": theirs})
        assert comparison["compared_layers"](run, reference) == layers
        assert set(comparison["update_ratios"](run, reference)) == {
            f"{layer}.{kind}" for layer in layers for kind in ("weight", "bias")}
        shown = comparison["compared_on"](run, reference)
        assert shown.startswith(", ".join(layers)) and where in shown
