"""TensorFlow with Keras 3: device, threads and synchronization."""

from __future__ import annotations

from typing import Any

from ..frameworks import import_framework, usable_cores


def version() -> dict[str, str]:
    keras = import_framework("tensorflow")
    import tensorflow as tf

    return {"tensorflow": tf.__version__, "keras": keras.__version__}


def device() -> str:
    import_framework("tensorflow")
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(
            tf.config.list_physical_devices("GPU")[0]
        )
        return f"gpu:0 ({details.get('device_name', 'GPU')})"
    return "cpu"


def threads() -> int:
    """Intra-op threads; TensorFlow's 0 means "one per usable core"."""
    import_framework("tensorflow")
    import tensorflow as tf

    return tf.config.threading.get_intra_op_parallelism_threads() or usable_cores()


def synchronize(value: Any = None) -> None:
    """GPU kernels run asynchronously: wait for every device."""
    import_framework("tensorflow")
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU"):
        tf.test.experimental.sync_devices()


# --- GRU weights (rosetta_utils.gru) ---
# Keras stores x·K: kernel (I, 3U) and recurrent_kernel (U, 3U), gates z, r, h in
# column blocks. reset_after=True (LBR) keeps bias (2, 3U): row 0 for the input,
# row 1 for the recurrent side; reset_after=False (RB) keeps one (3U,) bias.


def _gru_cells(layer: Any) -> dict[str, Any]:
    """The GRUCell of each direction of a Keras GRU, GRUCell or Bidirectional(GRU)."""
    keras = import_framework("tensorflow")
    from ..gru import GRUConversionError, unsupported

    if isinstance(layer, keras.layers.Bidirectional):
        inner = {"forward": layer.forward_layer, "backward": layer.backward_layer}
        for sublayer in inner.values():
            if not isinstance(sublayer, keras.layers.GRU):
                raise unsupported(layer, f"it wraps a {type(sublayer).__name__}, not a GRU")
        if not (inner["forward"].built and inner["backward"].built):
            raise GRUConversionError(
                "the Keras Bidirectional layer is not built yet: call layer.build((None, T, I)) "
                "or run it once on an input first"
            )
        cells = {direction: sublayer.cell for direction, sublayer in inner.items()}
    elif isinstance(layer, keras.layers.GRU):
        if not layer.built:
            raise GRUConversionError(
                "the Keras GRU layer is not built yet: call layer.build((None, T, I)) or run it "
                "once on an input first"
            )
        cells = {"forward": layer.cell}
    elif isinstance(layer, keras.layers.GRUCell):
        if not layer.built:
            raise GRUConversionError("the Keras GRUCell is not built yet: call cell.build((None, I)) first")
        cells = {"forward": layer}
    else:
        raise unsupported(layer)
    for cell in cells.values():
        activation = keras.activations.serialize(cell.activation)
        recurrent = keras.activations.serialize(cell.recurrent_activation)
        if activation != "tanh" or recurrent != "sigmoid":
            raise unsupported(
                layer, f"activation={activation!r}, recurrent_activation={recurrent!r}; a GRU uses tanh and sigmoid"
            )
    return cells


def gru_info(layer: Any) -> dict[str, Any]:
    """Keras: reset_after=True is an LBR GRU, reset_after=False an RB GRU."""
    from ..gru import LBR, RB, GRUConversionError

    cells = _gru_cells(layer)
    flavors = {cell.reset_after for cell in cells.values()}
    if len(flavors) != 1:
        raise GRUConversionError("the Bidirectional layer's two GRUs differ in reset_after")
    forward = cells["forward"]
    return {
        "flavor": LBR if forward.reset_after else RB,
        "directions": len(cells),
        "input_size": int(forward.kernel.shape[0]),
        "hidden_size": int(forward.units),
        "holds_b_hn": True,  # LBR: its own row; RB: the n biases add up anyway
        "has_bias": bool(forward.use_bias),
    }


def _zrh_columns_to_rzn_rows(matrix: Any, units: int) -> Any:
    import numpy

    z, r, h = (matrix[..., i * units : (i + 1) * units] for i in range(3))
    return numpy.concatenate([r, z, h], axis=-1).T


def _rzn_rows_to_zrh_columns(matrix: Any, units: int) -> Any:
    import numpy

    r, z, n = (matrix[i * units : (i + 1) * units] for i in range(3))
    return numpy.ascontiguousarray(numpy.concatenate([z, r, n], axis=0).T)


def gru_weights(layer: Any) -> dict[str, Any]:
    """Canonical weights of a built Keras GRU, GRUCell or Bidirectional(GRU)."""
    import numpy

    from ..gru import as_float32

    info = gru_info(layer)
    units = info["hidden_size"]
    weights: dict[str, Any] = {}
    for direction, cell in _gru_cells(layer).items():
        kernel = numpy.asarray(cell.kernel)
        recurrent = numpy.asarray(cell.recurrent_kernel)
        if cell.use_bias:
            bias = numpy.asarray(cell.bias)
            if cell.reset_after:
                bias_ih, bias_hh = bias[0], bias[1]
            else:
                bias_ih, bias_hh = bias, numpy.zeros_like(bias)
        else:
            bias_ih = bias_hh = numpy.zeros(3 * units, dtype=numpy.float32)
        weights[direction] = {
            "weight_ih": as_float32(_zrh_columns_to_rzn_rows(kernel, units)),
            "weight_hh": as_float32(_zrh_columns_to_rzn_rows(recurrent, units)),
            "bias_ih": as_float32(_zrh_columns_to_rzn_rows(bias_ih, units)),
            "bias_hh": as_float32(_zrh_columns_to_rzn_rows(bias_hh, units)),
        }
    weights["flavor"] = info["flavor"]
    return weights


def load_gru_weights(layer: Any, weights: dict[str, Any]) -> Any:
    """Assign canonical weights (already fitted to the layer's flavor) to its variables."""
    import numpy

    units = gru_info(layer)["hidden_size"]
    for direction, cell in _gru_cells(layer).items():
        canonical = weights[direction]
        cell.kernel.assign(_rzn_rows_to_zrh_columns(canonical["weight_ih"], units))
        cell.recurrent_kernel.assign(_rzn_rows_to_zrh_columns(canonical["weight_hh"], units))
        if cell.use_bias:
            bias_ih = _rzn_rows_to_zrh_columns(canonical["bias_ih"], units)
            bias_hh = _rzn_rows_to_zrh_columns(canonical["bias_hh"], units)
            if cell.reset_after:
                cell.bias.assign(numpy.stack([bias_ih, bias_hh]))
            else:  # reset_before: the two biases of every gate simply add up
                cell.bias.assign(bias_ih + bias_hh)
    return layer
