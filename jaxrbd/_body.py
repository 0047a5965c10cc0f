"""Host-side descriptions of a body's mass properties and of a joint placement."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

__all__ = ["Body", "Transform", "check_inertia"]


def check_inertia(name: str, mass: float, com: np.ndarray, inertia: np.ndarray) -> None:
    """Raise ``ValueError`` naming ``name`` if (mass, com, inertia) is not physical."""
    if not np.isfinite(mass):
        raise ValueError(f"body {name!r}: mass {mass} is not finite")
    if mass < 0:
        raise ValueError(f"body {name!r}: negative mass {mass}")
    if com.shape != (3,):
        raise ValueError(f"body {name!r}: com has shape {com.shape}, expected (3,)")
    if inertia.shape != (3, 3):
        raise ValueError(f"body {name!r}: inertia has shape {inertia.shape}, expected (3, 3)")
    if not (np.all(np.isfinite(com)) and np.all(np.isfinite(inertia))):
        raise ValueError(f"body {name!r}: com and inertia must be finite")
    scale = max(1.0, float(np.abs(inertia).max()))
    if not np.allclose(inertia, inertia.T, rtol=0.0, atol=1e-9 * scale):
        raise ValueError(f"body {name!r}: inertia is not symmetric:\n{inertia}")
    eig = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    tol = 1e-10 * scale
    if eig[0] < -tol:
        raise ValueError(
            f"body {name!r}: inertia is not positive semidefinite (eigenvalues {eig.tolist()})"
        )
    # Principal moments of a real body satisfy the triangle inequality.
    if eig[0] + eig[1] < eig[2] - tol:
        raise ValueError(
            f"body {name!r}: inertia violates the triangle inequality "
            f"(principal moments {eig.tolist()}: {eig[0]:.6g} + {eig[1]:.6g} < {eig[2]:.6g})"
        )


@dataclasses.dataclass(frozen=True)
class Body:
    """Mass properties of a rigid body, as RBDL's ``Body``.

    Args:
        mass: [kg], >= 0 (0 makes a massless body, as RBDL uses for multi-DoF joints).
        com: centre of mass in body coordinates [m], `(3,)`.
        inertia: rotational inertia about the centre of mass in body coordinates
            [kg m^2], `(3, 3)`, symmetric positive semidefinite.
    """

    mass: float = 0.0
    com: Sequence[float] = (0.0, 0.0, 0.0)
    inertia: Sequence[Sequence[float]] | np.ndarray = ((0.0, 0.0, 0.0),) * 3

    def arrays(self, name: str = "?") -> tuple[float, np.ndarray, np.ndarray]:
        """Checked ``(mass, com (3,), inertia (3, 3))`` as float64 numpy."""
        try:
            mass = float(self.mass)
            com = np.asarray(self.com, dtype=np.float64)
            inertia = np.asarray(self.inertia, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"body {name!r}: mass properties are not numeric ({e})") from None
        check_inertia(name, mass, com, inertia)
        return mass, com, inertia


@dataclasses.dataclass(frozen=True)
class Transform:
    """A joint placement in the robotics convention (as a URDF ``<origin>``).

    Args:
        rotation: `(3, 3)` rotation matrix mapping joint-frame coordinates to
            parent coordinates. Default: identity.
        translation: joint frame origin in parent coordinates [m], `(3,)`.
    """

    rotation: Sequence[Sequence[float]] | np.ndarray | None = None
    translation: Sequence[float] = (0.0, 0.0, 0.0)

    @classmethod
    def from_rpy(cls, rpy: Sequence[float], translation: Sequence[float] = (0.0, 0.0, 0.0)):
        """From URDF roll-pitch-yaw angles: ``R = Rz(yaw) Ry(pitch) Rx(roll)``."""
        r, p, y = (float(a) for a in rpy)
        cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
        R = np.array(
            [
                [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                [-sp, cp * sr, cp * cr],
            ]
        )
        return cls(rotation=R, translation=translation)

    def arrays(self, name: str = "?") -> tuple[np.ndarray, np.ndarray]:
        """Checked ``(rotation (3, 3), translation (3,))`` as float64 numpy."""
        R = np.eye(3) if self.rotation is None else np.asarray(self.rotation, dtype=np.float64)
        p = np.asarray(self.translation, dtype=np.float64)
        if R.shape != (3, 3):
            raise ValueError(f"body {name!r}: placement rotation has shape {R.shape}, expected (3, 3)")
        if p.shape != (3,):
            raise ValueError(
                f"body {name!r}: placement translation has shape {p.shape}, expected (3,)"
            )
        if not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))):
            raise ValueError(f"body {name!r}: placement must be finite")
        if not np.allclose(R.T @ R, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0:
            raise ValueError(f"body {name!r}: placement rotation is not a rotation matrix:\n{R}")
        return R, p
