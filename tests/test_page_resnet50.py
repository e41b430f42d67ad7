"""The ResNet-50 page's claims, checked through the code it shows.

Each framework's part of the page runs on its own, in its own process, as in
the book build (smoke profile, offline), with weights in the published file's
exact layout (Keras's ResNet-50 file: its layer names, weight names and
shapes, random values) that a server on 127.0.0.1 served and the page's own
loader fetched, verified and converted into a fresh data cache (under ``make
test``, the test build ran the page on that file, and its parts are taken
from the build: :mod:`served_resnet50`); the page's
comparison cells then build the variant, inference-check, equivalence,
pretrained, timing and transfer tables from what the parts left. The same
comparisons run again offline with an empty cache, where the weights are the
labelled stand-in. Each framework's Evaluation checks (the page's own
functions, whose values on the real extraction the parts left) are also fed
wrong cases on a tiny network with batch norm (extraction in training mode,
extraction that records a graph), and must fail them.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import TEST_ENVIRONMENT, AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS
from page_checks import (
    summary_shown,
    assert_a_failed_proof_stops_the_page,
    assert_true_float32_equivalence,
    in_a_process_of_its_own,
    smoke_offline,
)
from rosetta_book.bench.tasks import TASKS, page_configuration
from rosetta_book.chapter import BUILD_CACHE_VARIABLE, load_chapter, load_comparisons, run_framework_parts
from rosetta_proof.equivalence import VerdictFailed
from rosetta_proof.records import load_results
from rosetta_proof.tab_results import TabRun, load_tab_results, save_tab_results
from rosetta_utils.data.standins import STAND_IN_MARK
from rosetta_utils.image_crops import center_crops
from rosetta_utils.pretrained import MIRROR_VARIABLE, downloads_allowed
from served_resnet50 import BUILD_SERVED_VARIABLE, served_resnet50

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "resnet50_features.md"
TORCHVISION_PARAMETERS = 23_508_032  # ResNet-50 without its classifier
CONV_BIASES = {"pytorch": 0, "tensorflow": 26_560, "jax": 0, "mxnet": 18_880, "chainer": 64}
PAGE_CONFIGURATIONS = {"pytorch": "NHWC, torch.compile", "tensorflow": "NHWC, XLA off", "jax": "jit",
                       "mxnet": "hybridized, oneDNN fusion", "chainer": "numpy (only path)"}  # on a CPU
#: Where this module's parts left their results, for the pytest processes it starts
#: (in_a_process_of_its_own), which take them instead of running all five again.
PARTS_VARIABLE = "ROSETTA_TEST_RESNET50_PARTS"

if "pytorch" not in AVAILABLE:
    pytest.skip("PyTorch is the page's yardstick", allow_module_level=True)


@pytest.fixture(scope="module")
def served_weights(tmp_path_factory):
    """A file in the published layout (seeded random values, non-zero convolution biases),
    served on 127.0.0.1 and fetched by the page's loader into a fresh cache
    (:mod:`served_resnet50`). Under ``make test``, the one its test build ran the page on
    (``builds``: the parts are that build's); else one of this module's own, whose parts it
    runs itself. None in a legacy run without the build's: its tests then check MXNet's and
    Chainer's parts in this process against the book build's parts (whatever weights that
    build had, taken from its cache)."""
    prepared = os.environ.get(BUILD_SERVED_VARIABLE)
    if prepared:
        return dict(served_resnet50(prepared), builds=True)
    if TEST_ENVIRONMENT == "legacy":
        return None
    return dict(served_resnet50(tmp_path_factory.mktemp("resnet50-weights")), builds=False)


def served_environment(patch, served):
    """The build's environment (smoke, offline) with the served file in the data cache, named
    by the mirror variable; the parts are taken from the book build's cache only where that
    build ran on the same file. Without a served file (None), the build's own environment."""
    smoke_offline(patch)
    if served is None:
        return
    patch.setenv("ROSETTA_DATA_DIR", str(served["cache"]))
    patch.setenv(MIRROR_VARIABLE, served["mirror"])
    if not served["builds"]:
        patch.delenv(BUILD_CACHE_VARIABLE, raising=False)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    """Where the page's Timing cell records its results during these tests."""
    return tmp_path_factory.mktemp("resnet50-results")


@pytest.fixture(scope="module")
def results(served_weights, tmp_path_factory):
    """What each framework's part left, each run in its own process as the build runs it,
    with the served weights (under ``make test``: the parts its build ran on them)."""
    saved = os.environ.get(PARTS_VARIABLE)
    if saved and Path(saved).is_dir():
        yield {framework: run.as_dict() for framework, run in load_tab_results(saved).items()}
        return
    with pytest.MonkeyPatch.context() as patch:
        served_environment(patch, served_weights)
        parts = run_framework_parts(PAGE, AVAILABLE, at_once=2)  # no test reads a timing
    folder = tmp_path_factory.mktemp("resnet50-parts")
    for framework, values in parts.items():
        save_tab_results(values, folder, framework)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PARTS_VARIABLE, str(folder))
        yield parts


@pytest.fixture(scope="module")
def comparison(results_dir, results, served_weights):
    """The page's comparison cells, run on what each framework's part left."""
    with pytest.MonkeyPatch.context() as patch:
        served_environment(patch, served_weights)
        patch.setenv("ROSETTA_RESULTS_DIR", str(results_dir))
        yield load_comparisons(PAGE, results)


@pytest.fixture(scope="module")
def standin_results_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("resnet50-standin-results")


@pytest.fixture(scope="module")
def standin_comparison(results, standin_results_dir, tmp_path_factory):
    """The comparison cells offline with an empty data cache: the weights are the stand-in."""
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch, standin_results_dir)
        patch.setenv("ROSETTA_DATA_DIR", str(tmp_path_factory.mktemp("resnet50-empty-cache")))
        patch.delenv(MIRROR_VARIABLE, raising=False)
        yield load_comparisons(PAGE, results)


def load_part(framework, until, served=None):
    """``framework``'s part of the page, run in this process up to the section ``until``
    (with the served weights if given, else offline's stand-in)."""
    patch = pytest.MonkeyPatch()
    served_environment(patch, served)
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
    """The variant each framework ships (torchvision's is v1.5), and the page's v1 everywhere."""
    run = comparison["runs"][framework]
    assert run.variant_facts["stride in"] == ("3x3" if framework == "pytorch" else "1x1")
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


def test_chainers_own_max_pool_computes_a_different_function(comparison):
    """Chainer's shipped ResNet-50 with the page's weights, as the build's Chainer part ran it
    (its Equivalence cell leaves ``shipped_features`` and ``pool_change``): not the function
    the page's adapted model and PyTorch compute."""
    if "chainer" not in comparison["runs"]:
        pytest.skip("needs the build's Chainer part (the legacy environment)")
    part = comparison["runs"]["chainer"]
    adapted = part.probe_features[:4]
    np.testing.assert_allclose(adapted, comparison["runs"]["pytorch"].probe_features[:4],
                               rtol=0, atol=1e-3 * np.abs(adapted).mean())
    shipped = comparison["relative_difference"](part.shipped_features, adapted)
    assert shipped > 1e-2
    assert part.pool_change == pytest.approx(shipped)


# --- Evaluation: test mode and no graph, and their wrong cases ---------------------------------


@pytest.mark.parametrize("framework", AVAILABLE)
def test_inference_runs_in_test_mode_without_a_graph(comparison, framework):
    checks = comparison["runs"][framework].inference_checks
    assert 0 <= checks["alone vs in a batch"] <= comparison["BATCH_TOLERANCE"]
    assert checks["graph recorded"] is False
    row = row_of(["framework", "dependence", "test mode", "graph"], comparison["inference_rows"], framework)
    assert row["test mode"] == "agrees" and row["graph"] == "none recorded"


#: The wrong cases' images: a batch of four 8-by-8 images through a tiny network with batch norm.
TINY_IMAGES = np.random.default_rng(7).normal(size=(4, 3, 8, 8)).astype(np.float32)


def page_checks(framework):
    """The page's own ``batch_dependence`` and ``records_a_graph`` of ``framework``'s tab: its
    Setup run through the chapter loader (the framework's imports and their fixes), then the
    two functions' definitions from its Evaluation cell, with ``BATCH`` the tiny batch's."""
    import ast

    from rosetta_book.page import Page

    namespace = load_part(framework, until="Data")
    page = Page.read(PAGE)
    definitions = [node for _, source in page.code_cells(page.framework_part(framework))
                   for node in ast.parse(source).body
                   if isinstance(node, ast.FunctionDef) and node.name in ("batch_dependence", "records_a_graph")]
    assert len(definitions) == 2, framework
    namespace["BATCH"] = len(TINY_IMAGES)
    exec(compile(ast.Module(definitions, type_ignores=[]), str(PAGE), "exec"), namespace)
    return namespace["batch_dependence"], namespace["records_a_graph"]


def tiny_extractions(framework):
    """A tiny network with batch norm (convolution, batch norm, flatten), extracted three
    ways: as the page extracts (test mode, nothing recorded), in training mode (batch
    statistics), and recording a graph. Returns ``(right, train_mode, recording, run)``,
    where ``run(check, extract)`` calls one of the page's checks on the tiny images in the
    context the extraction needs."""
    images = TINY_IMAGES
    plain = lambda check, extract: check(extract, images)  # noqa: E731
    if framework == "pytorch":
        import torch

        net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten())

        def right(batch):
            net.eval()
            with torch.inference_mode():
                return net(torch.from_numpy(batch))

        def train_mode(batch):
            net.train()
            with torch.no_grad():
                return net(torch.from_numpy(batch))

        def recording(batch):
            net.eval()
            return net(torch.from_numpy(batch))

        return right, train_mode, recording, plain
    if framework == "tensorflow":
        import keras

        net = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3), keras.layers.BatchNormalization(),
                                keras.layers.Flatten()])
        return (lambda batch: net.predict_on_batch(batch.transpose(0, 2, 3, 1)),
                lambda batch: net(batch.transpose(0, 2, 3, 1), training=True),
                lambda batch: net(batch.transpose(0, 2, 3, 1), training=False), plain)
    if framework == "jax":
        import jax
        import jax.numpy as jnp
        from flax import nnx

        class Tiny(nnx.Module):
            def __init__(self, rngs):
                self.conv = nnx.Conv(3, 4, (3, 3), padding="VALID", rngs=rngs)
                self.norm = nnx.BatchNorm(4, rngs=rngs)

            def __call__(self, x):
                return self.norm(self.conv(x)).reshape((x.shape[0], -1))

        tested, trained = Tiny(nnx.Rngs(0)), Tiny(nnx.Rngs(0))
        tested.eval()  # modes set here: a module's attributes cannot change under jax.grad
        trained.train()

        def right(batch):
            return tested(jnp.transpose(jnp.asarray(batch), (0, 2, 3, 1)))

        def train_mode(batch):
            return trained(jnp.transpose(jnp.asarray(batch), (0, 2, 3, 1)))

        def run(check, extract):
            if extract is not recording:
                return plain(check, extract)
            # under jax.grad the extraction's output is a tracer: what recording looks like in JAX
            seen = []
            jax.grad(lambda x: (seen.append(check(extract, x)), jnp.sum(x))[1])(jnp.asarray(images))
            return seen[0]

        def recording(batch):  # the page's extraction, run (below) where a gradient is taken
            return right(batch)

        return right, train_mode, recording, run
    if framework == "mxnet":
        from mxnet import autograd, gluon, nd

        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Conv2D(4, 3), gluon.nn.BatchNorm(), gluon.nn.Flatten())
        net.initialize()
        right = lambda batch: net(nd.array(batch))  # noqa: E731 - predict mode, nothing recorded
        train_mode = lambda batch: net(nd.array(batch))  # noqa: E731
        recording = lambda batch: net(nd.array(batch))  # noqa: E731

        def run(check, extract):
            if extract is train_mode:
                with autograd.train_mode():
                    return check(extract, images)
            if extract is recording:
                with autograd.record(train_mode=False):
                    return check(extract, images)
            return check(extract, images)

        return right, train_mode, recording, run
    if framework == "chainer":
        import chainer
        import chainer.links as L

        net = chainer.Sequential(L.Convolution2D(3, 4, 3), L.BatchNormalization(4))

        def right(batch):
            with chainer.using_config("train", False), chainer.no_backprop_mode():
                return net(batch)

        default_config = lambda batch: net(batch)  # noqa: E731 - chainer's defaults: train, backprop
        return right, default_config, default_config, plain
    raise AssertionError(framework)


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_page_checks_its_own_extraction_with_its_checks(framework):
    """What the wrong cases below feed: the page's checks, applied in its Evaluation cell to
    the extraction its tab uses (whose values the build's parts left: the test above)."""
    from rosetta_book.page import Page

    page = Page.read(PAGE)
    cells = [source for _, source in page.code_cells(page.framework_part(framework)) if "def batch_dependence" in source]
    assert len(cells) == 1
    for call in ('"alone vs in a batch": batch_dependence(extract_features, images)',
                 '"graph recorded": records_a_graph(extract_features, images)'):
        assert call in cells[0], (framework, call)


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_inference_checks_fail_training_mode_and_a_recorded_graph(comparison, framework):
    """The page's own checks, on a tiny network with batch norm: they pass it extracted as
    the page extracts, and fail it in training mode and recording a graph; the table's
    verdicts then say so."""
    batch_dependence, records_a_graph = page_checks(framework)
    right, train_mode, recording, run = tiny_extractions(framework)
    tolerance = comparison["BATCH_TOLERANCE"]
    assert run(batch_dependence, right) <= tolerance
    assert run(records_a_graph, right) is False
    dependence = run(batch_dependence, train_mode)
    assert dependence > 100 * tolerance, f"{framework}: training mode went unnoticed ({dependence})"
    recorded = run(records_a_graph, recording)
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
        assert STAND_IN_MARK in record["config"]["weights"]  # not the published file
    assert [row[0] for row in comparison["timing_rows"]] == list(comparison["runs"])


def test_the_timed_features_agree_and_the_transfer_agrees_because_they_do(comparison):
    """The timed batches are the same function too, so every framework's linear classifier,
    fitted on its own training features, predicts what PyTorch's predicts."""
    runs = comparison["runs"]
    reference = runs["pytorch"].timed_features
    for framework, run in runs.items():
        assert comparison["relative_difference"](run.timed_features, reference) <= comparison["TOLERANCE"]
        assert run.train_features.shape == (comparison["N_TRAIN"], 2048)
        assert comparison["relative_difference"](run.train_features, runs["pytorch"].train_features) <= \
            comparison["TOLERANCE"]
    rows = {row[0]: row for row in comparison["probe_rows"]}
    assert set(rows) == set(runs) and rows["pytorch"][2:] == ["reference", "reference"]
    for framework, row in rows.items():
        assert 0 <= row[1] <= 1
        if framework != "pytorch":
            assert row[3] == "agrees" and row[2] <= comparison["PROBE_TOLERANCE"]
    assert len(comparison["test_labels"]) == comparison["N_BATCHES"] * comparison["BATCH"]
    assert "stand-in" in comparison["DATA_NOTE"] and "mechanics only" in comparison["TRANSFER_NOTE"]


def test_the_transfers_classifier_learns_and_its_check_fails_other_predictions(comparison, results):
    """On separable features the page's classifier finds the classes; a framework whose test
    features belong to other images predicts other classes, and that stops the page."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 1, (10, 2048))
    train_labels, test_labels = np.arange(200) % 10, np.arange(100) % 10
    fit = comparison["fit_linear_probe"](centres[train_labels] + rng.normal(0, 0.3, (200, 2048)), train_labels)
    assert (fit(centres[test_labels] + rng.normal(0, 0.3, (100, 2048))) == test_labels).mean() > 0.9
    framework = next(fw for fw in AVAILABLE if fw != "pytorch")
    shuffled = np.asarray(results[framework]["timed_features"])[np.random.default_rng(1).permutation(
        len(comparison["test_labels"]))]
    assert_a_failed_proof_stops_the_page(PAGE, results, framework, {"timed_features": shuffled},
                                         r"section 'Transfer: what the features are for'.*the transfer's predictions failed for .*DIFFERS")


# --- Weights: the published file's loader, the preprocessing, each framework's own ---------------


def test_the_served_file_is_fetched_verified_converted_and_transplanted_into_all_five(comparison, results,
                                                                                      served_weights):
    """The page's loader took the served file from the cache its first fetch filled, converted
    it to the canonical layout (biases folded), and Keras's own model, reading that same file,
    computes the transplant's features (so every framework agreeing with PyTorch means every
    framework holds the served weights)."""
    imagenet = comparison["imagenet"]
    assert imagenet.path == served_weights["fetched"].path and imagenet.md5 == served_weights["md5"]
    for name, array in served_weights["canonical"].items():
        np.testing.assert_allclose(imagenet.weights[name], array, rtol=0, atol=1e-6)
    row = row_of(comparison["own_headers"], comparison["own_rows"], "tensorflow")
    assert row["features vs this page's transplant"].startswith("agrees (")
    assert comparison["same_file_verdicts"] == {"tensorflow": "agrees"}
    keras_own = comparison["runs"]["tensorflow"]
    assert keras_own.own_features.shape == (comparison["BATCH"], 2048)
    assert comparison["relative_difference"](keras_own.own_features, keras_own.probe_features) <= 1e-4
    other = np.asarray(keras_own.own_features)[::-1]
    assert_a_failed_proof_stops_the_page(PAGE, results, "tensorflow", {"own_features": other},
                                         r"Keras's own model against the transplant failed for tensorflow.*DIFFERS")


def test_a_file_other_than_the_published_one_is_labelled_a_stand_in(comparison):
    """The served file is intact but not the published one: every result says so."""
    assert comparison["imagenet"].stand_in and comparison["WEIGHTS_NOTE"].startswith(STAND_IN_MARK)
    assert "not the published file's 4d473c1dd8becc155b73f8504c6f6626" in comparison["imagenet"].source
    assert STAND_IN_MARK in comparison["own_rows"][0][-1]


def test_offline_without_a_cached_copy_every_result_says_it_rests_on_the_stand_in(standin_comparison,
                                                                                   standin_results_dir):
    imagenet = standin_comparison["imagenet"]
    assert imagenet.stand_in and imagenet.path is None
    assert imagenet.source.startswith(f"{STAND_IN_MARK} for ImageNet's weights (offline: ROSETTA_OFFLINE=1")
    assert downloads_allowed() is False  # what the tabs' own downloads ask, with imagenet.path
    assert STAND_IN_MARK in standin_comparison["own_rows"][0][-1]
    assert STAND_IN_MARK in standin_comparison["TRANSFER_NOTE"]
    records = load_results([standin_results_dir], task="resnet50").records
    assert records and all(record["config"]["weights"] == imagenet.source for record in records)


def test_the_preprocessing_is_caffes_on_a_hand_computed_pixel(comparison):
    """One pixel, RGB (0.2, 0.5, 0.8): 255 times it, in BGR order, less Caffe's mean of each
    channel (B 103.939, G 116.779, R 123.68), no scaling."""
    flat = np.broadcast_to(np.array([0.2, 0.5, 0.8], np.float32)[None, :, None, None], (1, 3, 32, 32))
    pixel = comparison["caffe_preprocess"](center_crops(flat))[0, :, 111, 17]
    np.testing.assert_allclose(pixel, [204 - 103.939, 127.5 - 116.779, 51 - 123.68], rtol=0, atol=1e-3)
    # a pure red pixel, as Keras's preprocess_input made of it in the TensorFlow part
    red = comparison["caffe_preprocess"](np.array([1, 0, 0], np.float32)[None, :, None, None])[0, :, 0, 0]
    np.testing.assert_allclose(red, [-103.939, -116.779, 131.32], atol=1e-3)
    if "tensorflow" in comparison["runs"]:
        keras_says = comparison["runs"]["tensorflow"].own_pretrained["preprocessing"]
        assert keras_says.endswith("[-103.939, -116.779, 131.32]"), keras_says


def test_each_frameworks_own_pretrained_model_is_described_from_the_framework(comparison):
    rows = {row[0]: dict(zip(comparison["own_headers"], row)) for row in comparison["own_rows"]}
    first = rows["this page (all five)"]
    assert first["variant"] == "v1" and first["channel order"] == "BGR"
    expected = {"pytorch": ("v1.5", "RGB"), "tensorflow": ("v1", "BGR"), "jax": ("-", "-"),
                "mxnet": ("v1", "RGB"), "chainer": ("v1", "BGR")}
    for framework in comparison["runs"]:
        row = rows[framework]
        assert (row["variant"], row["channel order"]) == expected[framework], framework
        assert row["published top-1"] not in (None, "")
    if "pytorch" in rows:  # read from torchvision's own metadata
        assert rows["pytorch"]["published top-1"] == pytest.approx(0.7613)
        assert "mean [0.485, 0.456, 0.406], std [0.229, 0.224, 0.225]" in rows["pytorch"]["preprocessing"]
        assert rows["pytorch"]["features vs this page's transplant"].startswith("not run:")
    if "chainer" in rows:  # Chainer's prepare() subtracts MSRA's mean pixel, not Keras's
        assert rows["chainer"]["preprocessing"].endswith("[-103.063, -115.903, 131.848]")
        assert "Chainer downloads nothing" in rows["chainer"]["features vs this page's transplant"]
    if "jax" in rows:
        assert rows["jax"]["own pretrained loader"] == "none shipped"


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_the_bench_finds_the_pages_configuration(framework, request):
    # a whole ResNet-50 and PyTorch's process-wide switches: in a process of its own, loaded
    # as far as the benchmark loads it
    if in_a_process_of_its_own(request):
        part = load_part(framework, until=TASKS["resnet50"].stop_before)
    else:
        return
    alternatives = TASKS["resnet50"].alternatives[framework]
    expected = PAGE_CONFIGURATIONS[framework]
    if framework == "mxnet" and part["ctx"].device_type != "cpu":
        expected = "hybridized"  # oneDNN's fusion is a CPU path
    assert page_configuration(part["make_resnet50"], alternatives) == expected
    assert len(TASKS["resnet50"].inputs(part)[0]) == part["BATCH"]


def test_the_equivalence_check_runs_in_true_float32_and_timing_with_the_defaults(comparison):
    assert_true_float32_equivalence(comparison["runs"])


# --- Summary -----------------------------------------------------------------------------------


def test_the_summary_shows_what_the_parts_computed(comparison, monkeypatch):
    """The Summary's bullets, as the page shows them, against the parts' own results; and a
    framework whose verdict failed is counted out."""
    summary = summary_shown(PAGE, comparison, monkeypatch)
    assert summary == "\n".join(f"- {line}" for line in comparison["SUMMARY"])  # what the page shows
    runs = comparison["runs"]
    lines = summary.split("\n")
    assert len(lines) == 6 and f"smoke profile on {runs['pytorch'].environment['device']}" in lines[0]
    assert f"weights: {STAND_IN_MARK}" in lines[0] and "data: synthetic stand-in, not CIFAR-10" in lines[0]
    assert "(a labelled stand-in: see the transfer below)" in lines[0]
    v1 = [fw for fw in runs if fw != "pytorch"]
    assert "v1.5: pytorch" in lines[1] and (not v1 or f"v1: {', '.join(v1)}" in lines[1])
    others = len(AVAILABLE) - 1
    assert f"convolution biases aside: {TORCHVISION_PARAMETERS:,} in all {len(AVAILABLE)} frameworks" in lines[2]
    assert f"{others} of {others} frameworks compute PyTorch's features" in lines[2]
    assert ("Keras's own pretrained model gives the same features" in lines[2]) \
        == (comparison["same_file_verdicts"] == {"tensorflow": "agrees"})
    assert f"test mode in {len(AVAILABLE)} of {len(AVAILABLE)}" in lines[3]
    assert f"no autograd graph recorded in {len(AVAILABLE)}." in lines[3]
    n_timed = comparison["N_BATCHES"] * comparison["BATCH"]
    for framework, run in runs.items():
        assert f"{framework} {run.timed_seconds / n_timed * 1000:.2f} s, {run.peak_memory_mb:,.0f} MB" in lines[4]
        assert f"{framework} {comparison['accuracies'][framework]:.3f}" in lines[5]
    assert "mechanics only" in lines[5]
    if others:
        framework = next(fw for fw in AVAILABLE if fw != "pytorch")
        rows = [[*row[:-1], "DIFFERS (1 > 0.001)"] if row[0] == framework else row
                for row in comparison["equivalence_rows"]]
        failed = summary_shown(PAGE, dict(comparison, equivalence_rows=rows), monkeypatch)
        assert f"{others - 1} of {others} frameworks compute PyTorch's features" in failed
    rows = [[*row[:2], "DIFFERS (1 > 0.0001)", row[3]] if row[0] == "pytorch" else row
            for row in comparison["inference_rows"]]
    failed = summary_shown(PAGE, dict(comparison, inference_rows=rows), monkeypatch)
    assert f"test mode in {len(AVAILABLE) - 1} of {len(AVAILABLE)}" in failed
