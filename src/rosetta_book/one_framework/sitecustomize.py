"""Make every framework but one unimportable in this process (the book's download runs).

The book build executes each framework's part of a page in a fresh process
started with this folder on ``PYTHONPATH`` and ``ROSETTA_ONLY_FRAMEWORK`` set
to that framework (``none`` for the comparison cells, which need no
framework). Python imports this ``sitecustomize`` at startup; from then on an
import of another framework's modules raises ``ModuleNotFoundError`` naming
the rule, so a part that leans on another tab cannot build. Optional imports
(``try: import torch except ImportError``) in libraries behave as if the
other framework were not installed.
"""

import os
import sys

from rosetta_utils.frameworks import REGISTRY

ONLY = os.environ.get("ROSETTA_ONLY_FRAMEWORK", "").strip()

#: The top-level modules that belong to each framework (its registry entry).
MODULES = {name: framework.all_modules for name, framework in REGISTRY.items()}


class _Refused:
    """The loader of a refused module: importing it raises ``ModuleNotFoundError``."""

    refuses_import = True  # rosetta_utils.frameworks.is_installed reads it

    def __init__(self, message):
        self.message = message

    def create_module(self, spec):
        raise ModuleNotFoundError(self.message, name=spec.name)

    def exec_module(self, module):  # never reached: create_module raises
        raise ModuleNotFoundError(self.message, name=module.__name__)


class OtherFrameworksBlocked:
    """A meta path finder that refuses the modules of every framework but ``allowed``.

    ``importlib.util.find_spec`` on a refused module returns a spec without an
    origin rather than raising (torch's compiler probes for TensorFlow that
    way); importing it raises ``ModuleNotFoundError``, which optional imports
    (``try: import torch except ImportError``) take as "not installed".
    """

    def __init__(self, allowed):
        self.allowed = allowed
        self.blocked = {module: framework for framework, modules in MODULES.items()
                        if framework != allowed for module in modules}

    def find_spec(self, name, path=None, target=None):
        framework = self.blocked.get(name.partition(".")[0])
        if framework is None:
            return None
        from importlib.machinery import ModuleSpec

        part = f"the {self.allowed} part" if self.allowed != "none" else "the comparison cells"
        message = (f"import of {name!r} refused: this process runs {part} of a page, which must "
                   f"not use {framework} (rosetta_book.one_framework)")
        return ModuleSpec(name, _Refused(message), origin=None)


if ONLY and ONLY != "off":
    if ONLY != "none" and ONLY not in MODULES:
        raise SystemExit(f"ROSETTA_ONLY_FRAMEWORK={ONLY!r}: expected one of {', '.join(MODULES)} or none")
    sys.meta_path.insert(0, OtherFrameworksBlocked(ONLY))
