"""make test's closing table of the costliest build parts and test processes
(tools/run_tests.py), read from the build's ledger and the run's own processes."""

import importlib.util
import json
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "run_tests.py"
spec = importlib.util.spec_from_file_location("run_tests_tool", TOOL)
run_tests = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = run_tests  # its dataclasses look their module up there
spec.loader.exec_module(run_tests)


def test_the_costliest_mixes_executed_parts_and_test_processes_longest_first(tmp_path):
    ledger = tmp_path / "verdicts-gated.json"
    ledger.write_text(json.dumps({"line": "3 verdicts gated on 1 pages", "executed_parts": [
        ["chapters/finding_divergence", "jax", 112.0, 80.5], ["chapters/cifar10_cnn", "comparisons", 9.0, None]]}))
    jobs = [run_tests.Job("current", ["tests/test_zoo_porting.py"], 150.0, "python", {}, seconds=131.0),
            run_tests.Job("legacy", ["tests/test_gru.py"], 3.0, "python", {}, seconds=4.0)]
    costs = run_tests.costliest(jobs, ledger)
    assert [round(seconds) for seconds, _ in costs] == [131, 112, 9, 4]
    assert costs[1][1] == "build part chapters/finding_divergence: jax, 80 CPU-s"
    assert costs[0][1] == "test process current: test_zoo_porting.py"
    assert costs[2][1] == "build part chapters/cifar10_cnn: comparisons"


def test_without_a_ledger_the_test_processes_alone_are_listed(tmp_path):
    jobs = [run_tests.Job("current", ["tests/test_a.py"], 1.0, "python", {}, seconds=2.0)]
    assert run_tests.costliest(jobs, tmp_path / "missing.json") == [(2.0, "test process current: test_a.py")]
    assert run_tests.costliest(jobs, None) == [(2.0, "test process current: test_a.py")]


def test_the_report_ends_with_each_failed_test_and_its_message(tmp_path, capsys):
    junit = tmp_path / "01-current.xml"
    junit.write_text('<testsuite><testcase classname="tests.test_a" name="test_ok" time="0.1"/>'
                     '<testcase classname="tests.test_a" name="test_bad" time="0.2">'
                     '<failure message="AssertionError: 3 != 4&#10;second line">trace</failure>'
                     '</testcase></testsuite>')
    log = tmp_path / "01-current.log"
    log.write_text("1 failed, 1 passed\n")
    job = run_tests.Job("current", ["tests/test_a.py"], 1.0, "python", {}, seconds=2.0,
                        returncode=1, output=log, junit=junit)
    job.tests = run_tests.read_junit(junit)
    assert run_tests.report([job]) is False
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-3:] == ["failed tests (1):", "  tests.test_a::test_bad: AssertionError: 3 != 4",
                          "2 tests (1 passed, 0 skipped, 1 failed, in 1 pytest processes)"]
