"""Real robot files load: lenient inertias, armature, passive forces, coupled (mimic) joints.

Oracles: Pinocchio (``pin``, with ``mimic=True`` where it supports the file) and the full
tree reduced by hand (``H = Aᵀ H_full A``), AD and finite differences.
"""

from __future__ import annotations

import pathlib
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ZOO, assert_allclose, random_state, random_tree

import jaxrbd
from jaxrbd import Body, ModelBuilder, joints

DATA = pathlib.Path(__file__).parent / "data"
MIMIC = DATA / "gripper_mimic.urdf"
INCONSISTENT = DATA / "inconsistent_inertia.urdf"


# ---------------------------------------------------------------- lenient inertias


def test_inconsistent_inertias_warn_once_naming_every_body():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = jaxrbd.load_urdf(INCONSISTENT)
    msgs = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(msgs) == 1, msgs
    assert "'camera'" in msgs[0] and "triangle inequality" in msgs[0] and "0.5 %" in msgs[0]
    assert "'antenna'" in msgs[0] and "-3.5e-08" in msgs[0]
    assert model.nv == 2  # <transmission>, <gazebo> and a link without <inertial> are fine


def test_inertia_check_error_and_ignore():
    with pytest.raises(ValueError, match=r"'camera'.*triangle inequality"):
        jaxrbd.load_urdf(INCONSISTENT, inertia_check="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jaxrbd.load_urdf(INCONSISTENT, inertia_check="ignore")
    with pytest.raises(ValueError, match="inertia_check='strict'"):
        jaxrbd.load_urdf(INCONSISTENT, inertia_check="strict")


def test_builder_inertia_check_keeps_hard_errors():
    bad = np.diag([1.0, 1.0, 3.0])
    b = ModelBuilder()
    b.add_body("a", "world", joints.revolute(), Body(1.0, inertia=bad))
    with pytest.warns(UserWarning, match=r"'a'.*triangle inequality.*33.3 %"):
        b.build()
    with pytest.raises(ValueError, match="'a'.*triangle"):
        ModelBuilder(inertia_check="error").add_body("a", "world", joints.revolute(),
                                                     Body(1.0, inertia=bad))
    for body, match in (
        (Body(-1.0), "negative mass"),
        (Body(1.0, inertia=[[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]), "not symmetric"),
        (Body(np.nan), "not finite"),
        (Body(1.0, inertia=np.eye(3) * np.inf), "finite"),
    ):
        with pytest.raises(ValueError, match=match):
            ModelBuilder(inertia_check="ignore").add_body("a", "world", joints.revolute(), body)


# ---------------------------------------------------------------- armature


@pytest.fixture(scope="module")
def geared():
    """The mixed tree (free, spherical, revolute, fixed, Euler) with armature on every DoF."""
    base = ZOO["mixed"]
    arm = jnp.asarray(np.random.default_rng(1).uniform(0.05, 0.5, base.nv))
    return base, eqx.tree_at(lambda m: m.armature, base, arm)


def test_armature_enters_every_algorithm(geared):
    base, m = geared
    arm = m.armature
    q, qd, qdd, tau = random_state(m, jax.random.key(3))
    H = jaxrbd.mass_matrix(m, q)
    assert_allclose(H, jaxrbd.mass_matrix(base, q) + jnp.diag(arm), rtol=1e-13, name="H")
    assert_allclose(jaxrbd.inverse_dynamics(m, q, qd, qdd),
                    jaxrbd.inverse_dynamics(base, q, qd, qdd) + arm * qdd, rtol=1e-12, name="ID")
    a = jaxrbd.forward_dynamics(m, q, qd, tau)
    assert_allclose(a, jaxrbd.forward_dynamics(m, q, qd, tau, method="crba"), rtol=1e-10,
                    name="ABA vs CRBA")
    assert_allclose(jaxrbd.inverse_dynamics(m, q, qd, a), tau, atol=1e-11, name="ID(FD)")
    assert_allclose(H @ jaxrbd.minv_times(m, q, tau), tau, atol=1e-11, name="minv_times")
    qdd_h, tau_h = jaxrbd.hybrid_dynamics(m, q, qd, tau, qdd, prescribed=["j3", "j5"])
    assert_allclose(jaxrbd.inverse_dynamics(m, q, qd, qdd_h), tau_h, atol=1e-11, name="hybrid")
    # batched path (vmap runs the batch-trailing kernels)
    A = jax.vmap(lambda q: jaxrbd.forward_dynamics(m, q, qd, tau))(jnp.stack([q, q]))
    assert_allclose(A[1], a, rtol=1e-11, name="vmap FD")


def test_armature_derivatives_regressor_and_contacts(geared):
    _, m = geared
    q, qd, qdd, tau = random_state(m, jax.random.key(4))
    dq, dv, Minv = jaxrbd.forward_dynamics_derivatives(m, q, qd, tau)
    H = jaxrbd.mass_matrix(m, q)
    assert_allclose(Minv, jnp.linalg.inv(H), rtol=1e-9, name="Minv")
    # transforms of public calls run jitted: eagerly, every primitive compiles on its own
    J = jax.jit(jax.jacfwd(lambda v: jaxrbd.forward_dynamics(m, q, v, tau)))(qd)
    assert_allclose(dv, J, rtol=1e-9, atol=1e-10, name="dqdd/dqd")
    assert_allclose(jaxrbd.inverse_dynamics_derivatives(m, q, qd, qdd)[2], H, rtol=1e-12,
                    name="dtau/dqdd")
    Y = jaxrbd.inverse_dynamics_regressor(m, q, qd, qdd, armature=True)
    pi = jnp.concatenate([jaxrbd.inertial_parameters(m).ravel(), m.armature])
    assert_allclose(Y @ pi, jaxrbd.inverse_dynamics(m, q, qd, qdd), atol=1e-10, name="regressor")
    # gradient with respect to the armature: d qdd / d arm = -H^-1 diag(qdd)
    g = jax.jit(jax.jacfwd(lambda arm: jaxrbd.forward_dynamics(
        eqx.tree_at(lambda mm: mm.armature, m, arm), q, qd, tau)))(m.armature)
    a = jaxrbd.forward_dynamics(m, q, qd, tau)
    assert_allclose(g, -jnp.linalg.solve(H, jnp.diag(a)), rtol=1e-9, atol=1e-11, name="d/darm")
    cs = jaxrbd.ConstraintSet.contacts_3d([("b3", [0.1, 0.0, 0.0])])
    qdd_c, lam = jaxrbd.forward_dynamics_contacts(m, q, qd, tau, cs)
    G = jaxrbd.constraint_jacobian(m, q, cs)
    C = jaxrbd.bias_forces(m, q, qd)
    assert_allclose(H @ qdd_c + C, tau + G.T @ lam, atol=1e-10, name="contact dynamics")


def test_rotor_inertia_and_gear_ratio():
    b = ModelBuilder()
    b.add_body("a", "world", joints.revolute(), Body(1.0, inertia=np.eye(3) * 0.1),
               rotor_inertia=2e-5, gear_ratio=100.0)
    m = b.build()
    assert_allclose(m.armature, jnp.array([0.2]), rtol=1e-14)
    assert_allclose(jaxrbd.mass_matrix(m, jnp.zeros(1)), jnp.array([[0.3]]), rtol=1e-14)
    with pytest.raises(ValueError, match="not both"):
        ModelBuilder().add_body("a", "world", joints.revolute(), armature=1.0, gear_ratio=2.0,
                                rotor_inertia=1.0)
    with pytest.raises(ValueError, match="armature must be >= 0"):
        ModelBuilder().add_body("a", "world", joints.revolute(), armature=-1.0)
    with pytest.raises(ValueError, match="fixed joint"):
        ModelBuilder().add_body("a", "world", joints.fixed(), armature=1.0)


def test_armature_against_pinocchio():
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (pin) is the armature oracle")
    model = jaxrbd.load_urdf(DATA / "panda.urdf")
    arm = np.linspace(0.1, 0.4, model.nv)
    m = eqx.tree_at(lambda mm: mm.armature, model, jnp.asarray(arm))
    pm = pin.buildModelFromUrdf(str(DATA / "panda.urdf"))
    pm.armature = arm[np.argsort([pm.getJointId(n) for n in model.joint_names])]
    pd = pm.createData()
    order = np.array([pm.joints[pm.getJointId(n)].idx_v for n in model.joint_names])
    q, qd, qdd, tau = (np.asarray(x) for x in random_state(m, jax.random.key(5)))
    qp = np.zeros(pm.nq)
    qp[order] = q
    vp, ap, tp = (np.zeros(pm.nv) for _ in range(3))
    vp[order], ap[order], tp[order] = qd, qdd, tau
    pm.armature = np.zeros(pm.nv)
    pm.armature[order] = arm
    M = pin.crba(pm, pd, qp)
    M = np.triu(M) + np.triu(M, 1).T
    assert_allclose(jaxrbd.mass_matrix(m, q), M[np.ix_(order, order)], rtol=1e-12, name="H")
    assert_allclose(jaxrbd.inverse_dynamics(m, q, qd, qdd),
                    pin.rnea(pm, pd, qp, vp, ap)[order], rtol=1e-12, name="RNEA")
    assert_allclose(jaxrbd.forward_dynamics(m, q, qd, tau),
                    pin.aba(pm, pd, qp, vp, tp)[order], rtol=1e-10, name="ABA")


# ---------------------------------------------------------------- passive forces


def test_passive_forces_from_the_model():
    m = random_tree(7, 3, kinds=["revolute", "spherical", "prismatic"], parents=[0, 1, 2])
    rng = np.random.default_rng(2)
    damping, friction, stiffness = (jnp.asarray(rng.uniform(0.1, 1.0, m.nv)) for _ in range(3))
    ref = jaxrbd.random_configuration(m, jax.random.key(8))
    m = eqx.tree_at(lambda mm: (mm.damping, mm.friction, mm.stiffness, mm.spring_reference),
                    m, (damping, friction, stiffness, ref))
    (element,) = jaxrbd.passive_forces(m, smoothing=0.05)
    q, qd, _, _ = random_state(m, jax.random.key(9))
    d = jaxrbd.difference(m, ref, q)
    expected = -stiffness * d - damping * qd - friction * jnp.tanh(qd / 0.05)
    assert_allclose(jaxrbd.generalized_forces([element], m, q, qd), expected, rtol=1e-13)
    # the spring is conservative: its force is minus the gradient of its energy along q ⊕ δ
    grad = jax.jit(jax.grad(lambda dlt: element.potential_energy(m, jaxrbd.integrate(m, q, dlt))))(
        jnp.zeros(m.nv))
    spring = element(m, q, jnp.zeros(m.nv)) * 1.0
    one_dof = jnp.array([0, 4])
    assert_allclose(grad[one_dof], -spring[one_dof], rtol=1e-10, name="1-DoF springs")
    assert jaxrbd.passive_forces(jaxrbd.models.triple_pendulum()) == ()
    # the URDF <dynamics> damping reaches the element
    urdf = jaxrbd.load_urdf(MIMIC, mimic="independent")
    tau = jaxrbd.generalized_forces(jaxrbd.passive_forces(urdf), urdf, jnp.zeros(urdf.nq),
                                    jnp.ones(urdf.nv))
    assert float(tau[urdf.v_index("elbow")][0]) == pytest.approx(-0.5 - 0.1 * np.tanh(100.0))


# ---------------------------------------------------------------- coupled (mimic) joints


@pytest.fixture(scope="module")
def gripper():
    cm = jaxrbd.load_urdf(MIMIC)
    full = jaxrbd.load_urdf(MIMIC, mimic="independent")
    return cm, full


def _A(cm, full):
    """The velocity map of the coupled model, built independently from the URDF's laws."""
    A = np.zeros((full.nv, cm.nv))
    for k, name in enumerate(cm.joint_names):
        A[full.v_index(name).start, k] = 1.0
    laws = {"finger_right_joint": -1.0, "tip_left_joint": 10.0, "tip_right_joint": 8.0}
    for name, a in laws.items():
        A[full.v_index(name).start, cm.v_index("finger_left_joint").start] = a
    return A


def test_mimic_loads_as_coupled_by_default(gripper):
    cm, full = gripper
    assert isinstance(cm, jaxrbd.CoupledModel)
    assert (cm.nq, cm.nv, full.nq, full.nv) == (3, 3, 6, 6)
    assert cm.joint_names == ("shoulder", "elbow", "finger_left_joint")
    assert "coupled = -1 * 'finger_left_joint' + 0.005" in cm.summary()
    with pytest.raises(ValueError, match=r"joint 'finger_right_joint': <mimic>.*unsupported"):
        jaxrbd.load_urdf(MIMIC, mimic="error")


def test_mimic_dynamics_are_the_reduced_full_tree(gripper):
    cm, full = gripper
    A = _A(cm, full)
    q, qd, qdd, tau = random_state(cm, jax.random.key(11))
    qf = np.zeros(full.nq)
    for name in cm.joint_names:
        qf[full.q_index(name)] = q[cm.q_index(name)]
    qf = qf + A @ np.zeros(cm.nv)
    qf[full.q_index("finger_right_joint")] = -q[2] + 0.005
    qf[full.q_index("tip_left_joint")] = 10 * q[2] - 0.1
    qf[full.q_index("tip_right_joint")] = 8 * q[2] + 0.01
    Hf = np.asarray(jaxrbd.mass_matrix(full, qf))
    H = jaxrbd.mass_matrix(cm, q)
    assert_allclose(H, A.T @ Hf @ A, rtol=1e-13, name="H")
    tau_f = jaxrbd.inverse_dynamics(full, qf, A @ qd, A @ qdd)
    assert_allclose(jaxrbd.inverse_dynamics(cm, q, qd, qdd), A.T @ tau_f, rtol=1e-12, name="ID")
    a = jaxrbd.forward_dynamics(cm, q, qd, tau)
    assert_allclose(H @ a + jaxrbd.bias_forces(cm, q, qd), tau, atol=1e-11, name="FD")
    assert_allclose(jaxrbd.gravity_forces(cm, q), A.T @ jaxrbd.gravity_forces(full, qf),
                    rtol=1e-12, name="g")
    # kinematics follow the coupled joints; Jacobians are J_full A
    assert_allclose(jaxrbd.forward_kinematics(cm, q)[1], jaxrbd.forward_kinematics(full, qf)[1],
                    rtol=1e-14, name="FK")
    Jf = jaxrbd.point_jacobian(full, qf, "tip_right", jnp.array([0.0, 0.0, 0.03]))
    J = jaxrbd.point_jacobian(cm, q, "tip_right", jnp.array([0.0, 0.0, 0.03]))
    assert_allclose(J, Jf @ A, rtol=1e-13, name="J")
    v = jaxrbd.point_velocity(cm, q, qd, "tip_right", jnp.array([0.0, 0.0, 0.03]))
    assert_allclose(v, J @ qd, rtol=1e-12, name="point velocity")
    assert_allclose(jaxrbd.kinetic_energy(cm, q, qd), 0.5 * qd @ H @ qd, rtol=1e-12, name="T")
    # the coupled joints really have no coordinate: integrate keeps the law
    q1 = jaxrbd.integrate(cm, q, qd, 0.1)
    assert_allclose(q1, q + 0.1 * qd, rtol=1e-14, name="integrate")
    assert_allclose(jaxrbd.difference(cm, q, q1), 0.1 * qd, rtol=1e-12, name="difference")


def test_mimic_against_pinocchio(gripper):
    pin = pytest.importorskip("pinocchio", reason="Pinocchio (pin >= 3.4) is the mimic oracle")
    cm, _ = gripper
    pm = pin.buildModelFromUrdf(str(MIMIC), mimic=True)
    assert pm.nv == cm.nv
    order = np.array([pm.joints[pm.getJointId(n)].idx_v for n in cm.joint_names])
    q, qd, qdd, tau = (np.asarray(x) for x in random_state(cm, jax.random.key(12)))
    vp, ap, tp = (np.zeros(pm.nv) for _ in range(3))
    vp[order], ap[order], tp[order] = qd, qdd, tau
    qp = np.zeros(pm.nq)
    for k, name in enumerate(cm.joint_names):  # Pinocchio's continuous joints: (cos, sin)
        j = pm.joints[pm.getJointId(name)]
        qp[j.idx_q:j.idx_q + j.nq] = [np.cos(q[k]), np.sin(q[k])] if j.nq == 2 else [q[k]]
    pd = pm.createData()
    M = pin.crba(pm, pd, qp)
    M = np.triu(M) + np.triu(M, 1).T
    assert_allclose(jaxrbd.mass_matrix(cm, q), M[np.ix_(order, order)], rtol=1e-12, name="H")
    assert_allclose(jaxrbd.inverse_dynamics(cm, q, qd, qdd),
                    pin.rnea(pm, pd, qp, vp, ap)[order], rtol=1e-12, name="RNEA")
    # Pinocchio's ABA refuses mimic joints: forward dynamics against its CRBA solve
    C = pin.rnea(pm, pd, qp, vp, np.zeros(pm.nv))
    assert_allclose(jaxrbd.forward_dynamics(cm, q, qd, tau),
                    np.linalg.solve(M, tp - C)[order], rtol=1e-10, name="FD")


def test_mimic_jit_vmap_grad_derivatives_and_contacts(gripper):
    cm, _ = gripper
    q, qd, qdd, tau = random_state(cm, jax.random.key(13))
    fd = jax.jit(jaxrbd.forward_dynamics)
    a = fd(cm, q, qd, tau)
    A = jax.vmap(lambda q: fd(cm, q, qd, tau))(jnp.stack([q, q]))
    assert_allclose(A[0], a, rtol=1e-12, name="vmap")
    two = lambda x: jnp.stack([x, x])  # noqa: E731
    assert_allclose(jaxrbd.batched.forward_dynamics(cm, two(q), two(qd), two(tau))[1], a,
                    rtol=1e-12, name="batched")
    assert jaxrbd.batched.mass_matrix(cm, two(q)).shape == (2, cm.nv, cm.nv)
    dq, dv, Minv = jaxrbd.forward_dynamics_derivatives(cm, q, qd, tau)
    eps = 1e-6
    e = jnp.eye(cm.nv)[1]
    num = (fd(cm, q + eps * e, qd, tau) - fd(cm, q - eps * e, qd, tau)) / (2 * eps)
    assert_allclose(dq[:, 1], num, rtol=1e-6, atol=1e-7, name="dqdd/dq")
    assert_allclose(Minv @ jaxrbd.mass_matrix(cm, q), jnp.eye(cm.nv), atol=1e-10, name="Minv")
    g = jax.grad(lambda t: jnp.sum(fd(cm, q, qd, t) ** 2))(tau)
    assert bool(jnp.all(jnp.isfinite(g)))
    # a contact at the right fingertip, solved on the coupled coordinates
    cs = jaxrbd.ConstraintSet.points([("tip_right", [0.0, 0.0, 0.03], [0.0, 0.0, 1.0])])
    qdd_c, lam = jaxrbd.forward_dynamics_contacts(cm, q, qd, tau, cs)
    G = jaxrbd.constraint_jacobian(cm, q, cs)
    assert G.shape == (1, cm.nv)
    assert_allclose(G @ qdd_c, jaxrbd.constraint_bias(cm, q, qd, cs), atol=1e-10, name="G qdd")
    H, C = jaxrbd.mass_matrix(cm, q), jaxrbd.bias_forces(cm, q, qd)
    assert_allclose(H @ qdd_c + C, tau + G.T @ lam, atol=1e-10, name="contact dynamics")
    # a rollout runs on the coupled coordinates
    qs, _ = jaxrbd.rollout(cm, q, qd, jnp.zeros((5, cm.nv)), 0.01)
    assert qs.shape[-1] == cm.nq and bool(jnp.all(jnp.isfinite(qs)))


def test_mimic_hybrid_dynamics_and_parameter_derivatives(gripper):
    cm, _ = gripper
    q, qd, qdd, tau = random_state(cm, jax.random.key(14))
    hd = jax.jit(jaxrbd.hybrid_dynamics, static_argnames="prescribed")
    qdd_h, tau_h = hd(cm, q, qd, tau, qdd, prescribed=("elbow",))
    k = cm.v_index("elbow").start
    free = np.array([i for i in range(cm.nv) if i != k])
    assert_allclose(qdd_h[k], qdd[k], rtol=1e-15, name="prescribed qdd")
    assert_allclose(tau_h[free], tau[free], rtol=1e-15, name="given tau")
    assert_allclose(jaxrbd.inverse_dynamics(cm, q, qd, qdd_h), tau_h, atol=1e-11, name="hybrid")
    with pytest.raises(ValueError, match="'finger_right_joint' is coupled.*prescribe its driver"):
        jaxrbd.hybrid_dynamics(cm, q, qd, tau, qdd, prescribed=("finger_right_joint",))
    # d qdd / d inertia against automatic differentiation of the coupled forward dynamics
    J = jaxrbd.forward_dynamics_parameter_derivatives(cm, q, qd, tau)

    def fd_of(inertia):
        return jaxrbd.forward_dynamics(
            eqx.tree_at(lambda c: c.base.inertia, cm, inertia), q, qd, tau)

    J_ad = jax.jit(jax.jacfwd(fd_of))(cm.base.inertia).reshape(cm.nv, -1)
    assert_allclose(J, J_ad, rtol=1e-10, atol=1e-12, name="d qdd / d inertia")


def test_couple_builder_chains_and_errors():
    chain = jaxrbd.models.chain(4)
    cm = jaxrbd.couple(chain, {"link3": ("link2", 2.0, 0.1), "link2": ("link0", -1.0, 0.2)})
    assert cm.joint_names == ("link0", "link1")
    # link3 = 2 (-q0 + 0.2) + 0.1
    assert cm.driver_joints == ("link0", "link0")
    assert_allclose(cm.multiplier, jnp.array([-1.0, -2.0]), rtol=1e-15)
    assert_allclose(cm.offset, jnp.array([0.2, 0.5]), rtol=1e-15)
    with pytest.raises(ValueError, match="cycle"):
        jaxrbd.couple(chain, {"link1": ("link2", 1.0, 0.0), "link2": ("link1", 1.0, 0.0)})
    with pytest.raises(ValueError, match="unknown coupled joint 'nope'"):
        jaxrbd.couple(chain, {"nope": ("link0", 1.0, 0.0)})
    free = random_tree(1, 2, kinds=["free", "revolute"], parents=[0, 1])
    with pytest.raises(ValueError, match="driver joint 'j1' has nq = 7"):
        jaxrbd.couple(free, {"j2": ("j1", 1.0, 0.0)})
    with pytest.raises(ValueError, match="inverse_kinematics does not take a CoupledModel"):
        jaxrbd.inverse_kinematics(cm, jnp.zeros(cm.nq), [])


REAL_MIMIC = ("talos_data/robots/talos_full_v2.urdf", "tiago_pro_description/robots/tiago_pro.urdf")


@pytest.mark.parametrize("relpath", REAL_MIMIC)
def test_real_mimic_robots_match_pinocchio(relpath):
    """Talos' full URDF and TIAGo Pro from example-robot-data: H and RNEA of the coupled
    model equal Pinocchio's full tree reduced by the mimic laws (Pinocchio 4.1 cannot build
    Talos with ``mimic=True``: its mimicked gripper joint comes after the mimic joints in
    Pinocchio's alphabetical order), and Pinocchio's own mimic model where it loads."""
    pin = pytest.importorskip("pinocchio", reason="Pinocchio is the oracle")
    erd = pathlib.Path(pin.__file__).parents[4] / "share" / "example-robot-data" / "robots"
    path = erd / relpath
    if not path.exists():
        pytest.skip(f"example-robot-data not installed ({path} missing)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = jaxrbd.load_urdf(path)
        full = jaxrbd.load_urdf(path, mimic="independent")
    assert isinstance(cm, jaxrbd.CoupledModel) and len(cm.coupled_joints) >= 6
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    q, qd, qdd, _ = random_state(cm, jax.random.key(14))
    from jaxrbd._coupling import expand_q, expand_v

    qf, vf, af = (np.asarray(x) for x in (expand_q(cm, q), expand_v(cm, qd), expand_v(cm, qdd)))
    qp, vp, ap = np.zeros(pm.nq), np.zeros(pm.nv), np.zeros(pm.nv)
    order = []
    for name in full.joint_names:
        j = pm.joints[pm.getJointId(name)]
        x = qf[full.q_index(name)][0]
        qp[j.idx_q:j.idx_q + j.nq] = [np.cos(x), np.sin(x)] if j.nq == 2 else [x]
        vp[j.idx_v], ap[j.idx_v] = vf[full.v_index(name)][0], af[full.v_index(name)][0]
        order.append(j.idx_v)
    M = pin.crba(pm, pd, qp)
    M = np.triu(M) + np.triu(M, 1).T
    assert_allclose(jaxrbd.mass_matrix(full, qf), M[np.ix_(order, order)], rtol=1e-12, name="H_full")
    tau_full = pin.rnea(pm, pd, qp, vp, ap)[order]
    from jaxrbd._coupling import reduce_forces

    assert_allclose(jaxrbd.inverse_dynamics(cm, q, qd, qdd), reduce_forces(cm, jnp.asarray(tau_full)),
                    rtol=1e-11, name="RNEA")
