"""Hybrid dynamics (hybrid articulated-body algorithm): issue 4, item 4.

Oracles: `forward_dynamics` (nothing prescribed), `inverse_dynamics` (everything
prescribed), and for mixed sets both: the returned ``(qdd, tau)`` keep the given halves,
satisfy ``inverse_dynamics(q, qd, qdd) == tau`` and ``forward_dynamics(q, qd, tau) ==
qdd``. On a random tree with every joint kind and on Talos (floating base, legs
prescribed or the whole body driven by its joints).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import JIT, ZOO, assert_allclose, curve, random_f_ext, random_state

import jaxrbd
from jaxrbd import Body, ModelBuilder, joints
from jaxrbd._hybrid import prescribed_mask

TOL = 1e-10

#: one jit shared by every test: compiled once per (model structure, prescribed set,
#: f_ext given or not). Compilation dominates this file, so the tests below reuse the
#: same few (model, set) pairs and always pass f_ext except where its absence is tested.
HYBRID = jax.jit(jaxrbd.hybrid_dynamics, static_argnames="prescribed")


def hybrid(model, q, qd, tau, qdd, prescribed, f_ext=None):
    return HYBRID(model, q, qd, tau, qdd, prescribed=tuple(prescribed), f_ext=f_ext)


def _case(name, robots):
    """(model, state, mixed prescribed set) of a test model. Talos runs without f_ext:
    its forward/inverse dynamics oracles are then the jits test_reference compiles."""
    model = ZOO["all_kinds"] if name == "all_kinds" else robots[name].model
    q, qd, qdd, tau = random_state(model, jax.random.key(0))
    f_ext = random_f_ext(model, jax.random.key(1)) if name == "all_kinds" else None
    names = model.joint_names
    if name == "talos":  # legs prescribed; floating base, torso, head, arms torque-driven
        mixed = tuple(n for n in names if n.startswith("leg_"))
    else:  # every other joint, so each kind appears on both sides across the tree
        mixed = names[0::2]
    return model, (q, qd, qdd, tau, f_ext), mixed


MODELS = ["all_kinds", "talos"]


# ----------------------------------------------------------------------------- limits


@pytest.mark.parametrize("name", MODELS)
def test_nothing_prescribed_is_forward_dynamics(name, robots, jitted):
    model, (q, qd, _, tau, f_ext), _ = _case(name, robots)
    qdd_in = jnp.full(model.nv, 1e3)  # ignored
    qdd, tau_out = hybrid(model, q, qd, tau, qdd_in, (), f_ext)
    assert_allclose(qdd, jitted["forward_dynamics"](model, q, qd, tau, f_ext), rtol=TOL, name="qdd")
    assert_allclose(tau_out, tau, rtol=0.0, name="tau passes through")


@pytest.mark.parametrize("name", MODELS)
def test_everything_prescribed_is_inverse_dynamics(name, robots, jitted):
    model, (q, qd, qdd, _, f_ext), _ = _case(name, robots)
    tau_in = jnp.full(model.nv, 1e3)  # ignored
    qdd_out, tau = hybrid(model, q, qd, tau_in, qdd, model.joint_names, f_ext)
    assert_allclose(tau, jitted["inverse_dynamics"](model, q, qd, qdd, f_ext), rtol=TOL, name="tau")
    assert_allclose(qdd_out, qdd, rtol=0.0, name="qdd passes through")


# ----------------------------------------------------------------------------- mixed sets


@pytest.mark.parametrize("name", MODELS)
def test_mixed_agrees_with_inverse_and_forward_dynamics(name, robots, jitted):
    model, (q, qd, qdd, tau, f_ext), prescribed = _case(name, robots)
    mask = np.asarray(prescribed_mask(model, prescribed))
    assert mask.any() and not mask.all()
    qdd_out, tau_out = hybrid(model, q, qd, tau, qdd, prescribed, f_ext)
    # the given halves come back unchanged
    assert_allclose(qdd_out[mask], qdd[mask], rtol=0.0, name="prescribed qdd")
    assert_allclose(tau_out[~mask], tau[~mask], rtol=0.0, name="given tau")
    # the pair solves the equations of motion...
    tau_id = jitted["inverse_dynamics"](model, q, qd, qdd_out, f_ext)
    assert_allclose(tau_id, tau_out, rtol=TOL, name="ID(qdd) == tau")
    # ...so feeding the full tau back to forward dynamics reproduces qdd
    qdd_fd = jitted["forward_dynamics"](model, q, qd, tau_out, f_ext)
    assert_allclose(qdd_fd, qdd_out, rtol=1e-9, name="FD(tau) == qdd")


def test_floating_base_driven_by_its_joints(robots, jitted):
    """Talos' base is torque-free (tau = 0) and every actuated joint follows a given
    acceleration: the base gets the acceleration the joint motion induces, with zero
    wrench on the base, and the joints get the torques that realise it."""
    model, (q, qd, qdd, _, f_ext), _ = _case("talos", robots)
    actuated = model.joint_names[1:]
    tau = jnp.zeros(model.nv)
    qdd_out, tau_out = hybrid(model, q, qd, tau, qdd, actuated, f_ext)
    assert_allclose(tau_out[:6], np.zeros(6), atol=0.0, name="base wrench")
    tau_id = jitted["inverse_dynamics"](model, q, qd, qdd_out, f_ext)
    assert_allclose(tau_id, tau_out, rtol=TOL, atol=1e-9, name="ID(qdd) == tau")


def test_indices_and_names_give_the_same_set():
    model = ZOO["all_kinds"]
    names = model.joint_names[0::2]
    indices = [i for n in names for i in range(model.v_index(n).start, model.v_index(n).stop)]
    mask = prescribed_mask(model, names)
    assert len(mask) == model.nv and sum(mask) == len(indices)
    assert prescribed_mask(model, indices) == mask
    assert prescribed_mask(model, [names[0], *indices[::-1], indices[0]]) == mask  # repeats
    assert prescribed_mask(model, np.asarray(indices)) == mask
    single = model.joint_names[0]
    assert prescribed_mask(model, single) == prescribed_mask(model, (single,))
    assert prescribed_mask(model, range(model.nv)) == (True,) * model.nv
    assert prescribed_mask(model, ()) == (False,) * model.nv


def test_massless_prescribed_leaf_is_finite():
    """A prescribed joint carrying no mass has ``D = S^T IA S = 0``: never divided by,
    so values and gradients stay finite (f_ext absent: the other kernel)."""
    b = ModelBuilder()
    b.add_body("link", "world", joints.revolute((0, 0, 1)), Body(1.0, (0.5, 0, 0), np.eye(3) * 0.1))
    b.add_body("tip", "link", joints.prismatic((1, 0, 0)), Body(0.0))
    model = b.build()
    q, qd = jnp.array([0.3, 0.2]), jnp.array([0.5, -1.0])
    tau, qdd = jnp.array([0.7, 0.0]), jnp.array([0.0, 2.0])

    def f(q, qd, tau, qdd):
        qdd_out, tau_out = jaxrbd.hybrid_dynamics(model, q, qd, tau, qdd, prescribed="tip")
        return qdd_out[0] + qdd_out[1] + tau_out[1], (qdd_out, tau_out)

    # reverse mode through both passes, values alongside (one compile)
    grads, (qdd_out, tau_out) = jax.jit(jax.grad(f, argnums=(0, 1, 2, 3), has_aux=True))(
        q, qd, tau, qdd
    )
    # The link turns about the vertical (no gravity torque, no velocity-product torque on a
    # lone revolute) and the tip has no mass: qdd_link = tau_link / (0.1 + 1 * 0.5^2).
    assert_allclose(qdd_out, jnp.array([0.7 / 0.35, 2.0]), rtol=1e-14, name="qdd")
    assert_allclose(tau_out, jnp.array([0.7, 0.0]), rtol=0.0, atol=1e-15, name="tau")
    expected = (np.zeros(2), np.zeros(2), np.array([1 / 0.35, 0.0]), np.array([0.0, 1.0]))
    for name, g, e in zip(("q", "qd", "tau", "qdd"), grads, expected):
        assert_allclose(g, e, rtol=1e-13, atol=1e-14, name=f"d/d{name}")


# ----------------------------------------------------------------------------- transforms


def test_vmap_equals_loop():
    """vmap over states (the batch-trailing, body-by-body path) == one call per state;
    an unbatched argument (here tau) broadcasts."""
    model, (_, _, _, tau, _), prescribed = _case("all_kinds", None)
    states = [random_state(model, k) for k in jax.random.split(jax.random.key(7), 5)]
    Q, QD, QDD, _ = (jnp.stack(x) for x in zip(*states))
    F = jnp.stack([random_f_ext(model, k) for k in jax.random.split(jax.random.key(8), 5)])

    def fn(m, q, qd, tau, qdd, f_ext):
        return jaxrbd.hybrid_dynamics(m, q, qd, tau, qdd, prescribed, f_ext)

    run = jax.jit(jax.vmap(fn, in_axes=(None, 0, 0, None, 0, 0)))
    qdd_b, tau_b = run(model, Q, QD, tau, QDD, F)
    assert qdd_b.shape == tau_b.shape == (len(states), model.nv)
    for k in range(len(states)):
        qdd_k, tau_k = hybrid(model, Q[k], QD[k], tau, QDD[k], prescribed, F[k])
        assert_allclose(qdd_b[k], qdd_k, rtol=1e-11, name=f"qdd[{k}]")
        assert_allclose(tau_b[k], tau_k, rtol=1e-11, name=f"tau[{k}]")


def _with_inertia(model, inertia):
    return eqx.tree_at(lambda m: m.inertia, model, inertia)


def test_vmap_over_models():
    """Stacked link inertias (vmap over the model) == one call per model."""
    model = ZOO["mixed"]
    scale = jnp.array([1.0, 1.5, 0.5])
    models = jax.vmap(lambda s: _with_inertia(model, model.inertia * s))(scale)
    q, qd, qdd, tau = random_state(model, jax.random.key(3))
    f_ext = random_f_ext(model, jax.random.key(4))
    prescribed = ("j2", "j3")
    run = jax.jit(jax.vmap(lambda m: jaxrbd.hybrid_dynamics(m, q, qd, tau, qdd, prescribed, f_ext)))
    qdd_b, tau_b = run(models)
    for k in range(len(scale)):
        m_k = jax.tree_util.tree_map(lambda x, k=k: x[k], models)
        qdd_k, tau_k = hybrid(m_k, q, qd, tau, qdd, prescribed, f_ext)
        assert_allclose(qdd_b[k], qdd_k, rtol=1e-11, name=f"qdd[{k}]")
        assert_allclose(tau_b[k], tau_k, rtol=1e-11, name=f"tau[{k}]")


def test_gradients_match_finite_differences():
    """Forward mode matches central differences along a random tangent of every input
    (q moving on its manifold through `integrate`, qd, tau, qdd, f_ext, model.inertia).
    Reverse mode (the transpose of the same linearisation) is checked exactly in
    `test_massless_prescribed_leaf_is_finite`."""
    model = ZOO["mixed"]  # free, spherical, revolute, fixed, euler_zyx
    prescribed = ("j2", "j3")  # the ball joint and the revolute joint
    q, qd, qdd, tau = random_state(model, jax.random.key(3))
    f_ext = random_f_ext(model, jax.random.key(4))
    keys = jax.random.split(jax.random.key(13), 6)
    dq, dqd, dtau, dqdd = (jax.random.normal(k, (model.nv,)) for k in keys[:4])
    df = random_f_ext(model, keys[4])
    dI = jax.random.normal(keys[5], model.inertia.shape) * 0.05

    def f(q, qd, tau, qdd, f_ext, inertia):
        m = _with_inertia(model, inertia)
        return jnp.concatenate(jaxrbd.hybrid_dynamics(m, q, qd, tau, qdd, prescribed, f_ext))

    def f_jit(q, qd, tau, qdd, f_ext, inertia):  # the compile test_vmap_over_models made
        m = _with_inertia(model, inertia)
        return jnp.concatenate(hybrid(m, q, qd, tau, qdd, prescribed, f_ext))

    args, dargs = (qd, tau, qdd, f_ext, model.inertia), (dqd, dtau, dqdd, df, dI)
    # central differences along the curve t -> (integrate(q, t dq), args + t dargs)
    eps = 1e-6

    def at(t):
        return (JIT["integrate"](model, q, t * dq), *(a + t * d for a, d in zip(args, dargs)))

    fd = (f_jit(*at(eps)) - f_jit(*at(-eps))) / (2 * eps)
    # the same curve, differentiated in forward mode
    g = curve(model, f, q, dq, args, dargs)
    _, jvp = jax.jit(lambda t: jax.jvp(g, (t,), (jnp.ones_like(t),)))(jnp.zeros(()))
    assert_allclose(jvp, fd, rtol=1e-6, name="jvp vs finite differences")


# ----------------------------------------------------------------------------- errors


def test_errors():
    model, (q, qd, qdd, tau, f_ext), _ = _case("all_kinds", None)
    call = functools.partial(jaxrbd.hybrid_dynamics, model)
    with pytest.raises(ValueError, match="unknown joint 'nope'"):
        call(q, qd, tau, qdd, ("nope",))
    fixed = next(model.joint_name[b] for b in range(1, model.nbodies) if model.body_fixed[b])
    with pytest.raises(ValueError, match=f"joint '{fixed}' is fixed"):
        call(q, qd, tau, qdd, (fixed,))
    with pytest.raises(ValueError, match=f"velocity index {model.nv} out of range"):
        call(q, qd, tau, qdd, (model.nv,))
    with pytest.raises(ValueError, match="velocity index -1 out of range"):
        call(q, qd, tau, qdd, -1)
    multi = next(n for n in model.joint_names if model.v_index(n).stop - model.v_index(n).start > 1)
    with pytest.raises(ValueError, match=f"only part of joint '{multi}'"):
        call(q, qd, tau, qdd, (model.v_index(multi).start,))
    with pytest.raises(TypeError, match="prescribed entries must be"):
        call(q, qd, tau, qdd, (True,))
    with pytest.raises(TypeError, match="prescribed must be"):
        call(q, qd, tau, qdd, jnp.array([0, 1]))
    with pytest.raises(TypeError, match="prescribed must be"):
        call(q, qd, tau, qdd, 1.5)
    with pytest.raises(ValueError, match="q has shape"):
        call(q[:-1], qd, tau, qdd, ())
    with pytest.raises(ValueError, match=rf"tau has shape \({model.nv - 1},\)"):
        call(q, qd, tau[:-1], qdd, ())
    with pytest.raises(ValueError, match="qdd has shape"):
        call(q, qd, tau, qdd[None], ())
    with pytest.raises(ValueError, match="f_ext has shape"):
        call(q, qd, tau, qdd, (), f_ext[1:])
    with pytest.raises(TypeError, match="qd has dtype complex"):
        call(q, qd.astype(complex), tau, qdd, ())
