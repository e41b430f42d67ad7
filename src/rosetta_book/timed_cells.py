"""Which of a part's cells time something: the cells that run alone in the build.

A part of a page that times something runs its cells one by one, and only the
cells that time hold the whole machine (:mod:`rosetta_book.machine_slots`); the
others (imports, data, models, compiling, checks) share it with other pages'
parts. A cell times something when one of its statements runs code that reads
a clock:

* the statement's own code reads one (:data:`CLOCK`: ``time.perf_counter()``,
  ``timeit`` and the like); or
* it uses a name bound from something that reads one: a function or class
  whose code reads a clock or uses such a name, a value a timing statement
  computed, a string of code that reads a clock (a script a cell runs in
  another process), an object a timing name was handed to
  (``x.append(f)``, ``exec(CODE, namespace)``), or a function of the reader's
  library that reads a clock (:func:`clock_functions`:
  ``rosetta_utils.timing.measure`` and the like, found by the same scan of the
  library's own source).

Names follow Python's scopes: a function's parameters and the names it binds,
and a comprehension's loop variables, are its own, so a function whose
parameter is called ``epoch`` does not use the timing loop's ``epoch``. The
scan leans towards running alone: a name stays timed once bound so. A
statement that only defines something (a function, a class, an import, an
assignment that calls nothing, such as a string of code) runs nothing: it
taints the names it binds without timing its cell. What the scan cannot see
(a clock reached through ``getattr``, say), the kernel's watch finds as the
cell runs (:mod:`rosetta_book.clock_watch`), and the build stops.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
from pathlib import Path

from .python_source import parse

#: A clock read in code: ``time.perf_counter()``, ``process_time``, ``timeit``, ``time.time()``,
#: ``monotonic()``, and a profiler (which times what it records).
CLOCK = re.compile(r"perf_counter|process_time|\btimeit\b|rosetta_utils\.timing|\btime\.time\(|\bmonotonic\(|"
                   r"\bprofiler\b")

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BUILTINS = frozenset(dir(builtins))


def reads_a_clock(source: str) -> list[str]:
    """The clock reads :data:`CLOCK` finds in ``source`` (empty: none)."""
    return CLOCK.findall(source)


def _loaded(node: ast.AST) -> set[str]:
    """The names ``node`` reads from the scope it runs in, builtins left out (``print`` is
    never timed): a function's, a lambda's and a comprehension's own names (parameters,
    names it assigns, loop targets) are its own, not the cell's."""
    return _free(node) - _BUILTINS


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _stored(nodes: list[ast.AST]) -> set[str]:
    """The names a function body binds in its own scope (Python makes them local wherever
    in the body they are bound), less those it declares ``global`` or ``nonlocal``."""
    names, declared = set(), set()
    pending = list(nodes)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)  # its body is a scope of its own
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Lambda, *_COMPREHENSIONS)):
            continue  # scopes of their own
        pending.extend(ast.iter_child_nodes(node))
    return names - declared


def _free(node: ast.AST) -> set[str]:
    """The names ``node`` reads that are not bound in a scope inside it."""
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) else set()
    if isinstance(node, _FUNCTIONS):
        arguments = node.args
        outside = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
        if not isinstance(node, ast.Lambda):
            outside += [*node.decorator_list, *([node.returns] if node.returns else [])]
        parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                                      *filter(None, (arguments.vararg, arguments.kwarg)))}
        body = [node.body] if isinstance(node, ast.Lambda) else node.body
        inside = set().union(*map(_free, body)) - parameters - _stored(body)
        return set().union(inside, *map(_free, outside))
    if isinstance(node, _COMPREHENSIONS):
        first, *others = node.generators
        targets = set().union(*(_target_names(g.target) for g in node.generators))
        inside = [*((node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)),
                  first.target, *first.ifs, *(part for g in others for part in (g.target, g.iter, *g.ifs))]
        return _free(first.iter) | (set().union(*map(_free, inside)) - targets)
    return set().union(*map(_free, ast.iter_child_nodes(node)))


def _target_names(node: ast.AST) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}


def _bound(node: ast.AST) -> set[str]:
    """The names a statement binds or changes: assignment targets (a subscript's or an
    attribute's object included), loop and ``with`` targets, definitions, imports."""
    if isinstance(node, _DEFINITIONS):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, (ast.Store, ast.Del)):
            names.add(child.id)
        elif isinstance(child, (ast.Attribute, ast.Subscript)) and isinstance(child.ctx, (ast.Store, ast.Del)):
            base = child.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                names.add(base.id)
    return names


def _handed(node: ast.AST, timed: set[str]) -> set[str]:
    """The objects a statement hands something timed to (a timed name, or code that reads a
    clock): ``x`` in ``x.append(f)`` or ``x.update(y=f)``, the namespaces of
    ``exec(CODE, namespace)``."""
    names = set()
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
        if not any(_loaded(argument) & timed or reads_a_clock(ast.unparse(argument)) for argument in arguments):
            continue
        function = call.func
        if isinstance(function, ast.Name) and function.id in ("exec", "eval"):
            names |= {argument.id for argument in arguments if isinstance(argument, ast.Name)}
        while isinstance(function, (ast.Attribute, ast.Subscript)):
            function = function.value
            if isinstance(function, ast.Name):
                names.add(function.id)
    return names


def _imported_clocks(node: ast.AST, library: dict[str, set[str]], package: str = "") -> set[str]:
    """The names an import binds to the reader's library's clock reading functions (a
    whole module bound by ``import``, if it has any); ``package``: where a relative import
    is (in the library's own modules)."""
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([module] if module else []))
        if module in library:
            return {alias.asname or alias.name for alias in node.names
                    if alias.name == "*" or alias.name in library[module]}
        return set()
    if isinstance(node, ast.Import):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names
                if any(module == alias.name or module.startswith(alias.name + ".")
                       for module, names in library.items() if names)}
    return set()


def _statements(source: str) -> list[ast.stmt]:
    """A cell's top-level statements (IPython's magics turned into Python first)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return parse(TransformerManager().transform_cell(source)).body


def _scan(cells: list[list[ast.stmt]], library: dict[str, set[str]],
          package: str = "") -> tuple[set[str], list[list[str]]]:
    """The timed names of ``cells`` (lists of statements) and, per cell, why it times (what
    its running statements read or use; empty: it does not)."""
    timed: set[str] = set()
    modules = {alias.asname or alias.name.split(".")[0] for statements in cells for node in statements
               if isinstance(node, ast.Import) for alias in node.names}
    while True:  # to a fixed point: a name may be used before the cell that taints it is seen
        before = len(timed)
        for statements in cells:
            for node in statements:
                timed |= _imported_clocks(node, library, package)
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                if reads_a_clock(ast.unparse(node)) or _loaded(node) & timed:
                    handed = set() if _defines_only(node) else _handed(node, timed) - modules
                    timed |= _bound(node) | handed
        if len(timed) == before:
            break
    reasons = []
    for statements in cells:
        why: list[str] = []
        for node in statements:
            if not _defines_only(node):
                why += reads_a_clock(ast.unparse(node)) + sorted(_loaded(node) & timed)
        reasons.append(sorted(set(why)))
    return timed, reasons


def _defines_only(node: ast.stmt) -> bool:
    """Whether a statement only defines something, running no code: a function, a class,
    an import, or an assignment that calls nothing (a string of code, a table)."""
    if isinstance(node, (*_DEFINITIONS, ast.Import, ast.ImportFrom)):
        return True
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    return value is not None and not any(isinstance(child, ast.Call) for child in ast.walk(value))


def timed_cells(sources: list[str]) -> list[list[str]]:
    """For each cell's source (a part's cells, in order), why it times something: the
    clock reads and timed names it uses (empty: it times nothing). A cell that is not
    valid Python times, to be safe."""
    cells, broken = [], []
    for index, source in enumerate(sources):
        try:
            cells.append(_statements(source))
        except SyntaxError:
            cells.append([])
            broken.append(index)
    _, reasons = _scan(cells, clock_functions())
    for index in broken:
        reasons[index] = ["(not valid Python)"]
    return reasons


@functools.lru_cache(maxsize=1)
def clock_functions() -> dict[str, set[str]]:
    """For each module of the reader's library, the names in it that read a clock (by the
    same scan as a page's cells, over the module's own statements)."""
    import rosetta_utils

    base = Path(rosetta_utils.__file__).parent
    modules, packages = {}, {}
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(base.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = parse(path.read_text(encoding="utf-8")).body
        packages[name] = ".".join(parts[:-1])
    library: dict[str, set[str]] = {name: set() for name in modules}
    while True:  # a module's names may come from another module's
        found = {name: _scan([statements], library, packages[name])[0] for name, statements in modules.items()}
        if found == library:
            return library
        library = found
