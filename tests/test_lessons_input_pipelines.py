"""The input-pipelines lesson, checked through the code it shows.

Each framework's part runs in its own process, as in the book build (smoke
profile, offline: the data are the labelled stand-in); the page's comparison
cells then build the knob table, the two checks and the rate table from what
the parts left. Each check the page prints is also fed a wrong case, which
it must fail, and each default in the knob table is read again here from the
installed framework.
"""

import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, parts_as_built
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import load_comparisons
from rosetta_utils.frameworks import is_installed

PAGE = Path(__file__).parents[1] / "book" / "lessons" / "input_pipelines.md"
#: The switches the issue names, one row each.
KNOBS = ["loader", "worker processes", "prefetch", "pinned memory"]


@pytest.fixture(scope="module")
def comparison():
    """The page's comparison cells, run on what each framework's part left."""
    for parts in parts_as_built(PAGE, AVAILABLE):  # inside the build's conditions
        yield load_comparisons(PAGE, parts)


def test_the_knob_table_has_a_row_per_switch_and_a_cell_per_framework(comparison):
    assert comparison["KNOBS"] == KNOBS
    assert list(comparison["runs"]) == AVAILABLE
    for framework, run in comparison["runs"].items():
        assert set(run.knobs) == set(KNOBS), framework
        for knob in KNOBS:
            assert isinstance(run.knobs[knob], str) and run.knobs[knob].strip(), (framework, knob)


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
                "prefetch": "tf.data.AUTOTUNE"}
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


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_pipeline_is_measured_and_passes_both_checks(comparison, framework):
    run = comparison["runs"][framework]
    assert "numpy batches" in run.loader_rates and len(run.loader_rates) >= 2
    assert set(run.loader_rates) == set(run.training_rates) == set(run.images_per_epoch)
    assert all(rate > 0 for rate in [*run.loader_rates.values(), *run.training_rates.values()])
    assert comparison["count_check"](run.images_per_epoch) == "agrees"
    assert comparison["augmentation_check"](run.augmented_sample) == "agrees"
    assert len(run.augmented_sample["images"]) == comparison["BATCH"]


def test_the_rates_rest_on_the_labelled_stand_in_offline(comparison):
    assert comparison["data"].synthetic and comparison["DATA_NOTE"] == "synthetic stand-in, not CIFAR-10"
    for row in comparison["rate_rows"]:
        assert len(row) == 7 and row[3] > 0 and row[5] > 0
    assert len(comparison["rate_rows"]) == sum(len(run.loader_rates) for run in comparison["runs"].values())


def test_the_augmentation_check_fails_on_images_that_are_not_crops(comparison):
    check = comparison["augmentation_check"]
    sample = comparison["runs"][AVAILABLE[0]].augmented_sample
    sources, images = sample["sources"], sample["images"]
    assert check({"images": images, "sources": sources}) == "agrees"
    # shifted further than the padding allows
    shifted = np.roll(comparison["x_train"][sources], 2 * comparison["PAD"] + 1, axis=3)
    assert check({"images": shifted, "sources": sources}).startswith("DIFFERS")
    # the right crops, attributed to the wrong source images
    assert check({"images": images, "sources": sources[::-1]}).startswith("DIFFERS")
    # an upside-down flip is not the augmentation
    assert check({"images": images[:, :, ::-1], "sources": sources}).startswith("DIFFERS")
    assert check({"images": images[:0], "sources": sources[:0]}).startswith("DIFFERS")


def test_the_count_check_fails_when_a_pipeline_drops_or_adds_a_batch(comparison):
    check, expected, batch = comparison["count_check"], comparison["EXPECTED_IMAGES"], comparison["BATCH"]
    assert check({"a": expected, "b": expected}) == "agrees"
    assert check({"a": expected, "b": expected - batch}).startswith("DIFFERS")
    assert check({"a": expected + batch}).startswith("DIFFERS")


def test_gains_are_called_negligible_only_within_ten_percent(comparison):
    gain = comparison["gain"]
    assert gain(105.0, 100.0).startswith("negligible")
    assert gain(95.0, 100.0).startswith("negligible")
    assert gain(150.0, 100.0) == "1.50x, faster"
    assert gain(50.0, 100.0) == "0.50x, slower"
