"""Results records: append, load, and report corrupt lines without losing the rest."""

import json
import math

import pytest

from rosetta_proof.record_tables import NOT_MEASURED_ON_A_GPU, gpu_lesson_rows
from rosetta_proof.records import (
    CorruptRecordWarning,
    git_commit,
    load_results,
    record_result,
)


def record(folder, framework="pytorch", **metrics):
    return record_result(
        "cifar10", framework, metrics or {"seconds_per_epoch": 1.5},
        versions={"torch": "2.13.0"}, device="cpu", config={"batch": 64}, folder=folder,
    )


def test_records_are_appended_as_json_lines(tmp_path):
    first = record(tmp_path)
    record(tmp_path, "jax")
    lines = (tmp_path / "cifar10.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0]) == first
    for field in ("task", "framework", "versions", "device", "profile", "metrics", "date", "commit"):
        assert field in first


def test_records_go_to_the_build_folder_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("ROSETTA_RESULTS_DIR", str(tmp_path / "build-results"))
    record_result("demo", "mxnet", {"x": 1}, versions={}, device="cpu")
    assert (tmp_path / "build-results" / "demo.jsonl").is_file()


def test_loading_merges_folders_and_selects(tmp_path):
    build, curated = tmp_path / "build", tmp_path / "curated"
    record(build)
    record(curated, "chainer")
    table = load_results([build, curated])
    assert len(table) == 2
    assert [r["framework"] for r in table.select(task="cifar10", framework="chainer")] == ["chainer"]
    assert table.records[1]["source"].endswith("curated/cifar10.jsonl")


def test_corrupt_lines_are_reported_by_file_and_line_and_skipped(tmp_path):
    record(tmp_path)
    path = tmp_path / "cifar10.jsonl"
    with open(path, "a") as handle:
        handle.write("{not json\n")
        handle.write(json.dumps({"task": "cifar10"}) + "\n")
        handle.write("[1, 2]\n")
    record(tmp_path, "jax")
    with pytest.warns(CorruptRecordWarning) as caught:
        table = load_results([tmp_path])
    assert [r["framework"] for r in table.records] == ["pytorch", "jax"]
    assert [str(w.message).split(": skipped")[0] for w in caught] == [f"{path}:{n}" for n in (2, 3, 4)]
    assert "not JSON" in table.problems[0]
    assert "missing field(s) framework" in table.problems[1]
    assert "expected a JSON object" in table.problems[2]
    assert len(path.read_text().splitlines()) == 5, "loading must never rewrite the file"


def test_bad_records_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="unknown framework 'theano'"):
        record(tmp_path, "theano")
    with pytest.raises(ValueError, match="numbers must be finite"):
        record(tmp_path, seconds=math.nan)
    with pytest.raises(ValueError, match="plain name"):
        record_result("../escape", "jax", {}, versions={}, device="cpu", folder=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_record_dated_in_the_future_is_skipped_with_a_warning(tmp_path):
    record(tmp_path)
    line = json.loads((tmp_path / "cifar10.jsonl").read_text())
    with open(tmp_path / "cifar10.jsonl", "a") as handle:
        handle.write(json.dumps({**line, "date": "2999-01-01T00:00:00+00:00"}) + "\n")
        handle.write(json.dumps({**line, "date": "last tuesday"}) + "\n")
    with pytest.warns(CorruptRecordWarning, match="cifar10.jsonl:2: .*dated in the future"):
        table = load_results([tmp_path])
    assert len(table) == 1 and "is not an ISO date" in table.problems[1]


# GPU lesson records (rosetta_proof.record_tables.gpu_lesson_rows), read from fixture
# folders the way a lessons page reads them: this build's and the curated records.


LESSON_CONFIG = ["network", "batch", "setting"]
LESSON_METRICS = ["first_step_seconds", "median_seconds", "iqr_seconds", "bitwise_equal_runs"]


def lesson_record(framework="pytorch", device="NVIDIA H200", setting="cudnn.benchmark on", *,
                  profile="full", commit=None, date="2026-11-30T10:00:00+00:00", metrics=None, **config):
    return {"task": "lesson-autotuning", "framework": framework, "versions": {"torch": "2.11.0", "Python": "3.12.3"},
            "device": device, "profile": profile, "commit": commit or git_commit(), "date": date,
            "verdicts": {"ran on the device it was meant for": {framework: "agrees"}}, "held": True,
            "config": {"network": "cifar10", "batch": 64, "setting": setting, **config},
            "metrics": {"first_step_seconds": 1.5, "median_seconds": 0.002, "iqr_seconds": 0.0001,
                        "bitwise_equal_runs": True} if metrics is None else metrics}


def write_lines(folder, *lines):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lesson-autotuning.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


@pytest.fixture
def lesson_folders(tmp_path, monkeypatch):
    build, curated = tmp_path / "build", tmp_path / "curated"
    monkeypatch.setenv("ROSETTA_RESULTS_DIR", str(build))
    monkeypatch.setenv("ROSETTA_CURATED_RESULTS_DIR", str(curated))
    monkeypatch.setenv("ROSETTA_PROFILE", "full")
    return build, curated


def test_gpu_lesson_rows_show_the_newest_gpu_record_per_configuration_labelled(lesson_folders):
    build, curated = lesson_folders
    stale = lesson_record(setting="cudnn.benchmark off", date="2026-11-01T10:00:00+00:00",
                          metrics={"first_step_seconds": 9.0, "median_seconds": 9.0, "iqr_seconds": 9.0,
                                   "bitwise_equal_runs": False})
    newer = lesson_record(setting="cudnn.benchmark off", date="2026-11-30T10:00:00+00:00")
    dry_run = lesson_record(device="cpu", date="2026-12-01T10:00:00+00:00", profile="smoke",
                            metrics={"first_step_seconds": 0.5, "median_seconds": 0.25, "iqr_seconds": 0.01,
                                     "bitwise_equal_runs": True})
    written = write_lines(curated, stale, "{not json", newer,
                          lesson_record(setting="cudnn.benchmark on", profile="smoke", commit="0123456789ab",
                                        metrics={"median_seconds": 0.001, "iqr_seconds": 0.0}),
                          {"task": "lesson-autotuning", "device": "NVIDIA H200"})
    write_lines(build, dry_run,
                lesson_record("jax", setting="xla autotune level 4", date="2026-11-29T10:00:00+00:00"))
    before = written.read_text()
    with pytest.warns(CorruptRecordWarning) as caught:
        headers, rows = gpu_lesson_rows("lesson-autotuning", config=LESSON_CONFIG, metrics=LESSON_METRICS)
    assert [str(w.message).split(": skipped")[0] for w in caught] == [f"{written}:2", f"{written}:5"]
    assert written.read_text() == before, "reading must never rewrite a record file"
    assert headers == ["framework", "device", *LESSON_CONFIG, *LESSON_METRICS, "versions", "date", "label"]
    versions = "torch 2.11.0, Python 3.12.3"
    assert rows == [
        ["pytorch", "NVIDIA H200", "cifar10", 64, "cudnn.benchmark off", 1.5, 0.002, 0.0001, True,
         versions, "2026-11-30", "current"],
        ["pytorch", "NVIDIA H200", "cifar10", 64, "cudnn.benchmark on", "-", 0.001, 0.0, "-",
         versions, "2026-11-30", "smoke profile, older commit 0123456789ab"],
        ["jax", "NVIDIA H200", "cifar10", 64, "xla autotune level 4", 1.5, 0.002, 0.0001, True,
         versions, "2026-11-29", "current"],
    ]
    assert all(row[1] != "cpu" for row in rows), "a CPU dry run's figure never shows in a GPU row"


def test_a_gpu_record_of_another_profile_is_labelled_never_current(lesson_folders, monkeypatch):
    build, _ = lesson_folders
    write_lines(build, lesson_record(profile="full"))
    monkeypatch.setenv("ROSETTA_PROFILE", "smoke")
    _, rows = gpu_lesson_rows("lesson-autotuning", config=LESSON_CONFIG, metrics=LESSON_METRICS)
    assert [row[-1] for row in rows] == ["full profile"]


@pytest.mark.parametrize("records", [[], [lesson_record(device="cpu", profile="smoke")],
                                     [lesson_record(device="not checked (the part made no pytorch array)")]])
def test_without_a_gpu_record_one_row_says_not_measured_on_a_gpu_yet(lesson_folders, records):
    build, _ = lesson_folders
    if records:
        write_lines(build, *records)
    headers, rows = gpu_lesson_rows("lesson-autotuning", config=LESSON_CONFIG, metrics=LESSON_METRICS)
    assert rows == [[NOT_MEASURED_ON_A_GPU] + ["-"] * (len(headers) - 1)]


def test_gpu_lesson_rows_read_only_their_task(lesson_folders):
    build, _ = lesson_folders
    write_lines(build, lesson_record())
    (build / "lesson-precision.jsonl").write_text(json.dumps({**lesson_record(), "task": "lesson-precision"}) + "\n")
    _, rows = gpu_lesson_rows("lesson-precision", config=["setting"], metrics=["median_seconds"])
    assert [row[:3] for row in rows] == [["pytorch", "NVIDIA H200", "cudnn.benchmark on"]]


def test_a_record_carries_its_verdicts_and_whether_they_held(tmp_path):
    """Given verdicts are kept as given; by default a record carries the checks this process
    gated (a page's comparison cells record after their require calls)."""
    from rosetta_proof.equivalence import forget_checks, require

    forget_checks()  # a fresh page's comparisons: earlier tests' checks are not this record's
    checked = record_result("cifar10", "jax", {"seconds_per_epoch": 1.0}, versions={}, device="gpu:0 (NVIDIA H200)",
                            folder=tmp_path, verdicts={"equivalence with PyTorch": {"jax": "agrees"}}, held=True)
    require({"jax": "agrees"}, "a check of this test")
    gated = record(tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "cifar10.jsonl").read_text().splitlines()]
    assert lines[0]["verdicts"] == {"equivalence with PyTorch": {"jax": "agrees"}} == checked["verdicts"]
    assert lines[0]["held"] is True
    assert lines[1]["verdicts"]["a check of this test"] == {"jax": "agrees"} and lines[1]["held"] is True
    assert gated == {**lines[1]}
    assert [r["framework"] for r in load_results([tmp_path]).records] == ["jax", "pytorch"]


@pytest.mark.parametrize("verdicts, held, why", [
    (None, None, "no verdicts"),
    ({"comparison cells": "not run: the jax part(s) did not complete"}, False, "incomplete run: not run: the jax"),
    ({"equivalence with PyTorch": {"jax": "logits: DIFFERS (0.002 > 0.0001)"}}, False,
     "failed verdicts: equivalence with PyTorch: jax: logits: DIFFERS"),
])
def test_a_record_whose_verdicts_did_not_hold_is_never_shown_as_a_result(lesson_folders, verdicts, held, why):
    """Every display of a record reads its verdicts: a failed, incomplete or unchecked run
    shows no numbers, and says why, with its file and line."""
    from rosetta_proof.record_tables import results_rows, task_overview

    build, curated = lesson_folders
    shown = lesson_record(setting="cudnn.benchmark off")
    hidden = {key: value for key, value in lesson_record(date="2026-12-01T10:00:00+00:00").items()
              if key not in ("verdicts", "held")}
    if verdicts is not None:
        hidden.update(verdicts=verdicts, held=held)
    path = write_lines(curated, shown, hidden)
    _, rows = gpu_lesson_rows("lesson-autotuning", config=LESSON_CONFIG, metrics=LESSON_METRICS)
    by_setting = {row[4]: row for row in rows}
    assert by_setting["cudnn.benchmark off"][5:9] == [1.5, 0.002, 0.0001, True]
    failed = by_setting["cudnn.benchmark on"]
    assert failed[5:9] == ["-"] * 4 and failed[-1].startswith(f"not a result: {why}")
    assert failed[-1].endswith(f"({path}:2)")
    gpu_run = {**hidden, "task": "cifar10", "metrics": {"images_per_second": 40000.0}}
    write_lines(curated, gpu_run)
    (curated / "lesson-autotuning.jsonl").rename(curated / "cifar10.jsonl")
    table = load_results([curated])
    rows = results_rows(table.records, "full", git_commit(), curated_folder=curated)
    (row,) = [row for row in rows if row.framework == "pytorch"]
    assert row.standing.startswith(why) and row.cells()[3] == "-" and "not a result" in row.cells()[-1]
    _, overview = task_overview("cifar10", rows)
    (pytorch,) = [line for line in overview if line[0] == "pytorch"]
    assert pytorch[4].startswith("not a result") and why in pytorch[4] and "40,000" not in " ".join(map(str, pytorch))