"""Python source as the engine reads it: parsed safely from the build's threads, and the
names a cell binds and reads.

The build runs a page's parts in threads (:func:`rosetta_book.page_execution.run_parts`),
and each reads its page's code (downloads, the name check, the clock scan). CPython
3.11's ``ast`` module keeps its recursion count per interpreter, not per thread, so two
threads parsing at once can fail with "SystemError: AST constructor recursion depth
mismatch" (CPython issue 106905). :func:`parse` takes a lock around the parse.
"""

from __future__ import annotations

import ast
import re
import threading
from typing import Iterable

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def code_of(source: str) -> str:
    """A cell's source with IPython's magics and shell lines blanked (same line numbers)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def target_names(node: ast.AST) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store)}


def bound_names(statement: ast.stmt) -> set[str]:
    """The module-level names ``statement`` binds (not those of a body it defines)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in statement.names if alias.name != "*"}
    if isinstance(statement, ast.Assign):
        return set().union(*(target_names(target) for target in statement.targets))
    if isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        return target_names(statement.target)
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        names = target_names(statement.target)
        for child in statement.body + statement.orelse:
            names |= bound_names(child)
        return names
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        names = set().union(*(target_names(item.optional_vars) for item in statement.items
                              if item.optional_vars is not None))
        for child in statement.body:
            names |= bound_names(child)
        return names
    if isinstance(statement, (ast.If, ast.While, ast.Try)):
        names = set()
        for block in ("body", "orelse", "finalbody"):
            for child in getattr(statement, block, []):
                names |= bound_names(child)
        for handler in getattr(statement, "handlers", []):
            for child in handler.body:
                names |= bound_names(child)
        return names
    return set()


def read_names(node: ast.AST) -> set[str]:
    """Every name ``node`` reads, and every attribute or global it names (a ``global``
    statement in a function reads the module-level name it rebinds)."""
    found = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
            found.add(child.id)
        elif isinstance(child, (ast.Global, ast.Nonlocal)):
            found |= set(child.names)
        elif isinstance(child, ast.Constant) and isinstance(child.value, str) and "\n" in child.value:
            # a worker's script written from a cell reads names by being formatted
            found |= set(re.findall(r"\w+", child.value))
    return found


def definition_bodies(statement: ast.stmt) -> Iterable[ast.AST]:
    """The function and class bodies ``statement`` holds, at any depth."""
    for child in ast.walk(statement):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            yield child


def bound_and_read(source: str) -> tuple[set[str], set[str]]:
    """The module-level names a cell binds and every name it reads (function bodies
    included); two empty sets for a cell that is not valid Python."""
    try:
        tree = parse(code_of(source))
    except SyntaxError:
        return set(), set()
    bound: set[str] = set()
    for statement in tree.body:
        bound |= bound_names(statement)
    return bound, read_names(tree)
