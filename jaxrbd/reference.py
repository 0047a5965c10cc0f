"""Reference algorithms: RNEA, CRBA and ABA as written in the book, one body at a time.

These are the textbook recursions of Featherstone (2008), *Rigid Body Dynamics
Algorithms* (RBDA): the recursive Newton-Euler algorithm (Table 5.1), the
composite-rigid-body algorithm (Table 6.2) and the articulated-body algorithm (Table
7.1), in the form of Featherstone's spatial_v2 functions ``ID.m``, ``HandC.m`` and
``FDab.m``. They use the book's names (``Xup``, ``S``, ``vJ``, ``cJ``, ``IA``, ``pA``,
``U``, ``D``, ``u``), dense 6x6 matrices from the public `jaxrbd.spatial` module and a
Python loop over the bodies. A multi-DoF joint is one body with a ``6 x k`` motion
subspace (``U`` is ``6 x k`` and ``D`` is ``k x k``), and a fixed joint is a body with
``k = 0``: nothing here shares code with the fast machinery (nodes, schedules, the
batch-trailing layout; see ``docs/internals.md``).

They exist to be read and to check the fast algorithms (`jaxrbd.inverse_dynamics`,
`jaxrbd.mass_matrix`, `jaxrbd.forward_dynamics`, `jaxrbd.bias_forces`), which the
property tests compare against them on random trees of every joint kind. They are
slow (the trace grows with the number of bodies) and are not meant for production use,
but they are pure JAX and work under `jax.jit`, `jax.grad` and `jax.vmap`.

Conventions are those of ``CONVENTIONS.md``: body ``i`` has parent ``lam`` (the body in
whose frame its placement ``Xtree`` is given: a body attached by a fixed joint is a
body of its own here, and its children's placements are relative to its nearest moving
ancestor, as the model stores them), gravity enters as the acceleration ``-a_grav`` of
the world, and ``f_ext`` rows are spatial forces in world coordinates at the world
origin.

Example:
    >>> from jaxrbd import reference
    >>> q, qd = jnp.full(model.nq, 0.3), jnp.full(model.nv, -0.2)
    >>> tau = reference.inverse_dynamics(model, q, qd, jnp.ones(model.nv))
    >>> qdd = reference.forward_dynamics(model, q, qd, tau)   # ABA inverts RNEA
    >>> bool(jnp.allclose(qdd, 1.0))
    True
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import spatial

__all__ = ["bias_forces", "forward_dynamics", "inverse_dynamics", "jcalc", "mass_matrix"]

#: Euler joints: the axes (0 = x, 1 = y, 2 = z) of the three successive rotations,
#: each about the axis of the frame produced by the previous ones (RBDL's EulerZYX...).
EULER_AXES = {
    "euler_zyx": (2, 1, 0),
    "euler_xyz": (0, 1, 2),
    "euler_yxz": (1, 0, 2),
    "euler_zxy": (2, 0, 1),
}
_COORD_ROT = (spatial.rx, spatial.ry, spatial.rz)


def _axis_rotation(w, q):
    """Robotics rotation by ``q`` about the unit (or zero: identity) axis ``w`` (Rodrigues)."""
    W = spatial.skew(w)
    return jnp.eye(3) + jnp.sin(q) * W + (1.0 - jnp.cos(q)) * (W @ W)


def _column(kind, col, q):
    """``(XJ, s)`` of one column ``[w; v]`` of a ``screw`` or ``custom`` joint at ``q``.

    ``screw``: the exact screw motion ``exp([w; v] q)``, constant ``s = [w; v]``
    (RBDA section 4.4); the screw axis passes through ``w x v`` with pitch ``w . v``.
    ``custom`` (RBDL's ``Xrot(q, w) * Xtrans(v q)``): rotation about ``w``, origin at
    ``v q`` in the joint frame, so ``s = [w; E v]`` in the child frame.
    """
    w, v = col[:3], col[3:]
    R = _axis_rotation(w, q)
    if kind == "screw":
        r = (jnp.eye(3) - R) @ jnp.cross(w, v) + (w @ v) * q * w + (1.0 - w @ w) * q * v
        return spatial.plux(R.T, r), col
    return spatial.plux(R.T, v * q), jnp.concatenate([w, R.T @ v])


def jcalc(kind, columns, q):
    """Joint transform and motion subspace (RBDA section 4.4, spatial_v2 ``jcalc.m``).

    Args:
        kind: the joint kind (``model.joint_kind[i]``): ``"fixed"``, ``"screw"``
            (revolute, prismatic, helical, `jaxrbd.joints.screw`, planar),
            ``"custom"`` (RBDL's columns), ``"spherical"``, ``"free"``, ``"euler_*"``
            or ``"translation_xyz"``.
        columns: `(k, 6)` the joint's columns ``[w; v]`` (used by screw and custom
            joints; their ``k`` columns act in series, in order).
        q: the joint's coordinates `(nq_j,)`.

    Returns:
        ``XJ`` `(6, 6)` (joint frame to child frame) and ``S`` `(6, k)`, the motion
        subspace in child coordinates: the child's velocity relative to the joint frame
        is ``vJ = S qd``.
    """
    if kind == "fixed":
        return jnp.eye(6), jnp.zeros((6, 0))
    if kind == "free":  # q = [p; quaternion], v = [w; v] in body coordinates
        return spatial.plux(spatial.quat_to_rotation(q[3:]).T, q[:3]), jnp.eye(6)
    if kind == "spherical":
        return spatial.plux(spatial.quat_to_rotation(q).T, jnp.zeros(3)), jnp.eye(6)[:, :3]
    if kind == "translation_xyz":
        return spatial.xlt(q), jnp.eye(6)[:, 3:]
    if kind in EULER_AXES:  # E = r_a2(q2) r_a1(q1) r_a0(q0); S_k = axis k in child coords
        a0, a1, a2 = EULER_AXES[kind]
        E2, E1, E0 = _COORD_ROT[a2](q[2]), _COORD_ROT[a1](q[1]), _COORD_ROT[a0](q[0])
        e = jnp.eye(3)
        w = jnp.stack([E2 @ E1 @ e[a0], E2 @ e[a1], e[a2]], axis=1)
        return spatial.plux(E2 @ E1 @ E0, jnp.zeros(3)), jnp.concatenate([w, 0 * w])
    if kind in ("screw", "custom"):  # columns in series: XJ = X_k ... X_1
        XJ, S = jnp.eye(6), jnp.zeros((6, 0))
        for j in range(columns.shape[0]):
            Xj, sj = _column(kind, columns[j], q[j])
            XJ, S = Xj @ XJ, jnp.concatenate([Xj @ S, sj[:, None]], axis=1)
        return XJ, S
    raise ValueError(f"jcalc: unknown joint kind {kind!r}")


def _joint(model, i, q, qd):
    """``XJ, S, vJ = S qd, cJ = dS/dt qd`` of body ``i``'s joint (``S`` in child coordinates).

    ``cJ`` is the apparent derivative of ``S`` in the child frame times ``qd`` (RBDA eq.
    4.21), taken by differentiating `jcalc`'s ``S`` along the motion; it is zero where
    ``S`` is constant (free and spherical joints, one-column screws).
    """
    kind, iq, iv = model.joint_kind[i], model.q_start[i], model.v_start[i]
    k = sum(1 for b in model.node_body if b == i)
    nq = {"free": 7, "spherical": 4, "fixed": 0}.get(kind, k)
    qi, qdi, cols = q[iq : iq + nq], qd[iv : iv + k], model.axes[iv : iv + k]
    if kind in ("free", "spherical", "fixed", "translation_xyz") or (kind == "screw" and k == 1):
        (XJ, S), cJ = jcalc(kind, cols, qi), jnp.zeros(6)  # S is constant
    else:  # nq == nv: dq/dt = qd
        (XJ, S), (_, dS) = jax.jvp(lambda x: jcalc(kind, cols, x), (qi,), (qdi,))
        cJ = dS @ qdi
    return XJ, S, S @ qdi, cJ, slice(iv, iv + k)


def _tree(model, q, qd):
    """The bodies ``i >= 1`` in topological order, and per body (dicts keyed by ``i``, as
    spatial_v2's cell arrays): parent ``lam``, ``Xup = XJ Xtree``, ``S``, ``vJ``, ``cJ``,
    velocity slice ``dofs`` and spatial inertia ``I`` (6x6, body coordinates)."""
    ids = range(1, model.nbodies)
    lam, Xup, S, vJ, cJ, dofs, I = {}, {}, {}, {}, {}, {}, {}
    for i in ids:
        lam[i] = model.node_body[model.body_node[model.body_parent[i]]]
        XJ, S[i], vJ[i], cJ[i], dofs[i] = _joint(model, i, q, qd)
        Xup[i] = XJ @ spatial.plux(model.Xtree_E[i], model.Xtree_r[i])
        I[i] = spatial.inertia_from_vector(model.inertia[i])
    return ids, lam, Xup, S, vJ, cJ, dofs, I


def _armature(model):
    arm = getattr(model, "armature", None)
    return jnp.zeros(model.nv) if arm is None else arm


def _state(model, q, qd, f_ext):
    q, qd = jnp.asarray(q, model.dtype), jnp.asarray(qd, model.dtype)
    a_grav = jnp.concatenate([jnp.zeros(3), model.gravity])  # RBDA: a_0 = -a_grav
    f_ext = None if f_ext is None else jnp.asarray(f_ext, model.dtype)
    return q, qd, a_grav, f_ext


def inverse_dynamics(model, q, qd, qdd, f_ext=None):
    """``tau`` by the recursive Newton-Euler algorithm (RBDA Table 5.1, spatial_v2 ``ID.m``).

    The fast twin is `jaxrbd.inverse_dynamics`; arguments and result are the same.

    Example:
        >>> from jaxrbd import reference
        >>> reference.inverse_dynamics(model, jnp.zeros(model.nq), jnp.zeros(model.nv),
        ...                            jnp.zeros(model.nv)).shape
        (9,)
    """
    q, qd, a_grav, f_ext = _state(model, q, qd, f_ext)
    qdd = jnp.asarray(qdd, model.dtype)
    ids, lam, Xup, S, vJ, cJ, dofs, I = _tree(model, q, qd)
    v, a, X0, f = {0: jnp.zeros(6)}, {0: -a_grav}, {0: jnp.eye(6)}, {}
    for i in ids:
        v[i] = Xup[i] @ v[lam[i]] + vJ[i]
        a[i] = Xup[i] @ a[lam[i]] + S[i] @ qdd[dofs[i]] + cJ[i] + spatial.cross_motion(v[i], vJ[i])
        f[i] = I[i] @ a[i] + spatial.cross_force(v[i], I[i] @ v[i])
        X0[i] = Xup[i] @ X0[lam[i]]
        if f_ext is not None:
            f[i] = f[i] - spatial.X_star(X0[i]) @ f_ext[i]
    tau = jnp.zeros(model.nv)
    for i in reversed(ids):
        tau = tau.at[dofs[i]].set(S[i].T @ f[i])
        if lam[i] != 0:
            f[lam[i]] = f[lam[i]] + Xup[i].T @ f[i]
    return tau + _armature(model) * qdd


def bias_forces(model, q, qd, f_ext=None):
    """``C(q, qd)``: `inverse_dynamics` at ``qdd = 0`` (twin of `jaxrbd.bias_forces`).

    Example:
        >>> from jaxrbd import reference
        >>> reference.bias_forces(model, jnp.zeros(model.nq), jnp.ones(model.nv)).shape
        (9,)
    """
    return inverse_dynamics(model, q, qd, jnp.zeros(model.nv), f_ext)


def mass_matrix(model, q):
    """``H(q)`` by the composite-rigid-body algorithm (RBDA Table 6.2, spatial_v2 ``HandC.m``).

    The fast twin is `jaxrbd.mass_matrix`. The armature adds ``diag(armature)``.

    Example:
        >>> from jaxrbd import reference
        >>> H = reference.mass_matrix(model, jnp.zeros(model.nq))
        >>> H.shape, bool(jnp.allclose(H, H.T))
        ((9, 9), True)
    """
    q = jnp.asarray(q, model.dtype)
    ids, lam, Xup, S, _, _, dofs, I = _tree(model, q, jnp.zeros(model.nv))
    IC = dict(I)
    for i in reversed(ids):
        if lam[i] != 0:
            IC[lam[i]] = IC[lam[i]] + Xup[i].T @ IC[i] @ Xup[i]
    H = jnp.zeros((model.nv, model.nv))
    for i in ids:
        F = IC[i] @ S[i]
        H = H.at[dofs[i], dofs[i]].set(S[i].T @ F)
        j = i
        while lam[j] != 0:
            F = Xup[j].T @ F
            j = lam[j]
            H = H.at[dofs[i], dofs[j]].set(F.T @ S[j])
            H = H.at[dofs[j], dofs[i]].set(S[j].T @ F)
    return H + jnp.diag(_armature(model))


def forward_dynamics(model, q, qd, tau, f_ext=None):
    """``qdd`` by the articulated-body algorithm (RBDA Table 7.1, spatial_v2 ``FDab.m``).

    The fast twin is `jaxrbd.forward_dynamics`. The armature adds to ``D``.

    Example:
        >>> from jaxrbd import reference
        >>> q, qd, tau = jnp.zeros(model.nq), jnp.zeros(model.nv), jnp.ones(model.nv)
        >>> reference.forward_dynamics(model, q, qd, tau).shape
        (9,)
    """
    q, qd, a_grav, f_ext = _state(model, q, qd, f_ext)
    tau, arm = jnp.asarray(tau, model.dtype), _armature(model)
    ids, lam, Xup, S, vJ, cJ, dofs, I = _tree(model, q, qd)
    v, X0, c, IA, pA = {0: jnp.zeros(6)}, {0: jnp.eye(6)}, {}, {}, {}
    for i in ids:
        v[i] = Xup[i] @ v[lam[i]] + vJ[i]
        c[i] = cJ[i] + spatial.cross_motion(v[i], vJ[i])
        IA[i] = I[i]
        pA[i] = spatial.cross_force(v[i], I[i] @ v[i])
        X0[i] = Xup[i] @ X0[lam[i]]
        if f_ext is not None:
            pA[i] = pA[i] - spatial.X_star(X0[i]) @ f_ext[i]
    U, Dinv, u = {}, {}, {}
    for i in reversed(ids):
        U[i] = IA[i] @ S[i]
        Dinv[i] = jnp.linalg.inv(S[i].T @ U[i] + jnp.diag(arm[dofs[i]]))
        u[i] = tau[dofs[i]] - S[i].T @ pA[i]
        if lam[i] != 0:
            Ia = IA[i] - U[i] @ Dinv[i] @ U[i].T
            pa = pA[i] + Ia @ c[i] + U[i] @ Dinv[i] @ u[i]
            IA[lam[i]] = IA[lam[i]] + Xup[i].T @ Ia @ Xup[i]
            pA[lam[i]] = pA[lam[i]] + Xup[i].T @ pa
    a, qdd = {0: -a_grav}, jnp.zeros(model.nv)
    for i in ids:
        a_i = Xup[i] @ a[lam[i]] + c[i]
        qdd = qdd.at[dofs[i]].set(Dinv[i] @ (u[i] - U[i].T @ a_i))
        a[i] = a_i + S[i] @ qdd[dofs[i]]
    return qdd
