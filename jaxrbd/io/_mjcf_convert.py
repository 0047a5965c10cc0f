"""MuJoCo's coordinates and forces <-> jaxrbd's, for models from `load_mjcf`:
``qpos``/``qvel``/``qacc``/``qfrc`` converters and gravity compensation as ``f_ext``.

They need no MuJoCo: they read the joint kinds of the jaxrbd model.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._actuation import gravity_compensation_f_ext
from .._core.checks import check_vector
from .._coupling import dispatch, expand_q
from .._model import Model

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


def _gravity_compensation(model, q_full, factors):
    ids = np.array([model.body_id(name) for name in factors], dtype=np.int64)
    k = jnp.asarray([float(v) for v in factors.values()], model.dtype)
    return gravity_compensation_f_ext(model, q_full, ids, k)


def _gravity_compensation_coupled(cm, q, factors):
    """`gravity_compensation_forces` of a `CoupledModel`: the bodies are the full tree's."""
    q = check_vector("q", q, cm.nq, "model.nq", cm.dtype)
    return _gravity_compensation(cm.base, expand_q(cm, q), factors)


def gravity_compensation_forces(
    model: Model, q: Float[Array, "nq"], factors: dict[str, float]
) -> Float[Array, "nbodies 6"]:
    """MuJoCo's gravity compensation as external forces, for ``f_ext``.

    MuJoCo's ``gravcomp`` applies ``-gravcomp · m · g`` at a body's centre of mass (a
    passive force). Passed as ``f_ext`` to `jaxrbd.inverse_dynamics`,
    `jaxrbd.forward_dynamics` and the rest, these forces reproduce it.

    Args:
        model: a `Model` (typically from `load_mjcf`) or a `CoupledModel`.
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
    return _gravity_compensation(model, q, factors)


gravity_compensation_forces = dispatch(gravity_compensation_forces, _gravity_compensation_coupled)


# ---------------------------------------------------------------- coordinate converters


def _on_the_full_tree(plain):
    """``plain`` as a public converter: MuJoCo's vectors are those of the full tree, so a
    `CoupledModel` is refused with a pointer to its ``base``."""

    def refuse(model, *args, **kwargs):
        raise TypeError(
            f"{plain.__name__}: MuJoCo's qpos/qvel/qacc/qfrc are those of the full tree; pass "
            "model.base of this CoupledModel (whose q is MuJoCo's qpos)"
        )

    return dispatch(plain, refuse)


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


@_on_the_full_tree
def qpos_to_q(model: Model, qpos: Float[Array, "nq"]) -> Float[Array, "nq"]:
    """jaxrbd configuration of a MuJoCo ``qpos`` (a model from `load_mjcf`).

    The coordinates coincide (joint order, free-joint ``[p; (w, x, y, z)]``, ball
    quaternions, hinge ``ref`` folded into the model), so this checks the shape and
    returns ``qpos`` in the model's dtype.

    Example:
        >>> jaxrbd.io.qpos_to_q(model, jnp.zeros(model.nq)).shape
        (9,)
    """
    return check_vector("qpos", qpos, model.nq, "model.nq", model.dtype)


@_on_the_full_tree
def q_to_qpos(model: Model, q: Float[Array, "nq"]) -> Float[Array, "nq"]:
    """MuJoCo ``qpos`` of a jaxrbd configuration (the inverse of `qpos_to_q`).

    Example:
        >>> jaxrbd.io.q_to_qpos(model, jnp.zeros(model.nq)).shape
        (9,)
    """
    return check_vector("q", q, model.nq, "model.nq", model.dtype)


@_on_the_full_tree
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


@_on_the_full_tree
def v_to_qvel(model: Model, q: Float[Array, "nq"], v: Float[Array, "nv"]) -> Float[Array, "nv"]:
    """MuJoCo ``qvel`` of a jaxrbd velocity (the inverse of `qvel_to_v`).

    Example:
        >>> jaxrbd.io.v_to_qvel(model, jnp.zeros(model.nq), jnp.ones(model.nv)).shape
        (9,)
    """
    return _swap(model, q, v, ("q", "v"), to_jaxrbd=False)


@_on_the_full_tree
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
    qacc, R, idx, a, x = _free_accelerations(model, ("qpos", qpos), ("qvel", qvel), ("qacc", qacc))
    vb = _mv(R, x[:, :3], transpose=True)
    lin = _mv(R, a[:, :3], transpose=True) - jnp.cross(x[:, 3:], vb)
    return qacc.at[idx].set(jnp.concatenate([a[:, 3:], lin], axis=1))


@_on_the_full_tree
def qdd_to_qacc(
    model: Model, q: Float[Array, "nq"], v: Float[Array, "nv"], qdd: Float[Array, "nv"]
) -> Float[Array, "nv"]:
    """MuJoCo ``qacc`` of a jaxrbd acceleration (the inverse of `qacc_to_qdd`).

    Example:
        >>> z = jnp.zeros(model.nv)
        >>> jaxrbd.io.qdd_to_qacc(model, jnp.zeros(model.nq), z, z).shape
        (9,)
    """
    qdd, R, idx, a, x = _free_accelerations(model, ("q", q), ("v", v), ("qdd", qdd))
    lin = _mv(R, a[:, 3:] + jnp.cross(x[:, :3], x[:, 3:]))
    return qdd.at[idx].set(jnp.concatenate([lin, a[:, :3]], axis=1))


@_on_the_full_tree
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


@_on_the_full_tree
def tau_to_qfrc(model: Model, q: Float[Array, "nq"], tau: Float[Array, "nv"]) -> Float[Array, "nv"]:
    """MuJoCo generalized force of a jaxrbd ``tau`` (the inverse of `qfrc_to_tau`).

    Example:
        >>> jaxrbd.io.tau_to_qfrc(model, jnp.zeros(model.nq), jnp.ones(model.nv)).shape
        (9,)
    """
    return _swap(model, q, tau, ("q", "tau"), to_jaxrbd=False)


def _checked(model, configuration, *vectors):
    """``(name, q)`` checked against ``model.nq``, then each ``(name, x)`` against ``model.nv``."""
    name, q = configuration
    return [check_vector(name, q, model.nq, "model.nq", model.dtype)] + [
        check_vector(n, x, model.nv, "model.nv", model.dtype) for n, x in vectors]


def _free_accelerations(model, configuration, velocity, acceleration):
    """The checked acceleration, and at the free joints: the rotations, the rows, and the
    acceleration's and the velocity's `(k, 6)` blocks (named pairs as in `_checked`)."""
    q, v, a = _checked(model, configuration, velocity, acceleration)
    R, idx, blocks = _free_terms(model, q, a)
    return a, R, idx, blocks, v[idx]


def _swap(model, q, x, names, to_jaxrbd):
    """Velocities and forces share one map at a free joint: MuJoCo's
    ``[linear (world); angular (body)]`` <-> jaxrbd's ``[angular; Rᵀ linear]``."""
    q, x = _checked(model, (names[0], q), (names[1], x))
    R, idx, f = _free_terms(model, q, x)
    if to_jaxrbd:
        block = jnp.concatenate([f[:, 3:], _mv(R, f[:, :3], transpose=True)], axis=1)
    else:
        block = jnp.concatenate([_mv(R, f[:, 3:]), f[:, :3]], axis=1)
    return x.at[idx].set(block)
