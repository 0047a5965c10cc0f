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
    """Hamilton product of quaternions ``(..., 4, B)``."""
    return jnp.stack(quat_mul_c(components(a), components(b)), axis=-2)


def _theta(w):
    """``|w|`` and a safe version for division, with finite gradients at 0."""
    t2 = jnp.sum(w * w, axis=-2, keepdims=True)
    small = t2 < 1e-12 if w.dtype == jnp.float64 else t2 < 1e-6
    t2s = jnp.where(small, 1.0, t2)
    return t2, small, jnp.sqrt(t2s)


def log_quat(quat):
    """Rotation vector of a quaternion (shortest rotation), ``(..., 4, B) -> (..., 3, B)``."""
    quat = normalize_quat(quat)
    quat = jnp.where(quat[..., :1, :] < 0, -quat, quat)
    w, xyz = quat[..., :1, :], quat[..., 1:, :]
    s2, small, s = _theta(xyz)
    # angle = 2 atan2(s, w); factor = angle / s
    factor = jnp.where(small, 2.0 / w * (1.0 - s2 / (3.0 * w * w)), 2.0 * jnp.arctan2(s, w) / s)
    return factor * xyz


def so3_left_jacobian_inv(w):
    """``V(w)^-1`` (`so3_left_jacobian_mv_c`'s matrix inverted), ``(..., 3, 3, B)``."""
    t2, small, t = _theta(w)
    half = 0.5 * t
    cot = jnp.cos(half) / jnp.where(small, 1.0, jnp.sin(half))
    b = jnp.where(small, 1.0 / 12.0 + t2 / 720.0, (1 - half * cot) / (t * t))
    wx = al.skew(w)
    return al.eye3(w) - 0.5 * wx + b[..., None, :] * al.mm(wx, wx)


# ---------------------------------------------------------------- component form
# The formulas of a time step's configuration move on tuples of components, each
# ``(..., B)``, instead of stacked ``(..., k, B)`` arrays: elementwise products of
# arrays of one shape, with no slices, stacks or sums over a component axis between
# them, which XLA fuses into a few loops and whose transposes under `jax.grad` stay
# elementwise (the stacked layout's transposes are pads, a kernel each inside the
# gradient of a rollout).


def components(x):
    """The components of ``x (..., k, B)`` as a tuple of ``(..., B)`` arrays."""
    return tuple(x[..., i, :] for i in range(x.shape[-2]))


def cross_c(a, b):
    """``a x b`` of 3-vectors in component form."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def normalize_quat_c(quat):
    """`normalize_quat` in component form."""
    n2 = quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3]
    ok = n2 > 0
    inv = jnp.where(ok, 1.0 / jnp.sqrt(jnp.where(ok, n2, 1.0)), jnp.nan)
    return tuple(c * inv for c in quat)


def quat_mul_c(a, b):
    """The Hamilton product ``a b`` in component form."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


def quat_rotate_c(quat, x, n2=None):
    """``R(quat) x`` for a quaternion and a 3-vector in component form:
    ``x + 2 (w (v x x) + v x (v x x)) / n2``, without forming ``R``; ``n2 = |quat|^2``
    for a quaternion that is not unit (``None``: unit)."""
    w, v = quat[0], quat[1:]
    vx = cross_c(v, x)
    vvx = cross_c(v, vx)
    two = 2.0 if n2 is None else 2.0 / n2
    return tuple(x[i] + two * (w * vx[i] + vvx[i]) for i in range(3))


def so3_exp_c(w):
    """The exponential map of a rotation vector ``w`` (3 components), with what the left
    Jacobian needs: ``(quat, (a, b))``, ``quat = exp(w)`` and ``V(w) = 1 + a wx + b wx^2``
    (`so3_left_jacobian_mv_c`), ``a = (1 - cos t)/t^2``, ``b = (t - sin t)/t^3``, ``t = |w|``.

    One sine and one cosine of ``t/2`` give all of them (``1 - cos t = 2 sin^2(t/2)``,
    ``sin t = 2 sin(t/2) cos(t/2)``); Taylor series below ``t^2 < 1e-12`` (float64,
    ``1e-6`` float32) keep the values and gradients finite at 0.
    """
    t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    small = t2 < (1e-12 if t2.dtype == jnp.float64 else 1e-6)
    t = jnp.sqrt(jnp.where(small, 1.0, t2))
    s, c = jnp.sin(0.5 * t), jnp.cos(0.5 * t)
    k = s / t  # sin(t/2) / t
    half_sin = jnp.where(small, 0.5 - t2 / 48.0, k)
    quat = (jnp.where(small, 1.0 - t2 / 8.0, c),) + tuple(half_sin * wi for wi in w)
    # (1 - cos t)/t^2 = 2 k^2, whose series 0.5 - t^2/24 + t^4/1152 needs no branch
    a = 2.0 * half_sin * half_sin
    # the safe t cubed, not t * t2: the branch not taken stays finite at w = 0, where
    # its gradient would otherwise be 0 * inf = NaN
    b = jnp.where(small, 1.0 / 6.0 - t2 / 120.0, (t - 2.0 * s * c) / (t * t * t))
    return quat, (a, b)


def so3_left_jacobian_mv_c(w, ab, x):
    """``V(w) x = x + a (w x x) + b w x (w x x)`` for the left Jacobian of SO(3), ``ab``
    from `so3_exp_c`, by two cross products without forming ``V``."""
    a, b = ab
    wx = cross_c(w, x)
    wwx = cross_c(w, wx)
    return tuple(x[i] + a * wx[i] + b * wwx[i] for i in range(3))
