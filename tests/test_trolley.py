"""MBSlib's pendulum on a trolley (Wojtusch et al. 2016, §III-A) against its closed form.

A massless trolley on a prismatic joint ``q1`` along world x carries a uniform rod
(length ``l``, mass ``m``, inertia ``m l^2 / 12`` about its centre) on a revolute joint
``q2`` about world z; ``q2 = 0`` hangs the rod down (gravity along -y). A passive
spring-damper drive ``(k, d)`` acts on ``q2``. With ``a = m l / 2`` and ``J = m l^2 / 3``
(the rod's inertia about the joint), the Lagrangian ``L = K - U`` with

    K = m/2 (qd1 + l/2 cos q2 qd2)^2 + m/2 (l/2 sin q2 qd2)^2 + m l^2/24 qd2^2
    U = k q2^2 / 2 - m g l/2 cos q2,          D = d qd2^2 / 2 (Rayleigh)

gives ``M(q) qdd = rhs`` with

    M = [[m, a cos q2], [a cos q2, J]]
    rhs = [a sin q2 qd2^2, -k q2 - d qd2 - a g sin q2]

(``d/dt dL/dqd1 = m qdd1 + a (cos q2 qdd2 - sin q2 qd2^2)``; the ``qd1 qd2`` terms of
the second equation cancel). Solving the 2x2 system by Cramer's rule, with
``det = m J - a^2 cos^2 q2``:

    qdd1 = (J rhs1 - a cos q2 rhs2) / det,       qdd2 = (m rhs2 - a cos q2 rhs1) / det
    d qdd1 / dk = a cos q2 q2 / det,             d qdd2 / dk = -m q2 / det

The tests also check these against the expressions printed in the paper.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from helpers import assert_allclose

import jaxrbd
from jaxrbd import Body, ModelBuilder, SpringDamperDrive, joints

# the paper's parameters
LENGTH, MASS, STIFFNESS, DAMPING, GRAVITY = 1.0, 5.0, 10.0, 0.6, 9.81
Q0 = (-0.5, 0.9 * math.pi)  # initial configuration; initial velocities are zero
H, T_END = 1e-3, 10.0  # RK4 step and horizon [s]

#: Bounds on max |q - q_ref| and max |qd - qd_ref| over the 10 s RK4 rollout (h = 1 ms)
#: against an accurate solution of the closed form: measured 1.08e-8 and 1.23e-7, RK4's
#: truncation error (2.7e-7 / 1.9e-6 at h = 2 ms, 4.1e-10 / 7.8e-9 at h = 0.5 ms; the
#: reference itself is good to ~1e-10).
Q_TOL, QD_TOL = 3e-8, 3e-7


def trolley_model():
    b = ModelBuilder(gravity=(0.0, -GRAVITY, 0.0))
    b.add_body("trolley", "world", joints.prismatic((1.0, 0.0, 0.0)), Body(), joint_name="q1")
    rod = MASS * LENGTH**2 / 12.0
    b.add_body("rod", "trolley", joints.revolute((0.0, 0.0, 1.0)),
               Body(MASS, (0.0, -LENGTH / 2, 0.0), np.diag([rod, 0.0, rod])), joint_name="q2")
    return b.build()


def passive_drive(k=STIFFNESS, d=DAMPING):
    """MBSlib's PassiveSpringDamperDrive on q2: ``tau2 = -k q2 - d qd2``."""
    return SpringDamperDrive("q2", k, d)


# ----------------------------------------------------------------------------- closed form


def closed_form(q, qd, k=STIFFNESS, d=DAMPING):
    """``(qdd, d qdd / dk)`` from the Euler-Lagrange equations above (numpy, batched
    over leading axes)."""
    q2, qd2 = q[..., 1], qd[..., 1]
    s, c = np.sin(q2), np.cos(q2)
    a, J = MASS * LENGTH / 2, MASS * LENGTH**2 / 3
    rhs1 = a * s * qd2**2
    rhs2 = -k * q2 - d * qd2 - a * GRAVITY * s
    det = MASS * J - (a * c) ** 2
    qdd = np.stack([(J * rhs1 - a * c * rhs2) / det, (MASS * rhs2 - a * c * rhs1) / det], -1)
    dk = np.stack([a * c * q2 / det, -MASS * q2 / det], -1)
    return qdd, dk


def paper_form(q, qd, k=STIFFNESS, d=DAMPING):
    """The motion equations and sensitivities as printed in Wojtusch et al. 2016, §III-A."""
    q2, qd2 = q[..., 1], qd[..., 1]
    s, c = np.sin(q2), np.cos(q2)
    m, l, g = MASS, LENGTH, GRAVITY
    qdd1 = (2 * m * l**2 * s * qd2**2 + 6 * d * c * qd2 + 6 * k * c * q2 + 3 * g * m * l * c * s) \
        / (4 * m * l - 3 * m * l * c**2)
    qdd2 = (3 * m * l**2 * c * s * qd2**2 + 12 * d * qd2 + 12 * k * q2 + 6 * g * m * l * s) \
        / (3 * m * l**2 * c**2 - 4 * m * l**2)
    dk1 = -6 * q2 * c / (m * l * (3 * c**2 - 4))
    dk2 = 12 * q2 / (m * l**2 * (3 * c**2 - 4))
    return np.stack([qdd1, qdd2], -1), np.stack([dk1, dk2], -1)


def random_states(n, seed=0):
    """Random states with the special angles 0, +-pi/2, +-pi and tiny velocities mixed in."""
    rng = np.random.default_rng(seed)
    q = np.stack([rng.uniform(-2, 2, n), rng.uniform(-np.pi, np.pi, n)], -1)
    qd = rng.uniform(-5, 5, (n, 2))
    q[:5, 1] = [0.0, np.pi / 2, -np.pi / 2, np.pi, -np.pi]
    qd[5:10] = rng.uniform(-1e-8, 1e-8, (5, 2))
    return q, qd


# ----------------------------------------------------------------------------- jaxrbd side


@functools.cache
def dynamics():
    """Jitted, state-vmapped ``qdd`` and ``d qdd / dk`` (forward mode over the drive's
    stiffness leaf)."""
    model = trolley_model()

    def qdd(drive, q, qd):
        return jaxrbd.forward_dynamics(model, q, qd, jaxrbd.generalized_forces(drive, model, q, qd))

    def with_sensitivity(drive, q, qd):
        return qdd(drive, q, qd), jax.jacfwd(qdd)(drive, q, qd).stiffness

    return model, jax.jit(jax.vmap(with_sensitivity, in_axes=(None, 0, 0)))


def test_closed_form_matches_the_paper():
    q, qd = random_states(64, seed=1)
    ours, ours_dk = closed_form(q, qd)
    paper, paper_dk = paper_form(q, qd)
    assert_allclose(ours, paper, rtol=1e-13, name="qdd: derivation vs paper")
    assert_allclose(ours_dk, paper_dk, rtol=1e-13, name="dqdd/dk: derivation vs paper")


def test_accelerations_and_stiffness_sensitivity():
    _, run = dynamics()
    q, qd = random_states(256)
    qdd, dk = run(passive_drive(), q, qd)
    ref, ref_dk = closed_form(q, qd)
    assert_allclose(qdd, ref, rtol=1e-12, name="qdd")
    assert_allclose(dk, ref_dk, rtol=1e-12, name="d qdd / dk")
    # other spring-damper constants: the same compiled function, new leaf values
    qdd, dk = run(passive_drive(37.0, 2.5), q, qd)
    ref, ref_dk = closed_form(q, qd, 37.0, 2.5)
    assert_allclose(qdd, ref, rtol=1e-12, name="qdd (k = 37, d = 2.5)")
    assert_allclose(dk, ref_dk, rtol=1e-12, name="d qdd / dk (k = 37, d = 2.5)")


# ----------------------------------------------------------------------------- rollout


def _rhs(y):
    """Closed-form vector field of ``y = (q1, q2, qd1, qd2)`` (plain floats, fast)."""
    q2, qd1, qd2 = y[1], y[2], y[3]
    s, c = math.sin(q2), math.cos(q2)
    a, J = MASS * LENGTH / 2, MASS * LENGTH**2 / 3
    rhs1 = a * s * qd2 * qd2
    rhs2 = -STIFFNESS * q2 - DAMPING * qd2 - a * GRAVITY * s
    det = MASS * J - a * a * c * c
    return (qd1, qd2, (J * rhs1 - a * c * rhs2) / det, (MASS * rhs2 - a * c * rhs1) / det)


def _rk4(h, n, every):
    """Classical RK4 on the closed form; the state every ``every`` steps."""
    y = (Q0[0], Q0[1], 0.0, 0.0)
    out = [y]
    for i in range(1, n + 1):
        k1 = _rhs(y)
        k2 = _rhs(tuple(v + 0.5 * h * k for v, k in zip(y, k1)))
        k3 = _rhs(tuple(v + 0.5 * h * k for v, k in zip(y, k2)))
        k4 = _rhs(tuple(v + h * k for v, k in zip(y, k3)))
        y = tuple(v + h / 6 * (a + 2 * b + 2 * c + d) for v, a, b, c, d in zip(y, k1, k2, k3, k4))
        if i % every == 0:
            out.append(y)
    return np.array(out)


def accurate_solution(times):
    """The closed form integrated accurately: scipy's DOP853 at rtol = atol = 1e-12 when
    scipy is installed, else RK4 with h = 0.1 ms (global error ~1e-12)."""
    try:
        from scipy.integrate import solve_ivp
    except ImportError:
        steps = round(T_END / 1e-4)
        return _rk4(1e-4, steps, round(steps / (len(times) - 1)))
    sol = solve_ivp(lambda t, y: _rhs(y), (0.0, T_END), [Q0[0], Q0[1], 0.0, 0.0],
                    method="DOP853", rtol=1e-12, atol=1e-12, t_eval=times)
    assert sol.success, sol.message
    return sol.y.T


@functools.cache
def trolley_rollout():
    """The jaxrbd rollout (``jaxrbd.rollout``, RK4, h = 1 ms, 10 s) with energies and the
    rod tip's world position and velocity along it."""
    model = trolley_model()
    steps = round(T_END / H)

    @jax.jit
    def run(drive):
        qs, qds = jaxrbd.rollout(model, jnp.asarray(Q0), jnp.zeros(2), jnp.zeros((steps, 2)), H,
                                 "rk4", forces=(drive,))
        tip = jnp.array([0.0, -LENGTH, 0.0])

        def observe(q, qd):
            energy = (jaxrbd.kinetic_energy(model, q, qd) + jaxrbd.potential_energy(model, q)
                      + jaxrbd.elastic_potential_energy(drive, model, q))
            return (energy, jaxrbd.point_position(model, q, "rod", tip),
                    jaxrbd.point_velocity(model, q, qd, "rod", tip))

        return qs, qds, jax.vmap(observe)(qs, qds)

    return run(passive_drive())


def test_rk4_rollout_matches_accurate_integration():
    qs, qds, _ = trolley_rollout()
    n = qs.shape[0] - 1
    assert n == 10_000
    every = 10  # compare every 10 ms
    ref = accurate_solution(np.linspace(0.0, T_END, n // every + 1))
    q_err = np.abs(np.asarray(qs[::every]) - ref[:, :2]).max()
    qd_err = np.abs(np.asarray(qds[::every]) - ref[:, 2:]).max()
    assert q_err < Q_TOL and qd_err < QD_TOL, (q_err, qd_err)
    # the pendulum really swings (from near upright), so the comparison means something
    assert np.ptp(ref[:, 1]) > 2.0 and np.ptp(ref[:, 0]) > 0.5


def test_rollout_is_classical_rk4_on_the_closed_form():
    """The same integrator on the closed form with the same step agrees to round-off:
    what remains in the previous test is RK4's truncation error, not a modelling error."""
    qs, qds, _ = trolley_rollout()
    ref = _rk4(H, round(T_END / H), 100)
    assert_allclose(qs[::100], ref[:, :2], rtol=1e-11, name="q vs numpy RK4")
    assert_allclose(qds[::100], ref[:, 2:], rtol=1e-11, name="qd vs numpy RK4")


def test_rollout_energy_and_cartesian_motion():
    """``E = K + U`` (jaxrbd's kinetic, gravitational and elastic energies) equals the
    paper's closed form, never increases, and its loss equals the damper's dissipated
    work; the rod tip moves as ``x2 = q1 + l sin q2``, ``y2 = -l cos q2``."""
    qs, qds, (energy, tip, tip_velocity) = trolley_rollout()
    q, qd = np.asarray(qs), np.asarray(qds)
    q1, q2, qd1, qd2 = q[:, 0], q[:, 1], qd[:, 0], qd[:, 1]
    m, l, g, k = MASS, LENGTH, GRAVITY, STIFFNESS
    K = m / 2 * (l / 2 * np.cos(q2) * qd2 + qd1) ** 2 + m / 2 * (l / 2 * np.sin(q2) * qd2) ** 2 \
        + m * l**2 / 24 * qd2**2
    U = k * q2**2 / 2 - l / 2 * np.cos(q2) * m * g
    assert_allclose(energy, K + U, rtol=1e-12, name="energy")
    assert float(np.max(np.diff(energy))) <= 1e-12 * float(np.max(np.abs(energy)))
    # E(t) - E(0) = -int_0^t d qd2^2: composite Simpson over 2 ms panels; the defect
    # (measured 1.4e-8 of the dissipated 88 J) is RK4's and Simpson's truncation error
    power = DAMPING * qd2**2
    work = np.concatenate([[0.0], np.cumsum(H / 3 * (power[:-2:2] + 4 * power[1:-1:2]
                                                        + power[2::2]))])
    assert_allclose(energy[::2] - energy[0], -work, rtol=5e-8, name="energy balance")
    expected_tip = np.stack([q1 + l * np.sin(q2), -l * np.cos(q2), np.zeros_like(q1)], -1)
    expected_velocity = np.stack([qd1 + l * np.cos(q2) * qd2, l * np.sin(q2) * qd2,
                                  np.zeros_like(q1)], -1)
    assert_allclose(tip, expected_tip, rtol=1e-13, name="tip position")
    assert_allclose(tip_velocity, expected_velocity, rtol=1e-13, name="tip velocity")
