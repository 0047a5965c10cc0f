"""The simulation-error (output-error) fit: base parameters chosen so that simulating the
recorded torques reproduces the recorded positions, by multiple shooting through
`jaxrbd.rollout` with exact Jacobians.

Positions-only logs have no clean velocities or accelerations, and the torque residual
of the inverse-dynamics fit (`least_squares`, `consistent_fit`) then carries the noise of
a double differentiation. The output error compares measured and simulated positions
instead. A single long simulation drifts away from the recording (the forward dynamics
of an arm are unstable in open loop), so the recording is cut into windows, each
simulated from its own start state (multiple shooting; Bock and Plitt 1984). The start
states are unknowns beside the parameters; an optional penalty on the continuity
defects between consecutive windows ties them into one trajectory.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._integrators import rollout
from .._jit import jit
from ._base import BaseParameters
from ._drive import FrictionModel
from ._estimators import identified_model, levenberg_marquardt, standard_parameters

__all__ = ["SimulationFit", "shooting_windows", "simulate_windows", "simulation_error_fit"]


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


def shooting_windows(q, tau, length: int):
    """Cut a recording into consecutive windows of ``length`` samples that share their
    boundary samples (window ``w`` covers samples ``w (L - 1)`` to ``(w + 1)(L - 1)``);
    the samples after the last whole window are dropped.

    Args:
        q: `(T, nv)` positions.
        tau: `(T, nv)` torques.
        length: ``L >= 2`` samples per window.

    Returns:
        ``(q_windows (W, L, nv), tau_windows (W, L - 1, nv), starts (W,))``, ``starts``
        the index of each window's first sample.

    Example:
        >>> qw, tw, starts = shooting_windows(np.zeros((10, 2)), np.zeros((10, 2)), 4)
        >>> qw.shape, tw.shape, starts.tolist()
        ((3, 4, 2), (3, 3, 2), [0, 3, 6])
    """
    q, tau = np.asarray(q, np.float64), np.asarray(tau, np.float64)
    L = int(length)
    if L < 2:
        raise ValueError(f"length must be >= 2 samples, got {length}")
    if q.ndim != 2 or tau.shape != q.shape:
        raise ValueError(f"q has shape {q.shape} and tau {tau.shape}: expected (T, nv) each")
    W = (len(q) - 1) // (L - 1)
    if W < 1:
        raise ValueError(f"the recording has {len(q)} samples, fewer than one window of {L}")
    starts = np.arange(W) * (L - 1)
    idx = starts[:, None] + np.arange(L)
    return q[idx], tau[idx[:, :-1]], starts


def _base_lower_bounds(base: BaseParameters, nv: int, dissipative: bool):
    """`(nb,)` lower bounds of the base parameters: ``FrictionModel.lower_bounds`` for a
    base parameter that is one bounded joint term alone (its row of ``E`` a positive
    multiple of that column's unit vector), ``-inf`` for the others."""
    E = np.asarray(base.E, np.float64)
    lo = np.full(E.shape[0], -np.inf)
    if not dissipative:
        return lo
    n_in = E.shape[1] - base.friction.n_columns(nv)
    lo_cols = base.friction.lower_bounds(nv)
    for r, row in enumerate(E):
        nz = np.flatnonzero(row)
        if len(nz) == 1 and nz[0] >= n_in and row[nz[0]] > 0:
            lo[r] = lo_cols[nz[0] - n_in]
    return lo


class SimulationFit(NamedTuple):
    """The result of `simulation_error_fit`.

    Attributes:
        base: `(nb,)` the base parameters.
        params: `(P,)` standard parameters with them, closest to the prior (not in
            general physically consistent: the fit constrains only the base parameters).
        model: `identified_model` of ``params``.
        q0: `(W, nv)` the windows' fitted start positions [rad].
        qd0: `(W, nv)` their start velocities [rad/s].
        cost: the final cost (whitened squared position errors plus the weighted
            squared defects).
        iterations: Levenberg-Marquardt steps taken.
        joint_rms: `(nv,)` RMS of the simulated minus measured positions per joint [rad].
        start_rms: `(nv,)` the same with the start parameters and start states.
        max_defect: the largest continuity defect between consecutive windows (positions
            [rad] and velocities [rad/s] alike).
    """

    base: np.ndarray
    params: np.ndarray
    model: object
    q0: np.ndarray
    qd0: np.ndarray
    cost: float
    iterations: int
    joint_rms: np.ndarray
    start_rms: np.ndarray
    max_defect: float


@functools.partial(jit, static_argnames=("friction", "integrator", "substeps", "max_iters"))
def _solve(model, friction, integrator, substeps, Einv, E, p_prior, qw, tw, dt, sigma, weight,
           z0, max_iters, tol, lower):
    W, L, nv = qw.shape
    nb = E.shape[0]
    ns = 2 * nv

    def params(pb):
        return p_prior + Einv @ (pb - E @ p_prior)

    def window(x, q_meas, tau):
        """Rows of one window, ``x = (p_b, s_w, s_w+1)``: the whitened position errors,
        then the (unweighted) defect to the next window's start."""
        pb, s, s_next = x[:nb], x[nb:nb + ns], x[nb + ns:]
        qs, qds = simulate_windows(model, params(pb), friction, s[None, :nv], s[None, nv:],
                                   tau[None], dt, integrator, substeps)
        r = ((qs[0] - q_meas) / sigma[None, :]).ravel()
        defect = jnp.concatenate([qs[0, -1], qds[0, -1]]) - s_next
        return jnp.concatenate([r, defect])

    # every window's defect is to the next window's start; the last one's is weighted 0
    # (and points at its own start, so the scatter below stays in bounds)
    nxt = jnp.minimum(jnp.arange(W) + 1, W - 1)
    w_def = jnp.where(jnp.arange(W) < W - 1, weight, 0.0)
    row_w = jnp.concatenate([jnp.ones((W, L * nv), qw.dtype),
                             jnp.broadcast_to(w_def[:, None], (W, ns))], axis=1)
    # the unknowns a window touches: the base parameters, its start, the next start
    idx = jnp.concatenate([
        jnp.broadcast_to(jnp.arange(nb), (W, nb)),
        nb + ns * jnp.arange(W)[:, None] + jnp.arange(ns)[None, :],
        nb + ns * nxt[:, None] + jnp.arange(ns)[None, :],
    ], axis=1)
    basis = jnp.eye(nb + 2 * ns, dtype=qw.dtype)

    def local(z):
        return z[idx]  # (W, nb + 2 ns)

    def rows(z):
        return jax.vmap(window)(local(z), qw, tw)

    def cost(z):
        r = rows(z) * row_w
        return jnp.sum(r * r)

    def normal(z):
        # each window's Jacobian with respect to the unknowns it touches (exact,
        # forward mode: nb + 4 nv directions), batched over the windows
        def one(x, q_meas, tau):
            def jvp(v):
                return jax.jvp(lambda y: window(y, q_meas, tau), (x,), (v,))
            return jax.vmap(jvp, out_axes=(None, 1))(basis)

        r, J = jax.vmap(one)(local(z), qw, tw)
        r, J = r * row_w, J * row_w[:, :, None]
        n = z.size
        H = jnp.zeros((n, n), z.dtype).at[idx[:, :, None], idx[:, None, :]].add(
            2.0 * jnp.einsum("wri,wrj->wij", J, J))
        g = jnp.zeros(n, z.dtype).at[idx].add(2.0 * jnp.einsum("wri,wr->wi", J, r))
        return jnp.sum(r * r), g, H

    s = levenberg_marquardt(cost, normal, z0, max_iters, tol, lower)
    # the start and the end in one batched evaluation
    both = jax.vmap(rows)(jnp.stack([z0, s.x]))
    err = both[:, :, : L * nv].reshape(2, W, L, nv) * sigma[None, None, None, :]
    r0, r1 = err[0], err[1]
    defects = both[1, :-1, L * nv:]
    return s.x, s.f, s.it, r0, r1, params(s.x[:nb]), defects


def simulation_error_fit(model, t, q, tau, base: BaseParameters, *, window: int,
                         prior=None, start=None, qd=None, joint_sigma=None,
                         continuity: float = 0.0, integrator: str = "rk4", substeps: int = 1,
                         dissipative: bool = True, max_iters: int = 50,
                         tol: float = 1e-10) -> SimulationFit:
    """The base parameters that make the simulated positions match the measured ones.

    Minimises, over the base parameters ``p_b`` and the start states ``s_w = (q_w,
    qd_w)`` of ``W`` windows of ``window`` samples (`shooting_windows`),

        ``sum_w sum_k sum_j ((q_sim(p_b, s_w)_kj - q_kj) / sigma_j)^2
        + continuity^2 sum_w |x_end(p_b, s_w) - s_(w+1)|^2``

    where ``q_sim`` simulates the window (`simulate_windows`, the recorded torques held
    over each sample period) from ``s_w`` with the standard parameters
    ``prior + E^+ (p_b - E prior)`` (`BaseParameters.from_base`), and ``x_end`` is its
    last state. The simulated dynamics depend on the standard parameters only through
    the base parameters, so these are exactly what the output error can determine. The
    start positions are unknowns too: the residual at each window's first sample keeps
    them near the measured ones. ``continuity > 0`` penalises the defects between
    consecutive windows (multiple shooting); ``0`` leaves the windows independent.

    Levenberg-Marquardt with the exact Jacobian: forward mode through `jaxrbd.rollout`,
    batched over the windows, one window's ``nb + 4 nv`` directions at a time (the
    Jacobian is block sparse: a window touches the base parameters, its own start and
    the next window's). Short windows keep the problem well conditioned; a window
    should be shorter than the time the open-loop simulation takes to diverge.

    Args:
        model: the `jaxrbd.Model` (structure; 1-DoF joints).
        t: `(T,)` uniformly sampled times [s] (resample first: `Recording.resample`).
        q: `(T, nv)` measured positions [rad].
        tau: `(T, nv)` measured joint torques [N m] (``tau[k]`` held over ``[t_k,
            t_k+1)``).
        base: the `BaseParameters` (its `FrictionModel` gives the joint terms).
        window: samples per window (>= 2).
        prior: `(P,)` standard parameters the parameters stay closest to (default the
            model's, `standard_parameters`).
        start: `(nb,)` base parameters to start from (default ``E prior``; a
            `least_squares` or `consistent_fit` estimate converges faster).
        qd: `(T, nv)` velocities for the start states (default: central differences
            of ``q``).
        joint_sigma: `(nv,)` position noise per joint [rad] for whitening (default 1).
        continuity: weight of the continuity defects (>= 0).
        integrator: as `jaxrbd.rollout`.
        substeps: integrator steps per sample period (`simulate_windows`).
        dissipative: hold the base parameters that are a joint's armature, viscous or
            Coulomb coefficient alone ``>= 0`` (`FrictionModel.lower_bounds`; projected
            steps, as `consistent_fit`): a negative one makes the simulation unstable.
            Base parameters that mix a joint term with inertias stay free.
        max_iters: at most this many steps.
        tol: stop when a step reduces the cost by less than ``tol`` relative.

    Returns:
        A `SimulationFit`.

    Raises:
        ValueError: shapes that do not match, non-uniform or non-increasing ``t``,
            non-finite data, a window longer than the recording, ``continuity < 0``, or
            a simulation from the start that diverges (non-finite positions).
    """
    nv = model.nv
    friction = base.friction
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
    if int(substeps) != substeps or substeps < 1:
        raise ValueError(f"substeps must be an integer >= 1, got {substeps}")
    if not continuity >= 0:
        raise ValueError(f"continuity must be >= 0, got {continuity}")
    qd = np.gradient(q, dt, axis=0) if qd is None else np.asarray(qd, np.float64)
    if qd.shape != q.shape:
        raise ValueError(f"qd has shape {qd.shape}, expected {q.shape}")
    sigma = np.ones(nv) if joint_sigma is None else np.asarray(joint_sigma, np.float64)
    if sigma.shape != (nv,) or not np.all(sigma > 0):
        raise ValueError(f"joint_sigma must be (nv,) = ({nv},) positive values, got {sigma}")
    p_prior = np.asarray(standard_parameters(model, friction) if prior is None else prior,
                         np.float64)
    E = np.asarray(base.E, np.float64)
    if p_prior.shape != (E.shape[1],):
        raise ValueError(f"prior has shape {p_prior.shape}, expected ({E.shape[1]},)")
    pb0 = E @ p_prior if start is None else np.asarray(start, np.float64)
    if pb0.shape != (E.shape[0],):
        raise ValueError(f"start has shape {pb0.shape}, expected ({E.shape[0]},) base "
                         "parameters")
    lo_b = _base_lower_bounds(base, nv, dissipative)
    if start is None:
        pb0 = np.maximum(pb0, lo_b)
    elif not np.all(pb0 >= lo_b):
        bad = [int(k) for k in np.flatnonzero(~(pb0 >= lo_b))]
        raise ValueError(f"start is below the lower bounds of dissipative=True in base "
                         f"parameters {bad} (joint terms): start from a dissipative fit "
                         "(consistent_fit) or pass dissipative=False")
    qw, tw, starts = shooting_windows(q, tau, window)
    z0 = np.concatenate([pb0, np.concatenate([q[starts], qd[starts]], axis=1).ravel()])
    lower = np.concatenate([lo_b, np.full(len(z0) - len(pb0), -np.inf)])
    dtype = model.dtype
    args = [jnp.asarray(x, dtype) for x in (np.linalg.pinv(E), E, p_prior, qw, tw)]
    z, f, it, r0, r1, p, defects = _solve(
        model, friction, integrator, int(substeps), *args, jnp.asarray(dt, dtype),
        jnp.asarray(sigma, dtype), jnp.asarray(continuity, dtype), jnp.asarray(z0, dtype),
        int(max_iters), jnp.asarray(tol, dtype), jnp.asarray(lower, dtype))
    bad = np.flatnonzero(~np.all(np.isfinite(np.asarray(r0)), axis=(1, 2)))
    if bad.size:
        raise ValueError(
            f"the simulation from the start parameters and states diverges in {bad.size} of "
            f"{len(starts)} windows (first: window {bad[0]}, t = {t[starts[bad[0]]]:.3f} s): "
            f"the time step {dt:.3g} s is too long for the stiffest joint (light links with "
            "large damping or a narrow Coulomb smooth sign) or the windows too long; "
            "raise substeps or shorten the windows")
    z = np.asarray(z)
    nb = E.shape[0]
    S = z[nb:].reshape(-1, 2 * nv)
    rms = np.sqrt(np.mean(np.asarray(r1) ** 2, axis=(0, 1)))
    rms0 = np.sqrt(np.mean(np.asarray(r0) ** 2, axis=(0, 1)))
    max_defect = float(np.max(np.abs(np.asarray(defects)))) if len(S) > 1 else 0.0
    return SimulationFit(z[:nb], np.asarray(p), identified_model(model, p, friction),
                         S[:, :nv], S[:, nv:], float(f), int(it), rms, rms0,
                         max_defect)
