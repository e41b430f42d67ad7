"""The results page, run on fixture records: this build's, curated GPU ones from another
profile and commit, a corrupt line and a future-dated one (skipped with warnings, the
files left as they were)."""

import json
from pathlib import Path

import pytest

from page_checks import snapshot
from rosetta_book.chapter import load_comparisons
from rosetta_proof.records import git_commit

PAGE = Path(__file__).resolve().parents[1] / "book" / "appendix" / "results.md"


def write_records(folder: Path, task: str, *records: dict | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{task}.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def record(framework, device, profile, commit, date="2026-11-30T10:00:00+00:00", **metrics):
    return {"task": "cifar10", "framework": framework, "versions": {}, "device": device, "profile": profile,
            "metrics": metrics, "config": {}, "date": date, "commit": commit,
            "verdicts": {"equivalence with PyTorch": {framework: "agrees"}}, "held": True}


@pytest.fixture
def page_on_fixtures(tmp_path, monkeypatch):
    build, curated = tmp_path / "build", tmp_path / "curated"
    current = git_commit()
    write_records(build, "cifar10",
                  record("pytorch", "cpu", "smoke", current, images_per_second=80.0, seconds_per_epoch=12.0,
                         test_accuracy=0.25),
                  record("pytorch", "cpu", "smoke", current, date="2026-11-29T10:00:00+00:00",
                         images_per_second=1.0))
    write_records(curated, "cifar10",
                  record("pytorch", "cuda:0 (NVIDIA H200)", "full", "0123456789ab", images_per_second=40000.0,
                         seconds_per_epoch=12.5, test_accuracy=0.7),
                  "{this is not JSON",
                  json.dumps(record("jax", "cpu", "full", "0123456789ab", date="2999-01-01T00:00:00+00:00")))
    before = snapshot(tmp_path)
    monkeypatch.setenv("ROSETTA_RESULTS_DIR", str(build))
    monkeypatch.setenv("ROSETTA_CURATED_RESULTS_DIR", str(curated))
    monkeypatch.setenv("ROSETTA_PROFILE", "smoke")
    namespace = load_comparisons(PAGE, {})
    assert snapshot(tmp_path) == before, "the results page must never rewrite a record"
    return namespace


def test_the_newest_record_of_each_series_is_shown_and_stale_ones_labelled(page_on_fixtures):
    rows = {(row.source, row.device): row for row in page_on_fixtures["rows"]}
    assert set(rows) == {("this build", "cpu"), ("curated", "cuda:0 (NVIDIA H200)")}
    build_row = rows["this build", "cpu"]
    assert build_row.rate == ("images_per_second", 80.0) and build_row.label == ""
    assert build_row.cells()[-1].endswith(": current") and "80.0 (images per second)" in build_row.cells()[3]
    gpu_row = rows["curated", "cuda:0 (NVIDIA H200)"]
    assert gpu_row.label == "full profile, older commit 0123456789ab"
    assert gpu_row.accuracy == 0.7 and gpu_row.time == ("seconds_per_epoch", 12.5)


def test_corrupt_and_future_records_are_skipped_with_warnings_naming_file_and_line(page_on_fixtures):
    messages = [str(warning.message) for warning in page_on_fixtures["skipped"]]
    assert len(messages) == 2
    assert "curated/cifar10.jsonl:2:" in messages[0] and "not JSON" in messages[0]
    assert "curated/cifar10.jsonl:3:" in messages[1] and "dated in the future" in messages[1]


def test_each_task_has_a_table_and_a_chart(page_on_fixtures):
    assert set(page_on_fixtures["overviews"]) == set(page_on_fixtures["figures"]) == {"cifar10", "resnet50", "imdb"}
    for task, figure in page_on_fixtures["figures"].items():
        assert figure.axes[0].get_title().startswith(task)


def test_the_overview_sets_the_reference_this_build_and_the_gpu_record_side_by_side(page_on_fixtures):
    from rosetta_proof.reference import PUBLISHED

    headers, rows = page_on_fixtures["overviews"]["cifar10"]
    assert headers[1].startswith("K80") and headers[3].startswith("this build") and headers[4].startswith("GPU")
    assert len(headers) == 5  # device, profile and date share the rate's cell: the table fits the column
    pytorch = next(row for row in rows if row[0] == "pytorch")
    k80, p100 = PUBLISHED["cifar10"].items_per_second("pytorch")
    assert pytorch[1:3] == [f"{k80:,.1f}", f"{p100:,.1f}"]
    assert pytorch[3].startswith("80.0 (cpu, smoke, 2026-11-30")  # the newest of two
    assert pytorch[4] == "40,000.0 (cuda:0 (NVIDIA H200), full, 2026-11-30 (full profile, older commit 0123456789ab))"
    jax = next(row for row in rows if row[0] == "jax")
    assert jax[1:] == ["-"] * 4  # no reference figure, no record (the future-dated one is skipped)
    heights = [patch.get_height() for patch in page_on_fixtures["figures"]["cifar10"].axes[0].patches]
    assert 80.0 in heights and 40000.0 in heights


def test_a_curated_record_from_a_cpu_is_no_gpu_record():
    from rosetta_proof.record_tables import ResultRow, task_overview

    cpu = ResultRow("imdb", "mxnet", "cpu", "full", "curated", None, ("reviews_per_second", 9.0), None,
                    "2026-11-30T10:00:00", "abc", "")
    headers, rows = task_overview("imdb", [cpu], None)
    assert next(row for row in rows if row[0] == "mxnet")[4] == "-"
    gpu = ResultRow(*("imdb", "mxnet", "cuda:0", "full", "curated", None, ("reviews_per_second", 9.0), None,
                      "2026-11-30T10:00:00", "abc", ""))
    assert next(row for row in task_overview("imdb", [gpu], None)[1] if row[0] == "mxnet")[4].startswith("9.0 (")


def test_the_benchmark_section_shows_the_newest_report_or_says_there_is_none(page_on_fixtures, tmp_path,
                                                                             monkeypatch, capsys):
    assert page_on_fixtures["reports"] == []
    from test_bench import CIFAR_RUN
    from rosetta_book.bench.report import summarize

    build = tmp_path / "build"
    (build / "bench-cifar10.json").write_text(json.dumps(summarize(CIFAR_RUN, "smoke")))
    monkeypatch.setenv("ROSETTA_RESULTS_DIR", str(build))
    monkeypatch.setenv("ROSETTA_CURATED_RESULTS_DIR", str(tmp_path / "curated"))
    namespace = load_comparisons(PAGE, {})
    assert [report["task"] for report in namespace["reports"]] == ["cifar10"]
    assert "cifar10: fastest framework pytorch (NCHW)" in capsys.readouterr().out


def test_a_task_pages_benchmark_table_is_the_newest_report_of_its_task(tmp_path):
    """What each task page's Timing section ends with (rosetta_proof.record_tables
    .task_bench_table): this build's report or a curated one, whichever is newer, labelled;
    another task's report is not shown; without one, the line says how to make one."""
    from test_bench import CIFAR_RUN
    from rosetta_book.bench.report import summarize
    from rosetta_book.bench.tasks import JAX_LIMIT
    from rosetta_proof.record_tables import TASK_BENCH_HEADERS, task_bench_table

    build, curated = tmp_path / "build", tmp_path / "curated"
    build.mkdir(), curated.mkdir()
    line, headers, rows = task_bench_table("cifar10", build, curated)
    assert rows == [] and "No benchmark report for cifar10" in line and "make bench" in line
    report = summarize(CIFAR_RUN, "smoke")
    (build / "bench-cifar10.json").write_text(json.dumps(report))
    (build / "bench-imdb.json").write_text(json.dumps({**report, "task": "imdb", "started": "2099-01-01"}))
    line, headers, rows = task_bench_table("cifar10", build, curated)
    assert headers == TASK_BENCH_HEADERS and [row[0] for row in rows] == list(report["frameworks"])
    jax = dict(zip(headers, next(row for row in rows if row[0] == "jax")))
    assert jax["page's configuration"] == "jit" and jax["fastest found"] == "no jit"
    assert jax["page / fastest"] == "1.50, beyond the spread" and jax["target"] == "1.10 (MISSED)"
    assert jax["why the page stops there"] == JAX_LIMIT  # missed: the task's recorded reason
    assert dict(zip(headers, next(row for row in rows if row[0] == "pytorch")))["why the page stops there"] == "-"
    limited = {**report, "frameworks": {**report["frameworks"],
                                        "jax": {**report["frameworks"]["jax"], "limit": "a reason"}}}
    (build / "bench-cifar10.json").write_text(json.dumps(limited))
    _, _, rows_limited = task_bench_table("cifar10", build, curated)
    assert dict(zip(headers, next(row for row in rows_limited if row[0] == "jax")))["why the page stops there"] \
        == "a reason"
    (build / "bench-cifar10.json").write_text(json.dumps(report))
    assert "this build's report" in line and "a machine the report does not name" in line
    newer = {**report, "started": "2099-01-01 00:00:00 UTC", "machine": {"cpu": "AMD EPYC test", "cores": 2}}
    (curated / "bench-cifar10.json").write_text(json.dumps(newer))
    line, _, _ = task_bench_table("cifar10", build, curated)
    assert line.startswith("benchmark run of 2099-01-01 00:00 on AMD EPYC test, 2 cores, smoke profile")
    assert "a curated report, committed under results/" in line
    assert ", 3 rounds, every configuration taking turns, load average" in line
    data = {result.get("data", "not recorded") for result in newer["frameworks"].values()}
    assert line.endswith(f"; data: {'; '.join(sorted(data))}; weights: not recorded"), line
    named = {**newer, "frameworks": {name: {**result, "data": "a stand-in", "weights": "drawn at random"}
                                     for name, result in newer["frameworks"].items()}}
    (curated / "bench-cifar10.json").write_text(json.dumps(named))
    line, _, _ = task_bench_table("cifar10", build, curated)
    assert line.endswith("; data: a stand-in; weights: drawn at random"), line
    in_turn = {**newer, "in_turn": [["pytorch"], ["jax"]], "in_turn_why": "a reason"}
    (curated / "bench-cifar10.json").write_text(json.dumps(in_turn))
    line, _, _ = task_bench_table("cifar10", build, curated)
    assert ", 3 rounds, frameworks timed one after another (a reason), load average" in line


def test_the_settings_that_moved_each_framework_most_are_read_from_the_report():
    from test_bench import CIFAR_RUN
    from rosetta_book.bench.report import summarize
    from rosetta_proof.record_tables import BENCH_MOVES_HEADERS, bench_moves

    rows = {row[1]: dict(zip(BENCH_MOVES_HEADERS, row)) for row in bench_moves([summarize(CIFAR_RUN, "smoke")])}
    # JAX: page "jit" 0.3 s; "no jit" 0.2 s helped (x1.50), "jit, 1 thread" 0.25 s helped less
    assert rows["jax"]["helped most"] == "no jit" and rows["jax"]["page / it"] == "1.50"
    assert rows["jax"]["hurt most"] == "jit, 1 thread" and rows["jax"]["it / page"] == "0.83"
    # PyTorch: page NHWC 0.105 s (median), NCHW 0.1 s
    assert rows["pytorch"]["helped most"] == "NCHW" and rows["pytorch"]["page / it"] == "1.05"
    slower_only = summarize(CIFAR_RUN, "smoke")
    slower_only["frameworks"] = {"pytorch": slower_only["frameworks"]["pytorch"]}
    slower_only["frameworks"]["pytorch"]["configurations"]["NCHW"]["seconds_per_item"] *= 2
    (row,) = bench_moves([slower_only])
    assert row[3:5] == ["-", "-"] and row[5] == "NCHW"
