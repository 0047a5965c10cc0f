"""What the matplotlib plots (`jaxrbd.viz`) and the browser viewer (`jaxrbd.viewer`) share:
batched body poses, the kinematic skeleton of a model, trajectories and ground planes.

Host-side helpers: they return numpy arrays for drawing. The poses of every body at every
requested configuration come from one jitted, vmapped `forward_kinematics` call.
"""

from __future__ import annotations

import dataclasses
import numbers

import jax
import numpy as np

from ._kinematics import forward_kinematics

__all__ = [
    "Plane",
    "Skeleton",
    "Surface",
    "as_configurations",
    "ground_plane",
    "poses",
    "scene_bounds",
    "skeleton",
]

# One compiled function per model structure and batch size (jit caches on both).
_batched_fk = jax.jit(jax.vmap(forward_kinematics, in_axes=(None, 0)))


def as_configurations(model, qs, name: str, shapes: dict[int, str]) -> np.ndarray:
    """``qs`` as a float numpy array whose last axis is ``model.nq``.

    ``shapes`` maps each accepted number of dimensions to its description, e.g.
    ``{1: "(nq,)", 2: "(B, nq)"}``.
    """
    try:
        arr = np.asarray(qs, dtype=float)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be an array of numbers, got {type(qs).__name__}") from e
    if arr.ndim not in shapes or arr.shape[-1] != model.nq:
        expected = " or ".join(shapes.values())
        raise ValueError(
            f"{name} has shape {arr.shape}, expected {expected} with nq = model.nq = {model.nq}"
        )
    if arr.size == 0:
        raise ValueError(f"{name} has shape {arr.shape}: no configuration to draw")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values")
    return arr


def poses(model, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World poses of all bodies for each configuration of ``Q`` ``(N, nq)``.

    Returns ``R`` ``(N, nbodies, 3, 3)`` (body -> world) and ``p`` ``(N, nbodies, 3)``,
    as numpy arrays, from one jitted vmapped call.
    """
    Q = np.asarray(Q, dtype=model.dtype).reshape(-1, model.nq)
    n = len(Q)
    # batch sizes rounded up to powers of two: a handful of compilations serve every size
    padded = 1 << max(n - 1, 0).bit_length()
    if padded != n:
        Q = np.concatenate([Q, np.broadcast_to(Q[:1], (padded - n, model.nq))])
    R, p = _batched_fk(model, Q)
    return np.asarray(R)[:n], np.asarray(p)[:n]


@dataclasses.dataclass(frozen=True)
class Skeleton:
    """The drawable structure of a model (host-side, numpy).

    Points are indexed in a stacked array ``[body origins (nbodies); body CoMs
    (nbodies)]`` so one gather gives every segment end.

    Attributes:
        seg_start, seg_end: `(nseg,)` indices of segment ends in the stacked points: a
            link from each body's parent origin to its origin (free joints excepted),
            and from the origin of each childless body to its centre of mass. A body
            whose joint translates it relative to the world (a floating base, a cart)
            is not joined to the world.
        moving: `(nmoving,)` bodies with a moving joint (their origins are joint origins).
        axis_body: `(naxes,)` bodies with a one-DoF joint; axis_local: `(naxes, 3)`
            its unit axis in body coordinates; axis_prismatic: `(naxes,)` True when
            the joint translates along the axis (prismatic) rather than rotating.
        com_local: `(nbodies, 3)` centres of mass in body coordinates [m].
        massive: `(nmassive,)` bodies with positive mass (world excluded).
        names: body names.
    """

    seg_start: np.ndarray
    seg_end: np.ndarray
    moving: np.ndarray
    axis_body: np.ndarray
    axis_local: np.ndarray
    axis_prismatic: np.ndarray
    com_local: np.ndarray
    massive: np.ndarray
    names: tuple[str, ...]

    def points(self, R: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Stacked ``[origins; CoMs]`` in world coordinates, ``(..., 2 nbodies, 3)``."""
        com = p + np.einsum("...ij,...j->...i", R, np.broadcast_to(self.com_local, p.shape))
        return np.concatenate([p, com], axis=-2)

    def segments(self, R: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Segment ends in world coordinates, ``(..., nseg, 2, 3)``."""
        P = self.points(R, p)
        return np.stack([P[..., self.seg_start, :], P[..., self.seg_end, :]], axis=-2)

    def axes(self, R: np.ndarray) -> np.ndarray:
        """Joint axes in world coordinates, ``(..., naxes, 3)``."""
        return np.einsum("...kij,kj->...ki", R[..., self.axis_body, :, :], self.axis_local)


def skeleton(model) -> Skeleton:
    """The `Skeleton` of ``model``."""
    nb = model.nbodies
    parent = np.asarray(model.body_parent)
    inertia = np.asarray(model.inertia, dtype=float)
    mass = inertia[:, 0]
    com_local = np.where(mass[:, None] > 0, inertia[:, 1:4] / np.where(mass > 0, mass, 1.0)[:, None], 0.0)
    fixed = np.asarray(model.body_fixed)
    bodies = np.arange(1, nb)
    # a joint that translates a body relative to the world (a floating base, a cart on a
    # rail) is no rigid link: no segment is drawn from the world to it
    node_body = np.asarray(model.node_body)
    moves = np.linalg.norm(np.asarray(model.axes, dtype=float)[:, 3:], axis=1) > 1e-12
    translating = np.zeros(nb, bool)
    np.logical_or.at(translating, node_body[1:], moves)
    on_world = np.asarray(model.body_node)[parent[1:]] == 0
    links = bodies[~(translating[1:] & on_world)]
    has_child = np.zeros(nb, bool)
    has_child[parent[1:]] = True
    far = np.linalg.norm(com_local, axis=1) > 1e-9
    tips = bodies[~has_child[1:] & far[1:]]
    seg_start = np.concatenate([parent[links], tips])
    seg_end = np.concatenate([links, nb + tips])
    moving = bodies[~fixed[1:]]
    # one-DoF joints own exactly one node: their column [w; v] is the axis in body frame
    count = np.bincount(node_body[1:], minlength=nb)
    axes_np = np.asarray(model.axes, dtype=float)
    v_start = np.asarray(model.v_start)
    one = moving[count[moving] == 1]
    cols = axes_np[v_start[one]] if len(one) else np.zeros((0, 6))
    w, v = cols[:, :3], cols[:, 3:]
    rot = np.linalg.norm(w, axis=1) > 1e-12
    axis = np.where(rot[:, None], w, v)
    axis = axis / np.maximum(np.linalg.norm(axis, axis=1, keepdims=True), 1e-300)
    return Skeleton(
        seg_start=seg_start.astype(int),
        seg_end=seg_end.astype(int),
        moving=moving.astype(int),
        axis_body=one.astype(int),
        axis_local=axis,
        axis_prismatic=~rot,
        com_local=com_local,
        massive=bodies[mass[1:] > 0].astype(int),
        names=tuple(model.body_names),
    )


@dataclasses.dataclass(frozen=True)
class Plane:
    """A ground plane ``{x : normal . x = height}`` (``normal`` a unit vector)."""

    height: float
    normal: np.ndarray

    def project(self, x: np.ndarray) -> np.ndarray:
        """Orthogonal projection of points ``(..., 3)`` onto the plane."""
        d = x @ self.normal - self.height
        return x - d[..., None] * self.normal

    def basis(self) -> tuple[np.ndarray, np.ndarray]:
        """Two orthonormal vectors spanning the plane."""
        n = self.normal
        a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        u = np.cross(n, a)
        u /= np.linalg.norm(u)
        return u, np.cross(n, u)


@dataclasses.dataclass(frozen=True)
class Surface:
    """A ground ``z = height_fn(x, y)`` (a height field), drawn on a grid."""

    height_fn: object

    def heights(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        fn = jax.vmap(self.height_fn)
        Z = fn(jax.numpy.asarray(X.ravel()), jax.numpy.asarray(Y.ravel()))
        return np.asarray(Z, dtype=float).reshape(X.shape)

    def project(self, x: np.ndarray) -> np.ndarray:
        """Vertical projection of points ``(..., 3)`` onto the surface."""
        out = np.array(x, dtype=float)
        out[..., 2] = self.heights(out[..., 0], out[..., 1])
        return out

    def grid(self, center: np.ndarray, half: float, n: int = 33):
        """``X, Y, Z`` ``(n, n)`` over the square of half-width ``half`` around ``center``."""
        u = np.linspace(-half, half, n)
        X, Y = np.meshgrid(center[0] + u, center[1] + u, indexing="ij")
        return X, Y, self.heights(X, Y)


def ground_plane(ground) -> Plane | Surface | None:
    """What ``ground`` draws: ``None``; a height (the plane ``z = height``); a terrain
    plane with a numeric ``height`` and an optional ``normal`` (the plane through
    ``(0, 0, height)`` with that normal, as `jaxrbd.ground.Plane`); or a height field with
    a method ``height(x, y)`` (as `jaxrbd.ground.Heightfield`)."""
    if ground is None:
        return None
    if isinstance(ground, bool):
        raise TypeError("ground must be None, a height [m] or a terrain with a `height`, got a bool")
    if isinstance(ground, numbers.Real) or (np.ndim(ground) == 0 and _is_number(ground)):
        return Plane(float(ground), np.array([0.0, 0.0, 1.0]))
    if not hasattr(ground, "height"):
        raise TypeError(
            "ground must be None, a height [m] or a terrain with a `height` attribute "
            f"(a plane, optionally with a `normal`, or a height field), got {type(ground).__name__}"
        )
    height = ground.height
    if callable(height):
        return Surface(height)
    if np.ndim(height) != 0 or not _is_number(height):
        raise TypeError(f"ground.height must be a number or a method height(x, y), got {height!r}")
    normal = getattr(ground, "normal", None)
    n = np.array([0.0, 0.0, 1.0]) if normal is None else np.asarray(normal, dtype=float)
    if n.shape != (3,) or not np.all(np.isfinite(n)) or np.linalg.norm(n) < 1e-12:
        raise ValueError(f"ground.normal must be a non-zero 3-vector, got {normal!r}")
    n = n / np.linalg.norm(n)
    # the plane through (0, 0, height)
    return Plane(float(height) * float(n[2]), n)


def _is_number(x) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return True


def scene_bounds(points: np.ndarray, plane: Plane | Surface | None = None) -> tuple[np.ndarray, float]:
    """Centre and half-width of a cube holding ``points`` ``(..., 3)`` (and their
    projections onto ``plane``), with a margin."""
    P = points.reshape(-1, 3)
    P = P[np.all(np.isfinite(P), axis=1)]
    if plane is not None:
        P = np.concatenate([P, plane.project(P)])
    lo, hi = P.min(axis=0), P.max(axis=0)
    half = max(float(np.max(hi - lo)) / 2 * 1.1, 0.05)
    return (lo + hi) / 2, half
