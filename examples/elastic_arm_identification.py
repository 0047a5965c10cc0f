"""MBSlib's elastic-arm identification (Wojtusch et al. 2016, §IV-A, Table I), with jaxrbd and optimistix.

A 4-link arm (a BIOROB-X4-like geometry: a base yaw joint and three pitch joints) whose
joints are ideal rotary drives in series with rotary springs k_i and dampers d_i
(`jaxrbd.SpringDamperDrive`), driven by known sinusoidal motor motions r(t). From 20 s of
joint accelerations sampled at 100 Hz we identify p = (k, d), starting from k = 20,
d = 0.1, by Levenberg-Marquardt (`optimistix.LevenbergMarquardt`) on the residual

    r(p) = qdd(q_m, qd_m, t; p) - qdd_m,

where qdd(...; p) is jaxrbd's forward dynamics with the drives' torques at the measured
states and the Jacobian dr/dp comes from automatic differentiation through the
dynamics. The "measurements" are simulated: an RK4 rollout (h = 1 ms) with the reference
parameters, then sampled at 100 Hz; the noisy case adds Gaussian white noise with
3 sigma_j = 0.1 max_t |qdd_m,j| to the accelerations of each joint j (the paper's
3 sigma = 0.1 max(qdd_m), read per measured joint trajectory), and the residual of joint j
is weighted by 1 / sigma_j (weighted least squares, the maximum-likelihood estimate).

With ``--gif DIR`` the first seconds of the measured motion are saved as an animation
(``DIR/elastic_arm.gif``).

Run:  python examples/elastic_arm_identification.py [--quick] [--seed N] [--gif DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, joints

jax.config.update("jax_enable_x64", True)

K_REF = np.array([45.0, 40.0, 25.0, 15.0])  # N m / rad
D_REF = np.array([0.22, 0.18, 0.12, 0.14])  # N m s / rad
K_START, D_START = 20.0, 0.1
JOINTS = ("j1", "j2", "j3", "j4")


def build_arm() -> jaxrbd.Model:
    """Base yaw + three pitch joints; slender links with their masses along the link."""
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))

    def rod(m, length, axis):
        c = np.zeros(3)
        c[axis] = length / 2
        inertia = np.full(3, m * length**2 / 12)
        inertia[axis] = 1e-4 * m
        return Body(m, c, np.diag(inertia))

    b.add_body("link1", "world", joints.revolute((0, 0, 1)), rod(1.2, 0.15, 2), joint_name="j1")
    b.add_body("link2", "link1", joints.revolute((0, 1, 0)), rod(0.8, 0.30, 0),
               Transform(translation=(0.0, 0.0, 0.15)), joint_name="j2")
    b.add_body("link3", "link2", joints.revolute((0, 1, 0)), rod(0.5, 0.30, 0),
               Transform(translation=(0.30, 0.0, 0.0)), joint_name="j3")
    b.add_body("link4", "link3", joints.revolute((0, 1, 0)), rod(0.25, 0.20, 0),
               Transform(translation=(0.30, 0.0, 0.0)), joint_name="j4")
    return b.build()


class MotorMotion(eqx.Module):
    """Known sinusoidal motor positions r_i(t) = a_i sin(2 pi f_i t + phi_i) + o_i."""

    amplitude: jax.Array
    frequency: jax.Array
    phase: jax.Array
    offset: jax.Array

    def __call__(self, t):
        return self.amplitude * jnp.sin(2 * jnp.pi * self.frequency * t + self.phase) + self.offset


def motor() -> MotorMotion:
    # The dampers act on the spring deflection rates: the outer joints are driven near
    # their drives' resonances (1-2 Hz), where the damping shapes the response, and the
    # heavy base joint slowly. At 0.2-0.6 Hz everywhere the noisy damper estimates
    # scattered by ~5-7 %; with these motions by 1-3 % (2 % in the quick run).
    return MotorMotion(
        amplitude=jnp.array([0.8, 0.3, 0.3, 0.3]),
        frequency=jnp.array([0.23, 1.1, 1.5, 1.9]),
        phase=jnp.array([0.0, 0.7, 1.9, 2.8]),
        offset=jnp.array([0.0, 0.4, -0.6, 0.3]),
    )


def drives(p: jax.Array, reference) -> jaxrbd.SpringDamperDrive:
    """The four series-elastic drives with parameters p = (k (4), d (4))."""
    return jaxrbd.SpringDamperDrive(JOINTS, p[:4], p[4:], reference=reference)


def simulate(model, duration: float, h: float = 1e-3, rate: float = 100.0):
    """Reference trajectory by RK4 (step h), sampled at `rate`: (t, q, qd, qdd) arrays."""
    ref = motor()
    p_ref = jnp.concatenate([K_REF, D_REF])
    drive = drives(p_ref, ref)
    n = round(duration / h)
    q0 = ref(0.0)  # start at the motor positions, at rest
    # the drives' torques depend on time (the motor motion): the policy form passes t
    qs, qds = jax.jit(  # one trajectory: plain jax.jit runs it faster (see jaxrbd.jit)
        lambda q0: jaxrbd.rollout(model, q0, jnp.zeros(4), None, h, n_steps=n,
                                  policy=lambda t, q, qd: drive(model, q, qd, t))
    )(q0)
    every = round(1.0 / (rate * h))
    idx = np.arange(0, n + 1, every)
    t = jnp.asarray(idx * h)
    q, qd = qs[idx], qds[idx]
    qdd = accelerations(model, p_ref, ref, t, q, qd)
    return t, q, qd, qdd


@jaxrbd.jit
def _accelerations(model, p, ref, t, q, qd):
    def one(t, q, qd):
        tau = drives(p, ref)(model, q, qd, t)
        return jaxrbd.forward_dynamics(model, q, qd, tau)

    return jax.vmap(one)(t, q, qd)


def accelerations(model, p, ref, t, q, qd):
    """Forward dynamics with the drives' torques at the measured states, `(N, 4)`."""
    return _accelerations(model, p, ref, t, q, qd)


def identify(model, t, q, qd, qdd_m, p0, weights=None):
    """Levenberg-Marquardt on r(p) = W (qdd(p) - qdd_m) (optimistix; Jacobian by autodiff).

    ``weights`` `(4,)`: one weight per joint (default 1).
    """
    ref = motor()
    w = jnp.ones(4) if weights is None else jnp.asarray(weights)

    def residual(p, args):
        return ((accelerations(model, p, ref, t, q, qd) - qdd_m) * w[None, :]).ravel()

    solver = optx.LevenbergMarquardt(rtol=1e-12, atol=1e-12)
    sol = optx.least_squares(residual, solver, p0, max_steps=200, throw=False)
    return sol.value, int(sol.stats["num_steps"]), sol.result == optx.RESULTS.successful


def animate_motion(model, q, rate: float = 100.0, seconds: float = 5.0, fps: float = 20.0):
    """The first ``seconds`` of the measured motion ``q`` (sampled at ``rate``) as a
    matplotlib animation, the tip's path traced."""
    from jaxrbd import viz

    n = min(len(q), round(seconds * rate) + 1)
    return viz.animate(model, q[:n], 1.0 / rate, fps=fps, trace="link4")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 s of data instead of 20 s")
    parser.add_argument("--seed", type=int, default=0, help="noise seed")
    parser.add_argument("--gif", metavar="DIR", help="save the measured motion as a GIF here")
    args = parser.parse_args(argv)
    duration = 10.0 if args.quick else 20.0

    model = build_arm()
    print(model)
    t0 = time.perf_counter()
    t, q, qd, qdd_m = simulate(model, duration)
    print(f"simulated {duration:.0f} s (RK4, h = 1 ms), {len(t)} samples at 100 Hz "
          f"in {time.perf_counter() - t0:.1f} s; max|qdd_m| = {float(jnp.abs(qdd_m).max()):.3f}")

    if args.gif:
        path = pathlib.Path(args.gif) / "elastic_arm.gif"
        path.parent.mkdir(parents=True, exist_ok=True)
        animate_motion(model, q, fps=15.0).save(path, writer="pillow", dpi=60)
        print(f"animation saved to {path}")

    p0 = jnp.concatenate([jnp.full(4, K_START), jnp.full(4, D_START)])
    p_ref = np.concatenate([K_REF, D_REF])
    results = {}
    rng = np.random.default_rng(args.seed)
    sigma = 0.1 * np.asarray(jnp.abs(qdd_m).max(axis=0)) / 3.0  # per joint
    print(f"noise sigma per joint: {np.array2string(sigma, precision=3)} rad/s^2")
    for case, data, weights in (
        ("ideal", qdd_m, None),
        ("noisy", qdd_m + rng.normal(0.0, sigma, size=qdd_m.shape), 1.0 / sigma),
    ):
        t1 = time.perf_counter()
        p, steps, ok = identify(model, t, q, qd, jnp.asarray(data), p0, weights)
        p = np.asarray(p)
        results[case] = {"p": p, "steps": steps, "converged": bool(ok),
                         "rel_err": np.abs(p - p_ref) / p_ref,
                         "seconds": time.perf_counter() - t1}

    print("\nTable I (SI units): reference, start, ideal and noisy estimates")
    print(f"{'':4s} {'reference':>10s} {'start':>8s} {'ideal':>12s} {'noisy':>10s}")
    names = [f"k{i}" for i in range(1, 5)] + [f"d{i}" for i in range(1, 5)]
    for i, name in enumerate(names):
        print(f"{name:4s} {p_ref[i]:10.4g} {float(p0[i]):8.4g} "
              f"{results['ideal']['p'][i]:12.6g} {results['noisy']['p'][i]:10.4g}")
    for case, r in results.items():
        print(f"{case}: {r['steps']} LM steps, converged={r['converged']}, "
              f"max relative error {r['rel_err'].max():.2e}, {r['seconds']:.1f} s")
    print(f"summary: ideal max rel. error {results['ideal']['rel_err'].max():.1e}, "
          f"noisy max rel. error {results['noisy']['rel_err'].max():.3f}")
    return results


if __name__ == "__main__":
    main()
