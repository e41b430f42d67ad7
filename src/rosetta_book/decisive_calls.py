"""The decisive call of every translation-table concept, read from the tab code that ran.

A translation-table page checks concepts: a shared cell computes the float64
reference of concept ``K`` into ``references["K"]``, and each framework's
cells compute the same thing into their results (``outputs["K"] = ...``). The
compact table at the top of the page shows, per concept and framework, the
call that *is* the translation, taken from that framework's code, never typed
beside it. The author marks it in the cell's metadata::

    ```{code-cell} ipython3
    :tags: [pytorch]
    :decisive: nn.MaxPool2d
    pool = nn.MaxPool2d(3, stride=3, ceil_mode=True)
    outputs["max_pool_ceil"] = run(pool, x, c)
    ```

and the table shows ``nn.MaxPool2d(3, stride=3, ceil_mode=True)``: the whole
call as the code writes it, with its arguments. A marker is

* a dotted name (``nn.MaxPool2d``, ``jnp.mean``, ``dropout``): the first call
  of exactly that callable, else that expression itself (``jnp.float32``);
* ``.name``: the first call of a method of that name (``model.eval()``), else
  the first attribute of that name (``bn.running_mean``);
* ``name=``: the first keyword argument of that name (``training=False``);
* ``none``: the framework has no such API; its part must leave a string that
  says why instead of a result.

A marker may be a list (the table shows every call, in order), or, for a cell
that serves several concepts, a mapping from concept to marker.

Bad input stops the build (:class:`PageError`), naming page, line, concept and
framework: a framework cell that writes a concept's result and marks no
decisive call; a marker that matches nothing in the cells that compute the
concept; a marker on a cell that writes no concept's result.

:func:`write_decisive_calls` leaves the calls, with each concept's section
title and label, as JSON where the comparison cells find them
(:func:`rosetta_proof.compact_table.load_calls`).
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import json
import operator
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from rosetta_proof.compact_table import CALLS_FILE, NONE
from rosetta_utils import FRAMEWORKS

from .page import SHARED, Page, PageError, cell_role
from .python_source import parse

#: The cell metadata key of the marker.
MARKER = "decisive"
#: The dict every shared cell fills with the references: its keys are the concepts.
REFERENCES = "references"
_LABEL = re.compile(r"^\((?P<label>[^)]+)\)=\s*$")


@dataclass(frozen=True)
class DecisiveCall:
    """One call of a framework's translation of a concept: in the reader's words (``text``,
    :func:`in_readers_words`) and as its code writes it (``source``)."""

    text: str
    cell: int  # the page's cell index
    line: int  # the line in that cell, 1-based
    source: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"text": self.text, "cell": self.cell, "line": self.line, "source": self.source}


def _subscript_key(target: ast.AST) -> str | None:
    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
        key = target.slice.value
        return key if isinstance(key, str) else None
    return None


def _assigned_keys(tree: ast.AST, dict_name: str | None = None) -> list[str]:
    """String keys assigned by subscript (``d["K"] = ...``, ``d["K"] += ...``), in order;
    only those of ``dict_name`` when given."""
    keys = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            for part in (target.elts if isinstance(target, ast.Tuple) else [target]):
                key = _subscript_key(part)
                if key is None:
                    continue
                if dict_name is None or (isinstance(part.value, ast.Name) and part.value.id == dict_name):
                    keys.append(key)
    return list(dict.fromkeys(keys))


@functools.lru_cache(maxsize=8192)
def _parsed(source: str) -> ast.AST:
    """A cell's source parsed once, however often the page's facts are read (never mutated:
    :class:`_ReadersWords` works on a copy)."""
    return parse(source)


def _parse(page: Page, index: int) -> ast.AST:
    try:
        return _parsed(page.notebook.cells[index].source)
    except SyntaxError as error:
        raise PageError(f"{page.where(index)}: this cell is not Python: {error}") from None


def concepts(page: Page) -> dict[str, int]:
    """Each concept (a key of ``references``) and the shared cell that computes it."""
    found: dict[str, int] = {}
    for index, cell in enumerate(page.notebook.cells):
        if cell.cell_type == "code" and cell_role(cell) == SHARED:
            for key in _assigned_keys(_parse(page, index), REFERENCES):
                found.setdefault(key, index)
    return found


def _section(page: Page, index: int) -> tuple[str, str | None]:
    """The heading above cell ``index`` and the MyST label right above that heading."""
    for cell in reversed(page.notebook.cells[: index + 1]):
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for number in range(len(lines) - 1, -1, -1):
            if lines[number].startswith("#"):
                title = lines[number].lstrip("#").strip()
                above = [line for line in lines[:number] if line.strip()]
                label = _LABEL.match(above[-1]) if above else None
                return title, label.group("label") if label else None
    return page.title, None


def _section_prose(page: Page, index: int) -> str:
    """The prose of the section cell ``index`` is in: the markdown after its heading, up to
    the next heading (code cells in between are skipped)."""
    start = None
    for position in range(index, -1, -1):
        cell = page.notebook.cells[position]
        if cell.cell_type == "markdown" and any(line.startswith("#") for line in cell.source.splitlines()):
            start = position
            break
    if start is None:
        return ""
    lines = page.notebook.cells[start].source.splitlines()
    last_heading = max(n for n, line in enumerate(lines) if line.startswith("#"))
    prose = lines[last_heading + 1:]
    for cell in page.notebook.cells[start + 1:]:
        if cell.cell_type != "markdown" or cell_role(cell) != SHARED:
            continue
        cell_lines = cell.source.splitlines()
        heading = next((n for n, line in enumerate(cell_lines) if line.startswith("#") or _LABEL.match(line)), None)
        prose += cell_lines if heading is None else cell_lines[:heading]
        if heading is not None:
            break
    return " ".join(line.strip() for line in prose if line.strip())


def sentences(text: str) -> list[str]:
    """``text`` split into sentences at a full stop, question or exclamation mark followed
    by a space, never inside a code span (`nnx.Conv` is one word)."""
    found, start, in_code = [], 0, False
    for position, character in enumerate(text):
        if character == "`":
            in_code = not in_code
        elif character in ".?!" and not in_code and text[position + 1: position + 2] in (" ", ""):
            found.append(text[start: position + 1].strip())
            start = position + 1
    rest = text[start:].strip()
    return [sentence for sentence in found + ([rest] if rest else []) if sentence]


def traps(prose: str) -> list[str]:
    """The sentences of a concept's prose that name a trap, each with the sentence after it
    when it is too short to say what the trap is ("Trap: the defaults differ.")."""
    said = sentences(prose)
    picked = []
    for number, sentence in enumerate(said):
        if re.search(r"\btraps?\b", sentence, re.IGNORECASE):
            text = sentence
            if len(sentence) < 60 and number + 1 < len(said):
                text += " " + said[number + 1]
            picked.append(text)
    return picked


def _markers(value: Any, concept: str) -> list[str]:
    if isinstance(value, dict):
        value = value.get(concept)
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [str(item).strip() for item in items if str(item).strip()]


def _find(tree: ast.AST, marker: str) -> ast.AST | None:
    """The node a marker names (see the module's note), first in source order."""
    nodes = sorted((node for node in ast.walk(tree) if hasattr(node, "lineno")),
                   key=lambda node: (node.lineno, node.col_offset))
    if marker.endswith("="):
        name = marker[:-1]
        for node in nodes:
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == name:
                        return keyword
        return None
    if marker.startswith("."):
        name = marker[1:]
        calls = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == name]
        attributes = [n for n in nodes if isinstance(n, ast.Attribute) and n.attr == name]
        return (calls or attributes or [None])[0]
    calls = [n for n in nodes if isinstance(n, ast.Call) and ast.unparse(n.func) == marker]
    expressions = [n for n in nodes if isinstance(n, (ast.Name, ast.Attribute)) and ast.unparse(n) == marker]
    return (calls or expressions or [None])[0]


#: Keyword arguments that hand a layer the weights its row loads: the row's data, not its
#: translation, which a compact cell leaves out.
WEIGHT_KEYWORDS = frozenset({"initialW", "initial_bias", "initial_gamma", "initial_beta", "initial_avg_mean",
                             "initial_avg_var"})
#: A constant's name: capitals, digits and underscores (``F`` and ``L``, Chainer's modules,
#: are imports, not constants).
_CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*$")
#: The longest expression a compact cell shows in place of the name it is bound to.
INLINED_LENGTH = 40
#: Built-in functions whose value a compact cell may show computed: ``max(out // size, 1)``.
_BUILTINS = frozenset({"int", "float", "round", "max", "min", "abs", "len", "tuple"})
_PURE = (ast.Constant, ast.Tuple, ast.List, ast.UnaryOp, ast.BinOp, ast.Name, ast.Attribute, ast.expr_context,
         ast.operator, ast.unaryop)


def _per_page(function):
    """``function(page, *args)`` computed once per page content (a page's facts are read for
    each of its hundreds of calls)."""
    memo: dict = {}

    @functools.wraps(function)
    def cached(page: Page, *args):
        key = (str(page.path), tuple((cell.cell_type, cell_role(cell), cell.source) for cell in page.notebook.cells),
               args)
        if key not in memo:
            memo[key] = function(page, *args)
        return memo[key]

    return cached


def _is_literal(node: ast.AST) -> bool:
    return all(isinstance(part, (ast.Constant, ast.Tuple, ast.List, ast.UnaryOp, ast.BinOp, ast.expr_context,
                                 ast.operator, ast.unaryop)) for part in ast.walk(node))


@_per_page
def _modules(page: Page) -> set[str]:
    """The names the page's code imports (``np``, ``nn``, ``F``, ``keras`` ...)."""
    names = set()
    for index, cell in enumerate(page.notebook.cells):
        if cell.cell_type == "code":
            for node in ast.walk(_parse(page, index)):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


@_per_page
def _constants(page: Page) -> dict[str, ast.expr]:
    """Each constant (:data:`_CONSTANT`) the page's code binds, once, to a literal."""
    found: dict[str, ast.expr] = {}
    clashing = set()
    for index, cell in enumerate(page.notebook.cells):
        if cell.cell_type != "code":
            continue
        for name, value in _assignments(_parse(page, index).body):
            names = {part.id for part in ast.walk(value) if isinstance(part, ast.Name)}
            if _CONSTANT.match(name) and all(isinstance(part, _PURE) for part in ast.walk(value)) and \
                    not any(isinstance(part, ast.Attribute) for part in ast.walk(value)) and \
                    all(_CONSTANT.match(other) for other in names):
                if name in found and ast.unparse(found[name]) != ast.unparse(value):
                    clashing.add(name)
                found[name] = value
    return {name: value for name, value in found.items() if name not in clashing}


def _assignments(nodes: Iterable[ast.AST]) -> Iterator[tuple[str, ast.expr]]:
    """``(name, value)`` of each simple assignment among ``nodes`` (``a = 1``, ``a, b = 1, 2``)."""
    for node in nodes:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
        for name, bound in pairs:
            if isinstance(name, ast.Name):
                yield name.id, bound


@_per_page
def _shared_names(page: Page) -> set[str]:
    """The names the page's shared cells bind: the harness of its checks (arrays, grids,
    helpers), which a reader's code does not have."""
    names = set()
    for index, cell in enumerate(page.notebook.cells):
        if cell.cell_type == "code" and cell_role(cell) == SHARED:
            for node in _parse(page, index).body:
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
                for target in filter(None, targets):
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names.add(node.name)
    return names


@_per_page
def _framework_assignments(page: Page, framework: str) -> list[tuple[str, ast.expr]]:
    """The simple assignments at the top of ``framework``'s cells."""
    return list(_assignments(node for index, cell in enumerate(page.notebook.cells)
                             if cell.cell_type == "code" and cell_role(cell) == framework
                             for node in _parse(page, index).body))


@_per_page
def _framework_names(page: Page, framework: str) -> set[str]:
    """Every name ``framework``'s cells bind, anywhere in them."""
    return {name for index, cell in enumerate(page.notebook.cells)
            if cell.cell_type == "code" and cell_role(cell) == framework
            for node in ast.walk(_parse(page, index)) for name in _bound_names(node)}


def _bindings(page: Page, framework: str, tree: ast.AST) -> dict[str, ast.expr]:
    """The names bound once to one expression: anywhere in the decisive cell (``tree``), or
    at the top of another of the framework's cells (its setup: ``rngs = nnx.Rngs(0)``)."""
    found: dict[str, ast.expr] = {}
    clashing = set()
    for name, value in [*_assignments(ast.walk(tree)), *_framework_assignments(page, framework)]:
        if name in found and ast.unparse(found[name]) != ast.unparse(value):
            clashing.add(name)
        found[name] = value
    return {name: value for name, value in found.items() if name not in clashing}


class _ReadersWords(ast.NodeTransformer):
    """A decisive call as a reader writes it: a grid's parameter by its name (``case.stride``
    reads ``stride``), a constant by its value, a name the cell binds to a value by that
    value, weights handed in left out, and numpy's copies of an array by the array's name
    (``x_np`` reads ``x``)."""

    def __init__(self, constants: Mapping[str, ast.expr], bindings: Mapping[str, ast.expr], modules: set[str]):
        self.constants, self.bindings, self.modules = constants, bindings, modules
        self.parameters: set[str] = set()
        self.inlining: set[str] = set()
        self.objects = False  # inside a keyword argument given by a name

    def _inlinable(self, value: ast.expr) -> bool:
        if len(ast.unparse(value)) > INLINED_LENGTH:  # a long expression reads better by its name
            return False
        if all(isinstance(part, _PURE) for part in ast.walk(value)):
            return True
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _BUILTINS:
            return all(map(self._inlinable, [*value.args, *(k.value for k in value.keywords)]))
        if isinstance(value, ast.Call) and self.objects:  # a framework's object made of values: rngs=nnx.Rngs(0)
            root = value.func
            while isinstance(root, ast.Attribute):
                root = root.value
            arguments = [*value.args, *(k.value for k in value.keywords)]
            return isinstance(root, ast.Name) and root.id in self.modules and all(map(_is_literal, arguments))
        return False

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "case":
            self.parameters.add(node.attr)
            return ast.copy_location(ast.Name(node.attr, ast.Load()), node)
        if isinstance(node.value, ast.Name):  # an object's attribute: the object keeps its name
            return node
        return self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        """Arithmetic on two numbers shown by its result where that reads as well (``3 * 4``
        reads ``12``, ``1 / 6`` stays)."""
        node = self.generic_visit(node)
        operations = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                      ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv}
        numbers = [getattr(side, "value", None) for side in (node.left, node.right)]
        if type(node.op) in operations and all(isinstance(n, (int, float)) and not isinstance(n, bool)
                                               for n in numbers):
            try:
                value = operations[type(node.op)](*numbers)
            except ZeroDivisionError:
                return node
            if isinstance(value, int) or len(repr(value)) <= 8:
                return ast.copy_location(ast.Constant(value), node)
        return node

    def visit_Starred(self, node: ast.Starred) -> ast.AST:
        return node if isinstance(node.value, ast.Name) else self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        name = node.id
        if name in self.constants and name not in self.inlining:
            self.inlining.add(name)
            try:
                return ast.copy_location(self.visit(copy.deepcopy(self.constants[name])), node)
            finally:
                self.inlining.discard(name)
        value = self.bindings.get(name)
        if value is not None and name not in self.inlining and self._inlinable(value):
            self.inlining.add(name)
            try:
                return self.visit(copy.deepcopy(value))
            finally:
                self.inlining.discard(name)
        if name.endswith("_np") and len(name) > 3:
            return ast.copy_location(ast.Name(name[:-3], ast.Load()), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node.keywords = [keyword for keyword in node.keywords if keyword.arg not in WEIGHT_KEYWORDS]
        return self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        self.objects = isinstance(node.value, ast.Name)
        try:
            return self.generic_visit(node)
        finally:
            self.objects = False


def in_readers_words(node: ast.AST, tree: ast.AST, page: Page, framework: str) -> tuple[str, set[str]]:
    """The decisive ``node`` of ``framework``'s cell (whose module is ``tree``) as a reader
    writes it (:class:`_ReadersWords`), and the grid parameters it names."""
    words = _ReadersWords(_constants(page), _bindings(page, framework, tree), _modules(page))
    return ast.unparse(words.visit(copy.deepcopy(node))), words.parameters


def harness_names(text: str, page: Page, framework: str, prose: str, parameters: set[str]) -> list[str]:
    """The names in a compact cell's ``text`` that belong to the page's checks, not to a
    reader's code: ``case``, numpy's copy of an array, a constant or a name of the shared
    cells that neither the section's prose nor the page's setup defines (in backticks), and
    a keyword argument whose value is a name the framework's own code does not bind
    (nor a grid parameter): a name bound to a value its code does bind reads as that value
    already (:class:`_ReadersWords`)."""
    try:
        tree = parse(f"_({text})" if re.match(r"^\w+=", text) else text, mode="eval")
    except SyntaxError:
        return []
    modules, shared = _modules(page) | set(dir(builtins)), _shared_names(page)
    defined = set(re.findall(r"`(\w+)`", prose + " " + _setup_prose(page)))
    own = _framework_names(page, framework)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in modules and node.id != "_":
            name = node.id
            if name == "case" or (name.endswith("_np") and len(name) > 3):
                found.append(name)
            elif (name in shared or _CONSTANT.match(name)) and name not in defined and name not in parameters:
                found.append(name)
        if isinstance(node, ast.keyword) and isinstance(node.value, ast.Name):
            name = node.value.id
            if name not in modules | parameters | own | defined:
                found.append(f"{node.arg}={name}")
    return list(dict.fromkeys(found))


def _bound_names(node: ast.AST) -> list[str]:
    """The names one node binds: its targets, the function or class it defines, a
    function's or a lambda's arguments."""
    if isinstance(node, ast.Lambda):
        return [argument.arg for argument in node.args.args]
    if isinstance(node, ast.FunctionDef):
        return [node.name, *(argument.arg for argument in node.args.args)]
    if isinstance(node, ast.ClassDef):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.withitem)):
        targets = node.targets if isinstance(node, ast.Assign) else [
            node.optional_vars if isinstance(node, ast.withitem) else node.target]
        return [n.id for target in targets if target is not None for n in ast.walk(target) if isinstance(n, ast.Name)]
    return []


@_per_page
def _setup_prose(page: Page) -> str:
    """The prose of the page's Setup section, where it names what every section uses."""
    for index, cell in enumerate(page.notebook.cells):
        if cell.cell_type == "markdown" and any(line.strip() == "## Setup" for line in cell.source.splitlines()):
            following = [page.notebook.cells[index]] + list(page.notebook.cells[index + 1:])
            text = []
            for other in following:
                if other is not following[0] and other.cell_type == "markdown" and other.source.lstrip().startswith("#"):
                    break
                if other.cell_type == "markdown":
                    text.append(other.source)
            return " ".join(text)
    return ""


def _keyword_line(tree: ast.AST, keyword: ast.keyword) -> int:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and keyword in node.keywords:
            return getattr(keyword, "lineno", node.lineno)
    return 1


def decisive_calls(page: Page) -> dict[str, dict[str, Any]]:
    """``{concept: {"title", "label", "traps", "calls": {framework: [DecisiveCall] or NONE}}}``
    in the order the page computes its concepts, for every framework with cells on the page;
    ``traps`` are the sentences of the concept's prose that name a trap."""
    found = concepts(page)
    table: dict[str, dict[str, Any]] = {}
    for concept, index in found.items():
        title, label = _section(page, index)
        table[concept] = {"title": title, "label": label, "traps": traps(_section_prose(page, index)), "calls": {}}
    served: dict[tuple[str, str], list[int]] = {}
    for index, cell in enumerate(page.notebook.cells):
        framework = cell_role(cell)
        if cell.cell_type != "code" or framework not in FRAMEWORKS:
            continue
        keys = [key for key in _assigned_keys(_parse(page, index)) if key in found]
        if not keys and cell.get("metadata", {}).get(MARKER) is not None:
            raise PageError(f"{page.where(index)}: this {framework} cell marks a decisive call "
                            f"({MARKER}: {cell.metadata[MARKER]!r}) but writes no concept's result")
        for key in keys:
            served.setdefault((key, framework), []).append(index)
    for (concept, framework), cells in served.items():
        markers = [marker for index in cells
                   for marker in _markers(page.notebook.cells[index].get("metadata", {}).get(MARKER), concept)]
        if not markers:
            raise PageError(f"{page.where(cells[0])}: concept {concept!r}, framework {framework}: the cell "
                            f"marks no decisive call; add ':{MARKER}: <the call>' (or ':{MARKER}: {NONE}' where "
                            "the framework has no such API)")
        if markers == [NONE]:
            table[concept]["calls"][framework] = NONE
            continue
        calls = []
        for marker in markers:
            for index in cells:
                tree = _parse(page, index)
                node = _find(tree, marker)
                if node is None:
                    continue
                line = _keyword_line(tree, node) if isinstance(node, ast.keyword) else node.lineno
                text, parameters = in_readers_words(node, tree, page, framework)
                harness = harness_names(text, page, framework, _section_prose(page, found[concept]), parameters)
                if harness:
                    raise PageError(f"{page.where(index)}: concept {concept!r}, framework {framework}: the "
                                    f"compact table would show {text!r}, which names the page's harness "
                                    f"({', '.join(harness)}): write the call with its values, or define the "
                                    "name in the section's prose")
                calls.append(DecisiveCall(text, index, line, ast.unparse(node)))
                break
            else:
                raise PageError(f"{page.where(cells[0])}: concept {concept!r}, framework {framework}: the "
                                f"decisive call {marker!r} is not in the code that computes it")
        table[concept]["calls"][framework] = calls
    return table


def write_decisive_calls(page: Page, folder: str | Path) -> Path | None:
    """Write the page's decisive calls where the comparisons read them; ``None`` (and
    nothing written) for a page that computes no ``references``."""
    table = decisive_calls(page)
    if not table:
        return None
    data = {concept: {**entry, "calls": {framework: calls if calls == NONE else [c.as_json() for c in calls]
                                          for framework, calls in entry["calls"].items()}}
            for concept, entry in table.items()}
    path = Path(folder) / CALLS_FILE
    path.write_text(json.dumps(data, indent=1))
    return path


def decisive_callees(page: Page, framework: str) -> tuple[str, ...]:
    """The callables ``framework``'s decisive calls on ``page`` call, by their dotted names
    (:func:`rosetta_proof.defaults.callee`), in order, once each: what its part reads the
    defaults of. Empty for a page that computes no ``references``."""
    from rosetta_proof.defaults import callee

    names = []
    for entry in decisive_calls(page).values():
        calls = entry["calls"].get(framework)
        if calls is None or calls == NONE:
            continue
        names.extend(name for name in (callee(call.source) for call in calls) if name)
    return tuple(dict.fromkeys(names))
