"""`jaxrbd._core.native_vmap.native_vmap` with optional (``None``) arguments."""

from __future__ import annotations

import functools

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


# ----------------------------------------------------------------------------- vmap_in_blocks


def test_vmap_in_blocks_equals_vmap_and_blocks_the_batch(monkeypatch):
    """Blocks of ``chunk`` states (padded last block), shared and batched leaves, a
    batch of models, and derivatives: all equal to the function called state by state."""
    from jaxrbd._core import native_vmap as nv

    model = jaxrbd.models.triple_pendulum()
    keys = jax.random.split(jax.random.key(3), 40)
    Q, QD, _, TAU = jax.vmap(lambda k: helpers.random_state(model, k))(keys)
    models = jaxrbd.batched.stack_models([model] * 40)

    def one(m, q, qd, tau):
        return jaxrbd.forward_dynamics(m, q, qd, tau) * jnp.sum(q), {"H": jaxrbd.mass_matrix(m, q)}

    widths = []
    orig = nv.blocked

    def spy(fn, arrays, chunk=None, **kw):
        widths.append((arrays[0].shape[0], chunk))
        return orig(fn, arrays, chunk, **kw)

    monkeypatch.setattr(nv, "blocked", spy)
    f = nv.vmap_in_blocks(one, lambda args: 16)

    def loss(fn, q, qd, tau):
        a, aux = fn(model, q, qd, tau)
        return jnp.sum(a**2) + jnp.sum(aux["H"])

    @jax.jit
    def run():
        return (
            jax.vmap(f, in_axes=(None, 0, 0, 0))(model, Q, QD, TAU),
            # an unbatched state array broadcasts inside each block
            jax.vmap(f, in_axes=(None, 0, None, 0))(model, Q, QD[0], TAU)[0],
            # a stack of models is blocked with its states
            jax.vmap(f)(models, Q, QD, TAU)[0],
            # derivatives go through the plain function, also under vmap
            jax.vmap(jax.grad(lambda *x: loss(f, *x), argnums=(0, 1)))(Q, QD, TAU),
            jax.jacfwd(lambda q: f(model, q, QD[0], TAU[0])[0])(Q[0]),
        )

    got = run()
    # the three batched arrays of the first call, in blocks of 16 (the kernels inside
    # block on their own)
    assert widths[0] == (40, 16), widths
    # the reference, state by state: three small programs of one state (the plain vmaps
    # of the same functions trace the batching rules and cost twice the compile time)
    one_jit = jax.jit(one)
    grad_jit = jax.jit(jax.grad(lambda *x: loss(one, *x), argnums=(0, 1)))
    nth = [jax.tree_util.tree_map(lambda x, i=i: x[i], models) for i in range(len(Q))]
    stack = functools.partial(jax.tree_util.tree_map, lambda *x: jnp.stack(x))
    want = (
        stack(*(one_jit(model, Q[i], QD[i], TAU[i]) for i in range(len(Q)))),
        stack(*(one_jit(model, Q[i], QD[0], TAU[i])[0] for i in range(len(Q)))),
        stack(*(one_jit(nth[i], Q[i], QD[i], TAU[i])[0] for i in range(len(Q)))),
        stack(*(grad_jit(Q[i], QD[i], TAU[i]) for i in range(len(Q)))),
        jax.jit(jax.jacfwd(lambda q: one(model, q, QD[0], TAU[0])[0]))(Q[0]),
    )
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        helpers.assert_allclose(a, b, rtol=1e-10, name="blocked vmap")


def test_contact_block_sizes():
    from jaxrbd._core.backend import contact_block

    # talos (nv 38) and solo12 (nv 18) in float64: the measured best blocks (LOG.md)
    assert contact_block(38, device="cpu") == 64
    assert contact_block(18, device="cpu") == 256
    assert contact_block(18, itemsize=4, device="cpu") == 256  # capped
    assert contact_block(100, device="cpu") == 16  # floor
    assert contact_block(38, device="gpu") is None  # the whole batch off the CPU
