"""rosetta_utils.gru: GRU weights moved between every pair of supported layers, checked on outputs.

Every layer kind is run by a small adapter below ("run this GRU on x (B, T, I),
h0 = 0, and return the outputs (B, T, H·directions)"); the adapters are test
scaffolding, not page code. A numpy GRU of each flavor is the independent
reference, so a wrong gate order or a misplaced bias fails here even if two
frameworks shared the mistake.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

from frameworks_under_test import LEGACY_FRAMEWORKS
from rosetta_book.environments import environment_of
from rosetta_utils.frameworks import is_installed
from rosetta_utils.gru import (
    LBR,
    RB,
    GRUConversionError,
    conversion_is_exact,
    get_weights,
    random_gru_weights,
    set_weights,
    validate_weights,
)

BATCH, STEPS, INPUT, HIDDEN = 3, 6, 5, 4
EXACT = 1e-6

x_data = np.random.default_rng(7).standard_normal((BATCH, STEPS, INPUT)).astype(np.float32)


def import_mxnet():
    """``mxnet``, imported with the two lines the pages carry (see the appendix)."""
    np.bool = bool  # MXNet 1.9 uses numpy.bool, removed in numpy 1.24
    os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))  # else 1 thread
    import mxnet

    return mxnet


def import_chainer():
    """``chainer``; conftest already gave this process Python's own distutils."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "pkg_resources is deprecated")  # from Chainer's import
        import chainer

    return chainer


# --------------------------------------------------------------------------
# A numpy GRU of each flavor (float64), the reference every kind must match
# --------------------------------------------------------------------------


def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def reference_direction(canonical, flavor, x, reverse=False):
    w_ih, w_hh, b_ih, b_hh = (canonical[k].astype(np.float64) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    hidden = w_hh.shape[1]
    h = np.zeros((x.shape[0], hidden))
    outputs = [None] * x.shape[1]
    steps = range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1])
    for t in steps:
        gi = x[:, t].astype(np.float64) @ w_ih.T + b_ih
        r = _sigmoid(gi[:, :hidden] + h @ w_hh[:hidden].T + b_hh[:hidden])
        z = _sigmoid(gi[:, hidden : 2 * hidden] + h @ w_hh[hidden : 2 * hidden].T + b_hh[hidden : 2 * hidden])
        if flavor == LBR:
            n = np.tanh(gi[:, 2 * hidden :] + r * (h @ w_hh[2 * hidden :].T + b_hh[2 * hidden :]))
        else:
            n = np.tanh(gi[:, 2 * hidden :] + (r * h) @ w_hh[2 * hidden :].T + b_hh[2 * hidden :])
        h = z * h + (1 - z) * n
        outputs[t] = h
    return np.stack(outputs, axis=1)


def reference_gru(weights, x):
    flavor = weights.get("flavor", LBR)
    parts = [reference_direction(weights["forward"], flavor, x)]
    if "backward" in weights:
        parts.append(reference_direction(weights["backward"], flavor, x, reverse=True))
    return np.concatenate(parts, axis=-1)


def test_reference_flavors_differ_and_agree_where_they_should():
    weights = random_gru_weights(INPUT, HIDDEN, seed=1)
    lbr = reference_gru(weights, x_data)
    rb = reference_gru(dict(weights, flavor=RB), x_data)
    assert np.max(np.abs(lbr - rb)) > 1e-2  # the flavors are different functions
    # A diagonal U_n and b_hn = 0 make them the same function: r ⊙ (D h) = D (r ⊙ h).
    diagonal = _with_diagonal_u_n(weights, zero_b_hn=True)
    np.testing.assert_allclose(reference_gru(diagonal, x_data), reference_gru(dict(diagonal, flavor=RB), x_data), atol=1e-12)


def _with_diagonal_u_n(weights, zero_b_hn):
    out = {k: v for k, v in weights.items()}
    for direction in ("forward", "backward"):
        if direction in weights:
            canonical = {k: v.copy() for k, v in weights[direction].items()}
            u_n = canonical["weight_hh"][2 * HIDDEN :]
            u_n[...] = np.diag(np.diag(u_n))
            if zero_b_hn:
                canonical["bias_hh"][2 * HIDDEN :] = 0.0
            out[direction] = canonical
    return out


def _without_b_hn(weights):
    out = dict(weights)
    for direction in ("forward", "backward"):
        if direction in weights:
            canonical = {k: v.copy() for k, v in weights[direction].items()}
            canonical["bias_hh"][2 * HIDDEN :] = 0.0
            out[direction] = canonical
    return out


# --------------------------------------------------------------------------
# Layer kinds: how to build each once, and how to run it on (B, T, I)
# --------------------------------------------------------------------------


@dataclass
class Kind:
    name: str
    framework: str
    flavor: str
    directions: int
    build: Callable[[], Any]
    run: Callable[[Any, np.ndarray], np.ndarray]
    holds_b_hn: bool = True
    folds_biases: bool = False  # stores biases that only ever add up added up (get_weights shows the sum)
    functional: bool = False  # flax.linen: set_weights returns new params
    _layer: Any = field(default=None, repr=False)

    @property
    def layer(self):
        if self._layer is None:
            if not is_installed(self.framework):
                pytest.skip(f"{self.framework} is not installed")
            self._layer = self.build()
        return self._layer

    def set(self, weights, approximate=False):
        result = set_weights(self.layer, weights, approximate=approximate)
        if self.functional:
            self._layer = result
        else:
            assert result is self._layer
        return result

    def __call__(self, x):
        return np.asarray(self.run(self.layer, x), dtype=np.float32)


# PyTorch
def _torch_gru(bidirectional):
    def build():
        import torch

        return torch.nn.GRU(INPUT, HIDDEN, batch_first=True, bidirectional=bidirectional)

    return build


def _torch_run(layer, x):
    import torch

    with torch.no_grad():
        return layer(torch.from_numpy(x))[0].numpy()


def _torch_cell():
    import torch

    return torch.nn.GRUCell(INPUT, HIDDEN)


def _torch_cell_run(cell, x):
    import torch

    h = torch.zeros(x.shape[0], HIDDEN)
    outputs = []
    with torch.no_grad():
        for t in range(x.shape[1]):
            h = cell(torch.from_numpy(x[:, t]), h)
            outputs.append(h.numpy())
    return np.stack(outputs, axis=1)


# Keras
def _keras_gru(reset_after, bidirectional):
    def build():
        import keras

        layer = keras.layers.GRU(HIDDEN, return_sequences=True, reset_after=reset_after)
        if bidirectional:
            layer = keras.layers.Bidirectional(layer)
        layer.build((None, STEPS, INPUT))
        return layer

    return build


def _keras_run(layer, x):
    return np.asarray(layer(x))


def _keras_cell(reset_after):
    def build():
        import keras

        cell = keras.layers.GRUCell(HIDDEN, reset_after=reset_after)
        cell.build((None, INPUT))
        return cell

    return build


def _keras_cell_run(cell, x):
    h = np.zeros((x.shape[0], HIDDEN), np.float32)
    outputs = []
    for t in range(x.shape[1]):
        out, _ = cell(x[:, t], [h])
        h = np.asarray(out)
        outputs.append(h)
    return np.stack(outputs, axis=1)


# MXNet
def _mxnet_gru(bidirectional):
    def build():
        import_mxnet()
        from mxnet.gluon import rnn

        layer = rnn.GRU(HIDDEN, layout="NTC", bidirectional=bidirectional, input_size=INPUT)
        layer.initialize()
        return layer

    return build


def _mxnet_run(layer, x):
    mx = import_mxnet()
    return layer(mx.nd.array(x)).asnumpy()


def _mxnet_cell():
    import_mxnet()
    from mxnet.gluon import rnn

    cell = rnn.GRUCell(HIDDEN, input_size=INPUT)
    cell.initialize()
    return cell


def _mxnet_cell_run(cell, x):
    mx = import_mxnet()
    h = mx.nd.zeros((x.shape[0], HIDDEN))
    outputs = []
    for t in range(x.shape[1]):
        out, (h,) = cell(mx.nd.array(x[:, t]), [h])
        outputs.append(out.asnumpy())
    return np.stack(outputs, axis=1)


# Chainer
def _chainer_nstep(bidirectional):
    def build():
        import_chainer()
        import chainer.links as L

        return (L.NStepBiGRU if bidirectional else L.NStepGRU)(1, INPUT, HIDDEN, 0.0)

    return build


def _chainer_nstep_run(layer, x):
    import_chainer()
    _, ys = layer(None, [x[b] for b in range(x.shape[0])])
    return np.stack([y.array for y in ys])


def _chainer_stateless():
    import_chainer()
    import chainer.links as L

    return L.StatelessGRU(INPUT, HIDDEN)


def _chainer_stateless_run(link, x):
    h = np.zeros((x.shape[0], HIDDEN), np.float32)
    outputs = []
    for t in range(x.shape[1]):
        h = link(h, x[:, t]).array
        outputs.append(h)
    return np.stack(outputs, axis=1)


def _chainer_stateful():
    import_chainer()
    import chainer.links as L

    return L.GRU(INPUT, HIDDEN)


def _chainer_stateful_run(link, x, start_from_zeros=True):
    chainer = import_chainer()
    link.reset_state()
    if start_from_zeros:  # with h = None its first step skips the U biases (tested below)
        link.set_state(chainer.Variable(np.zeros((x.shape[0], HIDDEN), np.float32)))
    return np.stack([link(x[:, t]).array for t in range(x.shape[1])], axis=1)


# Flax nnx and linen
def _nnx_cell(with_b_hn):
    from flax import nnx

    cell = nnx.GRUCell(INPUT, HIDDEN, rngs=nnx.Rngs(0))
    if with_b_hn:
        cell.dense_h = nnx.Linear(HIDDEN, 3 * HIDDEN, use_bias=True, rngs=nnx.Rngs(1))
    return cell


def _nnx_build(wrapper, with_b_hn):
    def build():
        from flax import nnx

        if wrapper == "cell":
            return _nnx_cell(with_b_hn)
        if wrapper == "rnn":
            return nnx.RNN(_nnx_cell(with_b_hn))
        return nnx.Bidirectional(nnx.RNN(_nnx_cell(with_b_hn)), nnx.RNN(_nnx_cell(with_b_hn)))

    return build


def _nnx_cell_run(cell, x):
    import jax.numpy as jnp

    h = jnp.zeros((x.shape[0], HIDDEN))
    outputs = []
    for t in range(x.shape[1]):
        h, _ = cell(h, jnp.asarray(x[:, t]))
        outputs.append(np.asarray(h))
    return np.stack(outputs, axis=1)


def _nnx_run(layer, x):
    import jax.numpy as jnp

    return np.asarray(layer(jnp.asarray(x)))


def _linen_build():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    return nn.GRUCell(HIDDEN).init(jax.random.PRNGKey(0), jnp.zeros((1, HIDDEN)), jnp.zeros((1, INPUT)))


def _linen_run(variables, x):
    import flax.linen as nn
    import jax.numpy as jnp

    cell = nn.GRUCell(HIDDEN)
    h = jnp.zeros((x.shape[0], HIDDEN))
    outputs = []
    for t in range(x.shape[1]):
        h, _ = cell.apply(variables, h, jnp.asarray(x[:, t]))
        outputs.append(np.asarray(h))
    return np.stack(outputs, axis=1)


KINDS = {
    kind.name: kind
    for kind in [
        Kind("torch.GRU", "pytorch", LBR, 1, _torch_gru(False), _torch_run),
        Kind("torch.GRUCell", "pytorch", LBR, 1, _torch_cell, _torch_cell_run),
        Kind("torch.GRU(bi)", "pytorch", LBR, 2, _torch_gru(True), _torch_run),
        Kind("keras.GRU(reset_after=True)", "tensorflow", LBR, 1, _keras_gru(True, False), _keras_run),
        Kind("keras.GRUCell(reset_after=True)", "tensorflow", LBR, 1, _keras_cell(True), _keras_cell_run),
        Kind("keras.Bidirectional(GRU(reset_after=True))", "tensorflow", LBR, 2, _keras_gru(True, True), _keras_run),
        Kind("keras.GRU(reset_after=False)", "tensorflow", RB, 1, _keras_gru(False, False), _keras_run, folds_biases=True),
        Kind("keras.GRUCell(reset_after=False)", "tensorflow", RB, 1, _keras_cell(False), _keras_cell_run, folds_biases=True),
        Kind("keras.Bidirectional(GRU(reset_after=False))", "tensorflow", RB, 2, _keras_gru(False, True), _keras_run, folds_biases=True),
        Kind("mxnet.GRU", "mxnet", LBR, 1, _mxnet_gru(False), _mxnet_run),
        Kind("mxnet.GRUCell", "mxnet", LBR, 1, _mxnet_cell, _mxnet_cell_run),
        Kind("mxnet.GRU(bi)", "mxnet", LBR, 2, _mxnet_gru(True), _mxnet_run),
        Kind("chainer.NStepGRU", "chainer", LBR, 1, _chainer_nstep(False), _chainer_nstep_run),
        Kind("chainer.NStepBiGRU", "chainer", LBR, 2, _chainer_nstep(True), _chainer_nstep_run),
        Kind("chainer.StatelessGRU", "chainer", RB, 1, _chainer_stateless, _chainer_stateless_run),
        Kind("chainer.GRU", "chainer", RB, 1, _chainer_stateful, _chainer_stateful_run),
        Kind("nnx.GRUCell", "jax", LBR, 1, _nnx_build("cell", False), _nnx_cell_run, holds_b_hn=False, folds_biases=True),
        Kind("nnx.RNN(GRUCell)", "jax", LBR, 1, _nnx_build("rnn", False), _nnx_run, holds_b_hn=False, folds_biases=True),
        Kind("nnx.Bidirectional(GRUCell)", "jax", LBR, 2, _nnx_build("bi", False), _nnx_run, holds_b_hn=False, folds_biases=True),
        Kind("nnx.GRUCell+b_hn", "jax", LBR, 1, _nnx_build("cell", True), _nnx_cell_run),
        Kind("nnx.RNN(GRUCell+b_hn)", "jax", LBR, 1, _nnx_build("rnn", True), _nnx_run),
        Kind("nnx.Bidirectional(GRUCell+b_hn)", "jax", LBR, 2, _nnx_build("bi", True), _nnx_run),
        Kind("linen.GRUCell params", "jax", LBR, 1, _linen_build, _linen_run, folds_biases=True, functional=True),
    ]
}

# The weights every exact test starts from (non-zero biases everywhere), and the
# same without b_hn for the flax.nnx cells that have no place for it.
BASE = {
    (flavor, directions): random_gru_weights(INPUT, HIDDEN, bidirectional=directions == 2, seed=3, flavor=flavor)
    for flavor in (LBR, RB)
    for directions in (1, 2)
}


def base_weights(*kinds: Kind):
    first = kinds[0]
    weights = BASE[(first.flavor, first.directions)]
    return weights if all(k.holds_b_hn for k in kinds) else _without_b_hn(weights)


def _digest(weights) -> str:
    hasher = hashlib.sha256(str(weights.get("flavor")).encode())
    for direction in ("forward", "backward"):
        if direction in weights:
            for key in sorted(weights[direction]):
                hasher.update(direction.encode() + key.encode() + weights[direction][key].tobytes())
    return hasher.hexdigest()


_outputs: dict[tuple[str, str, bool], np.ndarray] = {}


def load_and_run(kind: Kind, weights, approximate=False) -> np.ndarray:
    """Load ``weights`` into ``kind``'s layer and run it on ``x_data`` (memoised: layers are slow to call)."""
    key = (kind.name, _digest(weights), approximate)
    kind.set(weights, approximate=approximate)
    if key not in _outputs:
        _outputs[key] = kind(x_data)
    return _outputs[key]


def max_diff(a, b) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def _marks(*kinds: Kind):
    """A kind of MXNet or Chainer runs in the legacy environment's test run."""
    return [pytest.mark.legacy] if any(kind.framework in LEGACY_FRAMEWORKS for kind in kinds) else []


def kind_names():
    return [pytest.param(kind.name, marks=_marks(kind)) for kind in KINDS.values()]


def _pairs(same_flavor: bool):
    """Ordered pairs of kinds of one environment (one process holds one: PyTorch, TensorFlow
    and JAX, or MXNet and Chainer); pairs across the two are the GRU page's matrix, which
    moves weights through canonical arrays (tests/test_page_gru_flavors.py)."""
    for a, b in itertools.permutations(KINDS.values(), 2):
        if environment_of(a.framework) != environment_of(b.framework):
            continue
        if (a.flavor == b.flavor) == same_flavor and a.directions == b.directions:
            yield pytest.param(a.name, b.name, id=f"{a.name}->{b.name}", marks=_marks(a, b))


def exact_pairs():
    return _pairs(same_flavor=True)


def cross_flavor_pairs():
    return _pairs(same_flavor=False)


# --------------------------------------------------------------------------
# Each kind computes the GRU of its flavor, and keeps what it is given
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", kind_names())
def test_each_kind_computes_the_reference_gru(name):
    kind = KINDS[name]
    weights = base_weights(kind)
    output = load_and_run(kind, weights)
    assert output.shape == (BATCH, STEPS, HIDDEN * kind.directions)
    assert max_diff(output, reference_gru(weights, x_data)) <= EXACT
    assert get_weights(kind.layer)["flavor"] == kind.flavor


@pytest.mark.parametrize("name", kind_names())
def test_round_trip_is_exact(name):
    kind = KINDS[name]
    weights = base_weights(kind)
    kind.set(weights)
    first = get_weights(kind.layer)
    kind.set(first)
    second = get_weights(kind.layer)
    _assert_same_weights(second, first)  # get(set(w)) == w for weights the layer holds as they are
    if not kind.folds_biases:  # every bias in its own place: the very arrays come back
        _assert_same_weights(first, weights)
    else:  # biases that only ever add up are stored added up; the function is the same
        assert max_diff(reference_gru(first, x_data), reference_gru(weights, x_data)) <= 1e-6


def _assert_same_weights(actual, expected):
    assert set(actual) == set(expected) | {"flavor"}
    assert actual["flavor"] == expected.get("flavor", LBR)
    for direction in ("forward", "backward"):
        if direction in expected:
            for key, array in expected[direction].items():
                assert actual[direction][key].dtype == np.float32
                np.testing.assert_array_equal(actual[direction][key], array, err_msg=f"{direction} {key}")


# --------------------------------------------------------------------------
# Every pair, in both directions
# --------------------------------------------------------------------------


@pytest.mark.parametrize("source, target", list(exact_pairs()))
def test_exact_conversion_between_every_pair(source, target, record_property):
    a, b = KINDS[source], KINDS[target]
    start = base_weights(a, b)
    output_a = load_and_run(a, start)
    moved = get_weights(a.layer)
    assert conversion_is_exact(moved, b.layer)
    output_b = load_and_run(b, moved)
    difference = max_diff(output_a, output_b)
    record_property("max_abs_difference", difference)
    assert difference <= EXACT


@pytest.mark.parametrize("source, target", list(cross_flavor_pairs()))
def test_flavor_change_is_refused_with_the_reason(source, target):
    a, b = KINDS[source], KINDS[target]
    a.set(base_weights(a))
    with pytest.raises(GRUConversionError, match=r"U_n .* is not diagonal") as error:
        b.set(get_weights(a.layer))
    assert (LBR in str(error.value)) and (RB in str(error.value)) and "approximate=True" in str(error.value)
    if a.flavor == LBR and a.holds_b_hn:
        assert "b_hn is not zero" in str(error.value)


APPROXIMATE_CASES = [
    ("torch.GRU", "keras.GRU(reset_after=False)"),
    ("keras.GRU(reset_after=False)", "torch.GRU"),
    ("torch.GRU(bi)", "keras.Bidirectional(GRU(reset_after=False))"),
    ("keras.Bidirectional(GRU(reset_after=False))", "keras.Bidirectional(GRU(reset_after=True))"),
    ("chainer.StatelessGRU", "chainer.NStepGRU"),
    ("mxnet.GRU", "chainer.GRU"),
    ("torch.GRU", "nnx.RNN(GRUCell)"),
    ("torch.GRU(bi)", "nnx.Bidirectional(GRUCell)"),
]


@pytest.mark.parametrize("source, target", [pytest.param(a, b, marks=_marks(KINDS[a], KINDS[b]))
                                            for a, b in APPROXIMATE_CASES])
def test_approximate_conversion_is_finite_but_not_exact(source, target, record_property):
    a, b = KINDS[source], KINDS[target]
    output_a = load_and_run(a, base_weights(a))
    moved = get_weights(a.layer)
    assert not conversion_is_exact(moved, b.layer)
    if not b.holds_b_hn and a.flavor == b.flavor:
        with pytest.raises(GRUConversionError, match="b_hn"):
            b.set(moved)
    output_b = load_and_run(b, moved, approximate=True)
    difference = max_diff(output_a, output_b)
    record_property("max_abs_difference", difference)
    assert np.isfinite(output_b).all()
    assert 1e-3 < difference < 2.0  # wrong, measurably, but not garbage


def test_flavor_change_is_exact_when_the_values_allow_it():
    lbr, rb = KINDS["torch.GRU"], KINDS["keras.GRU(reset_after=False)"]
    # LBR -> RB: needs U_n diagonal and b_hn = 0.
    weights = _with_diagonal_u_n(BASE[(LBR, 1)], zero_b_hn=True)
    output = load_and_run(lbr, weights)
    assert max_diff(load_and_run(rb, get_weights(lbr.layer)), output) <= EXACT
    # RB -> LBR: U_n diagonal is enough; b_hn moves into b_in, where RB adds it anyway.
    weights = _with_diagonal_u_n(BASE[(RB, 1)], zero_b_hn=False)
    output = load_and_run(rb, weights)
    assert max_diff(load_and_run(lbr, get_weights(rb.layer)), output) <= EXACT
    # LBR -> RB with a diagonal U_n but b_hn != 0 is still refused: r scales b_hn in LBR only.
    with pytest.raises(GRUConversionError, match="b_hn is not zero"):
        rb.set(_with_diagonal_u_n(BASE[(LBR, 1)], zero_b_hn=False))


def test_zero_b_hn_goes_into_an_nnx_cell_exactly_and_non_zero_does_not():
    nnx_kind = KINDS["nnx.GRUCell"]
    with pytest.raises(GRUConversionError, match=r"b_hn .* is not zero.*dense_h"):
        nnx_kind.set(BASE[(LBR, 1)])
    weights = _without_b_hn(BASE[(LBR, 1)])
    assert max_diff(load_and_run(nnx_kind, weights), reference_gru(weights, x_data)) <= EXACT


# --------------------------------------------------------------------------
# Checks of what goes in, and of the layers
# --------------------------------------------------------------------------


def _bad(mutate):
    weights = random_gru_weights(INPUT, HIDDEN, seed=5)
    weights = {"forward": dict(weights["forward"]), "flavor": weights["flavor"]}
    mutate(weights)
    return weights


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda w: w["forward"].pop("bias_hh"), r"missing key\(s\) 'bias_hh'"),
        (lambda w: w["forward"].update(bias=np.zeros(12, np.float32)), r"unknown key\(s\) 'bias'"),
        (lambda w: w.update(sideways={}), r"unknown key\(s\) 'sideways'"),
        (lambda w: w.pop("forward"), "missing key 'forward'"),
        (lambda w: w.update(flavor="cudnn"), "unknown flavor 'cudnn'"),
        (lambda w: w["forward"].update(weight_hh=np.zeros((12, 5), np.float32)), r"'weight_hh'.*\(3H, H\).*\(12, 5\)"),
        (lambda w: w["forward"].update(weight_ih=np.zeros((9, 5), np.float32)), r"'weight_ih'.*\(12, I\).*\(9, 5\)"),
        (lambda w: w["forward"].update(bias_ih=np.zeros((12, 1), np.float32)), r"'bias_ih'.*\(12,\).*\(12, 1\)"),
        (lambda w: w["forward"].update(bias_hh=np.zeros(12)), "'bias_hh'.* float32, got float64"),
        (lambda w: w["forward"]["weight_ih"].__setitem__((0, 0), np.nan), "'weight_ih'.* non-finite"),
        (lambda w: w["forward"].update(weight_ih=[[0.0] * 5] * 12), "'weight_ih'.* numpy array, got list"),
    ],
)
def test_bad_weights_are_clear_errors(mutate, message):
    with pytest.raises(GRUConversionError, match=message):
        validate_weights(_bad(mutate))
    assert issubclass(GRUConversionError, ValueError)


def test_backward_shapes_must_match_forward():
    weights = random_gru_weights(INPUT, HIDDEN, bidirectional=True)
    weights["backward"]["weight_ih"] = np.zeros((12, 6), np.float32)
    with pytest.raises(GRUConversionError, match="'backward' shapes"):
        validate_weights(weights)


def test_weights_must_fit_the_layer():
    torch_uni, torch_bi = KINDS["torch.GRU"], KINDS["torch.GRU(bi)"]
    with pytest.raises(GRUConversionError, match="bidirectional and needs key.*'backward'"):
        torch_bi.set(BASE[(LBR, 1)])
    with pytest.raises(GRUConversionError, match="one-directional"):
        torch_uni.set(BASE[(LBR, 2)])
    with pytest.raises(GRUConversionError, match=r"'weight_ih'\] has shape \(12, 7\).*input size 5.*\(12, 5\)"):
        torch_uni.set(random_gru_weights(7, HIDDEN))
    with pytest.raises(GRUConversionError, match=r"'weight_ih'\] has shape \(9, 5\).*hidden size 4"):
        torch_uni.set(random_gru_weights(INPUT, 3))


@pytest.mark.skipif(not is_installed("pytorch"), reason="needs PyTorch")
def test_unsupported_layers_are_named():
    import torch

    with pytest.raises(GRUConversionError, match=r"unsupported layer type torch\.nn\.modules\.rnn\.LSTM"):
        get_weights(torch.nn.LSTM(INPUT, HIDDEN))
    with pytest.raises(GRUConversionError, match=r"torch\.nn\.modules\.rnn\.GRU \(num_layers=2"):
        set_weights(torch.nn.GRU(INPUT, HIDDEN, num_layers=2), BASE[(LBR, 1)])
    with pytest.raises(GRUConversionError, match="unsupported layer type builtins.str"):
        get_weights("gru")
    without_bias = torch.nn.GRU(INPUT, HIDDEN, bias=False)
    with pytest.raises(GRUConversionError, match="no biases"):
        set_weights(without_bias, BASE[(LBR, 1)])
    weights = get_weights(without_bias)
    assert not weights["forward"]["bias_ih"].any() and not weights["forward"]["bias_hh"].any()


@pytest.mark.skipif(not is_installed("tensorflow"), reason="needs TensorFlow")
def test_keras_layers_must_be_built():
    import keras

    with pytest.raises(GRUConversionError, match="not built yet"):
        set_weights(keras.layers.GRU(HIDDEN), BASE[(LBR, 1)])
    with pytest.raises(GRUConversionError, match="not built yet"):
        get_weights(keras.layers.Bidirectional(keras.layers.GRU(HIDDEN)))
    with pytest.raises(GRUConversionError, match="LSTM, not a GRU"):
        get_weights(keras.layers.Bidirectional(keras.layers.LSTM(HIDDEN)))


@pytest.mark.legacy
@pytest.mark.skipif(not is_installed("mxnet"), reason="needs MXNet in this process (the legacy environment)")
def test_mxnet_deferred_initialization_is_a_clear_error():
    import_mxnet()
    from mxnet.gluon import rnn

    layer = rnn.GRU(HIDDEN, layout="NTC")  # no input_size: Gluon learns it from the first input
    with pytest.raises(GRUConversionError, match="not initialized"):
        get_weights(layer)
    layer.initialize()
    with pytest.raises(GRUConversionError, match=r"not initialized.*shape \(12, 0\).*input_size"):
        set_weights(layer, BASE[(LBR, 1)])


def test_importing_the_module_imports_no_framework():
    code = (
        "import sys, rosetta_utils.gru\n"
        "loaded = [m for m in ('torch', 'tensorflow', 'keras', 'jax', 'flax', 'mxnet', 'chainer') if m in sys.modules]\n"
        "print(loaded)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# --------------------------------------------------------------------------
# The facts of reference/rnn.md this module relies on, checked on the layers
# --------------------------------------------------------------------------


@pytest.mark.skipif(not is_installed("tensorflow"), reason="needs TensorFlow")
def test_keras_layout_z_r_h_columns_and_two_bias_rows():
    kind = KINDS["keras.GRU(reset_after=True)"]
    kind.set(BASE[(LBR, 1)])
    cell = kind.layer.cell
    canonical = BASE[(LBR, 1)]["forward"]
    kernel, bias = np.asarray(cell.kernel), np.asarray(cell.bias)
    assert kernel.shape == (INPUT, 3 * HIDDEN) and bias.shape == (2, 3 * HIDDEN)
    np.testing.assert_array_equal(kernel[:, :HIDDEN], canonical["weight_ih"][HIDDEN : 2 * HIDDEN].T)  # z first
    np.testing.assert_array_equal(kernel[:, HIDDEN : 2 * HIDDEN], canonical["weight_ih"][:HIDDEN].T)  # then r
    np.testing.assert_array_equal(bias[1, 2 * HIDDEN :], canonical["bias_hh"][2 * HIDDEN :])  # row 1: recurrent
    assert np.asarray(KINDS["keras.GRU(reset_after=False)"].layer.cell.bias).shape == (3 * HIDDEN,)


@pytest.mark.legacy
@pytest.mark.skipif(not is_installed("mxnet"), reason="needs MXNet in this process (the legacy environment)")
def test_mxnet_parameter_names():
    names = set(KINDS["mxnet.GRU(bi)"].layer._reg_params)
    assert names == {f"{d}0_{p}" for d in "lr" for p in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")}


@pytest.mark.legacy
@pytest.mark.skipif(not is_installed("chainer"), reason="needs Chainer in this process (the legacy environment)")
def test_chainer_nstep_links_and_stateful_first_step():
    layer = KINDS["chainer.NStepBiGRU"].layer
    assert len(layer) == 2  # link 2·layer + direction
    shapes = {name: param.shape for name, param in layer[1].namedparams()}
    assert shapes == {**{f"/w{i}": (HIDDEN, INPUT) for i in range(3)}, **{f"/w{i}": (HIDDEN, HIDDEN) for i in range(3, 6)},
                      **{f"/b{i}": (HIDDEN,) for i in range(6)}}
    # The backward link really is link 1: zero it and only the second half of the outputs changes.
    kind = KINDS["chainer.NStepBiGRU"]
    weights = BASE[(LBR, 2)]
    before = load_and_run(kind, weights)
    for _, param in layer[1].namedparams():
        param.array[...] = 0
    after = kind(x_data)
    np.testing.assert_array_equal(after[..., :HIDDEN], before[..., :HIDDEN])
    assert np.all(after[..., HIDDEN:] == 0)
    # L.GRU with h = None: its first step skips the U biases (and U_z), so it differs from h0 = 0.
    stateful = KINDS["chainer.GRU"]
    weights = BASE[(RB, 1)]
    with_zeros = load_and_run(stateful, weights)
    with_none = _chainer_stateful_run(stateful.layer, x_data, start_from_zeros=False)
    assert max_diff(with_zeros[:, 0], with_none[:, 0]) > 1e-3


@pytest.mark.skipif(not is_installed("jax"), reason="needs Flax")
def test_nnx_gru_cell_has_no_b_hn():
    from flax import nnx

    cell = nnx.GRUCell(INPUT, HIDDEN, rngs=nnx.Rngs(0))
    assert cell.dense_h.bias is None
    assert set(nnx.state(cell)) == {"dense_i", "dense_h"}
    assert get_weights(cell)["forward"]["bias_hh"].tolist() == [0.0] * (3 * HIDDEN)


@pytest.mark.skipif(not is_installed("jax"), reason="needs Flax")
def test_linen_params_keep_their_nesting_and_mapping_type():
    from flax.core import FrozenDict

    variables = _linen_build()
    weights = BASE[(LBR, 1)]
    inner = set_weights(dict(variables["params"]), weights)  # the bare {"ir": ..., ...} dict
    assert set(inner) == {"ir", "iz", "in", "hr", "hz", "hn"} and "bias" not in inner["hr"]
    frozen = set_weights(FrozenDict(variables), weights)
    assert isinstance(frozen, FrozenDict) and set(frozen) == {"params"}
    _assert_same_weights(get_weights(inner), get_weights(frozen))
    with pytest.raises(GRUConversionError, match="unsupported layer type builtins.dict"):
        get_weights({"ir": {"kernel": np.zeros((5, 4))}})


@pytest.mark.skipif(not is_installed("tensorflow"), reason="needs TensorFlow")
def test_keras_gru_options_that_change_the_function():
    import keras

    relu = keras.layers.GRU(HIDDEN, activation="relu")
    relu.build((None, STEPS, INPUT))
    with pytest.raises(GRUConversionError, match="activation='relu'"):
        get_weights(relu)
    no_bias = keras.layers.GRU(HIDDEN, use_bias=False, return_sequences=True)
    no_bias.build((None, STEPS, INPUT))
    with pytest.raises(GRUConversionError, match="no biases"):
        set_weights(no_bias, BASE[(LBR, 1)])
    weights = BASE[(LBR, 1)]
    set_weights(no_bias, weights, approximate=True)
    dropped = {k: (v if k.startswith("weight") else np.zeros_like(v)) for k, v in weights["forward"].items()}
    expected = reference_gru({"forward": dropped, "flavor": LBR}, x_data)
    assert max_diff(np.asarray(no_bias(x_data)), expected) <= EXACT


@pytest.mark.legacy
@pytest.mark.skipif(not is_installed("chainer"), reason="needs Chainer in this process (the legacy environment)")
def test_chainer_uninitialized_link_is_a_clear_error():
    import_chainer()
    import chainer.links as L

    with pytest.raises(GRUConversionError, match="not initialized"):
        get_weights(L.StatelessGRU(None, HIDDEN))
    with pytest.raises(GRUConversionError, match=r"n_layers=2"):
        get_weights(L.NStepGRU(2, INPUT, HIDDEN, 0.0))


def test_a_converter_needs_only_its_own_framework():
    """Under the book's one-framework guard, a PyTorch GRU converts: nothing else is imported."""
    from rosetta_book.one_framework import environment

    code = (
        "import sys, torch\n"
        "from rosetta_utils.gru import get_weights, random_gru_weights, set_weights\n"
        "layer = set_weights(torch.nn.GRU(5, 4), random_gru_weights(5, 4))\n"
        "others = [m for m in ('tensorflow', 'keras', 'jax', 'flax', 'mxnet', 'chainer') if m in sys.modules]\n"
        "print(sorted(get_weights(layer)), others)"
    )
    if not is_installed("pytorch"):
        pytest.skip("needs PyTorch")
    done = subprocess.run([sys.executable, "-c", code], env=environment("pytorch"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "['flavor', 'forward'] []"


def test_backends_hold_no_gru_code():
    """The backends (device, threads, synchronisation) import nothing of rosetta_utils.gru."""
    code = (
        "import sys\n"
        "import rosetta_utils.backends.pytorch, rosetta_utils.backends.tensorflow, rosetta_utils.backends.jax\n"
        "import rosetta_utils.backends.mxnet, rosetta_utils.backends.chainer\n"
        "print([m for m in sys.modules if m.startswith('rosetta_utils.gru')])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
