"""Executing a page part by part: caching per framework, merged outputs, the guards."""

from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache

from tiny_pages import code_cell, myst_page
from rosetta_book.page import Page
from rosetta_book.page_execution import PageExecutionError, execute_page, run_notebook

FRONT = "frameworks: [pytorch, jax]\ntab_results: [value]\n"


def page_with(torch_code: str, jax_code: str) -> str:
    return myst_page(
        "Cached",
        code_cell("base = 2\nprint('shared', base)"),
        code_cell(torch_code, "pytorch"),
        code_cell(jax_code, "jax"),
        code_cell("from rosetta_proof.tab_results import load_tab_results\n"
                  "print({fw: run.value for fw, run in load_tab_results().items()})", "comparison"),
        front_matter_extra=FRONT,
    )


def outputs_of(notebook):
    return ["".join(o.get("text", "") for o in cell.get("outputs", [])) for cell in notebook.cells
            if cell.cell_type == "code"]


def test_parts_are_cached_one_framework_at_a_time(write_page, tmp_path):
    cache = get_cache(tmp_path / "cache")
    path = write_page("cached.md", page_with("value = base + 1\nprint(value)", "value = base + 2\nprint(value)"))
    first = execute_page(Page.read(path), ["pytorch", "jax"], cache, log=lambda line: None)
    assert [(part.name, part.cached) for part in first.parts] == [
        ("pytorch", False), ("jax", False), ("comparisons", False)]
    assert outputs_of(first.notebook) == ["shared 2\n", "3\n", "4\n", "{'pytorch': 3, 'jax': 4}\n"]
    path.write_text(page_with("value = base + 1\nprint(value)", "value = base * 10\nprint(value)"))
    second = execute_page(Page.read(path), ["pytorch", "jax"], cache, log=lambda line: None)
    assert [(part.name, part.cached) for part in second.parts] == [
        ("pytorch", True), ("jax", False), ("comparisons", False)], "only the changed tab re-runs"
    assert outputs_of(second.notebook) == ["shared 2\n", "3\n", "20\n", "{'pytorch': 3, 'jax': 20}\n"]


def test_an_unselected_framework_is_not_executed(write_page):
    path = write_page("one.md", page_with("value = 1", "value = 2"))
    executed = execute_page(Page.read(path), ["jax"], log=lambda line: None)
    assert [part.name for part in executed.parts] == ["jax", "comparisons"]
    assert outputs_of(executed.notebook)[1] == "" and outputs_of(executed.notebook)[-1] == "{'jax': 2}\n"


def test_a_part_runs_as_its_download_would_in_an_empty_folder(write_page):
    """Nothing beside the page reaches a part: it runs in a folder of its own, so a page
    that reads a file next to it (its own source, another page) cannot build."""
    write_page("beside.txt", "a file next to the page")
    path = write_page("alone.md", myst_page("Alone", code_cell("import os\nprint(os.listdir())", "jax"),
                                            front_matter_extra="frameworks: [jax]\n"))
    executed = execute_page(Page.read(path), ["jax"], log=lambda line: None)
    assert outputs_of(executed.notebook) == ["[]\n"]
    failing = write_page("reads.md", myst_page("Reads", code_cell("open('beside.txt').read()", "jax"),
                                               front_matter_extra="frameworks: [jax]\n"))
    with pytest.raises(PageExecutionError, match="FileNotFoundError.*beside.txt"):
        execute_page(Page.read(failing), ["jax"], log=lambda line: None)


def test_what_a_pages_code_leaves_in_the_temporary_folder_goes_with_its_run(write_page):
    """A page's ``tempfile.mkdtemp`` folder outlives its process; the build removes it
    with the part's scratch (the finding-divergence chapter leaves 337 MB a run)."""
    leave = "import tempfile\nvalue = tempfile.mkdtemp(prefix='left-')\nprint(value)"
    path = write_page("leaves.md", page_with(leave, leave))
    executed = execute_page(Page.read(path), ["pytorch", "jax"], log=lambda line: None)
    left = [Path(text.strip()) for text in outputs_of(executed.notebook)[1:3]]
    assert len(left) == 2 and all(folder.name.startswith("left-") for folder in left)
    assert not any(folder.exists() for folder in left), "the folders the parts made are gone"


def test_a_failing_comparison_names_its_line(write_page):
    text = myst_page("Bad", code_cell("value = 1", "jax"), code_cell("1 / 0", "comparison"),
                     front_matter_extra="frameworks: [jax]\ntab_results: [value]\n")
    path = write_page("bad.md", text)
    line = text.splitlines().index("1 / 0")
    with pytest.raises(PageExecutionError, match=rf"bad.md:{line}: the comparison failed in section 'Bad': ZeroDivisionError"):
        execute_page(Page.read(path), ["jax"], log=lambda line: None)


def test_native_output_goes_to_the_log_not_the_page(write_page, tmp_path):
    text = myst_page("Native", code_cell("import os\nos.write(2, b'native noise\\n')\nprint('python')", "jax"),
                     front_matter_extra="frameworks: [jax]\n")
    executed = execute_page(Page.read(write_page("native.md", text)), ["jax"], log=lambda line: None,
                            log_folder=tmp_path / "logs")
    assert outputs_of(executed.notebook) == ["python\n"]
    assert (tmp_path / "logs" / "native-jax.log").read_text() .count("native noise") == 1


def test_a_part_says_the_cpu_seconds_its_kernel_and_the_processes_it_waited_for_used(tmp_path):
    """The build log's CPU-s: the kernel's own (0.3 s of busy loop, at least) and a child
    process's it waited for (0.3 s more)."""
    from rosetta_book.one_framework import environment

    busy = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.3:\n    pass"
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(busy),
        nbformat.v4.new_code_cell(f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {busy!r}], check=True)"),
    ])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    seconds, cpu = run_notebook(notebook, tmp_path, dict(environment("none")), timeout=120)
    assert cpu is not None and cpu >= 0.6 and seconds > 0


def test_a_kernel_started_by_myst_nb_itself_refuses_every_cell(tmp_path):
    """The guard Sphinx installs (PYTHONSTARTUP) against a page executed in one kernel."""
    import rosetta_book.myst_nb_guard as guard
    from rosetta_book.one_framework import environment

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('ran')")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    env = dict(environment("none"), PYTHONSTARTUP=str(Path(guard.__file__)))
    with pytest.raises(Exception, match="MyST-NB started executing a page itself"):
        run_notebook(notebook, tmp_path, env, timeout=120)


def test_the_cache_fingerprint_follows_what_a_part_runs_and_only_that(tmp_path, monkeypatch):
    """A changed helper, execution module or constraints file re-executes the pages; a
    changed Sphinx adapter or bench does not (a copy of both packages, edited)."""
    import shutil

    import rosetta_utils
    from rosetta_book import environments, page_execution

    source = Path(page_execution.__file__).parents[1]
    root = tmp_path / "root"
    for package in ("rosetta_utils", "rosetta_book"):
        shutil.copytree(source / package, root / "src" / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(environments.ROOT / "environments", root / "environments")
    monkeypatch.setattr(rosetta_utils, "__file__", str(root / "src" / "rosetta_utils" / "__init__.py"))
    monkeypatch.setattr(page_execution, "__file__", str(root / "src" / "rosetta_book" / "page_execution.py"))
    monkeypatch.setattr(environments, "ROOT", root)
    seen = [page_execution.helpers_fingerprint()]

    def edit(relative):
        path = root / relative
        path.write_text(path.read_text() + "\n# edited\n")
        seen.append(page_execution.helpers_fingerprint())
        return seen[-1] != seen[-2]

    assert not edit("src/rosetta_book/sphinx_extension.py")
    assert not edit("src/rosetta_book/bench/__init__.py")
    assert edit("src/rosetta_utils/timing.py")
    assert edit("src/rosetta_book/downloads.py")
    assert edit("src/rosetta_book/one_framework/sitecustomize.py")
    assert edit("src/rosetta_book/python_source.py")  # imported by downloads and the clock scan
    assert edit("environments/legacy.txt")


def meeting(folder: Path, me: str, other: str, patience: float, timed: bool) -> str:
    """A cell that leaves a file ``me`` in ``folder`` and waits up to ``patience`` seconds for
    the file ``other``; ``met`` says whether it came. A ``timed`` cell reads a clock."""
    clock = "started = time.perf_counter()\n" if timed else ""
    return (f"import pathlib, time\nfolder = pathlib.Path({str(folder)!r})\n{clock}"
            f"(folder / {me!r}).touch()\nwaited = 0.0\n"
            f"while not (folder / {other!r}).exists() and waited < {patience}:\n"
            "    time.sleep(0.1)\n    waited += 0.1\n"
            f"met = (folder / {other!r}).exists()")


def meeting_page(folder: Path, untimed: bool, side_by_side: bool) -> str:
    """Two parts that each leave a file in ``folder`` and wait up to a minute (3 s when they
    are expected one after the other) for the other's, in a cell that reads a clock unless the
    page is ``untimed``: ``value`` says whether each saw the other while it ran."""
    def part(me: str, other: str) -> str:
        return (meeting(folder, me, other, 60 if side_by_side else 3, timed=not untimed) +
                "\nvalue = met\nimport os\nprint(os.environ.get('OMP_WAIT_POLICY'))")
    return myst_page("Side by side", code_cell(part("pytorch", "jax"), "pytorch"), code_cell(part("jax", "pytorch"), "jax"),
                     code_cell("from rosetta_proof.tab_results import load_tab_results\n"
                               "print({fw: bool(run.value) for fw, run in load_tab_results().items()})",
                               "comparison"),
                     front_matter_extra=FRONT + ("untimed: true\n" if untimed else ""))


@pytest.mark.parametrize("untimed, test_build", [(True, False), (False, False), (False, True)])
def test_parts_run_side_by_side_unless_the_page_times_anything_outside_the_test_build(
        write_page, tmp_path, monkeypatch, untimed, test_build):
    """A timed page's cells that time something run alone, one after the other (a part beside
    another would slow its timings), except in the test build, which reads no timing. Side by
    side, each part sees the other's file; one after the other, the first to run cannot."""
    from rosetta_book.machine_slots import runs_alone

    monkeypatch.setenv("ROSETTA_TEST_BUILD", "1" if test_build else "0")
    monkeypatch.setenv("ROSETTA_BUILD_SLOTS", "2")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    folder = tmp_path / "meeting"
    folder.mkdir()
    page = Page.read(write_page("side.md", meeting_page(folder, untimed, untimed or test_build)))
    assert runs_alone(page.untimed) is not (untimed or test_build)
    cache = get_cache(tmp_path / "cache")
    executed = execute_page(page, ["pytorch", "jax"], cache, log=lambda line: None)
    assert [part.name for part in executed.parts] == ["pytorch", "jax", "comparisons"]
    shown = outputs_of(executed.notebook)[-1]
    # parts that share the machine have OpenMP's threads sleep while they wait
    assert outputs_of(executed.notebook)[:2] == ["PASSIVE\n" if untimed or test_build else "None\n"] * 2
    if untimed or test_build:
        assert shown == "{'pytorch': True, 'jax': True}\n"
    else:
        assert shown in ("{'pytorch': False, 'jax': True}\n", "{'pytorch': True, 'jax': False}\n")
    again = execute_page(page, ["pytorch", "jax"], cache, log=lambda line: None)
    assert [part.cached for part in again.parts] == [True, True, False], "both parts were cached"
    assert outputs_of(again.notebook)[-1] == shown


def test_on_a_timed_page_only_the_cells_that_time_run_alone(write_page, tmp_path, monkeypatch):
    """Each part first meets the other in a cell that times nothing (they share the
    machine), then waits for it in a cell that reads a clock (which runs alone: the other
    part's timed cell cannot be running then)."""
    monkeypatch.setenv("ROSETTA_TEST_BUILD", "0")
    monkeypatch.setenv("ROSETTA_BUILD_SLOTS", "2")
    folder = tmp_path / "meeting"
    folder.mkdir()

    def part(me: str, other: str) -> list[str]:
        return [code_cell(meeting(folder, f"{me}-shared", f"{other}-shared", 60, timed=False) + "\nshared = met", me),
                code_cell(meeting(folder, f"{me}-timed", f"{other}-timed", 3, timed=True) + "\nvalue = met", me)]

    page = Page.read(write_page("windows.md", myst_page(
        "Windows", *part("pytorch", "jax"), *part("jax", "pytorch"),
        code_cell("from rosetta_proof.tab_results import load_tab_results\n"
                  "print(sorted(bool(run.value) for run in load_tab_results().values()))", "comparison"),
        front_matter_extra=FRONT)))
    executed = execute_page(page, ["pytorch", "jax"], log=lambda line: None)
    assert [part.alone_cells for part in executed.parts[:2]] == [1, 1]
    assert outputs_of(executed.notebook)[-1] == "[False, True]\n", "the first timed cell ran alone"


@pytest.mark.parametrize("untimed", [False, True])
def test_a_clock_the_scan_cannot_see_stops_the_part_naming_its_cell(write_page, untimed):
    """The kernel's watch: a clock read through getattr (which the scan of the code cannot
    see) stops a timed page's part; on an untimed page, so does any clock read."""
    code = ("import time\nvalue = getattr(time, 'perf_' + 'counter')()" if not untimed
            else "import time\nvalue = time.perf_counter()")
    text = myst_page("Clocks", code_cell("value = 1", "pytorch"), code_cell(code, "jax"),
                     front_matter_extra=FRONT + ("untimed: true\n" if untimed else ""))
    expected = "where none may be read" if untimed else "the scan of its code .* found none"
    with pytest.raises(PageExecutionError, match=rf"clocks.md:\d+: a cell of the JAX \(Flax\) part read a clock "
                                                 rf"\(time.perf_counter in the cell's code, line 2\).*{expected}"):
        execute_page(Page.read(write_page("clocks.md", text)), ["pytorch", "jax"], log=lambda line: None)


def test_a_failing_part_of_an_untimed_page_stops_it_naming_the_part(write_page):
    text = myst_page("Fails", code_cell("import time\ntime.sleep(1)\nvalue = 1", "pytorch"),
                     code_cell("value = 1 / 0", "jax"), front_matter_extra=FRONT + "untimed: true\n")
    with pytest.raises(PageExecutionError, match=r"fails.md:\d+: the JAX \(Flax\) part failed.*ZeroDivisionError"):
        execute_page(Page.read(write_page("fails.md", text)), ["pytorch", "jax"], log=lambda line: None)


def test_untimed_must_be_a_boolean(write_page):
    from rosetta_book.page import PageError

    path = write_page("odd.md", myst_page("Odd", code_cell("value = 1", "jax"),
                                          front_matter_extra="frameworks: [jax]\nuntimed: sometimes\n"))
    with pytest.raises(PageError, match="'untimed' must be true or false, not 'sometimes'"):
        Page.read(path).untimed


@pytest.mark.parametrize("untimed, test_build, reads_the_setting", [
    (True, False, False), (False, False, False), (False, True, False), (True, False, True)])
def test_only_parts_whose_times_nobody_reads_keep_their_compiled_programs(
        write_page, tmp_path, monkeypatch, untimed, test_build, reads_the_setting):
    """Beside the parts' cache, where the tests find them again: a page that times nothing,
    or any page of the test build. A timed page's first calls include compiling, so outside
    the test build its JAX part compiles every time; a page that reads the cache's setting
    keeps JAX's default, so that it shows the reader's."""
    for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                 "TORCHINDUCTOR_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROSETTA_TEST_BUILD", "1" if test_build else "0")
    code = ("import os\nimport jax\nimport jax.numpy as jnp\nvalue = float(jnp.sin(jnp.arange(3.0)).sum())\n"
            "print(os.environ.get('JAX_COMPILATION_CACHE_DIR'), os.environ.get('TORCHINDUCTOR_CACHE_DIR'))")
    if reads_the_setting:
        code += "\nprint(jax.config.jax_compilation_cache_dir)"
    text = myst_page("Kept", code_cell(code, "jax"),
                     front_matter_extra="frameworks: [jax]\ntab_results: [value]\n"
                     + ("untimed: true\n" if untimed else ""))
    cache = get_cache(tmp_path / "build" / "framework-parts")
    executed = execute_page(Page.read(write_page("kept.md", text)), ["jax"], cache, log=lambda line: None)
    jax_folder, torch_folder = tmp_path / "build" / "jax-compilation", tmp_path / "build" / "torchinductor"
    if (untimed or test_build) and not reads_the_setting:
        assert outputs_of(executed.notebook) == [f"{jax_folder} {torch_folder}\n"]
        assert any(jax_folder.iterdir()), "the part's programs were kept"
    else:
        assert outputs_of(executed.notebook)[0].startswith("None None\n") and not jax_folder.exists()

def test_a_name_only_some_parts_leave_is_read_from_those_parts_alone(write_page):
    text = myst_page(
        "Some",
        code_cell("value = 1\nextra = 'torch only'", "pytorch"),
        code_cell("value = 2", "jax"),
        code_cell("from rosetta_proof.tab_results import load_tab_results\n"
                  "print({fw: run.get('extra') for fw, run in load_tab_results().items()})", "comparison"),
        front_matter_extra=FRONT + "tab_results_by_framework: {pytorch: [extra]}\n",
    )
    executed = execute_page(Page.read(write_page("some.md", text)), ["pytorch", "jax"], log=lambda line: None)
    assert outputs_of(executed.notebook)[-1] == "{'pytorch': 'torch only', 'jax': None}\n"
    missing = write_page("missing.md", text.replace("extra = 'torch only'", "pass"))
    with pytest.raises(PageExecutionError, match="the pytorch part never defines 'extra'"):
        execute_page(Page.read(missing), ["pytorch", "jax"], log=lambda line: None)


def test_a_part_that_cannot_start_is_the_error_reported_and_the_process_ends(write_page, tmp_path):
    """The parts abandoned because another failed are not the failure, and leave nothing that
    keeps the process from ending (nbclient's exit-time cleanup of a kernel never started)."""
    import os
    import subprocess
    import sys

    text = myst_page("Unstartable", code_cell("import time\ntime.sleep(2)", "pytorch"),
                     *(code_cell("x = 1", name) for name in ("tensorflow", "jax", "mxnet", "chainer")))
    path = write_page("unstartable.md", text)
    env = {**os.environ, "ROSETTA_LEGACY_PYTHON": str(tmp_path / "no-such-python"), "ROSETTA_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "rosetta_book.page_execution", str(path)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("rosetta_book.environments.BookEnvironmentError: ") and "Abandoned" not in last
