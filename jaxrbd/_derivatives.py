"""Derivatives of the dynamics as matrices: d qdd / d(q, qd, tau), d tau / d(q, qd, qdd), and
their sensitivities to the inertial parameters.

The state derivatives are analytic (Carpentier & Mansard, RSS 2018, in Featherstone's
notation), evaluated in world coordinates where a perturbation of joint ``j`` moves the
whole subtree of ``j`` rigidly:

* one RNEA-like forward pass gives, per node, the world-frame motion column ``S_i``,
  velocity ``v_i``, acceleration ``a_i`` and inertia ``I_i``;
* subtree sums (no transforms needed in one frame) give the composite inertia ``IC_i``,
  the composite of ``I_k crm(v_k) + crm(v_k)^T I_k`` (only its 3x3 angular block is
  non-zero), the composite momentum and the composite force;
* every entry ``d tau_i / d x_j`` is then a dot product of a 6-vector of node ``i``
  with a 6-vector of direction ``j`` (which depends on whether ``i`` lies in the
  subtree moved by ``j`` or on the path above it), so the matrices cost
  O(nv^2) small dot products after O(n) node work.

Forward dynamics uses ``d qdd / dx = -H^-1 d tau / dx`` at ``qdd = FD(q, qd, tau)`` and
``d qdd / d tau = H^-1``. ``H = L^T D L`` with the sparsity of the tree (RBDA section 6.5);
in world coordinates its factors are articulated-body quantities, so one transform-free
backward pass gives ``D`` and ``L`` (``L(k, j) = u_k . S_j``, rank one per row), a forward
pass in which each node reads only its parent's row gives ``L^-1``, and with them ``qdd``
and the dense ``H^-1 = L^-1 D^-1 L^-T``.

Layout: the per-node work runs on the batch-trailing layout in blocks of `CHUNK` states
(phase 1, returning batch-first per-node vectors); the dense O(nv^2) assembly and the
matrix products then run on super-blocks of `SUPER` states (phase 2), where XLA uses
batched matrix products.

Configuration derivatives are in the tangent space: column ``j`` of ``d f / dq`` is
``d/de f(integrate(model, q, e * e_j, 1))`` at ``e = 0`` (Pinocchio's convention). For a
free joint the tangent is the body twist ``[w; v]`` in body coordinates, for a spherical
joint the angular velocity in child coordinates; elsewhere it is ``d/dq_j``.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from ._aba import node_armature, project
from ._core import algebra as al
from ._core import ffi
from ._core.backend import CHUNK
from ._core.checks import check_f_ext, check_state
from ._core.jcalc import custom_columns, euler_S, joint_velocity_terms, node_inertias
from ._core.linalg import cho_solve
from ._core.native_vmap import blocked, default_chunk, native_vmap
from ._core.nodes import Xup_and_S, gravity_acceleration, pad, pad_inertia, pad_S, sched
from ._core.packing import pack, unpack
from ._core.passes import subtree_sums, velocities_accelerations
from ._core.rows import node_rows, place_rows, sum_rows
from ._core.schedule import add, forward_scan, put, scan_schedule, take
from ._core.topology import Topology, topology
from ._dense_dynamics import inverse_factor, use_cholesky
from ._parameters import regressor_from_motion

__all__ = [
    "fd_derivatives_batched",
    "fd_parameter_derivatives_batched",
    "forward_dynamics_derivatives",
    "forward_dynamics_parameter_derivatives",
    "id_derivatives_batched",
    "inverse_dynamics_derivatives",
    "model_derivatives",
]

#: Samples per block of the dense assembly and matrix products (a multiple of `CHUNK`,
#: the per-node blocks of `jaxrbd._core.backend`).
SUPER = 128


# ------------------------------------------------------------------ helpers


def _gather(x, idx):
    """Rows ``idx`` of ``x`` with the dummy index ``len(x)`` reading zeros."""
    ext = jnp.concatenate([x, jnp.zeros_like(x[:1])], axis=0)
    return ext[idx]


def _path_sum(x, t: Topology):
    """``sum_{k root..i} x_k`` for every DoF ``i``."""
    return x + _gather(x, t.ancestors).sum(axis=1)


def _to_world(E0, r0, x):
    return al.Xinv_motion(E0, r0, x)


# ------------------------------------------------------------------ node quantities


def _node_terms(model, q, qd, qdd, f_ext):
    """World-frame per-node quantities and their subtree composites (batch-trailing).

    Returns a dict of ``(nv, k, B)`` arrays (DoF rows) plus ``vw``/``aw`` with the world
    row (``(nn, 6, B)``) and the transforms ``E0, r0``.
    """
    B = max(q.shape[-1], qd.shape[-1], qdd.shape[-1])
    s = sched(model, B)
    E, r, S = Xup_and_S(model, q)
    vJ, vJc, cJ = joint_velocity_terms(model, q, qd, S)
    qdd_n = node_rows(qdd)
    a0 = gravity_acceleration(model, B, q.dtype)
    v, a, (E0, r0) = velocities_accelerations(
        s, E, r, vJ, vJc, cJ, S * qdd_n[:, None, :], a0, with_X0=True
    )
    vw, aw = _to_world(E0, r0, v), _to_world(E0, r0, a)
    Sn = _to_world(E0[1:], r0[1:], S[1:])
    Ic = node_inertias(model)[1:]
    Iw = al.XT_compact_X(E0[1:], r0[1:], jnp.broadcast_to(Ic, Ic.shape[:-1] + (B,)))
    v1, a1 = jnp.broadcast_to(vw[1:], Sn.shape), jnp.broadcast_to(aw[1:], Sn.shape)
    P = al.inertia_mul(Iw, v1)  # momentum
    f = al.inertia_mul(Iw, a1) + al.cross_force(v1, P)
    # angular block of I crm(v) + crm(v)^T I: [Ibar, w x] + h x v x + v x h x (symmetric)
    w, nu = al.ang(v1), al.lin(v1)
    Ibar, h = al.sym3(Iw[:, 4:]), Iw[:, 1:4]
    Iw_x = al.mm(Ibar, al.skew(w))
    hv = al.dot(h, nu)[:, None, None, :]
    A = Iw_x + al.transpose(Iw_x) + al.outer(nu, h) + al.outer(h, nu) - 2 * hv * al.eye3(h)
    parts = [Iw, al.unsym3(A), P, f]
    if f_ext is not None:
        node = np.asarray(model.body_node)
        fe = sum_rows(model.nv, np.where(node > 0, node - 1, -1), f_ext)  # DoF order
        parts.append(jnp.broadcast_to(fe, fe.shape[:-1] + (B,)))
    comp = subtree_sums(jnp.concatenate(parts, axis=1), s)
    out = {
        "E0": E0, "r0": r0, "vw": vw, "aw": aw, "S": Sn, "Iw": Iw,
        "IC": comp[:, :10], "A": comp[:, 10:16], "P": comp[:, 16:22], "G": comp[:, 22:28],
        "Fe": comp[:, 28:34] if f_ext is not None else None,
    }
    return out


def _bc_mul(nt, idx, u_ang):
    """Composite ``BC u = [(A + P_ang x) u_w; 2 P_lin x u_w]`` at DoFs ``idx`` (it
    ignores the linear part of ``u``)."""
    P = nt["P"][idx]
    return al.join(
        al.mv(al.sym3(nt["A"][idx]), u_ang) + al.cross(al.ang(P), u_ang),
        2 * al.cross(al.lin(P), u_ang),
    )


def _euler_local(kind, q3, qd3):
    """Local derivatives of Euler joints (child coordinates): the columns w.r.t. the angles
    ``(3, J, 3 cols, 3, B)`` and the bias ``cJ = dS/dt qd`` w.r.t. angles and rates
    ``(3, J, 3, B)`` each; the leading axis is the joint's own DoF."""

    def local(q3, qd3):
        S3, dS3 = jax.jvp(lambda x: jnp.stack(euler_S(kind, x[:, 1:]), axis=1), (q3,), (qd3,))
        return S3, dS3[:, 0] * qd3[:, 0:1] + dS3[:, 1] * qd3[:, 1:2]

    e = jnp.eye(3, dtype=q3.dtype)[:, None, :, None] * jnp.ones_like(q3)[None]
    z = jnp.zeros_like(e)
    dS, dc = jax.vmap(lambda a, b: jax.jvp(local, (q3, qd3), (a, b))[1])(
        jnp.concatenate([e, z]), jnp.concatenate([z, e]))
    return dS[:3], dc[:3], dc[3:]


def _euler_joints(model):
    """``(kind, child nodes, q starts, v starts)`` of the Euler joints, kind by kind."""
    return [(k, nodes + 2, qs, vs) for k, (nodes, qs, vs) in topology(model).multi.items()
            if k.startswith("euler")]


def _euler_terms(model, nt, qd, qdd, vb, u, w, c):
    """Add the Euler joints' own angle dependence (their columns and bias are functions of
    their angles) to the direction vectors; returns the local entries ``dS_m/dq_k . F``."""
    joints = _euler_joints(model)
    q = nt["q"]
    loc = [_euler_local(k, q[qs[:, None] + np.arange(3)], qd[vs[:, None] + np.arange(3)])
           for k, _, qs, vs in joints]
    dS, dcq, dcv = (jnp.concatenate([x[i] for x in loc], axis=1) for i in range(3))
    child = np.concatenate([j[1] for j in joints])
    vs = np.concatenate([j[3] for j in joints])
    cols3 = vs[:, None] + np.arange(3)  # the joint's DoFs, (J, 3)
    Ec, rc = nt["E0"][child], nt["r0"][child]

    def world(x):  # angular child-frame 3-vectors (..., J, 3, B) -> world motion vectors
        lead = (1,) * (x.ndim - 3)
        wa = al.mtv(Ec.reshape(lead + Ec.shape), x)
        return al.join(wa, al.cross(rc.reshape(lead + rc.shape), wa))

    dSw = world(dS.swapaxes(1, 2)).swapaxes(1, 2)  # (3 k, J, 3 m, 6, B)
    dv = jnp.sum(dSw * qd[cols3][None, :, :, None, :], axis=2)  # (3 k, J, 6, B)
    da = jnp.sum(dSw * qdd[cols3][None, :, :, None, :], axis=2)
    da = da + al.cross_motion((nt["vw"][child] + vb[vs])[None], dv) + world(dcq)
    rows = cols3.T.reshape(-1)  # (3 k * J,): the DoF of direction k (distinct)
    nv = u.shape[0]
    flat = lambda x: x.reshape((-1,) + x.shape[2:])
    u = u - sum_rows(nv, rows, flat(dv))
    w = w - sum_rows(nv, rows, flat(da))
    c = c + sum_rows(nv, rows, flat(world(dcv)))
    F = nt["G"] if nt["Fe"] is None else nt["G"] - nt["Fe"]
    vals = al.dot(dSw, F[cols3][None])  # (3 k, J, 3 m, B), the order of `_euler_entries`
    return u, w, c, vals.reshape((-1,) + vals.shape[3:])


def _directions(model, nt, qd, qdd):
    """Per-direction 6-vectors: q-steps (``w``, ``u``, ``Phi``), qd-steps (``c``, ``Psi``),
    and the local Euler-joint entries of ``d tau / dq``."""
    t = topology(model)
    Sn, vw, aw = nt["S"], nt["vw"], nt["aw"]
    vb = jnp.broadcast_to(vw[t.lam_p_node], Sn.shape)
    ab = jnp.broadcast_to(aw[t.lam_p_node], Sn.shape)
    u = al.cross_motion(Sn, vb)
    w = al.cross_motion(Sn, ab) - al.cross_motion(u, vb)
    c = al.cross_motion(jnp.broadcast_to(vw[t.nu_node], Sn.shape) + vb, Sn)
    extra = None
    if _euler_joints(model):
        u, w, c, extra = _euler_terms(model, nt, qd, qdd, vb, u, w, c)
    if len(topology(model).custom_nodes):
        u, w, c, more = _custom_terms(model, nt, qd, qdd, vb, u, w, c)
        extra = more if extra is None else jnp.concatenate([extra, more], axis=0)
    p = t.p
    Phi = (al.cross_force(Sn, nt["G"][p]) - al.inertia_mul(nt["IC"][p], w)
           + _bc_mul(nt, p, al.ang(u)))
    Psi = al.inertia_mul(nt["IC"], c) - _bc_mul(nt, np.arange(model.nv), al.ang(Sn))
    return {"u": u, "w": w, "c": c, "Phi": Phi, "Psi": Psi, "extra": extra}


def _custom_terms(model, nt, qd, qdd, vb, u, w, c):
    """Add the custom (RBDL-column) nodes' own angle dependence: their column ``[w; E v]``
    and bias ``[0; -qd^2 w x E v]`` turn with their own ``q``; returns the local entries
    ``dS_j/dq_j . F_j`` (the diagonal entries of `_euler_entries`' custom part)."""
    t = topology(model)
    nodes = t.custom_nodes
    d = nodes - 1
    _, _, Sl = custom_columns(model.axes[..., None][d], nt["q"][t.custom_q])
    ws, wxEv = al.ang(Sl), al.cross(al.ang(Sl), al.lin(Sl))
    qdj, qddj = qd[d][:, None, :], qdd[d][:, None, :]
    zero = jnp.zeros_like(wxEv)
    E0, r0 = nt["E0"][nodes], nt["r0"][nodes]
    world = lambda x: al.Xinv_motion(E0, r0, x)
    dSw = world(al.join(zero, -wxEv))  # d S / dq in the node frame: dE/dq = -w x E
    dv = dSw * qdj
    dcq = al.join(zero, qdj * qdj * al.cross(ws, wxEv))
    da = dSw * qddj + al.cross_motion(nt["vw"][nodes] + vb[d], dv) + world(dcq)
    nv = u.shape[0]
    u = u - sum_rows(nv, d, dv)
    w = w - sum_rows(nv, d, da)
    c = c + sum_rows(nv, d, world(al.join(zero, -2.0 * qdj * wxEv)))
    F = nt["G"] if nt["Fe"] is None else nt["G"] - nt["Fe"]
    return u, w, c, al.dot(dSw, F[d])


def _euler_entries(model):
    """Static (row, column) of the local entries ``dS_m/dq_k . F`` of Euler joints, in
    the ``(k, joint, m)`` order of `_euler_terms`, then the diagonal entries of the
    custom nodes (`_custom_terms`)."""
    rows, cols = [], []
    if _euler_joints(model):
        vs = np.concatenate([j[3] for j in _euler_joints(model)])
        k, m = np.arange(3)[:, None, None], np.arange(3)[None, None, :]
        rows.append(np.broadcast_to(vs[None, :, None] + m, (3, len(vs), 3)).reshape(-1))
        cols.append(np.broadcast_to(vs[None, :, None] + k, (3, len(vs), 3)).reshape(-1))
    d = topology(model).custom_nodes - 1
    return np.concatenate(rows + [d]), np.concatenate(cols + [d])


def _euler_dense(model, vals, nv):
    """The entries ``vals (B, E)`` (`_euler_entries` order) as ``(B, nv, nv)`` matrices,
    placed by `place_rows` (a scatter would loop over the ``E`` entries)."""
    rows, cols = _euler_entries(model)
    dense = place_rows(nv * nv, [(rows * nv + cols, vals.T)])  # (nv * nv, B)
    return dense.T.reshape(vals.shape[:1] + (nv, nv))


def _node_vectors(nt):
    """``y_i = IC_i S_i``, ``z_i = BC_i^T S_i`` (angular part; the linear part is 0)."""
    Sn, P = nt["S"], nt["P"]
    Sw, Sv = al.ang(Sn), al.lin(Sn)
    y = al.inertia_mul(nt["IC"], Sn)
    z = al.mv(al.sym3(nt["A"]), Sw) + al.cross(Sw, al.ang(P)) + 2 * al.cross(Sv, al.lin(P))
    return y, z


# ------------------------------------------------------------------ H = L^T D L (batch-trailing)
# In world coordinates the sparse factors of H are the articulated-body quantities: with
# U_k = IA_k S_k, D_k = S_k . U_k and L(k, j) = U_k . S_j / D_k for every ancestor j of k
# (eliminating the subtree of k from H turns its composite inertia into IA_k).


def _node_order(ys, s):
    """Per-step scan outputs ``(nsteps, W, ...)`` -> DoF order ``(nv, ...)``."""
    flat = ys.reshape((-1,) + ys.shape[2:])
    return place_rows(s.n, [(s.slot_nodes, flat)])[1:]


def _node_S(S, s):
    """DoF-ordered ``S (nv, 6, B)`` as a node buffer of ``s`` (world and scratch rows)."""
    return pad_S(node_rows(S), s)


def _factor(Iw, S0, arm0, s):
    """``D (nv, B)`` and ``u_k = U_k / D_k`` ``(nv, 6, B)``, with which ``H = L^T D L`` has
    ``L(k, j) = u_k . S_j`` for every ancestor ``j`` of ``k``, by the articulated-inertia
    pass ``IA_lam += IA_k - U_k U_k^T / D_k`` (no transforms). ``S0``: `_node_S`;
    ``arm0``: the armature as a node buffer (it adds to ``D_k`` only)."""
    I0 = node_rows(Iw)
    buf = pack(*al.inertia_blocks(pad_inertia(I0, s)))

    def step(buf, idx, par, x):
        Si, armi = x
        A, Bk, C, _ = unpack(take(buf, idx, once=True))
        U, Dinv, _, Ia = project(A, Bk, C, Si, None, None, armi)
        return add(buf, par, pack(*Ia)), (U * Dinv[..., None, :], Dinv)

    _, (u, Dinv) = scan_schedule(step, buf, s, (S0, arm0), reverse=True)
    return 1.0 / _node_order(Dinv, s), _node_order(u, s)


def _lower_inverse(u, S0, s, t: Topology):
    """Band of ``W = L^-1`` (the sparsity of ``L``), ``(nv, D, B)``: ``W(k, anc_l(k))``.

    With ``L(k, j) = u_k . S_j``, forward substitution gives ``W(k, j) = -u_k . Z(p, j)``
    (``p`` the parent of ``k``) where ``Z(i, j) = sum_{a from j to i} S_a W(a, j)`` obeys
    the parent recurrence ``Z(k, j) = Z(p, j) - S_k (u_k . Z(p, j))``, ``Z(j, j) = S_j``:
    one root-to-leaves pass carrying, per node, its ``Z`` against itself and each
    ancestor (``(D, 6, B)``, the ancestor band of the parent's row shifted by one), in
    which each step reads only its parent's row. ``S0``: `_node_S`.
    """
    nv, D = t.ancestors.shape
    u0 = pad(node_rows(u), s)
    Z = jnp.zeros((s.nbuf, D, 6, S0.shape[-1]), S0.dtype)

    def step(Z, idx, par, x):
        Si, ui = x  # (W, 6, B)
        Zp = take(Z, par)[:, : D - 1]  # the parent against itself and its ancestors
        Zk = Zp - Si[:, None] * al.dot(ui[:, None], Zp)[:, :, None]
        return put(Z, idx, jnp.concatenate([Si[:, None], Zk], axis=1))

    Z = forward_scan(step, Z, s, (S0, u0))
    return -al.dot(u[:, None], Z[s.parent_padded[1 : nv + 1]])  # each DoF's parent node


def _solve(Dk, W, x, t: Topology):
    """``H^-1 x`` for ``x (nv, B)`` with ``H^-1 = W D^-1 W^T`` (W as a band)."""
    nv = x.shape[0]
    anc = t.ancestors.reshape(-1)
    y = x + sum_rows(nv, np.where(anc < nv, anc, -1), (W * x[:, None]).reshape((-1,) + x.shape[1:]))
    z = y / Dk
    return z + jnp.sum(W * _gather(z, t.ancestors), axis=1)


def _dense_lower(W, t: Topology):
    """The band of ``W`` as a dense unit-lower matrix, batch-first ``(B, nv, nv)``."""
    nv, D = t.ancestors.shape
    anc = t.ancestors.reshape(-1)
    flat = np.where(anc < nv, np.repeat(np.arange(nv), D) * nv + anc, -1)
    Wd = place_rows(nv * nv, [(flat, W.reshape((nv * D,) + W.shape[2:]))])
    return _bf(Wd.reshape((nv, nv) + W.shape[2:])) + jnp.eye(nv, dtype=W.dtype)[None]


# ------------------------------------------------------------------ phase 1: node vectors
# Per-node and per-direction vectors, computed in cache-sized blocks on the batch-trailing
# layout and returned batch-first ``(B, nv, k)``.


def _bf(x):
    """``(n, k, B)`` -> ``(B, n, k)``."""
    return jnp.moveaxis(x, -1, 0)


def _prepare(model, q, qd, qdd, f_ext):
    nt = _node_terms(model, q, qd, qdd, f_ext)
    nt["q"] = q
    return nt


class StateVectors(NamedTuple):
    """Phase 1's vectors of one block (batch-first) whose dot products are the entries
    of ``sign * d tau / dq`` (``Pq . Qq`` below the diagonal, ``S . Phi`` above) and
    ``sign * d tau / dqd`` (``Pv . Qv``, ``S . Psi``); ``euler``: the Euler joints' terms
    of their own angles (None without Euler joints)."""

    Pq: Array
    Qq: Array
    S: Array
    Phi: Array
    Pv: Array
    Qv: Array
    Psi: Array
    euler: Array | None = None


class IDVectors(NamedTuple):
    """Phase 1 of the inverse-dynamics derivatives: ``tau (B, nv)`` (None where the
    caller needs only the matrices), the `StateVectors` and ``y`` (``H = y . S``)."""

    tau: Array | None
    state: StateVectors
    y: Array


class FDVectors(NamedTuple):
    """Phase 1 of the forward-dynamics derivatives: ``qdd (B, nv)`` (or None), the
    factors ``H^-1 = W diag(Dinv) W^T`` and the `StateVectors` of ``-d tau``."""

    qdd: Array | None
    W: Array
    Dinv: Array
    state: StateVectors


class FDPVectors(NamedTuple):
    """Phase 1 of the parameter derivatives: the factors of ``H^-1`` and the regressor."""

    W: Array
    Dinv: Array
    Y: Array


def _state_vectors(nt, dirs, y, z, sign=1.0):
    """The vectors whose dot products are the entries of ``sign * d tau / dq`` and
    ``sign * d tau / dqd`` (the sign rides on the direction vectors, for free)."""
    S = nt["S"]
    Pq, Qq = [-y, z], [sign * dirs["w"], sign * al.ang(dirs["u"])]
    if nt["Fe"] is not None:  # a q-step turns the columns against the external forces
        Pq.append(-al.cross_force(S, nt["Fe"]))
        Qq.append(sign * S)
    out = (jnp.concatenate(Pq, 1), jnp.concatenate(Qq, 1), S, sign * dirs["Phi"],
           jnp.concatenate([-z, y], 1), sign * jnp.concatenate([al.ang(S), dirs["c"]], 1),
           sign * dirs["Psi"])
    extra = None if dirs["extra"] is None else _bf(sign * dirs["extra"])
    return StateVectors(*(_bf(x) for x in out), euler=extra)


def _idq_vectors(model, q, qd, qdd, f_ext=None):
    """``tau`` (batch-first ``(B, nv)``: ``S . (G - Fe)`` plus the armature's share),
    then `_id_vectors`."""
    nt = _prepare(model, q, qd, qdd, f_ext)
    y, z = _node_vectors(nt)
    dirs = _directions(model, nt, qd, qdd)
    F = nt["G"] if nt["Fe"] is None else nt["G"] - nt["Fe"]
    tau = al.dot(nt["S"], F) + model.armature[:, None] * qdd
    return IDVectors(tau.T, _state_vectors(nt, dirs, y, z), _bf(y))


def _id_vectors(model, q, qd, qdd, f_ext=None):
    # tau unused: dropped when traced
    return _idq_vectors(model, q, qd, qdd, f_ext)._replace(tau=None)


def _fd_core(model, q, qd, tau, f_ext):
    """Node terms at the solved ``qdd``, the factors of ``H`` and ``qdd``."""
    t = topology(model)
    B = max(q.shape[-1], qd.shape[-1], tau.shape[-1])
    zero = jnp.zeros((model.nv, B), q.dtype)
    nt = _prepare(model, q, qd, zero, f_ext)
    y, z = _node_vectors(nt)
    s = sched(model, B)
    F0 = nt["G"] if nt["Fe"] is None else nt["G"] - nt["Fe"]
    if use_cholesky(s, q.dtype):  # one state: H from the node vectors, one Cholesky
        Hs = _pairs(_bf(y), _bf(nt["S"]))[0]  # y_i . S_j
        H = jnp.where(t.sub_v, Hs, jnp.where(t.anc_v, Hs.T, 0.0)) + jnp.diag(model.armature)
        L, Wt = inverse_factor(H)
        qdd = cho_solve(L, tau - al.dot(nt["S"], F0))
        factors = (Wt[None], jnp.ones((1, model.nv), q.dtype))  # H^-1 = Wt Wt^T
    else:
        S0 = _node_S(nt["S"], s)
        Dk, u = _factor(nt["Iw"], S0, pad(node_armature(model, B), s), s)
        W = _lower_inverse(u, S0, s, t)
        qdd = _solve(Dk, W, tau - al.dot(nt["S"], F0), t)
        factors = (_dense_lower(W, t), _bf(1.0 / Dk))
    # the accelerations qdd adds (world frame, no velocity terms) and the forces they need
    alpha = _path_sum(nt["S"] * qdd[:, None, :], t)
    nt["aw"] = nt["aw"] + node_rows(alpha)
    nt["G"] = nt["G"] + subtree_sums(al.inertia_mul(nt["Iw"], alpha), s)
    return nt, y, z, qdd, factors


def _fdq_vectors(model, q, qd, tau, f_ext=None):
    """``qdd`` (batch-first ``(B, nv)``), then `_fd_vectors`."""
    nt, y, z, qdd, factors = _fd_core(model, q, qd, tau, f_ext)
    dirs = _directions(model, nt, qd, qdd)
    return FDVectors(qdd.T, *factors, _state_vectors(nt, dirs, y, z, sign=-1.0))


def _fd_vectors(model, q, qd, tau, f_ext=None):
    return _fdq_vectors(model, q, qd, tau, f_ext)._replace(qdd=None)


def _fdp_vectors(model, q, qd, tau, f_ext=None):
    """The factors of ``H`` and the regressor ``Y`` at the solved ``qdd`` (batch-first)."""
    nt, _, _, _, factors = _fd_core(model, q, qd, tau, f_ext)
    E0, r0 = nt["E0"], nt["r0"]
    v, a = al.X_motion(E0, r0, nt["vw"]), al.X_motion(E0, r0, nt["aw"])  # node coordinates
    return FDPVectors(*factors, _bf(regressor_from_motion(model, v, a, E0, r0, nt["S"])))


# ------------------------------------------------------------------ phase 2: matrices
# Dense O(nv^2) assembly and the matrix products on batch-first super-blocks of `SUPER`
# states: XLA runs them as batched matrix products (much faster than per-block loops).


def _precision(x):
    # the precision setting does not affect float64; float32 must not drop to TF32/bf16
    return "highest" if x.dtype == jnp.float32 else None


def _mm(A, Bm):
    return jnp.matmul(A, Bm, precision=_precision(A))


def _pairs(Pm, Qm):
    """``out[b, i, j] = P[b, i] . Q[b, j]``."""
    return jnp.einsum("bic,bjc->bij", Pm, Qm, precision=_precision(Pm))


def _masked(sub, anc, sub_mask, anc_mask):
    zero = jnp.zeros_like(sub)
    return jnp.where(sub_mask[None], sub, jnp.where(anc_mask[None], anc, zero))


def _state_matrices(model, v: StateVectors):
    """``d tau / dq`` and ``d tau / dqd``, ``(B, nv, nv)``, from `_state_vectors`."""
    t = topology(model)
    dq = _masked(_pairs(v.Pq, v.Qq), _pairs(v.S, v.Phi), t.sub_q, t.anc_q)
    if v.euler is not None:  # Euler joints: their columns depend on their own angles
        dq = dq + _euler_dense(model, v.euler, dq.shape[-1])
    dv = _masked(_pairs(v.Pv, v.Qv), _pairs(v.S, v.Psi), t.sub_v, t.anc_v)
    return dq, dv


def _minv(Wd, Dinv):
    """Dense ``H^-1 = W D^-1 W^T`` ``(B, nv, nv)``."""
    return jnp.einsum("bik,bjk->bij", Wd * Dinv[:, None, :], Wd, precision=_precision(Wd))


def _id_matrices(model, v: IDVectors):
    dq, dv = _state_matrices(model, v.state)
    t = topology(model)
    Hs = _pairs(v.y, v.state.S)  # y_i . S_j
    H = _masked(Hs, jnp.swapaxes(Hs, 1, 2), t.sub_v, t.anc_v)
    return dq, dv, H + jnp.diag(model.armature)[None]


def _fd_matrices(model, v: FDVectors):
    Minv = _minv(v.W, v.Dinv)
    ndq, ndv = _state_matrices(model, v.state)  # -d tau / dq, -d tau / dqd
    return _mm(Minv, ndq), _mm(Minv, ndv), Minv


def _idq_matrices(model, v: IDVectors):
    return (v.tau,) + _id_matrices(model, v)


def _fdq_matrices(model, v: FDVectors):
    return (v.qdd,) + _fd_matrices(model, v)


def _fdp_matrices(model, v: FDPVectors):
    return (-_mm(_minv(v.W, v.Dinv), v.Y),)


# ------------------------------------------------------------------ batched entry points


def _two_phase(vectors, matrices):
    """Phase 1 in blocks of `CHUNK`, phase 2 per super-block of `SUPER` states (large enough
    for efficient batched matrix products, small enough that the ``(nv, nv)`` matrices of a
    super-block stay in cache). Off the CPU both phases take the whole batch
    (`jaxrbd._core.native_vmap.default_chunk`)."""

    def run(model, *arrays, chunk=None, super_chunk=None):
        arrays = tuple(x for x in arrays if x is not None)  # f_ext=None: left out

        def block(*xs):
            vecs = blocked(lambda *ys: vectors(model, *ys), xs,
                           default_chunk(CHUNK) if chunk is None else chunk, batch_first=True)
            return matrices(model, vecs)

        return blocked(block, arrays,
                       default_chunk(SUPER) if super_chunk is None else super_chunk,
                       batch_first=True)

    return run


#: Batch-trailing inputs (``q (nq, B)``, others ``(nv, B)``, ``f_ext (nbodies, 6, B)`` or
#: None), batch-first outputs ``(B, nv, nv)``.
fd_derivatives_batched = _two_phase(_fd_vectors, _fd_matrices)
id_derivatives_batched = _two_phase(_id_vectors, _id_matrices)
fd_parameter_derivatives_batched = _two_phase(_fdp_vectors, _fdp_matrices)
#: `fd_derivatives_batched` with the accelerations it solves for first: ``(qdd (B, nv),
#: dqdd_dq, dqdd_dqd, H^-1)``, for the JVP rule of forward dynamics (no separate ABA).
fd_and_derivatives_batched = _two_phase(_fdq_vectors, _fdq_matrices)
#: `id_derivatives_batched` with ``tau (B, nv)`` first, for the JVP rule of inverse dynamics.
id_and_derivatives_batched = _two_phase(_idq_vectors, _idq_matrices)


def _native(impl, kernel=None):
    return native_vmap(impl, batch_first=True, kernel=kernel)


def _without_primal(kernel):
    def matrices(model, q, qd, x, f_ext=None, *, batch=False):
        out = kernel(model, q, qd, x, f_ext, batch=batch)
        return None if out is None else out[1:]

    return matrices


# single-state functions; ``f_ext`` may be None (`native_vmap`'s optional arguments);
# under ``traversal="kernel"`` each runs one native kernel (but the parameter derivatives)
_fdd = _native(fd_derivatives_batched, kernel=_without_primal(ffi.fd_derivatives))
_idd = _native(id_derivatives_batched, kernel=_without_primal(ffi.id_derivatives))
_fdp = _native(fd_parameter_derivatives_batched)
_fdq = _native(fd_and_derivatives_batched, kernel=ffi.fd_derivatives)
_idq = _native(id_and_derivatives_batched, kernel=ffi.id_derivatives)


# ------------------------------------------------------------------ public functions


def forward_dynamics_derivatives(model, q, qd, tau, f_ext=None):
    """Partial derivatives of forward dynamics: ``d qdd / dq``, ``d qdd / dqd``, ``d qdd / dtau``.

    Analytic (Carpentier & Mansard 2018): ``d qdd / dx = -H^-1 d tau / dx`` evaluated at
    ``qdd = forward_dynamics(q, qd, tau)``, with the RNEA derivatives from world-frame
    recursions (O(n) node work plus O(nv^2) dot products) and ``H^-1`` from the sparse
    ``L^T D L`` factorisation of the tree (RBDA section 6.5). The same numbers as
    Pinocchio's ``computeABADerivatives`` (up to its free-joint ``[v; w]`` ordering).

    The configuration derivative is taken in the **tangent space**: column ``j`` of
    ``dqdd_dq`` is ``d/de qdd(integrate(model, q, e * e_j, 1.0))`` at ``e = 0``. For a
    free joint that is the body twist ``[w; v]`` in body coordinates, for a spherical
    joint the angular velocity in child coordinates, for every other joint plain
    ``d/dq_j``. So ``dqdd_dq`` is square, `(nv, nv)`, even when ``nq > nv``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; quaternion blocks need not be normalised.
        qd: velocities `(nv,)` [rad/s | m/s]; body coordinates for free joints.
        tau: generalized forces `(nv,)` [N m | N].
        f_ext: optional `(nbodies, 6)` spatial forces in world coordinates at the world
            origin; row 0 is ignored. They are held fixed in the world while ``q`` moves.

    Returns:
        ``(dqdd_dq, dqdd_dqd, dqdd_dtau)``, each `(nv, nv)`; ``dqdd_dtau = H(q)^-1``.
        Units: ``dqdd_dq`` [1/s^2], ``dqdd_dqd`` [1/s], ``dqdd_dtau`` [1/(kg m^2) | 1/kg ...].

    Raises:
        ValueError: an argument has the wrong shape (the message names it).
        TypeError: an argument is not real-valued.

    Example:
        >>> fdd = jax.jit(jaxrbd.forward_dynamics_derivatives)
        >>> dqdd_dq, dqdd_dqd, dqdd_dtau = fdd(model, q, jnp.zeros(model.nv), tau)
        >>> dqdd_dq.shape, bool(jnp.allclose(dqdd_dtau, dqdd_dtau.T))
        ((9, 9), True)
    """
    with jax.named_scope("jaxrbd.forward_dynamics_derivatives"):
        q, qd, tau = check_state(model, q=q, qd=qd, tau=tau)
        return _fdd(model, q, qd, tau, check_f_ext(model, f_ext))


def inverse_dynamics_derivatives(model, q, qd, qdd, f_ext=None):
    """Partial derivatives of inverse dynamics: ``d tau / dq``, ``d tau / dqd``, ``d tau / dqdd``.

    Analytic world-frame RNEA derivatives (Carpentier & Mansard 2018): one forward pass,
    subtree sums, then O(nv^2) 6-vector dot products. ``d tau / dqdd`` is the mass
    matrix ``H(q)``. As Pinocchio's ``computeRNEADerivatives``.

    ``dtau_dq`` is taken in the **tangent space** (see `forward_dynamics_derivatives`):
    column ``j`` is ``d/de inverse_dynamics(integrate(model, q, e * e_j, 1.0), ...)``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        qd: velocities `(nv,)` [rad/s | m/s].
        qdd: accelerations `(nv,)` [rad/s^2 | m/s^2].
        f_ext: optional `(nbodies, 6)` spatial forces in world coordinates at the world
            origin (held fixed in the world while ``q`` moves); row 0 is ignored.

    Returns:
        ``(dtau_dq, dtau_dqd, dtau_dqdd)``, each `(nv, nv)`; ``dtau_dqdd = H(q)``.

    Raises:
        ValueError: an argument has the wrong shape (the message names it).
        TypeError: an argument is not real-valued.

    Example:
        >>> idd = jax.jit(jaxrbd.inverse_dynamics_derivatives)
        >>> dtau_dq, dtau_dqd, H = idd(model, q, jnp.zeros(model.nv), tau)
        >>> H.shape, bool(jnp.allclose(H, H.T))
        ((9, 9), True)
    """
    with jax.named_scope("jaxrbd.inverse_dynamics_derivatives"):
        q, qd, qdd = check_state(model, q=q, qd=qd, qdd=qdd)
        return _idd(model, q, qd, qdd, check_f_ext(model, f_ext))


def forward_dynamics_parameter_derivatives(model, q, qd, tau, f_ext=None):
    """``d qdd / d inertial parameters`` as a matrix: ``-H^-1 Y(q, qd, qdd)`` at
    ``qdd = forward_dynamics(q, qd, tau)``, with ``Y`` the regressor of
    `inverse_dynamics_regressor` (columns in the order of ``model.inertia.ravel()``).

    Args:
        model: a `Model`.
        q: `(nq,)`. qd: `(nv,)`. tau: `(nv,)`.
        f_ext: optional `(nbodies, 6)` spatial forces in world coordinates at the world
            origin; row 0 is ignored.

    Returns:
        `(nv, nbodies * 10)`.

    Example:
        >>> J = jax.jit(jaxrbd.forward_dynamics_parameter_derivatives)(model, q, jnp.zeros(9), tau)
        >>> J.shape
        (9, 40)
    """
    with jax.named_scope("jaxrbd.forward_dynamics_parameter_derivatives"):
        q, qd, tau = check_state(model, q=q, qd=qd, tau=tau)
        return _fdp(model, q, qd, tau, check_f_ext(model, f_ext))[0]


_LEAVES = ("gravity", "inertia", "Xtree_E", "Xtree_r", "axes")


def model_derivatives(fn, model, *args, leaves=("inertia",)):
    """Jacobians of ``fn(model, *args)`` with respect to leaves of the model, as matrices.

    A convenience over `jax.jacfwd` / `jax.jacrev` (picked by the sizes): each model
    leaf is flattened in C order, so for a vector output every Jacobian is a matrix whose
    columns follow ``leaf.ravel()`` (e.g. ``model.inertia.ravel()``: body-major, 10
    parameters per body; ``model.Xtree_r.ravel()``: the joint placements, i.e. link
    lengths; ``model.gravity``).

    Args:
        fn: ``fn(model, *args) -> array``, differentiable in the model.
        model: a `Model`.
        *args: the other arguments of ``fn`` (held fixed).
        leaves: names of model leaves among ``"gravity"``, ``"inertia"``, ``"Xtree_E"``,
            ``"Xtree_r"``, ``"axes"``.

    Returns:
        A dict ``{leaf: J}`` with ``J`` of shape ``out.shape + (leaf.size,)``.

    Raises:
        ValueError: an unknown leaf name.

    Example:
        >>> def dtau_dg(model, q, qd, qdd):
        ...     return jaxrbd.model_derivatives(jaxrbd.inverse_dynamics, model, q, qd, qdd, leaves="gravity")
        >>> jax.jit(dtau_dg)(model, q, jnp.zeros(9), tau)["gravity"].shape
        (9, 3)
    """
    if isinstance(leaves, str):
        leaves = (leaves,)
    leaves = tuple(leaves)
    for name in leaves:
        if name not in _LEAVES:
            raise ValueError(f"leaves contains {name!r}, expected names among {_LEAVES}")
    if not leaves:
        raise ValueError("leaves is empty, expected at least one model leaf name")
    values = tuple(jnp.asarray(getattr(model, n)) for n in leaves)

    def g(flat):
        new = tuple(v.reshape(x.shape) for v, x in zip(flat, values))
        return fn(eqx.tree_at(lambda m: tuple(getattr(m, n) for n in leaves), model, new), *args)

    flat = tuple(v.ravel() for v in values)
    out = jax.eval_shape(g, flat)
    n_in = sum(v.size for v in flat)
    jac = (jax.jacrev if int(np.prod(out.shape)) < n_in else jax.jacfwd)(g)(flat)
    return dict(zip(leaves, jac))
