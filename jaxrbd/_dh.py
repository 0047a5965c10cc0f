"""Denavit-Hartenberg model input: `DHLink` and `dh_model` (MBSlib's DH models, Wojtusch et al. 2016).

A serial chain is described by one row ``[a, alpha, d, theta]`` per link, in either
Denavit-Hartenberg convention, and is turned into an ordinary `Model` through
`ModelBuilder`. All of this runs on the host, once, with numpy.

Frames. Links and frames are numbered as in the textbooks, from 1 (row ``i - 1`` of the
table describes link ``i``). DH frame ``i`` is attached to link ``i``, frame ``0`` is the
base frame.

- ``standard`` (Craig's *distal*, Corke's ``SerialLink``): frame ``i`` sits at the distal
  end of link ``i``, on the axis of joint ``i + 1``, and
  ``T_i = Rz(theta_i) Tz(d_i) Tx(a_i) Rx(alpha_i)``. Joint ``i`` moves about (revolute)
  or along (prismatic) the z axis of frame ``i - 1``.
- ``modified`` (Craig's *proximal*, Khalil-Kleinfinger): frame ``i`` sits at the proximal
  end of link ``i``, on the axis of joint ``i``, and
  ``T_i = Rx(alpha_{i-1}) Tx(a_{i-1}) Rz(theta_i) Tz(d_i)``: row ``i`` of the table holds
  the ``a`` and ``alpha`` of the *previous* link, as in Craig's tables. Joint ``i`` moves
  about or along the z axis of frame ``i``.

Model layout. Link ``i`` becomes a body named ``names[i - 1]`` whose frame **is** DH frame
``i`` and which carries the link's `Body`, as given (in DH frame ``i`` coordinates).

- ``modified``: that body is the joint's child: placement ``T_i`` (without the joint
  variable) in the previous link's frame, then ``joints.revolute/prismatic((0, 0, 1))``.
- ``standard``: the joint acts *before* the link's fixed transform, so each moving link
  adds a massless body named ``joint_names[i - 1]`` at frame ``i - 1`` moved by the joint
  (``Rz(q)`` or ``Tz(q)``), and the link body hangs from it by a fixed joint at
  ``Rz(theta_i) Tz(d_i) Tx(a_i) Rx(alpha_i)``; `Rz` and `Tz` commute with the joint
  motion, so ``F_i = F_{i-1} Rz(theta_i + q) Tz(d_i) Tx(a_i) Rx(alpha_i)`` exactly. Fixed
  bodies are merged into their moving ancestor by the algorithms, so the extra bodies
  cost no degrees of freedom and next to no time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from . import joints
from ._body import Body, Transform
from ._builder import ModelBuilder
from ._model import Model

__all__ = ["DHLink", "dh_model", "dh_transform"]

_JOINT_TYPES = {
    "revolute": "revolute",
    "r": "revolute",
    "prismatic": "prismatic",
    "p": "prismatic",
    "fixed": "fixed",
    "f": "fixed",
}
_CONVENTIONS = {
    "standard": "standard",
    "distal": "standard",
    "modified": "modified",
    "proximal": "modified",
}
_FIELDS = ("a", "alpha", "d", "theta")


@dataclasses.dataclass(frozen=True)
class DHLink:
    """One row of a Denavit-Hartenberg table, with the link's joint and mass properties.

    Args:
        a: link length [m], along x.
        alpha: link twist [rad], about x.
        d: link offset [m], along z; for a prismatic joint the joint displacement adds
            to it.
        theta: joint angle [rad], about z; for a revolute joint the joint angle adds to it.
        joint: ``"revolute"``, ``"prismatic"`` or ``"fixed"`` (or ``"R"``, ``"P"``,
            ``"F"``). For a fixed link, ``theta`` and ``d`` are constants.
        body: mass properties of link ``i`` expressed in DH frame ``i`` (see `dh_model`);
            ``None`` makes a massless link.
        offset: joint coordinate offset [rad | m]: the DH joint variable is ``q + offset``
            (Corke's ``offset``), so ``q = 0`` can be a pose other than the table's
            zero. Must be 0 for a fixed link.

    Example:
        >>> jaxrbd.DHLink(a=0.4318, alpha=0.0, d=0.0, theta=0.0)
        DHLink(a=0.4318, alpha=0.0, d=0.0, theta=0.0, joint='revolute', body=None, offset=0.0)
    """

    a: float = 0.0
    alpha: float = 0.0
    d: float = 0.0
    theta: float = 0.0
    joint: str = "revolute"
    body: Body | None = None
    offset: float = 0.0


# ----------------------------------------------------------------------------- homogeneous matrices


def _rotx(t: float) -> np.ndarray:
    c, s = np.cos(t), np.sin(t)
    return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])


def _rotz(t: float) -> np.ndarray:
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def _trans(x: float, y: float, z: float) -> np.ndarray:
    H = np.eye(4)
    H[:3, 3] = (x, y, z)
    return H


def dh_transform(a: float, alpha: float, d: float, theta: float, convention: str = "standard"):
    """The homogeneous transform ``(4, 4)`` of one DH row: frame ``i`` in frame ``i - 1``.

    ``standard``: ``Rz(theta) Tz(d) Tx(a) Rx(alpha)``; ``modified``:
    ``Rx(alpha) Tx(a) Rz(theta) Tz(d)``. The rotation block maps frame-``i``
    coordinates to frame-``i - 1`` coordinates, the last column is the origin of frame
    ``i`` in frame ``i - 1`` [m]. Host-side numpy (float64), for building and checking
    models; joint variables are added to ``theta`` or ``d`` by the caller.

    Example:
        >>> np.round(jaxrbd.dh_transform(0.5, np.pi / 2, 0.1, 0.0), 6)
        array([[ 1. ,  0. ,  0. ,  0.5],
               [ 0. ,  0. , -1. ,  0. ],
               [ 0. ,  1. ,  0. ,  0.1],
               [ 0. ,  0. ,  0. ,  1. ]])
    """
    conv = _convention(convention)
    vals = [_scalar(f"dh_transform: {n}", x) for n, x in zip(_FIELDS, (a, alpha, d, theta))]
    return _link_transform(conv, *vals)


def _link_transform(conv: str, a: float, alpha: float, d: float, theta: float) -> np.ndarray:
    if conv == "standard":
        return _rotz(theta) @ _trans(0.0, 0.0, d) @ _trans(a, 0.0, 0.0) @ _rotx(alpha)
    return _rotx(alpha) @ _trans(a, 0.0, 0.0) @ _rotz(theta) @ _trans(0.0, 0.0, d)


def _placement(H: np.ndarray) -> Transform:
    return Transform(rotation=H[:3, :3].copy(), translation=H[:3, 3].copy())


# ----------------------------------------------------------------------------- argument checks


def _convention(convention) -> str:
    if not isinstance(convention, str) or convention.lower() not in _CONVENTIONS:
        raise ValueError(
            f"convention {convention!r} is unknown, expected 'standard' (distal) or "
            "'modified' (proximal)"
        )
    return _CONVENTIONS[convention.lower()]


def _scalar(what: str, x) -> float:
    try:
        v = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} = {x!r} is not a number") from None
    if v.shape != ():
        raise ValueError(f"{what} has shape {v.shape}, expected a scalar")
    if not np.isfinite(v):
        raise ValueError(f"{what} = {float(v)} is not finite")
    return float(v)


def _joint_type(k: int, joint) -> str:
    if not isinstance(joint, str) or joint.lower() not in _JOINT_TYPES:
        raise ValueError(
            f"DH link {k}: unknown joint type {joint!r}, expected 'revolute' ('R'), "
            "'prismatic' ('P') or 'fixed' ('F')"
        )
    return _JOINT_TYPES[joint.lower()]


def _body(k: int, body) -> Body | None:
    if body is not None and not isinstance(body, Body):
        raise TypeError(
            f"DH link {k}: body must be a jaxrbd.Body or None, got {type(body).__name__}"
        )
    return body


def _frame(name: str, x) -> np.ndarray:
    """A base/tool frame as a ``(4, 4)`` homogeneous matrix (from a Transform or a 4x4)."""
    if x is None:
        return np.eye(4)
    if isinstance(x, Transform):
        t = x
    else:
        try:
            H = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(
                f"{name} must be a jaxrbd.Transform or a (4, 4) homogeneous matrix, "
                f"got {type(x).__name__}"
            ) from None
        if H.shape != (4, 4):
            raise ValueError(f"{name} has shape {H.shape}, expected a (4, 4) homogeneous matrix")
        if not np.all(np.isfinite(H)):
            raise ValueError(f"{name} is not finite")
        if not np.allclose(H[3], (0.0, 0.0, 0.0, 1.0), rtol=0.0, atol=1e-12):
            raise ValueError(f"{name}: the last row of a homogeneous matrix must be [0, 0, 0, 1]")
        t = _placement(H)
    try:
        R, p = t.arrays(name)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    H = np.eye(4)
    H[:3, :3], H[:3, 3] = R, p
    return H


@dataclasses.dataclass(frozen=True)
class _Row:
    a: float
    alpha: float
    d: float
    theta: float
    joint: str
    body: Body | None
    offset: float


def _rows(links, joint_types, bodies) -> list[_Row]:
    if isinstance(links, (str, bytes)):
        raise TypeError("links must be a sequence of DHLink or an (n, 4) array, got a string")
    if isinstance(links, DHLink):
        raise TypeError("links must be a sequence of DHLink; wrap a single link in a list")
    is_array = hasattr(links, "shape") and hasattr(links, "dtype")
    try:
        seq = None if is_array else list(links)
    except TypeError:
        raise TypeError(
            f"links must be a sequence of DHLink or an (n, 4) array, got {type(links).__name__}"
        ) from None
    if seq is not None and any(isinstance(x, DHLink) for x in seq):
        if joint_types is not None or bodies is not None:
            raise ValueError(
                "joint_types and bodies are only used with an (n, 4) array of DH "
                "parameters; a DHLink carries its own joint and body"
            )
        rows = []
        for k, link in enumerate(seq):
            if not isinstance(link, DHLink):
                raise TypeError(
                    f"DH link {k}: expected a DHLink like the other links, got "
                    f"{type(link).__name__}"
                )
            vals = [_scalar(f"DH link {k}: {n}", getattr(link, n)) for n in _FIELDS]
            joint = _joint_type(k, link.joint)
            offset = _scalar(f"DH link {k}: offset", link.offset)
            rows.append(_Row(*vals, joint, _body(k, link.body), offset))
        if not rows:
            raise ValueError("links is empty: a DH model needs at least one link")
        return rows

    # An (n, 4) table [a, alpha, d, theta].
    if is_array:
        table = np.asarray(links)
        if table.ndim != 2 or table.shape[1] != 4:
            raise ValueError(
                f"links has shape {table.shape}, expected (n, 4) rows [a, alpha, d, theta]"
            )
        seq = list(table)
    if not seq:
        raise ValueError("links is empty: a DH model needs at least one link")
    n = len(seq)
    if joint_types is None:
        joint_types = "R" * n
    joint_types = list(joint_types)  # "RRP" -> ["R", "R", "P"]
    if len(joint_types) != n:
        raise ValueError(f"joint_types has {len(joint_types)} entries, expected {n} (one per link)")
    if bodies is None:
        bodies = [None] * n
    else:
        bodies = list(bodies)
        if len(bodies) != n:
            raise ValueError(f"bodies has {len(bodies)} entries, expected {n} (one per link)")
    rows = []
    for k, row in enumerate(seq):
        try:
            r = np.asarray(row, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"DH link {k}: row {row!r} is not numeric") from None
        if r.shape != (4,):
            raise ValueError(
                f"DH link {k}: row has shape {r.shape}, expected (4,) = [a, alpha, d, theta]"
            )
        vals = [_scalar(f"DH link {k}: {name}", v) for name, v in zip(_FIELDS, r)]
        rows.append(_Row(*vals, _joint_type(k, joint_types[k]), _body(k, bodies[k]), 0.0))
    return rows


def _names(what: str, names, n: int, default: str) -> list[str]:
    if names is None:
        return [f"{default}{k + 1}" for k in range(n)]
    if isinstance(names, str):
        raise TypeError(f"{what} must be a sequence of {n} strings, got a string")
    names = list(names)
    if len(names) != n:
        raise ValueError(f"{what} has {len(names)} entries, expected {n} (one per link)")
    for k, s in enumerate(names):
        if not isinstance(s, str) or not s:
            raise ValueError(f"DH link {k}: {what} entry {s!r} is not a non-empty string")
    return names


# ----------------------------------------------------------------------------- the builder


def dh_model(
    links: Sequence[DHLink] | np.ndarray,
    convention: str = "standard",
    *,
    joint_types: str | Sequence[str] | None = None,
    bodies: Sequence[Body | None] | None = None,
    gravity: Sequence[float] = (0.0, 0.0, -9.81),
    base: Transform | np.ndarray | None = None,
    tool: Transform | np.ndarray | None = None,
    names: Sequence[str] | None = None,
    joint_names: Sequence[str] | None = None,
    tool_name: str = "tool",
    dtype=None,
) -> Model:
    """A serial-chain `Model` from a Denavit-Hartenberg table (MBSlib's DH input).

    Link ``i`` (0-based row ``i``) becomes a body named ``names[i]`` whose frame is DH
    frame ``i + 1`` in textbook numbering (frame ``0`` is the base), so
    `forward_kinematics` returns the DH frames directly and the link's `Body` is stored
    unchanged, in that frame. The ``i``-th joint coordinate ``q[i]`` (one per movable
    link, in table order) adds to ``theta`` (revolute) or ``d`` (prismatic), together
    with the link's ``offset``:

    - ``"standard"`` (distal): ``T_i = Rz(theta + q + offset) Tz(d) Tx(a) Rx(alpha)``;
      the joint turns about the z axis of the *previous* frame, and frame ``i`` sits at
      the distal end of link ``i``. A massless body named ``joint_names[i]`` (frame
      ``i - 1`` turned by the joint) carries the joint; the link body hangs from it by a
      fixed joint.
    - ``"modified"`` (proximal, Craig): ``T_i = Rx(alpha) Tx(a) Rz(theta + q + offset)
      Tz(d)`` with ``a``, ``alpha`` those of the previous link as in Craig's tables; the
      joint turns about the z axis of frame ``i``, which sits at the proximal end of link
      ``i``. The link body is the joint's child.

    (For prismatic joints read ``d + q + offset`` instead.) The world pose of the last DH
    frame is ``base @ T_1 @ ... @ T_n``, and that of the tool frame is ``... @ tool``.

    Args:
        links: a sequence of `DHLink`, or an ``(n, 4)`` array of rows
            ``[a, alpha, d, theta]`` [m, rad, m, rad].
        convention: ``"standard"`` (alias ``"distal"``) or ``"modified"`` (alias
            ``"proximal"``).
        joint_types: with an array only: one ``"R"``/``"P"``/``"F"`` (or
            ``"revolute"``/``"prismatic"``/``"fixed"``) per row, as a string such as
            ``"RRPRRR"`` or a sequence. Default: all revolute.
        bodies: with an array only: one `Body` (in its DH frame) or ``None`` per row.
        gravity: gravitational acceleration in world coordinates [m/s^2], `(3,)`.
        base: pose of DH frame 0 in the world, a `Transform` or a ``(4, 4)``
            homogeneous matrix. Default: identity.
        tool: pose of the tool frame in the last DH frame (same types). If given, a
            massless body named ``tool_name`` is fixed there, so kinematics can address it.
        names: body names of the links; default ``"link1"`` ... ``"linkn"``.
        joint_names: names of the joints; default ``"joint1"`` ... ``"jointn"``. In the
            standard convention they also name the massless joint bodies.
        tool_name: body name of the tool frame.
        dtype: float dtype of the model leaves (default: JAX's default float).

    Returns:
        A `Model` with ``nq = nv =`` the number of movable links, a fixed base.

    Raises:
        ValueError: unknown convention or joint type, a row that is not 4 finite numbers,
            a non-zero offset on a fixed link, mismatched ``names``/``joint_types``/
            ``bodies`` lengths, duplicate names, a non-physical `Body` or an invalid
            base/tool frame; messages name the link index (``DH link k``, 0-based).
        TypeError: an argument of the wrong type (e.g. ``body`` that is not a `Body`).

    Example:
        A planar two-link arm (standard DH): the tip is at ``(l1 + l2, 0, 0)`` at
        ``q = 0`` and at ``(l1, l2, 0)`` with the elbow at 90 degrees.

        >>> arm = jaxrbd.dh_model([jaxrbd.DHLink(a=1.0), jaxrbd.DHLink(a=0.5)])
        >>> arm.nq, arm.body_names
        (2, ('world', 'joint1', 'link1', 'joint2', 'link2'))
        >>> R, p = jaxrbd.forward_kinematics(arm, jnp.array([0.0, np.pi / 2]))
        >>> np.round(p[arm.body_id("link2")], 6).tolist()
        [1.0, 0.5, 0.0]
    """
    conv = _convention(convention)
    rows = _rows(links, joint_types, bodies)
    n = len(rows)
    names = _names("names", names, n, "link")
    joint_names = _names("joint_names", joint_names, n, "joint")
    H_base = _frame("base", base)
    H_tool = None if tool is None else _frame("tool", tool)
    if not isinstance(tool_name, str) or not tool_name:
        raise ValueError(f"tool_name must be a non-empty string, got {tool_name!r}")

    b = ModelBuilder(gravity=gravity)
    parent, pre = "world", H_base  # pre: frame of the previous link's body -> DH frame i-1
    for k, row in enumerate(rows):
        if row.joint == "fixed" and row.offset != 0.0:
            raise ValueError(
                f"DH link {k}: offset {row.offset} given for a fixed link, which has no "
                "joint coordinate; fold it into theta or d"
            )
        theta, d = row.theta, row.d
        if row.joint == "revolute":
            theta += row.offset
        elif row.joint == "prismatic":
            d += row.offset
        H = _link_transform(conv, row.a, row.alpha, d, theta)
        joint = {
            "revolute": joints.revolute((0.0, 0.0, 1.0)),
            "prismatic": joints.prismatic((0.0, 0.0, 1.0)),
            "fixed": joints.fixed(),
        }[row.joint]
        try:
            if conv == "modified" or row.joint == "fixed":
                b.add_body(names[k], parent, joint, row.body, _placement(pre @ H), joint_names[k])
            else:
                # The joint motion Rz(q) / Tz(q) commutes with Rz(theta) Tz(d), so it can act
                # first, at frame i-1: F_i = F_{i-1} Rz(q) T_i.
                b.add_body(joint_names[k], parent, joint, None, _placement(pre), joint_names[k])
                b.add_body(names[k], joint_names[k], joints.fixed(), row.body, _placement(H))
        except ValueError as e:
            raise ValueError(f"DH link {k}: {e}") from None
        parent, pre = names[k], np.eye(4)
    if H_tool is not None:
        try:
            b.add_body(tool_name, parent, joints.fixed(), None, _placement(H_tool))
        except ValueError as e:
            raise ValueError(f"tool: {e}") from None
    return b.build(dtype)
