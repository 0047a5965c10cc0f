"""Forward kinematics: the world pose of every body."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _algebra as al
from ._common import Xup_and_S, check_state, sched
from ._jcalc import tables
from ._passes import world_transforms

__all__ = ["forward_kinematics", "body_transforms_batched"]


def body_transforms_batched(model, q):
    """``X0`` (world -> body, Plücker ``E, r``) of every body: ``(nbodies, 3, 3, B)``, ``(nbodies, 3, B)``.

    A fixed-merged body's frame is its placement relative to its node.
    """
    s = sched(model, q.shape[-1])
    E, r, _ = Xup_and_S(model, q)
    E0, r0 = world_transforms(s, E, r)
    t = tables(model)
    node = np.asarray(t.body_node)
    Eb, rb = E0[node], r0[node]
    fixed = np.flatnonzero(t.fixed[1:]) + 1
    if len(fixed):
        Ef, rf = al.compose(
            model.Xtree_E[fixed][..., None], model.Xtree_r[fixed][..., None], Eb[fixed], rb[fixed]
        )
        Eb, rb = Eb.at[fixed].set(Ef), rb.at[fixed].set(rf)
    # the world row: identity whatever it is merged with
    Eb = Eb.at[0].set(jnp.eye(3, dtype=Eb.dtype)[:, :, None])
    rb = rb.at[0].set(0.0)
    return Eb, rb


def forward_kinematics(model, q):
    """World pose of every body (fixed-merged bodies included).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.

    Returns:
        ``(R, p)``: `R` `(nbodies, 3, 3)` maps body coordinates to world coordinates,
        `p` `(nbodies, 3)` is the body origin in world coordinates [m]. Row 0 is the
        world (identity).

    Example:
        >>> R, p = jaxrbd.forward_kinematics(model, jnp.zeros(model.nq))
        >>> R.shape, p.shape
        ((4, 3, 3), (4, 3))
    """
    with jax.named_scope("jaxrbd.forward_kinematics"):
        (q,) = check_state(model, q=q)
        E, r = body_transforms_batched(model, q[:, None])
        return jnp.swapaxes(E[..., 0], -1, -2), r[..., 0]
