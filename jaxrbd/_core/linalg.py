"""Dense linear algebra on batches that cannot deadlock XLA:CPU.

jaxlib 0.10's CPU LAPACK kernels (Cholesky, triangular solve, eigh, SVD, ...) split a
batch over XLA's intra-op thread pool and block until the pieces finish. Two such
kernels running at once (independent operations of one program) can occupy every thread
of the pool while waiting for pieces that never get a thread: the process hangs for
ever (seen with gdb: two pool threads in ``jax::ParallelBatchMap`` under
``lapack_dsyevd_ffi`` and ``lapack_dpotrf_ffi``, each waiting on a ``BlockingCounter``).
A kernel splits a batch when ``batch · cost`` reaches `PARALLEL_THRESHOLD`, where
``cost`` is the kernel's own flop estimate for one matrix (read off jaxlib 0.10.2's
machine code): Cholesky ``n³/3``, triangular solve ``n² k``, eigh ``5 n³``, SVD
``10 m n min(m, n)``. Below it, and always for a batch of one, it runs on the
calling thread.

The functions here take ONE matrix (use `jax.vmap` for batches, as with `jnp.linalg`) and
call the LAPACK kernels on blocks whose cost, estimated at twice jaxlib's, stays below
that threshold (one matrix per call for the larger ones): under `jax.vmap` (nested or
not) the batch is flattened and cut into blocks run by `lax.map` (`jaxrbd._core.native_vmap.blocked`).
The guard is on whenever the work runs on a CPU (`jaxrbd._core.backend.lapack_guard`); on
other devices the same blocks would cost a loop of launches, so the whole batch goes to
one call. Derivatives are defined here (forward mode; reverse
mode by transposition) so that they run through the same blocked kernels.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from .backend import lapack_guard
from .native_vmap import blocked

__all__ = ["cho_solve", "cholesky", "eigh", "pinv", "solve_triangular", "svd"]

#: jaxlib 0.10.x splits a LAPACK batch over the thread pool when ``batch · cost`` (its
#: flop estimate per matrix) reaches this; below it, the calling thread runs the batch.
PARALLEL_THRESHOLD = 200_000

#: Our per-matrix cost estimates are this many times jaxlib's (a margin for its formulas).
COST_MARGIN = 2


def block_size(cost: int) -> int:
    """Matrices per LAPACK call for a per-matrix ``cost`` (jaxlib's estimate): the most
    that stay below `PARALLEL_THRESHOLD` with `COST_MARGIN`, and at least one."""
    return max(1, (PARALLEL_THRESHOLD - 1) // max(COST_MARGIN * int(cost), 1))


def _blocked_kernel(kernel, cost):
    """``run(*xs)``: ``kernel`` (arrays with one leading batch axis; a pytree out) applied to
    blocks of the batch small enough to run on one thread, under any number of vmaps.
    ``cost(*shapes)`` is jaxlib's flop estimate for one matrix (shapes without the batch)."""

    @custom_vmap
    def on_block(*xs):
        return kernel(*xs)

    @on_block.def_vmap
    def _rule(axis_size, in_batched, *xs):
        # (axis_size, k, ...) -> (axis_size * k, ...): one flat batch, then re-blocked
        xs = [
            x if b else jnp.broadcast_to(x, (axis_size,) + x.shape) for x, b in zip(xs, in_batched)
        ]
        k = xs[0].shape[1]
        out = run(*(x.reshape((axis_size * k,) + x.shape[2:]) for x in xs))
        out = jax.tree_util.tree_map(lambda o: o.reshape((axis_size, k) + o.shape[1:]), out)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    def run(*xs):
        N = xs[0].shape[0]
        # the deadlock is XLA:CPU's: other backends take the whole batch in one call
        chunk = block_size(cost(*(x.shape[1:] for x in xs))) if lapack_guard() else N
        return blocked(on_block, xs, chunk, batch_first=True, in_batch_first=True)

    return run


def _one(run):
    """A one-matrix function from a blocked batched ``run``."""

    def f(*xs):
        out = run(*(x[None] for x in xs))
        return jax.tree_util.tree_map(lambda o: o[0], out)

    return f


# jaxlib 0.10.2's per-matrix cost estimates (see the module docstring)
_chol = _one(_blocked_kernel(jnp.linalg.cholesky, lambda a: a[0] ** 3 // 3))
_eigh = _one(_blocked_kernel(jnp.linalg.eigh, lambda a: 5 * a[0] ** 3))
_svd = _one(
    _blocked_kernel(
        lambda a: jnp.linalg.svd(a, full_matrices=True), lambda a: 10 * a[0] * a[1] * min(a)
    )
)


@functools.cache
def _trsm(lower, trans):
    def kernel(L, B):
        return jax.lax.linalg.triangular_solve(L, B, left_side=True, lower=lower, transpose_a=trans)

    return _one(_blocked_kernel(kernel, lambda L, B: B[0] * B[1] * L[0]))  # rows · cols · lda


def _as_cols(B):
    return (B[:, None], True) if B.ndim == 1 else (B, False)


def solve_triangular(L, B, lower=True, trans=False):
    """``op(L)⁻¹ B`` for a triangular ``L (n, n)`` (``op(L) = Lᵀ`` if ``trans``) and
    ``B (n,)`` or ``(n, k)``; reads only the ``lower`` (or upper) triangle of ``L``.
    Differentiable in ``L`` and ``B`` (`jax.lax.custom_linear_solve`)."""
    lower, trans = bool(lower), bool(trans)
    L = L * (jnp.tril(jnp.ones_like(L)) if lower else jnp.triu(jnp.ones_like(L)))

    def with_cols(t):
        def solve(_matvec, b):
            b2, vec = _as_cols(b)
            x = _trsm(lower, t)(jax.lax.stop_gradient(L), b2)
            return x[:, 0] if vec else x

        return solve

    return jax.lax.custom_linear_solve(
        lambda x: (L.T if trans else L) @ x,
        B,
        solve=with_cols(trans),
        transpose_solve=with_cols(not trans),
    )


@jax.custom_jvp
def cholesky(A):
    """Lower Cholesky factor ``L`` of a symmetric positive definite ``A (n, n)``.

    As `jnp.linalg.cholesky` (NaN where ``A`` is not positive definite), run safely in
    batches (see the module docstring).
    """
    return _chol(A)


@cholesky.defjvp
def _cholesky_jvp(primals, tangents):
    (A,), (dA,) = primals, tangents
    L = cholesky(A)
    dA = 0.5 * (dA + dA.T)
    # dL = L Φ(L⁻¹ dA L⁻ᵀ), Φ: lower triangle with the diagonal halved
    Y = solve_triangular(L, solve_triangular(L, dA, True, False).T, True, False).T
    # elementwise (a diagonal built by jnp.diag is a scatter, a loop on XLA:CPU)
    eye = jnp.eye(Y.shape[-1], dtype=bool)
    phi = jnp.where(eye, 0.5 * Y, jnp.tril(Y))
    return L, L @ phi


def cho_solve(L, B):
    """``A⁻¹ B`` from the lower Cholesky factor ``L`` of ``A``; ``B (n,)`` or ``(n, k)``."""
    return solve_triangular(L, solve_triangular(L, B, True, False), True, True)


def eigh(A):
    """``(w, V)`` with ``A = V diag(w) Vᵀ`` for a symmetric ``A (n, n)``, ascending ``w``
    (as `jnp.linalg.eigh`, blocked; not differentiable)."""
    return _eigh(jax.lax.stop_gradient(A))


def svd(A):
    """``(U, s, Vt)``, full matrices, of ``A (m, n)`` (as `jnp.linalg.svd`, blocked; not
    differentiable)."""
    return _svd(jax.lax.stop_gradient(A))


def pinv(A, rcond=None):
    """Moore–Penrose pseudo-inverse of ``A (m, n)``: singular values at most
    ``rcond · max σ`` count as zero (default ``10 · max(m, n) · eps``). Not differentiable."""
    m, n = A.shape
    if rcond is None:
        rcond = 10.0 * max(m, n) * float(jnp.finfo(A.dtype).eps)
    U, s, Vt = svd(A)
    k = min(m, n)
    keep = s > rcond * jnp.max(s)
    sinv = jnp.where(keep, 1.0 / jnp.where(keep, s, 1.0), 0.0)
    return (Vt[:k].T * sinv[None, :]) @ U[:, :k].T
