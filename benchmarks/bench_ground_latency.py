"""One trajectory on the ground, one state at a time: the hard step against `mj_step`.

Issue 31's contact row: a single-trajectory `jaxrbd.ground.rollout` (semi-implicit Euler,
``HardContact()`` defaults, dt = 1 ms) per step against MuJoCo's `mj_step` with contacts
on, timed in the same process. Robots:

- ``solo12`` (``tests/data/solo12.urdf``): a sphere (r = 16 mm) at each foot, standing on
  z = 0 (`bench_ground.scene`); MuJoCo's scene is built from the same URDF with the same
  spheres (`bench_ground.mujoco_model`, no torques there);
- Menagerie's ANYmal C and ``pal_talos`` (with ``MENAGERIE_ROOT``, else skipped):
  standing at their keyframe on their collision geoms' points within 2 cm of the ground,
  held by the joint PD and feed-forward torques of `bench_legged_corpus` (its ``scene``
  and ``run_mujoco``: only the feet collide in MuJoCo, friction 1).

jaxrbd runs the same PD policy on every robot (solo12's from its standing pose), once per
``Model.traversal`` of ``--traversals`` (``auto``, the XLA programs; ``kernel``, one
state's dynamics and contact solve as native kernels, `jaxrbd._core.ffi`,
`jaxrbd._core.ffi_contact`). Each row records the time per step (the minimum of the
repeats of one jitted ``--steps``-step rollout, divided by the steps), the solver's
iterations (mean and largest) and converged fraction, and the number of kernels one
compiled step executes (`_common.count_kernels`, with the solver's loop counted once)
and those of one trip of that loop. ``--phases`` adds, at the state half-way through the
trajectory (warm-started from the step before), the time and kernels of the step's
parts compiled alone: contact kinematics and Jacobian, mass matrix, bias forces, all of
the contact problem's terms (Cholesky, Delassus matrix, free velocity), the solve, and
the whole step.

Run from the repository root:

    MENAGERIE_ROOT=/path/to/mujoco_menagerie PYTHONPATH=. python benchmarks/bench_ground_latency.py

Writes ``benchmarks/results/ground_latency.json`` (``--out`` overrides).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common as C  # noqa: E402
import bench_ground  # noqa: E402
import bench_legged_corpus as corpus  # noqa: E402

import jaxrbd  # noqa: E402
from jaxrbd import ground  # noqa: E402
from jaxrbd._api import kernels as model_kernels  # noqa: E402
from jaxrbd.ground import _geometry, _solvers  # noqa: E402

DT = 1e-3
#: issue 31: the one-trajectory hard-contact step within 3x `mj_step` with contacts on
TARGET_RATIO = 3.0
MENAGERIE = {"anymal_c": ("ANYmal C", "anybotics_anymal_c", "scene.xml", None),
             "pal_talos": ("Talos", "pal_talos", "scene_motor.xml", None)}


def loop_kernels(text: str) -> int:
    """Kernels of one trip of the largest ``while`` loop of unknown trip count in a
    compiled program (the solver's check loop), its nested loops counted as
    `_common.count_kernels` counts them."""
    comps, _ = C._hlo_computations(text)
    best = 0
    for ops in comps.values():
        for opcode, line in ops:
            if opcode != "while" or "known_trip_count" in line:
                continue
            called = C._called(line, "body") + C._called(line, "condition")
            best = max(best, sum(_count(comps, c, {}) for c in called))
    return best


def _count(comps, name, memo):
    if name in memo:
        return memo[name]
    memo[name] = 0
    total = 0
    for opcode, line in comps.get(name, []):
        if opcode in C._FREE_OPS:
            continue
        if opcode == "while":
            m = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', line)
            trips = int(m.group(1)) if m else 1
            inner = sum(_count(comps, c, memo) for c in C._called(line, "body")
                        + C._called(line, "condition"))
            total += 1 + trips * inner
        elif opcode == "call":
            total += sum(_count(comps, c, memo) for c in C._called(line, "to_apply"))
        elif opcode == "conditional":
            branches = C._called(line, "branch_computations") or (
                C._called(line, "true_computation") + C._called(line, "false_computation"))
            total += 1 + max((_count(comps, c, memo) for c in branches), default=0)
        else:
            total += 1
    memo[name] = total
    return total


def _bandwidth_gains(model, qref, hz=20.0):
    """PD gains of a ``hz`` bandwidth on each joint's apparent inertia ``1 / (H^-1)_ii``,
    critically damped: solo12 (a URDF scene, no MuJoCo model for the corpus's
    gravity-stiffness rule) stands on them."""
    w = 2 * np.pi * hz
    H = np.asarray(jaxrbd.mass_matrix(model, jnp.asarray(qref)))
    h = 1.0 / np.diag(np.linalg.inv(H))[6:]
    return h * w * w, 2 * h * w


def solo12_scene():
    """solo12 standing, in `bench_legged_corpus.scene`'s form, and its `mj_step` time."""
    model, contacts, q0, items, urdf = bench_ground.scene("solo12")
    qref = np.asarray(q0)
    tau_ff, fz, _ = corpus.feed_forward(model, contacts, qref)
    s = dict(model=model, feet=contacts, qref=qref, gains=_bandwidth_gains(model, qref),
             tau_ff=tau_ff, ff_forces=fz)
    mj_s = bench_ground.time_mujoco(urdf, items, qref, nstep=200)
    return s, mj_s


def menagerie_scene(root, key, steps):
    corpus.ARGS = argparse.Namespace(band=0.02)
    s = corpus.scene(root, *MENAGERIE[key])
    _, _, _, mj_s = corpus.run_mujoco(s, steps)
    return s, mj_s


def policy_of(s, model):
    qref = jnp.asarray(s["qref"])
    kp, kd = (jnp.asarray(g) for g in s["gains"])
    tau0 = jnp.asarray(s["tau_ff"])

    def policy(t, q, qd):
        return jnp.zeros(model.nv).at[6:].set(tau0 + kp * (qref[7:] - q[7:]) - kd * qd[6:])

    return policy


def phases(model, s, qs, qds, info, budget):
    """Time and kernels of the step's parts at the half-way state (module doc)."""
    feet, plane = s["feet"], ground.Plane(0.0, friction=1.0)
    policy = policy_of(s, model)
    i = qs.shape[0] // 2
    q, qd = qs[i], qds[i]
    tau = policy(0.0, q, qd)
    warm = info.force[i - 1]
    k = model_kernels(model)
    p = ground.HardContact()
    dt = jnp.asarray(DT)

    def terms(q, qd, tau):
        # the arrays of `_hard_terms` (its impulse-velocity map is a function)
        gap, frame, mu, A, c, _, v_free = ground._hard_terms(model, k, q, qd, tau, dt, feet,
                                                             plane, p)
        return gap, frame, mu, A, c, v_free

    _, _, mu, A, c, _ = terms(q, qd, tau)
    native = ground._native(model)

    def solve(A, c, mu, lam0):
        return _solvers.solve(p.solver, p.iterations, p.admm_rho, p.admm_adaptive, p.polish,
                              p.tolerance, A, c, mu, lam0, native)

    parts = {
        "jacobian": (lambda q: _geometry.contact_jacobian(ground._kinematics(model), k, q,
                                                          feet, plane), (q,)),
        "mass_matrix": (lambda q: k.mass_matrix(model, q), (q,)),
        "bias_forces": (lambda q, qd: k.bias_forces(model, q, qd), (q, qd)),
        "contact_terms": (terms, (q, qd, tau)),
        "solve": (solve, (A, c, mu, warm.reshape(-1) * DT)),
        "step": (lambda q, qd, tau, w: ground.step(model, q, qd, tau, DT, feet, plane,
                                                   warm_start=w), (q, qd, tau, warm)),
    }
    out = {}
    for name, (f, args) in parts.items():
        jitted = jax.jit(f)
        text = jitted.lower(*args).compile().as_text()
        t = C.time_jax(jitted, *args, budget_s=budget)
        out[name] = {"time_s": t["min_s"], "kernels": C.count_kernels(text),
                     "loop_kernels": loop_kernels(text)}
    return out


def run(label, s, mj_s, traversal, args):
    model = s["model"].with_traversal(traversal)
    feet, plane = s["feet"], ground.Plane(0.0, friction=1.0)
    policy = policy_of(s, model)
    n = args.steps
    q0 = jnp.asarray(s["qref"])

    def simulate(q0):
        return ground.rollout(model, q0, jnp.zeros(model.nv), None, DT, feet, plane,
                              n_steps=n, policy=policy)

    jitted = jax.jit(simulate)
    t0 = time.perf_counter()
    jitted.lower(q0).compile()
    compile_s = time.perf_counter() - t0
    qs, qds, info = jitted(q0)
    t = C.time_jax(jitted, q0, budget_s=args.budget, min_repeats=3)
    tau = policy(0.0, q0, jnp.zeros(model.nv))
    step = jax.jit(lambda q, qd, tau, w: ground.step(model, q, qd, tau, DT, feet, plane,
                                                     warm_start=w))
    zero = jnp.zeros((len(feet), 3))
    text = step.lower(q0, jnp.zeros(model.nv), tau, zero).compile().as_text()
    its = np.asarray(info.iterations)
    row = {"robot": label, "nv": model.nv, "points": len(feet), "traversal": traversal,
           "steps": n, "time_s": t["min_s"] / n, "median_s": t["median_s"] / n,
           "peer": "mujoco.mj_step (contacts on)", "peer_s": mj_s,
           "ratio": t["min_s"] / n / mj_s, "target_ratio": TARGET_RATIO,
           "met": t["min_s"] / n <= TARGET_RATIO * mj_s, "compile_s": compile_s,
           "iterations_mean": float(its.mean()), "iterations_max": int(its.max()),
           "converged_fraction": float(np.mean(np.asarray(info.converged))),
           "kernels_step": C.count_kernels(text), "kernels_loop_trip": loop_kernels(text),
           "final_base_z": float(qs[-1, 2]), "final_q": np.asarray(qs[-1]).tolist()}
    if args.phases:
        row["phases"] = phases(model, s, qs, qds, info, args.phase_budget)
    print(f"  {label} {traversal:6s} {C.fmt_time(row['time_s']):>9s}/step (median "
          f"{C.fmt_time(row['median_s'])})  mj_step {C.fmt_time(mj_s)}  x{row['ratio']:.2f}  "
          f"iters {row['iterations_mean']:.1f} (max {row['iterations_max']})  kernels "
          f"{row['kernels_step']} (+{row['kernels_loop_trip']} a loop trip)  compile "
          f"{compile_s:.1f} s", flush=True)
    for name, ph in row.get("phases", {}).items():
        print(f"      {name:14s} {C.fmt_time(ph['time_s']):>9s}  kernels {ph['kernels']} "
              f"(loop trip {ph['loop_kernels']})", flush=True)
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--robots", default="solo12,anymal_c,pal_talos")
    p.add_argument("--traversals", default="auto,kernel")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--budget", type=float, default=3.0, help="seconds per rollout row")
    p.add_argument("--phases", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--phase-budget", type=float, default=0.5)
    p.add_argument("--out", default=str(C.RESULTS / "ground_latency.json"))
    p.add_argument("--note", default="AMD EPYC VM, AVX2 only (no AVX-512), 2 cores shared "
                   "with other work; times are minima of repeats")
    args = p.parse_args(argv)
    root = os.environ.get("MENAGERIE_ROOT")
    rows, skipped = [], []
    for key in args.robots.split(","):
        if key == "solo12":
            label = "solo12"
            s, mj_s = solo12_scene()
        elif key in MENAGERIE:
            label = f"{MENAGERIE[key][0]} (Menagerie)"
            if not root:
                print(f"{key}: skipped, MENAGERIE_ROOT is not set")
                skipped.append({"robot": key, "reason": "MENAGERIE_ROOT is not set"})
                continue
            s, mj_s = menagerie_scene(root, key, args.steps)
        else:
            raise SystemExit(f"unknown robot {key!r}")
        print(f"{label}: nv {s['model'].nv}, {len(s['feet'])} points", flush=True)
        for traversal in args.traversals.split(","):
            rows.append(run(label, s, mj_s, traversal, args))
    meta = C.machine_metadata()
    meta["machine"]["note"] = args.note
    C.write_json(args.out, rows, meta, skipped=skipped, dt=DT)
    print()
    C.print_table(rows, [
        ("robot", "robot", str), ("traversal", "traversal", str),
        ("jaxrbd/step", "time_s", C.fmt_time), ("mj_step", "peer_s", C.fmt_time),
        ("ratio", "ratio", lambda x: f"{x:.2f}"), ("met (3x)", "met", str),
        ("iters", "iterations_mean", lambda x: f"{x:.1f}"),
        ("max", "iterations_max", str), ("kernels", "kernels_step", str),
        ("loop trip", "kernels_loop_trip", str),
        ("compile", "compile_s", lambda x: f"{x:.1f} s"),
    ])
    print("wrote", args.out)


if __name__ == "__main__":
    main()
