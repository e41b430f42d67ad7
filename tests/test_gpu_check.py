"""The device check, run on this CPU with the smoke profile on a small chapter of its own."""

import json

import pytest

from conftest import code_cell, myst_page
from rosetta_utils.frameworks import is_installed
from rosetta_book.gpu_check import (DeviceCheckError, chapter_metrics, chapter_pages, check_can_run,
                                     run_device_check)
from rosetta_utils.profile import cuda_gpu_visible

CHECKED = [name for name in ("pytorch", "jax") if is_installed(name)]


def tiny_chapter(write_page):
    return write_page("tiny_chapter.md", myst_page(
        "A tiny chapter",
        code_cell("import numpy as np\nfrom rosetta_utils.profile import current_profile\nSIZE = 8"),
        code_cell("import torch\nx = torch.ones(SIZE)\nepoch_seconds = [0.5, 0.25]\n"
                  "accuracy = float(x.mean())\nprofile_seen = current_profile()", "pytorch"),
        code_cell("import jax.numpy as jnp\nx = jnp.ones(SIZE)\nepoch_seconds = [0.5, 0.25]\n"
                  "accuracy = float(x.mean())\nprofile_seen = current_profile()", "jax"),
        front_matter_extra="frameworks: [pytorch, jax]\ntab_results: [epoch_seconds, accuracy, profile_seen]\n"))


@pytest.mark.skipif(not CHECKED, reason="neither PyTorch nor JAX is installed")
def test_one_record_per_task_and_framework_with_device_versions_and_metrics(write_page, tmp_path, monkeypatch):
    page = tiny_chapter(write_page)
    monkeypatch.chdir(tmp_path)
    records = run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True,
                               pages=[page], log=lambda *_: None)
    assert [record["framework"] for record in records] == CHECKED
    lines = (tmp_path / "results" / "tiny_chapter.jsonl").read_text().splitlines()
    assert len(lines) == len(CHECKED)
    for line, framework in zip(lines, CHECKED):
        record = json.loads(line)
        assert record["task"] == "tiny_chapter" and record["framework"] == framework
        assert record["profile"] == "smoke" and record["device"] == "cpu"
        assert record["metrics"]["accuracy"] == 1.0 and record["metrics"]["epoch_seconds"] == [0.5, 0.25]
        assert "profile_seen" not in record["metrics"]  # strings are not metrics
        assert record["versions"] and record["date"] and record["commit"]
        assert record["config"]["check"] == "gpu_check" and record["config"]["gpu"] is None


def test_a_spent_budget_reports_the_parts_not_run(write_page, tmp_path):
    page = tiny_chapter(write_page)
    with pytest.raises(DeviceCheckError, match=r"tiny_chapter \(\w+\): not run, the 0 s budget was spent"):
        run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True,
                         budget_seconds=0, pages=[page], log=lambda *_: None)
    assert not (tmp_path / "results").exists()


@pytest.mark.skipif(cuda_gpu_visible(), reason="this machine has a GPU")
def test_without_a_gpu_the_check_refuses_the_full_profile():
    with pytest.raises(DeviceCheckError, match="no NVIDIA GPU is visible here.*--profile smoke --allow-cpu"):
        check_can_run("full", allow_cpu=False, gpu=None)
    with pytest.raises(DeviceCheckError, match="the full profile needs a GPU"):
        check_can_run("full", allow_cpu=True, gpu=None)
    with pytest.raises(DeviceCheckError, match="'huge' is not a profile"):
        check_can_run("huge", allow_cpu=True, gpu=None)


def test_metrics_are_the_numbers_a_part_leaves():
    results = {"environment": {"device": "cpu"}, "epoch_seconds": [1.0, 2], "test_accuracy": 0.5,
               "count": 3, "flag": True, "logits": [[1.0]], "name": "x", "empty": []}
    assert chapter_metrics(results) == {"epoch_seconds": [1.0, 2], "test_accuracy": 0.5, "count": 3}


def test_the_chapters_are_taken_in_the_books_order():
    from pathlib import Path

    book = Path(__file__).resolve().parents[1] / "book"
    names = [path.stem for path in chapter_pages(book)]
    assert names[:4] == ["five_frameworks_one_computation", "cifar10_cnn", "resnet50_features", "imdb_gru"]
