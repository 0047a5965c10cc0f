"""A four-bar linkage: an open tree closed by a loop constraint, simulated with RK4.

The crank-rocker linkage (crank a = 0.10 m, coupler b = 0.35 m, rocker c = 0.30 m,
ground d = 0.40 m; Grashof, so the crank turns fully) moves in the vertical x-z plane
under gravity. It is built as an open tree with `jaxrbd.ModelBuilder`: the crank and the
rocker hinge on the world at A = (0, 0, 0) and D = (d, 0, 0), the coupler hinges on the
crank tip. A loop constraint (`jaxrbd.ConstraintSet.loops`, the x and z components of
the relative position of the coupler tip and the rocker tip, with Baumgarte
stabilisation) closes the chain. `jaxrbd.assemble_q` / `jaxrbd.assemble_qd` project a
guess onto the constraint manifold, and `jaxrbd.rollout(..., dynamics=...)` integrates
the constrained dynamics (`jaxrbd.forward_dynamics_contacts`) with RK4.

Printed and checked:

- the constraint drift (position residual |phi| and velocity residual |G qd|) over
  time, with and without Baumgarte stabilisation;
- energy conservation (no damping, ideal joints: the loop force does no work);
- Freudenstein's equation K1 cos(t4) - K2 cos(t2) + K3 = cos(t2 - t4), the closed-form
  relation of the crank and rocker angles, evaluated on the joint coordinates;
- the crank period: a conservative one-degree-of-freedom system is periodic, so every
  full turn of the crank takes the same time.

Run:  python examples/four_bar_linkage.py [--quick] [--plot out.png]
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, joints

jax.config.update("jax_enable_x64", True)

A, B, C, D = 0.10, 0.35, 0.30, 0.40  # crank, coupler, rocker, ground [m]
MASSES = (0.5, 1.0, 0.8)  # crank, coupler, rocker [kg]
AXIS = (0.0, -1.0, 0.0)  # revolute axis: angles count from +x towards +z
BAUMGARTE = (10.0, 10.0)  # (alpha, beta) [1/s]: critically damped drift


def rod(mass: float, length: float) -> Body:
    """A slender rod along the body x axis from the joint to ``(length, 0, 0)``."""
    i = mass * length**2 / 12.0
    return Body(mass, (length / 2.0, 0.0, 0.0), np.diag([1e-3 * i, i, i]))


def build_linkage() -> jaxrbd.Model:
    """The open tree: world -> crank -> coupler, and world -> rocker."""
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("crank", "world", joints.revolute(AXIS), rod(MASSES[0], A))
    b.add_body("coupler", "crank", joints.revolute(AXIS), rod(MASSES[1], B),
               Transform(translation=(A, 0.0, 0.0)))
    b.add_body("rocker", "world", joints.revolute(AXIS), rod(MASSES[2], C),
               Transform(translation=(D, 0.0, 0.0)))
    return b.build()


def loop_closure(baumgarte=BAUMGARTE) -> jaxrbd.ConstraintSet:
    """Coupler tip = rocker tip, in the plane of motion (world x and z): two rows.

    The y row is left out: it vanishes identically for a planar mechanism and would
    make the constraint Jacobian rank deficient.
    """
    return jaxrbd.ConstraintSet.loops(
        [("coupler", (B, 0.0, 0.0), "rocker", (C, 0.0, 0.0))],
        axes=[[0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 1]],
        frame="world",
        baumgarte=baumgarte,
    )


def freudenstein(q):
    """Residual of Freudenstein's equation at joint coordinates ``q`` (..., 3), [1]."""
    t2, t4 = q[..., 0], q[..., 2]  # crank and rocker angles from +x (ground line)
    K1, K2, K3 = D / A, D / C, (A**2 - B**2 + C**2 + D**2) / (2 * A * C)
    return K1 * jnp.cos(t4) - K2 * jnp.cos(t2) + K3 - jnp.cos(t2 - t4)


@jax.jit
def _assemble(model, cs, q_guess, qd_guess):
    keep_crank = jnp.array([1e6, 1.0, 1.0])  # a large weight keeps the crank coordinate
    q0, ok_q = jaxrbd.assemble_q(model, q_guess, cs, weights=keep_crank)
    qd0, ok_qd = jaxrbd.assemble_qd(model, q0, qd_guess, cs, weights=keep_crank)
    return q0, qd0, ok_q & ok_qd


def initial_state(model, cs, crank_speed: float):
    """Assemble q (crank at 0 rad, coupler above the ground line) and qd (crank speed)."""
    q0, qd0, ok = _assemble(model, cs, jnp.array([0.0, 1.2, 1.8]),
                            jnp.array([crank_speed, 0.0, 0.0]))
    if not bool(ok):
        raise RuntimeError("assembly of the initial state did not converge")
    return q0, qd0


@functools.partial(jax.jit, static_argnames="n_steps")
def simulate(model, cs, q0, qd0, dt, n_steps):
    """RK4 rollout of the constrained dynamics, and the residuals and energy along it."""
    def dynamics(m, q, qd, tau):
        return jaxrbd.forward_dynamics_contacts(m, q, qd, tau, cs)[0]

    qs, qds = jaxrbd.rollout(model, q0, qd0, jnp.zeros((n_steps, model.nv)), dt,
                             dynamics=dynamics)

    def along(q, qd):
        return (
            jnp.max(jnp.abs(jaxrbd.constraint_residual(model, q, cs))),
            jnp.max(jnp.abs(jaxrbd.constraint_velocity_residual(model, q, qd, cs))),
            jaxrbd.kinetic_energy(model, q, qd) + jaxrbd.potential_energy(model, q),
        )

    phi, dphi, energy = jax.vmap(along)(qs, qds)
    return qs, qds, phi, dphi, energy


def crank_periods(t, crank):
    """Times of the crank's full turns (crossings of 2 pi k, linearly interpolated)."""
    turns = np.floor((crank - crank[0]) / (2 * np.pi))
    idx = np.flatnonzero(np.diff(turns) > 0)
    level = crank[0] + 2 * np.pi * turns[idx + 1]
    frac = (level - crank[idx]) / (crank[idx + 1] - crank[idx])
    crossings = np.concatenate([[t[0]], t[idx] + frac * (t[idx + 1] - t[idx])])
    return np.diff(crossings)


def plot(path, t, runs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(3, 1, figsize=(7, 8), sharex=True)
    for label, r in runs.items():
        ax[0].semilogy(t, np.maximum(r["phi"], 1e-17), label=f"|phi| {label}")
        ax[1].semilogy(t, np.maximum(r["dphi"], 1e-17), label=f"|G qd| {label}")
        ax[2].plot(t, r["energy"] - r["energy"][0], label=label)
    ax[0].set_ylabel("position drift [m]")
    ax[1].set_ylabel("velocity drift [m/s]")
    ax[2].set_ylabel("E - E0 [J]")
    ax[2].set_xlabel("t [s]")
    for a in ax:
        a.legend(fontsize=8)
    fig.suptitle("four-bar linkage: constraint drift and energy (RK4)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1.5 s instead of 5 s")
    parser.add_argument("--dt", type=float, default=1e-3, help="RK4 step [s]")
    parser.add_argument("--crank-speed", type=float, default=15.0, help="initial crank speed [rad/s]")
    parser.add_argument("--plot", metavar="PNG", help="plot drift and energy to this file")
    args = parser.parse_args(argv)
    duration = 1.5 if args.quick else 5.0
    n = round(duration / args.dt)

    model = build_linkage()
    cs = loop_closure()
    q0, qd0 = initial_state(model, cs, args.crank_speed)
    print(f"four-bar a={A} b={B} c={C} d={D} m; assembled q0 = {np.round(np.asarray(q0), 6)}, "
          f"qd0 = {np.round(np.asarray(qd0), 6)}")

    t = np.arange(n + 1) * args.dt
    runs = {}
    for label, gains in (("Baumgarte", BAUMGARTE), ("none", (0.0, 0.0))):
        # the same static structure with zero gains: one compilation for both runs
        t0 = time.perf_counter()
        qs, qds, phi, dphi, energy = jax.device_get(
            simulate(model, loop_closure(gains), q0, qd0, args.dt, n))
        runs[label] = {"qs": qs, "qds": qds, "phi": phi, "dphi": dphi, "energy": energy,
                       "seconds": time.perf_counter() - t0}

    r = runs["Baumgarte"]
    print(f"\nRK4, dt = {args.dt:g} s, {n} steps ({duration:g} s); constraint drift:")
    print(f"{'t [s]':>7s} {'|phi| stab.':>12s} {'|G qd| stab.':>13s} {'|phi| none':>12s} "
          f"{'|G qd| none':>12s}")
    for k in np.linspace(0, n, 6).astype(int):
        print(f"{t[k]:7.3f} {r['phi'][k]:12.2e} {r['dphi'][k]:13.2e} "
              f"{runs['none']['phi'][k]:12.2e} {runs['none']['dphi'][k]:12.2e}")

    kinetic0 = float(jaxrbd.kinetic_energy(model, q0, qd0))
    energy_err = float(np.max(np.abs(r["energy"] - r["energy"][0])))
    freud = float(np.max(np.abs(np.asarray(freudenstein(jnp.asarray(r["qs"]))))))
    periods = crank_periods(t, r["qs"][:, 0])
    spread = float(np.ptp(periods) / np.mean(periods)) if len(periods) > 1 else float("nan")
    out = {
        "max_phi": float(r["phi"].max()),
        "max_velocity_residual": float(r["dphi"].max()),
        "max_phi_unstabilised": float(runs["none"]["phi"].max()),
        "max_velocity_residual_unstabilised": float(runs["none"]["dphi"].max()),
        "energy_drift": energy_err,
        "energy_drift_relative": energy_err / kinetic0,
        "freudenstein_residual": freud,
        "crank_turns": len(periods),
        "crank_periods": periods,
        "period_spread": spread,
        "seconds": r["seconds"],
    }
    print(f"\nenergy: E0 = {r['energy'][0]:.6f} J, max |E - E0| = {energy_err:.2e} J "
          f"({out['energy_drift_relative']:.1e} of the initial kinetic energy)")
    print(f"Freudenstein's equation: max residual {freud:.2e}")
    print(f"crank: {len(periods)} full turns, periods {np.round(periods, 6)} s, "
          f"spread {spread:.1e}")
    print(f"simulation (compile + run): {r['seconds']:.1f} s, second run "
          f"{runs['none']['seconds']:.2f} s")
    if args.plot:
        plot(args.plot, t, runs)
    print(f"summary: max |phi| {out['max_phi']:.1e} m (unstabilised "
          f"{out['max_phi_unstabilised']:.1e} m), max |G qd| {out['max_velocity_residual']:.1e} m/s, "
          f"energy drift {out['energy_drift_relative']:.1e}, crank period spread {spread:.1e}")
    return out


if __name__ == "__main__":
    main()
