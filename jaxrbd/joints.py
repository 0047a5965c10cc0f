"""Joint constructors (host-side descriptions used by `ModelBuilder`).

A joint is *data*: a kind tag, its sizes and its motion-subspace columns (at ``q = 0``). The
traced joint calculations (``XJ``, ``S``, ``vJ``, ``cJ``) live in `jaxrbd._core.jcalc`.

Every joint with ``nv`` degrees of freedom is carried inside the model as ``nv``
one-degree-of-freedom *nodes* (RBDL's emulation of multi-DoF joints by massless
bodies), which keeps every recursion step a uniform rank-1 update.

| kind | nq | nv | q | columns (motion subspace in the child frame) |
|---|---|---|---|---|
| revolute(axis) | 1 | 1 | angle | ``[axis; 0]`` |
| prismatic(axis) | 1 | 1 | displacement | ``[0; axis]`` |
| helical(axis, pitch) | 1 | 1 | angle | ``[axis; pitch * axis]`` |
| custom(columns) | k | k | k coordinates | RBDL's columns in series: ``[w; E(q) v]`` |
| screw(columns) | k | k | k coordinates | exact screws in series: ``[w; v]`` |
| planar() | 3 | 3 | x, y, angle | RBDL's planar joint (a custom joint) |
| spherical() | 4 | 3 | quaternion (w, x, y, z) | ``[e_k; 0]`` |
| free() | 7 | 6 | position, quaternion | ``e_k`` (body coordinates) |
| euler_zyx/xyz/yxz/zxy() | 3 | 3 | Euler angles | ``S(q)`` (Felis 2017) |
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
    "euler_zxy",
    "translation_xyz",
    "custom",
    "screw",
    "planar",
    "JOINT_KINDS",
]

#: Every joint kind and its ``(nq, nv)``; ``None`` means "number of columns".
JOINT_KINDS: dict[str, tuple[int | None, int | None]] = {
    "fixed": (0, 0),
    "screw": (None, None),  # revolute, prismatic, helical, screw, planar, custom with w || v
    "custom": (None, None),  # RBDL's columns with w not parallel to v: S depends on q
    "spherical": (4, 3),
    "free": (7, 6),
    "euler_zyx": (3, 3),
    "euler_xyz": (3, 3),
    "euler_yxz": (3, 3),
    "euler_zxy": (3, 3),
    "translation_xyz": (3, 3),
}

EULER_AXES = {
    "euler_zyx": (2, 1, 0),
    "euler_xyz": (0, 1, 2),
    "euler_yxz": (1, 0, 2),
    "euler_zxy": (2, 0, 1),
}


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
    return JointSpec(kind, kind, np.eye(6)[list(EULER_AXES[kind])])


def euler_zyx() -> JointSpec:
    """Three rotations about z, then the new y, then the new x (RBDL JointTypeEulerZYX)."""
    return _euler("euler_zyx")


def euler_xyz() -> JointSpec:
    """Three rotations about x, then the new y, then the new z (RBDL JointTypeEulerXYZ)."""
    return _euler("euler_xyz")


def euler_yxz() -> JointSpec:
    """Three rotations about y, then the new x, then the new z (RBDL JointTypeEulerYXZ)."""
    return _euler("euler_yxz")


def euler_zxy() -> JointSpec:
    """Three rotations about z, then the new x, then the new y (RBDL JointTypeEulerZXY)."""
    return _euler("euler_zxy")


def translation_xyz() -> JointSpec:
    """Translation along x, y and z of the joint frame (RBDL JointTypeTranslationXYZ)."""
    return JointSpec("translation_xyz", "translation_xyz", np.eye(6)[3:])


def _columns(columns, what: str) -> np.ndarray:
    try:
        c = np.asarray(columns, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{what} columns must be numbers, got {columns!r}") from None
    if c.ndim == 1:
        c = c[None]
    if c.ndim != 2 or c.shape[1] != 6 or not 1 <= c.shape[0] <= 6:
        raise ValueError(f"{what} joint columns have shape {c.shape}, expected (k, 6) with 1 <= k <= 6")
    if not np.all(np.isfinite(c)):
        raise ValueError(f"{what} joint columns must be finite")
    for k, col in enumerate(c):
        nw = np.linalg.norm(col[:3])
        if nw < 1e-12:
            if np.linalg.norm(col[3:]) < 1e-12:
                raise ValueError(f"{what} joint column {k} is zero; a joint axis needs a direction")
        elif abs(nw - 1.0) > 1e-6:
            raise ValueError(
                f"{what} joint column {k} has angular part of norm {nw:.6g}, expected 0 or 1"
            )
    return c


def _skewed(c: np.ndarray) -> bool:
    """Whether some column has a rotation whose translation is not along its axis."""
    return bool(np.any(np.linalg.norm(np.cross(c[:, :3], c[:, 3:]), axis=1) > 1e-12))


def custom(columns: Sequence[Sequence[float]], name: str = "custom") -> JointSpec:
    """1-6 one-DoF joints in series, as RBDL's ``Joint(SpatialVector, ...)``.

    Each column ``[omega; v]`` (angular; linear, in the joint frame) is one DoF: the
    child frame is rotated by ``q_k`` about ``omega`` and its origin is displaced to
    ``v q_k``, measured along the fixed axes of the joint frame (RBDL's
    ``Xrot(q, omega) * Xtrans(v q)``). Its motion subspace in the child frame is
    ``[omega; E(q) v]`` with ``E(q)`` the rotation by ``-q`` about ``omega``: it depends
    on ``q`` unless ``v`` is parallel to ``omega`` (or ``omega = 0``), where the column
    is an ordinary helical, revolute or prismatic joint and takes the constant-``S``
    path. Several columns are joints in series, in the given order, with massless
    bodies between them. For the exact screw motion ``exp([omega; v] q)`` use `screw`.

    The angular part of a column must be zero or a unit vector; a pure translation
    needs ``v != 0``. Whether the joint has a ``q``-dependent subspace is decided here,
    from the columns: editing ``Model.axes`` later keeps that choice.

    Example:
        >>> roller = jaxrbd.joints.custom([[0, 0, 1, 1, 0, 0]])   # RBDL's roller
        >>> roller.kind, roller.nv
        ('custom', 1)
    """
    c = _columns(columns, "custom")
    return JointSpec("custom" if _skewed(c) else "screw", name, c)


def screw(columns: Sequence[Sequence[float]], name: str = "screw") -> JointSpec:
    """1-6 exact screw joints in series: column ``[omega; v]`` moves the child by the
    screw motion ``exp([omega; v] q_k)``, with a constant motion subspace ``[omega; v]``
    in the child frame (Featherstone 2008, section 4.4).

    Equal to `custom` when each ``v`` is parallel to its ``omega`` or ``omega = 0``;
    otherwise the child origin turns about the screw axis, which passes through
    ``omega x v`` (for a unit ``omega``), instead of sliding along ``v``.

    Example:
        >>> jaxrbd.joints.screw([[0, 0, 1, 1, 0, 0]]).kind
        'screw'
    """
    return JointSpec("screw", name, _columns(columns, "screw"))


def planar() -> JointSpec:
    """RBDL's planar joint: translations along x and y, then a rotation about z."""
    cols = np.zeros((3, 6))
    cols[0, 3] = cols[1, 4] = cols[2, 2] = 1.0
    return custom(cols, name="planar")
