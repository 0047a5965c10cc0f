"""Rollout throughput: simulated steps per second of jaxrbd rollouts vs Pinocchio.

jaxrbd: `jit(jaxrbd.rollout)` for one trajectory (batch 1), and for batches
`jit(jaxrbd.batched.rollout)` (cache-blocked, sharded over `jax.devices()`) and
`jit(jax.vmap(jaxrbd.rollout))`. The peer is the same integrator written in a Python
loop around Pinocchio's `aba` and `integrate` (one trajectory), timed in the same run.
Throughput is ``batch * n_steps / median call time``; the number of steps per call
shrinks with the batch (at most ``--sample-steps`` sample-steps and ~0.3 GB of returned
trajectories per call).

Usage (from the repository root):
    PYTHONPATH=. python benchmarks/bench_rollout.py --quick
    PYTHONPATH=. python benchmarks/bench_rollout.py --robots talos --batches 1,1024,16384

``jit`` is `jaxrbd.jit` (jax.jit plus XLA CPU options that suit jaxrbd); ``--jit jax``
uses plain `jax.jit` and writes ``*_jaxjit.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

_FLOAT32 = "--float32" in sys.argv
import jax

if not _FLOAT32:
    jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common as C

import jaxrbd

ROBOTS = {"panda": False, "solo12": True, "talos": True}  # name -> floating base
MODELS = ("panda", "talos")
BATCHES = (1, 16, 256, 1024, 4096, 16384)
INTEGRATORS = ("euler", "semi_implicit_euler", "rk4")
DT = 1e-3
#: per call, trajectories of at most this many numbers (batch * (n_steps + 1) * (nq + nv))
MAX_TRAJ = 4e7
QUICK = {"robots": "panda,talos", "batches": "1,256", "budget": 0.3, "pin_budget": 0.2,
         "steps": 50, "sample_steps": 8192}


@dataclasses.dataclass(frozen=True)
class Job:
    model: str
    integrator: str
    variant: str  # "single" | "batched" | "vmap"
    batch: int

    def label(self) -> str:
        return f"{self.model} {self.integrator} {self.variant} B={self.batch}"


# --------------------------------------------------------------------------- models


def load_jaxrbd(name: str):
    if name in ROBOTS:
        return jaxrbd.load_urdf(C.DATA / f"{name}.urdf", floating_base=ROBOTS[name])
    if name.startswith("chain") and name[5:].isdigit():
        return jaxrbd.models.chain(int(name[5:]))
    raise SystemExit(f"unknown model {name!r}; expected panda, solo12, talos or chainN")


def load_pinocchio(name: str):
    if C.pinocchio() is None:
        return None
    if name in ROBOTS:
        return C.pin_load_urdf(C.DATA / f"{name}.urdf", ROBOTS[name])
    return C.pin_chain(int(name[5:]))


def n_steps_for(model, batch: int, steps: int, sample_steps: int) -> int:
    """``steps`` for small batches, fewer for large ones (bounded work and memory)."""
    per_step = batch * (model.nq + model.nv)
    return int(max(4, min(steps, sample_steps // batch, MAX_TRAJ // per_step - 1)))


def states(model, batch: int, n_steps: int, seed: int = 0):
    """Random initial states (small velocities) and small random torques, batch first."""
    kq, kv, kt = jax.random.split(jax.random.key(seed), 3)
    dtype = model.dtype
    Q0 = jax.vmap(lambda k: jaxrbd.random_configuration(model, k, 0.5))(jax.random.split(kq, batch))
    QD0 = 0.1 * jax.random.normal(kv, (batch, model.nv), dtype)
    TAU = 0.1 * jax.random.normal(kt, (batch, n_steps, model.nv), dtype)
    return Q0, QD0, TAU


def jax_function(variant: str, integrator: str):
    if variant == "single":
        return lambda m, q0, qd0, tau: jaxrbd.rollout(m, q0[0], qd0[0], tau[0], DT, integrator)
    if variant == "vmap":
        one = lambda m, q0, qd0, tau: jaxrbd.rollout(m, q0, qd0, tau, DT, integrator)
        return jax.vmap(one, in_axes=(None, 0, 0, 0))
    return lambda m, Q0, QD0, TAU: jaxrbd.batched.rollout(m, Q0, QD0, TAU, DT, integrator)


# --------------------------------------------------------------------------- Pinocchio peer


def pin_rollout(pm, q0, v0, taus, integrator: str):
    """The jaxrbd integrators in a Python loop over Pinocchio's ``aba``/``integrate``."""
    pin = C.pinocchio()
    data = pm.createData()
    h = DT
    q, v = q0.copy(), v0.copy()

    def acc(q, v, tau):
        return np.array(pin.aba(pm, data, q, v, tau))

    for tau in taus:
        if integrator == "euler":
            a = acc(q, v, tau)
            q, v = pin.integrate(pm, q, v * h), v + h * a
        elif integrator == "semi_implicit_euler":
            v = v + h * acc(q, v, tau)
            q = pin.integrate(pm, q, v * h)
        else:  # CF4, as jaxrbd's rk4
            a1 = acc(q, v, tau)
            q2, v2 = pin.integrate(pm, q, 0.5 * h * v), v + 0.5 * h * a1
            a2 = acc(q2, v2, tau)
            q3, v3 = pin.integrate(pm, q, 0.5 * h * v2), v + 0.5 * h * a2
            a3 = acc(q3, v3, tau)
            q4, v4 = pin.integrate(pm, q2, h * (v3 - 0.5 * v)), v + h * a3
            a4 = acc(q4, v4, tau)
            first = h * (3 * v + 2 * v2 + 2 * v3 - v4) / 12
            second = h * (-v + 2 * v2 + 2 * v3 + 3 * v4) / 12
            q = pin.integrate(pm, pin.integrate(pm, q, first), second)
            v = v + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
    return q, v


class Runner:
    def __init__(self, args):
        self.args = args
        self.models, self.pin_models, self.pin_rows = {}, {}, {}

    def model(self, name):
        if name not in self.models:
            self.models[name] = load_jaxrbd(name)
            self.pin_models[name] = load_pinocchio(name)
        return self.models[name]

    def pinocchio(self, name, integrator):
        """Steps per second of the Pinocchio loop (one trajectory), cached per row key."""
        key = (name, integrator)
        if key not in self.pin_rows:
            pm = self.pin_models[name]
            if pm is None:
                self.pin_rows[key] = None
                return None
            q0, v0, _ = C.pin_random_state(pm, np.random.default_rng(0))
            v0 = 0.1 * v0
            n = 20
            taus = 0.1 * np.random.default_rng(1).standard_normal((n, pm.nv))
            t = C.time_python(lambda: pin_rollout(pm, q0, v0, taus, integrator),
                              budget_s=self.args.pin_budget, block_s=2e-3, min_repeats=5)
            self.pin_rows[key] = t["median_s"] / n
        return self.pin_rows[key]

    def run(self, job: Job) -> dict:
        model = self.model(job.model)
        n = n_steps_for(model, job.batch, self.args.steps, self.args.sample_steps)
        Q0, QD0, TAU = states(model, job.batch, n)
        args = (model, Q0, QD0, TAU)
        f, lower_s, compile_s = C.compile_jit(jax_function(job.variant, job.integrator), *args)
        out = f(*args)
        finite = bool(jnp.all(jnp.isfinite(out[0])))
        t = C.time_jax(f, *args, budget_s=self.args.budget, min_repeats=3)
        steps = job.batch * n
        per_step = t["median_s"] / steps
        pin_step = self.pinocchio(job.model, job.integrator)
        return {
            **dataclasses.asdict(job),
            "nq": model.nq,
            "nv": model.nv,
            "n_steps": n,
            "devices": len(jax.devices()) if job.variant == "batched" else 1,
            "lower_s": lower_s,
            "compile_s": compile_s,
            "time_s": t["median_s"],
            "time_min_s": t["min_s"],
            "steps_per_s": 1.0 / per_step,
            "per_sample_step_s": per_step,
            "pinocchio_step_s": pin_step,
            "pinocchio_steps_per_s": None if pin_step is None else 1.0 / pin_step,
            "speedup_vs_pinocchio": None if pin_step is None else pin_step / per_step,
            "finite": finite,
            "repeats": t["repeats"],
            "error": None,
        }


def make_jobs(models, integrators, batches, variants) -> list[Job]:
    jobs = []
    for name in models:
        for integ in integrators:
            for B in batches:
                if B == 1:
                    jobs.append(Job(name, integ, "single", 1))
                for v in variants:
                    if B > 1 or v == "batched":
                        jobs.append(Job(name, integ, v, B))
    return jobs


# --------------------------------------------------------------------------- report


def _num(fmt):
    return lambda x: "-" if x is None else fmt.format(x)


def _rate(x):
    if x is None:
        return "-"
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


COLUMNS = [
    ("model", "model", str),
    ("nv", "nv", str),
    ("integrator", "integrator", str),
    ("variant", "variant", str),
    ("batch", "batch", str),
    ("steps", "n_steps", str),
    ("compile", "compile_s", C.fmt_time),
    ("call", "time_s", C.fmt_time),
    ("steps/s", "steps_per_s", _rate),
    ("per step", "per_sample_step_s", C.fmt_time),
    ("pin steps/s", "pinocchio_steps_per_s", _rate),
    ("x pin", "speedup_vs_pinocchio", _num("{:.3g}")),
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: robots {QUICK['robots']}, batches {QUICK['batches']}, rk4, "
                        "batched variant only, short budgets (unless given explicitly)")
    p.add_argument("--robots", help=f"comma-separated models (default {','.join(MODELS)}; "
                                    "panda, solo12, talos or chainN)")
    p.add_argument("--batches", help=f"comma-separated batch sizes (default "
                                     f"{','.join(map(str, BATCHES))})")
    p.add_argument("--integrators", default="rk4",
                   help="comma-separated subset of " + ",".join(INTEGRATORS) + " (default rk4)")
    p.add_argument("--variants", default=None,
                   help="comma-separated subset of batched,vmap (default both; --quick: batched)")
    p.add_argument("--steps", type=int, default=None,
                   help="steps per call for small batches (default 200, --quick 50)")
    p.add_argument("--sample-steps", type=int, default=None,
                   help="at most batch * steps per call, at least 4 steps "
                        "(default 65536, --quick 8192)")
    p.add_argument("--float32", action="store_true",
                   help="leave jax_enable_x64 off (float32 jaxrbd; Pinocchio stays float64)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of timing per jaxrbd row (default 1.0, --quick 0.3)")
    p.add_argument("--pin-budget", type=float, default=None,
                   help="seconds of timing per Pinocchio row (default 0.5, --quick 0.2)")
    p.add_argument("--out", help="JSON output path")
    C.add_jit_argument(p)
    a = p.parse_args(argv)
    C.use_jit(a.jit)
    a.robots = a.robots or (QUICK["robots"] if a.quick else ",".join(MODELS))
    if a.batches is None:
        a.batches = QUICK["batches"] if a.quick else ",".join(map(str, BATCHES))
    if a.variants is None:
        a.variants = "batched" if a.quick else "batched,vmap"
    a.steps = a.steps or (QUICK["steps"] if a.quick else 200)
    a.sample_steps = a.sample_steps or (QUICK["sample_steps"] if a.quick else 65536)
    a.budget = a.budget if a.budget is not None else (QUICK["budget"] if a.quick else 1.0)
    if a.pin_budget is None:
        a.pin_budget = QUICK["pin_budget"] if a.quick else 0.5
    if a.out is None:
        name = "rollout" + ("_quick" if a.quick else "") + ("_float32" if a.float32 else "")
        a.out = C.RESULTS / f"{name}{C.jit_suffix()}.json"
    return a


def main(argv=None):
    args = parse_args(argv)
    models = [s.strip() for s in args.robots.split(",") if s.strip()]
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    integrators = [s.strip() for s in args.integrators.split(",") if s.strip()]
    variants = [s.strip() for s in args.variants.split(",") if s.strip()]
    for i in integrators:
        if i not in INTEGRATORS:
            raise SystemExit(f"unknown integrator {i!r}; expected a subset of {INTEGRATORS}")
    for v in variants:
        if v not in ("batched", "vmap"):
            raise SystemExit(f"unknown variant {v!r}; expected a subset of batched,vmap")
    for name in models:
        load_jaxrbd(name)
    if C.pinocchio() is None:
        print("pinocchio is not installed: the pinocchio columns stay empty")

    meta = C.machine_metadata()
    meta.update(dtype="float32" if args.float32 else "float64", models=models, batches=batches,
                integrators=integrators, variants=variants, dt=DT, quick=args.quick,
                budget_s=args.budget, pin_budget_s=args.pin_budget, complete=False)
    print(f"jax {meta['jax']}, pinocchio {meta['pinocchio']}, {meta['dtype']}, "
          f"{meta['machine']['cpu']} ({meta['machine']['cpu_usable']} usable cores, "
          f"{len(jax.devices())} jax devices: {jax.devices()[0].platform})", flush=True)
    load = meta["machine"]["load_avg_1min_at_start"]
    if load is not None and load > 0.5 * (meta["machine"]["cpu_usable"] or 1):
        print(f"warning: load average {load} on {meta['machine']['cpu_usable']} cores: "
              "other processes compete for the CPU, times will be inflated", flush=True)

    t_start = time.perf_counter()
    runner = Runner(args)
    jobs = make_jobs(models, integrators, batches, variants)
    rows = []
    for i, job in enumerate(jobs):
        elapsed = time.perf_counter() - t_start
        try:
            row = runner.run(job)
        except Exception as e:  # noqa: BLE001 -- report and go on
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            row = {**dataclasses.asdict(job), "error": msg}
            print(f"[{i + 1:>3}/{len(jobs)} {elapsed:5.0f}s] {job.label()}: FAILED {msg}",
                  flush=True)
        else:
            print(f"[{i + 1:>3}/{len(jobs)} {elapsed:5.0f}s] {job.label()}: "
                  f"{row['n_steps']} steps, compile {C.fmt_time(row['compile_s'])}, "
                  f"call {C.fmt_time(row['time_s'])}, {_rate(row['steps_per_s'])} steps/s, "
                  f"pinocchio {_rate(row['pinocchio_steps_per_s'])} steps/s", flush=True)
        rows.append(row)
        C.write_json(args.out, rows, meta)
        if i + 1 < len(jobs) and jobs[i + 1].model != job.model:
            jax.clear_caches()

    meta.update(complete=True, total_s=time.perf_counter() - t_start)
    meta["machine"]["load_avg_1min_at_end"] = C.load_average()
    C.write_json(args.out, rows, meta)
    print()
    C.print_table([r for r in rows if r.get("error") is None], COLUMNS)
    failed = [r for r in rows if r.get("error")]
    for r in failed:
        print(f"FAILED {Job(r['model'], r['integrator'], r['variant'], r['batch']).label()}: "
              f"{r['error']}")
    print(f"\n{len(rows) - len(failed)} rows, {len(failed)} failed in {meta['total_s']:.0f} s; "
          f"wrote {args.out}")


if __name__ == "__main__":
    main()
