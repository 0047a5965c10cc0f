"""The simulation-error (output-error) fit: physically consistent standard parameters
chosen so that simulating the recorded torques from measured states reproduces the
recorded positions, with exact Jacobians through `jaxrbd.rollout`.

Positions-only logs have no clean velocities or accelerations, and the torque residual
of the inverse-dynamics fit (`least_squares`, `consistent_fit`) then carries the noise of
a double differentiation. The output error compares measured and simulated positions
instead. A single long simulation drifts away from the recording (the forward dynamics
of an arm are unstable in open loop), so many short windows spread over the recording
are simulated, each from the (filtered) measured state at its first sample.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._api import mass_matrix
from .._integrators import rollout
from .._jit import jit
from ._drive import FrictionModel
from ._estimators import (
    ConsistentFit,
    below_bounds,
    consistent_prior,
    consistent_rows,
    divergence_curvature,
    divergence_derivatives,
    identified_bodies,
    identified_model,
    joint_lower_bounds,
    levenberg_marquardt,
    logdet_divergence,
    pseudo_inertia,
    standard_parameters,
)

__all__ = ["SimulationFit", "shooting_windows", "simulate_windows", "simulation_error_fit",
           "simulation_rms"]


def _joint_terms(friction: FrictionModel, p_joint, qd):
    """The joints' own torque at velocity ``qd`` (viscous, Coulomb, offset): the drive
    spends it on top of the rigid-body torque, so the simulation subtracts it. The
    armature is inertia and enters the model (`identified_model`)."""
    return friction.columns(qd, jnp.zeros_like(qd)) @ p_joint


def simulate_windows(model, p, friction: FrictionModel, q0, qd0, tau, dt, integrator="rk4",
                     substeps: int = 1):
    """Simulate windows of a recording from their start states with the standard
    parameters ``p``: the measured torque minus the joint terms (viscous, Coulomb,
    offset) drives the rigid bodies with ``p``'s inertias and armature.

    Args:
        model: the `jaxrbd.Model` (structure; its parameters are replaced by ``p``).
        p: `(P,)` standard parameters (inertial, then ``friction``'s terms).
        friction: the `FrictionModel` of ``p``'s last entries.
        q0: `(W, nv)` start positions of the windows [rad].
        qd0: `(W, nv)` start velocities [rad/s].
        tau: `(W, L - 1, nv)` the measured torques, ``tau[w, k]`` held over step ``k``.
        dt: the sample period [s].
        integrator: as `jaxrbd.rollout`.
        substeps: integrator steps per sample period (static, >= 1), the torque held
            over the period: for joints too stiff for one explicit step of ``dt``.

    Returns:
        ``(qs, qds)``, `(W, L, nv)` each: row 0 the start state, row ``k`` the state at
        ``k dt``.

    """
    m = identified_model(model, p, friction)
    p_joint = jnp.asarray(p)[10 * model.nbodies:]

    def joint(mm, q, qd):
        return -_joint_terms(friction, p_joint, qd)

    k = int(substeps)
    if k < 1:
        raise ValueError(f"substeps must be an integer >= 1, got {substeps}")

    def one(q0, qd0, tau):
        qs, qds = rollout(m, q0, qd0, jnp.repeat(tau, k, axis=0), dt / k, integrator,
                          forces=(joint,))
        return qs[::k], qds[::k]

    return jax.vmap(one)(q0, qd0, tau)


def shooting_windows(q, tau, length: int, count: int | None = None):
    """Cut a recording into windows of ``length`` samples: by default consecutive ones
    that share their boundary samples (window ``w`` covers samples ``w (L - 1)`` to
    ``(w + 1)(L - 1)``, the samples after the last whole window dropped); with
    ``count``, that many windows spread evenly over the whole recording.

    Args:
        q: `(T, nv)` positions.
        tau: `(T, nv)` torques.
        length: ``L >= 2`` samples per window.
        count: the number of windows (``1 <= count <= T - L + 1``), or None.

    Returns:
        ``(q_windows (W, L, nv), tau_windows (W, L - 1, nv), starts (W,))``, ``starts``
        the index of each window's first sample.

    Example:
        >>> qw, tw, starts = shooting_windows(np.zeros((10, 2)), np.zeros((10, 2)), 4)
        >>> qw.shape, tw.shape, starts.tolist()
        ((3, 4, 2), (3, 3, 2), [0, 3, 6])
        >>> shooting_windows(np.zeros((10, 2)), np.zeros((10, 2)), 4, count=2)[2].tolist()
        [0, 6]
    """
    q, tau = np.asarray(q, np.float64), np.asarray(tau, np.float64)
    L = int(length)
    if L < 2:
        raise ValueError(f"length must be >= 2 samples, got {length}")
    if q.ndim != 2 or tau.shape != q.shape:
        raise ValueError(f"q has shape {q.shape} and tau {tau.shape}: expected (T, nv) each")
    if len(q) < L:
        raise ValueError(f"the recording has {len(q)} samples, fewer than one window of {L}")
    if count is None:
        starts = np.arange((len(q) - 1) // (L - 1)) * (L - 1)
    else:
        if int(count) != count or not 1 <= count <= len(q) - L + 1:
            raise ValueError(f"count must be an integer in [1, {len(q) - L + 1}] (windows of "
                             f"{L} in {len(q)} samples), got {count}")
        starts = np.round(np.linspace(0, len(q) - L, int(count))).astype(int)
    idx = starts[:, None] + np.arange(L)
    return q[idx], tau[idx[:, :-1]], starts


def _check_series(model, t, q, tau, qd):
    """The checked arrays ``(dt, q, tau, qd)`` of a uniformly sampled recording."""
    nv = model.nv
    t = np.asarray(t, np.float64)
    q, tau = np.asarray(q, np.float64), np.asarray(tau, np.float64)
    if t.ndim != 1 or len(t) < 2:
        raise ValueError(f"t has shape {t.shape}, expected (T,) with T >= 2")
    for name, x in (("q", q), ("tau", tau)):
        if x.shape != (len(t), nv):
            raise ValueError(f"{name} has shape {x.shape}, expected ({len(t)}, {nv}) = (T, nv)")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{name} has NaN or infinite values")
    steps = np.diff(t)
    dt = float(np.mean(steps))
    if not np.all(steps > 0) or np.max(np.abs(steps - dt)) > 1e-6 * dt:
        raise ValueError("t is not uniformly sampled and increasing: resample the recording "
                         "first (Recording.resample)")
    qd = np.gradient(q, dt, axis=0) if qd is None else np.asarray(qd, np.float64)
    if qd.shape != q.shape:
        raise ValueError(f"qd has shape {qd.shape}, expected {q.shape}")
    if not np.all(np.isfinite(qd)):
        raise ValueError("qd has NaN or infinite values")
    return dt, q, tau, qd


def _check_substeps(substeps):
    if int(substeps) != substeps or substeps < 1:
        raise ValueError(f"substeps must be an integer >= 1, got {substeps}")
    return int(substeps)


@functools.partial(jit, static_argnames=("friction", "integrator", "substeps"))
def _open_loop(model, friction, integrator, substeps, p, q0, qd0, qw, tw, dt):
    qs, _ = simulate_windows(model, p, friction, q0, qd0, tw, dt, integrator, substeps)
    return qs - qw


def simulation_rms(model, params, friction: FrictionModel, t, q, tau, *, window: int,
                   count: int | None = None, qd=None, integrator: str = "rk4",
                   substeps: int = 1):
    """The open-loop position error per joint of the standard parameters ``params``:
    windows of the recording (`shooting_windows`) simulated from their measured start
    states with the recorded torques (`simulate_windows`), the RMS over every window's
    samples after the first.

    Args:
        model: the `jaxrbd.Model` (structure).
        params: `(P,)` standard parameters (`standard_parameters`,
            ``ConsistentFit.params``, ``SimulationFit.params``).
        friction: the `FrictionModel` of ``params``' joint terms.
        t: `(T,)` uniformly sampled times [s].
        q: `(T, nv)` measured positions [rad].
        tau: `(T, nv)` measured torques [N m].
        window: samples per window (>= 2).
        count: the number of windows spread over the recording (default: consecutive).
        qd: `(T, nv)` start velocities (default: central differences of ``q``).
        integrator: as `jaxrbd.rollout`.
        substeps: integrator steps per sample period.

    Returns:
        `(nv,)` RMS position error [rad] (NaN where a window diverges).

    Example:
        >>> arm = jaxrbd.models.chain(2)
        >>> fm = FrictionModel(armature=False, coulomb=False, offset=False)
        >>> p = standard_parameters(arm, fm)
        >>> t = np.arange(21) * 0.01
        >>> q = np.zeros((21, 2))
        >>> tau = np.asarray(jax.vmap(lambda q: jaxrbd.inverse_dynamics(
        ...     arm, q, jnp.zeros(2), jnp.zeros(2)))(jnp.asarray(q)))  # holding still
        >>> simulation_rms(arm, p, fm, t, q, tau, window=5).max() < 1e-12
        np.True_
    """
    dt, q, tau, qd = _check_series(model, t, q, tau, qd)
    qw, tw, starts = shooting_windows(q, tau, window, count)
    e = _open_loop(model, friction, integrator, _check_substeps(substeps),
                   jnp.asarray(params, model.dtype), jnp.asarray(q[starts], model.dtype),
                   jnp.asarray(qd[starts], model.dtype), jnp.asarray(qw, model.dtype),
                   jnp.asarray(tw, model.dtype), jnp.asarray(dt, model.dtype))
    e = np.asarray(e)[:, 1:]
    return np.sqrt(np.mean(e ** 2, axis=(0, 1)))


class SimulationFit(NamedTuple):
    """The result of `simulation_error_fit`.

    Attributes:
        params: `(P,)` standard parameters; every identified body strictly physically
            consistent (as `ConsistentFit.params`).
        model: `identified_model` of ``params``.
        bodies: the ids of the identified bodies.
        cost: the final cost (whitened squared position errors plus the weighted prior).
        iterations: Levenberg-Marquardt steps taken.
        prior_weight: the weight of the prior term.
        joint_sigma: `(nv,)` the position scales the errors were whitened with [rad].
        joint_rms: `(nv,)` RMS of the simulated minus measured positions per joint over
            the fitted windows [rad].
        start_rms: `(nv,)` the same with the start parameters.
        starts: `(W,)` the index of each fitted window's first sample.
        at_bound: names (``"<joint>.<term>"``) of the joint terms held at their lower
            bound by ``dissipative``.
    """

    params: jax.Array
    model: object
    bodies: tuple[int, ...]
    cost: float
    iterations: int
    prior_weight: float
    joint_sigma: np.ndarray
    joint_rms: np.ndarray
    start_rms: np.ndarray
    starts: np.ndarray
    at_bound: tuple[str, ...] = ()


@functools.partial(jit, static_argnames=("friction", "integrator", "substeps", "max_iters"))
def _solve(model, friction, integrator, substeps, p_fixed, free, qw, tw, q0, qd0, dt, sigma,
           weight, z0, J0inv, max_iters, tol, lower):
    # z = [the identified bodies' 10 inertial parameters each, then the joint terms]
    n_in = J0inv.shape[0] * 10
    basis = jnp.eye(z0.size, dtype=z0.dtype)

    def residual(z):
        qs, _ = simulate_windows(model, p_fixed.at[free].set(z), friction, q0, qd0, tw, dt,
                                 integrator, substeps)
        return ((qs[:, 1:] - qw[:, 1:]) / sigma[None, None, :]).ravel()

    def prior(z):
        return jnp.sum(logdet_divergence(z[:n_in].reshape(-1, 10), J0inv))

    def cost(z):
        r = residual(z)
        return r @ r + weight * prior(z)

    def normal(z):
        # the exact Jacobian by forward mode, one direction per parameter, batched over
        # directions and windows: the start states are data, so J is (rows, n) and the
        # normal matrix n x n whatever the number of windows
        r, J = jax.vmap(lambda v: jax.jvp(residual, (z,), (v,)), out_axes=(None, 1))(basis)
        gp, Hb = divergence_derivatives(z[:n_in], J0inv)
        g = (2.0 * J.T @ r).at[:n_in].add(weight * gp.reshape(-1))
        H = (2.0 * J.T @ J).at[:n_in, :n_in].add(weight * Hb)
        return r @ r + weight * prior(z), g, H

    s = levenberg_marquardt(cost, normal, z0, max_iters, tol, lower)
    return s.x, s.f, s.it


def _start_parameters(model, friction, start, lo_joint):
    """The start's standard parameters `(P,)`, the identified bodies, the torque sigma of
    a `ConsistentFit` start (or None), and the prior's replaced bodies."""
    nb = model.nbodies
    ids = identified_bodies(model)
    sigma = None
    if start is None:
        p = np.asarray(standard_parameters(model, friction), np.float64).copy()
        pi, _ = consistent_prior(p[: 10 * nb].reshape(nb, 10)[list(ids)])
        p[: 10 * nb].reshape(nb, 10)[list(ids)] = pi
        p[10 * nb:] = np.maximum(p[10 * nb:], lo_joint)
        return p, ids, sigma
    if isinstance(start, ConsistentFit):
        sigma, ids = np.asarray(start.joint_sigma, np.float64), tuple(start.bodies)
        start = start.params
    p = np.asarray(start, np.float64)
    P = 10 * nb + friction.n_columns(model.nv)
    if p.shape != (P,):
        raise ValueError(f"start has shape {p.shape}, expected ({P},) standard parameters")
    names = friction.column_names(model)[10 * nb:]
    if below_bounds(p[10 * nb:], lo_joint, names):
        raise ValueError(f"start is below the lower bounds of dissipative=True in "
                         f"{below_bounds(p[10 * nb:], lo_joint, names)}: start from a dissipative "
                         "consistent_fit or pass dissipative=False")
    ok = np.asarray(consistent_rows(jnp.asarray(p[: 10 * nb].reshape(nb, 10)[list(ids)])))
    if not ok.all():
        raise ValueError(f"start is not physically consistent in bodies "
                         f"{[model.body_names[ids[k]] for k in np.flatnonzero(~ok)]}: start "
                         "from a consistent_fit")
    return p, ids, sigma


@jit
def _inverse_mass_diagonal(model, q):
    return jax.vmap(lambda q: jnp.diagonal(jnp.linalg.inv(mass_matrix(model, q))))(q)


def simulation_error_fit(model, t, q, tau, friction: FrictionModel, *, window: int,
                         count: int | None = None, qd=None, start=None,
                         prior_weight: float = 1.0, joint_sigma=None, torque_sigma=None,
                         integrator: str = "rk4", substeps: int = 1, dissipative: bool = True,
                         max_iters: int = 30, tol: float = 1e-10) -> SimulationFit:
    """Physically consistent standard parameters that make the simulated positions match
    the measured ones.

    Minimises, over the inertial parameters of the identified bodies (as
    `consistent_fit`) and the linear joint terms of ``friction``,

        ``sum_w sum_(k >= 1) sum_j ((q_sim(p, s_w)_kj - q_kj) / sigma_j)^2
        + prior_weight sum_b d(J_b, J0_b)``

    where ``q_sim`` simulates window ``w`` (`shooting_windows`, `simulate_windows`, the
    recorded torques held over each sample period) from ``s_w``, the measured position
    and velocity at its first sample, and ``d`` is the log-det divergence of the
    pseudo-inertias to the start's (Lee, Wensing and Park 2019). The divergence is
    infinite on the boundary of physical consistency, so every step that would leave it
    is rejected: every estimate is strictly physically consistent, whatever the weight.
    The start states are data, not unknowns: with short windows many of them can be fitted
    at the cost of a few (the problem has only the parameters as unknowns), and their
    error (the velocity's, from filtering) enters the residual only in proportion to the
    window's length.

    Each joint's error is whitened by its sensitivity (default ``joint_sigma``): the
    position error that a torque error of ``torque_sigma_j`` on that joint alone makes at
    a window's end, ``sigma_j = torque_sigma_j mean_w (M(q_w)^-1)_jj ((L - 1) dt)^2 / 2``
    with the start's mass matrix. A light wrist joint, which a small torque error moves a
    lot, then counts as much as a heavy shoulder joint, and the cost is in the units of
    the torque fit's whitened residual (``prior_weight`` too).

    Levenberg-Marquardt with the exact Jacobian (forward mode through `jaxrbd.rollout`,
    one direction per parameter, batched over directions and windows) and the exact
    Hessian of the divergence; with ``dissipative`` (the default) the armature, viscous
    and Coulomb coefficients stay ``>= 0`` by projected steps (`levenberg_marquardt`).

    Args:
        model: the `jaxrbd.Model` (structure; 1-DoF joints; its parameters are the start
            unless ``start`` is given).
        t: `(T,)` uniformly sampled times [s] (resample first: `Recording.resample`).
        q: `(T, nv)` measured positions [rad].
        tau: `(T, nv)` measured joint torques [N m] (``tau[k]`` held over ``[t_k,
            t_k+1)``).
        friction: the `FrictionModel` of the joint terms.
        window: samples per window (>= 2). Shorter than the time the open-loop simulation
            takes to drift far from the recording.
        count: the number of windows, spread evenly over the recording (default: all
            consecutive windows).
        qd: `(T, nv)` velocities for the start states, e.g. `Recording.qd` after
            zero-phase filtering (default: central differences of ``q``).
        start: the start and prior: a `ConsistentFit` (its ``joint_sigma`` then defaults
            ``torque_sigma``), or `(P,)` consistent standard parameters (default: the
            model's, bodies that are not consistent replaced as in `consistent_fit`).
        prior_weight: the divergence's weight (> 0), reached by path following as in
            `consistent_fit`.
        joint_sigma: `(nv,)` position scales [rad] (default: the sensitivity, above).
        torque_sigma: `(nv,)` torque noise per joint [N m] for the sensitivity (default:
            the start's ``joint_sigma``, else 1).
        integrator: as `jaxrbd.rollout`.
        substeps: integrator steps per sample period (`simulate_windows`).
        dissipative: hold the armature, viscous and Coulomb coefficients ``>= 0``
            (`FrictionModel.lower_bounds`): a negative one makes the simulation unstable.
        max_iters: at most this many steps.
        tol: stop when a step reduces the cost by less than ``tol`` relative.

    Returns:
        A `SimulationFit`.

    Raises:
        ValueError: shapes that do not match, non-uniform or non-increasing ``t``,
            non-finite data, a window longer than the recording, a start that is not
            physically consistent or below the bounds, or a simulation from the start
            that diverges (non-finite positions).
    """
    nv, nb = model.nv, model.nbodies
    dt, q, tau, qd = _check_series(model, t, q, tau, qd)
    substeps = _check_substeps(substeps)
    if not prior_weight > 0:
        raise ValueError(f"prior_weight must be > 0, got {prior_weight}")
    lo_joint, _ = joint_lower_bounds(friction, None, nv, dissipative)
    p0, ids, sigma_start = _start_parameters(model, friction, start, lo_joint)
    qw, tw, starts = shooting_windows(q, tau, window, count)
    L = qw.shape[1]
    dtype = model.dtype
    if joint_sigma is None:
        ts = sigma_start if torque_sigma is None else np.asarray(torque_sigma, np.float64)
        ts = np.ones(nv) if ts is None else ts
        if ts.shape != (nv,) or not np.all(ts > 0):
            raise ValueError(f"torque_sigma must be (nv,) = ({nv},) positive values, got {ts}")
        minv = np.asarray(_inverse_mass_diagonal(identified_model(model, p0, friction),
                                                 jnp.asarray(q[starts], dtype)))
        joint_sigma = ts * minv.mean(axis=0) * ((L - 1) * dt) ** 2 / 2
    sigma = np.asarray(joint_sigma, np.float64)
    if sigma.shape != (nv,) or not np.all(sigma > 0):
        raise ValueError(f"joint_sigma must be (nv,) = ({nv},) positive values, got {sigma}")
    P = len(p0)
    free = np.concatenate([(10 * np.asarray(ids, int)[:, None] + np.arange(10)).ravel(),
                           np.arange(10 * nb, P)]).astype(int)
    lower = np.concatenate([np.full(10 * len(ids), -np.inf), lo_joint])
    J0inv = np.linalg.inv(pseudo_inertia(p0[: 10 * nb].reshape(nb, 10)[list(ids)]))
    qw_, tw_, q0, qd0 = (jnp.asarray(x, dtype) for x in (qw, tw, q[starts], qd[starts]))
    dt_ = jnp.asarray(dt, dtype)

    def whitened(p):
        e = _open_loop(model, friction, integrator, substeps, jnp.asarray(p, dtype), q0, qd0,
                       qw_, tw_, dt_)
        return np.asarray(e)[:, 1:] / sigma

    r0 = whitened(p0)
    bad = np.flatnonzero(~np.all(np.isfinite(r0), axis=(1, 2)))
    if bad.size:
        raise ValueError(
            f"the simulation from the start parameters diverges in {bad.size} of "
            f"{len(starts)} windows (first: window {bad[0]}, t = {t[starts[bad[0]]]:.3f} s): "
            f"the time step {dt:.3g} s is too long for the stiffest joint (light links with "
            "large damping or a narrow Coulomb smooth sign) or the windows too long; "
            "raise substeps or shorten the windows")
    # Path following, as consistent_fit: from the weight at which the divergence's
    # curvature matches the data's (the data's by forward differences of the compiled
    # simulation: only its order of magnitude matters), down by factors of ten, each
    # stage warm-started. A direct start with a weak prior takes data steps that leave
    # the consistent set in the directions the windows do not excite, and stalls.
    h = 1e-6 * np.maximum(np.abs(p0[free]), 1e-3 * np.abs(p0[free]).max())
    data_curvature = 0.0
    for k, i in enumerate(free):
        pk = p0.copy()
        pk[i] += h[k]
        data_curvature += 2.0 * np.sum(((whitened(pk) - r0) / h[k]) ** 2)
    h_prior = divergence_curvature(p0[: 10 * nb].reshape(nb, 10)[list(ids)])
    w_start = max(float(prior_weight), data_curvature / max(h_prior, 1e-300))
    stages = [float(prior_weight)]
    while stages[-1] * 10.0 < w_start:
        stages.append(stages[-1] * 10.0)
    z, it = jnp.asarray(p0[free], dtype), 0
    args = (jnp.asarray(p0, dtype), jnp.asarray(free), qw_, tw_, q0, qd0, dt_,
            jnp.asarray(sigma, dtype))
    for w in stages[::-1]:
        z, f, k = _solve(model, friction, integrator, substeps, *args, jnp.asarray(w, dtype),
                         z, jnp.asarray(J0inv, dtype), int(max_iters), jnp.asarray(tol, dtype),
                         jnp.asarray(lower, dtype))
        it += int(k)
    p = p0.copy()
    p[free] = np.asarray(z)
    names = friction.column_names(model)[10 * nb:]
    at = tuple(n for n, v, b in zip(names, p[10 * nb:], lo_joint) if v <= b)
    rms0, rms = (np.sqrt(np.mean((e * sigma) ** 2, axis=(0, 1))) for e in (r0, whitened(p)))
    p = jnp.asarray(p)
    return SimulationFit(p, identified_model(model, p, friction), tuple(ids), float(f), int(it),
                         float(prior_weight), sigma, rms, rms0, starts, at)
