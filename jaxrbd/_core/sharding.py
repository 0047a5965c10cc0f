"""Splitting a batch over devices: the ``devices=`` argument of `jaxrbd.batched`.

A batch-first function (every batched argument has the samples on axis 0, the others are
shared) runs on a 1-D `jax.sharding.Mesh` of the given devices with `jax.shard_map`:
each device gets an equal, contiguous share of the batch and runs the function on it,
and nothing crosses devices. A batch that is not a multiple of the device count is padded
with copies of sample 0 (a valid state) whose results are dropped.

On a CPU, JAX has one device unless told otherwise before its backend starts:
``jax.config.update("jax_num_cpu_devices", K)`` or
``XLA_FLAGS=--xla_force_host_platform_device_count=K`` splits the host into ``K``
devices, and ``devices="all"`` then runs ``K`` shares of the batch on ``K`` cores.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .._jit import _nested, jit

__all__ = ["blocked_over_devices", "check_devices", "shard_batch"]

_AXIS = "batch"


def check_devices(devices):
    """``devices`` as a tuple of distinct `jax.Device` s of one platform, or ``None``.

    Args:
        devices: ``None`` (no sharding), ``"all"`` (every device of JAX's default
            backend, `jax.devices()`) or a non-empty sequence of `jax.Device`.

    Raises:
        TypeError: ``devices`` is neither ``None``, a string nor a sequence.
        ValueError: another string, an empty sequence, an entry that is not a
            `jax.Device`, a device named twice, or devices of different platforms.
    """
    if devices is None:
        return None
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(
                f"devices is {devices!r}, expected None, 'all' or a sequence of jax devices"
            )
        return tuple(jax.devices())
    if isinstance(devices, jax.Device):
        raise TypeError(
            f"devices is one device ({devices}), expected a sequence of jax devices: "
            f"[{devices}] or None, 'all'"
        )
    try:
        devices = tuple(devices)
    except TypeError:
        raise TypeError(
            f"devices must be None, 'all' or a sequence of jax devices, got "
            f"{type(devices).__name__}"
        ) from None
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(f"devices must be a non-empty sequence of jax devices, got {devices!r}")
    if len(set(devices)) != len(devices):
        raise ValueError(f"devices names a device more than once: {list(devices)}")
    platforms = {d.platform for d in devices}
    if len(platforms) != 1:
        raise ValueError(f"devices mixes platforms {sorted(platforms)}: {list(devices)}")
    return devices


def _batch_size(args, in_axes):
    """The common size of axis 0 of the batched arguments' leaves."""
    sizes = {}
    for i, (x, ax) in enumerate(zip(args, in_axes)):
        if ax is None:
            continue
        for leaf in jax.tree_util.tree_leaves(x):
            shape = jnp.shape(leaf)
            if not shape:
                raise ValueError(
                    f"argument {i} is batched (samples on axis 0) but has a scalar leaf"
                )
            sizes.setdefault(shape[0], []).append((i, shape))
    if not sizes:
        raise ValueError("shard_batch: no batched argument (every in_axes entry is None)")
    if len(sizes) != 1:
        raise ValueError(f"batch sizes differ: {[s for v in sizes.values() for s in v]}")
    (B,) = sizes
    if B == 0:
        raise ValueError("the batch is empty, expected at least one sample")
    return B


def _pad(x, padn):
    """``x`` with ``padn`` copies of its sample 0 appended (leaves batch first)."""
    return jax.tree_util.tree_map(
        lambda a: jnp.concatenate([a, jnp.broadcast_to(a[:1], (padn,) + a.shape[1:])]), x
    )


@functools.lru_cache(maxsize=256)
def _unsharded(fn, static):
    """``fn`` under `jaxrbd.jit`, with its static keywords bound (one per function)."""
    return jit(functools.partial(fn, **dict(static)))


@functools.lru_cache(maxsize=256)
def _sharded(fn, devices, in_axes, static):
    """The jitted, sharded form of ``fn`` for ``devices`` (one per function, device set,
    batched-argument pattern and static keywords, so repeated calls hit JAX's caches)."""
    mesh = Mesh(np.asarray(devices), (_AXIS,))
    nd = len(devices)
    kwargs = dict(static)
    specs = tuple(P() if ax is None else P(_AXIS) for ax in in_axes)

    def local(*args):
        return fn(*args, **kwargs)

    def run(*args):
        B = _batch_size(args, in_axes)
        padn = -B % nd
        if padn:
            args = tuple(x if ax is None else _pad(x, padn) for x, ax in zip(args, in_axes))
        # traced under the devices' default device, so that the kernels inside are tuned
        # for them (`jaxrbd._core.backend`); check_vma=False: the per-sample algorithms start
        # scans from fresh (unsharded) buffers and nothing crosses devices
        with jax.default_device(devices[0]):
            out = jax.shard_map(local, mesh=mesh, in_specs=specs, out_specs=P(_AXIS),
                                check_vma=False)(*args)
        return out if padn == 0 else jax.tree_util.tree_map(lambda o: o[:B], out)

    return jit(run), mesh


def shard_batch(fn, devices, in_axes, *args, **static):
    """``fn(*args, **static)`` with the batch split over ``devices``.

    ``fn`` is batch first: each argument whose ``in_axes`` entry is ``0`` holds the
    samples on axis 0 of every leaf (a pytree such as a `stack_models` batch is fine),
    and each argument with ``None`` is shared by the batch (placed on every device).
    The batch is padded with copies of sample 0 to a multiple of ``len(devices)``, each
    device runs ``fn`` on its share (`jax.shard_map` over a 1-D mesh), and the padding
    is dropped. ``fn``'s outputs must be batch first too. The program is compiled with
    `jaxrbd.jit` (the options of the devices' platform), once per function, device set,
    shapes and ``static`` keywords (which must be hashable).

    Called outside any trace, the arguments are placed on the mesh first (the batched
    ones split, the others replicated); inside a `jax.jit` the outer jit places them.
    The outputs are split over the devices along axis 0 when the batch is a multiple of
    the device count, and replicated otherwise (an array is split in equal shares only).

    Args:
        fn: a batch-first function, e.g. ``jaxrbd.batched._fd``; module-level, so that
            its compiled form is found again on the next call.
        devices: ``"all"`` or a sequence of devices (`check_devices`); ``None`` calls
            ``fn`` under `jaxrbd.jit` without sharding.
        in_axes: ``0`` or ``None`` per positional argument.
        *args: the arguments; ``None`` stays ``None``.
        **static: keywords passed to ``fn`` unchanged (static under jit).

    Raises:
        TypeError, ValueError: a bad ``devices`` (`check_devices`), an ``in_axes`` of
            the wrong length or with entries other than ``0``/``None``, batched
            arguments of different batch sizes or an empty batch.
    """
    in_axes = tuple(in_axes)
    if len(in_axes) != len(args) or any(ax not in (0, None) for ax in in_axes):
        raise ValueError(
            f"in_axes is {in_axes}, expected 0 or None for each of the {len(args)} arguments"
        )
    devices = check_devices(devices)
    if devices is None:
        return _unsharded(fn, tuple(sorted(static.items())))(*args)
    B = _batch_size(args, in_axes)  # its errors name the whole batch, not one share
    run, mesh = _sharded(fn, devices, in_axes, tuple(sorted(static.items())))
    if not _nested():  # inside a jit, the outer jit places the arguments
        split = NamedSharding(mesh, P(_AXIS) if B % len(devices) == 0 else P())
        shared = NamedSharding(mesh, P())
        args = tuple(
            x if x is None else jax.device_put(x, shared if ax is None else split)
            for x, ax in zip(args, in_axes)
        )
    with jax.default_device(devices[0]):
        return run(*args)


def blocked_over_devices(one, arrays, devices, chunk=None):
    """``jax.vmap(one)(*arrays)`` in cache-sized blocks, the blocks split over devices.

    The batch-first ``arrays`` are padded (copies of sample 0) to ``ndevices * nblocks *
    block`` and split over a 1-D `Mesh` of ``devices`` with `jax.shard_map`; inside a
    device, equal blocks of at most ``chunk`` samples (default `backend.block_size` for
    the devices: `backend.CHUNK` on CPUs, the whole local batch elsewhere) run
    ``jax.vmap(one)`` one after the other, so that a block's states stay in cache through
    a whole rollout. The padding is dropped from the (batch-first) outputs.

    Args:
        one: the function of one sample.
        arrays: batch-first arrays of one batch size, at least one sample.
        devices: a non-empty sequence of devices (`check_devices`).
        chunk: samples per block, or None.
    """
    from .backend import block_size
    from .native_vmap import blocked

    devices = list(devices)
    B, nd = arrays[0].shape[0], len(devices)
    local = -(-B // nd)
    if chunk is None:  # tuned for the devices the work runs on
        chunk = block_size(device=devices[0]) or local
    # equal blocks of at most `chunk` samples: little padding (B = 129 -> 2 x 65, not 2 x 128)
    nblk = -(-local // max(1, int(chunk)))
    chunk = -(-local // nblk)
    local = nblk * chunk
    padn = local * nd - B
    if padn:
        arrays = tuple(_pad(x, padn) for x in arrays)

    def run_local(*xs):
        return blocked(jax.vmap(one), xs, chunk, batch_first=True, in_batch_first=True)

    # traced under the devices' default device, so that the kernels inside are tuned for
    # them (`jaxrbd._core.backend`), whatever the process's default backend
    if nd == 1:
        with jax.default_device(devices[0]):
            out = run_local(*arrays)
    else:
        mesh = Mesh(np.asarray(devices), (_AXIS,))
        spec = P(_AXIS)
        arrays = tuple(jax.device_put(x, NamedSharding(mesh, spec)) for x in arrays)
        with jax.default_device(devices[0]):
            out = jax.shard_map(run_local, mesh=mesh, in_specs=spec, out_specs=spec,
                                check_vma=False)(*arrays)
    return out if padn == 0 else jax.tree_util.tree_map(lambda o: o[:B], out)
