"""`ModelBuilder`: the mutable, host-side way to assemble a `Model`."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from ._body import (
    Body,
    Transform,
    check_inertia_option,
    inertia_inconsistency,
    mass_matrix_bound,
)
from ._coupling import couple
from ._model import CoupledModel, Model
from .joints import JointSpec, fixed

__all__ = ["ModelBuilder", "inertia_vector"]


def inertia_vector(
    mass: float, com: np.ndarray, inertia_c: np.ndarray, name: str = "?"
) -> np.ndarray:
    """``[m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` with I about the body origin.

    Raises:
        ValueError: finite inputs whose parallel-axis terms overflow float64 (a mass of
            1e300 at 1e200 m), naming body ``name``.
    """
    cx = np.array([[0, -com[2], com[1]], [com[2], 0, -com[0]], [-com[1], com[0], 0]])
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked just below
        Io = inertia_c + mass * cx @ cx.T  # parallel-axis theorem
        row = np.array(
            [mass, *(mass * com), Io[0, 0], Io[0, 1], Io[1, 1], Io[0, 2], Io[1, 2], Io[2, 2]]
        )
    if not np.all(np.isfinite(row)):
        raise ValueError(
            f"body {name!r}: mass {mass:.3g} with centre of mass {np.asarray(com).tolist()} "
            "overflows: the first moment m c or the parallel-axis term m |c|^2 is not "
            "finite in float64"
        )
    return row


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


@dataclasses.dataclass
class _Rotor:
    name: str  # rotor body and rotor joint name
    joint: str  # the driven joint
    carrier: int  # body id
    axis: np.ndarray  # (3,) unit spin axis, carrier coordinates
    position: np.ndarray  # (3,) rotor frame origin, carrier coordinates
    mass: float
    com: np.ndarray  # (3,) rotor frame
    inertia: np.ndarray  # (3, 3) about the centre of mass, rotor frame
    gear_ratio: float

    @property
    def axial_moment(self) -> float:
        """Moment of inertia about the spin axis (through ``position``) [kg m^2]."""
        a, d = self.axis, self.com
        return float(a @ self.inertia @ a + self.mass * (d @ d - (a @ d) ** 2))


class ModelBuilder:
    """Collects bodies and joints on the host, then `build`s an immutable `Model`.

    Geared motor rotors (`add_rotor`) make `build` return a `CoupledModel` with the
    rotors exact, or a `Model` with their diagonal armature (``build(rotors=...)``).

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
        self._rotors: list[_Rotor] = []
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
            friction: dry friction coefficients, as ``damping``; a negative one (as
                least-squares identification may return) is kept with a warning at
                `build`, and `jaxrbd.passive_forces` refuses it.
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
        if name in self._ids or any(r.name == name for r in self._rotors):
            raise ValueError(f"body {name!r}: duplicate body name")
        if not isinstance(joint, JointSpec):
            raise TypeError(f"body {name!r}: joint must come from jaxrbd.joints, got {joint!r}")
        jname = name if joint_name is None else str(joint_name)
        if any(e.joint_name == jname for e in self._entries) or any(
            r.name == jname for r in self._rotors
        ):
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
            _Entry(name, pid, joint, inertia_vector(mass, com, Ic, name), R.T.copy(), p.copy(),
                   jname, limits)
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

    def add_rotor(
        self,
        joint: str,
        inertia,
        gear_ratio: float,
        *,
        carrier: int | str | None = None,
        axis: Sequence[float] | None = None,
        position: Sequence[float] | None = None,
        mass: float = 0.0,
        com: Sequence[float] = (0.0, 0.0, 0.0),
        transverse_inertia: float | None = None,
        name: str | None = None,
    ) -> str:
        """Add a geared rotor (a motor's rotor) driving the 1-DoF ``joint``; returns its name.

        The rotor is a rigid body on a *carrier* body, spinning about an ``axis`` fixed in
        the carrier at the angle ``theta = gear_ratio * q_joint``: a revolute joint from
        the carrier, coupled to ``joint`` like a mimic joint. `build` then returns a
        `CoupledModel` in which every algorithm treats the rotor exactly, the gyroscopic
        coupling of its spin with the carrier's motion included, while ``q`` and ``v``
        keep only the model's own joints; ``build(rotors="armature")`` gives the
        diagonal-armature approximation of the same rotors and ``rotors="none"`` leaves
        them out (see `build` and the "Geared rotors" page of the docs).

        Frames: the rotor frame has its origin at ``position`` in the carrier frame and,
        at ``theta = 0``, the carrier's orientation; it turns by ``theta`` about ``axis``
        (right-hand rule, carrier coordinates). ``com`` and a `(3, 3)` ``inertia`` are in
        this rotor frame, as `Body`'s.

        Args:
            joint: name of the driven joint (added before), 1-DoF: revolute, prismatic,
                helical or a one-column custom joint.
            inertia: the rotor's inertia [kg m^2]: a number ``J >= 0``, its moment about
                the spin axis (an axisymmetric rotor, e.g. a datasheet's rotor inertia),
                or a `(3, 3)` rotational inertia about its centre of mass in the rotor
                frame.
            gear_ratio: ``n`` in ``theta = n q`` (signed, finite): motor turns per joint
                turn [rad/rad], or per metre of a prismatic joint [rad/m].
            carrier: the body the rotor's housing is fixed to, a name or id (``"world"``
                for a motor on the fixed base). Default: the joint's parent body, as a
                motor mounted on the link before its joint.
            axis: `(3,)` spin axis in carrier coordinates (normalised). Default, with the
                default carrier: the joint's axis (of a revolute or helical joint).
            position: `(3,)` rotor frame origin in carrier coordinates [m]. Default, with
                the default carrier: the joint's origin; else the carrier's origin.
            mass: rotor mass [kg] (default 0: the motor's mass is usually part of the
                carrier's data).
            com: `(3,)` centre of mass in the rotor frame [m] (default: on the axis, at
                the rotor frame origin).
            transverse_inertia: with a number ``inertia``: the moment about axes across
                the spin axis through the centre of mass (default ``inertia / 2``, a thin
                disc, the least a real rotor can have).
            name: the rotor's body and joint name (default ``"<joint>_rotor"``).

        Returns:
            The rotor's name: its body in ``model.body_names`` and its coupled joint in
            ``model.coupled_joints`` of the built model.

        Raises:
            ValueError: an unknown joint or carrier, a joint that is not 1-DoF, a zero or
                non-finite axis, a negative inertia or mass, a non-finite gear ratio, a
                duplicate name, an axis that cannot be defaulted.

        Example:
            A SCARA arm whose elbow motor sits on the upper arm, both axes vertical:

            >>> from jaxrbd import ModelBuilder, Body, Transform, joints
            >>> b = ModelBuilder()
            >>> link = Body(1.0, (0.5, 0.0, 0.0), np.eye(3) * 0.01)
            >>> _ = b.add_body("upper_arm", "world", joints.revolute((0, 0, 1)), link,
            ...                joint_name="shoulder")
            >>> _ = b.add_body("forearm", "upper_arm", joints.revolute((0, 0, 1)), link,
            ...                Transform(translation=(1.0, 0.0, 0.0)), joint_name="elbow")
            >>> b.add_rotor("elbow", inertia=1e-4, gear_ratio=100.0)
            'elbow_rotor'
            >>> exact, approx = b.build(), b.build(rotors="armature")
            >>> exact.nv, exact.coupled_joints, np.round(approx.armature, 9).tolist()
            (2, ('elbow_rotor',), [0.0, 1.0])
            >>> q = jnp.zeros(2)
            >>> dH = jaxrbd.mass_matrix(exact, q) - jaxrbd.mass_matrix(approx, q)
            >>> np.round(dH, 9).tolist()  # n J off the diagonal; J carried by the upper arm
            [[0.0001, 0.01], [0.01, 0.0]]
        """
        if not self._entries or joint not in [e.joint_name for e in self._entries]:
            known = ", ".join(e.joint_name for e in self._entries if e.joint.kind != "fixed")
            raise ValueError(f"add_rotor: unknown joint {joint!r}; joints: {known or 'none'}")
        entry = next(e for e in self._entries if e.joint_name == joint)
        if entry.joint.nq != 1 or entry.joint.nv != 1:
            raise ValueError(
                f"add_rotor: joint {joint!r} is {entry.joint.name} with nv = {entry.joint.nv}; "
                "a geared rotor drives a 1-DoF joint (revolute, prismatic, helical)"
            )
        rname = f"{joint}_rotor" if name is None else name
        if not isinstance(rname, str) or not rname:
            raise ValueError(f"add_rotor: name must be a non-empty string, got {rname!r}")
        if (
            rname in self._ids
            or any(e.joint_name == rname for e in self._entries)
            or any(r.name == rname for r in self._rotors)
        ):
            raise ValueError(f"add_rotor: duplicate body or joint name {rname!r}")
        try:
            n = float(gear_ratio)
        except (TypeError, ValueError):
            raise ValueError(f"add_rotor {rname!r}: gear_ratio must be a number, got "
                             f"{gear_ratio!r}") from None
        if not np.isfinite(n):
            raise ValueError(f"add_rotor {rname!r}: gear_ratio {n} is not finite")
        default_carrier = carrier is None
        cid = entry.parent if default_carrier else self._parent_id(carrier, rname)
        # the joint frame in the parent frame: rotation E^T, origin r
        w = entry.joint.columns[0, :3]
        if axis is None:
            if not default_carrier:
                raise ValueError(
                    f"add_rotor {rname!r}: give the spin axis (carrier coordinates) for a "
                    "carrier other than the joint's parent"
                )
            if np.linalg.norm(w) < 1e-12:
                raise ValueError(
                    f"add_rotor {rname!r}: joint {joint!r} has no rotation axis; give the "
                    "rotor's spin axis"
                )
            axis = entry.E.T @ w
        a = _rotor_vector(rname, "axis", axis)
        na = np.linalg.norm(a)
        if na < 1e-12:
            raise ValueError(f"add_rotor {rname!r}: axis {a.tolist()} is zero; a rotor "
                             "spins about a direction")
        a = a / na
        if position is None:
            position = entry.r if default_carrier else np.zeros(3)
        p = _rotor_vector(rname, "position", position)
        c = _rotor_vector(rname, "com", com)
        try:
            J = np.asarray(inertia, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"add_rotor {rname!r}: inertia must be a number or (3, 3), "
                             f"got {inertia!r}") from None
        if J.ndim == 0:
            Jt = 0.5 * float(J) if transverse_inertia is None else transverse_inertia
            try:
                Jt = float(Jt)
            except (TypeError, ValueError):
                raise ValueError(f"add_rotor {rname!r}: transverse_inertia must be a "
                                 f"number, got {transverse_inertia!r}") from None
            if not (np.isfinite(J) and np.isfinite(Jt)) or J < 0 or Jt < 0:
                raise ValueError(
                    f"add_rotor {rname!r}: inertia ({float(J)}) and transverse_inertia "
                    f"({Jt}) must be finite and >= 0"
                )
            J = Jt * (np.eye(3) - np.outer(a, a)) + float(J) * np.outer(a, a)
        elif transverse_inertia is not None:
            raise ValueError(f"add_rotor {rname!r}: transverse_inertia goes with a number "
                             "inertia, not a (3, 3) one")
        elif J.shape == (3, 3) and np.all(np.isfinite(J)) and np.diag(J).min() < 0:
            raise ValueError(f"add_rotor {rname!r}: inertia has negative moments "
                             f"{np.diag(J).tolist()}")
        m, c, J = Body(mass, c, J).arrays(rname, self.inertia_check)
        why = _inconsistency(m, J)
        if why is not None and self.inertia_check == "warn":
            self._inconsistent.append((rname, why))
        self._rotors.append(_Rotor(rname, joint, cid, a, p, m, c, J, n))
        return rname

    def build(self, dtype=None, *, rotors: str = "exact") -> Model | CoupledModel:
        """Freeze into a `Model` whose leaves have ``dtype`` (JAX's default float).

        Args:
            dtype: the float dtype of the leaves (JAX's default float).
            rotors: what the rotors of `add_rotor` become (nothing changes without any):
                ``"exact"`` (default): rotor bodies on their carriers, coupled to their
                joints (``theta = n q``), so the result is a `CoupledModel`: its rotor
                bodies come after the others, and ``q``/``v`` are those of the model
                without rotors. ``"armature"``: the diagonal approximation, a plain
                `Model` whose ``armature`` of each driven joint grows by ``n^2 J_a``
                (``J_a`` the rotor's moment about its spin axis). ``"none"``: the
                rotors left out.

        Returns:
            A `Model`, or a `CoupledModel` with exact rotors.

        Raises:
            ValueError: an unknown ``rotors`` option; inertial parameters that overflow
                ``dtype``; joint placements whose parallel-axis terms ``m |r|²`` make the
                mass matrix overflow ``dtype`` (naming the joint with the largest offset).
        """
        if rotors not in ("exact", "armature", "none"):
            raise ValueError(f"rotors={rotors!r}, expected 'exact', 'armature' or 'none'")
        if self._rotors and rotors != "none":
            return self._build_with_rotors(dtype, rotors)
        return self._build(self._entries, dtype, stacklevel=3)

    def _build_with_rotors(self, dtype, mode):
        """``build`` with the rotors: as coupled bodies, or as armature."""
        if mode == "armature":
            extra = {}
            for r in self._rotors:
                extra[r.joint] = extra.get(r.joint, 0.0) + r.gear_ratio**2 * r.axial_moment
            entries = [
                e if e.joint_name not in extra else dataclasses.replace(
                    e, limits={**e.limits, "armature": e.limits["armature"] + extra[e.joint_name]}
                )
                for e in self._entries
            ]
            return self._build(entries, dtype, stacklevel=4)
        rotor_entries = []
        for r in self._rotors:
            joint = JointSpec("screw", "revolute", np.concatenate([r.axis, np.zeros(3)])[None])
            limits = _joint_limits(r.name, joint, None, None, None, None, None, None)
            rotor_entries.append(_Entry(
                r.name, r.carrier, joint, inertia_vector(r.mass, r.com, r.inertia, r.name), np.eye(3),
                r.position.copy(), r.name, limits,
            ))
        base = self._build(self._entries + rotor_entries, dtype, stacklevel=4)
        return couple(base, {r.name: (r.joint, r.gear_ratio, 0.0) for r in self._rotors})

    def _build(self, entries: list, dtype, stacklevel: int) -> Model:
        dtype = dtype or jnp.zeros(()).dtype  # float64 under jax_enable_x64, else float32
        if self._inconsistent:
            lines = "\n".join(f"  {name!r}: {why}" for name, why in self._inconsistent)
            warnings.warn(
                f"{len(self._inconsistent)} bodies have physically inconsistent inertias "
                f"(kept as given; inertia_check='error' refuses them, 'ignore' silences "
                f"this):\n{lines}",
                UserWarning,
                stacklevel=stacklevel,
            )
        negative = [e.joint_name for e in entries if (e.limits["friction"] < 0).any()]
        if negative:
            warnings.warn(
                f"joints {negative} have negative dry friction (kept as data, as "
                "identification by least squares returns it; jaxrbd.passive_forces refuses "
                "a negative friction coefficient)",
                UserWarning,
                stacklevel=stacklevel,
            )
        nb = len(entries) + 1
        names = ["world"] + [e.name for e in entries]
        body_parent = [-1] + [e.parent for e in entries]
        fixed = [True] + [e.joint.kind == "fixed" for e in entries]
        inertia = np.zeros((nb, 10))
        inertia[0] = self.world_inertia
        E = np.tile(np.eye(3), (nb, 1, 1))
        r = np.zeros((nb, 3))
        body_node = [0] * nb
        node_parent, node_body, axes = [-1], [0], []
        q_start, v_start = [0] * nb, [0] * nb
        nq = 0
        for b, e in enumerate(entries, start=1):
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
        moving = [e for e in entries if e.joint.kind != "fixed"]
        with np.errstate(over="ignore"):
            overflow = ~np.isfinite(inertia.astype(np.dtype(dtype))).all(axis=1)
        if overflow.any():
            raise ValueError(
                f"bodies {[names[b] for b in np.flatnonzero(overflow)]}: the inertial "
                f"parameters overflow {np.dtype(dtype).name} (largest magnitude "
                f"{np.abs(inertia[overflow]).max():.3g})"
            )

        def cat(key, n):
            parts = [e.limits[key] for e in moving]
            return np.concatenate(parts) if parts else np.zeros(n)

        _check_placements(entries, inertia, r, cat("armature", nv), dtype, nv)

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
            joint_kind=("fixed",) + tuple(e.joint.kind for e in entries),
            joint_label=("fixed",) + tuple(e.joint.name for e in entries),
            joint_name=("world",) + tuple(e.joint_name for e in entries),
            q_start=tuple(q_start),
            v_start=tuple(v_start),
            node_parent=tuple(node_parent),
            node_body=tuple(node_body),
            nq=nq,
            nv=nv,
        )


def _check_placements(entries, inertia, r, armature, dtype, nv) -> None:
    """Refuse joint placements whose parallel-axis terms overflow ``dtype``.

    Xtree carries the offsets into the composite inertias (``m |r|²``): a finite but huge
    ``<origin xyz="1e200 0 0">`` would make the mass matrix inf at run time. The joint with
    the largest offset is named.
    """
    top = float(np.finfo(np.dtype(dtype)).max) / max(nv, 1)
    h = mass_matrix_bound(inertia, r, armature)
    with np.errstate(over="ignore", invalid="ignore"):
        offsets = np.array([np.abs(e.r).max(initial=0.0) for e in entries] or [0.0])
        reach = float(offsets.sum())
        if h < top and reach * reach < top:
            return
    e = entries[int(np.argmax(offsets))]
    raise ValueError(
        f"joint {e.joint_name!r} (body {e.name!r}): placement offset {e.r.tolist()} makes the "
        f"parallel-axis terms m |r|^2 overflow {np.dtype(dtype).name} (the mass matrix "
        f"entries reach about {h:.3g}, the squared reach {reach * reach:.3g})"
    )


def _fixed():
    return fixed()


#: q coordinates of a joint kind that are quaternion components (always unbounded)
_QUATERNION_COORDS = {"spherical": slice(0, 4), "free": slice(3, 7)}


def _inconsistency(mass, Ic):
    """The message of a mild inertia inconsistency (severe ones raised already), or None."""
    why = inertia_inconsistency(mass, Ic)
    return None if why is None else why[0]


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
        # identified friction may come out negative (least squares): kept as data with
        # a warning at build; jaxrbd.passive_forces, which needs the sign, refuses it
        if (a < 0).any() and key != "friction":
            raise ValueError(f"body {name!r}: {key} must be >= 0, got {a}")
        if key in ("stiffness", "armature") and not np.all(np.isfinite(a)):
            raise ValueError(f"body {name!r}: {key} must be finite, got {a}")
        out[key] = a
    return out


def _rotor_vector(name, what, x):
    """A finite 3-vector argument of `ModelBuilder.add_rotor`."""
    try:
        v = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"add_rotor {name!r}: {what} must be a 3-vector, got {x!r}") from None
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise ValueError(f"add_rotor {name!r}: {what} must be a finite 3-vector, got {x!r}")
    return v
