"""One benchmark process: a framework's alternatives that share a process environment.

The parent (:func:`rosetta_book.bench.run.run_task`) starts one such process
per framework and process environment (a thread count, say, which a framework
reads once, when it starts), in that framework's own environment where no
other framework imports. The process loads the page's part up to the section
where the benchmark stops (the page's own Setup, Data and Model, through the
chapter loader), builds each of its alternatives with the page's builder,
warms each up, and then waits. The parent then asks every process in turn for
a *round*: one timed call of each of its alternatives (and, in the process
of the page's own environment, one of each matrix-multiply path of the
peak). Processes take turns, so a change in the machine's load weighs on
every alternative alike, across processes too.

Messages are JSON, over a local socket (:mod:`multiprocessing.connection`).
"""

from __future__ import annotations

import inspect
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping

from .convolutions import CONVOLUTIONS_ALONE, convolutions_alone
from .tasks import Task, resolve_task

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def matches_defaults(builder: Callable[..., Any], options: Mapping[str, Any], where: str) -> bool:
    """Whether every option equals the builder's default for it (the page's choice); an
    option the builder does not take is an error naming it and the builder's parameters."""
    try:
        parameters = inspect.signature(builder).parameters
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: cannot read the builder's defaults ({error})") from None
    unknown = [key for key in options if key not in parameters]
    if unknown:
        raise ValueError(f"{where}: the builder takes no option {', '.join(map(repr, unknown))}; "
                         f"its parameters: {', '.join(parameters)}")
    return all(parameters[key].default is not inspect.Parameter.empty and parameters[key].default == value
               for key, value in options.items())


def seed_random_weights(seed: int = 0) -> None:
    """Seed the random draws a page's builder makes its weights from, before each build:
    every configuration, in every process, starts from the same weights, so that its first
    result can be compared with the page configuration's (:meth:`Task.same_result`). The
    pages' PyTorch and JAX builders seed themselves; the Keras, Gluon and Chainer ResNet-50s
    draw from their framework's global generator (Chainer's is numpy's). Only what the
    page imported is seeded."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    if "keras" in sys.modules:
        sys.modules["keras"].utils.set_random_seed(seed)
    if "mxnet" in sys.modules:
        sys.modules["mxnet"].random.seed(seed)


def prepare_call(task: Task, namespace: Mapping[str, Any], framework: str, options: Mapping[str, Any],
                 steps: int, batch_factor: float = 1.0) -> tuple[Callable[[], Any], int]:
    """Build one alternative with the page's builder; return ``(call, items)``: ``call()``
    runs ``steps`` training steps (or one extraction) on the page's first batch (times
    ``batch_factor``, feature extraction only) and waits
    for the framework to finish them, returning the last result; ``items`` counts the
    examples one call processes."""
    synchronize = task.synchronize(framework)
    builder = namespace[task.builder]
    seed_random_weights()
    if task.training:
        inputs, labels = task.inputs(namespace)
        _, train_step, to_device = builder(**options)
        x, y = to_device(inputs, labels)

        def call() -> Any:
            for _ in range(steps):
                result = train_step(x, y)
            synchronize(result)
            return result

        return call, steps * len(labels)
    (images,) = task.inputs(namespace, batch_factor)
    _, extract = builder(**options)

    def extract_once() -> Any:
        result = extract(images)
        synchronize(result)
        return result

    return extract_once, len(images)


def convolution_probe(task: Task, namespace: Mapping[str, Any],
                      framework: str) -> tuple[Callable[[], Any] | None, dict[str, Any]]:
    """The page's model (built with the builder's defaults) taken apart into its
    convolutions, on the page's batch: ``(call, facts)``, facts being the FLOP of a call
    and the number of convolutions, or, where the framework cannot be taken apart,
    ``(None, {"not_measured": why})``."""
    model = namespace[task.builder]()[0]
    (images,) = task.inputs(namespace)
    try:
        call, flops, count = convolutions_alone(framework, model, images)
    except NotImplementedError as error:
        return None, {"not_measured": str(error)}
    return call, {"flops": flops, "count": count, "items": len(images)}


def failure_message(error: BaseException) -> str:
    """What a configuration that cannot run raised: its type and the first line of its
    message (TensorFlow's and MXNet's run on for pages of a C++ stack)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else '(no message)'}"[:400]


def scalar(value: Any) -> float | None:
    """What a timed call computed, as one number to compare configurations by: a training
    step's loss; for a call that returns an array (ResNet-50's features), the norm of its
    first item, the same image whatever the batch. None if it is neither."""
    import numpy as np

    try:
        if hasattr(value, "asnumpy"):  # MXNet
            value = value.asnumpy()
        elif hasattr(value, "detach"):  # PyTorch
            value = value.detach().cpu().numpy()
        elif hasattr(value, "array") and not isinstance(value, np.ndarray):  # a Chainer Variable
            value = value.array
        array = np.asarray(value, dtype=np.float64)
        number = float(array.reshape(())) if array.size == 1 else float(np.linalg.norm(array[0]))
    except (TypeError, ValueError, RuntimeError, AttributeError, IndexError):
        return None
    return number if math.isfinite(number) else None


def serve(task_name: str, framework: str, address: str, authkey: bytes) -> int:
    """The process's side: connect, build what the parent names, then answer rounds."""
    from multiprocessing.connection import Client

    from .peak import matmul_paths

    connection = Client(address, family="AF_UNIX", authkey=authkey)

    def send(message: Mapping[str, Any]) -> None:
        connection.send_bytes(json.dumps(message).encode())

    request = json.loads(connection.recv_bytes())
    calls: dict[str, Callable[[], Any]] = {}
    products: dict[str, Callable[[], Any]] = {}
    probes: dict[str, Callable[[], Any]] = {}  # timed like the alternatives, reported apart
    try:
        task = resolve_task(task_name)
        if request["names"]:
            namespace = task.load(framework, PROJECT_ROOT)
            builder = namespace[task.builder]
            alternatives = task.alternatives[framework]
            details: dict[str, Any] = {}
            for name in request["names"]:
                alternative = alternatives[name]
                options = alternative.options
                where = f"{task.page} ({framework}), alternative {name!r}"
                is_page = matches_defaults(builder, options, where) and alternative.batch_factor == 1.0
                start = time.perf_counter()
                try:
                    call, items = prepare_call(task, namespace, framework, options, request["steps"],
                                               alternative.batch_factor)
                    first = call()  # the first call: builds, compiles, traces
                    for _ in range(request["warmup"] - 1):
                        call()
                except Exception as error:  # this machine cannot run it: the others are still timed
                    details[name] = {"failed": failure_message(error), "defaults": is_page,
                                     "build_seconds": time.perf_counter() - start}
                    continue
                calls[name] = call
                details[name] = {"items": items, "defaults": is_page, "first_result": scalar(first),
                                 "build_seconds": time.perf_counter() - start}
            weights = namespace.get("WEIGHTS_NOTE") or (
                "initialised at random, as the page's training starts" if task.training
                else "not stated by the page's code")
            facts = {"data": namespace["data"].source, "weights": str(weights),
                     "flops_per_item": task.flops_per_item(namespace)}
            if task.convolutions and any(details[name]["defaults"] and not alternatives[name].env
                                         for name in request["names"]):
                probe, facts["convolutions"] = convolution_probe(task, namespace, framework)
                if probe is not None:
                    probe()  # warm-up
                    probes[CONVOLUTIONS_ALONE] = probe
        else:
            details, facts = {}, {}
        if request["peak"]:
            products = {path: build() for path, build in matmul_paths(framework, request["matmul_size"]).items()}
            for product in products.values():
                product()  # warm-up
        send({"ready": details, **facts})
    except Exception:
        send({"error": traceback.format_exc()})
        return 1
    while True:
        message = json.loads(connection.recv_bytes())
        if message["do"] == "quit":
            return 0
        try:
            send(timed_round(calls, products, message["round"], probes))
        except Exception:
            send({"error": traceback.format_exc()})
            return 1


def timed_round(calls: Mapping[str, Callable[[], Any]], products: Mapping[str, Callable[[], Any]],
                round_: int, probes: Mapping[str, Callable[[], Any]] | None = None) -> dict[str, dict[str, float]]:
    """One timed call of each alternative, each round starting one alternative later, then
    one of each probe (the page's convolutions alone), then one of each matrix-multiply path."""
    names = list(calls)
    shift = round_ % len(names) if names else 0
    seconds: dict[str, float] = {}
    for name in names[shift:] + names[:shift]:
        start = time.perf_counter()
        calls[name]()
        seconds[name] = time.perf_counter() - start
    timed: dict[str, dict[str, float]] = {"probe_seconds": {}, "matmul_seconds": {}}
    for kind, functions in (("probe_seconds", probes or {}), ("matmul_seconds", products)):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            timed[kind][name] = time.perf_counter() - start
    return {"seconds": seconds, **timed}


def main(argv: list[str]) -> int:
    """``python -m rosetta_book.bench.worker TASK FRAMEWORK ADDRESS``; ``TASK`` is a name in
    :data:`~rosetta_book.bench.tasks.TASKS` or ``module:attribute``; the key comes in the
    environment (``ROSETTA_BENCH_KEY``, hex)."""
    task, framework, address = argv
    key = bytes.fromhex(os.environ.pop("ROSETTA_BENCH_KEY"))
    return serve(task, framework, address, key)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
