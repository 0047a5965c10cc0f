"""Point and body kinematics, Jacobians, mass properties and momentum.

Against Pinocchio 4.1 (``tests/data/<robot>.npz``) on the three URDF robots, and
against finite differences / autodiff along ``integrate`` curves on random trees with
every joint kind (quaternions included).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import (
    REFERENCE_ROBOTS,
    ZOO,
    assert_allclose,
    fd_jvp,
    random_body,
    random_placement,
    random_state,
    relative_error,
)

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, joints

TOL = 1e-9
ROBOTS = [name for name, _ in REFERENCE_ROBOTS]


# ----------------------------------------------------------------------------- Pinocchio


@functools.cache
def _reference_fn(links: tuple[str, ...], contacts: tuple[str, ...]):
    """One jitted, vmapped function computing every reference kinematics key."""

    def one(model, q, v, a, offsets, cpoints):
        out = {
            "point_position": jaxrbd.point_position(model, q, list(links), offsets),
            "point_velocity": jaxrbd.point_velocity(model, q, v, list(links), offsets),
            "point_acceleration": jaxrbd.point_acceleration(model, q, v, a, list(links), offsets),
            "point_jacobian": jaxrbd.point_jacobian(model, q, list(links), offsets),
            "body_jacobian_world": jaxrbd.body_jacobian(model, q, list(links), offsets),
            "body_jacobian_local": jaxrbd.body_jacobian(model, q, list(links), frame="body"),
            "com": jaxrbd.center_of_mass(model, q),
            "centroidal_momentum": jaxrbd.centroidal_momentum(model, q, v),
            "kinetic_energy": jaxrbd.kinetic_energy(model, q, v),
            "potential_energy": jaxrbd.potential_energy(model, q),
            "A qd": jaxrbd.centroidal_momentum_matrix(model, q) @ v,
        }
        if contacts:
            Jc = jaxrbd.point_jacobian(model, q, list(contacts), cpoints)
            out["contact_jacobian"] = Jc.reshape(-1, model.nv)
            out["contact_drift"] = jaxrbd.point_bias_acceleration(
                model, q, v, list(contacts), cpoints
            ).reshape(-1)
        return out

    return jax.jit(jax.vmap(one, in_axes=(None, 0, 0, 0, None, None)))


@pytest.mark.parametrize("robot", ROBOTS)
def test_reference_kinematics(robots, robot):
    """Every kinematics key of the reference data, all samples, one vmapped call."""
    r = robots[robot]
    ref = r.ref
    links = tuple(ref["point_links"].tolist())
    contacts = tuple(ref["contact_links"].tolist()) if "contact_links" in ref else ()
    cpoints = ref["contact_points"] if contacts else np.zeros((0, 3))
    Q = ref["q"][:, r.q_map]
    V, A = ref["v"][:, r.v_map], ref["a"][:, r.v_map]
    out = _reference_fn(links, contacts)(r.model, Q, V, A, ref["point_offsets"], cpoints)
    for key, ours in out.items():
        want = ref["centroidal_momentum"] if key == "A qd" else ref[key]
        if key in ("point_jacobian", "body_jacobian_world", "body_jacobian_local",
                   "contact_jacobian"):
            want = want[..., r.v_map]  # Jacobian columns in our joint order
        for s in range(r.nsamples):
            err = relative_error(ours[s], want[s])
            assert err <= TOL, f"{robot}/{key} sample {s}: relative error {err:.2e}"
    assert relative_error(jaxrbd.total_mass(r.model), ref["total_mass"]) <= TOL


def test_reference_world_fixed_mass_excluded(robots):
    """Panda's root link is attached to the world: not in the CoM (Pinocchio's choice)."""
    r = robots["panda"]
    assert float(r.ref["world_fixed_mass"]) > 0.5
    com = jaxrbd.center_of_mass(r.model, r.q(0))
    assert relative_error(com, r.ref["com"][0]) <= TOL
    assert relative_error(com, r.ref["com_incl_world_fixed"][0]) > 1e-4


# ----------------------------------------------------------------------------- autodiff / FD


def _model():
    return ZOO["all_kinds"]


def _bodies(model):
    """A few bodies of every sort: deep ones, a fixed one, the world."""
    fixed = [b for b in range(1, model.nbodies) if model.body_fixed[b]]
    return [model.nbodies - 1, model.nbodies // 2, fixed[0], 0]


@functools.cache
def _fns(frame):
    model = _model()
    bodies = _bodies(model)
    P = jnp.asarray(np.random.default_rng(0).normal(size=(len(bodies), 3)))

    def pos(q):
        return jaxrbd.point_position(model, q, bodies, P)

    def jac(q):
        return jaxrbd.body_jacobian(model, q, bodies, P, frame=frame)

    def vel(q, qd):
        return jaxrbd.body_velocity(model, q, qd, bodies, P, frame=frame)

    def acc(q, qd, qdd):
        return jaxrbd.body_acceleration(model, q, qd, qdd, bodies, P, frame=frame)

    def bias(q, qd):
        return jaxrbd.body_bias_acceleration(model, q, qd, bodies, P, frame=frame)

    def poses(q):
        R, p = jaxrbd.forward_kinematics(model, q)
        return R[np.array(bodies)], p[np.array(bodies)]

    def dpos(q, qd):
        return jax.jvp(lambda t: pos(jaxrbd.integrate(model, q, t * qd)), (0.0,), (1.0,))[1]

    fns = {"pos": pos, "jac": jac, "vel": vel, "acc": acc, "bias": bias, "poses": poses, "dpos": dpos}
    return {k: jax.jit(f) for k, f in fns.items()}, P


@pytest.mark.parametrize("seed", [0, 1])
def test_point_jacobian_is_derivative_of_position(seed):
    model = _model()
    f, _ = _fns("world")
    q, qd, _, _ = random_state(model, jax.random.key(seed))
    J = f["jac"](q)
    assert_allclose(J[:, 3:] @ qd, fd_jvp(f["pos"], model, q, qd), rtol=1e-7,
                    name="J_point qd vs d/dt position")
    # the point Jacobian is the linear block of the world body Jacobian
    # exact jvp (forward mode through integrate) too
    assert_allclose(J[:, 3:] @ qd, f["dpos"](q, qd), rtol=1e-10, name="J_point qd vs jvp")


@pytest.mark.parametrize("seed", [0, 1])
def test_body_jacobians_give_angular_velocity_and_frames_agree(seed):
    model = _model()
    fw, _ = _fns("world")
    fb, _ = _fns("body")
    q, qd, _, _ = random_state(model, jax.random.key(10 + seed))
    Jw, Jb = fw["jac"](q), fb["jac"](q)
    R, _ = fw["poses"](q)
    dR, dp = fd_jvp(lambda q: fw["poses"](q), model, q, qd)
    # angular rows: skew(w_world) = dR R^T
    W = np.einsum("kij,klj->kil", dR, np.asarray(R))
    w_world = np.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=-1)
    assert_allclose(Jw[:, :3] @ qd, w_world, rtol=1e-7, name="world angular")
    # body frame: [R^T w; R^T dp/dt]
    vb = np.concatenate(
        [np.einsum("kji,kj->ki", R, w_world), np.einsum("kji,kj->ki", R, dp)], axis=-1
    )
    assert_allclose(Jb @ qd, vb, rtol=1e-7, name="body-frame Jacobian")
    # velocities are J qd in both frames
    assert_allclose(fw["vel"](q, qd), Jw @ qd, rtol=1e-12, name="world velocity")
    assert_allclose(fb["vel"](q, qd), Jb @ qd, rtol=1e-12, name="body velocity")


@pytest.mark.parametrize("frame", ["world", "body"])
def test_bias_acceleration_is_jdot_qd(frame):
    """``J̇ q̇`` = d/dt (J(q(t)) q̇) along q(t) = integrate(q, t q̇); ``a = J q̈ + J̇ q̇``."""
    model = _model()
    f, _ = _fns(frame)
    q, qd, qdd, _ = random_state(model, jax.random.key(3))
    bias = f["bias"](q, qd)
    assert_allclose(bias, fd_jvp(lambda q: f["jac"](q) @ qd, model, q, qd), rtol=1e-6,
                    name=f"{frame} J̇q̇ vs finite differences")
    assert_allclose(f["acc"](q, qd, qdd), f["jac"](q) @ qdd + bias, rtol=1e-12,
                    name=f"{frame} acceleration = J qdd + J̇ qd")
    assert_allclose(f["acc"](q, qd, jnp.zeros_like(qdd)), bias, rtol=1e-14)


def test_point_acceleration_is_second_derivative():
    """Classical acceleration = d/dt point_velocity along the trajectory (q, qd + t qdd)."""
    model = _model()
    bodies = _bodies(model)
    _, P = _fns("world")
    q, qd, qdd, _ = random_state(model, jax.random.key(4))
    vel = jax.jit(lambda q, qd: jaxrbd.point_velocity(model, q, qd, bodies, P))
    fd = fd_jvp(vel, model, q, qd, (qd,), (qdd,))
    a = jax.jit(lambda q, qd, qdd: jaxrbd.point_acceleration(model, q, qd, qdd, bodies, P))(
        q, qd, qdd
    )
    assert_allclose(a, fd, rtol=1e-6, name="point acceleration vs FD of velocity")


def test_all_bodies_at_once_match_single_body_calls():
    model = _model()
    q, qd, qdd, _ = random_state(model, jax.random.key(5))
    bodies = _bodies(model)

    @jax.jit
    def run(q, qd, qdd):
        return (
            jaxrbd.body_velocities(model, q, qd),
            jaxrbd.body_accelerations(model, q, qd, qdd),
            jaxrbd.body_jacobians(model, q, frame="body"),
            jaxrbd.body_jacobians(model, q, frame="world"),
            jnp.stack([jaxrbd.body_velocity(model, q, qd, b, frame="body") for b in bodies]),
            jaxrbd.body_acceleration(model, q, qd, qdd, bodies, frame="body"),
            jnp.stack([jaxrbd.body_jacobian(model, q, b) for b in bodies]),
        )

    V, A, Jb, Jw, V1, A1, Jw1 = run(q, qd, qdd)
    assert_allclose(Jb @ qd, V, rtol=1e-12, name="body_jacobians qd")
    assert_allclose(V1, V[np.array(bodies)], rtol=1e-12, name="one body at a time: velocity")
    assert_allclose(A1, A[np.array(bodies)], rtol=1e-12, name="list of bodies: acceleration")
    assert_allclose(Jw1, Jw[np.array(bodies)], rtol=1e-12, name="one body at a time: world J")
    assert not np.any(np.asarray(V[0])) and not np.any(np.asarray(A[0]))


# ----------------------------------------------------------------------------- mass properties


@functools.cache
def _momentum_fns(name):
    model = ZOO[name]
    return model, {
        "com": jax.jit(lambda q: jaxrbd.center_of_mass(model, q)),
        "A": jax.jit(lambda q: jaxrbd.centroidal_momentum_matrix(model, q)),
        "h": jax.jit(lambda q, qd: jaxrbd.centroidal_momentum(model, q, qd)),
        "hbias": jax.jit(lambda q, qd: jaxrbd.centroidal_momentum_bias(model, q, qd)),
        "com_terms": jax.jit(lambda q, qd, qdd: (
            jaxrbd.center_of_mass_jacobian(model, q),
            jaxrbd.center_of_mass_velocity(model, q, qd),
            jaxrbd.center_of_mass_acceleration(model, q, qd, qdd),
        )),
    }


@pytest.mark.parametrize("name", ["all_kinds"])
def test_centroidal_momentum_matrix_and_bias(name):
    model, f = _momentum_fns(name)
    q, qd, qdd, _ = random_state(model, jax.random.key(6))
    A = f["A"](q)
    assert_allclose(A @ qd, f["h"](q, qd), rtol=1e-12, name="A qd = h")
    assert_allclose(f["hbias"](q, qd), fd_jvp(lambda q: f["A"](q) @ qd, model, q, qd),
                    rtol=1e-6, name="Ȧ q̇ vs finite differences")
    M = jaxrbd.total_mass(model)
    Jc, vc, ac = f["com_terms"](q, qd, qdd)
    assert_allclose(Jc, A[3:] / M, rtol=1e-12)
    assert_allclose(A[3:] @ qd / M, fd_jvp(f["com"], model, q, qd), rtol=1e-7,
                    name="CoM Jacobian vs d/dt CoM")
    assert_allclose(vc, A[3:] @ qd / M, rtol=1e-12)
    # d/dt h = A q̈ + Ȧ q̇ along (q, qd + t qdd)
    hdot = fd_jvp(f["h"], model, q, qd, (qd,), (qdd,))
    assert_allclose(A @ qdd + f["hbias"](q, qd), hdot, rtol=1e-6, name="ḣ")
    assert_allclose(ac, (A[3:] @ qdd + f["hbias"](q, qd)[3:]) / M, rtol=1e-12)


def test_energies_and_system_inertia():
    model = ZOO["humanoid"]
    q, qd, _, _ = random_state(model, jax.random.key(7))
    base_only = jnp.zeros(model.nv).at[:6].set(qd[:6])

    @jax.jit
    def run(q, qd):
        return {
            "H": jaxrbd.mass_matrix(model, q), "T": jaxrbd.kinetic_energy(model, q, qd),
            "c": jaxrbd.center_of_mass(model, q), "V": jaxrbd.potential_energy(model, q),
            "g": jaxrbd.gravity_forces(model, q), "fk": jaxrbd.forward_kinematics(model, q),
            "I0": jaxrbd.system_inertia(model, q), "IG": jaxrbd.system_inertia(model, q, about="com"),
            "hG": jaxrbd.centroidal_momentum(model, q, base_only),
            "Tb": jaxrbd.kinetic_energy(model, q, base_only),
        }

    o = run(q, qd)
    H, c = o["H"], o["c"]
    assert_allclose(o["T"], qd @ H @ qd / 2, rtol=1e-12)
    M = jaxrbd.total_mass(model)
    assert_allclose(o["V"], -M * (model.gravity @ c), rtol=1e-12)
    # dV/dq is the generalized gravity force (the gravity part of C)
    dV = fd_jvp(jax.jit(lambda q: jaxrbd.potential_energy(model, q)), model, q, qd)
    assert_allclose(dV, o["g"] @ qd, rtol=1e-7, name="dV/dt")
    # Only the free base moves: every body moves rigidly, h0 = I_sys v0 (world, origin)
    R, p = o["fk"]
    w = R[1] @ qd[:3]
    v0 = jnp.concatenate([w, R[1] @ qd[3:6] - jnp.cross(w, p[1])])  # spatial, world origin
    I0, hG = o["I0"], o["hG"]
    h0 = jnp.concatenate([hG[:3] + jnp.cross(c, hG[3:]), hG[3:]])
    assert_allclose(I0 @ v0, h0, rtol=1e-12, name="system inertia about the world origin")
    IG = o["IG"]
    vG = jnp.concatenate([w, v0[3:] + jnp.cross(w, c)])
    assert_allclose(IG @ vG, hG, rtol=1e-12, name="centroidal inertia")
    assert_allclose(IG[3:, 3:], M * np.eye(3), rtol=1e-14)
    assert_allclose(IG[:3, 3:], np.zeros((3, 3)), atol=1e-12)
    assert_allclose(0.5 * vG @ IG @ vG, o["Tb"], rtol=1e-12)


def test_momentum_under_vmap_and_grad():
    model, f = _momentum_fns("humanoid")
    keys = jax.random.split(jax.random.key(8), 5)
    Q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(keys)
    A = jax.jit(jax.vmap(lambda q: jaxrbd.centroidal_momentum_matrix(model, q)))(Q)
    for k in range(len(Q)):
        assert_allclose(A[k], f["A"](Q[k]), rtol=1e-13)
    # gradient of the CoM height w.r.t. link masses: finite and matches FD
    q = Q[0]

    def height(inertia):
        return jaxrbd.center_of_mass(eqx_replace(model, inertia), q)[2]

    height = jax.jit(height)
    g = jax.jit(jax.grad(height))(model.inertia)
    d = jnp.zeros_like(model.inertia).at[3, 0].set(1.0).at[3, 1:4].set(model.inertia[3, 1:4]
                                                                           / model.inertia[3, 0])
    eps = 1e-6
    fd = (height(model.inertia + eps * d) - height(model.inertia - eps * d)) / (2 * eps)
    assert_allclose(jnp.sum(g * d), fd, rtol=1e-6, name="d CoM_z / d mass")


def eqx_replace(model, inertia):
    import equinox as eqx

    return eqx.tree_at(lambda m: m.inertia, model, inertia)


# ----------------------------------------------------------------------------- frames


def test_fixed_bodies_and_user_frames():
    rng = np.random.default_rng(1)
    b = ModelBuilder()
    b.add_body("a", "world", joints.free(), random_body(rng))
    b.add_body("b", "a", joints.revolute((0, 1, 0)), random_body(rng), random_placement(rng))
    X = random_placement(rng)
    b.add_frame("tool", "b", X)
    b.add_frame("tip", "tool", Transform(translation=(0.1, 0.0, 0.2)))
    model = b.build()
    assert model.nv == 7 and model.body_names[-2:] == ("tool", "tip")
    q, qd, qdd, _ = random_state(model, jax.random.key(9))
    Xr, Xp = np.asarray(X.rotation), np.asarray(X.translation)
    tip_in_b = Xp + Xr @ np.array([0.1, 0.0, 0.2])

    @jax.jit
    def run(q, qd, qdd):
        return {
            "fk": jaxrbd.forward_kinematics(model, q),
            "tip": jaxrbd.point_position(model, q, "b", tip_in_b),
            "J_tip": jaxrbd.body_jacobian(model, q, "tip"),
            "J_b_at_tip": jaxrbd.body_jacobian(model, q, "b", tip_in_b),
            "a_tip": jaxrbd.point_acceleration(model, q, qd, qdd, "tip"),
            "a_b_at_tip": jaxrbd.point_acceleration(model, q, qd, qdd, "b", tip_in_b),
            "Jb_tool": jaxrbd.body_jacobian(model, q, "tool", frame="body"),
            "Jw_tool": jaxrbd.body_jacobian(model, q, "tool"),
            "H": jaxrbd.mass_matrix(model, q),
        }

    o = run(q, qd, qdd)
    R, p = o["fk"]
    assert_allclose(R[3], R[2] @ Xr, rtol=1e-13)
    assert_allclose(p[3], p[2] + R[2] @ Xp, rtol=1e-13)
    assert_allclose(p[4], o["tip"], rtol=1e-13)
    # a frame's Jacobian is its parent's at the frame origin; body frame rotated
    assert_allclose(o["J_tip"], o["J_b_at_tip"], rtol=1e-12)
    assert_allclose(o["a_tip"], o["a_b_at_tip"], rtol=1e-12)
    Jb_tool, Jw_tool = o["Jb_tool"], o["Jw_tool"]
    assert_allclose(Jb_tool[:3], R[3].T @ Jw_tool[:3], rtol=1e-12)
    assert_allclose(Jb_tool[3:], R[3].T @ Jw_tool[3:], rtol=1e-12)
    # massless frames change no dynamics
    b2 = ModelBuilder()
    rng = np.random.default_rng(1)
    b2.add_body("a", "world", joints.free(), random_body(rng))
    b2.add_body("b", "a", joints.revolute((0, 1, 0)), random_body(rng), random_placement(rng))
    plain = b2.build()
    assert_allclose(o["H"], jax.jit(jaxrbd.mass_matrix)(plain, q), rtol=1e-14)


def test_body_mass_on_fixed_frame_counts_in_com():
    b = ModelBuilder()
    b.add_body("arm", "world", joints.revolute((0, 0, 1)), Body(1.0, (1.0, 0, 0), np.eye(3)))
    b.add_body("load", "arm", joints.fixed(), Body(3.0, (0, 0, 0), np.eye(3)),
               Transform(translation=(2.0, 0.0, 0.0)))
    model = b.build()
    q = jnp.array([np.pi / 2])
    c, V = jax.jit(lambda q: (jaxrbd.center_of_mass(model, q), jaxrbd.potential_energy(model, q)))(q)
    assert_allclose(c, [0.0, 7.0 / 4.0, 0.0], atol=1e-15)
    assert float(jaxrbd.total_mass(model)) == 4.0
    assert_allclose(V, 0.0, atol=1e-15)


# ----------------------------------------------------------------------------- errors


def test_errors():
    model = _model()
    q = jaxrbd.neutral_configuration(model)
    qd = jnp.zeros(model.nv)
    with pytest.raises(ValueError, match="unknown body 'nope'"):
        jaxrbd.point_position(model, q, "nope")
    with pytest.raises(ValueError, match="out of range"):
        jaxrbd.point_jacobian(model, q, model.nbodies)
    with pytest.raises(ValueError, match=r"point has shape \(2,\)"):
        jaxrbd.point_position(model, q, 1, jnp.zeros(2))
    with pytest.raises(ValueError, match=r"one point per body"):
        jaxrbd.point_jacobian(model, q, [1, 2], jnp.zeros(3))
    with pytest.raises(ValueError, match="frame must be"):
        jaxrbd.body_jacobian(model, q, 1, frame="local")
    with pytest.raises(ValueError, match="about must be"):
        jaxrbd.system_inertia(model, q, about="base")
    with pytest.raises(TypeError, match="static"):
        jax.jit(lambda b: jaxrbd.point_position(model, q, b))(jnp.asarray(1))
    with pytest.raises(ValueError, match="empty"):
        jaxrbd.point_position(model, q, [])
    with pytest.raises(ValueError, match=r"qd has shape"):
        jaxrbd.point_velocity(model, q, qd[:-1], 1)
    with pytest.raises(ValueError, match=r"q has shape"):
        jaxrbd.center_of_mass(model, q[:-1])


# ----------------------------------------------------------------------------- limits, summary


def test_urdf_limits_on_model(robots):
    model = robots["panda"].model
    j4 = model.q_index("panda_joint4")
    assert float(model.q_lower[j4][0]) == -3.0718 and float(model.q_upper[j4][0]) == -0.0698
    assert float(model.effort_limit[model.v_index("panda_joint1")][0]) == 87.0
    assert float(model.velocity_limit[model.v_index("panda_joint7")][0]) == 2.61
    solo = robots["solo12"].model
    assert np.all(np.isinf(np.asarray(solo.q_lower[:7])))  # free joint: unbounded


def test_builder_limits_and_errors():
    b = ModelBuilder()
    b.add_body("a", "world", joints.spherical(), Body(1.0), lower=-1.0, upper=1.0)
    b.add_body("b", "a", joints.prismatic((1, 0, 0)), Body(1.0), lower=-0.5, upper=0.5,
               velocity_limit=2.0, effort_limit=10.0, damping=0.1, friction=0.2)
    m = b.build()
    assert np.all(np.isinf(np.asarray(m.q_lower[:4])))  # quaternion coordinates
    assert float(m.q_lower[4]) == -0.5 and float(m.damping[3]) == 0.1
    with pytest.raises(ValueError, match="'c': lower limit"):
        b.add_body("c", "b", joints.revolute((0, 0, 1)), lower=1.0, upper=0.0)
    with pytest.raises(ValueError, match=r"'c': damping must be >= 0"):
        b.add_body("c", "b", joints.revolute((0, 0, 1)), damping=-1.0)
    with pytest.raises(ValueError, match=r"'c': upper has shape"):
        b.add_body("c", "b", joints.revolute((0, 0, 1)), upper=[1.0, 2.0])
    with pytest.raises(ValueError, match="fixed joint has no limits"):
        b.add_body("c", "b", joints.fixed(), lower=0.0)


def test_summary_shows_tree(robots):
    text = str(robots["panda"].model)
    assert text.splitlines()[0].startswith("Model: 14 bodies (7 moving), nq=7, nv=7")
    assert "panda_link4  <- revolute 'panda_joint4' q[3] v[3]" in text
    assert "panda_hand_tcp  <- fixed 'panda_hand_tcp_joint'" in text
    assert "world (m=0.6298 kg attached)" in text
    hum = str(ZOO["humanoid"])
    assert "free" in hum and "q[0:7] v[0:6]" in hum


def test_body_jacobians_default_frame_warns_and_keeps_body():
    """Leaving ``frame`` out of `body_jacobians` warns that its default becomes
    ``"world"`` (the default of `body_jacobian`) and still returns body coordinates."""
    model = _model()
    q, _, _, _ = random_state(model, jax.random.key(6))
    with pytest.warns(FutureWarning, match="default frame changes from 'body' to 'world'"):
        J = jaxrbd.body_jacobians(model, q)
    assert_allclose(J, jaxrbd.body_jacobians(model, q, frame="body"), rtol=0, atol=0,
                    name="default = 'body'")
