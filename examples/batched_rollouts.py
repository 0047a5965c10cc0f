"""Batched rollouts: 10 000 random initial states of a quadruped (Solo-12) in one vmap.

The robot is Solo-12 loaded from URDF with a floating base, and there are NO contacts
here: it falls freely under gravity while a joint-space PD controller drives its twelve
joints towards a nominal crouched pose (the base is unactuated). Every sample starts from
a random state (base height, small base tilt, joint angles around the nominal pose,
random base and joint velocities), and the whole batch runs as one
`jaxrbd.batched.rollout` (RK4, the policy vmapped over the batch, blocked per device).

Printed: the compile time (separately), the throughput (batch time steps per second,
sample-steps = states per second and forward-dynamics evaluations per second), and the
statistics of the state distribution over time: mean and std of the base height, the
spread of the joint angles around the nominal pose (which the PD controller shrinks),
and a physics check: without contacts, the centre of mass of every sample follows the
ballistic parabola c(t) = c0 + v0 t + g t^2 / 2 whatever the joint torques do.
With ``--plot out.png`` the distribution over time is plotted (percentile bands), and with
``--gif DIR`` 16 of the rollouts are animated, overlaid (``DIR/solo12_batch.gif``).

Run:  python examples/batched_rollouts.py [--quick] [--batch N] [--plot out.png] [--gif DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxrbd

jax.config.update("jax_enable_x64", True)

URDF = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "solo12.urdf"
# nominal crouched pose per leg (HAA, HFE, KFE); front legs bend forwards, hind legs back
NOMINAL_LEG = {"F": (0.0, 0.8, -1.6), "H": (0.0, -0.8, 1.6)}
KP, KD = 6.0, 0.3   # PD gains [N m / rad], [N m s / rad]


def nominal_joints(model) -> np.ndarray:
    """The nominal joint angles `(12,)` in the model's joint order (after the free joint)."""
    return np.concatenate([NOMINAL_LEG[name[0]] for name in model.joint_names[1::3]])


def initial_states(model, batch: int, seed: int):
    """Random floating-base states: (Q0 (batch, 19), QD0 (batch, 18))."""
    rng = np.random.default_rng(seed)
    q_nom = nominal_joints(model)
    height = rng.uniform(0.3, 0.5, batch)
    xy = rng.normal(0.0, 0.05, (batch, 2))
    # small random tilt: a quaternion (w, x, y, z) from a random rotation vector (~0.2 rad)
    rotvec = rng.normal(0.0, 0.2, (batch, 3))
    angle = np.linalg.norm(rotvec, axis=1, keepdims=True)
    axis = rotvec / np.maximum(angle, 1e-12)
    quat = np.concatenate([np.cos(angle / 2), np.sin(angle / 2) * axis], axis=1)
    joints = q_nom[None, :] + rng.uniform(-0.5, 0.5, (batch, 12))
    Q0 = np.concatenate([xy, height[:, None], quat, joints], axis=1)
    base_v = np.concatenate([rng.normal(0.0, 1.0, (batch, 3)),   # angular [rad/s]
                             rng.normal(0.0, 0.3, (batch, 3))], axis=1)  # linear [m/s]
    QD0 = np.concatenate([base_v, rng.normal(0.0, 2.0, (batch, 12))], axis=1)
    return jnp.asarray(Q0), jnp.asarray(QD0)


def pd_policy(model):
    """tau = [0 (base, 6); Kp (q_nom - q_j) - Kd qd_j] for a single state."""
    q_nom = jnp.asarray(nominal_joints(model))

    def policy(t, q, qd):
        joint = KP * (q_nom - q[7:]) - KD * qd[6:]
        return jnp.concatenate([jnp.zeros(6, joint.dtype), joint])

    return policy


def statistics(model, QS, QDS, dt):
    """Distribution of the state over time (host-side, numpy), every row one time step."""
    QS, QDS = np.asarray(QS), np.asarray(QDS)
    q_nom = nominal_joints(model)
    height = QS[:, :, 2]                                  # (B, n + 1)
    dev = QS[:, :, 7:] - q_nom[None, None, :]             # joint deviations (B, n + 1, 12)
    quat_norm = np.linalg.norm(QS[:, :, 3:7], axis=-1)
    return {
        "t": np.arange(QS.shape[1]) * dt,
        "height_mean": height.mean(0),
        "height_std": height.std(0),
        "height_pct": np.percentile(height, [5, 25, 50, 75, 95], axis=0),
        "joint_spread": dev.std(0).mean(-1),              # std over samples, mean over joints
        "joint_rms": np.sqrt(np.mean(dev**2, axis=(0, 2))),
        "joint_pct": np.percentile(np.abs(dev).mean(-1), [5, 25, 50, 75, 95], axis=0),
        "joint_speed_rms": np.sqrt(np.mean(QDS[:, :, 6:] ** 2, axis=(0, 2))),
        "quat_norm_error": float(np.abs(quat_norm - 1.0).max()),
        "finite": bool(np.isfinite(QS).all() and np.isfinite(QDS).all()),
    }


def ballistic_error(model, Q0, QD0, QS, T):
    """Max over samples of |c(T) - (c0 + v0 T + g T^2 / 2)| [m] (no contacts: exact)."""
    com = jaxrbd.jit(jax.vmap(lambda q: jaxrbd.center_of_mass(model, q)))
    vcom = jaxrbd.jit(jax.vmap(lambda q, qd: jaxrbd.center_of_mass_velocity(model, q, qd)))
    c0, v0, c1 = com(Q0), vcom(Q0, QD0), com(QS[:, -1])
    predicted = c0 + T * v0 + 0.5 * T**2 * model.gravity[None, :]
    return float(jnp.abs(c1 - predicted).max())


def plot(path, stats):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = stats["t"]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for a, key, label in ((ax[0], "height_pct", "base height [m]"),
                          (ax[1], "joint_pct", "mean |q_j - q_nominal| [rad]")):
        p = stats[key]
        a.fill_between(t, p[0], p[4], alpha=0.25, label="5-95 %")
        a.fill_between(t, p[1], p[3], alpha=0.45, label="25-75 %")
        a.plot(t, p[2], "k", label="median")
        a.set(xlabel="t [s]", ylabel=label)
        a.legend()
    ax[0].set_title("free fall (no contacts)")
    ax[1].set_title("joint PD towards the nominal pose")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"plot saved to {path}")


def animate_batch(model, QS, dt, count=16, fps=20.0):
    """``count`` of the rollouts ``QS`` ``(B, T, nq)``, evenly spaced in the batch,
    overlaid in one matplotlib animation."""
    from jaxrbd import viz

    # the view falls with the robots; joint axes are left out of the crowd
    return viz.animate(model, QS, dt, fps=fps, max_trajectories=count, follow="base_link",
                       axes=False)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="128 samples, 0.1 s")
    parser.add_argument("--batch", type=int, default=None, help="number of initial states")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", metavar="PNG", help="save the distribution plot here")
    parser.add_argument("--gif", metavar="DIR", help="save an animation of 16 rollouts here")
    args = parser.parse_args(argv)
    batch = args.batch or (128 if args.quick else 10_000)
    dt = 2e-3
    n_steps = 50 if args.quick else 500

    model = jaxrbd.load_urdf(URDF, floating_base=True)
    print(f"Solo-12, floating base, nq = {model.nq}, nv = {model.nv}, "
          f"mass {float(jaxrbd.total_mass(model)):.2f} kg; free fall (no contacts), joint PD "
          f"(Kp = {KP}, Kd = {KD}) towards the nominal pose")
    Q0, QD0 = initial_states(model, batch, args.seed)
    policy = pd_policy(model)
    run = jaxrbd.jit(lambda Q0, QD0: jaxrbd.batched.rollout(
        model, Q0, QD0, None, dt, n_steps=n_steps, policy=policy))

    t0 = time.perf_counter()
    compiled = run.lower(Q0, QD0).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    QS, QDS = jax.block_until_ready(compiled(Q0, QD0))
    run_s = time.perf_counter() - t0
    steps_per_s = n_steps / run_s
    states_per_s = batch * n_steps / run_s
    print(f"{batch} samples x {n_steps} RK4 steps (dt = {dt * 1e3:.0f} ms, "
          f"{n_steps * dt:.2f} s simulated) on {jax.devices()[0].platform} "
          f"x {len(jax.devices())}: compile {compile_s:.1f} s, run {run_s:.2f} s")
    print(f"throughput: {steps_per_s:,.0f} batch steps/s, {states_per_s:,.0f} states/s "
          f"(sample-steps), {4 * states_per_s:,.0f} forward dynamics/s, "
          f"{run_s / (batch * n_steps) * 1e6:.2f} us per sample-step")

    stats = statistics(model, QS, QDS, dt)
    T = n_steps * dt
    err = ballistic_error(model, Q0, QD0, QS, T)
    print(f"{'t [s]':>6s} {'height mean':>12s} {'height std':>11s} {'joint spread':>13s} "
          f"{'joint rms':>10s} {'joint speed rms':>16s}")
    for k in np.linspace(0, n_steps, 6).round().astype(int):
        print(f"{stats['t'][k]:6.2f} {stats['height_mean'][k]:12.4f} "
              f"{stats['height_std'][k]:11.4f} {stats['joint_spread'][k]:13.4f} "
              f"{stats['joint_rms'][k]:10.4f} {stats['joint_speed_rms'][k]:16.4f}")
    print(f"centre of mass vs. ballistic parabola at t = {T:.2f} s: max error {err:.2e} m; "
          f"max |quaternion norm - 1| {stats['quat_norm_error']:.1e}")
    if args.plot:
        plot(args.plot, stats)
    if args.gif:
        path = pathlib.Path(args.gif) / "solo12_batch.gif"
        path.parent.mkdir(parents=True, exist_ok=True)
        animate_batch(model, QS, dt, fps=15.0).save(path, writer="pillow", dpi=60)
        print(f"animation saved to {path}")
    print(f"summary: {batch} samples x {n_steps} steps, {states_per_s:,.0f} states/s "
          f"(compile {compile_s:.1f} s), joint spread {stats['joint_spread'][0]:.3f} -> "
          f"{stats['joint_spread'][-1]:.3f} rad, CoM ballistic error {err:.1e} m")
    return {
        "batch": batch, "n_steps": n_steps, "dt": dt,
        "shape_q": tuple(QS.shape), "shape_qd": tuple(QDS.shape),
        "compile_s": compile_s, "run_s": run_s,
        "steps_per_s": steps_per_s, "states_per_s": states_per_s,
        "ballistic_error": err, "stats": stats,
    }


if __name__ == "__main__":
    main()
