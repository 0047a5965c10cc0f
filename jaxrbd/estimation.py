"""Joint trajectories from motion-capture markers: an extended Kalman smoother and a
per-frame inverse-kinematics baseline.

The smoother follows Wojtusch et al. (2016, eqs. 2-4) and De Groote et al. (2008): the
state of every frame is ``x = [q, qd, qdd, qddd]``; the process model assumes a constant
jerk between frames, driven by white noise on its derivative (the snap); the measurement
model is the markers' forward kinematics (`jaxrbd.marker_kinematics`). A forward pass
(filter, eqs. 2 and 3) and a Rauch-Tung-Striebel backward pass (eq. 4) give the smoothed
trajectory, each one `jax.lax.scan` over the frames.

Configurations live on the joint manifolds: the filter's error state is the tangent
vector of `jaxrbd.integrate` (``q_true = integrate(q_est, dq)``), so a floating base's
quaternion is updated multiplicatively and stays unit, and the transition Jacobian of
the configuration part is the exact derivative of ``integrate``/``difference`` (for plain
coordinates it is the identity). Missing markers (``NaN``) drop out of the update.

Everything is a pure function of arrays: `jax.jit` compiles it, `jax.vmap` runs it over
trials, and `jax.grad` differentiates it with respect to the noise parameters, the
marker offsets and the model (segment lengths are ``model.Xtree_r``), e.g. to tune the
noise by maximum likelihood (``log_likelihood``) or to calibrate markers.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Float

from ._api import (
    difference,
    integrate,
    inverse_kinematics,
    marker_kinematics,
    marker_positions,
    neutral_configuration,
)
from ._core import linalg as _linalg
from ._core.checks import as_float
from ._ik import IKTarget
from ._markers import MarkerSet

__all__ = [
    "SmootherResult",
    "constant_jerk_model",
    "extended_kalman_smoother",
    "marker_inverse_kinematics",
    "trajectory_derivatives",
]


class SmootherResult(NamedTuple):
    """The output of `extended_kalman_smoother` (a pytree; `jax.vmap` stacks it).

    Attributes:
        q: `(T, nq)` smoothed configurations.
        qd, qdd, qddd: `(T, nv)` smoothed velocities, accelerations and jerks (time
            derivatives of ``qd``; body coordinates for a free joint).
        std: `(T, 4, nv)` smoothed marginal standard deviations of the tangent errors
            of ``[q, qd, qdd, qddd]``.
        residuals: `(T, K, 3)` marker residuals ``observed - marker_positions(q)`` at
            the smoothed configurations [m], ``NaN`` where a marker is missing.
        log_likelihood: `()` the log-likelihood of the observations under the model
            (the sum over frames of the Gaussian log-density of the filter's
            innovations): maximise it to tune the noise parameters.
        q_filtered: `(T, nq)` the forward (filtered) configurations, before smoothing.
    """

    q: Float[Array, "T nq"]
    qd: Float[Array, "T nv"]
    qdd: Float[Array, "T nv"]
    qddd: Float[Array, "T nv"]
    std: Float[Array, "T 4 nv"]
    residuals: Float[Array, "T K 3"]
    log_likelihood: Float[Array, ""]
    q_filtered: Float[Array, "T nq"]


def constant_jerk_model(dt, dtype=None):
    """Transition and unit process-noise matrices of the constant-jerk model, per DoF.

    For one coordinate with state ``[q, qd, qdd, qddd]`` and white noise of unit
    spectral density on the snap (the derivative of the jerk), the exact discretisation
    over ``dt`` is ``x+ = Phi x + w`` with ``Cov(w) = Qc``,
    ``Qc[i, j] = dt^(7-i-j) / ((3-i)! (3-j)! (7-i-j))``.

    Args:
        dt: the frame interval [s].
        dtype: float dtype (JAX's default).

    Returns:
        ``(Phi, Qc)``, both `(4, 4)`.

    Example:
        >>> Phi, Qc = jaxrbd.estimation.constant_jerk_model(0.01)
        >>> Phi[0]
        Array([1.00000000e+00, 1.00000000e-02, 5.00000000e-05, 1.66666667e-07], dtype=float64)
    """
    dtype = dtype or jnp.zeros(()).dtype
    dt = jnp.asarray(dt, dtype)
    i = np.arange(4)
    p = i[None, :] - i[:, None]  # powers of dt above the diagonal
    fact = np.array([math.factorial(max(k, 0)) for k in p.ravel()], dtype=np.float64).reshape(4, 4)
    Phi = jnp.where(jnp.asarray(p >= 0), dt ** jnp.asarray(np.maximum(p, 0), dtype) / fact, 0.0)
    e = 7 - i[:, None] - i[None, :]
    den = np.array([[math.factorial(3 - a) * math.factorial(3 - b) * (7 - a - b) for b in i]
                    for a in i], dtype=np.float64)
    Qc = dt ** jnp.asarray(e, dtype) / den
    return Phi.astype(dtype), Qc.astype(dtype)


# ----------------------------------------------------------------------------- helpers


def _check_observations(model, markers, observations):
    if not isinstance(markers, MarkerSet):
        raise TypeError(f"markers must be a MarkerSet, got {type(markers).__name__}")
    z = as_float("observations", observations, model.dtype)
    K = len(markers)
    if z.ndim != 3 or z.shape[1:] != (K, 3) or z.shape[0] < 2:
        raise ValueError(
            f"observations has shape {z.shape}, expected (T, {K}, 3) with T >= 2 frames "
            f"(one row per marker of the MarkerSet; use jax.vmap for several trials)"
        )
    return z


def _per_dof(name, x, nv, dtype):
    x = as_float(name, x, dtype)
    if x.shape not in ((), (nv,)):
        raise ValueError(f"{name} has shape {x.shape}, expected () or ({nv},) = (model.nv,)")
    return jnp.broadcast_to(x, (nv,))


def _visible(z):
    """Rows ``(3K,)`` of finite observations and the observations with NaNs zeroed."""
    m = jnp.all(jnp.isfinite(z), axis=-1)
    rows = jnp.repeat(m, 3)
    return rows, jnp.where(rows, z.reshape(-1), 0.0)


def _marker_start(model, markers, z):
    """A start configuration for frame ``z``: neutral, with the floating base moved so
    that the visible markers' centroid matches."""
    q = neutral_configuration(model)
    free = [b for b in range(1, model.nbodies) if model.joint_kind[b] == "free"]
    if not free:
        return q
    m = jnp.all(jnp.isfinite(z), axis=-1)
    n = jnp.maximum(jnp.sum(m), 1)
    P = marker_positions(model, q, markers)
    shift = jnp.sum(jnp.where(m[:, None], jnp.where(m[:, None], z, 0.0) - P, 0.0), axis=0) / n
    s = model.q_start[free[0]]
    return q.at[s : s + 3].add(shift)


def _ik_targets(markers, z):
    rows = jnp.all(jnp.isfinite(z), axis=-1)
    zs = jnp.where(rows[:, None], z, 0.0)
    w = rows.astype(z.dtype)
    return [
        IKTarget(b, position=zs[k], point=markers.offsets[k], position_weight=w[k])
        for k, b in enumerate(markers.bodies)
    ]


def _ik_frame(model, markers, z, q_start, max_iters):
    res = inverse_kinematics(model, q_start, _ik_targets(markers, z), max_iters=max_iters,
                             restarts=False, respect_limits=False, tol=1e-12)
    return res.q


# ----------------------------------------------------------------------------- SPD algebra

#: Triangular blocks up to this size are inverted by one triangular solve.
_LEAF = 16


def _tri_inv(L):
    """``L^-1`` of a lower-triangular matrix by recursive 2x2 blocking: matrix products
    and a few small triangular solves (on the CPU far faster than one triangular solve
    with many right-hand sides)."""
    n = L.shape[0]
    if n <= _LEAF:
        return lax.linalg.triangular_solve(L, jnp.eye(n, dtype=L.dtype), left_side=True,
                                           lower=True)
    h = n // 2
    Ai, Di = _tri_inv(L[:h, :h]), _tri_inv(L[h:, h:])
    Z = jnp.zeros((h, n - h), L.dtype)
    return jnp.block([[Ai, Z], [-(Di @ L[h:, :h]) @ Ai, Di]])


def _chol_inv(A):
    """Cholesky factor ``L`` of an SPD matrix and ``L^-1``."""
    L = _linalg.cholesky(A)
    return L, _tri_inv(L)


# ----------------------------------------------------------------------------- manifolds

#: Terms of the series of ``exp(-ad_u)`` and of the right Jacobian: the first term left
#: out is ``|u|^13 / 13!`` relative, below 1e-9 for steps up to 1 rad per frame.
_SERIES_TERMS = 13


def _hat(w):
    z = jnp.zeros((), w.dtype)
    return jnp.array([[z, -w[2], w[1]], [w[2], z, -w[0]], [-w[1], w[0], z]])


def _step_jacobians(model, q, u):
    """``A = d/d(dq)`` and ``B = d/d(du)`` of ``((q (+) dq) (+) (u + du)) (-) (q (+) u)`` at 0.

    Plain coordinates: identity. A free joint moves by the SE(3) exponential of the
    body twist ``u = [w; v]`` (`jaxrbd.integrate`), so ``A = Ad(Exp(u))^-1 = exp(-ad_u)``
    and ``B`` is SE(3)'s right Jacobian ``sum_k (-ad_u)^k / (k + 1)!``, with
    ``ad_u = [[w^, 0], [v^, w^]]``; a spherical joint has the SO(3) versions (``ad_u =
    w^``). Both series are summed to `_SERIES_TERMS` terms.
    """
    nv = model.nv
    A = jnp.eye(nv, dtype=q.dtype)
    B = jnp.eye(nv, dtype=q.dtype)
    for b in range(1, model.nbodies):
        kind, vs = model.joint_kind[b], model.v_start[b]
        if kind == "free":
            w, v = u[vs : vs + 3], u[vs + 3 : vs + 6]
            Z = jnp.zeros((3, 3), q.dtype)
            ad = jnp.block([[_hat(w), Z], [_hat(v), _hat(w)]])
        elif kind == "spherical":
            ad = _hat(u[vs : vs + 3])
        else:
            continue
        n = ad.shape[0]
        term = jnp.eye(n, dtype=q.dtype)  # (-ad)^k / k!
        Aj, Bj = term, term
        for k in range(1, _SERIES_TERMS):
            term = -(term @ ad) / k
            Aj = Aj + term
            Bj = Bj + term / (k + 1)
        A = A.at[vs : vs + n, vs : vs + n].set(Aj)
        B = B.at[vs : vs + n, vs : vs + n].set(Bj)
    return A, B


# ----------------------------------------------------------------------------- smoother


def extended_kalman_smoother(
    model,
    markers,
    observations,
    dt,
    *,
    marker_std=0.005,
    snap_std=3000.0,
    initial_std=(0.1, 1.0, 10.0, 100.0),
    q0=None,
    ik_iters=50,
):
    """Smoothed joint trajectories ``[q, qd, qdd, qddd]`` from marker trajectories, by an
    extended Kalman filter and a Rauch-Tung-Striebel smoother.

    Wojtusch et al. (2016, eqs. 2-4), after De Groote et al. (2008). Per frame ``t``:

    * **predict** (eq. 2): ``q <- integrate(q, qd dt + qdd dt^2/2 + qddd dt^3/6)``,
      ``qd <- qd + qdd dt + qddd dt^2/2``, ``qdd <- qdd + qddd dt`` (constant jerk);
      ``P <- F P F^T + Q`` with ``Q = Qc (x) diag(snap_std^2)`` (`constant_jerk_model`)
      and ``F`` the exact tangent-space Jacobian of the prediction;
    * **update** (eq. 3) with the visible markers: ``K = P H^T (H P H^T + R)^-1``,
      ``H = [J, 0, 0, 0]`` (``J`` from `jaxrbd.marker_kinematics`),
      ``R = marker_std^2 I``; the state moves by ``K (z - h(q))`` on the manifold;
      the covariance update is Joseph's form (it stays symmetric positive definite);
    * **smooth** (eq. 4), backwards: ``G = P_f F^T P_pred^-1``,
      ``x_s = x_f (+) G (x_s[t+1] (-) x_pred[t+1])``,
      ``P_s = P_f + G (P_s[t+1] - P_pred) G^T``.

    The prior of frame 0 is ``q0`` (default: `inverse_kinematics` on the first frame,
    from the neutral pose moved to the markers' centroid) with zero derivatives and
    standard deviations ``initial_std``. Markers missing in a frame (any ``NaN``
    coordinate) are left out of that frame's update; a frame with no markers is a pure
    prediction. Each pass is one `jax.lax.scan`; a frame costs one kinematics pass for
    all markers and ``O((4 nv)^3 + (4 nv)^2 3K)`` of dense linear algebra.

    Derivatives: everything except the default ``q0`` (the prior mean, held fixed) is
    differentiable: the noise parameters, ``markers.offsets``, the model's leaves
    (segment lengths are ``model.Xtree_r``) and the observations.

    Args:
        model: a `Model` (any joints; a free joint's quaternion is handled on SO(3)).
        markers: the `MarkerSet` of the ``K`` observed markers.
        observations: `(T, K, 3)` marker positions in world coordinates [m], rows in
            ``markers``' order, ``NaN`` where missing.
        dt: the frame interval [s] (a scalar).
        marker_std: measurement noise standard deviation [m], a scalar or `(K,)`.
        snap_std: process noise: the square root of the spectral density of the white
            snap driving each coordinate [rad/s^4/sqrt(Hz) or m/s^4/sqrt(Hz)], a scalar
            or `(nv,)`. Larger values follow the markers more closely.
        initial_std: prior standard deviations of ``(q, qd, qdd, qddd)`` at frame 0,
            four scalars or four `(nv,)` arrays.
        q0: `(nq,)` prior mean configuration of frame 0 (default: IK on frame 0).
        ik_iters: iterations of that initial IK (a Python int).

    Returns:
        A `SmootherResult`.

    Raises:
        ValueError: observations not `(T, K, 3)`, noise parameters of the wrong shape.
        TypeError: ``markers`` not a `MarkerSet`.

    Example:
        >>> ms = jaxrbd.MarkerSet.from_dict(
        ...     {f"m{k}": (f"body_{k}", (0.1, 0.05, -0.5)) for k in (1, 2, 3)})
        >>> Z = jnp.stack([jaxrbd.marker_positions(model, jnp.full(model.nq, 0.01 * t), ms)
        ...                for t in range(5)])
        >>> res = jaxrbd.estimation.extended_kalman_smoother(model, ms, Z, 0.01,
        ...                                                  q0=jnp.zeros(model.nq))
        >>> res.q.shape, res.std.shape
        ((5, 9), (5, 4, 9))
    """
    with jax.named_scope("jaxrbd.extended_kalman_smoother"):
        z = _check_observations(model, markers, observations)
        dtype, nv, K = model.dtype, model.nv, len(markers)
        dt = as_float("dt", dt, dtype)
        if dt.ndim != 0:
            raise ValueError(f"dt has shape {dt.shape}, expected a scalar ()")
        sigma_z = as_float("marker_std", marker_std, dtype)
        if sigma_z.shape not in ((), (K,)):
            raise ValueError(f"marker_std has shape {sigma_z.shape}, expected () or ({K},)")
        Rdiag = jnp.repeat(jnp.broadcast_to(sigma_z, (K,)) ** 2, 3)
        sigma_s = _per_dof("snap_std", snap_std, nv, dtype)
        if len(initial_std) != 4:
            raise ValueError(f"initial_std needs 4 entries (q, qd, qdd, qddd), got {initial_std!r}")
        P0 = jnp.diag(jnp.concatenate(
            [_per_dof(f"initial_std[{k}]", s, nv, dtype) ** 2 for k, s in enumerate(initial_std)]
        ))
        if q0 is None:
            q_start = _marker_start(model, markers, z[0])
            q0 = lax.stop_gradient(_ik_frame(model, markers, z[0], q_start, int(ik_iters)))
        else:
            q0 = as_float("q0", q0, dtype)
            if q0.shape != (model.nq,):
                raise ValueError(f"q0 has shape {q0.shape}, expected ({model.nq},) = (model.nq,)")

        Phi, Qc = constant_jerk_model(dt, dtype)
        # state covariance blocks are ordered [q; qd; qdd; qddd], each nv wide
        Q = jnp.kron(Qc, jnp.diag(sigma_s**2))
        PhiV = jnp.kron(Phi[1:, 1:], jnp.eye(nv, dtype=dtype))
        step = Phi[0, 1:]  # (dt, dt^2/2, dt^3/6)

        def predict(q, V):
            """Mean and tangent Jacobian ``F`` of the constant-jerk prediction."""
            u = step @ V
            q_p = integrate(model, q, u)
            V_p = (PhiV @ V.reshape(-1)).reshape(3, nv)
            return q_p, V_p, _step_jacobians(model, q, u)

        c = [step[0], step[1], step[2]]
        Phi3 = Phi[1:, 1:]

        def apply_F(AB, X):
            """``F @ X`` for ``X`` with ``4 nv`` rows, using F's block structure:
            ``[[A, c0 B, c1 B, c2 B], [0, Phi3 (x) I]]``."""
            A, B = AB
            Xb = X.reshape((4, nv) + X.shape[1:])
            top = A @ Xb[0] + B @ (c[0] * Xb[1] + c[1] * Xb[2] + c[2] * Xb[3])
            low = jnp.tensordot(Phi3, Xb[1:], axes=1)
            return jnp.concatenate([top[None], low]).reshape(X.shape)

        def propagate(AB, P):
            """``F P F^T + Q`` (symmetric)."""
            FP = apply_F(AB, P)
            P_p = apply_F(AB, FP.T) + Q
            return 0.5 * (P_p + P_p.T), FP

        def update(q, V, P, z_t):
            rows, zs = _visible(z_t)
            h, J = marker_kinematics(model, q, markers)
            r = jnp.where(rows, zs - h.reshape(-1), 0.0)
            Jm = J * rows[:, None].astype(dtype)
            PHt = P[:, :nv] @ Jm.T  # (4nv, 3K)
            S = Jm @ PHt[:nv] + jnp.diag(jnp.where(rows, Rdiag, 1.0))
            L, Li = _chol_inv(S)
            # with S = L L^T: gain K = W L^-1, W = P H^T L^-T; P_f = P - W W^T
            W = PHt @ Li.T
            w = Li @ r
            dx = W @ w
            q_f = integrate(model, q, dx[:nv])
            V_f = V + dx[nv:].reshape(3, nv)
            P_f = P - W @ W.T
            P_f = 0.5 * (P_f + P_f.T)
            # Gaussian log-density of the innovation over the visible rows (hidden rows
            # have r = 0 and a unit diagonal in S, so they add nothing)
            n_vis = jnp.sum(rows.astype(dtype))
            ll = -0.5 * (w @ w) - jnp.sum(jnp.log(jnp.diagonal(L))) - 0.5 * n_vis * math.log(
                2 * math.pi)
            return q_f, V_f, P_f, ll

        def forward(carry, z_t):
            q, V, P, ll = carry
            q_f, V_f, P_f, ll_t = update(q, V, P, z_t)
            q_p, V_p, AB = predict(q_f, V_f)
            P_p, _ = propagate(AB, P_f)
            return (q_p, V_p, P_p, ll + ll_t), (q_f, V_f, P_f, q_p, V_p, AB)

        V0 = jnp.zeros((3, nv), dtype)
        carry0 = (q0, V0, P0, jnp.zeros((), dtype))
        (_, _, _, ll), (q_f, V_f, P_f, q_p, V_p, AB) = lax.scan(forward, carry0, z)

        def backward(carry, xs):
            q_n, V_n, P_n = carry  # smoothed at t + 1
            q, V, P, q_p, V_p, AB = xs  # filtered at t, predicted for t + 1
            P_p, FP = propagate(AB, P)
            _, Lpi = _chol_inv(P_p)
            G = (FP.T @ Lpi.T) @ Lpi  # P F^T P_p^-1
            dx = G @ jnp.concatenate([difference(model, q_p, q_n), (V_n - V_p).reshape(-1)])
            q_s = integrate(model, q, dx[:nv])
            V_s = V + dx[nv:].reshape(3, nv)
            P_s = P + G @ (P_n - P_p) @ G.T
            P_s = 0.5 * (P_s + P_s.T)
            return (q_s, V_s, P_s), (q_s, V_s, jnp.diagonal(P_s))

        last = (q_f[-1], V_f[-1], P_f[-1])
        xs = jax.tree_util.tree_map(lambda x: x[:-1], (q_f, V_f, P_f, q_p, V_p, AB))
        _, (q_s, V_s, d_s) = lax.scan(backward, last, xs, reverse=True)
        q_s = jnp.concatenate([q_s, q_f[-1:]])
        V_s = jnp.concatenate([V_s, V_f[-1:]])
        d_s = jnp.concatenate([d_s, jnp.diagonal(P_f[-1])[None]])
        std = jnp.sqrt(jnp.maximum(d_s, 0.0)).reshape(-1, 4, nv)
        h = jax.vmap(marker_positions, (None, 0, None))(model, q_s, markers)
        return SmootherResult(q_s, V_s[:, 0], V_s[:, 1], V_s[:, 2], std, z - h, ll, q_f)


# ----------------------------------------------------------------------------- baseline


def marker_inverse_kinematics(model, markers, observations, *, q0=None, max_iters=20):
    """Per-frame inverse kinematics on the markers: the baseline for the smoother.

    Every frame is solved on its own by `jaxrbd.inverse_kinematics` (Levenberg-Marquardt
    on the visible markers, equal weights), warm-started from the previous frame's
    solution (one `jax.lax.scan` over the frames). No temporal model: velocities and
    accelerations come from differentiating the result (`trajectory_derivatives`).

    Args:
        model: a `Model`.
        markers: the `MarkerSet` of the ``K`` observed markers.
        observations: `(T, K, 3)` world positions [m], ``NaN`` where missing.
        q0: `(nq,)` start configuration of the first frame (default: neutral, the
            floating base moved to the markers' centroid).
        max_iters: Levenberg-Marquardt iterations per frame (a Python int); the first
            frame gets ``5 max_iters``.

    Returns:
        `(T, nq)` configurations.

    Example:
        >>> ms = jaxrbd.MarkerSet.from_dict(
        ...     {f"m{k}": (f"body_{k}", (0.1, 0.05, -0.5)) for k in (1, 2, 3)})
        >>> Z = jnp.stack([jaxrbd.marker_positions(model, jnp.full(model.nq, 0.01 * t), ms)
        ...                for t in range(3)])
        >>> jaxrbd.estimation.marker_inverse_kinematics(model, ms, Z).shape
        (3, 9)
    """
    with jax.named_scope("jaxrbd.marker_inverse_kinematics"):
        z = _check_observations(model, markers, observations)
        if isinstance(max_iters, bool) or not isinstance(max_iters, (int, np.integer)):
            raise TypeError(f"max_iters must be a Python int, got {type(max_iters).__name__}")
        if q0 is None:
            q0 = _marker_start(model, markers, z[0])
        q0 = as_float("q0", q0, model.dtype)
        if q0.shape != (model.nq,):
            raise ValueError(f"q0 has shape {q0.shape}, expected ({model.nq},) = (model.nq,)")
        q_first = _ik_frame(model, markers, z[0], q0, 5 * int(max_iters))

        def frame(q_prev, z_t):
            q = _ik_frame(model, markers, z_t, q_prev, int(max_iters))
            return q, q

        _, Q = lax.scan(frame, q_first, z[1:])
        return jnp.concatenate([q_first[None], Q])


def trajectory_derivatives(model, q, dt):
    """Velocities and accelerations of a sampled configuration path by finite differences.

    Central differences on the joint manifolds (``qd[t] = difference(q[t-1], q[t+1]) /
    (2 dt)``; one-sided at the ends), applied twice for ``qdd``. This is what per-frame
    IK gives without a temporal model; noise in ``q`` is amplified by ``1/dt`` and
    ``1/dt^2``.

    Args:
        model: a `Model`.
        q: `(T, nq)` configurations, ``T >= 3``.
        dt: the sample interval [s].

    Returns:
        ``(qd, qdd)``, both `(T, nv)`.

    Example:
        >>> Q = jnp.stack([jnp.full(model.nq, 0.1 * k) for k in range(5)])
        >>> qd, qdd = jaxrbd.estimation.trajectory_derivatives(model, Q, 0.1)
        >>> bool(jnp.allclose(qd, 1.0)), bool(jnp.allclose(qdd, 0.0))
        (True, True)
    """
    q = as_float("q", q, model.dtype)
    if q.ndim != 2 or q.shape[1] != model.nq or q.shape[0] < 3:
        raise ValueError(f"q has shape {q.shape}, expected (T, {model.nq}) with T >= 3")
    dt = as_float("dt", dt, model.dtype)
    diff = jax.vmap(lambda a, b: difference(model, a, b))
    mid = diff(q[:-2], q[2:]) / (2 * dt)
    qd = jnp.concatenate([diff(q[:1], q[1:2]) / dt, mid, diff(q[-2:-1], q[-1:]) / dt])
    qdd = jnp.concatenate([
        (qd[1:2] - qd[:1]) / dt, (qd[2:] - qd[:-2]) / (2 * dt), (qd[-1:] - qd[-2:-1]) / dt
    ])
    return qd, qdd
