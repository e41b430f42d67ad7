"""The scan that decides which cells of a part run alone: those that time something."""

import pytest

from rosetta_book.timed_cells import clock_functions, reads_a_clock, timed_cells


def test_the_clock_scan_finds_each_way_of_timing():
    for code in ["import time\nstart = time.perf_counter()", "import timeit", "t = time.time()",
                 "from rosetta_utils.timing import interleave", "time.monotonic()",
                 "with torch.profiler.profile() as prof:\n    step()"]:
        assert reads_a_clock(code), code
    assert not reads_a_clock("def interleave(array):\n    return array  # gates, not a timing")


def timed(*cells):
    """Which of ``cells`` time something (True) or not (False)."""
    return [bool(reasons) for reasons in timed_cells(list(cells))]


def test_defining_a_timer_runs_nothing_calling_it_times():
    assert timed("import time\nimport numpy as np",
                 "def step():\n    start = time.perf_counter()\n    return time.perf_counter() - start",
                 "x = np.zeros(3)\nprint(x)",
                 "seconds = [step() for _ in range(3)]",
                 "print(seconds)") == [False, False, False, True, True]


def test_a_function_that_calls_a_timer_is_a_timer_wherever_it_is_defined():
    # used before the cell that defines its timer: the scan runs to a fixed point
    assert timed("def train():\n    return epoch()", "def epoch():\n    import time\n    return time.time()",
                 "train()", "print('done')") == [False, False, True, False]


def test_a_functions_own_names_are_not_the_cells_timed_ones():
    """``epoch`` is timed (the timing loop's variable), but a function's parameter, its
    locals and a comprehension's target of that name are other variables: the cells that
    use them time nothing. A function that reads the loop's own ``epoch`` does."""
    loop = "import time\nfor epoch in range(2):\n    seconds = time.perf_counter()"
    assert timed(loop,
                 "def batches(epoch):\n    return [epoch]",
                 "batches(3)",
                 "def last():\n    seconds = 1\n    return seconds",
                 "last()",
                 "squares = [epoch * epoch for epoch in range(3)]",
                 "by_epoch = lambda epoch: epoch + 1\nby_epoch(1)",
                 "def now():\n    return epoch",
                 "now()") == [True, False, False, False, False, False, False, False, True]
    # a default is read where the function is defined; a name declared global is the cell's
    assert timed(loop, "def f(start=seconds):\n    return start", "f()",
                 "def g():\n    global seconds\n    return seconds", "g()") == [True, False, True, False, True]


def test_a_script_with_a_clock_times_the_cell_that_runs_it():
    assert timed("SCRIPT = '''import time\\nprint(time.perf_counter())'''",
                 "import subprocess, sys\nsubprocess.run([sys.executable, '-c', SCRIPT])",
                 "subprocess.run([sys.executable, '-c', 'print(1)'])",  # the module is not tainted
                 ) == [False, True, False]


def test_an_object_handed_a_timer_times_the_cells_that_use_it():
    assert timed("CODE = 'import time\\ndef train():\\n    return time.monotonic()'",
                 "namespace = {}\nexec(CODE, namespace)",
                 "namespace['train']()",
                 "import time\ncallbacks = []\ncallbacks.append(lambda: time.perf_counter())",
                 "for callback in callbacks:\n    callback()") == [False, True, True, True, True]


def test_the_readers_library_is_scanned_like_a_page():
    library = clock_functions()
    assert "measure" in library["rosetta_utils.timing"]
    assert "median_and_iqr" not in library["rosetta_utils.timing"]  # statistics read no clock
    assert "run_processes" in library["rosetta_utils.worker_processes"]
    assert timed("from rosetta_utils.timing import measure, median_and_iqr",
                 "print(median_and_iqr([1.0, 2.0]))",
                 "timing = measure(lambda: None, 'pytorch')",
                 "import rosetta_utils.timing as t\nt.measure(lambda: None, 'jax')") == [False, False, True, True]


def test_magics_are_read_as_the_python_they_run_and_broken_code_times():
    assert timed("%timeit sum(range(10))", "x = 1") == [True, False]
    assert timed_cells(["def f(:"]) == [["(not valid Python)"]]


@pytest.mark.parametrize("builtin", ["print", "len", "range"])
def test_builtins_are_never_timed(builtin):
    assert timed("import time", f"{builtin}(time.perf_counter())", f"{builtin}([1])") == [False, True, False]
