"""The ResNet-50 page's claims, checked through the code it shows.

Each framework's part of the page runs on its own, in its own process, as in
the book build (smoke profile, offline); the page's comparison cells then
build the variant, inference-check, equivalence and timing tables from what
the parts left. Each framework's Evaluation checks are also fed wrong cases
(extraction in training mode, extraction that records a graph), through the
part's own functions loaded in this process, and must fail them.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import (comparisons_as_built, parts_as_built, AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, assert_a_failed_proof_stops_the_page,
                      assert_true_float32_equivalence, in_a_process_of_its_own, smoke_offline)
from rosetta_utils import FRAMEWORKS
from rosetta_book.bench.tasks import TASKS, page_configuration
from rosetta_book.chapter import load_chapter
from rosetta_utils.equivalence import VerdictFailed
from rosetta_utils.frameworks import is_installed
from rosetta_utils.results import load_results
from rosetta_utils.tab_results import TabRun

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "resnet50_features.md"
TORCHVISION_PARAMETERS = 23_508_032  # ResNet-50 without its classifier
CONV_BIASES = {"pytorch": 0, "tensorflow": 26_560, "jax": 0, "mxnet": 18_880, "chainer": 64}
PAGE_CONFIGURATIONS = {"pytorch": "NHWC, torch.compile", "tensorflow": "NHWC, XLA off", "jax": "jit",
                       "mxnet": "hybridized, oneDNN fusion", "chainer": "numpy (only path)"}  # on a CPU

if "pytorch" not in AVAILABLE:
    pytest.skip("PyTorch is the page's yardstick", allow_module_level=True)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    """Where the page's Timing cell records its results during these tests."""
    return tmp_path_factory.mktemp("resnet50-results")


@pytest.fixture(scope="module")
def results():
    """What each framework's part left, each run in its own process as the build runs it."""
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(results_dir, results):
    """The page's comparison cells, run on what each framework's part left."""
    yield from comparisons_as_built(PAGE, results, results_dir)


def load_part(framework, until):
    """``framework``'s part of the page, run in this process up to the section ``until``."""
    patch = pytest.MonkeyPatch()
    smoke_offline(patch)
    try:
        return load_chapter(PAGE, framework, until=until)
    finally:
        patch.undo()


def row_of(headers, rows, framework):
    (row,) = [row for row in rows if row[0] == framework]
    return dict(zip(headers, row))


# --- Model: the variants and the parameter counts ------------------------------------------


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_framework_builds_v1_with_torchvisions_parameters(comparison, framework):
    run = comparison["runs"][framework]
    assert run.variant_facts["stride in"] == "1x1"
    assert run.conv_bias_count == CONV_BIASES[framework]
    assert run.parameter_count - run.conv_bias_count == TORCHVISION_PARAMETERS
    row = row_of(comparison["equivalence_headers"], comparison["equivalence_rows"], framework)
    assert row["parameters - conv biases, vs PyTorch"] == (0 if framework != "pytorch" else "reference")


def test_the_shipped_models_differ_where_the_page_says(comparison):
    """Read from the objects: Keras's and Chainer's epsilons are not PyTorch's 1e-5, and
    Chainer's max-pool has no padding."""
    facts = {fw: run.variant_facts for fw, run in comparison["runs"].items()}
    assert facts["pytorch"]["batch-norm epsilon"] == pytest.approx(1e-5)
    if "tensorflow" in facts:
        assert facts["tensorflow"]["batch-norm epsilon"] == pytest.approx(1.001e-5)
        assert facts["tensorflow"]["convolution biases"] is True
    if "chainer" in facts:
        assert facts["chainer"]["batch-norm epsilon"] == pytest.approx(2e-5)
        assert "pad" not in facts["chainer"]["stem padding"].split("max-pool")[1]
    names = comparison["fact_names"]
    assert [row[0] for row in comparison["fact_rows"]] == list(facts)
    assert all(row[1:] == [facts[row[0]][name] for name in names] for row in comparison["fact_rows"])


# --- Equivalence -------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", [name for name in AVAILABLE if name != "pytorch"])
def test_transplanted_weights_give_pytorchs_features(comparison, framework):
    run = comparison["runs"][framework]
    assert run.probe_features.shape == (comparison["BATCH"], 2048)
    row = row_of(comparison["equivalence_headers"], comparison["equivalence_rows"], framework)
    assert row["verdict"] == "agrees"
    assert 0 <= row["relative to mean |feature|"] <= comparison["TOLERANCE"] <= 1e-3


def test_the_reference_row_is_compared_with_nothing(comparison):
    row = row_of(comparison["equivalence_headers"], comparison["equivalence_rows"], "pytorch")
    assert row["verdict"] == row["relative to mean |feature|"] == "reference"


def test_a_failed_proof_stops_the_page(results):
    """Features of another image, training mode, a recorded graph: each stops the page."""
    framework = next(fw for fw in AVAILABLE if fw != "pytorch")
    run = results[framework]
    other = np.asarray(run["probe_features"])[::-1]
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"probe_features": other},
                                         r"equivalence with PyTorch failed for .*relative to mean")
    checks = dict(run["inference_checks"])
    assert_a_failed_proof_stops_the_page(PAGE, results, framework,
                                         {"inference_checks": {**checks, "alone vs in a batch": 0.5}},
                                         r"section 'Evaluation'.*test mode failed for .*DIFFERS \(0\.5")
    assert_a_failed_proof_stops_the_page(PAGE, results, framework,
                                         {"inference_checks": {**checks, "graph recorded": True}},
                                         r"no autograd graph failed for .*RECORDED")


def test_the_equivalence_check_fails_wrong_features_and_counts(comparison):
    """Features in another order, or one parameter too many, are caught by the page's table."""
    runs = comparison["runs"]
    framework = next(fw for fw in AVAILABLE if fw != "pytorch")
    cases = {
        "features of another image": {"probe_features": runs[framework].probe_features[::-1]},
        "a parameter too many": {"parameter_count": runs[framework].parameter_count + 1},
    }
    for case, changed in cases.items():
        wrong = TabRun(framework, {**runs[framework].as_dict(), **changed})
        headers, rows = comparison["equivalence_table"](
            {"pytorch": runs["pytorch"], framework: wrong}, comparison["COLUMNS"], comparison["TOLERANCES"])
        verdicts = comparison["verdicts_of"](headers, rows)
        assert verdicts == {"pytorch": "reference", framework: verdicts[framework]} != {}, case
        with pytest.raises(VerdictFailed, match=f"failed for {framework}"):
            comparison["require"](verdicts, "equivalence with PyTorch")
        assert row_of(headers, rows, framework)["verdict"].count("DIFFERS") == 1, case


@pytest.fixture(scope="module")
def chainer_part():
    """Chainer's part up to its Timing section (its Equivalence cell runs the shipped model)."""
    if "chainer" not in IN_PROCESS:
        pytest.skip("needs Chainer in this process (the legacy environment)")
    return load_part("chainer", until="Timing")


@pytest.mark.legacy
def test_chainers_own_max_pool_computes_a_different_function(comparison, chainer_part):
    part = chainer_part
    adapted = part["probe_features"][:4]
    np.testing.assert_allclose(adapted, comparison["runs"]["pytorch"].probe_features[:4],
                               rtol=0, atol=1e-3 * np.abs(adapted).mean())
    assert comparison["relative_difference"](part["shipped_features"], adapted) > 1e-2
    assert part["pool_change"] == pytest.approx(comparison["relative_difference"](part["shipped_features"], adapted))


# --- Evaluation: test mode and no graph, and their wrong cases ---------------------------------


@pytest.mark.parametrize("framework", AVAILABLE)
def test_inference_runs_in_test_mode_without_a_graph(comparison, framework):
    checks = comparison["runs"][framework].inference_checks
    assert 0 <= checks["alone vs in a batch"] <= comparison["BATCH_TOLERANCE"]
    assert checks["graph recorded"] is False
    row = row_of(["framework", "dependence", "test mode", "graph"], comparison["inference_rows"], framework)
    assert row["test mode"] == "agrees" and row["graph"] == "none recorded"


#: Images the wrong cases run on: a few are enough to see batch statistics (a whole
#: batch of eager ResNet-50 in training mode holds gigabytes).
WRONG_CASE_IMAGES = 4


def wrong_extractions(framework, part):
    """Two extractions the page must not do, built from the part's own code: one in
    training mode, one that records a graph. Returns ``(train_mode, recording, run)``,
    where ``run(check, extract)`` calls a check in the context the wrong case needs."""
    images, weights = part["images"][:WRONG_CASE_IMAGES], part["weights"]
    plain = lambda check, extract: check(extract, images)  # noqa: E731
    if framework == "pytorch":
        import torch

        model, extract = part["make_resnet50"](compile=False)  # eager: no recompiling for .train()
        part["load_weights"](model, weights)
        recording = lambda batch: model(torch.from_numpy(batch))  # noqa: E731 - autograd on
        model.train()
        return extract, recording, plain
    if framework == "tensorflow":
        model = part["model"]
        return (lambda batch: model(batch.transpose(0, 2, 3, 1), training=True),
                lambda batch: model(batch.transpose(0, 2, 3, 1), training=False), plain)
    if framework == "jax":
        import jax
        import jax.numpy as jnp

        # nnx.jit refuses to run under jax.grad on a model made outside it; the eager path
        # is differentiable, and under jax.grad its output is a tracer
        model, eager = part["make_resnet50"](jit=False)
        part["load_weights"](model, weights)

        def under_grad(check, extract):
            seen = []
            jax.grad(lambda x: (seen.append(check(extract, x)), jnp.sum(x))[1])(jnp.asarray(images[:2]))
            return seen[0]

        def train_mode(batch):
            part["model"].train()
            return part["extract_features"](batch)

        def run(check, extract):
            return under_grad(check, extract) if extract is eager else plain(check, extract)

        return train_mode, eager, run
    if framework == "mxnet":
        from mxnet import autograd

        # the fused graph has batch norm folded into the convolutions: train on the imperative
        # model, where batch norm still reads its mode
        model, imperative = part["make_resnet50"](hybridize=False, fuse=False)
        part["load_weights"](model, weights)

        def run(check, extract):
            if extract is imperative:
                with autograd.train_mode():
                    return check(extract, images)
            with autograd.record(train_mode=False):
                return check(extract, images)

        return imperative, part["extract_features"], run
    if framework == "chainer":
        model = part["model"]
        default_config = lambda batch: model(batch, layers=["pool5"])["pool5"]  # noqa: E731 - train, backprop
        return default_config, default_config, plain
    raise AssertionError(framework)


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_inference_checks_fail_training_mode_and_a_recorded_graph(comparison, framework, request):
    if not in_a_process_of_its_own(request):  # a whole ResNet-50 of each framework, in turn
        return
    if framework == "chainer":  # loaded once for this test and the max-pool's
        part = request.getfixturevalue("chainer_part")
    else:
        part = load_part(framework, until="Equivalence")
    tolerance = comparison["BATCH_TOLERANCE"]
    # the part's own extraction passes both, in this process too
    assert part["batch_dependence"](part["extract_features"], part["images"]) <= tolerance
    assert part["records_a_graph"](part["extract_features"], part["images"]) is False
    train_mode, recording, run = wrong_extractions(framework, part)
    dependence = run(part["batch_dependence"], train_mode)
    assert dependence > 100 * tolerance, f"{framework}: training mode went unnoticed ({dependence})"
    recorded = run(part["records_a_graph"], recording)
    assert recorded is True, f"{framework}: a recorded graph went unnoticed"
    fw, _, test_mode, graph = comparison["inference_row"](
        framework, {"alone vs in a batch": dependence, "graph recorded": recorded})
    assert test_mode.startswith("DIFFERS") and graph.startswith("RECORDED")


# --- Timing and the benchmark ------------------------------------------------------------------


def test_the_timing_cell_records_one_result_per_framework(comparison, results_dir):
    records = load_results([results_dir], task="resnet50").records
    assert sorted(r["framework"] for r in records) == sorted(AVAILABLE)
    n_timed = comparison["N_BATCHES"] * comparison["BATCH"]
    for record in records:
        run = comparison["runs"][record["framework"]]
        assert run.timed_features.shape == (n_timed, 2048)
        assert record["metrics"]["seconds_per_1000_images"] == pytest.approx(run.timed_seconds / n_timed * 1000)
        assert record["metrics"]["images_per_second"] == pytest.approx(n_timed / run.timed_seconds)
        assert record["metrics"]["peak_megabytes"] == run.peak_memory_mb > 0
        assert record["device"] == run.environment["device"]
        assert record["profile"] == "smoke" and "SYNTHETIC" in record["config"]["data"]
    assert [row[0] for row in comparison["timing_rows"]] == list(comparison["runs"])


def test_the_timed_features_agree_and_the_probe_runs(comparison):
    """The timed batches are the same function too, so every framework's probe agrees."""
    runs = comparison["runs"]
    reference = runs["pytorch"].timed_features
    for framework, run in runs.items():
        assert comparison["relative_difference"](run.timed_features, reference) <= comparison["TOLERANCE"]
    accuracies = {fw: accuracy for fw, (accuracy, _) in comparison["probes"].items()}
    assert set(accuracies) == set(runs) and all(0 <= a <= 1 for a in accuracies.values())
    assert "stand-in" in comparison["DATA_NOTE"]


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_bench_finds_the_pages_configuration(framework, request):
    if not in_a_process_of_its_own(request):  # the models, and PyTorch's process-wide switches
        return
    part = load_part(framework, until=TASKS["resnet50"].stop_before)
    alternatives = TASKS["resnet50"].alternatives[framework]
    expected = PAGE_CONFIGURATIONS[framework]
    if framework == "mxnet" and part["ctx"].device_type != "cpu":
        expected = "hybridized"  # oneDNN's fusion is a CPU path
    assert page_configuration(part["make_resnet50"], alternatives) == expected
    assert len(TASKS["resnet50"].inputs(part)[0]) == part["BATCH"]


def test_the_equivalence_check_runs_in_true_float32_and_timing_with_the_defaults(comparison):
    assert_true_float32_equivalence(comparison["runs"])
