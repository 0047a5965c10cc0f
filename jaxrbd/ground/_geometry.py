"""Ground-contact geometry: collidable points on bodies, terrains, gaps and contact frames.

A collidable point is a sphere of radius ``r`` (``r = 0``: a point) centred at a point
fixed on a body. Against a terrain it has a signed gap ``phi`` (positive = apart), the
terrain's outward normal ``n`` and friction coefficient ``mu`` at the closest point, and
a contact frame whose rows are ``[n; t1; t2]`` in world coordinates. The contact point
on the sphere is its centre minus ``r n``.
"""

from __future__ import annotations

import abc
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._api import Kernels, kernels
from .._core.checks import as_float
from .._core.host_rotation import quat_matrix
from ..io._mjcf import compile_mjcf

__all__ = [
    "AbstractTerrain",
    "ContactPoints",
    "Heightfield",
    "Plane",
    "contact_frames",
    "tangent_basis",
]


# ---------------------------------------------------------------- collidable points


def _check_points(points, radius, n):
    if points.shape != (n, 3):
        raise ValueError(f"points has shape {points.shape}, expected ({n}, 3) = (n_points, 3)")
    if radius.shape != (n,):
        raise ValueError(f"radius has shape {radius.shape}, expected ({n},) = (n_points,)")


class ContactPoints(eqx.Module):
    """A named set of collidable spheres fixed on the bodies of a model.

    Build it with `ContactPoints.create` (explicit points), `ContactPoints.from_urdf`
    (the URDF's ``<collision>`` spheres) or `ContactPoints.from_mjcf` (an MJCF's
    collision geoms). The bodies and names are static; the points
    and radii are leaves (differentiable, vmappable).

    Attributes:
        bodies: body ids, one per point (static).
        names: one name per point (static).
        points: sphere centres in body coordinates, `(K, 3)` [m].
        radius: sphere radii, `(K,)` [m] (zero for points).
    """

    bodies: tuple[int, ...] = eqx.field(static=True)
    names: tuple[str, ...] = eqx.field(static=True)
    points: Float[Array, "K 3"]
    radius: Float[Array, " K"]

    def __check_init__(self):
        if len(self.bodies) == 0:
            raise ValueError("ContactPoints needs at least one point")
        if len(self.names) != len(self.bodies):
            raise ValueError(
                f"names has {len(self.names)} entries, expected {len(self.bodies)} (one per point)"
            )
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"point names must be unique, got {self.names}")
        if hasattr(self.points, "shape") and hasattr(self.radius, "shape"):
            _check_points(self.points, self.radius, len(self.bodies))

    def __len__(self) -> int:
        return len(self.bodies)

    @classmethod
    def create(cls, model, items, names=None, dtype=None) -> ContactPoints:
        """Collidable points from ``(body, point)`` or ``(body, point, radius)`` items.

        Args:
            model: the `Model` the bodies belong to (names are resolved here, once).
            items: a sequence of ``(body, point)`` or ``(body, point, radius)``: a body id
                or name (fixed-merged bodies included), the sphere centre in that body's
                coordinates `(3,)` [m] and its radius [m] (default 0).
            names: optional unique names, one per item (default ``"<body>_<k>"``).
            dtype: float dtype of the leaves (default the model's).

        Returns:
            A `ContactPoints`.

        Raises:
            ValueError: an unknown body, a world-fixed body, a bad point or radius.

        Example:
            >>> feet = jaxrbd.ground.ContactPoints.create(model, [("body_3", [0, 0, -1], 0.05)])
            >>> len(feet), feet.names
            (1, ('body_3_0',))
        """
        dtype = model.dtype if dtype is None else dtype
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence) or len(items) == 0:
            raise ValueError("items must be a non-empty sequence of (body, point[, radius])")
        bodies, pts, rad = [], [], []
        for k, item in enumerate(items):
            if not isinstance(item, Sequence) or len(item) not in (2, 3):
                raise ValueError(
                    f"items[{k}] is {item!r}, expected (body, point) or (body, point, radius)"
                )
            body = item[0]
            if isinstance(body, bool) or not isinstance(body, (str, int, np.integer)):
                raise TypeError(f"items[{k}]: body must be a name or an int id, got {body!r}")
            bid = model.body_id(body)
            if bid == 0 or model.body_id(model.body_names[bid]) == 0:
                raise ValueError(f"items[{k}]: body {body!r} is the world; it cannot make contact")
            p = np.asarray(item[1], dtype=float)
            if p.shape != (3,) or not np.all(np.isfinite(p)):
                raise ValueError(f"items[{k}]: point must be 3 finite numbers, got {item[1]!r}")
            r = float(item[2]) if len(item) == 3 else 0.0
            if not (np.isfinite(r) and r >= 0):
                raise ValueError(f"items[{k}]: radius must be finite and >= 0, got {item[2]!r}")
            bodies.append(bid)
            pts.append(p)
            rad.append(r)
        if names is None:
            names = []
            for k, b in enumerate(bodies):
                names.append(f"{model.body_names[b]}_{sum(1 for c in bodies[:k] if c == b)}")
        names = tuple(str(n) for n in names)
        return cls(
            bodies=tuple(int(b) for b in bodies),
            names=names,
            points=jnp.asarray(np.stack(pts), dtype),
            radius=jnp.asarray(np.asarray(rad), dtype),
        )

    @classmethod
    def from_urdf(cls, model, urdf, links=None, dtype=None) -> ContactPoints:
        """Collidable spheres from a URDF's ``<collision><geometry><sphere>`` elements.

        Each sphere becomes a point on its link (the ``<origin>`` translation; a sphere's
        orientation does not matter), named after the ``<collision name=...>`` attribute
        or ``"<link>_<k>"``. Links merged into the world have no effect and are left out.

        Args:
            model: the `Model` loaded from the same URDF.
            urdf: a file path or the URDF XML as a string.
            links: optional link names to keep (default all links with spheres).
            dtype: float dtype of the leaves (default the model's).

        Returns:
            A `ContactPoints`.

        Raises:
            ValueError: no sphere found, a link unknown to the model, bad XML.

        Example:
            >>> urdf = '''<robot name="b"><link name="ball"><inertial><mass value="1"/>
            ...   <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
            ...   <collision><geometry><sphere radius="0.1"/></geometry></collision></link></robot>'''
            >>> ball = jaxrbd.load_urdf(urdf, floating_base=True)
            >>> jaxrbd.ground.ContactPoints.from_urdf(ball, urdf).radius.tolist()
            [0.1...]
        """
        text = urdf
        if isinstance(urdf, os.PathLike) or (isinstance(urdf, str) and "<" not in urdf):
            with open(urdf, encoding="utf-8") as fh:
                text = fh.read()
        try:
            root = ET.fromstring(text)
        except ET.ParseError as e:
            raise ValueError(f"urdf: not valid XML ({e})") from None
        keep = None if links is None else set(links)
        items, names = [], []
        for link in root.iter("link"):
            lname = link.get("name")
            if keep is not None and lname not in keep:
                continue
            k = 0
            for col in link.findall("collision"):
                sphere = col.find("geometry/sphere")
                if sphere is None:
                    continue
                origin = col.find("origin")
                xyz = [0.0, 0.0, 0.0]
                if origin is not None and origin.get("xyz"):
                    xyz = [float(v) for v in origin.get("xyz").split()]
                try:
                    bid = model.body_id(lname)
                except (KeyError, ValueError):
                    raise ValueError(f"urdf link {lname!r} is not a body of the model") from None
                if bid == 0:
                    continue
                items.append((lname, xyz, float(sphere.get("radius", "0"))))
                names.append(col.get("name") or f"{lname}_{k}")
                k += 1
        if keep is not None:
            missing = keep - {it[0] for it in items}
            if missing:
                raise ValueError(f"links {sorted(missing)} have no collision sphere in the URDF")
        if not items:
            raise ValueError("urdf: no <collision><geometry><sphere> on a moving link")
        return cls.create(model, items, names=names, dtype=dtype)

    @classmethod
    def from_mjcf(cls, model, mjcf, geoms=None, bodies=None, *, meshes=False, cylinder_points=8,
                  assets=None, dtype=None) -> ContactPoints:
        """Collidable spheres from an MJCF's collision geoms, read through MuJoCo.

        The MJCF is compiled by MuJoCo (as `jaxrbd.load_mjcf` does) and each collision
        geom (``contype`` or ``conaffinity`` non-zero, or named in a ``<contact><pair>``)
        on a moving body becomes points on
        that body, in its MuJoCo body frame (which is the frame of the jaxrbd body of the
        same name, bodies welded by fixed joints included):

        - ``sphere``: one sphere of its radius at its centre, named ``"<geom>"``;
        - ``capsule``: its two end-cap spheres, ``"<geom>/0"`` and ``"<geom>/1"``;
        - ``box``: its 8 corners (radius 0), ``"<geom>/0"`` ... ``"<geom>/7"``;
        - ``cylinder``: ``cylinder_points`` points on each rim circle (radius 0);
        - ``mesh`` (with ``meshes=True``): the mesh's vertices (radius 0).

        Other geoms (planes, height fields, ellipsoids, SDFs; meshes by default) are left
        out, and so are geoms on bodies welded to the world. Unnamed geoms are called
        ``"geom<id>"``.

        Args:
            model: the `Model` that `jaxrbd.load_mjcf` built from the same MJCF.
            mjcf: a path, the MJCF text, a ``mujoco.MjSpec`` or a compiled ``mujoco.MjModel``.
            geoms: optional geom names to keep (a sequence; a named geom of a type listed
                above is kept even if it does not collide), or a predicate
                ``(mj_model, geom_id) -> bool`` replacing the collision test.
            bodies: optional body names: keep only geoms on these bodies.
            meshes: also turn mesh geoms into their vertices (there may be many).
            cylinder_points: points per rim circle of a cylinder (>= 3).
            assets: optional ``{filename: bytes}`` for MJCF text (as `load_mjcf`).
            dtype: float dtype of the leaves (default the model's).

        Returns:
            A `ContactPoints`.

        Raises:
            ImportError: MuJoCo is not installed.
            ValueError: no collidable geom selected, a named geom or body that does not
                exist or gives no points, a body unknown to the model.

        Example:
            >>> xml = \'\'\'<mujoco><worldbody><body name="ball"><freejoint/>
            ...   <geom name="s" type="sphere" size="0.1" mass="1"/>
            ...   <geom name="c" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.1"/>
            ... </body></worldbody></mujoco>\'\'\'
            >>> ball = jaxrbd.load_mjcf(xml)
            >>> pts = jaxrbd.ground.ContactPoints.from_mjcf(ball, xml)
            >>> pts.names, pts.radius.tolist()
            (('s', 'c/0', 'c/1'), [0.1, 0.02, 0.02])
        """
        try:
            m = compile_mjcf(mjcf, assets)
        except ImportError as e:
            raise ImportError(
                "ContactPoints.from_mjcf reads the MJCF through MuJoCo: install it with "
                f"`pip install mujoco` (importing mujoco failed with: {e})"
            ) from e
        import mujoco  # optional dependency (extra: mjcf)

        if isinstance(cylinder_points, bool) or not isinstance(cylinder_points, int) or (
                cylinder_points < 3):
            raise ValueError(f"cylinder_points must be an int >= 3, got {cylinder_points!r}")
        name_of = lambda kind, i, fallback: mujoco.mj_id2name(m, kind, i) or f"{fallback}{i}"
        geom_names = [name_of(mujoco.mjtObj.mjOBJ_GEOM, g, "geom") for g in range(m.ngeom)]
        body_names = [name_of(mujoco.mjtObj.mjOBJ_BODY, b, "body") for b in range(m.nbody)]
        G = mujoco.mjtGeom
        kinds = {int(G.mjGEOM_SPHERE), int(G.mjGEOM_CAPSULE), int(G.mjGEOM_BOX),
                 int(G.mjGEOM_CYLINDER)} | ({int(G.mjGEOM_MESH)} if meshes else set())
        named = None
        if geoms is not None and not callable(geoms):
            if isinstance(geoms, (str, bytes)):
                geoms = [geoms]
            named = [str(g) for g in geoms]
            unknown = sorted(set(named) - set(geom_names))
            if unknown:
                raise ValueError(f"geoms {unknown} are not geoms of the MJCF")
        if bodies is not None:
            bodies = [bodies] if isinstance(bodies, str) else [str(b) for b in bodies]
            unknown = sorted(set(bodies) - set(body_names))
            if unknown:
                raise ValueError(f"bodies {unknown} are not bodies of the MJCF")
        for b in bodies or ():
            try:
                model.body_id(b)
            except (KeyError, ValueError):
                raise ValueError(f"MJCF body {b!r} is not a body of the model") from None

        paired = set(np.asarray(m.pair_geom1).tolist()) | set(np.asarray(m.pair_geom2).tolist())
        items, names = [], []
        for g in range(m.ngeom):
            gname, bname = geom_names[g], body_names[int(m.geom_bodyid[g])]
            if named is not None:
                if gname not in named:
                    continue
                if int(m.geom_type[g]) not in kinds:
                    raise ValueError(
                        f"geom {gname!r} is a {G(int(m.geom_type[g])).name[7:].lower()}, which "
                        "gives no points (sphere, capsule, box, cylinder; mesh with meshes=True)"
                    )
            elif callable(geoms):
                if not geoms(m, g):
                    continue
            elif not (m.geom_contype[g] or m.geom_conaffinity[g] or g in paired):
                continue
            if int(m.geom_type[g]) not in kinds or (bodies is not None and bname not in bodies):
                continue
            try:
                bid = model.body_id(bname)
            except (KeyError, ValueError):
                raise ValueError(
                    f"MJCF body {bname!r} (of geom {gname!r}) is not a body of the model: "
                    "load the model with jaxrbd.load_mjcf from the same MJCF"
                ) from None
            if bid == 0 or model.body_id(model.body_names[bid]) == 0:
                if named is not None:
                    raise ValueError(
                        f"geom {gname!r} is on {bname!r}, which is welded to the world")
                continue
            for k, (p, r) in enumerate(_geom_spheres(m, g, cylinder_points)):
                items.append((bname, p, r))
                names.append(gname if int(m.geom_type[g]) == int(G.mjGEOM_SPHERE)
                             else f"{gname}/{k}")
        if not items:
            raise ValueError(
                "mjcf: no collidable sphere, capsule, box or cylinder geom on a moving body"
                + (" among the selected geoms/bodies" if geoms is not None or bodies else "")
            )
        return cls.create(model, items, names=names, dtype=dtype)

    def select(self, names) -> ContactPoints:
        """The subset of points with the given names, in that order.

        Example:
            >>> pts = jaxrbd.ground.ContactPoints.create(model, [(1, [0, 0, 0]), (3, [0, 0, -1])],
            ...                                          names=["a", "b"])
            >>> pts.select(["b"]).bodies
            (3,)
        """
        if isinstance(names, str):
            names = [names]
        idx = []
        for n in names:
            if n not in self.names:
                raise ValueError(f"no contact point named {n!r}; the points are {self.names}")
            idx.append(self.names.index(n))
        idx = np.asarray(idx)
        return ContactPoints(
            bodies=tuple(self.bodies[i] for i in idx),
            names=tuple(self.names[i] for i in idx),
            points=self.points[idx],
            radius=self.radius[idx],
        )

    def __add__(self, other: ContactPoints) -> ContactPoints:
        if not isinstance(other, ContactPoints):
            return NotImplemented
        return ContactPoints(
            bodies=self.bodies + other.bodies,
            names=self.names + other.names,
            points=jnp.concatenate([self.points, other.points.astype(self.points.dtype)]),
            radius=jnp.concatenate([self.radius, other.radius.astype(self.radius.dtype)]),
        )


def _geom_spheres(m, g, cylinder_points):
    """``[(centre (3,), radius)]`` in the body frame of MuJoCo geom ``g`` (see
    `ContactPoints.from_mjcf`)."""
    import mujoco  # optional dependency (extra: mjcf)


    R, pos = quat_matrix(m.geom_quat[g]), np.asarray(m.geom_pos[g], dtype=float)
    size, kind, G = np.asarray(m.geom_size[g], dtype=float), int(m.geom_type[g]), mujoco.mjtGeom
    if kind == G.mjGEOM_SPHERE:
        local, r = np.zeros((1, 3)), size[0]
    elif kind == G.mjGEOM_CAPSULE:  # the axis is the geom's z
        local, r = np.array([[0.0, 0.0, size[1]], [0.0, 0.0, -size[1]]]), size[0]
    elif kind == G.mjGEOM_BOX:
        signs = np.array([[sx, sy, sz] for sx in (1, -1) for sy in (1, -1) for sz in (1, -1)])
        local, r = signs * size[:3], 0.0
    elif kind == G.mjGEOM_CYLINDER:
        a = 2 * np.pi * np.arange(cylinder_points) / cylinder_points
        ring = np.stack([size[0] * np.cos(a), size[0] * np.sin(a), np.zeros_like(a)], axis=1)
        local, r = np.concatenate([ring + [0, 0, size[1]], ring - [0, 0, size[1]]]), 0.0
    else:  # a mesh: its vertices, in the geom frame once compiled
        mid = int(m.geom_dataid[g])
        start, n = int(m.mesh_vertadr[mid]), int(m.mesh_vertnum[mid])
        local, r = np.asarray(m.mesh_vert[start:start + n], dtype=float), 0.0
    return [(pos + R @ p, float(r)) for p in local]


# ---------------------------------------------------------------- terrains


def tangent_basis(n: Float[Array, " 3"]) -> Float[Array, "3 3"]:
    """Rows ``[n; t1; t2]``: a right-handed orthonormal frame with ``n`` first.

    ``t1 = normalize(n x e)`` with ``e`` the x axis unless ``n`` is nearly parallel to
    it (then the y axis), and ``t2 = n x t1``; a horizontal ground gets ``t1 = y``,
    ``t2 = -x``.

    Example:
        >>> jaxrbd.ground.tangent_basis(jnp.array([0.0, 0.0, 1.0]))[0].tolist()
        [0.0, 0.0, 1.0]
    """
    use_x = jnp.abs(n[0]) < 0.9
    e = jnp.where(use_x, jnp.array([1.0, 0.0, 0.0], n.dtype), jnp.array([0.0, 1.0, 0.0], n.dtype))
    t1 = jnp.cross(n, e)
    t1 = t1 / jnp.linalg.norm(t1)  # |n x e| >= sqrt(1 - 0.9^2) > 0
    t2 = jnp.cross(n, t1)
    return jnp.stack([n, t1, t2])


def _unit(v):
    return v / jnp.sqrt(jnp.sum(v * v))


class AbstractTerrain(eqx.Module):
    """A terrain: signed distance, outward normal and friction at world points."""

    @abc.abstractmethod
    def query(self, p: Float[Array, " 3"]) -> tuple:
        """``(distance, normal, friction)`` at a world point ``p`` `(3,)` [m]: the signed
        distance to the surface (positive above), the unit normal pointing out of the
        ground `(3,)` and the friction coefficient (a scalar)."""


def _check_friction(friction):
    f = jnp.asarray(friction)
    if f.ndim != 0:
        raise ValueError(f"friction has shape {f.shape}, expected a scalar ()")
    try:
        value = float(f)
    except (TypeError, jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return f
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"friction is {value!r}, expected a finite coefficient >= 0")
    return f


class Plane(AbstractTerrain):
    """A flat ground through ``(0, 0, height)`` with outward ``normal``.

    Args:
        height: the height of the plane at the origin [m].
        normal: outward normal `(3,)` (normalised here), default ``(0, 0, 1)``.
        friction: Coulomb friction coefficient ``mu >= 0``.

    Example:
        >>> ground = jaxrbd.ground.Plane(0.0, friction=0.8)
        >>> d, n, mu = ground.query(jnp.array([0.3, 0.1, 0.25]))
        >>> round(float(d), 6), n.tolist()
        (0.25, [0.0, 0.0, 1.0])
    """

    height: Float[Array, ""]
    normal: Float[Array, " 3"]
    friction: Float[Array, ""]

    def __init__(self, height=0.0, normal=(0.0, 0.0, 1.0), friction=1.0):
        self.height = jnp.asarray(height)
        n = jnp.asarray(normal)
        if n.shape != (3,):
            raise ValueError(f"normal has shape {n.shape}, expected (3,)")
        if not isinstance(n, jax.core.Tracer) and not float(jnp.linalg.norm(n)) > 0:
            raise ValueError("normal must be a non-zero 3-vector")
        self.normal = _unit(n)
        if self.height.ndim != 0:
            raise ValueError(f"height has shape {self.height.shape}, expected a scalar ()")
        self.friction = _check_friction(friction)

    def query(self, p):
        n = self.normal.astype(p.dtype)
        d = jnp.dot(n, p) - self.height.astype(p.dtype) * n[2]
        return d, n, self.friction.astype(p.dtype)


class Heightfield(AbstractTerrain):
    """A terrain ``z = h(x, y)``: a JAX callable, or a grid with bilinear interpolation.

    The normal is ``(-h_x, -h_y, 1)`` normalised, and the signed distance its
    first-order value ``(z - h(x, y)) n_z`` (exact for planes, accurate where the
    curvature radius is large compared with the gap).

    Args:
        height_fn: ``h(x, y) -> z`` on scalars, differentiable by JAX; or ``None`` with
            `heights`.
        friction: Coulomb friction coefficient ``mu >= 0``.
        heights: `(nx, ny)` grid of heights [m]; ``heights[i, j]`` is at
            ``origin + (i dx, j dy)``. Outside the grid the border cell's plane extends.
        origin: `(2,)` world ``(x, y)`` of ``heights[0, 0]`` [m].
        spacing: `(2,)` ``(dx, dy)`` [m].

    Example:
        >>> hill = jaxrbd.ground.Heightfield(lambda x, y: 0.1 * jnp.sin(x), friction=1.0)
        >>> d, n, mu = hill.query(jnp.array([0.0, 0.0, 0.5]))
        >>> round(float(d), 4)
        0.4975
        >>> grid = jaxrbd.ground.Heightfield.from_grid(jnp.zeros((4, 4)), origin=(-1.0, -1.0),
        ...                                            spacing=(1.0, 1.0))
        >>> float(grid.query(jnp.array([0.5, 0.5, 0.2]))[0])
        0.2...
    """

    height_fn: Callable | None = eqx.field(static=True)
    heights: Float[Array, "nx ny"] | None
    origin: Float[Array, " 2"] | None
    spacing: Float[Array, " 2"] | None
    friction: Float[Array, ""]

    def __init__(self, height_fn=None, friction=1.0, *, heights=None, origin=None, spacing=None):
        if (height_fn is None) == (heights is None):
            raise ValueError("pass exactly one of height_fn (a callable h(x, y)) and heights (a grid)")
        if height_fn is not None and not callable(height_fn):
            raise TypeError(f"height_fn is a {type(height_fn).__name__}, expected a callable h(x, y)")
        self.height_fn = height_fn
        if heights is not None:
            heights = jnp.asarray(heights)
            if heights.ndim != 2 or heights.shape[0] < 2 or heights.shape[1] < 2:
                raise ValueError(f"heights has shape {heights.shape}, expected (nx, ny) with nx, ny >= 2")
            origin = jnp.zeros(2, heights.dtype) if origin is None else jnp.asarray(origin)
            spacing = jnp.asarray(spacing) if spacing is not None else None
            if origin.shape != (2,):
                raise ValueError(f"origin has shape {origin.shape}, expected (2,)")
            if spacing is None or spacing.shape != (2,):
                raise ValueError("spacing must be (dx, dy), two positive numbers [m]")
            if not isinstance(spacing, jax.core.Tracer) and not bool(jnp.all(spacing > 0)):
                raise ValueError(f"spacing is {spacing.tolist()}, expected two positive numbers")
        self.heights = heights
        self.origin = origin
        self.spacing = spacing
        self.friction = _check_friction(friction)

    @classmethod
    def from_grid(cls, heights, origin=(0.0, 0.0), spacing=(1.0, 1.0), friction=1.0):
        """A bilinearly interpolated grid; see the class docstring for the arguments."""
        return cls(None, friction, heights=heights, origin=origin, spacing=spacing)

    def _grid_height(self, x, y):
        H = self.heights.astype(x.dtype)
        nx, ny = H.shape
        u = (x - self.origin[0].astype(x.dtype)) / self.spacing[0].astype(x.dtype)
        v = (y - self.origin[1].astype(x.dtype)) / self.spacing[1].astype(x.dtype)
        i = jnp.clip(jnp.floor(u), 0, nx - 2).astype(jnp.int32)
        j = jnp.clip(jnp.floor(v), 0, ny - 2).astype(jnp.int32)
        a, b = u - i, v - j
        h00, h10, h01, h11 = H[i, j], H[i + 1, j], H[i, j + 1], H[i + 1, j + 1]
        return (1 - a) * (1 - b) * h00 + a * (1 - b) * h10 + (1 - a) * b * h01 + a * b * h11

    def height(self, x, y):
        """The terrain height ``h(x, y)`` [m] at scalar world coordinates."""
        if self.height_fn is not None:
            return jnp.asarray(self.height_fn(x, y), x.dtype)
        return self._grid_height(x, y)

    def query(self, p):
        h, (hx, hy) = jax.value_and_grad(self.height, argnums=(0, 1))(p[0], p[1])
        one = jnp.ones((), p.dtype)
        w = jnp.sqrt(1.0 + hx * hx + hy * hy)
        n = jnp.stack([-hx, -hy, one]) / w
        return (p[2] - h) / w, n, self.friction.astype(p.dtype)


# ---------------------------------------------------------------- per-point contact kinematics


def check_terrain(terrain):
    if not isinstance(terrain, AbstractTerrain):
        raise TypeError(
            f"terrain is a {type(terrain).__name__}, expected a jaxrbd.ground terrain "
            "(Plane, Heightfield or an AbstractTerrain subclass)"
        )


def check_contacts(model, contacts):
    if not isinstance(contacts, ContactPoints):
        raise TypeError(
            f"contacts is a {type(contacts).__name__}, expected a jaxrbd.ground.ContactPoints"
        )
    if max(contacts.bodies) >= model.nbodies:
        raise ValueError(
            f"contacts refer to body {max(contacts.bodies)} but the model has {model.nbodies} bodies"
        )


def contact_frames(model, q, contacts, terrain):
    """Signed gaps, contact frames and friction coefficients of every collidable point.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        contacts: `ContactPoints` with ``K`` points.
        terrain: a terrain (`Plane`, `Heightfield`, ...).

    Returns:
        ``(gap, frame, mu, position)``: the signed gaps `(K,)` [m] (sphere surface to
        terrain, positive = apart), the frames `(K, 3, 3)` with rows ``[n; t1; t2]`` in
        world coordinates, the friction coefficients `(K,)` and the contact points (on the
        sphere, ``centre - r n``) in world coordinates `(K, 3)` [m].

    Example:
        >>> pts = jaxrbd.ground.ContactPoints.create(model, [("body_3", [0, 0, -1], 0.05)])
        >>> gap, frame, mu, pos = jaxrbd.ground.contact_frames(model, q, pts, jaxrbd.ground.Plane(-5.0))
        >>> gap.shape, frame.shape
        ((1,), (1, 3, 3))
    """
    with jax.named_scope("jaxrbd.ground.contact_frames"):
        check_contacts(model, contacts)
        check_terrain(terrain)
        q = as_float("q", q, model.dtype)
        if q.shape != (model.nq,):
            raise ValueError(f"q has shape {q.shape}, expected ({model.nq},) = (model.nq,)")
        return _frames(model, kernels(model), q, contacts, terrain)[:4]


def _frames(model, k: Kernels, q, contacts, terrain):
    dtype = model.dtype
    pts = contacts.points.astype(dtype)
    rad = contacts.radius.astype(dtype)
    centre = k.point_positions(model, q, pts, contacts.bodies)
    dist, n, mu = jax.vmap(terrain.query)(centre)
    frame = jax.vmap(tangent_basis)(n)
    gap = dist - rad
    position = centre - rad[:, None] * n
    return gap, frame, mu, position, centre


def contact_jacobian(model, k: Kernels, q, contacts, terrain):
    """``(gap, frame, mu, G)``: `contact_frames` and the contact Jacobian `(3K, nv)`,
    whose rows ``3k..3k+2`` map ``qd`` to the velocity of point ``k``'s contact point
    along ``[n; t1; t2]`` (the sphere's rolling included), for a checked ``q``, through
    the kernels ``k`` of the model's kind."""
    gap, frame, mu, _, _ = _frames(model, k, q, contacts, terrain)
    pts = contacts.points.astype(model.dtype)
    rad = contacts.radius.astype(model.dtype)
    J = k.world_jacobians(model, q, pts, contacts.bodies)  # (K, 6, nv) [w; v]
    Jw, Jv = J[:, :3, :], J[:, 3:, :]
    # v_contact = v_centre + w x (-r n) = v_centre + (r n) x w
    rn = rad[:, None] * frame[:, 0, :]
    Jc = Jv + jnp.cross(rn[:, :, None], Jw, axisa=1, axisb=1, axisc=1)
    G = jnp.einsum("kij,kjn->kin", frame, Jc)
    return gap, frame, mu, G.reshape(-1, model.nv)
