"""The IMDB GRU page's claims, checked through the code it shows (the chapter loader).

Each framework's page runs up to the Lessons' timing comparison (Setup, Data,
Model, Training, Evaluation, Equivalence, Timing and the padding lesson) in
the smoke profile, offline.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import assert_trained_and_tested, equivalence_table_rows, run_page_offline
from rosetta_utils import FRAMEWORKS
from rosetta_utils.frameworks import is_installed
from rosetta_utils.transplant import max_abs_difference

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "imdb_gru.md"
INSTALLED = [name for name in FRAMEWORKS if is_installed(name)]
PARAMETERS = 3_818_302
TOLERANCE = 1e-4


def fresh_readout_check(page):
    """Reviews the page never used (beyond its test slice), batched, against each run alone.

    Returns (max abs difference between a padded review's logits in the batch and
    its logits alone, number of padded reviews checked)."""
    data, predict, to_device, model = page["data"], page["predict_logits"], page["to_device"], page["model"]
    rng = np.random.default_rng(11)
    pool = np.arange(page["N_TEST"], len(data.len_test))
    short = pool[data.len_test[pool] < page["MAXLEN"]]
    padded = rng.choice(short, size=min(6, len(short)), replace=False)
    chosen = np.concatenate([padded, rng.choice(pool, size=10, replace=False)])
    labels = data.y_test[chosen]
    in_batch = predict(model, to_device((data.x_test[chosen], data.len_test[chosen]), labels)[0])
    worst = 0.0
    for row, index in enumerate(padded):
        length = int(data.len_test[index])
        alone = predict(model, to_device((data.x_test[index : index + 1, :length], data.len_test[index : index + 1]),
                                         labels[row : row + 1])[0])
        worst = max(worst, float(np.max(np.abs(alone[0] - in_batch[row]))))
    return worst, len(padded)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    """Where the page's Timing section records its results during these tests."""
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def runs(results_dir):
    """What each framework's run of the page produced (the big arrays left behind)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROSETTA_RESULTS_DIR", str(results_dir))
        return _run_page()


def _run_page():
    return run_page_offline(PAGE, INSTALLED, (
        "parameter_counts", "equivalence", "initial_weights", "epoch_seconds", "test_accuracy", "EPOCHS",
        "DATA_NOTE", "equivalence_rows", "padding_mistake", "readout_checks", "fast_paths",
        "adam_closed_form_difference", "repeated_tokens", "LR",
    ), until="Fast paths, layouts and compilation",
        derive=lambda page: {"synthetic": page["data"].synthetic, "fresh_readout": fresh_readout_check(page)})


@pytest.mark.parametrize("framework", INSTALLED)
def test_every_framework_builds_the_reference_parameter_count(runs, framework):
    assert runs[framework]["parameter_counts"] == {framework: PARAMETERS}


@pytest.mark.parametrize("framework", INSTALLED)
def test_transplanted_weights_give_pytorchs_logits_and_gradients(runs, framework):
    if "pytorch" not in runs:
        pytest.skip("PyTorch is the yardstick")
    ours, reference = runs[framework]["equivalence"][framework], runs["pytorch"]["equivalence"]["pytorch"]
    initial = runs[framework]["initial_weights"]
    assert np.max(np.abs(ours["logits"] - reference["logits"])) <= TOLERANCE
    # One SGD step at learning rate 1: the update is minus the gradient.
    assert max_abs_difference(reference["sgd"], initial) > TOLERANCE, "the step must move the weights"
    gradient_diff = max(np.max(np.abs((ours["sgd"][n] - initial[n]) - (reference["sgd"][n] - initial[n]))) for n in initial)
    assert gradient_diff <= TOLERANCE
    assert max_abs_difference(ours["sgd"], reference["sgd"]) <= TOLERANCE


@pytest.mark.parametrize("framework", INSTALLED)
def test_each_adam_step_is_its_conventions_closed_form(runs, framework):
    run = runs[framework]
    ours, initial = run["equivalence"][framework], run["initial_weights"]
    assert max_abs_difference(ours["adam"], initial) > TOLERANCE, "the Adam step must move the weights"
    assert run["adam_closed_form_difference"](ours, initial) <= TOLERANCE
    if "pytorch" in runs and ours["adam_epsilon"] == runs["pytorch"]["equivalence"]["pytorch"]["adam_epsilon"]:
        assert max_abs_difference(ours["adam"], runs["pytorch"]["equivalence"]["pytorch"]["adam"]) <= TOLERANCE


def test_the_closed_form_tells_the_epsilon_conventions_apart(runs):
    for framework, run in runs.items():
        ours, initial = dict(run["equivalence"][framework]), run["initial_weights"]
        ours["adam_epsilon"] = {"after bias correction": "before bias correction",
                                "before bias correction": "after bias correction"}[ours["adam_epsilon"]]
        assert run["adam_closed_form_difference"](ours, initial) > 3 * TOLERANCE, framework


def test_keras_adam_squares_a_repeated_tokens_gradient_slices_apart(runs):
    if "tensorflow" not in runs:
        pytest.skip("Keras only")
    run = runs["tensorflow"]
    after, before = run["equivalence"]["tensorflow"]["adam"]["embedding.weight"], run["initial_weights"]["embedding.weight"]
    rows = run["repeated_tokens"]
    # With v = (Σg)², Adam's first step cannot exceed the learning rate; with Σ(g²) it can.
    assert np.abs(after[rows] - before[rows]).max() > run["LR"] * 1.01


def test_the_pages_table_reports_the_same_differences(runs):
    if "pytorch" not in runs:
        pytest.skip("PyTorch is the yardstick")
    rows = equivalence_table_rows(runs)
    for framework, parameters, logits_diff, gradient_diff, epsilon_form, adam_diff, adam_own in rows:
        assert parameters == PARAMETERS and logits_diff <= TOLERANCE and gradient_diff <= TOLERANCE
        assert adam_own <= TOLERANCE, framework
        if epsilon_form == "after bias correction":
            assert adam_diff <= TOLERANCE, framework


@pytest.mark.parametrize("framework", INSTALLED)
def test_every_framework_trained_and_was_tested(runs, framework):
    run = runs[framework]
    assert_trained_and_tested(run, framework)
    assert run["fast_paths"][framework], "each tab names the GRU kernel that ran"


def test_each_run_recorded_its_result(runs, results_dir):
    import json

    records = [json.loads(line) for line in (results_dir / "imdb.jsonl").read_text().splitlines()]
    assert [record["framework"] for record in records] == list(runs)
    for record in records:
        run = runs[record["framework"]]
        assert record["metrics"]["test_accuracy"] == run["test_accuracy"][record["framework"]]
        assert record["metrics"]["sequences_per_second"] > 0
        assert record["config"]["gru_kernel"] == run["fast_paths"][record["framework"]]


@pytest.mark.parametrize("framework", INSTALLED)
def test_the_model_reads_each_reviews_last_valid_state(runs, framework):
    run = runs[framework]
    assert run["readout_checks"][framework] <= 1e-5, "the page's own check, on its shortest test review"
    worst, padded_reviews = run["fresh_readout"]
    assert padded_reviews > 0, "the check needs reviews that the batch pads"
    assert worst <= 1e-5, "a padded review's logits must equal its logits alone"


def test_the_padding_mistake_was_measured_against_the_page(runs):
    if "pytorch" not in runs:
        pytest.skip("the mistake is measured in the PyTorch tab")
    mistake = runs["pytorch"]["padding_mistake"]
    assert list(mistake) == ["last valid state (this page)", "step 150 (the reference)"]
    for result in mistake.values():
        assert all(0.0 <= accuracy <= 1.0 for accuracy in result.values())
    assert mistake["last valid state (this page)"]["all"] == runs["pytorch"]["test_accuracy"]["pytorch"]
