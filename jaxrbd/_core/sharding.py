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

Several processes (`jax.distributed.initialize`): ``devices="all"`` (or a `Mesh`, or a
device list) may name every process's devices. Each process then passes either its own
part of the batch (host or single-process arrays; the parts may differ in size) and gets
its own part of the results back, or global `jax.Array` s (not fully addressable) and
gets global arrays back. The devices are ordered by process, so that each process's part
is one contiguous slice of the global batch (docs/scaling-out.md).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .._jit import jit, nested
from .backend import block_size
from .native_vmap import blocked

__all__ = [
    "blocked_over_devices",
    "check_devices",
    "resolve_devices",
    "shard_batch",
    "spans_processes",
]

_AXIS = "batch"


def check_devices(devices):
    """``devices`` as a tuple of distinct `jax.Device` s of one platform, or ``None``.

    The devices of several processes come ordered by process (stably), so that each
    process's devices are one contiguous block of the 1-D mesh.

    Args:
        devices: ``None`` (no sharding), ``"all"`` (every device of JAX's default
            backend, `jax.devices()`: every process's devices after
            `jax.distributed.initialize`), a `jax.sharding.Mesh` (its devices, in mesh
            order) or a non-empty sequence of `jax.Device`.

    Raises:
        TypeError: ``devices`` is neither ``None``, a string, a mesh nor a sequence.
        ValueError: another string, an empty sequence, an entry that is not a
            `jax.Device`, a device named twice, or devices of different platforms.
    """
    if devices is None:
        return None
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(
                f"devices is {devices!r}, expected None, 'all', a Mesh or a sequence of "
                "jax devices"
            )
        devices = jax.devices()
    elif isinstance(devices, Mesh):
        devices = devices.devices.flat
    if isinstance(devices, jax.Device):
        raise TypeError(
            f"devices is one device ({devices}), expected a sequence of jax devices: "
            f"[{devices}] or None, 'all'"
        )
    try:
        devices = tuple(devices)
    except TypeError:
        raise TypeError(
            f"devices must be None, 'all', a Mesh or a sequence of jax devices, got "
            f"{type(devices).__name__}"
        ) from None
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(f"devices must be a non-empty sequence of jax devices, got {devices!r}")
    if len(set(devices)) != len(devices):
        raise ValueError(f"devices names a device more than once: {list(devices)}")
    platforms = {d.platform for d in devices}
    if len(platforms) != 1:
        raise ValueError(f"devices mixes platforms {sorted(platforms)}: {list(devices)}")
    if spans_processes(devices):
        devices = tuple(sorted(devices, key=lambda d: d.process_index))  # sorted is stable
    return devices


def resolve_devices(devices):
    """The devices of a batched rollout: ``None`` is one device (the default device),
    anything else as `check_devices`; a list."""
    if devices is None:
        return [_default_device()]
    return list(check_devices(devices))


def _default_device():
    """The device an unsharded jit call runs on: ``jax_default_device`` or the first local
    device of the default backend."""
    d = jax.config.jax_default_device
    if isinstance(d, jax.Device):
        return d
    return jax.local_devices(backend=d)[0] if isinstance(d, str) else jax.local_devices()[0]


def spans_processes(devices) -> bool:
    """Whether ``devices`` (checked, `check_devices`) include another process's device."""
    me = jax.process_index()
    return any(d.process_index != me for d in devices)


def _home(devices):
    """The device whose compiler options and kernel choices the program is traced under:
    this process's first device of ``devices`` (a device of another process cannot be
    this process's default device)."""
    me = jax.process_index()
    return next((d for d in devices if d.process_index == me), devices[0])


def _is_global(x) -> bool:
    return isinstance(x, jax.Array) and not x.is_fully_addressable


def _process_parts(args, in_axes) -> bool:
    """Whether the batched ``args`` are process-local parts (True) or global arrays
    (False); a mixture is an error."""
    kinds = {_is_global(leaf) for x, ax in zip(args, in_axes) if ax is not None
             for leaf in jax.tree_util.tree_leaves(x)}
    if len(kinds) > 1:
        raise ValueError(
            "the batched arguments mix global jax.Arrays (spanning processes) and "
            "process-local arrays: pass every one as this process's part of the batch, "
            "or every one as a global array"
        )
    return kinds != {True}


@functools.lru_cache(maxsize=64)
def _replicate(mesh):
    return jax.jit(lambda x: x, out_shardings=NamedSharding(mesh, P()))


def _part_sizes(mesh, devices, n):
    """``{process: (samples, devices)}`` of every process of ``devices``, from each
    process's ``n`` (one small all-gather over the mesh)."""
    me = jax.process_index()
    mine = sum(d.process_index == me for d in devices)
    x = jax.make_array_from_process_local_data(
        NamedSharding(mesh, P(_AXIS)), np.full(mine, n, np.int32), (len(devices),))
    sizes = np.asarray(_replicate(mesh)(x).addressable_data(0))
    parts = {}
    for d, s in zip(devices, sizes):
        b, k = parts.get(d.process_index, (int(s), 0))
        parts[d.process_index] = (b, k + 1)
    return parts


def _from_parts(mesh, devices, args, in_axes, rows=None):
    """Each process's part of the batch as global arrays on ``mesh``.

    Every process's part is padded (copies of its sample 0) to ``share`` samples per
    device of that process, with ``share`` the largest part per device over the
    processes (``rows(share)`` when given, for blocks); shared arguments are
    replicated. Returns ``(global args, share, finish)``, ``finish`` mapping the global
    outputs to this process's part of them.
    """
    me = jax.process_index()
    if not any(d.process_index == me for d in devices):
        raise ValueError(
            f"devices has no device of process {me}, so it holds no part of the batch: "
            "call from the processes of the devices only, or pass global arrays"
        )
    n = _batch_size(args, in_axes)
    parts = _part_sizes(mesh, devices, n)
    share = max(-(-b // k) for b, k in parts.values())
    if rows is not None:
        share = rows(share)
    mine = parts[me][1] * share
    split, shared = NamedSharding(mesh, P(_AXIS)), NamedSharding(mesh, P())

    def place(x, ax):
        if x is None:
            return None
        if ax is None:
            return jax.device_put(x, shared)
        if mine > n:
            x = _pad(x, mine - n)
        return jax.tree_util.tree_map(
            lambda a: jax.make_array_from_process_local_data(
                split, a, (share * len(devices),) + a.shape[1:]), x)

    def finish(out):
        out = multihost_utils.global_array_to_host_local_array(out, mesh, P(_AXIS))
        return out if mine == n else jax.tree_util.tree_map(lambda o: o[:n], out)

    return tuple(place(x, ax) for x, ax in zip(args, in_axes)), share, finish


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
        with jax.default_device(_home(devices)):
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
    With devices of several processes and process-local batched arguments, each
    process's arguments are its part of the batch and it gets its part of the results
    (`_from_parts`).

    Args:
        fn: a batch-first function, e.g. the kernel of ``jaxrbd.batched.forward_dynamics``;
            module-level, so that its compiled form is found again on the next call.
        devices: ``"all"``, a `Mesh` or a sequence of devices (`check_devices`);
            ``None`` calls ``fn`` under `jaxrbd.jit` without sharding.
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
    static = tuple(sorted(static.items()))
    if devices is None:
        return _unsharded(fn, static)(*args)
    B = _batch_size(args, in_axes)  # its errors name the whole batch, not one share
    run, mesh = _sharded(fn, devices, in_axes, static)
    finish = None
    if nested():  # inside a jit, the outer jit places the arguments
        pass
    elif spans_processes(devices) and _process_parts(args, in_axes):
        args, _, finish = _from_parts(mesh, devices, args, in_axes)
    else:
        split = NamedSharding(mesh, P(_AXIS) if B % len(devices) == 0 else P())
        shared = NamedSharding(mesh, P())
        args = tuple(
            x if x is None else jax.device_put(x, shared if ax is None else split)
            for x, ax in zip(args, in_axes)
        )
    with jax.default_device(_home(devices)):
        out = run(*args)
    return out if finish is None else finish(out)


def _blocks(local, chunk):
    """``(nblk, block)``: equal blocks of at most ``chunk`` samples holding ``local``
    samples with little padding (129 -> 2 x 65, not 2 x 128)."""
    nblk = -(-local // max(1, int(chunk)))
    return nblk, -(-local // nblk)


def blocked_over_devices(one, arrays, devices, chunk=None):
    """``jax.vmap(one)(*arrays)`` in cache-sized blocks, the blocks split over devices.

    The batch-first ``arrays`` are padded (copies of sample 0) to ``ndevices * nblocks *
    block`` and split over a 1-D `Mesh` of ``devices`` with `jax.shard_map`; inside a
    device, equal blocks of at most ``chunk`` samples (default `backend.block_size` for
    the devices: `backend.CHUNK` on CPUs, the whole local batch elsewhere) run
    ``jax.vmap(one)`` one after the other, so that a block's states stay in cache through
    a whole rollout. The padding is dropped from the (batch-first) outputs. With devices
    of several processes, process-local ``arrays`` are this process's part of the batch
    and the outputs its part of the results, as in `shard_batch`.

    Args:
        one: the function of one sample.
        arrays: batch-first arrays of one batch size, at least one sample.
        devices: a non-empty sequence of devices (`check_devices`).
        chunk: samples per block, or None.
    """
    devices = list(devices)
    B, nd = arrays[0].shape[0], len(devices)
    home = _home(devices)
    if chunk is None:  # tuned for the devices the work runs on
        chunk = block_size(device=home)
    block = None  # samples per block, set from the share of each device below

    def run_local(*xs):
        return blocked(jax.vmap(one), xs, block, batch_first=True, in_batch_first=True)

    if nd > 1 and not nested() and spans_processes(devices) and _process_parts(
            arrays, (0,) * len(arrays)):
        mesh = Mesh(np.asarray(devices), (_AXIS,))

        def rows(share):  # the share in whole blocks
            nonlocal block
            nblk, block = _blocks(share, chunk or share)
            return nblk * block

        arrays, _, finish = _from_parts(mesh, devices, arrays, (0,) * len(arrays), rows)
        with jax.default_device(home):
            out = jax.shard_map(run_local, mesh=mesh, in_specs=P(_AXIS), out_specs=P(_AXIS),
                                check_vma=False)(*arrays)
        return finish(out)

    local = -(-B // nd)
    nblk, block = _blocks(local, chunk or local)
    padn = nblk * block * nd - B
    if padn:
        arrays = tuple(_pad(x, padn) for x in arrays)
    # traced under the devices' default device, so that the kernels inside are tuned for
    # them (`jaxrbd._core.backend`), whatever the process's default backend
    if nd == 1:
        with jax.default_device(home):
            out = run_local(*arrays)
    else:
        mesh = Mesh(np.asarray(devices), (_AXIS,))
        spec = P(_AXIS)
        arrays = tuple(jax.device_put(x, NamedSharding(mesh, spec)) for x in arrays)
        with jax.default_device(home):
            out = jax.shard_map(run_local, mesh=mesh, in_specs=spec, out_specs=spec,
                                check_vma=False)(*arrays)
    return out if padn == 0 else jax.tree_util.tree_map(lambda o: o[:B], out)
