"""Quaternions (w, x, y, z) and exponential maps, batch-trailing layout ``(..., k, B)``."""

from __future__ import annotations

import jax.numpy as jnp

from . import algebra as al


def normalize_quat(quat):
    """Unit quaternion; a zero quaternion gives NaN (it names no rotation)."""
    n2 = jnp.sum(quat * quat, axis=-2, keepdims=True)
    ok = n2 > 0
    n = jnp.sqrt(jnp.where(ok, n2, 1.0))
    return jnp.where(ok, quat / n, jnp.nan)


def quat_to_R(quat):
    """Rotation matrix (child -> parent coordinates) of a quaternion ``(..., 4, B)``.

    The quaternion is normalised first (documented behaviour for non-unit input).
    """
    unit = normalize_quat(quat)  # once, not once per component
    w, x, y, z = (unit[..., k, :] for k in range(4))
    return jnp.stack(
        [
            al.vec(1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
            al.vec(2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
            al.vec(2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
        ],
        axis=-3,
    )


def quat_to_E(quat):
    """Plücker rotation ``E = R^T`` (parent -> child coordinates)."""
    return al.transpose(quat_to_R(quat))


def quat_mul(a, b):
    aw, ax, ay, az = (a[..., k, :] for k in range(4))
    bw, bx, by, bz = (b[..., k, :] for k in range(4))
    return jnp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-2,
    )


def _theta(w):
    """``|w|`` and a safe version for division, with finite gradients at 0."""
    t2 = jnp.sum(w * w, axis=-2, keepdims=True)
    small = t2 < 1e-12 if w.dtype == jnp.float64 else t2 < 1e-6
    t2s = jnp.where(small, 1.0, t2)
    return t2, small, jnp.sqrt(t2s)


def exp_quat(w):
    """Quaternion of the rotation vector ``w`` ``(..., 3, B)`` (exponential map)."""
    t2, small, t = _theta(w)
    half = 0.5 * t
    # sin(t/2)/t with its Taylor series near 0
    k = jnp.where(small, 0.5 - t2 / 48.0, jnp.sin(half) / t)
    cw = jnp.where(small, 1.0 - t2 / 8.0, jnp.cos(half))
    return jnp.concatenate([cw, k * w], axis=-2)


def log_quat(quat):
    """Rotation vector of a quaternion (shortest rotation), ``(..., 4, B) -> (..., 3, B)``."""
    quat = normalize_quat(quat)
    quat = jnp.where(quat[..., :1, :] < 0, -quat, quat)
    w, xyz = quat[..., :1, :], quat[..., 1:, :]
    s2, small, s = _theta(xyz)
    # angle = 2 atan2(s, w); factor = angle / s
    factor = jnp.where(small, 2.0 / w * (1.0 - s2 / (3.0 * w * w)), 2.0 * jnp.arctan2(s, w) / s)
    return factor * xyz


def so3_left_jacobian_mv(w, x):
    """``V(w) x`` for the left Jacobian of SO(3),
    ``V(w) = 1 + (1 - cos t)/t^2 wx + (t - sin t)/t^3 wx^2`` (``t = |w|``), by two cross
    products without forming ``V``: fewer operations to trace, differentiate and compile."""
    t2, small, t = _theta(w)
    a = jnp.where(small, 0.5 - t2 / 24.0, (1 - jnp.cos(t)) / (t * t))
    b = jnp.where(small, 1.0 / 6.0 - t2 / 120.0, (t - jnp.sin(t)) / (t * t * t))
    wx = al.cross(w, x)
    return x + a * wx + b * al.cross(w, wx)


def quat_rotate(unit, x):
    """``R(unit) x`` for a unit quaternion ``(..., 4, B)`` and a 3-vector ``(..., 3, B)``:
    ``x + 2 w (v x x) + 2 v x (v x x)``, without forming ``R``."""
    w, v = unit[..., :1, :], unit[..., 1:, :]
    vx = al.cross(v, x)
    return x + 2.0 * (w * vx + al.cross(v, vx))


def so3_left_jacobian_inv(w):
    """``V(w)^-1`` (`so3_left_jacobian_mv`'s matrix inverted), ``(..., 3, 3, B)``."""
    t2, small, t = _theta(w)
    half = 0.5 * t
    cot = jnp.cos(half) / jnp.where(small, 1.0, jnp.sin(half))
    b = jnp.where(small, 1.0 / 12.0 + t2 / 720.0, (1 - half * cot) / (t * t))
    wx = al.skew(w)
    return al.eye3(w) - 0.5 * wx + b[..., None, :] * al.mm(wx, wx)
