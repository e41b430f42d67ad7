"""No module of the three packages imports, directly or through others, a module that
imports it back, imports inside functions included: a circle makes a module's meaning
depend on which side was imported first, and a maintainer cannot read one without the
other (the engine had page.py -> unread_lines.py -> downloads.py -> page.py, through
imports inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src"
PACKAGES = ("rosetta_utils", "rosetta_proof", "rosetta_book")


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, src: Path, known: set[str]) -> set[str]:
    """The packages' modules ``path`` imports anywhere in its body: ``from . import x``
    imports the module ``x``; ``from .m import name`` the module ``m``."""
    name = module_name(path, src)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            stem = ".".join(part for part in ((base,) if node.level else ()) + ((node.module,) if node.module else ())
                            if part)
            targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in known else stem for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def circles(src: Path = SRC, packages: tuple[str, ...] = PACKAGES) -> list[list[str]]:
    """Each circle of imports found, as the modules along it (the first repeated last)."""
    paths = [path for package in packages for path in sorted((src / package).rglob("*.py"))]
    known = {module_name(path, src) for path in paths}
    graph = {module_name(path, src): imported(path, src, known) for path in paths}
    found, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                found.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_no_module_imports_itself_back_through_others():
    found = circles()
    assert found == [], "\n".join(" -> ".join(circle) for circle in found)


def test_the_check_finds_a_circle_through_an_import_inside_a_function(tmp_path):
    package = tmp_path / "engine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .b import g\n")
    (package / "b.py").write_text("from engine.a import f\n\ndef g():\n    return f\n")
    assert circles(tmp_path, ("engine",)) == [["engine.a", "engine.b", "engine.a"]]
    (package / "b.py").write_text("def g():\n    return 1\n")
    assert circles(tmp_path, ("engine",)) == []
