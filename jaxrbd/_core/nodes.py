"""Per-node terms every recursion starts from: the schedule, ``Xup`` and ``S``, gravity,
external forces in node coordinates, and the scratch-row padding of the buffers."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from . import algebra as al
from .backend import traversal
from .jcalc import joint_transforms, node_Xtree
from .rows import sum_rows
from .schedule import Schedule
from .topology import topology

__all__ = [
    "Xup_and_S",
    "f_ext_nodes",
    "gravity_acceleration",
    "pad",
    "pad_E",
    "pad_S",
    "pad_inertia",
    "sched",
]

def sched(model, B: int = 1, batch_width: int = 1, device=None) -> Schedule:
    """The traversal schedule of ``model`` for ``B`` states: ``model.traversal``, or for
    ``"auto"`` the one `jaxrbd._core.backend.traversal` picks for the device (``batch_width``:
    nodes per step on a CPU batch)."""
    return topology(model).schedule(traversal(model.traversal, B, batch_width, device))


def Xup_and_S(model, q):
    """``Xup_i = XJ_i Xtree_i`` (``E, r``) and ``S_i`` for every node: ``(nn, ..., B)``."""
    EJ, rJ, S = joint_transforms(model, q)
    Et, rt = node_Xtree(model)
    E, r = al.compose(EJ, rJ, Et, rt)
    return E, r, S


def pad(x, s: Schedule, fill=0.0):
    """Append the scratch rows (``nbuf - nn``) to a per-node array (leading axis)."""
    extra = s.nbuf - x.shape[0]
    if extra <= 0:
        return x
    filler = jnp.full((extra,) + x.shape[1:], fill, x.dtype)
    return jnp.concatenate([x, filler], axis=0)


def pad_E(E, s: Schedule):
    extra = s.nbuf - E.shape[0]
    eye = jnp.broadcast_to(jnp.eye(3, dtype=E.dtype)[:, :, None], (extra, 3, 3, E.shape[-1]))
    return jnp.concatenate([E, eye], axis=0)


def pad_S(S, s: Schedule):
    """Scratch rows get ``S = e_1`` so their ``D`` stays positive (no NaN anywhere)."""
    extra = s.nbuf - S.shape[0]
    e1 = jnp.zeros((extra, 6, S.shape[-1]), S.dtype).at[:, 0].set(1.0)
    return jnp.concatenate([S, e1], axis=0)


def pad_inertia(I, s: Schedule):
    extra = s.nbuf - I.shape[0]
    unit = jnp.asarray([1.0, 0, 0, 0, 1.0, 0, 1.0, 0, 0, 1.0], I.dtype)
    filler = jnp.broadcast_to(unit[None, :, None], (extra, 10, I.shape[-1]))
    return jnp.concatenate([I, filler], axis=0)


def gravity_acceleration(model, B, dtype):
    """Acceleration of the world frame that emulates gravity: ``[0; -g]``, ``(6, B)``."""
    g = jnp.asarray(model.gravity, dtype)
    return jnp.broadcast_to(jnp.concatenate([jnp.zeros(3, dtype), -g])[:, None], (6, B))


def f_ext_nodes(model, f_ext, E0, r0):
    """External forces (world coordinates at the world origin) -> node coordinates.

    Rows of bodies merged into the same node add up (a force on a fixed-merged body
    acts on its node); the world's rows are dropped.
    """
    t = topology(model)
    node = np.asarray(t.body_node)
    f = sum_rows(t.nn, np.where(node > 0, node, -1), f_ext)  # the world's rows dropped
    return al.X_force(E0, r0, f)
