"""The chapter on moving models: its twenty directed moves per model, its round trips, the
command's refusals and the ONNX routes, as the build runs them, and each proof fed a wrong
case (a swapped gate, a transposed kernel, a round trip that changed an array, ...).

The parts come from the build's cache where `make test` built the page (conftest's
parts_as_built). The chapter's parts run in separate processes, so it proves its moves on
weights each part draws alike; here each framework also loads every other framework's
*trained* checkpoints (their canonical arrays, which the parts left) and must compute their
logits: the moves between processes, made literally.
"""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from frameworks_under_test import AVAILABLE, IN_PROCESS_PARAMS
from page_checks import (
    assert_a_failed_proof_stops_the_page,
    comparisons_as_built,
    in_a_process_of_its_own,
    parts_as_built,
    smoke_offline,
)

PAGE = Path(__file__).parents[1] / "book" / "chapters" / "moving_models.md"
MODELS = ("cifar10", "imdb", "resnet50")
TRAINED = ("cifar10", "imdb")
LOGIT_BOUND = 1e-4  # the CIFAR-10 and IMDB chapters' bound on logits, which the page uses


#: Set for a test's own process (in_a_process_of_its_own): where the parent saved the parts'
#: results, so that the child reads them instead of running the parts again.
RUNS_VARIABLE = "ROSETTA_TEST_MOVING_MODELS_RUNS"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from rosetta_proof.tab_results import load_tab_results, save_tab_results

    saved = os.environ.get(RUNS_VARIABLE)
    if saved:
        yield {framework: run.as_dict() for framework, run in load_tab_results(saved).items()}
        return
    folder = tmp_path_factory.mktemp("moving-models-parts")
    for built in parts_as_built(PAGE, AVAILABLE):
        for framework, values in built.items():
            save_tab_results(values, folder, framework)
        os.environ[RUNS_VARIABLE] = str(folder)
        try:
            yield built
        finally:
            os.environ.pop(RUNS_VARIABLE, None)


@pytest.fixture(scope="module")
def comparison(runs):
    yield from comparisons_as_built(PAGE, runs)


def other(framework):
    return next(name for name in AVAILABLE if name != framework)


def first_failing_move(name, framework):
    """The first move the page names when one framework's results are wrong: every move
    into or out of that framework fails, the first in the page's order of pairs."""
    if framework == AVAILABLE[0]:
        return f"{name} {framework} -> {other(framework)}"
    return f"{name} {AVAILABLE[0]} -> {framework}"


def test_every_directed_move_of_every_model_agrees(comparison):
    n = len(AVAILABLE)
    verdicts = comparison["move_verdicts"]
    assert len(verdicts) == len(MODELS) * n * (n - 1)
    assert set(verdicts.values()) == {"agrees"}, {k: v for k, v in verdicts.items() if v != "agrees"}
    for (name, _, _), (outputs, gradients) in comparison["moves"].items():
        assert 0.0 <= outputs <= comparison["OUTPUT_BOUNDS"][name][1]
        assert 0.0 <= gradients <= 1.0


def test_the_gradient_bound_is_float32s_n_u_for_each_probes_longest_sum(comparison, runs):
    """n: every example times every position of a first-layer output (CIFAR-10: 64 images
    of 32 x 32; ResNet-50: two of 64 x 64 through a stride-2 stem; IMDB: 16 reviews of 150
    steps), the same in every part."""
    u = 2.0**-24
    expected = {"cifar10": 64 * 32 * 32, "imdb": 16 * 150, "resnet50": 2 * 32 * 32}
    for framework, run in runs.items():
        assert run["probe_sums"] == expected, framework
    assert comparison["GRADIENT_RELATIVE"] == pytest.approx({k: n * u for k, n in expected.items()})


@pytest.mark.parametrize("name, smallest", [("cifar10", "fc2.bias"), ("imdb", "dense.bias")])
def test_three_percent_off_in_the_smallest_tensors_gradient_stops_the_page(runs, name, smallest):
    """Held to its own scale, the smallest tensor's gradient cannot hide behind the largest:
    3% off in the last layer's bias, in one framework, fails every move into or out of it."""
    framework = AVAILABLE[-1]
    gradients = {model: dict(values) for model, values in runs[framework]["probe_gradients"].items()}
    sizes = {key: np.size(value) for key, value in gradients[name].items()}
    assert min(sizes, key=sizes.get) == smallest
    gradients[name][smallest] = gradients[name][smallest] * 1.03
    message = assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"probe_gradients": gradients},
                                                   r"DIFFERS", failing=first_failing_move(name, framework))
    assert "every directed move: outputs and gradients" in message


def test_round_trips_are_bit_for_bit_and_every_part_drew_the_same_stand_ins(runs):
    first = runs[AVAILABLE[0]]
    for framework, run in runs.items():
        assert run["stand_in_digests"] == first["stand_in_digests"], framework
        for name in MODELS:
            assert run["round_trips"][name]["changed"] == 0 and run["round_trips"][name]["of"] > 0
        for name in TRAINED:
            assert run["trained_round_trips"][name]["changed"] == 0
            np.testing.assert_array_equal(run["reloaded_outputs"][name], run["trained_outputs"][name])
        # the gradients are of every weight, and not all zero
        assert all(np.any(g) for g in run["probe_gradients"]["cifar10"].values()), framework


def _swap_gates(array):
    """PyTorch's r, z, n blocks with r and z swapped: a converter that mixed up the gates."""
    r, z, n = np.split(array, 3)
    return np.concatenate([z, r, n])


def test_a_swapped_gate_in_one_frameworks_gradients_stops_the_page(runs):
    framework = "tensorflow" if "tensorflow" in runs else AVAILABLE[-1]
    gradients = {name: dict(values) for name, values in runs[framework]["probe_gradients"].items()}
    gradients["imdb"]["gru.weight_hh_l0"] = _swap_gates(gradients["imdb"]["gru.weight_hh_l0"])
    message = assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"probe_gradients": gradients},
                                                   r"DIFFERS", failing=first_failing_move("imdb", framework))
    assert "every directed move: outputs and gradients" in message


def test_a_transposed_kernel_in_one_frameworks_gradients_stops_the_page(runs):
    framework = "jax" if "jax" in runs else AVAILABLE[0]
    gradients = {name: dict(values) for name, values in runs[framework]["probe_gradients"].items()}
    gradients["cifar10"]["conv2.weight"] = np.ascontiguousarray(gradients["cifar10"]["conv2.weight"].swapaxes(2, 3))
    assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"probe_gradients": gradients}, r"DIFFERS",
                                         failing=first_failing_move("cifar10", framework))


def test_a_round_trip_that_changed_an_array_stops_the_page(runs):
    framework = AVAILABLE[-1]
    trips = dict(runs[framework]["round_trips"])
    trips["imdb"] = {"changed": 1, "of": 7, "names": ["gru.bias_hh_l0"]}
    message = assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"round_trips": trips},
                                                   r"DIFFERS \(1 > 0\)", failing=f"{framework} imdb")
    assert "round trips bit for bit" in message


def test_different_stand_in_weights_in_one_part_stop_the_page(runs):
    framework = AVAILABLE[-1]
    digests = dict(runs[framework]["stand_in_digests"], resnet50="0" * 64)
    assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"stand_in_digests": digests}, r"DIFFERS",
                                         failing=f"{framework} resnet50")


@pytest.mark.parametrize("refusal, shown", [({"error": "", "written": True}, "no refusal"),
                                            ({"error": "refused", "written": True}, "a file was written")])
def test_a_conversion_of_another_model_that_goes_through_stops_the_page(runs, refusal, shown):
    framework = AVAILABLE[0]
    refusals = dict(runs[framework]["refusals"], cifar10=refusal)
    assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"refusals": refusals}, shown,
                                         failing=f"{framework} as cifar10")


def test_an_onnx_route_left_untried_stops_the_page(runs):
    framework = AVAILABLE[0]
    routes = [route for route in runs[framework]["onnx_routes"] if route["model"] != "resnet50"]
    assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"onnx_routes": routes}, r"DIFFERS",
                                         failing=f"{framework} resnet50")


def test_the_command_refused_every_framework_s_imdb_checkpoint_listing_names_and_shapes(runs):
    for framework, run in runs.items():
        for claimed, refusal in run["refusals"].items():
            error = refusal["error"]
            assert f"is not the {claimed} model" in error and "nothing was written" in error, framework
            assert "missing " in error and "unexpected " in error and "(" in error, framework
            assert refusal["written"] is False
        assert run["command_output"].startswith("$ python -m rosetta_utils.checkpoints cifar10 ")
        assert f"--from {run['CHECKPOINT']} --to canonical" in run["command_output"]
        assert "wrote " in run["command_output"] and "the cifar10 model, 12 arrays" in run["command_output"]


def test_each_onnx_route_is_measured_or_shows_the_error_it_stopped_with(runs):
    for framework, run in runs.items():
        assert [route["model"] for route in run["onnx_routes"]] == list(MODELS), framework
        for route in run["onnx_routes"]:
            assert route["versions"] and route["exporter"]
            if route["export"] != "ran":  # the exception's type, then its message
                assert ": " in route["export"] and route["export"].split(":")[0].isidentifier(), route
                continue
            assert isinstance(route["opset"], int) and isinstance(route["dynamic batch"], bool)
            for step in ("onnxruntime", "import back"):
                value = route[step]
                assert isinstance(value, float) or value == "no importer" or ": " in value, (framework, step)
            if route["model"] == "imdb":
                assert route["GRU"].startswith(("ONNX GRU, linear_before_reset=", "no GRU node")), route


def test_the_onnx_tables_show_every_route_with_its_verdict(runs, comparison):
    for name in MODELS:
        for framework, run in runs.items():
            route = next(r for r in run["onnx_routes"] if r["model"] == name)
            shown = comparison["route_verdict"](name, route, run["probe_outputs"][name])
            if route["export"] != "ran":
                assert shown == "fails: export"
            elif isinstance(route["onnxruntime"], str):
                assert shown == "fails: onnxruntime"
            else:
                assert shown.startswith(("agrees", "differs"))


# --- the moves between processes, literally: every framework loads every other's trained models


@pytest.mark.parametrize("framework", IN_PROCESS_PARAMS)
def test_each_framework_computes_every_other_frameworks_trained_models(runs, framework, request):
    """Each trained CIFAR-10 network and GRU classifier, as the command read it from its own
    framework's checkpoint, loaded here through this framework's checkpoint: the logits are
    the source's. A swapped gate or a transposed kernel in the source's arrays is not. (In a
    pytest process of its own: a framework's part with the three chapters it borrows.)"""
    if not in_a_process_of_its_own(request):
        return
    from rosetta_book.chapter import load_chapter

    with pytest.MonkeyPatch.context() as patch:
        smoke_offline(patch)
        part = load_chapter(PAGE, framework, until="Training")
    request.addfinalizer(lambda: shutil.rmtree(part["WORK"], ignore_errors=True))  # the part's scratch folder
    sources = [name for name in runs if name != framework]
    assert sources, "needs a second framework"

    def logits(name, weights):
        model, _, to_device = part["build"](name)
        part["import_into"](name, model, weights)
        return part["outputs"](name, model, to_device, part["probes"][name])

    for source in sources:
        for name in TRAINED:
            moved = logits(name, runs[source]["trained_weights"][name])
            difference = float(np.max(np.abs(moved - runs[source]["trained_outputs"][name])))
            assert difference <= LOGIT_BOUND, (source, framework, name, difference)
    source = sources[0]
    swapped = dict(runs[source]["trained_weights"]["imdb"])
    swapped["gru.weight_ih_l0"] = _swap_gates(swapped["gru.weight_ih_l0"])
    wrong = np.max(np.abs(logits("imdb", swapped) - runs[source]["trained_outputs"]["imdb"]))
    assert wrong > LOGIT_BOUND, wrong
    transposed = dict(runs[source]["trained_weights"]["cifar10"])
    transposed["conv2.weight"] = np.ascontiguousarray(transposed["conv2.weight"].swapaxes(2, 3))
    wrong_outputs = logits("cifar10", transposed)
    assert np.max(np.abs(wrong_outputs - runs[source]["trained_outputs"]["cifar10"])) > LOGIT_BOUND
    if framework == AVAILABLE[0]:  # the page's proof of outputs fed the same wrong kernel
        stand_in = dict(part["stand_ins"]["cifar10"])
        stand_in["conv2.weight"] = np.ascontiguousarray(stand_in["conv2.weight"].swapaxes(2, 3))
        outputs = dict(runs[framework]["probe_outputs"], cifar10=logits("cifar10", stand_in))
        assert_a_failed_proof_stops_the_page(PAGE, runs, framework, {"probe_outputs": outputs}, r"DIFFERS",
                                             failing=first_failing_move("cifar10", framework))
