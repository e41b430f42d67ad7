"""The saving-and-devices translation table, checked through the code the page shows.

Each framework's part runs in its own process as in the book build; the
page's comparison cell checks every round trip against the saved weights
(tolerance zero) and the float64 reference, on grids over the batch size and
the steps on either side of a checkpoint. The tests count what it checked,
break a translation on purpose (weights that went through float16, as
`model.half()` before saving would leave them, a single flipped bit, Keras's
weights file read without the kernel's transpose, and a resumed run that
restored the weights but not the optimizer state, on one case of its grid)
and see the page stop naming it, and check the page's claim that an exported
program without a symbolic batch refuses any other batch.
"""

from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS
from page_checks import parts_as_built, smoke_offline
from rosetta_book.chapter import load_chapter, load_comparisons
from rosetta_proof.translation_checks import TranslationMismatch, check_concepts
from translation_table_checks import assert_every_concept_checked, assert_the_page_stops_naming

PAGE = Path(__file__).parents[1] / "book" / "tables" / "saving_and_devices.md"
PAGE_NAME = "tables/saving_and_devices.md"
PROMISED_CONCEPTS = 7
SUFFIXES = {"pytorch": ".pt", "tensorflow": ".weights.h5", "jax": ".msgpack", "mxnet": ".params",
            "chainer": ".npz"}
#: The files each part's whole model went into.
WHOLE_MODEL = {"pytorch": ".pt2", "tensorflow": ".keras", "jax": ".exported", "mxnet": "-symbol.json",
               "chainer": ".caffemodel"}


@pytest.fixture(scope="module")
def results():
    yield from parts_as_built(PAGE, AVAILABLE)


@pytest.fixture(scope="module")
def page(results):
    return load_comparisons(PAGE, results)


def with_output(results, framework, concept, value):
    wrong = {fw: dict(values) for fw, values in results.items()}
    wrong[framework]["outputs"] = dict(wrong[framework]["outputs"], **{concept: value})
    return wrong


def part(framework, until):
    """The namespace of ``framework``'s part, run in this process up to the section ``until``."""
    patch = pytest.MonkeyPatch()
    smoke_offline(patch)
    try:
        return load_chapter(PAGE, framework, until=until)
    finally:
        patch.undo()


def test_every_concept_is_checked_in_every_framework(page):
    checks = page["checks"]
    assert_every_concept_checked(checks, PROMISED_CONCEPTS, AVAILABLE)
    assert all(check.verdict == "exact" for check in checks)
    assert all(c.error == 0.0 for c in checks if c.concept in ("save", "file"))
    assert {concept: len(cases) for concept, cases in page["grids"].items()} == {"load": 2, "import": 2,
                                                                                 "resume": 4}
    assert [case.batch for case in page["grids"]["load"]] == [1, 3]


def test_the_compact_table_shows_each_frameworks_call(page):
    table = page["compact"].data
    for call in ["torch.save(model.state_dict(), folder / 'dense.pt')", "h5py.File(folder / 'dense.weights.h5')",
                 "dynamic_shapes=({0: batch},)", "jax.export.symbolic_shape('batch, 4')",
                 "gluon.SymbolBlock.imports(", "CaffeFunction(", "optimizer.load_state_dict(",
                 "trainer.save_states(", "jax.device_put(x, device)"]:
        assert call in table, call
    assert ": exact | " in table and "none" not in table


def test_each_part_wrote_its_formats_and_moved_to_the_cpu(results):
    for framework in AVAILABLE:
        names = [name for name, size in results[framework]["files"]]
        assert any(name.endswith(SUFFIXES[framework]) for name in names), (framework, names)
        assert any(name.endswith(WHOLE_MODEL[framework]) for name in names), (framework, names)
        assert all(size > 0 for _, size in results[framework]["files"])
        device = results[framework]["devices"]["device"]
        assert "cpu" in device.lower() or device == "@numpy", (framework, device)  # Chainer's CPU


def test_a_lossy_or_changed_weight_is_caught_naming_page_concept_and_framework(page, results):
    framework = AVAILABLE[0]
    weight, bias = results[framework]["outputs"]["save"]
    through_half = (weight.astype(np.float16).astype(np.float32), bias)
    assert 0 < np.abs(through_half[0] - weight).max() < 1e-2
    with pytest.raises(TranslationMismatch, match=rf"{PAGE_NAME}: concept 'save', framework {framework}"):
        check_concepts(PAGE_NAME, with_output(results, framework, "save", through_half), page["references"],
                       tolerances=page["TOLERANCES"], grids=page["grids"])
    one_bit = weight.copy()
    one_bit[0, 0] = np.nextafter(one_bit[0, 0], np.float32(np.inf))
    assert_the_page_stops_naming(PAGE, with_output(results, framework, "save", (one_bit, bias)), PAGE_NAME,
                                 "save", framework)


def test_a_weights_file_read_in_the_wrong_layout_is_caught(results):
    """Keras's file keeps the kernel as (in, out): read without the transpose, the row stops."""
    if "tensorflow" not in AVAILABLE:
        pytest.skip("TensorFlow is not installed")
    weight, bias = results["tensorflow"]["outputs"]["file"]
    assert_the_page_stops_naming(PAGE, with_output(results, "tensorflow", "file", (weight.T, bias)), PAGE_NAME,
                                 "file", "tensorflow")


def test_one_case_resumed_without_the_optimizer_state_stops_the_page_naming_it(page, results):
    """The page's PyTorch checkpoint after two steps, restored into the weights only with a
    fresh Adam: its next step is a first step again (bias correction and moments restart).
    Only that case of the grid is wrong, and the page names it."""
    if "pytorch" not in IN_PROCESS:
        pytest.skip("PyTorch is not installed in this environment")
    import torch

    tab = part("pytorch", "Devices")
    tab["train_and_save"](2)
    checkpoint = torch.load(tab["folder"] / "checkpoint.pt", weights_only=True)
    resumed = tab["make_model"]()
    resumed.load_state_dict(checkpoint["model"])
    tab["adam_step"](resumed, torch.optim.Adam(resumed.parameters(), lr=tab["LR"]))
    cases = [str(case) for case in page["grids"]["resume"]]
    broken = list(results["pytorch"]["outputs"]["resume"])
    broken[cases.index("before 2, after 1")] = (resumed.weight.detach().numpy(), resumed.bias.detach().numpy())
    assert_the_page_stops_naming(PAGE, with_output(results, "pytorch", "resume", broken), PAGE_NAME, "resume",
                                 "pytorch", case="before 2, after 1")


def test_one_restored_batch_that_differs_stops_the_page_naming_it(results):
    """A restored whole model off by one float32 step at batch 1 only (a batch-1 path gone
    wrong): the page names the case."""
    framework = AVAILABLE[-1]
    broken = [np.array(y, copy=True) for y in results[framework]["outputs"]["import"]]
    broken[0] += 1e-3
    assert_the_page_stops_naming(PAGE, with_output(results, framework, "import", broken), PAGE_NAME, "import",
                                 framework, case="batch 1")


def test_an_export_without_a_symbolic_batch_refuses_other_batches():
    """The page's condition for PyTorch and JAX: exported for the traced batch only, the
    program refuses a batch of one."""
    if "pytorch" in IN_PROCESS:
        import torch

        tab = part("pytorch", "Training state")
        program = torch.export.export(tab["model"], (tab["x"],))
        with pytest.raises(Exception, match=r"input.size\(\)\[0\] == 2"):
            program.module()(torch.zeros(1, 4))
        assert program.module()(torch.zeros(2, 4)).shape == (2, 3)
    if "jax" in IN_PROCESS:
        import jax
        import jax.numpy as jnp

        tab = part("jax", "Training state")
        exported = jax.export.export(jax.jit(tab["forward"]))(jax.ShapeDtypeStruct((2, 4), jnp.float32))
        with pytest.raises(Exception, match="shape"):
            exported.call(jnp.zeros((1, 4)))
        assert exported.call(jnp.zeros((2, 4))).shape == (2, 3)
