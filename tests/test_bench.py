"""The benchmark's arithmetic and its comparison of configurations (not timed targets)."""

import numpy as np
import pytest

from rosetta_utils.bench import compare_configurations, format_report, measure_peak_flops, model_flops_per_image


def test_cifar10_model_flops_match_a_hand_count():
    # conv 3→50 and 50→50 at 32², 50→100 and 100→100 at 16², dense 6400→512→10; 2 FLOP per multiply-add
    by_hand = 2 * (32 * 32 * 50 * 3 * 9 + 32 * 32 * 50 * 50 * 9 + 16 * 16 * 100 * 50 * 9
                   + 16 * 16 * 100 * 100 * 9 + 6400 * 512 + 512 * 10)
    assert model_flops_per_image("cifar10") == by_hand == 124_528_640
    with pytest.raises(ValueError, match="no FLOP count for task 'mnist'"):
        model_flops_per_image("mnist")


def test_compare_configurations_builds_and_times_each_one(monkeypatch, capsys):
    built = []

    def make_training(delay=0.0):
        built.append(delay)
        return object(), (lambda x, y: x + y), (lambda images, labels: (images, labels))

    monkeypatch.setattr("rosetta_utils.backends.pytorch.synchronize", lambda value=None: None)
    timings = compare_configurations(
        make_training, {"slow": {"delay": 1.0}, "fast": {"delay": 0.0}}, {"delay": 0.0},
        "pytorch", np.ones(3), np.ones(3), warmup=1, repeats=2,
    )
    assert built == [1.0, 0.0] and set(timings) == {"slow", "fast"}
    out = capsys.readouterr().out
    assert "pytorch fast (page):" in out and "pytorch slow:" in out


def test_peak_is_the_fastest_path(monkeypatch):
    monkeypatch.setenv("ROSETTA_FRAMEWORKS", "pytorch")
    peak, rates = measure_peak_flops(size=256, repeats=2)
    assert set(rates) >= {"numpy (its BLAS)"} and peak == max(rates.values()) > 0


def test_report_flags_a_missed_target():
    report = {
        "peak_flops": 1e11, "matmul_flops": {"numpy (its BLAS)": 1e11},
        "frameworks": {"jax": {
            "page_configuration": "jit", "fastest_configuration": "no jit", "ratio": 1.5,
            "configurations": {
                "jit": {"median_seconds": 0.3, "flops_per_second": 2e10, "fraction_of_peak": 0.2},
                "no jit": {"median_seconds": 0.2, "flops_per_second": 3e10, "fraction_of_peak": 0.3},
            },
        }},
    }
    text = format_report(report)
    assert "jax: page / fastest = 1.50 (MISSES the target" in text
    assert "jit *" in text


def test_resnet50_flops_tell_the_variants_apart():
    from rosetta_utils.bench import resnet50_flops

    assert round(resnet50_flops("v1") / 1e9, 1) == 7.7
    assert round(resnet50_flops("v1.5") / 1e9, 1) == 8.2
    assert model_flops_per_image("resnet50") == resnet50_flops("v1")
    with pytest.raises(ValueError, match="'v2'"):
        resnet50_flops("v2")


def test_compare_inference_configurations_times_each_builder(monkeypatch, capsys):
    from rosetta_utils.bench import compare_inference_configurations

    calls = []

    def make_model(scale=1):
        return object(), (lambda images: calls.append(scale) or images * scale)

    monkeypatch.setattr("rosetta_utils.backends.jax.synchronize", lambda value=None: None)
    timings = compare_inference_configurations(
        make_model, {"one": {"scale": 1}, "two": {"scale": 2}}, {"scale": 2}, "jax", np.ones(2), warmup=1, repeats=2
    )
    assert calls == [1, 1, 1, 2, 2, 2] and set(timings) == {"one", "two"}
    assert "jax two (page):" in capsys.readouterr().out


def test_resnet50_peak_targets_name_the_leader_and_spare_chainer():
    from rosetta_utils.bench import peak_verdicts

    assert peak_verdicts({"mxnet": 0.85, "jax": 0.45, "chainer": 0.2}) == [
        "mxnet: 85.0% of peak at best (meets 80%)",
        "jax: 45.0% of peak at best (MISSES 50%)",
        "chainer: 20.0% of peak at best (no target)",
    ]


def test_the_command_line_refuses_an_unknown_task(capsys):
    from rosetta_utils.bench import main

    with pytest.raises(SystemExit) as exit_info:
        main(["mnist"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'mnist'" in capsys.readouterr().err


def test_imdb_model_flops_match_a_hand_count():
    from rosetta_utils.bench import gru_flops

    # per step, three gates of (2·125·100 + 2·100·100) FLOP; 150 steps; then Dense 100→2
    assert gru_flops(125, 100, 1) == 3 * (2 * 125 * 100 + 2 * 100 * 100) == 135_000
    assert gru_flops(125, 100, 150) == 150 * gru_flops(125, 100, 1)
    assert model_flops_per_image("imdb") == 150 * 135_000 + 2 * 100 * 2 == 20_250_400


def test_imdb_times_a_training_step_on_token_ids_and_lengths(monkeypatch, capsys):
    from types import SimpleNamespace

    from rosetta_utils.bench import _time_page_configurations

    seen = []

    def make_training(readout="gather"):
        def to_device(reviews, labels):
            seen.append((readout, reviews[0].shape, reviews[1].tolist(), labels.tolist()))
            return reviews, labels

        return object(), (lambda x, y: None), to_device

    data = SimpleNamespace(x_train=np.arange(40).reshape(10, 4), len_train=np.arange(1, 11), y_train=np.arange(10) % 2)
    namespace = {
        "make_training": make_training, "data": data, "epoch_batches": lambda epoch: np.array([[3, 1, 4], [5, 9, 2]]),
        "ALTERNATIVES": {"gather": {"readout": "gather"}, "packed": {"readout": "packed"}},
        "PAGE_OPTIONS": {"readout": "gather"},
    }
    monkeypatch.setattr("rosetta_utils.backends.pytorch.synchronize", lambda value=None: None)
    results = _time_page_configurations("imdb", namespace, "pytorch", repeats=2)
    assert set(results) == {"gather", "packed"} and all(items == 3 for _, items in results.values())
    assert seen == [("gather", (3, 4), [4, 2, 5], [1, 1, 0]), ("packed", (3, 4), [4, 2, 5], [1, 1, 0])]
    assert "pytorch gather (page):" in capsys.readouterr().out


def test_the_command_line_knows_the_imdb_task(capsys):
    from rosetta_utils.bench import PAGES, main

    assert PAGES["imdb"] == "book/chapters/imdb_gru.md"
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "imdb" in capsys.readouterr().out


def test_compare_configurations_builds_all_then_takes_turns(monkeypatch):
    calls = []

    def make_training(tag="a"):
        calls.append(f"build {tag}")
        return object(), (lambda x, y: calls.append(tag)), (lambda images, labels: (images, labels))

    monkeypatch.setattr("rosetta_utils.backends.pytorch.synchronize", lambda value=None: None)
    timings = compare_configurations(
        make_training, {"a": {"tag": "a"}, "b": {"tag": "b"}}, {"tag": "a"}, "pytorch", np.ones(1), np.ones(1),
        warmup=1, repeats=3,
    )
    assert calls == ["build a", "a", "build b", "b"] + ["a", "b"] * 3  # warm-up with the build, then rounds
    assert all(len(timing.seconds) == 3 for timing in timings.values())
    with pytest.raises(ValueError, match="repeats >= 1"):
        compare_configurations(make_training, {"a": {}}, {}, "pytorch", np.ones(1), np.ones(1), repeats=0)
