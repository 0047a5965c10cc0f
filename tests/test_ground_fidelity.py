"""Fidelity of time stepping with free bodies and contact: momentum and energy of spinning
bodies, a sphere rolling down a slope, the hard solver's convergence report, checks of
traced inputs (NaN states, negative friction under `jax.jit`)."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrbd
from jaxrbd import Body, ModelBuilder, ground, joints
from jaxrbd.spatial import quat_to_rotation

G = 9.81
R_BALL = 0.1


def _free_body(inertia, gravity=(0.0, 0.0, -G)):
    b = ModelBuilder(gravity=gravity)
    b.add_body("body", parent="world", joint=joints.free(),
               body=Body(mass=1.0, com=(0.0, 0.0, 0.0), inertia=np.diag(inertia)))
    return b.build()


def _world_velocity(q, qd):
    return quat_to_rotation(q[3:7]) @ qd[3:]


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler"])
def test_spinning_free_body_keeps_momentum_and_energy(integrator):
    """Without forces, first-order stepping keeps a spinning body's world-frame linear
    velocity (an asymmetric body) and kinetic energy (a ball) to round-off over 10 s;
    integrating body-frame velocities along the screw turned them by w dt per step."""
    ball = _free_body([0.004] * 3, gravity=(0.0, 0.0, 0.0))
    box = _free_body([0.01, 0.02, 0.03], gravity=(0.0, 0.0, 0.0))
    q0 = jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    qd0 = jnp.array([3.0, -2.0, 5.0, 0.5, 0.2, -0.1])
    n = 10_000  # 10 s at 1 ms

    def run(model):
        qs, qds = jaxrbd.rollout(model, q0, qd0, jnp.zeros((n, 6)), 1e-3, integrator)
        V = jax.vmap(_world_velocity)(qs, qds)
        E = jax.vmap(lambda q, qd: jaxrbd.kinetic_energy(model, q, qd))(qs, qds)
        return V, E, qs[-1, :3]

    V, E, p_end = jax.jit(run)(ball)
    assert float(jnp.max(jnp.abs(V - V[:1]))) < 1e-12
    assert float(jnp.max(jnp.abs(E - E[:1]))) < 1e-12
    np.testing.assert_allclose(p_end, 10.0 * V[0], atol=1e-10)  # a straight line
    V, _, _ = jax.jit(run)(box)
    assert float(jnp.max(jnp.abs(V - V[:1]))) < 1e-12


@pytest.fixture(scope="module")
def ball():
    model = _free_body([0.4 * R_BALL * R_BALL] * 3)
    pts = ground.ContactPoints.create(model, [("body", [0.0, 0.0, 0.0], R_BALL)])
    return model, pts


@pytest.mark.parametrize("contact_model", ["hard", "compliant"])
def test_sphere_rolls_down_a_slope_at_five_sevenths_g_sin(ball, contact_model):
    """A solid sphere rolling without slipping accelerates at 5/7 g sin(theta)."""
    model, pts = ball
    theta = 0.2
    n = np.array([-np.sin(theta), 0.0, np.cos(theta)])
    plane = ground.Plane(0.0, normal=n, friction=1.0)
    q0 = jnp.concatenate([jnp.asarray(n * R_BALL), jnp.array([1.0, 0.0, 0.0, 0.0])])
    if contact_model == "compliant":
        contact_model = ground.CompliantContact(stiffness=1e6, damping=5.0)
        q0 = q0.at[:3].add(-jnp.asarray(n) * 1e-4)  # about its resting penetration
    steps = 2000
    qs, qds, info = jax.jit(lambda q: ground.rollout(
        model, q, jnp.zeros(6), jnp.zeros((steps, 6)), 1e-3, pts, plane, contact_model))(q0)
    down = np.array([np.cos(theta), 0.0, np.sin(theta)])
    down = -down if down[2] > 0 else down
    v = np.asarray(jax.vmap(_world_velocity)(qs, qds)) @ down
    a = (v[steps] - v[steps // 2]) / (steps // 2 * 1e-3)
    want = 5.0 / 7.0 * G * np.sin(theta)
    assert abs(a / want - 1.0) < 1e-3
    assert bool(info.converged.all())


def test_rolling_ball_never_gains_energy(ball):
    """A ball thrown sideways onto flat ground slides, then rolls at 5/7 of its speed,
    and its energy never grows by more than the solver's residual allows."""
    model, pts = ball
    q0 = jnp.array([0.0, 0.0, R_BALL + 0.02, 1.0, 0.0, 0.0, 0.0])
    qd0 = jnp.array([0.0, 0.0, 0.0, 0.5, 0.0, 0.0])
    qs, qds, info = jax.jit(lambda q, qd: ground.rollout(
        model, q, qd, jnp.zeros((3000, 6)), 1e-3, pts, ground.Plane(friction=0.5)))(q0, qd0)
    E = np.asarray(jax.jit(jax.vmap(lambda q, qd: jaxrbd.kinetic_energy(model, q, qd)
                                    + jaxrbd.potential_energy(model, q)))(qs, qds))
    # an impulse lam that misses the contact conditions by the residual r (m/s) can do
    # work of at most |lam| r, and the position correction (baumgarte) lifts the ball out
    # of a penetration d, gaining at most m g d: that is all the energy a step may gain
    lam = np.linalg.norm(np.asarray(info.force[:, 0]), axis=1) * 1e-3
    lift = 1.0 * G * np.maximum(-np.asarray(info.gap[:, 0]), 0.0)
    bound = 2.0 * np.sqrt(3.0) * lam * np.asarray(info.residual) + lift + 1e-12
    assert np.all(np.diff(E) <= bound)
    speed = np.linalg.norm(np.asarray(jax.vmap(_world_velocity)(qs[-500:], qds[-500:])), axis=1)
    np.testing.assert_allclose(speed, 5.0 / 7.0 * 0.5, rtol=1e-6)
    assert bool(info.converged.all()) and float(info.residual.max()) <= 1e-6


def test_solver_reports_convergence_and_warm_start_changes_little(ball):
    """`ContactInfo` reports the residual, the iterations and whether the solve
    converged; a converged step hardly depends on the warm start, a step cut short
    reports its own residual."""
    model, pts = ball
    q = jnp.array([0.3, 0.0, R_BALL - 1e-4, 1.0, 0.0, 0.0, 0.0])
    qd = jnp.array([0.0, 0.0, 1.0, 0.4, 0.0, -0.5])
    plane = ground.Plane(friction=0.3)
    step = jax.jit(ground.step, static_argnames=())
    tau = jnp.zeros(6)
    cold = step(model, q, qd, tau, 1e-3, pts, plane)
    warm = step(model, q, qd, tau, 1e-3, pts, plane, warm_start=jnp.array([[5.0, 1.0, -1.0]]))
    for out in (cold, warm):
        assert bool(out[2].converged) and float(out[2].residual) <= 1e-6
        assert 0 < int(out[2].iterations) <= 100
    np.testing.assert_allclose(cold[1], warm[1], atol=1e-5)
    short = ground.HardContact(solver="pgs", iterations=1, tolerance=1e-12)
    _, _, info = step(model, q, qd, tau, 1e-3, pts, plane, short)
    # one sweep may already solve a single contact: the flag follows the residual
    assert int(info.iterations) == 1
    assert bool(info.converged) == (float(info.residual) <= 1e-12)
    _, _, info = step(model, q, qd, tau, 1e-3, pts, plane, ground.CompliantContact())
    assert float(info.residual) == 0 and bool(info.converged)
    with pytest.raises(ValueError, match="tolerance must be a float >= 0"):
        ground.HardContact(tolerance=-1.0)


def test_nan_state_and_traced_negative_friction_raise(ball):
    model, pts = ball
    q = jnp.array([0.0, 0.0, R_BALL, 1.0, 0.0, 0.0, 0.0])
    zeros = jnp.zeros(6)
    plane = ground.Plane(friction=0.5)
    with pytest.raises(RuntimeError, match="q contains NaN or inf"):
        ground.step(model, q.at[0].set(jnp.nan), zeros, zeros, 1e-3, pts, plane)
    with pytest.raises(RuntimeError, match="tau contains NaN or inf"):
        ground.step(model, q, zeros, zeros.at[2].set(jnp.inf), 1e-3, pts, plane)
    roll = jax.jit(lambda q0, qd0, mu: ground.rollout(
        model, q0, qd0, jnp.zeros((5, 6)), 1e-3, pts, ground.Plane(friction=mu)))
    with pytest.raises(RuntimeError, match="qd0 contains NaN or inf"):
        roll(q, zeros.at[4].set(jnp.nan), 0.5)
    with pytest.raises(RuntimeError, match="friction must be a finite coefficient >= 0"):
        roll(q, zeros, -0.5)
    qs, _, _ = roll(q, zeros, 0.5)  # the same program runs on good values
    assert bool(jnp.all(jnp.isfinite(qs)))


def test_hard_step_gradient_with_feet_sticking_equals_finite_differences():
    """solo12 standing on four sticking feet (strict complementarity: every foot pushes,
    none slides): the implicit gradient of a converged hard step equals central
    differences, with respect to the torques, the velocities and the joint angles."""
    import pathlib

    model = jaxrbd.load_urdf(pathlib.Path(__file__).parent / "data" / "solo12.urdf",
                             floating_base=True)
    feet = ground.ContactPoints.create(
        model, [(f"{leg}_FOOT", [0.0, 0.0, 0.0], 0.016) for leg in ("FL", "FR", "HL", "HR")])
    plane = ground.Plane(0.0, friction=1.0)
    pose = jnp.array([0, 0.8, -1.6] * 2 + [0, -0.8, 1.6] * 2)
    q = jnp.zeros(model.nq).at[3].set(1.0).at[7:].set(pose)
    gap, _, _, _ = ground.contact_frames(model, q, feet, plane)
    # 0.1 mm deep: at a gap of exactly 0 the normal target switches from -gap/dt to
    # -baumgarte gap/dt, a kink that central differences across it would see
    q = q.at[2].set(-gap[0] - 1e-4)
    qd = jnp.zeros(model.nv)
    tau = jnp.zeros(model.nv)  # the legs give way: every foot pushes and sticks
    tight = ground.HardContact(iterations=5000, tolerance=1e-13)
    rng = np.random.default_rng(0)
    w_q, w_v = jnp.asarray(rng.normal(size=model.nq)), jnp.asarray(rng.normal(size=model.nv))

    def f(joints, qd, tau):
        q1, qd1, info = ground.step(model, q.at[7:].set(joints), qd, tau, 1e-3, feet, plane,
                                    tight)
        return w_q @ q1 + w_v @ qd1, info

    (_, info), grads = jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2), has_aux=True))(
        q[7:], qd, tau)
    forces = np.asarray(info.force)
    assert np.all(forces[:, 0] > 0) and bool(info.converged)
    assert np.all(np.linalg.norm(forces[:, 1:], axis=1) < 0.9 * forces[:, 0])  # sticking
    fj = jax.jit(lambda *a: f(*a)[0])
    args = (q[7:], qd, tau)
    eps = 1e-4
    for seed in range(3):  # central differences along random directions of all three
        d = [jnp.asarray(np.random.default_rng(seed + k).normal(size=a.shape))
             for k, a in enumerate(args)]
        fd = (fj(*(a + eps * v for a, v in zip(args, d)))
              - fj(*(a - eps * v for a, v in zip(args, d)))) / (2 * eps)
        ad = sum(jnp.vdot(g, v) for g, v in zip(grads, d))
        assert abs(float(ad - fd)) < 1e-6 * max(1.0, abs(float(fd))), (seed, ad, fd)


def test_compliant_full_linearization_gives_usable_gradients_through_tumbling():
    """A block thrown spinning onto the ground tumbles and settles; with the full
    linearization and a softer stick, the gradient of where it ends up equals central
    differences (the dissipative default's gradient is exact but blows up here)."""
    a, b, c = 0.1, 0.1, 0.05
    model = _free_body([(b * b + c * c) / 3, (a * a + c * c) / 3, (a * a + b * b) / 3])
    corners = ground.ContactPoints.create(
        model, [("body", [sx * a, sy * b, -c]) for sx in (-1, 1) for sy in (-1, 1)])
    quat = np.array([0.9, 0.3, 0.2, 0.0]) / np.linalg.norm([0.9, 0.3, 0.2, 0.0])
    q0 = jnp.asarray(np.r_[0.0, 0.0, 0.3, quat])
    law = ground.CompliantContact(stiffness=1e6, damping=5.0, friction_velocity=1e-2,
                                  linearization="full")

    def final_xy(v0):
        qd0 = jnp.array([3.0, -2.0, 1.0, v0, 0.2, 0.0])
        qs, _, _ = ground.rollout(model, q0, qd0, jnp.zeros((600, 6)), 1e-3, corners,
                                  ground.Plane(friction=0.6), law)
        return qs[-1, 0] + qs[-1, 1]

    g = float(jax.jit(jax.grad(final_xy))(0.5))
    f = jax.jit(final_xy)
    for eps in (1e-5, 1e-7):
        fd = float((f(0.5 + eps) - f(0.5 - eps)) / (2 * eps))
        assert abs(g - fd) < 2e-3 * max(1.0, abs(fd)), (eps, g, fd)
    with pytest.raises(ValueError, match="linearization must be 'dissipative' or 'full'"):
        ground.CompliantContact(linearization="exact")


def test_default_solver_converges_on_redundant_flat_feet():
    """Talos standing on 4 points per sole (8 redundant contacts, a nearly singular
    Delassus matrix): the default solver (ADMM with an adaptive penalty and a Newton
    polish) reaches its tolerance from a cold start, and the feet carry the weight."""
    model = jaxrbd.load_urdf(pathlib.Path(__file__).parent / "data" / "talos.urdf",
                             floating_base=True)
    items = [(s, (x, y, 0.0), 0.01) for s in ("left_sole_link", "right_sole_link")
             for x in (-0.1, 0.1) for y in (-0.065, 0.065)]
    pts = ground.ContactPoints.create(model, items)
    plane = ground.Plane(friction=1.0)
    q = jnp.zeros(model.nq).at[3].set(1.0)
    gap, *_ = ground.contact_frames(model, q, pts, plane)
    q = q.at[2].add(-jnp.min(gap))
    # the joints held by gravity compensation: the feet carry the weight
    tau = jaxrbd.gravity_forces(model, q).at[:6].set(0.0)
    A, c, mu = ground.contact_problem(model, q, jnp.zeros(model.nv), tau, 1e-3, pts, plane)
    lam, res = ground.solve_contact_problem(A, c, mu)
    assert float(res) <= 1e-6
    weight = float(jnp.sum(model.inertia[:, 0])) * G
    np.testing.assert_allclose(float(jnp.sum(lam[0::3])) / 1e-3, weight, rtol=1e-3)
