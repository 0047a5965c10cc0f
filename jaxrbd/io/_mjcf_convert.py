"""MuJoCo's coordinates and forces <-> jaxrbd's, for models from `load_mjcf`:
``qpos``/``qvel``/``qacc``/``qfrc`` converters and gravity compensation as ``f_ext``.

They need no MuJoCo: they read the joint kinds of the jaxrbd model.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._core.checks import check_vector
from .._kinematics import forward_kinematics
from .._model import Model, is_coupled

__all__ = [
    "gravity_compensation_forces",
    "q_to_qpos",
    "qacc_to_qdd",
    "qdd_to_qacc",
    "qfrc_to_tau",
    "qpos_to_q",
    "qvel_to_v",
    "tau_to_qfrc",
    "v_to_qvel",
]


# ---------------------------------------------------------------- gravity compensation


def gravity_compensation_forces(
    model: Model, q: Float[Array, "nq"], factors: dict[str, float]
) -> Float[Array, "nbodies 6"]:
    """MuJoCo's gravity compensation as external forces, for ``f_ext``.

    MuJoCo's ``gravcomp`` applies ``-gravcomp · m · g`` at a body's centre of mass (a
    passive force). Passed as ``f_ext`` to `jaxrbd.inverse_dynamics`,
    `jaxrbd.forward_dynamics` and the rest, these forces reproduce it.

    Args:
        model: a `Model` (typically from `load_mjcf`).
        q: configuration `(nq,)`.
        factors: ``{body name: gravcomp}`` (``MJCFInfo.gravity_compensation``); 1 cancels
            the body's weight.

    Returns:
        ``f_ext`` `(nbodies, 6)`: spatial forces ``[c × f; f]`` in world coordinates at the
        world origin, zero for bodies not named.

    Example:
        >>> f = jaxrbd.io.gravity_compensation_forces(model, q, {"body_3": 1.0})
        >>> f[3, 3:].tolist()   # the weight of body_3 (0.1 kg), cancelled
        [0.0, 0.0, 0.981]
    """
    q = check_vector("q", q, model.nq, "model.nq", model.dtype)
    ids = np.array([model.body_id(name) for name in factors], dtype=np.int64)
    k = jnp.asarray([float(v) for v in factors.values()], model.dtype)
    return gravity_compensation_f_ext(model, q, ids, k)


def gravity_compensation_f_ext(model: Model, q, ids: np.ndarray, k):
    """`gravity_compensation_forces` for static body ids ``ids`` and factors ``k`` (an
    array, so that `jax.grad` reaches them)."""
    R, p = forward_kinematics(model, q)
    mass = model.inertia[ids, 0]
    com = model.inertia[ids, 1:4] / jnp.where(mass > 0, mass, 1.0)[:, None]
    c = _mv(R[ids], com) + p[ids]
    f = -(k * mass)[:, None] * model.gravity[None, :]
    out = jnp.zeros((model.nbodies, 6), model.dtype)
    return out.at[ids].set(jnp.concatenate([jnp.cross(c, f), f], axis=1))


# ---------------------------------------------------------------- coordinate converters


def _tree(model, fn: str) -> Model:
    """The model itself; a `CoupledModel` is refused: MuJoCo's vectors are those of the
    full tree, so the converters take ``model.base``."""
    if is_coupled(model):
        raise TypeError(
            f"{fn}: MuJoCo's qpos/qvel/qacc/qfrc are those of the full tree; pass model.base "
            "of this CoupledModel (whose q is MuJoCo's qpos)"
        )
    return model


def _free_blocks(model: Model):
    """Static ``(q_start, v_start)`` index arrays of the model's free joints."""
    idx = [b for b, k in enumerate(model.joint_kind) if k == "free"]
    return (
        np.array([model.q_start[b] for b in idx], dtype=np.int64),
        np.array([model.v_start[b] for b in idx], dtype=np.int64),
    )


def _rot(quat):
    """``(k, 3, 3)`` rotation matrices (body -> world) of ``(k, 4)`` (w, x, y, z) quaternions."""
    n = jnp.sqrt(jnp.sum(quat * quat, axis=-1, keepdims=True))
    w, x, y, z = jnp.moveaxis(quat / n, -1, 0)
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def _free_terms(model, qpos, x):
    """Rotations, and the ``(k, 6)`` blocks of the nv-vector ``x`` at the free joints."""
    qs, vs = _free_blocks(model)
    R = _rot(qpos[qs[:, None] + np.arange(3, 7)])
    return R, vs[:, None] + np.arange(6), x[vs[:, None] + np.arange(6)]


def _mv(R, x, transpose=False):
    return jnp.einsum("kji,kj->ki" if transpose else "kij,kj->ki", R, x)


def qpos_to_q(model: Model, qpos: Float[Array, "nq"]) -> Float[Array, "nq"]:
    """jaxrbd configuration of a MuJoCo ``qpos`` (a model from `load_mjcf`).

    The coordinates coincide (joint order, free-joint ``[p; (w, x, y, z)]``, ball
    quaternions, hinge ``ref`` folded into the model), so this checks the shape and
    returns ``qpos`` in the model's dtype.

    Example:
        >>> jaxrbd.io.qpos_to_q(model, jnp.zeros(model.nq)).shape
        (9,)
    """
    model = _tree(model, "qpos_to_q")
    return check_vector("qpos", qpos, model.nq, "model.nq", model.dtype)


def q_to_qpos(model: Model, q: Float[Array, "nq"]) -> Float[Array, "nq"]:
    """MuJoCo ``qpos`` of a jaxrbd configuration (the inverse of `qpos_to_q`).

    Example:
        >>> jaxrbd.io.q_to_qpos(model, jnp.zeros(model.nq)).shape
        (9,)
    """
    model = _tree(model, "q_to_qpos")
    return check_vector("q", q, model.nq, "model.nq", model.dtype)


def qvel_to_v(model: Model, qpos: Float[Array, "nq"], qvel: Float[Array, "nv"]) -> Float[Array, "nv"]:
    """jaxrbd velocity ``v`` of MuJoCo's ``qvel`` at ``qpos``.

    Only free joints differ: MuJoCo's ``[ṗ (world); ω (body)]`` becomes
    ``[ω_body; Rᵀ ṗ]`` (`CONVENTIONS.md`: the body spatial velocity in body
    coordinates). Every other coordinate is copied.

    Args:
        model: a model from `load_mjcf` (free joints on the world).
        qpos: MuJoCo configuration `(nq,)`.
        qvel: MuJoCo velocity `(nv,)` [rad/s | m/s].

    Returns:
        ``v`` `(nv,)`.

    Example:
        >>> b = jaxrbd.ModelBuilder()
        >>> _ = b.add_body("base", "world", jaxrbd.joints.free(), jaxrbd.Body(1.0, inertia=np.eye(3)))
        >>> floating = b.build()
        >>> qpos = jnp.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])   # turned by pi about z
        >>> qvel = jnp.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.5])        # [p dot (world); omega]
        >>> jaxrbd.io.qvel_to_v(floating, qpos, qvel).tolist()
        [0.0, 0.0, 0.5, -1.0, 0.0, 0.0]
    """
    return _swap(model, qpos, qvel, ("qpos", "qvel"), to_jaxrbd=True)


def v_to_qvel(model: Model, q: Float[Array, "nq"], v: Float[Array, "nv"]) -> Float[Array, "nv"]:
    """MuJoCo ``qvel`` of a jaxrbd velocity (the inverse of `qvel_to_v`).

    Example:
        >>> jaxrbd.io.v_to_qvel(model, jnp.zeros(model.nq), jnp.ones(model.nv)).shape
        (9,)
    """
    return _swap(model, q, v, ("q", "v"), to_jaxrbd=False)


def qacc_to_qdd(
    model: Model, qpos: Float[Array, "nq"], qvel: Float[Array, "nv"], qacc: Float[Array, "nv"]
) -> Float[Array, "nv"]:
    """jaxrbd acceleration ``qdd = dv/dt`` of MuJoCo's ``qacc``.

    For a free joint ``dv/dt = [ω̇; Rᵀ p̈ - ω × Rᵀ ṗ]`` (the derivative of the
    body-coordinate velocity); other coordinates are copied.

    Example:
        >>> z = jnp.zeros(model.nv)
        >>> jaxrbd.io.qacc_to_qdd(model, jnp.zeros(model.nq), z, z).shape
        (9,)
    """
    model = _tree(model, "qacc_to_qdd")
    qpos = check_vector("qpos", qpos, model.nq, "model.nq", model.dtype)
    qvel = check_vector("qvel", qvel, model.nv, "model.nv", model.dtype)
    qacc = check_vector("qacc", qacc, model.nv, "model.nv", model.dtype)
    R, idx, a = _free_terms(model, qpos, qacc)
    x = qvel[idx]
    vb = _mv(R, x[:, :3], transpose=True)
    lin = _mv(R, a[:, :3], transpose=True) - jnp.cross(x[:, 3:], vb)
    return qacc.at[idx].set(jnp.concatenate([a[:, 3:], lin], axis=1))


def qdd_to_qacc(
    model: Model, q: Float[Array, "nq"], v: Float[Array, "nv"], qdd: Float[Array, "nv"]
) -> Float[Array, "nv"]:
    """MuJoCo ``qacc`` of a jaxrbd acceleration (the inverse of `qacc_to_qdd`).

    Example:
        >>> z = jnp.zeros(model.nv)
        >>> jaxrbd.io.qdd_to_qacc(model, jnp.zeros(model.nq), z, z).shape
        (9,)
    """
    model = _tree(model, "qdd_to_qacc")
    q = check_vector("q", q, model.nq, "model.nq", model.dtype)
    v = check_vector("v", v, model.nv, "model.nv", model.dtype)
    qdd = check_vector("qdd", qdd, model.nv, "model.nv", model.dtype)
    R, idx, a = _free_terms(model, q, qdd)
    x = v[idx]
    lin = _mv(R, a[:, 3:] + jnp.cross(x[:, :3], x[:, 3:]))
    return qdd.at[idx].set(jnp.concatenate([lin, a[:, :3]], axis=1))


def qfrc_to_tau(model: Model, qpos: Float[Array, "nq"], qfrc: Float[Array, "nv"]) -> Float[Array, "nv"]:
    """jaxrbd generalized force of a MuJoCo ``qfrc_*`` vector.

    For a free joint MuJoCo's ``[f (world); n (body)]`` becomes ``[n; Rᵀ f]``, the
    spatial force in body coordinates (both act at the body origin); other
    coordinates are copied. Power is preserved: ``qvel·qfrc == v·tau``.

    Example:
        >>> jaxrbd.io.qfrc_to_tau(model, jnp.zeros(model.nq), jnp.ones(model.nv)).shape
        (9,)
    """
    return _swap(model, qpos, qfrc, ("qpos", "qfrc"), to_jaxrbd=True)


def tau_to_qfrc(model: Model, q: Float[Array, "nq"], tau: Float[Array, "nv"]) -> Float[Array, "nv"]:
    """MuJoCo generalized force of a jaxrbd ``tau`` (the inverse of `qfrc_to_tau`).

    Example:
        >>> jaxrbd.io.tau_to_qfrc(model, jnp.zeros(model.nq), jnp.ones(model.nv)).shape
        (9,)
    """
    return _swap(model, q, tau, ("q", "tau"), to_jaxrbd=False)


def _swap(model, q, x, names, to_jaxrbd):
    """Velocities and forces share one map at a free joint: MuJoCo's
    ``[linear (world); angular (body)]`` <-> jaxrbd's ``[angular; Rᵀ linear]``."""
    model = _tree(model, "converting MuJoCo's coordinates")
    q = check_vector(names[0], q, model.nq, "model.nq", model.dtype)
    x = check_vector(names[1], x, model.nv, "model.nv", model.dtype)
    R, idx, f = _free_terms(model, q, x)
    if to_jaxrbd:
        block = jnp.concatenate([f[:, 3:], _mv(R, f[:, :3], transpose=True)], axis=1)
    else:
        block = jnp.concatenate([_mv(R, f[:, 3:]), f[:, :3]], axis=1)
    return x.at[idx].set(block)
