"""Results records: append, load, and report corrupt lines without losing the rest."""

import json
import math

import pytest

from rosetta_utils.results import CorruptRecordWarning, load_results, record_result


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
