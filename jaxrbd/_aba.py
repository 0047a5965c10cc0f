"""Forward dynamics by the articulated-body algorithm (Felis 2017, Alg. 2, RBDA Table 7.1).

Every node has one DoF, so ``U`` is a 6-vector and ``D`` a scalar in every step.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ._aba_root import root_acceleration, root_bias, root_chain, root_inertia
from ._core import algebra as al
from ._core import ffi
from ._core.jcalc import joint_velocity_terms, node_inertias
from ._core.native_vmap import native_vmap
from ._core.nodes import (
    Xup_and_S,
    f_ext_nodes,
    gravity_acceleration,
    pad,
    pad_E,
    pad_inertia,
    pad_S,
    sched,
)
from ._core.packing import pack, unpack
from ._core.passes import velocities
from ._core.rows import node_rows, place_rows
from ._core.schedule import add, put, scan_schedule, take
from ._dense_dynamics import fd_dense, minv_times_dense, use_cholesky

__all__ = ["aba_batched", "aba_single", "minv_times_batched", "node_armature", "project", "velocity_pass"]

#: Nodes per step of the articulated-body passes on batches under ``traversal="auto"``
#: (see `jaxrbd._core.backend.traversal`): one node per step updates the carried buffer in
#: place, without the scatter loops of wider steps (measurements: benchmarks/LOG.md).
ABA_WIDTH = 1


def project(A, Bk, C, Si, pi, taui, armi=None):
    """``U = IA S``, ``D = S^T U + armature``, ``u = tau - S^T pA`` and ``IA - U U^T / D``.

    The armature (reflected rotor inertia) adds to ``D`` only: it is inertia felt by the
    joint's own coordinate, not by the body, so it never reaches ``IA`` or the parent
    (Featherstone 2008, §9.4 on gears).
    """
    # U's halves are computed apart and joined only for the caller: ``D`` from the
    # joined U made XLA materialise the join in a kernel of its own
    w, vv = al.ang(Si), al.lin(Si)
    Uw = al.mv(A, w) + al.mv(Bk, vv)
    Uv = al.mtv(Bk, w) + al.mv(C, vv)
    U = al.join(Uw, Uv)
    D = al.dot(w, Uw) + al.dot(vv, Uv)
    if armi is not None:
        D = D + armi
    Dinv = 1.0 / D
    k = Dinv[..., None, None, :]
    Ia = (A - k * al.outer(Uw, Uw), Bk - k * al.outer(Uw, Uv), C - k * al.outer(Uv, Uv))
    u = None if taui is None else taui - al.dot(Si, pi)
    return U, Dinv, u, Ia


def node_armature(model, B):
    """The armature of every node, world row 0 included: ``(nn, B)``."""
    arm = node_rows(model.armature)
    return jnp.broadcast_to(arm[:, None], (arm.shape[0], B))


def _inertia_pass(s, E, r, S, Ic, arm, c=None, pA=None, tau=None, root=0):
    """Backward ABA pass. With ``pA`` it also propagates bias forces.

    ``arm``: the armature of every node, ``(nn, B)`` (`node_armature`).

    The articulated inertia ``IA = [[A, Bk], [Bk^T, C]]`` and the bias force ``pA`` of
    every node live in one carried buffer of packed rows (`jaxrbd._core.packing`).

    Returns per-step ``(U, Dinv)`` (and ``u``) stacked as ``(nsteps, W, ...)``, and the
    same for the ``root`` chain's nodes ``1..root`` as ``(root, ...)`` (or None).
    """
    B = E.shape[-1]
    A, Bk, C = al.inertia_blocks(pad_inertia(Ic, s))
    shape = lambda x: jnp.broadcast_to(x, x.shape[:-1] + (B,))
    buf = pack(shape(A), shape(Bk), shape(C), None if pA is None else pad(pA, s))
    xs = (pad_E(E, s), pad(r, s), pad_S(S, s), pad(arm, s))
    if pA is not None:
        xs += (pad(c, s), pad(tau, s))

    # Each step's per-step outputs go out as ONE stacked array ``[U; Dinv; u]`` (split
    # after the scan): as three, each would be written by a kernel of its own, and every
    # kernel of a scan step costs XLA:CPU runtime overhead per step (benchmarks/LOG.md).
    def step(buf, idx, par, x):
        Ei, ri, Si, armi = x[:4]
        A, Bk, C, pi = unpack(take(buf, idx, once=True))
        if pA is None:
            U, Dinv, _, Ia = project(A, Bk, C, Si, None, None, armi)
            ys = jnp.concatenate([U, Dinv[..., None, :]], axis=-2)
            contrib = pack(*al.XT_blocks_X(Ei, ri, *Ia))
        else:
            ci, taui = x[4:]
            U, Dinv, u, Ia = project(A, Bk, C, Si, pi, taui, armi)
            pa = pi + al.blocks_mul(*Ia, ci) + U * (Dinv * u)[..., None, :]
            ys = jnp.concatenate([U, Dinv[..., None, :], u[..., None, :]], axis=-2)
            contrib = pack(*al.XT_blocks_X(Ei, ri, *Ia), al.XT_force(Ei, ri, pa))
        return add(buf, par, contrib), ys

    buf, ys = scan_schedule(step, buf, s.tail(root), xs, reverse=True)
    ys = (ys[..., :6, :], ys[..., 6, :]) + (() if pA is None else (ys[..., 7, :],))
    if not root:
        return ys, None
    Sb = jnp.broadcast_to(S, S.shape[:-1] + (B,))
    return ys, root_inertia(buf, root, Sb, c, tau, arm)


def _bias_pass(s, E, r, S, U, Dinv, tau, root=None):
    """Backward pass for ``pA`` only, reusing ``U``, ``D`` (zero velocity, no gravity).

    ``root``: the ``(U, Dinv)`` of the root chain (`jaxrbd._aba_root.root_inertia`), or None. Returns
    ``u`` per step and ``u`` of the root chain's nodes (or None).
    """
    B = tau.shape[-1]
    k = 0 if root is None else root[0].shape[0]
    pA = jnp.zeros((s.nbuf, 6, B), tau.dtype)
    xs = (pad_E(E, s), pad(r, s), pad_S(S, s), pad(tau, s))

    def step(pA, idx, par, x):
        Ei, ri, Si, taui = x[:4]
        Ui, Dinvi = x[4:]
        pi = take(pA, idx, once=True)
        u = taui - al.dot(Si, pi)
        pa = pi + Ui * (Dinvi * u)[..., None, :]
        return add(pA, par, al.XT_force(Ei, ri, pa)), u

    pA, u = scan_schedule(step, pA, s.tail(k), xs, reverse=True, step_xs=(U, Dinv))
    return u, (None if root is None else root_bias(pA, k, S, *root, tau))


def _acceleration_pass(s, E, r, S, c, U, Dinv, u, a_world, root=None):
    """Forward ABA pass: ``a_i = Xup a_lam + c_i``, ``qdd_i = D^-1 (u - U^T a_i)``.

    ``root``: ``(U, Dinv, u)`` of the root chain's nodes (`jaxrbd._aba_root.root_inertia`), or None.
    """
    B = max(u.shape[-1], E.shape[-1])
    k = 0 if root is None else root[0].shape[0]
    a0 = jnp.zeros((s.nbuf, 6, B), u.dtype).at[0].set(jnp.broadcast_to(a_world, (6, B)))
    if k:
        a_root, qdd_root = root_acceleration(k, E, r, S, c, *root, a_world)
        a0 = a0.at[k].set(jnp.broadcast_to(a_root, (6, B)))
    xs = (pad_E(E, s), pad(r, s), pad_S(S, s)) + (() if c is None else (pad(c, s),))

    def step(a, idx, par, x):
        Ei, ri, Si = x[:3]
        Ui, Dinvi, ui = x[-3:]
        ai = al.X_motion(Ei, ri, take(a, par))
        if c is not None:
            ai = ai + x[3]
        qddi = Dinvi * (ui - al.dot(Ui, ai))
        ai = ai + Si * qddi[..., None, :]
        return put(a, idx, ai), qddi

    st = s.tail(k)
    _, qdd_steps = scan_schedule(step, a0, st, xs, step_xs=(U, Dinv, u))
    # scatter the per-step outputs back to node order (static indices)
    flat = qdd_steps.reshape((-1,) + qdd_steps.shape[2:])
    parts = [(st.slot_nodes, flat)]
    if k:
        parts.append((np.arange(1, k + 1), jnp.broadcast_to(qdd_root, (k,) + flat.shape[1:])))
    return place_rows(s.n, parts)[1:]


def velocity_pass(model, q, qd, f_ext=None):
    """The first pass shared by ABA and hybrid dynamics (batch-trailing layout).

    Returns ``(s, E, r, S, Ic, c, pA)``: the schedule, joint transforms and motion
    subspaces, node inertias, velocity-product accelerations ``c = v x vJ + cJ`` and
    bias forces ``pA = v x* Ic v - f_ext`` of every node.
    """
    s = sched(model, q.shape[-1], batch_width=ABA_WIDTH)
    E, r, S = Xup_and_S(model, q)
    vJ, vJc, cJ = joint_velocity_terms(model, q, qd, S)
    v, X0 = velocities(s, E, r, vJ, with_X0=f_ext is not None)
    c = al.cross_motion(v, vJc)
    if cJ is not None:
        c = c + cJ
    Ic = node_inertias(model)
    pA = al.cross_force(v, al.inertia_mul(Ic, v))
    if f_ext is not None:
        pA = pA - f_ext_nodes(model, f_ext, *X0)
    return s, E, r, S, Ic, c, pA


def aba_batched(model, q, qd, tau, f_ext=None):
    """ABA on the batch-trailing layout: ``q (nq, B)``, ``qd, tau (nv, B)`` -> ``qdd (nv, B)``."""
    B = q.shape[-1]
    if use_cholesky(sched(model, B, batch_width=ABA_WIDTH), q.dtype):  # H qdd = tau - C
        return fd_dense(model, q, qd, tau, f_ext)
    s, E, r, S, Ic, c, pA = velocity_pass(model, q, qd, f_ext)
    tau_n = node_rows(tau)
    k = root_chain(model, s, B)
    arm = node_armature(model, B)
    (U, Dinv, u), root = _inertia_pass(s, E, r, S, Ic, arm, c=c, pA=pA, tau=tau_n, root=k)
    a_world = gravity_acceleration(model, B, q.dtype)
    return _acceleration_pass(s, E, r, S, c, U, Dinv, u, a_world, root)


#: single-state ABA; ``f_ext`` may be None (`native_vmap`'s optional arguments). The
#: lambda looks `aba_batched` up at each trace, so a patched module function is used.
aba_single = native_vmap(lambda m, q, qd, tau, f: aba_batched(m, q, qd, tau, f),
                         kernel=ffi.aba)




def minv_times_batched(model, q, tau):
    """``H(q)^-1 tau`` on the batch-trailing layout; ``tau (nv, K)`` broadcasts against ``q (nq, B)``."""
    B = max(q.shape[-1], tau.shape[-1])
    s = sched(model, B, batch_width=ABA_WIDTH)
    if use_cholesky(s, q.dtype) and q.shape[-1] == 1:  # one state: a Cholesky solve
        return minv_times_dense(model, q, jnp.broadcast_to(tau, (tau.shape[0], B)))
    E, r, S = Xup_and_S(model, q)
    Ic = node_inertias(model)
    k = root_chain(model, s, B)
    # the inertia pass runs on q's batch only (tau's right-hand sides broadcast later)
    arm = node_armature(model, q.shape[-1])
    (U, Dinv), root = _inertia_pass(s, E, r, S, Ic, arm, root=k)
    tau_n = node_rows(tau)
    u, u_root = _bias_pass(s, E, r, S, U, Dinv, tau_n, root)
    a_world = jnp.zeros((6, 1), tau.dtype)
    root = None if root is None else root + (u_root,)
    return _acceleration_pass(s, E, r, S, None, U, Dinv, u, a_world, root)
