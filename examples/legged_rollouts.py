"""Legged robots on the ground: thousands of quadrupeds at once, and a jump optimised
through contact.

1. 4096 solo12 quadrupeds are dropped from random poses onto flat ground under a PD
   standing policy, in one `jaxrbd.batched.ground_rollout` (hard contacts with Coulomb
   friction; `jax.vmap` of `jaxrbd.ground.rollout` gives the same numbers, more slowly
   on a CPU); the base heights and the total normal forces are plotted.
2. The take-off torques of a jump (a hip and a knee torque added for 0.1 s) are
   optimised by gradient descent so that the base reaches a target height: the gradient
   flows through the contact impulses by implicit differentiation.

    python examples/legged_rollouts.py            # 4096 robots, 1 s
    python examples/legged_rollouts.py --quick    # 64 robots, short horizons
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxrbd
from jaxrbd import ground

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data"
POSE = jnp.array([0.0, 0.8, -1.6] * 2 + [0.0, -0.8, 1.6] * 2)
KP, KD = 5.0, 0.1


def setup():
    model = jaxrbd.load_urdf(DATA / "solo12.urdf", floating_base=True)
    feet = ground.ContactPoints.create(
        model, [(f"{leg}_FOOT", [0.0, 0.0, 0.0], 0.016) for leg in ("FL", "FR", "HL", "HR")],
        names=["FL", "FR", "HL", "HR"])
    return model, feet, ground.Plane(0.0, friction=0.9)


def pd_policy(model, extra=None):
    def policy(t, q, qd):
        tau = KP * (POSE - q[7:]) - KD * qd[6:]
        if extra is not None:
            tau = tau + extra(t)
        return jnp.zeros(model.nv).at[6:].set(tau)

    return policy


def random_drops(model, key, n):
    """Base 0.3-0.45 m high, tilted up to 0.3 rad, joints within 0.3 rad of the pose."""
    k1, k2, k3 = jax.random.split(key, 3)
    z = jax.random.uniform(k1, (n,), minval=0.3, maxval=0.45)
    tilt = jax.random.uniform(k2, (n, 2), minval=-0.3, maxval=0.3)
    quat = jnp.concatenate([jnp.ones((n, 1)), 0.5 * tilt, jnp.zeros((n, 1))], axis=1)
    quat = quat / jnp.linalg.norm(quat, axis=1, keepdims=True)
    joints = POSE + jax.random.uniform(k3, (n, 12), minval=-0.3, maxval=0.3)
    return jnp.concatenate([jnp.zeros((n, 2)), z[:, None], quat, joints], axis=1)


def drop_many(model, feet, plane, n, n_steps, dt):
    q0 = random_drops(model, jax.random.PRNGKey(0), n)
    qd0 = jnp.zeros((n, model.nv))
    run = jax.jit(lambda q, qd: jaxrbd.batched.ground_rollout(
        model, q, qd, None, dt, feet, plane, n_steps=n_steps, policy=pd_policy(model)))
    t0 = time.perf_counter()
    qs, _, info = jax.block_until_ready(run(q0, qd0))
    print(f"{n} robots x {n_steps} steps: {time.perf_counter() - t0:.1f} s (compile included)")
    mg = float(jaxrbd.total_mass(model)) * 9.81
    fn = jnp.sum(info.force[:, :, :, 0], axis=2)  # (n, steps)
    print(f"final normal force / (m g): mean {float(jnp.mean(fn[:, -1])) / mg:.4f}, "
          f"base height {float(jnp.mean(qs[:, -1, 2])):.4f} m")
    return qs, fn, mg


def jump_height(model, feet, plane, push, dt, n_push, n_flight):
    """Base height after ``n_push`` steps of extra hip/knee torques and ``n_flight`` more."""
    hip, knee = push[0], push[1]
    extra_tau = jnp.array([0.0, 1.0, 0.0] * 2 + [0.0, -1.0, 0.0] * 2) * hip \
        + jnp.array([0.0, 0.0, 1.0] * 2 + [0.0, 0.0, -1.0] * 2) * knee
    extra = lambda t: jnp.where(t < n_push * dt, 1.0, 0.0) * extra_tau
    q0 = jnp.zeros(model.nq).at[3].set(1.0).at[7:].set(POSE)
    gap, *_ = ground.contact_frames(model, q0, feet, plane)
    q0 = q0.at[2].set(-jnp.min(gap))
    qs, _, _ = ground.rollout(model, q0, jnp.zeros(model.nv), None, dt, feet, plane,
                              n_steps=n_push + n_flight, policy=pd_policy(model, extra))
    return qs[-1, 2]


def optimise_jump(model, feet, plane, target, iterations, dt, n_push, n_flight):
    """Damped Gauss-Newton on ``height(push) = target``; ``d height / d push`` by reverse
    mode through the rollout (the contact impulses by implicit differentiation)."""
    height = lambda p: jump_height(model, feet, plane, p, dt, n_push, n_flight)
    value_and_grad = jax.jit(jax.value_and_grad(height))
    push = jnp.array([-0.5, 1.0])  # hip and knee torques [N m] pushing the feet down
    for k in range(iterations):
        h, J = value_and_grad(push)
        r = h - target
        print(f"iteration {k}: height {float(h):.4f} m (target {target} m), "
              f"push {np.round(np.asarray(push), 3)} N m, d height / d push {np.asarray(J).round(4)}")
        step = -0.8 * r * J / jnp.sum(J * J)
        push = push + step * jnp.minimum(1.0, 1.0 / jnp.linalg.norm(step))  # at most 1 N m
    final = float(jax.jit(height)(push))
    print(f"optimised take-off torques {np.round(np.asarray(push), 3)} N m: height {final:.4f} m "
          f"(target {target} m)")
    return push, final


def plot(qs, fn, mg, dt, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(qs.shape[1]) * dt
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    a1.plot(t, np.asarray(qs[:64, :, 2]).T, lw=0.5, alpha=0.5)
    a1.set_ylabel("base height [m]")
    f = np.asarray(fn) / mg
    a2.fill_between(t[1:], np.percentile(f, 5, axis=0), np.percentile(f, 95, axis=0), alpha=0.3,
                    label="5-95 %")
    a2.plot(t[1:], np.median(f, axis=0), label="median")
    a2.set_ylabel("total normal force / (m g)")
    a2.set_xlabel("time [s]")
    a2.set_ylim(0, 5)
    a2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("saved", path)


def main():
    ap = argparse.ArgumentParser(description="solo12 drops and a jump optimised through contact")
    ap.add_argument("--quick", action="store_true", help="64 robots, short horizons")
    ap.add_argument("--out", default=None,
                    help="figure path (default legged_rollouts.png; --quick: in the temp dir)")
    args = ap.parse_args()
    jax.config.update("jax_enable_x64", True)
    model, feet, plane = setup()
    dt = 2e-3
    n, steps = (64, 150) if args.quick else (4096, 500)
    qs, fn, mg = drop_many(model, feet, plane, n, steps, dt)
    out = args.out or (str(pathlib.Path(tempfile.gettempdir()) / "legged_rollouts.png")
                       if args.quick else "legged_rollouts.png")
    plot(qs, fn, mg, dt, out)
    n_push, n_flight = (40, 40) if args.quick else (50, 60)
    target = 0.32
    _, height = optimise_jump(model, feet, plane, target=target,
                              iterations=3 if args.quick else 8, dt=dt, n_push=n_push,
                              n_flight=n_flight)
    print(f"summary: {n} drops, mean final normal force {float(jnp.mean(fn[:, -1])) / mg:.3f} m g; "
          f"jump height {height:.4f} m for target {target} m")


if __name__ == "__main__":
    main()
