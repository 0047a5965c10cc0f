"""Inverse dynamics by the recursive Newton-Euler algorithm (Felis 2017, Alg. 1, RBDA Table 5.1)."""

from __future__ import annotations

import jax.numpy as jnp

from ._core import algebra as al
from ._core import ffi
from ._core.jcalc import joint_velocity_terms, node_inertias
from ._core.native_vmap import native_vmap
from ._core.nodes import Xup_and_S, f_ext_nodes, gravity_acceleration, sched
from ._core.passes import accumulate_forces, velocities_accelerations
from ._core.rows import node_rows

__all__ = ["rnea_batched", "rnea_single"]


def rnea_batched(model, q, qd, qdd, f_ext=None, gravity=True):
    """RNEA on the batch-trailing layout: ``q (nq, B)``, ``qd, qdd (nv, B)`` -> ``tau (nv, B)``.

    ``f_ext``: ``(nbodies, 6, B)`` or ``None``. ``gravity=False`` drops gravity.
    """
    B = q.shape[-1]
    s = sched(model, B)
    E, r, S = Xup_and_S(model, q)
    vJ, vJc, cJ = joint_velocity_terms(model, q, qd, S)
    qdd_n = node_rows(qdd)
    a_world = gravity_acceleration(model, B, q.dtype)
    if not gravity:
        a_world = jnp.zeros_like(a_world)
    v, a, X0 = velocities_accelerations(
        s, E, r, vJ, vJc, cJ, S * qdd_n[:, None, :], a_world, with_X0=f_ext is not None
    )
    Ic = node_inertias(model)
    # f_i = I_i a_i + v_i x* I_i v_i - f_ext_i, in node coordinates (batched, no recursion)
    f = al.inertia_mul(Ic, a) + al.cross_force(v, al.inertia_mul(Ic, v))
    if f_ext is not None:
        f = f - f_ext_nodes(model, f_ext, *X0)
    f = accumulate_forces(s, E, r, f)
    # the rotors' reaction on their own coordinate (H + diag(armature), Featherstone 2008 §9.4)
    return al.dot(S, f)[1:] + model.armature[:, None] * qdd


#: single-state RNEA; ``f_ext`` may be None (`native_vmap`'s optional arguments). The
#: lambda looks `rnea_batched` up at each trace, so a patched module function is used.
rnea_single = native_vmap(lambda m, q, qd, qdd, f: rnea_batched(m, q, qd, qdd, f),
                          kernel=ffi.rnea)
