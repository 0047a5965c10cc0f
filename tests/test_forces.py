"""Force elements (issue 5 item 2, MBSlib's generators): values against hand-computed
forces, the polyline spring-damper against its potential and its dissipation, gradients
with respect to the element constants, transforms, errors, and energy behaviour of a
humanoid rollout with springs and dampers.

Models are small (a 3-link chain, a 4-body tree with a ball joint, the 5-body mixed tree)
except the energy test, which needs a humanoid. Functions evaluated on many states are
jitted once per structure and shared through module-level caches.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ZOO, assert_allclose, quaternion_blocks, random_tree

import jaxrbd
from jaxrbd import (
    JointDamper,
    JointFriction,
    JointSpring,
    PointToPointSpringDamper,
    SpringDamperDrive,
    UserForce,
)

CHAIN = jaxrbd.models.chain(3)  # revolute y, x, y; joints "link0".."link2"; links 0.1 m
CHAIN2 = jaxrbd.models.chain(2)


@functools.cache
def ball_tree():
    """Spherical root then prismatic, helical and one-column custom joints: the 1-DoF
    joints' q indices (4, 5, 6) differ from their v indices (3, 4, 5)."""
    return random_tree(
        11, 4, kinds=["spherical", "prismatic", "helical", "custom"], parents=[0, 1, 2, 1],
        custom_cols=[1, 1, 1, 1],
    )


def random_states(model, seed, n=4):
    """``n`` random ``(q, qd)`` stacked, `(n, nq)` and `(n, nv)`, uniform in [-1, 1] with
    unit quaternions (numpy: nothing to compile)."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.0, 1.0, (n, model.nq))
    for block in quaternion_blocks(model):
        q[:, block] /= np.linalg.norm(q[:, block], axis=1, keepdims=True)
    return jnp.asarray(q), jnp.asarray(rng.uniform(-1.0, 1.0, (n, model.nv)))


@functools.cache
def jit_forces():
    """``generalized_forces`` with the elements as a traced argument (one compile per
    element structure and model)."""
    return jax.jit(jaxrbd.generalized_forces)


# ----------------------------------------------------------------------------- joint elements


def test_joint_spring_values_energy_and_duplicates():
    spring = JointSpring(["link0", 2, "link0"], stiffness=[10.0, 20.0, 5.0], rest=[0.1, -0.2, 0.0])
    q = np.array([0.4, -0.3, 0.5])
    expected = np.array([-10.0 * (0.4 - 0.1) - 5.0 * 0.4, 0.0, -20.0 * (0.5 + 0.2)])
    assert_allclose(spring(CHAIN, q, np.zeros(3)), expected, rtol=1e-14, name="spring")
    energy = 0.5 * (10.0 * 0.3**2 + 20.0 * 0.7**2 + 5.0 * 0.4**2)
    assert_allclose(spring.potential_energy(CHAIN, q), energy, rtol=1e-14, name="energy")
    # its force is minus the gradient of its energy
    grad = jax.grad(lambda x: spring.potential_energy(CHAIN, x))(jnp.asarray(q))
    assert_allclose(grad, -expected, rtol=1e-14, name="dV/dq")


def test_one_dof_joints_of_every_kind_use_their_q_and_v_slots():
    model = ball_tree()
    joints = ["j2", "j3", "j4"]  # prismatic, helical, one-column custom
    (q,), (qd,) = random_states(model, 0, n=1)
    k, d, r = np.array([3.0, 4.0, 5.0]), np.array([0.3, 0.4, 0.5]), np.array([0.1, 0.2, 0.3])
    elements = [JointSpring(joints, k, r), JointDamper(joints, d)]
    out = jit_forces()(elements, model, q, qd)
    expected = np.zeros(model.nv)
    expected[3:6] = -k * (np.asarray(q)[4:7] - r) - d * np.asarray(qd)[3:6]
    assert_allclose(out, expected, rtol=1e-14, name="ball tree springs")


def test_joint_damper_and_friction_values():
    qd = np.array([0.7, -0.002, 3.0])
    damper = JointDamper([0, 1], damping=[0.5, 2.0])
    assert_allclose(damper(CHAIN, np.zeros(3), qd), [-0.35, 0.004, 0.0], rtol=1e-14, name="d")
    assert float(damper.potential_energy(CHAIN, np.zeros(3))) == 0.0
    friction = JointFriction(["link0", "link1", "link2"], viscous=0.1, coulomb=[1.0, 2.0, 3.0],
                             smoothing=0.01)
    expected = -0.1 * qd - np.array([1.0, 2.0, 3.0]) * np.tanh(qd / 0.01)
    assert_allclose(friction(CHAIN, np.zeros(3), qd), expected, rtol=1e-14, name="friction")
    # smooth through zero velocity: the slope there is viscous + coulomb / eps
    slope = jax.jacfwd(lambda v: friction(CHAIN, jnp.zeros(3), v))(jnp.zeros(3))
    assert_allclose(jnp.diag(slope), -(0.1 + np.array([1.0, 2.0, 3.0]) / 0.01), rtol=1e-14,
                    name="friction slope")


def test_spring_damper_drive_references():
    q, qd = np.array([0.2, -0.1, 0.3]), np.array([0.5, 1.5, -1.0])
    k, d = np.array([100.0, 50.0]), np.array([2.0, 1.0])
    # passive drive (MBSlib's PassiveSpringDamperDrive): reference 0
    passive = SpringDamperDrive(["link0", "link2"], k, d)
    expected = np.array([-100.0 * 0.2 - 2.0 * 0.5, 0.0, -50.0 * 0.3 + 1.0])
    assert_allclose(passive(CHAIN, q, qd), expected, rtol=1e-14, name="passive")
    # constant reference and reference velocity
    const = SpringDamperDrive(["link0", "link2"], k, d, reference=[0.5, -0.5],
                              reference_velocity=0.25)
    expected = np.array([100.0 * 0.3 + 2.0 * (0.25 - 0.5), 0.0, 50.0 * -0.8 + 1.0 * 1.25])
    assert_allclose(const(CHAIN, q, qd), expected, rtol=1e-14, name="constant reference")
    # a time function: its velocity comes from forward-mode differentiation
    A, w, t = np.array([0.3, 0.7]), 2.0, 0.4
    moving = SpringDamperDrive(["link0", "link2"], k, d, reference=lambda s: A * jnp.sin(w * s))
    r, rd = A * np.sin(w * t), A * w * np.cos(w * t)
    expected = np.array([k[0] * (r[0] - 0.2) + d[0] * (rd[0] - 0.5), 0.0,
                         k[1] * (r[1] - 0.3) + d[1] * (rd[1] + 1.0)])
    assert_allclose(moving(CHAIN, q, qd, t), expected, rtol=1e-13, name="sinusoidal reference")
    motor = moving.motor(CHAIN, t)
    assert_allclose(motor[0], r, rtol=1e-14, name="r(t)")
    assert_allclose(motor[1], rd, rtol=1e-14, name="dr/dt")
    elastic = 0.5 * np.sum(k * (np.array([0.2, 0.3]) - r) ** 2)
    assert_allclose(moving.potential_energy(CHAIN, q, t), elastic, rtol=1e-14, name="energy")
    # an explicit velocity function wins over differentiation
    explicit = SpringDamperDrive(["link0", "link2"], k, d, reference=lambda s: A * jnp.sin(w * s),
                                 reference_velocity=lambda s: jnp.zeros(2))
    assert_allclose(explicit.motor(CHAIN, t)[1], np.zeros(2), name="explicit velocity")


def test_drive_reference_as_differentiable_pytree():
    """A `jax.tree_util.Partial` reference keeps its amplitude as a leaf: the gradient
    of the torque with respect to it matches the closed form and central differences."""

    def reference(amplitude, t):
        return amplitude * jnp.sin(3.0 * t)

    def torque(amplitude, t=0.3):
        drive = SpringDamperDrive("link1", 40.0, 0.5,
                                  reference=jax.tree_util.Partial(reference, amplitude))
        return drive(CHAIN, jnp.zeros(3), jnp.zeros(3), t)[1]

    g = jax.grad(torque)(jnp.asarray(0.2))
    exact = 40.0 * np.sin(0.9) + 0.5 * 3.0 * np.cos(0.9)
    assert_allclose(g, exact, rtol=1e-14, name="d tau / d amplitude")
    eps = 1e-6
    fd = (torque(jnp.asarray(0.2 + eps)) - torque(jnp.asarray(0.2 - eps))) / (2 * eps)
    assert_allclose(g, fd, rtol=1e-8, name="fd")


# ----------------------------------------------------------------------------- polyline spring


def _rot(axis, angle):
    c, s = np.cos(angle), np.sin(angle)
    if axis == "y":
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


@functools.cache
def band_summary():
    """``(tau, length, tension, energy)`` of a polyline element, jitted once per structure."""

    @jax.jit
    def summary(band, model, q, qd):
        return band(model, q, qd), band.length(model, q), band.tension(model, q, qd), \
            band.potential_energy(model, q)

    return summary


def test_point_to_point_hand_computed_on_chain():
    """A band from a world anchor over a via point on link0 to a point on link1 of the
    chain (joints about world y through the origin, then about link0's x at z = -0.1),
    against forces and Jacobians worked out by hand."""
    anchor, via = np.array([0.15, 0.05, 0.0]), np.array([0.02, 0.0, -0.05])
    tip = np.array([0.0, 0.03, -0.08])
    k, d, L0 = 300.0, 4.0, 0.12
    band = PointToPointSpringDamper(
        [("world", anchor), ("link0", via), ("link1", tip)], k, d, L0)
    q, qd = np.array([0.6, -0.9]), np.array([1.3, -0.4])
    # forward kinematics by hand
    R0 = _rot("y", q[0])
    R1 = R0 @ _rot("x", q[1])
    o1 = R0 @ np.array([0.0, 0.0, -0.1])
    P = np.stack([anchor, R0 @ via, o1 + R1 @ tip])
    a0, a1 = np.array([0.0, 1.0, 0.0]), R0 @ np.array([1.0, 0.0, 0.0])
    J = np.zeros((3, 3, 2))
    J[1, :, 0] = np.cross(a0, P[1])
    J[2, :, 0] = np.cross(a0, P[2])
    J[2, :, 1] = np.cross(a1, P[2] - o1)
    seg = P[1:] - P[:-1]
    lengths = np.linalg.norm(seg, axis=1)
    u = seg / lengths[:, None]
    L = lengths.sum()
    Ld = sum(u[i] @ ((J[i + 1] - J[i]) @ qd) for i in range(2))
    T = k * (L - L0) + d * Ld
    # the tension pulls every point towards its neighbours along the segments
    point_forces = np.zeros((3, 3))
    point_forces[:-1] += T * u
    point_forces[1:] -= T * u
    expected = sum(J[i].T @ point_forces[i] for i in range(3))
    tau, length, tension, energy = band_summary()(band, CHAIN2, q, qd)
    assert_allclose(tau, expected, rtol=1e-13, name="band torques")
    assert_allclose(length, L, rtol=1e-14, name="length")
    assert_allclose(tension, T, rtol=1e-13, name="tension")
    assert_allclose(energy, 0.5 * k * (L - L0) ** 2, rtol=1e-13, name="energy")


@functools.cache
def mixed_band():
    """A band on the mixed tree: world anchor, the free base, the ball-jointed body, a
    fixed-merged body and the Euler-jointed body."""
    pts = [("world", [0.3, -0.2, 0.5]), ("b1", [0.1, 0.05, -0.1]), ("b2", [0.0, 0.1, 0.2]),
           ("b4", [0.05, 0.0, 0.1]), ("b5", [-0.1, 0.2, 0.0])]
    return PointToPointSpringDamper([(b, np.asarray(p)) for b, p in pts], 120.0, 3.0, 0.4)


@functools.cache
def mixed_band_check():
    model = ZOO["mixed"]

    @jax.jit
    def check(band, q, qd):
        # -dV/dq in the tangent space (through integrate, so the quaternions stay unit)
        grad = jax.grad(lambda v: band.potential_energy(model, jaxrbd.integrate(model, q, v)))(
            jnp.zeros(model.nv))
        length_rate = jax.jvp(lambda s: band.length(model, jaxrbd.integrate(model, q, s * qd)),
                              (jnp.zeros(()),), (jnp.ones(()),))[1]
        return band(model, q, qd), -grad, length_rate

    return check


def test_point_to_point_potential_and_dissipation():
    """Its force is minus the gradient of its potential; with ``k = 0`` the power
    ``qd . tau = -d (dL/dt)^2 <= 0``, with ``dL/dt`` the derivative of the length along
    the motion."""
    model = ZOO["mixed"]
    band = mixed_band()
    damper_only = eqx.tree_at(lambda b: b.stiffness, band, jnp.zeros_like(band.stiffness))
    check = mixed_band_check()
    for q, qd in zip(*random_states(model, 1, n=3)):
        tau, minus_grad, _ = check(band, q, jnp.zeros(model.nv))  # at rest: spring force only
        assert_allclose(tau, minus_grad, rtol=1e-12, name="band vs -dV/dq")
        assert float(jnp.max(jnp.abs(tau))) > 1.0  # the band is stretched
        tau, _, length_rate = check(damper_only, q, qd)
        power = float(jnp.dot(qd, tau))
        assert power <= 0.0
        assert_allclose(power, -3.0 * float(length_rate) ** 2, rtol=1e-12, name="power")


def test_point_to_point_cable_and_degenerate_segment():
    q, qd = jnp.array([0.2, 0.3]), jnp.array([1.0, -2.0])
    ends = [("world", jnp.zeros(3)), ("link1", jnp.zeros(3))]
    slack = PointToPointSpringDamper(ends, 100.0, 1.0, rest_length=1.0, cable=True)
    summary = band_summary()
    # the cable (0.1 m long, rest 1 m) is slack: no force, no tension, no energy
    tau, _, tension, energy = summary(slack, CHAIN2, q, qd)
    assert_allclose(tau, np.zeros(2), name="slack cable")
    assert float(tension) == 0.0 and float(energy) == 0.0
    # the same spring pushes when it is not a cable
    spring = PointToPointSpringDamper(ends, 100.0, 1.0, rest_length=1.0)
    tension = summary(spring, CHAIN2, q, jnp.zeros(2))[2]
    assert float(tension) == pytest.approx(100.0 * (0.1 - 1.0))
    # coincident points (the joint axes pass through both): finite values and gradients
    degenerate = PointToPointSpringDamper([("world", jnp.zeros(3)), ("link0", jnp.zeros(3))],
                                          100.0, 1.0, rest_length=0.1)

    @jax.jit
    def value_and_grads(band):
        def f(b):
            tau, _, _, energy = summary(b, CHAIN2, q, qd)
            return jnp.sum(tau) + energy, tau

        return jax.grad(f, has_aux=True)(band)

    grads, tau = value_and_grads(degenerate)
    assert np.all(np.isfinite(np.asarray(grads.points)))
    assert_allclose(tau, np.zeros(2), name="degenerate")


# ----------------------------------------------------------------------------- user forces


def test_user_force_generalized_and_wrench():
    model = ZOO["mixed"]
    (q,), (qd,) = random_states(model, 3, n=1)
    body, point, force = "b5", jnp.array([0.1, -0.2, 0.3]), jnp.array([1.0, -2.0, 0.5])

    def wrench(model, q, qd, t):
        p_world = jaxrbd.point_position(model, q, body, point)
        row = jnp.concatenate([jnp.cross(p_world, force), force])  # [n; f] at the world origin
        return jnp.zeros((model.nbodies, 6)).at[model.body_id(body)].set(row * (1.0 + t))

    user = UserForce(wrench, kind="wrench")
    generalized = UserForce(lambda model, q, qd, t: -0.5 * qd,
                            potential=lambda model, q, t: jnp.sum(q**2))

    @jax.jit
    def run(q, qd):
        return (user(model, q, qd), user(model, q, qd, 1.0),
                jaxrbd.point_jacobian(model, q, body, point).T @ force,
                generalized(model, q, qd), generalized.potential_energy(model, q),
                # a plain callable in a sequence counts as a UserForce
                jaxrbd.generalized_forces([lambda model, q, qd, t: qd], model, q, qd))

    at0, at1, expected, gen, pot, plain = run(q, qd)
    assert_allclose(at0, expected, rtol=1e-12, name="wrench -> J^T F")
    assert_allclose(at1, 2.0 * expected, rtol=1e-12, name="time")
    assert_allclose(gen, -0.5 * qd, name="generalized")
    assert_allclose(pot, jnp.sum(q**2), name="potential")
    assert_allclose(plain, qd, name="plain callable")


# ----------------------------------------------------------------------------- transforms, grads


def _all_elements():
    """One element of every kind on the mixed tree (one structure: one compile)."""
    model = ZOO["mixed"]
    return model, (
        JointSpring(["j3", "j3"], [30.0, 12.0], [0.1, -0.2]),
        JointDamper("j3", 0.7),
        SpringDamperDrive("j3", 20.0, 0.4, reference=0.3, reference_velocity=0.5),
        JointFriction("j3", viscous=0.2, coulomb=0.5, smoothing=0.3),
        mixed_band(),
    )


@functools.cache
def forces_jacobian():
    return jax.jit(jax.jacfwd(jaxrbd.generalized_forces))


def test_gradients_wrt_element_constants_match_finite_differences():
    """``d tau / d constant`` by forward mode for every leaf of every element, against
    central differences (the derivative of ``qdd`` then follows through the dynamics,
    see the trolley's ``d qdd / d k`` in test_trolley.py)."""
    model, elements = _all_elements()
    forces = jit_forces()
    (q,), (qd,) = random_states(model, 4, n=1)
    flat, unravel = jax.flatten_util.ravel_pytree(elements)
    assert flat.shape == (30,)  # every constant is a differentiable leaf
    jac = forces_jacobian()(elements, model, q, qd)
    # columns in the order of `flat`
    J = jnp.concatenate([x.reshape(model.nv, -1) for x in jax.tree_util.tree_leaves(jac)], axis=1)
    assert float(jnp.min(jnp.max(jnp.abs(J), axis=0))) > 0.0  # every leaf matters
    eps = 1e-6
    for i in range(flat.shape[0]):
        e = jnp.zeros_like(flat).at[i].set(eps * max(1.0, abs(float(flat[i]))))
        fd = (forces(unravel(flat + e), model, q, qd) - forces(unravel(flat - e), model, q, qd))
        assert_allclose(J[:, i], fd / (2 * e[i]), rtol=1e-7, atol=1e-7, name=f"d tau / d leaf {i}")


def test_vmap_over_states_and_stacked_elements():
    model, elements = _all_elements()
    Q, QD = random_states(model, 5, n=3)
    forces = jit_forces()
    batched = jax.jit(jax.vmap(jaxrbd.generalized_forces, in_axes=(None, None, 0, 0)))(
        elements, model, Q, QD)
    one_by_one = jnp.stack([forces(elements, model, q, qd) for q, qd in zip(Q, QD)])
    assert_allclose(batched, one_by_one, rtol=1e-12, name="vmap over states")
    # a batch of elements: every leaf stacked (here all constants scaled per sample)
    scaled = [jax.tree_util.tree_map(lambda x, s=s: x * s, elements) for s in (0.5, 1.0, 2.0)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *scaled)
    batched = jax.jit(jax.vmap(jaxrbd.generalized_forces, in_axes=(0, None, None, None)))(
        stacked, model, Q[0], QD[0])
    expected = jnp.stack([forces(e, model, Q[0], QD[0]) for e in scaled])
    assert_allclose(batched, expected, rtol=1e-12, name="vmap over elements")
    assert_allclose(jaxrbd.generalized_forces((), model, Q[0], QD[0]), np.zeros(model.nv),
                    name="no elements")


# ----------------------------------------------------------------------------- errors


ERRORS = {
    "spherical joint": (lambda m: JointSpring("j1", 1.0)(m, *_zero(m)), ValueError,
                        r"joint 'j1' is a spherical joint with nq = 4, nv = 3"),
    "unknown joint": (lambda m: JointDamper("nope", 1.0)(m, *_zero(m)), ValueError,
                      r"unknown joint 'nope'"),
    "joint index": (lambda m: JointFriction(7, 1.0)(m, *_zero(m)), ValueError,
                    r"joint index 7 out of range"),
    "empty joints": (lambda m: JointSpring([], 1.0), ValueError, r"joints is empty"),
    "joint type": (lambda m: JointSpring([1.5], 1.0), TypeError, r"joints entries"),
    "stiffness shape": (lambda m: JointSpring(["j2", "j3"], [1.0, 2.0, 3.0]), ValueError,
                        r"stiffness has shape \(3,\), expected \(\) or \(2,\)"),
    "damping not finite": (lambda m: JointDamper("j2", np.nan), ValueError,
                           r"damping has non-finite"),
    "smoothing": (lambda m: JointFriction("j2", coulomb=1.0, smoothing=0.0), ValueError,
                  r"smoothing is 0.0, expected values > 0"),
    "reference shape": (lambda m: SpringDamperDrive("j2", 1.0, 1.0, reference=[1.0, 2.0]),
                        ValueError, r"reference has shape \(2,\)"),
    "reference output": (lambda m: SpringDamperDrive("j2", 1.0, 1.0,
                                                     reference=lambda t: jnp.ones(3))(m, *_zero(m)),
                         ValueError, r"reference\(t\) returned shape \(3,\)"),
    "one point": (lambda m: PointToPointSpringDamper([("b1", np.zeros(3))], 1.0), ValueError,
                  r"at least 2"),
    "point shape": (lambda m: PointToPointSpringDamper([("b1", np.zeros(2)), ("b2", np.zeros(3))],
                                                       1.0), ValueError,
                    r"points\[0\] point has shape \(2,\)"),
    "not pairs": (lambda m: PointToPointSpringDamper([1.0, 2.0], 1.0), TypeError, r"pairs"),
    "unknown body": (lambda m: PointToPointSpringDamper([("b1", np.zeros(3)), ("zz", np.zeros(3))],
                                                        1.0)(m, *_zero(m)), ValueError,
                     r"unknown body 'zz'"),
    "p2p stiffness": (lambda m: PointToPointSpringDamper([(1, np.zeros(3)), (2, np.zeros(3))],
                                                         [1.0, 2.0]), ValueError,
                      r"stiffness has shape \(2,\), expected \(\)"),
    "user output": (lambda m: UserForce(lambda m, q, qd, t: jnp.zeros(2))(m, *_zero(m)),
                    ValueError, r"UserForce fn\(model, q, qd, t\) has shape \(2,\)"),
    "wrench output": (lambda m: UserForce(lambda m, q, qd, t: jnp.zeros(m.nv),
                                          kind="wrench")(m, *_zero(m)), ValueError,
                      r"expected \(6, 6\) = \(model.nbodies, 6\)"),
    "user kind": (lambda m: UserForce(lambda *a: 0.0, kind="torque"), ValueError, r"kind must"),
    "user fn": (lambda m: UserForce(3.0), TypeError, r"fn is a float"),
    "no potential": (lambda m: UserForce(lambda *a: jnp.zeros(m.nv)).potential_energy(
        m, jnp.zeros(m.nq)), ValueError, r"no potential energy"),
    "q shape": (lambda m: JointSpring("j2", 1.0)(m, jnp.zeros(3), jnp.zeros(m.nv)), ValueError,
                r"q has shape \(3,\)"),
    "t shape": (lambda m: JointSpring("j2", 1.0)(m, *_zero(m), t=jnp.zeros(2)), ValueError,
                r"t has shape \(2,\)"),
    "elements": (lambda m: jaxrbd.generalized_forces([JointSpring("j2", 1.0), 3], m, *_zero(m)),
                 TypeError, r"elements\[1\] is a int"),
}


def _zero(model):
    return jnp.zeros(model.nq), jnp.zeros(model.nv)


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors(case):
    call, kind, match = ERRORS[case]
    with pytest.raises(kind, match=match):
        call(ZOO["mixed"] if case in ("unknown body", "wrench output") else ball_tree())


# ----------------------------------------------------------------------------- humanoid energy

#: Energy drift bound of the conservative humanoid rollout below (RK4, h = 2 ms, 1 s):
#: max |E(t) - E(0)| / max T(t), measured 3.7e-10 (2.3e-8 over 2 s); RK4's energy error
#: is O(h^4).
HUMANOID_DRIFT_BOUND = 4e-9
#: A damped step may raise E by at most this much relative to max T (round-off).
HUMANOID_GAIN_TOL = 1e-12


def humanoid_elements(dissipation: float):
    """Springs on the lumbar, shoulder, elbow, hip and knee joints and a band from the
    torso over the pelvis to the left shank; dampers and friction on the same joints,
    scaled by ``dissipation``. The structure does not depend on it, so both rollouts
    share one compilation. (Elements on the light wrist links would make the equations
    stiff for explicit steps of milliseconds.)"""
    model = ZOO["humanoid"]
    big = ("lumbar", "shoulder", "elbow", "hip", "knee")
    joints = [n for n, b in zip(model.joint_names, model.movable_joint_bodies)
              if model.joint_label[b] == "revolute" and any(s in n for s in big)]
    band = PointToPointSpringDamper(
        [("torso", np.array([0.1, 0.1, 0.1])), ("pelvis", np.array([0.1, 0.1, 0.0])),
         ("left_knee_link", np.array([0.05, 0.0, -0.1]))], 400.0, 20.0 * dissipation, 0.3)
    return (
        JointSpring(joints, 20.0),
        JointDamper(joints, 0.8 * dissipation),
        JointFriction(joints, viscous=0.0, coulomb=0.3 * dissipation, smoothing=0.1),
        band,
    )


@functools.cache
def humanoid_rollout():
    model = ZOO["humanoid"]
    steps, dt = 500, 2e-3

    @jax.jit
    def run(elements, q0, qd0):
        qs, qds = jaxrbd.rollout(model, q0, qd0, jnp.zeros((steps, model.nv)), dt, "rk4",
                                 forces=elements)

        def energy(q, qd):
            T = jaxrbd.kinetic_energy(model, q, qd)
            V = jaxrbd.potential_energy(model, q) + jaxrbd.elastic_potential_energy(
                elements, model, q)
            return T, T + V

        return jax.vmap(energy)(qs, qds)

    q0 = jaxrbd.neutral_configuration(model).at[2].set(1.0)
    qd0 = jax.random.uniform(jax.random.key(7), (model.nv,), model.dtype, -1.0, 1.0)
    return run, q0, qd0


def test_humanoid_conservative_energy_drift():
    run, q0, qd0 = humanoid_rollout()
    T, E = run(humanoid_elements(0.0), q0, qd0)
    drift = float(jnp.max(jnp.abs(E - E[0])) / jnp.max(T))
    assert drift < HUMANOID_DRIFT_BOUND, drift


def test_humanoid_damped_never_gains_energy():
    run, q0, qd0 = humanoid_rollout()
    T, E = run(humanoid_elements(1.0), q0, qd0)
    gain = float(jnp.max(jnp.diff(E)) / jnp.max(T))
    assert gain < HUMANOID_GAIN_TOL, gain
    assert float(E[-1]) < float(E[0]) - 0.1 * float(T[0])  # it really dissipates
