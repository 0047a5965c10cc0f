"""A humanoid standing on both feet: contact-consistent gravity compensation.

The bundled 36-DoF humanoid (`jaxrbd.models.humanoid`, 82.8 kg, floating base) stands in
a crouched, asymmetric posture (knees bent, torso leaning, one arm forward, head
turned) with both soles flat on the floor. Each sole is held by four 3-D point
contacts at its corners (`jaxrbd.ConstraintSet.contacts_3d`, anchored where the
corners are, with Baumgarte stabilisation): 24 rows of rank 12, a redundant set whose
multipliers `jaxrbd.forward_dynamics_contacts` resolves by the minimum-norm rule.

Gravity compensation by contact-consistent inverse dynamics. At rest (qd = 0,
qdd = 0) the equations of motion read g(q) = S^T tau_a + G^T lam, with g the
generalized gravity (`jaxrbd.gravity_forces`) and S^T selecting the actuated joints.
The six floating-base rows, g_b = G_b^T lam, have no actuator: lam is their
least-squares (minimum-norm) solution, and the joint torques follow as
tau_a = g_a - G_a^T lam. Then

- `jaxrbd.forward_dynamics_contacts` with these torques gives qdd = 0 (all three
  methods, "kkt", "range_space" and "null_space") and returns the same contact forces;
- the vertical contact forces add up to the weight, every corner pushes (f_z > 0)
  and the friction cones |f_t| <= mu f_z (mu = 0.7) hold, along the whole simulation;
- a short RK4 rollout from rest under these constant torques
  (`jaxrbd.rollout(..., dynamics=...)`) keeps the pelvis where it was: the base drift
  is printed. Constant torques without feedback hold an *unstable* equilibrium (the
  crouched posture buckles away from it), so rounding errors grow like e^(17 t) from
  ~1e-16 m: over 0.5 s the pelvis stays put to ~1e-12 m, over 1 s to ~1e-7 m; a few
  seconds would need a stabilising controller, which is beyond this example.

Run:  python examples/humanoid_standing.py [--quick] [--plot out.png]
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxrbd

jax.config.update("jax_enable_x64", True)

MU = 0.7  # friction coefficient of the floor
FOOT = (0.22, 0.10)  # sole length and width [m]; the sole frames sit at the foot centres
BAUMGARTE = (10.0, 10.0)  # (alpha, beta) [1/s]
POSTURE = {  # joint angles [rad]; the rest stay 0
    "lumbar_pitch": 0.1, "neck_yaw": 0.3, "neck_pitch": 0.15,
    "left_shoulder_pitch": -0.6, "left_elbow": -0.8,
    "right_shoulder_roll": -0.3, "right_elbow": -0.3,
    **{f"{s}_{j}": a for s in ("left", "right")
       for j, a in (("hip_pitch", -0.3), ("knee", 0.6), ("ankle_pitch", -0.3))},
}


def posture(model) -> np.ndarray:
    """The joint angles of `POSTURE` on the neutral configuration (pelvis at the origin)."""
    q = np.asarray(jaxrbd.neutral_configuration(model)).copy()
    for name, angle in POSTURE.items():
        q[model.q_index(name)] = angle
    return q


def sole_contacts() -> jaxrbd.ConstraintSet:
    """Four 3-D point contacts per sole, at its corners (targets set by `prepare`)."""
    hx, hy = FOOT[0] / 2, FOOT[1] / 2
    corners = [(sx * hx, sy * hy, 0.0) for sx in (1, -1) for sy in (1, -1)]
    items = [(f"{side}_sole", c) for side in ("left", "right") for c in corners]
    return jaxrbd.ConstraintSet.contacts_3d(items, baumgarte=BAUMGARTE)


@jax.jit
def prepare(model, q, cs):
    """Lift the pelvis so that the soles lie on the floor z = 0, anchor the contacts
    there, and solve the contact-consistent inverse dynamics at rest.

    ``lam`` is the minimum-norm solution of the floating-base rows g_b = G_b^T lam;
    ``tau`` is zero on the floating base and g_a - G_a^T lam on the joints.
    Returns ``(q, cs, tau, lam, G, base_residual)``.
    """
    sole = jaxrbd.point_position(model, q, "left_sole", jnp.zeros(3))
    q = q.at[2].add(-sole[2])  # q = [p (3), quaternion (4), joints]
    cs = cs.anchored(model, q)
    g = jaxrbd.gravity_forces(model, q)
    G = jaxrbd.constraint_jacobian(model, q, cs)
    lam = jnp.linalg.lstsq(G[:, :6].T, g[:6])[0]
    tau = g - G.T @ lam
    return q, cs, tau.at[:6].set(0.0), lam, G, jnp.max(jnp.abs(tau[:6]))


@functools.partial(jax.jit, static_argnames=("n_steps", "every"))
def simulate(model, cs, q0, tau, dt, n_steps, every):
    """RK4 rollout from rest under constant torques; every ``every`` steps the contact
    forces and residuals, and at the start ``(qdd, lam)`` of all three methods."""
    def dynamics(m, q, qd, tau):
        return jaxrbd.forward_dynamics_contacts(m, q, qd, tau, cs)[0]

    qs, qds = jaxrbd.rollout(model, q0, jnp.zeros(model.nv),
                             jnp.broadcast_to(tau, (n_steps, model.nv)), dt, dynamics=dynamics)

    def forces(state):
        q, qd = state
        _, lam = jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs)
        return lam, jnp.max(jnp.abs(jaxrbd.constraint_residual(model, q, cs)))

    # lax.map: one compiled body for all the samples (vmap would compile a batched one)
    lam, phi = jax.lax.map(forces, (qs[::every], qds[::every]))
    at_rest = {}
    for m in ("kkt", "range_space", "null_space"):
        at_rest[m] = jaxrbd.forward_dynamics_contacts(model, q0, jnp.zeros(model.nv), tau, cs,
                                                      method=m)
    return qs, qds, lam, phi, at_rest


def cone_margins(lam):
    """Normal forces and friction ratios |f_t| / f_z of contact forces ``(..., 3)``."""
    fz = lam[..., 2]
    ft = np.hypot(lam[..., 0], lam[..., 1])
    return fz, ft / np.maximum(fz, 1e-300)


def plot(path, t, base_drift, t_lam, lam):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    ax[0].semilogy(t, np.maximum(base_drift, 1e-17))
    ax[0].set_ylabel("pelvis drift |p - p0| [m]")
    for k in range(lam.shape[1]):
        ax[1].plot(t_lam, lam[:, k, 2], label=f"corner {k}")
    ax[1].set_ylabel("normal force [N]")
    ax[1].set_xlabel("t [s]")
    ax[1].legend(fontsize=7, ncol=4)
    fig.suptitle("humanoid standing: base drift and corner forces (RK4)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0.5 s instead of 1 s")
    parser.add_argument("--dt", type=float, default=2e-3, help="RK4 step [s]")
    parser.add_argument("--plot", metavar="PNG", help="plot base drift and forces to this file")
    args = parser.parse_args(argv)
    duration = 0.5 if args.quick else 1.0
    n = round(duration / args.dt)
    every = max(1, n // 50)

    model = jaxrbd.models.humanoid()
    t0 = time.perf_counter()
    q0, cs, tau, lam, G, base_res = jax.device_get(
        prepare(model, jnp.asarray(posture(model)), sole_contacts()))
    weight = float(np.asarray(jaxrbd.total_mass(model))) * float(-model.gravity[2])
    print(f"humanoid: nq = {model.nq}, nv = {model.nv}, weight {weight:.2f} N; "
          f"{cs.size} contact rows (rank {np.linalg.matrix_rank(G)}); pelvis at "
          f"{np.round(q0[:3], 4)} m")

    qs, qds, lam_t, phi_t, at_rest = jax.device_get(
        simulate(model, cs, q0, tau, args.dt, n, every))
    seconds = time.perf_counter() - t0
    qdd0 = {m: float(np.abs(s[0]).max()) for m, s in at_rest.items()}
    lam_gap = max(float(np.abs(s[1] - lam).max()) for s in at_rest.values())
    f = lam.reshape(-1, 3)
    fz, ratio = cone_margins(f)
    print(f"\ncontact-consistent inverse dynamics: floating-base residual {base_res:.1e}, "
          f"max |tau| = {np.abs(tau).max():.1f} N m")
    print("forward dynamics with these torques, max |qdd|: "
          + ", ".join(f"{m} {v:.1e}" for m, v in qdd0.items())
          + f"; max |lam_fd - lam_id| = {lam_gap:.1e} N")
    print(f"{'corner':>14s} {'fx':>8s} {'fy':>8s} {'fz':>8s} {'|ft|/fz':>8s}")
    for k, (fk, rk) in enumerate(zip(f, ratio)):
        name = f"{'left' if k < 4 else 'right'} {k % 4}"
        print(f"{name:>14s} {fk[0]:8.3f} {fk[1]:8.3f} {fk[2]:8.3f} {rk:8.1e}")
    print(f"sum of vertical forces {f[:, 2].sum():.6f} N, weight {weight:.6f} N")

    t = np.arange(n + 1) * args.dt
    base_drift = np.linalg.norm(qs[:, :3] - qs[0, :3], axis=1)
    # rotation angle of the pelvis relative to t = 0: 2 asin |vec(conj(quat0) quat)|
    w0, v0, w, v = qs[0, 3], qs[0, 4:7], qs[:, 3], qs[:, 4:7]
    rel = w0 * v - w[:, None] * v0 - np.cross(v0, v)
    tilt = 2 * np.arcsin(np.clip(np.linalg.norm(rel, axis=1), 0.0, 1.0))
    lam_t = lam_t.reshape(lam_t.shape[0], -1, 3)
    fz_t, ratio_t = cone_margins(lam_t)
    weight_t = np.abs(lam_t[..., 2].sum(axis=1) - weight)
    out = {
        "weight": weight,
        "vertical_force_sum": float(f[:, 2].sum()),
        "weight_error": float(np.abs(f[:, 2].sum() - weight)),
        "base_residual": float(base_res),
        "qdd_at_rest": qdd0,
        "lam_gap": lam_gap,
        "min_normal_force": float(min(fz.min(), fz_t.min())),
        "max_friction_ratio": float(max(ratio.max(), ratio_t.max())),
        "max_weight_error_rollout": float(weight_t.max()),
        "base_drift": float(base_drift.max()),
        "base_rotation": float(tilt.max()),
        "max_velocity": float(np.abs(qds).max()),
        "max_phi": float(phi_t.max()),
        "seconds": seconds,
    }
    print(f"\nRK4, dt = {args.dt:g} s, {n} steps ({duration:g} s), constant torques "
          f"(everything compiled and run in {seconds:.1f} s):")
    print(f"  pelvis drift max {out['base_drift']:.2e} m, rotation {out['base_rotation']:.2e} rad, "
          f"max |qd| {out['max_velocity']:.2e}")
    print(f"  contacts: max |phi| {out['max_phi']:.2e} m, min f_z {out['min_normal_force']:.2f} N, "
          f"max |f_t|/f_z {out['max_friction_ratio']:.1e} (mu = {MU}), "
          f"max |sum f_z - weight| {out['max_weight_error_rollout']:.1e} N")
    if args.plot:
        plot(args.plot, t, base_drift, t[::every], lam_t)
    print(f"summary: sum f_z - weight {out['vertical_force_sum'] - weight:.1e} N, "
          f"max |qdd| at rest {max(qdd0.values()):.1e}, pelvis drift {out['base_drift']:.1e} m "
          f"in {duration:g} s, min f_z {out['min_normal_force']:.1f} N, max |f_t|/f_z "
          f"{out['max_friction_ratio']:.1e} <= mu {MU}")
    return out


if __name__ == "__main__":
    main()
