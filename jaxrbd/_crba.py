"""Joint-space inertia by the composite-rigid-body algorithm (Felis 2017, Alg. 3, RBDA Table 6.2)."""

from __future__ import annotations

import functools

import jax
import numpy as np

from . import _algebra as al
from . import _coupling
from ._common import Xup_and_S, check_state, sched
from ._jcalc import node_inertias
from ._model import is_coupled
from ._passes import composite_inertias
from ._rows import place_rows
from ._tree import Schedule
from ._vmap import native_vmap

__all__ = ["crba_batched", "mass_matrix"]


@functools.lru_cache(maxsize=256)
def _walk_tables(s: Schedule):
    """Static tables of the ancestor walk: for walk step d (d = 1..max_depth-1),
    ``cur[d-1, i]`` is the node whose ``Xup`` lifts node ``i``'s force one level and
    ``anc[d-1, i]`` the ancestor reached (0 = past the root: masked)."""
    anc = s.ancestors  # (Dm, nv), -1 past the root
    Dm = anc.shape[0]
    nodes = np.arange(1, s.n)
    cur = np.concatenate([nodes[None], np.maximum(anc[:-1], 0)], axis=0)[:Dm]
    cur = np.where(np.concatenate([np.ones((1, s.n - 1), bool), anc[:-1] > 0])[:Dm], cur, 0)
    valid = anc > 0
    rows, cols = np.nonzero(valid.T)  # i-1, step d-1
    return cur.astype(np.int32), np.maximum(anc, 0).astype(np.int32), rows, cols, anc[cols, rows] - 1


def crba_batched(model, q):
    """CRBA on the batch-trailing layout: ``q (nq, B)`` -> ``H (nv, nv, B)``."""
    s = sched(model, q.shape[-1])
    E, r, S = Xup_and_S(model, q)
    IC = composite_inertias(s, E, r, node_inertias(model))
    F = al.inertia_mul(IC[1:], S[1:])  # (nv, 6, B)
    diag = al.dot(S[1:], F) + model.armature[:, None]  # rotor inertia: H + diag(armature)
    nv = model.nv
    parts = [(np.arange(nv) * (nv + 1), diag)]  # flat indices into H (nv * nv, B)
    if s.max_depth > 1:
        cur, anc, rows, steps, cols = _walk_tables(s)

        # The rows of E, r and S each walk step needs are gathered inside the step:
        # gathering them for all steps up front materialises (max_depth - 1) copies of
        # the per-node arrays per block (measurements: benchmarks/LOG.md).
        def step(F, x):
            c, a = x
            F = al.XT_force(E.at[c].get(mode="promise_in_bounds"),
                            r.at[c].get(mode="promise_in_bounds"), F)
            return F, al.dot(S.at[a].get(mode="promise_in_bounds"), F)

        _, vals = jax.lax.scan(step, F, (cur, anc))  # (Dm, nv, B)
        v = vals[steps, rows]
        parts += [(rows * nv + cols, v), (cols * nv + rows, v)]
    return place_rows(nv * nv, parts).reshape((nv, nv) + diag.shape[-1:])


_crba = native_vmap(crba_batched)


def mass_matrix(model, q, *, derivatives="analytic"):
    """Joint-space inertia matrix ``H(q)`` by the composite-rigid-body algorithm.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        derivatives: how `jax.jvp`, `jax.grad`, ... differentiate this call:
            ``"analytic"`` (default), ``dH`` from the analytic RNEA derivatives of
            ``H e_j = inverse_dynamics(q, 0, e_j)`` without gravity (O(nv^3) per
            configuration; model leaves by AD); ``"ad"``, automatic differentiation
            through the CRBA, kept for checking. The value is the same.

    Returns:
        `H`, `(nv, nv)`, symmetric positive definite [kg m^2 | kg m | kg].

    Example:
        >>> H = jaxrbd.mass_matrix(model, jnp.zeros(model.nq))
        >>> H.shape == (model.nv, model.nv)
        True
    """
    if is_coupled(model):
        return _coupling.mass_matrix(model, q)
    with jax.named_scope("jaxrbd.mass_matrix"):
        (q,) = check_state(model, q=q)
        from . import _analytic_rules as rules

        if rules.check_derivatives(derivatives) == "analytic":
            return rules.mass_matrix(model, q)
        return _crba(model, q)
