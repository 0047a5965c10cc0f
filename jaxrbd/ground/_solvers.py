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
  product and a cone projection per iteration, all contacts at once. At the checks it
  balances its primal and dual residuals by changing ``rho`` (Boyd et al. 2011,
  section 3.4.1), factoring ``A + rho I`` again only then (under `jax.vmap`, once for
  the batch when some sample needs it: `when`).

Either solver, at every check after the first that finds it unfinished, tries one
semismooth Newton step on ``lam - F(lam) = 0`` from its iterate and restarts from it
when it lowers the residual: first-order iterations stall on the nearly singular
Delassus matrices of redundant points (flat feet), where the Newton step, once the
contact mode is right, lands on the solution. A solve that ends its iterations above
the tolerance then takes a chain of such steps, each from the last (`_newton_chain`).
One still above it takes an interior-point polish (`_barrier_polish`): De Saxce's fixed
point ``s = mu |u_t|`` with each convex problem of a fixed ``s`` solved accurately by a
log-barrier Newton method, whose accuracy does not suffer from the Delassus matrix's
conditioning (ADMM's stall there is its inner accuracy, not the non-convexity). It is the
slowest path (tens of milliseconds for 22 contacts) and runs only for the problems left
above the tolerance, one at a time under `jax.vmap`; the native solve of kernel models
(``native=True``) does not have it yet.

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
from jax.custom_batching import custom_vmap

from .._core import ffi_contact
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


def when(pred, f, x):
    """``f(x)`` where ``pred`` holds, else ``x``: `lax.cond`, written as a `lax.while_loop`
    of at most one trip. Under `jax.vmap` a `lax.cond` on a batched ``pred`` becomes a
    select that runs ``f`` for every sample; this loop runs it once for the whole batch
    when some sample needs it, and not at all when none does."""

    def body(carry):
        return jnp.zeros_like(carry[0]), f(carry[1])

    return lax.while_loop(lambda carry: carry[0], body, (pred, x))[1]


def _pgs(A, c, mu, lam0):
    """``(state, update, adapt, impulses)`` of projected Gauss-Seidel; one update is one
    sweep, and nothing adapts between checks."""
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

    return lam0, sweep, lambda lam: lam, lambda lam: lam


#: Residual balancing (Boyd et al. 2011, section 3.4.1): the penalty changes by
#: `RHO_FACTOR` when the primal residual exceeds `RHO_BALANCE` times the dual one or the
#: reverse, and stays within `RHO_RANGE` times its initial value either way.
RHO_BALANCE = 10.0
RHO_FACTOR = 2.0
RHO_RANGE = 1e4


def _admm(A, c, mu, lam0, rho_scale, adaptive):
    """``(state, update, adapt, impulses, restart)`` of ADMM with De Saxce's correction.

    The state is ``(z, y, rho, Minv, r_p, r_d)``: the impulses in the cone, the
    multipliers (minus the contact velocities at convergence), the penalty, ``(A + rho
    I)^-1``, and the last iteration's primal ``|x - z|`` (in velocity units, times the
    mean diagonal of ``A``) and dual ``rho |z - z_prev|`` residuals [m/s]. ``adapt``
    balances the two by changing ``rho`` (and refactoring) between checks.
    """
    m = A.shape[0]
    dbar = jnp.mean(jnp.diagonal(A))
    rho0 = rho_scale * dbar
    eye = jnp.eye(m, dtype=A.dtype)

    def inverse(rho):
        return _linalg.cho_solve(_linalg.cholesky(A + rho * eye), eye)

    def desaxce(x):
        u = (A @ x + c).reshape(-1, 3)
        s = mu * jnp.sqrt(jnp.sum(u[:, 1:] ** 2, axis=1))
        return jnp.concatenate([s[:, None], jnp.zeros_like(u[:, 1:])], axis=1).reshape(-1)

    def it(_, state):
        z, y, rho, Minv, _, _ = state
        x = Minv @ (rho * z - y - c - desaxce(z))
        z_new = project_cone((x + y / rho).reshape(-1, 3), mu).reshape(-1)
        y = y + rho * (x - z_new)
        r_p = dbar * jnp.max(jnp.abs(x - z_new))
        r_d = rho * jnp.max(jnp.abs(z_new - z))
        return z_new, y, rho, Minv, r_p, r_d

    def adapt(state):
        z, y, rho, Minv, r_p, r_d = state
        up = (r_p > RHO_BALANCE * r_d) & (rho < RHO_RANGE * rho0)
        down = (r_d > RHO_BALANCE * r_p) & (rho > rho0 / RHO_RANGE)
        new = jnp.where(up, rho * RHO_FACTOR, jnp.where(down, rho / RHO_FACTOR, rho))
        # y is the unscaled multiplier: it stays as it is when rho changes
        Minv = when(up | down, lambda M: inverse(new), Minv)
        return z, y, new, Minv, r_p, r_d

    def start(lam):
        """``(z, y)`` started from ``lam``, as from a warm start."""
        z = project_cone(lam.reshape(-1, 3), mu).reshape(-1)
        return z, -(A @ z + c + desaxce(z))

    def restart(state, lam):
        """The state started again from ``lam``, keeping its penalty and factor."""
        return (*start(lam), *state[2:])

    zero = jnp.zeros((), A.dtype)
    state = (*start(lam0), rho0, inverse(rho0), zero, zero)
    return (state, it, adapt if adaptive else (lambda state: state), lambda state: state[0],
            restart)


def _newton(lam, A, c, mu):
    """One semismooth Newton step on ``lam - F(lam) = 0`` (``F`` `fixed_point_map`).

    Where the contact mode of ``lam`` (separated, sticking, sliding) is the solution's,
    ``F`` is affine in the separated and sticking rows and smooth in the sliding ones,
    and the step lands on the solution (sticking and separated contacts) or next to it:
    a polish for the first-order iterations, whose progress stalls on the nearly singular
    Delassus matrices of redundant contact points (flat feet).
    """
    r_n, r_t = steps(A)
    F = lambda x: fixed_point_map(x, A, c, mu, r_n, r_t)
    J = jax.jacfwd(F)(lam)
    return lam - lu_solve(jnp.eye(lam.shape[0], dtype=lam.dtype) - J, lam - F(lam))


def _run(solver, iterations, rho_scale, tolerance, A, c, mu, lam0, adaptive=True,
         polish=True, native=False):
    """``(lam, residual, iterations run)``; with ``native``, where it applies
    (`jaxrbd._core.ffi_contact.supported`), by the native kernel of the same solve (one
    problem, or a batch under `jax.vmap`).

    With ``tolerance > 0`` the solver stops at the first check (every `CHECK_EVERY`
    iterations) where the residual is at most ``tolerance``, after ``iterations`` at
    most; with ``tolerance = 0`` it runs exactly ``iterations``. At every check after the
    first where the solve is not done, a Newton step (`_newton`) from the current iterate
    is tried, and the solver restarts from it when it lowers the residual; ADMM then
    adapts its penalty. The impulses returned are those of the lowest residual seen.
    """
    if native and ffi_contact.supported(A):
        # the native solve has no interior-point polish yet (its program stays one call)
        return ffi_contact.solve(solver, iterations, rho_scale, tolerance, adaptive, polish,
                                 A, c, mu, lam0)
    if solver == "pgs":
        state, update, adapt, impulses = _pgs(A, c, mu, lam0)
        restart = lambda state, lam: lam
    else:
        state, update, adapt, impulses, restart = _admm(A, c, mu, lam0, rho_scale, adaptive)
    residual = lambda lam: natural_residual(lam, A, c, mu)

    def run_block(state, k):
        n = jnp.minimum(CHECK_EVERY, iterations - k)
        return lax.fori_loop(0, n, update, state), k + n

    def unfinished(carry):
        _, k, _, res = carry
        return (k < iterations) & ((res > tolerance) | (tolerance <= 0))

    def block(carry):
        state, k, best, res = carry
        if polish:
            lam_newton = _newton(impulses(state), A, c, mu)
            res_newton = residual(lam_newton)
            better = res_newton < res
            best = jnp.where(better, lam_newton, best)
            res = jnp.minimum(res_newton, res)
            state = lax.cond(better, restart, lambda s, _: s, state, lam_newton)
        state, k = run_block(adapt(state), k)
        lam = impulses(state)
        res_block = residual(lam)
        better = res_block < res
        return state, k, jnp.where(better, lam, best), jnp.minimum(res_block, res)

    # the first block outside the loop: under `jax.vmap` a loop body runs for every
    # sample while any is unfinished, and most solves (warm-started) end here
    state, k = run_block(state, jnp.asarray(0, jnp.int32))
    lam = impulses(state)
    start = (state, k, lam, residual(lam))
    _, k, lam, res = lax.while_loop(unfinished, block, start)
    if polish and tolerance > 0:
        lam, res, k = _newton_chain(lam, res, k, A, c, mu, tolerance)
        # a solve still above the tolerance takes the interior-point polish; the
        # iteration count stays the chain's
        lam, res = _barrier_polish(lam, res, A, c, mu, jnp.asarray(tolerance, res.dtype))
    return lam, res, k


#: The most semismooth Newton steps of the chain that ends an unconverged solve.
NEWTON_STEPS = 20


def _newton_chain(lam, res, k, A, c, mu, tolerance):
    """``(lam, residual, k)`` after up to `NEWTON_STEPS` full Newton steps (`_newton`),
    each from the last, from the best iterate of a solve that ended above ``tolerance``;
    the lowest residual seen wins and every step counts as one iteration.

    The steps are a primal-dual active-set method: each solves the contact conditions
    in the contact mode of its starting point exactly, so a chain ends once it reaches
    the solution's mode; unlike the single step of a check it goes on from a step that
    did not lower the residual (the mode changes where the residual passes a kink). It
    finishes most of the landing steps of flat feet with redundant points, where ADMM and
    Gauss-Seidel sweeps stall on the nearly singular Delassus matrix. A solve that has
    converged skips it (under `jax.vmap`, the batch does while some sample has not).
    """

    def unfinished(carry):
        _, _, res, j, _ = carry
        return (res > tolerance) & (j < NEWTON_STEPS)

    def step(carry):
        cur, best, res, j, k = carry
        cur = _newton(cur, A, c, mu)
        r = natural_residual(cur, A, c, mu)
        # a step that lands on non-finite numbers (a singular mode) ends the chain
        ok = jnp.isfinite(r)
        better = ok & (r < res)
        return (jnp.where(ok, cur, best), jnp.where(better, cur, best), jnp.where(better, r, res),
                jnp.where(ok, j + 1, NEWTON_STEPS), k + 1)

    _, lam, res, _, k = lax.while_loop(unfinished, step, (lam, lam, res, jnp.zeros_like(k), k))
    return lam, res, k


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


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4, 5, 10))
def solve(solver, iterations, rho_scale, adaptive, polish, tolerance, A, c, mu, lam0,
          native=False):
    """Contact impulses `(3K,)` for ``u = A lam + c`` (see the module docstring), the
    residual `natural_residual` [m/s] they leave and the number of iterations run.

    ``lam0`` (a warm start) changes the solution only within the solver's tolerance (by
    as much as the residual left when the solver stops unconverged) and gets no
    gradient; the residual and the count carry no gradient either. ``native`` solves one
    problem by the native kernel where it applies (`_run`).
    """
    return _run(solver, iterations, rho_scale, tolerance, A, c, mu, lax.stop_gradient(lam0),
                adaptive, polish, native)


def _solve_fwd(solver, iterations, rho_scale, adaptive, polish, tolerance, A, c, mu, lam0,
               native=False):
    out = _run(solver, iterations, rho_scale, tolerance, A, c, mu, lax.stop_gradient(lam0),
               adaptive, polish, native)
    return out, (A, c, mu, out[0])


def _solve_bwd(solver, iterations, rho_scale, adaptive, polish, tolerance, native, res,
               cotangents):
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


# ---------------------------------------------------------------- interior-point polish

#: De Saxce updates of the interior-point polish (each one accurate convex solve).
BARRIER_UPDATES = 4
#: Decades of the barrier parameter in one convex solve, and Newton steps per decade.
BARRIER_DECADES, BARRIER_NEWTON = 16, 40


def _cone_barrier_solve(A, b, mu):
    """``argmin 1/2 x^T A x + b^T x`` over the friction cones ``|x_t| <= mu x_n`` (``A``
    positive definite) by a primal log-barrier method (Boyd and Vandenberghe 2004,
    chapter 11) with the second-order cone's barrier ``-log(mu^2 x_n^2 - |x_t|^2)``: a
    path of Newton minimisations whose barrier weight falls by ten per decade. Newton's
    method on it is affine invariant, so the solve keeps its accuracy on the nearly
    singular Delassus matrices where first-order methods stall."""
    K = mu.shape[0]
    n = 3 * K
    m2 = jnp.maximum(mu, jnp.finfo(A.dtype).tiny) ** 2
    rows = jnp.arange(n).reshape(K, 3)
    bi = jnp.broadcast_to(rows[:, :, None], (K, 3, 3)).reshape(-1)
    bj = jnp.broadcast_to(rows[:, None, :], (K, 3, 3)).reshape(-1)
    one = jnp.ones_like(m2)

    def cone(x):
        X = x.reshape(K, 3)
        return X, m2 * X[:, 0] ** 2 - X[:, 1] ** 2 - X[:, 2] ** 2

    def inside(x):
        X, g = cone(x)
        return jnp.all(g > 0) & jnp.all(X[:, 0] > 0)

    def phi(x, t):
        return t * (0.5 * x @ (A @ x) + b @ x) - jnp.sum(jnp.log(cone(x)[1]))

    def newton(x, t):
        X, g = cone(x)
        dg = jnp.stack([2 * m2 * X[:, 0], -2 * X[:, 1], -2 * X[:, 2]], axis=1)
        grad = t * (A @ x + b) - (dg / g[:, None]).reshape(-1)
        d2 = jnp.stack([2 * m2, -2 * one, -2 * one], axis=1) / g[:, None]
        blocks = dg[:, :, None] * dg[:, None, :] / (g ** 2)[:, None, None]
        blocks = blocks - jax.vmap(jnp.diag)(d2)
        H = (t * A).at[bi, bj].add(blocks.reshape(-1))
        dx = -jnp.linalg.solve(H, grad)
        return dx, -grad @ dx

    def line_search(x, dx, dec, t):
        f0 = phi(x, t)

        def shorter(a):
            y = x + a * dx
            return ~(inside(y) & (phi(y, t) <= f0 - 0.25 * a * dec)) & (a > 1e-12)

        a = lax.while_loop(shorter, lambda a: 0.5 * a, jnp.asarray(1.0, x.dtype))
        return jnp.where(a > 1e-12, x + a * dx, x)

    def centre(x, t):
        def more(carry):
            _, dec, j = carry
            return (dec > 1e-12) & (j < BARRIER_NEWTON)

        def step(carry):
            x, _, j = carry
            dx, dec = newton(x, t)
            return line_search(x, dx, dec, t), dec, j + 1

        return lax.while_loop(more, step, (x, jnp.asarray(jnp.inf, x.dtype), 0))[0]

    # scales: an impulse from b and A's diagonal, the objective from both
    scale = jnp.max(jnp.abs(b)) / jnp.mean(jnp.diagonal(A)) + jnp.finfo(A.dtype).tiny
    x0 = jnp.zeros(n, A.dtype).at[0::3].set(scale)
    t0 = 2.0 * K / (scale * jnp.max(jnp.abs(b)) + jnp.finfo(A.dtype).tiny)
    return lax.fori_loop(0, BARRIER_DECADES, lambda d, x: centre(x, t0 * 10.0 ** d), x0)


def _barrier_polish_one(lam, res, A, c, mu, tolerance):
    """De Saxce's fixed point with accurate inner solves: ``s = mu |u_t|`` added to the
    normal velocity, the convex problem of that shift solved by `_cone_barrier_solve`,
    at most `BARRIER_UPDATES` times (until the residual is at most ``tolerance``);
    returns the impulses of the lowest residual seen."""

    def more(carry):
        _, _, r_best, j = carry
        return (r_best > tolerance) & (j < BARRIER_UPDATES)

    def update(carry):
        cur, best, r_best, j = carry
        u = (A @ cur + c).reshape(-1, 3)
        s = jnp.zeros_like(u).at[:, 0].set(mu * _safe_norm(u[:, 1:])[0]).reshape(-1)
        nxt = _cone_barrier_solve(A, c + s, mu)
        r = natural_residual(nxt, A, c, mu)
        better = jnp.isfinite(r) & (r < r_best)
        return nxt, jnp.where(better, nxt, best), jnp.where(better, r, r_best), j + 1

    _, lam, res, _ = lax.while_loop(more, update, (lam, lam, res, 0))
    return lam, res


@custom_vmap
def _barrier_polish(lam, res, A, c, mu, tolerance):
    return when(res > tolerance, lambda x: _barrier_polish_one(*x, A, c, mu, tolerance),
                (lam, res))


@_barrier_polish.def_vmap
def _barrier_polish_batch(axis_size, in_batched, lam, res, A, c, mu, tolerance):
    # one problem at a time, only those above the tolerance: a select over the batch
    # would run the polish for every sample whenever one needs it
    lam, res, A, c, mu, tolerance = (
        x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))
        for x, b in zip((lam, res, A, c, mu, tolerance), in_batched))
    todo = res > tolerance

    def one(carry):
        lam, res, todo = carry
        i = jnp.argmax(todo)
        li, ri = _barrier_polish_one(lam[i], res[i], A[i], c[i], mu[i], tolerance[i])
        return lam.at[i].set(li), res.at[i].set(ri), todo.at[i].set(False)

    lam, res, _ = lax.while_loop(lambda carry: jnp.any(carry[2]), one, (lam, res, todo))
    return (lam, res), (True, True)
