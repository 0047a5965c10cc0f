"""Constraint sets: Jacobians against autodiff of the residuals, biases against finite
differences, Baumgarte terms, loop residuals, assembly and argument errors.

The checks run on the shared "mixed" tree (free, spherical, revolute, fixed and Euler
joints) with every constraint kind, each closed at the test state so that the residual
is zero there and ``G`` must equal its exact derivative along `integrate`.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import JIT, ZOO, assert_allclose, fd_jvp, random_rotation, random_state
from scipy.spatial.transform import Rotation

import jaxrbd
from jaxrbd import Body, ConstraintSet, ModelBuilder, Transform, joints
from jaxrbd._constraints import _log_rotation

# ----------------------------------------------------------------------------- fixtures


def _pose(model, q, body, frame):
    """World rotation and origin of a frame ``(R, p)`` on ``body`` (numpy)."""
    R, p = jax.device_get(JIT["forward_kinematics"](model, q))
    b = model.body_id(body)
    Rf, pf = frame.arrays()
    return R[b] @ Rf, p[b] + R[b] @ pf


def _closing_frame(model, q, body_a, frame_a, body_b):
    """The frame on ``body_b`` that coincides with ``frame_a`` of ``body_a`` at ``q``."""
    RA, oA = _pose(model, q, body_a, frame_a)
    RB, oB = _pose(model, q, body_b, Transform())
    return Transform(rotation=RB.T @ RA, translation=RB.T @ (oA - oB))


_anchored = jax.jit(lambda model, q, cs: cs.anchored(model, q))


@jax.jit
def _residual_jacobian(model, q, cs):
    """Exact derivative of the residual along `integrate`, ``(m, nv)``."""
    return jax.jacfwd(
        lambda v: jaxrbd.constraint_residual(model, jaxrbd.integrate(model, q, v), cs)
    )(jnp.zeros(model.nv, q.dtype))


def _closed_set(model, q, rng, baumgarte=None):
    fa = Transform(rotation=random_rotation(rng), translation=rng.uniform(-0.3, 0.3, 3))
    fb = Transform(rotation=random_rotation(rng), translation=rng.uniform(-0.3, 0.3, 3))
    cs = _anchored(
        model,
        q,
        ConstraintSet.points([("b3", [0.1, 0.0, 0.2], [0.0, 0.3, 1.0])], baumgarte=baumgarte)
        + ConstraintSet.contacts_3d([("b5", [0.0, 0.1, -0.1])], baumgarte=baumgarte)
        + ConstraintSet.welds([("b4", fa)], baumgarte=baumgarte),
    )
    return (
        cs
        + ConstraintSet.loops(
            [("b2", fb, "b5", _closing_frame(model, q, "b2", fb, "b5"))],
            axes="pose",
            frame="a",
            baumgarte=baumgarte,
        )
        + ConstraintSet.loops(
            [
                (
                    "b3",
                    Transform(translation=(0.0, 0.2, 0.0)),
                    "b5",
                    _closing_frame(model, q, "b3", Transform(translation=(0.0, 0.2, 0.0)), "b5"),
                )
            ],
            axes=[[0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 1, 1]],
            frame="world",
            baumgarte=baumgarte,
        )
    )


@pytest.fixture(scope="module")
def closed():
    model = ZOO["mixed"]
    q, qd, _, _ = random_state(model, jax.random.key(21))
    cs = _closed_set(model, q, np.random.default_rng(0))
    return model, q, qd, cs


@functools.cache
def _fns():
    G = jax.jit(jaxrbd.constraint_jacobian)
    gamma = jax.jit(jaxrbd.constraint_bias)
    phi = jax.jit(jaxrbd.constraint_residual)
    Gqd = jax.jit(jaxrbd.constraint_velocity_residual)
    return G, gamma, phi, Gqd


# ----------------------------------------------------------------------------- Jacobian and bias


def test_set_structure(closed):
    _, _, _, cs = closed
    assert cs.size == 1 + 3 + 6 + 6 + 2
    assert cs.kinds == ("point", "contact_3d", "weld", "loop", "loop")
    assert cs.num_constraints == 5 and len(cs) == cs.size


def test_jacobian_is_the_derivative_of_the_residual(closed):
    model, q, _, cs = closed
    G, _, phi, _ = _fns()
    assert_allclose(phi(model, q, cs), np.zeros(cs.size), atol=1e-12, name="closed residual")
    J = _residual_jacobian(model, q, cs)
    assert_allclose(G(model, q, cs), J, rtol=1e-10, atol=1e-12, name="G vs jacfwd(phi)")


def test_bias_matches_finite_differences(closed):
    model, q, qd, cs = closed
    G, gamma, _, Gqd = _fns()
    assert_allclose(Gqd(model, q, qd, cs), G(model, q, cs) @ qd, rtol=1e-12, name="G qd")
    # q(t) = integrate(q, t qd) has q̈ = 0, so d/dt (G(q(t)) qd) = Ġ q̇ = -gamma
    fd = fd_jvp(lambda qq: G(model, qq, cs) @ qd, model, q, qd)
    assert_allclose(-gamma(model, q, qd, cs), fd, rtol=1e-6, atol=1e-8, name="-gamma vs FD")


def test_baumgarte_terms(closed):
    model, q0, qd, _ = closed
    G, gamma, phi, _ = _fns()
    alpha, beta = 1.5, 4.0
    plain = _closed_set(model, q0, np.random.default_rng(0))
    stab = _closed_set(model, q0, np.random.default_rng(0), baumgarte=(alpha, beta))
    q = JIT["integrate"](model, q0, 0.05 * qd)  # off the manifold: phi != 0
    r = phi(model, q, plain)
    assert float(jnp.abs(r).max()) > 1e-4
    expect = gamma(model, q, qd, plain) - 2 * alpha * (G(model, q, plain) @ qd) - beta**2 * r
    assert_allclose(gamma(model, q, qd, stab), expect, rtol=1e-12, name="Baumgarte gamma")


def test_loop_residuals_are_relative_pose_errors(closed):
    model, q0, qd, _ = closed
    _, _, phi, _ = _fns()
    fa = Transform(
        rotation=Rotation.from_rotvec([0.3, -0.2, 0.5]).as_matrix(), translation=(0.1, 0.0, 0.0)
    )
    fb = Transform(translation=(0.0, 0.1, 0.2))
    pose = ConstraintSet.loops([("b2", fa, "b5", fb)])
    world = ConstraintSet.loops([("b2", fa, "b5", fb)], axes="position", frame="world")
    q = JIT["integrate"](model, q0, 0.3 * qd)
    RA, oA = _pose(model, q, "b2", fa)
    RB, oB = _pose(model, q, "b5", fb)
    rot = Rotation.from_matrix(RB.T @ RA).as_rotvec()  # = R_Aᵀ log(R_A R_Bᵀ)
    assert_allclose(
        phi(model, q, pose), np.concatenate([rot, RA.T @ (oA - oB)]), rtol=1e-10, name="pose loop"
    )
    assert_allclose(phi(model, q, world), oA - oB, rtol=1e-12, name="position loop, world axes")


def test_rotation_log_is_finite_everywhere():
    rng = np.random.default_rng(4)
    Rs = [random_rotation(rng) for _ in range(20)]
    Rs += [
        np.eye(3),
        Rotation.from_rotvec([np.pi, 0, 0]).as_matrix(),
        Rotation.from_rotvec([0, 0, np.pi - 1e-9]).as_matrix(),
        Rotation.from_rotvec([1e-9, 0, 0]).as_matrix(),
    ]
    R = jnp.asarray(np.stack(Rs))
    got = jax.jit(_log_rotation)(R)
    ref = Rotation.from_matrix(np.stack(Rs)).as_rotvec()
    # at angle π the sign of the axis is arbitrary; compare rotations
    assert_allclose(
        Rotation.from_rotvec(np.array(got)).as_matrix(), np.stack(Rs), atol=1e-9, name="exp(log R)"
    )
    assert_allclose(
        np.linalg.norm(got, axis=-1), np.linalg.norm(ref, axis=-1), atol=1e-9, name="angle"
    )
    g = jax.jit(jax.grad(lambda x: jnp.sum(_log_rotation(x) ** 2)))(R)
    assert bool(jnp.all(jnp.isfinite(g)))


@jax.jit
def _leaf_derivatives(model, q, cs):
    J = jax.jacfwd(lambda c: jaxrbd.constraint_residual(model, q, c))(cs).point
    stacked = jax.tree_util.tree_map(lambda x: jnp.stack([x, 2 * x]), cs)
    return J, jax.vmap(lambda c: jaxrbd.constraint_residual(model, q, c))(stacked)


def test_sets_are_pytrees(closed):
    model, q, _, _ = closed
    cs = ConstraintSet.contacts_3d([("b5", [0.0, 0.1, -0.1])])
    J, out = _leaf_derivatives(model, q, cs)
    # d phi / d point = R_body: gradients flow into the set's leaves
    R, _ = JIT["forward_kinematics"](model, q)
    assert_allclose(J[:, 0], R[model.body_id("b5")], rtol=1e-12, name="d phi / d point")
    assert out.shape == (2, 3)  # vmap over stacked sets


# ----------------------------------------------------------------------------- assembly


def _four_bar():
    """A planar four-bar: crank (1 m), coupler (2 m), rocker (1.5 m), ground 2.5 m."""
    b = ModelBuilder(gravity=(0.0, -9.81, 0.0))
    body = lambda L: Body(1.0, (L / 2, 0.0, 0.0), np.diag([0.01, L * L / 12, L * L / 12]))
    b.add_body("crank", "world", joints.revolute((0, 0, 1)), body(1.0))
    b.add_body(
        "coupler",
        "crank",
        joints.revolute((0, 0, 1)),
        body(2.0),
        Transform(translation=(1.0, 0, 0)),
    )
    b.add_body(
        "rocker",
        "coupler",
        joints.revolute((0, 0, 1)),
        body(1.5),
        Transform(translation=(2.0, 0, 0)),
    )
    model = b.build()
    loop = ConstraintSet.loops(
        [("rocker", [1.5, 0.0, 0.0], "world", [2.5, 0.0, 0.0])],
        axes=[[0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 1, 0]],
        frame="world",
        baumgarte=(5.0, 10.0),
    )
    return model, loop


@jax.jit
def _four_bar_all(guess, w, qd_guess, loop):
    """Assembly of q and qd, their residuals, and 200 constrained steps (1 ms each)."""
    model, _ = _four_bar()
    q, ok = jaxrbd.assemble_q(model, guess, loop, w)
    qd, ok_d = jaxrbd.assemble_qd(model, q, qd_guess, loop)

    def step(_, s):
        qq, vv = s
        a = jaxrbd.forward_dynamics_contacts(model, qq, vv, jnp.zeros(3), loop)[0]
        vv = vv + 1e-3 * a
        return jaxrbd.integrate(model, qq, vv, 1e-3), vv

    q_end, _ = jax.lax.fori_loop(0, 200, step, (q, qd))
    return {
        "q": q,
        "ok": ok,
        "phi": jaxrbd.constraint_residual(model, q, loop),
        "qd": qd,
        "ok_d": ok_d,
        "Gqd": jaxrbd.constraint_velocity_residual(model, q, qd, loop),
        "G": jaxrbd.constraint_jacobian(model, q, loop),
        "phi_end": jaxrbd.constraint_residual(model, q_end, loop),
    }


@jax.jit
def _assembly_vjp(guess, w, loop, ct):
    """Reverse-mode derivative of `assemble_q` (through its bounded while loop)."""
    model, _ = _four_bar()
    return jax.vjp(lambda g: jaxrbd.assemble_q(model, g, loop, w)[0], guess)[1](ct)[0]


def test_assembly_four_bar():
    _, loop = _four_bar()
    w = jnp.array([1e4, 1.0, 1.0])  # keep the crank angle
    out = _four_bar_all(jnp.array([1.0, -0.5, -1.5]), w, jnp.array([1.0, 0.3, -0.2]), loop)
    assert bool(out["ok"]) and bool(out["ok_d"])
    assert_allclose(out["phi"], np.zeros(2), atol=1e-11, name="phi after assembly")
    assert abs(float(out["q"][0]) - 1.0) < 1e-3
    assert_allclose(out["Gqd"], np.zeros(2), atol=1e-12, name="G qd after assembly")
    # Baumgarte stabilisation keeps the drift of a short simulation bounded
    assert float(jnp.abs(out["phi_end"]).max()) < 1e-4
    # out of reach: the rocker cannot touch a point 10 m away; finite, flagged
    far = eqx.tree_at(lambda c: c.point, loop, loop.point.at[1, 0].set(10.0))
    bad = _four_bar_all(jnp.array([0.1, 0.2, 0.3]), w, jnp.ones(3), far)
    assert not bool(bad["ok"]) and bool(jnp.all(jnp.isfinite(bad["q"])))


def test_assembly_derivatives():
    _, loop = _four_bar()
    guess, w = jnp.array([1.0, -0.5, -1.5]), jnp.ones(3)
    dg, ct, eps = jnp.array([0.3, -0.1, 0.2]), jnp.array([0.5, 1.0, -2.0]), 1e-6
    at = lambda g: _four_bar_all(g, w, jnp.ones(3), loop)
    out = at(guess)
    dq = (at(guess + eps * dg)["q"] - at(guess - eps * dg)["q"]) / (2 * eps)
    # the projection's tangent stays tangent to the manifold: J_phi(q*) dq* = 0
    assert_allclose(out["G"] @ dq, np.zeros(2), atol=1e-6, name="J dq*")
    # reverse mode through the bounded while loop matches finite differences
    back = _assembly_vjp(guess, w, loop, ct)
    assert_allclose(jnp.vdot(back, dg), jnp.vdot(ct, dq), rtol=1e-6, name="vjp vs FD")


# ----------------------------------------------------------------------------- errors


def test_constructor_errors():
    with pytest.raises(ValueError, match="normal is zero"):
        ConstraintSet.points([("b1", [0, 0, 0], [0, 0, 0])])
    with pytest.raises(ValueError, match="expected a tuple of 3 or 4"):
        ConstraintSet.points([("b1", [0, 0, 0])])
    with pytest.raises(ValueError, match="non-empty list"):
        ConstraintSet.contacts_3d([])
    with pytest.raises(ValueError, match="point has shape"):
        ConstraintSet.contacts_3d([("b1", [0, 0])])
    with pytest.raises(TypeError, match="body must be a name or an int"):
        ConstraintSet.contacts_3d([(1.5, [0, 0, 0])])
    with pytest.raises(ValueError, match="baumgarte gains"):
        ConstraintSet.contacts_3d([("b1", [0, 0, 0])], baumgarte=(-1.0, 0.0))
    with pytest.raises(TypeError, match="baumgarte must be"):
        ConstraintSet.contacts_3d([("b1", [0, 0, 0])], baumgarte=3.0)
    with pytest.raises(ValueError, match="axes has shape"):
        ConstraintSet.loops([("b1", [0, 0, 0], "b2", [0, 0, 0])], axes=np.ones((2, 5)))
    with pytest.raises(ValueError, match="axes must be one of"):
        ConstraintSet.loops([("b1", [0, 0, 0], "b2", [0, 0, 0])], axes="rotation")
    with pytest.raises(ValueError, match="frame must be"):
        ConstraintSet.loops([("b1", [0, 0, 0], "b2", [0, 0, 0])], frame="b")
    with pytest.raises(ValueError, match="not a rotation matrix"):
        ConstraintSet.welds([("b1", Transform(rotation=2 * np.eye(3)))])
    with pytest.raises(TypeError, match="non-empty list of ConstraintSets"):
        ConstraintSet.concat([ConstraintSet.contacts_3d([("b1", [0, 0, 0])]), 3])


def test_function_errors(closed):
    model, q, qd, cs = closed
    with pytest.raises(ValueError, match="q has shape"):
        jaxrbd.constraint_jacobian(model, q[:-1], cs)
    with pytest.raises(ValueError, match="qd has shape"):
        jaxrbd.constraint_bias(model, q, qd[:-1], cs)
    with pytest.raises(ValueError, match="unknown body"):
        jaxrbd.constraint_residual(model, q, ConstraintSet.contacts_3d([("nope", [0, 0, 0])]))
    with pytest.raises(TypeError, match="constraints must be a ConstraintSet"):
        jaxrbd.constraint_velocity_residual(model, q, qd, None)
    with pytest.raises(ValueError, match="weights has shape"):
        jaxrbd.assemble_q(model, q, cs, jnp.ones(2))
    with pytest.raises(ValueError, match="max_iter"):
        jaxrbd.assemble_q(model, q, cs, max_iter=0)
