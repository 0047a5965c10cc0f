"""Joint-space inertia by the composite-rigid-body algorithm (Felis 2017, Alg. 3, RBDA Table 6.2).

Table 6.2 accumulates the composite inertias up the tree in each body's own frame and
then walks every column's force up through its ancestors. With every quantity in one
coordinate frame instead (Featherstone 2008, section 6.2), no walk is needed: the
composite inertia of a subtree is the plain sum of its bodies' inertias, and
``H_ij = S_i . (IC_j S_j)`` for each pair of a DoF ``j`` and an ancestor-or-self ``i``.
That frame here is node 1's (the floating base, or the first body of a fixed-base
chain; with several roots, the world's axes at node 1's origin), so that the inertias
stay well scaled wherever the robot stands and the root joint's columns stay exact.
The entries go into ``H`` by one gather with a static index table, on the whole batch
at once (batch-first), after the per-node work in cache-sized blocks.
"""

from __future__ import annotations

import jax.numpy as jnp

from ._core import algebra as al
from ._core import ffi
from ._core.jcalc import node_inertias
from ._core.native_vmap import blocked, native_vmap
from ._core.nodes import Xup_and_S, sched
from ._core.passes import subtree_sums, world_transforms
from ._core.topology import topology

__all__ = ["crba_batched", "crba_single"]


def _columns(model, q, s):
    """``S_j`` and ``IC_j S_j`` of every DoF in one frame, ``(nv, 6, B)`` each."""
    E, r, S = Xup_and_S(model, q)
    if model.node_parent.count(0) == 1:
        # one root: node 1's own frame is the common one (its Xup set to identity), so
        # the root joint's columns stay exact unit vectors
        eye = jnp.broadcast_to(jnp.eye(3, dtype=E.dtype)[:, :, None], E.shape[1:])
        E = jnp.concatenate([E[:1], eye[None], E[2:]])
        r = jnp.concatenate([r[:1], jnp.zeros_like(r[1:2]), r[2:]])
    E0, r0 = world_transforms(s, E, r)
    E0, r0 = E0[1:], r0[1:] - r0[1:2]  # several roots: world axes, node 1's origin
    S0 = al.Xinv_motion(E0, r0, S[1:])  # (nv, 6, B)
    IC = subtree_sums(al.XT_compact_X(E0, r0, node_inertias(model)[1:]), s)
    return S0, al.inertia_mul(IC, S0)


def _entries(model, q):
    """The entries ``S_i . IC_j S_j`` of ``H`` for the pairs of `Topology.mass_matrix_pairs`,
    without armature: ``q (nq, B)`` -> ``(B, npairs)``."""
    S0, F = _columns(model, q, sched(model, q.shape[-1]))
    i, j, _ = topology(model).mass_matrix_pairs
    return jnp.moveaxis(al.dot(S0[i], F[j]), -1, 0)


def _dense(model, q, s):
    """One state's ``H (1, nv, nv)`` without armature: every product ``S_i . IC_j S_j``
    (a few thousand flops), then the entry of each pair chosen by the ancestor masks:
    no gather, whose transpose under `jax.grad` would be a scatter loop."""
    S0, F = _columns(model, q, s)
    Hs = jnp.einsum("ick,jck->kij", F, S0)  # IC_i S_i . S_j: H_ij for j above i
    t = topology(model)
    return jnp.where(t.sub_v, Hs, jnp.where(t.anc_v, jnp.swapaxes(Hs, 1, 2), 0.0))


def crba_batched(model, q):
    """CRBA on a batch: ``q (nq, B)`` (batch-trailing) -> ``H (B, nv, nv)`` (batch-first).

    The per-node work runs in blocks of the backend's size; the assembly of ``H``, one
    gather from the entries, runs on the whole batch (per block it is slower: measured
    in ``benchmarks/LOG.md``).
    """
    nv = model.nv
    if nv == 0:
        return jnp.zeros((q.shape[-1], 0, 0), q.dtype)
    s = sched(model, q.shape[-1])
    if s.dense:  # one state
        return _dense(model, q, s) + jnp.diag(model.armature)[None]
    vals = blocked(lambda qb: _entries(model, qb), (q,), batch_first=True)
    _, _, table = topology(model).mass_matrix_pairs
    src = jnp.concatenate([vals, jnp.zeros_like(vals[:, :1])], axis=1)  # last column: 0
    H = src[:, table].reshape((-1, nv, nv))
    return H + jnp.diag(model.armature)[None]  # rotor inertia: H + diag(armature)


crba_single = native_vmap(crba_batched, batch_first=True, kernel=ffi.crba)
