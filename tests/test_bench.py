"""The benchmark's arithmetic, its choice of the page's configuration, and its comparison
of configurations (the timings themselves are not targets of any test)."""

from pathlib import Path

import numpy as np
import pytest

from rosetta_book.bench import (TASKS, compare_configurations, compare_inference_configurations, format_report,
                                 gru_flops, main, model_flops_per_image, page_configuration, peak_verdicts,
                                 resnet50_flops, summarize, time_page_configurations)
from rosetta_book.bench.peak import measure_matmul_flops
from rosetta_book.bench.tasks import Task
from rosetta_book.chapter import load_chapter

from conftest import IN_PROCESS, smoke_offline

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def declared():
    """Each task page's namespace up to the sections that declare its sizes, loaded through
    the page's own cells (any framework: the sizes are in shared cells)."""
    framework = "jax" if "jax" in IN_PROCESS else IN_PROCESS[0]  # JAX: no process-wide switches
    # (PyTorch's part of the ResNet-50 page turns torch.backends.cudnn.benchmark on for this process)
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        return {name: load_chapter(ROOT / TASKS[name].page, framework, until=until)
                for name, until in (("cifar10", "Training"), ("imdb", "Data"), ("resnet50", "Model"))}


def test_cifar10_model_flops_are_the_pages_and_match_a_hand_count(declared):
    # conv 3→50 and 50→50 at 32², 50→100 and 100→100 at 16², dense 6400→512→10; 2 FLOP per multiply-add
    by_hand = 2 * (32 * 32 * 50 * 3 * 9 + 32 * 32 * 50 * 50 * 9 + 16 * 16 * 100 * 50 * 9
                   + 16 * 16 * 100 * 100 * 9 + 6400 * 512 + 512 * 10)
    assert model_flops_per_image("cifar10", declared["cifar10"]) == by_hand == 124_528_640
    assert declared["cifar10"]["PARAMETERS"] == 3_441_592
    with pytest.raises(ValueError, match="no FLOP count for task 'mnist'"):
        model_flops_per_image("mnist", {})
    with pytest.raises(ValueError, match="the cifar10 page declares no FLOP_PER_IMAGE"):
        model_flops_per_image("cifar10", {})


def test_imdb_model_flops_follow_the_pages_sizes(declared):
    # per step, three gates of (2·125·100 + 2·100·100) FLOP; 150 steps; then Dense 100→2
    assert gru_flops(125, 100, 1) == 3 * (2 * 125 * 100 + 2 * 100 * 100) == 135_000
    assert model_flops_per_image("imdb", declared["imdb"]) == 150 * 135_000 + 2 * 100 * 2 == 20_250_400
    shorter = {**declared["imdb"], "MAXLEN": 75}
    assert model_flops_per_image("imdb", shorter) == 75 * 135_000 + 2 * 100 * 2


def test_resnet50_flops_tell_the_variants_apart_and_take_the_pages_image_side(declared):
    assert round(resnet50_flops("v1") / 1e9, 1) == 7.7
    assert round(resnet50_flops("v1.5") / 1e9, 1) == 8.2
    assert model_flops_per_image("resnet50", declared["resnet50"]) == resnet50_flops("v1", 224)
    with pytest.raises(ValueError, match="'v2'"):
        resnet50_flops("v2")
    with pytest.raises(ValueError, match="not square"):
        model_flops_per_image("resnet50", {"images": np.zeros((2, 3, 224, 200))})


def test_the_pages_configuration_is_the_alternative_its_builder_defaults_to():
    def make_training(dropout=0.5, channels_last=True):
        pass

    alternatives = {"NCHW": {"channels_last": False}, "NHWC": {"channels_last": True}}
    assert page_configuration(make_training, alternatives) == "NHWC"
    with pytest.raises(ValueError, match=r"defaults \{'channels_last': True\} are none of"):
        page_configuration(make_training, {"NCHW": {"channels_last": False}})
    with pytest.raises(ValueError, match="takes no option 'jit'"):
        page_configuration(make_training, {"jit": {"jit": True}})


def test_every_task_lists_alternatives_for_all_five():
    for task in TASKS.values():
        assert list(task.alternatives) == ["pytorch", "tensorflow", "jax", "mxnet", "chainer"], task.name


def test_compare_configurations_builds_all_then_takes_turns(monkeypatch):
    calls = []

    def make_training(tag="a"):
        calls.append(f"build {tag}")
        return object(), (lambda x, y: calls.append(tag)), (lambda images, labels: (images, labels))

    monkeypatch.setattr("rosetta_utils.backends.pytorch.synchronize", lambda value=None: None)
    timings = compare_configurations(make_training, {"a": {"tag": "a"}, "b": {"tag": "b"}}, "pytorch",
                                     np.ones(1), np.ones(1), warmup=1, repeats=3)
    assert calls == ["build a", "a", "build b", "b"] + ["a", "b"] * 3  # warm-up with the build, then rounds
    assert all(len(timing.seconds) == 3 for timing in timings.values())
    with pytest.raises(ValueError, match="repeats >= 1"):
        compare_configurations(make_training, {"a": {}}, "pytorch", np.ones(1), np.ones(1), repeats=0)


def test_compare_inference_configurations_takes_turns(monkeypatch):
    calls = []

    def make_model(scale=1):
        return object(), (lambda images: calls.append(scale) or images * scale)

    monkeypatch.setattr("rosetta_utils.backends.jax.synchronize", lambda value=None: None)
    timings = compare_inference_configurations(make_model, {"one": {"scale": 1}, "two": {"scale": 2}}, "jax",
                                               np.ones(2), warmup=1, repeats=2)
    assert calls == [1, 2, 1, 2, 1, 2] and set(timings) == {"one", "two"}


def test_imdb_times_a_training_step_on_the_pages_token_ids_and_lengths(monkeypatch):
    from types import SimpleNamespace

    seen = []

    def make_training(optimizer="adam", readout="gather"):
        def to_device(reviews, labels):
            seen.append((readout, reviews[0].shape, reviews[1].tolist(), labels.tolist()))
            return reviews, labels

        return object(), (lambda x, y: None), to_device

    data = SimpleNamespace(x_train=np.arange(40).reshape(10, 4), len_train=np.arange(1, 11), y_train=np.arange(10) % 2)
    namespace = {"make_training": make_training, "data": data,
                 "epoch_batches": lambda epoch: np.array([[3, 1, 4], [5, 9, 2]])}
    task = Task("imdb", "page.md", "make_training", True,
                {"pytorch": {"gather": {"readout": "gather"}, "packed": {"readout": "packed"}}})
    monkeypatch.setattr("rosetta_utils.backends.pytorch.synchronize", lambda value=None: None)
    page_name, results = time_page_configurations(task, namespace, "pytorch", repeats=2)
    assert page_name == "gather" and set(results) == {"gather", "packed"}
    assert all(items == 3 for _, items in results.values())
    assert seen == [("gather", (3, 4), [4, 2, 5], [1, 1, 0]), ("packed", (3, 4), [4, 2, 5], [1, 1, 0])]


def test_numpy_has_a_matmul_path():
    rates = measure_matmul_flops(None, size=256, repeats=2)
    assert list(rates) == ["numpy (its BLAS)"] and rates["numpy (its BLAS)"] > 0


def test_the_summary_takes_the_peak_over_every_path_and_flags_a_missed_target():
    measured = {"jax": {
        "page_configuration": "jit", "data": "stand-in", "flops_per_item": 124_528_640,
        "matmul_flops": {"jax.numpy.dot (XLA)": 2e11},
        "timings": {"jit": {"seconds": [0.3, 0.3], "items": 64}, "no jit": {"seconds": [0.2, 0.2], "items": 64}},
    }}
    report = summarize("cifar10", measured, {"numpy (its BLAS)": 1e11})
    assert report["peak_flops"] == 2e11
    result = report["frameworks"]["jax"]
    assert result["fastest_configuration"] == "no jit" and result["ratio"] == pytest.approx(1.5)
    assert report["model_flops_per_item"] == 3 * 124_528_640  # a training step
    text = format_report(report)
    assert "jax: page / fastest = 1.50 (MISSES the target" in text and "jit *" in text
    other = {**measured["jax"], "flops_per_item": 1}
    with pytest.raises(ValueError, match="parts declare different model sizes"):
        summarize("cifar10", {"jax": measured["jax"], "pytorch": other}, {})


def test_resnet50_peak_targets_name_the_leader_and_spare_chainer():
    assert peak_verdicts({"mxnet": 0.85, "jax": 0.45, "chainer": 0.2}) == [
        "mxnet: 85.0% of peak at best (meets 80%)",
        "jax: 45.0% of peak at best (MISSES 50%)",
        "chainer: 20.0% of peak at best (no target)",
    ]


def test_the_command_line_knows_its_tasks_and_refuses_others(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["mnist"])
    assert exit_info.value.code == 2 and "invalid choice: 'mnist'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0 and "imdb" in capsys.readouterr().out
