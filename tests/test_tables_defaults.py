"""The defaults every translation table's calls leave unsaid (rosetta_proof.defaults): read
from the release each framework's part ran, shown per row, and held to the repository's
record, so that a release that changes one fails here, naming it."""

import json
import types

import pytest
from frameworks_under_test import AVAILABLE
from page_checks import parts_as_built

from rosetta_book.record_defaults import (
    TABLE_PAGES,  # the pages the record holds
)
from rosetta_proof import defaults
from rosetta_proof.defaults import (
    DEFAULTS_RESULT,
    DefaultsError,
    callee,
    default_changes,
    default_text,
    defaults_report,
    defaults_table,
    read_signatures,
    recorded_form,
    unsaid_defaults,
)
from rosetta_utils import FRAMEWORKS

# --- reading a call and a signature -------------------------------------------------------------


def _module(**names):
    module = types.ModuleType("nn")
    module.__dict__.update(names)
    return module


def test_the_callee_is_the_dotted_name_called_or_none():
    assert callee("nn.Conv2d(2, 3, 3)") == "nn.Conv2d"
    assert callee("keras.layers.Dense(5, use_bias=False)") == "keras.layers.Dense"
    assert callee("F.interpolate(x, size, mode='bilinear')") == "F.interpolate"
    assert callee("bn.running_var") is None  # an attribute: no call
    assert callee("layers[0](x)") is None and callee("(lambda: 1)()") is None
    assert callee("training=False") is None  # not an expression


def test_what_a_call_leaves_unsaid_follows_its_positional_and_keyword_arguments():
    class Conv:
        def __init__(self, in_channels, out_channels, kernel, stride=1, padding=0, *, bias=True, **extra):
            pass

    namespace = {"nn": _module(Conv=Conv)}
    read = read_signatures(namespace, ["nn.Conv"])["nn.Conv"]
    assert unsaid_defaults("nn.Conv(2, 3, 3)", read) == [("stride", "1"), ("padding", "0"), ("bias", "True")]
    assert unsaid_defaults("nn.Conv(2, 3, 3, 2, bias=False)", read) == [("padding", "0")]
    assert unsaid_defaults("nn.Conv(2, 3, kernel=3, padding=1)", read) == [("stride", "1"), ("bias", "True")]
    assert "unpacks" in unsaid_defaults("nn.Conv(*shape)", read)
    assert "unpacks" in unsaid_defaults("nn.Conv(2, 3, 3, **options)", read)


def test_a_name_that_does_not_resolve_or_has_no_signature_is_said_not_skipped():
    class Layer:
        def reset(self, everything=True):
            pass

    def unreadable():
        pass

    unreadable.__signature__ = "not a signature"  # as a C function may have none Python can read
    def wrapped_open(file, *args, **kwargs):  # as an IPython kernel binds open in its namespace
        pass

    namespace = {"np": __import__("numpy"), "layer": Layer(), "Layer": Layer, "ops": _module(add=unreadable),
                 "open": wrapped_open}
    read = read_signatures(namespace, ["ops.add", "nowhere.Dense", "layer.reset", "Layer", "np.nope", "open"])
    assert read["open"] == read_signatures({}, ["open"])["open"]  # Python's own open, in every process
    assert ["buffering", "POSITIONAL_OR_KEYWORD", "-1"] in read["open"]["parameters"]
    assert list(read["ops.add"]) == ["error"] and read["ops.add"]["error"].startswith("ValueError")
    assert "0x" not in read["ops.add"]["error"]  # the same text in every process
    assert read["nowhere.Dense"] == read["layer.reset"] == {"local": defaults.NOT_A_FRAMEWORK_CALLABLE}
    assert read["Layer"] == {"parameters": []}
    assert "AttributeError" in read["np.nope"]["error"]
    assert unsaid_defaults("ops.add(x, y)", read["ops.add"]).startswith("signature not read (ValueError")
    assert unsaid_defaults("layer.reset()", read["layer.reset"]) == defaults.NOT_A_FRAMEWORK_CALLABLE


def test_defaults_are_written_the_same_in_every_process():
    def relu(x):
        return x

    assert default_text(0.99) == "0.99" and default_text("zeros") == "'zeros'" and default_text(None) == "None"
    assert default_text((1, 1)) == "(1, 1)"
    assert default_text(relu) == f"{__name__}.test_defaults_are_written_the_same_in_every_process.<locals>.relu"
    assert default_text(object()) == "builtins.object instance"  # its repr holds an address
    assert default_text(json) == "module json"  # its repr holds the path of its file


# --- the table and the record --------------------------------------------------------------------


def _runs(momentum="0.1", versions="2.0"):
    class BatchNorm:
        def __init__(self, features, eps=1e-5, momentum=float(momentum)):
            pass

    read = read_signatures({"nn": _module(BatchNorm=BatchNorm)}, ["nn.BatchNorm"])
    return {"pytorch": {DEFAULTS_RESULT: read, "environment": {"versions": {"torch": versions}}}}


CALLS = {"batch_norm": {"calls": {"pytorch": [{"source": "nn.BatchNorm(3, eps=1e-3)"}],
                                  "tensorflow": "none"}},
         "running_mean": {"calls": {"pytorch": [{"source": "bn.running_mean"}]}}}


def test_the_table_gives_each_rows_unsaid_defaults_per_framework():
    headers, rows = defaults_table(_runs(), CALLS)
    assert headers == ["concept", "pytorch"]
    assert rows == [["batch_norm", "`nn.BatchNorm`: momentum=0.1"],
                    ["running_mean", "`bn.running_mean`: calls no framework's callable by name: no defaults to read"]]
    with pytest.raises(DefaultsError, match="batch_norm: the pytorch part read no signature of nn.BatchNorm"):
        defaults_table({"pytorch": {DEFAULTS_RESULT: {}, "environment": {"versions": {}}}}, CALLS)


def test_a_changed_default_is_named_with_both_releases(tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "RECORDED_FOLDER", tmp_path)
    assert "no defaults recorded for tables/tiny.md" in defaults_report("tables/tiny.md", _runs())
    (tmp_path / "tiny.json").write_text(json.dumps(recorded_form(_runs())))
    assert defaults_report("tables/tiny.md", _runs()).startswith("every default as recorded in tiny.json")
    assert default_changes(_runs(), recorded_form(_runs())) == []
    changed = default_changes(_runs(momentum="0.01", versions="3.0"), recorded_form(_runs()))
    assert changed == ["nn.BatchNorm(momentum=...): 0.1 -> 0.01 (pytorch torch 2.0 -> torch 3.0)"]
    assert "1 defaults differ from the record" in defaults_report("tables/tiny.md", _runs(momentum="0.01"))
    (tmp_path / "tiny.json").write_text("{not json")
    with pytest.raises(DefaultsError, match="not a record of defaults"):
        defaults_report("tables/tiny.md", _runs())


def test_the_record_holds_what_the_parts_read_and_a_failed_write_keeps_the_old(tmp_path, monkeypatch):
    monkeypatch.setattr(defaults, "RECORDED_FOLDER", tmp_path)
    path = defaults.record_defaults("tables/tiny.md", _runs())
    recorded = json.loads(path.read_text())
    assert path == tmp_path / "tiny.json" and recorded["pytorch"]["versions"] == {"torch": "2.0"}
    assert recorded["pytorch"]["signatures"]["nn.BatchNorm"]["parameters"][2] == [
        "momentum", "POSITIONAL_OR_KEYWORD", "0.1"]
    broken = _runs()
    broken["pytorch"][DEFAULTS_RESULT]["nn.BatchNorm"]["parameters"][0][2] = object()  # not JSON
    with pytest.raises(TypeError):
        defaults.record_defaults("tables/tiny.md", broken)
    assert json.loads(path.read_text()) == recorded and list(tmp_path.iterdir()) == [path]
    with raises_defaults_error("tables/none.md: no part read its defaults"):
        defaults.record_defaults("tables/none.md", {"pytorch": {"environment": {"versions": {}}}})


# --- the book's table pages, as built ------------------------------------------------------------


@pytest.mark.parametrize("page", TABLE_PAGES, ids=lambda page: page.stem)
def test_every_default_is_as_recorded_and_every_decisive_call_is_in_the_matrix(page):
    """The build's parts read the defaults of their installed releases: each equals the
    repository's record (a moved pin fails here, with the lines the page prints); the record
    holds all five frameworks; and every decisive call of the page has its cell."""
    from rosetta_book.decisive_calls import decisive_calls
    from rosetta_book.page import Page

    built = parts_as_built(page, AVAILABLE)
    try:
        runs = next(built)
    finally:
        built.close()  # leaves parts_as_built's environment, as a fixture's end would
    relative = f"tables/{page.name}"
    recorded = defaults.load_recorded(relative)
    assert sorted(recorded) == sorted(FRAMEWORKS)
    assert default_changes(runs, recorded) == []
    calls = {concept: {"calls": {framework: found if isinstance(found, str) else [c.as_json() for c in found]
                                 for framework, found in entry["calls"].items()}}
             for concept, entry in decisive_calls(Page.read(page)).items()}
    table = defaults.matrix(runs, calls)
    for concept, entry in calls.items():
        for framework, found in entry["calls"].items():
            if framework in runs and not isinstance(found, str):
                assert len(table[concept][framework]) == len(found), (concept, framework)
    aligned = defaults.aligned_defaults(relative, runs, calls)  # raises where the alignment is stale
    assert all(item.accounted for item in aligned)
    assert bool(aligned) == defaults.alignment_path(relative).is_file()


def test_a_c_function_without_a_signature_is_read_from_its_docstrings_signature_lines():
    """As torch's functions write theirs: every overload's parameters, once each."""
    def var():
        pass

    var.__signature__ = "none Python can read"
    var.__doc__ = ("\nvar(input, dim=None, *, correction=1, keepdim=False) -> Tensor\n\nThe variance.\n\n"
                   ".. function:: var(input, dim, unbiased, keepdim=False,\n        out=None) -> Tensor\n")
    read = read_signatures({"torch": _module(var=var)}, ["torch.var"])["torch.var"]["parameters"]
    assert read == [["input", "POSITIONAL_OR_KEYWORD", None], ["dim", "POSITIONAL_OR_KEYWORD", "None"],
                    ["correction", "KEYWORD_ONLY", "1"], ["keepdim", "KEYWORD_ONLY", "False"],
                    ["unbiased", "POSITIONAL_OR_KEYWORD", None], ["out", "POSITIONAL_OR_KEYWORD", "None"]]
    assert unsaid_defaults("torch.var(x, 0)", {"parameters": read}) == [("correction", "1"), ("keepdim", "False"),
                                                                         ("out", "None")]
    var.__doc__ = "The variance, with no signature line."
    assert "nor a signature line" in read_signatures({"torch": _module(var=var)}, ["torch.var"])["torch.var"]["error"]


# --- aligned parameters ----------------------------------------------------------------------


def _two_frameworks():
    class BatchNorm:  # PyTorch's way: momentum weighs the new batch
        def __init__(self, features, eps=1e-5, momentum=0.1):
            pass

    class BatchNormalization:  # Keras's way: momentum weighs the running average
        def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3):
            pass

    runs = {"pytorch": {DEFAULTS_RESULT: read_signatures({"nn": _module(BatchNorm=BatchNorm)}, ["nn.BatchNorm"])},
            "tensorflow": {DEFAULTS_RESULT: read_signatures({"layers": _module(BatchNormalization=BatchNormalization)},
                                                            ["layers.BatchNormalization"])}}
    calls = {"batch_norm": {"calls": {"pytorch": [{"source": "nn.BatchNorm(3)"}],
                                      "tensorflow": [{"source": "layers.BatchNormalization()"}]}}}
    return runs, calls


def test_aligned_defaults_convert_to_one_meaning_and_a_difference_needs_a_row_or_a_reason():
    runs, calls = _two_frameworks()
    alignment = {"batch_norm": {
        "running average's weight": {"pytorch": "momentum as 1 - x", "tensorflow": "momentum",
                                     "checked": "batch_norm"},
        "epsilon": {"pytorch": "eps", "tensorflow": "epsilon", "unchecked": "no row runs Keras's default"},
        "axis": {"pytorch": "absent: the channels are axis 1, always", "tensorflow": "axis"}}}
    found = defaults.aligned_defaults("tables/tiny.md", runs, calls, alignment)
    momentum, epsilon, axis = found
    assert momentum.shown == {"pytorch": "`momentum`=0.1 (as 1 - x: 0.9)", "tensorflow": "`momentum`=0.99"}
    assert momentum.differs and momentum.verdict == "differs: checked by the row batch_norm"
    assert epsilon.verdict == "differs, no row checks it yet: no row runs Keras's default"
    assert axis.differs and not axis.accounted  # a parameter only one framework has is a difference
    with raises_defaults_error("tables/tiny.md: aligned defaults that differ with neither .*: batch_norm \\(axis\\)"):
        defaults.require_accounted("tables/tiny.md", found)
    assert defaults.require_accounted("tables/tiny.md", found[:2]) == (
        "2 aligned parameters; 2 differ between frameworks: 1 checked by a row, 1 listed with the reason no row "
        "checks them yet")
    always = {"batch_norm": {"affine": {"pytorch": "always 0.9: a fixed weight", "tensorflow": "momentum"}}}
    (fixed,) = defaults.aligned_defaults("tables/tiny.md", runs, calls, always)
    assert fixed.shown["pytorch"] == "no parameter: always 0.9 (a fixed weight)" and fixed.differs  # 0.9 vs 0.99
    same = {"batch_norm": {"momentum": {"pytorch": "momentum as 1 - x", "tensorflow": "momentum"}}}
    runs["pytorch"][DEFAULTS_RESULT]["nn.BatchNorm"]["parameters"][2][2] = "0.01"
    (item,) = defaults.aligned_defaults("tables/tiny.md", runs, calls, same)
    assert item.verdict == "same" and not item.differs


def test_an_alignment_that_names_what_the_release_has_not_stops_the_page():
    runs, calls = _two_frameworks()
    renamed = {"batch_norm": {"epsilon": {"pytorch": "epsilon", "tensorflow": "epsilon"}}}
    with raises_defaults_error("batch_norm: pytorch's nn.BatchNorm has no parameter 'epsilon'"):
        defaults.aligned_defaults("tables/tiny.md", runs, calls, renamed)
    with raises_defaults_error("'dense' is no concept of tables/tiny.md"):
        defaults.aligned_defaults("tables/tiny.md", runs, calls, {"dense": {"bias": {"pytorch": "bias"}}})
    with raises_defaults_error("checked by 'bn_running_mean', no concept of tables/tiny.md"):
        defaults.aligned_defaults("tables/tiny.md", runs, calls, {"batch_norm": {"eps": {
            "pytorch": "eps", "tensorflow": "epsilon", "checked": "bn_running_mean"}}})
    with raises_defaults_error("a conversion must be one of"):
        defaults.aligned_defaults("tables/tiny.md", runs, calls,
                                  {"batch_norm": {"eps": {"pytorch": "eps as x squared"}}})


def raises_defaults_error(match):
    return pytest.raises(DefaultsError, match=match)
