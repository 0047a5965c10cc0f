"""Physical and algebraic properties of the algorithms, on random trees and fixed models.

Random trees mix every joint kind (`helpers.ALL_KINDS`: fixed, helical, custom with 1-3
columns, planar, free and spherical joints anywhere in the tree) with physically valid
random inertias. Hypothesis draws the *structure*; the numbers come from a seeded PRNG.
Each distinct structure costs one XLA compile per function, so the example counts are
modest; the deterministic `all_kinds` tree (every kind once, branching) covers the rest.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import (
    ALL_KINDS,
    assert_allclose,
    combine_bodies,
    quaternion_blocks,
    random_body,
    random_custom_columns,
    random_f_ext,
    random_placement,
    random_state,
    random_tree,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, joints

RTOL = 1e-9  # float64 identities (errors are ~cond(H) * 1e-16)

# Every example is a new tree structure, hence three XLA compiles (FD, ID, H) of a few
# seconds each; raise this for a deeper search (e.g. JAXRBD_TEST_EXAMPLES=50).
MAX_EXAMPLES = int(os.environ.get("JAXRBD_TEST_EXAMPLES", "8"))

PROPERTY_SETTINGS = settings(
    deadline=None,
    max_examples=MAX_EXAMPLES,
    database=None,
    derandomize=True,  # reproducible, and a stable run time (one compile per structure)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def tree_specs(draw, max_bodies: int = 8):
    """``(seed, nbodies, kinds, parents, custom_cols)`` for `helpers.random_tree`."""
    n = draw(st.integers(1, max_bodies))
    kinds = tuple(draw(st.lists(st.sampled_from(ALL_KINDS), min_size=n, max_size=n)))
    parents = tuple(draw(st.integers(0, i)) for i in range(n))  # branching trees
    cols = tuple(draw(st.integers(1, 3)) for _ in range(n))
    seed = draw(st.integers(0, 2**31 - 1))
    return seed, n, kinds, parents, cols


@functools.lru_cache(maxsize=64)
def tree_from_spec(spec):
    seed, n, kinds, parents, cols = spec
    return random_tree(seed, n, kinds=kinds, parents=parents, custom_cols=cols)


def _state(model, seed):
    q, qd, qdd, tau = random_state(model, jax.random.key(seed % 2**31))
    f_ext = random_f_ext(model, jax.random.key(seed % 2**31 + 1))
    return q, qd, qdd, tau, f_ext


def _label(spec):
    seed, _, kinds, parents, cols = spec
    return f"tree(seed={seed}, kinds={kinds}, parents={parents}, cols={cols})"


# ----------------------------------------------------------------------------- random trees


@PROPERTY_SETTINGS
@given(spec=tree_specs())
def test_dynamics_identities(jitted, spec):
    """ID(FD(tau)) = tau; H symmetric positive definite; H[:, j] = ID(q, 0, e_j) - ID(q, 0, 0);
    C = ID(q, qd, 0); FD = H^-1 (tau - C); all with external forces."""
    model = tree_from_spec(spec)
    name = _label(spec)
    q, qd, qdd, tau, f_ext = _state(model, spec[0])
    FD, ID, M = jitted["forward_dynamics"], jitted["inverse_dynamics"], jitted["mass_matrix"]
    z = jnp.zeros(model.nv)
    f0 = jnp.zeros_like(f_ext)

    qdd_fd = FD(model, q, qd, tau, f_ext)
    assert_allclose(
        ID(model, q, qd, qdd_fd, f_ext), tau, rtol=RTOL, atol=RTOL, name=f"ID(FD) {name}"
    )

    H = np.asarray(M(model, q))
    assert_allclose(H, H.T, rtol=1e-14, atol=0.0, name=f"H symmetric {name}")
    if model.nv:
        assert np.linalg.eigvalsh(H).min() > 0, f"H not positive definite: {name}"
    g = ID(model, q, z, z, f0)
    cols = np.array([ID(model, q, z, e, f0) - g for e in np.eye(model.nv)]).T.reshape(H.shape)
    assert_allclose(cols, H, rtol=RTOL, atol=1e-12, name=f"H columns {name}")

    C = np.asarray(ID(model, q, qd, z, f_ext))
    if model.nv:
        assert_allclose(
            qdd_fd, np.linalg.solve(H, tau - C), rtol=1e-8, atol=1e-10, name=f"FD {name}"
        )
    assert_allclose(ID(model, q, qd, qdd, f_ext), H @ qdd + C, rtol=RTOL, atol=RTOL, name=name)


# ----------------------------------------------------------------------------- every kind once


@pytest.fixture(scope="module")
def tree(zoo):
    model = zoo["all_kinds"]
    assert {model.joint_label[b] for b in range(1, model.nbodies)} == set(ALL_KINDS)
    return model


@pytest.fixture(scope="module")
def state(tree):
    return _state(tree, 7)


@pytest.mark.parametrize("traversal", ["level", "level2", "level3", "body"])
def test_schedules_are_topological(zoo, traversal):
    """Every schedule visits each node once, after its parent, with distinct scratch
    slots in the padding; ``"level<k>"`` (the articulated-body passes on batches use
    ``"level2"``) has at most ``k`` nodes per step."""
    from jaxrbd._core.schedule import Schedule

    for name in ("all_kinds", "humanoid"):
        parent = zoo[name].node_parent
        n, s = len(parent), Schedule(parent, traversal)
        done = {0}
        for row, prow in zip(s.steps.tolist(), s.step_parent.tolist()):
            real = [i for i in row if i < n]
            assert real, f"{name}: an empty step in {traversal}"
            assert len(set(row)) == len(row) and all(i < s.nbuf for i in row)
            for i, p in zip(row, prow):
                if i < n:
                    assert p == parent[i] and p in done, (name, traversal, i)
            done.update(real)
        assert done == set(range(n)) and sum(i < n for i in s.steps.ravel()) == n - 1
        if traversal != "level" and traversal.startswith("level"):
            assert s.width <= int(traversal[5:])
    for bad in ("diagonal", "level0", "levelx"):
        with pytest.raises(ValueError, match="traversal"):
            Schedule(parent, bad)


@pytest.mark.parametrize("name", ["all_kinds", "humanoid"])
def test_body_traversal_equals_level_traversal(jitted, zoo, name):
    """The body-by-body schedule and the level-by-level schedule (wide levels on these
    branching trees) give the same FD, ID, H and minv_times (the batched entry points,
    which use the other schedule, are compared with vmap in test_transforms)."""
    model = zoo[name]  # the default traversal ("auto": level by level for one state)
    body = model.with_traversal("body" if model.traversal in ("auto", "level") else "level")
    q, qd, qdd, tau, f_ext = _state(model, 3)
    FD, ID, M = jitted["forward_dynamics"], jitted["inverse_dynamics"], jitted["mass_matrix"]
    assert_allclose(M(body, q), M(model, q), rtol=1e-12, atol=1e-14, name=f"H {name}")
    assert_allclose(
        FD(body, q, qd, tau, f_ext),
        FD(model, q, qd, tau, f_ext),
        rtol=1e-10,
        atol=1e-12,
        name=f"FD {name}",
    )
    assert_allclose(
        ID(body, q, qd, qdd, f_ext),
        ID(model, q, qd, qdd, f_ext),
        rtol=1e-12,
        atol=1e-12,
        name=f"ID {name}",
    )
    T = np.stack([tau, qd, qdd], axis=1)
    assert_allclose(
        jitted["minv_times"](body, q, T),
        jitted["minv_times"](model, q, T),
        rtol=1e-10,
        atol=1e-12,
        name=f"minv_times {name}",
    )


def test_bias_gravity_and_solvers(jitted, tree, state):
    """bias_forces = ID(q, qd, 0), gravity_forces = ID(q, 0, 0), method="crba" = ABA,
    minv_times = solve(H, .) for a vector and a matrix, f_ext included where accepted."""
    model = tree
    q, qd, qdd, tau, f_ext = state
    ID, FD = jitted["inverse_dynamics"], jitted["forward_dynamics"]
    z, f0 = jnp.zeros(model.nv), jnp.zeros_like(f_ext)
    assert_allclose(
        jitted["bias_forces"](model, q, qd),
        ID(model, q, qd, z, f0),
        rtol=1e-13,
        atol=1e-13,
        name="bias_forces",
    )
    assert_allclose(
        jitted["gravity_forces"](model, q),
        ID(model, q, z, z, f0),
        rtol=1e-13,
        atol=1e-13,
        name="gravity_forces",
    )
    assert_allclose(
        FD(model, q, qd, tau, f_ext, method="crba"),
        FD(model, q, qd, tau, f_ext),
        rtol=1e-9,
        atol=1e-10,
        name="FD crba vs aba",
    )
    H = np.asarray(jitted["mass_matrix"](model, q))
    mt = jitted["minv_times"]
    assert_allclose(
        mt(model, q, tau), np.linalg.solve(H, tau), rtol=1e-9, atol=1e-10, name="minv_times vector"
    )
    T = np.stack([tau, qd, qdd], axis=1)
    assert_allclose(
        mt(model, q, T), np.linalg.solve(H, T), rtol=1e-9, atol=1e-10, name="minv_times K=3"
    )


def _poses(model, q):
    """World poses of every body at ``integrate(q, dv)``, as functions of ``dv``."""

    def pose(dv):
        return jaxrbd.forward_kinematics(model, jaxrbd.integrate(model, q, dv))

    return pose


@jax.jit
def _pose_jacobians(model, q):
    """``p``, ``R`` and the world-frame linear (``Jp``) and angular (``Jw``) Jacobians of
    every body origin, w.r.t. the velocity ``v`` (tangent coordinates)."""
    pose = _poses(model, q)
    z = jnp.zeros(model.nv, q.dtype)
    R, p = pose(z)
    dR, dp = jax.jacfwd(pose)(z)  # (nb, 3, 3, nv), (nb, 3, nv)
    W = jnp.einsum("bikv,bjk->bijv", dR, R)  # dR R^T, skew
    Jw = jnp.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], axis=1)  # (nb, 3, nv)
    return R, p, dp, Jw


def test_external_forces_are_minus_J_transpose_f(jitted, tree, state):
    """A spatial force [n0; f] (world coordinates, world origin) on body b is a force f at
    the body origin plus the couple n0 - p_b x f, so tau changes by
    -(Jp_b^T f + Jw_b^T (n0 - p_b x f)). Fixed-merged bodies included; row 0 ignored."""
    model = tree
    q, qd, qdd, _, f_ext = state
    ID = jitted["inverse_dynamics"]
    _, p, Jp, Jw = (np.asarray(x) for x in _pose_jacobians(model, q))
    f_ext = np.asarray(f_ext)
    n0, f = f_ext[:, :3], f_ext[:, 3:]
    couple = n0 - np.cross(p, f)
    expected = -(np.einsum("bkv,bk->v", Jp[1:], f[1:]) + np.einsum("bkv,bk->v", Jw[1:], couple[1:]))
    tau0 = ID(model, q, qd, qdd, np.zeros_like(f_ext))
    assert_allclose(
        ID(model, q, qd, qdd, f_ext) - tau0,
        expected,
        rtol=1e-10,
        atol=1e-12,
        name="tau(f_ext) - tau(0)",
    )
    # the world row is ignored
    f_world = f_ext.copy()
    f_world[0] = 100.0
    assert_allclose(
        ID(model, q, qd, qdd, f_world),
        ID(model, q, qd, qdd, f_ext),
        rtol=0,
        atol=0,
        name="f_ext row 0",
    )
    # a force on one fixed-merged body only
    fixed = [b for b in range(1, model.nbodies) if model.joint_kind[b] == "fixed"]
    assert fixed
    one = np.zeros_like(f_ext)
    one[fixed[0]] = f_ext[fixed[0]]
    b = fixed[0]
    expected_b = -(Jp[b].T @ f[b] + Jw[b].T @ couple[b])
    assert_allclose(
        ID(model, q, qd, qdd, one) - tau0,
        expected_b,
        rtol=1e-10,
        atol=1e-12,
        name="f_ext on a fixed-merged body",
    )


def _energy(model, q, qd):
    """Kinetic energy 1/2 qd^T H qd plus potential energy -sum_b m_b g^T c_b."""
    H = jaxrbd.mass_matrix(model, q)
    R, p = jaxrbd.forward_kinematics(model, q)
    m, mc = model.inertia[1:, 0], model.inertia[1:, 1:4]
    mcom = m[:, None] * p[1:] + jnp.einsum("bij,bj->bi", R[1:], mc)  # m_b * c_b (world)
    return 0.5 * qd @ H @ qd - jnp.sum(mcom @ model.gravity)


@jax.jit
def _energy_rate(model, q, qd, qdd):
    """d/dt E along the motion through ``(q, qd)`` with acceleration ``qdd``."""

    def E(t):
        return _energy(model, jaxrbd.integrate(model, q, t * qd), qd + t * qdd)

    return jax.jvp(E, (jnp.zeros((), q.dtype),), (jnp.ones((), q.dtype),))[1]


@pytest.mark.parametrize("name", ["all_kinds", "humanoid"])
def test_energy_balance(jitted, zoo, name):
    """Along the motion produced by tau (forward dynamics), dE/dt = qd . tau with
    E = 1/2 qd^T H qd + V: gravity, Coriolis and mass matrix are mutually consistent."""
    model = zoo[name]
    q, qd, _, tau, _ = _state(model, 11)
    qdd = jitted["forward_dynamics"](model, q, qd, tau)
    assert_allclose(
        _energy_rate(model, q, qd, qdd),
        qd @ tau,
        rtol=1e-9,
        atol=1e-9,
        name=f"dE/dt vs power, {name}",
    )


def test_non_unit_quaternions_are_normalised(jitted, tree, state):
    """Scaling the quaternion blocks of q changes nothing."""
    model = tree
    q, qd, qdd, tau, f_ext = state
    blocks = quaternion_blocks(model)
    assert blocks
    q2 = np.array(q)
    for k, sl in enumerate(blocks):
        q2[sl] *= 0.3 + k  # 0.3, 1.3, ...
    for fname, args in [
        ("forward_dynamics", (qd, tau, f_ext)),
        ("inverse_dynamics", (qd, qdd, f_ext)),
        ("mass_matrix", ()),
        ("forward_kinematics", ()),
    ]:
        f = jitted[fname]
        a, b = f(model, q2, *args), f(model, q, *args)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
            assert_allclose(x, y, rtol=1e-12, atol=1e-12, name=f"{fname} with non-unit quaternions")


def test_nan_in_q_gives_nan_not_an_error(jitted, tree, state):
    """A NaN coordinate of a joint below the root (so that every output depends on it)
    propagates to the outputs instead of raising."""
    model = tree
    q, qd, qdd, tau, f_ext = state
    b = next(
        b
        for b in range(1, model.nbodies)
        if model.body_parent[b] != 0
        and model.joint_kind[b] != "fixed"
        and any(model.body_parent[c] == b for c in range(model.nbodies))
    )
    q = q.at[model.q_index(b).start].set(jnp.nan)
    for fname, args in [
        ("forward_dynamics", (qd, tau, f_ext)),
        ("inverse_dynamics", (qd, qdd, f_ext)),
        ("mass_matrix", ()),
        ("minv_times", (tau,)),
    ]:
        out = np.asarray(jitted[fname](model, q, *args))
        assert np.isnan(out).any(), f"{fname}: NaN in q did not propagate"
    _, p = jitted["forward_kinematics"](model, q)
    assert np.isnan(np.asarray(p)).any()


# ----------------------------------------------------------------------------- configurations


def _canonical(model, q):
    """Quaternion blocks with a non-negative w (q and -q are the same rotation)."""
    q = np.array(q)
    for sl in quaternion_blocks(model):
        if q[sl][0] < 0:
            q[sl] = -q[sl]
    return q


def test_integrate_difference_round_trip(jitted, tree):
    model = tree
    integ, diff = jitted["integrate"], jitted["difference"]
    for seed in range(5):
        q0, v, _, _, _ = _state(model, 100 + seed)  # |rotation| < pi: the log is unique
        q1 = integ(model, q0, v, 1.0)
        assert_allclose(
            diff(model, q0, q1), v, rtol=1e-10, atol=1e-12, name="difference(integrate)"
        )
        q2 = jaxrbd.random_configuration(model, jax.random.key(seed))
        back = integ(model, q0, diff(model, q0, q2), 1.0)
        assert_allclose(
            _canonical(model, back),
            _canonical(model, q2),
            rtol=1e-10,
            atol=1e-12,
            name="integrate(difference)",
        )
        assert_allclose(
            integ(model, q0, v, 0.25),
            integ(model, q0, 0.25 * v, 1.0),
            rtol=1e-14,
            atol=1e-14,
            name="integrate dt scaling",
        )
    q = jaxrbd.neutral_configuration(model)
    assert_allclose(diff(model, q, q), np.zeros(model.nv), atol=1e-15, name="difference(q, q)")
    assert_allclose(integ(model, q, jnp.zeros(model.nv), 1.0), q, atol=0, name="integrate(q, 0)")


def test_quaternions_stay_unit(jitted, tree):
    model = tree
    q = jaxrbd.random_configuration(model, jax.random.key(3))
    v = 50.0 * jax.random.normal(jax.random.key(4), (model.nv,))
    for _ in range(20):
        q = jitted["integrate"](model, q, v, 0.37)
        for sl in quaternion_blocks(model):
            assert abs(float(jnp.linalg.norm(q[sl])) - 1.0) < 1e-13


def test_neutral_and_random_configurations(tree):
    model = tree
    q = np.asarray(jaxrbd.neutral_configuration(model))
    assert q.shape == (model.nq,) and q.dtype == np.float64
    blocks = quaternion_blocks(model)
    mask = np.ones(model.nq, bool)
    for sl in blocks:
        assert_allclose(q[sl], [1.0, 0, 0, 0], atol=0, name="neutral quaternion")
        mask[sl] = False
    assert not q[mask].any()
    r = np.asarray(jaxrbd.random_configuration(model, jax.random.key(0), scale=0.5))
    for sl in blocks:
        assert abs(np.linalg.norm(r[sl]) - 1.0) < 1e-14
        mask[sl] = False
    assert np.abs(r[mask]).max() <= 0.5


# ----------------------------------------------------------------------------- equivalent models


def _expanded_joint(spec):
    """A multi-DoF joint as 1-DoF joints: list of (joint, has_mass)."""
    kind, cols = spec.kind, spec.columns
    if kind.startswith("euler"):
        return [joints.revolute(c[:3]) for c in cols]
    if kind == "translation_xyz":
        return [joints.prismatic(c[3:]) for c in cols]
    out = []  # custom / planar
    for c in cols:
        w, v = c[:3], c[3:]
        if np.linalg.norm(w) == 0:
            out.append(joints.prismatic(v))
        elif np.linalg.norm(v) == 0:
            out.append(joints.revolute(w))
        else:
            out.append(joints.helical(w, float(np.dot(w, v))))
    return out


def _build_pair(specs, seed):
    """A chain with the given multi-DoF joints (each body with mass, a random placement
    and a revolute child) and the same chain with each joint split into 1-DoF joints
    joined by massless bodies. Returns (multi, expanded, names of the massive bodies)."""
    rng = np.random.default_rng(seed)
    multi, expanded = ModelBuilder(), ModelBuilder()
    parent = "world"
    names = []
    for k, spec in enumerate(specs):
        body, place = random_body(rng), random_placement(rng)
        name = f"body{k}"
        multi.add_body(name, parent, spec, body, place)
        sub = _expanded_joint(spec)
        p = parent
        for j, joint in enumerate(sub):
            last = j == len(sub) - 1
            bname = name if last else f"{name}_massless{j}"
            expanded.add_body(bname, p, joint, body if last else Body(), place if j == 0 else None)
            p = bname
        leaf = f"leaf{k}"  # a branch, so the multi-DoF joint carries a subtree
        child = (joints.revolute(rng.normal(size=3)), random_body(rng), random_placement(rng))
        multi.add_body(leaf, name, *child)
        expanded.add_body(leaf, name, *child)
        names += [name, leaf]
        parent = name
    return multi.build(), expanded.build(), names


def test_multi_dof_joints_equal_one_dof_chains(jitted):
    """euler_zyx/xyz/yxz = three revolute joints (z y x / x y z / y x z), translation_xyz =
    three prismatic joints, custom (3 columns) and planar = their columns as 1-DoF joints in
    series, each chain with massless intermediate bodies: same q, qd, tau meaning."""
    rng = np.random.default_rng(0)
    specs = [
        joints.euler_zyx(),
        joints.euler_xyz(),
        joints.euler_yxz(),
        joints.translation_xyz(),
        joints.custom(random_custom_columns(rng, 3)),
        joints.planar(),
    ]
    multi, expanded, names = _build_pair(specs, seed=1)
    assert (multi.nq, multi.nv) == (expanded.nq, expanded.nv)
    ID = jitted["inverse_dynamics"]
    for seed in (5, 6):  # two states: ID is affine in qdd, so H and C agree as well
        q, qd, qdd, _, f_ext = _state(multi, seed)
        f_exp = np.zeros((expanded.nbodies, 6))  # same forces on the same named bodies
        for n in names:
            f_exp[expanded.body_id(n)] = f_ext[multi.body_id(n)]
        tau_m, tau_e = ID(multi, q, qd, qdd, f_ext), ID(expanded, q, qd, qdd, f_exp)
        for b in range(1, multi.nbodies):
            sl = multi.v_index(b)
            assert_allclose(
                tau_m[sl],
                tau_e[sl],
                rtol=1e-11,
                atol=1e-11,
                name=f"ID block of {multi.joint_label[b]} ({multi.body_names[b]})",
            )


def _quat_zyx(a):
    """Quaternion of Rz(a0) Ry(a1) Rx(a2) (w, x, y, z)."""

    def axis_quat(angle, k):
        v = jnp.zeros(3, angle.dtype).at[k].set(jnp.sin(angle / 2))
        return jnp.concatenate([jnp.cos(angle / 2)[None], v])

    def mul(p, r):
        pw, pv, rw, rv = p[0], p[1:], r[0], r[1:]
        return jnp.concatenate([(pw * rw - pv @ rv)[None], pw * rv + rw * pv + jnp.cross(pv, rv)])

    return mul(mul(axis_quat(a[0], 2), axis_quat(a[1], 1)), axis_quat(a[2], 0))


def test_quaternion_joints_equal_euler_joints(jitted):
    """free = translation_xyz + euler_zyx (massless between), spherical = euler_zyx, with
    q mapped through quaternions and v = A(q) qd (body-frame twists), so
    ID_euler(q, qd, qdd) = A^T ID_quat(q', A qd, A qdd + dA/dt qd)."""
    rng = np.random.default_rng(2)
    b_base, b_ball, b_leaf = random_body(rng), random_body(rng), random_body(rng)
    p_ball, p_leaf = random_placement(rng), random_placement(rng)
    axis = rng.normal(size=3)
    e = ModelBuilder()
    e.add_body("slider", "world", joints.translation_xyz())
    e.add_body("base", "slider", joints.euler_zyx(), b_base)
    e.add_body("ball", "base", joints.euler_zyx(), b_ball, p_ball)
    e.add_body("leaf", "ball", joints.revolute(axis), b_leaf, p_leaf)
    s = ModelBuilder()
    s.add_body("base", "world", joints.free(), b_base)
    s.add_body("ball", "base", joints.spherical(), b_ball, p_ball)
    s.add_body("leaf", "ball", joints.revolute(axis), b_leaf, p_leaf)
    me, ms = e.build(), s.build()
    assert me.nv == ms.nv == 10

    def phi(qe):  # euler-model q -> quaternion-model q
        return jnp.concatenate([qe[0:3], _quat_zyx(qe[3:6]), _quat_zyx(qe[6:9]), qe[9:]])

    @jax.jit
    def maps(qe, qde, qdde):
        qs = phi(qe)

        def vel(qe, qde):  # v_s = d/dt difference(qs, phi(qe + t qde))
            return jax.jvp(
                lambda t: jaxrbd.difference(ms, phi(qe), phi(qe + t * qde)),
                (jnp.zeros(()),),
                (jnp.ones(()),),
            )[1]

        A = jax.jacfwd(vel, argnums=1)(qe, qde)
        vs, acc = jax.jvp(vel, (qe, qde), (qde, qdde))
        return qs, A, vs, acc

    ID = jitted["inverse_dynamics"]
    for _ in range(2):  # two states: ID is affine in qdd, so H and C agree as well
        qe = jnp.asarray(rng.uniform(-1, 1, me.nq))
        qde, qdde = jnp.asarray(rng.uniform(-1, 1, 10)), jnp.asarray(rng.uniform(-1, 1, 10))
        qs, A, vs, acc = maps(qe, qde, qdde)
        assert_allclose(
            A.T @ ID(ms, qs, vs, acc),
            ID(me, qe, qde, qdde),
            rtol=1e-10,
            atol=1e-11,
            name="ID free+spherical vs translation+euler",
        )


def test_fixed_joint_merging(jitted):
    """Bodies fixed to a body (two in a row, one with children) behave as one body whose
    inertia is combined by hand; their frames are still reported by forward_kinematics."""
    rng = np.random.default_rng(4)
    b1, b2, b3, b4, b5 = (random_body(rng) for _ in range(5))
    P2, P3, P4, P5 = (random_placement(rng) for _ in range(4))
    a4, a5 = rng.normal(size=3), rng.normal(size=3)
    u = ModelBuilder()
    u.add_body("base", "world", joints.free(), b1)
    u.add_body("plate", "base", joints.fixed(), b2, P2)
    u.add_body("tool", "plate", joints.fixed(), b3, P3)
    u.add_body("arm", "tool", joints.revolute(a4), b4, P4)
    u.add_body("side", "base", joints.helical(a5, 0.1), b5, P5)
    unmerged = u.build()

    def compose(A, B):  # B given in A's frame, A in the parent frame
        (RA, pA), (RB, pB) = A.arrays(), B.arrays()
        return Transform(rotation=RA @ RB, translation=pA + RA @ pB)

    P23 = compose(P2, P3)
    body = combine_bodies(combine_bodies(b1, b2, P2), b3, P23)
    m = ModelBuilder()
    m.add_body("base", "world", joints.free(), body)
    m.add_body("arm", "base", joints.revolute(a4), b4, compose(P23, P4))
    m.add_body("side", "base", joints.helical(a5, 0.1), b5, P5)
    merged = m.build()
    assert (merged.nq, merged.nv) == (unmerged.nq, unmerged.nv) == (9, 8)

    ID, FK = jitted["inverse_dynamics"], jitted["forward_kinematics"]
    for seed in (9, 10):  # two states: ID is affine in qdd, so H and C agree as well
        q, qd, qdd, _, _ = _state(merged, seed)
        assert_allclose(
            ID(unmerged, q, qd, qdd),
            ID(merged, q, qd, qdd),
            rtol=1e-11,
            atol=1e-11,
            name="ID merged vs fixed",
        )
    (Ru, pu), (Rm, pm) = FK(unmerged, q), FK(merged, q)
    for n in ("base", "arm", "side"):
        i, j = unmerged.body_id(n), merged.body_id(n)
        assert_allclose(Ru[i], Rm[j], atol=1e-13, name=f"R of {n}")
        assert_allclose(pu[i], pm[j], atol=1e-13, name=f"p of {n}")
    Rb, pb = np.asarray(Rm[merged.body_id("base")]), np.asarray(pm[merged.body_id("base")])
    for n, P in (("plate", P2), ("tool", P23)):
        R, p = P.arrays()
        i = unmerged.body_id(n)
        assert_allclose(Ru[i], Rb @ R, atol=1e-13, name=f"R of fixed body {n}")
        assert_allclose(pu[i], pb + Rb @ p, atol=1e-13, name=f"p of fixed body {n}")


def _revolute_triple_pendulum():
    """RBDL's triple pendulum written with 1-DoF revolute joints z, y, x and massless
    bodies between them (the model of Felis 2017, Algorithm 4)."""
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    body = Body(0.1, (0.0, 0.0, -1.0), np.eye(3) * 0.1)
    parent = "world"
    for k, z in enumerate((0.0, -1.0, -1.0), start=1):
        b.add_body(
            f"body_{k}_z",
            parent,
            joints.revolute((0, 0, 1)),
            None,
            Transform(translation=(0, 0, z)),
        )
        b.add_body(f"body_{k}_y", f"body_{k}_z", joints.revolute((0, 1, 0)))
        b.add_body(f"body_{k}", f"body_{k}_y", joints.revolute((1, 0, 0)), body)
        parent = f"body_{k}"
    return b.build()


def test_triple_pendulum_variants_agree(jitted, zoo):
    """models.triple_pendulum("euler_zyx") (RBDL's JointTypeEulerZYX) = the "custom"
    variant (columns z, y, x) = a hand-built chain of revolute joints."""
    euler = zoo["triple_pendulum"]
    variants = {
        "custom": jaxrbd.models.triple_pendulum("custom"),
        "revolute": _revolute_triple_pendulum(),
    }
    ID = jitted["inverse_dynamics"]
    for seed in (21, 22):  # two states: ID is affine in qdd, so H and C agree as well
        q, qd, qdd, _, _ = _state(euler, seed)
        ref = ID(euler, q, qd, qdd)
        for name, model in variants.items():
            assert (model.nq, model.nv) == (9, 9)
            assert_allclose(ID(model, q, qd, qdd), ref, rtol=1e-12, atol=1e-12, name=f"ID {name}")
    # at rest and hanging straight down, gravity needs no torque
    z = jnp.zeros(9)
    assert_allclose(ID(euler, z, z, z), z, atol=1e-15, name="gravity at rest")


def test_rotating_pendulum_by_hand(jitted):
    """A single revolute pendulum: H = I_zz + m l^2, g = m g l sin(q), C = 0 (closed form)."""
    m, l, Izz = 1.3, 0.7, 0.05
    b = ModelBuilder(gravity=(0.0, -9.81, 0.0))
    b.add_body(
        "rod",
        "world",
        joints.revolute((0, 0, 1)),
        Body(m, (l, 0.0, 0.0), np.diag([0.01, 0.04, Izz])),
    )
    model = b.build()
    for angle in (-2.0, 0.0, 0.3, 1.5):
        q = jnp.array([angle])
        H = jitted["mass_matrix"](model, q)
        assert_allclose(H, [[Izz + m * l * l]], rtol=1e-14, name="H pendulum")
        g = jitted["gravity_forces"](model, q)
        assert_allclose(g, [m * 9.81 * l * np.cos(angle)], rtol=1e-13, atol=1e-15, name="g")
        assert_allclose(
            jitted["bias_forces"](model, q, jnp.array([3.0])),
            g,
            rtol=1e-13,
            atol=1e-15,
            name="C has no velocity term for one revolute joint",
        )


_ROOT_KINDS = ("free", "spherical", "euler_zyx", "euler_yxz", "translation_xyz")


@pytest.mark.parametrize("root", _ROOT_KINDS)
def test_batched_root_chain_equals_single_state(root):
    """On batches the articulated-body passes handle the nodes of a multi-DoF root joint
    apart (`jaxrbd._aba_root.root_chain`): vmapped forward dynamics (with external forces) and
    `minv_times` with several right-hand sides equal the single-state passes, which do
    not, for every multi-DoF root kind; a fixed-base tree and a world with two children
    keep the plain passes."""
    from jaxrbd._aba_root import root_chain
    from jaxrbd._core.nodes import sched

    model = random_tree(7, 5, kinds=[root, "revolute", "spherical", "fixed", "planar"],
                        parents=[0, 1, 1, 2, 3])
    k = 6 if root == "free" else 3  # nodes of the root joint
    assert root_chain(model, sched(model, 8, batch_width=2), 8) == k
    assert root_chain(model, sched(model, 8), 8) == k  # body-by-body schedule too
    assert root_chain(model, sched(model, 1), 1) == 0  # single states: plain passes
    fixed_base = random_tree(7, 3, kinds=["revolute", "spherical", "free"], parents=[0, 1, 1])
    two_roots = random_tree(7, 3, kinds=["free", "free", "revolute"], parents=[0, 0, 1])
    for m in (fixed_base, two_roots):
        assert root_chain(m, sched(m, 8, batch_width=2), 8) == 0

    states = [_state(model, 40 + i) for i in range(4)]
    Q, QD, _, TAU, F = (jnp.stack(x) for x in zip(*states))
    fd = jax.jit(jax.vmap(jaxrbd.forward_dynamics, in_axes=(None, 0, 0, 0, 0)))
    one = jax.jit(jaxrbd.forward_dynamics)
    qdd = fd(model, Q, QD, TAU, F)
    for i in range(len(states)):
        expected = one(model, Q[i], QD[i], TAU[i], F[i])
        assert_allclose(qdd[i], expected, rtol=1e-11, atol=1e-11, name=f"FD {root} [{i}]")
    H = jax.jit(jaxrbd.mass_matrix)(model, Q[0])
    X = jax.jit(jaxrbd.minv_times)(model, Q[0], TAU.T)  # 4 right-hand sides
    assert_allclose(H @ X, TAU.T, rtol=1e-10, atol=1e-10, name=f"minv_times {root}")
