"""Motor rotors of the Manutec r3: no rotors, the diagonal armature and exact rotors.

The six-axis Manutec r3 (`jaxrbd.models.manutec_r3`: Otter and Tuerk 1988, the DLR model
behind Modelica's ``RobotR3``; motor inertias 4.3e-5 to 1.3e-3 kg m^2 behind gears of
60 to 210) moves all six axes at once, from the start to the end angles of Modelica's
``RobotR3.FullRobot`` reference (-60, 20, 90, 0, -110, 0 deg to 60, -70, -35, 45, 110,
45 deg), along minimum-jerk (quintic) profiles whose peak speeds stay within the
robot's reference limits. Inverse dynamics gives the joint torques of three models:

* ``none``: the links only;
* ``armature``: each motor as reflected inertia ``J i^2`` on its own joint (the diagonal
  approximation of Modelica's 1-D drive trains, MuJoCo's and Pinocchio's armature);
* ``exact``: each rotor a body spinning at ``i q`` on the link before its joint
  (`ModelBuilder.add_rotor`), so that the carrier's rotation adds to its spin and its
  gyroscopic coupling with the arm enters ``H`` and ``C``.

The table gives each axis's peak and RMS torque in the three models and how far apart
they are: what the rotors add at all (armature - none), and what the diagonal
approximation misses (exact - armature), which is of order ``1/i`` of the former.

Run:  python examples/manutec_r3_rotors.py [--quick] [--duration S] [--plot PATH]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jaxrbd

jax.config.update("jax_enable_x64", True)

#: Modelica RobotR3.FullRobot's reference motion [deg]
START = np.array([-60.0, 20.0, 90.0, 0.0, -110.0, 0.0])
END = np.array([60.0, -70.0, -35.0, 45.0, 110.0, 45.0])


def quintic(t, duration, q0, q1):
    """Minimum-jerk point-to-point ``(q, qd, qdd)`` at times ``t`` `(N,)` -> `(N, 6)`."""
    s = jnp.clip(t / duration, 0.0, 1.0)[:, None]
    dq = (q1 - q0)[None]
    pos = 10 * s**3 - 15 * s**4 + 6 * s**5
    vel = (30 * s**2 - 60 * s**3 + 30 * s**4) / duration
    acc = (60 * s - 180 * s**2 + 120 * s**3) / duration**2
    return q0[None] + dq * pos, dq * vel, dq * acc


def torques(duration, samples):
    """Times `(N,)`, the trajectory and the torques `(N, 6)` of the three variants."""
    t = jnp.linspace(0.0, duration, samples)
    q, qd, qdd = quintic(t, duration, jnp.deg2rad(START), jnp.deg2rad(END))
    out = {}
    for variant in ("none", "armature", "exact"):
        model = jaxrbd.models.manutec_r3(variant)
        rnea = jax.jit(jax.vmap(jaxrbd.inverse_dynamics, in_axes=(None, 0, 0, 0)))
        out[variant] = np.asarray(rnea(model, q, qd, qdd))
    return np.asarray(t), (np.asarray(q), np.asarray(qd), np.asarray(qdd)), out


def table(tau):
    """The per-axis table as text, and the largest exact - armature difference."""
    none, arm, exact = tau["none"], tau["armature"], tau["exact"]
    peak = lambda x: np.max(np.abs(x), axis=0)
    rms = lambda x: np.sqrt(np.mean(x**2, axis=0))
    lines = [
        "        max |tau| [N m]            RMS tau [N m]              "
        "max |difference| [N m]",
        "axis    none   armature   exact    none   armature   exact    "
        "arm-none   exact-arm  (% of max|tau|)",
    ]
    for k in range(6):
        d1, d2 = peak(arm - none)[k], peak(exact - arm)[k]
        lines.append(
            f"{k + 1:>4} {peak(none)[k]:>7.2f} {peak(arm)[k]:>9.2f} {peak(exact)[k]:>8.2f} "
            f"{rms(none)[k]:>7.2f} {rms(arm)[k]:>9.2f} {rms(exact)[k]:>8.2f} "
            f"{d1:>10.3f} {d2:>10.4f}  ({100 * d2 / peak(exact)[k]:.2f} %)"
        )
    return "\n".join(lines), peak(exact - arm), peak(arm - none)


def plot(path, t, tau):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 2, figsize=(11, 9), sharex=True, constrained_layout=True)
    for k, ax in enumerate(axes.ravel()):
        ax.plot(t, tau["none"][:, k], "k:", label="no rotors")
        ax.plot(t, tau["armature"][:, k], "C0", lw=2, label="diagonal armature")
        ax.plot(t, tau["exact"][:, k], "C1--", lw=1.5, label="exact rotors")
        ax.set_title(f"axis {k + 1}")
        ax.set_ylabel("torque [N m]")
        twin = ax.twinx()
        twin.plot(t, tau["exact"][:, k] - tau["armature"][:, k], "C3", lw=0.8)
        twin.set_ylabel("exact - armature [N m]", color="C3")
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    axes[0, 0].legend(loc="best", fontsize=8)
    fig.suptitle("Manutec r3: joint torques without rotors, with diagonal armature, "
                 "with exact rotors")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (for the tests)")
    parser.add_argument("--duration", type=float, default=2.4,
                        help="time for the motion [s] (2.4 s keeps every axis under "
                             "Modelica's reference speed limits)")
    parser.add_argument("--plot", type=str, default=None, help="save a figure to this path")
    args = parser.parse_args(argv)
    samples = 61 if args.quick else 481
    t, (q, qd, qdd), tau = torques(args.duration, samples)
    print(f"Manutec r3: all six axes from {START.astype(int).tolist()} deg to "
          f"{END.astype(int).tolist()} deg in {args.duration} s (quintic, {samples} samples)")
    print("peak speeds [rad/s]: " + ", ".join(f"{v:.2f}" for v in np.abs(qd).max(0)))
    text, d_exact, d_arm = table(tau)
    print(text)
    if args.plot:
        plot(args.plot, t, tau)
        print(f"figure: {args.plot}")
    k = int(np.argmax(d_exact))
    print(f"summary: the armature changes the torques by up to {d_arm.max():.2f} N m; the "
          f"exact rotors differ from it by up to {d_exact.max():.3f} N m (axis {k + 1})")
    return {"max_exact_minus_armature": d_exact, "max_armature_minus_none": d_arm}


if __name__ == "__main__":
    main()
