"""The one piece of code the engine runs inside a page's kernel, after the page's own cells.

A framework part's kernel ends by saving what the page's comparisons read from it
(:func:`rosetta_proof.tab_results.save_namespace_results`); the comparisons' kernel
ends by saving how many verdicts the page's gates checked
(:func:`rosetta_proof.equivalence.gated_count`). The engine says which in a request
file, JSON, written by :func:`write_request`, and appends :func:`cell`'s one code
cell, the same for every page, which hands the kernel's namespace and the request's
path to :func:`run_epilogue`. A request is one of:

- ``{"kind": "part", "page": PATH, "framework": NAME, "names": [...], "callees": [...],
  "folder": PATH}``: save the part's tab results (``names``, the front matter's
  ``tab_results`` for the framework) and the signatures of ``callees`` (a table's
  decisive calls) into ``folder``;
- ``{"kind": "comparisons", "gated": PATH}``: write the count of gated verdicts into
  the file ``gated``.

The chapter loader (:mod:`rosetta_book.chapter`), which runs a part in a process of
its own without a kernel, ends it with :func:`run_epilogue` too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

#: The request's file name, in the folder the engine gives :func:`write_request`.
REQUEST_FILE = "epilogue-request.json"
_KINDS = {"part": {"page", "framework", "names", "callees", "folder"}, "comparisons": {"gated"}}


class EpilogueError(ValueError):
    """A request that is not one of the two kinds, or lacks what its kind needs."""


def write_request(folder: str | Path, request: Mapping[str, Any]) -> Path:
    """Write ``request`` (checked) into ``folder``; return its path, for :func:`cell`."""
    _check(request)
    path = Path(folder) / REQUEST_FILE
    path.write_text(json.dumps(dict(request), indent=1))
    return path


def cell(request: str | Path) -> str:
    """The epilogue's code cell: it runs :func:`run_epilogue` on the kernel's namespace and leaves
    no name behind."""
    return ("from rosetta_proof.epilogue import run_epilogue as _rosetta_epilogue\n"
            f"_rosetta_epilogue(globals(), {str(request)!r})\n"
            "del _rosetta_epilogue")


def run_epilogue(namespace: Mapping[str, Any], request: str | Path | Mapping[str, Any]) -> None:
    """Do what ``request`` (a request's path, or the request itself) asks, on ``namespace``."""
    if not isinstance(request, Mapping):
        request = json.loads(Path(request).read_text())
    _check(request)
    if request["kind"] == "part":
        from .tab_results import save_namespace_results

        save_namespace_results(namespace, request["names"], request["framework"], request["page"],
                               request["folder"], request["callees"])
    else:
        from .equivalence import gated_count

        Path(request["gated"]).write_text(str(gated_count()))


def _check(request: Mapping[str, Any]) -> None:
    kind = request.get("kind")
    if kind not in _KINDS:
        raise EpilogueError(f"an epilogue request's kind is 'part' or 'comparisons', not {kind!r}")
    missing = sorted(_KINDS[kind] - set(request))
    if missing:
        raise EpilogueError(f"a {kind} epilogue request lacks {', '.join(missing)}")
