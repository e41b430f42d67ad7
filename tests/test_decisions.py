"""Where two runs of a ReLU network decide alike (rosetta_proof.decisions): a sign moved
across zero, a max pool's window won by another value and an exact tie are each found on
their image, and a batch's weight gradients are determined only after the last layer
decided otherwise."""

import numpy as np
import pytest

from rosetta_proof.decisions import (NO_GRADIENT, TIED, decided_alike, decided_otherwise, determined_layers,
                                     pool_choices)

rng = np.random.default_rng(5)


def run():
    """Two layers' outputs on 4 images: a dense one (a ReLU follows) and an image one
    (a 2x2 max pool follows), no value near a decision."""
    dense = rng.choice([-1.0, 1.0], (4, 6)) * rng.uniform(0.5, 1.0, (4, 6))
    images = rng.permutation(np.arange(1, 4 * 2 * 4 * 4 + 1, dtype=np.float32)).reshape(4, 2, 4, 4)
    return {"conv": images, "fc": dense.astype(np.float32)}


def test_a_pool_choice_is_each_windows_largest_and_an_exact_tie_is_minus_one():
    output = np.array([[[[1, 2, 0, 0], [3, 4, 0, 0], [5, 5, -1, -2], [0, 1, -3, -4]]]], np.float32)
    # 4 is the last value; 0 is not positive; 5 and 5 tie; all negative
    assert pool_choices(output).tolist() == [[3, NO_GRADIENT, TIED, NO_GRADIENT]]


def test_identical_runs_decide_every_image_alike_and_determine_every_layer():
    a = run()
    otherwise = decided_otherwise(a, a, ("fc",), ("conv",))
    assert all(not images.any() for images in otherwise.values())
    assert decided_alike(a, a, ("fc",), ("conv",)).all()
    assert determined_layers(("conv", "fc", "out"), otherwise) == ["conv", "fc", "out"]


def sign_moved(b):
    b["fc"][2, 3] = -b["fc"][2, 3]


def window_won_by_another(b):
    window = b["conv"][2, 1, :2, :2]
    window[...] = window[::-1, ::-1].copy()  # the same values, the largest elsewhere


def window_tied(b):
    window = b["conv"][2, 1, :2, :2]
    window[0, 0] = window[1, 1] = window.max()


def window_below_zero(b):
    b["conv"][2, 1, :2, :2] = -b["conv"][2, 1, :2, :2]  # its largest value now negative


def window_sign_elsewhere(b):
    window = b["conv"][2, 1, :2, :2]
    window[window != window.max()] *= -1  # a sign no gradient depends on: decided alike


@pytest.mark.parametrize("change, layer, undetermined", [
    (window_below_zero, "conv", ["conv"]),
    (sign_moved, "fc", ["conv", "fc"]),
    (window_won_by_another, "conv", ["conv"]),
    (window_tied, "conv", ["conv"]),
])
def test_one_decision_taken_otherwise_is_found_on_its_image(change, layer, undetermined):
    a = run()
    b = {name: array.copy() for name, array in a.items()}
    change(b)
    otherwise = decided_otherwise(a, b, ("fc",), ("conv",))
    assert [i for i, image in enumerate(otherwise[layer]) if image] == [2]
    assert not any(images.any() for name, images in otherwise.items() if name != layer)
    assert decided_alike(a, b, ("fc",), ("conv",)).tolist() == [True, True, False, True]
    layers = determined_layers(("conv", "fc", "out"), otherwise)
    assert [name for name in ("conv", "fc", "out") if name not in layers] == undetermined


def test_a_sign_in_a_pool_that_passes_no_gradient_is_no_decision():
    a = run()
    b = {name: array.copy() for name, array in a.items()}
    window_sign_elsewhere(b)
    assert decided_alike(a, b, ("fc",), ("conv",)).all()


def test_a_layer_missing_from_either_run_is_named():
    a = run()
    with pytest.raises(KeyError, match="conv2"):
        decided_otherwise(a, a, ("conv2",))
