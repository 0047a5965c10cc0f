"""Joint-space inertia by the composite-rigid-body algorithm (Felis 2017, Alg. 3, RBDA Table 6.2)."""

from __future__ import annotations

import jax
import numpy as np

from . import _coupling
from ._core import algebra as al
from ._core.checks import check_state
from ._core.jcalc import node_inertias
from ._core.native_vmap import native_vmap
from ._core.nodes import Xup_and_S, sched
from ._core.passes import composite_inertias
from ._core.rows import place_rows
from ._core.topology import topology
from ._model import is_coupled

__all__ = ["crba_batched", "mass_matrix"]


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
        cur, anc, rows, steps, cols = topology(model).crba_walk

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
