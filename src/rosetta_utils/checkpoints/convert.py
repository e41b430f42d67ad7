"""One conversion: read a checkpoint, check it is the model it names, write it in another format."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import formats
from .errors import CheckpointError, mismatch_error
from .layouts import from_canonical, keras_groups, to_canonical
from .models import check_canonical, check_model, mismatches


@dataclass
class Conversion:
    """What a conversion did: the file it wrote, the canonical arrays that went through,
    and notes for the reader (entries left out, biases folded)."""

    target: Path
    canonical: dict[str, np.ndarray]
    notes: list[str] = field(default_factory=list)


def read_canonical(model: str, source: str | os.PathLike[str], source_format: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """The canonical arrays of a checkpoint of ``model`` in ``source_format``, checked, with
    the notes of the conversion; :class:`CheckpointError` lists every mismatch."""
    check_model(model)
    formats.check_format(source_format)
    native, named = formats.read(source_format, source)
    what = f"{source} ({source_format})"
    if source_format == "canonical":
        if named is not None and named != model:
            raise CheckpointError(f"{what} holds the {named} model, not {model}; nothing was written")
        return check_canonical(model, native, what), []
    converted = to_canonical(model, formats.layout_of(source_format), native)
    problems = converted.problems + [problem for problem in mismatches(model, converted.arrays)
                                     if not _already_named(problem, converted.problems)]
    if problems:
        raise mismatch_error(model, what, problems)
    return check_canonical(model, converted.arrays, what), converted.notes


def _already_named(problem: str, native_problems: list[str]) -> bool:
    """A canonical name missing because its native key was refused is not news."""
    return problem.startswith("missing ") and bool(native_problems)


def write_canonical(model: str, canonical: dict[str, np.ndarray], target: str | os.PathLike[str],
                    target_format: str, overwrite: bool = False) -> tuple[Path, list[str]]:
    """Write checked canonical arrays of ``model`` as a ``target_format`` checkpoint."""
    formats.check_format(target_format)
    canonical = check_canonical(model, canonical, "the canonical arrays")
    if target_format == "canonical":
        return formats.write("canonical", target, canonical, model, overwrite=overwrite), []
    formats._check_suffix(target_format, Path(target))
    converted = from_canonical(model, formats.layout_of(target_format), canonical)
    groups = None
    if target_format == "tensorflow":
        groups = keras_groups(model, sorted({key.rsplit("/", 1)[0] for key in converted.arrays}))
    path = formats.write(target_format, target, converted.arrays, model, keras_groups=groups, overwrite=overwrite)
    return path, converted.notes


def convert(model: str, source: str | os.PathLike[str], source_format: str, target: str | os.PathLike[str],
            target_format: str, overwrite: bool = False) -> Conversion:
    """Convert ``source`` (a checkpoint of ``model`` in ``source_format``) into ``target``
    in ``target_format``, through the canonical arrays. Nothing is written unless the
    source is the model it is said to be; an existing target is replaced only with
    ``overwrite``."""
    check_model(model)
    formats.check_format(source_format)
    formats.check_format(target_format)
    if Path(target).exists() and not overwrite:
        raise CheckpointError(f"{target} exists: pass overwrite=True (--overwrite) to replace it")
    canonical, notes = read_canonical(model, source, source_format)
    path, written_notes = write_canonical(model, canonical, target, target_format, overwrite=overwrite)
    return Conversion(path, canonical, notes + written_notes)
