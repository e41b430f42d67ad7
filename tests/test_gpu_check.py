"""The device check, run on this CPU on a small chapter of its own: every framework asked
for must run (and see the GPU unless --allow-cpu), each part's device is read from its
arrays, the page's comparison cells run on the parts' results and their verdicts gate the
check and go into the records."""

import json
from pathlib import Path

import pytest
from tiny_pages import code_cell, myst_page

from rosetta_book.gpu_check import (
    BY_DESIGN,
    DeviceCheckError,
    FrameworkProbe,
    GPUInfo,
    chapter_metrics,
    chapter_pages,
    check_can_run,
    check_frameworks,
    check_part_device,
    check_true_float32,
    data_sources,
    main,
    run_device_check,
)
from rosetta_utils.frameworks import is_installed
from rosetta_utils.run_profile import cuda_gpu_visible

CHECKED = [name for name in ("pytorch", "jax") if is_installed(name)]
needs_both = pytest.mark.skipif(CHECKED != ["pytorch", "jax"], reason="needs PyTorch and JAX installed")
BOOK = Path(__file__).resolve().parents[1] / "book"
A_GPU = GPUInfo("NVIDIA H200", "580.159.04", "13.0")


def quiet(*_):
    pass


def tiny_chapter(write_page, jax_offset="0.0", jax_line=""):
    """Two parts that compute ``doubled`` (JAX's shifted by ``jax_offset``), a data set of
    the helpers' shape, and a comparison cell that requires JAX's to be PyTorch's."""
    return write_page("tiny_chapter.md", myst_page(
        "A tiny chapter",
        code_cell("import numpy as np\nfrom rosetta_utils.run_profile import current_profile\nSIZE = 8\n\n\n"
                  "class TinyData:\n    source = 'tiny stand-in (seed 1)'\n    synthetic = True\n\n\n"
                  "data = TinyData()"),
        code_cell("import torch\nx = torch.ones(SIZE)\ndoubled = x.numpy() * 2\nepoch_seconds = [0.5, 0.25]\n"
                  "accuracy = float(x.mean())\nprofile_seen = current_profile()", "pytorch"),
        code_cell(f"import jax.numpy as jnp\nx = jnp.ones(SIZE)\ndoubled = np.asarray(x * 2) + {jax_offset}\n"
                  "epoch_seconds = [0.5, 0.25]\naccuracy = float(x.mean())\nprofile_seen = current_profile()"
                  + jax_line, "jax"),
        code_cell("from rosetta_proof.equivalence import require, verdict\n"
                  "from rosetta_utils.differences import max_abs_difference\n"
                  "from rosetta_proof.tab_results import load_tab_results\n\nruns = load_tab_results()\n"
                  "require(\n    {fw: verdict(max_abs_difference(run.doubled, runs['pytorch'].doubled), 1e-6)"
                  " for fw, run in runs.items()},\n    'values against PyTorch',\n)", "comparison"),
        front_matter_extra="frameworks: [pytorch, jax]\n"
                           "tab_results: [doubled, epoch_seconds, accuracy, profile_seen]\n"))


def sees_a_gpu(framework):
    return FrameworkProbe(framework, {"versions": "of a test"}, ("NVIDIA H200",))


@needs_both
def test_one_record_per_part_with_device_data_source_metrics_and_verdicts(write_page, tmp_path, monkeypatch):
    page = tiny_chapter(write_page)
    monkeypatch.chdir(tmp_path)
    records = run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True,
                               pages=[page], lessons=[], log=quiet)
    assert [record["framework"] for record in records] == CHECKED
    lines = (tmp_path / "results" / "tiny_chapter.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == records
    for record, framework in zip(records, CHECKED):
        assert record["task"] == "tiny_chapter" and record["framework"] == framework
        assert record["profile"] == "smoke" and record["device"] == "cpu"
        assert record["metrics"]["accuracy"] == 1.0 and record["metrics"]["epoch_seconds"] == [0.5, 0.25]
        assert "profile_seen" not in record["metrics"]  # strings are not metrics
        assert record["versions"] and record["date"] and record["commit"]
        assert record["config"]["check"] == "gpu_check" and record["config"]["gpu"] is None
        assert record["config"]["data"] == "tiny stand-in (seed 1)", "the data line is the part's own"
        assert record["verdicts"] == {"values against PyTorch": {"pytorch": "agrees", "jax": "agrees"}}


@needs_both
def test_a_chapter_without_comparison_cells_runs_no_comparisons(write_page, tmp_path, monkeypatch):
    import rosetta_book.gpu_check as gpu_check

    text = tiny_chapter(write_page).read_text()
    page = write_page("no_comparisons.md", text[:text.index("```{code-cell} ipython3\n:tags: [comparison]")])
    monkeypatch.chdir(tmp_path)

    def refused(*_, **__):
        raise AssertionError("the comparisons ran on a page that has none")

    monkeypatch.setattr(gpu_check, "run_device_comparisons", refused)
    records = run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True,
                               pages=[page], lessons=[], log=quiet)
    assert [record["framework"] for record in records] == CHECKED


@needs_both
def test_a_differing_verdict_fails_the_check_and_the_records_keep_it(write_page, tmp_path, monkeypatch):
    page = tiny_chapter(write_page, jax_offset="0.5")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DeviceCheckError, match=r"tiny_chapter: the comparisons failed: values against PyTorch"
                                               r".*DIFFERS \(0\.5 > 1e-06\)"):
        run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True, pages=[page],
                         lessons=[], log=quiet)
    records = [json.loads(line) for line in (tmp_path / "results" / "tiny_chapter.jsonl").read_text().splitlines()]
    for record in records:
        assert record["verdicts"]["values against PyTorch"]["jax"] == "DIFFERS (0.5 > 1e-06)"
        assert record["verdicts"]["comparison cells"].startswith("FAILED: ")


@needs_both
def test_a_failed_part_fails_the_check_naming_it_and_its_pages_comparisons_do_not_run(write_page, tmp_path,
                                                                                         monkeypatch):
    page = tiny_chapter(write_page, jax_line="\nraise RuntimeError('the GPU went away')")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DeviceCheckError, match=r"tiny_chapter \(jax\): the part failed in its own process: .*"
                                               r"RuntimeError: the GPU went away"):
        run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True, pages=[page],
                         lessons=[], log=quiet)
    (record,) = [json.loads(line) for line in (tmp_path / "results" / "tiny_chapter.jsonl").read_text().splitlines()]
    assert record["framework"] == "pytorch"
    assert record["verdicts"] == {"comparison cells": "not run: the jax part(s) did not complete"}


@needs_both
def test_a_part_whose_arrays_stay_on_the_cpu_fails_a_gpu_check(write_page, tmp_path, monkeypatch):
    page = tiny_chapter(write_page)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DeviceCheckError) as failure:
        run_device_check(tmp_path, tmp_path / "results", profile="smoke", pages=[page], lessons=[], log=quiet,
                         probe=sees_a_gpu, gpu=A_GPU)
    for framework in CHECKED:
        assert f"tiny_chapter ({framework}): its arrays are on cpu, not on the GPU" in str(failure.value)
    assert not (tmp_path / "results").exists(), "a part off the GPU leaves no record of a GPU check"


def test_the_device_is_read_from_the_parts_arrays_and_models():
    check_part_device("p (pytorch)", "cuda:0 (NVIDIA H200)", {"x": {"device": "cpu", "kind": "array"}}, "gpu")
    check_part_device("p (jax)", "gpu:0 (NVIDIA H200)", {}, "gpu")
    check_part_device("p (pytorch)", "cpu", {"model": {"device": "cpu", "kind": "model"}}, "cpu")
    with pytest.raises(DeviceCheckError, match=r"p \(pytorch\): model\(s\) not on the GPU: model on cpu"):
        check_part_device("p (pytorch)", "cuda:0 (NVIDIA H200)", {"model": {"device": "cpu", "kind": "model"}},
                          "gpu")
    with pytest.raises(DeviceCheckError, match="its arrays are on cuda:0 .*where the CPU was expected"):
        check_part_device("p (pytorch)", "cuda:0 (NVIDIA H200)", {}, "cpu")
    with pytest.raises(DeviceCheckError, match="the part made no jax array.*cannot be read"):
        check_part_device("p (jax)", "not checked (the part made no jax array)", {}, "gpu")
    check_part_device("p (jax)", "not checked (the part made no jax array)", {}, "gpu", workers=True)
    with pytest.raises(DeviceCheckError, match="its arrays are on cpu, not on the GPU"):
        check_part_device("p (jax)", "cpu", {}, "gpu", workers=True)


def test_the_parts_run_elsewhere_by_design_are_chapters_that_say_so():
    for (name, framework), (place, reason) in BY_DESIGN.items():
        page = BOOK / "chapters" / f"{name}.md"
        assert page.is_file() and reason
        text = page.read_text()
        assert f":tags: [{framework}]" in text
        if place == "cpu":
            assert "torch.device(" not in text, f"{name} now picks a device for {framework}: update BY_DESIGN"
        else:
            assert place == "workers" and "run_processes" in text, f"{name} starts no workers: update BY_DESIGN"


def test_a_framework_that_cannot_run_stops_the_check_before_anything_runs(write_page, tmp_path, monkeypatch):
    page = tiny_chapter(write_page)
    monkeypatch.setattr("rosetta_book.environments.is_installed", lambda name: name != "jax")
    monkeypatch.setenv("ROSETTA_CURRENT_PYTHON", str(tmp_path / "no-python-here"))
    with pytest.raises(DeviceCheckError, match="jax cannot run here: jax runs in the current environment"):
        run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True, pages=[page],
                         log=quiet)
    with pytest.raises(DeviceCheckError, match="the device check cannot run 'tensorflow'"):
        run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True, pages=[page],
                         frameworks=["pytorch", "tensorflow"], log=quiet)
    assert not (tmp_path / "results").exists()


@needs_both
@pytest.mark.skipif(cuda_gpu_visible(), reason="this machine has a GPU")
def test_a_framework_that_sees_no_gpu_stops_the_check_naming_it(write_page, tmp_path):
    page = tiny_chapter(write_page)
    with pytest.raises(DeviceCheckError, match=r"^pytorch sees no GPU here \(torch .*--allow-cpu"):
        run_device_check(tmp_path, tmp_path / "results", pages=[page], log=quiet, gpu=A_GPU)
    with pytest.raises(DeviceCheckError, match=r"^jax sees no GPU here"):
        check_frameworks(["jax"], allow_cpu=False, log=quiet)
    assert check_frameworks(["jax"], allow_cpu=True, log=quiet) == {"jax": "cpu"}
    assert not (tmp_path / "results").exists()


def test_a_spent_budget_reports_the_parts_not_run(write_page, tmp_path):
    page = tiny_chapter(write_page)
    with pytest.raises(DeviceCheckError, match=r"tiny_chapter \(\w+\): not run, the budget was spent"):
        run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True, frameworks=["pytorch"],
                         budget_seconds=0, pages=[page], lessons=[], log=quiet, probe=sees_a_gpu)
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


def test_the_data_line_is_read_from_the_parts_data_sets():
    class Data:
        def __init__(self, source):
            self.source, self.synthetic = source, False

    assert data_sources({"data": Data("CIFAR-10 (cached)")}) == "CIFAR-10 (cached)"
    assert data_sources({"cifar": {"data": Data("CIFAR-10 (cached)")}, "_hidden": Data("no")}) == "CIFAR-10 (cached)"
    assert data_sources({"Data": Data, "x": 1}).startswith("none: the part loads no data set")


def test_the_chapters_are_taken_in_the_books_order():
    names = [path.stem for path in chapter_pages(BOOK)]
    assert names[:4] == ["five_frameworks_one_computation", "cifar10_cnn", "resnet50_features", "imdb_gru"]


def test_the_command_line_refuses_unknown_chapters_and_lessons(capsys):
    assert main(["--profile", "smoke", "--allow-cpu", "--pages", "no_such_chapter", "--book", str(BOOK)]) == 1
    assert "no chapter named no_such_chapter: the chapters are five_frameworks_one_computation" in \
        capsys.readouterr().err
    assert main(["--profile", "smoke", "--allow-cpu", "--pages", "none", "--lessons", "speed"]) == 1
    assert "no GPU lesson named speed: the lessons are autotuning, precision, layouts, fused-rnn" in \
        capsys.readouterr().err


def test_the_equivalence_probes_must_have_run_in_true_float32():
    check_true_float32("p (pytorch)", "pytorch", ["ieee", "ieee", "ieee"])
    check_true_float32("p (jax)", "jax", "highest")
    with pytest.raises(DeviceCheckError, match=r"p \(pytorch\): its equivalence probes ran with float32 set to "
                                               r"\['ieee', 'tf32', 'ieee'\], not true float32"):
        check_true_float32("p (pytorch)", "pytorch", ["ieee", "tf32", "ieee"])
    with pytest.raises(DeviceCheckError, match="not true float32 \\('highest'\\)"):
        check_true_float32("p (jax)", "jax", None)


@needs_both
def test_the_results_page_renders_the_device_checks_own_records_in_the_gpu_column(write_page, tmp_path,
                                                                                  monkeypatch):
    """A rehearsal of a GPU run's path to the Results page: the device check's dry run writes
    its records (the rate the page's own cells computed from the parts' timed epochs, the
    data and the weights), relabelled as on a GPU for the rehearsal, and the overview shows
    that rate in the GPU-record column, with the rehearsal's label beside it."""
    from rosetta_book.chapter import load_comparisons

    page = write_page("rated_chapter.md", myst_page(
        "A rated chapter",
        code_cell("import numpy as np\n\n\nclass TinyData:\n    source = 'tiny stand-in (seed 1)'\n"
                  "    synthetic = True\n\n\ndata = TinyData()\nIMAGES = 64"),
        code_cell("import torch\nx = torch.ones(4)\nepoch_seconds = [0.5, 0.25]\nvalue = float(x.sum())", "pytorch"),
        code_cell("import jax.numpy as jnp\nx = jnp.ones(4)\nepoch_seconds = [0.5, 0.5]\nvalue = float(x.sum())", "jax"),
        code_cell("from rosetta_proof.equivalence import require, verdict\n"
                  "from rosetta_proof.records import record_result\n"
                  "from rosetta_proof.tab_results import load_tab_results\n\nruns = load_tab_results()\n"
                  "require({fw: verdict(abs(run.value - 4.0), 0) for fw, run in runs.items()}, 'the sums')\n"
                  "for fw, run in runs.items():\n"
                  "    record_result('cifar10', fw, {'images_per_second': IMAGES / min(run.epoch_seconds)},\n"
                  "                  versions=run.environment['versions'], device=run.environment['device'],\n"
                  "                  config={'data': data.source, 'weights': 'drawn here at random'})",
                  "comparison"),
        front_matter_extra="frameworks: [pytorch, jax]\nresults_task: cifar10\n"
                           "tab_results: [epoch_seconds, value]\n"))
    monkeypatch.chdir(tmp_path)
    records = run_device_check(tmp_path, tmp_path / "results", profile="smoke", allow_cpu=True,
                               pages=[page], lessons=[], log=quiet)
    assert [record["metrics"]["images_per_second"] for record in records] == [256.0, 128.0]
    assert all(record["held"] and record["config"]["weights"] == "drawn here at random" for record in records)
    rehearsal = "rehearsal: a CPU dry run standing in for a GPU"
    curated = tmp_path / "curated"
    curated.mkdir()
    (curated / "cifar10.jsonl").write_text("".join(json.dumps({**record, "device": rehearsal}) + "\n"
                                                   for record in records))
    monkeypatch.setenv("ROSETTA_RESULTS_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("ROSETTA_CURATED_RESULTS_DIR", str(curated))
    monkeypatch.setenv("ROSETTA_PROFILE", "smoke")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = load_comparisons(BOOK / "appendix" / "results.md", {})
    headers, rows = namespace["overviews"]["cifar10"]
    by_framework = {row[0]: dict(zip(headers, row)) for row in rows}
    gpu_rate = next(header for header in headers if header.startswith("GPU record ("))
    assert by_framework["pytorch"][gpu_rate].startswith(f"256.0 ({rehearsal}")
    assert by_framework["jax"][gpu_rate].startswith(f"128.0 ({rehearsal}")
    (row,) = [row for row in namespace["rows"] if row.framework == "jax"]
    assert (row.data, row.weights) == ("tiny stand-in (seed 1)", "drawn here at random")
