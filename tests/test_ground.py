"""Ground contact (jaxrbd.ground): geometry, both contact models, validation scenes.

Each scene compiles once (module-scope fixtures); cases that differ only in numbers
(friction coefficients, drop heights) run as one vmapped call.
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrbd
from jaxrbd import Body, ModelBuilder, ground, joints

DATA = pathlib.Path(__file__).parent / "data"
G = 9.81


def _free_body(mass, inertia):
    b = ModelBuilder(gravity=(0.0, 0.0, -G))
    b.add_body("body", parent="world", joint=joints.free(),
               body=Body(mass=mass, com=(0.0, 0.0, 0.0), inertia=np.diag(inertia)))
    return b.build()


@pytest.fixture(scope="module")
def ball():
    r, m = 0.1, 1.0
    model = _free_body(m, [0.4 * m * r * r] * 3)
    pts = ground.ContactPoints.create(model, [("body", [0.0, 0.0, 0.0], r)], names=["ball"])
    return model, pts


@pytest.fixture(scope="module")
def block():
    a, b_, c, m = 0.1, 0.1, 0.05, 1.0
    I = [m / 3 * (b_ * b_ + c * c), m / 3 * (a * a + c * c), m / 3 * (a * a + b_ * b_)]
    model = _free_body(m, I)
    corners = [("body", [sx * a, sy * b_, -c]) for sx in (-1, 1) for sy in (-1, 1)]
    return model, ground.ContactPoints.create(model, corners)


def _drop_state(model, height):
    q = jnp.zeros(model.nq).at[2].set(height).at[3].set(1.0)
    return q, jnp.zeros(model.nv)


def _energy(model, q, qd):
    return jaxrbd.kinetic_energy(model, q, qd) + jaxrbd.potential_energy(model, q)


# ---------------------------------------------------------------- geometry


def test_plane_and_heightfield_agree_on_a_slope():
    slope = 0.2
    n = np.array([-slope, 0.0, 1.0]) / np.hypot(slope, 1.0)
    plane = ground.Plane(0.0, normal=n, friction=0.7)
    fn = ground.Heightfield(lambda x, y: slope * x, friction=0.7)
    xs = np.linspace(-1.0, 2.0, 4)
    grid = ground.Heightfield.from_grid(slope * xs[:, None] + 0.0 * xs[None, :],
                                        origin=(-1.0, -1.0), spacing=(1.0, 1.0), friction=0.7)
    pts = jnp.asarray(np.random.default_rng(0).uniform(-0.9, 0.9, (5, 3)))
    for terrain in (fn, grid):
        d, nn, mu = jax.vmap(terrain.query)(pts)
        d0, n0, _ = jax.vmap(plane.query)(pts)
        np.testing.assert_allclose(d, d0, atol=1e-12)
        np.testing.assert_allclose(nn, n0, atol=1e-12)
        np.testing.assert_allclose(mu, 0.7)
    normals = np.random.default_rng(1).normal(size=(6, 3)) * np.array([1, 1, 3])
    normals = jnp.asarray(normals / np.linalg.norm(normals, axis=1, keepdims=True))
    F = jax.vmap(ground.tangent_basis)(normals)
    np.testing.assert_allclose(F @ jnp.swapaxes(F, 1, 2), np.broadcast_to(np.eye(3), (6, 3, 3)),
                               atol=1e-12)
    np.testing.assert_allclose(jnp.linalg.det(F), 1.0, atol=1e-12)


def test_grid_heightfield_is_bilinear():
    H = np.array([[0.0, 1.0], [2.0, 4.0]])
    hf = ground.Heightfield.from_grid(H, origin=(0.0, 0.0), spacing=(2.0, 1.0))
    x, y = 0.5, 0.25  # cell fractions a = 0.25, b = 0.25
    want = 0.75 * 0.75 * 0 + 0.25 * 0.75 * 2 + 0.75 * 0.25 * 1 + 0.25 * 0.25 * 4
    assert abs(float(hf.height(jnp.asarray(x), jnp.asarray(y))) - want) < 1e-12


def test_contact_points_from_urdf_spheres():
    urdf = """<robot name="r"><link name="base"><inertial><mass value="1"/>
      <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="leg"/>
        <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <link name="leg"><inertial><mass value="0.5"/>
        <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
        <collision name="toe"><origin xyz="0 0 -0.3"/><geometry><sphere radius="0.02"/></geometry></collision>
        <collision><geometry><box size="1 1 1"/></geometry></collision>
        <collision><origin xyz="0.1 0 -0.3" rpy="0 1 0"/><geometry><sphere radius="0.03"/></geometry></collision>
      </link></robot>"""
    model = jaxrbd.load_urdf(urdf, floating_base=True)
    pts = ground.ContactPoints.from_urdf(model, urdf)
    assert pts.names == ("toe", "leg_1")
    assert pts.bodies == (model.body_id("leg"),) * 2
    np.testing.assert_allclose(pts.points, [[0, 0, -0.3], [0.1, 0, -0.3]])
    np.testing.assert_allclose(pts.radius, [0.02, 0.03])
    assert pts.select("leg_1").names == ("leg_1",)
    with pytest.raises(ValueError, match="no contact point named"):
        pts.select("heel")
    with pytest.raises(ValueError, match="no <collision><geometry><sphere>"):
        ground.ContactPoints.from_urdf(model, urdf.replace("sphere radius", "cylinder radius"))


def test_bad_arguments(ball):
    model, pts = ball
    q, qd = _drop_state(model, 1.0)
    plane = ground.Plane()
    with pytest.raises(ValueError, match="contact_model must be"):
        ground.step(model, q, qd, qd, 1e-3, pts, plane, "soft")
    with pytest.raises(TypeError, match="terrain is a"):
        ground.step(model, q, qd, qd, 1e-3, pts, "floor")
    with pytest.raises(TypeError, match="contacts is a"):
        ground.step(model, q, qd, qd, 1e-3, [("body", [0, 0, 0])], plane)
    with pytest.raises(ValueError, match="q has shape"):
        ground.step(model, q[:3], qd, qd, 1e-3, pts, plane)
    with pytest.raises(ValueError, match="dt is"):
        ground.step(model, q, qd, qd, -1e-3, pts, plane)
    with pytest.raises(ValueError, match="solver must be"):
        ground.HardContact(solver="lemke")
    with pytest.raises(ValueError, match="friction is"):
        ground.Plane(friction=-0.1)
    with pytest.raises(ValueError, match="world"):
        ground.ContactPoints.create(model, [("world", [0, 0, 0])])


# ---------------------------------------------------------------- block scenes


THETA = 0.3  # tan = 0.309
MUS = (0.5, 0.2)  # sticks, slides
N_BLOCK, DT_BLOCK = 600, 1e-3
_BLOCK_RUNS = {}


def _block_runs(model, pts, kind):
    """Three scenes in one vmapped rollout: the block at rest on the incline with mu = 0.5
    (sticks) and 0.2 (slides), and the block thrown, spinning, onto flat ground."""
    if kind in _BLOCK_RUNS:
        return _BLOCK_RUNS[kind]
    n = np.array([0.0, -np.sin(THETA), np.cos(THETA)])
    normals = jnp.asarray([n, n, [0.0, 0.0, 1.0]])
    mus = jnp.asarray([*MUS, 0.6])
    q_incline = np.r_[0.05 * n, np.cos(THETA / 2), np.sin(THETA / 2), 0.0, 0.0]
    quat = np.array([0.9, 0.3, 0.2, 0.0]) / np.linalg.norm([0.9, 0.3, 0.2, 0.0])
    q_throw = np.r_[0.0, 0.0, 0.3, quat]
    q0 = jnp.asarray([q_incline, q_incline, q_throw])
    qd0 = jnp.asarray([np.zeros(6), np.zeros(6), [3.0, -2.0, 1.0, 0.5, 0.2, 0.0]])
    if kind == "hard":
        cm = ground.HardContact()
    else:
        cm = ground.CompliantContact(stiffness=1e6, damping=5.0, friction_velocity=1e-4)

    def run(q, qd, normal, mu):
        plane = ground.Plane(0.0, normal=normal, friction=mu)
        return ground.rollout(model, q, qd, jnp.zeros((N_BLOCK, model.nv)), DT_BLOCK, pts,
                              plane, cm)

    _BLOCK_RUNS[kind] = jax.jit(jax.vmap(run))(q0, qd0, normals, mus)
    return _BLOCK_RUNS[kind]


@pytest.mark.parametrize("contact_model", ["hard", "compliant"])
def test_block_scenes(block, contact_model):
    """Incline: sticks when tan(theta) < mu, slides with a = g (sin - mu cos) otherwise;
    energy never increases without input (hard model, all three scenes)."""
    model, _ = block
    qs, qds, info = _block_runs(*block, contact_model)
    # speed down the slope: world linear velocity R v_body along the descent direction
    down = jnp.array([0.0, -np.cos(THETA), -np.sin(THETA)])
    R0 = jnp.array([[1, 0, 0], [0, np.cos(THETA), -np.sin(THETA)], [0, np.sin(THETA), np.cos(THETA)]])
    v = qds[:2, :, 3:] @ R0.T @ down  # the block keeps its orientation
    t0, t1 = 300, N_BLOCK
    a_slide = (v[1, t1] - v[1, t0]) / ((t1 - t0) * DT_BLOCK)
    a_want = G * (np.sin(THETA) - MUS[1] * np.cos(THETA))
    # sliding: Coulomb's law to 0.5 % (hard) / 1 % (compliant, the contact settles first)
    assert abs(a_slide - a_want) / a_want < (5e-3 if contact_model == "hard" else 1e-2)
    if contact_model == "hard":
        # sticking: at rest (the regularisation leaves < 1e-6 m/s)
        assert float(jnp.max(jnp.abs(v[0, 10:]))) < 1e-6
    else:
        # sticking: the regularised law creeps at eps s / sqrt(1 - s^2)
        s = np.tan(THETA) / MUS[0]
        creep = 1e-4 * s / np.sqrt(1 - s * s)
        assert float(jnp.max(jnp.abs(v[0, t1 - 100 :]))) < 1.05 * creep
    # the total normal force balances m g cos(theta) on the sticking block
    fn = jnp.sum(info.force[0, -1, :, 0])
    assert abs(float(fn) - G * np.cos(THETA)) < 1e-2 * G

    energy = jax.jit(jax.vmap(jax.vmap(lambda q, qd: _energy(model, q, qd))))
    E = np.asarray(energy(qs, qds))
    assert info.active[2].any(), "the thrown block must hit the ground"
    if contact_model == "hard":
        # semi-implicit Euler on a free rotation changes the energy by O(dt^2) per step;
        # contacts only remove energy (the linearly implicit compliant step does not
        # guarantee this at stiff impacts, so only the hard model is checked)
        assert np.max(np.diff(E, axis=1)) < 1e-6 * np.abs(E[:, :1]).max() + 1e-9
    assert E[2, -1] < E[2, 0] - 1.0  # impacts and friction dissipate


# ---------------------------------------------------------------- ball drops


@pytest.fixture
def ball_runs(ball):
    """Two drops in one vmapped rollout: restitution 0.5 at dt = 0.25 ms, and a drop
    that comes to rest (restitution 0) at dt = 1 ms."""
    model, pts = ball
    n = 2600
    q0 = jnp.asarray([[0.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.4, 1.0, 0.0, 0.0, 0.0]])
    e = jnp.asarray([0.5, 0.0])
    dt = jnp.asarray([2.5e-4, 1e-3])

    def run(q, e, dt):
        return ground.rollout(model, q, jnp.zeros(model.nv), jnp.zeros((n, model.nv)), dt, pts,
                              ground.Plane(), ground.HardContact(restitution=e))

    return jax.jit(jax.vmap(run))(q0, e, dt)


def test_ball_drops(ball_runs):
    """A drop with restitution e rebounds to e^2 of its height; a drop without comes
    to rest as in MuJoCo (the MuJoCo part is skipped without it)."""
    qs, qds, _ = ball_runs
    e, h0 = 0.5, 0.4
    z = np.asarray(qs[0, :, 2]) - 0.1  # the bottom of the ball; it starts at h0
    touchdown = int(np.argmax(np.asarray(qds[0, :, 5]) > 0))  # the first bounce
    apex = z[touchdown:].max()
    # the velocity reverses exactly; the bounce starts up to v dt above the ground
    assert touchdown > 0 and abs(apex - e * e * h0) / (e * e * h0) < 0.02
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo is the oracle of this test")
    xml = """<mujoco><option timestep="0.001" gravity="0 0 -9.81"/>
      <worldbody><geom type="plane" size="5 5 0.1" friction="1 0.005 0.0001"/>
        <body pos="0 0 0.4"><freejoint/>
          <geom type="sphere" size="0.1" mass="1"/></body></worldbody></mujoco>"""
    mm = mujoco.MjModel.from_xml_string(xml)
    md = mujoco.MjData(mm)
    for _ in range(2600):
        mujoco.mj_step(mm, md)
    f6 = np.zeros(6)
    fz = 0.0
    for i in range(md.ncon):
        mujoco.mj_contactForce(mm, md, i, f6)
        fz += f6[0] * md.contact[i].frame[2]  # normal component along world z
    qs, _, info = ball_runs
    # resting height: MuJoCo's soft contact sinks by a fraction of a millimetre
    assert abs(float(qs[1, -1, 2]) - md.qpos[2]) < 1e-3
    assert abs(float(info.total_force[1, -1, 2]) - fz) < 1e-2 * fz


def test_solo12_stands_on_four_feet():
    model = jaxrbd.load_urdf(DATA / "solo12.urdf", floating_base=True)
    feet = ground.ContactPoints.create(
        model, [(f"{leg}_FOOT", [0.0, 0.0, 0.0], 0.016) for leg in ("FL", "FR", "HL", "HR")])
    plane = ground.Plane(0.0, friction=1.0)
    pose = jnp.array([0, 0.8, -1.6] * 2 + [0, -0.8, 1.6] * 2)
    q = jnp.zeros(model.nq).at[3].set(1.0).at[7:].set(pose)
    gap, _, _, _ = ground.contact_frames(model, q, feet, plane)
    q = q.at[2].set(-gap[0])
    kp, kd = 5.0, 0.1

    def policy(t, q, qd):
        return jnp.zeros(model.nv).at[6:].set(kp * (pose - q[7:]) - kd * qd[6:])

    dt, n = 2e-3, 2500  # 5 s
    qs, _, info = jax.jit(lambda q: ground.rollout(
        model, q, jnp.zeros(model.nv), None, dt, feet, plane, n_steps=n, policy=policy))(q)
    mg = float(jaxrbd.total_mass(model)) * G
    fn = np.asarray(jnp.sum(info.force[:, :, 0], axis=1))
    assert abs(fn[-1] - mg) < 1e-6 * mg
    # the default solver converged at every step, within its tolerance
    assert bool(info.converged.all()) and float(info.residual.max()) <= 1e-6
    assert np.all(np.asarray(info.active[-1]))
    settled = int(0.5 / dt)
    drift = np.linalg.norm(np.asarray(qs[settled:, :3] - qs[settled, None, :3]), axis=1).max()
    assert drift < 1e-3


# ---------------------------------------------------------------- gradients


def test_contact_solver_vjp_matches_finite_differences():
    rng = np.random.default_rng(3)
    K = 3
    B = rng.normal(size=(3 * K, 3 * K))
    A = jnp.asarray(B @ B.T + 0.5 * np.eye(3 * K))
    c = jnp.asarray(rng.normal(size=3 * K))
    mu = jnp.asarray([0.3, 0.8, 0.5])
    w = jnp.asarray(rng.normal(size=3 * K))
    hard = ground.HardContact(iterations=2000, tolerance=1e-12)

    def f(A, c, mu):
        lam, _ = ground.solve_contact_problem(A, c, mu, hard)
        return w @ lam

    _, res = ground.solve_contact_problem(A, c, mu, hard)
    assert res < 1e-10
    gA, gc, gmu = jax.jit(jax.grad(f, argnums=(0, 1, 2)))(A, c, mu)
    fj = jax.jit(f)
    eps = 1e-6
    for arg, g in ((1, gc), (2, gmu)):
        x = (A, c, mu)[arg]
        for i in range(x.shape[0]):
            xp, xm = [A, c, mu], [A, c, mu]
            xp[arg], xm[arg] = x.at[i].add(eps), x.at[i].add(-eps)
            fd = (fj(*xp) - fj(*xm)) / (2 * eps)
            assert abs(float(fd - g[i])) < 1e-6 * max(1.0, abs(float(fd)))
    dA = jnp.asarray(rng.normal(size=A.shape)); dA = dA + dA.T
    fd = (fj(A + eps * dA, c, mu) - fj(A - eps * dA, c, mu)) / (2 * eps)
    assert abs(float(fd - jnp.sum(gA * dA))) < 1e-6 * max(1.0, abs(float(fd)))


def test_batched_solve_equals_single_solves():
    """A batch of contact problems whose solves take different paths (refactoring the
    penalty or not, polishing or not, different iteration counts) gives each sample what
    its own solve gives: the batch-wide skips of the solver (`_solvers.when`) keep the
    per-sample answers."""
    from jaxrbd.ground._solvers import solve, when

    assert when(jnp.asarray(True), lambda x: x + 1.0, 1.0) == 2.0
    assert when(jnp.asarray(False), lambda x: x + 1.0, 1.0) == 1.0
    got = jax.vmap(lambda p, x: when(p, lambda y: 2.0 * y, x))(jnp.array([True, False]),
                                                               jnp.array([3.0, 5.0]))
    np.testing.assert_array_equal(got, [6.0, 5.0])

    rng = np.random.default_rng(7)
    K = 4
    probs = []
    for scale in (1e-3, 1.0, 1e3):
        B = rng.normal(size=(3 * K, 2 * K))  # rank deficient: redundant contacts
        A = B @ B.T * scale + 1e-6 * scale * np.eye(3 * K)
        c = rng.normal(size=3 * K) * scale
        probs.append((A, c, rng.uniform(0.2, 1.0, size=K)))
    A, c, mu = (jnp.asarray(np.stack(x)) for x in zip(*probs))
    run = lambda A, c, mu: solve("admm", 100, 0.5, True, True, 1e-6, A, c, mu, jnp.zeros_like(c))
    lam_b, res_b, its_b = jax.jit(jax.vmap(run))(A, c, mu)
    single = jax.jit(run)
    for i in range(len(probs)):
        lam, res, its = single(A[i], c[i], mu[i])
        assert int(its) == int(its_b[i])
        np.testing.assert_allclose(lam_b[i], lam, rtol=1e-12, atol=1e-12 * float(jnp.abs(lam).max()))
        # the residual is a difference of velocities: round-off relative to their scale
        assert abs(float(res_b[i] - res)) <= 1e-12 * float(jnp.abs(c[i]).max())
    assert len(set(np.asarray(its_b).tolist())) > 1  # the samples took different paths


def _flat_foot_problem(tilt, n=4, mass=2.0, dt=1e-3, mu=0.5):
    """``(A, c, mu)`` of a rigid box landing on an ``n x n`` grid of its sole's points
    (redundant contacts: a nearly singular Delassus matrix, condition about 1e7), rolling
    at ``tilt`` rad/s; contact frames aligned with the world (normal z)."""
    xs, ys = np.linspace(-0.1, 0.1, n), np.linspace(-0.05, 0.05, n)
    P = np.array([[x, y, -0.02] for x in xs for y in ys])
    inertia = mass / 12 * np.array([0.1**2 + 0.04**2, 0.2**2 + 0.04**2, 0.2**2 + 0.1**2])
    Minv = np.diag(np.concatenate([1 / inertia, np.full(3, 1 / mass)]))
    cross = lambda p: np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
    # rows [n, t1, t2] = world [z, x, y] of each point's velocity v + w x p
    G = np.vstack([np.hstack([-cross(p), np.eye(3)])[[2, 0, 1]] for p in P])
    A = G @ Minv @ G.T
    A += 1e-6 * np.mean(np.diag(A)) * np.eye(len(A))
    c = G @ np.array([0.0, tilt, 0.05, 0.02, 0.0, -9.81 * dt - 0.3])
    return jnp.asarray(A), jnp.asarray(c), jnp.full(len(P), mu)


def test_newton_chain_finishes_an_unconverged_solve():
    """A solve that ends its iterations above the tolerance goes on with a chain of Newton
    steps (`_solvers._newton_chain`) that reaches it, counts each step as an iteration and
    reports the residual its impulses leave; batched, each sample gets its own answer."""
    from jaxrbd.ground._solvers import natural_residual, solve

    run = lambda polish, A, c, mu: solve("admm", 10, 0.5, True, polish, 1e-6, A, c, mu,
                                         jnp.zeros_like(c))
    hard = _flat_foot_problem(3.0)
    # ten ADMM iterations alone (one block, no check-time polish) stop above the tolerance
    _, res0, its0 = jax.jit(lambda *p: run(False, *p))(*hard)
    assert float(res0) > 1e-6 and int(its0) == 10
    lam, res, its = jax.jit(lambda *p: run(True, *p))(*hard)
    assert float(res) <= 1e-6 and 10 < int(its) <= 30
    assert float(res) == float(natural_residual(lam, *hard))
    u = (hard[0] @ lam + hard[1]).reshape(-1, 3)
    L = lam.reshape(-1, 3)
    assert np.all(L[:, 0] >= 0) and np.all(u[:, 0] >= -1e-6)
    assert np.all(np.linalg.norm(L[:, 1:], axis=1) <= hard[2] * L[:, 0] * (1 + 1e-12) + 1e-15)
    # a batch of the hard problem and an easy one: the easy one's answer and count stay
    easy = _flat_foot_problem(0.0)  # ends in its ten iterations
    A, c, mu = (jnp.stack([h, e]) for h, e in zip(hard, easy))
    lam_b, res_b, its_b = jax.jit(jax.vmap(lambda *p: run(True, *p)))(A, c, mu)
    for i in range(2):
        lam_i, res_i, its_i = jax.jit(lambda *p: run(True, *p))(A[i], c[i], mu[i])
        assert int(its_b[i]) == int(its_i)
        # round-off through LU solves of condition ~1e7
        np.testing.assert_allclose(lam_b[i], lam_i, rtol=0, atol=1e-8 * float(jnp.abs(lam_i).max()))
        assert float(res_b[i]) <= 1e-6 and float(res_i) <= 1e-6
    assert int(its_b[1]) < int(its_b[0])


def test_interior_point_polish_finishes_a_stalled_solve(monkeypatch):
    """A landing problem of a humanoid's flat feet (`tests/data/berkeley_landing.npz`,
    Delassus condition 2.4e7) on which ADMM and the Newton chain stall above the
    tolerance: the interior-point polish (`_solvers._barrier_polish`) brings it below,
    inside the cones; batched, only that sample is polished, to the single answer."""
    from jaxrbd.ground import _solvers
    from jaxrbd.ground._solvers import natural_residual, solve

    data = np.load(DATA / "berkeley_landing.npz")
    A, c, mu, lam0 = (jnp.asarray(data[k]) for k in ("A", "c", "mu", "lam0"))
    run = lambda A, c, mu, lam0: solve("admm", 100, 1.0, True, True, 1e-6, A, c, mu, lam0)
    lam, res, its = jax.jit(run)(A[0], c[0], mu[0], lam0[0])
    assert float(res) <= 1e-6 and float(res) == float(natural_residual(lam, A[0], c[0], mu[0]))
    u = (A[0] @ lam + c[0]).reshape(-1, 3)
    L = lam.reshape(-1, 3)
    assert np.all(L[:, 0] >= 0) and np.all(u[:, 0] >= -1e-6)
    assert np.all(np.linalg.norm(L[:, 1:], axis=1) <= mu[0] * L[:, 0] * (1 + 1e-12) + 1e-15)
    lam_b, res_b, its_b = jax.jit(jax.vmap(run))(A, c, mu, lam0)
    for i in range(2):
        lam_i, res_i, its_i = jax.jit(run)(A[i], c[i], mu[i], lam0[i])
        assert int(its_b[i]) == int(its_i) and float(res_b[i]) <= 1e-6
        np.testing.assert_allclose(lam_b[i], lam_i, rtol=0, atol=1e-8 * float(jnp.abs(lam_i).max()))
    # without the polish the same solve stops above the tolerance
    monkeypatch.setattr(_solvers, "_barrier_polish", lambda lam, res, *p: (lam, res))
    _, res0, _ = jax.jit(lambda *p: run(*p))(A[0], c[0], mu[0], lam0[0])  # traced anew
    assert float(res0) > 1e-6


@pytest.mark.parametrize("contact_model", ["hard"])
def test_gradients_through_contact(block, contact_model):
    model, pts = block
    cm = ground.HardContact() if contact_model == "hard" else ground.CompliantContact(damping=5.0)
    dt, n = 1e-3, 150

    def final_x(v0, mu, h):
        q = jnp.zeros(model.nq).at[2].set(0.05 + h).at[3].set(1.0)
        qd = jnp.zeros(model.nv).at[3].set(v0)
        qs, _, _ = ground.rollout(model, q, qd, jnp.zeros((n, model.nv)), dt, pts,
                                  ground.Plane(friction=mu), cm)
        return qs[-1, 0] + qs[-1, 2]

    vg = jax.jit(jax.value_and_grad(final_x, argnums=(0, 1, 2)))
    f = lambda *a: vg(*a)[0]
    g = lambda *a: vg(*a)[1]
    # sliding on the ground the whole time: smooth, matches central differences
    v0, mu, h = 1.0, 0.3, 0.0
    grads = g(v0, mu, h)
    eps = 1e-5
    for i, x in enumerate((v0, mu)):
        args = [v0, mu, h]
        ap, am = list(args), list(args)
        ap[i] += eps; am[i] -= eps
        fd = (f(*ap) - f(*am)) / (2 * eps)
        assert abs(float(grads[i] - fd)) < 2e-3 * max(1.0, abs(float(fd))), (i, grads[i], fd)
    # dropped so that it touches down during the rollout: finite gradients
    for h in (0.01, 0.02, 0.0449):
        assert all(np.isfinite(float(x)) for x in g(v0, mu, h))


def test_batched_ground_rollout_equals_vmap(block):
    """`jaxrbd.batched.ground_rollout` (blocks of samples, padded to equal blocks) gives
    `jax.vmap` of `jaxrbd.ground.rollout`, open loop and with a policy, and names its
    bad arguments."""
    model, pts = block
    plane = ground.Plane(friction=0.6)
    B, n = 7, 25
    key = jax.random.key(3)
    heights = jnp.linspace(0.04, 0.08, B)
    Q = jax.vmap(lambda h: _drop_state(model, h)[0])(heights)
    QD = 0.3 * jax.random.normal(key, (B, model.nv))
    TAU = 0.5 * jax.random.normal(key, (B, n, model.nv))
    # the references jitted: an eager vmap of a rollout compiles each primitive on its own
    want = jax.jit(jax.vmap(lambda q, qd, tau: ground.rollout(model, q, qd, tau, 1e-3, pts,
                                                              plane)))(Q, QD, TAU)
    assert np.any(np.asarray(want[2].force)[..., 0] > 0), "the blocks never touch the ground"
    got = ground.rollout_batched(model, Q, QD, TAU, 1e-3, pts, plane, chunk=3)  # 3 blocks
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=0, atol=1e-13)
    policy = lambda t, q, qd: -2.0 * qd
    want = jax.jit(jax.vmap(lambda q, qd: ground.rollout(
        model, q, qd, None, 1e-3, pts, plane, "compliant", n_steps=n, policy=policy)))(Q, QD)
    got = jaxrbd.batched.ground_rollout(model, Q, QD, None, 1e-3, pts, plane, "compliant",
                                        n_steps=n, policy=policy)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-13)
    assert got[2].force.shape == (B, n, 4, 3)
    with pytest.raises(ValueError, match=r"Q0 has shape \(7, 6\), expected \(batch, 7\)"):
        jaxrbd.batched.ground_rollout(model, Q[:, :6], QD, TAU, 1e-3, pts, plane)
    with pytest.raises(ValueError, match="batch sizes differ"):
        jaxrbd.batched.ground_rollout(model, Q, QD[:3], TAU, 1e-3, pts, plane)
    with pytest.raises(ValueError, match="contact_model must be .hard., .compliant."):
        jaxrbd.batched.ground_rollout(model, Q, QD, TAU, 1e-3, pts, plane, "soft")



def test_unconverged_impulses_do_no_more_work_than_allowed():
    """`_limit_work` scales an unconverged solve's impulses back to ``lam . c +
    lam . A lam / 2 <= 0`` (no kinetic energy beyond the position targets' work) and
    leaves converged ones exactly."""
    from jaxrbd.ground import _limit_work

    rng = np.random.default_rng(3)
    G = rng.standard_normal((6, 9))
    A = jnp.asarray(G @ G.T + 1e-3 * np.eye(6))
    for _ in range(20):
        lam, c = (jnp.asarray(rng.standard_normal(6)) for _ in range(2))
        out = _limit_work(lam, A, c, jnp.asarray(False))
        work = float(out @ c + 0.5 * out @ (A @ out))
        assert work <= 1e-12 * float(jnp.abs(lam @ c) + lam @ (A @ lam))
        if float(lam @ c + 0.5 * lam @ (A @ lam)) <= 0:
            assert bool(jnp.all(out == lam))
        assert bool(jnp.all(_limit_work(lam, A, c, jnp.asarray(True)) == lam))
