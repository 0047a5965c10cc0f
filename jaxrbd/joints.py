"""Joint constructors (host-side descriptions used by `ModelBuilder`).

A joint is *data*: a kind tag, its sizes and its motion-subspace columns. The
traced joint calculations (``XJ``, ``S``, ``vJ``, ``cJ``) live in `jaxrbd._jcalc`.

Every joint with ``nv`` degrees of freedom is carried inside the model as ``nv``
one-degree-of-freedom *nodes* (RBDL's emulation of multi-DoF joints by massless
bodies, seed 004), which keeps every recursion step a uniform rank-1 update.

| kind | nq | nv | q | columns (motion subspace in the child frame) |
|---|---|---|---|---|
| revolute(axis) | 1 | 1 | angle | ``[axis; 0]`` |
| prismatic(axis) | 1 | 1 | displacement | ``[0; axis]`` |
| helical(axis, pitch) | 1 | 1 | angle | ``[axis; pitch * axis]`` |
| custom(columns) | k | k | k coordinates | the given columns, in series |
| planar() | 3 | 3 | x, y, angle | RBDL's planar joint (a custom joint) |
| spherical() | 4 | 3 | quaternion (w, x, y, z) | ``[e_k; 0]`` |
| free() | 7 | 6 | position, quaternion | ``e_k`` (body coordinates) |
| euler_zyx/xyz/yxz() | 3 | 3 | Euler angles | ``S(q)`` (seed 000 eq. 37) |
| translation_xyz() | 3 | 3 | displacement | ``[0; e_k]`` |
| fixed() | 0 | 0 | - | merged into the parent |
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

__all__ = [
    "JointSpec",
    "revolute",
    "prismatic",
    "helical",
    "fixed",
    "spherical",
    "free",
    "euler_zyx",
    "euler_xyz",
    "euler_yxz",
    "translation_xyz",
    "custom",
    "planar",
    "JOINT_KINDS",
]

#: Every joint kind and its ``(nq, nv)``; ``None`` means "number of columns".
JOINT_KINDS: dict[str, tuple[int | None, int | None]] = {
    "fixed": (0, 0),
    "screw": (None, None),  # revolute, prismatic, helical, custom, planar
    "spherical": (4, 3),
    "free": (7, 6),
    "euler_zyx": (3, 3),
    "euler_xyz": (3, 3),
    "euler_yxz": (3, 3),
    "translation_xyz": (3, 3),
}

_EULER_AXES = {"euler_zyx": (2, 1, 0), "euler_xyz": (0, 1, 2), "euler_yxz": (1, 0, 2)}


@dataclasses.dataclass(frozen=True)
class JointSpec:
    """A joint description: ``kind`` (see `JOINT_KINDS`), ``columns`` `(nv, 6)`.

    ``name`` is the user-facing constructor name (``"revolute"``, ``"planar"``...),
    kept for printing; the traced code dispatches on ``kind`` only.
    """

    kind: str
    name: str
    columns: np.ndarray  # (nv, 6) [angular; linear] motion-subspace columns

    @property
    def nv(self) -> int:
        return int(self.columns.shape[0])

    @property
    def nq(self) -> int:
        return {"spherical": 4, "free": 7}.get(self.kind, self.nv)

    def __repr__(self) -> str:
        if self.kind == "screw" and self.name in ("revolute", "prismatic"):
            axis = self.columns[0, :3] if self.name == "revolute" else self.columns[0, 3:]
            return f"{self.name}(axis={tuple(float(a) for a in axis)})"
        return f"{self.name}()"


def _axis(axis: Sequence[float], what: str) -> np.ndarray:
    a = np.asarray(axis, dtype=np.float64)
    if a.shape != (3,):
        raise ValueError(f"{what} axis has shape {a.shape}, expected (3,)")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what} axis {a.tolist()} is not finite")
    n = np.linalg.norm(a)
    if n < 1e-12:
        raise ValueError(f"{what} axis {a.tolist()} is zero; a joint axis needs a direction")
    return a / n


def revolute(axis: Sequence[float] = (0.0, 0.0, 1.0)) -> JointSpec:
    """Rotation by ``q`` [rad] about ``axis`` (normalised) of the joint frame."""
    a = _axis(axis, "revolute")
    return JointSpec("screw", "revolute", np.concatenate([a, np.zeros(3)])[None])


def prismatic(axis: Sequence[float] = (0.0, 0.0, 1.0)) -> JointSpec:
    """Translation by ``q`` [m] along ``axis`` (normalised) of the joint frame."""
    a = _axis(axis, "prismatic")
    return JointSpec("screw", "prismatic", np.concatenate([np.zeros(3), a])[None])


def helical(axis: Sequence[float] = (0.0, 0.0, 1.0), pitch: float = 0.0) -> JointSpec:
    """Screw motion: rotation ``q`` about ``axis`` and translation ``pitch * q`` along it."""
    a = _axis(axis, "helical")
    if not np.isfinite(pitch):
        raise ValueError(f"helical pitch {pitch} is not finite")
    return JointSpec("screw", "helical", np.concatenate([a, float(pitch) * a])[None])


def fixed() -> JointSpec:
    """No motion: the child body is merged into its parent for dynamics."""
    return JointSpec("fixed", "fixed", np.zeros((0, 6)))


def spherical() -> JointSpec:
    """Ball joint: q is a unit quaternion (w, x, y, z); v the angular velocity in child axes."""
    return JointSpec("spherical", "spherical", np.eye(6)[:3])


def free() -> JointSpec:
    """Floating base: q = [p (3), quaternion (w, x, y, z)], v = [omega; v] in body axes."""
    return JointSpec("free", "free", np.eye(6))


def _euler(kind: str) -> JointSpec:
    return JointSpec(kind, kind, np.eye(6)[list(_EULER_AXES[kind])])


def euler_zyx() -> JointSpec:
    """Three rotations about z, then the new y, then the new x (RBDL JointTypeEulerZYX)."""
    return _euler("euler_zyx")


def euler_xyz() -> JointSpec:
    """Three rotations about x, then the new y, then the new z (RBDL JointTypeEulerXYZ)."""
    return _euler("euler_xyz")


def euler_yxz() -> JointSpec:
    """Three rotations about y, then the new x, then the new z (RBDL JointTypeEulerYXZ)."""
    return _euler("euler_yxz")


def translation_xyz() -> JointSpec:
    """Translation along x, y and z of the joint frame (RBDL JointTypeTranslationXYZ)."""
    return JointSpec("translation_xyz", "translation_xyz", np.eye(6)[3:])


def custom(columns: Sequence[Sequence[float]], name: str = "custom") -> JointSpec:
    """1-6 one-DoF screw joints in series, as RBDL's ``Joint(SpatialVector, ...)``.

    Each column ``[omega; v]`` (angular; linear) is one DoF: the child is rotated by
    ``q_k`` about ``omega`` and displaced by ``v q_k`` (an exact screw motion). The
    angular part must be zero or a unit vector; a pure translation needs ``v != 0``.
    """
    c = np.asarray(columns, dtype=np.float64)
    if c.ndim == 1:
        c = c[None]
    if c.ndim != 2 or c.shape[1] != 6 or not 1 <= c.shape[0] <= 6:
        raise ValueError(f"custom joint columns have shape {c.shape}, expected (k, 6) with 1 <= k <= 6")
    if not np.all(np.isfinite(c)):
        raise ValueError("custom joint columns must be finite")
    for k, col in enumerate(c):
        nw = np.linalg.norm(col[:3])
        if nw < 1e-12:
            if np.linalg.norm(col[3:]) < 1e-12:
                raise ValueError(f"custom joint column {k} is zero; a joint axis needs a direction")
        elif abs(nw - 1.0) > 1e-6:
            raise ValueError(
                f"custom joint column {k} has angular part of norm {nw:.6g}, expected 0 or 1"
            )
    return JointSpec("screw", name, c)


def planar() -> JointSpec:
    """RBDL's planar joint: translations along x and y, then a rotation about z."""
    cols = np.zeros((3, 6))
    cols[0, 3] = cols[1, 4] = cols[2, 2] = 1.0
    return custom(cols, name="planar")
