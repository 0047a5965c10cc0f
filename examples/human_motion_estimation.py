"""Joint trajectories of human walking from motion-capture markers: an extended Kalman
smoother against per-frame inverse kinematics (MBSlib's §IV-B, Wojtusch et al. 2016).

A 28-DoF human body model (`jaxrbd.models.human28`: floating pelvis, 22 joint DoFs, de
Leva's 1996 segment parameters) with 36 markers walks a synthetic gait
(`jaxrbd.mocap.synthetic_gait_trial`): the marker trajectories get 2 mm Gaussian noise
and random occlusions (NaN). From the markers alone we estimate q, qd and qdd

* with the extended Kalman smoother of `jaxrbd.estimation` (state [q, qd, qdd, qddd],
  constant-jerk process model, RTS backward pass), batched over several trials with
  `jax.vmap`, and
* with per-frame inverse kinematics (Levenberg-Marquardt on the same markers,
  warm-started), differentiated by central differences,

and compare both with the truth: RMS errors over the joint DoFs and the time per frame.
With ``--tune`` the smoother's two noise levels are then fitted by gradient ascent on
its log-likelihood (`jax.grad` through both passes).

The figure (``--out``, default the current directory) shows estimated and true joint
angles and the marker residuals.

Run:  python examples/human_motion_estimation.py [--quick] [--trials N] [--tune] [--out DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxrbd
from jaxrbd import estimation, mocap

jax.config.update("jax_enable_x64", True)

NOISE = 0.002  # marker noise [m]
RATE = 100.0  # [Hz]
DEG = 180.0 / np.pi


def rms_errors(model, truth, q, qd, qdd):
    """RMS over frames and the 22 joint DoFs (the floating base left out): q [deg],
    qd [deg/s], qdd [deg/s^2]."""
    e = jax.vmap(lambda a, b: jaxrbd.difference(model, a, b))(truth.q, q)
    r = lambda x: float(jnp.sqrt(jnp.mean(x[:, 6:] ** 2))) * DEG
    return r(e), r(qd - truth.qd), r(qdd - truth.qdd)


def timed(f, *args, repeats=3):
    """``(result, compile+first call [s], best of ``repeats`` later calls [s])``."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(f(*args))
    first = time.perf_counter() - t0
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t0)
    return out, first, best


def plot(path, model, ms, trial, res, q_ik):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(trial.time)
    panels = [("l_hip", 0, "left hip flexion/extension (y)"), ("l_knee", 0, "left knee flexion"),
              ("l_ankle", 0, "left ankle plantarflexion"), ("r_shoulder", 0, "right shoulder (y)")]
    fig, axes = plt.subplots(3, 2, figsize=(11, 9), constrained_layout=True)
    for ax, (joint, k, title) in zip(axes.ravel(), panels):
        i = model.q_index(joint).start + k
        ax.plot(t, np.asarray(trial.q[:, i]) * DEG, "k", lw=2, label="truth")
        ax.plot(t, np.asarray(q_ik[:, i]) * DEG, "C1", lw=1, label="per-frame IK")
        ax.plot(t, np.asarray(res.q[:, i]) * DEG, "C0--", lw=1.5, label="Kalman smoother")
        ax.set_title(title)
        ax.set_ylabel("deg")
    axes[0, 0].legend()
    j = model.v_index("l_knee").start
    ax = axes[2, 0]
    ax.plot(t, np.asarray(trial.qdd[:, j]), "k", lw=2, label="truth")
    _, qdd_ik = estimation.trajectory_derivatives(model, q_ik, trial.dt)
    ax.plot(t, np.asarray(qdd_ik[:, j]), "C1", lw=0.8, label="IK + central differences")
    ax.plot(t, np.asarray(res.qdd[:, j]), "C0--", lw=1.5, label="Kalman smoother")
    ax.set_title("left knee acceleration")
    ax.set_ylabel("rad/s²")
    ax.set_xlabel("time [s]")
    ax.legend(fontsize=8)
    ax = axes[2, 1]
    r = np.linalg.norm(np.asarray(res.residuals), axis=-1) * 1000.0  # (T, K) mm
    ax.plot(t, np.nanmean(r, axis=1), "C0", label="mean over visible markers")
    ax.plot(t, np.nanmax(r, axis=1), "C3", lw=0.8, label="largest")
    missing = ~np.asarray(trial.visible)
    ax2 = ax.twinx()
    ax2.fill_between(t, missing.sum(axis=1), step="mid", color="0.85", zorder=0)
    ax2.set_ylabel("occluded markers")
    ax.set_zorder(ax2.get_zorder() + 1)
    ax.patch.set_visible(False)
    ax.set_title("marker residuals at the smoothed poses")
    ax.set_ylabel("mm")
    ax.set_xlabel("time [s]")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1.5 s trials instead of 4 s")
    parser.add_argument("--trials", type=int, default=2, help="trials smoothed in one vmap")
    parser.add_argument("--tune", action="store_true",
                        help="fit the noise levels by gradient ascent on the log-likelihood")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."),
                        help="directory of the figure")
    args = parser.parse_args(argv)
    duration = 1.5 if args.quick else 4.0
    dt = 1.0 / RATE

    model, ms = jaxrbd.models.human28(mass=75.0, height=1.75, markers=True)
    print(f"model: human28, nq={model.nq}, nv={model.nv}, {len(ms)} markers, "
          f"{float(jaxrbd.total_mass(model)):.1f} kg")
    # trials: the same subject at slightly different speeds and cadences, own noise and gaps
    trials = [
        mocap.synthetic_gait_trial(model, ms, duration=duration, rate=RATE, noise_std=NOISE,
                                   gap_probability=0.004, max_gap=20, seed=k,
                                   speed=1.25 + 0.1 * k, stride_frequency=0.9 + 0.04 * k)
        for k in range(args.trials)
    ]
    Z = jnp.stack([tr.markers for tr in trials])
    T = Z.shape[1]
    print(f"{args.trials} trials x {T} frames at {RATE:.0f} Hz, {NOISE * 1e3:.0f} mm noise, "
          f"{100 * float(jnp.mean(~jnp.all(jnp.isfinite(Z), -1))):.1f}% of samples occluded")

    eks = jax.jit(jax.vmap(lambda z: estimation.extended_kalman_smoother(
        model, ms, z, dt, marker_std=NOISE)))
    res, eks_first, eks_time = timed(eks, Z)
    ik = jax.jit(jax.vmap(lambda z: estimation.marker_inverse_kinematics(model, ms, z)))
    q_ik, ik_first, ik_time = timed(ik, Z)
    frames = args.trials * T

    rows = []
    for k, tr in enumerate(trials):
        qd_ik, qdd_ik = estimation.trajectory_derivatives(model, q_ik[k], dt)
        e_ik = rms_errors(model, tr, q_ik[k], qd_ik, qdd_ik)
        e_eks = rms_errors(model, tr, res.q[k], res.qd[k], res.qdd[k])
        rows.append((e_eks, e_ik))
    e_eks = np.mean([r[0] for r in rows], axis=0)
    e_ik = np.mean([r[1] for r in rows], axis=0)
    print("\nRMS error over the 22 joint DoFs (mean over trials):")
    print(f"{'':24s}{'q [deg]':>10s}{'qd [deg/s]':>12s}{'qdd [deg/s²]':>14s}{'us/frame':>10s}")
    print(f"{'Kalman smoother':24s}{e_eks[0]:10.3f}{e_eks[1]:12.2f}{e_eks[2]:14.1f}"
          f"{1e6 * eks_time / frames:10.0f}")
    print(f"{'per-frame IK + diff.':24s}{e_ik[0]:10.3f}{e_ik[1]:12.2f}{e_ik[2]:14.1f}"
          f"{1e6 * ik_time / frames:10.0f}")
    print(f"(compile + first call: smoother {eks_first:.1f} s, IK {ik_first:.1f} s)")
    resid = float(np.sqrt(np.nanmean(np.asarray(res.residuals) ** 2)) * 1000.0)
    print(f"marker residual RMS at the smoothed poses: {resid:.2f} mm per coordinate")

    if args.tune:
        # maximum likelihood of the two noise levels (log-parametrised), trial 0
        def nll(p):
            r = estimation.extended_kalman_smoother(
                model, ms, Z[0], dt, marker_std=jnp.exp(p[0]), snap_std=jnp.exp(p[1]),
                q0=res.q[0, 0])
            return -r.log_likelihood / T

        vg = jax.jit(jax.value_and_grad(nll))
        p = jnp.log(jnp.array([0.005, 1000.0]))
        for it in range(8):
            _, g = vg(p)
            p = p - 0.5 * g / (jnp.linalg.norm(g) + 1e-12) * 0.5 ** (it // 3)
        print(f"maximum-likelihood noise: marker_std {float(jnp.exp(p[0])) * 1e3:.2f} mm "
              f"(true {NOISE * 1e3:.1f}), snap_std {float(jnp.exp(p[1])):.0f}")

    args.out.mkdir(parents=True, exist_ok=True)
    fig = args.out / "human_motion_estimation.png"
    plot(fig, model, ms, trials[0], jax.tree_util.tree_map(lambda x: x[0], res), q_ik[0])
    print(f"figure: {fig}")
    print(f"summary: smoother RMS q {e_eks[0]:.3f} deg, qd {e_eks[1]:.2f} deg/s, "
          f"qdd {e_eks[2]:.1f} deg/s²; per-frame IK {e_ik[0]:.3f} deg, {e_ik[1]:.2f} deg/s, "
          f"{e_ik[2]:.1f} deg/s²")
    return {"eks": e_eks, "ik": e_ik, "eks_us_per_frame": 1e6 * eks_time / frames,
            "ik_us_per_frame": 1e6 * ik_time / frames}


if __name__ == "__main__":
    main()
