"""Inertial parameters, the inverse-dynamics regressor and the log-Cholesky map (issue 5).

Compilations dominate: the regressor is jitted once per model structure through the
module-level functions below (single state and vmapped), on the two reference robots,
two small random trees and the `mixed` zoo tree.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import (
    ALL_KINDS,
    assert_allclose,
    curve,
    fd_jvp,
    random_rotation,
    random_state,
    random_tree,
)

import jaxrbd

REG = jax.jit(jaxrbd.inverse_dynamics_regressor)
REG_V = jax.jit(jax.vmap(jaxrbd.inverse_dynamics_regressor, in_axes=(None, 0, 0, 0)))
TO_LC = jax.jit(jaxrbd.to_log_cholesky)
FROM_LC = jax.jit(jaxrbd.from_log_cholesky)
CONSISTENT = jax.jit(jaxrbd.is_physically_consistent)


def _states(model, seed, n):
    states = [random_state(model, jax.random.key(seed + k)) for k in range(n)]
    return [jnp.stack(x) for x in zip(*states)]  # Q, QD, QDD, TAU


def _world_fixed_bodies(model):
    return [b for b in range(model.nbodies) if model.body_node[b] == 0]


def _check_regressor(model, jitted, Q, QD, QDD, name):
    """``Y @ pi == inverse_dynamics`` at every state, and the columns of the world and of
    bodies welded to it are exactly zero."""
    Y = np.asarray(REG_V(model, Q, QD, QDD))
    assert Y.shape == (Q.shape[0], model.nv, model.nbodies * 10)
    pi = np.asarray(jaxrbd.inertial_parameters(model)).ravel()
    for k in range(Q.shape[0]):
        tau = jitted["inverse_dynamics"](model, Q[k], QD[k], QDD[k])
        assert_allclose(Y[k] @ pi, tau, rtol=1e-10, atol=1e-12, name=f"{name}: Y pi [{k}]")
    for b in _world_fixed_bodies(model):
        assert not Y[:, :, 10 * b : 10 * b + 10].any(), f"{name}: body {b} is welded to the world"
    return Y


# ----------------------------------------------------------------------------- regressor


@pytest.mark.parametrize("name", ["panda", "talos"])
def test_regressor_reference_robots(robots, jitted, name):
    """Y @ pi equals Pinocchio's RNEA (reference data) and ours, gravity included; a
    body merged by a fixed joint keeps its own columns (talos: fixed gripper links)."""
    r = robots[name]
    model = r.model
    S = range(3)
    Q = jnp.stack([r.q(s) for s in S])
    QD = jnp.stack([r.v("v", s) for s in S])
    QDD = jnp.stack([r.v("a", s) for s in S])
    Y = _check_regressor(model, jitted, Q, QD, QDD, name)
    pi = np.asarray(model.inertia).ravel()
    for k, s in enumerate(S):
        # float64 against stored Pinocchio output: 1e-9 relative, the suite's default
        assert_allclose(Y[k] @ pi, r.v("rnea", s), rtol=1e-9, name=f"{name} vs pinocchio [{s}]")
    fixed_with_mass = [  # merged into a moving body
        b
        for b in range(1, model.nbodies)
        if model.body_fixed[b] and model.body_node[b] > 0 and model.inertia[b, 0] > 0
    ]
    assert fixed_with_mass, f"{name}: expected fixed-merged bodies with mass"
    for b in fixed_with_mass:
        assert np.abs(Y[:, :, 10 * b]).max() > 0, f"{name}: body {model.body_names[b]} has no columns"


def _tree_with_fixed_chains():
    """Every joint kind, plus a body welded to the world carrying a child, a chain of two
    fixed joints, and joints hanging from fixed bodies."""
    kinds = ["fixed", "revolute", "fixed", "fixed", "spherical", "free", "custom", "helical",
             "euler_xyz", "translation_xyz", "planar", "prismatic", "euler_yxz", "euler_zyx"]
    parents = [0, 0, 2, 3, 4, 0, 6, 1, 5, 9, 7, 3, 12, 8]
    assert set(kinds) == set(ALL_KINDS)
    return random_tree(17, len(kinds), kinds=kinds, parents=parents)


def test_regressor_random_tree(jitted):
    """Y @ pi == inverse_dynamics on a random tree using every joint kind, with bodies
    welded to the world (zero columns) and chains of fixed joints."""
    model = _tree_with_fixed_chains()
    Q, QD, QDD, _ = _states(model, 10, 3)
    Y = _check_regressor(model, jitted, Q, QD, QDD, "every kind")
    assert not Y[:, :, :10].any(), "the world's columns must be zero"
    assert _world_fixed_bodies(model) == [0, 1]


def test_regressor_is_independent_of_parameters(zoo, jitted):
    """Y depends on the state only: for a model with other (physical) inertias, Y is the
    same array and Y @ pi' is that model's inverse dynamics (d tau / d pi == Y is checked
    in `test_model_leaf_gradients`)."""
    model = zoo["mixed"]
    q, qd, qdd, _ = random_state(model, jax.random.key(3))
    theta = jax.random.normal(jax.random.key(4), (model.nbodies, 10))
    pi2 = jnp.concatenate([model.inertia[:1], FROM_LC(theta[1:])])
    model2 = jaxrbd.with_inertial_parameters(model, pi2)
    Y1, Y2 = REG(model, q, qd, qdd), REG(model2, q, qd, qdd)
    np.testing.assert_array_equal(np.asarray(Y1), np.asarray(Y2))
    tau2 = jitted["inverse_dynamics"](model2, q, qd, qdd)
    assert not np.allclose(tau2, jitted["inverse_dynamics"](model, q, qd, qdd))
    assert_allclose(Y2 @ pi2.ravel(), tau2, rtol=1e-10, atol=1e-12, name="Y pi'")


def test_regressor_vmap_and_derivative(zoo):
    """vmap over states equals one state at a time; the derivative of Y along a curve in
    configuration space (through `integrate`) matches central differences."""
    model = zoo["mixed"]
    Q, QD, QDD, _ = _states(model, 20, 3)
    YV = REG_V(model, Q, QD, QDD)
    for k in range(3):
        assert_allclose(YV[k], REG(model, Q[k], QD[k], QDD[k]), rtol=1e-12, atol=1e-13,
                        name=f"vmap [{k}]")
    q, qd, qdd = Q[0], QD[0], QDD[0]
    dv = jax.random.normal(jax.random.key(21), (model.nv,))
    ddq, ddqd = jax.random.normal(jax.random.key(22), (2, model.nv))
    g = curve(model, lambda q, qd, qdd: jaxrbd.inverse_dynamics_regressor(model, q, qd, qdd),
              q, dv, (qd, qdd), (ddq, ddqd))
    _, dY = jax.jit(lambda t: jax.jvp(g, (t,), (jnp.ones_like(t),)))(jnp.zeros((), model.dtype))
    fd = fd_jvp(lambda q, qd, qdd: REG(model, q, qd, qdd), model, q, dv, (qd, qdd), (ddq, ddqd))
    assert np.all(np.isfinite(dY))
    assert_allclose(dY, fd, rtol=1e-6, atol=1e-8, name="dY/dt")


def test_regressor_bad_arguments(zoo):
    model = zoo["triple_pendulum"]
    z = jnp.zeros(model.nv)
    with pytest.raises(ValueError, match=r"q has shape \(8,\), expected \(9,\)"):
        jaxrbd.inverse_dynamics_regressor(model, jnp.zeros(8), z, z)
    with pytest.raises(ValueError, match="qd has shape"):
        jaxrbd.inverse_dynamics_regressor(model, jnp.zeros(model.nq), z[:3], z)
    with pytest.raises(ValueError, match="qdd has shape"):
        jaxrbd.inverse_dynamics_regressor(model, jnp.zeros(model.nq), z, jnp.zeros((9, 1)))
    with pytest.raises(TypeError, match="qdd has dtype complex"):
        jaxrbd.inverse_dynamics_regressor(model, jnp.zeros(model.nq), z, z * 1j)


# ----------------------------------------------------------------------------- parameter vector


def test_inertial_parameters_round_trip(zoo):
    model = zoo["mixed"]
    pi = jaxrbd.inertial_parameters(model)
    assert pi is model.inertia and pi.shape == (model.nbodies, 10)
    pi2 = 1.5 * pi
    a = jaxrbd.with_inertial_parameters(model, pi2)
    b = jaxrbd.with_inertial_parameters(model, pi2.ravel())
    np.testing.assert_array_equal(a.inertia, pi2)
    np.testing.assert_array_equal(b.inertia, pi2)
    np.testing.assert_array_equal(model.inertia, pi)  # the original is untouched
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(model)
    c = jaxrbd.with_inertial_parameters(model, np.ones((model.nbodies, 10), np.int32))
    assert c.inertia.dtype == model.dtype
    # a stack of models (leading axis on every leaf) takes a stack of parameters
    stacked = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), model)
    s = jaxrbd.with_inertial_parameters(stacked, jnp.stack([pi, pi2]).reshape(2, -1))
    np.testing.assert_array_equal(s.inertia[1], pi2)


def test_with_inertial_parameters_errors(zoo):
    model = zoo["mixed"]
    nb = model.nbodies
    with pytest.raises(ValueError, match=rf"pi has shape \({nb}, 9\), expected \({nb}, 10\)"):
        jaxrbd.with_inertial_parameters(model, jnp.zeros((nb, 9)))
    with pytest.raises(ValueError, match="pi has shape"):
        jaxrbd.with_inertial_parameters(model, jnp.zeros(nb * 10 + 1))
    with pytest.raises(TypeError, match="pi has dtype complex"):
        jaxrbd.with_inertial_parameters(model, jnp.zeros((nb, 10), complex))
    with pytest.raises(TypeError, match="pi"):
        jaxrbd.with_inertial_parameters(model, None)


# ----------------------------------------------------------------------------- log-Cholesky


def _random_physical(rng, n):
    """``n`` rows of random physical parameters: masses over four decades, principal
    second moments of the mass distribution (> 0) over three, random orientation and CoM."""
    rows = []
    for _ in range(n):
        m = 10.0 ** rng.uniform(-2, 2)
        c = rng.uniform(-0.5, 0.5, 3)
        a, b, cc = m * 10.0 ** rng.uniform(-4, -1, 3)
        R = random_rotation(rng)
        Ic = R @ np.diag([b + cc, a + cc, a + b]) @ R.T
        Io = Ic + m * (c @ c * np.eye(3) - np.outer(c, c))  # parallel axis, body origin
        rows.append([m, *(m * c), Io[0, 0], Io[0, 1], Io[1, 1], Io[0, 2], Io[1, 2], Io[2, 2]])
    return np.array(rows)


def _pseudo_inertia(pi):
    m, h = pi[..., 0], pi[..., 1:4]
    xx, xy, yy, xz, yz, zz = (pi[..., k] for k in range(4, 10))
    Ibar = np.stack([np.stack([xx, xy, xz], -1), np.stack([xy, yy, yz], -1),
                     np.stack([xz, yz, zz], -1)], -2)
    Sigma = 0.5 * np.trace(Ibar, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - Ibar
    top = np.concatenate([Sigma, h[..., :, None]], -1)
    bottom = np.concatenate([h, m[..., None]], -1)[..., None, :]
    return np.concatenate([top, bottom], -2)


def _row_scale(pi):
    return np.maximum(np.abs(pi).max(-1, keepdims=True), 1e-300)


def test_log_cholesky_round_trip_random():
    """pi -> theta -> pi on random physical bodies, and theta -> pi -> theta on random
    coordinates; theta = [log m / 2, ..., c]."""
    rng = np.random.default_rng(0)
    pi = _random_physical(rng, 400)
    theta = np.asarray(TO_LC(pi))
    assert np.all(np.isfinite(theta))
    assert np.asarray(CONSISTENT(pi)).all()
    back = np.asarray(FROM_LC(theta))
    err = np.abs(back - pi) / _row_scale(pi)
    assert err.max() < 1e-12, f"pi round trip: relative error {err.max():.3e}"
    assert_allclose(theta[:, 0], 0.5 * np.log(pi[:, 0]), rtol=1e-14, name="alpha")
    assert_allclose(theta[:, 7:], pi[:, 1:4] / pi[:, :1], rtol=1e-14, name="t = c")
    # moderate spreads of the pivots: the round trip loses about cond(J) * eps
    th = rng.normal(scale=0.5, size=(400, 10))
    assert_allclose(TO_LC(FROM_LC(th)), th, rtol=1e-10, atol=1e-10, name="theta round trip")


def test_log_cholesky_round_trip_robots(robots):
    """The robots' bodies with mass round-trip; the only ones without log-Cholesky
    coordinates are talos' three point masses (zero rotational inertia)."""
    for name in ("panda", "talos"):
        model = robots[name].model
        pi = np.asarray(model.inertia)
        ok = np.asarray(CONSISTENT(pi))
        point = (pi[:, 0] > 0) & ~np.any(pi[:, 4:], axis=-1)
        np.testing.assert_array_equal(ok, (pi[:, 0] > 0) & ~point, err_msg=name)
        assert not ok[0]
        theta = np.asarray(TO_LC(pi))
        assert np.all(np.isfinite(theta[ok])) and np.all(np.isnan(theta[~ok]))
        back = np.asarray(FROM_LC(theta[ok]))
        err = np.abs(back - pi[ok]) / _row_scale(pi[ok])
        assert err.max() < 1e-12, f"{name}: relative error {err.max():.3e}"
    assert point.sum() == 3  # talos: rgbd_optical_frame and the two wrist tool links


def test_random_theta_is_physically_consistent():
    """Any theta gives m > 0, a positive definite pseudo-inertia, and principal moments
    about the CoM that are positive and satisfy the triangle inequalities (checked here
    with numpy eigenvalues, independently of the library's Cholesky test)."""
    rng = np.random.default_rng(1)
    theta = rng.normal(scale=2.0, size=(300, 10))
    theta[:, 1:4] = rng.uniform(-4.0, 4.0, size=(300, 3))  # very flat and thin bodies
    pi = np.asarray(FROM_LC(theta))
    assert np.all(np.isfinite(pi)) and np.all(pi[:, 0] > 0)
    assert np.asarray(CONSISTENT(pi)).all()
    J = _pseudo_inertia(pi)
    assert np.all(np.linalg.eigvalsh(J)[:, 0] > 0)
    # rotational inertia about the CoM: Ic = Io - m (|c|^2 1 - c c^T)
    m, c = pi[:, 0], pi[:, 1:4] / pi[:, :1]
    Sig_c = J[:, :3, :3] - m[:, None, None] * c[:, :, None] * c[:, None, :]
    Ic = np.trace(Sig_c, axis1=1, axis2=2)[:, None, None] * np.eye(3) - Sig_c
    I1, I2, I3 = np.linalg.eigvalsh(Ic).T
    assert np.all(I1 > 0) and np.all(I1 + I2 > I3)


def test_inconsistent_rows():
    """Rows without log-Cholesky coordinates give False and NaN; valid rows are unaffected."""
    good = _random_physical(np.random.default_rng(2), 1)[0]

    def row(m, Ic, c=(0.1, -0.2, 0.3)):
        c = np.asarray(c)
        Io = np.asarray(Ic, float) + m * (c @ c * np.eye(3) - np.outer(c, c))
        return [m, *(m * c), Io[0, 0], Io[0, 1], Io[1, 1], Io[0, 2], Io[1, 2], Io[2, 2]]

    bad = np.array(
        [
            np.zeros(10),  # massless (the world)
            row(-1.0, np.eye(3)),  # negative mass
            row(1.0, np.diag([1.0, 1.0, 3.0])),  # triangle inequality violated
            row(1.0, np.diag([1.0, 1.0, 2.0])),  # on the boundary: a flat plate
            row(1.0, np.zeros((3, 3))),  # point mass
            row(1.0, np.diag([0.0, 1.0, 1.0])),  # thin rod
            row(1.0, np.diag([-0.1, 1.0, 1.0])),  # negative principal moment
        ]
    )
    pi = np.concatenate([bad, good[None]])
    ok = np.asarray(CONSISTENT(pi))
    np.testing.assert_array_equal(ok, [False] * len(bad) + [True])
    theta = np.asarray(TO_LC(pi))
    assert np.all(np.isnan(theta[:-1])) and np.all(np.isfinite(theta[-1]))
    assert_allclose(FROM_LC(theta[-1]), good, rtol=1e-12, name="valid row")
    # integers are accepted (converted to the default float)
    assert bool(jaxrbd.is_physically_consistent(np.array([1, 0, 0, 0, 2, 0, 2, 0, 0, 2])))


def test_log_cholesky_gradients(zoo):
    """Gradients through both maps are finite, also with masked-out (NaN) rows, and
    match central differences."""
    model = zoo["mixed"]
    pi = model.inertia  # row 0, the world, is massless: NaN coordinates

    def loss(pi):
        theta = jaxrbd.to_log_cholesky(pi)
        ok = jaxrbd.is_physically_consistent(pi)
        return jnp.sum(jnp.where(ok[:, None], jnp.sin(theta), 0.0))

    g = jax.jit(jax.grad(loss))(pi)
    assert np.all(np.isfinite(g)) and not np.asarray(g[0]).any() and np.asarray(g[1:]).any()
    d = jax.random.normal(jax.random.key(5), pi.shape).at[0].set(0.0) * 1e-2
    eps = 1e-6
    fd = (loss(pi + eps * d) - loss(pi - eps * d)) / (2 * eps)
    assert_allclose(jnp.sum(g * d), fd, rtol=1e-6, name="d loss(to_log_cholesky)")

    def loss2(theta):
        return jnp.sum(jnp.cos(jaxrbd.from_log_cholesky(theta)))

    theta = jax.random.normal(jax.random.key(6), (5, 10))
    g2 = jax.jit(jax.grad(loss2))(theta)
    d2 = jax.random.normal(jax.random.key(7), theta.shape)
    fd2 = (loss2(theta + eps * d2) - loss2(theta - eps * d2)) / (2 * eps)
    assert np.all(np.isfinite(g2))
    assert_allclose(jnp.sum(g2 * d2), fd2, rtol=1e-6, name="d loss(from_log_cholesky)")


def test_log_cholesky_bad_arguments():
    with pytest.raises(ValueError, match=r"pi has shape \(9,\), expected \(\.\.\., 10\)"):
        jaxrbd.to_log_cholesky(jnp.zeros(9))
    with pytest.raises(ValueError, match=r"theta has shape \(2, 3\)"):
        jaxrbd.from_log_cholesky(jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="pi has shape"):
        jaxrbd.is_physically_consistent(jnp.zeros(()))
    with pytest.raises(TypeError, match="pi has dtype complex"):
        jaxrbd.is_physically_consistent(jnp.zeros(10, complex))
    with pytest.raises(TypeError, match="theta has dtype bool"):
        jaxrbd.from_log_cholesky(np.zeros(10, bool))


# ----------------------------------------------------------------------------- model leaves


def test_model_leaf_gradients(zoo, jitted):
    """`jax.grad` of a scalar of inverse_dynamics + forward_dynamics w.r.t. the joint
    placements (link lengths), gravity and the inertias matches central differences, and
    the inertia gradient equals its closed form through the regressor. (One reverse-mode
    compilation for both: reverse mode through the ABA dominates this file's compile time.)"""
    model = zoo["mixed"]
    q, qd, qdd, tau = random_state(model, jax.random.key(8))
    w = jax.random.normal(jax.random.key(9), (2, model.nv))

    def terms(m, id_fn, fd_fn):
        return jnp.dot(w[0], id_fn(m, q, qd, qdd)), jnp.dot(w[1], fd_fn(m, q, qd, tau))

    def loss(m):
        a, b = terms(m, jaxrbd.inverse_dynamics, jaxrbd.forward_dynamics)
        return a + b

    grad = jax.jit(jax.grad(loss))(model)
    eps = 1e-6
    for k, leaf in enumerate(("Xtree_r", "gravity", "inertia")):
        get = lambda m, leaf=leaf: getattr(m, leaf)
        d = jax.random.normal(jax.random.key(30 + k), get(model).shape)
        if leaf == "inertia":
            d = d * 0.1 * jnp.abs(model.inertia).max(axis=1, keepdims=True)
        plus = eqx.tree_at(get, model, get(model) + eps * d)
        minus = eqx.tree_at(get, model, get(model) - eps * d)
        jit_terms = (jitted["inverse_dynamics"], jitted["forward_dynamics"])
        fd = (np.asarray(terms(plus, *jit_terms)) - np.asarray(terms(minus, *jit_terms))) / (2 * eps)
        g = np.asarray(get(grad))
        assert np.all(np.isfinite(g)) and g.any(), f"grad {leaf}"
        assert_allclose(np.sum(g * d), fd.sum(), rtol=1e-6, atol=1e-9, name=f"d/d {leaf}")
        # each term moves on its own (neither is constant along d)
        assert np.all(np.abs(fd) > 1e-6), f"{leaf}: {fd}"
    # Closed forms through the regressor: d(w0 . ID)/d pi = w0^T Y(q, qd, qdd), and since
    # Y(q, qd, FD(pi)) pi = tau for all pi, d(w1 . FD)/d pi = -(H^-1 w1)^T Y(q, qd, FD).
    Y = REG(model, q, qd, qdd)
    qdd_fd = jitted["forward_dynamics"](model, q, qd, tau)
    Yfd = REG(model, q, qd, qdd_fd)
    lam = jitted["minv_times"](model, q, w[1])  # H^-1 w1 (H symmetric)
    expected = w[0] @ Y - lam @ Yfd
    assert_allclose(grad.inertia.ravel(), expected, rtol=1e-9, atol=1e-12, name="Y^T (w0 - H^-1 w1)")
