"""Iterative solvers of the frictional contact problem, with implicit gradients.

The problem (one time step, ``K`` contacts, impulses ``lam = [l_n, l_t1, l_t2]`` per
contact, stacked into ``(3K,)``): with the Delassus matrix ``A = G H^-1 G^T`` (plus a
small diagonal regularisation) and the contact velocity ``u = A lam + c``, find ``lam``
such that for every contact

* Signorini: ``l_n >= 0``, ``u_n >= 0``, ``l_n u_n = 0``;
* Coulomb (maximal dissipation): ``|l_t| <= mu l_n``, and ``u_t = 0`` when
  ``|l_t| < mu l_n``, ``u_t = -a l_t`` (``a >= 0``) when on the boundary of the cone.

Equivalently ``lam`` is a fixed point of the *staggered projection map*
``F(lam) = [max(0, l_n - r_n u_n); P_{mu l_n'}(l_t - r_t u_t)]`` per contact, with any
positive steps ``r`` and ``P_rho`` the projection onto the disk of radius ``rho``
(Acary and Brogliato 2008; the same fixed points as De Saxce's cone complementarity
form, De Saxce and Feng 1991). Two solvers iterate towards it, until the largest
violation of the conditions (`natural_residual`, m/s) is below a tolerance or for a
maximal number of iterations:

* ``"pgs"``: projected Gauss-Seidel, one contact after the other, each with its own
  steps ``r_n = 1 / A_nn``, ``r_t = 2 / (A_t1t1 + A_t2t2)`` (Moreau 1988, Jean 1999).
  Cheap per sweep, but it can settle into a cycle between two answers when a contact's
  normal and tangential rows are strongly coupled (a quadruped's feet on long legs);
* ``"admm"`` (the default of `HardContact`): the alternating direction method of
  multipliers on the second-order cone with De Saxce's correction ``mu |u_t|`` added
  to ``u_n`` at every iteration
  (Carpentier et al. 2024): one ``(A + rho I)^-1`` per step, then a matrix-vector
  product and a cone projection per iteration, all contacts at once.

Gradients never go through the iterations: `solve` is a `jax.custom_vjp` whose
backward pass applies the implicit function theorem to ``lam = F(lam, A, c, mu)`` at
the returned impulses. It is the exact derivative of the solution where the solve has
converged and the solution is strictly complementary (no contact exactly at the switch
between open and closed, or between sticking and sliding); at such a switch the
solution is not differentiable and the rule returns one of its one-sided derivatives:
``(I - dF/dlam)^T w = g`` (a dense LU solve with partial pivoting, written here in
array operations so that it batches without LAPACK), then ``w`` goes back through
``dF/d(A, c, mu)``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from .._core import linalg as _linalg

__all__ = ["SOLVERS", "fixed_point_map", "natural_residual", "project_cone", "solve"]

SOLVERS = ("pgs", "admm")


# ---------------------------------------------------------------- projections


def _safe_norm(x):
    n2 = jnp.sum(x * x, axis=-1)
    pos = n2 > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, n2, 1.0)), 0.0), pos


def project_disk(x, rho):
    """Projection of ``x (..., 2)`` onto the disk of radius ``rho (...)``, rho >= 0."""
    n2 = jnp.sum(x * x, axis=-1)
    out = n2 > rho * rho
    norm = jnp.sqrt(jnp.where(out, n2, 1.0))
    scale = jnp.where(out, rho / jnp.where(out, norm, 1.0), 1.0)
    return x * scale[..., None]


def project_cone(lam, mu):
    """Projection of ``lam (..., 3) = [n, t1, t2]`` onto ``{|t| <= mu n}``."""
    n, t = lam[..., 0], lam[..., 1:]
    s, pos = _safe_norm(t)
    inside = s <= mu * n
    polar = mu * s <= -n
    alpha = (n + mu * s) / (1.0 + mu * mu)
    direction = t / jnp.where(pos, s, 1.0)[..., None]
    boundary = jnp.concatenate([alpha[..., None], (mu * alpha)[..., None] * direction], axis=-1)
    return jnp.where(inside[..., None], lam, jnp.where(polar[..., None], 0.0, boundary))


# ---------------------------------------------------------------- the fixed-point map


def steps(A):
    """Per-contact steps ``r_n = 1/A_nn`` and ``r_t = 2/(A_t1t1 + A_t2t2)``, `(K,)` each."""
    d = jnp.diagonal(A).reshape(-1, 3)
    return 1.0 / d[:, 0], 2.0 / (d[:, 1] + d[:, 2])


def fixed_point_map(lam, A, c, mu, r_n, r_t):
    """The staggered projection map ``F`` (all contacts at once, Jacobi)."""
    u = (A @ lam + c).reshape(-1, 3)
    L = lam.reshape(-1, 3)
    ln = jnp.maximum(0.0, L[:, 0] - r_n * u[:, 0])
    lt = project_disk(L[:, 1:] - r_t[:, None] * u[:, 1:], mu * ln)
    return jnp.concatenate([ln[:, None], lt], axis=1).reshape(-1)


def natural_residual(lam, A, c, mu):
    """Largest violation of the contact conditions, in velocity units [m/s]:
    ``max |(lam - F(lam)) / r|`` (zero exactly at a solution)."""
    r_n, r_t = steps(A)
    d = (lam - fixed_point_map(lam, A, c, mu, r_n, r_t)).reshape(-1, 3)
    return jnp.max(jnp.abs(d / jnp.stack([r_n, r_t, r_t], axis=1)))


# ---------------------------------------------------------------- solvers

#: Iterations between two checks of the residual (each check costs one product with A).
CHECK_EVERY = 10


def _pgs(A, c, mu, lam0):
    """``(state, update, impulses)`` of projected Gauss-Seidel; one update is one sweep."""
    K = mu.shape[0]
    r_n, r_t = steps(A)

    def contact(lam, k):
        # K is the (small, static) number of collidable points: the contacts of one
        # sweep are unrolled, so every update is a fixed slice
        rows = slice(3 * k, 3 * k + 3)
        u = A[rows] @ lam + c[rows]
        ln = jnp.maximum(0.0, lam[3 * k] - r_n[k] * u[0])
        lt = project_disk(lam[3 * k + 1 : 3 * k + 3] - r_t[k] * u[1:], mu[k] * ln)
        return lam.at[rows].set(jnp.concatenate([ln[None], lt]))

    def sweep(_, lam):
        for k in range(K):
            lam = contact(lam, k)
        return lam

    return lam0, sweep, lambda lam: lam


def _admm(A, c, mu, lam0, rho_scale):
    """``(state, update, impulses)`` of ADMM with De Saxce's correction."""
    m = A.shape[0]
    rho = rho_scale * jnp.mean(jnp.diagonal(A))
    eye = jnp.eye(m, dtype=A.dtype)
    Minv = _linalg.cho_solve(_linalg.cholesky(A + rho * eye), eye)

    def desaxce(x):
        u = (A @ x + c).reshape(-1, 3)
        s = mu * jnp.sqrt(jnp.sum(u[:, 1:] ** 2, axis=1))
        return jnp.concatenate([s[:, None], jnp.zeros_like(u[:, 1:])], axis=1).reshape(-1)

    def it(_, state):
        z, y = state
        x = Minv @ (rho * z - y - c - desaxce(z))
        z_new = project_cone((x + y / rho).reshape(-1, 3), mu).reshape(-1)
        y = y + rho * (x - z_new)
        return z_new, y

    z0 = project_cone(lam0.reshape(-1, 3), mu).reshape(-1)
    y0 = -(A @ z0 + c + desaxce(z0))
    return (z0, y0), it, lambda state: state[0]


def _run(solver, iterations, rho_scale, tolerance, A, c, mu, lam0):
    """``(lam, residual, iterations run)``.

    With ``tolerance > 0`` the solver stops at the first check (every `CHECK_EVERY`
    iterations) where the residual is at most ``tolerance``, after ``iterations`` at
    most; with ``tolerance = 0`` it runs exactly ``iterations``.
    """
    if solver == "pgs":
        state, update, impulses = _pgs(A, c, mu, lam0)
    else:
        state, update, impulses = _admm(A, c, mu, lam0, rho_scale)
    if tolerance <= 0:
        lam = impulses(lax.fori_loop(0, iterations, update, state))
        return lam, natural_residual(lam, A, c, mu), jnp.asarray(iterations, jnp.int32)

    def unfinished(carry):
        _, k, res = carry
        return (k < iterations) & (res > tolerance)

    def block(carry):
        state, k, _ = carry
        n = jnp.minimum(CHECK_EVERY, iterations - k)
        state = lax.fori_loop(0, n, update, state)
        return state, k + n, natural_residual(impulses(state), A, c, mu)

    start = (state, jnp.asarray(0, jnp.int32), jnp.asarray(jnp.inf, A.dtype))
    state, k, res = lax.while_loop(unfinished, block, start)
    return impulses(state), res, k


# ---------------------------------------------------------------- implicit gradients


def lu_solve(M, b):
    """``M^-1 b`` for a small dense ``M (n, n)`` by Gaussian elimination with partial
    pivoting, in array operations (batches under `jax.vmap` without LAPACK calls)."""
    n = M.shape[0]
    aug = jnp.concatenate([M, b[:, None]], axis=1)
    rows = jnp.arange(n)

    def eliminate(k, aug):
        col = jnp.where(rows >= k, jnp.abs(aug[:, k]), -1.0)
        p = jnp.argmax(col)
        rk, rp = aug[k], aug[p]
        aug = aug.at[k].set(rp).at[p].set(rk)
        piv = aug[k, k]
        piv = jnp.where(piv == 0, jnp.finfo(aug.dtype).tiny, piv)
        f = jnp.where(rows > k, aug[:, k] / piv, 0.0)
        return aug - f[:, None] * aug[k][None, :]

    aug = lax.fori_loop(0, n, eliminate, aug)
    U, y = aug[:, :n], aug[:, n]

    def back(i, x):
        k = n - 1 - i
        piv = U[k, k]
        piv = jnp.where(piv == 0, jnp.finfo(U.dtype).tiny, piv)
        return x.at[k].set((y[k] - U[k] @ x) / piv)

    return lax.fori_loop(0, n, back, jnp.zeros_like(y))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3))
def solve(solver, iterations, rho_scale, tolerance, A, c, mu, lam0):
    """Contact impulses `(3K,)` for ``u = A lam + c`` (see the module docstring), the
    residual `natural_residual` [m/s] they leave and the number of iterations run.

    ``lam0`` (a warm start) changes the solution only within the solver's tolerance (by
    as much as the residual left when the solver stops unconverged) and gets no
    gradient; the residual and the count carry no gradient either.
    """
    return _run(solver, iterations, rho_scale, tolerance, A, c, mu, lax.stop_gradient(lam0))


def _solve_fwd(solver, iterations, rho_scale, tolerance, A, c, mu, lam0):
    out = _run(solver, iterations, rho_scale, tolerance, A, c, mu, lax.stop_gradient(lam0))
    return out, (A, c, mu, out[0])


def _solve_bwd(solver, iterations, rho_scale, tolerance, res, cotangents):
    A, c, mu, lam = res
    g = cotangents[0]  # the residual and the iteration count carry no gradient
    # the fixed points of F do not depend on the steps r: hold them constant
    r_n, r_t = jax.tree_util.tree_map(lax.stop_gradient, steps(A))
    F = lambda x, A_, c_, mu_: fixed_point_map(x, A_, c_, mu_, r_n, r_t)
    J = jax.jacfwd(F, argnums=0)(lam, A, c, mu)
    eye = jnp.eye(lam.shape[0], dtype=lam.dtype)
    w = lu_solve((eye - J).T, g)
    _, vjp = jax.vjp(lambda A_, c_, mu_: F(lam, A_, c_, mu_), A, c, mu)
    dA, dc, dmu = vjp(w)
    return dA, dc, dmu, jnp.zeros_like(lam)


solve.defvjp(_solve_fwd, _solve_bwd)
