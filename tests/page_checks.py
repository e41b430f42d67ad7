"""Running a book page's code as `make test` runs it, and the assertions the page tests
share: a failed proof stops the page, a knob table is complete, a cache is unchanged."""

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rosetta_book.environments import require_python
from rosetta_book.one_framework import environment as one_framework_environment


def smoke_offline(patch: pytest.MonkeyPatch, results_dir: Path | None = None) -> None:
    """Set the environment `make test` runs pages in: smoke profile, offline (labelled
    stand-ins for missing data), a book build; records into ``results_dir`` if given."""
    patch.setenv("ROSETTA_PROFILE", "smoke")
    patch.setenv("ROSETTA_OFFLINE", "1")
    patch.setenv("ROSETTA_BOOK_BUILD", "1")
    if results_dir is not None:
        patch.setenv("ROSETTA_RESULTS_DIR", str(results_dir))


def comparisons_with_records(page: Path, parts, folder: Path, *records) -> dict:
    """A page's comparison cells run on ``parts``, with ``records`` (measurements: task,
    framework, versions, device, config and metrics) written by the device check's own
    writer for the GPU lessons as the only results the build's and the curated folder hold
    (both under ``folder``): how a lessons page shows GPU records it has, or says it has none."""
    from rosetta_book.chapter import load_comparisons
    from rosetta_book.gpu_lessons import write_record

    build, curated = folder / "build", folder / "curated"
    curated.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch, build)
        patch.setenv("ROSETTA_CURATED_RESULTS_DIR", str(curated))
        patch.setenv("MPLBACKEND", "Agg")
        for record in records:
            write_record(record, record["metrics"], build, driver=None)
        return load_comparisons(page, parts)


def summary_shown(page_path: Path, namespace: dict, monkeypatch: pytest.MonkeyPatch) -> str:
    """What a page's Summary cell shows, run again on its comparison cells' namespace (a
    copy: ``namespace`` is left as it was): the text of every object it displays."""
    import IPython.display

    from rosetta_book.page import Page

    page = Page.read(page_path)
    (source,) = [source for index, source in page.code_cells(page.comparison_part())
                 if page.section_of(index) == "Summary"]
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects, **_: shown.extend(objects))
    exec(compile(source, f"{page_path.name} (Summary)", "exec"), dict(namespace))  # noqa: S102 - the page's cell
    return "\n".join(getattr(shown_object, "data", str(shown_object)) for shown_object in shown)


def snapshot(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` with the SHA-256 of its bytes (folders: '<dir>'): a cache
    compared before and after a failure must be unchanged."""
    if not folder.exists():
        return {}
    return {
        str(path.relative_to(folder)): ("<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest())
        for path in sorted(folder.rglob("*"))
    }


def assert_true_float32_equivalence(runs) -> None:
    """Each TF32 switch, read inside a page's own equivalence cells, was off there; the part's
    environment, read at its end (after Timing), shows the framework's defaults again."""
    expected = {"pytorch": ["ieee", "ieee", "ieee"], "tensorflow": False, "jax": "highest",
                "mxnet": "float32", "chainer": "float32"}
    defaults = {"pytorch": "matmul none, conv tf32, rnn tf32", "tensorflow": "TF32 allowed",
                "jax": "matmul precision default"}
    for framework, run in runs.items():
        assert run.equivalence_precision == expected[framework], framework
        if framework in defaults:
            assert run.environment["float32"] == defaults[framework], framework


#: What MXNet 1.9 and Chainer 7 need before their import (the pages' fix lines, shortened).
IMPORT_FIXES = {
    "mxnet": "import numpy as np\nnp.bool = bool\n",
    "chainer": "import _distutils_hack\n_distutils_hack.remove_shim()\n",
}


def framework_process_output(framework: str, code: str) -> str:
    """The last line ``code`` prints in a fresh process where only ``framework`` imports:
    how a test reads what the installed framework itself says (a default, a switch)."""
    done = subprocess.run([require_python(framework), "-c", IMPORT_FIXES.get(framework, "") + code],
                          env=one_framework_environment(framework), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def assert_knob_table_complete(comparison, switches, frameworks) -> None:
    """A lessons page's knob table: a row for every knob, a filled cell for every framework,
    a link to the measurement, and each named switch in its framework's cell."""
    from rosetta_proof.knob_table import NOT_REPORTED, knob_rows, missing_cells

    headers, rows = knob_rows(comparison["runs"], comparison["KNOBS"], comparison["LINKS"])
    assert headers == ["knob", *frameworks, "measured"]
    assert [row[0] for row in rows] == comparison["KNOBS"]
    assert missing_cells(comparison["runs"], comparison["KNOBS"]) == []
    for row in rows:
        assert all(cell and cell != NOT_REPORTED for cell in row[1:-1]), row
        assert "{ref}`" in row[-1]
    for framework, named in switches.items():
        if framework in frameworks:
            column = headers.index(framework)
            for knob, switch in named.items():
                cell = next(row[column] for row in rows if row[0] == knob)
                assert switch in cell, f"{framework} {knob}: {cell}"


def parts_as_built(page, frameworks):
    """For a module fixture (``yield from``): each framework's part of ``page`` run as `make
    test` runs it (smoke profile, offline; from the build's cache where it executed them)."""
    from rosetta_book.chapter import run_framework_parts

    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        yield run_framework_parts(page, frameworks)


def comparisons_as_built(page, results, results_dir=None):
    """For a module fixture (``yield from``): the page's comparison cells run on ``results``
    as the build runs them (smoke profile, offline; records into ``results_dir``)."""
    from rosetta_book.chapter import load_comparisons

    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        if results_dir is not None:
            patch.setenv("ROSETTA_RESULTS_DIR", str(results_dir))
        yield load_comparisons(page, results)


def assert_a_failed_proof_stops_the_page(page, results, framework, changed, match, failing=None):
    """Run the page's comparison cells as the build does, on ``results`` where
    ``framework``'s results take ``changed``: the page's gate must stop it, with an error
    naming the page, the section, the check, what failed (``failing``, default the
    framework) and the verdict (``match``)."""
    from rosetta_book.chapter import ChapterError, load_comparisons
    from rosetta_proof.equivalence import VerdictFailed

    import tempfile

    wrong = {name: dict(values) for name, values in results.items()}
    wrong[framework].update(changed)
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory(prefix="rosetta-failed-") as records:
        smoke_offline(patch)
        patch.setenv("ROSETTA_RESULTS_DIR", records)  # a failed run's records go nowhere that lasts
        with pytest.raises(ChapterError) as error:
            load_comparisons(page, wrong)
    assert isinstance(error.value.__cause__, VerdictFailed), error.value
    message = str(error.value)
    assert f"{Path(page).name}:" in message and "(section '" in message, message
    assert f"failed for {failing or framework}" in message and re.search(match, message), message
    return message


#: Set in a pytest process that :func:`in_a_process_of_its_own` started: its tests, one per line.
OWN_PROCESS_VARIABLE = "ROSETTA_TEST_IN_OWN_PROCESS"


#: Tests that already passed in a process another test started (``together_with``).
_PASSED_ALONE: set[str] = set()


def in_a_process_of_its_own(request, together_with: tuple[str, ...] = ()) -> bool:
    """For a test that loads whole models of several frameworks in turn: run it again in a
    pytest process of its own, where what it loads dies with it (the suite's processes
    stay under 8 GB). Returns True in that process, where the test goes on; in the test
    process itself it asserts that the other one passed and returns False.
    ``together_with``: names of tests in the same module, with the same parameters, that
    run in that process too (they load the same part once, see the module's own memo);
    each of them then returns False at once here, having passed there."""
    nodeid = request.node.nodeid
    if nodeid in os.environ.get(OWN_PROCESS_VARIABLE, "").split("\n"):
        return True
    if nodeid in _PASSED_ALONE:
        return False
    module, _, test = nodeid.partition("::")
    parameters = test[test.index("["):] if "[" in test else ""
    nodeids = [nodeid] + [f"{module}::{name}{parameters}" for name in together_with]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *nodeids],
        cwd=Path(__file__).parents[1], env={**os.environ, OWN_PROCESS_VARIABLE: "\n".join(nodeids)},
        capture_output=True, text=True)
    assert done.returncode == 0, f"{', '.join(nodeids)}, in a process of their own:\n{done.stdout[-6000:]}"
    assert re.search(rf"\b{len(nodeids)} passed\b", done.stdout), done.stdout[-2000:]
    _PASSED_ALONE.update(nodeids[1:])
    return False
