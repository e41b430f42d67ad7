"""TensorFlow with Keras 3: version, device, threads and synchronization."""

from __future__ import annotations

from typing import Any, Mapping

from ..frameworks import usable_cores


def version() -> dict[str, str]:
    import keras
    import tensorflow as tf

    return {"tensorflow": tf.__version__, "keras": keras.__version__}


def device() -> str:
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
        return f"gpu:0 ({details.get('device_name', 'GPU')})"
    return "cpu"


def array_device(value: Any) -> str | None:
    """Where ``value`` (a tensor, a variable, or a Keras model's first weight) lives."""
    import keras
    import tensorflow as tf

    if isinstance(value, keras.Model) and value.weights:
        value = value.weights[0].value
    if not isinstance(value, (tf.Tensor, tf.Variable)) or not getattr(value, "device", ""):
        return None
    spec = tf.DeviceSpec.from_string(value.device)
    return "cpu" if spec.device_type == "CPU" else f"{spec.device_type.lower()}:{spec.device_index}"


def float32_precision() -> str:
    """Whether TensorFlow may compute float32 with TensorFloat-32 (on by default)."""
    import tensorflow as tf

    return "TF32 " + ("allowed" if tf.config.experimental.tensor_float_32_execution_enabled() else "off")


def threads() -> int:
    """Intra-op threads; TensorFlow's 0 means "one per usable core"."""
    import tensorflow as tf

    return tf.config.threading.get_intra_op_parallelism_threads() or usable_cores()


def synchronize(value: Any = None) -> None:
    """GPU kernels run asynchronously: wait for every device."""
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU"):
        tf.test.experimental.sync_devices()


def gpu_build(installed: Mapping[str, str]) -> str | None:
    """The GPU build among the installed distributions: TensorFlow beside NVIDIA's cuDNN."""
    has_cuda_libraries = any(dist.startswith("nvidia-cudnn-cu") for dist in installed)
    return "tensorflow[and-cuda]" if "tensorflow" in installed and has_cuda_libraries else None
