"""Keep each framework's variables apart while one kernel executes a whole page.

The book builds a page in ONE kernel, so that untagged cells can compare what
all five frameworks computed. But the tabs deliberately use the same names
(``model``, ``x``, ``train_step`` ...): run one after another in one namespace,
the JAX cell's ``x`` would overwrite PyTorch's before PyTorch's next cell
reads it. This IPython hook gives every framework a private layer of names:

* before a framework's cell runs, that framework's private names are laid over
  the shared namespace;
* after it ran, every name the cell bound or rebound becomes private to that
  framework, and the shared namespace gets back the values it had before.

So a framework cell sees the shared names plus its own, exactly as the chapter
loader's namespace does (untagged cells plus one framework's cells). Shared
objects mutated in place (``outputs["pytorch"] = ...``) stay visible to the
untagged cells that follow; names merely rebound inside a tab do not.
Untagged cells therefore read only what tabs put into shared containers.

The Sphinx extension :mod:`rosetta_utils.tabs` computes the framework of every
code cell the page executes, in order (:func:`execution_plan`), and the
kernel installs the hook at startup (:mod:`rosetta_utils.kernel_startup`); a
cell that arrives out of that order stops the build with a clear error.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

_MISSING = object()


def source_digest(source: str) -> str:
    """A short fingerprint of a cell's code, to check cells arrive in page order."""
    return hashlib.sha256(source.strip().encode("utf-8")).hexdigest()[:16]


def execution_plan(notebook: Any) -> list[tuple[str | None, str]]:
    """(framework or None, digest) for each code cell that will execute, in order."""
    from . import FRAMEWORKS

    plan = []
    for cell in notebook.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type != "code" or "skip-execution" in tags:
            continue
        frameworks = [tag for tag in tags if tag in FRAMEWORKS]
        plan.append((frameworks[0] if frameworks else None, source_digest(cell.source)))
    return plan


def _is_private_candidate(name: str) -> bool:
    return not name.startswith("_")  # IPython's own bookkeeping (_, _i1, _oh ...) stays shared


class FrameworkNamespaces:
    """The per-framework layers over one shared namespace (see the module docstring)."""

    def __init__(self, namespace: dict[str, Any], plan: Sequence[tuple[str | None, str]]):
        self.namespace = namespace
        self.plan = list(plan)  # (framework or None, source digest) per executed cell
        self.position = 0
        self.private: dict[str, dict[str, Any]] = {}
        self._active: str | None = None
        self._entered = False
        self._shared_before: dict[str, Any] = {}
        self._overlaid: dict[str, Any] = {}

    def enter(self, source: str) -> None:
        """Called before a cell runs: find its framework and lay that framework's names over.

        IPython may transform one cell more than once before running it; only
        the first call counts until :meth:`leave`.
        """
        if self._entered:
            return
        if self.position >= len(self.plan):
            raise RuntimeError("rosetta tab namespaces: more cells ran than the page has")
        framework, digest = self.plan[self.position]
        if digest != source_digest(source):
            raise RuntimeError(
                f"rosetta tab namespaces: cell {self.position + 1} of the page is not the cell "
                "being executed; the page and the executed notebook disagree"
            )
        self.position += 1
        self._entered = True
        self._active = framework
        if framework is None:
            return
        self._shared_before = dict(self.namespace)
        self.namespace.update(self.private.setdefault(framework, {}))
        self._overlaid = dict(self.namespace)

    def leave(self) -> None:
        """Called after a cell ran: keep what it bound as private, restore the shared names."""
        framework, self._active = self._active, None
        self._entered = False
        if framework is None:
            return
        private = self.private[framework]
        for name in set(self._overlaid) | set(self.namespace):
            if not _is_private_candidate(name):
                continue
            now = self.namespace.get(name, _MISSING)
            if now is _MISSING:
                private.pop(name, None)
            elif now is not self._overlaid.get(name, _MISSING):
                private[name] = now
        for name in set(private) | (set(self.namespace) - set(self._shared_before)):
            if not _is_private_candidate(name):
                continue
            shared = self._shared_before.get(name, _MISSING)
            if shared is _MISSING:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = shared


def install(shell: Any, plan: Sequence[tuple[str | None, str]]) -> FrameworkNamespaces:
    """Hook the layers into an IPython shell; ``plan`` lists (framework, digest) per cell.

    ``enter`` runs as an input transformer rather than a ``pre_run_cell``
    callback because IPython only prints a callback's exception, while an
    exception in a transformer fails the cell, and with it the build.
    """
    layers = FrameworkNamespaces(shell.user_ns, plan)

    def enter_then_keep(lines: list[str]) -> list[str]:
        layers.enter("".join(lines))
        return lines

    shell.input_transformers_post.append(enter_then_keep)
    shell.events.register("post_run_cell", lambda result: layers.leave())
    return layers
