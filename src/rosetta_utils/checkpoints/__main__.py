"""``python -m rosetta_utils.checkpoints``: the command line of :func:`rosetta_utils.checkpoints.convert`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .convert import convert
from .errors import CheckpointError
from .formats import ENVIRONMENT_OF_FORMAT, FORMATS, SUFFIXES
from .models import MODELS
from .own_model import convert_own, is_model_code


def main(argv: list[str] | None = None) -> int:
    listing = "; ".join(f"{name} ({SUFFIXES[name]}, {ENVIRONMENT_OF_FORMAT[name]} environment)" for name in FORMATS)
    parser = argparse.ArgumentParser(
        prog="python -m rosetta_utils.checkpoints",
        description="Convert a checkpoint of one of the book's models from one framework's format into "
                    "another's, through the canonical arrays (PyTorch's names and layouts). The source is "
                    "checked to be the model named before anything is written.",
        epilog=f"Formats: {listing}. Between the two environments, go through the canonical format: "
               "convert to canonical in one, from canonical in the other.")
    parser.add_argument("model", help=f"the model the checkpoint holds: one of the book's ({', '.join(MODELS)}), "
                                      "or your own model's code, module:function, a function that takes a "
                                      "framework's name and returns (its port of the model, an example input)")
    parser.add_argument("source", help="the checkpoint to read")
    parser.add_argument("target", help="the checkpoint to write")
    parser.add_argument("--from", dest="source_format", required=True, choices=FORMATS, help="the source's format")
    parser.add_argument("--to", dest="target_format", required=True, choices=FORMATS, help="the target's format")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing target")
    args = parser.parse_args(argv)
    if is_model_code(args.model):
        return _own_model(args)
    if args.model not in MODELS:
        parser.error(f"argument model: {args.model!r} is neither one of the book's models ({', '.join(MODELS)}) "
                     "nor module:function")
    try:
        done = convert(args.model, args.source, args.source_format, args.target, args.target_format,
                       overwrite=args.overwrite)
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for note in done.notes:
        print(f"note: {note}")
    count = sum(array.size for array in done.canonical.values())
    print(f"wrote {done.target} ({args.target_format}): the {args.model} model, {len(done.canonical)} arrays, "
          f"{count:,} numbers")
    return 0


def _own_model(args: argparse.Namespace) -> int:
    """The command on a reader's own model: its pairing table, then what was written."""
    try:
        done = convert_own(args.model, args.source, args.source_format, args.target, args.target_format,
                           overwrite=args.overwrite)
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if isinstance(done, Path):
        print(f"wrote {done} (canonical): the layers and structure of {args.model}({args.source_format!r})")
        return 0
    print(done.table())
    print(f"wrote {args.target} ({args.target_format})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
