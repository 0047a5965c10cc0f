"""The JVP rules of the dynamics built on the analytic derivatives (`jaxrbd._dynamics`).

Every transform of the public dynamics under ``derivatives="analytic"`` (the default)
against the same transform under ``derivatives="ad"`` (AD through the recursions), to
1e-9 in float64 (STYLE: analytic derivatives match AD to 1e-9), and against central
differences on the joint manifolds (looser: truncation error of the differences).

Compilation dominates, so the models are few and each jitted function is module-level:
the `all_kinds` zoo tree (every joint kind, a fixed body, branching) for first
derivatives with every argument perturbed at once (model leaves included), the `mixed`
zoo tree (free base, ball, fixed body, Euler joint) for second derivatives, vmaps and
parameter gradients, and a 3-body tree for the rollout.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from helpers import (
    assert_allclose,
    fd_jvp,
    quaternion_blocks,
    random_f_ext,
    random_state,
    random_tree,
)

import jaxrbd
from jaxrbd._configuration import tangent_of_coordinates

MODES = ("analytic", "ad")


def _funcs(mode):
    """The dynamics functions under one derivative mode, all with the same argument list
    (`bias_forces` and `gravity_forces` are `inverse_dynamics` calls)."""
    d = {"derivatives": mode}
    return {
        "forward_dynamics": lambda m, q, qd, qdd, tau, f, X: jaxrbd.forward_dynamics(
            m, q, qd, tau, f, **d),
        "forward_dynamics_crba": lambda m, q, qd, qdd, tau, f, X: jaxrbd.forward_dynamics(
            m, q, qd, tau, f, method="crba", **d),
        "inverse_dynamics": lambda m, q, qd, qdd, tau, f, X: jaxrbd.inverse_dynamics(
            m, q, qd, qdd, f, **d),
        "mass_matrix": lambda m, q, qd, qdd, tau, f, X: jaxrbd.mass_matrix(m, q, **d),
        "minv_times": lambda m, q, qd, qdd, tau, f, X: jaxrbd.minv_times(m, q, X, **d),
    }


NAMES = tuple(_funcs("ad"))


def _float_leaves(model):
    return eqx.filter(model, eqx.is_inexact_array)


@jax.jit
def _jvps(model, primals, tangents):
    """``{mode: {name: (out, tangent)}}`` of every function along ``tangents`` (all args)."""
    out = {}
    for mode in MODES:
        out[mode] = {}
        for name, f in _funcs(mode).items():
            out[mode][name] = jax.jvp(f, (model, *primals), tangents)
    return out


def _loss(fd):
    return lambda q, qd, tau, f: jnp.sum(jnp.sin(fd(q, qd, tau, f)))


@jax.jit
def _jacobians(model, q, qd, qdd, tau, f):
    """FD and ID: jacfwd, jacrev and the grad of a scalar loss under the rule, and the
    AD reference (jacfwd through the recursions)."""
    arg = (0, 1, 2, 3)
    fd = {m: (lambda q, qd, tau, f, m=m: jaxrbd.forward_dynamics(model, q, qd, tau, f, derivatives=m))
          for m in MODES}
    ID = {m: (lambda q, qd, qdd, f, m=m: jaxrbd.inverse_dynamics(model, q, qd, qdd, f, derivatives=m))
          for m in MODES}
    J = jax.jacfwd(fd["ad"], arg)(q, qd, tau, f)
    y = jnp.cos(fd["ad"](q, qd, tau, f))  # d loss / d qdd
    return {
        "fd_jacfwd": (jax.jacfwd(fd["analytic"], arg)(q, qd, tau, f), J),
        "fd_jacrev": (jax.jacrev(fd["analytic"], arg)(q, qd, tau, f), J),
        "fd_grad": (jax.grad(_loss(fd["analytic"]), arg)(q, qd, tau, f),
                    tuple(jnp.tensordot(y, j, axes=1) for j in J)),
        "id_jacrev": (jax.jacrev(ID["analytic"], arg)(q, qd, qdd, f),
                      jax.jacfwd(ID["ad"], arg)(q, qd, qdd, f)),
    }


@jax.jit
def _second(model, q, qd, tau, f):
    """``jacfwd(grad(loss))`` (w.r.t. q, qd) of a loss of FD, as in Gauss-Newton."""
    out = {}
    for mode in MODES:
        def fd(q, qd, mode=mode):
            return jaxrbd.forward_dynamics(model, q, qd, tau, f, derivatives=mode)

        def loss(q, qd, fd=fd):
            return jnp.sum(jnp.sin(fd(q, qd)))

        out[mode] = {"fd_jacfwd_grad": jax.jacfwd(jax.grad(loss, (0, 1)), (0, 1))(q, qd)}
    return out


@jax.jit
def _vmapped(model, Q, QD, TAU):
    """`jax.vmap` of the value and of the grad over a batch of states."""
    out = {}
    for mode in MODES:
        def fd(q, qd, tau, mode=mode):
            return jaxrbd.forward_dynamics(model, q, qd, tau, derivatives=mode)

        def loss(q, qd, tau, fd=fd):
            return jnp.sum(fd(q, qd, tau) ** 2)

        out[mode] = (jax.vmap(fd)(Q, QD, TAU), jax.vmap(jax.grad(loss, (0, 1, 2)))(Q, QD, TAU))
    return out


@jax.jit
def _parameter_grads(model, Q, QD, QDD, TAU):
    """Least-squares identification losses: their gradients w.r.t. the model's leaves."""
    out = {}
    for mode in MODES:
        def loss(m, mode=mode):
            tau = jax.vmap(lambda q, qd, qdd: jaxrbd.inverse_dynamics(
                m, q, qd, qdd, derivatives=mode))(Q, QD, QDD)
            qdd = jax.vmap(lambda q, qd, tau: jaxrbd.forward_dynamics(
                m, q, qd, tau, derivatives=mode))(Q, QD, TAU)
            return jnp.sum((tau - TAU) ** 2) + jnp.sum((qdd - QDD) ** 2)

        out[mode] = jax.grad(loss)(_float_leaves(model))
    return out


# ----------------------------------------------------------------------------- fixtures


def _scale_quaternions(model, q, s):
    for sl in quaternion_blocks(model):
        q = q.at[sl].multiply(s)
    return q


def _point(model, seed, unit=True):
    q, qd, qdd, tau = random_state(model, jax.random.key(seed))
    if not unit:  # the dynamics normalise quaternions; their JVP must see the same
        q = _scale_quaternions(model, q, 1.3)
    f = random_f_ext(model, jax.random.key(seed + 1))
    X = jax.random.normal(jax.random.key(seed + 2), (model.nv, 3), model.dtype)
    return q, qd, qdd, tau, f, X


def _tangents(model, seed):
    """Random tangents of every argument: the model's float leaves, q in coordinates
    (with radial quaternion components), and the others."""
    keys = iter(jax.random.split(jax.random.key(seed), 32))
    dmodel = jax.tree_util.tree_map(
        lambda x: jax.random.normal(next(keys), x.shape, x.dtype), model)
    q, qd, qdd, tau, f, X = _point(model, seed + 7)
    return (dmodel,) + tuple(jax.random.normal(next(keys), x.shape, x.dtype)
                             for x in (q, qd, qdd, tau, f, X))


@pytest.fixture(scope="module")
def tree(zoo):
    return zoo["all_kinds"]


@pytest.fixture(scope="module")
def mixed(zoo):
    return zoo["mixed"]


@pytest.fixture(scope="module")
def jvp_case(tree):
    # non-unit quaternions: the unit case is the special case |a| = 1 of the same map,
    # and one compile of the ten programs is what this file can afford
    primals = _point(tree, 0, unit=False)
    tangents = _tangents(tree, 100)
    return primals, tangents, _jvps(tree, primals, tangents)


# ----------------------------------------------------------------------------- first derivatives


@pytest.mark.parametrize("name", NAMES)
def test_jvp_matches_ad(jvp_case, name):
    """Every argument perturbed at once (model leaves, a q tangent with radial quaternion
    parts, at unit and non-unit quaternions): the rule's JVP equals AD's."""
    _, _, res = jvp_case
    (y_a, t_a), (y_b, t_b) = res["analytic"][name], res["ad"][name]
    assert_allclose(y_a, y_b, rtol=1e-13, name=f"{name} value")
    assert_allclose(t_a, t_b, rtol=1e-9, name=f"{name} jvp analytic vs ad")


@pytest.mark.parametrize("name", ["forward_dynamics", "inverse_dynamics", "mass_matrix",
                                  "minv_times"])
def test_jvp_matches_central_differences(tree, name):
    """Along a manifold direction ``v`` (q moved by `integrate`), the coordinate tangent is
    ``d integrate(q, t v) / dt``; the rule's JVP along it matches central differences."""
    q, qd, qdd, tau, f, X = _point(tree, 3)
    v = jax.random.normal(jax.random.key(4), (tree.nv,), tree.dtype)
    _, dq = jax.jvp(lambda t: jaxrbd.integrate(tree, q, t * v), (0.0,), (1.0,))
    other = _tangents(tree, 5)  # random tangents of the other arguments
    tangents = (jax.tree_util.tree_map(jnp.zeros_like, other[0]), dq) + other[2:]
    _, t_a = _jvps(tree, (q, qd, qdd, tau, f, X), tangents)["analytic"][name]
    g = jax.jit(lambda q, qd, qdd, tau, f, X: _funcs("analytic")[name](tree, q, qd, qdd, tau, f, X))
    ref = fd_jvp(g, tree, q, v, (qd, qdd, tau, f, X), other[2:])
    # central differences, step 1e-6: truncation and rounding ~1e-8 relative
    assert_allclose(t_a, ref, rtol=1e-6, atol=1e-7, name=f"{name} jvp vs central differences")


def test_tangent_of_coordinates_radial_direction_is_zero(tree):
    """A quaternion moved along itself names the same rotation: its tangent is zero."""
    q = _point(tree, 0, unit=False)[0]
    dq = jnp.zeros_like(q)
    for sl in quaternion_blocks(tree):
        dq = dq.at[sl].set(q[sl])
    v = tangent_of_coordinates(tree, q, dq)
    assert_allclose(v, jnp.zeros(tree.nv), atol=1e-14, name="radial tangent")


def test_jacobians_and_grad_match_ad(mixed):
    """jacfwd and jacrev of FD and ID (w.r.t. q, qd, tau/qdd, f_ext) and the grad of a
    scalar loss of FD under the rule, against AD's jacfwd. (The rule itself is checked
    on every joint kind by `test_jvp_matches_ad`; these are transforms of it.)"""
    q, qd, qdd, tau, f, _ = _point(mixed, 11, unit=False)
    res = _jacobians(mixed, q, qd, qdd, tau, f)
    for key, (got, want) in res.items():
        for i, (a, b) in enumerate(zip(got, want)):
            assert_allclose(a, b, rtol=1e-9, name=f"{key}[{i}] analytic vs ad")


# ----------------------------------------------------------------------------- second derivatives, vmap


def test_second_derivatives_match_ad(mixed):
    """``jacfwd(grad(loss))`` (the Gauss-Newton / Newton pattern) differentiates through
    the rule and agrees with AD."""
    q, qd, _, tau, f, _ = _point(mixed, 21, unit=False)
    res = _second(mixed, q, qd, tau, f)
    for key in res["ad"]:
        a, b = jax.tree_util.tree_leaves(res["analytic"][key]), jax.tree_util.tree_leaves(res["ad"][key])
        for i, (x, y) in enumerate(zip(a, b)):
            assert_allclose(x, y, rtol=1e-9, name=f"{key}[{i}] analytic vs ad")


def test_vmap_of_value_jvp_and_grad(mixed):
    pts = [_point(mixed, s) for s in (31, 32, 33)]
    Q, QD, _, TAU, _, _ = (jnp.stack(x) for x in zip(*pts))
    res = _vmapped(mixed, Q, QD, TAU)
    for i, (a, b) in enumerate(zip(jax.tree_util.tree_leaves(res["analytic"]),
                                   jax.tree_util.tree_leaves(res["ad"]))):
        assert_allclose(a, b, rtol=1e-9, name=f"vmapped output {i} analytic vs ad")


def test_parameter_gradients_match_ad(mixed):
    """Identification by least squares: gradients w.r.t. every float leaf of the model."""
    pts = [_point(mixed, s) for s in (41, 42)]
    Q, QD, QDD, TAU = (jnp.stack(x) for x in list(zip(*pts))[:4])
    res = _parameter_grads(mixed, Q, QD, QDD, TAU)
    a, b = jax.tree_util.tree_leaves(res["analytic"]), jax.tree_util.tree_leaves(res["ad"])
    assert len(a) == len(b) > 0
    for i, (x, y) in enumerate(zip(a, b)):
        assert_allclose(x, y, rtol=1e-9, atol=1e-12, name=f"model leaf {i} gradient")


# ----------------------------------------------------------------------------- rollout


def test_rollout_gradient_matches_ad():
    model = random_tree(7, 3, kinds=["free", "revolute", "spherical"], parents=[0, 1, 2])
    q0, qd0, _, tau = random_state(model, jax.random.key(51))
    taus = jnp.stack([tau, 0.5 * tau, -tau])

    def ad(m, q, qd, tau):
        return jaxrbd.forward_dynamics(m, q, qd, tau, derivatives="ad")

    @jax.jit
    def grads(q0, qd0, taus):
        def loss(dynamics, q0, qd0, taus):
            qs, qds = jaxrbd.rollout(model, q0, qd0, taus, 0.01, "semi_implicit_euler",
                                     dynamics=dynamics)
            return jnp.sum(jnp.sin(qs)) + jnp.sum(qds**2)

        return (jax.grad(lambda *a: loss(None, *a), (0, 1, 2))(q0, qd0, taus),
                jax.grad(lambda *a: loss(ad, *a), (0, 1, 2))(q0, qd0, taus))

    got, want = grads(q0, qd0, taus)
    for name, a, b in zip(("q0", "qd0", "tau_seq"), got, want):
        assert_allclose(a, b, rtol=1e-9, name=f"rollout grad w.r.t. {name}")


# ----------------------------------------------------------------------------- what runs


def test_the_rule_runs_under_grad_and_not_under_ad(mixed, monkeypatch):
    """The analytic derivative passes are traced by `jax.grad` of the default call, and
    not with ``derivatives="ad"``; the primal is a `custom_jvp` call."""
    calls = []
    orig = jaxrbd._derivatives._fdq  # the derivative pass that also solves for qdd

    def spy(*args, **kwargs):
        calls.append(1)
        return orig(*args, **kwargs)

    monkeypatch.setattr(jaxrbd._derivatives, "_fdq", spy)
    q, qd, _, tau, _, _ = _point(mixed, 61)
    for mode, expected in (("ad", 0), ("analytic", 1)):
        calls.clear()
        def loss(q, mode=mode):
            return jnp.sum(jaxrbd.forward_dynamics(mixed, q, qd, tau, derivatives=mode))

        jax.make_jaxpr(jax.grad(loss))(q)
        assert len(calls) == expected, (mode, len(calls))
    jaxpr = jax.make_jaxpr(lambda q: jaxrbd.forward_dynamics(mixed, q, qd, tau))(q)
    assert "custom_jvp_call" in str(jaxpr)


@pytest.mark.parametrize("mode", MODES)
def test_vmap_runs_the_native_batched_kernel(mixed, monkeypatch, mode):
    """`jax.vmap` of forward dynamics still runs the batch-trailing kernel on the whole
    batch (`jaxrbd._core.native_vmap.native_vmap`), under either derivative mode."""
    widths = []
    orig = jaxrbd._aba.aba_batched

    def spy(model, q, *args):
        widths.append(q.shape[-1])
        return orig(model, q, *args)

    monkeypatch.setattr(jaxrbd._aba, "aba_batched", spy)
    pts = [_point(mixed, s) for s in range(5)]
    Q, QD, _, TAU, _, _ = (jnp.stack(x) for x in zip(*pts))
    fd = lambda q, qd, tau: jaxrbd.forward_dynamics(mixed, q, qd, tau, derivatives=mode)
    jax.make_jaxpr(jax.vmap(fd))(Q, QD, TAU)
    assert 5 in widths, widths


def test_bad_derivatives_option(mixed):
    q = jaxrbd.neutral_configuration(mixed)
    z = jnp.zeros(mixed.nv)
    calls = [
        lambda d: jaxrbd.forward_dynamics(mixed, q, z, z, derivatives=d),
        lambda d: jaxrbd.inverse_dynamics(mixed, q, z, z, derivatives=d),
        lambda d: jaxrbd.bias_forces(mixed, q, z, derivatives=d),
        lambda d: jaxrbd.gravity_forces(mixed, q, derivatives=d),
        lambda d: jaxrbd.mass_matrix(mixed, q, derivatives=d),
        lambda d: jaxrbd.minv_times(mixed, q, z, derivatives=d),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="derivatives 'fd', expected 'analytic' or 'ad'"):
            call("fd")
