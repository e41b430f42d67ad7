"""Parsing Python source safely from the build's threads.

The build runs a page's parts in threads (:func:`rosetta_book.page_execution.run_parts`),
and each reads its page's code (downloads, the name check, the clock scan). CPython
3.11's ``ast`` module keeps its recursion count per interpreter, not per thread, so two
threads parsing at once can fail with "SystemError: AST constructor recursion depth
mismatch" (CPython issue 106905). :func:`parse` takes a lock around the parse.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
