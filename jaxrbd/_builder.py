"""`ModelBuilder`: the mutable, host-side way to assemble a `Model`."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from ._body import Body, Transform, check_inertia_option
from ._model import Model
from .joints import JointSpec

__all__ = ["ModelBuilder", "inertia_vector"]


def inertia_vector(mass: float, com: np.ndarray, inertia_c: np.ndarray) -> np.ndarray:
    """``[m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` with I about the body origin."""
    cx = np.array([[0, -com[2], com[1]], [com[2], 0, -com[0]], [-com[1], com[0], 0]])
    Io = inertia_c + mass * cx @ cx.T  # parallel-axis theorem
    return np.array(
        [mass, *(mass * com), Io[0, 0], Io[0, 1], Io[1, 1], Io[0, 2], Io[1, 2], Io[2, 2]]
    )


@dataclasses.dataclass
class _Entry:
    name: str
    parent: int
    joint: JointSpec
    inertia: np.ndarray  # (10,)
    E: np.ndarray  # Featherstone placement, parent -> joint coordinates
    r: np.ndarray
    joint_name: str
    limits: dict  # lower, upper, spring_reference (nq,); per-DoF arrays (nv,)


class ModelBuilder:
    """Collects bodies and joints on the host, then `build`s an immutable `Model`.

    Example:
        >>> import numpy as np
        >>> from jaxrbd import ModelBuilder, Body, Transform, joints
        >>> b = ModelBuilder()
        >>> link = b.add_body("link1", parent="world", joint=joints.revolute((0, 0, 1)),
        ...                   body=Body(1.0, (0.0, 0.0, -0.5), np.eye(3) * 0.01))
        >>> model = b.build()
        >>> model.nq, model.nv, model.body_names
        (1, 1, ('world', 'link1'))
    """

    def __init__(
        self, gravity: Sequence[float] = (0.0, 0.0, -9.81), *, inertia_check: str = "warn"
    ):
        """
        Args:
            gravity: `(3,)` gravitational acceleration in world coordinates [m/s²].
            inertia_check: what a finite but physically inconsistent inertia (principal
                moments violating the triangle inequality, slightly negative eigenvalues
                from rounding) does: ``"warn"`` (default: one `UserWarning` at `build`
                naming every such body and by how much), ``"error"`` (``ValueError`` at
                `add_body`) or ``"ignore"``. Non-finite numbers, negative masses and
                non-symmetric inertias are always errors.
        """
        g = np.asarray(gravity, dtype=np.float64)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ValueError(f"gravity must be a finite 3-vector, got {gravity!r}")
        self.gravity = g
        self.inertia_check = check_inertia_option(inertia_check)
        self._inconsistent: list[tuple[str, str]] = []  # (body, why)
        self._entries: list[_Entry] = []
        self._ids: dict[str, int] = {"world": 0}
        self.world_inertia = np.zeros(10)

    def _parent_id(self, parent: int | str, name: str) -> int:
        if isinstance(parent, str):
            if parent not in self._ids:
                raise ValueError(f"body {name!r}: unknown parent {parent!r}")
            return self._ids[parent]
        if isinstance(parent, (int, np.integer)) and not isinstance(parent, bool):
            if not 0 <= int(parent) <= len(self._entries):
                raise ValueError(f"body {name!r}: unknown parent id {parent}")
            return int(parent)
        raise TypeError(f"body {name!r}: parent must be a name or an id, got {parent!r}")

    def add_body(
        self,
        name: str,
        parent: int | str,
        joint: JointSpec,
        body: Body | None = None,
        placement: Transform | None = None,
        joint_name: str | None = None,
        *,
        lower=None,
        upper=None,
        velocity_limit=None,
        effort_limit=None,
        damping=None,
        friction=None,
        stiffness=None,
        spring_reference=None,
        armature=None,
        rotor_inertia=None,
        gear_ratio=None,
    ) -> int:
        """Add a body attached to ``parent`` by ``joint``; returns its id.

        Args:
            name: unique body name.
            parent: parent body name or id; ``"world"``/``0`` is the root.
            joint: a `jaxrbd.joints` constructor result.
            body: mass properties (default: massless).
            placement: joint frame in the parent body frame (default: identity).
            joint_name: name of the joint (default: the body name).
            lower: lower position limits, a scalar or one per ``q`` coordinate of the
                joint (default unbounded); quaternion coordinates stay unbounded.
            upper: upper position limits, as ``lower``.
            velocity_limit: bound on ``|qd|``, a scalar or one per velocity coordinate
                (default ``inf``).
            effort_limit: bound on ``|tau|``, as ``velocity_limit``.
            damping: viscous damping coefficients (``>= 0``, default 0), kept on the
                model as data (see `Model`).
            friction: dry friction coefficients, as ``damping``.
            stiffness: joint spring stiffness (``>= 0``, default 0), as ``damping``.
            spring_reference: where the joint spring is relaxed, one per ``q``
                coordinate (default: the joint's neutral configuration).
            armature: reflected rotor inertia per velocity coordinate (``>= 0``,
                default 0) [kg m² or kg]: part of the dynamics (``H + diag``).
            rotor_inertia: the armature as Pinocchio gives it, ``rotor_inertia *
                gear_ratio**2`` (per velocity coordinate; give this with ``gear_ratio``,
                or ``armature``, not both).
            gear_ratio: see ``rotor_inertia``.

        Raises:
            ValueError: unknown parent, duplicate name, non-physical inertia, bad
                placement, joint or limits.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"body name must be a non-empty string, got {name!r}")
        if name in self._ids:
            raise ValueError(f"body {name!r}: duplicate body name")
        if not isinstance(joint, JointSpec):
            raise TypeError(f"body {name!r}: joint must come from jaxrbd.joints, got {joint!r}")
        jname = name if joint_name is None else str(joint_name)
        if any(e.joint_name == jname for e in self._entries):
            raise ValueError(f"body {name!r}: duplicate joint name {jname!r}")
        pid = self._parent_id(parent, name)
        mass, com, Ic = (body or Body()).arrays(name, self.inertia_check)
        R, p = (placement or Transform()).arrays(name)
        armature = _armature(name, armature, rotor_inertia, gear_ratio)
        limits = _joint_limits(
            name, joint, lower, upper, velocity_limit, effort_limit, damping, friction,
            stiffness, spring_reference, armature,
        )
        why = _inconsistency(mass, Ic)
        if why is not None and self.inertia_check == "warn":
            self._inconsistent.append((name, why))
        self._entries.append(
            _Entry(name, pid, joint, inertia_vector(mass, com, Ic), R.T.copy(), p.copy(), jname,
                   limits)
        )
        self._ids[name] = len(self._entries)
        return len(self._entries)

    def add_frame(
        self, name: str, parent: int | str, placement: Transform | None = None
    ) -> int:
        """Add a massless frame rigidly attached to ``parent``; returns its body id.

        A frame is a body on a fixed joint: it changes no dynamics and works wherever
        a body does (`forward_kinematics`, `point_jacobian`, `body_jacobian`, IK,
        constraints), addressed by ``name``.

        Example:
            >>> from jaxrbd import ModelBuilder, Body, Transform, joints
            >>> b = ModelBuilder()
            >>> _ = b.add_body("arm", "world", joints.revolute((0, 0, 1)), Body(1.0))
            >>> _ = b.add_frame("tip", "arm", Transform(translation=(0.5, 0.0, 0.0)))
            >>> m = b.build()
            >>> m.nv, m.body_id("tip")
            (1, 2)
        """
        return self.add_body(name, parent, _fixed(), None, placement)

    def build(self, dtype=None) -> Model:
        """Freeze into a `Model` whose leaves have ``dtype`` (JAX's default float)."""
        dtype = dtype or jnp.zeros(()).dtype  # float64 under jax_enable_x64, else float32
        if self._inconsistent:
            lines = "\n".join(f"  {name!r}: {why}" for name, why in self._inconsistent)
            warnings.warn(
                f"{len(self._inconsistent)} bodies have physically inconsistent inertias "
                f"(kept as given; inertia_check='error' refuses them, 'ignore' silences "
                f"this):\n{lines}",
                UserWarning,
                stacklevel=2,
            )
        nb = len(self._entries) + 1
        names = ["world"] + [e.name for e in self._entries]
        body_parent = [-1] + [e.parent for e in self._entries]
        fixed = [True] + [e.joint.kind == "fixed" for e in self._entries]
        inertia = np.zeros((nb, 10))
        inertia[0] = self.world_inertia
        E = np.tile(np.eye(3), (nb, 1, 1))
        r = np.zeros((nb, 3))
        body_node = [0] * nb
        node_parent, node_body, axes = [-1], [0], []
        q_start, v_start = [0] * nb, [0] * nb
        nq = 0
        for b, e in enumerate(self._entries, start=1):
            inertia[b] = e.inertia
            E_b, r_b = e.E, e.r
            if fixed[e.parent] and e.parent != 0:
                # Pre-compose with the parent's placement relative to its node:
                # X = X_b X_parent, E = E_b E_p, r = r_p + E_p^T r_b.
                E_p, r_p = E[e.parent], r[e.parent]
                E_b, r_b = E_b @ E_p, r_p + E_p.T @ r_b
            E[b], r[b] = E_b, r_b
            q_start[b], v_start[b] = nq, len(node_parent) - 1
            if e.joint.kind == "fixed":
                body_node[b] = body_node[e.parent]
                continue
            prev = body_node[e.parent]
            for col in e.joint.columns:
                node_parent.append(prev)
                node_body.append(b)
                axes.append(col)
                prev = len(node_parent) - 1
            body_node[b] = prev
            nq += e.joint.nq
        nv = len(node_parent) - 1
        moving = [e for e in self._entries if e.joint.kind != "fixed"]

        def cat(key, n):
            parts = [e.limits[key] for e in moving]
            return np.concatenate(parts) if parts else np.zeros(n)

        return Model(
            gravity=jnp.asarray(self.gravity, dtype),
            inertia=jnp.asarray(inertia, dtype),
            Xtree_E=jnp.asarray(E, dtype),
            Xtree_r=jnp.asarray(r, dtype),
            axes=jnp.asarray(np.asarray(axes).reshape(nv, 6), dtype),
            q_lower=jnp.asarray(cat("lower", nq), dtype),
            q_upper=jnp.asarray(cat("upper", nq), dtype),
            velocity_limit=jnp.asarray(cat("velocity_limit", nv), dtype),
            effort_limit=jnp.asarray(cat("effort_limit", nv), dtype),
            damping=jnp.asarray(cat("damping", nv), dtype),
            friction=jnp.asarray(cat("friction", nv), dtype),
            stiffness=jnp.asarray(cat("stiffness", nv), dtype),
            spring_reference=jnp.asarray(cat("spring_reference", nq), dtype),
            armature=jnp.asarray(cat("armature", nv), dtype),
            body_names=tuple(names),
            body_parent=tuple(body_parent),
            body_node=tuple(body_node),
            body_fixed=tuple(fixed),
            joint_kind=("fixed",) + tuple(e.joint.kind for e in self._entries),
            joint_label=("fixed",) + tuple(e.joint.name for e in self._entries),
            joint_name=("world",) + tuple(e.joint_name for e in self._entries),
            q_start=tuple(q_start),
            v_start=tuple(v_start),
            node_parent=tuple(node_parent),
            node_body=tuple(node_body),
            nq=nq,
            nv=nv,
        )


def _fixed():
    from .joints import fixed

    return fixed()


#: q coordinates of a joint kind that are quaternion components (always unbounded)
_QUATERNION_COORDS = {"spherical": slice(0, 4), "free": slice(3, 7)}


def _inconsistency(mass, Ic):
    from ._body import inertia_inconsistency

    return inertia_inconsistency(mass, Ic)


def _armature(name, armature, rotor_inertia, gear_ratio):
    """``armature`` or ``rotor_inertia * gear_ratio**2`` (None when neither is given)."""
    if rotor_inertia is None and gear_ratio is None:
        return armature
    if armature is not None:
        raise ValueError(f"body {name!r}: give armature or rotor_inertia/gear_ratio, not both")
    if rotor_inertia is None or gear_ratio is None:
        raise ValueError(f"body {name!r}: rotor_inertia and gear_ratio go together")
    try:
        ri = np.asarray(rotor_inertia, dtype=np.float64)
        n = np.asarray(gear_ratio, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"body {name!r}: rotor_inertia and gear_ratio must be numbers") from None
    if not (np.all(np.isfinite(ri)) and np.all(np.isfinite(n))):
        raise ValueError(f"body {name!r}: rotor_inertia and gear_ratio must be finite")
    return ri * n**2


def _joint_limits(
    name, joint, lower, upper, velocity_limit, effort_limit, damping, friction,
    stiffness=None, spring_reference=None, armature=None,
):
    """Per-coordinate limit arrays of one joint, checked; ValueError names the body."""
    nq, nv = joint.nq, len(joint.columns)

    def arr(key, x, n, default):
        if x is None:
            return np.full(n, default)
        try:
            a = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"body {name!r}: {key} must be numbers, got {x!r}") from None
        if a.ndim == 0:
            a = np.full(n, float(a))
        if a.shape != (n,):
            raise ValueError(f"body {name!r}: {key} has shape {a.shape}, expected ({n},)")
        if np.isnan(a).any():
            raise ValueError(f"body {name!r}: {key} contains NaN")
        return a

    if joint.kind == "fixed" and any(
        x is not None
        for x in (lower, upper, velocity_limit, effort_limit, damping, friction, stiffness,
                  spring_reference, armature)
    ):
        raise ValueError(
            f"body {name!r}: a fixed joint has no limits, damping, friction, stiffness, "
            "spring reference or armature"
        )
    lo = arr("lower", lower, nq, -np.inf)
    hi = arr("upper", upper, nq, np.inf)
    quat = _QUATERNION_COORDS.get(joint.kind)
    if quat is not None:
        lo[quat], hi[quat] = -np.inf, np.inf
    if (lo > hi).any():
        raise ValueError(f"body {name!r}: lower limit {lo} above upper limit {hi}")
    ref = arr("spring_reference", spring_reference, nq, 0.0)
    if not np.all(np.isfinite(ref)):
        raise ValueError(f"body {name!r}: spring_reference must be finite, got {ref}")
    if spring_reference is None and quat is not None:
        ref[quat.start] = 1.0  # identity quaternion
    out = {"lower": lo, "upper": hi, "spring_reference": ref}
    for key, x, default in (
        ("velocity_limit", velocity_limit, np.inf),
        ("effort_limit", effort_limit, np.inf),
        ("damping", damping, 0.0),
        ("friction", friction, 0.0),
        ("stiffness", stiffness, 0.0),
        ("armature", armature, 0.0),
    ):
        a = arr(key, x, nv, default)
        if (a < 0).any():
            raise ValueError(f"body {name!r}: {key} must be >= 0, got {a}")
        if key in ("stiffness", "armature") and not np.all(np.isfinite(a)):
            raise ValueError(f"body {name!r}: {key} must be finite, got {a}")
        out[key] = a
    return out
