"""Record the zoo in one framework: every model it has, on every probe, correct and with
each trap planted in it. Run in that framework's environment::

    python tests/zoo/record.py pytorch OUT      # first: writes OUT/weights/<model>.npz
    python tests/zoo/record.py tensorflow OUT   # reads them

Writes ``OUT/<model>.<probe>.<framework>.npz`` (a correct port) and
``OUT/<model>.<probe>.<framework>.<trap>.npz`` (a trap planted), each saved by the
recorder of ``rosetta_utils.recorders``, and prints one line per file.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import spec  # noqa: E402


def weights_of(out: Path, model: str) -> dict[str, np.ndarray]:
    with np.load(out / "weights" / f"{model}.npz", allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("framework", choices=spec.FRAMEWORKS)
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", default=",".join(spec.MODELS))
    parser.add_argument("--no-traps", action="store_true")
    args = parser.parse_args(argv)
    zoo = importlib.import_module(f"zoo_{args.framework}")
    out: Path = args.out
    (out / "weights").mkdir(parents=True, exist_ok=True)
    for model in args.models.split(","):
        if args.framework not in spec.MODELS[model]["frameworks"]:
            continue
        if args.framework == spec.SOURCE:
            weights = zoo.source_weights(model)
            np.savez(out / "weights" / f"{model}.npz", **weights)
        else:
            weights = weights_of(out, model)
        for probe in spec.MODELS[model]["probes"]:
            inputs = spec.probe(model, probe)
            path = out / f"{model}.{probe}.{args.framework}.npz"
            zoo.run(model, weights, inputs, path=path)
            print(path.name, flush=True)
        if args.no_traps:
            continue
        for trap, about in spec.TRAPS.items():
            if about["model"] != model or args.framework not in about["frameworks"]:
                continue
            inputs = spec.probe(model, about["probe"])
            path = out / f"{model}.{about['probe']}.{args.framework}.{trap}.npz"
            zoo.run(model, weights, inputs, trap=trap, path=path)
            print(path.name, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
