"""Motion-capture markers: named points fixed on bodies, their positions and Jacobians.

A `MarkerSet` names ``K`` markers, each a point fixed on a body (given by an offset in
that body's coordinates). `marker_positions` and `marker_jacobian` evaluate all of
them with one kinematics pass over the tree (the node transforms and world-frame motion
subspaces are shared by every marker), and `marker_kinematics` returns both from that
same pass, which is what a Kalman filter's measurement update needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._core import algebra as al
from ._core.checks import as_float, check_state
from ._core.topology import topology
from ._kinematics import (
    body_frames_batched,
    node_jacobian_batched,
    node_poses_batched,
    run_native,
    support,
)
from ._model import check_model

__all__ = ["MarkerSet", "marker_jacobian", "marker_kinematics", "marker_positions"]


def _offsets(x):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


class MarkerSet(eqx.Module):
    """Named markers: points fixed on bodies (the measurement model of motion capture).

    The names and bodies are static; the offsets are an array leaf, so `jax.grad`
    gives the sensitivity of anything computed from marker positions to where the
    markers sit on the bodies (marker-offset calibration), and `jax.vmap` works over
    stacked offsets.

    Attributes:
        names: ``K`` unique marker names (e.g. ``"LASI"``).
        bodies: ``K`` bodies the markers are fixed on, names or ids (resolved against
            the model when it is used; fixed-merged bodies and frames are fine).
        offsets: `(K, 3)` each marker's position in its body's coordinates [m].

    Raises:
        ValueError: names not unique, ``names``/``bodies``/``offsets`` of different
            lengths, offsets not of shape `(K, 3)`, no markers.
        TypeError: a name that is not a str, a body that is not a str or int.

    Example:
        >>> ms = jaxrbd.MarkerSet(("tip", "mid"), ("body_3", "body_2"),
        ...                       jnp.array([[0.0, 0.0, -1.0], [0.0, 0.0, -0.5]]))
        >>> len(ms), ms.index("mid")
        (2, 1)
    """

    names: tuple[str, ...] = eqx.field(static=True, converter=tuple)
    bodies: tuple[str | int, ...] = eqx.field(static=True, converter=tuple)
    offsets: Float[Array, "*batch nmarkers 3"] = eqx.field(converter=_offsets)

    def __check_init__(self):
        K = len(self.names)
        if K == 0:
            raise ValueError("MarkerSet: no markers (names is empty)")
        for n in self.names:
            if not isinstance(n, str):
                raise TypeError(f"MarkerSet: marker names must be str, got {n!r}")
        if len(set(self.names)) != K:
            dup = sorted({n for n in self.names if self.names.count(n) > 1})
            raise ValueError(f"MarkerSet: duplicate marker names {dup}")
        if len(self.bodies) != K:
            raise ValueError(
                f"MarkerSet: {len(self.bodies)} bodies for {K} marker names, expected one each"
            )
        for n, b in zip(self.names, self.bodies):
            if isinstance(b, bool) or not isinstance(b, (str, int, np.integer)):
                raise TypeError(f"MarkerSet: marker {n!r} has body {b!r}, expected a name or an id")
        shape = tuple(self.offsets.shape)
        if shape[len(shape) - 2 :] != (K, 3):
            raise ValueError(f"MarkerSet.offsets has shape {shape}, expected ({K}, 3)")

    @classmethod
    def from_dict(cls, markers: Mapping[str, tuple]) -> MarkerSet:
        """A marker set from ``{name: (body, offset)}`` (insertion order is kept).

        Example:
            >>> ms = jaxrbd.MarkerSet.from_dict({"tip": ("body_3", (0.0, 0.0, -1.0))})
            >>> ms.names
            ('tip',)
        """
        if not isinstance(markers, Mapping) or not markers:
            raise ValueError("MarkerSet.from_dict: expected a non-empty {name: (body, offset)} dict")
        names, bodies, offsets = [], [], []
        for name, entry in markers.items():
            if not isinstance(entry, Sequence) or len(entry) != 2:
                raise ValueError(
                    f"MarkerSet.from_dict: marker {name!r} is {entry!r}, expected (body, offset)"
                )
            names.append(name)
            bodies.append(entry[0])
            offsets.append(np.asarray(entry[1], dtype=np.float64))
        return cls(tuple(names), tuple(bodies), jnp.asarray(np.stack(offsets)))

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Position of the marker ``name`` in the set (rows of `marker_positions`)."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"unknown marker {name!r}; markers are {list(self.names)}") from None

    def subset(self, names: Sequence[str]) -> MarkerSet:
        """The markers ``names``, in that order (e.g. the ones a lab actually records).

        Example:
            >>> ms = jaxrbd.MarkerSet.from_dict({"a": (1, (0, 0, 0)), "b": (2, (0, 0, 0))})
            >>> ms.subset(["b"]).bodies
            (2,)
        """
        idx = [self.index(n) for n in names]
        return MarkerSet(
            tuple(self.names[i] for i in idx),
            tuple(self.bodies[i] for i in idx),
            self.offsets[..., np.asarray(idx, dtype=np.int64), :],
        )


def _check(model, q, markers):
    if not isinstance(markers, MarkerSet):
        raise TypeError(f"markers must be a MarkerSet, got {type(markers).__name__}")
    bodies = []
    for name, b in zip(markers.names, markers.bodies):
        try:
            bodies.append(model.body_id(b))
        except (ValueError, TypeError) as e:
            raise type(e)(f"marker {name!r}: {e}") from None
    (q,) = check_state(model, q=q)
    offsets = as_float("markers.offsets", markers.offsets, model.dtype)
    if offsets.shape != (len(markers), 3):
        raise ValueError(
            f"markers.offsets has shape {offsets.shape}, expected ({len(markers)}, 3) "
            "(use jax.vmap over stacked offsets)"
        )
    return q, offsets, tuple(bodies)


def _positions(model, q, offsets, bodies):
    E0, r0 = body_frames_batched(model, bodies, *node_poses_batched(model, q))
    return r0 + al.mtv(E0, offsets)


def _positions_jacobian(model, q, offsets, bodies):
    """Batch-trailing: positions ``(K, 3, B)`` and Jacobian ``(K, 3, nv, B)`` from one pass."""
    E0n, r0n, S0 = node_jacobian_batched(model, q)  # S0: (nv, 6, B) world axes at the world origin
    E0, r0 = body_frames_batched(model, np.asarray(bodies), E0n, r0n)
    P = r0 + al.mtv(E0, offsets)  # (K, 3, B) world
    node = topology(model).body_node[np.asarray(bodies)]
    mask = jnp.asarray(support(model)[node], S0.dtype)  # (K, nv) static: velocity j moves marker k
    w = al.ang(S0)[None]  # (1, nv, 3, B)
    vP = al.lin(S0)[None] + al.cross(w, P[:, None])  # velocity of P from column j
    J = jnp.swapaxes(vP * mask[:, :, None, None], 1, 2)  # (K, 3, nv, B)
    return P, J


def marker_positions(model, q, markers):
    """World positions of all markers, in one kinematics pass.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        markers: a `MarkerSet` with ``K`` markers.

    Returns:
        `(K, 3)`: row ``k`` is marker ``k`` in world coordinates [m].

    Raises:
        ValueError: ``q`` of the wrong shape, a marker on an unknown body.
        TypeError: ``markers`` is not a `MarkerSet`.

    Example:
        >>> ms = jaxrbd.MarkerSet.from_dict({"tip": ("body_3", (0.0, 0.0, -1.0))})
        >>> jaxrbd.marker_positions(model, jnp.zeros(model.nq), ms)
        Array([[ 0.,  0., -3.]], dtype=float64)
    """
    check_model(model)
    with jax.named_scope("jaxrbd.marker_positions"):
        q, offsets, bodies = _check(model, q, markers)
        return run_native(_positions, model, (q, offsets), (bodies,))


def marker_jacobian(model, q, markers):
    """Stacked Jacobian of all marker positions: ``d vec(marker_positions)/dt = J @ qd``.

    Rows are ``3 k + i`` for marker ``k`` and world axis ``i`` (the row-major flattening
    of `marker_positions`). For a free joint the columns act on the body-coordinate
    velocity, so ``J v`` is also the first-order change of the positions under
    ``integrate(model, q, v)``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        markers: a `MarkerSet` with ``K`` markers.

    Returns:
        `(3 K, nv)` in world coordinates [m per unit of ``qd``].

    Example:
        >>> ms = jaxrbd.MarkerSet.from_dict({"tip": ("body_3", (0.0, 0.0, -1.0))})
        >>> jaxrbd.marker_jacobian(model, q, ms).shape
        (3, 9)
    """
    check_model(model)
    with jax.named_scope("jaxrbd.marker_jacobian"):
        return marker_kinematics(model, q, markers)[1]


def marker_kinematics(model, q, markers):
    """Marker positions and their stacked Jacobian from one kinematics pass.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        markers: a `MarkerSet` with ``K`` markers.

    Returns:
        ``(P, J)``: `P` `(K, 3)` as `marker_positions`, `J` `(3 K, nv)` as
        `marker_jacobian`.

    Example:
        >>> ms = jaxrbd.MarkerSet.from_dict({"tip": ("body_3", (0.0, 0.0, -1.0))})
        >>> P, J = jaxrbd.marker_kinematics(model, q, ms)
        >>> bool(jnp.allclose(J @ qd, jaxrbd.point_velocity(model, q, qd, "body_3", ms.offsets[0])))
        True
    """
    check_model(model)
    with jax.named_scope("jaxrbd.marker_kinematics"):
        q, offsets, bodies = _check(model, q, markers)
        P, J = run_native(_positions_jacobian, model, (q, offsets), (bodies,))
        return P, J.reshape(3 * len(bodies), model.nv)
