"""Benchmark forward kinematics, Jacobians and the centroidal momentum matrix against Pinocchio.

Models: panda (fixed base), solo12 and talos (floating base) from ``tests/data``. For
every model and function:

- ``single``: one jitted call on one state;
- ``vmap``: ``jit(jax.vmap(f, in_axes=(None, 0)))`` on a batch of configurations;

with the model's default traversal (``"auto"``; ``--traversal`` picks another). Functions
and the Pinocchio calls they are compared with (timed in the same run on one state):

==============================  ==========================================================
jaxrbd                          Pinocchio
==============================  ==========================================================
``forward_kinematics``          ``framesForwardKinematics`` (every joint and link frame)
``body_jacobians(frame="world")``  ``computeJointJacobians`` (one 6 x nv world matrix)
``point_jacobian`` (K points)   ``computeJointJacobians`` + ``updateFramePlacements`` +
                                K x ``getFrameJacobian(LOCAL_WORLD_ALIGNED)``
``centroidal_momentum_matrix``  ``computeCentroidalMap``
==============================  ==========================================================

``ratio`` is the jaxrbd time per sample over the Pinocchio time per call (< 1: jaxrbd is
faster). Before timing, the script checks at one random state that both libraries agree
(link positions, point velocities, centroidal momentum) and stops if they do not.

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_kinematics.py            # full, ~3-5 min on 2 idle cores
    PYTHONPATH=. python benchmarks/bench_kinematics.py --quick    # smoke test
    PYTHONPATH=. python benchmarks/bench_kinematics.py --robots talos --batches 1,4096

Writes ``benchmarks/results/kinematics.json`` (``--quick``: ``kinematics_quick.json``;
``--out`` overrides).

``jit`` is `jaxrbd.jit` (jax.jit plus XLA CPU options that suit jaxrbd); ``--jit jax``
uses plain `jax.jit` and writes ``*_jaxjit.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
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
BATCHES = (1, 64, 1024, 4096)
FUNCTIONS = (
    "forward_kinematics",
    "body_jacobians",
    "point_jacobian",
    "centroidal_momentum_matrix",
)
# The points of the several-point Jacobian: links (end effectors, feet), each with a point
# 5 cm along the link's z axis (an OP_FRAME at the same place in Pinocchio).
POINT_LINKS = {
    "panda": ("panda_hand_tcp", "panda_leftfinger", "panda_rightfinger"),
    "solo12": ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"),
    "talos": ("left_sole_link", "right_sole_link", "gripper_left_base_link",
              "gripper_right_base_link"),
}
POINT_OFFSET = (0.0, 0.0, 0.05)
PIN_CALLS = {
    "forward_kinematics": "framesForwardKinematics",
    "body_jacobians": "computeJointJacobians",
    "point_jacobian": "computeJointJacobians + updateFramePlacements + K x getFrameJacobian",
    "centroidal_momentum_matrix": "computeCentroidalMap",
}
# A second Pinocchio timing kept in the JSON (`pinocchio_alt_s`) to bracket the comparison.
PIN_ALT_CALLS = {
    "forward_kinematics": "forwardKinematics (joint placements only, no link frames)",
    "body_jacobians": "computeJointJacobians + updateFramePlacements + getFrameJacobian"
                      "(LOCAL_WORLD_ALIGNED) for every link frame (the same output as jaxrbd)",
}
CHECK_TOL = 1e-9

QUICK = {"robots": "panda", "batches": "64", "budget": 0.05, "pin_budget": 0.05}


@dataclasses.dataclass(frozen=True)
class Job:
    model: str
    function: str
    variant: str  # "single" | "vmap"
    batch: int | None  # None for the single call

    def label(self) -> str:
        b = "" if self.batch is None else f" B={self.batch}"
        return f"{self.model} {self.function} {self.variant}{b}"


# --------------------------------------------------------------------------- models


class Robot:
    """One robot in both libraries, its random states and the point sets."""

    def __init__(self, name: str, max_batch: int, traversal: str, seed: int = 0):
        path = C.DATA / f"{name}.urdf"
        self.name = name
        floating = ROBOTS[name]
        self.model = jaxrbd.load_urdf(path, floating_base=floating).with_traversal(traversal)
        m = self.model
        self.point_bodies = [m.body_id(b) for b in POINT_LINKS[name]]
        self.points = jnp.broadcast_to(
            jnp.asarray(POINT_OFFSET, m.dtype), (len(self.point_bodies), 3)
        )
        k_single, k_batch = jax.random.split(jax.random.key(seed))
        self.q = jaxrbd.random_configuration(m, k_single)
        keys = jax.random.split(k_batch, max_batch)
        self.Q = jax.vmap(lambda k: jaxrbd.random_configuration(m, k))(keys)
        self.pin = None
        if C.pinocchio() is not None:
            self.pin = PinRobot(C.pin_load_urdf(path, floating), m, POINT_LINKS[name])

    def args(self, batch):
        return (self.model, self.q if batch is None else jnp.array(self.Q[:batch]))

    def function(self, function: str):
        """``f(model, q)`` for one state."""
        if function == "forward_kinematics":
            return jaxrbd.forward_kinematics
        if function == "body_jacobians":
            return lambda m, q: jaxrbd.body_jacobians(m, q, frame="world")
        if function == "point_jacobian":
            bodies, points = self.point_bodies, self.points
            return lambda m, q: jaxrbd.point_jacobian(m, q, bodies, points)
        if function == "centroidal_momentum_matrix":
            return jaxrbd.centroidal_momentum_matrix
        raise ValueError(function)


class PinRobot:
    """A Pinocchio model with an OP_FRAME at each benchmark point, and the q/v maps."""

    def __init__(self, pm, model, point_links):
        pin = C.pinocchio()
        self.model = pm
        self.point_frames = []
        for k, link in enumerate(point_links):
            parent = pm.frames[pm.getFrameId(link)]
            placement = parent.placement * pin.SE3(np.eye(3), np.asarray(POINT_OFFSET))
            frame = pin.Frame(f"bench_point_{k}", parent.parentJoint, pm.getFrameId(link),
                              placement, pin.FrameType.OP_FRAME)
            self.point_frames.append(pm.addFrame(frame))
        self.link_frames = [i for i, f in enumerate(pm.frames) if f.type == pin.FrameType.BODY]
        self.data = pm.createData()
        # jaxrbd q/v -> Pinocchio q/v, matched by joint name. The free joint differs in
        # layout: quaternion (w, x, y, z) vs (x, y, z, w) and velocity [w; v] vs [v; w].
        self.q_map = np.zeros(pm.nq, dtype=int)
        self.v_map = np.zeros(pm.nv, dtype=int)
        for j in range(1, pm.njoints):
            name, jm = pm.names[j], pm.joints[j]
            qs = model.q_index(model.joint_names[0] if name == "root_joint" else name)
            vs = model.v_index(model.joint_names[0] if name == "root_joint" else name)
            qi, vi = np.arange(qs.start, qs.stop), np.arange(vs.start, vs.stop)
            if jm.nq == 7:
                qi, vi = qi[[0, 1, 2, 4, 5, 6, 3]], vi[[3, 4, 5, 0, 1, 2]]
            self.q_map[jm.idx_q:jm.idx_q + jm.nq] = qi
            self.v_map[jm.idx_v:jm.idx_v + jm.nv] = vi

    def calls(self, function: str, q):
        """``(call, alt_call or None)``: zero-argument Pinocchio calls for one state."""
        pin, pm, data = C.pinocchio(), self.model, self.data
        lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        if function == "forward_kinematics":
            return (lambda: pin.framesForwardKinematics(pm, data, q),
                    lambda: pin.forwardKinematics(pm, data, q))
        if function == "body_jacobians":
            frames = self.link_frames

            def all_frames():
                pin.computeJointJacobians(pm, data, q)
                pin.updateFramePlacements(pm, data)
                for f in frames:
                    pin.getFrameJacobian(pm, data, f, lwa)

            return (lambda: pin.computeJointJacobians(pm, data, q)), all_frames
        if function == "point_jacobian":
            frames = self.point_frames

            def points():
                pin.computeJointJacobians(pm, data, q)
                pin.updateFramePlacements(pm, data)
                for f in frames:
                    pin.getFrameJacobian(pm, data, f, lwa)

            return points, None
        if function == "centroidal_momentum_matrix":
            return (lambda: pin.computeCentroidalMap(pm, data, q)), None
        raise ValueError(function)


def check(robot: Robot) -> dict:
    """Largest differences jaxrbd vs Pinocchio at one random state; stops if too large.

    Link origins (``forward_kinematics`` vs ``oMf``), world velocities of the benchmark
    points (``point_jacobian @ v``), every body's world Jacobian applied to ``v`` at its
    origin, and the centroidal momentum (``A @ v``, Pinocchio's ``Ag`` is [linear; angular]).
    """
    pin, pr, m = C.pinocchio(), robot.pin, robot.model
    rng = np.random.default_rng(7)
    q = np.asarray(robot.q)
    v = rng.standard_normal(m.nv)
    q_pin, v_pin = q[pr.q_map], v[pr.v_map]

    @jax.jit
    def ours(m, q, v):
        _, p = jaxrbd.forward_kinematics(m, q)
        Jp = jaxrbd.point_jacobian(m, q, robot.point_bodies, robot.points)
        Jb = jaxrbd.body_jacobians(m, q, frame="world")
        return p, Jp @ v, Jb @ v, jaxrbd.centroidal_momentum_matrix(m, q) @ v

    p, vp, vb, h = (np.asarray(x) for x in ours(m, jnp.asarray(q), jnp.asarray(v)))
    pm, data = pr.model, pr.data
    pin.computeJointJacobians(pm, data, q_pin)
    pin.updateFramePlacements(pm, data)
    lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    errs = {"link_positions": 0.0, "body_velocities_world": 0.0}
    for f in pr.link_frames:
        b = m.body_id(pm.frames[f].name)
        errs["link_positions"] = max(errs["link_positions"], float(
            np.abs(p[b] - data.oMf[f].translation).max()))
        Jv = pin.getFrameJacobian(pm, data, f, lwa) @ v_pin  # [v; w]
        errs["body_velocities_world"] = max(errs["body_velocities_world"], float(
            np.abs(vb[b] - np.concatenate([Jv[3:], Jv[:3]])).max()))
    vp_pin = np.stack([(pin.getFrameJacobian(pm, data, f, lwa) @ v_pin)[:3]
                       for f in pr.point_frames])
    errs["point_velocities"] = float(np.abs(vp - vp_pin).max())
    hg = pin.computeCentroidalMap(pm, data, q_pin) @ v_pin
    errs["centroidal_momentum"] = float(np.abs(h - np.concatenate([hg[3:], hg[:3]])).max())
    bad = {k: e for k, e in errs.items() if not e <= CHECK_TOL}
    if bad:
        raise SystemExit(f"{robot.name}: jaxrbd and Pinocchio disagree: {bad} > {CHECK_TOL}")
    return errs


# --------------------------------------------------------------------------- jobs


def make_jobs(models, functions, batches) -> list[Job]:
    jobs = []
    for name in models:
        for fn in functions:
            jobs.append(Job(name, fn, "single", None))
            jobs.extend(Job(name, fn, "vmap", B) for B in batches)
    return jobs


class Runner:
    def __init__(self, args, max_batch):
        self.args = args
        self.max_batch = max_batch
        self.robots, self.pin_times, self.checks = {}, {}, {}

    def robot(self, name) -> Robot:
        if name not in self.robots:
            r = Robot(name, self.max_batch, self.args.traversal)
            self.robots[name] = r
            if r.pin is not None:
                self.checks[name] = check(r)
                worst = max(self.checks[name].values())
                print(f"  check {name}: max |jaxrbd - pinocchio| = {worst:.2e}", flush=True)
        return self.robots[name]

    def pin_time(self, robot: Robot, function):
        key = (robot.name, function)
        if key not in self.pin_times:
            if robot.pin is None:
                self.pin_times[key] = (None, None)
            else:
                q = np.asarray(robot.q)[robot.pin.q_map]
                call, alt = robot.pin.calls(function, q)
                budget = self.args.pin_budget
                self.pin_times[key] = (
                    C.time_python(call, budget_s=budget),
                    alt and C.time_python(alt, budget_s=budget),
                )
        return self.pin_times[key]

    def run(self, job: Job) -> dict:
        robot = self.robot(job.model)
        f = robot.function(job.function)
        if job.variant == "vmap":
            f = jax.vmap(f, in_axes=(None, 0))
        args = robot.args(job.batch)
        jitted, lower_s, compile_s = C.compile_jit(f, *args)
        t = C.time_jax(jitted, *args, budget_s=self.args.budget)
        n = 1 if job.batch is None else job.batch
        pin, alt = self.pin_time(robot, job.function)
        pin_s = pin and pin["median_s"]
        per_sample = t["median_s"] / n
        m = robot.model
        return {
            **dataclasses.asdict(job),
            "traversal": m.traversal,
            "nq": m.nq,
            "nv": m.nv,
            "nbodies": m.nbodies,
            "npoints": len(robot.point_bodies) if job.function == "point_jacobian" else None,
            "lower_s": lower_s,
            "compile_s": compile_s,
            "time_s": t["median_s"],
            "time_min_s": t["min_s"],
            "per_sample_s": per_sample,
            "pinocchio_s": pin_s,
            "pinocchio_min_s": pin and pin["min_s"],
            "pinocchio_call": PIN_CALLS[job.function] if pin else None,
            "ratio": per_sample / pin_s if pin_s else None,
            "pinocchio_alt_s": alt and alt["median_s"],
            "pinocchio_alt_call": PIN_ALT_CALLS.get(job.function) if alt else None,
            "repeats": t["repeats"],
            "inner": t["inner"],
            "error": None,
        }


# --------------------------------------------------------------------------- report


def _num(fmt):
    return lambda x: "-" if x is None else fmt.format(x)


COLUMNS = [
    ("model", "model", str),
    ("nv", "nv", str),
    ("function", "function", str),
    ("variant", "variant", str),
    ("batch", "batch", lambda b: "-" if b is None else str(b)),
    ("compile", "compile_s", C.fmt_time),
    ("call", "time_s", C.fmt_time),
    ("per sample", "per_sample_s", C.fmt_time),
    ("pinocchio", "pinocchio_s", C.fmt_time),
    ("ratio", "ratio", _num("{:.3g}")),
    ("pin alt", "pinocchio_alt_s", C.fmt_time),
    ("reps", "repeats", _num("{}")),
]


def sort_key(row):
    return (
        list(ROBOTS).index(row["model"]),
        FUNCTIONS.index(row["function"]),
        row["batch"] is not None,
        row["batch"] or 0,
    )


def print_summary(rows, batches):
    """One line per model and function: Pinocchio, single call, compile, largest batch."""
    big = max(batches, default=None)
    ok = [r for r in rows if r.get("error") is None]
    print(f"\nSummary: per-sample time (ratio jaxrbd / Pinocchio); vmap at B={big}")
    out = []
    for name in ROBOTS:
        for fn in FUNCTIONS:
            single = next((r for r in ok if r["model"] == name and r["function"] == fn
                           and r["variant"] == "single"), None)
            vm = next((r for r in ok if r["model"] == name and r["function"] == fn
                       and r["variant"] == "vmap" and r["batch"] == big), None)
            if single is None and vm is None:
                continue
            any_row = single or vm

            def cell(r):
                if r is None:
                    return "-"
                ratio = "" if r["ratio"] is None else f" ({r['ratio']:.3g})"
                return C.fmt_time(r["per_sample_s"]) + ratio

            out.append({
                "model": name, "nv": str(any_row["nv"]), "function": fn,
                "pinocchio": C.fmt_time(any_row["pinocchio_s"]),
                "single": cell(single),
                "compile": C.fmt_time(single and single["compile_s"]),
                "vmap": cell(vm),
            })
    C.print_table(out, [(h, h, str) for h in ("model", "nv", "function", "pinocchio",
                                              "single", "compile", "vmap")])


# --------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: robots {QUICK['robots']}, batches {QUICK['batches']}, "
                        "short timing budgets (unless given explicitly)")
    p.add_argument("--robots", help=f"comma-separated subset of {','.join(ROBOTS)}")
    p.add_argument("--batches", help="comma-separated batch sizes (default: "
                                     f"{','.join(map(str, BATCHES))}; empty: single calls only)")
    p.add_argument("--functions", default=",".join(FUNCTIONS),
                   help="comma-separated subset of " + ",".join(FUNCTIONS))
    p.add_argument("--traversal", default="auto", choices=("auto", "level", "body"),
                   help="model traversal (default: the library default, 'auto')")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of timing per jaxrbd row (default 0.4, --quick 0.05)")
    p.add_argument("--pin-budget", type=float, default=None,
                   help="seconds of timing per Pinocchio call (default 0.3, --quick 0.05)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="soft wall-clock limit in seconds: rows not started by then are "
                        "skipped (and listed)")
    p.add_argument("--out", help="JSON output path")
    C.add_jit_argument(p)
    a = p.parse_args(argv)
    C.use_jit(a.jit)
    a.robots = a.robots or (QUICK["robots"] if a.quick else ",".join(ROBOTS))
    if a.batches is None:
        a.batches = QUICK["batches"] if a.quick else ",".join(map(str, BATCHES))
    a.budget = a.budget if a.budget is not None else (QUICK["budget"] if a.quick else 0.4)
    if a.pin_budget is None:
        a.pin_budget = QUICK["pin_budget"] if a.quick else 0.3
    if a.out is None:
        a.out = C.RESULTS / ("kinematics" + ("_quick" if a.quick else "") + C.jit_suffix() + ".json")
    return a


def _warm_up():
    """Pay JAX's one-time start-up costs (backend, first trace of jaxrbd) before timing."""
    m = jaxrbd.models.chain(2)
    q = jnp.zeros((4, m.nq), m.dtype)
    C.compile_jit(jaxrbd.forward_kinematics, m, q[0])
    C.compile_jit(jax.vmap(jaxrbd.body_jacobians, in_axes=(None, 0)), m, q)


def main(argv=None):
    args = parse_args(argv)
    models = [s.strip() for s in args.robots.split(",") if s.strip()]
    for name in models:
        if name not in ROBOTS:
            raise SystemExit(f"unknown robot {name!r}; expected a subset of {list(ROBOTS)}")
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    if any(b < 1 for b in batches):
        raise SystemExit(f"batch sizes must be >= 1, got {batches}")
    functions = [s.strip() for s in args.functions.split(",") if s.strip()]
    for fn in functions:
        if fn not in FUNCTIONS:
            raise SystemExit(f"unknown function {fn!r}; expected a subset of {FUNCTIONS}")
    if C.pinocchio() is None:
        print("pinocchio is not installed: the pinocchio and ratio columns stay empty")

    meta = C.machine_metadata()
    meta.update(
        dtype="float64",
        models=models,
        batches=batches,
        functions=functions,
        traversal=args.traversal,
        point_links={m: list(POINT_LINKS[m]) for m in models},
        point_offset=list(POINT_OFFSET),
        pinocchio_calls=PIN_CALLS,
        pinocchio_alt_calls=PIN_ALT_CALLS,
        quick=args.quick,
        budget_s=args.budget,
        pin_budget_s=args.pin_budget,
        complete=False,
    )
    print(f"jax {meta['jax']}, pinocchio {meta['pinocchio']}, float64, "
          f"{meta['machine']['cpu']} ({meta['machine']['cpu_usable']} usable cores), "
          f"{meta['machine']['platform']}", flush=True)
    load = meta["machine"]["load_avg_1min_at_start"]
    if load is not None and load > 0.5 * (meta["machine"]["cpu_usable"] or 1):
        print(f"warning: load average {load} on {meta['machine']['cpu_usable']} cores: "
              "other processes compete for the CPU, times will be inflated", flush=True)

    t_start = time.perf_counter()
    _warm_up()
    jobs = make_jobs(models, functions, batches)
    runner = Runner(args, max(batches, default=1))
    rows, skipped = [], []
    for i, job in enumerate(jobs):
        elapsed = time.perf_counter() - t_start
        if args.time_limit is not None and elapsed > args.time_limit:
            skipped = [j.label() for j in jobs[i:]]
            print(f"time limit {args.time_limit:.0f} s reached: skipping {len(skipped)} rows",
                  flush=True)
            break
        try:
            row = runner.run(job)
        except Exception as e:  # noqa: BLE001  (report and go on: the library may be mid-change)
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            row = {**dataclasses.asdict(job), "error": msg}
            print(f"[{i + 1:>3}/{len(jobs)} {elapsed:5.0f}s] {job.label()}: FAILED {msg}",
                  flush=True)
        else:
            print(f"[{i + 1:>3}/{len(jobs)} {elapsed:5.0f}s] {job.label()}: "
                  f"compile {C.fmt_time(row['compile_s'])}, call {C.fmt_time(row['time_s'])}, "
                  f"per sample {C.fmt_time(row['per_sample_s'])}, pinocchio "
                  f"{C.fmt_time(row['pinocchio_s'])}, ratio "
                  f"{'-' if row['ratio'] is None else format(row['ratio'], '.3g')}", flush=True)
        rows.append(row)
        C.write_json(args.out, sorted(rows, key=sort_key), meta, checks=runner.checks)
        if i + 1 < len(jobs) and jobs[i + 1].model != job.model:
            jax.clear_caches()

    rows.sort(key=sort_key)
    meta.update(complete=not skipped, total_s=time.perf_counter() - t_start)
    meta["machine"]["load_avg_1min_at_end"] = C.load_average()
    C.write_json(args.out, rows, meta, checks=runner.checks, skipped=skipped)
    print()
    C.print_table([r for r in rows if r.get("error") is None], COLUMNS)
    failed = [r for r in rows if r.get("error")]
    for r in failed:
        print(f"FAILED {Job(r['model'], r['function'], r['variant'], r['batch']).label()}: "
              f"{r['error']}")
    print_summary(rows, batches)
    print(f"\n{len(rows) - len(failed)} rows, {len(failed)} failed, {len(skipped)} skipped "
          f"in {meta['total_s']:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
