"""A time step's configuration move as one native kernel (``ffi_move.cc``).

``q (+) v dt`` on the joint manifolds (`jaxrbd._configuration.move`) is a few dozen
elementwise products per quaternion, and in the gradient of a rollout it appears with
its linearisation and its transpose in every integrator stage: for a floating-base robot
those fusions are about half of the program XLA compiles (benchmarks/LOG.md). For a model
of traversal ``"kernel"`` the move runs instead as one C++ function called through XLA's
foreign-function interface, and reverse mode as a second one (the vector-Jacobian
product), built and cached as the dynamics kernels are (`jaxrbd._core.ffi.build`).

The kernels compute what `jaxrbd._configuration.integrate_batched` computes, with the
same formulas; `jax.vmap` passes them batches (``vmap_method="broadcast_all"``), forward
mode (`jax.jvp`) and second derivatives differentiate the XLA program (``reference``),
through `jaxrbd._core.native_linear`'s `LinearMap`.
"""

from __future__ import annotations

import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from . import ffi
from .native_linear import LinearMap, apply, pair

__all__ = ["library", "move", "supported"]

SOURCE = pathlib.Path(__file__).with_name("ffi_move.cc")
TARGETS = (("jaxrbd_move", "JaxrbdMove"), ("jaxrbd_move_vjp", "JaxrbdMoveVjp"))

#: the block kinds of ``ffi_move.cc``'s table
BLOCK_KINDS = {"plain": 0, "spherical": 1, "free": 2}


def library():
    """Build (once, cached) and register the move's kernels (`jaxrbd._core.ffi.build`)."""
    return ffi.build(SOURCE, TARGETS)


def supported(model, q, v, dt) -> bool:
    """Whether the move of one state (traced or not) runs natively: where the model's
    dynamics do (`jaxrbd._core.ffi.supported`), for float64 ``v`` and scalar ``dt``."""
    return (ffi.supported(model, q) and v.ndim == 1 and jnp.ndim(dt) == 0
            and jnp.result_type(v) == jnp.float64 and jnp.result_type(dt) == jnp.float64)


def table(model) -> np.ndarray:
    """``(kind, q start, v start, length)`` per block, flattened (``ffi_move.cc``): runs
    of plain coordinates (``q_dot = v``) and spherical and free joints, in body order."""
    rows = []
    for b in range(1, model.nbodies):
        kind, qs, vs = model.joint_kind[b], model.q_start[b], model.v_start[b]
        n = model.joint_nq(b)
        if kind == "fixed" or n == 0:
            continue
        if kind in ("spherical", "free"):
            rows.append([BLOCK_KINDS[kind], qs, vs, n])
        elif rows and rows[-1][0] == 0 and rows[-1][1] + rows[-1][3] == qs \
                and rows[-1][2] + rows[-1][3] == vs:
            rows[-1][3] += n  # extends the run before it
        else:
            rows.append([0, qs, vs, n])
    return np.asarray(rows, np.int64).reshape(-1)


@functools.cache
def _maps(treedef, reference):
    """The move's primal and its tangent map for one model structure (the table, and
    ``reference(model, q, v, dt)``, the XLA program, which reads only the structure)."""
    n = treedef.num_leaves
    model = jax.tree_util.tree_unflatten(treedef, [None] * n)
    attrs = dict(table=table(model), nq=np.int64(model.nq), nv=np.int64(model.nv))

    def shapes(*xs):
        return [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs]

    def primal(q, v, dt):
        call = jax.ffi.ffi_call("jaxrbd_move", shapes(q)[0], vmap_method="broadcast_all")
        return call(q, v, dt, **attrs)

    def ref(q, v, dt):
        return reference(model, q, v, dt)

    # the tangent (dq, dv, ddt) -> dq+ at (q, v, dt), by the XLA program; its transpose
    # is the native vector-Jacobian product
    def tangent_reference(res, lin):
        return (jax.jvp(ref, tuple(res), tuple(lin))[1],)

    def transpose_reference(res, cts):
        return jax.vjp(ref, *res)[1](cts[0])

    # differentiable through the reference, so that a batch of transposes (the
    # batching rule below) can be differentiated again (`jax.hessian`)
    @jax.custom_jvp
    def vjp(q, v, dt, ct):
        call = jax.ffi.ffi_call("jaxrbd_move_vjp", shapes(q, v, dt),
                                vmap_method="broadcast_all")
        return tuple(call(q, v, dt, ct, **attrs))

    @vjp.defjvp
    def _vjp_jvp(primals, tangents):
        def f(*a):
            return tuple(transpose_reference(a[:3], a[3:]))
        return jax.jvp(f, primals, tangents)

    def transpose_native(res, cts):
        return vjp(*res, cts[0])

    def transpose_batched(args, axes):
        return jax.vmap(lambda *a: transpose_native(a[:3], a[3:]), in_axes=axes)(*args)

    dmove = pair(LinearMap(tangent_reference, name="dmove", shapes=lambda res, lin: res[:1]),
                 LinearMap(transpose_reference, transpose_native, name="dmove^T",
                           shapes=lambda res, lin: res, batched=transpose_batched))

    @jax.custom_jvp
    def run(q, v, dt):
        return primal(q, v, dt)

    @run.defjvp
    def _jvp(primals, tangents):
        return run(*primals), apply(dmove, tuple(primals), tuple(tangents))[0]

    return run


def move(model, q, v, dt, reference):
    """``q (+) v dt`` of one state by the native kernel (`supported` must hold), with the
    derivatives of the XLA program ``reference(model, q, v, dt)`` (the same function)."""
    library()
    run = _maps(jax.tree_util.tree_structure(model), reference)
    return run(q, v, jnp.asarray(dt, q.dtype))
