"""Host-side descriptions of a body's mass properties and of a joint placement."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ._core.host_rotation import rpy_matrix

__all__ = [
    "Body", "Transform", "check_inertia", "inertia_inconsistency", "INERTIA_CHECKS",
    "NEGATIVE_MOMENT_RTOL", "mass_matrix_bound",
]


#: what the builder and the loaders do with a physically inconsistent inertia
INERTIA_CHECKS = ("warn", "error", "ignore")


def check_inertia_option(inertia_check: str) -> str:
    """``inertia_check`` validated: one of `INERTIA_CHECKS`."""
    if inertia_check not in INERTIA_CHECKS:
        raise ValueError(
            f"inertia_check={inertia_check!r}, expected one of {', '.join(map(repr, INERTIA_CHECKS))}"
        )
    return inertia_check


def mass_matrix_bound(inertia: np.ndarray, r: np.ndarray, armature: np.ndarray) -> float:
    """Host-side bound on the entries of the mass matrix of a tree, in float64.

    An entry is at most ``sum_b (tr I_b + 2 R |m c|_b + R² m_b)`` plus the armature, with
    ``R`` the sum of all joint offsets ``|r|`` plus the largest ``|c|``: no point of the tree
    is further than that from a joint axis. ``inertia`` is ``(nbodies, 10)`` rows
    ``[m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``, ``r`` the ``(nbodies, 3)`` joint offsets.
    The result is ``inf`` where the terms overflow float64.

    >>> float(mass_matrix_bound(np.array([[2.0, 0, 0, 0, 1, 0, 1, 0, 0, 1]]),
    ...                         np.array([[0.0, 0, 0.5]]), np.zeros(1)))
    3.5
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        mass = np.abs(inertia[:, 0])
        first = np.linalg.norm(inertia[:, 1:4], axis=1)
        reach = np.linalg.norm(r, axis=1).sum() + np.max(
            first / np.maximum(mass, 1e-300), initial=0.0
        )
        trace = np.abs(inertia[:, [4, 6, 9]]).sum()
        h = float(
            trace + 2 * reach * first.sum() + reach**2 * mass.sum()
            + np.max(armature, initial=0.0)
        )
    return h if np.isfinite(h) else np.inf  # nan: inf * 0, an overflow too


#: A principal moment below ``-NEGATIVE_MOMENT_RTOL`` times the largest principal moment
#: (in magnitude) is not rounding: `check_inertia` refuses it unless ``inertia_check`` is
#: ``"ignore"``. Published files keep loading: TIAGo's antennas (-39 %) and Romeo's trunk
#: (-22 %, example-robot-data) warn, as Pinocchio loads them.
NEGATIVE_MOMENT_RTOL = 0.5


def inertia_inconsistency(mass: float, inertia: np.ndarray) -> tuple[str, bool] | None:
    """Why a finite, symmetric rotational inertia is not physical, and whether that is
    severe; ``None`` for a physical one.

    Rounding in CAD exports leaves many real inertias slightly outside the physical set
    (principal moments violating the triangle inequality by a fraction of a percent,
    eigenvalues of -1e-8): those are mild, and the message says by how much, so a user
    can judge. A principal moment below ``-NEGATIVE_MOMENT_RTOL`` times the largest (in
    magnitude) is severe: such a body can turn a push into an acceleration against it.
    """
    scale = max(1.0, float(np.abs(inertia).max()))
    eig = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    tol = 1e-10 * scale
    if eig[0] < -tol:
        big = float(np.abs(eig).max())
        severe = eig[0] < -NEGATIVE_MOMENT_RTOL * big
        return (
            f"inertia is not positive semidefinite (eigenvalues {eig.tolist()}; smallest "
            f"{eig[0]:.3g}, {100 * -eig[0] / big:.3g} % of the largest in magnitude"
            + (f", beyond the {100 * NEGATIVE_MOMENT_RTOL:g} % that rounding may explain)"
               if severe else ")"),
            bool(severe),
        )
    # Principal moments of a real body satisfy the triangle inequality.
    if eig[0] + eig[1] < eig[2] - tol:
        excess = eig[2] - eig[0] - eig[1]
        return (
            f"inertia violates the triangle inequality (principal moments {eig.tolist()}: "
            f"{eig[0]:.6g} + {eig[1]:.6g} < {eig[2]:.6g}, by {excess:.3g} = "
            f"{100 * excess / max(eig[2], 1e-300):.3g} % of the largest)",
            False,
        )
    return None


def check_inertia(
    name: str, mass: float, com: np.ndarray, inertia: np.ndarray, inertia_check: str = "error"
) -> str | None:
    """Check ``(mass, com, inertia)`` of body ``name``, by severity.

    Non-finite numbers, a negative mass, wrong shapes and a non-symmetric inertia always
    raise ``ValueError`` naming the body (parallel-axis terms that overflow are refused
    where they are formed, `jaxrbd._builder.inertia_vector`). A finite, symmetric but
    physically inconsistent inertia (`inertia_inconsistency`) raises under
    ``inertia_check="error"``; under ``"warn"`` a mild one (rounding: the triangle
    inequality, slightly negative moments) is returned as a message (the builder
    gathers them into one warning) and a severe one (a principal moment below
    ``-NEGATIVE_MOMENT_RTOL`` of the largest) raises; under ``"ignore"`` every finite
    inertia is kept.
    """
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
    why = inertia_inconsistency(mass, inertia)
    if why is None or check_inertia_option(inertia_check) == "ignore":
        return None if why is None else why[0]
    if inertia_check == "error" or why[1]:
        hint = "" if inertia_check == "error" else " (inertia_check='ignore' keeps it as given)"
        raise ValueError(f"body {name!r}: {why[0]}{hint}")
    return why[0]


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

    def arrays(
        self, name: str = "?", inertia_check: str = "error"
    ) -> tuple[float, np.ndarray, np.ndarray]:
        """Checked ``(mass, com (3,), inertia (3, 3))`` as float64 numpy (see
        `check_inertia` for what ``inertia_check`` relaxes)."""
        try:
            mass = float(self.mass)
            com = np.asarray(self.com, dtype=np.float64)
            inertia = np.asarray(self.inertia, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"body {name!r}: mass properties are not numeric ({e})") from None
        check_inertia(name, mass, com, inertia, inertia_check)
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
        return cls(rotation=rpy_matrix(rpy), translation=translation)

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
