"""The extended Kalman smoother (`jaxrbd.estimation`) against the truth of a synthetic gait,
against per-frame inverse kinematics, batched over trials and differentiated."""

from __future__ import annotations

import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, estimation, joints, mocap
from jaxrbd._markers import MarkerSet

DATA = pathlib.Path(__file__).parent / "data"
NOISE = 0.002  # the stored trial's marker noise [m]


_difference = jax.jit(jax.vmap(jaxrbd.difference, (None, 0, 0)))
_derivatives = jax.jit(estimation.trajectory_derivatives)


def _rms_q(model, q_true, q):
    """RMS over frames and joint DoFs (the floating base left out) of the tangent error."""
    e = _difference(model, q_true, q)
    return float(jnp.sqrt(jnp.mean(e[:, 6:] ** 2)))


def _rms(a, b):
    return float(jnp.sqrt(jnp.mean((a - b)[:, 6:] ** 2)))


# ----------------------------------------------------------------------------- human28 gait


@pytest.fixture(scope="module")
def gait():
    """human28, its markers, the stored 0.6 s synthetic gait (100 Hz, 2 mm noise, gaps) and
    a second trial of the same motion with other noise and gaps."""
    model, ms = jaxrbd.models.human28(markers=True)
    trial = mocap.load_trial(DATA / "human28_gait.npz")
    other = mocap.synthetic_markers(model, ms, trial.q, noise_std=NOISE, gap_probability=0.01,
                                    max_gap=15, seed=3)
    return model, ms, trial, jnp.stack([trial.markers, other])


@pytest.fixture(scope="module")
def per_frame_ik(gait):
    model, ms, _, Z = gait
    return jax.jit(jax.vmap(lambda z: estimation.marker_inverse_kinematics(model, ms, z)))(Z)


@pytest.fixture(scope="module")
def smoothed(gait, per_frame_ik):
    """Both trials smoothed in one vmap, the prior mean from IK's first frame."""
    model, ms, trial, Z = gait
    dt = trial.dt
    eks = jax.jit(jax.vmap(lambda z, q0: estimation.extended_kalman_smoother(
        model, ms, z, dt, marker_std=NOISE, q0=q0)))
    return eks(Z, per_frame_ik[:, 0])


def test_stored_trial_is_consistent(gait):
    model, ms, trial, _ = gait
    assert trial.names == ms.names and trial.rate == pytest.approx(100.0)
    assert int(jnp.sum(~trial.visible)) > 50  # the trial has occlusions
    # the stored markers are the truth's markers plus noise of the stated size
    P = mocap.synthetic_markers(model, ms, trial.q, noise_std=0.0, gap_probability=0.0)
    err = np.asarray(trial.markers - P)
    assert abs(np.nanstd(err) - NOISE) < 0.1 * NOISE


def test_smoother_beats_per_frame_ik(gait, smoothed, per_frame_ik):
    model, _, trial, Z = gait
    res = smoothed
    assert res.q.shape == (2, Z.shape[1], model.nq) and res.std.shape == (2, Z.shape[1], 4, model.nv)
    assert bool(jnp.all(jnp.isfinite(res.q))) and bool(jnp.all(jnp.isfinite(res.qdd)))
    # residuals are NaN exactly where a marker is missing
    np.testing.assert_array_equal(np.isnan(res.residuals).any(-1), np.isnan(Z).any(-1))
    q_ik = per_frame_ik[0]
    qd_ik, qdd_ik = _derivatives(model, q_ik, trial.dt)
    ik = (_rms_q(model, trial.q, q_ik), _rms(qd_ik, trial.qd), _rms(qdd_ik, trial.qdd))
    for k in range(2):
        eks = (_rms_q(model, trial.q, res.q[k]), _rms(res.qd[k], trial.qd),
               _rms(res.qdd[k], trial.qdd))
        assert eks[0] < 0.8 * ik[0], (k, eks, ik)
        assert eks[1] < 0.5 * ik[1], (k, eks, ik)
        assert eks[2] < 0.3 * ik[2], (k, eks, ik)
        assert eks[0] < 0.01  # rad
        # the marker residuals at the smoothed poses are at the noise level
        assert float(np.sqrt(np.nanmean(np.asarray(res.residuals[k]) ** 2))) < 1.5 * NOISE
    # the filter alone is worse than the smoother
    assert _rms_q(model, trial.q, res.q[0]) < _rms_q(model, trial.q, res.q_filtered[0])


def test_constant_jerk_model():
    dt = 0.02
    Phi, Qc = estimation.constant_jerk_model(dt)
    # Phi is the exact flow of a cubic: propagate a polynomial's derivatives
    c = np.array([0.3, -1.0, 2.0, 5.0])  # q, qd, qdd, qddd at 0
    x_dt = [c[0] + c[1] * dt + c[2] * dt**2 / 2 + c[3] * dt**3 / 6,
            c[1] + c[2] * dt + c[3] * dt**2 / 2, c[2] + c[3] * dt, c[3]]
    assert_allclose(Phi @ c, x_dt, rtol=1e-14, name="Phi")
    # Qc = int_0^dt Phi(s) e4 e4^T Phi(s)^T ds (white snap of unit density)
    s = np.linspace(0.0, dt, 20001)
    col = np.stack([s**3 / 6, s**2 / 2, s, np.ones_like(s)])
    ref = np.trapezoid(col[:, None] * col[None], s, axis=-1)
    assert_allclose(Qc, ref, rtol=1e-7, name="Qc")


# ----------------------------------------------------------------------------- a small model


def _small():
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    box = Body(2.0, (0.0, 0.0, 0.0), np.diag([0.02, 0.03, 0.04]))
    b.add_body("base", "world", joints.free(), box)
    b.add_body("arm", "base", joints.revolute((0.0, 1.0, 0.0)), box, Transform(translation=(0.2, 0, 0)))
    b.add_body("fore", "arm", joints.revolute((1.0, 0.0, 0.0)), box, Transform(translation=(0, 0, -0.3)))
    model = b.build()
    ms = MarkerSet.from_dict({
        "b1": ("base", (0.1, 0.05, 0.0)), "b2": ("base", (-0.1, 0.05, 0.02)),
        "b3": ("base", (0.0, -0.08, 0.05)), "a1": ("arm", (0.03, 0.0, -0.15)),
        "f1": ("fore", (0.0, 0.04, -0.2)), "f2": ("fore", (0.02, -0.03, -0.1)),
    })
    return model, ms


def _small_motion(model, T=12, dt=0.01):
    t = np.arange(T) * dt
    q = np.zeros((T, model.nq))
    q[:, 0] = 0.5 * t
    q[:, 2] = 1.0 + 0.02 * np.sin(3 * t)
    ang = 0.2 * np.sin(2 * t)
    q[:, 3], q[:, 5] = np.cos(ang / 2), np.sin(ang / 2)
    q[:, 7] = 0.4 * np.sin(4 * t)
    q[:, 8] = -0.3 + 0.5 * np.cos(3 * t)
    return jnp.asarray(q)


@pytest.fixture(scope="module")
def small():
    model, ms = _small()
    q = _small_motion(model)
    P = mocap.synthetic_markers(model, ms, q, noise_std=0.0, gap_probability=0.0)
    rng = np.random.default_rng(0)
    Z = np.asarray(P)[None] + 0.003 * rng.standard_normal((2,) + P.shape)
    Z[0, 3:6, 4] = np.nan  # an occlusion of f1
    Z[1, 7, 0] = np.nan

    def run(Xtree_r, offsets, snap_std, marker_std, z):
        m = eqx.tree_at(lambda m: m.Xtree_r, model, Xtree_r)
        markers = MarkerSet(ms.names, ms.bodies, offsets)
        return estimation.extended_kalman_smoother(m, markers, z, 0.01, snap_std=snap_std,
                                                   marker_std=marker_std, q0=q[0])

    def ll(*args):
        return run(*args).log_likelihood

    args = (model.Xtree_r, ms.offsets, jnp.asarray(50.0), jnp.asarray(0.004))
    return model, ms, q, jnp.asarray(Z), ll, args, run


def test_vmap_over_trials_matches_single_runs(small):
    _, _, _, Z, ll, args, _ = small
    f = jax.jit(ll)
    batched = jax.jit(jax.vmap(ll, (None, None, None, None, 0)))(*args, Z)
    for k in range(2):
        assert_allclose(batched[k], f(*args, Z[k]), rtol=1e-11, name=f"trial {k}")
    assert bool(jnp.all(jnp.isfinite(batched)))


def test_gradients_match_finite_differences(small):
    """d/d(noise parameters, marker offsets, segment lengths) of the log-likelihood by
    `jax.grad`, and of the smoothed trajectory (both passes) by `jax.jvp`, against central
    differences."""
    _, _, _, Z, ll, args, run = small
    f = jax.jit(ll)
    grads = jax.jit(jax.grad(ll, argnums=(0, 1, 2, 3)))(*args, Z[0])
    rng = np.random.default_rng(1)
    dirs = []
    for i, (x, g) in enumerate(zip(args, grads)):
        d = jnp.asarray(rng.standard_normal(x.shape)) * (0.01 if i < 2 else float(x))
        if i == 0:
            d = d.at[0].set(0.0)  # row 0 (the world) is unused
        dirs.append(d)
        h = 1e-5
        xp = [a + h * d if j == i else a for j, a in enumerate(args)]
        xm = [a - h * d if j == i else a for j, a in enumerate(args)]
        fd = (f(*xp, Z[0]) - f(*xm, Z[0])) / (2 * h)
        assert_allclose(jnp.sum(g * d), fd, rtol=2e-5, name=f"d log-likelihood, argument {i}")

    # all four arguments at once: the smoothed angles and accelerations
    def smoothed(s):
        r = run(*(a + s * d for a, d in zip(args, dirs)), Z[0])
        return jnp.concatenate([r.q[:, 7:].ravel(), r.qdd.ravel()])

    _, tangent = jax.jit(lambda s: jax.jvp(smoothed, (s,), (jnp.ones(()),)))(jnp.zeros(()))
    g = jax.jit(smoothed)
    h = 1e-6
    fd = (g(jnp.asarray(h)) - g(jnp.asarray(-h))) / (2 * h)
    assert_allclose(tangent, fd, rtol=1e-5, atol=1e-6 * float(jnp.max(jnp.abs(fd))),
                    name="d smoothed trajectory")


def test_errors(small):
    model, ms, q, Z, _, _, _ = small
    eks = estimation.extended_kalman_smoother
    with pytest.raises(ValueError, match=r"observations has shape \(12, 6\)"):
        eks(model, ms, Z[0, :, :, 0], 0.01)
    with pytest.raises(ValueError, match="snap_std has shape"):
        eks(model, ms, Z[0], 0.01, snap_std=jnp.ones(3), q0=q[0])
    with pytest.raises(ValueError, match="marker_std has shape"):
        eks(model, ms, Z[0], 0.01, marker_std=jnp.ones(4), q0=q[0])
    with pytest.raises(TypeError, match="MarkerSet"):
        eks(model, {"a": 1}, Z[0], 0.01)
    with pytest.raises(ValueError, match="q0 has shape"):
        eks(model, ms, Z[0], 0.01, q0=jnp.zeros(3))
