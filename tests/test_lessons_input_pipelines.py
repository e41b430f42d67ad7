"""The input-pipelines lesson, checked through the code it shows.

Each framework's part runs in its own process, as in the book build (smoke
profile, offline: the data are the labelled stand-in); the page's comparison
cells then build the knob table, the checks and the rate table from what the
parts left. The tests check that every framework augments an image as
(seed, epoch, index) says, through its loader without workers and with two
(which must not repeat each other and must match the loader without
workers), that the tf.data "off" pipeline reports its options off, that each
epoch is at least 50 batches timed over at least 5 interleaved rounds, and
feed each check a wrong case it must fail. No rate is held to a threshold.
"""

import inspect
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS_PARAMS
from page_checks import assert_knob_table_complete, parts_as_built, smoke_offline
from rosetta_book.chapter import load_chapter, load_comparisons
from rosetta_utils.frameworks import is_installed
from rosetta_utils.run_profile import is_test_build

PAGE = Path(__file__).parents[1] / "book" / "lessons" / "input_pipelines.md"
#: The switches the issue names, one row each.
KNOBS = ["loader", "worker processes", "prefetch", "pinned memory", "autotuning"]
SWITCHES = {
    "pytorch": {"worker processes": "num_workers", "prefetch": "prefetch_factor", "pinned memory": "pin_memory"},
    "tensorflow": {"worker processes": "num_parallel_calls", "prefetch": "inject_prefetch",
                   "autotuning": "autotune.enabled"},
    "jax": {"loader": "Grain"},
    "mxnet": {"worker processes": "num_workers", "prefetch": "prefetch=", "pinned memory": "pin_memory"},
    "chainer": {"worker processes": "n_processes", "prefetch": "n_prefetch"},
}
#: The tf.data "off" pipeline's options, as it must report them.
OFF_OPTIONS = {"autotune.enabled": False, "experimental_optimization.inject_prefetch": False,
               "experimental_optimization.map_parallelization": False,
               "experimental_optimization.parallel_batch": False}


@pytest.fixture(scope="module")
def parts():
    """What each framework's part left, run as the build runs it."""
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(parts):
    """The page's comparison cells, run on what each framework's part left."""
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        patch.setenv("MPLBACKEND", "Agg")
        yield load_comparisons(PAGE, parts)


def test_the_knob_table_has_a_row_per_switch_and_a_cell_per_framework(comparison):
    assert comparison["KNOBS"] == KNOBS
    assert list(comparison["runs"]) == AVAILABLE
    assert_knob_table_complete(comparison, SWITCHES, AVAILABLE)


def installed_defaults(framework):
    """knob -> the text the cell must contain, read here from the installed framework."""
    if framework == "pytorch":
        from torch.utils.data import DataLoader

        defaults = inspect.signature(DataLoader).parameters
        return {"worker processes": f"num_workers={defaults['num_workers'].default}",
                "prefetch": f"prefetch_factor={defaults['prefetch_factor'].default}",
                "pinned memory": f"pin_memory={defaults['pin_memory'].default}"}
    if framework == "tensorflow":
        import tensorflow as tf

        calls = inspect.signature(tf.data.Dataset.map).parameters["num_parallel_calls"].default
        return {"worker processes": f"num_parallel_calls={calls}",
                "prefetch": "tf.data.AUTOTUNE",
                "autotuning": f"tf.data.Options().autotune.enabled = {tf.data.Options().autotune.enabled} "}
    if framework == "jax":
        import importlib.util

        grain = importlib.util.find_spec("grain") is not None
        return {"loader": "Grain is installed" if grain else "Grain is not installed"}
    if framework == "mxnet":
        np.bool = bool  # MXNet 1.9 on numpy 1.26, as on the page
        from mxnet import gluon

        defaults = inspect.signature(gluon.data.DataLoader).parameters
        return {"worker processes": f"num_workers={defaults['num_workers'].default}",
                "prefetch": f"prefetch={defaults['prefetch'].default}",
                "pinned memory": f"pin_memory={defaults['pin_memory'].default}"}
    if framework == "chainer":
        warnings.filterwarnings("ignore", "pkg_resources is deprecated")
        from chainer.iterators import MultiprocessIterator

        defaults = inspect.signature(MultiprocessIterator.__init__).parameters
        return {"worker processes": f"n_processes={defaults['n_processes'].default}",
                "prefetch": f"n_prefetch={defaults['n_prefetch'].default}"}
    raise AssertionError(framework)


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_each_default_in_the_table_is_the_installed_frameworks(comparison, framework):
    knobs = comparison["runs"][framework].knobs
    for knob, text in installed_defaults(framework).items():
        assert text in knobs[knob], (knob, knobs[knob], text)


def option(options, dotted):
    for name in dotted.split("."):
        options = getattr(options, name)
    return options


@pytest.mark.skipif(not is_installed("tensorflow"), reason="TensorFlow is not installed")
def test_the_tf_data_off_pipeline_reads_back_off_and_the_knob_table_shows_it(comparison):
    """The options are read back from the page's own datasets, built by its TensorFlow part."""
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        namespace = load_chapter(PAGE, "tensorflow", until="The augmentations, checked")
    off, parallel = namespace["datasets"][False].options(), namespace["datasets"][True].options()
    for dotted, value in OFF_OPTIONS.items():
        assert option(off, dotted) is value, dotted
        assert option(parallel, dotted) is None, dotted  # the parallel pipeline keeps the defaults
    cell = comparison["runs"]["tensorflow"].knobs["autotuning"]
    for dotted, value in OFF_OPTIONS.items():
        assert f"{dotted.split('.')[-1]} = {value}" in cell, (dotted, cell)
    # the off pipeline still delivers the augmented batches: one batch, its images as drawn
    images, indexes = next(iter(namespace["epoch_of"](namespace["make_dataset"](
        namespace["x_train"][:64], np.arange(64), parallel=False, shuffle=False), 2)))
    assert comparison["as_drawn"]({"images": images.numpy().transpose(0, 3, 1, 2),
                                   "sources": indexes.numpy()}, epoch=2) == "agrees"


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_pipeline_is_timed_over_interleaved_rounds_and_passes_every_check(comparison, framework):
    run = comparison["runs"][framework]
    assert "numpy batches" in run.loader_rates and len(run.loader_rates) >= 2
    assert set(run.loader_rates) == set(run.training_rates) == set(run.images_per_epoch)
    for rates in [*run.loader_rates.values(), *run.training_rates.values()]:
        assert len(rates) == comparison["REPEATS"] and all(rate > 0 for rate in rates)
    # five rounds in every profile; two only in the book's test build, which reads no time
    assert comparison["SIZES"]["repeats"] >= 5
    assert comparison["REPEATS"] == (2 if is_test_build() else comparison["SIZES"]["repeats"])
    assert comparison["N_TRAIN"] // comparison["BATCH"] >= 50  # batches per epoch, in every profile
    for check in comparison["CHECKS"].values():
        assert check(run) == "agrees"
    assert len(run.augmented_sample["images"]) == len(run.worker_sample["images"]) == 2 * comparison["BATCH"]


def draws_by_batch(comparison, sample):
    """The augmentation of each image, read back from the image, batch by batch."""
    batch, x_train = comparison["BATCH"], comparison["x_train"]
    found = [comparison["augmentation_of"](image, x_train[source])
             for image, source in zip(sample["images"], sample["sources"])]
    return [found[start:start + batch] for start in range(0, len(found), batch)]


@pytest.mark.parametrize("framework", AVAILABLE)
def test_two_workers_draw_different_augmentations_and_the_same_as_one_process(comparison, framework):
    run = comparison["runs"][framework]
    workers, alone = run.worker_sample, run.augmented_sample
    first, second = draws_by_batch(comparison, workers)
    assert None not in first + second
    assert first != second  # the two workers did not repeat each other's draws
    by_source = dict(zip(alone["sources"].tolist(), alone["images"]))
    assert sorted(by_source) == sorted(workers["sources"].tolist()) == list(range(2 * comparison["BATCH"]))
    for image, source in zip(workers["images"], workers["sources"]):
        np.testing.assert_array_equal(image, by_source[source])
        assert comparison["augmentation_of"](image, comparison["x_train"][source]) == comparison["draw"](
            comparison["SAMPLE_EPOCH"], source)


def test_an_image_gets_the_same_augmentation_in_every_framework(comparison):
    samples = {}
    for framework, run in comparison["runs"].items():
        order = np.argsort(run.augmented_sample["sources"])
        samples[framework] = run.augmented_sample["images"][order]
    first, *others = samples.values()
    for framework, images in zip(list(samples)[1:], others):
        np.testing.assert_array_equal(images, first, err_msg=framework)


def test_the_augmentation_checks_fail_each_wrong_case(comparison):
    as_drawn, same, differ = (comparison[name] for name in ("as_drawn", "same_as_without_workers",
                                                            "batches_differ"))
    augment, draw, x_train = comparison["augment"], comparison["draw"], comparison["x_train"]
    run = comparison["runs"][AVAILABLE[0]]
    sample = run.augmented_sample
    sources, images = sample["sources"], sample["images"]
    assert as_drawn(sample) == same(run.worker_sample, sample) == differ(sample) == "agrees"
    assert as_drawn(sample, epoch=comparison["SAMPLE_EPOCH"] + 1).startswith("DIFFERS")  # the epoch counts
    assert as_drawn({"images": images, "sources": sources[::-1]}).startswith("DIFFERS")
    assert as_drawn({"images": images[:, :, ::-1], "sources": sources}).startswith("DIFFERS")
    assert as_drawn({"images": images[:0], "sources": sources[:0]}).startswith("DIFFERS")
    # workers that repeat each other: the second batch takes the first batch's draws
    batch = comparison["BATCH"]
    epoch = comparison["SAMPLE_EPOCH"]
    repeated = np.stack([augment(x_train[source], *draw(epoch, sources[k % batch]))
                         for k, source in enumerate(sources)])
    copied = {"images": repeated, "sources": sources}
    assert differ(copied).startswith("DIFFERS") and as_drawn(copied).startswith("DIFFERS")
    assert same(copied, sample).startswith("DIFFERS")
    assert same({"images": images[:-1], "sources": sources[:-1]}, sample).startswith("DIFFERS")  # one missing
    assert differ({"images": images[:batch], "sources": sources[:batch]}).startswith("DIFFERS")


def test_a_wrong_worker_sample_stops_the_page(parts):
    """Images the workers flipped the other way stop the page, as a failed proof does."""
    from page_checks import assert_a_failed_proof_stops_the_page

    framework = AVAILABLE[0]
    sample = parts[framework]["worker_sample"]
    wrong = dict(sample, images=sample["images"][:, :, :, ::-1].copy())
    message = assert_a_failed_proof_stops_the_page(PAGE, parts, framework, {"worker_sample": wrong}, "DIFFERS")
    assert "workers, as drawn" in message


def test_the_count_check_fails_when_a_pipeline_drops_or_adds_a_batch(comparison):
    check, expected, batch = comparison["count_check"], comparison["EXPECTED_IMAGES"], comparison["BATCH"]
    assert check({"a": expected, "b": expected}) == "agrees"
    assert check({"a": expected, "b": expected - batch}).startswith("DIFFERS")
    assert check({"a": expected + batch}).startswith("DIFFERS")


def test_gains_are_called_negligible_only_within_ten_percent(comparison):
    gain = comparison["gain"]
    assert gain(1.05).startswith("negligible") and gain(0.95).startswith("negligible")
    assert gain(1.5) == "1.50x, faster"
    assert gain(0.5) == "0.50x, slower"
    against = comparison["against_numpy"]
    assert against([150.0, 160.0, 140.0], [100.0, 100.0, 100.0]).startswith("1.50x, faster [")


def test_the_rate_table_has_a_row_per_pipeline_on_the_labelled_stand_in(comparison):
    assert comparison["data"].synthetic and comparison["DATA_NOTE"] == "synthetic stand-in, not CIFAR-10"
    assert len(comparison["rate_rows"]) == sum(len(run.loader_rates) for run in comparison["runs"].values())
    for row in comparison["rate_rows"]:
        assert len(row) == 9 and row[3] > 0 and row[6] > 0


def test_the_measurements_run_on_the_pinned_cores(comparison):
    assert comparison["CORES"] == sorted(os.sched_getaffinity(0))
    assert comparison["WORKERS"] == len(comparison["CORES"])


def summary_findings(summary, framework, rates):
    """What the Summary must say of ``framework``'s training: its own pipeline with the
    highest median rate, the median and quartiles of its rounds' ratios to the numpy
    batches (recomputed here), and whether that gain is within ten percent."""
    own = {name: float(np.median(values)) for name, values in rates.items() if name != "numpy batches"}
    best = max(own, key=own.get)
    lower, middle, upper = np.percentile(np.asarray(rates[best]) / np.asarray(rates["numpy batches"]),
                                         [25, 50, 75])
    trained = next(line for line in summary if line.startswith("Trained"))
    said = next(part for part in trained.split("; ") if f"{framework} `{best}` " in part)
    assert f"{middle:.2f}x" in said and said.rstrip(".").endswith(f"[{lower:.2f} to {upper:.2f}]"), said
    verdicts = next(line for line in summary if "negligible" in line and line.startswith("The reference"))
    holds, fails = verdicts.split("holds in training for: ")[1].split("; not for: ")
    assert (framework in holds.split(", ")) == (abs(middle - 1) <= 0.10), verdicts
    assert (framework in fails.rstrip(".").split(", ")) != (abs(middle - 1) <= 0.10), verdicts
    return middle


def test_the_summary_states_what_the_runs_measured_and_follows_them(parts, comparison):
    """The Summary's findings are the runs' own (recomputed here), say where they were
    measured and that no GPU measured them; a framework whose own pipeline trains twice as
    fast as its numpy batches is then named as not negligible."""
    summary = comparison["SUMMARY"]
    for framework, run in comparison["runs"].items():
        summary_findings(summary, framework, run.training_rates)
    checks = len(comparison["CHECKS"]) * len(comparison["runs"])
    assert summary[0].startswith(f"Augmentation: {checks} of {checks} checks agree")
    assert "smoke profile on synthetic stand-in, not CIFAR-10" in summary[-2]
    assert f"sharing {len(comparison['CORES'])} pinned cores" in summary[-2]
    assert summary[-1].startswith("GPU: not measured on a GPU yet (every part ran on the CPU")

    framework = AVAILABLE[0]
    changed = {name: dict(values) for name, values in parts.items()}
    rates = {name: list(values) for name, values in parts[framework]["training_rates"].items()}
    for name in rates:
        if name != "numpy batches":
            rates[name] = [2 * rate for rate in rates["numpy batches"]]
    changed[framework] = dict(changed[framework], training_rates=rates)
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        patch.setenv("MPLBACKEND", "Agg")
        again = load_comparisons(PAGE, changed)["SUMMARY"]
    assert summary_findings(again, framework, rates) == pytest.approx(2.0)
    assert "2.00x, faster [2.00 to 2.00]" in again[1]
