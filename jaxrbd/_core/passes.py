"""The recursions shared by the algorithms, each one `lax.scan` over the schedule, or for
a ``"dense"`` schedule (one state) dense products over the ancestor mask
(`jaxrbd._core.dense`), with the same results.

Everything is in the batch-trailing layout of `algebra` and on per-node buffers with
``nbuf`` rows (nodes + scratch rows, see `schedule`). Row 0 is the world.
"""

from __future__ import annotations

import jax.numpy as jnp

from . import algebra as al
from . import dense
from .nodes import pad, pad_E
from .rows import node_rows
from .schedule import Schedule, add, backward_scan, forward_scan, put, take


def world_transforms(s: Schedule, E, r):
    """``X0_i`` (world -> node ``i``) of every node: ``X0_i = Xup_i X0_lam``."""
    if s.dense:
        return dense.world_transforms(dense.dense_tables(s.parent), E, r)
    B = E.shape[-1]
    E0 = pad_E(E, s).at[0].set(jnp.eye(3, dtype=E.dtype)[:, :, None])
    r0 = pad(jnp.zeros_like(r), s)

    def step(c, idx, par, x):
        E0, r0 = c
        Ei, ri = x
        Ep, rp = take(E0, par, once=True), take(r0, par)
        En, rn = al.compose(Ei, ri, Ep, rp)
        return put(E0, idx, En), put(r0, idx, rn)

    E0, r0 = forward_scan(step, (E0, jnp.broadcast_to(r0, r0.shape[:-1] + (B,))), s,
                          (pad_E(E, s), pad(r, s)))
    return E0[: s.n], r0[: s.n]


def velocities(s: Schedule, E, r, vJ, with_X0=False):
    """``v_i = Xup_i v_lam + vJ_i`` (and optionally ``X0``), ``(nn, 6, B)``."""
    if s.dense:
        return dense.velocities(dense.dense_tables(s.parent), E, r, vJ, with_X0)
    dtype = vJ.dtype
    carry = (jnp.zeros((s.nbuf, 6, vJ.shape[-1]), dtype),)
    if with_X0:
        carry += (
            jnp.broadcast_to(jnp.eye(3, dtype=dtype)[:, :, None], (s.nbuf, 3, 3, E.shape[-1])),
            jnp.zeros((s.nbuf, 3, r.shape[-1]), dtype),
        )

    def step(c, idx, par, x):
        Ei, ri, vJi = x
        out = (put(c[0], idx, al.X_motion(Ei, ri, take(c[0], par)) + vJi),)
        if with_X0:
            En, rn = al.compose(Ei, ri, take(c[1], par, once=True), take(c[2], par))
            out += (put(c[1], idx, En), put(c[2], idx, rn))
        return out

    c = forward_scan(step, carry, s, (pad_E(E, s), pad(r, s), pad(vJ, s)))
    return c[0][: s.n], ((c[1][: s.n], c[2][: s.n]) if with_X0 else None)


def velocities_accelerations(s: Schedule, E, r, vJ, vJc, cJ, Sqdd, a_world, with_X0=False):
    """RNEA forward pass: ``v_i`` and ``a_i = Xup_i a_lam + S_i qdd_i + v_i x vJc_i + cJ_i``."""
    if s.dense:
        return dense.velocities_accelerations(dense.dense_tables(s.parent), E, r, vJ, vJc,
                                              cJ, Sqdd, a_world, with_X0)
    B = max(vJ.shape[-1], Sqdd.shape[-1], E.shape[-1])
    dtype = vJ.dtype
    v0 = jnp.zeros((s.nbuf, 6, B), dtype)
    a0 = v0.at[0].set(jnp.broadcast_to(a_world, (6, B)))
    acc = Sqdd if cJ is None else Sqdd + cJ
    xs = (pad_E(E, s), pad(r, s), pad(vJ, s), pad(vJc, s), pad(acc, s))
    carry = (v0, a0)
    if with_X0:
        carry += (
            jnp.broadcast_to(jnp.eye(3, dtype=dtype)[:, :, None], (s.nbuf, 3, 3, E.shape[-1])),
            jnp.zeros((s.nbuf, 3, r.shape[-1]), dtype),
        )

    def step(c, idx, par, x):
        Ei, ri, vJi, vJci, acci = x
        vi = al.X_motion(Ei, ri, take(c[0], par)) + vJi
        ai = al.X_motion(Ei, ri, take(c[1], par)) + acci + al.cross_motion(vi, vJci)
        out = (put(c[0], idx, vi), put(c[1], idx, ai))
        if with_X0:
            En, rn = al.compose(Ei, ri, take(c[2], par, once=True), take(c[3], par))
            out += (put(c[2], idx, En), put(c[3], idx, rn))
        return out

    c = forward_scan(step, carry, s, xs)
    X0 = (c[2][: s.n], c[3][: s.n]) if with_X0 else None
    return c[0][: s.n], c[1][: s.n], X0


def accumulate_forces(s: Schedule, E, r, f):
    """Backward pass ``f_lam += Xup_i^T f_i``; returns the accumulated ``f`` ``(nn, 6, B)``."""
    if s.dense:
        return dense.accumulate_forces(dense.dense_tables(s.parent), E, r, f)
    f = pad(f, s)

    def step(f, idx, par, x):
        Ei, ri = x
        return add(f, par, al.XT_force(Ei, ri, take(f, idx)))

    return backward_scan(step, f, s, (pad_E(E, s), pad(r, s)))[: s.n]


def subtree_sums(x, s: Schedule):
    """``sum_{k in subtree(i)} x_k`` for every DoF ``i`` (``x (nv, k, B)``, one row per
    DoF): one backward scan over ``s`` adding each row into its parent's."""
    if s.dense:
        x = node_rows(x)
        return dense.subtree_sum(dense.dense_tables(s.parent), x)[1:]
    x = pad(node_rows(x), s)

    def step(buf, idx, par, _):
        return add(buf, par, take(buf, idx))

    return backward_scan(step, x, s, ())[1 : s.n]
