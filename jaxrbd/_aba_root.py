"""The floating-base shortcut of the articulated-body passes on batches.

A multi-DoF root joint (a floating base: six one-DoF nodes) is a chain whose inner nodes
have ``Xup = 1``. In the generic passes each of those nodes is a step of its own that
pays a full articulated-inertia transform, half of whose width is padding on a
``level2`` schedule. On batches (`root_chain` > 0) the passes of `jaxrbd._aba` stop
their main scan above these nodes and run them here instead: rank-one updates of one
dense 6x6 ``IA`` per node, with no transform and no padding. Single states keep the
plain passes: the shortcut costs compile time that one state does not win back (the
measurements are in ``benchmarks/LOG.md``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._core import algebra as al
from ._core.packing import unpack
from ._core.schedule import Schedule
from ._core.topology import MULTI_DOF_KINDS

__all__ = ["root_acceleration", "root_bias", "root_chain", "root_inertia"]


def root_chain(model, s: Schedule, B: int) -> int:
    """Number ``k`` of nodes of a multi-DoF root joint (a floating base: 6) whose steps the
    articulated-body passes on batches run outside their main scan, or 0.

    Nonzero when ``B > 1``, the world has one child, its joint is a multi-DoF kind
    whose inner nodes have ``Xup = 1`` (see `jaxrbd._core.jcalc`), and the first ``k``
    steps of ``s`` hold the nodes ``1..k`` alone. The shortcut costs compile time, which one state does not
    win back, so single calls keep the plain passes.
    """
    parent = model.node_parent
    if B == 1 or len(parent) < 3 or parent.count(0) != 1:
        return 0
    if model.joint_kind[model.node_body[1]] not in MULTI_DOF_KINDS:
        return 0
    k = model.node_body.count(model.node_body[1])
    if k < 2 or s.steps.shape[0] < k:
        return 0
    head = s.steps[:k]
    if not ((head[:, 0] == np.arange(1, k + 1)).all() and (head[:, 1:] >= s.n).all()):
        return 0
    return k


def root_inertia(buf, k, S, c, tau, arm):
    """The backward steps of the root joint's nodes ``k..1`` (`root_chain`).

    ``buf`` is the inertia pass's buffer after the scan over the other steps; row ``k``
    holds the root body's articulated inertia (and bias force). The inner nodes have
    ``Xup = 1``, so each step is a rank-one update of one dense 6x6 matrix ``IA``
    (``(6, 6, B)``) with no transform, in a scan of its own: far cheaper than ``k``
    steps of the generic pass, half of whose width would be padding. Node 1's
    contribution to the world is not needed.

    Returns ``(U (k, 6, B), Dinv (k, B))``, and ``u (k, B)`` with ``tau``, in node order.
    """
    def node(j):
        A, Bk, C, p = unpack(buf[j])
        return al.blocks_dense(A, Bk, C), p

    M, p = node(k)
    # the step of node j adds node j-1's own terms (zero for the usual massless nodes)
    inner = [node(j) for j in range(1, k)]
    Mi = jnp.stack([jnp.zeros_like(M)] + [x[0] for x in inner])
    pi = jnp.stack([jnp.zeros_like(p)] + [x[1] for x in inner])
    have_tau = tau is not None
    xs = (S[1 : k + 1], Mi, pi, arm[1 : k + 1])
    xs += (c[1 : k + 1], tau[1 : k + 1]) if have_tau else ()

    def step(carry, x):
        M, p = carry
        Sj = x[0]
        U = al.dense_mul(M, Sj)
        Dinv = 1.0 / (al.dot(Sj, U) + x[3])
        M = M - U[:, None] * (U * Dinv[None])[None]
        ys = (U, Dinv)
        if have_tau:
            u = x[5] - al.dot(Sj, p)
            p = p + al.dense_mul(M, x[4]) + U * (Dinv * u)[None]
            ys += (u,)
        return (M + x[1], p + x[2]), ys

    return jax.lax.scan(step, (M, p), xs, reverse=True)[1]


def root_bias(pA, k, S, U, Dinv, tau):
    """`jaxrbd._aba._bias_pass`'s steps of the root joint's nodes (see `root_inertia`): ``u (k, B)``."""
    B = tau.shape[-1]
    pi = jnp.concatenate([jnp.zeros_like(pA[:1]), pA[1:k]])  # node j-1's own terms
    xs = (jnp.broadcast_to(S[1 : k + 1], (k, 6, B)), U, Dinv, tau[1 : k + 1], pi)

    def step(p, x):
        Sj, Uj, Dj, tj, pj = x
        u = tj - al.dot(Sj, p)
        return p + Uj * (Dj * u)[None] + pj, u

    return jax.lax.scan(step, pA[k], xs, reverse=True)[1]


def root_acceleration(k, E, r, S, c, U, Dinv, u, a_world):
    """`jaxrbd._aba._acceleration_pass`'s steps of the root joint's nodes ``1..k`` (one small scan):
    returns the root body's acceleration ``a_k (6, B)`` and ``qdd (k, B)``."""
    a = al.X_motion(E[1], r[1], a_world)
    B = max(a.shape[-1], u.shape[-1])  # E broadcasts in minv_times
    a = jnp.broadcast_to(a, (6, B))
    Sk = jnp.broadcast_to(S[1 : k + 1], (k, 6, B))
    xs = (Sk, U, Dinv, u) + (() if c is None else (c[1 : k + 1],))

    def step(a, x):
        Sj, Uj, Dj, uj = x[:4]
        if c is not None:
            a = a + x[4]
        qj = Dj * (uj - al.dot(Uj, a))
        return a + Sj * qj[None], qj

    return jax.lax.scan(step, a, xs)
