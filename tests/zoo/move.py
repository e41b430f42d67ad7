"""Move the zoo's weights between frameworks with rosetta_utils.porting, in one framework's
environment. After ``record.py`` has written ``OUT/weights`` (the source's state dicts) and
the recordings::

    python tests/zoo/move.py export FRAMEWORK OUT   # each model's port, loaded by hand, saved
    python tests/zoo/move.py import FRAMEWORK OUT   # every other framework's file moved in

``export`` writes ``OUT/moved/<model>.<framework>.npz`` with ``save_weights`` (the port the
zoo loads by its own hand-written conversion). ``import`` builds a fresh port of each model
(the framework's own random initialisation), moves each other framework's file into it
with ``load_weights`` (one call), and records it on the model's first probe:
``OUT/<model>.<probe>.<source>-to-<framework>.npz``; the source's state dict itself
(``OUT/weights/<model>.npz``, PyTorch's names) is moved in too, as ``statedict-to-``.
Prints one line per move; a refused move prints why and the driver exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import spec  # noqa: E402
from record import weights_of  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("step", choices=("export", "import"))
    parser.add_argument("framework", choices=spec.FRAMEWORKS)
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", default=",".join(spec.MODELS))
    args = parser.parse_args(argv)
    zoo = importlib.import_module(f"zoo_{args.framework}")
    recorder = importlib.import_module(f"rosetta_utils.recorders.{args.framework}")
    from rosetta_utils.porting import PortingError, load_weights, save_weights

    moved = args.out / "moved"
    moved.mkdir(parents=True, exist_ok=True)
    failed = 0
    for model in args.models.split(","):
        if args.framework not in spec.MODELS[model]["frameworks"]:
            continue
        probe = spec.MODELS[model]["probes"][0]
        inputs = zoo.framework_inputs(model, spec.probe(model, probe))
        if args.step == "export":
            port, _ = zoo.port(model, weights_of(args.out, model))
            save_weights(port, inputs, moved / f"{model}.{args.framework}.npz")
            print(f"{model}: saved", flush=True)
            continue
        sources = [(name, moved / f"{model}.{name}.npz") for name in spec.MODELS[model]["frameworks"]
                   if name != args.framework and (moved / f"{model}.{name}.npz").exists()]
        sources.append(("statedict", args.out / "weights" / f"{model}.npz"))
        for source, path in sources:
            fresh, names = zoo.port(model)
            try:
                with contextlib.redirect_stdout(io.StringIO()) as table:
                    load_weights(fresh, inputs, path)
            except PortingError as error:
                print(f"{model}: {source} -> {args.framework}: REFUSED: {error}", flush=True)
                failed += 1
                continue
            recorder.record(fresh, inputs, names=names,
                            path=args.out / f"{model}.{probe}.{source}-to-{args.framework}.npz")
            lines = table.getvalue().strip().splitlines()
            print(f"{model}: {source} -> {args.framework}: {lines[-1] if lines else ''}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
