"""Fixed-iteration solvers of the frictional contact problem, with implicit gradients.

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
form, De Saxce and Feng 1991). Two solvers iterate towards it a fixed number of times:

* ``"pgs"``: projected Gauss-Seidel, one contact after the other, each with its own
  steps ``r_n = 1 / A_nn``, ``r_t = 2 / (A_t1t1 + A_t2t2)`` (Moreau 1988, Jean 1999);
* ``"admm"``: the alternating direction method of multipliers on the second-order cone
  with De Saxce's correction ``mu |u_t|`` added to ``u_n`` at every iteration
  (Carpentier et al. 2024): one ``(A + rho I)^-1`` per step, then a matrix-vector
  product and a cone projection per iteration, all contacts at once.

Gradients never go through the iterations: `solve` is a `jax.custom_vjp` whose
backward pass applies the implicit function theorem to ``lam = F(lam, A, c, mu)``:
``(I - dF/dlam)^T w = g`` (a dense LU solve with partial pivoting, written here in
array operations so that it batches without LAPACK), then ``w`` goes back through
``dF/d(A, c, mu)``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from ._core import linalg as _linalg

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


def _pgs(A, c, mu, lam0, iterations):
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

    return lax.fori_loop(0, iterations, sweep, lam0)


def _admm(A, c, mu, lam0, iterations, rho_scale):
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
    z, _ = lax.fori_loop(0, iterations, it, (z0, y0))
    return z


def _run(solver, iterations, rho_scale, A, c, mu, lam0):
    if solver == "pgs":
        return _pgs(A, c, mu, lam0, iterations)
    return _admm(A, c, mu, lam0, iterations, rho_scale)


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


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def solve(solver, iterations, rho_scale, A, c, mu, lam0):
    """Contact impulses `(3K,)` for ``u = A lam + c`` (see the module docstring).

    ``lam0`` (a warm start) does not change the solution and gets no gradient.
    """
    return _run(solver, iterations, rho_scale, A, c, mu, lax.stop_gradient(lam0))


def _solve_fwd(solver, iterations, rho_scale, A, c, mu, lam0):
    lam = _run(solver, iterations, rho_scale, A, c, mu, lax.stop_gradient(lam0))
    return lam, (A, c, mu, lam)


def _solve_bwd(solver, iterations, rho_scale, res, g):
    A, c, mu, lam = res
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
