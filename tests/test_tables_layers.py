"""The translation table "Layers": every concept runs in all five frameworks on its grid of
cases, its output and gradients checked against a float64 reference; a wrong translation,
a failing case inside a stated condition, or a condition left out stops the page; the
compact table shows the calls the tabs mark, and follows the code when it changes."""

import copy
from pathlib import Path

import numpy as np
import pytest

from page_checks import parts_as_built
from rosetta_book.chapter import load_comparisons
from rosetta_utils import FRAMEWORKS
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming, page_with

PAGE = Path(__file__).parents[1] / "book" / "tables" / "layers.md"
PAGE_NAME = "tables/layers.md"
PROMISED_CONCEPTS = 34


@pytest.fixture(scope="module")
def parts():
    yield from parts_as_built(PAGE, FRAMEWORKS)


@pytest.fixture(scope="module")
def comparison(parts):
    return load_comparisons(PAGE, parts)


def by_key(comparison):
    return {(check.concept, check.framework): check for check in comparison["checks"]}


def test_the_traps_show_in_the_results(comparison):
    checks = by_key(comparison)
    # each framework's running variance holds for its own estimator only
    assert checks["bn_running_var", "pytorch"].condition == "variance == 'unbiased'"
    assert checks["bn_running_var", "tensorflow"].condition == "variance == 'biased'"
    # "same" with stride 2 is not padding 1 on even sizes: PyTorch's explicit pad holds there only
    assert "at size 7" in checks["conv_same_stride2", "pytorch"].outside
    # Keras's "same" max pool is ceil mode only where it pads at most one row at the end
    assert checks["max_pool_ceil", "tensorflow"].condition.startswith("same_pad <= 1")
    assert checks["max_pool_ceil", "pytorch"].condition is None
    # PyTorch's padding_idx returns row 0 as loaded
    assert "row0 copied" in checks["embedding_padding", "pytorch"].outside


def test_the_grids_cross_the_boundaries_they_claim(comparison):
    grids = comparison["grids"]
    strides = {(case.window, case.stride) for case in grids["max_pool"]}
    assert any(s < w for w, s in strides) and any(s == w for w, s in strides) and any(s > w for w, s in strides)
    assert {case.size % 2 for case in grids["conv_same_stride2"]} == {0, 1}
    assert {case.batch for case in grids["dense"]} == {1, 3}


def test_a_wrong_momentum_convention_stops_the_page(parts, comparison):
    """Keras's momentum=0.9 copied into PyTorch's BatchNorm1d: the running mean then moves
    90 % of the way to the batch mean instead of 10 %, and the row claims exact."""
    import torch

    broken = copy.deepcopy(parts)
    bn = torch.nn.BatchNorm1d(3, momentum=0.9)
    bn(torch.from_numpy(comparison["x_bn"]))
    broken["pytorch"]["outputs"]["bn_running_mean"] = bn.running_mean.detach().numpy()
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "bn_running_mean", "pytorch")


def test_one_wrong_case_inside_a_condition_stops_the_page_naming_it(parts, comparison):
    """Chainer's default max pool (cover_all=True) on one case of the plain max pool's grid,
    where the windows do not divide the image: another shape, inside the row's (absent)
    condition."""
    import torch

    broken = copy.deepcopy(parts)
    cases = comparison["grids"]["max_pool"]
    index = next(n for n, case in enumerate(cases) if (case.size - case.window) % case.stride)
    case = cases[index]
    pool = torch.nn.MaxPool2d(case.window, case.stride, ceil_mode=True)
    broken["chainer"]["outputs"]["max_pool"][index] = (pool(torch.from_numpy(case.x)).numpy(),)
    assert_the_page_stops_naming(PAGE, broken, PAGE_NAME, "max_pool", "chainer", case=str(case))


def test_a_row_stated_without_its_condition_stops_the_page(parts, tmp_path):
    """Leave out the condition under which PyTorch's explicit padding is "same": the odd size,
    which the grid shows failing, is then inside the row's claim."""
    stated = '    "pytorch": "size % 2 == 0",\n'
    assert_the_page_stops_naming(page_with(PAGE, tmp_path, stated, ""), parts, PAGE_NAME, "conv_same_stride2", "pytorch",
                                 case="size 7")


def test_a_needless_condition_stops_the_page(parts, tmp_path):
    needless = 'references["dense"] = [\n    reference(case, lambda x, w, b'
    copy = page_with(PAGE, tmp_path, needless, 'conditions["dense"] = {"jax": "batch == 1"}\n' + needless)
    from rosetta_book.chapter import ChapterError

    with pytest.raises(ChapterError, match="states the condition 'batch == 1', but its grid shows"):
        load_comparisons(copy, parts)


def test_the_compact_table_shows_the_marked_calls_and_follows_the_code(parts, comparison, tmp_path):
    table = comparison["compact"].data
    assert "`nn.MaxPool2d(window, stride, ceil_mode=True)`: exact" in table  # case.window, in the reader's words
    assert "`F.max_pooling_2d(x, window, stride, cover_all=False)`: exact" in table
    assert "exact where `same_pad <= 1 and same_out == ceil_out`; else differs" in table
    assert "none: Keras 3 has no align_corners" in table
    # the same layer, its arguments written another way: the cell shows the new code
    old = "nn.MaxPool2d(case.window, case.stride, ceil_mode=True)"
    new = "nn.MaxPool2d(kernel_size=case.window, stride=case.stride, ceil_mode=True)"
    changed = load_comparisons(page_with(PAGE, tmp_path, old, new), parts)["compact"].data
    shown = "nn.MaxPool2d(kernel_size=window, stride=stride, ceil_mode=True)"
    assert f"`{shown}`: exact" in changed and "`nn.MaxPool2d(window, stride, ceil_mode=True)`" not in changed


def test_every_concept_runs_in_all_five_frameworks_and_is_checked(comparison):
    assert_every_concept_checked(comparison["checks"], PROMISED_CONCEPTS)
    assert np.isfinite([check.error for check in comparison["checks"] if check.error is not None]).all()


def test_an_id_outside_the_table_raises_or_reads_the_row_the_page_says(parts, comparison):
    """Ids -1 and 6 of a six-row table, as the tabs met them: PyTorch raises on both; Keras,
    Flax and Chainer read -1 as the last row; Gluon clips -1 to row 0 and 6 to row 5; Flax
    returns NaN for 6; Keras and Chainer raise on it."""
    table = comparison["table"]
    assert [case.index for case in comparison["grids"]["embedding_range"]] == [2, -1, 6]
    rows = {"last": table[[[1, 5, 3]]], "first": table[[[1, 0, 3]]]}
    expected = {"pytorch": (None, None), "tensorflow": ("last", None), "jax": ("last", "nan"),
                "mxnet": ("first", "last"), "chainer": ("last", None)}
    for framework, (minus_one, past_end) in expected.items():
        if framework not in parts:
            continue
        _, at_minus_one, at_past_end = parts[framework]["outputs"]["embedding_range"]
        for got, meant in ((at_minus_one, minus_one), (at_past_end, past_end)):
            if meant is None:
                assert np.size(got) == 0, framework  # raised
            elif meant == "nan":
                assert np.isnan(got[0, 1]).all() and not np.isnan(got[0, [0, 2]]).any(), framework
            else:
                np.testing.assert_array_equal(got, rows[meant], err_msg=framework)


def test_the_transposed_conv_row_states_flaxs_kernel_layouts_as_the_installed_flax_holds_them():
    """Issue 51: the row said Flax takes (h, w, out, in), which holds only with
    transpose_kernel=True. Read both layouts from the installed Flax and find each in the
    row's prose with its condition."""
    from flax import nnx

    axes = {2: "in", 3: "out"}  # a layer of 2 channels in and 3 out

    def layout(**options):
        layer = nnx.ConvTranspose(2, 3, kernel_size=(5, 5), rngs=nnx.Rngs(0), **options)
        return "(h, w, " + ", ".join(axes[n] for n in layer.kernel[...].shape[2:]) + ")"

    default, transposed = layout(), layout(transpose_kernel=True)
    assert default != transposed
    text = PAGE.read_text(encoding="utf-8")
    row = text[text.index("(tables-layers-conv-transpose)="):]
    prose = " ".join(row[:row.index("```")].split())
    assert f"`nnx.ConvTranspose` holds `{default}` by default" in prose, prose
    assert f"with `transpose_kernel=True` it holds `{transposed}`" in prose, prose
