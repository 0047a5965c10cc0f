"""Contact KKT solves and impulses: Pinocchio reference data, method agreement, the
constraint equations, restitution, vmap, implicit gradients and redundant constraints.

Compilation dominates: every jitted function lives in a module-level cache keyed by
model structure, and each reference robot compiles one function for all its checks.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ZOO, assert_allclose, fd_jvp, random_state

import jaxrbd
from jaxrbd._contacts import METHODS, kkt_solve

# ----------------------------------------------------------------------------- shared jits


def _all_methods(model, cs, q, qd, tau, e):
    """Everything the checks need from one state: H, C, G, gamma, and (qdd, lam) and
    (qd+, Lambda) of the public functions and of every method on the same H, G."""
    H = jaxrbd.mass_matrix(model, q)
    C = jaxrbd.bias_forces(model, q, qd)
    G = jaxrbd.constraint_jacobian(model, q, cs)
    gamma = jaxrbd.constraint_bias(model, q, qd, cs)
    out = {"H": H, "C": C, "G": G, "gamma": gamma}
    out["public"] = jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs)
    out["public_imp"] = jaxrbd.contact_impulses(
        model, q, qd, cs, restitution=e, return_impulses=True
    )
    for m in METHODS:
        out[m] = kkt_solve(m, None, H, G, tau - C, gamma)
        out["imp_" + m] = kkt_solve(m, None, H, G, H @ qd, -e * (G @ qd))
    return out


_ALL = jax.jit(jax.vmap(_all_methods, in_axes=(None, None, 0, 0, 0, None)))


def _contact_set(robot):
    links = robot.ref["contact_links"].tolist()
    return jaxrbd.ConstraintSet.contacts_3d(list(zip(links, robot.ref["contact_points"])))


_REFERENCE: dict = {}


def _reference_outputs(robots, name):
    """All outputs for the reference samples of one robot (one compile, cached)."""
    if name in _REFERENCE:
        return _REFERENCE[name]
    robot = robots[name]
    S = robot.nsamples
    Q = np.stack([robot.q(s) for s in range(S)])
    V = np.stack([robot.v("v", s) for s in range(S)])
    T = np.stack([robot.v("tau", s) for s in range(S)])
    out = jax.device_get(_ALL(robot.model, _contact_set(robot), Q, V, T, 0.0))
    _REFERENCE[name] = robot, out
    return robot, out


# ----------------------------------------------------------------------------- reference data


@pytest.mark.parametrize("name", ["solo12", "talos"])
def test_reference(robots, name):
    robot, out = _reference_outputs(robots, name)
    ref, vm = robot.ref, robot.v_map
    S, C = robot.nsamples, len(ref["contact_links"])
    rtol = 1e-9
    assert_allclose(
        out["G"], ref["contact_jacobian"][:, :, vm], rtol=rtol, name=f"{name} contact_jacobian"
    )
    assert_allclose(-out["gamma"], ref["contact_drift"], rtol=rtol, name=f"{name} contact_drift")
    lam_ref = ref["contact_lambda"].reshape(S, 3 * C)
    Lam_ref = ref["impulse_Lambda"].reshape(S, 3 * C)
    for m in ("public",) + METHODS:
        qdd, lam = out[m]
        imp = out["public_imp" if m == "public" else "imp_" + m]
        assert_allclose(qdd, ref["contact_qdd"][:, vm], rtol=rtol, name=f"{name} {m} contact_qdd")
        assert_allclose(lam, lam_ref, rtol=rtol, name=f"{name} {m} contact_lambda")
        assert_allclose(
            imp[0], ref["impulse_v_plus"][:, vm], rtol=rtol, name=f"{name} {m} impulse_v_plus"
        )
        assert_allclose(imp[1], Lam_ref, rtol=rtol, name=f"{name} {m} impulse_Lambda")


@pytest.mark.parametrize("name", ["solo12", "talos"])
def test_reference_equations(robots, name):
    """H qdd + C = tau + Gᵀ lam, G qdd = gamma, and G qd+ = 0 with e = 0."""
    robot, out = _reference_outputs(robots, name)
    T = np.stack([robot.v("tau", s) for s in range(robot.nsamples)])
    qdd, lam = out["public"]
    lhs = np.einsum("sij,sj->si", out["H"], qdd) + out["C"]
    rhs = T + np.einsum("smi,sm->si", out["G"], lam)
    assert_allclose(lhs, rhs, rtol=1e-10, name="equation of motion")
    assert_allclose(
        np.einsum("smi,si->sm", out["G"], qdd), out["gamma"], rtol=1e-10, atol=1e-10, name="G qdd"
    )
    assert_allclose(
        np.einsum("smi,si->sm", out["G"], out["public_imp"][0]),
        0 * out["gamma"],
        atol=1e-10,
        name="G qd+",
    )


# ----------------------------------------------------------------------------- a small mixed set


def _mixed_set():
    """Points, a 3-D contact, a weld and two loops (one stabilised) on the mixed tree."""
    return (
        jaxrbd.ConstraintSet.points([("b3", [0.1, 0.0, 0.2], [0.0, 0.3, 1.0])])
        + jaxrbd.ConstraintSet.contacts_3d([("b5", [0.0, 0.1, -0.1])])
        + jaxrbd.ConstraintSet.loops(
            [("b2", [0.0, 0.2, 0.0], "b5", [0.1, 0.0, 0.0])],
            axes="position",
            frame="a",
            baumgarte=(2.0, 3.0),
        )
        + jaxrbd.ConstraintSet.loops(
            [("b3", [0.0, 0.0, 0.1], "b4", [0.2, 0.0, 0.0])],
            axes=[[0, 0, 1, 0, 0, 0]],
            frame="world",
        )
    )


@pytest.fixture(scope="module")
def mixed():
    model = ZOO["mixed"]
    cs = _mixed_set()
    keys = jax.random.split(jax.random.key(7), 3)
    states = [random_state(model, k) for k in keys]
    return model, cs, states


def test_methods_agree_and_equations_hold(mixed):
    model, cs, states = mixed
    Q, V, _, T = (jnp.stack(x) for x in zip(*states))
    out = _ALL(model, cs, Q, V, T, 0.5)
    for m in METHODS:
        assert_allclose(out[m][0], out["kkt"][0], rtol=1e-9, name=f"{m} qdd vs kkt")
        assert_allclose(out[m][1], out["kkt"][1], rtol=1e-9, name=f"{m} lam vs kkt")
        assert_allclose(out["imp_" + m][0], out["imp_kkt"][0], rtol=1e-9, name=f"{m} qd+")
    qdd, lam = out["public"]
    assert_allclose(qdd, out["kkt"][0], rtol=1e-12, name="public qdd")
    lhs = jnp.einsum("sij,sj->si", out["H"], qdd) + out["C"]
    assert_allclose(lhs, T + jnp.einsum("smi,sm->si", out["G"], lam), rtol=1e-9, name="EOM")
    assert_allclose(
        jnp.einsum("smi,si->sm", out["G"], qdd), out["gamma"], rtol=1e-9, atol=1e-12, name="G qdd"
    )
    # restitution 0.5: G qd+ = -e G qd-
    Gv = jnp.einsum("smi,si->sm", out["G"], V)
    assert_allclose(
        jnp.einsum("smi,si->sm", out["G"], out["public_imp"][0]), -0.5 * Gv, rtol=1e-9, name="e=0.5"
    )
    # H (qd+ - qd-) = Gᵀ Λ
    dp = jnp.einsum("sij,sj->si", out["H"], out["public_imp"][0] - V)
    assert_allclose(
        dp, jnp.einsum("smi,sm->si", out["G"], out["public_imp"][1]), rtol=1e-9, name="momentum"
    )


# ----------------------------------------------------------------------------- pendulum: f_ext, restitution, vmap


def _pendulum_set():
    return jaxrbd.ConstraintSet.points([("body_3", [0.0, 0.0, -1.0], [0.0, 0.0, 1.0])])


@jax.jit
def _pendulum_all(q, qd, tau, f_ext, e):
    model, cs = ZOO["triple_pendulum"], _pendulum_set()
    tau_ext = jaxrbd.bias_forces(model, q, qd) - jaxrbd.bias_forces(model, q, qd, f_ext)
    qd_plus, Lam = jaxrbd.contact_impulses(model, q, qd, cs, e, return_impulses=True)
    return {
        "with_f_ext": jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs, f_ext=f_ext),
        "with_tau_ext": jaxrbd.forward_dynamics_contacts(model, q, qd, tau + tau_ext, cs),
        "qd_plus": qd_plus,
        "Lambda": Lam,
        "H": jaxrbd.mass_matrix(model, q),
        "G": jaxrbd.constraint_jacobian(model, q, cs),
        "T0": jaxrbd.kinetic_energy(model, q, qd),
        "T1": jaxrbd.kinetic_energy(model, q, qd_plus),
    }


def _pendulum_state(seed):
    model = ZOO["triple_pendulum"]
    q, qd, _, tau = random_state(model, jax.random.key(seed))
    f_ext = jnp.zeros((model.nbodies, 6)).at[2].set(jnp.array([0.1, -0.2, 0.3, 1.0, 2.0, -1.0]))
    return q, qd, tau, f_ext


def test_f_ext_enters_as_a_force():
    out = _pendulum_all(*_pendulum_state(3), 0.0)
    assert_allclose(out["with_f_ext"][0], out["with_tau_ext"][0], rtol=1e-10, name="qdd with f_ext")
    assert_allclose(out["with_f_ext"][1], out["with_tau_ext"][1], rtol=1e-10, name="lam with f_ext")


@pytest.mark.parametrize("e", [0.0, 1.0])
def test_restitution_single_contact(e):
    q, qd, tau, f_ext = _pendulum_state(3)
    out = _pendulum_all(q, qd, tau, f_ext, e)
    G = out["G"]
    assert_allclose(
        G @ out["qd_plus"], -e * (G @ qd), rtol=1e-10, atol=1e-12, name="normal velocity"
    )
    if e == 1.0:
        assert_allclose(out["T1"], out["T0"], rtol=1e-10, name="kinetic energy, e = 1")
    else:
        assert float(out["T1"]) < float(out["T0"])  # a plastic impact dissipates
    assert_allclose(
        out["H"] @ (out["qd_plus"] - qd), G.T @ out["Lambda"], rtol=1e-10, name="H dqd = Gᵀ Λ"
    )


def test_vmap_1024_states():
    model, one, _, f = _redundant()
    keys = jax.random.split(jax.random.key(11), 1024)
    Q, V, _, T = jax.vmap(lambda k: random_state(model, k))(keys)
    fv = jax.jit(jax.vmap(lambda q, v, t: jaxrbd.forward_dynamics_contacts(model, q, v, t, one)))
    qdd, lam = fv(Q, V, T)
    assert qdd.shape == (1024, model.nv) and lam.shape == (1024, 3)
    assert bool(jnp.all(jnp.isfinite(qdd)))
    for s in (0, 511, 1023):
        qdd_s, lam_s = f(Q[s], V[s], T[s], one)["public"]
        assert_allclose(qdd[s], qdd_s, rtol=1e-10, name=f"vmap qdd[{s}]")
        assert_allclose(lam[s], lam_s, rtol=1e-10, name=f"vmap lam[{s}]")


# ----------------------------------------------------------------------------- gradients


@jax.jit
def _grad_all(q, qd, tau, tangents, cotangents):
    """Primal, forward-mode tangent and reverse-mode cotangent of the contact dynamics."""
    model = ZOO["triple_pendulum"]
    cs = jaxrbd.ConstraintSet.contacts_3d(
        [("body_3", [0.0, 0.1, -1.0])]
    ) + jaxrbd.ConstraintSet.points(
        [("body_2", [0.1, 0.0, -0.5], [1.0, 0.0, 0.0])], baumgarte=(1.0, 2.0)
    )

    def f(q, qd, tau):
        return jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs)

    out, tan = jax.jvp(f, (q, qd, tau), tangents)
    back = jax.vjp(f, q, qd, tau)[1](cotangents)
    return out, tan, back


def test_gradients_match_finite_differences():
    model = ZOO["triple_pendulum"]
    q, qd, _, tau = random_state(model, jax.random.key(5))
    k1, k2, k3 = jax.random.split(jax.random.key(6), 3)
    dq, dqd, dtau = (jax.random.normal(k, (model.nv,)) for k in (k1, k2, k3))
    # tangent of q as a velocity: the jvp along integrate(q, t dq)
    qdot = jax.jvp(lambda t: jaxrbd.integrate(model, q, t * dq), (0.0,), (1.0,))[1]
    ct = (jax.random.normal(k1, (model.nv,)), jax.random.normal(k2, (4,)))
    _out, tan, back = _grad_all(q, qd, tau, (qdot, dqd, dtau), ct)
    f = lambda qq, a, b: _grad_all(qq, a, b, (qdot, dqd, dtau), ct)[0]
    fd = fd_jvp(f, model, q, dq, (qd, tau), (dqd, dtau))
    assert_allclose(tan[0], fd[0], rtol=1e-6, name="d qdd")
    assert_allclose(tan[1], fd[1], rtol=1e-6, name="d lam")
    # reverse mode is the transpose of forward mode: <ct, J t> == <Jᵀ ct, t>
    lhs = sum(jnp.vdot(c, t) for c, t in zip(ct, tan))
    rhs = sum(jnp.vdot(b, t) for b, t in zip(back, (qdot, dqd, dtau)))
    assert_allclose(lhs, rhs, rtol=1e-10, name="vjp vs jvp")


# ----------------------------------------------------------------------------- redundant constraints


@functools.cache
def _redundant():
    model = ZOO["triple_pendulum"]
    one = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
    two = one + one

    @jax.jit
    def f(q, qd, tau, cs):
        """The public functions (default method) and every method on the same H, G."""
        out = {
            "public": jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs),
            "public_imp": jaxrbd.contact_impulses(model, q, qd, cs, return_impulses=True),
        }
        H = jaxrbd.mass_matrix(model, q)
        G = jaxrbd.constraint_jacobian(model, q, cs)
        C = jaxrbd.bias_forces(model, q, qd)
        gamma = jaxrbd.constraint_bias(model, q, qd, cs)
        for m in METHODS:
            out[m] = kkt_solve(m, None, H, G, tau - C, gamma)
            out["imp_" + m] = kkt_solve(m, None, H, G, H @ qd, 0 * gamma)
        return out

    return model, one, two, f


def test_redundant_constraints_are_finite_and_minimum_norm():
    model, one, two, f = _redundant()
    q, qd, _, tau = random_state(model, jax.random.key(9))
    ref, dup = f(q, qd, tau, one), f(q, qd, tau, two)
    qdd1, lam1 = ref["kkt"]
    v1, L1 = ref["imp_kkt"]
    for m in ("public",) + METHODS:
        (qdd2, lam2), (v2, L2) = dup[m], dup["public_imp" if m == "public" else "imp_" + m]
        for x in (qdd2, lam2, v2, L2):
            assert bool(jnp.all(jnp.isfinite(x))), m
        assert_allclose(qdd2, qdd1, rtol=1e-8, name=f"{m}: qdd with a duplicated contact")
        assert_allclose(v2, v1, rtol=1e-8, name=f"{m}: qd+ with a duplicated contact")
        # the minimum-norm split of the force: half on each copy
        assert_allclose(
            lam2, jnp.concatenate([lam1, lam1]) / 2, rtol=1e-8, name=f"{m}: minimum-norm lam"
        )
        assert_allclose(
            L2, jnp.concatenate([L1, L1]) / 2, rtol=1e-8, name=f"{m}: minimum-norm Lambda"
        )


def test_check_rank_raises_under_jit_and_vmap():
    model, _, two, _ = _redundant()
    distinct = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])]) + (
        jaxrbd.ConstraintSet.contacts_3d([("body_2", [0.3, 0.0, -0.5])])
    )
    q, qd, _, tau = random_state(model, jax.random.key(9))
    g = jax.jit(
        jax.vmap(
            lambda qq, cs: jaxrbd.forward_dynamics_contacts(
                model, qq, qd, tau, cs, check_rank=True
            ),
            in_axes=(0, None),
        )
    )
    jax.block_until_ready(g(jnp.stack([q, q]), distinct))  # full rank: no error
    with pytest.raises(Exception, match="rank deficient"):
        jax.block_until_ready(g(jnp.stack([q, q]), two))


# ----------------------------------------------------------------------------- errors


def test_errors():
    model = ZOO["triple_pendulum"]
    cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
    q, qd = jnp.zeros(model.nq), jnp.zeros(model.nv)
    with pytest.raises(ValueError, match="method must be one of"):
        jaxrbd.forward_dynamics_contacts(model, q, qd, qd, cs, method="lu")
    with pytest.raises(ValueError, match="q has shape"):
        jaxrbd.forward_dynamics_contacts(model, q[:-1], qd, qd, cs)
    with pytest.raises(ValueError, match="tau has shape"):
        jaxrbd.forward_dynamics_contacts(model, q, qd, qd[:-1], cs)
    with pytest.raises(TypeError, match="constraints must be a ConstraintSet"):
        jaxrbd.forward_dynamics_contacts(model, q, qd, qd, [("body_3", [0.0, 0.0, 0.0])])
    with pytest.raises(ValueError, match="unknown body"):
        bad = jaxrbd.ConstraintSet.contacts_3d([("foot", [0.0, 0.0, 0.0])])
        jaxrbd.forward_dynamics_contacts(model, q, qd, qd, bad)
    with pytest.raises(ValueError, match="restitution has shape"):
        jaxrbd.contact_impulses(model, q, qd, cs, restitution=jnp.ones(2))
    with pytest.raises(ValueError, match="qd_minus has shape"):
        jaxrbd.contact_impulses(model, q, qd[:2], cs)
    with pytest.raises(ValueError, match="rcond"):
        jaxrbd.contact_impulses(model, q, qd, cs, rcond=-1.0)
    with pytest.raises(ValueError, match="f_ext has shape"):
        jaxrbd.forward_dynamics_contacts(model, q, qd, qd, cs, f_ext=jnp.zeros((2, 6)))
