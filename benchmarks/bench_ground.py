"""Benchmark ground contact (`jaxrbd.ground`) against MuJoCo C and MJX on the same scenes.

Scenes (``tests/data``, floating base, flat ground, friction 1, dt = 1 ms, no torques,
started standing): solo12 with a sphere (r = 16 mm) at each of its 4 feet, and talos
with 4 spheres (r = 10 mm) at the corners of each sole (8 points). The MuJoCo scene is
built from the same URDF by MuJoCo's URDF import (meshes stripped, the same spheres
added as collision geometry, a free joint and a ground plane): same masses, inertias
and contact points.

Rows (per robot, contact model, variant and batch ``B``): ``--inner`` steps from ``B``
states, ``batched`` by `jaxrbd.batched.ground_rollout` (blocks of samples, the way to run
large batches) and ``vmap`` by ``jit(vmap(ground.rollout))`` over the whole batch;
``steps_per_s`` counts sample-steps (``B * inner / time``). Each row is timed for every
model traversal of ``--traversals`` (default ``auto,kernel``: `Model.with_traversal`;
``"kernel"`` runs the hard step's dynamics terms and contact solve as native calls), the
traversals and ``mj_step`` in turn over ``--rounds`` rounds, each figure the minimum.
Peers in the same run: ``mujoco_c`` (``mj_step`` loop, one thread, ``nstep`` steps per
call) and ``mjx`` (``jit``
of a ``lax.map`` over blocks of `MJX_BLOCK` samples of ``fori_loop(vmap(mjx.step))``), in
this process when ``mujoco.mjx`` imports, else in the interpreter named by the
``MJX_PYTHON`` environment variable (a venv with matching ``mujoco`` and
``mujoco-mjx``, e.g. both 3.17.0). ``ratio_mujoco`` = MuJoCo's time per sample-step / ours
(> 1: jaxrbd is faster).

A second table compares the two hard-contact solvers on single contact problems
(solo12 and talos at rest, sliding, at an impact): the largest violation of the contact
conditions [m/s] after 10, 20, 50, 100 iterations (`ground.solve_contact_problem`).

    PYTHONPATH=. python benchmarks/bench_ground.py             # batches 1, 1024, 4096
    PYTHONPATH=. python benchmarks/bench_ground.py --quick     # batches 1, 256; inner 20

Issue 29's check of the hard step against 1.5x ``mj_step`` (one command line, pinned):
``PYTHONPATH=. taskset -c 1 python benchmarks/bench_ground.py --robots solo12,talos
--batches 4096 --models hard --variants batched --no-solvers
--out benchmarks/results/ground_4096_kernel.json``.

Writes ``benchmarks/results/ground.json`` (``--quick``: ``ground_quick.json``). The
machine is shared: figures are noisy (the load average is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402

import jaxrbd  # noqa: E402
from jaxrbd import ground  # noqa: E402

DT = 1e-3


def scene(robot):
    """``(model, contacts, q0, sphere_items, urdf_text)`` for a robot standing on z = 0."""
    path = cm.DATA / f"{robot}.urdf"
    model = jaxrbd.load_urdf(path, floating_base=True)
    if robot == "solo12":
        items = [(f"{leg}_FOOT", (0.0, 0.0, 0.0), 0.016) for leg in ("FL", "FR", "HL", "HR")]
        q = jnp.zeros(model.nq).at[3].set(1.0)
        q = q.at[7:].set(jnp.array([0, 0.8, -1.6] * 2 + [0, -0.8, 1.6] * 2))
    else:
        items = [(s, (x, y, 0.0), 0.01) for s in ("left_sole_link", "right_sole_link")
                 for x in (-0.1, 0.1) for y in (-0.065, 0.065)]
        q = jnp.zeros(model.nq).at[3].set(1.0)
    contacts = ground.ContactPoints.create(model, items)
    gap, *_ = ground.contact_frames(model, q, contacts, ground.Plane())
    q = q.at[2].add(-jnp.min(gap))
    return model, contacts, q, items, path.read_text()


def mujoco_xml(urdf_text, items):
    """The URDF without meshes, with the contact spheres as collision geometry."""
    root = ET.fromstring(urdf_text)
    for link in root.iter("link"):
        for tag in ("visual", "collision"):
            for el in link.findall(tag):
                link.remove(el)
    links = {l.get("name"): l for l in root.iter("link")}
    for body, p, r in items:
        col = ET.SubElement(links[body], "collision")
        ET.SubElement(col, "origin", xyz=" ".join(map(str, p)))
        geom = ET.SubElement(col, "geometry")
        ET.SubElement(geom, "sphere", radius=str(r))
    return ET.tostring(root, encoding="unicode")


def mujoco_model(urdf_text, items):
    import mujoco

    spec = mujoco.MjSpec.from_string(mujoco_xml(urdf_text, items))
    spec.option.timestep = DT
    spec.option.gravity = [0.0, 0.0, -9.81]
    base = spec.worldbody.first_body()
    base.add_freejoint()
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[20, 20, 0.1])
    for g in spec.geoms:
        g.friction = [1.0, 0.005, 0.0001]
    return spec.compile()


def time_mujoco(urdf_text, items, q0, nstep=200):
    import mujoco

    m = mujoco_model(urdf_text, items)
    d = mujoco.MjData(m)
    if m.nq != q0.shape[0]:
        raise RuntimeError(f"MuJoCo scene has nq = {m.nq}, jaxrbd {q0.shape[0]}")

    def call():
        mujoco.mj_resetData(m, d)
        d.qpos[:] = q0
        mujoco.mj_step(m, d, nstep)

    t = cm.time_python(call, budget_s=1.0, block_s=1e-3, min_repeats=5, max_repeats=200)
    return t["min_s"] / nstep


#: Samples per MJX block: jax 0.10.2's CPU LAPACK kernels deadlock XLA's thread pool
#: when a batched call splits over it, and MJX's step makes such calls: one 1024-sample
#: `vmap(mjx.step)` sat at 0 % CPU for 8 minutes (benchmarks/LOG.md). 64 samples run.
MJX_BLOCK = 64


def mjx_rows(robot, batches, inner):
    """MJX timings, in this process when ``mujoco.mjx`` imports: ``jit`` of a `lax.map`
    over blocks of `MJX_BLOCK` samples, each a ``fori_loop`` of ``vmap(mjx.step)``."""
    from mujoco import mjx

    _, _, q0, items, urdf = scene(robot)
    m = mujoco_model(urdf, items)
    mx = mjx.put_model(m)
    rows = []
    for B in batches:
        blk = min(B, MJX_BLOCK)
        nblk = -(-B // blk)
        d0 = mjx.make_data(mx).replace(qpos=jnp.asarray(np.asarray(q0)))
        batch = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (nblk, blk) + x.shape), d0)

        def run(d):
            def block(db):
                step = lambda _, d: jax.vmap(mjx.step, (None, 0))(mx, d)
                return jax.lax.fori_loop(0, inner, step, db)

            return jax.lax.map(block, d)

        t0 = time.perf_counter()
        f = jax.jit(run).lower(batch).compile()
        compile_s = time.perf_counter() - t0
        t = cm.time_jax(f, batch, budget_s=2.0, min_repeats=3, max_repeats=50)
        rows.append(dict(robot=robot, batch=B, mjx_s_per_step=t["median_s"] / (nblk * blk * inner),
                         mjx_compile_s=compile_s, mjx_block=blk))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def solver_table(robots):
    from jaxrbd.ground._solvers import natural_residual, solve

    plane = ground.Plane(friction=0.7)
    rows = []
    for robot in robots:
        model, contacts, q, *_ = scene(robot)
        for case in ("rest", "slide", "impact"):
            qd = jnp.zeros(model.nv)
            if case == "slide":
                qd = qd.at[3].set(1.0)
            if case == "impact":
                qd = qd.at[5].set(-1.0).at[3].set(0.3)
            A, c, mu = ground.contact_problem(model, q, qd, jnp.zeros(model.nv), DT, contacts,
                                              plane)
            row = dict(robot=robot, case=case, rows=int(A.shape[0]))
            for solver, rho in (("pgs", 0.0), ("admm", 0.05), ("admm", 0.2), ("admm", 1.0)):
                for it in (10, 20, 50, 100):
                    lam, _, _ = solve(solver, it, rho, False, False, 0.0, A, c, mu,
                                      jnp.zeros_like(c))
                    key = f"{solver}{'' if solver == 'pgs' else rho}@{it}"
                    row[key] = float(natural_residual(lam, A, c, mu))
            rows.append(row)
    return rows


def solver_timing(robots, B=1024):
    """Time per solve of one contact problem, batched (same iterations)."""
    from jaxrbd.ground._solvers import solve

    out = []
    for robot in robots:
        model, contacts, q, *_ = scene(robot)
        A, c, mu = ground.contact_problem(model, q, jnp.zeros(model.nv), jnp.zeros(model.nv), DT,
                                          contacts, ground.Plane())
        As, cs, mus = (jnp.broadcast_to(x, (B,) + x.shape) for x in (A, c, mu))
        for solver, it in (("pgs", 30), ("admm", 30)):
            f = jax.jit(jax.vmap(
                lambda A, c, mu: solve(solver, it, 0.5, True, True, 0.0, A, c, mu,
                                       jnp.zeros_like(c))[0]))
            t = cm.time_jax(f, As, cs, mus, budget_s=1.0)
            out.append(dict(robot=robot, solver=solver, iterations=it, batch=B,
                            us_per_solve=1e6 * t["median_s"] / B))
    return out


def timed_rows(robot, model, contacts, q0, items, urdf, kind, variant, B, inner, traversals,
               rounds):
    """One row per traversal of ``robot``'s ``kind`` model, ``variant``, batch ``B``: the
    programs compiled first, then ``rounds`` rounds that time each traversal and
    MuJoCo's ``mj_step`` loop in turn (interleaved: the machine's load hits all alike);
    each figure is the minimum over the rounds of the minimum over a round's repeats."""
    Q = jnp.broadcast_to(q0, (B, model.nq))
    QD = jnp.zeros((B, model.nv))
    taus = jnp.zeros((inner, model.nv))

    def program(m):
        def run(Q, QD):
            if variant == "batched":  # blocks of samples (jaxrbd.batched)
                TAU = jnp.broadcast_to(taus, (Q.shape[0],) + taus.shape)
                return jaxrbd.batched.ground_rollout(m, Q, QD, TAU, DT, contacts,
                                                     ground.Plane(), kind)[:2]
            f = lambda q, qd: ground.rollout(m, q, qd, taus, DT, contacts, ground.Plane(),
                                             kind)[:2]
            return jax.vmap(f)(Q, QD)

        return run

    compiled = {}
    for t in traversals:
        f, _, compile_s = cm.compile_jit(program(model.with_traversal(t)), Q, QD)
        compiled[t] = (f, compile_s)
    best = dict.fromkeys(traversals, float("inf"))
    try:
        mj_step_s = time_mujoco(urdf, items, np.asarray(q0))
    except Exception as e:  # MuJoCo missing or its URDF import failing
        print(f"MuJoCo: {e}", file=sys.stderr)
        mj_step_s = None
    for _ in range(rounds):
        for t in traversals:
            f = compiled[t][0]
            best[t] = min(best[t], cm.time_jax(f, Q, QD, budget_s=2.0, min_repeats=3,
                                               max_repeats=100)["min_s"] / (B * inner))
        if mj_step_s is not None:
            mj_step_s = min(mj_step_s, time_mujoco(urdf, items, np.asarray(q0)))
    rows = []
    for t in traversals:
        per = best[t]
        rows.append(dict(robot=robot, model=kind, variant=variant, traversal=t, batch=B,
                         inner=inner, rounds=rounds, s_per_step=per, steps_per_s=1.0 / per,
                         compile_s=compiled[t][1], mujoco_c_s_per_step=mj_step_s,
                         ratio_mujoco=None if mj_step_s is None else mj_step_s / per))
        print(f"{robot:7s} {kind:9s} {variant:7s} {t:6s} B={B:6d}: {1e6 * per:9.2f} "
              f"us/sample-step (MuJoCo C {1e6 * mj_step_s if mj_step_s else float('nan'):.2f}"
              f" us), compile {compiled[t][1]:.1f} s", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--robots", default="solo12,talos")
    ap.add_argument("--batches", default=None)
    ap.add_argument("--inner", type=int, default=None)
    ap.add_argument("--models", default="hard,compliant", help="contact models timed")
    ap.add_argument("--variants", default="batched,vmap", help="batched and/or vmap")
    ap.add_argument("--traversals", default="auto,kernel",
                    help="model traversals timed side by side (`Model.with_traversal`)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved timing rounds (traversals and mj_step in turn)")
    ap.add_argument("--no-solvers", action="store_true",
                    help="skip the solver convergence and timing tables")
    ap.add_argument("--mjx-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mjx-timeout", type=float, default=1800.0,
                    help="seconds for the MJX subprocess (MJX_PYTHON) before it is given up")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    robots = args.robots.split(",")
    gpu = jax.devices()[0].platform == "gpu"
    default_batches = "1,256" if args.quick else ("1,1024,4096,16384" if gpu else "1,1024,4096")
    batches = [int(b) for b in (args.batches or default_batches).split(",")]
    inner = args.inner or (20 if args.quick else 50)
    kinds, variants = args.models.split(","), args.variants.split(",")
    traversals = args.traversals.split(",")

    if args.mjx_only:
        rows = [r for robot in robots for r in mjx_rows(robot, batches, inner)]
        print(json.dumps(rows))
        return

    rows = []
    for robot in robots:
        model, contacts, q0, items, urdf = scene(robot)
        for kind in kinds:
            for variant in variants:
                for B in batches:
                    if variant == "vmap" and B == 1:
                        continue  # the same program as the batched row
                    rows += timed_rows(robot, model, contacts, q0, items, urdf, kind, variant,
                                       B, inner, traversals, args.rounds)

    # MJX: in this process if it imports, else in the interpreter named by MJX_PYTHON
    mjx = []
    try:
        from mujoco import mjx as _  # noqa: F401

        mjx = [r for robot in robots for r in mjx_rows(robot, batches, inner)]
    except ImportError:
        py = os.environ.get("MJX_PYTHON")
        if py:
            cmd = [py, __file__, "--mjx-only", "--robots", args.robots,
                   "--batches", ",".join(map(str, batches)), "--inner", str(inner)]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True,
                                     timeout=args.mjx_timeout,
                                     env=dict(os.environ, PYTHONPATH=str(cm.ROOT)))
            except subprocess.TimeoutExpired as e:
                err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
                out = subprocess.CompletedProcess(
                    cmd, 1, "", err + f"\ntimed out after {args.mjx_timeout} s")
            if out.returncode == 0:
                mjx = json.loads(out.stdout.strip().splitlines()[-1])
            else:  # keep the rows done before the failure (one JSON line each on stderr)
                mjx = [json.loads(line) for line in (out.stderr or "").splitlines()
                       if line.startswith('{"robot"')]
                print("MJX run failed:", out.stderr[-2000:], file=sys.stderr)
    for r in rows:
        for m in mjx:
            if m["robot"] == r["robot"] and m["batch"] == r["batch"]:
                r["mjx_s_per_step"] = m["mjx_s_per_step"]
                r["ratio_mjx"] = m["mjx_s_per_step"] / r["s_per_step"]
                r["mjx_compile_s"] = m["mjx_compile_s"]

    us = lambda x: "-" if x is None else f"{1e6 * x:.2f}"
    ratio = lambda x: "-" if x is None else f"{x:.2f}"
    cm.print_table(rows, [("robot", "robot", str), ("model", "model", str),
                          ("variant", "variant", str), ("traversal", "traversal", str),
                          ("batch", "batch", str),
                          ("us/step", "s_per_step", us), ("MuJoCo C", "mujoco_c_s_per_step", us),
                          ("MJX", "mjx_s_per_step", us), ("x MuJoCo", "ratio_mujoco", ratio),
                          ("x MJX", "ratio_mjx", ratio), ("compile s", "compile_s", ratio)])
    solvers = timing = None
    if not args.no_solvers:
        solvers = solver_table(robots)
        print("\nlargest violation of the contact conditions [m/s] after k iterations")
        keys = [k for k in solvers[0] if "@" in k]
        cm.print_table(solvers, [("robot", "robot", str), ("case", "case", str)]
                       + [(k, k, lambda x: f"{x:.1e}") for k in keys])
        timing = solver_timing(robots)
        cm.print_table(timing, [("robot", "robot", str), ("solver", "solver", str),
                                ("iters", "iterations", str),
                                ("us/solve", "us_per_solve", lambda x: f"{x:.2f}")])
    out = args.out or cm.RESULTS / ("ground_quick.json" if args.quick else "ground.json")
    cm.write_json(out, rows, cm.machine_metadata(), solvers=solvers, solver_timing=timing,
                  mjx_available=bool(mjx), dt=DT)
    print("wrote", out)


if __name__ == "__main__":
    main()
