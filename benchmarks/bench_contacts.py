"""Benchmark forward_dynamics_contacts (three KKT methods) against Pinocchio.

Robots (``tests/data``, floating base): solo12 with its 4 feet and talos with its 2
soles, each foot a 3-D point contact (`jaxrbd.ConstraintSet.contacts_3d` at the
``contact_links`` / ``contact_points`` of the reference data: 12 and 6 rows). For
every robot and method (``"kkt"``, ``"range_space"``, ``"null_space"``):

- ``single``: ``jit(forward_dynamics_contacts)`` on one state;
- ``vmap``: ``jit(jax.vmap(forward_dynamics_contacts, in_axes=(None, 0, 0, 0, None)))``
  on a batch of states;
- ``single_checked`` (range_space only): ``check_rank=True``, the opt-in rank check
  (`eqx.error_if`); the default path has no runtime checks.

The model and the constraint set are jit arguments, as users call it. Pinocchio is
timed in the same run on one state, two ways:

- ``pin_cd``: ``pin.constraintDynamics`` with one ``RigidConstraintModel``
  (``CONTACT_3D``, ``LOCAL_WORLD_ALIGNED``) per foot, the whole computation in C++
  (``initConstraintDynamics`` once, outside the timing);
- ``pin_fd``: ``pin.forwardDynamics(model, data, q, v, tau, J, gamma, 0.0)``, the call
  used for the reference data, with ``J`` and ``gamma`` computed beforehand and *not*
  timed (so this time leaves out the constraint kinematics jaxrbd includes).

``ratio`` = jaxrbd time per sample / ``pin_cd``; ``ratio_fd`` = per sample / ``pin_fd``
(< 1: jaxrbd is faster). Checks in the same run: each method's ``single`` function on
the stored reference samples (``contact_qdd``, ``contact_lambda``: ``ref_err``), and
``pin_cd`` against ``pin_fd`` on Pinocchio's timed state.

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_contacts.py            # full (~15 min on a loaded 2-core machine)
    PYTHONPATH=. python benchmarks/bench_contacts.py --quick    # smoke test: solo12, batch 64
    PYTHONPATH=. python benchmarks/bench_contacts.py --robots talos --batches 1,4096

Every row runs under a watchdog (``--row-timeout``): a hung row is recorded as such and
the run stops there; ``--skip method:batch,...`` leaves rows out (listed under
``left_out`` in the JSON). jax 0.10.2's CPU LAPACK kernels can deadlock XLA's thread
pool when they split a batch; `jaxrbd._core.linalg` keeps every call below the split (see its
docstring), and no row has hung since.

Writes ``benchmarks/results/contacts.json`` (``--quick``: ``contacts_quick.json``;
``--out`` overrides).

``jit`` is `jaxrbd.jit` (jax.jit plus XLA CPU options that suit jaxrbd); ``--jit jax``
uses plain `jax.jit` and writes ``*_jaxjit.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import threading
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

ROBOTS = ("solo12", "talos")
METHODS = ("kkt", "range_space", "null_space")
BATCHES = (1, 64, 1024, 4096)
QUICK = {"robots": "solo12", "batches": "64", "budget": 0.05, "pin_budget": 0.05}


@dataclasses.dataclass(frozen=True)
class Job:
    robot: str
    method: str
    variant: str  # "single" | "single_checked" | "vmap"
    batch: int | None  # None for single calls

    def label(self) -> str:
        b = "" if self.batch is None else f" B={self.batch}"
        return f"{self.robot} {self.method} {self.variant}{b}"


# --------------------------------------------------------------------------- robots


def reference(name: str) -> dict:
    with np.load(C.DATA / f"{name}.npz", allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def reference_maps(model, ref):
    """Index maps from the reference joint order (Pinocchio's) to jaxrbd's, by joint name."""
    q_map, v_map = np.full(model.nq, -1), np.full(model.nv, -1)
    for name, iq, nq, iv, nv in zip(ref["joint_names"].tolist(), ref["joint_idx_q"],
                                    ref["joint_nq"], ref["joint_idx_v"], ref["joint_nv"]):
        q_map[model.q_index(name)] = np.arange(iq, iq + nq)
        v_map[model.v_index(name)] = np.arange(iv, iv + nv)
    if (q_map < 0).any() or (v_map < 0).any():
        raise SystemExit("reference joints do not map onto the jaxrbd model")
    return q_map, v_map


class Robot:
    """jaxrbd model, contact set, states and reference data; Pinocchio twin and timings."""

    def __init__(self, name: str, max_batch: int):
        self.name = name
        self.ref = reference(name)
        self.model = jaxrbd.load_urdf(C.DATA / f"{name}.urdf", floating_base=True)
        links = self.ref["contact_links"].tolist()
        self.contacts = list(zip(links, self.ref["contact_points"]))
        self.cs = jaxrbd.ConstraintSet.contacts_3d(self.contacts)
        m = self.model
        keys = jax.random.split(jax.random.key(0), max_batch)
        self.Q = jax.vmap(lambda k: jaxrbd.random_configuration(m, k))(keys)
        rng = np.random.default_rng(0)
        self.V = jnp.asarray(rng.standard_normal((max_batch, m.nv)))
        self.T = jnp.asarray(rng.standard_normal((max_batch, m.nv)))
        q_map, v_map = reference_maps(m, self.ref)
        self.ref_args = (self.ref["q"][:, q_map], self.ref["v"][:, v_map], self.ref["tau"][:, v_map])
        S, nc = self.ref["q"].shape[0], len(links)
        self.ref_out = (self.ref["contact_qdd"][:, v_map], self.ref["contact_lambda"].reshape(S, 3 * nc))
        self.pin_times: dict[str, dict | None] = {}
        self.pin_check: float | None = None

    def args(self, batch):
        if batch is None:
            return self.Q[0], self.V[0], self.T[0]
        return self.Q[:batch], self.V[:batch], self.T[:batch]

    def pinocchio(self, budget):
        """Time ``pin_cd`` and ``pin_fd`` once per robot; check that they agree."""
        if self.pin_times or C.pinocchio() is None:
            return self.pin_times
        pin = C.pinocchio()
        pm = C.pin_load_urdf(C.DATA / f"{self.name}.urdf", floating_base=True)
        models, frames = [], []
        for link, point in self.contacts:
            frame = pm.frames[pm.getFrameId(link)]
            placement = frame.placement * pin.SE3(np.eye(3), np.asarray(point, float))
            frames.append(pm.addFrame(pin.Frame(f"{link}_contact", frame.parentJoint,
                                                pm.getFrameId(link), placement,
                                                pin.FrameType.OP_FRAME)))
            models.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm,
                                                   frame.parentJoint, placement,
                                                   pin.ReferenceFrame.LOCAL_WORLD_ALIGNED))
        data_cd, data_fd = pm.createData(), pm.createData()
        datas = [cm.createData() for cm in models]
        pin.initConstraintDynamics(pm, data_cd, models, datas)
        prox = pin.ProximalSettings(1e-12, 0.0, 1)  # mu = 0: the exact KKT solution
        q, v, tau = C.pin_random_state(pm, np.random.default_rng(0))
        # J and gamma for forwardDynamics (J qdd = -gamma), computed outside the timing
        pin.computeJointJacobians(pm, data_fd, q)
        pin.forwardKinematics(pm, data_fd, q, v, np.zeros(pm.nv))
        pin.updateFramePlacements(pm, data_fd)
        lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        J = np.vstack([pin.getFrameJacobian(pm, data_fd, f, lwa)[:3] for f in frames])
        gamma = np.concatenate([pin.getFrameClassicalAcceleration(pm, data_fd, f, lwa).linear
                                for f in frames])

        def cd():
            return pin.constraintDynamics(pm, data_cd, q, v, tau, models, datas, prox)

        def fd():
            return pin.forwardDynamics(pm, data_fd, q, v, tau, J, gamma, 0.0)

        self.pin_check = float(np.max(np.abs(np.array(cd()) - np.array(fd()))))
        self.pin_times = {"cd": C.time_python(cd, budget_s=budget),
                          "fd": C.time_python(fd, budget_s=budget)}
        print(f"  pinocchio {self.name}: constraintDynamics "
              f"{C.fmt_time(self.pin_times['cd']['median_s'])}, forwardDynamics(J, gamma) "
              f"{C.fmt_time(self.pin_times['fd']['median_s'])}; max |qdd_cd - qdd_fd| = "
              f"{self.pin_check:.1e}", flush=True)
        return self.pin_times


def jax_function(job: Job):
    kwargs = {"check_rank": True} if job.variant == "single_checked" else {}

    def f(model, q, qd, tau, cs):
        return jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs, method=job.method, **kwargs)

    if job.variant == "vmap":
        return jax.vmap(f, in_axes=(None, 0, 0, 0, None))
    return f


def run(job: Job, robot: Robot, args) -> dict:
    model, cs = robot.model, robot.cs
    call_args = (model, *robot.args(job.batch), cs)
    f, lower_s, compile_s = C.compile_jit(jax_function(job), *call_args)
    t = C.time_jax(f, *call_args, budget_s=args.budget)
    ref_err = None
    if job.variant == "single":
        # the stored Pinocchio solutions, through the function just timed
        out = [f(model, q, v, tau, cs) for q, v, tau in zip(*robot.ref_args)]
        qdd, lam = (np.stack(x) for x in zip(*out))
        scale = (np.abs(robot.ref_out[0]).max(), np.abs(robot.ref_out[1]).max())
        ref_err = max(float(np.abs(qdd - robot.ref_out[0]).max() / scale[0]),
                      float(np.abs(lam - robot.ref_out[1]).max() / scale[1]))
    pin = robot.pinocchio(args.pin_budget)
    n = 1 if job.batch is None else job.batch
    per_sample = t["median_s"] / n
    pin_cd = pin and pin["cd"]["median_s"]
    pin_fd = pin and pin["fd"]["median_s"]
    return {
        **dataclasses.asdict(job),
        "nq": model.nq,
        "nv": model.nv,
        "rows": cs.size,
        "lower_s": lower_s,
        "compile_s": compile_s,
        "time_s": t["median_s"],
        "time_min_s": t["min_s"],
        "per_sample_s": per_sample,
        "pin_cd_s": pin_cd,
        "pin_fd_s": pin_fd,
        "ratio": per_sample / pin_cd if pin_cd else None,
        "ratio_fd": per_sample / pin_fd if pin_fd else None,
        "ref_err": ref_err,
        "repeats": t["repeats"],
        "inner": t["inner"],
        "error": None,
    }


# --------------------------------------------------------------------------- report


def _num(fmt):
    return lambda x: "-" if x is None else fmt.format(x)


COLUMNS = [
    ("robot", "robot", str),
    ("nv", "nv", str),
    ("rows", "rows", str),
    ("method", "method", str),
    ("variant", "variant", str),
    ("batch", "batch", lambda b: "-" if b is None else str(b)),
    ("compile", "compile_s", C.fmt_time),
    ("call", "time_s", C.fmt_time),
    ("per sample", "per_sample_s", C.fmt_time),
    ("pin_cd", "pin_cd_s", C.fmt_time),
    ("pin_fd", "pin_fd_s", C.fmt_time),
    ("ratio", "ratio", _num("{:.3g}")),
    ("ratio_fd", "ratio_fd", _num("{:.3g}")),
    ("ref_err", "ref_err", _num("{:.1e}")),
]


def make_jobs(robots, methods, batches) -> list[Job]:
    jobs = []
    for r in robots:
        for m in methods:
            jobs.append(Job(r, m, "single", None))
            if m == "range_space":
                jobs.append(Job(r, m, "single_checked", None))
            jobs += [Job(r, m, "vmap", b) for b in batches]
    return jobs


def sort_key(row):
    variants = ("single", "single_checked", "vmap")
    return (ROBOTS.index(row["robot"]), METHODS.index(row["method"]),
            variants.index(row["variant"]), row["batch"] or 0)


def best_rows(rows) -> list[dict]:
    """Per robot and variant/batch: the fastest method (the headline comparison)."""
    out = {}
    for r in rows:
        if r.get("error") or r["variant"] == "single_checked":
            continue
        key = (r["robot"], r["variant"], r["batch"])
        if key not in out or r["per_sample_s"] < out[key]["per_sample_s"]:
            out[key] = r
    return [{"robot": k[0], "variant": k[1], "batch": k[2], "method": r["method"],
             "per_sample_s": r["per_sample_s"], "pin_cd_s": r["pin_cd_s"], "ratio": r["ratio"],
             "ratio_fd": r["ratio_fd"]}
            for k, r in sorted(out.items(), key=lambda kv: (ROBOTS.index(kv[0][0]), kv[0][2] or 0))]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: robots {QUICK['robots']}, batches {QUICK['batches']}, "
                        "short timing budgets (unless given explicitly)")
    p.add_argument("--robots", help=f"comma-separated subset of {','.join(ROBOTS)}")
    p.add_argument("--methods", default=",".join(METHODS),
                   help="comma-separated subset of " + ",".join(METHODS))
    p.add_argument("--batches", help="comma-separated vmap batch sizes (default: "
                                     f"{','.join(map(str, BATCHES))}; empty: single calls only)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of timing per jaxrbd row (default 0.4, --quick 0.05)")
    p.add_argument("--pin-budget", type=float, default=None,
                   help="seconds of timing per Pinocchio call (default 0.3, --quick 0.05)")
    p.add_argument("--skip", default="",
                   help="comma-separated METHOD:BATCH vmap rows to leave out (e.g. range_space:1024)")
    p.add_argument("--row-timeout", type=float, default=600.0,
                   help="seconds after which a row counts as hung: the run stops there, "
                        "writes what it has and exits with status 1")
    p.add_argument("--time-limit", type=float, default=None,
                   help="soft wall-clock limit in seconds: rows not started by then are skipped")
    p.add_argument("--out", help="JSON output path")
    C.add_jit_argument(p)
    a = p.parse_args(argv)
    C.use_jit(a.jit)
    a.robots = [s.strip() for s in (a.robots or (QUICK["robots"] if a.quick else ",".join(ROBOTS))).split(",") if s.strip()]
    a.methods = [s.strip() for s in a.methods.split(",") if s.strip()]
    for name, allowed, what in ((a.robots, ROBOTS, "robot"), (a.methods, METHODS, "method")):
        bad = [x for x in name if x not in allowed]
        if bad:
            p.error(f"unknown {what} {bad[0]!r}; expected a subset of {','.join(allowed)}")
    if a.batches is None:
        a.batches = QUICK["batches"] if a.quick else ",".join(map(str, BATCHES))
    a.batches = [int(b) for b in a.batches.split(",") if b.strip()]
    if any(b < 1 for b in a.batches):
        p.error("batch sizes must be >= 1")
    a.budget = a.budget if a.budget is not None else (QUICK["budget"] if a.quick else 0.4)
    if a.pin_budget is None:
        a.pin_budget = QUICK["pin_budget"] if a.quick else 0.3
    try:
        a.skip = {(m, int(b)) for m, b in (x.strip().split(":") for x in a.skip.split(",") if x.strip())}
    except ValueError:
        p.error(f"--skip expects METHOD:BATCH items, got {a.skip!r}")
    if a.out is None:
        a.out = C.RESULTS / (("contacts_quick" if a.quick else "contacts") + C.jit_suffix() + ".json")
    return a


def main(argv=None):
    args = parse_args(argv)
    if C.pinocchio() is None:
        print("pinocchio is not installed: the pinocchio and ratio columns stay empty")
    meta = C.machine_metadata()
    meta.update(dtype="float64", robots=args.robots, methods=args.methods, batches=args.batches,
                quick=args.quick, budget_s=args.budget, pin_budget_s=args.pin_budget,
                complete=False)
    print(f"jax {meta['jax']}, pinocchio {meta['pinocchio']}, float64, "
          f"{meta['machine']['cpu']} ({meta['machine']['cpu_usable']} usable cores)", flush=True)
    load = meta["machine"]["load_avg_1min_at_start"]
    if load is not None and load > 0.5 * (meta["machine"]["cpu_usable"] or 1):
        print(f"warning: load average {load} on {meta['machine']['cpu_usable']} cores: "
              "other processes compete for the CPU, times will be inflated", flush=True)

    t_start = time.perf_counter()
    jobs = [j for j in make_jobs(args.robots, args.methods, args.batches)
            if (j.method, j.batch) not in args.skip]
    left_out = [j.label() for j in make_jobs(args.robots, args.methods, args.batches)
                if (j.method, j.batch) in args.skip]
    robots: dict[str, Robot] = {}
    rows, skipped, hung = [], [], False

    def extra():
        checks = {n: {"pinocchio_cd_vs_fd_max_abs_qdd": r.pin_check} for n, r in robots.items()}
        return {"best": best_rows(rows), "checks": checks}

    for i, job in enumerate(jobs):
        elapsed = time.perf_counter() - t_start
        if args.time_limit is not None and elapsed > args.time_limit:
            skipped = [j.label() for j in jobs[i:]]
            print(f"time limit {args.time_limit:.0f} s reached: skipping {len(skipped)} rows",
                  flush=True)
            break
        if job.robot not in robots:
            if robots:
                jax.clear_caches()
            robots[job.robot] = Robot(job.robot, max(args.batches, default=1))
        result = {}

        def work(job=job, result=result):
            try:
                result["row"] = run(job, robots[job.robot], args)
            except Exception as e:  # noqa: BLE001 -- report and go on (the library may be mid-change)
                result["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"

        # A watchdog: a call that never returns (an XLA runtime deadlock was seen) must
        # not swallow the whole run; the blocked thread cannot be stopped, so we stop.
        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        worker.join(args.row_timeout)
        if worker.is_alive():
            result["error"] = f"hung: no result after {args.row_timeout:.0f} s"
            hung = True
        if "row" not in result:
            row = {**dataclasses.asdict(job), "error": result["error"]}
            print(f"[{i + 1:>3}/{len(jobs)} {elapsed:5.0f}s] {job.label()}: FAILED {row['error']}",
                  flush=True)
            if hung:
                rows.append(row)
                skipped = [j.label() for j in jobs[i + 1:]]
                break
        else:
            row = result["row"]
            ratio = "-" if row["ratio"] is None else format(row["ratio"], ".3g")
            print(f"[{i + 1:>3}/{len(jobs)} {elapsed:5.0f}s] {job.label()}: compile "
                  f"{C.fmt_time(row['compile_s'])}, per sample {C.fmt_time(row['per_sample_s'])}, "
                  f"ratio {ratio}", flush=True)
        rows.append(row)
        C.write_json(args.out, sorted(rows, key=sort_key), meta, **extra())

    rows.sort(key=sort_key)
    meta.update(complete=not skipped, total_s=time.perf_counter() - t_start)
    meta["machine"]["load_avg_1min_at_end"] = C.load_average()
    C.write_json(args.out, rows, meta, skipped=skipped, left_out=left_out, **extra())
    ok = [r for r in rows if r.get("error") is None]
    print()
    C.print_table(ok, COLUMNS)
    print("\nfastest method per robot and batch (ratio = per sample / pin constraintDynamics):")
    for b in best_rows(rows):
        batch = "single" if b["variant"] == "single" else f"B={b['batch']}"
        ratio = "-" if b["ratio"] is None else f"{b['ratio']:.3g}"
        print(f"  {b['robot']:7s} {batch:7s} {b['method']:12s} {C.fmt_time(b['per_sample_s']):>9s}"
              f"  ratio {ratio}")
    failed = [r for r in rows if r.get("error")]
    for r in failed:
        print(f"FAILED {Job(r['robot'], r['method'], r['variant'], r['batch']).label()}: {r['error']}")
    if left_out:
        print(f"left out (--skip): {', '.join(left_out)}")
    worst = max((r["ref_err"] for r in ok if r.get("ref_err") is not None), default=None)
    print(f"\n{len(ok)} rows, {len(failed)} failed, {len(skipped)} skipped in "
          f"{meta['total_s']:.0f} s; max relative error vs the reference data "
          f"{'-' if worst is None else format(worst, '.1e')}; wrote {args.out}")
    if hung:
        print("a row hung: stopped there (its thread cannot be interrupted)", flush=True)
        os._exit(1)


if __name__ == "__main__":
    main()
