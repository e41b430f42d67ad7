"""JAX with Flax: version, device, threads and synchronization."""

from __future__ import annotations

from typing import Any, Mapping

from ..frameworks import usable_cores


def version() -> dict[str, str]:
    import flax
    import jax

    return {"jax": jax.__version__, "flax": flax.__version__}


def device() -> str:
    import jax

    first = jax.devices()[0]
    if first.platform == "cpu":
        return "cpu"
    return f"{first.platform}:{first.id} ({first.device_kind})"


def array_device(value: Any) -> str | None:
    """Where ``value`` (a jax.Array, or an nnx.Module's first parameter) lives."""
    import jax
    from flax import nnx

    if isinstance(value, nnx.Module):
        leaves = jax.tree_util.tree_leaves(nnx.state(value, nnx.Param))
        value = leaves[0] if leaves else None
    if not isinstance(value, jax.Array) or isinstance(value, jax.core.Tracer):
        return None
    first = sorted(value.devices(), key=lambda device: device.id)[0]
    if first.platform == "cpu":
        return "cpu"
    return f"{first.platform}:{first.id} ({first.device_kind})"


def float32_precision() -> str:
    """JAX's default matmul precision ("default" lets a GPU use TF32 for float32)."""
    import jax

    return f"matmul precision {jax.config.jax_default_matmul_precision or 'default'}"


def threads() -> int:
    """XLA's CPU client runs its Eigen thread pool on every usable core."""
    return usable_cores()


def synchronize(value: Any = None) -> None:
    """JAX dispatches asynchronously on every device, CPU included: wait for ``value``."""
    import jax

    if value is not None:
        jax.block_until_ready(value)
    else:
        jax.effects_barrier()


def gpu_build(installed: Mapping[str, str]) -> str | None:
    """The GPU build among the installed distributions: a jax-cuda plugin."""
    plugins = sorted(dist for dist in installed if dist.startswith("jax-cuda") and dist.endswith("-plugin"))
    return plugins[0] if plugins else None
