"""Single-state latency: one robot, one state, one compiled call, against Pinocchio.

talos (floating base, nv 38, ``tests/data/talos.urdf``), float64, one state, for

- ``forward_dynamics`` (against ``pin.aba``),
- ``inverse_dynamics`` (``pin.rnea``),
- ``mass_matrix`` (``pin.crba``),
- ``value_and_grad`` of ``sum(qdd**2)`` with respect to ``(model, q, qd, tau)``
  (``pin.computeABADerivatives``, which gives the state derivatives only),
- ``forward_dynamics_derivatives`` (``pin.computeABADerivatives``),

each compiled once with the jit in use (`jaxrbd.jit` by default) in two ways: ``arg``,
the model a jit argument (what a user who differentiates or swaps models writes), and
``closed``, the model closed over (its arrays constants of the program), and for
each ``Model.traversal`` named by ``--traversals`` (``auto``, the default schedule;
``dense``, the opt-in single-state schedule; ``kernel``, one state's dynamics, their
derivative matrices and their reverse mode as native C++ kernels, `jaxrbd._core.ffi`). A ``dispatch``
row times a jitted function of the same arguments that only returns ``q``: the floor
JAX's call overhead puts under every ``arg`` row (flattening the model pytree included);
a second one, a jitted ``q * 2`` of the state arguments alone, the floor under the
``closed`` rows (one kernel, one output).

A ``rollout`` row (with ``MENAGERIE_ROOT`` set to a MuJoCo Menagerie checkout, else
skipped with the reason) times one trajectory of ``--rollout-steps`` semi-implicit Euler
steps of Menagerie's ``pal_talos`` (``talos_motor.xml`` loaded with `jaxrbd.load_mjcf`,
zero torques, from ``qpos0``) in one `jaxrbd.rollout`, per step, against `mujoco.mj_step`
on the same compiled ``MjModel`` with constraints, actuation, springs and dampers
disabled and the Euler integrator (MuJoCo's Euler is semi-implicit), timed in the same
process, once per traversal; the row records how far the two final states are apart. The same robot
standing on the ground with contacts on is `bench_legged_corpus.py`'s Talos row.

Besides the times the script records the number of kernels one call executes, counted
from the compiled HLO (`_common.count_kernels`: fusions, custom calls, copies, ...,
``while`` bodies times their trip counts): on XLA:CPU each costs a fixed 50-60 ns of
runtime overhead, which dominates small single-state programs.

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_latency.py
    PYTHONPATH=. python benchmarks/bench_latency.py --robots talos,solo12 --budget 1

Writes ``benchmarks/results/latency.json`` (``--out`` overrides).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common as C

import jaxrbd

ROBOTS = {"panda": False, "solo12": True, "talos": True}  # name -> floating base
FUNCTIONS_ALL = ("forward_dynamics", "inverse_dynamics", "mass_matrix", "value_and_grad",
             "forward_dynamics_derivatives")
PEER = {
    "forward_dynamics": "aba",
    "inverse_dynamics": "rnea",
    "mass_matrix": "crba",
    "value_and_grad": "computeABADerivatives",
    "forward_dynamics_derivatives": "computeABADerivatives",
}
#: talos targets of issue 31 (seconds; the derivatives: a multiple of Pinocchio's call)
TARGETS = {
    "forward_dynamics": 25e-6,
    "inverse_dynamics": 12e-6,
    "mass_matrix": 15e-6,
    "value_and_grad": 100e-6,
    "forward_dynamics_derivatives": "2x",
}


def _loss(model, q, qd, tau):
    return jnp.sum(jaxrbd.forward_dynamics(model, q, qd, tau) ** 2)


def jax_function(name):
    """``f(model, q, qd, x)`` of one state (``x``: ``tau`` or ``qdd``)."""
    return {
        "forward_dynamics": lambda m, q, qd, x: jaxrbd.forward_dynamics(m, q, qd, x),
        "inverse_dynamics": lambda m, q, qd, x: jaxrbd.inverse_dynamics(m, q, qd, x),
        "mass_matrix": lambda m, q, qd, x: jaxrbd.mass_matrix(m, q),
        "value_and_grad": jax.value_and_grad(_loss, argnums=(0, 1, 2, 3)),
        "forward_dynamics_derivatives":
            lambda m, q, qd, x: jaxrbd.forward_dynamics_derivatives(m, q, qd, x),
    }[name]


def pin_call(pin, pm, pd, name, q, v, w):
    if name == "forward_dynamics":
        return lambda: pin.aba(pm, pd, q, v, w)
    if name == "inverse_dynamics":
        return lambda: pin.rnea(pm, pd, q, v, w)
    if name == "mass_matrix":
        return lambda: pin.crba(pm, pd, q)
    return lambda: pin.computeABADerivatives(pm, pd, q, v, w)


def kernels(jitted, *args) -> int:
    return C.count_kernels(jitted.lower(*args).compile().as_text())


def run_robot(name, floating, args, rows):
    pin = C.pinocchio()
    base = jaxrbd.load_urdf(C.DATA / f"{name}.urdf", floating_base=floating)
    model = base
    peers = {}
    if pin is None:
        # Without Pinocchio (a device machine, say) the rows keep their times and kernel
        # counts and lose the peer columns.
        kq, kv, kw = jax.random.split(jax.random.key(0), 3)
        qj = jaxrbd.random_configuration(model, kq)
        vj = jax.random.normal(kv, (model.nv,), qj.dtype)
        wj = jax.random.normal(kw, (model.nv,), qj.dtype)
    else:
        pm = C.pin_load_urdf(C.DATA / f"{name}.urdf", floating)
        pd = pm.createData()
        rng = np.random.default_rng(0)
        q, v, w = C.pin_random_state(pm, rng)
        qj, vj, wj = (jnp.asarray(x) for x in _to_jaxrbd(model, pm, q, v, w))
        for fn in args.functions:
            pname = PEER[fn]
            if pname not in peers:
                peers[pname] = C.time_python(pin_call(pin, pm, pd, fn, q, v, w),
                                             budget_s=args.pin_budget)
    floor = jax.jit(lambda m, q, qd, x: q)
    d = C.time_jax(floor, model, qj, vj, wj, budget_s=args.budget)
    rows.append({"robot": name, "function": "dispatch", "model": "arg",
                 "time_s": d["min_s"], "median_s": d["median_s"]})
    print(f"{name}: dispatch floor (model as argument) {C.fmt_time(d['min_s'])}", flush=True)
    # the floor under every `closed` row: one elementwise kernel of the state arguments
    floor = jax.jit(lambda q, qd, x: q * 2)
    d = C.time_jax(floor, qj, vj, wj, budget_s=args.budget)
    rows.append({"robot": name, "function": "dispatch", "model": "closed",
                 "time_s": d["min_s"], "median_s": d["median_s"]})
    print(f"{name}: dispatch floor (model closed over, q * 2) {C.fmt_time(d['min_s'])}",
          flush=True)
    for fn, traversal in ((fn, t) for t in args.traversals for fn in args.functions):
        model = base.with_traversal(traversal)
        f = jax_function(fn)
        peer = peers.get(PEER[fn])
        for how in args.models:
            if how == "arg":
                call_args = (model, qj, vj, wj)
                g = f
            else:
                call_args = (qj, vj, wj)
                g = lambda q, qd, x, f=f: f(model, q, qd, x)  # noqa: E731
            jitted, _, compile_s = C.compile_jit(g, *call_args)
            nk = kernels(jitted, *call_args)
            t = C.time_jax(jitted, *call_args, budget_s=args.budget)
            row = {"robot": name, "nv": model.nv, "function": fn, "model": how,
                   "traversal": traversal, "time_s": t["min_s"], "median_s": t["median_s"],
                   "compile_s": compile_s, "kernels": nk}
            if peer is not None:
                row.update({"peer": f"pin.{PEER[fn]}", "peer_s": peer["min_s"],
                            "peer_median_s": peer["median_s"],
                            "ratio": t["min_s"] / peer["min_s"]})
            target = TARGETS.get(fn) if name == "talos" else None
            if isinstance(target, float):
                row["target_s"] = target
                row["met"] = t["min_s"] <= target
            elif target == "2x" and peer is not None:
                row["target_s"] = 2 * peer["min_s"]
                row["met"] = t["min_s"] <= 2 * peer["min_s"]
            rows.append(row)
            vs = (f"pin {C.fmt_time(peer['min_s']):>9s}  x{row['ratio']:.2f}" if peer
                  else "no Pinocchio")
            print(f"  {fn:30s} {how:6s} {traversal:5s} {C.fmt_time(t['min_s']):>9s} (median "
                  f"{C.fmt_time(t['median_s'])})  {vs}  kernels {nk}  "
                  f"compile {compile_s:.2f} s", flush=True)

def run_rollout(args, rows):
    """The one-trajectory ``rollout`` row against ``mj_step`` (see the module doc)."""
    root = os.environ.get("MENAGERIE_ROOT")
    if not root:
        print("rollout: skipped, MENAGERIE_ROOT is not set (a MuJoCo Menagerie checkout)")
        return
    try:
        import mujoco
    except ImportError:
        print("rollout: skipped, mujoco is not installed")
        return
    m, _ = C.menagerie_model(Path(root) / "pal_talos" / "talos_motor.xml")
    D = mujoco.mjtDisableBit
    for bit in (D.mjDSBL_CONSTRAINT, D.mjDSBL_ACTUATION, D.mjDSBL_SPRING, D.mjDSBL_DAMPER):
        m.opt.disableflags |= int(bit)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    # MuJoCo's equality constraints are off with the rest of its constraints: every joint
    # of the jaxrbd model is independent too
    base = jaxrbd.load_mjcf(m, joint_equalities="independent")
    n, dt = args.rollout_steps, float(m.opt.timestep)
    q0, qd0 = jnp.asarray(m.qpos0), jnp.zeros(base.nv)
    tau = jnp.zeros((n, base.nv))
    d = mujoco.MjData(m)
    best = np.inf
    for _ in range(5):
        mujoco.mj_resetData(m, d)
        t0 = time.perf_counter()
        for _ in range(n):
            mujoco.mj_step(m, d)
        best = min(best, time.perf_counter() - t0)
    for traversal in args.traversals:
        model = base.with_traversal(traversal)

        def simulate(q0, qd0, tau, model=model):
            return jaxrbd.rollout(model, q0, qd0, tau, dt, "semi_implicit_euler")

        jitted, _, compile_s = C.compile_jit(simulate, q0, qd0, tau)
        t = C.time_jax(jitted, q0, qd0, tau, budget_s=max(args.budget, 3.0), min_repeats=3)
        qs, _ = jitted(q0, qd0, tau)
        # jaxrbd's free-joint quaternion is MuJoCo's (w, x, y, z) in its own order: compare
        # the positions of the base and the hinge angles
        q_end = np.asarray(qs[-1])
        gap = float(max(np.max(np.abs(q_end[:3] - d.qpos[:3])),
                        np.max(np.abs(q_end[7:] - d.qpos[7:]))))
        row = {"robot": "pal_talos (Menagerie)", "nv": model.nv, "function": "rollout",
               "model": "closed", "traversal": traversal, "peer": "mujoco.mj_step",
               "steps": n, "time_s": t["min_s"] / n, "median_s": t["median_s"] / n,
               "peer_s": best / n, "compile_s": compile_s, "ratio": t["min_s"] / best,
               "target_s": 2 * best / n, "met": t["min_s"] <= 2 * best,
               "final_state_gap": gap}
        rows.append(row)
        print(f"  rollout {traversal} ({n} steps, per step)  {C.fmt_time(row['time_s'])}  "
              f"mj_step {C.fmt_time(row['peer_s'])}  x{row['ratio']:.2f}  compile "
              f"{compile_s:.2f} s  final-state gap {gap:.1e}", flush=True)

def _to_jaxrbd(model, pm, q, v, w):
    """Pinocchio's state in jaxrbd's joint order (per-joint blocks match, matched by name,
    as in ``tests/conftest.reference_maps``)."""
    q_map, v_map = np.full(model.nq, -1), np.full(model.nv, -1)
    for j in range(1, pm.njoints):
        name = pm.names[j]
        qs, vs = model.q_index(name), model.v_index(name)
        q_map[qs] = np.arange(pm.idx_qs[j], pm.idx_qs[j] + pm.nqs[j])
        v_map[vs] = np.arange(pm.idx_vs[j], pm.idx_vs[j] + pm.nvs[j])
    assert (q_map >= 0).all() and (v_map >= 0).all(), "some joints were not mapped"
    return q[q_map], v[v_map], w[v_map]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--robots", default="talos", help="comma-separated: panda,solo12,talos")
    p.add_argument("--models", default="arg,closed",
                   help="arg (model a jit argument), closed (closed over), or both")
    p.add_argument("--functions", default=",".join(FUNCTIONS_ALL))
    p.add_argument("--traversals", default="auto,dense,kernel",
                   help="Model.traversal of the rows: auto (the default schedule), dense, "
                        "kernel")
    p.add_argument("--budget", type=float, default=1.0, help="seconds per jaxrbd row")
    p.add_argument("--pin-budget", type=float, default=0.5, help="seconds per Pinocchio row")
    p.add_argument("--rollout-steps", type=int, default=1000,
                   help="steps of the Menagerie pal_talos rollout row (0: no rollout row)")
    p.add_argument("--out", default=str(C.RESULTS / "latency.json"))
    p.add_argument("--note", default="AMD EPYC VM, AVX2 only (no AVX-512), 2 cores shared "
                   "with other work; times are the minimum of adaptive repeats",
                   help="machine note written to the JSON metadata")
    C.add_jit_argument(p)
    args = p.parse_args(argv)
    C.use_jit(args.jit)
    args.models = args.models.split(",")
    args.functions = tuple(args.functions.split(","))
    args.traversals = tuple(args.traversals.split(","))
    rows = []
    for name in args.robots.split(","):
        run_robot(name, ROBOTS[name], args, rows)
    if args.rollout_steps:
        run_rollout(args, rows)
    meta = C.machine_metadata()
    meta["machine"]["note"] = args.note
    C.write_json(args.out, rows, meta)
    print()
    def blank(fmt):
        return lambda x: "-" if x is None else fmt(x)

    C.print_table([r for r in rows if r["function"] != "dispatch"], [
        ("robot", "robot", str), ("function", "function", str), ("model", "model", str),
        ("traversal", "traversal", str), ("jaxrbd", "time_s", C.fmt_time),
        ("peer", "peer", blank(str)), ("peer t", "peer_s", blank(C.fmt_time)),
        ("ratio", "ratio", blank(lambda x: f"{x:.2f}")), ("kernels", "kernels", str),
        ("compile", "compile_s", lambda x: f"{x:.2f} s"),
        ("target", "target_s", blank(C.fmt_time)), ("met", "met", blank(str)),
    ])


if __name__ == "__main__":
    main()
