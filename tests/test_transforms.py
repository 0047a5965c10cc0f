"""JAX transformations: jit, vmap (over states and over models), jvp, grad, jacfwd/jacrev,
derivatives against finite differences, batched entry points, and flat traces.

The model is the `mixed` zoo tree (free base, ball joint, revolute, fixed body, Euler
joint): every special code path (quaternions, exp maps, fixed merging, Euler ``S(q)``)
with few joint kinds, which keeps compilation short.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose, fd_jvp, random_f_ext, random_state

import jaxrbd

B = 3  # batch size of the vmap tests


@pytest.fixture(scope="module")
def model(zoo):
    return zoo["mixed"]


@pytest.fixture(scope="module")
def batch(model):
    """``B`` random states, stacked: Q (B, nq), QD, QDD, TAU (B, nv), F (B, nbodies, 6)."""
    states = [random_state(model, jax.random.key(100 + k)) for k in range(B)]
    Q, QD, QDD, TAU = (jnp.stack(x) for x in zip(*states))
    F = jnp.stack([random_f_ext(model, jax.random.key(200 + k)) for k in range(B)])
    return Q, QD, QDD, TAU, F


# name -> (function of (model, q, qd, qdd, tau, f_ext)); the arguments each one uses
SINGLE = {
    "forward_dynamics": lambda m, q, qd, qdd, tau, f: jaxrbd.forward_dynamics(m, q, qd, tau, f),
    "inverse_dynamics": lambda m, q, qd, qdd, tau, f: jaxrbd.inverse_dynamics(m, q, qd, qdd, f),
    "mass_matrix": lambda m, q, qd, qdd, tau, f: jaxrbd.mass_matrix(m, q),
    "minv_times": lambda m, q, qd, qdd, tau, f: jaxrbd.minv_times(m, q, tau),
    "forward_kinematics": lambda m, q, qd, qdd, tau, f: jaxrbd.forward_kinematics(m, q),
    "integrate": lambda m, q, qd, qdd, tau, f: jaxrbd.integrate(m, q, qd, 0.1),
    "difference": lambda m, q, qd, qdd, tau, f: jaxrbd.difference(
        m, q, jaxrbd.integrate(m, q, qd, 0.5)
    ),
}
_SINGLE_JIT = {k: jax.jit(f) for k, f in SINGLE.items()}
_VMAP_JIT = {k: jax.jit(jax.vmap(f, in_axes=(None, 0, 0, 0, 0, 0))) for k, f in SINGLE.items()}


def _leaves(x):
    return jax.tree_util.tree_leaves(x)


# ----------------------------------------------------------------------------- jit and vmap


@pytest.mark.parametrize("name", list(SINGLE))
def test_vmap_over_states_equals_loop(model, batch, name):
    """Every public function under jit and under vmap over a batch of states."""
    Q, QD, QDD, TAU, F = batch
    out = _VMAP_JIT[name](model, Q, QD, QDD, TAU, F)
    for k in range(B):
        one = _SINGLE_JIT[name](model, Q[k], QD[k], QDD[k], TAU[k], F[k])
        for a, b in zip(_leaves(out), _leaves(one)):
            assert np.all(np.isfinite(np.asarray(b))), name
            assert_allclose(a[k], b, rtol=1e-12, atol=1e-13, name=f"vmap {name}[{k}]")


def test_configuration_helpers_under_jit(model):
    """neutral_configuration and random_configuration under jit equal their eager results."""
    assert_allclose(
        jax.jit(jaxrbd.neutral_configuration)(model),
        jaxrbd.neutral_configuration(model),
        atol=0,
        name="neutral_configuration",
    )
    key = jax.random.key(5)
    a = jax.jit(jaxrbd.random_configuration)(model, key)
    assert_allclose(
        a,
        jaxrbd.random_configuration(model, key),
        rtol=1e-15,
        atol=1e-15,
        name="random_configuration",
    )
    keys = jax.random.split(key, 4)
    Q = jax.vmap(jaxrbd.random_configuration, in_axes=(None, 0))(model, keys)
    for k in range(4):
        assert_allclose(
            Q[k],
            jaxrbd.random_configuration(model, keys[k]),
            rtol=1e-15,
            atol=1e-15,
            name="vmap random_configuration",
        )


MODEL_FUNCTIONS = ["forward_dynamics", "inverse_dynamics", "mass_matrix"]


@pytest.fixture(scope="module")
def stacked_models(model):
    """Five copies of the model whose second body's mass (and inertia) is scaled by
    1..5, as one model with a stacked ``inertia`` leaf, plus the in_axes to vmap it."""
    scales = jnp.arange(1.0, 6.0)
    inertia = jnp.stack([model.inertia.at[2].multiply(s) for s in scales])
    stacked = eqx.tree_at(lambda m: m.inertia, model, inertia)
    axes = jax.tree_util.tree_map(lambda _: None, model)
    axes = eqx.tree_at(lambda m: m.inertia, axes, 0, is_leaf=lambda x: x is None)
    singles = [eqx.tree_at(lambda m: m.inertia, model, inertia[k]) for k in range(5)]
    return stacked, axes, singles


@pytest.mark.parametrize("name", MODEL_FUNCTIONS)
def test_vmap_over_models(batch, stacked_models, name):
    """vmap over a model whose inertia leaf is stacked (5 masses) = one model at a time."""
    stacked, axes, singles = stacked_models
    Q, QD, QDD, TAU, F = (x[0] for x in batch)
    f = jax.jit(jax.vmap(SINGLE[name], in_axes=(axes, None, None, None, None, None)))
    out = f(stacked, Q, QD, QDD, TAU, F)
    results = [_SINGLE_JIT[name](m, Q, QD, QDD, TAU, F) for m in singles]
    for k, one in enumerate(results):
        assert_allclose(out[k], one, rtol=1e-12, atol=1e-13, name=f"vmap over models {name}[{k}]")
    assert not np.allclose(results[0], results[-1]), "the stacked masses made no difference"


# ----------------------------------------------------------------------------- derivatives

OUTPUTS = (
    "forward_dynamics",
    "inverse_dynamics",
    "mass_matrix",
    "forward_kinematics",
    "difference",
)


def _bundle(model, q, x):
    """The public functions as one flat vector, as functions of
    ``x = [dv (nv), qd (nv), u (nv), s (nbodies)]``: the configuration ``integrate(q, dv)``,
    velocities ``qd``, ``u`` as tau (FD) and as qdd (ID), and the inertia of body ``b``
    scaled by ``1 + s_b`` (derivatives w.r.t. the model)."""
    nv = model.nv
    dv, qd, u, s = x[:nv], x[nv : 2 * nv], x[2 * nv : 3 * nv], x[3 * nv :]
    m = eqx.tree_at(lambda m: m.inertia, model, model.inertia * (1.0 + s)[:, None])
    qt = jaxrbd.integrate(m, q, dv)
    R, p = jaxrbd.forward_kinematics(m, qt)
    parts = {
        "forward_dynamics": jaxrbd.forward_dynamics(m, qt, qd, u),
        "inverse_dynamics": jaxrbd.inverse_dynamics(m, qt, qd, u),
        "mass_matrix": jaxrbd.mass_matrix(m, qt).ravel(),
        "forward_kinematics": jnp.concatenate([R.ravel(), p.ravel()]),
        "difference": jaxrbd.difference(m, q, qt),
    }
    return jnp.concatenate([parts[k] for k in OUTPUTS])


def _segments(model):
    sizes = {
        "forward_dynamics": model.nv,
        "inverse_dynamics": model.nv,
        "mass_matrix": model.nv**2,
        "forward_kinematics": 12 * model.nbodies,
        "difference": model.nv,
    }
    out, start = {}, 0
    for k in OUTPUTS:
        out[k] = slice(start, start + sizes[k])
        start += sizes[k]
    return out


_bundle_jit = jax.jit(_bundle)
_bundle_jacfwd = jax.jit(jax.jacfwd(_bundle, argnums=2))
_bundle_jacrev = jax.jit(jax.jacrev(_bundle, argnums=2))


def test_derivatives(model):
    """jacfwd (vmapped jvp) = jacrev (vmapped vjp) of FD, ID, H, poses and difference
    w.r.t. the configuration (tangent, through integrate), qd, tau/qdd and the inertias,
    and both match central differences along a random direction (configurations moved
    by integrate). At the neutral configuration with qd = 0 (identity quaternions, zero
    rotation vectors: the 0/0 traps of exp/log maps) every derivative is finite.
    One test, so the expensive compilations (reverse mode above all) happen once."""
    q, qd, _, tau = random_state(model, jax.random.key(42))
    dv = 0.1 * jax.random.normal(jax.random.key(43), (model.nv,))
    x = jnp.concatenate([dv, qd, tau, jnp.zeros(model.nbodies)])
    dx = jax.random.normal(jax.random.key(44), x.shape).at[-model.nbodies :].multiply(0.2)
    Jf = np.asarray(_bundle_jacfwd(model, q, x))
    Jr = np.asarray(_bundle_jacrev(model, q, x))
    assert np.all(np.isfinite(Jf))
    # central differences of the bundle along x + t dx (it moves q by integrate itself)
    eps = 1e-6
    fd = (
        np.asarray(_bundle_jit(model, q, x + eps * dx))
        - np.asarray(_bundle_jit(model, q, x - eps * dx))
    ) / (2 * eps)
    for name, sl in _segments(model).items():
        assert_allclose(Jr[sl], Jf[sl], rtol=1e-11, atol=1e-11, name=f"jacrev vs jacfwd, {name}")
        assert_allclose(
            Jf[sl] @ dx, fd[sl], rtol=1e-5, atol=1e-6, name=f"jacfwd vs finite differences, {name}"
        )

    q0 = jaxrbd.neutral_configuration(model)
    x0 = jnp.concatenate([jnp.zeros(2 * model.nv), tau, jnp.zeros(model.nbodies)])
    for how, fun in (("jacfwd", _bundle_jacfwd), ("jacrev", _bundle_jacrev)):
        J = np.asarray(fun(model, q0, x0))
        for name, sl in _segments(model).items():
            assert np.all(np.isfinite(J[sl])), f"{how}: non-finite derivative of {name} at neutral"


def _id_loss(model, q, x, w):
    """A scalar of inverse dynamics along ``x = [dv, qd, qdd]`` (q moved by integrate)."""
    nv = model.nv
    qt = jaxrbd.integrate(model, q, x[:nv])
    return w @ jnp.sin(jaxrbd.inverse_dynamics(model, qt, x[nv : 2 * nv], x[2 * nv :]))


_id_loss_jit = jax.jit(_id_loss)
_id_loss_grad = jax.jit(jax.grad(_id_loss, argnums=2))
_id_loss_jvp = jax.jit(
    lambda model, q, x, w, dx: jax.jvp(lambda y: _id_loss(model, q, y, w), (x,), (dx,))[1]
)


def test_grad_and_jvp(model):
    """jax.grad and jax.jvp of a scalar of inverse dynamics agree with each other and
    with central differences."""
    q, qd, qdd, _ = random_state(model, jax.random.key(46))
    nv = model.nv
    x = jnp.concatenate([jnp.zeros(nv), qd, qdd])
    dx = jax.random.normal(jax.random.key(47), x.shape)
    w = jax.random.normal(jax.random.key(48), (nv,))
    g = np.asarray(_id_loss_grad(model, q, x, w))
    ydot = float(_id_loss_jvp(model, q, x, w, dx))
    # the same derivative by central differences, q moved along dx[:nv] by integrate
    fd = fd_jvp(
        lambda qt, qd, qdd: _id_loss_jit(model, qt, jnp.concatenate([jnp.zeros(nv), qd, qdd]), w),
        model,
        q,
        dx[:nv],
        (qd, qdd),
        (dx[nv : 2 * nv], dx[2 * nv :]),
    )
    assert np.all(np.isfinite(g))
    assert_allclose(ydot, g @ np.asarray(dx), rtol=1e-12, atol=1e-12, name="jvp vs grad")
    assert_allclose(ydot, fd, rtol=1e-6, atol=1e-7, name="jvp vs finite differences")


# ----------------------------------------------------------------------------- batched


@pytest.mark.parametrize(
    "name, with_forces",
    [
        ("forward_dynamics", True),
        ("forward_dynamics", False),
        ("inverse_dynamics", True),
        ("inverse_dynamics", False),
        ("mass_matrix", False),
    ],
)
def test_batched_equals_vmap(jitted, model, batch, name, with_forces):
    """batched.* (batch axis first, F_ext optional) = jax.vmap of the single-state function."""
    Q, QD, QDD, TAU, F = batch
    if name == "mass_matrix":
        out = jitted["batched.mass_matrix"](model, Q)
    else:
        second = TAU if name == "forward_dynamics" else QDD
        f = jitted[f"batched.{name}"]
        out = f(model, Q, QD, second, F) if with_forces else f(model, Q, QD, second)
    Fv = F if with_forces else jnp.zeros_like(F)
    expected = _VMAP_JIT[name](model, Q, QD, QDD, TAU, Fv)
    assert out.shape == expected.shape
    assert_allclose(out, expected, rtol=1e-12, atol=1e-12, name=f"batched.{name}")


# ----------------------------------------------------------------------------- trace size


def _count_eqns(jaxpr) -> int:
    """Equations of a jaxpr, sub-jaxprs (scan bodies, ...) included."""
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                if hasattr(sub, "eqns"):  # a Jaxpr
                    n += _count_eqns(sub)
                elif hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):  # a ClosedJaxpr
                    n += _count_eqns(sub.jaxpr)
    return n


@pytest.mark.parametrize(
    "name, call",
    [
        ("forward_dynamics", lambda m, q, z: jaxrbd.forward_dynamics(m, q, z, z)),
        ("inverse_dynamics", lambda m, q, z: jaxrbd.inverse_dynamics(m, q, z, z)),
        ("mass_matrix", lambda m, q, z: jaxrbd.mass_matrix(m, q)),
    ],
)
@pytest.mark.parametrize("traversal", ["level", "body", "auto", "dense"])
def test_trace_size_does_not_grow_with_bodies(name, call, traversal):
    """Recursions are scans: the trace of a 50-link chain is as long as a 5-link one."""
    counts = {}
    for n in (5, 50):
        m = jaxrbd.models.chain(n).with_traversal(traversal)
        z = jnp.zeros(m.nv)
        counts[n] = _count_eqns(jax.make_jaxpr(lambda q, m=m, z=z: call(m, q, z))(z).jaxpr)
    assert counts[5] == counts[50], f"{name} ({traversal}): {counts[5]} vs {counts[50]} equations"
