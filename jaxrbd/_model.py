"""The immutable `Model` pytree."""

from __future__ import annotations

import dataclasses
import re
import weakref

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

__all__ = ["Model"]


class _Structure:
    """A `Model`'s static structure (topology, joint kinds, index tables, sizes, traversal)
    as one immutable value: the Model's pytree aux data.

    jit compares a Model argument's aux data with that of its cached programs on every
    call. Structures are interned (equal parts give the same object, held weakly while
    a model uses it), so that comparison is an identity test, also for two separately
    loaded models of one robot, which share compiled programs.
    """

    _PARTS = (
        "body_names", "body_parent", "body_node", "body_fixed", "joint_kind", "joint_label",
        "joint_name", "q_start", "v_start", "node_parent", "node_body", "nq", "nv",
        "traversal",
    )
    __slots__ = (*_PARTS, "_key", "_hash", "__weakref__")
    _interned: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def __new__(cls, *parts):
        if len(parts) != len(cls._PARTS):
            raise TypeError(f"_Structure takes {len(cls._PARTS)} parts, got {len(parts)}")
        # the type goes into the key: interning must not turn 1 into True or 1.0
        key = tuple((type(p), p) for p in parts)
        self = cls._interned.get(key)
        if self is None:
            self = object.__new__(cls)
            for name, value in zip(cls._PARTS, parts):
                object.__setattr__(self, name, value)
            object.__setattr__(self, "_key", key)
            object.__setattr__(self, "_hash", hash(key))
            cls._interned[key] = self
        return self

    def parts(self) -> dict:
        return {name: getattr(self, name) for name in self._PARTS}

    def __setattr__(self, name, value):
        raise AttributeError(f"a Model's structure is immutable: cannot set {name!r}")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        # jit's comparison stops at identity before calling this; the parts decide for
        # two equal structures built at once by two threads (interning is not locked)
        if self is other:
            return True
        if type(other) is not _Structure:
            return NotImplemented
        return self._hash == other._hash and self._key == other._key

    def __reduce__(self):
        # unpickling interns again (and recomputes the hash: str hashes vary by process)
        return (_Structure, tuple(getattr(self, name) for name in self._PARTS))

    def __repr__(self) -> str:
        return (f"_Structure(nbodies={len(self.body_names)}, nq={self.nq}, nv={self.nv}, "
                f"traversal={self.traversal!r})")


def _structure_part(name: str, doc: str) -> property:
    """A read-only `Model` attribute that reads ``name`` of its `_Structure`."""
    def get(self):
        return getattr(self._structure, name)

    return property(get, doc=doc)


class Model(eqx.Module):
    """A kinematic tree with its mass properties: an immutable equinox pytree.

    Build one with `ModelBuilder` or `load_urdf`. Structure (topology, joint kinds,
    index tables) is static; every physical number is an array leaf, so `jax.grad`
    and `jax.vmap` work over models (e.g. over stacked link masses).

    Bodies are numbered in topological order, body 0 is the world. A body attached by
    a fixed joint keeps its own id, name and mass properties; the algorithms merge it
    into its nearest moving ancestor (its *node*).

    Internally each joint with ``nv`` DoF is a chain of ``nv`` one-DoF *nodes*
    (massless between, RBDL's emulation); node 0 is the world and node ``k >= 1`` owns
    velocity ``v[k - 1]``.

    Leaves:
        gravity: `(3,)` gravitational acceleration in world coordinates [m/s^2].
        inertia: `(nbodies, 10)` ``[m, m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` with
            ``c`` the centre of mass and ``I`` the rotational inertia about the
            **body origin**, both in body coordinates (Pinocchio's dynamic-parameter
            order). Row 0 (world) holds mass rigidly attached to the world.
        Xtree_E: `(nbodies, 3, 3)`, Xtree_r: `(nbodies, 3)`: Plücker placement
            ``X(E, r)`` of each body's joint frame relative to the frame of the node of
            its parent (the parent body frame unless the parent is fixed-merged, in
            which case fixed placements are pre-composed). ``E`` maps parent
            coordinates to joint coordinates; ``r`` is the joint origin in parent
            coordinates.
        axes: `(nv, 6)` the motion-subspace column ``[omega; v]`` of every node.
        q_lower, q_upper: `(nq,)` position limits (``-inf``/``+inf`` where unbounded;
            quaternion coordinates are always unbounded) [rad or m].
        velocity_limit, effort_limit: `(nv,)` limits on ``|qd|`` and ``|tau|``
            (``inf`` where unbounded) [rad/s or m/s; N·m or N].
        damping, friction: `(nv,)` joint viscous damping [N·m·s/rad] and dry friction
            [N·m] as read from a URDF ``<dynamics>`` element (0 by default).
        stiffness: `(nv,)` joint spring stiffness [N·m/rad or N/m] (MJCF ``stiffness``,
            0 by default), pulling ``q`` towards ``spring_reference``.
        spring_reference: `(nq,)` the configuration where the joint springs are
            relaxed (MJCF ``springref``/``qpos_spring``; the neutral configuration by
            default).
        armature: `(nv,)` reflected rotor inertia [kg·m² or kg] (Pinocchio's
            ``rotorInertia · gearRatio²``, MJCF ``armature``; 0 by default). It is part
            of the dynamics: ``mass_matrix`` is ``H + diag(armature)`` and every
            algorithm and derivative agrees with that.

    The limit, damping, friction, stiffness and spring-reference leaves are data for the
    user and for tools such as `inverse_kinematics` and the force elements
    (`jaxrbd.passive_forces` turns them into force elements); the dynamics algorithms do
    not apply them (as Pinocchio and RBDL). The armature is different: it is inertia.
    """

    # ---- leaves ----
    gravity: Float[Array, "3"]
    inertia: Float[Array, "nbodies 10"]
    Xtree_E: Float[Array, "nbodies 3 3"]
    Xtree_r: Float[Array, "nbodies 3"]
    axes: Float[Array, "nv 6"]
    q_lower: Float[Array, "nq"]
    q_upper: Float[Array, "nq"]
    velocity_limit: Float[Array, "nv"]
    effort_limit: Float[Array, "nv"]
    damping: Float[Array, "nv"]
    friction: Float[Array, "nv"]
    stiffness: Float[Array, "nv"]
    spring_reference: Float[Array, "nq"]
    armature: Float[Array, "nv"]

    # ---- structure (static) ----
    # One static field, so that jit's per-call cache check of a Model argument compares
    # one interned object (`_Structure`: an identity test) and equinox's generated
    # flatten and unflatten move one value; its parts read as attributes below.
    _structure: _Structure = eqx.field(static=True)

    body_names = _structure_part("body_names", "Body names, world first (row 0).")
    body_parent = _structure_part("body_parent", "Parent body of each body (-1 for the world).")
    body_node = _structure_part("body_node", "Node each body moves with (0: the world).")
    body_fixed = _structure_part("body_fixed", "Whether each body is attached by a fixed joint.")
    joint_kind = _structure_part("joint_kind", "Joint kind per body (``'fixed'`` for the world).")
    joint_label = _structure_part("joint_label", "Joint constructor name per body.")
    joint_name = _structure_part("joint_name", "Joint name per body (``'world'`` for row 0).")
    q_start = _structure_part("q_start", "First ``q`` index of each body's joint.")
    v_start = _structure_part("v_start", "First ``v`` index of each body's joint.")
    node_parent = _structure_part("node_parent", "Parent node of each node (-1 for node 0).")
    node_body = _structure_part("node_body", "Body each node belongs to.")
    nq = _structure_part("nq", "Length of ``q``.")
    nv = _structure_part("nv", "Length of ``v``, ``qd``, ``qdd`` and ``tau``.")
    traversal = _structure_part("traversal", "The recursion schedule (`with_traversal`).")

    # equinox's `Module.__getattribute__` (which wraps bound methods as pytrees) is a
    # Python call on every attribute read, the two `__dict__` reads of each flatten
    # included; a Model's methods are not passed as pytrees.
    __getattribute__ = object.__getattribute__

    def __init__(
        self, gravity, inertia, Xtree_E, Xtree_r, axes, q_lower, q_upper,
        velocity_limit, effort_limit, damping, friction, stiffness, spring_reference,
        armature, body_names, body_parent, body_node, body_fixed, joint_kind, joint_label,
        joint_name, q_start, v_start, node_parent, node_body, nq, nv, traversal="auto",
    ):
        self.gravity = gravity
        self.inertia = inertia
        self.Xtree_E = Xtree_E
        self.Xtree_r = Xtree_r
        self.axes = axes
        self.q_lower = q_lower
        self.q_upper = q_upper
        self.velocity_limit = velocity_limit
        self.effort_limit = effort_limit
        self.damping = damping
        self.friction = friction
        self.stiffness = stiffness
        self.spring_reference = spring_reference
        self.armature = armature
        self._structure = _Structure(
            body_names, body_parent, body_node, body_fixed, joint_kind, joint_label,
            joint_name, q_start, v_start, node_parent, node_body, nq, nv, traversal,
        )

    def __check_init__(self):
        nb = len(self.body_names)
        for field, shape in (
            ("inertia", (nb, 10)),
            ("Xtree_E", (nb, 3, 3)),
            ("Xtree_r", (nb, 3)),
            ("axes", (self.nv, 6)),
            ("gravity", (3,)),
            ("q_lower", (self.nq,)),
            ("q_upper", (self.nq,)),
            ("velocity_limit", (self.nv,)),
            ("effort_limit", (self.nv,)),
            ("damping", (self.nv,)),
            ("friction", (self.nv,)),
            ("stiffness", (self.nv,)),
            ("spring_reference", (self.nq,)),
            ("armature", (self.nv,)),
        ):
            got = getattr(self, field).shape
            # vmap over models adds leading axes; only the trailing shape is structural.
            if tuple(got[len(got) - len(shape) :]) != shape:
                raise ValueError(f"Model.{field} has shape {got}, expected (..., {shape})")
        if len(self.node_parent) != self.nv + 1:
            raise ValueError("Model: node table does not match nv")
        if any(p >= i for i, p in enumerate(self.body_parent) if i > 0):
            raise ValueError("Model: bodies are not in topological order")
        if self.traversal not in ("auto", "level", "body", "dense", "kernel"):
            raise ValueError(f"traversal {self.traversal!r}, expected 'auto', 'level', "
                             "'body', 'dense' or 'kernel'")

    # ---- sizes and lookup ----
    @property
    def nbodies(self) -> int:
        """Number of bodies, world (row 0) and fixed-merged bodies included."""
        return len(self.body_names)

    @property
    def nnodes(self) -> int:
        """Number of one-DoF nodes, world included: ``nv + 1``."""
        return self.nv + 1

    @property
    def dtype(self):
        return self.inertia.dtype

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Names of the movable joints, in ``q``/``v`` order."""
        return tuple(
            self.joint_name[b] for b in range(1, self.nbodies) if self.joint_kind[b] != "fixed"
        )

    @property
    def movable_joint_bodies(self) -> tuple[int, ...]:
        """Child body id of each movable joint, in ``q``/``v`` order."""
        return tuple(b for b in range(1, self.nbodies) if self.joint_kind[b] != "fixed")

    def body_id(self, body: int | str) -> int:
        """Body id from a name or an id (fixed-merged bodies included)."""
        if isinstance(body, (int, np.integer)) and not isinstance(body, bool):
            if not 0 <= int(body) < self.nbodies:
                raise ValueError(f"body id {body} out of range [0, {self.nbodies})")
            return int(body)
        if isinstance(body, str):
            if body == "world":
                return 0
            try:
                return self.body_names.index(body)
            except ValueError:
                raise ValueError(
                    f"unknown body {body!r}; known bodies: {', '.join(self.body_names)}"
                ) from None
        raise TypeError(f"body must be a name or an int id, got {type(body).__name__}")

    def joint_id(self, name: str) -> int:
        """Index of a movable joint in `joint_names`."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ValueError(
                f"unknown joint {name!r}; movable joints: {', '.join(self.joint_names)}"
            ) from None

    def joint_nq(self, body: int) -> int:
        return _NQ.get(self.joint_kind[body], None) or self._joint_nv(body)

    def _joint_nv(self, body: int) -> int:
        return sum(1 for b in self.node_body if b == body)

    def q_index(self, joint: str | int) -> slice:
        """Slice of ``q`` belonging to a movable joint (by name or body)."""
        b = self._joint_body(joint)
        return slice(self.q_start[b], self.q_start[b] + self.joint_nq(b))

    def v_index(self, joint: str | int) -> slice:
        """Slice of ``v``/``qd``/``tau`` belonging to a movable joint (by name or body)."""
        b = self._joint_body(joint)
        return slice(self.v_start[b], self.v_start[b] + self._joint_nv(b))

    def _joint_body(self, joint: str | int) -> int:
        if isinstance(joint, str):
            if joint in self.joint_name:
                return self.joint_name.index(joint)
            if joint not in self.body_names:
                raise ValueError(
                    f"unknown joint {joint!r}; movable joints: {', '.join(self.joint_names)}"
                )
        return self.body_id(joint)

    def with_traversal(self, traversal: str) -> Model:
        """The same model recursing ``"level"`` by level, ``"body"`` by body,
        ``"level<k>"`` (levels cut into steps of at most ``k`` nodes), or ``"auto"``
        (default: the traversal `jaxrbd._core.backend.traversal` picks for the device the
        computation runs on: level by level for a single state and off the CPU, body by
        body for a batch on a CPU). ``"dense"`` runs one state's recursions as dense
        products over the tree (fewest XLA kernels); ``"kernel"`` runs one state's
        forward dynamics on the CPU as one compiled C++ kernel (`jaxrbd._core.ffi`: what
        it covers, and the C++ compiler it needs at first use), and the rest as
        ``"auto"``."""
        leaves = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name != "_structure"}
        return Model(**leaves, **(self._structure.parts() | {"traversal": traversal}))

    def astype(self, dtype) -> Model:
        """The same model with every leaf cast to ``dtype`` (e.g. ``jnp.float32``)."""
        return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), self)

    def __repr__(self) -> str:
        return self.summary()

    def summary(self) -> str:
        """The body tree as text: each body with its joint (kind, name, ``q``/``v``
        slices) and mass; fixed-merged bodies are marked ``fixed``.

        Example:
            >>> print(jaxrbd.models.triple_pendulum().summary().splitlines()[0])
            Model: 4 bodies (3 moving), nq=9, nv=9, moving mass 0.3 kg
        """
        mass = np.asarray(self.inertia)[..., 0]

        def m(b):
            return float(mass[..., b].ravel()[0])

        moving = sum(1 for b in range(1, self.nbodies) if not self.body_fixed[b])
        moving_mass = sum(m(b) for b in range(1, self.nbodies) if self.body_node[b] != 0)
        lines = [
            f"Model: {self.nbodies} bodies ({moving} moving), nq={self.nq}, nv={self.nv}, "
            f"moving mass {moving_mass:.6g} kg"
        ]
        world = m(0) + sum(m(b) for b in range(1, self.nbodies) if self.body_node[b] == 0)
        lines.append("world" + (f" (m={world:.4g} kg attached)" if world else ""))

        def joint(b):
            kind = self.joint_label[b]
            if kind == "fixed":
                return f"fixed {self.joint_name[b]!r}"
            nq, nv = self.joint_nq(b), self._joint_nv(b)
            qs = self.q_start[b]
            vs = self.v_start[b]
            qtxt = f"q[{qs}]" if nq == 1 else f"q[{qs}:{qs + nq}]"
            vtxt = f"v[{vs}]" if nv == 1 else f"v[{vs}:{vs + nv}]"
            return f"{kind} {self.joint_name[b]!r} {qtxt} {vtxt}"

        children: dict[int, list[int]] = {}
        for c in range(1, self.nbodies):
            children.setdefault(self.body_parent[c], []).append(c)
        stack = [(c, 1) for c in reversed(children.get(0, []))]
        while stack:
            b, depth = stack.pop()
            lines.append(f"{'  ' * depth}{self.body_names[b]}  <- {joint(b)}  m={m(b):.4g} kg")
            stack.extend((c, depth + 1) for c in reversed(children.get(b, [])))
        return "\n".join(lines)


_NQ = {"spherical": 4, "free": 7, "fixed": 0}


class CoupledModel(eqx.Module):
    """A `Model` whose *coupled* joints follow others: ``q_m = a q_j + b``.

    A coupled joint (URDF ``<mimic>``: gripper fingers, parallel linkages; a geared
    rotor) is a real joint of the tree with no coordinate of its own: its angle is
    ``multiplier * q_j + offset`` of its *driver* ``j``, its velocity
    ``multiplier * qd_j``, and its motion subspace adds ``multiplier * S_m`` to the
    driver's column (Pinocchio's ``JointModelMimic``). With ``A`` the ``(nv_full, nv)``
    map from the independent velocities to those of every joint, the dynamics are those
    of the full tree restricted to ``qd_full = A qd``: ``H = Aᵀ H_full A``,
    ``tau = Aᵀ tau_full``, Jacobians ``J_full A``. Every public function accepts a
    `CoupledModel` in place of a `Model`; forward dynamics takes the CRBA + Cholesky
    route (a coupling can span branches of the tree, where ABA's recursion does not
    apply).

    Leaves:
        base: the full tree as a plain `Model`, every joint with its own coordinate
            (what ``load_urdf(..., mimic="independent")`` gives).
        multiplier, offset: `(ncoupled,)` ``a`` and ``b`` of each coupled joint.

    ``q``/``v`` hold the independent joints in the base model's order, coupled joints
    left out; `joint_names` names them.

    Example:
        >>> b = jaxrbd.ModelBuilder()
        >>> rod = jaxrbd.Body(1.0, (0.0, 0.0, -0.5), np.eye(3) * 0.01)
        >>> _ = b.add_body("a", "world", jaxrbd.joints.revolute((0, 1, 0)), rod)
        >>> _ = b.add_body("b", "a", jaxrbd.joints.revolute((0, 1, 0)), rod,
        ...                jaxrbd.Transform(translation=(0, 0, -1.0)))
        >>> cm = jaxrbd.couple(b.build(), {"b": ("a", -1.0, 0.0)})
        >>> cm.nq, cm.joint_names
        (1, ('a',))
        >>> jaxrbd.mass_matrix(cm, jnp.array([0.3])).shape
        (1, 1)
    """

    base: Model
    multiplier: Float[Array, "ncoupled"]
    offset: Float[Array, "ncoupled"]
    # ---- structure (static) ----
    coupled_joints: tuple[str, ...] = eqx.field(static=True)  # base joint names
    driver_joints: tuple[str, ...] = eqx.field(static=True)  # their independent drivers
    independent_q: tuple[int, ...] = eqx.field(static=True)  # base q index per coordinate
    independent_v: tuple[int, ...] = eqx.field(static=True)
    coupled_q: tuple[int, ...] = eqx.field(static=True)  # base q index per coupled joint
    coupled_v: tuple[int, ...] = eqx.field(static=True)
    driver_q: tuple[int, ...] = eqx.field(static=True)  # reduced q index of each driver
    driver_v: tuple[int, ...] = eqx.field(static=True)

    @property
    def nq(self) -> int:
        return len(self.independent_q)

    @property
    def nv(self) -> int:
        return len(self.independent_v)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Names of the independent movable joints, in ``q``/``v`` order."""
        coupled = set(self.coupled_joints)
        return tuple(n for n in self.base.joint_names if n not in coupled)

    # what does not depend on the coordinates is the base model's
    body_names = property(lambda self: self.base.body_names)
    body_parent = property(lambda self: self.base.body_parent)
    body_fixed = property(lambda self: self.base.body_fixed)
    joint_name = property(lambda self: self.base.joint_name)  # per body, coupled included
    nbodies = property(lambda self: self.base.nbodies)
    gravity = property(lambda self: self.base.gravity)
    inertia = property(lambda self: self.base.inertia)
    dtype = property(lambda self: self.base.dtype)
    traversal = property(lambda self: self.base.traversal)

    def body_id(self, body: int | str) -> int:
        return self.base.body_id(body)

    def joint_id(self, name: str) -> int:
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ValueError(
                f"unknown independent joint {name!r}; independent joints: "
                f"{', '.join(self.joint_names)} (coupled: {', '.join(self.coupled_joints)})"
            ) from None

    def q_index(self, joint: str | int) -> slice:
        """Slice of ``q`` belonging to an independent joint."""
        s = self.base.q_index(joint)
        if s.start in self.coupled_q:
            raise ValueError(f"joint {joint!r} is coupled: it has no coordinate of its own")
        k = self.independent_q.index(s.start)
        return slice(k, k + s.stop - s.start)

    def v_index(self, joint: str | int) -> slice:
        """Slice of ``v`` belonging to an independent joint."""
        s = self.base.v_index(joint)
        if s.start in self.coupled_v:
            raise ValueError(f"joint {joint!r} is coupled: it has no coordinate of its own")
        k = self.independent_v.index(s.start)
        return slice(k, k + s.stop - s.start)

    def astype(self, dtype) -> CoupledModel:
        return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), self)

    def with_traversal(self, traversal: str) -> CoupledModel:
        """The same coupled model with its base model's traversal set
        (`Model.with_traversal`)."""
        return dataclasses.replace(self, base=self.base.with_traversal(traversal))

    def __repr__(self) -> str:
        return self.summary()

    def summary(self) -> str:
        """The base model's tree with the independent coordinates' indices, and each
        coupled joint's law ``q_m = a q_j + b`` in place of its indices."""
        a, b = np.asarray(self.multiplier), np.asarray(self.offset)
        law = {
            m: f"= {float(a[k]):.6g} * {j!r} {'+' if b[k] >= 0 else '-'} {abs(float(b[k])):.6g}"
            for k, (m, j) in enumerate(zip(self.coupled_joints, self.driver_joints))
        }
        lines = self.base.summary().splitlines()
        lines[0] = lines[0].replace(
            f"nq={self.base.nq}, nv={self.base.nv}",
            f"nq={self.nq}, nv={self.nv}, {len(self.coupled_joints)} coupled joints",
        )
        slots = re.compile(r"'([^']*)' q\[[0-9:]+\] v\[[0-9:]+\]")

        def repl(match):
            name = match.group(1)
            if name in law:
                return f"{name!r} coupled {law[name]}"
            qs, vs = self.q_index(name), self.v_index(name)
            qt = f"q[{qs.start}]" if qs.stop - qs.start == 1 else f"q[{qs.start}:{qs.stop}]"
            vt = f"v[{vs.start}]" if vs.stop - vs.start == 1 else f"v[{vs.start}:{vs.stop}]"
            return f"{name!r} {qt} {vt}"

        return "\n".join([lines[0]] + [slots.sub(repl, line) for line in lines[1:]])


def check_model(model, name: str = "model") -> None:
    """A ``TypeError`` naming ``name`` unless ``model`` is a `Model` or `CoupledModel`
    (trace-time, an ``isinstance``): the first thing the public functions do."""
    if isinstance(model, (Model, CoupledModel)):
        return
    hint = ""
    if type(model).__name__ == "ConstraintSet":
        hint = " (the model comes first, the ConstraintSet later)"
    raise TypeError(
        f"{name} must be a jaxrbd Model or CoupledModel (from load_urdf, load_mjcf or "
        f"ModelBuilder.build), got {type(model).__name__}{hint}"
    )


def is_coupled(model) -> bool:
    """Whether ``model`` is a `CoupledModel`. The public functions do not ask: each is made
    once in `jaxrbd._api` from its plain door and its coupled variant (`jaxrbd._coupled`).

    Raises:
        TypeError: ``model`` is neither a `Model` nor a `CoupledModel` (`check_model`).
    """
    check_model(model)
    return isinstance(model, CoupledModel)
