"""jaxrbd.identification on synthetic recordings from a model with known parameters."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrbd
from jaxrbd import identification as ident

NV = 3
FM = ident.FrictionModel(armature=True, viscous=True, coulomb=True, offset=True,
                         coulomb_width=0.02)


def _build():
    """A 3-DoF spatial arm (modified DH, non-parallel axes) with limits and friction."""
    bodies = [
        jaxrbd.Body(2.0, (0.02, 0.01, 0.1), np.diag([0.02, 0.025, 0.01])),
        jaxrbd.Body(1.5, (0.2, 0.02, -0.01), np.diag([0.004, 0.03, 0.03])),
        jaxrbd.Body(0.8, (0.1, -0.01, 0.02), np.diag([0.002, 0.01, 0.011])),
    ]
    links = np.array([[0.0, 0.0, 0.3, 0.0], [0.05, -np.pi / 2, 0.0, 0.0],
                      [0.4, 0.0, 0.05, 0.0]])
    m = jaxrbd.dh_model(links, "modified", bodies=bodies)
    m = eqx.tree_at(lambda m: (m.q_lower, m.q_upper, m.armature, m.damping, m.friction), m,
                    (jnp.full(NV, -2.5), jnp.full(NV, 2.5), jnp.array([0.05, 0.03, 0.01]),
                     jnp.array([0.5, 0.3, 0.2]), jnp.array([0.8, 0.6, 0.3])))
    return m


@pytest.fixture(scope="module")
def arm():
    return _build()


# one compile per shape instead of one per operation (eager JAX compiles each op)
_fourier = jax.jit(ident.fourier_trajectory)


def _trajectory(seed, n=800, duration=20.0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(NV, 4)) * 0.35
    b = rng.normal(size=(NV, 4)) * 0.35
    t = np.linspace(0.0, duration, n)
    q, qd, qdd = _fourier(a, b, np.zeros(NV), 2 * np.pi / 10.0, t)
    return t, np.asarray(q), np.asarray(qd), np.asarray(qdd)


@pytest.fixture(scope="module")
def data(arm):
    """Training/validation trajectories, their regressors and true torques."""
    p_true = np.array(ident.standard_parameters(arm, FM))
    p_true[-NV:] = [0.2, -0.1, 0.05]  # offsets
    out = {"p_true": p_true}
    for name, seed in (("train", 0), ("val", 1)):
        t, q, qd, qdd = _trajectory(seed)
        Y = ident.stacked_regressor(arm, FM, q, qd, qdd)
        out[name] = (t, q, qd, qdd, Y, Y @ p_true)
    return out


@pytest.fixture(scope="module")
def base(arm):
    return ident.base_parameters(arm, FM, n_samples=300)


# ---------------------------------------------------------------------- recordings


def test_recording_errors(arm):
    t = np.linspace(0.0, 1.0, 11)
    q = np.zeros((11, NV))
    with pytest.raises(ValueError, match="tau has 10 samples but t has 11"):
        ident.Recording.from_arrays(t, q, tau=np.zeros((10, NV)))
    bad = q.copy()
    bad[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"q has NaN or infinite values in 1 samples .*index 4"):
        ident.Recording.from_arrays(t, bad)
    t2 = t.copy()
    t2[5] = t2[4]
    with pytest.raises(ValueError, match=r"t is not strictly increasing: t\[4\]"):
        ident.Recording.from_arrays(t2, q)
    with pytest.raises(ValueError, match=r"qd has shape \(11, 2\), expected \(T, 3\)"):
        ident.Recording.from_arrays(t, q, qd=np.zeros((11, 2)))
    rec = ident.Recording.from_arrays(t, q, joint_names=["joint1", "elbow", "joint3"])
    with pytest.raises(ValueError, match=r"joints \['elbow'\] are not in the model"):
        rec.for_model(arm)
    with pytest.raises(ValueError, match="3 joint_names for 2 columns"):
        ident.Recording.from_arrays(t, q[:, :2], joint_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="not uniformly sampled"):
        ident.Recording.from_arrays(np.r_[0.0, 0.1, 0.3, 0.4], np.zeros((4, 1))).lowpass(1.0)


def test_recording_reorders_by_joint_name(arm):
    t = np.linspace(0.0, 1.0, 5)
    q = np.arange(15.0).reshape(5, 3)
    rec = ident.Recording.from_arrays(t, q, tau=-q, joint_names=["joint3", "joint1", "joint2"])
    r = rec.for_model(arm)
    assert r.joint_names == arm.joint_names
    np.testing.assert_array_equal(r.q, q[:, [1, 2, 0]])
    np.testing.assert_array_equal(r.tau, -q[:, [1, 2, 0]])


def test_filter_matches_filtfilt_and_derivatives():
    signal = pytest.importorskip("scipy.signal")
    rng = np.random.default_rng(0)
    fs = 200.0
    t = np.arange(3000) / fs
    x = np.stack([np.sin(1.3 * t), np.cos(0.4 * t) + 0.2 * t], 1) + 0.01 * rng.normal(size=(3000, 2))
    y = ident.butterworth_filtfilt(x, 10.0, fs, 4)
    b, a = signal.butter(4, 10.0 / (fs / 2))
    ref = signal.filtfilt(b, a, x, axis=0)
    np.testing.assert_allclose(y[200:-200], ref[200:-200], atol=1e-9)
    # resample (irregular -> uniform), filter, differentiate: a known sine
    tt = np.sort(rng.uniform(0.0, 10.0, 4000))
    tt[0], tt[-1] = 0.0, 10.0
    rec = ident.Recording.from_arrays(tt, np.sin(2.0 * tt)[:, None])
    r = rec.prepared(5.0, rate=200.0)
    assert r.is_uniform() and abs(r.rate - 200.0) < 1e-6
    np.testing.assert_allclose(r.qd[50:-50, 0], 2 * np.cos(2 * r.t[50:-50]), atol=2e-3)
    np.testing.assert_allclose(r.qdd[50:-50, 0], -4 * np.sin(2 * r.t[50:-50]), atol=2e-2)


def test_recording_io_split_trim(tmp_path, arm):
    t = np.linspace(0.0, 2.0, 21)
    q = np.stack([np.sin(t), np.cos(t), t], 1)
    path = tmp_path / "log.csv"
    header = "time," + ",".join(f"q_{j}" for j in arm.joint_names) + "," + ",".join(
        f"effort_{j}" for j in arm.joint_names)
    np.savetxt(path, np.concatenate([t[:, None], q, 2 * q], 1), delimiter=",", header=header,
               comments="")
    rec = ident.Recording.from_csv(path, time="time", joint_names=arm.joint_names,
                                   columns={"tau": "effort"})
    np.testing.assert_allclose(rec.tau, 2 * q)
    np.savez(tmp_path / "log.npz", times=t, positions=q, torques=2 * q)
    rec2 = ident.Recording.from_npz(tmp_path / "log.npz")
    np.testing.assert_allclose(rec2.q, q)
    a, b = rec2.split(1.0)
    assert a.n_samples + b.n_samples == 21 and b.t[0] == pytest.approx(1.0)
    assert rec2.trim(2, 3).n_samples == 16
    stacked = ident.concatenate_recordings([a, b])
    np.testing.assert_allclose(stacked["q"], q)
    # split by excitation: the fastest samples (speed and acceleration) validate
    moving = ident.Recording.from_arrays(t, q, qd=np.cos(3 * t)[:, None] * [1.0, 2.0, 0.0],
                                         qdd=np.zeros_like(q), tau=2 * q)
    calm, fast = moving.split_by_excitation(0.3)
    assert (calm.n_samples, fast.n_samples) == (15, 6)
    assert np.abs(fast.qd[:, 0]).min() >= np.abs(calm.qd[:, 0]).max()
    assert np.all(np.diff(fast.t) > 0) and set(calm.t) | set(fast.t) == set(t)
    np.testing.assert_allclose(fast.tau, 2 * fast.q)
    with pytest.raises(ValueError, match="needs qd and qdd"):
        rec2.split_by_excitation()
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\)"):
        moving.split_by_excitation(1.0)
    with pytest.raises(ValueError, match="no current"):
        rec2.with_drive_gains(2.0)
    cur = ident.Recording.from_arrays(t, q, current=q).with_drive_gains([1.0, 2.0, 3.0])
    np.testing.assert_allclose(cur.tau, q * [1.0, 2.0, 3.0])


def test_shift_and_estimate_delay(arm, base, data):
    """A torque logged ``3 dt`` late: `estimate_delay` finds the delay on the training
    recording alone, and `Recording.shift` pairs each torque with its motion again."""
    t = data["train"][0]
    dt = t[1] - t[0]
    delay = 3 * dt
    # the motion from t[3] on, with the torque of the motion 3 samples earlier
    t0, q0, qd0, qdd0 = _trajectory(0, n=len(t) + 3, duration=t[-1] + delay)
    Y0 = ident.stacked_regressor(arm, FM, q0, qd0, qdd0)
    tau0 = (Y0 @ data["p_true"]).reshape(-1, NV)
    tau_late = tau0[:-3] + 1e-3 * np.random.default_rng(2).normal(size=(len(t), NV))
    q = q0[3:]
    rec = ident.Recording.from_arrays(t0[3:], q, qd0[3:], qdd0[3:], tau_late)
    est = ident.estimate_delay(arm, FM, rec, np.arange(-2, 7) * dt, base=base)
    assert est.delay == pytest.approx(delay)
    k = int(np.argmin(est.validation_error))
    assert est.validation_error[k] < 1e-2 < est.validation_error[k - 2]
    assert est.validation_error[k] < est.validation_error[k + 1]
    moved = rec.shift(est.delay)
    assert moved.n_samples == len(t) - 3 and moved.t[-1] == rec.t[-4]
    np.testing.assert_allclose(moved.q, q[:-3])
    np.testing.assert_allclose(moved.tau, tau0[3:-3], atol=5e-3)
    with pytest.warns(UserWarning, match="at the end of the candidates"):
        ident.estimate_delay(arm, FM, rec, np.arange(-2, 2) * dt, base=base)
    with pytest.raises(ValueError, match="no tau"):
        ident.estimate_delay(arm, FM, rec.replace(tau=None), base=base)
    with pytest.raises(ValueError, match="split"):
        ident.estimate_delay(arm, FM, rec, base=base, split=1.0)
    with pytest.raises(ValueError, match="leaves fewer than 2 samples"):
        rec.shift(2 * t[-1])
    with pytest.raises(ValueError, match="unknown signals"):
        rec.shift(dt, signals=("torque",))


# ---------------------------------------------------------------------- joint models


def test_regressor_reproduces_dynamics_and_friction(arm, data):
    t, q, qd, qdd, Y, tau = data["train"]
    k = 123
    p = data["p_true"]
    tau_rb = jax.jit(jaxrbd.inverse_dynamics)(arm, q[k], qd[k], qdd[k])  # with the armature
    fr = (arm.damping * qd[k] + arm.friction * jnp.tanh(qd[k] / FM.coulomb_width)
          + p[-NV:])
    np.testing.assert_allclose(tau[k * NV:(k + 1) * NV], tau_rb + fr, rtol=1e-10, atol=1e-10)
    names = FM.column_names(arm)
    assert len(names) == Y.shape[1] and names[-1] == "joint3.offset"


def test_nonlinear_friction_fit():
    # the measurements are made inside the jitted fits: evaluated eagerly, each of their
    # operations would compile on its own
    v = jnp.linspace(-1.5, 1.5, 61)
    true = jnp.array([0.55, 5.1, 0.04])
    x, cost, it = jax.jit(lambda x0: ident.fit_residual(
        lambda x: ident.sigmoid_friction(v, *x) - ident.sigmoid_friction(v, *true), x0))(
            jnp.array([0.3, 3.0, 0.0]))
    np.testing.assert_allclose(x, true, rtol=1e-7)
    st = jnp.array([0.4, 0.7, 0.05, 0.1])
    x, _, _ = jax.jit(lambda x0: ident.fit_residual(
        lambda x: ident.stribeck_friction(v, *x) - ident.stribeck_friction(v, *st), x0))(
            jnp.array([0.3, 0.5, 0.1, 0.0]))
    np.testing.assert_allclose(x, st, rtol=1e-6)
    # exact gradients with respect to the parameters (no finite differences)
    g = jax.jit(jax.grad(lambda p: jnp.sum(ident.sigmoid_friction(v, *p) ** 2)))(true)
    assert np.all(np.isfinite(g)) and np.any(g != 0)


def test_payload(arm):
    pay = jaxrbd.Body(0.5, (0.05, 0.0, 0.0), np.eye(3) * 1e-3)
    heavy = ident.add_payload(arm, "link3", pay)
    q, qd = jnp.array([0.1, 0.5, -0.3]), jnp.array([0.2, -0.1, 0.3])
    Y = jax.jit(jaxrbd.inverse_dynamics_regressor)(arm, q, qd, qd)
    b = arm.body_id("link3")
    rnea = jax.jit(jaxrbd.inverse_dynamics)
    d = rnea(heavy, q, qd, qd) - rnea(arm, q, qd, qd)
    np.testing.assert_allclose(d, Y[:, 10 * b:10 * b + 10] @ ident.payload_parameters(pay),
                               atol=1e-12)


# ---------------------------------------------------------------------- base parameters


def test_base_parameters(arm, base, data):
    _, _, _, _, Y, _ = data["train"]
    assert base.n_base == np.linalg.matrix_rank(Y)
    p = np.random.default_rng(3).normal(size=Y.shape[1])
    np.testing.assert_allclose(Y @ p, base.columns(Y) @ base.to_base(p), rtol=1e-9, atol=1e-9)
    p2 = base.from_base(base.to_base(p))
    np.testing.assert_allclose(base.to_base(p2), base.to_base(p), atol=1e-10)
    assert base.condition > 1 and len(base.names) == base.n_base
    # the world's columns and the first link's inert ones are never independent
    assert all(i >= 10 for i in base.independent)
    R, perm, rank = ident.pivoted_qr(Y)
    assert rank == base.n_base
    assert np.all(np.abs(np.diff(np.abs(np.diag(R))[:rank])) >= -1e-9 * abs(R[0, 0]))


def test_least_squares_noiseless_and_noisy(arm, base, data):
    _, _, _, _, Y, tau = data["train"]
    pb_true = base.to_base(data["p_true"])
    ols = ident.least_squares(Y, tau, base, nv=NV)
    np.testing.assert_allclose(ols.base, pb_true, rtol=1e-8, atol=1e-8)
    # noise: estimates within 3 standard deviations for >= 95 % of parameters over seeds
    inside, total = 0, 0
    sigma = np.array([0.05, 0.03, 0.01])
    for seed in range(6):
        noise = np.random.default_rng(10 + seed).normal(size=tau.shape).reshape(-1, NV) * sigma
        res = ident.weighted_least_squares(Y, tau + noise.ravel(), base, nv=NV)
        z = np.abs(res.base - pb_true) / res.std
        inside += int(np.sum(z <= 3.0))
        total += z.size
        np.testing.assert_allclose(res.joint_sigma, sigma, rtol=0.15)
    assert inside / total >= 0.95, inside / total


def test_least_squares_errors(base, data):
    _, _, _, _, Y, tau = data["train"]
    with pytest.raises(ValueError, match="Y has shape"):
        ident.least_squares(Y, tau[:-3], base, nv=NV)
    with pytest.raises(ValueError, match="rank deficient"):
        ident.least_squares(Y[:NV], tau[:NV], base, nv=NV)


# ---------------------------------------------------------------------- consistent fit


def test_consistent_fit_recovers_torques_and_is_consistent(arm, data):
    _, _, _, _, Y, tau = data["train"]
    _, _, _, _, Yv, tauv = data["val"]
    # a prior 30 % off in every inertial parameter, friction unknown (zeros)
    prior = eqx.tree_at(lambda m: (m.inertia, m.armature, m.damping, m.friction), arm,
                        (arm.inertia * 1.3, jnp.zeros(NV), jnp.zeros(NV), jnp.zeros(NV)))
    noise = np.random.default_rng(5).normal(size=tau.shape) * 0.02
    fit = ident.consistent_fit(prior, Y, tau + noise, FM, prior_weight=1e-2)
    err = np.linalg.norm(Yv @ np.asarray(fit.params) - tauv) / np.linalg.norm(tauv)
    assert err < 5e-3, err
    assert bool(jnp.all(jaxrbd.is_physically_consistent(fit.model.inertia[np.array(fit.bodies)])))
    strong = ident.consistent_fit(prior, Y, tau + noise, FM, prior_weight=1e12)
    np.testing.assert_allclose(strong.model.inertia, prior.inertia, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(fit.model.damping, arm.damping, rtol=0.05)
    # dissipative by default: positive friction is recovered as it is, no bound active
    assert fit.at_bound == ()
    with pytest.raises(ValueError, match="prior_weight must be > 0"):
        ident.consistent_fit(prior, Y, tau, FM, prior_weight=0.0)
    with pytest.raises(ValueError, match="columns, expected"):
        ident.consistent_fit(prior, Y[:, :-1], tau, FM)


def test_consistent_fit_holds_friction_dissipative(arm, data):
    """Torques that ask for a negative viscous (anti-damping) and a negative Coulomb
    coefficient: the default fit holds both exactly at 0, where the data term's gradient
    pushes outwards (a KKT point); ``dissipative=False`` recovers the negative values."""
    _, _, _, _, Y, _ = data["train"]
    nb = arm.nbodies
    p = data["p_true"].copy()
    k_visc, k_coul = 10 * nb + NV + 1, 10 * nb + 2 * NV + 2  # joint 2 viscous, 3 Coulomb
    p[k_visc], p[k_coul] = -0.3, -0.2
    tau = Y @ p + np.random.default_rng(5).normal(size=len(Y)) * 0.02
    prior = eqx.tree_at(lambda m: (m.armature, m.damping, m.friction), arm,
                        (jnp.zeros(NV), jnp.zeros(NV), jnp.zeros(NV)))
    held = ident.consistent_fit(prior, Y, tau, FM, prior_weight=1e-2)
    names = FM.column_names(arm)
    assert {names[k_visc], names[k_coul]} <= set(held.at_bound), held.at_bound
    ph = np.asarray(held.params)
    assert ph[k_visc] == 0.0 and ph[k_coul] == 0.0
    assert np.all(ph[10 * nb:10 * nb + 3 * NV] >= 0.0)  # armature, viscous, Coulomb
    assert np.all(np.asarray(held.model.damping) >= 0) and np.all(held.model.friction >= 0)
    w = np.tile(1.0 / held.joint_sigma, len(Y) // NV)
    grad = 2.0 * (Y * w[:, None]).T @ (w * (Y @ ph - tau))
    at = [names.index(n) for n in held.at_bound]
    assert np.all(grad[at] > 0), grad[at]
    free = ident.consistent_fit(prior, Y, tau, FM, prior_weight=1e-2, dissipative=False)
    assert free.at_bound == ()
    np.testing.assert_allclose(np.asarray(free.params)[[k_visc, k_coul]], [-0.3, -0.2],
                               atol=0.01)
    assert free.cost < held.cost
    with pytest.raises(ValueError, match=r"start is below the lower bounds.*joint2.viscous"):
        ident.consistent_fit(prior, Y, tau, FM, start=np.asarray(free.params))
    # bounds in the general nonlinear least squares too
    x, _, _ = jax.jit(lambda lo: ident.fit_residual(
        lambda x: jnp.array([x[0] + 1.0, x[1] - 2.0]), jnp.zeros(2), lower=lo))(
        jnp.array([0.0, -jnp.inf]))
    np.testing.assert_allclose(x, [0.0, 2.0], atol=1e-12)


def test_consistent_fit_recovers_nonlinear_friction(arm, data):
    """Stribeck and sigmoid (Gaz et al. 2019) friction as differentiable parameters of the
    physically consistent fit: recovered from torques of a model with known values."""
    _, _, qd, _, Y, tau = data["train"]
    _, _, qdv, _, Yv, tauv = data["val"]
    sigma = np.full(NV, 0.01)
    # friction unknown: the prior has none; its inertias are right, so the prior term
    # does not bias the noiseless optimum
    prior = eqx.tree_at(lambda m: (m.armature, m.damping, m.friction), arm,
                        (jnp.zeros(NV), jnp.zeros(NV), jnp.zeros(NV)))
    st = ident.NonlinearFriction("stribeck", width=FM.coulomb_width)
    theta = np.array([[0.4, 0.15], [0.3, 0.1], [0.25, 0.2]])  # fs - fc, vs
    fit = ident.consistent_fit(prior, Y, tau + jax.jit(lambda v, x: st(v, x))(qd, theta).ravel(), FM, prior_weight=1e-3,
                               nonlinear=st, qd=qd, joint_sigma=sigma)
    np.testing.assert_allclose(fit.nonlinear_params, theta, rtol=1e-6)
    np.testing.assert_allclose(fit.model.friction, arm.friction, rtol=1e-6)
    np.testing.assert_allclose(fit.model.damping, arm.damping, rtol=1e-6)
    # the linear Coulomb and viscous columns and the excess make `stribeck_friction`
    fc, fv = np.asarray(arm.friction)[None], np.asarray(arm.damping)[None]
    full = jax.jit(ident.stribeck_friction)(qdv, fc, fc + theta[None, :, 0], theta[None, :, 1], fv,
                                   FM.coulomb_width)
    expected = tauv.reshape(-1, NV) - (fv * qdv + fc * np.tanh(qdv / FM.coulomb_width)) + full
    np.testing.assert_allclose(fit.torques(Yv, qdv), expected, atol=1e-7)
    assert bool(jnp.all(jaxrbd.is_physically_consistent(fit.model.inertia[np.array(fit.bodies)])))

    sg = ident.NonlinearFriction("sigmoid")
    phi = np.array([[0.55, 5.1, 0.04], [0.9, 9.0, 0.026], [0.64, 10.1, -0.046]])
    tau_sg = tau + jax.jit(lambda v, x: sg(v, x))(qd, phi).ravel()
    noise = np.random.default_rng(4).normal(size=tau.shape) * 1e-3
    fit = ident.consistent_fit(prior, Y, tau_sg + noise, FM, prior_weight=1e-3, nonlinear=sg,
                               qd=qd, joint_sigma=sigma)
    np.testing.assert_allclose(fit.nonlinear_params, phi, rtol=2e-2)
    # the prior weight chosen by validation with the nonlinear term (a split in time);
    # a prior 30 % off: the strong weight predicts worse
    wrong = eqx.tree_at(lambda m: m.inertia, prior, prior.inertia * 1.3)
    h = len(tau) // 2
    sel = ident.select_prior_weight(wrong, Y[:h], tau_sg[:h], Y[h:], tau_sg[h:], FM,
                                    weights=[1e4, 1e-3], nonlinear=sg, qd_train=qd[:h // NV],
                                    qd_val=qd[h // NV:], rule="min", blocks=4)
    assert sel.weight == 1e-3, sel.validation_error
    assert sel.validation_error[0] > 10 * sel.validation_error[1], sel.validation_error
    np.testing.assert_allclose(sel.fit.nonlinear_params, phi, rtol=1e-3)
    with pytest.raises(ValueError, match=r"qd must have shape \(800, 3\)"):
        ident.consistent_fit(prior, Y, tau, FM, nonlinear=sg)
    with pytest.raises(ValueError, match="need a nonlinear friction term"):
        ident.consistent_fit(prior, Y, tau, FM, qd=qd)
    with pytest.raises(ValueError, match=r"nonlinear_start has shape \(3, 2\)"):
        ident.consistent_fit(prior, Y, tau, FM, nonlinear=sg, qd=qd,
                             nonlinear_start=np.zeros((NV, 2)))
    with pytest.raises(ValueError, match=r"nonlinear_start is below the lower bounds.*"
                                         r"joint1.phi1"):
        ident.consistent_fit(prior, Y, tau, FM, nonlinear=sg, qd=qd, nonlinear_start=-phi)
    with pytest.raises(ValueError, match="kind must be one of"):
        ident.NonlinearFriction("lugre")
    with pytest.raises(ValueError, match="qd must be given"):
        fit.torques(Yv)


def test_select_prior_weight(arm, data):
    _, _, _, _, Y, tau = data["train"]
    _, _, _, _, Yv, tauv = data["val"]
    prior = eqx.tree_at(lambda m: m.inertia, arm, arm.inertia * 1.3)
    rng = np.random.default_rng(7)
    sel = ident.select_prior_weight(prior, Y, tau + 0.02 * rng.normal(size=tau.shape), Yv,
                                    tauv + 0.02 * rng.normal(size=tauv.shape), FM,
                                    weights=[1e4, 1e2, 1.0, 1e-2])
    # informative data: the validation error falls as the wrong prior's weight falls
    assert sel.validation_error[0] > sel.validation_error[-1]
    assert sel.weight < 1e4
    assert sel.fit.prior_weight == sel.weight
    with pytest.raises(ValueError, match="rule must be"):
        ident.select_prior_weight(prior, Y, tau, Yv, tauv, FM, rule="best")


# ---------------------------------------------------------------------- reports, excitation


def test_torque_report():
    tau = np.array([[1.0, 2.0], [3.0, -4.0]])
    rep = ident.torque_report(tau, tau + [[0.1, 0.0], [-0.1, 0.2]], effort_limit=[10.0, 20.0])
    np.testing.assert_allclose(rep.rms, [0.1, np.sqrt(0.02)])
    assert rep.nrms == pytest.approx(np.mean([0.1 / 20, np.sqrt(0.02) / 40]))
    assert rep.relative == pytest.approx(np.sqrt(0.06) / np.sqrt(30.0))
    assert "NRMS" in rep.table(["a", "b"])
    with pytest.raises(ValueError, match="expected equal"):
        ident.torque_report(tau, tau[:1])


def test_optimize_excitation_improves_conditioning(arm):
    fm = ident.FrictionModel(armature=False, coulomb=False, offset=False)
    base = ident.base_parameters(arm, fm, n_samples=100)
    res = ident.optimize_excitation(arm, base, harmonics=3, n_samples=60, steps=60,
                                    learning_rate=0.03, qd_max=2.0, qdd_max=8.0)
    assert res.condition < 0.7 * res.initial_condition, (res.condition, res.initial_condition)
    assert res.feasible


# ---------------------------------------------------------------------- simulation error


def test_simulation_error_fit_recovers_base_parameters(arm, base):
    """A positions-only recording (one open-loop simulation): short windows spread over it,
    simulated from the recorded states, take a start 20-30 % off to the true base
    parameters with physically consistent bodies and passive joint terms."""
    import dataclasses

    # a wider smooth sign keeps the 200 Hz explicit steps stable at zero velocity; the
    # base parameters' structure does not depend on the width
    fm = dataclasses.replace(FM, coulomb_width=0.2)
    p_true = np.array(ident.standard_parameters(arm, fm))
    p_true[-NV:] = [0.2, -0.1, 0.05]
    dt, n, integ = 0.005, 200, "semi_implicit_euler"
    t = np.arange(n + 1) * dt
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, NV, 4)) * 0.35
    q_ref, qd_ref, qdd_ref = (np.asarray(x) for x in _fourier(
        a, b, np.zeros(NV), 2 * np.pi / 2.0, t))
    # the module's regressor (FM: its compiled program is shared), its Coulomb columns'
    # narrower smooth sign swapped for fm's
    names = FM.column_names(arm)
    fc = p_true[[names.index(f"{j}.coulomb") for j in arm.joint_names]]
    tau = ((ident.stacked_regressor(arm, FM, q_ref, qd_ref, qdd_ref) @ p_true).reshape(-1, NV)
           + fc * (np.tanh(qd_ref / fm.coulomb_width) - np.tanh(qd_ref / FM.coulomb_width)))
    qs, qds = ident.simulate_windows(arm, p_true, fm, q_ref[:1], qd_ref[:1], tau[None, :-1], dt,
                                     integ)
    q, qd = np.asarray(qs[0]), np.asarray(qds[0])  # the recording
    start = p_true.copy()
    start[: 10 * arm.nbodies] *= 1.2
    start[10 * arm.nbodies:] *= 0.7
    start[-NV:] = 0.0
    kw = dict(window=5, count=30, qd=qd, integrator=integ)
    fit = ident.simulation_error_fit(arm, t, q, tau, fm, start=start, prior_weight=1e-9,
                                     max_iters=15, **kw)
    pb_true = base.E @ p_true
    err = np.abs(base.E @ np.asarray(fit.params) - pb_true) / np.maximum(np.abs(pb_true), 1e-3)
    assert err.max() < 1e-3, err.max()
    assert np.all(fit.joint_rms < 1e-3 * fit.start_rms), fit
    assert fit.starts.shape == (30,) and fit.at_bound == ()
    pi = np.asarray(fit.params)[: 10 * arm.nbodies].reshape(-1, 10)[list(fit.bodies)]
    assert bool(jnp.all(jaxrbd.is_physically_consistent(jnp.asarray(pi))))
    rms = ident.simulation_rms(arm, fit.params, fm, t, q, tau, **kw)
    assert np.allclose(rms, fit.joint_rms, rtol=1e-6, atol=1e-15)
    with pytest.raises(ValueError, match=r"diverges in \d+ of 30 windows"):
        ident.simulation_error_fit(arm, t, q, tau * 1e200, fm, start=start, **kw)
    with pytest.raises(ValueError, match="substeps must be an integer >= 1"):
        ident.simulation_error_fit(arm, t, q, tau, fm, substeps=0, **kw)
    with pytest.raises(ValueError, match="not uniformly sampled"):
        ident.simulation_error_fit(arm, t ** 1.01, q, tau, fm, **kw)
    with pytest.raises(ValueError, match="fewer than one window of 500"):
        ident.simulation_error_fit(arm, t, q, tau, fm, window=500)
    with pytest.raises(ValueError, match=r"count must be an integer in \[1, 197\]"):
        ident.simulation_error_fit(arm, t, q, tau, fm, window=5, count=198)
    with pytest.raises(ValueError, match="prior_weight must be > 0"):
        ident.simulation_error_fit(arm, t, q, tau, fm, prior_weight=0.0, **kw)
    negative = start.copy()
    negative[10 * arm.nbodies + NV] = -0.1  # joint 1's viscous coefficient
    with pytest.raises(ValueError, match=r"start is below the lower bounds .*joint1.viscous"):
        ident.simulation_error_fit(arm, t, q, tau, fm, start=negative, **kw)
    negative[10 * arm.nbodies + NV] = 0.1
    negative[10] = -1.0  # body 1's mass
    with pytest.raises(ValueError, match="start is not physically consistent"):
        ident.simulation_error_fit(arm, t, q, tau, fm, start=negative, **kw)


def test_drive_gains_with_a_known_payload(arm, base, data):
    """Currents only: the gains and base parameters from two runs, one carrying a payload
    of known inertia (which fixes the scale)."""
    k_true = np.array([2.0, 1.5, 0.8])
    p_true = data["p_true"]
    payload = jaxrbd.Body(0.7, (0.05, 0.0, 0.02), np.diag([1e-3, 2e-3, 1.5e-3]))
    body = arm.body_names[-1]
    Y1, Y2 = data["train"][4], data["val"][4]
    known = np.concatenate([np.zeros(len(Y1)), ident.payload_torque(arm, Y2, body, payload)])
    Y = np.concatenate([Y1, Y2])
    current = ((Y @ p_true + known) / np.tile(k_true, len(Y) // NV)).reshape(-1, NV)
    fit = ident.fit_drive_gains(Y, current, base, nv=NV, known_torque=known)
    np.testing.assert_allclose(fit.gains, k_true, rtol=1e-8)
    np.testing.assert_allclose(fit.base, base.E @ p_true, rtol=1e-7, atol=1e-9)
    with pytest.raises(ValueError, match="only up to a common scale"):
        ident.fit_drive_gains(Y, current, base, nv=NV, known_torque=np.zeros(len(Y)))


# ---------------------------------------------------------------------- downloads


def test_cached_download(tmp_path, monkeypatch):
    """A file served over HTTP (a local server) and file://: fetched once, checked, cached;
    a wrong checksum and an unreachable host give clear errors."""
    import functools
    import hashlib
    import http.server
    import threading

    served = tmp_path / "served"
    served.mkdir()
    payload = b"t,q\n0.0,1.0\n"
    (served / "log.csv").write_bytes(payload)
    digest = hashlib.sha256(payload).hexdigest()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/log.csv"
        monkeypatch.setenv("JAXRBD_CACHE", str(tmp_path / "cache"))
        p = ident.cached_download(url, digest)
        assert p == tmp_path / "cache" / "log.csv" and p.read_bytes() == payload
    finally:
        server.shutdown()
        server.server_close()
    # the second call reads the cache: it works with the server gone
    assert ident.cached_download(url, digest.upper()) == p
    with pytest.raises(ConnectionError, match=r"could not download .*log2.csv.* put it at"):
        ident.cached_download(url.replace("log.csv", "log2.csv"), timeout=5.0)
    with pytest.raises(ValueError, match="has SHA-256 .* expected 00"):
        ident.cached_download((served / "log.csv").as_uri(), "00" * 32, filename="other.csv")
    assert not (tmp_path / "cache" / "other.csv").exists()
    assert list((tmp_path / "cache").iterdir()) == [p]  # no temporary files left behind

    # the example's data folders: a given path is checked; otherwise the cache is filled
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location(
        "identification_real_robot",
        pathlib.Path(__file__).parents[1] / "examples" / "identification_real_robot.py")
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    sources = {"toy": {"log.csv": ((served / "log.csv").as_uri(), digest)}}
    with pytest.raises(FileNotFoundError, match="is not cached"):
        ex.data_folder("toy", download=False, sources=sources)
    folder = ex.data_folder("toy", sources=sources)
    assert folder == tmp_path / "cache" / "toy" and (folder / "log.csv").read_bytes() == payload
    assert ex.data_folder("toy", served, sources=sources) == served
    with pytest.raises(FileNotFoundError, match=r"lacks \['log.csv'\]"):
        ex.data_folder("toy", tmp_path, sources=sources)
    with pytest.raises(FileNotFoundError, match="only as tables in their supplement"):
        ex.panda_model(served)
    assert set(ex.SOURCES) == {"kuka_lwr4", "panda_gaz2019"}
