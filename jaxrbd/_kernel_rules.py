"""Derivatives of one state's dynamics under ``traversal="kernel"``, in native kernels.

Forward dynamics ``qdd = FD(model, q, qd, tau)`` solves ``ID(model, q, qd, qdd) = tau``,
so its tangent is

    dqdd = H^-1 (dtau - dID),   dID = d ID / d(model, q, qd) at the solved qdd,

and inverse dynamics' tangent is ``dID`` with ``H dqdd`` (the ``qdd`` part). Both are
linear maps (`jaxrbd._core.native_linear`) whose transposes, the maps reverse mode runs,
are native:

* the transpose of ``dID`` is the reverse sweep of RNEA (``ffi.rnea_vjp``): the primal
  passes, the adjoint of the force and motion passes, and the chain rule through the
  joint transforms, tree placements and welded bodies' inertias to the model's leaves
  and ``q``, all in C++;
* the transpose of ``dFD`` is one kernel (``ffi.fd_vjp``): ``u = H^-1 lam`` (``H`` is
  symmetric; ABA's last two passes at rest without gravity, ``qd = 0``, ``g = 0``, solve
  ``H x = b`` with the factors of ``H`` the primal ABA kept), then the same sweep for
  ``-u`` from the primal's passes, with ``u`` the cotangent of ``tau``. The primal
  (`fd_primal`) is the ABA kernel that also returns those residuals (``ffi.aba_aux``).

Both kernels also write the zero cotangents of the model's leaves the dynamics do not
read (limits, damping, ...), so `jax.grad` of a loss through one state's forward
dynamics runs two native kernels (FD and its sweep) and a few elementwise ones for the
loss. A `jax.vmap` of the gradient over states of one model (and `jax.jacrev`, a vmap
over cotangents) runs each sweep once for the batch, its C++ looping over it. Forward
mode (`jax.jvp`, `jax.jacfwd`), batches of models and second derivatives take the
reference maps, the XLA programs' derivatives, with the same numbers.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from ._aba import aba_batched, minv_times_batched
from ._core import ffi
from ._core.native_linear import LinearMap, apply, pair
from ._core.native_vmap import kernel_batch_rule
from ._rnea import rnea_single

__all__ = ["fd_primal", "fd_tangent", "id_tangent"]


def _READ(m):
    """The model's leaves that inverse dynamics reads, as `ffi.rnea_vjp` returns them."""
    return m.Xtree_E, m.Xtree_r, m.inertia, m.axes, m.armature, m.gravity


def _rnea(model, q, qd, qdd):
    return rnea_single(model, q, qd, qdd, None)


@functools.cache
def _leaf_layout(treedef):
    """Where the leaves `_READ` names sit among the model's leaves, and the others."""
    n = treedef.num_leaves
    read = tuple(_READ(jax.tree_util.tree_unflatten(treedef, list(range(n)))))
    return read, tuple(i for i in range(n) if i not in read)


def _native_cotangents(vjp, treedef, model, q, qd, qdd, lam, batch=False):
    """A native sweep's outputs as ``(model leaves..., q, qd, qdd | tau)`` cotangents; the
    kernel writes the zeros of the leaves the dynamics do not read too. With
    ``batch=True`` the state arguments and every cotangent have a leading batch axis."""
    if not ffi.supported(model, q, batch=batch):
        return None
    leaves = jax.tree_util.tree_leaves(model)
    read, others = _leaf_layout(treedef)
    native_zeros = [i for i in others if leaves[i].dtype == q.dtype]
    out = vjp(model, q, qd, qdd, lam, zeros=[leaves[i].shape for i in native_zeros])
    cts = [None] * len(leaves)
    for i, ct in zip(read + tuple(native_zeros), out[:6] + out[9:]):
        cts[i] = ct
    b = q.shape[:-1]
    cts = [jnp.zeros(b + x.shape, x.dtype) if ct is None else ct for x, ct in zip(leaves, cts)]
    return tuple(cts) + tuple(out[6:9])


def _native_batch(treedef, sweep):
    """The batching rule of a native sweep's map (``LinearMap(batched=...)``): a batch of
    states of one model is one call, ``sweep(model, states, lam)`` with every state
    argument batched on its first axis, whose kernel loops over it; a batch of models
    (stacked leaves) returns ``None`` for the reference."""
    n = treedef.num_leaves

    def batched(args, axes):
        if any(a is not None for a in axes[:n]):
            return None
        size = next(x.shape[a] for x, a in zip(args, axes) if a is not None)
        states = tuple(jnp.moveaxis(x, a, 0) if a is not None
                       else jnp.broadcast_to(x, (size,) + x.shape)
                       for x, a in zip(args[n:], axes[n:]))
        return sweep(jax.tree_util.tree_unflatten(treedef, args[:n]), states[:-1], states[-1])

    return batched


def _fd_reference(model, q, qd, tau):
    return aba_batched(model, q[:, None], qd[:, None], tau[:, None], None)[:, 0]


@custom_vmap
def _fd_aux(model, q, qd, tau):
    return ffi.aba_aux(model, q, qd, tau)


@_fd_aux.def_vmap
def _fd_aux_batch(axis_size, in_batched, model, q, qd, tau):
    # the primal stays the kernel's at every order: no `_with_vmap_rule` around it
    out = kernel_batch_rule(ffi.aba_aux, ffi.aba_aux, axis_size, in_batched, model, q, qd, tau)
    return out, (True, True)


@jax.custom_jvp
def fd_primal(model, q, qd, tau):
    """One state's forward dynamics on the native kernel (`ffi.supported` holds) and the
    residuals its native reverse sweep reads: ``(qdd (nv,), aux)`` (`ffi.aba_aux`).

    ``aux`` enters only that sweep, whose reference and derivatives read ``(model, q,
    qd, qdd)``, so its tangent is zero; ``qdd``'s is the XLA program's."""
    return _fd_aux(model, q, qd, tau)


@fd_primal.defjvp
def _fd_primal_jvp(primals, tangents):
    # the primal is the kernel's at every order: the native sweep reads its aux
    qdd, aux = fd_primal(*primals)
    dqdd = jax.jvp(_fd_reference, primals, tangents)[1]
    return (qdd, aux), (dqdd, jnp.zeros_like(aux))


@functools.cache
def _maps(treedef):
    """The linear maps of one model structure: ``(dID, dFD)``."""
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
        return _native_cotangents(ffi.rnea_vjp, treedef, model, q, qd, qdd, cts[0])

    def id_t_batch(model, states, lam):
        return _native_cotangents(ffi.rnea_vjp, treedef, model, *states, lam, batch=True)

    # shapes: each map gives one like qdd; its transpose one like each residual (the
    # model's leaves, q, qd, qdd: exactly the map's linear arguments)
    did = pair(LinearMap(id_reference, name="dID", shapes=lambda res, lin: (res[-1],)),
               LinearMap(id_t_reference, id_t_native, name="dID^T",
                         shapes=lambda res, lin: res,
                         batched=_native_batch(treedef, id_t_batch)))

    # dFD: (model leaves, dq, dqd, dtau) -> dqdd = H^-1 (dtau - dID), at (model, q, qd,
    # qdd, aux) with qdd the solution and aux the primal kernel's residuals, which only
    # the native transpose reads; reverse mode runs that transpose as one native kernel
    def fd_reference(res, lin):
        res = res[:-1]
        model, (q, qd, qdd) = split(res)
        dq, dqd, dtau = lin[n:]
        did = id_reference(res, lin[:n] + (dq, dqd, jnp.zeros_like(qdd)))[0]
        return (minv_times_batched(model, q[:, None], (dtau - did)[:, None])[:, 0],)

    def fd_t_reference(res, cts):
        at = tuple(jnp.zeros_like(r) for r in res[:-1])
        return jax.vjp(lambda *lin: fd_reference(res, lin), *at)[1](cts)

    def fd_t_native(res, cts):
        model, (q, qd, qdd, aux) = split(res)
        vjp = functools.partial(ffi.fd_vjp, aux=aux)
        return _native_cotangents(vjp, treedef, model, q, qd, qdd, cts[0])

    def fd_t_batch(model, states, lam):
        q, qd, qdd, aux = states
        vjp = functools.partial(ffi.fd_vjp, aux=aux)
        return _native_cotangents(vjp, treedef, model, q, qd, qdd, lam, batch=True)

    dfd = pair(LinearMap(fd_reference, name="dFD", shapes=lambda res, lin: (res[-2],)),
               LinearMap(fd_t_reference, fd_t_native, name="dFD^T",
                         shapes=lambda res, lin: res[:-1],
                         batched=_native_batch(treedef, fd_t_batch)))
    return did, dfd


def id_tangent(model, q, qd, qdd, dmodel, dq, dqd, dqdd):
    """``d ID`` at ``(model, q, qd, qdd)`` along the tangents (arrays, ``dmodel`` a model
    of them), whose transpose is the native RNEA sweep."""
    leaves, treedef = jax.tree_util.tree_flatten(model)
    did, _ = _maps(treedef)
    return apply(did, tuple(leaves) + (q, qd, qdd),
                 tuple(jax.tree_util.tree_leaves(dmodel)) + (dq, dqd, dqdd))[0]


def fd_tangent(model, q, qd, qdd, aux, dmodel, dq, dqd, dtau):
    """``dqdd = H^-1 (dtau - d ID)`` at the solved ``qdd`` with the primal's residuals
    ``aux`` (`fd_primal`; `id_tangent`), whose transpose is one native kernel
    (``H^-1``, then the RNEA sweep)."""
    leaves, treedef = jax.tree_util.tree_flatten(model)
    _, dfd = _maps(treedef)
    return apply(dfd, tuple(leaves) + (q, qd, qdd, aux),
                 tuple(jax.tree_util.tree_leaves(dmodel)) + (dq, dqd, dtau))[0]
