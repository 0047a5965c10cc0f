"""Estimators: ordinary and weighted least squares on the base parameters, and the
physically consistent fit (log-Cholesky, a prior towards the a priori model) by
Levenberg-Marquardt, its prior weight chosen by validation."""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._jit import compiled_when_eager, jit
from .._parameters import inertial_parameters, is_physically_consistent
from ._base import BaseParameters
from ._drive import FrictionModel, NonlinearFriction

__all__ = [
    "ConsistentFit",
    "LeastSquaresResult",
    "PriorWeightSelection",
    "consistent_fit",
    "fit_residual",
    "identified_model",
    "least_squares",
    "pseudo_inertia",
    "select_prior_weight",
    "standard_parameters",
    "weighted_least_squares",
]


def _check_problem(Y, tau, nv):
    Y = np.asarray(Y, np.float64)
    tau = np.asarray(tau, np.float64).reshape(-1)
    if Y.ndim != 2 or Y.shape[0] != tau.shape[0]:
        raise ValueError(f"Y has shape {Y.shape} and tau {tau.shape}: expected (T nv, P), (T nv,)")
    if nv is not None and Y.shape[0] % nv:
        raise ValueError(f"Y has {Y.shape[0]} rows, not a multiple of nv = {nv}")
    if not (np.all(np.isfinite(Y)) and np.all(np.isfinite(tau))):
        raise ValueError("Y or tau has NaN or infinite entries")
    return Y, tau


@compiled_when_eager
def standard_parameters(model, friction: FrictionModel):
    """The standard parameter vector of ``model``, `(P,)`: ``inertial_parameters(model)``
    flattened, then ``friction.values(model)`` (armature, damping, Coulomb friction from
    the model's leaves, offsets 0): the a priori values of an identification.

    Example:
        >>> standard_parameters(jaxrbd.models.chain(3), FrictionModel()).shape
        (52,)
    """
    return jnp.concatenate([inertial_parameters(model).ravel(), friction.values(model)])


@compiled_when_eager
def identified_model(model, p, friction: FrictionModel):
    """A copy of ``model`` with the standard parameters ``p`` `(P,)`: inertias, and
    armature, damping and Coulomb friction where ``friction`` has them (the offsets
    are not part of a `jaxrbd.Model`; add them to the torques).

    Example:
        >>> arm = jaxrbd.models.chain(3)
        >>> fm = FrictionModel()
        >>> same = identified_model(arm, standard_parameters(arm, fm), fm)
        >>> bool(jnp.all(same.inertia == arm.inertia))
        True
    """
    nb, nv = model.nbodies, model.nv
    p = jnp.asarray(p, model.dtype)
    out = eqx.tree_at(lambda m: m.inertia, model, p[: 10 * nb].reshape(nb, 10))
    fields = {"armature": lambda m: m.armature, "viscous": lambda m: m.damping,
              "coulomb": lambda m: m.friction}
    for k, t in enumerate(friction.terms):
        if t in fields:
            out = eqx.tree_at(fields[t], out, p[10 * nb + k * nv: 10 * nb + (k + 1) * nv])
    return out


# ---------------------------------------------------------------------- least squares


class LeastSquaresResult(NamedTuple):
    """A (weighted) least-squares estimate of the base parameters.

    Attributes:
        base: `(nb,)` base parameters.
        std: `(nb,)` their standard deviations, ``sqrt(diag(sigma^2 (W Yb)^+ ...))``
            from the residual (Gautier 1990): ``Cov = s^2 (Yb^T W^2 Yb)^-1`` with
            ``s^2 = |W r|^2 / (rows - nb)``.
        relative_std: `(nb,)` ``std / |base|`` (large values: poorly identified).
        joint_sigma: `(nv,)` RMS residual per joint [N m].
        condition: condition number of the (weighted) base regressor.
        params: `(P,)` standard parameters with these base parameters, closest to the prior.
    """

    base: np.ndarray
    std: np.ndarray
    relative_std: np.ndarray
    joint_sigma: np.ndarray
    condition: float
    params: np.ndarray


def least_squares(Y, tau, base: BaseParameters, *, nv: int, weights=None, prior=None):
    """Ordinary (or, with ``weights``, weighted) least squares on the base parameters.

    Solves ``min |W (Y[:, ind] p_b - tau)|`` (``Y p = Y[:, ind] E p`` exactly, so the base
    columns carry all the information). The covariance of ``p_b`` follows from the
    residual (Gautier 1990).

    Args:
        Y: `(T nv, P)` stacked regressor (`stacked_regressor`), rows sample-major.
        tau: `(T, nv)` or `(T nv,)` measured efforts.
        base: the `BaseParameters`.
        nv: joints per sample.
        weights: `(nv,)` per-joint row weights (``1 / sigma_j``), or `(T nv,)` per row.
        prior: `(P,)` standard parameters the returned ``params`` stay closest to.

    Returns:
        A `LeastSquaresResult`.
    """
    Y, tau = _check_problem(Y, tau, nv)
    n = Y.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, np.float64)
    if w.shape == (nv,):
        w = np.tile(w, n // nv)
    if w.shape != (n,):
        raise ValueError(f"weights has shape {w.shape}, expected ({nv},) or ({n},)")
    Yb = np.ascontiguousarray(base.columns(Y))
    Gb, bb, _ = _gram(Yb, tau, w)
    ev, V = np.linalg.eigh(Gb)  # Gb = Yb^T W^2 Yb: singular values s = sqrt(ev)
    if ev[0] <= 1e-14 * ev[-1]:
        raise ValueError("the base regressor is rank deficient on these data: the motion "
                         "does not excite every base parameter (see base_parameters)")
    inv = (V / ev) @ V.T
    pb = inv @ bb
    r = tau - Yb @ pb
    dof = max(n - len(pb), 1)
    s2 = np.sum((w * r) ** 2) / dof
    std = np.sqrt(np.diag(s2 * inv))
    s = np.sqrt(ev[::-1])
    params = np.asarray(base.from_base(pb, prior))
    return LeastSquaresResult(
        pb, std, std / np.maximum(np.abs(pb), 1e-300),
        np.sqrt(np.mean(r.reshape(-1, nv) ** 2, axis=0)), float(s[0] / s[-1]), params,
    )


def weighted_least_squares(Y, tau, base: BaseParameters, *, nv: int, prior=None):
    """Two-step weighted least squares (Gautier 1997): ordinary least squares, then each
    joint's rows weighted by ``1 / sigma_j``, its residual standard deviation, so that
    every joint counts by its noise level rather than its torque range.

    Returns:
        A `LeastSquaresResult` (of the weighted step).
    """
    ols = least_squares(Y, tau, base, nv=nv, prior=prior)
    return least_squares(Y, tau, base, nv=nv, weights=1.0 / np.maximum(ols.joint_sigma, 1e-12),
                         prior=prior)


# ---------------------------------------------------------------------- Levenberg-Marquardt


class _LMState(NamedTuple):
    x: jax.Array
    f: jax.Array
    mu: jax.Array
    it: jax.Array
    done: jax.Array


def levenberg_marquardt(cost, normal, x0, max_iters, tol, lower=None):
    """Minimise ``cost(x)`` given ``normal(x) -> (f, g, H)``, the cost, its gradient and a
    (Gauss-Newton or exact) Hessian: ``f(x + dx) ~ f + g.dx + dx^T H dx / 2``, optionally
    subject to ``x >= lower`` (entries ``-inf`` leave a variable free).

    Each step solves ``(H + mu D) dx = -g`` with ``D = diag(|H_kk|)`` (Marquardt 1963);
    a step is taken if it reduces the cost by a fair part of the predicted reduction
    (``mu`` then shrinks as Nielsen 1999), else ``mu`` grows tenfold (this also rejects
    directions of negative curvature of an exact Hessian). Stops when an accepted step
    changes the cost by less than ``tol`` relative, or after ``max_iters`` steps.

    With ``lower`` the steps are projected (Bertsekas 1982): a variable at its bound
    whose gradient pushes it further out is held there (its row and column leave the
    system), the others take the damped Newton step, and the result is clipped onto the
    bounds; the predicted reduction is that of the clipped step. Large ``mu`` makes the
    step a scaled projected gradient step, which descends, so the iteration cannot stall
    at a point that is not stationary on the bounded set. ``x0`` must satisfy the
    bounds."""
    lo = None if lower is None else jnp.asarray(lower, x0.dtype)

    def body(s):
        f, g, H = normal(s.x)
        if lo is None:
            g_free, H_free = g, H
        else:
            held = (s.x <= lo) & (g > 0)
            keep = ~held
            g_free = jnp.where(keep, g, 0.0)
            H_free = jnp.where(keep[:, None] & keep[None, :], H, 0.0) + jnp.diag(
                held.astype(H.dtype))
        d = jnp.abs(jnp.diagonal(H_free))
        A = H_free + s.mu * jnp.diag(d + 1e-12 * jnp.max(d))
        dx = -jnp.linalg.solve(A, g_free)
        if lo is not None:
            dx = jnp.maximum(s.x + dx, lo) - s.x
        f_new = cost(s.x + dx)
        pred = -(g @ dx + 0.5 * dx @ H @ dx)
        rho = (f - f_new) / jnp.where(pred > 0, pred, 1.0)
        ok = jnp.isfinite(f_new) & (f_new <= f) & (pred > 0) & (rho > 1e-4)
        x = jnp.where(ok, s.x + dx, s.x)
        if lo is not None:
            # exactly on the bound where the step was clipped (no rounding below it)
            x = jnp.maximum(x, lo)
        f_next = jnp.where(ok, f_new, f)
        mu = jnp.where(ok, jnp.maximum(s.mu * jnp.maximum(1 / 3, 1 - (2 * rho - 1) ** 3), 1e-15),
                       s.mu * 10.0)
        small = ok & (f - f_new <= tol * jnp.abs(f)) & (s.mu < 1.0)
        done = small | (mu > 1e15)
        return _LMState(x, f_next, mu, s.it + 1, done)

    def cond(s):
        return (s.it < max_iters) & ~s.done

    f0 = cost(x0)
    # a start whose cost is not finite cannot be improved on (every step is rejected)
    s0 = _LMState(x0, f0, jnp.asarray(1e-3, x0.dtype), jnp.asarray(0), ~jnp.isfinite(f0))
    return jax.lax.while_loop(cond, body, s0)


def fit_residual(residual, x0, *, lower=None, max_iters: int = 100, tol: float = 1e-12):
    """Nonlinear least squares ``min |residual(x)|^2`` by Levenberg-Marquardt with the
    exact Jacobian (`jax.jacfwd`, batched over the residual's entries): for the nonlinear
    joint models (`stribeck_friction`, `sigmoid_friction`) and any other differentiable
    residual. Jit-compatible (a `jax.lax.while_loop`).

    Args:
        residual: ``x (n,) -> r (m,)``, differentiable.
        x0: `(n,)` start (``>= lower``).
        lower: `(n,)` lower bounds (``-inf``: none), held by projected steps
            (`levenberg_marquardt`), e.g. a friction coefficient ``>= 0``.
        max_iters: at most this many steps.
        tol: stop when a step reduces the cost by less than ``tol`` relative.

    Returns:
        ``(x, cost, iterations)``.

    Example:
        >>> v = jnp.linspace(-1.0, 1.0, 41)
        >>> sigmoid = jaxrbd.identification.sigmoid_friction
        >>> meas = sigmoid(v, 0.5, 5.0, 0.04)
        >>> x, cost, _ = fit_residual(lambda x: sigmoid(v, *x) - meas,
        ...                           jnp.array([0.3, 3.0, 0.0]))
        >>> np.round(np.asarray(x), 6).tolist()
        [0.5, 5.0, 0.04]
    """
    x0 = jnp.asarray(x0)
    if lower is not None:
        lower = jnp.broadcast_to(jnp.asarray(lower, x0.dtype), x0.shape)
        if not isinstance(x0, jax.core.Tracer) and not isinstance(lower, jax.core.Tracer) \
                and not bool(jnp.all(x0 >= lower)):
            raise ValueError("x0 is below lower in some entries: start inside the bounds")

    def cost(x):
        r = residual(x)
        return r @ r

    def normal(x):
        r = residual(x)
        J = jax.jacfwd(residual)(x)
        return r @ r, 2.0 * J.T @ r, 2.0 * J.T @ J

    s = levenberg_marquardt(cost, normal, x0, max_iters, tol, lower)
    return s.x, s.f, s.it


# ---------------------------------------------------------------------- consistent fit


def pseudo_inertia(pi):
    """The 4x4 pseudo-inertia ``J = [[tr(Ibar)/2 1 - Ibar, h], [h^T, m]]`` of inertial
    parameters `(..., 10)` (linear in them; Wensing, Kim and Slotine 2017): positive
    definite exactly for the strictly physically consistent bodies.

    Example:
        >>> J = jaxrbd.identification.pseudo_inertia(jnp.array(
        ...     [1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 2.0, 0.0, 0.0, 2.0]))
        >>> np.diag(J).tolist()
        [1.0, 1.0, 1.0, 1.0]
    """
    # numpy stays numpy: the fit's set-up runs on the host without compiling anything
    xp = np if isinstance(pi, np.ndarray) else jnp
    m, h = pi[..., 0], pi[..., 1:4]
    Ixx, Ixy, Iyy, Ixz, Iyz, Izz = (pi[..., k] for k in range(4, 10))
    half = 0.5 * (Ixx + Iyy + Izz)
    S = xp.stack([
        xp.stack([half - Ixx, -Ixy, -Ixz], -1),
        xp.stack([-Ixy, half - Iyy, -Iyz], -1),
        xp.stack([-Ixz, -Iyz, half - Izz], -1),
    ], -2)
    top = xp.concatenate([S, h[..., :, None]], -1)
    bottom = xp.concatenate([h, m[..., None]], -1)[..., None, :]
    return xp.concatenate([top, bottom], -2)


# one program per row count (called eagerly, the check would compile op by op)
consistent_rows = jax.jit(is_physically_consistent)


def consistent_prior(pi):
    """The prior's bodies made strictly consistent: a body that is not (massless rows
    aside) is replaced by a solid sphere of its mass and centre of mass whose radius
    gives the trace of its rotational inertia about the centre of mass (at least 1 cm)."""
    pi = np.array(pi, np.float64)
    ok = np.asarray(consistent_rows(jnp.asarray(pi)))
    for k in np.flatnonzero(~ok):
        m = max(float(pi[k, 0]), 1e-6)
        c = pi[k, 1:4] / m
        trc = max(pi[k, [4, 6, 9]].sum() - 2 * m * c @ c, 3 * 0.4 * m * 1e-4)
        Ic = trc / 3
        I = Ic + m * (c @ c - c * c)
        pi[k] = [m, *(m * c), I[0], -m * c[0] * c[1], I[1], -m * c[0] * c[2], -m * c[1] * c[2],
                 I[2]]
    return pi, ~ok


class ConsistentFit(NamedTuple):
    """A physically consistent estimate.

    Attributes:
        params: `(P,)` standard parameters; every identified body has a positive definite
            pseudo-inertia (`jaxrbd.is_physically_consistent`, representable by
            `jaxrbd.to_log_cholesky`).
        model: the model with these parameters (`identified_model`).
        bodies: the ids of the identified bodies (moving, with mass in the prior).
        cost: the final cost (whitened squared residual plus weighted prior term).
        iterations: damped Newton steps taken.
        prior_weight: the weight of the prior term.
        joint_sigma: `(nv,)` the per-joint noise levels the residual was weighted with [N m].
        replaced_prior: ids of prior bodies that were not consistent and were replaced
            by spheres for the start and the prior.
        nonlinear: the `NonlinearFriction` fitted with the linear parameters, or None.
        nonlinear_params: its parameters `(nv, n_params)` (None without one).
        at_bound: names (``"<joint>.<term>"``, ``"<joint>.<parameter>"``) of the joint
            terms held at their lower bound by ``dissipative`` (the data asked for less:
            an active constraint).
    """

    params: jax.Array
    model: object
    bodies: tuple[int, ...]
    cost: float
    iterations: int
    prior_weight: float
    joint_sigma: np.ndarray
    replaced_prior: tuple[int, ...]
    nonlinear: NonlinearFriction | None = None
    nonlinear_params: np.ndarray | None = None
    at_bound: tuple[str, ...] = ()

    def torques(self, Y, qd=None):
        """The predicted efforts `(T, nv)` of the stacked regressor ``Y`` `(T nv, P)`
        and, with a nonlinear term, the velocities ``qd`` `(T, nv)` of the same samples."""
        p = np.asarray(self.params)
        nv = len(self.joint_sigma)
        tau = (np.asarray(Y, np.float64) @ p).reshape(-1, nv)
        if self.nonlinear is None:
            return tau
        if qd is None or np.shape(qd) != tau.shape:
            raise ValueError(f"qd must be given with shape {tau.shape} for the nonlinear "
                             f"{self.nonlinear.kind} friction, got "
                             f"{None if qd is None else np.shape(qd)}")
        return tau + np.asarray(self.nonlinear(jnp.asarray(qd, p.dtype),
                                               jnp.asarray(self.nonlinear_params)))


def identified_bodies(model):
    mass = np.asarray(model.inertia)[:, 0]
    return tuple(b for b in range(1, model.nbodies) if model.body_node[b] != 0 and mass[b] > 0)


def logdet_divergence(pi, J0inv):
    """``-log det(J0^-1 J) + tr(J0^-1 J) - 4`` per body (+inf where ``J`` is not positive
    definite): the Bregman divergence of ``-log det`` between pseudo-inertias."""
    J = pseudo_inertia(pi)
    L = jnp.linalg.cholesky(J)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), -1)
    d = -logdet - jnp.linalg.slogdet(J0inv)[1] + jnp.einsum("bij,bji->b", J0inv, J) - 4.0
    return jnp.where(jnp.isfinite(d), d, jnp.inf)


def divergence_derivatives(z, J0inv):
    """Gradient `(nbod, 10)` and block-diagonal Hessian `(10 nbod, 10 nbod)` of the summed
    divergences, in closed form (``J = sum_k p_k A_k`` is linear in ``p``):
    ``dd/dp_k = tr((J0^-1 - J^-1) A_k)``, ``d2d/dp_k dp_l = tr(J^-1 A_k J^-1 A_l)``."""
    nbod = J0inv.shape[0]
    A = pseudo_inertia(jnp.eye(10, dtype=z.dtype))
    Jinv = jnp.linalg.inv(pseudo_inertia(z.reshape(-1, 10)))
    gp = jnp.einsum("bij,kji->bk", J0inv - Jinv, A)
    M = jnp.einsum("bij,kjl->bkil", Jinv, A)
    Hp = jnp.einsum("bkij,blji->bkl", M, M)
    H = (jnp.eye(nbod, dtype=z.dtype)[:, None, :, None] * Hp[:, :, None, :]).reshape(
        10 * nbod, 10 * nbod)
    return gp, H


def divergence_curvature(pi):
    """The trace of the summed divergences' Hessian at bodies ``pi`` `(nbod, 10)` numpy,
    ``sum_b sum_k tr(J_b^-1 A_k J_b^-1 A_k)`` (on the host)."""
    A = pseudo_inertia(np.eye(10))
    M = np.einsum("bij,kjl->bkil", np.linalg.inv(pseudo_inertia(pi)), A)
    return float(np.einsum("bkij,bkji->", M, M))


@functools.partial(jit, static_argnames=("max_iters",))
def _consistent_solve(G, bvec, c, z0, z_prior, J0inv, weight, ridge, max_iters, tol, lower):
    # z = [identified bodies' 10 parameters each, then the free linear terms]
    n_in = J0inv.shape[0] * 10

    def prior(z):
        return jnp.sum(logdet_divergence(z[:n_in].reshape(-1, 10), J0inv))

    def cost(z):
        dz = z - z_prior
        return z @ G @ z - 2.0 * bvec @ z + c + weight * prior(z) + ridge * dz @ dz

    def normal(z):
        gp, Hblock = divergence_derivatives(z[:n_in], J0inv)
        dz = z - z_prior
        g = 2.0 * (G @ z - bvec) + 2.0 * ridge * dz
        g = g.at[:n_in].add(weight * gp.reshape(-1))
        H = 2.0 * G + 2.0 * ridge * jnp.eye(z.size, dtype=z.dtype)
        H = H.at[:n_in, :n_in].add(weight * Hblock)
        return cost(z), g, H

    s = levenberg_marquardt(cost, normal, z0, max_iters, tol, lower)
    return s.x, s.f, s.it


@functools.partial(jit, static_argnames=("max_iters", "nonlinear"))
def _consistent_solve_nonlinear(G, Yw, tw, w, qd, x0, x_prior, J0inv, weight, ridge, max_iters,
                                tol, lower, nonlinear):
    # x = [z (as _consistent_solve), then the nonlinear parameters (nv, k) flattened];
    # Yw, tw: the weighted regressor's free columns and the weighted torques less the
    # fixed columns' part; G = Yw^T Yw
    n_in = J0inv.shape[0] * 10
    nz = G.shape[0]
    T, nv = qd.shape
    Y3 = Yw.reshape(T, nv, nz)
    w2 = w.reshape(T, nv)

    def residual(x):
        theta = x[nz:].reshape(nv, -1)
        return Yw @ x[:nz] - tw + (w2 * nonlinear(qd, theta)).ravel()

    def cost(x):
        r = residual(x)
        dx = x - x_prior
        return (r @ r + weight * jnp.sum(logdet_divergence(x[:n_in].reshape(-1, 10), J0inv))
                + ridge * dx @ dx)

    def normal(x):
        # Gauss-Newton on the data term with the exact Jacobian [Yw, W dtau/dtheta] (the
        # friction block is block diagonal over joints: formed per joint, batched over
        # samples), the exact Hessian of the prior
        r = residual(x)
        D = nonlinear.derivatives(qd, x[nz:].reshape(nv, -1)) * w2[..., None]  # (T, nv, k)
        k = D.shape[-1]
        r3 = r.reshape(T, nv)
        gp, Hblock = divergence_derivatives(x[:n_in], J0inv)
        g = 2.0 * jnp.concatenate([Yw.T @ r, jnp.einsum("tjk,tj->jk", D, r3).ravel()])
        g = g.at[:n_in].add(weight * gp.reshape(-1)) + 2.0 * ridge * (x - x_prior)
        Hzt = jnp.einsum("tjp,tjk->pjk", Y3, D).reshape(nz, nv * k)
        Htt_blocks = jnp.einsum("tjk,tjl->jkl", D, D)
        Htt = (jnp.eye(nv, dtype=x.dtype)[:, None, :, None] * Htt_blocks[:, :, None, :]).reshape(
            nv * k, nv * k)
        H = 2.0 * jnp.block([[G, Hzt], [Hzt.T, Htt]])
        H = H + 2.0 * ridge * jnp.eye(x.size, dtype=x.dtype)
        H = H.at[:n_in, :n_in].add(weight * Hblock)
        return cost(x), g, H

    s = levenberg_marquardt(cost, normal, x0, max_iters, tol, lower)
    return s.x, s.f, s.it


class _NonlinearData(NamedTuple):
    """What the nonlinear term of a consistent fit needs besides the Gram matrix."""

    friction: NonlinearFriction
    Y: np.ndarray  # (T nv, P), unweighted
    tau: np.ndarray  # (T nv,)
    qd: np.ndarray  # (T, nv)
    start: np.ndarray  # (nv, n_params)


def _nonlinear_data(nonlinear, Y, tau, qd, start, nv):
    if nonlinear is None:
        if qd is not None or start is not None:
            raise ValueError("qd and nonlinear_start need a nonlinear friction term "
                             "(nonlinear=NonlinearFriction(...))")
        return None
    if not isinstance(nonlinear, NonlinearFriction):
        raise TypeError(f"nonlinear must be a NonlinearFriction, got {type(nonlinear).__name__}")
    T = len(tau) // nv
    if qd is None or np.shape(qd) != (T, nv):
        raise ValueError(f"qd must have shape ({T}, {nv}) = (T, nv) for the nonlinear "
                         f"friction, got {None if qd is None else np.shape(qd)}")
    qd = np.asarray(qd, np.float64)
    if not np.all(np.isfinite(qd)):
        raise ValueError("qd has NaN or infinite entries")
    start = nonlinear.start(nv) if start is None else np.asarray(start, np.float64)
    if start.shape != (nv, nonlinear.n_params):
        raise ValueError(f"nonlinear_start has shape {start.shape}, expected "
                         f"({nv}, {nonlinear.n_params}) = (nv, {nonlinear.names})")
    return _NonlinearData(nonlinear, Y, tau, qd, start)


@jit
def _gram_jit(Y, tau, w):
    Yw = Y * w[:, None]
    tw = tau * w
    return Yw.T @ Yw, Yw.T @ tw, tw @ tw


#: Rows per compiled Gram product: data of every length reuse one program per column
#: count (the last block is padded with zero-weight rows).
GRAM_ROWS = 8192


def _gram(Y, tau, w):
    """``(Y^T W^2 Y, Y^T W^2 tau, tau^T W^2 tau)`` as numpy (XLA's product: faster than
    numpy's on a busy host), summed over blocks of ``GRAM_ROWS`` rows."""
    Y = np.asarray(Y, np.float64)
    tau, w = np.asarray(tau, np.float64), np.asarray(w, np.float64)
    n, P = Y.shape
    G, b, c = np.zeros((P, P)), np.zeros(P), 0.0
    for s in range(0, max(n, 1), GRAM_ROWS):
        m = min(GRAM_ROWS, n - s)
        Yb, tb, wb = Y[s:s + m], tau[s:s + m], w[s:s + m]
        if m < GRAM_ROWS:
            pad = GRAM_ROWS - m
            Yb = np.concatenate([Yb, np.zeros((pad, P))])
            tb, wb = np.concatenate([tb, np.zeros(pad)]), np.concatenate([wb, np.zeros(pad)])
        g = _gram_jit(jnp.asarray(Yb), jnp.asarray(tb), jnp.asarray(wb))
        G, b, c = G + np.asarray(g[0]), b + np.asarray(g[1]), c + float(g[2])
    return G, b, c


def _ols_sigma(Y, tau, nv):
    """Per-joint RMS residual of the minimum-norm least-squares fit (through the Gram
    matrix's pseudo-inverse)."""
    G, b, _ = _gram(Y, tau, np.ones(len(tau)))
    p = np.linalg.pinv(G, rcond=1e-12, hermitian=True) @ b
    r = tau - Y @ p
    return np.sqrt(np.mean(r.reshape(-1, nv) ** 2, axis=0))


def _row_weights(joint_sigma, n):
    return np.tile(1.0 / np.asarray(joint_sigma, np.float64), n // len(joint_sigma))


def consistent_fit(model, Y, tau, friction: FrictionModel, *, prior_model=None,
                   prior_weight: float = 1.0, joint_sigma=None, start=None,
                   nonlinear: NonlinearFriction | None = None, qd=None, nonlinear_start=None,
                   dissipative: bool = True, max_iters: int = 200,
                   tol: float = 1e-12) -> ConsistentFit:
    """Physically consistent identification with a prior towards the a priori model.

    Minimises, over the inertial parameters of the identified bodies (moving, with mass
    in the prior) and the linear joint terms of ``friction``,

        ``sum_k sum_j ((Y p - tau)_kj / sigma_j)^2 + prior_weight sum_b d(J_b, J0_b)``

    with ``J_b`` the pseudo-inertia (`pseudo_inertia`) and
    ``d(J, J0) = -log det(J0^-1 J) + tr(J0^-1 J) - 4`` the log-det (Bregman)
    divergence to the prior's (Lee, Wensing and Park 2019). The divergence is zero at the
    prior, independent of the body frame and units, and infinite on the boundary of
    physical consistency: every estimate is strictly physically consistent (it has
    log-Cholesky coordinates, Rucker and Wensing 2022), and the problem is convex in
    ``p``, with one minimum. ``prior_weight`` is in units of whitened samples; choose it
    with `select_prior_weight` rather than by hand.

    The data term is formed once as the Gram matrix ``Y^T W^2 Y`` (`(P, P)`), so each
    step costs ``O(P^3)`` independently of the number of samples. Steps are
    Levenberg-Marquardt-damped Newton steps on the exact gradient and Hessian (the
    data term's is ``2 Y^T W^2 Y``),
    rejected when they leave the consistent set. A small ``prior_weight`` is reached by
    path following, as in barrier methods: from the weight at which the divergence's
    curvature matches the data's, down by factors of ten, each stage warm-started
    (``iterations`` counts all stages). The divergence's gradient and Hessian
    have closed forms (``J`` is linear in ``p``):
    ``d d / d p_k = tr((J0^-1 - J^-1) A_k)``, ``d^2 d / d p_k d p_l = tr(J^-1 A_k J^-1 A_l)``
    with ``J = sum_k p_k A_k``. The joint terms get a ridge of
    ``1e-10 trace(Y^T W^2 Y) / P`` towards the prior, which only matters for columns the
    data do not excite at all.

    With ``nonlinear`` (a `NonlinearFriction`: Stribeck, or the sigmoid of Gaz et al.
    2019) its per-joint parameters ``theta`` are fitted jointly: the residual becomes
    ``Y p + f(qd; theta) - tau``, the problem is no longer convex in ``theta``, and each
    step is a Gauss-Newton step on the data term with the exact Jacobian
    ``[Y, df/dtheta]`` (``df/dtheta`` by forward mode, block diagonal over joints,
    batched over samples; the cross block ``Y^T W^2 df/dtheta`` costs ``O(T nv P k)`` a
    step), plus the prior's exact Hessian. ``theta`` gets the same small ridge towards
    ``nonlinear_start``.

    With ``dissipative`` (the default) the joint terms are those of a passive drive
    train: armature, viscous and Coulomb coefficients ``>= 0``
    (`FrictionModel.lower_bounds`), and the nonlinear term's Stribeck excess, or the
    sigmoid's ``phi1`` and ``phi2``, ``>= 0`` (`NonlinearFriction.lower_bounds`), so the
    friction torque never feeds energy into the motion (``tau_f qd >= 0``). A negative
    viscous coefficient fits torques as well as any other number but makes every
    simulation of the model unstable. The bounds are held exactly by projected steps
    (`levenberg_marquardt`): the problem stays convex without a nonlinear term, and a
    term that the data would push below its bound ends on it (``ConsistentFit.at_bound``
    names them). The prior's joint terms are clipped onto the bounds.

    Args:
        model: the a priori `jaxrbd.Model` (structure, and the prior unless ``prior_model``).
        Y: `(T nv, P)` stacked regressor (`stacked_regressor`).
        tau: `(T, nv)` or `(T nv,)` measured efforts [N m].
        friction: the `FrictionModel` of ``Y``'s last columns.
        prior_model: the model whose parameters are the prior (default ``model``).
        prior_weight: the prior term's weight (> 0).
        joint_sigma: `(nv,)` per-joint noise levels [N m] for whitening (default: the RMS
            residual per joint of ordinary least squares on ``Y``).
        start: `(P,)` consistent standard parameters to start from (default: the prior).
        nonlinear: a `NonlinearFriction` fitted with the linear parameters (needs ``qd``).
        qd: `(T, nv)` velocities of ``Y``'s samples [rad/s], for ``nonlinear``.
        nonlinear_start: `(nv, nonlinear.n_params)` its start (default
            ``nonlinear.start(nv)``).
        dissipative: hold the joint terms of a passive, dissipative joint (see above);
            ``False`` leaves them free.
        max_iters: at most this many steps (per stage of the path).
        tol: stop when a step reduces the cost by less than ``tol`` relative.

    Returns:
        A `ConsistentFit` (``torques`` predicts with it).

    Raises:
        ValueError: shapes that do not match, non-finite data, a weight <= 0, a
            ``start`` that is not physically consistent, or a ``start`` or
            ``nonlinear_start`` below the bounds of ``dissipative``.

    Example:
        >>> arm = jaxrbd.models.chain(2)
        >>> fm = FrictionModel(armature=False, offset=False)
        >>> nl = NonlinearFriction("stribeck", width=fm.coulomb_width)
        >>> t = np.linspace(0.0, 4.0, 200)[:, None]
        >>> q, qd, qdd = np.sin(t * [1.0, 1.3]), np.cos(t * [1.0, 1.3]), -np.sin(t * [1.0, 1.3])
        >>> Y = jaxrbd.identification.stacked_regressor(arm, fm, q, qd, qdd)
        >>> theta = np.array([[0.3, 0.05], [0.2, 0.08]])  # fs - fc, vs per joint
        >>> tau = Y @ standard_parameters(arm, fm) + nl(qd, theta).ravel()
        >>> fit = consistent_fit(arm, Y, tau, fm, nonlinear=nl, qd=qd, joint_sigma=[1.0, 1.0])
        >>> np.round(fit.nonlinear_params, 4).tolist()
        [[0.3, 0.05], [0.2, 0.08]]
    """
    nv = model.nv
    Y, tau = _check_problem(Y, tau, nv)
    nl = _nonlinear_data(nonlinear, Y, tau, qd, nonlinear_start, nv)
    if joint_sigma is None:
        joint_sigma = _ols_sigma(Y, tau, nv)
    joint_sigma = np.maximum(np.asarray(joint_sigma, np.float64), 1e-9)
    if joint_sigma.shape != (nv,):
        raise ValueError(f"joint_sigma has shape {joint_sigma.shape}, expected ({nv},)")
    gram = _gram(Y, tau, _row_weights(joint_sigma, len(tau)))
    return _consistent_from_gram(model, gram, friction, prior_model, prior_weight, joint_sigma,
                                 start, max_iters, tol, nl, dissipative=dissipative)


def joint_lower_bounds(friction, nl, nv, dissipative):
    """Lower bounds of the joint terms `(n_columns,)` and of the nonlinear parameters
    `(nv, k)` (or None): the passive, dissipative ones, or ``-inf`` everywhere."""
    lo = friction.lower_bounds(nv)
    lo_nl = None if nl is None else nl.friction.lower_bounds(nv)
    if not dissipative:
        lo = np.full_like(lo, -np.inf)
        lo_nl = None if lo_nl is None else np.full_like(lo_nl, -np.inf)
    return lo, lo_nl


def below_bounds(x, lo, names):
    return [n for n, a, b in zip(names, np.ravel(x), np.ravel(lo)) if not a >= b]


def _consistent_from_gram(model, gram, friction, prior_model, prior_weight, joint_sigma, start,
                          max_iters, tol, nl=None, theta=None, dissipative=True):
    nv, nb = model.nv, model.nbodies
    G_all, b_all, c_all = gram
    P = 10 * nb + friction.n_columns(nv)
    if G_all.shape != (P, P):
        raise ValueError(f"Y has {G_all.shape[0]} columns, expected {P} = 10 nbodies + "
                         f"friction.n_columns(nv)")
    if not prior_weight > 0:
        raise ValueError(f"prior_weight must be > 0, got {prior_weight}")
    prior_model = model if prior_model is None else prior_model
    p_prior = np.asarray(standard_parameters(prior_model, friction), np.float64)
    ids = identified_bodies(prior_model)
    pi_prior, bad = consistent_prior(p_prior[: 10 * nb].reshape(nb, 10)[list(ids)])
    p_prior = p_prior.copy()
    p_prior[: 10 * nb].reshape(nb, 10)[list(ids)] = pi_prior
    free = np.concatenate([(10 * np.asarray(ids, int)[:, None] + np.arange(10)).ravel(),
                           np.arange(10 * nb, P)]).astype(int)
    fixed = np.setdiff1d(np.arange(P), free)
    lo_joint, lo_nl = joint_lower_bounds(friction, nl, nv, dissipative)
    # the prior's joint terms inside the bounds (a URDF may carry a negative damping)
    p_prior[10 * nb:] = np.maximum(p_prior[10 * nb:], lo_joint)
    joint_names = friction.column_names(model)[10 * nb:]
    p_start = p_prior if start is None else np.asarray(start, np.float64)
    if start is not None and p_start.shape != (P,):
        raise ValueError(f"start has shape {p_start.shape}, expected ({P},)")
    if start is not None and below_bounds(p_start[10 * nb:], lo_joint, joint_names):
        raise ValueError(f"start is below the lower bounds of dissipative=True in "
                         f"{below_bounds(p_start[10 * nb:], lo_joint, joint_names)}: start from "
                         f"values >= 0 or pass dissipative=False")
    if start is not None:
        ok = np.asarray(consistent_rows(jnp.asarray(
            p_start[: 10 * nb].reshape(nb, 10)[list(ids)])))
        if not ok.all():
            raise ValueError(f"start is not physically consistent in bodies "
                             f"{[model.body_names[ids[k]] for k in np.flatnonzero(~ok)]}")
    # the data term in the free parameters z, the fixed ones (the world's, massless
    # bodies') folded into the linear and constant terms
    px = p_prior[fixed]
    G = G_all[np.ix_(free, free)]
    bvec = b_all[free] - G_all[np.ix_(free, fixed)] @ px
    c = c_all - 2.0 * b_all[fixed] @ px + px @ G_all[np.ix_(fixed, fixed)] @ px
    ridge = 1e-10 * np.trace(G) / len(free)
    J0inv = np.linalg.inv(pseudo_inertia(pi_prior))
    # Path following (as barrier methods): a weak prior is approached from a weight at
    # which the divergence's curvature matches the data's, ten times smaller per stage,
    # each stage warm-started; a direct start stalls at the consistency boundary.
    z = jnp.asarray(p_start[free])
    n_in = 10 * len(ids)
    h_prior = divergence_curvature(p_start[free][:n_in].reshape(-1, 10))
    w_start = max(float(prior_weight), 2.0 * np.trace(G) / max(h_prior, 1e-300))
    stages = [float(prior_weight)]
    while stages[-1] * 10.0 < w_start:
        stages.append(stages[-1] * 10.0)
    it = 0
    lower = np.concatenate([np.full(n_in, -np.inf), lo_joint])
    if nl is None:
        args = (jnp.asarray(G), jnp.asarray(bvec), jnp.asarray(c))
        for w in stages[::-1]:
            z, f, k = _consistent_solve(*args, z, jnp.asarray(p_prior[free]),
                                        jnp.asarray(J0inv), jnp.asarray(w), jnp.asarray(ridge),
                                        max_iters, jnp.asarray(tol), jnp.asarray(lower))
            it += int(k)
        theta = None
        theta_at = []
    else:
        w_rows = _row_weights(joint_sigma, len(nl.tau))
        Yw = jnp.asarray(nl.Y[:, free] * w_rows[:, None])
        tw = jnp.asarray((nl.tau - nl.Y[:, fixed] @ px) * w_rows)
        theta0 = nl.start if theta is None else np.asarray(theta, np.float64)
        nl_names = nl.friction.column_names(model)
        if below_bounds(theta0, lo_nl, nl_names):
            raise ValueError(f"nonlinear_start is below the lower bounds of dissipative=True "
                             f"in {below_bounds(theta0, lo_nl, nl_names)} "
                             f"({nl.friction.kind}: {nl.friction.lower_bounds(1)[0].tolist()} "
                             f"per joint); pass dissipative=False to leave them free")
        x = jnp.concatenate([z, jnp.asarray(theta0.ravel())])
        x_prior = jnp.asarray(np.concatenate([p_prior[free], nl.start.ravel()]))
        lower = np.concatenate([lower, lo_nl.ravel()])
        for w in stages[::-1]:
            x, f, k = _consistent_solve_nonlinear(
                jnp.asarray(G), Yw, tw, jnp.asarray(w_rows), jnp.asarray(nl.qd), x, x_prior,
                jnp.asarray(J0inv), jnp.asarray(w), jnp.asarray(ridge), max_iters,
                jnp.asarray(tol), jnp.asarray(lower), nl.friction)
            it += int(k)
        z = x[: len(free)]
        theta_raw = np.asarray(x[len(free):])
        theta_at = [n for n, a, b in zip(nl_names, theta_raw, lo_nl.ravel()) if a <= b]
        theta = nl.friction.canonical(theta_raw.reshape(nl.start.shape))
    p = p_prior.copy()
    p[free] = np.asarray(z)
    at = [n for n, a, b in zip(joint_names, p[10 * nb:], lo_joint) if a <= b]
    p = jnp.asarray(p)
    return ConsistentFit(p, identified_model(model, p, friction), ids, float(f), int(it),
                         float(prior_weight), joint_sigma,
                         tuple(ids[k] for k in np.flatnonzero(bad)),
                         None if nl is None else nl.friction, theta, tuple(at + theta_at))


class PriorWeightSelection(NamedTuple):
    """The prior weight chosen by validation.

    Attributes:
        weight: the chosen weight.
        weights: `(K,)` the candidates, largest first.
        validation_error: `(K,)` the relative torque error ``|tau - tau_hat| / |tau|`` on
            the validation data of the fit on the training data, per candidate.
        standard_error: `(K,)` the standard error of each candidate's validation error
            minus the smallest, from its spread over ``blocks`` consecutive blocks of the
            validation samples.
        fit: the `ConsistentFit` with the chosen weight (on training plus validation
            data with ``refit``).
    """

    weight: float
    weights: np.ndarray
    validation_error: np.ndarray
    standard_error: np.ndarray
    fit: ConsistentFit


def select_prior_weight(model, Y_train, tau_train, Y_val, tau_val, friction: FrictionModel, *,
                        weights=None, prior_model=None, refit: bool = True, blocks: int = 10,
                        rule: str = "one_se", nonlinear: NonlinearFriction | None = None,
                        qd_train=None, qd_val=None, nonlinear_start=None,
                        dissipative: bool = True, max_iters: int = 200) -> PriorWeightSelection:
    """The prior weight of `consistent_fit` chosen by validation, then the fit on all data.

    For each candidate weight (from the largest, each fit warm-started from the previous
    one) the model is fitted on the training rows and scored by its relative torque
    error on the validation rows. The choice follows the one-standard-error rule
    (Breiman et al. 1984; Hastie, Tibshirani and Friedman 2009, sec. 7.10): the
    *largest* weight (the model closest to the prior) whose validation error exceeds the
    smallest by at most one standard error of that difference, estimated from its
    spread over ``blocks`` consecutive blocks of validation samples (a paired
    comparison: both models are scored on the same blocks). ``rule="min"`` takes the
    smallest validation error instead. With ``refit`` the
    chosen weight is then fitted on training and validation rows together.

    The validation data should differ from the training data as new use will (another
    part of the recording in time, another excitation): a repeat of the training
    trajectory cannot detect overfitting.

    Args:
        model: the a priori `jaxrbd.Model`.
        Y_train: `(T nv, P)` stacked regressor of the training data.
        tau_train: `(T nv,)` its efforts.
        Y_val: `(T' nv, P)` stacked regressor of the validation data.
        tau_val: `(T' nv,)` its efforts.
        friction: the `FrictionModel`.
        weights: candidates (default ``10^k``, ``k = 6, 5, ..., -1``).
        prior_model: the prior (default ``model``).
        refit: refit on all data with the chosen weight.
        blocks: validation blocks for the standard error (>= 2).
        rule: ``"one_se"`` or ``"min"``.
        nonlinear: a `NonlinearFriction` fitted with the linear parameters (as
            `consistent_fit`); needs ``qd_train`` `(T, nv)` and ``qd_val`` `(T', nv)`.
            Each candidate starts its ``theta`` from the previous candidate's.
        nonlinear_start: `(nv, nonlinear.n_params)` the first candidate's ``theta``.
        dissipative: as `consistent_fit` (default on).
        max_iters: damped Newton steps per fit.

    Returns:
        A `PriorWeightSelection`.
    """
    nv = model.nv
    if rule not in ("one_se", "min"):
        raise ValueError(f"rule must be 'one_se' or 'min', got {rule!r}")
    Y_train, tau_train = _check_problem(Y_train, tau_train, nv)
    Y_val, tau_val = _check_problem(Y_val, tau_val, nv)
    nl_train = _nonlinear_data(nonlinear, Y_train, tau_train, qd_train, nonlinear_start, nv)
    nl_val = _nonlinear_data(nonlinear, Y_val, tau_val, qd_val, nonlinear_start, nv)
    if int(blocks) < 2 or len(tau_val) // nv < 2 * int(blocks):
        raise ValueError(f"blocks = {blocks}: need >= 2 blocks of >= 2 validation samples")
    weights = np.sort(np.asarray(10.0 ** np.arange(-1, 7) if weights is None else weights,
                                 np.float64))[::-1]
    sigma = _ols_sigma(Y_train, tau_train, nv)
    g_train = _gram(Y_train, tau_train, _row_weights(sigma, len(tau_train)))
    # unweighted Gram matrices of the validation blocks: errors without the residuals
    edges = np.linspace(0, len(tau_val) // nv, int(blocks) + 1).astype(int) * nv
    g_val = [_gram(Y_val[a:b], tau_val[a:b], np.ones(b - a)) for a, b in zip(edges[:-1],
                                                                           edges[1:])]

    def block_errors(fit):
        p = np.asarray(fit.params)
        norm2 = np.array([c for _, _, c in g_val])
        if nonlinear is None:
            sq = np.array([max(p @ G @ p - 2 * bb @ p + c, 0.0) for G, bb, c in g_val])
        else:
            r = (fit.torques(Y_val, nl_val.qd).ravel() - tau_val) ** 2
            sq = np.array([r[a:b].sum() for a, b in zip(edges[:-1], edges[1:])])
        return np.sqrt(sq.sum() / norm2.sum()), np.sqrt(sq / norm2)

    errs, per, start, theta, per_theta = [], [], None, None, []
    for w in weights:
        fit = _consistent_from_gram(model, g_train, friction, prior_model, float(w), sigma,
                                    start, max_iters, 1e-12, nl_train, theta, dissipative)
        start, theta = np.asarray(fit.params), fit.nonlinear_params
        per_theta.append(theta)
        e, e_blocks = block_errors(fit)
        errs.append(e)
        per.append(e_blocks)
    errs, per = np.asarray(errs), np.asarray(per)
    k_min = int(np.argmin(errs))
    # paired standard error of each candidate's difference to the best, over the blocks
    d = per - per[k_min]
    ses = np.std(d, axis=1, ddof=1) / np.sqrt(d.shape[1])
    k = int(np.flatnonzero(errs - errs[k_min] <= ses)[0]) if rule == "one_se" else k_min
    best = float(weights[k])
    nl_fit, theta = nl_train, None
    if refit:
        g_val_w = _gram(Y_val, tau_val, _row_weights(sigma, len(tau_val)))
        g_fit = tuple(x + y for x, y in zip(g_train, g_val_w))
        if nonlinear is not None:
            nl_fit = _NonlinearData(nonlinear, np.concatenate([Y_train, Y_val]),
                                    np.concatenate([tau_train, tau_val]),
                                    np.concatenate([nl_train.qd, nl_val.qd]), nl_train.start)
            theta = per_theta[k]
    else:
        g_fit = g_train
        theta = per_theta[k] if nonlinear is not None else None
    fit = _consistent_from_gram(model, g_fit, friction, prior_model, best, sigma, None,
                                max_iters, 1e-12, nl_fit, theta, dissipative)
    return PriorWeightSelection(best, weights, errs, ses, fit)
