"""ResNet-50's weights in the published file's exact layout, served on 127.0.0.1 and fetched by
the page's own loader into a fresh data cache.

The file is Keras's ResNet-50 file in every respect but its values: its layer names, weight
names and shapes, seeded random values and non-zero convolution biases (which the loader
folds into the batch norms' running means). ``make test`` prepares it before its build
(``python tests/served_resnet50.py FOLDER``), so that the test build's ResNet-50 page runs
on it and the page's tests take that build's parts instead of running all five again; a
test run without it prepares its own (:func:`served_resnet50`).

What a prepared folder holds: ``cache/`` (the data cache the loader filled: the environment's
``ROSETTA_DATA_DIR``) and ``served.json`` (the mirror the loader fetched it from, the
environment's ``ROSETTA_RESNET50_WEIGHTS``, and its MD5). Preparing a folder again reuses
what it holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from local_http_server import LocalHTTPServer
from rosetta_utils.keras_h5 import write_keras_weights
from rosetta_utils.pretrained import KERAS_RESNET50_FILE, MIRROR_VARIABLE, keras_from_canonical, resnet50_imagenet_weights
from rosetta_utils.resnet50_layout import keras_layer_pairs
from rosetta_utils.transplant import random_resnet50_weights

SERVED_SEED = 22
#: Names the folder ``make test`` prepared for its build (see the module docstring).
BUILD_SERVED_VARIABLE = "ROSETTA_TEST_SERVED_RESNET50"
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def served_file_weights() -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
    """The canonical weights and the same weights in the file's layout, with non-zero
    convolution biases (seeded)."""
    canonical = random_resnet50_weights(SERVED_SEED)
    rng = np.random.default_rng(SERVED_SEED)
    biases = {keras: rng.normal(0, 0.1, canonical[f"{torch}.weight"].shape[0]).astype(np.float32)
              for keras, _, torch, _ in keras_layer_pairs()}
    return canonical, keras_from_canonical(canonical, biases)


def served_resnet50(folder: str | Path) -> dict:
    """Prepare ``folder`` (see the module docstring), or reuse what it holds: ``{"cache",
    "mirror", "md5", "fetched" (what the loader returns), "canonical"}``."""
    folder = Path(folder)
    record = folder / "served.json"
    canonical, layers = served_file_weights()
    if record.is_file():
        saved = json.loads(record.read_text())
        url, md5 = saved["mirror"].split(" md5:")
        fetched = resnet50_imagenet_weights(url=url, md5=md5, data_dir=folder / "cache", offline=True)
        if fetched.path is not None:  # the cached copy is there and intact
            return {"cache": folder / "cache", "mirror": saved["mirror"], "md5": md5, "fetched": fetched,
                    "canonical": canonical}
    folder.mkdir(parents=True, exist_ok=True)
    payload = write_keras_weights(folder / "served.h5", layers).read_bytes()
    md5 = hashlib.md5(payload).hexdigest()
    saved_environment = {name: os.environ.pop(name) for name in _PROXIES if name in os.environ}
    no_proxy = os.environ.get("NO_PROXY")
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    try:
        with LocalHTTPServer() as server:
            url = server.add(f"/{KERAS_RESNET50_FILE}", payload)
            fetched = resnet50_imagenet_weights(url=url, md5=md5, data_dir=folder / "cache", offline=False)
            assert server.requests == [f"/{KERAS_RESNET50_FILE}"], server.requests
    finally:
        os.environ.update(saved_environment)
        if no_proxy is None:
            os.environ.pop("NO_PROXY", None)
        else:
            os.environ["NO_PROXY"] = no_proxy
    (folder / "served.h5").unlink()  # the cache holds its copy
    mirror = f"{url} md5:{md5}"
    record.write_text(json.dumps({"mirror": mirror}))
    return {"cache": folder / "cache", "mirror": mirror, "md5": md5, "fetched": fetched, "canonical": canonical}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/served_resnet50.py FOLDER", file=sys.stderr)
        return 2
    served = served_resnet50(argv[0])
    print(f"{MIRROR_VARIABLE}={served['mirror']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
