"""Timing, progress lines and tables."""

import time

import pytest

from rosetta_proof.tables import MarkdownText, markdown_table, stored_parameters, symbolic_shape
from rosetta_utils.timing import NEITHER_FASTER, Timing, faster, format_seconds, measure, median_and_iqr


def test_measure_runs_warmup_untimed_and_synchronizes_inside_the_clock():
    calls = []

    def work():
        calls.append("work")
        return len(calls)

    def slow_sync(value):
        calls.append("sync")
        time.sleep(0.02)  # asynchronous work finishing: must be inside the timed region

    timing = measure(work, "pytorch", warmup=2, repeats=3, synchronize=slow_sync)
    assert calls.count("work") == 5 and calls.count("sync") == 5
    assert len(timing.seconds) == 3
    assert timing.best >= 0.02


def test_measure_uses_the_frameworks_own_synchronization(monkeypatch):
    import rosetta_utils.backends.mxnet as mxnet_backend

    seen = []
    monkeypatch.setattr(mxnet_backend, "synchronize", lambda value=None: seen.append(value))
    measure(lambda: "result", "mxnet", warmup=1, repeats=2)
    assert seen == ["result"] * 3


@pytest.mark.parametrize("warmup, repeats", [(-1, 3), (0, 0)])
def test_measure_rejects_impossible_counts(warmup, repeats):
    with pytest.raises(ValueError, match="must be"):
        measure(lambda: None, "pytorch", warmup=warmup, repeats=repeats, synchronize=lambda v: None)


def test_measure_rejects_unknown_framework():
    with pytest.raises(ValueError, match="unknown framework 'cntk'"):
        measure(lambda: None, "cntk")


def test_timing_statistics():
    timing = Timing((0.010, 0.011, 0.012, 0.013, 0.100))
    assert timing.median == 0.012
    assert timing.best == 0.010
    assert timing.spread == pytest.approx((0.013 - 0.011) / 2)
    assert "12.00 ms" in str(timing)


def test_format_seconds_picks_a_readable_unit():
    assert format_seconds(2.5) == "2.50 s"
    assert format_seconds(0.0025) == "2.50 ms"
    assert format_seconds(2.5e-6) == "2.5 µs"


def test_markdown_table_and_its_errors():
    text = markdown_table(["a", "b"], [["x|y", 1.001e-5], ["__call__", 0.25]])
    assert text.splitlines() == ["| a | b |", "|---|---|", "| x\\|y | 1.001e-05 |", "| \\_\\_call\\_\\_ | 0.25 |"]
    with pytest.raises(ValueError, match="row 1 has 1 cells for 2 headers"):
        markdown_table(["a", "b"], [["only one"]])


def test_a_single_run_prints_as_one_number_without_a_spread():
    assert str(Timing((1.56,))) == "1.56 s (one run)"
    assert "±" in str(Timing((1.0, 2.0)))


def test_faster_is_said_only_when_the_spreads_do_not_overlap():
    fast, slow = [1.0, 1.1, 1.2, 1.0, 1.1], [2.0, 2.2, 2.1, 1.9, 2.0]
    assert faster(fast, slow) == "first" and faster(slow, fast) == "second"
    # a lower median is not enough: these IQRs (1.2 to 1.6, 1.5 to 1.7) overlap
    assert faster([1.0, 1.2, 1.4, 1.6, 1.8], [1.3, 1.5, 1.5, 1.7, 1.9]) == NEITHER_FASTER
    # touching quartiles overlap too
    assert faster([1.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 3.0]) == NEITHER_FASTER


def test_median_and_iqr_are_numpys_linear_quartiles():
    import numpy as np

    assert median_and_iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == (3.0, 2.0)
    values = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4]
    low, median, high = np.percentile(values, [25, 50, 75])
    assert median_and_iqr(values) == pytest.approx((median, high - low))


def test_a_layers_storage_reads_in_the_names_of_its_sizes():
    sizes = {4: "I", 5: "H", 15: "3H"}
    assert symbolic_shape((15, 4), sizes) == "(3H, I)"
    assert symbolic_shape((2, 15), sizes) == "(2, 3H)"  # a size with no name stays a number
    stored = stored_parameters({"w_ih": (15, 4), "w_hh": (15, 5), "b_ih": (15,), "b_hh": (15,)}, sizes)
    assert stored == "`w_ih` (3H, I), `w_hh` (3H, H), `b_ih`, `b_hh` (3H)"
    many = stored_parameters({f"b{i}": (5,) for i in range(6)}, sizes)
    assert many == "`b0`..`b5` (H)"
    # Markdown text keeps its code spans and math; plain text is escaped; a "|" never ends a cell
    table = markdown_table(["a", "b"], [[stored, "w_ih | x"], [MarkdownText("$x K$ | `a_b`"), 1.0]])
    assert "`w_ih` (3H, I)" in table and "w\\_ih \\| x" in table and "$x K$ \\| `a_b`" in table
