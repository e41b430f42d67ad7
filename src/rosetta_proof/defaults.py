"""Every default a translation table's calls leave unsaid, read from the installed releases.

Each row of a translation table names, per framework, the call that is its
translation (:mod:`rosetta_book.decisive_calls`): ``nn.Conv2d(2, 3, 3)``.
What such a call does not spell out, the framework's default decides
(``padding_mode``, ``dilation``, ``bias``, ...), and a port that copies the
call copies none of it. After a framework's part of a table page ran,
:func:`read_signatures` reads the signature of every callable those calls
name, in the part's own process, so from the release installed there; the
part leaves them with its results (``decisive_defaults``, see
:func:`rosetta_proof.tab_results.collect_tab_results`).

:func:`unsaid_defaults` then gives, per concept and framework, the parameters
with a default that the call leaves unsaid, each default in the framework's
own words; :func:`defaults_table` shows them. :func:`default_changes`
compares them with the defaults recorded in the repository
(``book/tables/defaults/<page>.json``, written by :func:`record_defaults`
through ``make record-defaults``), so that a release that changes a default
shows which and where.

Which parameters mean the same across frameworks is a reader's judgement, so
it is written down, one file per table page
(``book/tables/defaults/<page>.aligned.yaml``), and reviewed like code:
:func:`aligned_defaults` reads each framework's default of each aligned
parameter, converts it to the one meaning (:data:`CONVERSIONS`), and where
they differ wants the row that checks the difference or the reason none does
yet; :func:`require_accounted` stops the build where neither is given.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

#: The name under which a part leaves the signatures with its results.
DEFAULTS_RESULT = "decisive_defaults"
#: Where the repository records each table page's defaults (one JSON file per page).
RECORDED_FOLDER = Path(__file__).resolve().parents[2] / "book" / "tables" / "defaults"


class DefaultsError(ValueError):
    """A call or a record of defaults that cannot be read as the module's note says."""


def callee(source: str) -> str | None:
    """The dotted name a call's source calls (``nn.Conv2d`` of ``nn.Conv2d(2, 3, 3)``), or
    None where it calls something else (a method of a local object, a subscript, a lambda)
    or is no call."""
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call):
        return None
    parts, func = [], node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    return ".".join([func.id, *reversed(parts)])


def spelled(source: str) -> tuple[int, tuple[str, ...], bool]:
    """What a call spells out: its number of positional arguments, its keywords, and
    whether it unpacks (``*args`` or ``**kwargs``: then what it spells is not known)."""
    node = ast.parse(source.strip(), mode="eval").body
    if not isinstance(node, ast.Call):
        raise DefaultsError(f"not a call: {source!r}")
    unpacks = any(isinstance(arg, ast.Starred) for arg in node.args) or any(
        keyword.arg is None for keyword in node.keywords)
    return len(node.args), tuple(k.arg for k in node.keywords if k.arg is not None), unpacks


def default_text(value: Any) -> str:
    """A default in the framework's own words, the same in every process and on every
    machine: a literal's repr, a module's name, a class's or function's qualified name (a
    jitted one's too), else the object's type and, where its repr carries no address, that
    repr."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list)) and all(
            item is None or isinstance(item, (bool, int, float, str)) for item in value):
        return repr(value)
    if inspect.ismodule(value):  # its repr names the file it came from, which differs between machines
        return f"module {value.__name__}"
    if inspect.isclass(value) or inspect.isroutine(value) or (callable(value) and hasattr(value, "__qualname__")):
        return f"{getattr(value, '__module__', '') or ''}.{getattr(value, '__qualname__', repr(value))}".lstrip(".")
    text = repr(value)
    if re.search(r"0x[0-9a-f]{6,}", text) or len(text) > 80:
        return f"{type(value).__module__}.{type(value).__qualname__} instance"
    return text


#: What a decisive call calls when it is not a framework's callable: a method of an object the
#: part made (``bn.eval()``) or a name its code binds inside a function (``loss_fn(...)``).
NOT_A_FRAMEWORK_CALLABLE = "the part's own object or function, not a framework's callable: no defaults to read"


def _resolve(namespace: Mapping[str, Any], dotted: str) -> Any:
    value = _first(namespace, dotted.split(".")[0])
    for name in dotted.split(".")[1:]:
        value = getattr(value, name)
    return value


def _first(namespace: Mapping[str, Any], name: str) -> Any:
    """A dotted name's first part: Python's own builtin of that name (the same in a plain
    process and in an IPython kernel, whose namespace holds a wrapper of ``open``), else
    what the part's namespace binds."""
    return getattr(builtins, name) if hasattr(builtins, name) else namespace[name]


def _framework_callable(namespace: Mapping[str, Any], dotted: str) -> bool:
    """Whether ``dotted`` names a framework's callable: its first name is bound at the
    part's top level to a module, a class, or (alone) a function."""
    first = dotted.split(".")[0]
    if first not in namespace and not hasattr(builtins, first):
        return False
    owner = _first(namespace, first)
    return inspect.ismodule(owner) or inspect.isclass(owner) or ("." not in dotted and inspect.isroutine(owner))


def read_signature(value: Any) -> list[list[Any]]:
    """``value``'s parameters, in order: ``[name, kind, default]`` with ``default`` the
    :func:`default_text` of its default, or None where it has none. A class's are its
    constructor's (``self`` left out). A C function with no signature Python can read (most
    of ``torch.*``, numpy 1's ``np.array``) has its parameters read from the signature lines
    its docstring opens with (:func:`docstring_signature`)."""
    try:
        signature = inspect.signature(value)
    except ValueError:
        return docstring_signature(value)
    parameters = list(signature.parameters.values())
    if inspect.isclass(value) and parameters and all(parameter.kind in _VARIADIC for parameter in parameters):
        # a metaclass's __call__ hides the constructor (Flax's nnx modules): read __init__
        parameters = list(inspect.signature(value.__init__).parameters.values())[1:]
    doc = getattr(value, "__doc__", None) or ""
    read = [[parameter.name, parameter.kind.name, _documented_default(parameter, doc)] for parameter in parameters]
    if inspect.isclass(value):
        read += _passed_on(value, {parameter.name for parameter in parameters}, parameters)
    return read


def _passed_on(cls: type, seen: set[str], parameters: list[inspect.Parameter]) -> list[list[Any]]:
    """The parameters a class's constructor takes through ``**kwargs`` and passes to its
    bases' (MXNet's optimizers take ``learning_rate`` and ``wd`` so): each base's own
    constructor's, in the method resolution order, while each still takes ``**kwargs``,
    as keyword-only."""
    found = []
    for base in cls.__mro__[1:]:
        if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
            break
        if "__init__" not in vars(base) or base is object:
            continue
        try:
            parameters = list(inspect.signature(vars(base)["__init__"]).parameters.values())[1:]
        except (TypeError, ValueError):
            break
        for parameter in parameters:
            if parameter.kind not in _VARIADIC and parameter.name not in seen:
                seen.add(parameter.name)
                found.append([parameter.name, "KEYWORD_ONLY", _documented_default(parameter, "")])
    return found


_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _documented_default(parameter: inspect.Parameter, doc: str) -> str | None:
    """A parameter's default as :func:`default_text` writes it; where the signature holds a
    placeholder (MXNet's generated operators say ``_Null``: the operator's own default),
    the default its docstring states (``align_corners : boolean, optional, default=1``)."""
    if parameter.default is inspect.Parameter.empty:
        return None
    text = default_text(parameter.default)
    if type(parameter.default).__name__ == "_NullType":
        stated = re.search(rf"(?m)^{re.escape(parameter.name)} : .*default=(.+?)\s*$", doc)
        text = f"{stated.group(1)} (its docstring's)" if stated else "not stated (MXNet's _Null)"
    return text


def docstring_signature(value: Any) -> list[list[Any]]:
    """The parameters of a C function as its docstring's signature lines write them
    (``var(input, dim=None, *, correction=1, keepdim=False, out=None) -> Tensor``): every
    overload's, each parameter once, in the order first written; defaults as written. A
    docstring without such a line raises ValueError, as :func:`inspect.signature` did."""
    name = getattr(value, "__name__", "")
    doc = getattr(value, "__doc__", None) or ""
    parameters: dict[str, list[Any]] = {}
    lines = 0
    for match in re.finditer(rf"(?m)^\s*(?:\.\. function:: )?{re.escape(name)}\(", doc):
        depth, end = 1, match.end()
        while end < len(doc) and depth:
            depth += {"(": 1, ")": -1}.get(doc[end], 0)
            end += 1
        try:
            arguments = ast.parse(f"def _({doc[match.end():end - 1]}): pass").body[0].args
        except SyntaxError:
            continue
        lines += 1
        positional = arguments.posonlyargs + arguments.args
        defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
        kinds = ["POSITIONAL_ONLY"] * len(arguments.posonlyargs) + ["POSITIONAL_OR_KEYWORD"] * len(arguments.args)
        for argument, kind, default in zip(positional, kinds, defaults):
            parameters.setdefault(argument.arg, [argument.arg, kind, None if default is None else ast.unparse(default)])
        for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
            parameters.setdefault(argument.arg, [argument.arg, "KEYWORD_ONLY",
                                                 None if default is None else ast.unparse(default)])
    if not lines:
        raise ValueError(f"no signature found for {name or value!r}, nor a signature line in its docstring")
    return list(parameters.values())


def read_signatures(namespace: Mapping[str, Any], callees: Iterable[str]) -> dict[str, Any]:
    """Per callee (a dotted name), its parameters (:func:`read_signature`) as the part's
    namespace resolves it; ``{"local": ...}`` where it is no framework's callable (a method
    of an object the part made, a name bound inside its functions); ``{"error": why}``
    where it does not resolve or has no signature Python can read."""
    found: dict[str, Any] = {}
    for dotted in dict.fromkeys(callees):
        if not _framework_callable(namespace, dotted):
            found[dotted] = {"local": NOT_A_FRAMEWORK_CALLABLE}
            continue
        try:
            found[dotted] = {"parameters": read_signature(_resolve(namespace, dotted))}
        except (AttributeError, TypeError, ValueError) as error:
            found[dotted] = {"error": re.sub(r" at 0x[0-9a-f]+", "", f"{type(error).__name__}: {error}")}
    return found


def unsaid_defaults(source: str, signature: Mapping[str, Any]) -> list[tuple[str, str]] | str:
    """The parameters with a default that the call ``source`` leaves unsaid, with their
    defaults; or a string saying why they cannot be told (no signature, an unpacked
    argument)."""
    if "local" in signature:
        return signature["local"]
    if "error" in signature:
        return f"signature not read ({signature['error']})"
    positional, keywords, unpacks = spelled(source)
    if unpacks:
        return "the call unpacks its arguments: what it leaves unsaid is not known"
    unsaid, taken = [], 0
    for name, kind, default in signature["parameters"]:
        if kind in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            continue
        if name in ("self", "cls") and taken == 0 and default is None:
            continue
        by_position = kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD") and taken < positional
        if by_position:
            taken += 1
            continue
        if name in keywords or default is None:
            continue
        unsaid.append((name, default))
    return unsaid


def matrix(runs: Mapping[str, Any], calls: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, list[Any]]]:
    """Per concept, per framework, each decisive call with the defaults it leaves unsaid
    (:func:`unsaid_defaults`, from what the framework's part read: its
    ``decisive_defaults``): ``[source, callee, unsaid]``, where a call of no named callable
    (an attribute, a keyword, a method of an object the part made) has callee None and the
    reason as ``unsaid``. A framework with no such API has none."""
    table: dict[str, dict[str, list[Any]]] = {}
    for concept, entry in calls.items():
        row = table.setdefault(concept, {})
        for framework, framework_calls in entry["calls"].items():
            if framework not in runs or isinstance(framework_calls, str):
                continue
            read = runs[framework][DEFAULTS_RESULT]
            found = row.setdefault(framework, [])
            for call in framework_calls:
                name = callee(call["source"])
                if name is None:
                    found.append([call["source"], None, "calls no framework's callable by name: no defaults to read"])
                    continue
                if name not in read:
                    raise DefaultsError(f"{concept}: the {framework} part read no signature of {name}")
                found.append([call["source"], name, unsaid_defaults(call["source"], read[name])])
    return table


def _unsaid_text(unsaid: list[tuple[str, str]] | str) -> str:
    if isinstance(unsaid, str):
        return unsaid
    return ", ".join(f"{name}={default}" for name, default in unsaid) or "none (every one spelled out)"


def defaults_table(runs: Mapping[str, Any], calls: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: per concept, each framework's decisive callables with the defaults
    its calls leave unsaid, as that framework's installed release has them."""
    frameworks = list(runs)
    rows = []
    for concept, by_framework in matrix(runs, calls).items():
        cells = []
        for framework in frameworks:
            found = by_framework.get(framework)
            if not found:
                cells.append("no such API")
                continue
            cells.append("; ".join(f"`{name or source}`: {_unsaid_text(unsaid)}" for source, name, unsaid in found))
        rows.append([concept, *cells])
    return ["concept", *frameworks], rows


def defaults_report(page: str, runs: Mapping[str, Any]) -> str:
    """One line on the page's defaults against the repository's record: as recorded (with
    the releases), or each default that changed (:func:`default_changes`), or no record."""
    path = recorded_path(page)
    if not path.is_file():
        return f"no defaults recorded for {page} yet: record them with `make record-defaults` (a test fails until then)"
    recorded = load_recorded(page)
    changes = default_changes(runs, recorded)
    if changes:
        return (f"{len(changes)} defaults differ from the record ({path.name}); a release changed them, "
                "or the record is stale:\n" + "\n".join(f"  {line}" for line in changes))
    compared = sorted(set(recorded) & set(recorded_form(runs)))
    return f"every default as recorded in {path.name}, for {', '.join(compared) or 'no framework'}: " + "; ".join(
        f"{framework} {_versions(recorded[framework])}" for framework in compared)


def recorded_form(runs: Mapping[str, Any]) -> dict[str, Any]:
    """What the repository records of a page's defaults: per framework, the versions its
    part ran and the signatures it read."""
    return {framework: {"versions": dict(run["environment"]["versions"]),
                        "signatures": {name: read for name, read in sorted(run[DEFAULTS_RESULT].items())}}
            for framework, run in runs.items() if DEFAULTS_RESULT in run}


def recorded_path(page: str) -> Path:
    """The record of table page ``page`` (``"tables/layers.md"``)."""
    return RECORDED_FOLDER / f"{Path(page).stem}.json"


def load_recorded(page: str) -> dict[str, Any]:
    path = recorded_path(page)
    if not path.is_file():
        raise DefaultsError(f"{path}: no defaults recorded for {page} (write them with "
                            "`python -m rosetta_proof.defaults record`)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise DefaultsError(f"{path}: not a record of defaults ({error})") from None


def default_changes(runs: Mapping[str, Any], recorded: Mapping[str, Any]) -> list[str]:
    """Each default that differs from the record, one line each: which framework, callable
    and parameter, the recorded default and the installed one (with both versions); a
    callable or parameter that appeared or went away counts too. Frameworks absent from
    either side are not compared."""
    now = recorded_form(runs)
    lines = []
    for framework in sorted(set(now) & set(recorded)):
        before, after = recorded[framework]["signatures"], now[framework]["signatures"]
        versions = f"{framework} {_versions(recorded[framework])} -> {_versions(now[framework])}"
        for name in sorted(set(before) | set(after)):
            old, new = _defaults_of(before.get(name)), _defaults_of(after.get(name))
            for parameter in sorted(set(old) | set(new)):
                if old.get(parameter, "absent") != new.get(parameter, "absent"):
                    lines.append(f"{name}({parameter}=...): {old.get(parameter, 'absent')} -> "
                                 f"{new.get(parameter, 'absent')} ({versions})")
    return lines


def _versions(record: Mapping[str, Any]) -> str:
    return ", ".join(f"{package} {version}" for package, version in sorted(record["versions"].items()))


def _defaults_of(read: Mapping[str, Any] | None) -> dict[str, str]:
    if read is None:
        return {}
    if "parameters" not in read:
        return {"(signature)": read.get("error") or read["local"]}
    return {name: "no default" if default is None else default for name, _, default in read["parameters"]}


# --- aligned parameters: which of each framework's means the same, and whether it agrees -------

def _padding(value: Any) -> Any:
    """A padding as one word: no padding (0, (0, 0), "valid", "VALID") is "valid", "same"
    in either case "same"; anything else as it is."""
    if value in (0, (0, 0), [0, 0]) or str(value).lower() == "valid":
        return "valid"
    return "same" if str(value).lower() == "same" else value


def _reduction(value: Any) -> Any:
    """A loss's reduction as one word: Keras's "sum_over_batch_size" is the others' "mean"."""
    return "mean" if value == "sum_over_batch_size" else value


#: How an aligned parameter's value converts to the meaning the alignment names: as it is;
#: its complement (batch norm's momentum: PyTorch weighs the new batch by it, Keras, Flax,
#: MXNet and Chainer the running average); its negation (Chainer's ``nobias``), or its truth
#: (MXNet's 1 for True); a padding or a loss's reduction in one word; a pair's first or
#: second (PyTorch's Adam ``betas``); half (MXNet's L2Loss halves the square); whether a
#: layout is batch first (MXNet's "NTC"); and ``<value> is <meaning>`` for a value that
#: stands for something (a pool's stride None: the window in PyTorch, 1 in Flax; PyTorch's
#: GELU approximate 'none': False).
CONVERSIONS = {"x": lambda value: value, "1 - x": lambda value: round(1 - value, 12),
               "not x": lambda value: not value, "bool": bool, "padding": _padding, "reduction": _reduction,
               "first": lambda value: value[0], "second": lambda value: value[1],
               "x / 2": lambda value: value / 2, "batch first": lambda value: value == "NTC"}


def _conversion(text: str) -> Any:
    if text in CONVERSIONS:
        return CONVERSIONS[text]
    literal, said, meaning = text.partition(" is ")
    if said:
        try:
            stands_for = ast.literal_eval(literal)
        except (ValueError, SyntaxError):
            raise DefaultsError(f"{text!r}: {literal!r} is not a Python literal") from None
        return lambda value: _value(meaning) if value == stands_for and type(value) is type(stands_for) else value
    raise DefaultsError(f"{text!r}: a conversion must be one of {', '.join(CONVERSIONS)} or '<value> is <meaning>'")


@dataclass(frozen=True)
class AlignedDefault:
    """One aligned parameter of one concept: each framework's parameter, its default there
    (its own words) and converted to the shared meaning, and the verdict."""

    concept: str
    meaning: str
    shown: dict[str, str]  # framework: what the table shows
    verdict: str  # "same", "differs: checked by ...", "differs, unchecked: ..."
    differs: bool
    accounted: bool  # same, or differing with a checked row or a stated reason
    values: dict[str, str]  # framework: the default converted, as compared (or its "absent: ...")


def alignment_path(page: str) -> Path:
    """The alignment of table page ``page``: ``book/tables/defaults/<page>.aligned.yaml``."""
    return RECORDED_FOLDER / f"{Path(page).stem}.aligned.yaml"


def load_alignment(page: str) -> dict[str, dict[str, dict[str, str]]]:
    """The page's alignment (see :func:`aligned_defaults`), or an empty one where it has none."""
    import yaml

    path = alignment_path(page)
    if not path.is_file():
        return {}
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise DefaultsError(f"{path}: not YAML ({error})") from None
    if not isinstance(loaded, dict) or not all(
            isinstance(meanings, dict) and all(isinstance(entry, dict) for entry in meanings.values())
            for meanings in loaded.values()):
        raise DefaultsError(f"{path}: expected concept: {{meaning: {{framework: parameter, ...}}}}")
    return loaded


def _parameter_entry(text: str) -> tuple[str, str]:
    """``"momentum"`` or ``"momentum as 1 - x"``: the parameter and its conversion
    (:data:`CONVERSIONS`)."""
    name, _, conversion = str(text).partition(" as ")
    conversion = conversion.strip() or "x"
    _conversion(conversion)  # a clear error for one it does not know
    return name.strip(), conversion


def _value(text: str) -> Any:
    """A default's text as a Python value where it is a literal (a docstring's default too)."""
    documented = text.endswith(" (its docstring's)")
    text = text.removesuffix(" (its docstring's)")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a class or function name: compared as written
    if documented and isinstance(value, str):  # MXNet's docstrings quote numbers: default='-1'
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def aligned_defaults(page: str, runs: Mapping[str, Any], calls: Mapping[str, Mapping[str, Any]],
                     alignment: Mapping[str, Any] | None = None) -> list[AlignedDefault]:
    """Each aligned parameter of table page ``page``, with each framework's default read
    from its part, converted to one meaning, and compared.

    The alignment (``book/tables/defaults/<page>.aligned.yaml``, or ``alignment``) maps
    each concept of the page to the meanings aligned for it, and each meaning to one
    entry per framework, plus how a difference is accounted for::

        batch_norm_train:
          running average's weight:
            pytorch: momentum as 1 - x   # the parameter, and its conversion
            tensorflow: momentum         # the parameter, as it is
            chainer: decay
            checked: bn_running_mean     # the row that shows the difference
          the normalised axis:
            pytorch: "absent: channels first, always"   # no such parameter: a difference
            tensorflow: axis
            unchecked: why no row checks it yet

    A framework's entry is the parameter of its decisive callable for the concept, as
    ``"name"`` or ``"name as CONVERSION"`` (:data:`CONVERSIONS`, or ``"VALUE is
    MEANING"`` for a value that stands for something); ``"always VALUE: why"`` where it
    has no such parameter and always behaves as that value would; or ``"absent: what it
    does instead"``. Where the converted defaults differ, ``checked:`` names the row of
    the page that checks the difference, or ``unchecked:`` says why none does yet. A
    parameter the callable does not have, or a concept the page has not, is an error:
    the alignment or a release moved."""
    alignment = load_alignment(page) if alignment is None else alignment
    found = []
    for concept, meanings in alignment.items():
        if concept not in calls:
            raise DefaultsError(f"{alignment_path(page).name}: {concept!r} is no concept of {page}")
        for meaning, entry in meanings.items():
            shown, values = {}, {}
            for framework, text in entry.items():
                if framework in ("checked", "unchecked") or framework not in runs:
                    continue
                if str(text).startswith("absent:"):
                    shown[framework] = str(text)
                    continue
                if str(text).startswith("always "):  # no such parameter, and its behaviour is that value
                    literal, _, why = str(text)[len("always "):].partition(": ")
                    values[framework] = _value(literal)
                    shown[framework] = f"no parameter: always {literal} ({why})" if why else f"always {literal}"
                    continue
                name, conversion = _parameter_entry(text)
                default = _aligned_default(concept, framework, name, runs, calls)
                if default is None:
                    shown[framework] = f"`{name}`: no default (the call must give it)"
                    values[framework] = "no default"
                    continue
                try:
                    values[framework] = _conversion(conversion)(_value(default))
                except (TypeError, IndexError):
                    raise DefaultsError(f"{concept}: {framework}'s {name}={default} cannot be read "
                                        f"as {conversion}") from None
                if conversion == "x":
                    converted = ""
                elif " is " in conversion:
                    read = _value(default)
                    converted = "" if values[framework] == read and type(values[framework]) is type(read) \
                        else f", that is {values[framework]}"
                else:
                    converted = f" (as {conversion}: {values[framework]!r})"
                shown[framework] = f"`{name}`={default}{converted}"
            if entry.get("checked") and entry["checked"] not in calls:
                raise DefaultsError(f"{alignment_path(page).name}: {concept} ({meaning}) is checked by "
                                    f"{entry['checked']!r}, no concept of {page}")
            differs = len({_canonical(value) for value in values.values()}) > 1 or any(
                text.startswith("absent:") for text in shown.values())
            if not differs:
                verdict, accounted = "same", True
            elif entry.get("checked"):
                verdict, accounted = f"differs: checked by the row {entry['checked']}", True
            elif entry.get("unchecked"):
                verdict, accounted = f"differs, no row checks it yet: {entry['unchecked']}", True
            else:
                verdict, accounted = "differs, and neither a row checks it nor a reason says why", False
            compared = {framework: _canonical(value) for framework, value in values.items()}
            compared.update({framework: text for framework, text in shown.items() if text.startswith("absent:")})
            found.append(AlignedDefault(concept, meaning, shown, verdict, differs, accounted, compared))
    return found


def _canonical(value: Any) -> str:
    """A converted default as compared: numbers as floats (MXNet's ``rho=1`` is Keras's
    ``delta=1.0``), anything else as its repr."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    return repr(value)


def _aligned_default(concept: str, framework: str, name: str, runs: Mapping[str, Any],
                     calls: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The default of parameter ``name`` of ``framework``'s decisive callable for ``concept``
    (the first of its calls whose signature has it)."""
    read = runs[framework][DEFAULTS_RESULT]
    framework_calls = calls[concept]["calls"].get(framework)
    callees = [] if isinstance(framework_calls, str) or framework_calls is None else [
        callee(call["source"]) for call in framework_calls]
    for name_called in filter(None, callees):
        for parameter, _, default in read.get(name_called, {}).get("parameters", ()):
            if parameter == name:
                return default
    raise DefaultsError(f"{concept}: {framework}'s {' or '.join(filter(None, callees)) or 'call'} has no "
                        f"parameter {name!r} (the alignment names it: did a release rename it?)")


def aligned_table(found: Iterable[AlignedDefault], frameworks: Iterable[str]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the aligned defaults: concept, meaning, each framework's, verdict."""
    frameworks = list(frameworks)
    rows = [[item.concept, item.meaning, *(item.shown.get(framework, "") for framework in frameworks), item.verdict]
            for item in found]
    if not rows:
        rows = [["", "no parameter of this page is aligned yet", *("" for _ in frameworks), ""]]
    return ["concept", "parameter", *frameworks, "verdict"], rows


def require_accounted(page: str, found: Iterable[AlignedDefault]) -> str:
    """Raise where an aligned default differs with neither a checked row nor a reason (the
    build stops); else one line: how many aligned, how many differ, checked and not."""
    found = list(found)
    loose = [f"{item.concept} ({item.meaning})" for item in found if not item.accounted]
    if loose:
        raise DefaultsError(f"{page}: aligned defaults that differ with neither a row that checks them nor a "
                            f"reason: {', '.join(loose)}")
    if not found:
        return f"no parameter of {page} is aligned yet (no {alignment_path(page).name})"
    differing = [item for item in found if item.differs]
    checked = sum(item.verdict.startswith("differs: checked") for item in differing)
    return (f"{len(found)} aligned parameters; {len(differing)} differ between frameworks: {checked} checked by "
            f"a row, {len(differing) - checked} listed with the reason no row checks them yet")


def record_defaults(page: str, runs: Mapping[str, Any]) -> Path:
    """Record what the parts ``runs`` read (:func:`recorded_form`) as the repository's
    defaults of table page ``page``; written whole under a temporary name, then renamed, so
    a failure leaves the old record as it was."""
    form = recorded_form(runs)
    if not form:
        raise DefaultsError(f"{page}: no part read its defaults (a page with no decisive calls?)")
    path = recorded_path(page)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    text = json.dumps(form, indent=1, sort_keys=True)
    # one parameter a line, [name, kind, default], for a diff that reads like the change
    text = re.sub(r'\[\s+("[^"\n]*"),\s+("[^"\n]*"),\s+(null|"(?:[^"\\\n]|\\.)*")\s+\]', r"[\1, \2, \3]", text)
    temporary.write_text(text + "\n")
    temporary.replace(path)
    return path
