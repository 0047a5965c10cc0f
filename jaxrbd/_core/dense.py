"""The shared recursions for one state as dense products over the tree's ancestor mask.

On one state a recursion's arithmetic is tiny and its cost is the number of kernels
XLA:CPU runs (a fixed cost each, see ``docs/internals.md``): a scan over the tree runs a
handful of kernels per step, and a level step of several nodes adds a scatter loop with
one iteration per node. In one common coordinate frame the recursions need no step per
node at all (Featherstone 2008, section 6.2, on the CRBA; the same holds for velocities,
accelerations and forces):

* the frames: ``X0_i`` (common frame -> node ``i``) of every node by *pointer doubling*
  (``T_i <- T_i T_{P_i}``, ``P_i <- P_{P_i}``, starting from ``T_i = Xup_i``,
  ``P_i = parent(i)``): ``ceil(log2(depth))`` steps over all nodes at once, one small
  `lax.scan` whose trace does not grow with the tree;
* a velocity is the sum of the joint velocities of the node's ancestors and itself,
  each moved into the common frame: ``v0 = M @ (X0^-1 vJ)`` with the constant mask
  ``M[i, j] = 1`` for ``j`` on the path from the root to ``i``; accelerations likewise;
* a subtree sum (forces, composite inertias) is the transposed product ``M^T @ x``.

The common frame is node 1's for a tree with one root (the floating base or the first
link: quantities stay well scaled wherever the robot stands, as in `jaxrbd._crba`) and
the world's otherwise. Results are returned in node coordinates, exactly what the
scans of `jaxrbd._core.passes` return, so the algorithms use either unchanged
(`jaxrbd._core.passes` dispatches on `Schedule.dense`). Everything is written on the
batch-trailing layout and works for any ``B``; `jaxrbd._core.backend.traversal` picks it
for one state (``B == 1``), where kernels, not arithmetic, decide the time.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from . import algebra as al

__all__ = [
    "DenseTables",
    "accumulate_forces",
    "ancestor_sum",
    "dense_tables",
    "frames",
    "subtree_sum",
    "velocities",
    "velocities_accelerations",
    "world_transforms",
]


class DenseTables:
    """Static tables of one tree (``parent[0] == -1``) for the dense recursions."""

    def __init__(self, parent: tuple[int, ...]):
        n = len(parent)
        par = np.asarray(parent, dtype=np.int64).copy()
        par[0] = 0
        #: ``mask[i, j] = 1`` when node ``j >= 1`` is node ``i`` or one of its ancestors
        mask = np.zeros((n, n))
        for i in range(1, n):
            j = i
            while j > 0:
                mask[i, j] = 1.0
                j = par[j]
        self.n = n
        self.mask = mask
        #: ``jumps[k]``: the ``2^k``-th ancestor of every node (the world's is the world)
        jumps, p = [], par.copy()
        depth = int(mask.sum(axis=1).max()) if n > 1 else 0
        steps = max(int(np.ceil(np.log2(depth))), 0) if depth > 1 else 0
        for _ in range(steps):
            jumps.append(p.copy())
            p = p[p]
        self.jumps = np.asarray(jumps, dtype=np.int32).reshape(len(jumps), n)
        #: one root (node 1 the only child of the world): node 1's frame is the common one
        self.one_root = n > 1 and int((par[1:] == 0).sum()) == 1


@functools.lru_cache(maxsize=256)
def dense_tables(parent: tuple[int, ...]) -> DenseTables:
    """The `DenseTables` of a tree, built once per tree structure."""
    return DenseTables(tuple(parent))


def _matmul(M, x):
    """``M @ x`` along the leading axis of ``x (n, ..., B)`` with a constant mask ``M``."""
    flat = x.reshape((x.shape[0], -1))
    out = jnp.matmul(jnp.asarray(M, x.dtype), flat,
                     precision="highest" if x.dtype == jnp.float32 else None)
    return out.reshape((M.shape[0],) + x.shape[1:])


def _pick(P, x):
    """``x[p]`` for a one-hot ``P (n, n)`` (row ``i`` selects ``p_i``)."""
    return _matmul(P.astype(x.dtype), x)


def ancestor_sum(t: DenseTables, x):
    """``sum_{j root..i} x_j`` for every node ``i`` (``x (n, ..., B)``; row 0 ignored)."""
    return _matmul(t.mask, x)


def subtree_sum(t: DenseTables, x):
    """``sum_{j in subtree(i)} x_j`` for every node ``i`` (row 0: all nodes)."""
    return _matmul(t.mask.T, x)


def world_transforms(t: DenseTables, E, r):
    """``X0_i`` (world -> node ``i``) of every node from ``Xup`` (``E (n, 3, 3, B)``,
    ``r (n, 3, B)``), by pointer doubling; row 0 is the identity."""
    B = max(E.shape[-1], r.shape[-1])
    eye = jnp.broadcast_to(jnp.eye(3, dtype=E.dtype)[:, :, None], (1, 3, 3, B))
    E = jnp.concatenate([eye, jnp.broadcast_to(E[1:], (E.shape[0] - 1, 3, 3, B))], axis=0)
    r = jnp.concatenate([jnp.zeros((1, 3, B), r.dtype),
                         jnp.broadcast_to(r[1:], (r.shape[0] - 1, 3, B))], axis=0)
    if t.jumps.shape[0] == 0:
        return E, r

    rows = jnp.arange(t.n, dtype=jnp.int32)
    n = t.n

    def split(X):
        return X[:, :9].reshape((n, 3, 3, B)), X[:, 9:]

    def step(X, p):
        # the rows p by a one-hot product, not a gather, whose transpose would be a
        # scatter loop under `jax.grad`; E and r packed in one array: one kernel fewer
        Xp = _pick(p[:, None] == rows[None], X)
        En, rn = al.compose(*split(X), *split(Xp))
        return jnp.concatenate([En.reshape((n, 9, B)), rn], axis=1), None

    X, _ = lax.scan(step, jnp.concatenate([E.reshape((n, 9, B)), r], axis=1),
                    jnp.asarray(t.jumps))
    E, r = split(X)
    return E, r


def frames(t: DenseTables, E, r):
    """``(T, X1)``: ``T = (E, r)`` common frame -> node ``i`` for every node, and
    ``X1 = (E1, r1)`` world -> common frame (None when the common frame is the world's)."""
    if not t.one_root:
        return world_transforms(t, E, r), None
    eye = jnp.broadcast_to(jnp.eye(3, dtype=E.dtype)[:, :, None], E.shape[1:])
    X1 = (E[1], r[1])
    E = jnp.concatenate([E[:1], eye[None], E[2:]])
    r = jnp.concatenate([r[:1], jnp.zeros_like(r[1:2]), r[2:]])
    return world_transforms(t, E, r), X1


def _world_X0(T, X1):
    """World -> node transforms from the common-frame ones."""
    if X1 is None:
        return T
    E1, r1 = X1
    E0, r0 = al.compose(T[0], T[1], E1[None], r1[None])
    # the world row stays the identity
    return (jnp.concatenate([T[0][:1], E0[1:]]), jnp.concatenate([T[1][:1], r0[1:]]))


def _to_common_motion(T, m):
    return al.Xinv_motion(T[0], T[1], m)


def velocities(t: DenseTables, E, r, vJ, with_X0=False):
    """``v_i`` in node coordinates ``(n, 6, B)`` (and ``X0``): as
    `jaxrbd._core.passes.velocities`."""
    T, X1 = frames(t, E, r)
    v = al.X_motion(T[0], T[1], ancestor_sum(t, _to_common_motion(T, vJ)))
    return v, (_world_X0(T, X1) if with_X0 else None)


def velocities_accelerations(t: DenseTables, E, r, vJ, vJc, cJ, Sqdd, a_world, with_X0=False):
    """``v_i`` and ``a_i`` in node coordinates (and ``X0``): as
    `jaxrbd._core.passes.velocities_accelerations`."""
    T, X1 = frames(t, E, r)
    v = al.X_motion(T[0], T[1], ancestor_sum(t, _to_common_motion(T, vJ)))
    acc = Sqdd + al.cross_motion(v, vJc)
    if cJ is not None:
        acc = acc + cJ
    # the world's acceleration in the common frame reaches every node
    B = max(acc.shape[-1], a_world.shape[-1])
    a_c = a_world if X1 is None else al.X_motion(X1[0], X1[1], a_world)
    a_c = jnp.broadcast_to(a_c, (6, B))
    a = ancestor_sum(t, _to_common_motion(T, acc)) + a_c[None]
    a = al.X_motion(T[0], T[1], a)
    a = jnp.concatenate([jnp.broadcast_to(a_world, (1, 6, B)), a[1:]])
    return v, a, (_world_X0(T, X1) if with_X0 else None)


def accumulate_forces(t: DenseTables, E, r, f):
    """``f_i`` plus the forces of its whole subtree, in node coordinates: as
    `jaxrbd._core.passes.accumulate_forces`."""
    T, X1 = frames(t, E, r)
    fc = al.XT_force(T[0], T[1], f)  # common frame
    out = al.X_force(T[0], T[1], subtree_sum(t, fc))
    # the world's row: its own force plus every node's, in world coordinates
    total = jnp.sum(fc[1:], axis=0)
    if X1 is not None:
        total = al.XT_force(X1[0], X1[1], total)
    return jnp.concatenate([(f[0] + total)[None], out[1:]])
