"""Rotations on the host (NumPy, float64): the conversions that loaders, the viewer and
the builders run on static data, outside any traced function. The traced ones (JAX,
batch-trailing) are in `jaxrbd._core.rotation`.

Conventions (`CONVENTIONS.md`): quaternions ``(w, x, y, z)``; a matrix maps child to
parent coordinates; roll-pitch-yaw is URDF's ``R = Rz(yaw) Ry(pitch) Rx(roll)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["axis_angle_matrix", "matrix_to_wxyz", "quat_matrix", "quat_rpy", "rpy_matrix",
           "rpy_quat"]


def rpy_matrix(rpy) -> np.ndarray:
    """``Rz(yaw) Ry(pitch) Rx(roll)`` `(3, 3)` of URDF's ``rpy = (roll, pitch, yaw)`` [rad].

    Example:
        >>> from jaxrbd._core.host_rotation import rpy_matrix
        >>> rpy_matrix([0.0, 0.0, np.pi / 2]).round(12).tolist()[0]
        [0.0, -1.0, 0.0]
    """
    r, p, y = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def quat_matrix(wxyz) -> np.ndarray:
    """Rotation matrix `(3, 3)` of a quaternion ``(w, x, y, z)``, normalised first."""
    w, x, y, z = np.asarray(wxyz, dtype=np.float64) / np.linalg.norm(wxyz)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def axis_angle_matrix(axis, angle) -> np.ndarray:
    """Rodrigues' rotation `(3, 3)` by ``angle`` [rad] about the unit ``axis``."""
    a = np.asarray(axis, dtype=np.float64)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def rpy_quat(rpy) -> np.ndarray:
    """``(w, x, y, z)`` of `rpy_matrix` ``(rpy)``."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = (np.cos(r / 2), np.sin(r / 2), np.cos(p / 2), np.sin(p / 2),
                              np.cos(y / 2), np.sin(y / 2))
    return np.array([cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
                     cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy])


def quat_rpy(wxyz) -> np.ndarray:
    """``(roll, pitch, yaw)`` of a quaternion (the inverse of `rpy_quat`; pitch in
    ``[-pi/2, pi/2]``)."""
    R = quat_matrix(wxyz)
    pitch = -np.arcsin(np.clip(R[2, 0], -1.0, 1.0))
    return np.array([np.arctan2(R[2, 1], R[2, 2]), pitch, np.arctan2(R[1, 0], R[0, 0])])


def matrix_to_wxyz(R: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` ``(w, x, y, z)``, ``w >= 0``, of rotation matrices
    ``(..., 3, 3)`` (Shepperd's method: the largest of the four candidates, stable)."""
    R = np.asarray(R, dtype=float)
    m00, m11, m22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    cand = np.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22,
                     1 - m00 - m11 + m22], axis=-1)
    k = np.argmax(cand, axis=-1)
    s = np.sqrt(np.maximum(np.take_along_axis(cand, k[..., None], -1)[..., 0], 1e-300)) * 2
    d21, d02, d10 = R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]
    s21, s02, s10 = R[..., 2, 1] + R[..., 1, 2], R[..., 0, 2] + R[..., 2, 0], R[..., 1, 0] + R[..., 0, 1]
    q = np.select(
        [k[..., None] == 0, k[..., None] == 1, k[..., None] == 2],
        [np.stack([s / 4, d21 / s, d02 / s, d10 / s], -1),
         np.stack([d21 / s, s / 4, s10 / s, s02 / s], -1),
         np.stack([d02 / s, s10 / s, s / 4, s21 / s], -1)],
        np.stack([d10 / s, s02 / s, s21 / s, s / 4], -1),
    )
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., :1] < 0, -q, q)
