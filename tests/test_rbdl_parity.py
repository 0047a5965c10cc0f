"""RBDL parity: RBDL-semantics custom joints, euler_zxy, constrained inverse dynamics,
custom constraints and the zero-moment point."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose, random_body

import jaxrbd
from jaxrbd import Body, ConstraintSet, ModelBuilder, Transform, joints

ROLLER = [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]  # RBDL's roller: turn about z, slide along x


# ----------------------------------------------------------------------------- models


def _roller(kind=joints.custom):
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("roller", "world", kind([ROLLER]), Body(1.0, (0.1, 0.2, 0.0), np.eye(3) * 0.1))
    return b.build()


@functools.cache
def _mixed(floating=False):
    """Custom joints with skewed, parallel and pure columns, an euler_zxy joint, a revolute."""
    rng = np.random.default_rng(3)
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    root = "world"
    if floating:
        b.add_body("base", "world", joints.free(), random_body(rng))
        root = "base"
    cols = [ROLLER, [0, 0, 0, 0, 1, 0], [1, 0, 0, 0, 0.3, 0.5]]
    b.add_body("a", root, joints.custom(cols), random_body(rng), Transform(translation=(0.1, 0, 0)))
    if floating:  # the tangent-space test: a free base over one skewed column
        return b.build()
    b.add_body("b", "a", joints.custom([[0, 0.6, 0.8, 0.5, 0, 0.2], [0, 0, 1, 0, 0, 0.1]]),
               random_body(rng), Transform(translation=(0, 0.4, 0)))
    b.add_body("d", "a", joints.euler_zxy(), random_body(rng), Transform(translation=(0, 0, 0.5)))
    return b.build()


def _state(model, seed):
    rng = np.random.default_rng(seed)
    q = jaxrbd.integrate(model, jaxrbd.neutral_configuration(model),
                         jnp.asarray(rng.normal(size=model.nv)))
    return (q,) + tuple(jnp.asarray(rng.normal(size=model.nv)) for _ in range(3))


# ----------------------------------------------------------------------------- custom joints


def test_roller_matches_rbdl():
    """RBDL's roller at q = 1: origin at (1, 0, 0); velocity, Jacobian and acceleration
    of a body point agree with differentiating its position."""
    model = _roller()
    assert model.joint_kind[1] == "custom"
    point = jnp.array([0.2, -0.1, 0.3])

    @jax.jit
    def run(q, qd, qdd):
        pos = lambda x: jaxrbd.point_position(model, x, "roller", point)
        J_ad = jax.jacfwd(pos)(q)
        return dict(
            origin=jaxrbd.point_position(model, q, "roller", jnp.zeros(3)),
            R=jaxrbd.forward_kinematics(model, q)[0][1],
            J=jaxrbd.point_jacobian(model, q, "roller", point), J_ad=J_ad,
            v=jaxrbd.point_velocity(model, q, qd, "roller", point),
            a=jaxrbd.point_acceleration(model, q, qd, qdd, "roller", point),
            a_ad=J_ad @ qdd + jax.jacfwd(lambda x: jax.jacfwd(pos)(x) @ qd)(q) @ qd,
            Jb=jaxrbd.body_jacobian(model, q, "roller", frame="body"),
        )

    qd = jnp.array([0.7])
    out = run(jnp.array([1.0]), qd, jnp.array([-0.3]))
    c, s = np.cos(1.0), np.sin(1.0)
    assert_allclose(out["origin"], [1.0, 0.0, 0.0], atol=1e-15, name="origin")
    assert_allclose(out["R"], [[c, -s, 0], [s, c, 0], [0, 0, 1]], atol=1e-15, name="rotation")
    assert_allclose(out["J"], out["J_ad"], rtol=1e-13, name="point Jacobian")
    assert_allclose(out["v"], out["J_ad"] @ qd, rtol=1e-13, name="point velocity")
    assert_allclose(out["a"], out["a_ad"], rtol=1e-12, name="point acceleration")
    # RBDL: the linear part of the column turns with the child, S = [w; E(q) v]
    assert_allclose(out["Jb"][:, 0], [0, 0, 1, c, -s, 0], atol=1e-15, name="S(q)")


def test_screw_keeps_the_exact_screw_and_parallel_columns_agree():
    screw = _roller(joints.screw)
    assert screw.joint_kind[1] == "screw"
    q = jnp.array([1.0])
    assert_allclose(jax.jit(jaxrbd.point_position, static_argnums=2)(screw, q, "roller", jnp.zeros(3)),
                    [np.sin(1.0), 1 - np.cos(1.0), 0.0], atol=1e-15, name="screw origin")
    # parallel / pure columns: custom takes the constant-S path and equals screw
    cols = [[0, 0, 1, 0, 0, 0.3], [0, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0]]
    assert joints.custom(cols).kind == "screw"
    assert joints.custom([ROLLER]).kind == "custom"
    assert joints.planar().kind == "screw"
    assert joints.helical((0, 0, 1), 0.1).kind == "screw"
    models = []
    for make in (joints.custom, joints.screw):
        b = ModelBuilder()
        b.add_body("x", "world", make(cols), Body(1.0, (0.1, 0, 0), np.eye(3) * 0.1))
        models.append(b.build())
    qq, qd, qdd, _ = _state(models[0], 1)
    ID = jax.jit(jaxrbd.inverse_dynamics)
    assert_allclose(ID(models[1], qq, qd, qdd), ID(models[0], qq, qd, qdd), rtol=1e-13, name="ID")


def test_rbdl_planar_semantics():
    """planar(): x, y translations then a rotation about z; q = (x, y, angle)."""
    b = ModelBuilder()
    b.add_body("p", "world", joints.planar(), Body(1.0, (0.0, 0.0, 0.0), np.eye(3)))
    model = b.build()
    q = jnp.array([0.3, -0.2, 0.7])
    pos = jax.jit(jaxrbd.point_position, static_argnums=2)
    assert_allclose(pos(model, q, "p", jnp.array([1.0, 0.0, 0.0])),
                    [0.3 + np.cos(0.7), -0.2 + np.sin(0.7), 0.0], atol=1e-15, name="planar")


def _lagrangian(model):
    def L(q, qd):
        return jaxrbd.kinetic_energy(model, q, qd) - jaxrbd.potential_energy(model, q)
    return L


@pytest.fixture(scope="module")
def mixed_dynamics():
    """Jitted dynamics and their AD/Lagrange oracles on the mixed-column model."""
    model = _mixed()
    L = _lagrangian(model)

    @jax.jit
    def run(q, qd, qdd, tau, f_ext):
        # Lagrange: d/dt dL/dqd - dL/dq = tau, with d2L/dqd2 = d2T/dqd2 = H
        Hl = jax.hessian(L, argnums=1)(q, qd)
        mixed = jax.jacfwd(jax.grad(L, argnums=1), argnums=0)(q, qd)
        tau_l = Hl @ qdd + mixed @ qd - jax.grad(L, argnums=0)(q, qd)
        fd = jaxrbd.forward_dynamics(model, q, qd, tau, f_ext)
        x = jnp.concatenate([q, qd])
        ad = jax.jacfwd(lambda x: jaxrbd.inverse_dynamics(
            model, x[:model.nq], x[model.nq:], qdd, f_ext))(x)
        ad_fd = jax.jacfwd(lambda x: jaxrbd.forward_dynamics(
            model, x[:model.nq], x[model.nq:], tau, f_ext))(x)
        return dict(H=jaxrbd.mass_matrix(model, q), H_l=Hl, tau_l=tau_l,
                    tau=jaxrbd.inverse_dynamics(model, q, qd, qdd),
                    id_fd=jaxrbd.inverse_dynamics(model, q, qd, fd, f_ext),
                    did=jaxrbd.inverse_dynamics_derivatives(model, q, qd, qdd, f_ext),
                    dfd=jaxrbd.forward_dynamics_derivatives(model, q, qd, tau, f_ext),
                    ad_id=(ad[:, :model.nq], ad[:, model.nq:]),
                    ad_fd=(ad_fd[:, :model.nq], ad_fd[:, model.nq:]))

    return model, run


def test_custom_columns_dynamics_are_exact(mixed_dynamics):
    """Mixed columns (q-dependent S) and euler_zxy: H is the Hessian of the kinetic
    energy, ID is Lagrange's equation by AD, ID(FD(tau)) = tau, and the analytic
    derivatives equal AD."""
    model, run = mixed_dynamics
    assert set(model.joint_kind[1:]) == {"custom", "euler_zxy"}
    for seed in (0, 1):
        q, qd, qdd, tau = _state(model, seed)
        f_ext = jnp.asarray(np.random.default_rng(seed + 9).normal(size=(model.nbodies, 6)))
        out = run(q, qd, qdd, tau, f_ext)
        assert_allclose(out["H"], out["H_l"], rtol=1e-12, atol=1e-13, name="H vs d2T/dqd2")
        assert_allclose(out["tau"], out["tau_l"], rtol=1e-11, atol=1e-12, name="ID vs Lagrange")
        assert_allclose(out["id_fd"], tau, rtol=1e-11, atol=1e-12, name="ID(FD(tau))")
        for got, want, name in zip(out["did"], out["ad_id"] + (out["H"],), ("dq", "dqd", "H")):
            assert_allclose(got, want, rtol=1e-10, atol=1e-10, name=f"ID derivative {name}")
        for got, want, name in zip(out["dfd"], out["ad_fd"], ("dq", "dqd")):
            assert_allclose(got, want, rtol=1e-9, atol=1e-9, name=f"FD derivative {name}")
        assert_allclose(out["dfd"][2] @ out["H"], np.eye(model.nv), atol=1e-10, name="dFD/dtau")


def test_custom_columns_under_a_floating_base():
    """Below a free joint: derivatives along the tangent space equal AD through
    `integrate`, and the batched (vmap) forms agree with single calls."""
    model = _mixed(floating=True)

    def one(q, qd, qdd):
        dq, _, _ = jaxrbd.inverse_dynamics_derivatives(model, q, qd, qdd)
        ad = jax.jacfwd(lambda v: jaxrbd.inverse_dynamics(
            model, jaxrbd.integrate(model, q, v), qd, qdd))(jnp.zeros(model.nv))
        tau = jaxrbd.inverse_dynamics(model, q, qd, qdd)
        return dq, ad, tau, jaxrbd.forward_dynamics(model, q, qd, tau)

    states = [_state(model, s) for s in (4, 5)]
    Q, QD, QDD = (jnp.stack([st[k] for st in states]) for k in range(3))
    dq, ad, _, qdd_back = jax.jit(jax.vmap(one))(Q, QD, QDD)  # the batched (vmap) forms
    assert_allclose(dq, ad, rtol=1e-10, atol=1e-10, name="d tau / dq (tangent)")
    assert_allclose(qdd_back, QDD, rtol=1e-10, atol=1e-10, name="vmap FD(ID)")


def test_custom_column_validation():
    with pytest.raises(ValueError, match="norm"):
        joints.custom([[0, 0, 2, 1, 0, 0]])
    with pytest.raises(ValueError, match="zero"):
        joints.screw([[0, 0, 0, 0, 0, 0]])
    with pytest.raises(ValueError, match="shape"):
        joints.custom([[0, 0, 1, 1, 0]])
    with pytest.raises(TypeError, match="numbers"):
        joints.custom([["a", 0, 1, 1, 0, 0]])


# ----------------------------------------------------------------------------- euler_zxy


def test_euler_zxy_equals_three_revolutes():
    """euler_zxy moves the child as revolute z, then x, then y (massless bodies between),
    with the same H and ID (its cJ term included)."""
    rng = np.random.default_rng(7)
    body, tip = random_body(rng), random_body(rng)
    models = []
    for split in (False, True):
        b = ModelBuilder(gravity=(0.0, 0.0, -9.81), inertia_check="ignore")
        place = Transform(translation=(0.1, 0.2, 0.3))
        if split:
            massless = Body(0.0, (0, 0, 0), np.zeros((3, 3)))
            b.add_body("z", "world", joints.revolute((0, 0, 1)), massless, place)
            b.add_body("x", "z", joints.revolute((1, 0, 0)), massless)
            b.add_body("e", "x", joints.revolute((0, 1, 0)), body)
        else:
            b.add_body("e", "world", joints.euler_zxy(), body, place)
        b.add_body("tip", "e", joints.revolute((1, 0, 0)), tip,
                   Transform(translation=(0.0, 0.0, -0.5)))
        models.append(b.build())
    euler, chain = models
    q, qd, qdd, _ = _state(euler, 2)

    @jax.jit
    def run(m):
        return dict(
            pose=jaxrbd.forward_kinematics(m, q)[0][m.body_id("tip")],
            H=jaxrbd.mass_matrix(m, q), ID=jaxrbd.inverse_dynamics(m, q, qd, qdd),
            tip=jaxrbd.point_acceleration(m, q, qd, qdd, "tip", jnp.array([0.1, 0.0, 0.2])))

    a, b = run(euler), run(chain)
    for k in a:
        assert_allclose(a[k], b[k], rtol=1e-12, atol=1e-13, name=f"euler_zxy {k}")


# ----------------------------------------------------------------------------- constrained ID


@functools.cache
def _solo():
    import pathlib

    path = pathlib.Path(__file__).parent / "data" / "solo12.urdf"
    model = jaxrbd.load_urdf(str(path), floating_base=True)
    feet = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
    return model, ConstraintSet.contacts_3d([(f, [0.0, 0.0, 0.0]) for f in feet])


def _admissible(G, gamma, rng):
    Gn = np.asarray(G)
    x0 = np.linalg.lstsq(Gn, np.asarray(gamma), rcond=None)[0]
    N = np.eye(Gn.shape[1]) - np.linalg.pinv(Gn) @ Gn
    return jnp.asarray(x0 + N @ rng.normal(size=Gn.shape[1]))


@pytest.fixture(scope="module")
def solo_idc():
    model, cs = _solo()

    @jax.jit
    def run(q, qd, qdd_des):
        tau, lam, qdd = jaxrbd.inverse_dynamics_constraints(model, q, qd, qdd_des, cs,
                                                            return_qdd=True)
        fd = jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs)
        rel = jaxrbd.inverse_dynamics_constraints_relaxed(model, q, qd, qdd_des, cs,
                                                          return_qdd=True)
        fd_rel = jaxrbd.forward_dynamics_contacts(model, q, qd, rel[0], cs)
        sys = (jaxrbd.mass_matrix(model, q), jaxrbd.bias_forces(model, q, qd),
               jaxrbd.constraint_jacobian(model, q, cs), jaxrbd.constraint_bias(model, q, qd, cs))
        return (tau, lam, qdd), fd, rel, fd_rel, sys

    return model, cs, run


def _solo_state(model, seed):
    rng = np.random.default_rng(seed)
    q = jaxrbd.neutral_configuration(model).at[7:].set(jnp.asarray(rng.uniform(-0.6, 0.6, 12)))
    return q, jnp.asarray(0.5 * rng.normal(size=model.nv)), rng


def test_idc_quadruped_realises_joint_accelerations(solo_idc):
    """solo12 on four feet, base unactuated: admissible joint accelerations are realised
    exactly (whatever the desired base acceleration), tau is zero on the base, and the
    forces reproduce the motion through forward_dynamics_contacts."""
    model, cs, run = solo_idc
    q, qd, rng = _solo_state(model, 0)
    _, _, G, gamma = run(q, qd, jnp.zeros(model.nv))[4]
    target = _admissible(G, gamma, rng)
    (tau, lam, qdd), fd, rel, fd_rel, _ = run(q, qd, target.at[:6].set(123.0))
    assert_allclose(qdd, target, rtol=1e-10, atol=1e-10, name="realised qdd")
    assert np.all(np.asarray(tau[:6]) == 0.0)
    assert_allclose(fd[0], qdd, rtol=1e-9, atol=1e-9, name="FD(tau) qdd")
    assert_allclose(fd[1], lam, rtol=1e-9, atol=1e-9, name="FD(tau) lambda")
    # relaxed: the equations of motion hold exactly, tau zero on the base
    assert np.all(np.asarray(rel[0][:6]) == 0.0)
    assert_allclose(fd_rel[0], rel[2], rtol=1e-9, atol=1e-9, name="relaxed FD qdd")
    assert_allclose(fd_rel[1], rel[1], rtol=1e-9, atol=1e-9, name="relaxed FD lambda")


def test_idc_matches_a_direct_kkt_solve(solo_idc):
    """An inadmissible target: the same least-squares problem solved as one KKT system
    (unknowns qdd and lambda, minimum-norm by numpy's lstsq) gives the same answer."""
    model, cs, run = solo_idc
    q, qd, rng = _solo_state(model, 1)
    target = jnp.asarray(rng.normal(size=model.nv))
    (tau, lam, qdd), _, _, _, (H, C, G, gamma) = run(q, qd, target)
    H, C, G, gamma = (np.asarray(x) for x in (H, C, G, gamma))
    nv, m = H.shape[0], G.shape[0]
    un = np.arange(6)
    W = np.diag(np.r_[np.zeros(6), np.ones(nv - 6)])
    A = np.block([[H[un], -G[:, un].T], [G, np.zeros((m, m))]])
    b = np.r_[-C[un], gamma]
    Q = np.zeros((nv + m, nv + m))
    Q[:nv, :nv] = W
    K = np.block([[Q, A.T], [A, np.zeros((A.shape[0], A.shape[0]))]])
    rhs = np.r_[W @ np.asarray(target), np.zeros(m), b]
    sol = np.linalg.lstsq(K, rhs, rcond=1e-12)[0]
    assert_allclose(qdd, sol[:nv], rtol=1e-8, atol=1e-8, name="qdd vs KKT")
    assert_allclose(lam, sol[nv:nv + m], rtol=1e-8, atol=1e-8, name="lambda vs KKT")
    assert_allclose(tau, np.r_[np.zeros(6), (H @ sol[:nv] + C - G.T @ sol[nv:nv + m])[6:]],
                    rtol=1e-8, atol=1e-8, name="tau vs KKT")


def _four_bar():
    """A planar four-bar (crank 1 m, coupler 2 m, rocker 1.5 m, ground 2.5 m)."""
    b = ModelBuilder(gravity=(0.0, -9.81, 0.0))
    body = lambda L: Body(1.0, (L / 2, 0.0, 0.0), np.diag([0.01, L * L / 12, L * L / 12]))
    b.add_body("crank", "world", joints.revolute((0, 0, 1)), body(1.0))
    b.add_body("coupler", "crank", joints.revolute((0, 0, 1)), body(2.0),
               Transform(translation=(1.0, 0, 0)))
    b.add_body("rocker", "coupler", joints.revolute((0, 0, 1)), body(1.5),
               Transform(translation=(2.0, 0, 0)))
    loop = ConstraintSet.loops([("rocker", [1.5, 0.0, 0.0], "world", [2.5, 0.0, 0.0])],
                               axes=[[0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 1, 0]], frame="world")
    return b.build(), loop


@functools.cache
def _four_bar_assembly():
    @jax.jit
    def run(guess):
        model, loop = _four_bar()
        q0, ok = jaxrbd.assemble_q(model, guess, loop)
        qd, _ = jaxrbd.assemble_qd(model, q0, jnp.array([1.0, 0.0, 0.0]), loop)
        return q0, ok, qd

    return run(jnp.array([1.2, -0.9, 1.1]))


def _four_bar_state(model, loop):
    return _four_bar_assembly()


def test_idc_four_bar_driven_by_one_motor():
    """One motor on the crank: the desired crank acceleration is realised, the passive
    joints get no torque, forward dynamics reproduces the motion; gradients are finite
    and vmap over states matches single calls."""
    model, loop = _four_bar()
    q0, ok, qd = _four_bar_state(model, loop)
    assert bool(ok)
    act = [True, False, False]

    def run(want):
        tau, lam, qdd = jaxrbd.inverse_dynamics_constraints(
            model, q0, qd, jnp.array([want, 0.0, 0.0]), loop, actuated=act, return_qdd=True)
        return tau, lam, qdd, jaxrbd.forward_dynamics_contacts(model, q0, qd, tau, loop)

    # batched over two targets, with the gradient of the motor torque: one compile
    wants = jnp.array([2.0, -1.0])
    (tau, lam, qdd, (qdd_fd, lam_fd)), g = jax.jit(jax.vmap(
        lambda w: (run(w), jax.grad(lambda x: run(x)[0][0])(w))))(wants)
    assert_allclose(qdd[:, 0], wants, rtol=1e-12, name="crank acceleration")
    assert np.all(np.asarray(tau[:, 1:]) == 0.0)
    assert_allclose(qdd_fd, qdd, rtol=1e-9, atol=1e-10, name="FD(tau)")
    assert_allclose(lam_fd, lam, rtol=1e-9, atol=1e-10, name="FD lambda")
    assert_allclose(jaxrbd.actuation_mask(model, ["crank"]), act, name="mask by name")
    # the torque is affine in the target: its derivative is the slope between the two
    slope = (tau[0, 0] - tau[1, 0]) / (wants[0] - wants[1])
    assert_allclose(g, jnp.full(2, slope), rtol=1e-9, name="d tau / d qdd_desired")
    assert float(g[0]) > 0  # more acceleration needs more torque


def test_idc_relaxed_weights_and_errors():
    model, loop = _four_bar()
    q0, _, _ = _four_bar_state(model, loop)
    qd = jnp.zeros(3)
    want = jnp.array([2.0, 0.0, 0.0])
    relaxed = jax.jit(lambda w: jaxrbd.inverse_dynamics_constraints_relaxed(
        model, q0, qd, want, loop, actuated=[True, False, False], weights=w, return_qdd=True))
    errs = [abs(float(relaxed(jnp.array([w]))[2][0]) - 2.0) for w in (1.0, 1e6)]
    assert errs[1] < 1e-4 * errs[0]  # a stiffer servo tracks the target more closely
    with pytest.raises(ValueError, match="entries"):
        jaxrbd.inverse_dynamics_constraints(model, q0, qd, want, loop, actuated=[True, False])
    with pytest.raises(ValueError, match="unknown joint"):
        jaxrbd.actuation_mask(model, ["nope"])
    with pytest.raises(ValueError, match="weights has shape"):
        jaxrbd.inverse_dynamics_constraints_relaxed(model, q0, qd, want, loop,
                                                    actuated=[True, False, False],
                                                    weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="qdd_desired has shape"):
        jaxrbd.inverse_dynamics_constraints(model, q0, qd, jnp.zeros(2), loop)


def test_idc_on_two_feet():
    """solo12 on two diagonal feet (a trot stance), base unactuated: point feet cannot
    resist a roll about the line between them, so not every motion with the feet fixed
    is admissible. A motion produced by some joint torques (forward dynamics) is: its
    joint accelerations are realised, and the base follows exactly."""
    model, _ = _solo()
    cs = ConstraintSet.contacts_3d([("FL_FOOT", [0.0, 0.0, 0.0]), ("HR_FOOT", [0.0, 0.0, 0.0])])
    q, qd, rng = _solo_state(model, 5)
    tau_in = jnp.asarray(rng.normal(size=model.nv)).at[:6].set(0.0)

    @jax.jit
    def run(tau_in):
        target = jaxrbd.forward_dynamics_contacts(model, q, qd, tau_in, cs)[0]
        out = jaxrbd.inverse_dynamics_constraints(model, q, qd, target.at[:6].set(-50.0), cs,
                                                  return_qdd=True)
        return target, out, jaxrbd.forward_dynamics_contacts(model, q, qd, out[0], cs)[0]

    target, (tau, lam, qdd), qdd_back = run(tau_in)
    assert_allclose(qdd, target, rtol=1e-9, atol=1e-9, name="two-feet qdd")
    assert_allclose(qdd_back, target, rtol=1e-8, atol=1e-8, name="two-feet FD(tau)")
    assert np.all(np.asarray(tau[:6]) == 0.0) and lam.shape == (6,)


# ----------------------------------------------------------------------------- custom constraints


P3 = jnp.array([0.0, 0.0, -1.0])


@functools.cache
def _arm():
    """A spatial 4-link arm of revolute joints (body_1 ... body_4, 1 m links)."""
    rng = np.random.default_rng(12)
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    parent = "world"
    for k, axis in enumerate(((0, 0, 1), (0, 1, 0), (1, 0, 0), (0, 1, 0)), start=1):
        b.add_body(f"body_{k}", parent, joints.revolute(axis), random_body(rng),
                   Transform(translation=(0.0, 0.0, -1.0 if k > 1 else 0.0)))
        parent = f"body_{k}"
    return b.build()


def _tip(m, q):
    return jaxrbd.point_position(m, q, "body_3", P3)


@pytest.fixture(scope="module")
def pendulum_sets():
    model = _arm()
    rng = np.random.default_rng(11)
    q, qd, tau = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(3))
    q = 0.4 * q
    target = _tip(model, q) + jnp.array([0.01, -0.02, 0.03])
    auto = ConstraintSet.custom(lambda m, x: _tip(m, x) - target, 3, baumgarte=(2.0, 3.0))
    supplied = ConstraintSet.custom(
        lambda m, x: _tip(m, x) - target, 3,
        jacobian=lambda m, x: jaxrbd.point_jacobian(m, x, "body_3", P3),
        bias=lambda m, x, v: -jaxrbd.point_bias_acceleration(m, x, v, "body_3", P3),
        baumgarte=(2.0, 3.0))
    builtin = ConstraintSet.contacts_3d([("body_3", P3, target)], baumgarte=(2.0, 3.0))
    return model, (q, qd, tau), auto, supplied, builtin


def test_custom_constraints_match_builtin_rows(pendulum_sets):
    """A custom point constraint (Jacobian and bias by AD, or supplied) equals the built-in
    3-D contact in G, gamma, residual, every contact method and impulses; it combines
    with other constructors."""
    model, (q, qd, tau), auto, supplied, builtin = pendulum_sets
    both = ConstraintSet.points([("body_1", P3, [1.0, 0.0, 0.0])]) + auto
    assert both.kinds == ("point", "custom") and both.size == 4

    @jax.jit
    def run(q, qd, tau):
        out = {}
        for key, cs in (("ref", builtin), ("auto", auto), ("supplied", supplied)):
            out[key] = dict(
                G=jaxrbd.constraint_jacobian(model, q, cs),
                gamma=jaxrbd.constraint_bias(model, q, qd, cs),
                phi=jaxrbd.constraint_residual(model, q, cs),
                Gqd=jaxrbd.constraint_velocity_residual(model, q, qd, cs),
                imp=jaxrbd.contact_impulses(model, q, qd, cs, restitution=0.5),
                kkt=jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs, "kkt"))
        # the methods differ only after G and gamma: every one of them on the custom set
        for m in ("range_space", "null_space"):
            out["auto"][m] = jaxrbd.forward_dynamics_contacts(model, q, qd, tau, auto, m)
        out["both"] = jaxrbd.constraint_jacobian(model, q, both)
        out["point"] = jaxrbd.point_jacobian(model, q, "body_1", P3)[0]
        return out

    out = run(q, qd, tau)
    ref = out["ref"]
    for key in ("auto", "supplied"):
        got = out[key]
        for k in ("G", "gamma", "phi", "Gqd", "imp"):
            assert_allclose(got[k], ref[k], rtol=1e-11, atol=1e-12, name=f"{key} {k}")
        for m in ("kkt", "range_space", "null_space"):
            if m in got:
                assert_allclose(got[m][0], ref["kkt"][0], rtol=1e-10, atol=1e-10,
                                name=f"{key} {m} qdd")
                assert_allclose(got[m][1], ref["kkt"][1], rtol=1e-10, atol=1e-10,
                                name=f"{key} {m} lam")
    assert_allclose(out["both"][1:], ref["G"], rtol=1e-12, name="combined rows")
    assert_allclose(out["both"][0], out["point"], rtol=1e-12, name="combined point row")


def test_custom_constraints_assemble_and_jit(pendulum_sets):
    """assemble_q / assemble_qd honour a custom constraint; the set works under jit and
    gradients flow through it."""
    model, (q, qd, _), _, _, _ = pendulum_sets
    height = ConstraintSet.custom(lambda m, x: _tip(m, x)[2:] + 2.5, 1)

    @jax.jit
    def assemble(q, qd):
        q1, ok = jaxrbd.assemble_q(model, q, height)
        qd1, ok_d = jaxrbd.assemble_qd(model, q1, qd, height)
        return q1, ok, ok_d, _tip(model, q1)[2]

    q1, ok, ok_d, z = assemble(q, qd)
    assert bool(ok) and bool(ok_d)
    assert_allclose(z, -2.5, atol=1e-9, name="assembled height")
    f = lambda x: jaxrbd.forward_dynamics_contacts(model, x, qd, jnp.zeros(model.nv), height)[1][0]
    eps = 1e-6
    dq = jnp.asarray(np.random.default_rng(2).normal(size=model.nv))

    @jax.jit
    def check(x):
        side = jax.vmap(f)(jnp.stack([x + eps * dq, x - eps * dq]))
        return jax.grad(f)(x) @ dq, (side[0] - side[1]) / (2 * eps)

    g, fd = check(q1)
    assert_allclose(g, fd, rtol=1e-5, name="grad through a custom constraint")


def test_custom_constraint_errors():
    model = _arm()
    q = jnp.zeros(model.nv)
    with pytest.raises(TypeError, match="callable"):
        ConstraintSet.custom(3.0, 1)
    with pytest.raises(ValueError, match="positive int"):
        ConstraintSet.custom(lambda m, x: x[:1], 0)
    # the checks run while tracing: under jit nothing is compiled before they raise
    bad = ConstraintSet.custom(lambda m, x: x[:2], 1)
    with pytest.raises(ValueError, match="function returned shape"):
        jax.jit(lambda x: jaxrbd.constraint_residual(model, x, bad))(q)
    bad_j = ConstraintSet.custom(lambda m, x: x[:1], 1,
                                 jacobian=lambda m, x: jnp.zeros((2, model.nv)))
    with pytest.raises(ValueError, match="jacobian returned shape"):
        jax.jit(lambda x: jaxrbd.constraint_jacobian(model, x, bad_j))(q)


# ----------------------------------------------------------------------------- ZMP


def _cart(mass=3.0):
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("cart", "world", joints.translation_xyz(), Body(mass, (0, 0, 0), np.eye(3) * 0.2))
    return b.build()


def test_zmp_cart_table_closed_form():
    """Cart-table / linear inverted pendulum: p = c - z c̈ / (g + z̈) (x and y)."""
    model = _cart()
    zmp = jax.jit(lambda q, qd, qdd, h: jaxrbd.zero_moment_point(
        model, q, qd, qdd, point=jnp.array([0.0, 0.0, h])))
    c = jnp.array([0.3, -0.1, 0.8])
    for acc in ([1.5, -0.7, 0.0], [0.4, 0.2, 2.0]):
        a = jnp.asarray(acc)
        p = zmp(c, jnp.array([0.2, 0.1, -0.3]), a, 0.0)
        want = c[:2] - c[2] * a[:2] / (9.81 + a[2])
        assert_allclose(p, jnp.r_[want, 0.0], rtol=1e-13, atol=1e-15, name="cart-table ZMP")
    # a raised contact plane: the table top at height h shortens the lever arm
    p = zmp(c, jnp.zeros(3), jnp.array([1.0, 0.0, 0.0]), 0.2)
    assert_allclose(p, [0.3 - 0.6 / 9.81, -0.1, 0.2], rtol=1e-13, name="raised plane")


def test_zmp_matches_centroidal_momentum_rate():
    """solo12 in motion: the ZMP from the momentum rate d/dt centroidal_momentum (by AD
    along the motion) and the centre of mass, on a tilted plane too."""
    model, _ = _solo()
    q, qd, rng = _solo_state(model, 8)
    qdd = jnp.asarray(rng.normal(size=model.nv))
    normal = jnp.array([0.1, -0.2, 1.0])
    point = jnp.array([0.05, 0.02, -0.9])

    @jax.jit
    def run(q, qd, qdd):
        h = lambda s: jaxrbd.centroidal_momentum(
            model, jaxrbd.integrate(model, q, s * qd), qd + s * qdd)
        _, hdot = jax.jvp(h, (0.0,), (1.0,))
        c = jaxrbd.center_of_mass(model, q)
        return (jaxrbd.zero_moment_point(model, q, qd, qdd),
                jaxrbd.zero_moment_point(model, q, qd, qdd, normal=normal, point=point),
                hdot, c, jaxrbd.total_mass(model))

    p, p_tilt, hdot, c, mass = run(q, qd, qdd)
    g = model.gravity
    f = hdot[3:] - mass * g  # contact force

    def moment_about(x):  # contact moment about x: d/dt angular momentum about x minus gravity
        return hdot[:3] + jnp.cross(c - x, hdot[3:]) - jnp.cross(c - x, mass * g)

    n = normal / jnp.linalg.norm(normal)
    for x, nn, a, name in ((p, jnp.array([0.0, 0.0, 1.0]), jnp.zeros(3), "flat"),
                           (p_tilt, n, point, "tilted")):
        assert abs(float(jnp.dot(nn, x - a))) < 1e-12, name
        m_x = moment_about(x)
        tangential = m_x - jnp.dot(m_x, nn) * nn
        assert float(jnp.linalg.norm(tangential)) < 1e-9 * float(jnp.linalg.norm(f)), name
    with pytest.raises(ValueError, match="normal has shape"):
        jax.jit(lambda x: jaxrbd.zero_moment_point(model, x, qd, qdd, normal=(0.0, 1.0)))(q)
