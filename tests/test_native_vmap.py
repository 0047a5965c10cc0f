"""`jaxrbd._core.native_vmap.native_vmap` with optional (``None``) arguments."""

from __future__ import annotations

import helpers
import jax
import jax.numpy as jnp

import jaxrbd
from jaxrbd._core.native_vmap import native_vmap
from jaxrbd._rnea import rnea_batched

RNEA = native_vmap(rnea_batched)  # f_ext optional: one wrapper, no twin


def test_optional_argument_plain_vmapped_and_differentiated():
    model = jaxrbd.models.triple_pendulum()
    q, qd, qdd, _ = helpers.random_state(model, jax.random.key(0))
    f = helpers.random_f_ext(model, jax.random.key(1))
    Q, QD, QDD = (jnp.stack([x, 0.5 * x]) for x in (q, qd, qdd))

    ID = jaxrbd.inverse_dynamics

    @jax.jit
    def run(q, qd, qdd, f, Q, QD, QDD):
        def both(fn, x):
            return fn(model, *x, None), fn(model, *x, f)

        def vmapped(fn):
            return jax.vmap(lambda *x: both(fn, x))(Q, QD, QDD)

        def grad(fn):
            return jax.grad(lambda x: fn(model, x, qd, qdd, f) @ qdd)(q)

        def id_(m, q, qd, qdd, f):
            return ID(m, q, qd, qdd, f)

        return ((both(RNEA, (q, qd, qdd)), vmapped(RNEA), grad(RNEA)),
                (both(id_, (q, qd, qdd)), vmapped(id_), grad(id_)))

    got, want = run(q, qd, qdd, f, Q, QD, QDD)
    for name, a, b in zip(("plain", "vmapped", "grad"), got, want):
        helpers.assert_allclose(jnp.stack(jax.tree_util.tree_leaves(a)),
                                jnp.stack(jax.tree_util.tree_leaves(b)), atol=1e-12, name=name)
