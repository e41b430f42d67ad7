"""The numeric precision page's claims, checked through the code it shows.

Each installed framework's part runs in its own process, as in the book
build; the comparison cells then run on what the parts left. The tests read
the knob table against the installed frameworks (PyTorch in this process,
the others each in a process of its own) and feed each check the page
prints a case it must fail.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from conftest import AVAILABLE, IN_PROCESS, IN_PROCESS_PARAMS, assert_knob_table_complete, framework_process_output, smoke_offline
from rosetta_utils import FRAMEWORKS
from rosetta_book.chapter import load_comparisons, run_framework_parts
from rosetta_utils.frameworks import is_installed
from rosetta_utils.knob_table import NOT_REPORTED, knob_rows, missing_cells

PAGE = Path(__file__).parents[1] / "book" / "lessons" / "numeric_precision.md"
#: The switch each framework's cells must name, per knob (the issue's list).
SWITCHES = {
    "pytorch": {"TF32 in float32 matmuls": "torch.backends.cuda.matmul.allow_tf32",
                "TF32 in convolutions": "torch.backends.cudnn.allow_tf32",
                "float32 matmul precision": "torch.get_float32_matmul_precision()"},
    "tensorflow": {"TF32 in float32 matmuls": "tensor_float_32_execution_enabled()"},
    "jax": {"TF32 in float32 matmuls": "jax_default_matmul_precision",
            "float32 matmul precision": "jax_default_matmul_precision"},
    "mxnet": {"TF32 in float32 matmuls": "no TF32 switch"},
    "chainer": {"TF32 in float32 matmuls": "no TF32 switch"},
}
#: Fix lines a framework needs before its import in a fresh process.
#: Code that prints, in a process with only that framework, the defaults the table shows.
DEFAULTS = {
    "tensorflow": ("import tensorflow as tf\n"
                   "print(tf.config.experimental.tensor_float_32_execution_enabled())"),
    "jax": "import jax\nprint(jax.config.jax_default_matmul_precision)",
    "mxnet": "import mxnet as mx\nprint(mx.util.getenv('MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION'))",
    "chainer": "import chainer\nprint(chainer.config.dtype)",
}


def installed_default(framework):
    """What the installed framework prints for DEFAULTS[framework], in its own process."""
    return framework_process_output(framework, DEFAULTS[framework])


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    patch = pytest.MonkeyPatch()
    smoke_offline(patch, tmp_path_factory.mktemp("precision-results"))
    patch.setenv("MPLBACKEND", "Agg")
    patch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0)))))
    try:
        yield load_comparisons(PAGE, run_framework_parts(PAGE, AVAILABLE))
    finally:
        patch.undo()


def test_the_knob_table_has_every_switch_and_a_cell_for_every_framework(comparison):
    assert_knob_table_complete(comparison, SWITCHES, AVAILABLE)


def test_missing_cells_names_an_unreported_knob(comparison):
    runs = {fw: dict(run.as_dict()) for fw, run in comparison["runs"].items()}
    framework = AVAILABLE[-1]
    runs[framework]["knobs"] = {k: v for k, v in runs[framework]["knobs"].items()
                                if k != "TF32 in convolutions"}
    assert missing_cells(runs, comparison["KNOBS"]) == [f"{framework}: TF32 in convolutions"]
    _, rows = knob_rows(runs, comparison["KNOBS"])
    assert NOT_REPORTED in rows[1]


@pytest.mark.skipif(not is_installed("pytorch"), reason="PyTorch is not installed")
def test_pytorch_defaults_are_the_installed_ones(comparison):
    import torch

    knobs = comparison["runs"]["pytorch"].knobs
    assert knobs["TF32 in float32 matmuls"].endswith(f"= {torch.backends.cuda.matmul.allow_tf32}")
    assert knobs["TF32 in convolutions"].endswith(f"= {torch.backends.cudnn.allow_tf32}")
    assert knobs["float32 matmul precision"].endswith(f"= {torch.get_float32_matmul_precision()!r}")
    assert knobs["default float dtype"].endswith(f"= {torch.get_default_dtype()}")


@pytest.mark.parametrize("framework", [fw for fw in DEFAULTS if fw in AVAILABLE])
def test_other_defaults_are_the_installed_ones(comparison, framework):
    value = installed_default(framework)
    knobs = comparison["runs"][framework].knobs
    if framework == "mxnet":
        expected = "unset (documented default 0: off)" if value == "None" else value
        assert knobs["TF32 in float32 matmuls"].endswith(f"= {expected}")
    elif framework == "chainer":
        assert knobs["default float dtype"] == f"chainer.config.dtype = {value}"
    else:
        assert f"= {value}" in knobs["TF32 in float32 matmuls"]


@pytest.mark.parametrize("framework", AVAILABLE)
def test_float32_is_close_and_bfloat16_is_not(comparison, framework):
    errors = comparison["runs"][framework].errors
    assert max(errors["float32"].values()) < 1e-5
    half = "float16" if isinstance(errors["bfloat16"], str) else "bfloat16"
    assert min(errors[half].values()) > comparison["BOOK_TOLERANCE"]
    for precision in ("float32", half):
        assert comparison["precision_verdict"](precision, max(errors[precision].values())) == "agrees"


def test_chainer_says_why_it_has_no_bfloat16(comparison):
    if "chainer" not in comparison["runs"]:
        pytest.skip("Chainer is not installed")
    assert comparison["runs"]["chainer"].errors["bfloat16"].startswith("not available")


def test_the_precision_verdict_fails_a_too_large_error(comparison):
    verdict = comparison["precision_verdict"]
    assert verdict("float32", 1e-3).startswith("DIFFERS")
    assert verdict("bfloat16", 0.39).startswith("DIFFERS")  # 100 x its roundoff: no longer passes
    assert verdict("float32", float("nan")).startswith("DIFFERS")


def test_the_precision_verdict_fails_a_result_not_computed_in_its_precision(comparison):
    """float32 numbers labelled bfloat16 (or float16) sit far below that format's rounding."""
    runs = comparison["runs"]
    float32_error = max(next(iter(runs.values())).errors["float32"].values())
    for precision in ("bfloat16", "float16"):
        assert comparison["precision_verdict"](precision, float32_error).startswith("DIFFERS"), precision
        assert "not " + precision in comparison["precision_verdict"](precision, float32_error)


def test_the_translation_check_fails_a_wrong_network(comparison):
    runs = comparison["runs"]
    assert all(difference <= comparison["TRANSLATION_TOLERANCE"]
               for difference in comparison["translation"].values())
    first = next(iter(runs))
    wrong = runs[first].logits_float64[:, ::-1]
    difference = comparison["max_abs_difference"](wrong, runs[first].logits_float64)
    assert comparison["verdict"](difference, comparison["TRANSLATION_TOLERANCE"]).startswith("DIFFERS")


def test_tf32_breaks_the_books_tolerance_and_float32_does_not(comparison):
    roundoff, tolerance = comparison["UNIT_ROUNDOFF"], comparison["BOOK_TOLERANCE"]
    assert comparison["verdict"](roundoff["TF32"], tolerance).startswith("DIFFERS")
    assert comparison["verdict"](roundoff["float32"], tolerance) == "agrees"
    assert np.isclose(roundoff["TF32"], 2.0 ** -11)


def test_tf32_is_not_measured_without_a_gpu_record(comparison):
    assert comparison["gpu_records"] == []
