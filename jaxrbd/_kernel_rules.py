"""Derivatives of one state's dynamics under ``traversal="kernel"``, in native kernels.

Forward dynamics ``qdd = FD(model, q, qd, tau)`` solves ``ID(model, q, qd, qdd) = tau``,
so its tangent is

    dqdd = H^-1 (dtau - dID),   dID = d ID / d(model, q, qd) at the solved qdd,

and inverse dynamics' tangent is ``dID`` with ``H dqdd`` (the ``qdd`` part). Both are
linear maps (`jaxrbd._core.native_linear`) whose transposes, the maps reverse mode runs,
are native:

* ``H^-1`` is symmetric: its transpose is itself, the ABA kernel at rest without
  gravity (``qd = 0``, ``g = 0`` makes ABA solve ``H x = b``);
* the transpose of ``dID`` is the reverse sweep of RNEA (``ffi.rnea_vjp``), which gives
  the cotangents of ``qd``, ``qdd`` and of the per-node quantities (transforms, motion
  columns, node inertias), taken on to the model's leaves and ``q`` by the vector-Jacobian
  product of the per-node maps (`jaxrbd._core.nodes.Xup_and_S`,
  `jaxrbd._core.jcalc.node_inertias`): a handful of XLA operations over all nodes at
  once, no recursion.

So `jax.grad` of a loss through one state's forward dynamics runs three native kernels
(FD, the solve, the RNEA sweep) and that per-node map. Forward mode (`jax.jvp`,
`jax.jacfwd`), batches and second derivatives take the reference maps, the XLA
programs' derivatives, with the same numbers.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

from ._aba import minv_times_batched
from ._core import ffi
from ._core.native_linear import LinearMap, apply, pair
from ._rnea import rnea_single

__all__ = ["fd_tangent", "id_tangent"]


def _READ(m):
    """The model's leaves that inverse dynamics reads, as `ffi.rnea_vjp` returns them."""
    return m.Xtree_E, m.Xtree_r, m.inertia, m.axes, m.armature, m.gravity


def _rnea(model, q, qd, qdd):
    return rnea_single(model, q, qd, qdd, None)


def _no_gravity(model):
    return eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))


@functools.cache
def _maps(treedef):
    """The linear maps of one model structure: ``(dID, H^-1)``."""
    unflatten = functools.partial(jax.tree_util.tree_unflatten, treedef)
    n = treedef.num_leaves

    def split(res):  # residuals: the model's leaves, then the state
        return unflatten(res[:n]), res[n:]

    # dID: (model leaves, dq, dqd, dqdd) -> dtau, at (model, q, qd, qdd)
    def id_reference(res, lin):
        model, (q, qd, qdd) = split(res)
        dmodel, dstate = unflatten(lin[:n]), lin[n:]
        return (jax.jvp(_rnea, (model, q, qd, qdd), (dmodel,) + tuple(dstate))[1],)

    def id_t_reference(res, cts):
        model, (q, qd, qdd) = split(res)
        bars = jax.vjp(_rnea, model, q, qd, qdd)[1](cts[0])
        return tuple(jax.tree_util.tree_leaves(bars[0])) + bars[1:]

    def id_t_native(res, cts):
        model, (q, qd, qdd) = split(res)
        if not ffi.supported(model, q):
            return None
        *leaves, qb, qdb, qddb = ffi.rnea_vjp(model, q, qd, qdd, cts[0])
        mb = eqx.tree_at(_READ, jax.tree_util.tree_map(jnp.zeros_like, model), tuple(leaves))
        return tuple(jax.tree_util.tree_leaves(mb)) + (qb, qdb, qddb)

    # shapes: dID gives one like qdd; its transpose one like each residual (the model's
    # leaves, q, qd, qdd: exactly dID's linear arguments)
    did = pair(LinearMap(id_reference, name="dID", shapes=lambda res, lin: (res[-1],)),
               LinearMap(id_t_reference, id_t_native, name="dID^T",
                         shapes=lambda res, lin: res))

    # H^-1: (b,) -> (H(q)^-1 b,), at (model, q); symmetric, so its own transpose
    def minv_reference(res, lin):
        model, (q,) = split(res)
        return (minv_times_batched(model, q[:, None], lin[0][:, None])[:, 0],)

    def minv_native(res, lin):
        model, (q,) = split(res)
        out = ffi.aba(_no_gravity(model), q, jnp.zeros_like(lin[0]), lin[0])
        return None if out is None else (out,)

    minv = LinearMap(minv_reference, minv_native, name="H^-1", shapes=lambda res, lin: lin)
    pair(minv, minv)
    return did, minv


def id_tangent(model, q, qd, qdd, dmodel, dq, dqd, dqdd):
    """``d ID`` at ``(model, q, qd, qdd)`` along the tangents (arrays, ``dmodel`` a model
    of them), whose transpose is the native RNEA sweep."""
    leaves, treedef = jax.tree_util.tree_flatten(model)
    did, _ = _maps(treedef)
    return apply(did, tuple(leaves) + (q, qd, qdd),
                 tuple(jax.tree_util.tree_leaves(dmodel)) + (dq, dqd, dqdd))[0]


def fd_tangent(model, q, qd, qdd, dmodel, dq, dqd, dtau):
    """``dqdd = H^-1 (dtau - d ID)`` at the solved ``qdd`` (`id_tangent`)."""
    leaves, treedef = jax.tree_util.tree_flatten(model)
    _, minv = _maps(treedef)
    rhs = dtau - id_tangent(model, q, qd, qdd, dmodel, dq, dqd, jnp.zeros_like(qdd))
    return apply(minv, tuple(leaves) + (q,), (rhs,))[0]
