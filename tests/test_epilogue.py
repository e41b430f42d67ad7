"""The one cell the engine appends to a kernel (rosetta_proof.epilogue): it saves a part's tab
results or the comparisons' count of gated verdicts, as its request says, and nothing else."""

import pytest

from rosetta_proof.epilogue import REQUEST_FILE, EpilogueError, cell, run_epilogue, write_request
from rosetta_proof.equivalence import gated_count
from rosetta_proof.tab_results import load_tab_results


def test_a_parts_epilogue_saves_its_tab_results_and_leaves_no_name_behind(tmp_path):
    request = write_request(tmp_path, {"kind": "part", "page": "p.md", "framework": "jax", "names": ["value"],
                                       "callees": [], "folder": str(tmp_path)})
    assert request == tmp_path / REQUEST_FILE
    namespace = {"value": 3}
    exec(cell(request), namespace)  # noqa: S102 - the cell the engine appends
    assert set(namespace) == {"value", "__builtins__"}
    assert load_tab_results(tmp_path)["jax"]["value"] == 3


def test_the_comparisons_epilogue_writes_the_count_of_gated_verdicts(tmp_path):
    gated = tmp_path / "gated.txt"
    run_epilogue({}, {"kind": "comparisons", "gated": str(gated)})
    assert gated.read_text() == str(gated_count())


@pytest.mark.parametrize("request_, message", [
    ({"kind": "cleanup"}, "kind is 'part' or 'comparisons', not 'cleanup'"),
    ({"kind": "part", "page": "p.md", "framework": "jax"}, "a part epilogue request lacks callees, folder, names"),
    ({"kind": "comparisons"}, "a comparisons epilogue request lacks gated"),
])
def test_a_request_of_no_known_kind_or_lacking_a_field_is_refused(tmp_path, request_, message):
    with pytest.raises(EpilogueError, match=message):
        write_request(tmp_path, request_)
    assert not (tmp_path / REQUEST_FILE).exists()
