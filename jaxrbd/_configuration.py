"""Configurations on the joint manifolds: `integrate`, `difference`, `neutral_configuration`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._core import algebra as al
from ._core import ffi_move
from ._core.checks import as_float, check_state, check_vector
from ._core.rotation import (
    cross_c,
    log_quat,
    normalize_quat,
    normalize_quat_c,
    quat_mul,
    quat_mul_c,
    quat_rotate_c,
    quat_to_R,
    so3_exp_c,
    so3_left_jacobian_inv,
    so3_left_jacobian_mv_c,
)
from ._core.rows import place_rows, take_rows

__all__ = ["integrate", "difference", "neutral_configuration", "random_configuration"]


def _blocks(model, kinds):
    """Static ``(q_start, v_start)`` arrays of the joints of the given kinds."""
    bodies = [b for b in range(1, model.nbodies) if model.joint_kind[b] in kinds]
    return np.array([model.q_start[b] for b in bodies], dtype=np.int64), np.array(
        [model.v_start[b] for b in bodies], dtype=np.int64
    )


def euclidean_maps(model):
    """Static q indices and v indices of the plain (q_dot = v) coordinates."""
    qi, vi = [], []
    for b in range(1, model.nbodies):
        if model.joint_kind[b] in ("fixed", "spherical", "free"):
            continue
        n = model.joint_nq(b)
        qi += range(model.q_start[b], model.q_start[b] + n)
        vi += range(model.v_start[b], model.v_start[b] + n)
    return np.array(qi, dtype=np.int64), np.array(vi, dtype=np.int64)


def tangent_of_coordinates(model, q, dq):
    """The manifold tangent ``(nv,)`` of a coordinate tangent ``dq (nq,)`` at ``q``.

    The exact linear map under which ``jvp(f, q, dq) == (d f / dq) @ v`` for the tangent-
    space derivatives of `jaxrbd.forward_dynamics_derivatives` (``integrate``'s
    directions). The dynamics see a quaternion ``a`` only through ``a / |a|`` and
    ``integrate`` moves ``a`` to ``a exp(w) / |a|``, so with ``a`` not necessarily unit
    ``w = 2 vec(conj(a) da) / |a|^2`` (the radial part of ``da`` gives zero), and a free
    joint's position ``p`` moves by ``R(a) v_lin``, so ``v_lin = R(a)^T dp``. Every other
    coordinate is its own tangent.
    """
    idx, parts = [], []
    qi, vi = euclidean_maps(model)
    if len(qi):
        idx.append(vi)
        parts.append(take_rows(dq, qi))
    for kind, off in (("spherical", 0), ("free", 3)):
        qs, vs = _blocks(model, (kind,))
        if not len(qs):
            continue
        k4 = (qs[:, None] + off + np.arange(4)).reshape(-1)
        a, da = take_rows(q, k4).reshape(-1, 4), take_rows(dq, k4).reshape(-1, 4)  # (J, 4)
        aw, av, dw, dv = a[:, :1], a[:, 1:], da[:, :1], da[:, 1:]
        w = 2.0 * (aw * dv - dw * av - jnp.cross(av, dv)) / jnp.sum(a * a, axis=1, keepdims=True)
        idx.append((vs[:, None] + np.arange(3)).reshape(-1))
        parts.append(w.reshape(-1))
        if kind == "free":
            R = quat_to_R(a[..., None])[..., 0]  # (J, 3, 3), child -> parent
            dp = take_rows(dq, (qs[:, None] + np.arange(3)).reshape(-1)).reshape(-1, 3)
            idx.append((vs[:, None] + 3 + np.arange(3)).reshape(-1))
            parts.append(jnp.einsum("jki,jk->ji", R, dp).reshape(-1))
    if not parts:
        return jnp.zeros((model.nv,), dq.dtype)
    order = np.argsort(np.concatenate(idx), kind="stable")
    return take_rows(jnp.concatenate(parts), order)


def free_rows(model):
    """Static rows of every free joint of a plain model in ``q`` and ``v``: ``(p (J, 3),
    quat (J, 4), w (J, 3), lin (J, 3))`` (`jaxrbd._coupled.free_rows` maps them to a
    `CoupledModel`'s independent coordinates)."""
    qs, vs = _blocks(model, ("free",))
    return (qs[:, None] + np.arange(3), qs[:, None] + 3 + np.arange(4),
            vs[:, None] + np.arange(3), vs[:, None] + 3 + np.arange(3))


def frame_rate(model, v, rows=None):
    """``(nv,)``: ``w x v_lin`` in the linear rows of every free joint, zero elsewhere.

    A free joint's linear velocity ``v_lin`` is in body coordinates, which turn with the
    body at ``w``: a body moving uniformly has ``d v_lin / dt = -w x v_lin``. Added to
    ``qdd``, this gives the rate of the velocity in coordinates frozen at the start of a
    time step, the coordinates in which `advance` takes the velocity.
    """
    _, _, w_rows, lin_rows = free_rows(model) if rows is None else rows
    if not w_rows.size:
        return jnp.zeros_like(v)
    rate = cross_c(_rows(v, w_rows), _rows(v, lin_rows))
    return place_rows(v.shape[0], [(lin_rows.reshape(-1), _joined(rate))],
                      jnp.zeros_like(v), slices=True)


def _rows(x, rows):
    """The components of the joints' rows ``rows (J, k)`` of ``x (n, ...)``: a tuple of
    ``k`` arrays ``(J, ...)`` (`jaxrbd._core.rotation`'s component form), read by one
    `take_rows` of the joints' rows (a static slice per joint)."""
    J, k = rows.shape
    block = take_rows(x, rows.reshape(-1)).reshape((J, k) + x.shape[1:])
    return tuple(block[:, i] for i in range(k))


def _joined(comps):
    """The components ``k x (J, ...)`` back as rows ``(J k, ...)``, joint by joint (the
    order of ``rows.reshape(-1)``)."""
    return jnp.stack(comps, axis=1).reshape((-1,) + comps[0].shape[1:])


def advance(model, q, v_move, v_end, dt, mover=None, rows=None):
    """One time step's move of the configuration, with free joints kept straight.

    ``q`` moves along ``v_move dt`` on the joint manifolds, except that a free joint's
    origin moves on the straight line ``p + dt R v_lin`` (not the screw of the body
    twist): both velocities are in coordinates frozen at the start of the step, where
    a body's linear velocity does not turn with it. ``v_end`` is then expressed in the
    new body coordinates (its free-joint linear rows turned by ``exp(-w dt)``, ``w`` the
    angular velocity of ``v_move``). With ``v_end = v + dt (qdd + frame_rate(v))`` this
    is first-order time stepping under which a force-free spinning body keeps its
    world-frame momentum and kinetic energy to round-off, where integrating body-frame
    velocities along the screw turns them by ``w dt`` every step.

    Args:
        q: `(nq,)`. v_move, v_end: `(nv,)`. dt: scalar [s].
        mover: ``mover(model, q, v, dt)``, the move on the joint manifolds (default
            `move`).
        rows: the free joints' rows in ``q`` and ``v`` (default `free_rows`; the
            coupled variant, `jaxrbd._coupled.advance`, passes its own and its ``mover``).

    Returns:
        ``(q+, v+)``: `(nq,)` and `(nv,)`.
    """
    q1 = (move if mover is None else mover)(model, q, v_move, dt)
    p_rows, quat_rows, w_rows, lin_rows = free_rows(model) if rows is None else rows
    if not p_rows.size:
        return q1, v_end
    quat = _rows(q, quat_rows)
    w = tuple(-dt * c for c in _rows(v_move, w_rows))
    step = quat_rotate_c(quat, tuple(dt * c for c in _rows(v_move, lin_rows)),
                         sum(c * c for c in quat))
    p1 = [pi + si for pi, si in zip(_rows(q, p_rows), step)]
    # placed from slices (not a scatter): the transpose under `jax.grad` is pads
    q1 = place_rows(q1.shape[0], [(p_rows.reshape(-1), _joined(p1))], q1, slices=True)
    # turn by exp(-w dt): the rotation of the conjugate quaternion
    back, _ = so3_exp_c(w)
    end = quat_rotate_c(back, _rows(v_end, lin_rows))
    v1 = place_rows(v_end.shape[0], [(lin_rows.reshape(-1), _joined(end))], v_end,
                    slices=True)
    return q1, v1


def move(model, q, v, dt):
    """``q (+) v dt`` on the joint manifolds (`integrate` without the checks), `(nq,)`;
    one native kernel, and one for its transpose, for a model of traversal ``"kernel"``
    (`jaxrbd._core.ffi_move`)."""
    if ffi_move.supported(model, q, v, dt):
        return ffi_move.move(model, q, v, dt, move_xla)
    return move_xla(model, q, v, dt)


def move_xla(model, q, v, dt):
    """`move` as an XLA program (`integrate_batched` of one state)."""
    return integrate_batched(model, q[:, None], v[:, None], dt)[:, 0]


def integrate_batched(model, q, v, dt=1.0):
    """``q (+) v dt`` on the batch-trailing layout ``q (nq, B)``, ``v (nv, B)``.

    Rows are read and the result assembled with static slices (`take_rows`), not
    gathers and scatters: their derivatives stay slices and pads, which keeps the
    gradient programs of rollouts small.
    """
    idx, parts = [], []
    qi, vi = euclidean_maps(model)
    if len(qi):
        idx.append(qi)
        parts.append(take_rows(q, qi) + take_rows(v, vi) * dt)
    # quaternions and free joints in component form (`jaxrbd._core.rotation`), one
    # slice per joint
    qs, vs = _blocks(model, ("spherical",))
    if len(qs):
        k4 = qs[:, None] + np.arange(4)
        rot, _ = so3_exp_c(tuple(dt * c for c in _rows(v, vs[:, None] + np.arange(3))))
        idx.append(k4.reshape(-1))
        parts.append(_joined(normalize_quat_c(quat_mul_c(_rows(q, k4), rot))))
    qs, vs = _blocks(model, ("free",))
    if len(qs):
        # exact SE(3) exponential of the body twist: R+ = R exp(w), p+ = p + R V(w) v
        kp, k4 = qs[:, None] + np.arange(3), qs[:, None] + 3 + np.arange(4)
        w = tuple(dt * c for c in _rows(v, vs[:, None] + np.arange(3)))
        lv = tuple(dt * c for c in _rows(v, vs[:, None] + 3 + np.arange(3)))
        quat = _rows(q, k4)
        rot, ab = so3_exp_c(w)
        # R(quat / |quat|) without the normalised quaternion: one normalisation, not two
        n2 = sum(c * c for c in quat)
        step = quat_rotate_c(quat, so3_left_jacobian_mv_c(w, ab, lv), n2)
        idx += [kp.reshape(-1), k4.reshape(-1)]
        parts.append(_joined([pi + si for pi, si in zip(_rows(q, kp), step)]))
        parts.append(_joined(normalize_quat_c(quat_mul_c(quat, rot))))
    if not parts:
        return q
    order = np.argsort(np.concatenate(idx), kind="stable")
    return take_rows(jnp.concatenate(parts, axis=0), order).astype(q.dtype)


def difference_batched(model, q0, q1):
    """The velocity ``v`` with ``integrate(q0, v, 1) = q1`` (batch-trailing layout)."""
    B = max(q0.shape[-1], q1.shape[-1])
    out = jnp.zeros((model.nv, B), q0.dtype)
    qi, vi = euclidean_maps(model)
    if len(qi):
        out = out.at[vi].set(q1[qi] - q0[qi])

    def rel(qs, off):
        a = normalize_quat(q0[qs[:, None] + off + np.arange(4)])
        b = normalize_quat(q1[qs[:, None] + off + np.arange(4)])
        a_conj = a * jnp.asarray([1.0, -1.0, -1.0, -1.0], a.dtype).reshape((1,) * (a.ndim - 2) + (4, 1))
        return log_quat(quat_mul(a_conj, b)), a

    qs, vs = _blocks(model, ("spherical",))
    if len(qs):
        out = out.at[vs[:, None] + np.arange(3)].set(rel(qs, 0)[0])
    qs, vs = _blocks(model, ("free",))
    if len(qs):
        w, a = rel(qs, 3)
        dp = q1[qs[:, None] + np.arange(3)] - q0[qs[:, None] + np.arange(3)]
        lv = al.mv(so3_left_jacobian_inv(w), al.mtv(quat_to_R(a), dp))
        out = out.at[vs[:, None] + np.arange(3)].set(w)
        out = out.at[vs[:, None] + 3 + np.arange(3)].set(lv)
    return out


def integrate(model, q, v, dt=1.0):
    """Move ``q`` along the velocity ``v`` for time ``dt`` on the joint manifolds.

    Plain coordinates get ``q + v dt``; spherical joints ``quat * exp(w dt / 2)`` (the
    angular velocity is in child coordinates); free joints the exact SE(3) exponential
    of the body twist (as Pinocchio's ``integrate``). Quaternions stay unit.

    Args:
        q: `(nq,)`. v: `(nv,)` in the units of `qd`. dt: time step [s] (a scalar).

    Returns:
        The new configuration, `(nq,)`.

    Example:
        >>> q1 = jaxrbd.integrate(model, jaxrbd.neutral_configuration(model), jnp.ones(model.nv), 0.1)
    """
    with jax.named_scope("jaxrbd.integrate"):
        q, v = check_state(model, q=q, v=v)
        dt = as_float("dt", dt, model.dtype)
        if dt.ndim != 0:
            raise ValueError(f"dt has shape {dt.shape}, expected a scalar ()")
        return integrate_batched(model, q[:, None], v[:, None], dt)[:, 0]


def difference(model, q0, q1):
    """The constant velocity taking ``q0`` to ``q1`` in unit time (the inverse of `integrate`).

    Args:
        q0: start configuration `(nq,)`.
        q1: end configuration `(nq,)`.

    Returns:
        `v`, `(nv,)` with ``integrate(model, q0, v, 1) == q1`` (quaternions up to sign).

    Example:
        >>> v = jaxrbd.difference(model, q0, q1)
    """
    with jax.named_scope("jaxrbd.difference"):
        q0 = check_vector("q0", q0, model.nq, "model.nq", model.dtype)
        q1 = check_vector("q1", q1, model.nq, "model.nq", model.dtype)
        return difference_batched(model, q0[:, None], q1[:, None])[:, 0]


def neutral_configuration(model):
    """The reference configuration: zeros, with identity quaternions ``(1, 0, 0, 0)``.

    Returns:
        `q`, `(nq,)`, in the model's dtype.

    Example:
        >>> q = jaxrbd.neutral_configuration(model)
    """
    q = np.zeros(model.nq)
    for b in range(1, model.nbodies):
        if model.joint_kind[b] == "spherical":
            q[model.q_start[b]] = 1.0
        elif model.joint_kind[b] == "free":
            q[model.q_start[b] + 3] = 1.0
    return jnp.asarray(q, model.dtype)


def random_configuration(model, key, scale=1.0):
    """A random configuration: angles/displacements uniform in ``[-scale, scale]``,
    quaternions uniform on the sphere.

    Args:
        key: a `jax.random` key.

    Returns:
        `q`, `(nq,)`.

    Example:
        >>> q = jaxrbd.random_configuration(model, jax.random.key(0))
    """
    k1, k2 = jax.random.split(key)
    q = jax.random.uniform(k1, (model.nq,), model.dtype, -scale, scale)
    g = jax.random.normal(k2, (model.nq,), model.dtype)
    for kinds, off in ((("spherical",), 0), (("free",), 3)):
        qs, _ = _blocks(model, kinds)
        if len(qs):
            idx = qs[:, None] + off + np.arange(4)
            quat = g[idx]
            q = q.at[idx].set(quat / jnp.linalg.norm(quat, axis=-1, keepdims=True))
    return q
