"""``python -m rosetta_utils.checkpoints``: the command line of :func:`rosetta_utils.checkpoints.convert`."""

from __future__ import annotations

import argparse
import sys

from .convert import convert
from .errors import CheckpointError
from .formats import ENVIRONMENTS, FORMATS, SUFFIXES
from .models import MODELS


def main(argv: list[str] | None = None) -> int:
    listing = "; ".join(f"{name} ({SUFFIXES[name]}, {ENVIRONMENTS[name]} environment)" for name in FORMATS)
    parser = argparse.ArgumentParser(
        prog="python -m rosetta_utils.checkpoints",
        description="Convert a checkpoint of one of the book's models from one framework's format into "
                    "another's, through the canonical arrays (PyTorch's names and layouts). The source is "
                    "checked to be the model named before anything is written.",
        epilog=f"Formats: {listing}. Between the two environments, go through the canonical format: "
               "convert to canonical in one, from canonical in the other.")
    parser.add_argument("model", choices=list(MODELS), help="the model the checkpoint holds")
    parser.add_argument("source", help="the checkpoint to read")
    parser.add_argument("target", help="the checkpoint to write")
    parser.add_argument("--from", dest="source_format", required=True, choices=FORMATS, help="the source's format")
    parser.add_argument("--to", dest="target_format", required=True, choices=FORMATS, help="the target's format")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing target")
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
