"""The error of a checkpoint that cannot be converted, naming every problem found."""

from __future__ import annotations

from collections.abc import Iterable


class CheckpointError(ValueError):
    """A checkpoint that is not the model it is said to be, a format or model that does
    not exist, or a file that cannot be read or written; the message says which."""


def mismatch_error(model: str, what: str, problems: Iterable[str]) -> CheckpointError:
    """The error for a checkpoint that is not ``model``: one line per mismatched name or shape."""
    lines = list(problems)
    listed = "\n".join(f"  - {line}" for line in lines)
    return CheckpointError(f"{what} is not the {model} model ({len(lines)} mismatch"
                           f"{'es' if len(lines) != 1 else ''}); nothing was written:\n{listed}")
