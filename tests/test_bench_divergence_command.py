"""The divergence command's benchmark (rosetta_book.bench.divergence_command): its two
stand-in cases are what it says they are, and it runs the reader's command on them. It
times nothing here: the sizes are tiny."""

import pytest

from rosetta_book.bench.divergence_command import main, write_runs
from rosetta_utils.divergence import compare_files


def test_the_close_run_agrees_at_every_layer_and_the_far_one_only_at_its_last(tmp_path):
    first, close, far = write_runs(tmp_path, layers=4, shape=(2, 3, 4, 4))
    agree = compare_files(first, close)
    assert agree.first is None and len(agree.layers) == 4
    differ = compare_files(first, far)
    assert differ.first.name == "layer003" and differ.causes[0].name == "factor"


def test_the_command_prints_both_cases_and_their_ratio_to_the_target(capsys):
    assert main(["--layers", "3", "--shape", "2,3,4,4", "--rounds", "1", "--target", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("two files of 3 layers of (2, 3, 4, 4) float32")
    assert lines[1].startswith("every layer within its bound: median")
    assert lines[2].startswith("the last layer beyond it, causes named: median")
    assert all(line.endswith("of the 5 s target") for line in lines[1:])


def test_a_size_below_one_is_refused():
    with pytest.raises(SystemExit):
        main(["--shape", "2,0,4"])
