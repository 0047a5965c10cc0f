"""One state's frictional contact solve as one native kernel (``ffi_contact.cc``).

`jaxrbd.ground`'s hard step on one state spends most of its time in XLA:CPU's runtime,
not in arithmetic: the solver's loop runs a few hundred to a few thousand small kernels
per step (checks, cone projections, the Newton polish's pivoted elimination), and a flat
program of more than a handful of kernels runs as a dataflow graph on the thread pool,
one task hand-off per kernel (benchmarks/LOG.md). For a model of traversal ``"kernel"``
the step solves its contact problem instead in one C++ function called through XLA's
foreign-function interface, the same algorithm as `jaxrbd.ground._solvers` (whose
iterates, checks and stopping rule it mirrors), built and cached as the dynamics
kernels are (`jaxrbd._core.ffi.build`).

It applies to problems in float64 on the CPU (`supported`). Under `jax.vmap` a second
handler solves the batch in one call, the problems one after the other in C++ (a
``custom_vmap`` rule; operands the batch shares are read in place, not copied), each
exactly as the single-problem kernel solves it; a `jax.vmap` of that again (nested
batches) loops over the outer axis. Gradients never see either (the solve's implicit
`jax.custom_vjp` differentiates the solution, not the iterations).

`hard_terms` is the step's other native call: the mass matrix, bias forces, Delassus
matrix and free velocity of one state or, under `jax.vmap`, of a batch (a handler of
``ffi_kernels.cc``, which holds the tree kernels it reuses).
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from . import ffi
from .backend import on_cpu

__all__ = ["library", "solve", "supported"]

SOURCE = pathlib.Path(__file__).with_name("ffi_contact.cc")
TARGETS = (("jaxrbd_contact_solve", "JaxrbdContactSolve"),
           ("jaxrbd_contact_solve_batch", "JaxrbdContactSolveBatch"))

#: the solver codes of ``ffi_contact.cc``
SOLVER_CODES = {"pgs": 0, "admm": 1}


def library():
    """Build (once, cached) and register the contact kernel (`jaxrbd._core.ffi.build`)."""
    return ffi.build(SOURCE, TARGETS)


def supported(A) -> bool:
    """Whether the problem of Delassus matrix ``A`` (one problem, traced or not) can run
    natively: float64 on the CPU."""
    return A.ndim == 2 and A.dtype == jnp.float64 and on_cpu()


def solve(solver, iterations, rho_scale, tolerance, adaptive, polish, A, c, mu, lam0):
    """``(lam, residual, iterations run)`` of one problem by the native kernel; under
    `jax.vmap`, of the batch by the batched kernel (the same answers per problem)."""
    library()
    attrs = dict(solver=np.int64(SOLVER_CODES[solver]), iterations=np.int64(iterations),
                 rho_scale=np.float64(rho_scale), tolerance=np.float64(tolerance),
                 adaptive=np.int64(adaptive), polish=np.int64(polish))
    m = c.shape[0]

    def outputs(batch):
        return (jax.ShapeDtypeStruct(batch + (m,), A.dtype),
                jax.ShapeDtypeStruct(batch, A.dtype), jax.ShapeDtypeStruct(batch, jnp.int32))

    call = jax.ffi.ffi_call("jaxrbd_contact_solve", outputs(()), vmap_method="sequential")

    @custom_vmap
    def run(A, c, mu, lam0):
        return tuple(call(A, c, mu, lam0, **attrs))

    @run.def_vmap
    def _rule(axis_size, in_batched, A, c, mu, lam0):
        # one call for the batch; a further vmap loops over its own axis ("sequential")
        batch = jax.ffi.ffi_call("jaxrbd_contact_solve_batch", outputs((axis_size,)),
                                 vmap_method="sequential")
        return tuple(batch(A, c, mu, lam0, m=np.int64(m), **attrs)), (True, True, True)

    return run(A, c, mu, lam0)


#: the batched dynamics terms of the hard step, in ``ffi_kernels.cc`` (the tree kernels)
HARD_TARGETS = (("jaxrbd_hard_terms_batch", "JaxrbdHardTermsBatch"),)


def hard_terms_supported(model, q, G) -> bool:
    """Whether `hard_terms` runs natively for one state (traced or not): a model whose
    dynamics run as native kernels (`jaxrbd._core.ffi.supported`), ``G`` float64. The
    caller passes a plain model only (a `CoupledModel`'s dynamics are projected)."""
    return ffi.supported(model, q) and G.ndim == 2 and G.dtype == jnp.float64


def hard_terms(reference, model, q, qd, tau, G, dt, reg):
    """``(A, W, v)`` of one state of the hard contact step by the native kernel:
    ``A = G H^-1 G^T + diag(R)`` `(3K, 3K)` (the regularised Delassus matrix, ``R = reg
    (d + mean(d) 1e-3)`` with ``d`` its diagonal), ``W = H^-1 G^T`` `(nv, 3K)` and
    ``v = qd + dt H^-1 (tau - C(q, qd))`` `(nv,)`, from the contact Jacobian ``G (3K, nv)``.

    The kernel factors ``H = L^T L`` along the tree (Featherstone 2008, section 6.5)
    rather than densely, so it agrees with ``reference`` (the XLA program of the same
    terms, same signature) to round-off. Under `jax.vmap` over states it solves the
    batch in one call; derivatives (``custom_jvp``) and batches of models or of ``dt``
    and ``reg`` run ``reference``. `hard_terms_supported` must hold.
    """
    ffi.build(ffi.SOURCE, HARD_TARGETS)
    m, nv = G.shape

    def outputs(batch):
        f = q.dtype
        return (jax.ShapeDtypeStruct(batch + (m, m), f),
                jax.ShapeDtypeStruct(batch + (nv, m), f), jax.ShapeDtypeStruct(batch + (nv,), f))

    def call(batch, model, q, qd, tau, G, dt, reg):
        run = jax.ffi.ffi_call("jaxrbd_hard_terms_batch", outputs(batch),
                               vmap_method="sequential")
        return tuple(run(*ffi._buffers(model), q, qd, tau, G, dt, reg,
                         nq=np.int64(model.nq), m=np.int64(m)))

    @custom_vmap
    def native(model, q, qd, tau, G, dt, reg):
        return call((), model, q, qd, tau, G, dt, reg)

    @native.def_vmap
    def _rule(axis_size, in_batched, model, q, qd, tau, G, dt, reg):
        model_b, rest = in_batched[0], in_batched[1:]
        if any(jax.tree_util.tree_leaves(model_b)) or rest[4] or rest[5]:
            axes = (jax.tree_util.tree_map(lambda b: 0 if b else None, model_b),) + tuple(
                0 if b else None for b in rest)
            out = jax.vmap(reference, in_axes=axes)(model, q, qd, tau, G, dt, reg)
        else:
            out = call((axis_size,), model, q, qd, tau, G, dt, reg)
        return out, (True, True, True)

    @jax.custom_jvp
    def terms(model, q, qd, tau, G, dt, reg):
        return native(model, q, qd, tau, G, dt, reg)

    @terms.defjvp
    def _jvp(primals, tangents):
        return jax.jvp(reference, primals, tangents)

    return terms(model, q, qd, tau, G, dt, reg)
