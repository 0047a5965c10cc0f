"""Kinematics: body poses, velocities, accelerations, point kinematics and Jacobians.

Every function runs one recursion over the tree (a `lax.scan`, see `_passes`) for all
bodies at once, then picks the bodies asked for. Functions that take ``body`` accept a
single body (an id or a name, fixed-merged bodies and frames included) or a sequence of
them, in which case ``point`` is ``(K, 3)`` and the result gets a leading ``K`` axis: the
Jacobians of several points share one pass (Felis 2017, §7.4).

Frames: ``"world"`` quantities are ``[angular; linear]`` in world-aligned coordinates at
a point (the linear part is the velocity or classical acceleration of that point);
``"body"`` quantities are spatial vectors of the body frame in body coordinates.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._core import algebra as al
from ._core.checks import as_float, check_state
from ._core.jcalc import body_offsets, joint_velocity_terms
from ._core.native_vmap import native_vmap
from ._core.nodes import Xup_and_S, sched
from ._core.passes import velocities, velocities_accelerations, world_transforms
from ._core.rows import node_rows
from ._core.topology import topology

__all__ = [
    "body_acceleration",
    "body_accelerations",
    "body_bias_acceleration",
    "body_jacobian",
    "body_jacobians",
    "body_velocities",
    "body_velocity",
    "forward_kinematics",
    "point_acceleration",
    "point_bias_acceleration",
    "point_jacobian",
    "point_position",
    "point_velocity",
]

# ---------------------------------------------------------------- node-level passes
# Batch-trailing; every node quantity is ``(nn, ..., B)``. Accelerations exclude gravity.


def node_poses_batched(model, q):
    E, r, _ = Xup_and_S(model, q)
    return world_transforms(sched(model, q.shape[-1]), E, r)


def node_velocities_batched(model, q, qd):
    s = sched(model, q.shape[-1])
    E, r, S = Xup_and_S(model, q)
    vJ, _, _ = joint_velocity_terms(model, q, qd, S)
    v, (E0, r0) = velocities(s, E, r, vJ, with_X0=True)
    return E0, r0, v


def node_accelerations_batched(model, q, qd, qdd):
    B = q.shape[-1]
    s = sched(model, B)
    E, r, S = Xup_and_S(model, q)
    vJ, vJc, cJ = joint_velocity_terms(model, q, qd, S)
    qdd_n = node_rows(qdd)
    a_world = jnp.zeros((6, B), q.dtype)
    v, a, (E0, r0) = velocities_accelerations(
        s, E, r, vJ, vJc, cJ, S * qdd_n[:, None, :], a_world, with_X0=True
    )
    return E0, r0, v, a


def node_jacobian_batched(model, q):
    """``X0`` and the world-frame (world origin) motion subspace ``S0`` ``(nv, 6, B)``."""
    E, r, S = Xup_and_S(model, q)
    E0, r0 = world_transforms(sched(model, q.shape[-1]), E, r)
    return E0, r0, al.Xinv_motion(E0[1:], r0[1:], S[1:])


# One state in, node arrays out (batch axis dropped); `jax.vmap` runs the batch-trailing
# form natively (see `_vmap`). For other modules' single-state code; the public functions
# below run their whole computation batch-trailing through `run_native`.
node_poses = native_vmap(node_poses_batched)
node_velocities = native_vmap(node_velocities_batched)
node_accelerations = native_vmap(node_accelerations_batched)
node_jacobian = native_vmap(node_jacobian_batched)


@functools.lru_cache(maxsize=1024)
def _native(impl, static: tuple):
    return native_vmap(lambda model, *arrays: impl(model, *arrays, *static))


def run_native(impl, model, arrays, static=()):
    """``impl(model, *arrays_B, *static)`` (batch-trailing in and out) on one state.

    `jax.vmap` of the result runs ``impl`` on the whole batch in the batch-trailing
    layout, in cache-sized blocks (see `_vmap.native_vmap`); ``static`` (hashable)
    selects bodies, frames...
    """
    return _native(impl, tuple(static))(model, *arrays)


def support(model) -> np.ndarray:
    """Static ``(nnodes, nv)`` table: velocity ``k`` moves node ``n`` (`Topology.support`)."""
    return topology(model).support


# ---------------------------------------------------------------- node -> body


def body_frames(model, bodies, E0, r0, *motions):
    """Node quantities of one state (no batch axis, as `node_poses` etc. return) -> the
    bodies' ``E0, r0`` and motions, batch-trailing with ``B = 1``."""
    return body_frames_batched(
        model, bodies, E0[..., None], r0[..., None], *(m[..., None] for m in motions)
    )


def body_frames_batched(model, bodies, E0, r0, *motions):
    """Node quantities -> the bodies' ``E0, r0`` and motions (batch-trailing):
    ``(K, 3, 3, B)``, ``(K, 3, B)``, ``(K, 6, B)``..."""
    bodies = np.asarray(bodies)
    node = topology(model).body_node[bodies]
    E0, r0 = E0[node], r0[node]
    motions = [m[node] for m in motions]
    offsets = body_offsets(model, bodies)
    if offsets is not None:
        E0, r0 = al.compose(*offsets, E0, r0)
        motions = [al.X_motion(*offsets, m) for m in motions]
    return (E0, r0, *motions)


# ---------------------------------------------------------------- argument handling


def resolve_bodies(model, body) -> tuple[np.ndarray, bool]:
    """``body`` (an id, a name, or a sequence of them) -> static ids and whether it was one."""
    if isinstance(body, (str, int, np.integer)) and not isinstance(body, bool):
        return np.array([model.body_id(body)]), True
    if isinstance(body, jax.Array):
        raise TypeError(
            "body must be a name, a Python int id or a sequence of them (static), "
            "got a JAX array; select bodies outside the traced computation"
        )
    if isinstance(body, np.ndarray) and body.ndim == 1 and np.issubdtype(body.dtype, np.integer):
        body = body.tolist()
    if isinstance(body, Sequence) and not isinstance(body, (str, bytes)):
        if len(body) == 0:
            raise ValueError("body: an empty sequence of bodies")
        return np.array([model.body_id(b) for b in body]), False
    raise TypeError(f"body must be a name, an int id or a sequence of them, got {body!r}")


def resolve_points(model, point, K: int, single: bool):
    """``point`` -> ``(K, 3)`` (``None`` is the body origin)."""
    if point is None:
        return jnp.zeros((K, 3), model.dtype)
    p = as_float("point", point, model.dtype)
    want = (3,) if single else (K, 3)
    if p.shape != want:
        raise ValueError(
            f"point has shape {p.shape}, expected {want}"
            + ("" if single else f" (one point per body, {K} bodies)")
        )
    return p.reshape(K, 3)


def _check_frame(frame):
    if frame not in ("world", "body"):
        raise ValueError(f"frame must be 'world' or 'body', got {frame!r}")


def _out(x, single):
    return x[0] if single else x


def world_motion_at(E0, r0, m, P):
    """Body motion ``m`` (body coordinates) -> ``[w; v_P]`` in world axes at world point ``P``.

    ``P`` and ``r0`` are world coordinates; ``v_P = R (v_o + w x (p_body))`` with
    ``p_body = E (P - r0)``.
    """
    w = al.mtv(E0, al.ang(m))
    vo = al.mtv(E0, al.lin(m))
    return al.join(w, vo + al.cross(w, P - r0))


# ---------------------------------------------------------------- all bodies


def forward_kinematics(model, q):
    """World pose of every body (fixed-merged bodies included).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.

    Returns:
        ``(R, p)``: `R` `(nbodies, 3, 3)` maps body coordinates to world coordinates,
        `p` `(nbodies, 3)` is the body origin in world coordinates [m]. Row 0 is the
        world (identity).

    Example:
        >>> R, p = jaxrbd.forward_kinematics(model, jnp.zeros(model.nq))
        >>> R.shape, p.shape
        ((4, 3, 3), (4, 3))
    """
    with jax.named_scope("jaxrbd.forward_kinematics"):
        (q,) = check_state(model, q=q)
        return run_native(_forward_kinematics, model, (q,))


def _forward_kinematics(model, q):
    E, r = body_frames_batched(model, np.arange(model.nbodies), *node_poses_batched(model, q))
    return al.transpose(E), r


def body_velocities(model, q, qd):
    """Spatial velocity of every body in its own coordinates.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        qd: velocity `(nv,)`.

    Returns:
        `(nbodies, 6)`: row ``i`` is ``[ω; v]`` of body ``i``'s frame in body ``i``
        coordinates (``v`` the velocity of the body origin) [rad/s, m/s]. Row 0 (the
        world) is zero.

    Example:
        >>> jaxrbd.body_velocities(model, q, jnp.ones(model.nv)).shape
        (4, 6)
    """
    with jax.named_scope("jaxrbd.body_velocities"):
        q, qd = check_state(model, q=q, qd=qd)
        return run_native(_body_velocities, model, (q, qd))


def _body_velocities(model, q, qd):
    return body_frames_batched(model, np.arange(model.nbodies), *node_velocities_batched(model, q, qd))[2]


def body_accelerations(model, q, qd, qdd):
    """Spatial acceleration of every body in its own coordinates (gravity not included).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        qd: velocity `(nv,)`.
        qdd: acceleration `(nv,)`.

    Returns:
        `(nbodies, 6)`: row ``i`` is the spatial acceleration ``[ω̇; a]`` of body ``i``
        in body ``i`` coordinates, i.e. the time derivative of `body_velocities` row
        ``i`` (``a`` is *not* the classical acceleration of the origin; see
        `point_acceleration`). Row 0 is zero.

    Example:
        >>> jaxrbd.body_accelerations(model, q, jnp.ones(model.nv), jnp.zeros(model.nv)).shape
        (4, 6)
    """
    with jax.named_scope("jaxrbd.body_accelerations"):
        q, qd, qdd = check_state(model, q=q, qd=qd, qdd=qdd)
        return run_native(_body_accelerations, model, (q, qd, qdd))


def _body_accelerations(model, q, qd, qdd):
    E0, r0, _, a = node_accelerations_batched(model, q, qd, qdd)
    return body_frames_batched(model, np.arange(model.nbodies), E0, r0, a)[2]


def body_jacobians(model, q, frame=None):
    """Jacobians of every body frame at once.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        frame: ``"body"`` (spatial velocity in body coordinates, as `body_velocities`)
            or ``"world"`` (``[ω; v_origin]`` in world-aligned coordinates at each body
            origin, as `body_jacobian`). Pass it: the default is ``"body"`` today and
            becomes ``"world"``, the default of `body_jacobian`, in the next release;
            leaving it out warns (`FutureWarning`).

    Returns:
        `(nbodies, 6, nv)`: ``J[i] @ qd`` is the velocity of body ``i`` in ``frame``.

    Example:
        >>> J = jaxrbd.body_jacobians(model, q, frame="body")
        >>> bool(jnp.allclose(J @ qd, jaxrbd.body_velocities(model, q, qd)))
        True
    """
    if frame is None:
        warnings.warn(
            "body_jacobians: the default frame changes from 'body' to 'world' (the default "
            "of body_jacobian) in the next release; pass frame='body' to keep this result "
            "or frame='world' for the new one",
            FutureWarning,
            stacklevel=2,
        )
        frame = "body"
    with jax.named_scope("jaxrbd.body_jacobians"):
        _check_frame(frame)
        (q,) = check_state(model, q=q)
        bodies = tuple(range(model.nbodies))
        return run_native(_jacobians, model, (q,), (bodies, frame))


def _jacobians(model, q, *args):
    """Jacobians ``(K, 6, nv, B)`` of ``bodies`` at body points ``P (K, 3, B)`` (origins if
    not given); ``args`` = ``([P,] bodies, frame)``."""
    P_body, (bodies, frame) = (args[0], args[1:]) if len(args) == 3 else (None, args)
    bodies = np.asarray(bodies)
    E0n, r0n, S0 = node_jacobian_batched(model, q)
    E0, r0 = body_frames_batched(model, bodies, E0n, r0n)
    node = topology(model).body_node[bodies]
    mask = support(model)[node]  # (K, nv) static
    # (K, nv, 6, B): columns of the world-frame (world origin) Jacobian of each body
    J0 = S0[None] * jnp.asarray(mask, S0.dtype)[:, :, None, None]
    E0, r0 = E0[:, None], r0[:, None]  # broadcast over the nv columns
    if frame == "body":
        J = al.X_motion(E0, r0, J0)
    else:
        P = r0 if P_body is None else r0 + al.mtv(E0, P_body[:, None])
        w = al.ang(J0)
        J = al.join(w, al.lin(J0) + al.cross(w, P))
    return jnp.swapaxes(J, 1, 2)


# ---------------------------------------------------------------- points


def point_position(model, q, body, point=None):
    """World position of a point fixed on a body.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        body: a body id or name, or a sequence of ``K`` of them.
        point: the point in body coordinates, `(3,)` (or `(K, 3)`) [m]; default the
            body origin.

    Returns:
        `(3,)` (or `(K, 3)`): the point in world coordinates [m].

    Example:
        >>> jaxrbd.point_position(model, jnp.zeros(model.nq), 3, jnp.array([0.0, 0.0, -1.0])).shape
        (3,)
    """
    with jax.named_scope("jaxrbd.point_position"):
        bodies, single = resolve_bodies(model, body)
        (q,) = check_state(model, q=q)
        p = resolve_points(model, point, len(bodies), single)
        return _out(point_positions(model, q, p, bodies), single)


def point_positions(model, q, p, bodies):
    """`point_position` for a checked ``q``, points ``p (K, 3)`` in the coordinates of the
    static body ids ``bodies (K,)``: `(K, 3)` world positions [m]."""
    return run_native(_point_position, model, (q, p), (tuple(bodies),))


def _point_position(model, q, p, bodies):
    E0, r0 = body_frames_batched(model, bodies, *node_poses_batched(model, q))
    return r0 + al.mtv(E0, p)


def point_velocity(model, q, qd, body, point=None):
    """World velocity of a point fixed on a body.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocity `(nv,)`.
        body: a body id or name, or a sequence of ``K`` of them.
        point: the point in body coordinates `(3,)` (or `(K, 3)`) [m]; default origin.

    Returns:
        `(3,)` (or `(K, 3)`): ``d/dt point_position`` in world coordinates [m/s].

    Example:
        >>> v = jaxrbd.point_velocity(model, q, qd, 3, jnp.array([0.0, 0.0, -1.0]))
        >>> J = jaxrbd.point_jacobian(model, q, 3, jnp.array([0.0, 0.0, -1.0]))
        >>> bool(jnp.allclose(v, J @ qd))
        True
    """
    with jax.named_scope("jaxrbd.point_velocity"):
        return _lin(body_velocity(model, q, qd, body, point, frame="world"))


def point_acceleration(model, q, qd, qdd, body, point=None):
    """Classical acceleration of a point fixed on a body, in world coordinates.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd, qdd: velocity and acceleration `(nv,)`.
        body: a body id or name, or a sequence of ``K`` of them.
        point: the point in body coordinates `(3,)` (or `(K, 3)`) [m]; default origin.

    Returns:
        `(3,)` (or `(K, 3)`): the second time derivative of `point_position` [m/s²]
        (gravity not included).

    Example:
        >>> a = jaxrbd.point_acceleration(model, q, qd, jnp.zeros(model.nv), 3)
        >>> bool(jnp.allclose(a, jaxrbd.point_bias_acceleration(model, q, qd, 3)))
        True
    """
    with jax.named_scope("jaxrbd.point_acceleration"):
        return _lin(body_acceleration(model, q, qd, qdd, body, point, frame="world"))


def point_bias_acceleration(model, q, qd, body, point=None):
    """``J̇ q̇`` of a point: its classical acceleration at ``q̈ = 0`` (RBDL's γ), world.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocity `(nv,)`.
        body: a body id or name, or a sequence of ``K`` of them.
        point: the point in body coordinates `(3,)` (or `(K, 3)`) [m]; default origin.

    Returns:
        `(3,)` (or `(K, 3)`) [m/s²]: ``point_acceleration = J q̈ + point_bias_acceleration``.

    Example:
        >>> jaxrbd.point_bias_acceleration(model, q, qd, 3).shape
        (3,)
    """
    with jax.named_scope("jaxrbd.point_bias_acceleration"):
        return _lin(body_bias_acceleration(model, q, qd, body, point, frame="world"))


def point_jacobian(model, q, body, point=None):
    """Jacobian of a point's world position: ``point_velocity = J @ qd``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        body: a body id or name, or a sequence of ``K`` of them (one pass for all).
        point: the point in body coordinates `(3,)` (or `(K, 3)`) [m]; default origin.

    Returns:
        `(3, nv)` (or `(K, 3, nv)`) in world coordinates.

    Example:
        >>> jaxrbd.point_jacobian(model, q, [1, 2, 3], jnp.zeros((3, 3))).shape
        (3, 3, 9)
    """
    with jax.named_scope("jaxrbd.point_jacobian"):
        return body_jacobian(model, q, body, point, frame="world")[..., 3:, :]


def _lin(x):
    return x[..., 3:]


# ---------------------------------------------------------------- body velocity, acceleration, Jacobian


def body_velocity(model, q, qd, body, point=None, frame="world"):
    """Velocity of a body: ``body_jacobian(model, q, body, point, frame) @ qd``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocity `(nv,)`.
        body: a body id or name, or a sequence of ``K`` of them.
        point: with ``frame="world"``, the point (body coordinates, default origin)
            whose velocity is the linear part; ignored with ``frame="body"``.
        frame: ``"world"``: ``[ω; v_point]`` in world-aligned coordinates;
            ``"body"``: the spatial velocity ``[ω; v_origin]`` in body coordinates.

    Returns:
        `(6,)` (or `(K, 6)`) [rad/s, m/s].

    Example:
        >>> jaxrbd.body_velocity(model, q, qd, "body_3", frame="body").shape
        (6,)
    """
    with jax.named_scope("jaxrbd.body_velocity"):
        _check_frame(frame)
        bodies, single = resolve_bodies(model, body)
        q, qd = check_state(model, q=q, qd=qd)
        p = resolve_points(model, point, len(bodies), single)
        return _out(run_native(_body_velocity, model, (q, qd, p), (tuple(bodies), frame)), single)


def _body_velocity(model, q, qd, p, bodies, frame):
    E0, r0, v = body_frames_batched(model, bodies, *node_velocities_batched(model, q, qd))
    if frame == "body":
        return v
    return world_motion_at(E0, r0, v, r0 + al.mtv(E0, p))


def world_acceleration_at(E0, r0, v, a, p):
    """Body velocity ``v`` and spatial acceleration ``a`` (body coordinates) ->
    ``[ω̇; classical acceleration of body point p]`` in world axes."""
    w, vo = al.ang(v), al.lin(v)
    vp = vo + al.cross(w, p)
    acc = al.lin(a) + al.cross(al.ang(a), p) + al.cross(w, vp)
    return al.join(al.mtv(E0, al.ang(a)), al.mtv(E0, acc))


def body_acceleration(model, q, qd, qdd, body, point=None, frame="world"):
    """Acceleration of a body: ``J q̈ + J̇ q̇`` for ``J = body_jacobian(..., frame)``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd, qdd: velocity and acceleration `(nv,)`.
        body: a body id or name, or a sequence of ``K`` of them.
        point: with ``frame="world"``, the point (body coordinates, default origin).
        frame: ``"world"``: ``[ω̇; classical acceleration of the point]`` in
            world-aligned coordinates; ``"body"``: the spatial acceleration in body
            coordinates (the derivative of the body-frame velocity).

    Returns:
        `(6,)` (or `(K, 6)`) [rad/s², m/s²], gravity not included.

    Example:
        >>> jaxrbd.body_acceleration(model, q, qd, jnp.zeros(model.nv), 3).shape
        (6,)
    """
    with jax.named_scope("jaxrbd.body_acceleration"):
        _check_frame(frame)
        bodies, single = resolve_bodies(model, body)
        q, qd, qdd = check_state(model, q=q, qd=qd, qdd=qdd)
        p = resolve_points(model, point, len(bodies), single)
        out = run_native(_body_acceleration, model, (q, qd, qdd, p), (tuple(bodies), frame))
        return _out(out, single)


def _body_acceleration(model, q, qd, qdd, p, bodies, frame):
    E0, r0, v, a = body_frames_batched(model, bodies, *node_accelerations_batched(model, q, qd, qdd))
    if frame == "body":
        return a
    return world_acceleration_at(E0, r0, v, a, p)


def body_bias_acceleration(model, q, qd, body, point=None, frame="world"):
    """``J̇ q̇`` of a body: `body_acceleration` at ``q̈ = 0`` (RBDL's contact γ).

    Args and frames as `body_acceleration`. Returns `(6,)` (or `(K, 6)`).

    Example:
        >>> jaxrbd.body_bias_acceleration(model, q, qd, 3, frame="body").shape
        (6,)
    """
    with jax.named_scope("jaxrbd.body_bias_acceleration"):
        zeros = jnp.zeros(model.nv, model.dtype)
        return body_acceleration(model, q, qd, zeros, body, point, frame)


def body_jacobian(model, q, body, point=None, frame="world"):
    """Jacobian of a body: ``body_velocity = J @ qd``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        body: a body id or name, or a sequence of ``K`` of them (one pass for all).
        point: with ``frame="world"``, the point in body coordinates whose velocity is
            the linear part (default the body origin); ignored with ``frame="body"``.
        frame: ``"world"``: rows ``[ω; v_point]`` in world-aligned coordinates;
            ``"body"``: the body spatial velocity in body coordinates.

    Returns:
        `(6, nv)` (or `(K, 6, nv)`).

    Example:
        >>> J = jaxrbd.body_jacobian(model, q, "body_3", frame="body")
        >>> bool(jnp.allclose(J @ qd, jaxrbd.body_velocity(model, q, qd, "body_3", frame="body")))
        True
    """
    with jax.named_scope("jaxrbd.body_jacobian"):
        _check_frame(frame)
        bodies, single = resolve_bodies(model, body)
        (q,) = check_state(model, q=q)
        p = (
            None
            if (point is None or frame == "body")
            else resolve_points(model, point, len(bodies), single)
        )
        arrays = (q,) if p is None else (q, p)
        return _out(run_native(_jacobians, model, arrays, (tuple(bodies), frame)), single)


def world_jacobians(model, q, p, bodies):
    """`body_jacobian` with ``frame="world"`` for a checked ``q``, points ``p (K, 3)`` of
    the static body ids ``bodies (K,)``: `(K, 6, nv)`, rows ``[ω; v_point]``."""
    return run_native(_jacobians, model, (q, p), (tuple(bodies), "world"))
