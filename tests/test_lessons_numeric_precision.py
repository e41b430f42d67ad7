"""The numeric precision page's claims, checked through the code it shows.

Each installed framework's part runs in its own process, as in the book
build; the comparison cells then run on what the parts left. The tests read
the knob table against the installed frameworks (PyTorch in this process,
the others each in a process of its own), check that every row says where
it ran and in what arithmetic, feed each check the page makes a case it must
fail (and see the page stop on it), and show the GPU section with and
without a device-check record. No test times anything: the timings are
observations, checked for presence, never against a threshold.
"""

import copy
import os
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE
from page_checks import (
    comparisons_with_records,
    assert_a_failed_proof_stops_the_page,
    assert_knob_table_complete,
    framework_process_output,
    smoke_offline,
)
from rosetta_book.chapter import run_framework_parts
from rosetta_proof.knob_table import NOT_REPORTED, knob_rows, missing_cells
from rosetta_proof.record_tables import NOT_MEASURED_ON_A_GPU
from rosetta_utils.frameworks import is_installed

PAGE = Path(__file__).parents[1] / "book" / "lessons" / "numeric_precision.md"
#: The switch each framework's cells must name, per knob.
SWITCHES = {
    "pytorch": {"TF32 in float32 matmuls (GPU)": "torch.backends.cuda.matmul.fp32_precision",
                "TF32 in convolutions (GPU)": "torch.backends.cudnn.conv.fp32_precision",
                "float32 on the CPU": "torch.backends.mkldnn.conv.fp32_precision",
                "default device": "torch.get_default_device()"},
    "tensorflow": {"TF32 in float32 matmuls (GPU)": "tensor_float_32_execution_enabled()"},
    "jax": {"TF32 in float32 matmuls (GPU)": "jax_default_matmul_precision",
            "default device": "jax.default_backend()"},
    "mxnet": {"TF32 in float32 matmuls (GPU)": "no TF32 switch"},
    "chainer": {"TF32 in float32 matmuls (GPU)": "no TF32 switch", "bfloat16": "numpy has no bfloat16"},
}
#: Code that prints, in a process with only that framework, the defaults the table shows.
DEFAULTS = {
    "tensorflow": ("import tensorflow as tf\n"
                   "print(tf.config.experimental.tensor_float_32_execution_enabled())"),
    "jax": "import jax\nprint(jax.config.jax_default_matmul_precision)",
    "mxnet": "import mxnet as mx\nprint(mx.util.getenv('MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION'))",
    "chainer": "import chainer\nprint(chainer.config.dtype)",
}
#: What each part's float32 rows must say they were computed with (set, then read back).
FLOAT32_SETTING = {"pytorch": "'ieee', 'ieee'", "tensorflow": "= False", "jax": "'highest'",
                   "mxnet": "float32", "chainer": "float32"}
#: Frameworks with a bfloat16 to time against float32.
TIMED = ["pytorch", "tensorflow", "jax", "mxnet"]


@pytest.fixture(scope="module")
def parts():
    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        patch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0)))))
        yield run_framework_parts(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def comparison(parts, tmp_path_factory):
    return comparisons_with_records(PAGE, parts, tmp_path_factory.mktemp("precision-results"))


def test_the_knob_table_has_every_switch_and_a_cell_for_every_framework(comparison):
    # the page's last column is each switch's measured effect, with a link to where
    assert_knob_table_complete({**comparison, "LINKS": comparison["EFFECTS"]}, SWITCHES, AVAILABLE)


def test_the_page_names_one_pytorch_tf32_api_the_current_one():
    text = PAGE.read_text()
    for old in ("allow_tf32", "float32_matmul_precision"):
        assert old not in text, f"the page still names {old}"
    assert text.count("fp32_precision") >= 6


def test_missing_cells_names_an_unreported_knob(comparison):
    runs = {fw: dict(run.as_dict()) for fw, run in comparison["runs"].items()}
    framework = AVAILABLE[-1]
    runs[framework]["knobs"] = {k: v for k, v in runs[framework]["knobs"].items()
                                if k != "TF32 in convolutions (GPU)"}
    assert missing_cells(runs, comparison["KNOBS"]) == [f"{framework}: TF32 in convolutions (GPU)"]
    _, rows = knob_rows(runs, comparison["KNOBS"])
    assert NOT_REPORTED in rows[2]


@pytest.mark.skipif(not is_installed("pytorch"), reason="PyTorch is not installed")
def test_pytorch_defaults_are_the_installed_ones(comparison):
    import torch

    knobs = comparison["runs"]["pytorch"].knobs
    backends = torch.backends
    assert f"= {backends.cuda.matmul.fp32_precision!r}" in knobs["TF32 in float32 matmuls (GPU)"]
    assert f"= {backends.fp32_precision!r}" in knobs["TF32 in float32 matmuls (GPU)"]
    assert knobs["TF32 in convolutions (GPU)"].endswith(f"= {backends.cudnn.conv.fp32_precision!r}")
    assert f"= {backends.mkldnn.conv.fp32_precision!r}" in knobs["float32 on the CPU"]
    assert knobs["default float dtype"].endswith(f"= {torch.get_default_dtype()}")
    assert knobs["default device"].endswith(f"= {torch.get_default_device()}")


@pytest.mark.parametrize("framework", [fw for fw in DEFAULTS if fw in AVAILABLE])
def test_other_defaults_are_the_installed_ones(comparison, framework):
    value = framework_process_output(framework, DEFAULTS[framework])
    knobs = comparison["runs"][framework].knobs
    if framework == "mxnet":
        expected = "unset (documented default 0: off)" if value == "None" else value
        assert knobs["TF32 in float32 matmuls (GPU)"].endswith(f"= {expected}")
    elif framework == "chainer":
        assert knobs["default float dtype"] == f"chainer.config.dtype = {value}"
    else:
        assert f"= {value}" in knobs["TF32 in float32 matmuls (GPU)"]


@pytest.mark.parametrize("framework", AVAILABLE)
def test_every_row_says_where_it_ran_and_in_what_float32(comparison, framework):
    placement = comparison["runs"][framework].placement
    assert "cpu" in placement["device"].lower() or placement["device"] == "@numpy", placement
    assert FLOAT32_SETTING[framework] in placement["float32 arithmetic"], placement
    row = next(row for row in comparison["found"] if row[0] == framework)
    assert row[1:3] == [placement["device"], placement["float32 arithmetic"]]


@pytest.mark.parametrize("framework", AVAILABLE)
def test_float32_is_float32_rounding_and_bfloat16_is_not(comparison, framework):
    errors = comparison["errors"][framework]
    assert errors["float32"]["logits"] < 64 * 2.0**-24
    halves = [half for half in ("bfloat16", "float16") if isinstance(errors.get(half), dict)]
    if not halves:  # MXNet where oneDNN has no bfloat16 kernel for this CPU
        assert framework == "mxnet" and errors["bfloat16"].startswith("fails on this CPU")
    for half in halves[:1]:
        assert errors[half]["logits"] > comparison["BOOK_TOLERANCE"]
    for precision in ("float32", *halves[:1]):
        assert comparison["precision_verdict"](precision, errors[precision]["logits"]) == "agrees"


def test_chainer_says_why_it_has_no_bfloat16(comparison):
    if "chainer" not in comparison["runs"]:
        pytest.skip("Chainer is not installed")
    run = comparison["runs"]["chainer"]
    assert run.steps["bfloat16"].startswith("not available")
    assert "step_seconds" not in run and "numpy has no bfloat16" in run.placement["timing"]


def test_the_precision_verdict_fails_a_too_large_error(comparison):
    verdict = comparison["precision_verdict"]
    assert verdict("float32", 1e-3).startswith("DIFFERS")
    assert verdict("bfloat16", 0.39).startswith("DIFFERS")  # 100 x its roundoff
    assert verdict("bfloat16", 0.05).startswith("DIFFERS")  # 5%: beyond 12 roundoffs (4.7%)
    assert verdict("float16", 0.05).startswith("DIFFERS")
    assert verdict("float32", float("nan")).startswith("DIFFERS")


def test_every_measured_error_lies_inside_its_band(comparison):
    """The storage formats' first-order model (12 roundoffs) holds with room: the errors
    measured sit at a few roundoffs."""
    for framework, errors in comparison["errors"].items():
        for precision, error in errors.items():
            if isinstance(error, dict):
                assert comparison["precision_verdict"](precision, error["logits"]) == "agrees", (framework, precision)


def test_the_precision_verdict_fails_a_result_not_computed_in_its_precision(comparison):
    """float32 numbers labelled bfloat16 (or float16) sit far below that format's rounding."""
    float32_error = comparison["errors"][AVAILABLE[0]]["float32"]["logits"]
    for precision in ("bfloat16", "float16"):
        assert "not " + precision in comparison["precision_verdict"](precision, float32_error)


def test_a_step_labelled_bfloat16_but_computed_in_float32_stops_the_page(parts):
    framework = next(fw for fw in AVAILABLE if fw != "chainer")
    steps = copy.deepcopy(parts[framework]["steps"])
    steps["bfloat16"] = steps["float32"]
    assert_a_failed_proof_stops_the_page(PAGE, parts, framework, {"steps": steps}, "not bfloat16 rounding",
                                         failing=f"{framework}, bfloat16")


def test_a_wrong_translation_stops_the_page(parts):
    if len(AVAILABLE) < 2:
        pytest.skip("the translation check needs two frameworks")
    framework = AVAILABLE[1]
    steps = copy.deepcopy(parts[framework]["steps"])
    steps["float64"]["logits"] = steps["float64"]["logits"][:, ::-1]
    assert_a_failed_proof_stops_the_page(PAGE, parts, framework, {"steps": steps}, r"DIFFERS \(")


def test_the_translation_check_passed(comparison):
    assert all(difference <= comparison["TRANSLATION_TOLERANCE"]
               for difference in comparison["translation"].values())


@pytest.mark.parametrize("framework", AVAILABLE)
def test_bfloat16_and_float32_were_timed_in_turns_or_the_part_says_why_not(comparison, framework):
    run = comparison["runs"][framework]
    if framework not in TIMED:
        assert "step_seconds" not in run and run.placement["timing"]
        return
    if isinstance(run.steps["bfloat16"], str):  # it failed: the part says so, times float32
        assert set(run.step_seconds) == {"float32"} and run.steps["bfloat16"] in run.placement["timing"]
        return
    assert set(run.step_seconds) == {"float32", "bfloat16"}
    for seconds in run.step_seconds.values():
        assert len(seconds) == comparison["REPEATS"] and min(seconds) > 0
    row = next(row for row in comparison["found"] if row[0] == framework)
    median32 = np.median(run.step_seconds["float32"])
    assert row[7] == pytest.approx(np.median(run.step_seconds["bfloat16"]) / median32)
    assert row[8] in ("float32", "bfloat16", "neither (IQRs overlap)")


def test_faster_is_said_by_the_books_iqr_rule(comparison):
    """The page's verdicts use rosetta_utils.timing's rule (tested in test_timing_and_tables)."""
    import rosetta_utils.timing as timing

    assert comparison["faster"] is timing.faster and comparison["median_and_iqr"] is timing.median_and_iqr


def test_the_summary_and_the_knob_table_take_their_numbers_from_the_runs(comparison):
    effect = comparison["EFFECTS"]["bfloat16"]
    for row in comparison["found"]:
        if row[6] != "-":
            assert f"{row[0]} x{row[7]:.2f}" in effect


def test_without_a_gpu_record_the_gpu_section_says_so(comparison):
    assert comparison["GPU_ROWS"] == [[NOT_MEASURED_ON_A_GPU] + ["-"] * (len(comparison["GPU_HEADERS"]) - 1)]
    assert comparison["EFFECTS"]["TF32 in convolutions (GPU)"].startswith(NOT_MEASURED_ON_A_GPU)


def test_a_gpu_record_is_shown_and_a_cpu_one_never(parts, tmp_path):
    def record(setting, device, seconds, error):
        return {"task": "lesson-precision", "framework": "pytorch", "versions": {"torch": "2.11.0"},
                "device": device, "config": {"network": "cifar10", "batch": 64, "setting": setting,
                                             "reference": "float64 on the CPU"},
                "metrics": {"median_seconds": seconds, "iqr_seconds": seconds / 10,
                            "max_abs_error": error, "relative_error": error}}

    found = comparisons_with_records(PAGE, parts, tmp_path, record("float32", "NVIDIA H200", 0.004, 3e-7),
                                     record("tf32", "NVIDIA H200", 0.002, 4e-4),
                                     record("tf32", "cpu", 9.0, 1.0))
    rows = found["GPU_ROWS"]
    assert [(row[0], row[1], row[4]) for row in rows] == [("pytorch", "NVIDIA H200", "float32"),
                                                         ("pytorch", "NVIDIA H200", "tf32")]
    effect = found["EFFECTS"]["TF32 in convolutions (GPU)"]
    assert "time x0.50 of float32" in effect and "4.0e-04" in effect and "9.0" not in effect


def test_book_tolerance_is_the_bound_the_chapters_it_names_put_on_their_logits():
    """The TF32 section names BOOK_TOLERANCE as the CIFAR-10 and IMDB chapters' bound on
    their float32 logits: each of those chapters' comparison cells must assign that value."""
    import re

    chapters = PAGE.parents[1] / "chapters"
    lesson = PAGE.read_text()
    (book_tolerance,) = re.findall(r"^BOOK_TOLERANCE = (\S+)$", lesson, flags=re.M)
    assert "the bound the CIFAR-10 and IMDB chapters\nput on their float32 logits" in lesson
    for chapter in ("cifar10_cnn.md", "imdb_gru.md"):
        assigned = re.findall(r"^TOLERANCE = (\S+)", (chapters / chapter).read_text(), flags=re.M)
        assert assigned == [book_tolerance], (chapter, assigned)
