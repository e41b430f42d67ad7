"""The GPU lessons' PyTorch measurements, in a process of their own (see the package).

Every network, step and input is the chapters' (:mod:`.chapters`); what this
module adds is the switch measured (``cudnn.benchmark``, the float32 arithmetic,
autocast, the memory layout the page's builder takes) and the timing rule of
:func:`rosetta_book.gpu_lessons.measure.time_calls`. ResNet-50 runs eagerly here
(its page compiles it with ``torch.compile``), so that what is timed is cuDNN's
convolutions under each switch, not a compiler's choices.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from rosetta_utils.backends.pytorch import float32_precision

from .chapters import data_label, default_of, first_batch, load_chapters
from .measure import errors_against, time_calls

#: The float32 arithmetic of each precision setting: cuBLAS's and cuDNN's float32 mode,
#: and the autocast dtype (None: no autocast).
MODES = {"float32": ("ieee", None), "tf32": ("tf32", None), "bfloat16 autocast": ("ieee", torch.bfloat16)}
#: The layouts lesson's dtypes and the precision setting that gives each.
DTYPES = {"float32": "float32", "tf32": "tf32", "bfloat16": "bfloat16 autocast"}
DATA = {"cifar10": "CIFAR-10", "resnet50": "CIFAR-10 at 224 pixels", "imdb": "IMDB"}


def versions() -> dict[str, str]:
    found = {"torch": torch.__version__, "CUDA (torch)": str(torch.version.cuda)}
    if torch.backends.cudnn.is_available():
        found["cuDNN"] = str(torch.backends.cudnn.version())
    return found


def wait(_result: Any = None) -> None:
    """CUDA runs asynchronously: a timed call ends when the device is done."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def device_name(tensor: torch.Tensor) -> str:
    """The GPU's name as the tensor's device reports it, or ``"cpu"``."""
    return torch.cuda.get_device_name(tensor.device) if tensor.is_cuda else tensor.device.type


@contextlib.contextmanager
def arithmetic(mode: str, device_type: str) -> Iterator[None]:
    """Inside: float32 products and convolutions as ``mode`` says (:data:`MODES`); the
    previous settings come back after."""
    precision, autocast = MODES[mode]
    flags = (torch.backends.cuda.matmul, torch.backends.cudnn.conv)
    saved = [flag.fp32_precision for flag in flags]
    for flag in flags:
        flag.fp32_precision = precision
    try:
        with torch.autocast(device_type, dtype=autocast) if autocast else contextlib.nullcontext():
            yield
    finally:
        for flag, value in zip(flags, saved):
            flag.fp32_precision = value


def _layout_name(channels_last: bool) -> str:
    return "channels_last" if channels_last else "NCHW"


def _parameters(model: torch.nn.Module) -> dict[str, np.ndarray]:
    return {f"parameter{index}": value.detach().float().cpu().numpy()
            for index, value in enumerate(model.parameters())}


class Measurer:
    """One process's measurements: the chapters, the timing rule and where results go."""

    def __init__(self, sink: Any, chapters: dict[str, dict[str, Any]], setting: str, repeats: int, warmup: int,
                 limit: int | None = None):
        self.sink, self.chapters, self.setting, self.limit = sink, chapters, setting, limit
        self.timing = {"repeats": repeats, "warmup": warmup}

    def cifar_step(self, **options: Any) -> tuple[Any, Any, Any, dict[str, Any]]:
        """The CIFAR-10 page's model and training step (its ``make_training`` with
        ``options``), its first batch on the device, and the config that names them."""
        namespace = self.chapters["cifar10"]
        model, train_step, to_device = namespace["make_training"](**options)
        images, labels = first_batch("cifar10", namespace, self.limit)
        x, y = to_device(images, labels)
        model.train()
        channels_last = options.get("channels_last", default_of(namespace["make_training"], "channels_last"))
        config = {"network": "cifar10", "batch": len(labels), "layout": _layout_name(channels_last),
                  "data": data_label(namespace, DATA["cifar10"])}
        return model, (lambda: train_step(x, y)), x, config

    def resnet_forward(self, channels_last: bool | None = None) -> tuple[Any, Any, dict[str, Any]]:
        """The ResNet-50 page's network (its ``make_resnet50``, eager, its weights loaded) and
        a forward pass in inference mode on the page's first batch, already on the device."""
        namespace = self.chapters["resnet50"]
        builder = namespace["make_resnet50"]
        if channels_last is None:
            channels_last = default_of(builder, "channels_last")
        model, _ = builder(channels_last=channels_last, compile=False)
        namespace["load_weights"](model, namespace["weights"])
        (images,) = first_batch("resnet50", namespace, self.limit)
        layout = torch.channels_last if channels_last else torch.contiguous_format
        x = torch.from_numpy(images).to(namespace["device"]).contiguous(memory_format=layout)

        def forward() -> torch.Tensor:
            with torch.inference_mode():
                return model(x)

        config = {"network": "resnet50", "batch": len(images), "layout": _layout_name(channels_last),
                  "data": data_label(namespace, DATA["resnet50"])}
        return model, forward, config

    def autotuning(self) -> None:
        """Each network's first and steady step under this process's ``cudnn.benchmark``,
        and the arrays a second run of the same setting must reproduce bit for bit."""
        model, step, _, config = self.cifar_step()
        losses = []

        def recorded_step() -> torch.Tensor:
            losses.append(step())
            return losses[-1]

        timed, loss = time_calls(recorded_step, wait, **self.timing)
        arrays = {"losses": torch.stack(losses).float().cpu().numpy(), **_parameters(model)}
        self.sink.add("lesson-autotuning", device_name(loss),
                      {**config, "setting": self.setting, "step": "training step", "float32": float32_precision()},
                      {**timed.metrics(first=True), "steps": len(losses)}, arrays)
        _, forward, config = self.resnet_forward()
        timed, features = time_calls(forward, wait, **self.timing)
        self.sink.add("lesson-autotuning", device_name(features),
                      {**config, "setting": self.setting, "step": "forward pass, eager (the page compiles it)",
                       "float32": float32_precision()},
                      timed.metrics(first=True), {"features": features.float().cpu().numpy()})

    def precision(self) -> None:
        """True float32, TF32 and bfloat16 autocast: time, and error against float64 on the
        CPU (CIFAR-10: the gradients of one training step, dropout off; ResNet-50: the
        features of a forward pass)."""
        namespace = self.chapters["cifar10"]
        no_dropout = tuple(0.0 for _ in namespace["DROPOUT"])
        images, labels = first_batch("cifar10", namespace, self.limit)
        exact_model, exact_step, _ = namespace["make_training"](dropout=no_dropout, channels_last=False)
        exact_model.to(device="cpu", dtype=torch.float64)
        exact_step(torch.from_numpy(images).to(torch.float64), torch.from_numpy(labels))
        exact = [value.grad.numpy() for value in exact_model.parameters()]
        for mode in MODES:
            model, step, x, config = self.cifar_step(dropout=no_dropout)
            with arithmetic(mode, x.device.type):
                loss = step()
                wait(loss)
                gradients = [value.grad.float().cpu().numpy() for value in model.parameters()]
                timed, loss = time_calls(step, wait, **self.timing)
            self.sink.add("lesson-precision", device_name(loss),
                          {**config, "setting": mode, "step": "training step, dropout off",
                           "compared": "the gradients of one training step", "reference": "float64 on the CPU"},
                          {**timed.metrics(), **errors_against(gradients, exact)})
        namespace = self.chapters["resnet50"]
        (images,) = first_batch("resnet50", namespace, self.limit)
        exact_model, _ = namespace["make_resnet50"](channels_last=False, compile=False)
        namespace["load_weights"](exact_model, namespace["weights"])
        exact_model.to(device="cpu", dtype=torch.float64)
        with torch.inference_mode():
            exact_features = exact_model(torch.from_numpy(images).to(torch.float64)).numpy()
        del exact_model
        model, forward, config = self.resnet_forward()
        device_type = next(model.parameters()).device.type
        for mode in MODES:
            with arithmetic(mode, device_type):
                timed, features = time_calls(forward, wait, **self.timing)
            self.sink.add("lesson-precision", device_name(features),
                          {**config, "setting": mode, "step": "forward pass, eager (the page compiles it)",
                           "compared": "the features of the forward pass", "reference": "float64 on the CPU"},
                          {**timed.metrics(), **errors_against([features.float().cpu().numpy()], [exact_features])})

    def layouts(self) -> None:
        """NCHW against channels-last, in float32, TF32 and bfloat16 (autocast), for the
        CIFAR-10 training step and the ResNet-50 forward pass."""
        for channels_last in (False, True):
            _, step, x, config = self.cifar_step(channels_last=channels_last)
            self._layout_rows(step, x.device.type, config, "training step")
            model, forward, config = self.resnet_forward(channels_last)
            self._layout_rows(forward, next(model.parameters()).device.type, config,
                              "forward pass, eager (the page compiles it)")

    def _layout_rows(self, call: Any, device_type: str, config: dict[str, Any], step: str) -> None:
        for dtype, mode in DTYPES.items():
            with arithmetic(mode, device_type):
                timed, result = time_calls(call, wait, **self.timing)
            self.sink.add("lesson-layouts", device_name(result),
                          {**config, "setting": config["layout"], "dtype": dtype, "arithmetic": mode, "step": step},
                          timed.metrics())

    def fused_rnn(self) -> None:
        """The IMDB page's training step with its fused ``nn.GRU`` (cuDNN on a GPU) and with
        its loop of ``nn.GRUCell``, one time step at a time."""
        namespace = self.chapters["imdb"]
        inputs, labels = first_batch("imdb", namespace, self.limit)
        for setting, options, kernel in (
                ("nn.GRU (cuDNN)", {"fused": True}, namespace["gru_kernel"]),
                ("GRUCell loop", {"fused": False}, "nn.GRUCell in a Python loop, one time step at a time")):
            model, train_step, to_device = namespace["make_training"](**options)
            x, y = to_device(inputs, labels)
            model.train()
            timed, loss = time_calls(lambda step=train_step, x=x, y=y: step(x, y), wait, **self.timing)
            self.sink.add("lesson-fused-rnn", device_name(loss),
                          {"network": "imdb", "batch": len(labels), "setting": setting, "kernel": kernel,
                           "steps_per_review": int(namespace["MAXLEN"]), "step": "training step",
                           "float32": float32_precision(), "data": data_label(namespace, DATA["imdb"])},
                          timed.metrics())


def run(sink: Any, book: Path, jobs: list[str], setting: str, repeats: int, warmup: int,
        limit: int | None = None) -> None:
    """Load the chapters ``jobs`` need, set ``cudnn.benchmark`` as ``setting`` says (after
    the pages' own Setup set it), then measure each job in turn."""
    chapters = load_chapters(book, "pytorch", jobs)
    torch.backends.cudnn.benchmark = setting == "cudnn.benchmark on"
    measurer = Measurer(sink, chapters, setting, repeats, warmup, limit)
    for job in jobs:
        getattr(measurer, job.replace("-", "_"))()
