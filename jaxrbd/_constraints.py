"""Constraint sets and their kinematics: Jacobians ``G``, biases ``gamma``, residuals.

Every constraint relates a frame ``A`` on one body to a frame ``B`` on another body or
on the world (Felis 2017, §7.2, RBDL's constraint sets; Featherstone & Orin 2008, §3.4 for loops). Its rows
are components of the relative velocity of the two frames,

    row_j = t_jᵀ (V_A - V_B),   V_X = [ω_X; v_X(o_X)]  (world axes),

with ``o_X`` the origin of frame ``X`` and ``t_j`` a spatial axis ``[angular; linear]``
given either in world axes or in the axes of frame ``A`` (rotating with it). A contact
or a weld is a constraint whose frame ``B`` is fixed in the world: its *target*.

The position-level residual of a row is ``φ_j = t_jᵀ [log(R_A R_Bᵀ); o_A - o_B]``
(axes as above), so ``d/dt φ = G q̇`` wherever the rotation error is zero (always for
purely translational rows in world axes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._body import Transform
from ._configuration import integrate
from ._core import algebra as al
from ._core.checks import check_state
from ._core.jcalc import joint_velocity_terms
from ._core.native_vmap import native_vmap
from ._core.nodes import Xup_and_S, sched
from ._core.passes import velocities_accelerations
from ._core.rotation import log_quat
from ._core.topology import topology
from ._kinematics import (
    body_frames,
    node_jacobian,
    node_poses,
    support,
    world_acceleration_at,
    world_motion_at,
)

__all__ = [
    "ConstraintSet",
    "constraint_bias",
    "constraint_jacobian",
    "constraint_residual",
    "constraint_velocity_residual",
]

_AXES_PRESETS = {
    "pose": np.eye(6),
    "position": np.eye(6)[3:],
    "orientation": np.eye(6)[:3],
}


# ---------------------------------------------------------------- host-side parsing


def _body_key(body, what):
    if isinstance(body, (str, int, np.integer)) and not isinstance(body, bool):
        return body if isinstance(body, str) else int(body)
    raise TypeError(f"{what}: body must be a name or an int id, got {body!r}")


def _vec3(x, what):
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be 3 numbers, got {x!r}") from None
    if a.shape != (3,):
        raise ValueError(f"{what} has shape {a.shape}, expected (3,)")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what} must be finite, got {a.tolist()}")
    return a


def _frame(x, what):
    """A point ``(3,)`` (identity rotation) or a `Transform` -> ``(R (3,3), p (3,))``."""
    if x is None:
        return np.eye(3), np.zeros(3)
    if isinstance(x, Transform):
        return x.arrays(what)
    return np.eye(3), _vec3(x, what)


def _baumgarte(baumgarte, what):
    if baumgarte is None:
        return 0.0, 0.0, False
    try:
        alpha, beta = (float(g) for g in baumgarte)
    except (TypeError, ValueError):
        raise TypeError(
            f"{what}: baumgarte must be None or a pair (alpha, beta), got {baumgarte!r}"
        ) from None
    if not (np.isfinite(alpha) and np.isfinite(beta)) or alpha < 0 or beta < 0:
        raise ValueError(f"{what}: baumgarte gains must be finite and >= 0, got ({alpha}, {beta})")
    return alpha, beta, True


def _items(items, what, lengths):
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence) or len(items) == 0:
        raise ValueError(f"{what}: expected a non-empty list of tuples, got {items!r}")
    for k, it in enumerate(items):
        if not isinstance(it, (tuple, list)) or len(it) not in lengths:
            raise ValueError(
                f"{what}: entry {k} is {it!r}, expected a tuple of {' or '.join(map(str, lengths))} items"
            )
    return items


@dataclasses.dataclass(frozen=True)
class _Custom:
    """A user constraint (static): ``function(model, q) -> (size,)`` and optional
    ``jacobian(model, q) -> (size, nv)`` and ``bias(model, q, qd) -> (size,)``."""

    function: Callable
    size: int
    jacobian: Callable | None = None
    bias: Callable | None = None
    name: str = "custom"


# ---------------------------------------------------------------- the set


class ConstraintSet(eqx.Module):
    """Bilateral constraints on a model: points, 3-D contacts, welds, loop closures and
    custom position-level constraints.

    Build one with the constructors below (host-side, no model needed: bodies are names
    or ids, resolved when a function uses the set) and combine them with ``+`` or
    `ConstraintSet.concat`; rows keep the order given. Sizes, bodies and kinds are
    static; points, rotations, axes, targets and Baumgarte gains are array leaves, so
    `jax.grad` and `jax.vmap` work over them.

    Row ``j`` of constraint ``k`` is ``t_jᵀ (V_A - V_B)`` (module docstring): the
    force ``λ_j`` of `forward_dynamics_contacts` acts along ``t_j`` on frame ``A``
    (torque then force, at ``o_A``), and its opposite on frame ``B``.

    Leaves:
        rotation: `(2 nc, 3, 3)` frame rotations in their body's coordinates (frame ``A``
            of constraint ``k`` is row ``2k``, frame ``B`` row ``2k + 1``; a world frame
            ``B`` is the target pose in world coordinates).
        point: `(2 nc, 3)` frame origins in body (or world) coordinates [m].
        axes: `(m, 6)` row axes ``[angular; linear]``.
        alpha, beta: `(m,)` Baumgarte gains [1/s].

    Example:
        >>> cs = jaxrbd.ConstraintSet.points([("body_3", [0.0, 0.0, -1.0], [0.0, 0.0, 1.0])])
        >>> cs = cs + jaxrbd.ConstraintSet.contacts_3d([("body_2", [0.0, 0.0, -1.0])])
        >>> cs.size, cs.kinds
        (4, ('point', 'contact_3d'))
    """

    rotation: Float[Array, "nframes 3 3"]
    point: Float[Array, "nframes 3"]
    axes: Float[Array, "m 6"]
    alpha: Float[Array, " m"]
    beta: Float[Array, " m"]
    bodies: tuple = eqx.field(static=True)  # per frame: name or id
    kinds: tuple[str, ...] = eqx.field(static=True)  # per constraint
    row_constraint: tuple[int, ...] = eqx.field(static=True)  # per row
    row_local: tuple[bool, ...] = eqx.field(static=True)  # per row: axes in frame A
    stabilised: bool = eqx.field(static=True)
    custom_fns: tuple = eqx.field(static=True, default=())  # per constraint: _Custom or None

    def __check_init__(self):
        nf, m = len(self.bodies), len(self.row_constraint)
        if nf != 2 * len(self.kinds) or len(self.row_local) != m:
            raise ValueError("ConstraintSet: inconsistent static structure")
        if self.custom_fns and len(self.custom_fns) != len(self.kinds):
            raise ValueError("ConstraintSet: inconsistent custom constraint table")
        if self.rotation.shape[-3:] != (nf, 3, 3) or self.point.shape[-2:] != (nf, 3):
            raise ValueError(
                f"ConstraintSet: rotation {self.rotation.shape} / point {self.point.shape} "
                f"do not match {nf} frames"
            )
        if (
            self.axes.shape[-2:] != (m, 6)
            or self.alpha.shape[-1:] != (m,)
            or (self.beta.shape[-1:] != (m,))
        ):
            raise ValueError(f"ConstraintSet: axes/alpha/beta do not match {m} rows")

    # ---- sizes
    @property
    def size(self) -> int:
        """Number of rows ``m`` (scalar constraints)."""
        return len(self.row_constraint)

    def __len__(self) -> int:
        return self.size

    def _fns(self) -> tuple:
        """Per constraint: its `_Custom` entry or None."""
        return self.custom_fns or (None,) * len(self.kinds)

    @property
    def num_constraints(self) -> int:
        """Number of constraints (points, contacts, welds, loops) in the set."""
        return len(self.kinds)

    # ---- construction
    @classmethod
    def _build(cls, kinds, frames, rows, stabilised, custom_fns=()):
        """``frames``: list of (body, R, p); ``rows``: list of (constraint, axis, local, alpha, beta)."""
        dt = jnp.zeros(()).dtype  # JAX's default float dtype
        arr = lambda x: jnp.asarray(np.asarray(x, np.float64), dt)
        return cls(
            rotation=arr([f[1] for f in frames]),
            point=arr([f[2] for f in frames]),
            axes=arr([r[1] for r in rows]),
            alpha=arr([r[3] for r in rows]),
            beta=arr([r[4] for r in rows]),
            bodies=tuple(f[0] for f in frames),
            kinds=tuple(kinds),
            row_constraint=tuple(int(r[0]) for r in rows),
            row_local=tuple(bool(r[2]) for r in rows),
            stabilised=bool(stabilised),
            custom_fns=tuple(custom_fns),
        )

    @classmethod
    def points(cls, items, baumgarte=None) -> ConstraintSet:
        """1-D point constraints (RBDL's ``AddContactConstraint``): one row per entry.

        Args:
            items: ``[(body, point, normal), ...]`` or ``(body, point, normal, target)``:
                ``point`` in body coordinates [m], ``normal`` in world coordinates
                (normalised here), ``target`` a world point (default the origin): the
                residual is ``normalᵀ (p - target)``, so a floor at height 0 needs no
                target. Row: ``normalᵀ ṗ``.
            baumgarte: ``None`` or ``(alpha, beta)`` [1/s].

        Example:
            >>> jaxrbd.ConstraintSet.points([(3, [0.0, 0.0, -1.0], [0.0, 0.0, 1.0])]).size
            1
        """
        what = "ConstraintSet.points"
        alpha, beta, stab = _baumgarte(baumgarte, what)
        frames, rows = [], []
        for k, it in enumerate(_items(items, what, (3, 4))):
            body = _body_key(it[0], f"{what} entry {k}")
            p = _vec3(it[1], f"{what} entry {k}: point")
            n = _vec3(it[2], f"{what} entry {k}: normal")
            nn = np.linalg.norm(n)
            if nn < 1e-12:
                raise ValueError(f"{what} entry {k}: normal is zero")
            target = _vec3(it[3], f"{what} entry {k}: target") if len(it) == 4 else np.zeros(3)
            frames += [(body, np.eye(3), p), (0, np.eye(3), target)]
            rows.append((k, np.concatenate([np.zeros(3), n / nn]), False, alpha, beta))
        return cls._build(["point"] * len(items), frames, rows, stab)

    @classmethod
    def contacts_3d(cls, items, baumgarte=None) -> ConstraintSet:
        """3-D point contacts: three rows per entry, the point velocity along world x, y, z.

        Args:
            items: ``[(body, point), ...]`` or ``(body, point, target)``: ``point`` in
                body coordinates [m]; ``target`` the world point it is held at (default
                the origin; see `ConstraintSet.anchored`).
            baumgarte: ``None`` or ``(alpha, beta)`` [1/s].

        The multipliers of a contact are its force on the robot in world axes [N].

        Example:
            >>> jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])]).size
            3
        """
        what = "ConstraintSet.contacts_3d"
        alpha, beta, stab = _baumgarte(baumgarte, what)
        frames, rows = [], []
        for k, it in enumerate(_items(items, what, (2, 3))):
            body = _body_key(it[0], f"{what} entry {k}")
            p = _vec3(it[1], f"{what} entry {k}: point")
            target = _vec3(it[2], f"{what} entry {k}: target") if len(it) == 3 else np.zeros(3)
            frames += [(body, np.eye(3), p), (0, np.eye(3), target)]
            rows += [(k, np.eye(6)[3 + a], False, alpha, beta) for a in range(3)]
        return cls._build(["contact_3d"] * len(items), frames, rows, stab)

    @classmethod
    def welds(cls, items, baumgarte=None) -> ConstraintSet:
        """6-D body constraints: six rows per entry, ``[ω; v_point]`` in world axes.

        Args:
            items: ``[(body, frame), ...]`` or ``(body, frame, target)``: ``frame`` a
                point `(3,)` or a `Transform` in body coordinates, ``target`` a point or
                `Transform` in world coordinates (default the world frame).
            baumgarte: ``None`` or ``(alpha, beta)`` [1/s].

        The multipliers are ``[torque; force]`` on the body at the frame origin, world axes.

        Example:
            >>> jaxrbd.ConstraintSet.welds([("body_1", jaxrbd.Transform())]).size
            6
        """
        what = "ConstraintSet.welds"
        alpha, beta, stab = _baumgarte(baumgarte, what)
        frames, rows = [], []
        for k, it in enumerate(_items(items, what, (2, 3))):
            body = _body_key(it[0], f"{what} entry {k}")
            Ra, pa = _frame(it[1], f"{what} entry {k}: frame")
            Rb, pb = _frame(it[2] if len(it) == 3 else None, f"{what} entry {k}: target")
            frames += [(body, Ra, pa), (0, Rb, pb)]
            rows += [(k, np.eye(6)[a], False, alpha, beta) for a in range(6)]
        return cls._build(["weld"] * len(items), frames, rows, stab)

    @classmethod
    def loops(cls, items, axes="pose", frame="a", baumgarte=None) -> ConstraintSet:
        """Loop closures between a frame on body A and a frame on body B (RBDL's
        ``AddLoopConstraint``; Featherstone & Orin 2008, §3.4).

        Args:
            items: ``[(body_a, frame_a, body_b, frame_b), ...]``; each frame a point
                `(3,)` or a `Transform` in its body's coordinates.
            axes: which components of the relative spatial velocity ``V_A - V_B`` are
                constrained: ``"pose"`` (all six, angular first), ``"position"``,
                ``"orientation"``, or an `(n, 6)` array of axes ``[angular; linear]``
                (one row each, e.g. ``[[0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 1, 0]]`` for a
                planar revolute loop joint).
            frame: ``"a"``: the axes are fixed in frame A (RBDL); ``"world"``: world axes.
            baumgarte: ``None`` or ``(alpha, beta)`` [1/s].

        Example:
            >>> cs = jaxrbd.ConstraintSet.loops([("body_1", [0.0, 0.0, -1.0], "body_3", [0.0, 0.0, 0.0])],
            ...                                 axes="position")
            >>> cs.size
            3
        """
        what = "ConstraintSet.loops"
        alpha, beta, stab = _baumgarte(baumgarte, what)
        if frame not in ("a", "world"):
            raise ValueError(f"{what}: frame must be 'a' or 'world', got {frame!r}")
        if isinstance(axes, str):
            if axes not in _AXES_PRESETS:
                raise ValueError(
                    f"{what}: axes must be one of {sorted(_AXES_PRESETS)} or an (n, 6) array, got {axes!r}"
                )
            T = _AXES_PRESETS[axes]
        else:
            try:
                T = np.asarray(axes, dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError(f"{what}: axes must be a preset name or an (n, 6) array") from None
            if T.ndim == 1:
                T = T[None]
            if T.ndim != 2 or T.shape[1] != 6 or T.shape[0] == 0:
                raise ValueError(f"{what}: axes has shape {T.shape}, expected (n, 6) with n >= 1")
            if not np.all(np.isfinite(T)) or np.any(np.linalg.norm(T, axis=1) < 1e-12):
                raise ValueError(f"{what}: axes must be finite and non-zero")
        frames, rows = [], []
        for k, it in enumerate(_items(items, what, (4,))):
            ba = _body_key(it[0], f"{what} entry {k}")
            bb = _body_key(it[2], f"{what} entry {k}")
            Ra, pa = _frame(it[1], f"{what} entry {k}: frame_a")
            Rb, pb = _frame(it[3], f"{what} entry {k}: frame_b")
            frames += [(ba, Ra, pa), (bb, Rb, pb)]
            rows += [(k, t, frame == "a", alpha, beta) for t in T]
        return cls._build(["loop"] * len(items), frames, rows, stab)

    @classmethod
    def custom(
        cls, function, size, jacobian=None, bias=None, baumgarte=None, name="custom"
    ) -> ConstraintSet:
        """A user-defined position-level constraint ``φ(q) = 0`` (RBDL's
        ``AddCustomConstraint``), usable wherever a `ConstraintSet` is.

        ``function(model, q)`` returns the residual ``φ`` `(size,)` (a pure JAX
        function of the configuration). Its rows are ``G q̇ = d/dt φ``: ``G`` is the
        derivative of ``φ`` along `integrate` (so for free and spherical joints it acts
        on body velocities), by forward-mode AD unless ``jacobian`` is given; the bias
        ``γ = -Ġ q̇`` is the derivative of ``G q̇`` along the motion, by AD of ``G``,
        unless ``bias`` is given. The multipliers are generalized forces along the rows
        (``Gᵀ λ`` enters the equations of motion).

        Args:
            function: ``(model, q) -> (size,)``, the residual [any unit].
            size: number of rows (a positive int).
            jacobian: optional ``(model, q) -> (size, nv)``, ``G`` (the rows' rates are
                ``G q̇``).
            bias: optional ``(model, q, qd) -> (size,)``, ``γ = -Ġ q̇`` without
                Baumgarte terms.
            baumgarte: ``None`` or ``(alpha, beta)`` [1/s], applied to ``φ``.
            name: a label for printing.

        Example:
            >>> # keep the tip of body_3 at height -2.5 (one row)
            >>> end = jnp.array([0.0, 0.0, -1.0])
            >>> tip = lambda m, q: jaxrbd.point_position(m, q, "body_3", end)[2:] + 2.5
            >>> cs = jaxrbd.ConstraintSet.custom(tip, 1)
            >>> G = jaxrbd.constraint_jacobian(model, q, cs)
            >>> Gp = jaxrbd.point_jacobian(model, q, "body_3", jnp.array([0.0, 0.0, -1.0]))[2:]
            >>> bool(jnp.allclose(G, Gp))
            True
        """
        what = "ConstraintSet.custom"
        if not callable(function):
            raise TypeError(f"{what}: function must be callable (model, q) -> (size,), got {function!r}")
        for label, f in (("jacobian", jacobian), ("bias", bias)):
            if f is not None and not callable(f):
                raise TypeError(f"{what}: {label} must be callable or None, got {f!r}")
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"{what}: size must be a positive int, got {size!r}")
        alpha, beta, stab = _baumgarte(baumgarte, what)
        frames = [(0, np.eye(3), np.zeros(3)), (0, np.eye(3), np.zeros(3))]
        rows = [(0, np.zeros(6), False, alpha, beta) for _ in range(int(size))]
        entry = _Custom(function, int(size), jacobian, bias, str(name))
        return cls._build(["custom"], frames, rows, stab, (entry,))

    @classmethod
    def concat(cls, sets: Sequence[ConstraintSet]) -> ConstraintSet:
        """Concatenate sets; rows (and multipliers) in the order given.

        Example:
            >>> a = jaxrbd.ConstraintSet.contacts_3d([(3, [0.0, 0.0, -1.0])])
            >>> jaxrbd.ConstraintSet.concat([a, a]).size
            6
        """
        sets = list(sets)
        if not sets or not all(isinstance(s, ConstraintSet) for s in sets):
            raise TypeError("ConstraintSet.concat: expected a non-empty list of ConstraintSets")
        offs = np.cumsum([0] + [s.num_constraints for s in sets])
        cat = lambda name: jnp.concatenate([getattr(s, name) for s in sets], axis=0)
        return ConstraintSet(
            rotation=cat("rotation"),
            point=cat("point"),
            axes=cat("axes"),
            alpha=cat("alpha"),
            beta=cat("beta"),
            bodies=sum((s.bodies for s in sets), ()),
            kinds=sum((s.kinds for s in sets), ()),
            row_constraint=sum(
                (tuple(int(o) + c for c in s.row_constraint) for o, s in zip(offs, sets)), ()
            ),
            row_local=sum((s.row_local for s in sets), ()),
            stabilised=any(s.stabilised for s in sets),
            custom_fns=sum((s._fns() for s in sets), ())
            if any(s.custom_fns for s in sets)
            else (),
        )

    def __add__(self, other):
        if not isinstance(other, ConstraintSet):
            return NotImplemented
        return ConstraintSet.concat([self, other])

    def anchored(self, model, q) -> ConstraintSet:
        """The same set with every world-fixed frame ``B`` (contact, point and weld
        targets) moved onto the current pose of its frame ``A``, so that the residual of
        those constraints is zero at ``q`` (loops between two bodies are unchanged).

        Args:
            model: a `Model`.
            q: configuration `(nq,)`.

        Example:
            >>> cs = jaxrbd.ConstraintSet.contacts_3d([(3, [0.0, 0.0, -1.0])]).anchored(model, q)
            >>> bool(jnp.allclose(jaxrbd.constraint_residual(model, q, cs), 0.0))
            True
        """
        (q,) = check_state(model, q=q)
        bodies = constraint_bodies(model, self)
        R, o = frame_poses(model, q, self, bodies)
        world_b = np.flatnonzero(bodies[1::2] == 0)
        rot = self.rotation.at[2 * world_b + 1].set(R[0::2][world_b].astype(self.rotation.dtype))
        pt = self.point.at[2 * world_b + 1].set(o[0::2][world_b].astype(self.point.dtype))
        return eqx.tree_at(lambda s: (s.rotation, s.point), self, (rot, pt))


# ---------------------------------------------------------------- kinematics


def constraint_bodies(model, cs) -> np.ndarray:
    if not isinstance(cs, ConstraintSet):
        raise TypeError(f"constraints must be a ConstraintSet, got {type(cs).__name__}")
    return np.array([model.body_id(b) for b in cs.bodies], dtype=np.int64)


def frame_poses(model, q, cs, bodies):
    """World rotation ``(2nc, 3, 3)`` and origin ``(2nc, 3)`` of every constraint frame."""
    E0, r0 = body_frames(model, bodies, *node_poses(model, q))
    p = cs.point.astype(model.dtype)[..., None]
    o = (r0 + al.mtv(E0, p))[..., 0]
    R = jnp.einsum("kji,kjl->kil", E0[..., 0], cs.rotation.astype(model.dtype))
    return R, o


def _log_rotation(R):
    """Rotation vector of ``R`` ``(..., 3, 3)`` via a branch-free Shepperd quaternion."""
    R00, R11, R22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    tr = R00 + R11 + R22
    d = jnp.stack([1 + tr, 1 + 2 * R00 - tr, 1 + 2 * R11 - tr, 1 + 2 * R22 - tr], axis=-1)
    # the largest of the four is >= 1; clamping keeps unselected branches finite
    s = 2.0 * jnp.sqrt(jnp.maximum(d, 0.25))  # 4 * (selected component)
    a21, a02, a10 = (
        R[..., 2, 1] - R[..., 1, 2],
        R[..., 0, 2] - R[..., 2, 0],
        R[..., 1, 0] - R[..., 0, 1],
    )
    s01, s02, s12 = (
        R[..., 0, 1] + R[..., 1, 0],
        R[..., 0, 2] + R[..., 2, 0],
        R[..., 1, 2] + R[..., 2, 1],
    )
    cand = jnp.stack(
        [
            jnp.stack([s[..., 0] / 4, a21 / s[..., 0], a02 / s[..., 0], a10 / s[..., 0]], -1),
            jnp.stack([a21 / s[..., 1], s[..., 1] / 4, s01 / s[..., 1], s02 / s[..., 1]], -1),
            jnp.stack([a02 / s[..., 2], s01 / s[..., 2], s[..., 2] / 4, s12 / s[..., 2]], -1),
            jnp.stack([a10 / s[..., 3], s02 / s[..., 3], s12 / s[..., 3], s[..., 3] / 4], -1),
        ],
        axis=-2,
    )
    pick = jax.nn.one_hot(jnp.argmax(d, axis=-1), 4, dtype=R.dtype)
    quat = jnp.sum(cand * pick[..., None], axis=-2)
    return log_quat(quat[..., None])[..., 0]


def _row_axes(cs, R, dtype):
    """Row axes in world coordinates ``(m, 6)`` (frame-A axes rotated by ``R_A``)."""
    con = np.asarray(cs.row_constraint, dtype=np.int64)
    local = np.asarray(cs.row_local, dtype=bool)
    T = cs.axes.astype(dtype)
    if not local.any():
        return T, con, local
    RA = R[2 * con]  # (m, 3, 3)
    Tw = jnp.concatenate(
        [jnp.einsum("mij,mj->mi", RA, T[:, :3]), jnp.einsum("mij,mj->mi", RA, T[:, 3:])], axis=-1
    )
    return jnp.where(local[:, None], Tw, T), con, local


def _node_terms_batched(model, q, qd):
    """One forward pass (batch-trailing): node poses ``X0``, velocities, bias
    accelerations (``q̈ = 0``, no gravity) and world-frame motion subspaces ``S0``."""
    B = q.shape[-1]
    E, r, S = Xup_and_S(model, q)
    vJ, vJc, cJ = joint_velocity_terms(model, q, qd, S)
    a_world = jnp.zeros((6, B), q.dtype)
    v, a, (E0, r0) = velocities_accelerations(
        sched(model, B), E, r, vJ, vJc, cJ, jnp.zeros_like(S), a_world, with_X0=True
    )
    return E0, r0, v, a, al.Xinv_motion(E0[1:], r0[1:], S[1:])


_node_terms = native_vmap(_node_terms_batched)


def _frame_jacobians(model, bodies, E0n, r0n, S0, P_body):
    """World-aligned Jacobians ``[ω; v_P]`` ``(K, 6, nv)`` of body points ``P_body``."""
    E0, r0 = body_frames(model, bodies, E0n, r0n)
    node = topology(model).body_node[bodies]
    mask = jnp.asarray(support(model)[node], S0.dtype)  # (K, nv), static
    J0 = S0[None] * mask[:, :, None]  # (K, nv, 6): columns at the world origin
    P = (r0 + al.mtv(E0, P_body[..., None]))[..., 0]  # (K, 3)
    w = J0[..., :3]
    J = jnp.concatenate([w, J0[..., 3:] + jnp.cross(w, P[:, None, :])], axis=-1)
    return jnp.swapaxes(J, -1, -2)


# ---------------------------------------------------------------- custom rows


def _custom_blocks(cs):
    """Static ``[(rows, entry)]`` of the custom constraints of ``cs``."""
    con = np.asarray(cs.row_constraint, dtype=np.int64)
    return [(np.flatnonzero(con == k), e) for k, e in enumerate(cs._fns()) if e is not None]


def _user_array(x, shape, e, what, dtype):
    x = jnp.asarray(x)
    if x.shape != shape:
        raise ValueError(
            f"ConstraintSet.custom {e.name!r}: {what} returned shape {x.shape}, expected {shape}"
        )
    return x.astype(dtype)


def _custom_phi(model, q, e):
    return _user_array(e.function(model, q), (e.size,), e, "function", model.dtype)


def _custom_G(model, q, e):
    """``G`` `(size, nv)`: supplied, or the derivative of ``φ`` along `integrate`."""
    if e.jacobian is not None:
        return _user_array(e.jacobian(model, q), (e.size, model.nv), e, "jacobian", model.dtype)
    v0 = jnp.zeros(model.nv, model.dtype)
    return jax.jacfwd(lambda v: _custom_phi(model, integrate(model, q, v), e))(v0)


def _custom_rates(model, q, qd, e):
    """``G``, ``G q̇`` and ``-Ġ q̇`` (supplied, or by differentiating ``G`` along the motion:
    ``q(s) = integrate(q, s q̇)`` agrees with the motion to first order)."""
    if e.bias is not None:
        G = _custom_G(model, q, e)
        gamma = _user_array(e.bias(model, q, qd), (e.size,), e, "bias", model.dtype)
        return G, G @ qd, gamma
    s0 = jnp.zeros((), model.dtype)
    G, dG = jax.jvp(lambda s: _custom_G(model, integrate(model, q, s * qd), e), (s0,), (jnp.ones_like(s0),))
    return G, G @ qd, -(dG @ qd)


def _custom_fill(model, q, qd, cs, G=None, gamma=None, Gqd=None, with_residual_terms=True):
    """Overwrite the custom rows of ``G``, ``gamma`` and ``Gqd`` (whichever are given)."""
    for rows, e in _custom_blocks(cs):
        if qd is None:
            G = G.at[rows].set(_custom_G(model, q, e))
            continue
        Gc, Gqd_c, gam = _custom_rates(model, q, qd, e)
        if G is not None:
            G = G.at[rows].set(Gc)
        if Gqd is not None:
            Gqd = Gqd.at[rows].set(Gqd_c)
        if gamma is not None:
            if with_residual_terms and cs.stabilised:
                alpha = cs.alpha.astype(model.dtype)[rows]
                beta = cs.beta.astype(model.dtype)[rows]
                gam = gam - 2.0 * alpha * Gqd_c - beta * beta * _custom_phi(model, q, e)
            gamma = gamma.at[rows].set(gam)
    return G, gamma, Gqd


def residual(model, q, cs, bodies):
    """``φ(q)`` of every row: frame rows from the poses, custom rows from their functions."""
    R, o = frame_poses(model, q, cs, bodies)
    phi = _residual(cs, R, o)
    for rows, e in _custom_blocks(cs):
        phi = phi.at[rows].set(_custom_phi(model, q, e))
    return phi


def _jacobian_from(cs, T, J):
    dJ = J[0::2] - J[1::2]
    return jnp.einsum("mi,min->mn", T, dJ[np.asarray(cs.row_constraint, dtype=np.int64)])


def jacobian_kernel(model, q, cs, bodies, R):
    E0n, r0n, S0 = node_jacobian(model, q)
    J = _frame_jacobians(model, bodies, E0n, r0n, S0, cs.point.astype(model.dtype))
    G = _jacobian_from(cs, _row_axes(cs, R, model.dtype)[0], J)
    return _custom_fill(model, q, None, cs, G=G)[0]


def terms(model, q, qd, cs, bodies):
    """``(G, gamma)`` from a single kinematic pass (for the dynamics solvers)."""
    E0n, r0n, v, a, S0 = _node_terms(model, q, qd)
    R, o, dV, dA, wA = _velocity_terms(model, cs, bodies, E0n, r0n, v, a)
    gamma, _ = _bias_from(model, cs, R, o, dV, dA, wA, True)
    J = _frame_jacobians(model, bodies, E0n, r0n, S0, cs.point.astype(model.dtype))
    G = _jacobian_from(cs, _row_axes(cs, R, model.dtype)[0], J)
    G, gamma, _ = _custom_fill(model, q, qd, cs, G=G, gamma=gamma)
    return G, gamma


def _velocity_terms(model, cs, bodies, E0n, r0n, vn, an):
    """World rotations and origins of the frames, relative velocities ``ΔV`` and bias
    accelerations ``ΔA = (J̇ q̇)_A - (J̇ q̇)_B`` ``(nc, 6)``, frame-A angular velocities."""
    E0, r0, v, a = body_frames(model, bodies, E0n, r0n, vn, an)
    p = cs.point.astype(model.dtype)[..., None]
    o = r0 + al.mtv(E0, p)
    V = world_motion_at(E0, r0, v, o)[..., 0]
    A = world_acceleration_at(E0, r0, v, a, p)[..., 0]
    R = jnp.einsum("kji,kjl->kil", E0[..., 0], cs.rotation.astype(model.dtype))
    return R, o[..., 0], V[0::2] - V[1::2], A[0::2] - A[1::2], V[0::2, :3]


def _residual(cs, R, o):
    Rrel = jnp.einsum("kij,klj->kil", R[0::2], R[1::2])  # R_A R_Bᵀ
    e = jnp.concatenate([_log_rotation(Rrel), o[0::2] - o[1::2]], axis=-1)  # (nc, 6)
    T, con, _ = _row_axes(cs, R, o.dtype)
    return jnp.sum(T * e[con], axis=-1)


def _bias_from(model, cs, R, o, dV, dA, wA, with_residual_terms):
    """``gamma = -Ġ q̇ - 2 alpha G q̇ - beta² φ`` and ``G q̇``."""
    T, con, local = _row_axes(cs, R, model.dtype)
    if local.any():
        # d/dt (R_Aᵀ x) = R_Aᵀ (ẋ - ω_A × x), blockwise on [angular; linear]
        corr = jnp.concatenate([jnp.cross(wA, dV[:, :3]), jnp.cross(wA, dV[:, 3:])], axis=-1)
        dA_rows = dA[con] - jnp.where(local[:, None], corr[con], 0.0)
    else:
        dA_rows = dA[con]
    Gqd = jnp.sum(T * dV[con], axis=-1)
    gamma = -jnp.sum(T * dA_rows, axis=-1)
    if with_residual_terms and cs.stabilised:
        alpha = cs.alpha.astype(model.dtype)
        beta = cs.beta.astype(model.dtype)
        gamma = gamma - 2.0 * alpha * Gqd - beta * beta * _residual(cs, R, o)
    return gamma, Gqd


def _bias(model, q, qd, cs, bodies, with_residual_terms=True):
    E0n, r0n, v, a, _ = _node_terms(model, q, qd)
    vt = _velocity_terms(model, cs, bodies, E0n, r0n, v, a)
    gamma, Gqd = _bias_from(model, cs, *vt, with_residual_terms)
    _, gamma, Gqd = _custom_fill(
        model, q, qd, cs, gamma=gamma, Gqd=Gqd, with_residual_terms=with_residual_terms
    )
    return gamma, Gqd


def constraint_jacobian(model, q, constraints):
    """Constraint Jacobian ``G(q)``: the rows' relative velocities are ``G q̇``.

    One kinematic pass for all frames (Felis 2017, §6.3). For contact and point rows this
    is the stacked point Jacobian projected on the row axes.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        constraints: a `ConstraintSet` with ``m`` rows.

    Returns:
        `G`, `(m, nv)` [1 | m] (angular rows per rad, linear rows in m, per unit of q̇).

    Example:
        >>> cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
        >>> G = jaxrbd.constraint_jacobian(model, q, cs)
        >>> bool(jnp.allclose(G, jaxrbd.point_jacobian(model, q, "body_3", jnp.array([0.0, 0.0, -1.0]))))
        True
    """
    with jax.named_scope("jaxrbd.constraint_jacobian"):
        bodies = constraint_bodies(model, constraints)
        (q,) = check_state(model, q=q)
        R, _ = frame_poses(model, q, constraints, bodies)
        return jacobian_kernel(model, q, constraints, bodies, R)


def constraint_bias(model, q, qd, constraints):
    """Right-hand side ``gamma`` of ``G q̈ = gamma`` (Felis 2017, eq. 7).

    ``gamma = -Ġ q̇`` (the constraints' classical relative acceleration at ``q̈ = 0``,
    negated), plus, for stabilised constraints, the Baumgarte terms
    ``- 2 alpha (G q̇) - beta² φ`` (RBDL), so that ``φ̈ + 2 alpha φ̇ + beta² φ = 0``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocity `(nv,)`.
        constraints: a `ConstraintSet` with ``m`` rows.

    Returns:
        `gamma`, `(m,)` [rad/s² | m/s²].

    Example:
        >>> cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
        >>> gamma = jaxrbd.constraint_bias(model, q, qd, cs)
        >>> drift = jaxrbd.point_bias_acceleration(model, q, qd, "body_3", jnp.array([0.0, 0.0, -1.0]))
        >>> bool(jnp.allclose(gamma, -drift))
        True
    """
    with jax.named_scope("jaxrbd.constraint_bias"):
        bodies = constraint_bodies(model, constraints)
        q, qd = check_state(model, q=q, qd=qd)
        return _bias(model, q, qd, constraints, bodies)[0]


def constraint_residual(model, q, constraints):
    """Position-level residual ``φ(q)`` of every row (zero on the constraint manifold).

    ``φ_j = t_jᵀ [log(R_A R_Bᵀ); o_A - o_B]`` with ``t_j`` in world axes or rotated with
    frame A: for a loop, the relative pose error of its two frames; for a contact, point
    or weld, the error with respect to its world target (the world origin unless given
    or set by `ConstraintSet.anchored`). ``d/dt φ = G q̇`` where the rotation error is 0.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        constraints: a `ConstraintSet` with ``m`` rows.

    Returns:
        `φ`, `(m,)` [rad | m].

    Example:
        >>> cs = jaxrbd.ConstraintSet.points([("body_3", [0.0, 0.0, -1.0], [0.0, 0.0, 1.0])])
        >>> phi = jaxrbd.constraint_residual(model, q, cs)   # height of the point
        >>> end = jnp.array([0.0, 0.0, -1.0])
        >>> bool(jnp.allclose(phi[0], jaxrbd.point_position(model, q, "body_3", end)[2]))
        True
    """
    with jax.named_scope("jaxrbd.constraint_residual"):
        bodies = constraint_bodies(model, constraints)
        (q,) = check_state(model, q=q)
        return residual(model, q, constraints, bodies)


def constraint_velocity_residual(model, q, qd, constraints):
    """Velocity-level residual ``G(q) q̇`` (zero when the velocity satisfies the constraints).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocity `(nv,)`.
        constraints: a `ConstraintSet` with ``m`` rows.

    Returns:
        `(m,)` [rad/s | m/s].

    Example:
        >>> cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
        >>> r = jaxrbd.constraint_velocity_residual(model, q, qd, cs)
        >>> bool(jnp.allclose(r, jaxrbd.constraint_jacobian(model, q, cs) @ qd))
        True
    """
    with jax.named_scope("jaxrbd.constraint_velocity_residual"):
        bodies = constraint_bodies(model, constraints)
        q, qd = check_state(model, q=q, qd=qd)
        return _bias(model, q, qd, constraints, bodies, with_residual_terms=False)[1]
