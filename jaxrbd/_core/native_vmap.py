"""`jax.vmap` of the public functions runs the native batch-trailing implementation.

Each algorithm has a single-state form and a batch-trailing form (``(..., B)``).
`native_vmap` builds a function that

* evaluates the single-state form when called plainly,
* under `jax.vmap` over states (the model unbatched), moves the batch to the last
  axis and runs the batch-trailing form in blocks sized for the device
  (`jaxrbd._core.backend.block_size`, via ``custom_vmap``),
* under `jax.vmap` over models (stacked leaves), falls back to ordinary batching,
* differentiates through the plain single-state code (``custom_jvp`` around the
  ``custom_vmap``), so `jax.grad`, `jax.jacfwd` and their vmaps behave as usual.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from .backend import CHUNK, block_size, on_cpu

__all__ = ["CHUNK", "blocked", "default_chunk", "native_vmap", "on_cpu", "vmap_in_blocks"]


def default_chunk(cpu_chunk: int = CHUNK) -> int | None:
    """Samples per block by default (`jaxrbd._core.backend.block_size`): ``cpu_chunk`` on a
    CPU, ``None`` (the whole batch in one block) elsewhere."""
    return block_size(cpu_chunk)


def blocked(fn, arrays, chunk=None, *, batch_first=False, in_batch_first=False):
    """Apply ``fn`` to batched ``arrays`` in blocks of ``chunk`` samples, one after the
    other (a `lax.map`); the one blocking helper of jaxrbd.

    Args:
        fn: ``fn(*block_arrays)`` -> a pytree of arrays with the block's samples on their
            last axis, or on their first with ``batch_first=True``.
        arrays: arrays with the batch on their last axis (``(..., N)``), or on their
            first with ``in_batch_first=True`` (``(N, ...)``).
        chunk: samples per block; ``None`` takes `default_chunk` (`CHUNK` on a CPU, the
            whole batch elsewhere). A batch that is not a multiple is padded with copies
            of its first sample (valid states), whose results are dropped.

    Returns:
        ``fn``'s outputs for the whole batch, joined along the batch axis.
    """
    chunk = default_chunk() if chunk is None else chunk
    axis = 0 if in_batch_first else -1
    N = arrays[0].shape[axis]
    if chunk is None or N <= chunk:
        return fn(*arrays)
    nblk = -(-N // chunk)
    padn = nblk * chunk - N

    def split(x):
        if padn:
            first = x[:1] if in_batch_first else x[..., :1]
            x = jnp.concatenate([x, jnp.repeat(first, padn, axis=axis)], axis=axis)
        if in_batch_first:
            return x.reshape((nblk, chunk) + x.shape[1:])
        return jnp.moveaxis(x.reshape(x.shape[:-1] + (nblk, chunk)), -2, 0)

    out = jax.lax.map(lambda xs: fn(*xs), tuple(split(x) for x in arrays))

    def merge(o):
        if batch_first:
            return o.reshape((nblk * chunk,) + o.shape[2:])[:N]
        o = jnp.moveaxis(o, 0, -2)
        return o.reshape(o.shape[:-2] + (nblk * chunk,))[..., :N]

    return jax.tree_util.tree_map(merge, out)


def native_vmap(batched_impl, *, batch_first=False, kernel=None):
    """Wrap ``batched_impl(model, *arrays)`` (arrays with a trailing batch axis; output
    with a trailing batch axis, or a pytree of such) into a single-state function
    ``f(model, *arrays)``.

    ``kernel(model, *arrays, batch=False)``, if given, computes one state another way (the
    native kernel of ``traversal="kernel"``, `jaxrbd._core.ffi`) or returns ``None`` where
    it does not apply; plain calls use it, and so does `jax.vmap` over states with
    ``batch=True`` (every array with a leading batch axis, outputs too), while
    derivatives keep to ``batched_impl``.

    Any of ``arrays`` may be ``None`` (an optional argument such as ``f_ext``): it is
    passed on to ``batched_impl`` as ``None``, and each pattern of present arguments gets
    its own wrapper (built once).

    With ``batch_first=True`` the outputs of ``batched_impl`` carry the batch as their
    FIRST axis and ``batched_impl`` blocks the batch itself (the derivative matrices,
    whose two phases block differently), so the vmap rule calls it on the whole batch.
    """
    wrappers = {}

    def f(model, *arrays):
        present = tuple(a is not None for a in arrays)
        g = wrappers.get(present)
        if g is None:
            def impl(model, *xs):
                it = iter(xs)
                return batched_impl(model, *(next(it) if p else None for p in present))

            one = None
            if kernel is not None:
                def one(model, *xs, batch=False):
                    it = iter(xs)
                    return kernel(model, *(next(it) if p else None for p in present),
                                  batch=batch)

            g = wrappers[present] = _native_vmap(impl, batch_first, one)
        return g(model, *(a for a in arrays if a is not None))

    return f


def _native_vmap(batched_impl, batch_first, kernel=None):
    """`native_vmap` for arrays that are all present."""
    if batch_first:
        unbatch, rebatch = (lambda o: o[0]), (lambda o: o)
        run = batched_impl
    else:
        unbatch, rebatch = (lambda o: o[..., 0]), (lambda o: jnp.moveaxis(o, -1, 0))

        def run(model, *xs):
            return blocked(lambda *ys: batched_impl(model, *ys), xs)

    def plain(model, *arrays):
        out = batched_impl(model, *(a[..., None] for a in arrays))
        return jax.tree_util.tree_map(unbatch, out)

    def rule(axis_size, in_batched, model, *arrays):
        arr_b = in_batched[1:]
        out = kernel_batch_rule(plain, kernel, axis_size, in_batched, model, *arrays)
        if out is not None:
            return out
        trailing = tuple(
            jnp.moveaxis(a, 0, -1) if b else jnp.broadcast_to(a[..., None], a.shape + (axis_size,))
            for a, b in zip(arrays, arr_b)
        )
        return jax.tree_util.tree_map(rebatch, run(model, *trailing))

    return _with_vmap_rule(plain, rule, kernel)


def kernel_batch_rule(plain, kernel, axis_size, in_batched, model, *arrays):
    """The batching of a native kernel's call ``plain(model, *arrays)`` shared by
    `native_vmap` and the kernel rules: a batch of models (stacked leaves) is ordinary
    batching of ``plain``; a batch of states of one model is one call of
    ``kernel(model, *states, batch=True)`` (``kernel`` may be ``None`` or return
    ``None``: then this returns ``None`` for the caller's own rule), the unbatched states
    broadcast to the batch on a leading axis."""
    model_b, arr_b = in_batched[0], in_batched[1:]
    if any(jax.tree_util.tree_leaves(model_b)):
        axes = (jax.tree_util.tree_map(lambda b: 0 if b else None, model_b),) + tuple(
            0 if b else None for b in arr_b
        )
        return jax.vmap(plain, in_axes=axes)(model, *arrays)
    if kernel is None:
        return None
    leading = tuple(a if b else jnp.broadcast_to(a, (axis_size,) + a.shape)
                    for a, b in zip(arrays, arr_b))
    return kernel(model, *leading, batch=True)


def _with_vmap_rule(plain, rule, kernel=None):
    """``plain`` whose `jax.vmap` runs ``rule(axis_size, in_batched, *args)`` (outputs
    batched on axis 0), and whose derivatives go through ``plain`` itself: a
    ``custom_vmap`` inside a ``custom_jvp``, so `jax.grad`, `jax.jacfwd` and their vmaps
    are those of ordinary JAX code. The one wrapper of `native_vmap` and
    `vmap_in_blocks`. ``kernel(*args)`` (or ``None``) replaces ``plain`` in plain calls
    where it returns a result."""

    @custom_vmap
    def fast(*args):
        out = None if kernel is None else kernel(*args)
        return plain(*args) if out is None else out

    @fast.def_vmap
    def _rule(axis_size, in_batched, *args):
        out = rule(axis_size, in_batched, *args)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    @jax.custom_jvp
    def f(*args):
        return fast(*args)

    @f.defjvp
    def _jvp(primals, tangents):
        return jax.jvp(plain, primals, tangents)

    return f


def vmap_in_blocks(fn, chunk):
    """``fn(*args)`` (one sample; ``args`` pytrees of arrays) whose `jax.vmap` runs the
    batch in blocks of ``chunk(args)`` samples, one after the other (`blocked`: a
    `lax.map` of the vmapped ``fn``), so that a block's dense intermediates stay in
    cache; ``chunk`` returns ``None`` for the whole batch in one block.

    Unbatched leaves (a shared model, a constraint set) stay outside the blocks; any
    leaf may be batched (a `stack_models` batch is blocked with its states). Results
    equal ``jax.vmap(fn)``. Derivatives go through the plain ``fn`` (``custom_jvp``
    around the ``custom_vmap``), so `jax.grad` and `jax.jacfwd` behave as usual.
    """

    def rule(axis_size, in_batched, *args):
        leaves, treedef = jax.tree_util.tree_flatten(args)
        flags = jax.tree_util.tree_leaves(in_batched)
        where = [i for i, b in enumerate(flags) if b]

        def block(*xs):
            def one(*x):
                full = list(leaves)
                for i, xi in zip(where, x):
                    full[i] = xi
                return fn(*jax.tree_util.tree_unflatten(treedef, full))

            return jax.vmap(one)(*xs)

        return blocked(block, [leaves[i] for i in where], chunk(args),
                       batch_first=True, in_batch_first=True)

    return _with_vmap_rule(fn, rule)
