"""Benchmark forward_dynamics, inverse_dynamics and mass_matrix against Pinocchio.

Models: panda (fixed base), solo12 and talos (floating base) from ``tests/data`` and
serial chains of 5 to 100 bodies (``jaxrbd.models.chain``, rebuilt by hand in
Pinocchio and checked to give the same mass matrix). For every model and function:

- ``single``: one jitted call on one state;
- ``vmap``: ``jit(jax.vmap(f, in_axes=(None, 0, ...)))`` on a batch of states;
- ``batched``: ``jit(jaxrbd.batched.f)`` (native batch-trailing layout) on a batch;

with the default ``"auto"`` traversal (level by level for one state, body by body for a
batch), and for talos and the chains also explicit ``"level"`` and ``"body"``
traversal (single call and the batch-4096 rows). Pinocchio (``pin.aba``, ``pin.rnea``,
``pin.crba``) is timed in the same run on one state; ``ratio`` is the jaxrbd time per
sample over the Pinocchio time per call (< 1: jaxrbd is faster).

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_dynamics.py            # full, ~10 min on 2 cores
    PYTHONPATH=. python benchmarks/bench_dynamics.py --quick    # smoke test
    PYTHONPATH=. python benchmarks/bench_dynamics.py --robots talos,chain10 --batches 1,4096

Writes ``benchmarks/results/dynamics.json`` (``--quick``: ``dynamics_quick.json``,
``--float32``: ``dynamics_float32.json``; ``--out`` overrides).

``jit`` is `jaxrbd.jit` (jax.jit plus XLA CPU options that suit jaxrbd); ``--jit jax``
uses plain `jax.jit` and writes ``*_jaxjit.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

# x64 must be switched on before any array is created, so parse the flag first.
_FLOAT32 = "--float32" in sys.argv
import jax  # noqa: E402

if not _FLOAT32:
    jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common as C  # noqa: E402

import jaxrbd  # noqa: E402

ROBOTS = {"panda": False, "solo12": True, "talos": True}  # name -> floating base
CHAINS = (5, 10, 20, 50, 100)
ALL_MODELS = ["panda", "solo12", "talos"] + [f"chain{n}" for n in CHAINS]
BATCHES = (1, 64, 1024, 4096, 8192)
BODY_BATCH = 4096
FUNCTIONS = ("forward_dynamics", "inverse_dynamics", "mass_matrix")
PIN_NAME = {"forward_dynamics": "aba", "inverse_dynamics": "rnea", "mass_matrix": "crba"}
NARGS = {"forward_dynamics": 3, "inverse_dynamics": 3, "mass_matrix": 1}  # after model

QUICK = {"robots": "panda,chain5", "batches": "64", "budget": 0.05, "pin_budget": 0.05}


@dataclasses.dataclass(frozen=True)
class Job:
    model: str
    function: str
    variant: str  # "single" | "vmap" | "batched"
    traversal: str  # "auto" (the default) | "level" | "body"
    batch: int | None  # None for the single call

    def label(self) -> str:
        b = "" if self.batch is None else f" B={self.batch}"
        return f"{self.model} {self.function} {self.variant} {self.traversal}{b}"


# Rows the targets are read from; they run first (so a --time-limit never drops them) and
# their compile time is the median of a few fresh compiles.
TARGET_JOBS = (
    Job("talos", "forward_dynamics", "single", "auto", None),
    Job("talos", "forward_dynamics", "vmap", "auto", 4096),
    Job("chain10", "forward_dynamics", "single", "auto", None),
    Job("chain100", "forward_dynamics", "single", "auto", None),
)


# --------------------------------------------------------------------------- models


def load_jaxrbd(name: str):
    if name in ROBOTS:
        return jaxrbd.load_urdf(C.DATA / f"{name}.urdf", floating_base=ROBOTS[name])
    if name.startswith("chain") and name[5:].isdigit():
        return jaxrbd.models.chain(int(name[5:]))
    raise SystemExit(f"unknown model {name!r}; expected one of {ALL_MODELS} (or chainN)")


def load_pinocchio(name: str):
    if C.pinocchio() is None:
        return None
    if name in ROBOTS:
        return C.pin_load_urdf(C.DATA / f"{name}.urdf", ROBOTS[name])
    return C.pin_chain(int(name[5:]))


def check_chain(name: str, model, pin_model) -> float:
    """Max |H_jaxrbd - H_pinocchio| at a random q; raises if above tolerance."""
    rng = np.random.default_rng(1)
    q = rng.uniform(-np.pi, np.pi, model.nq)
    H = np.asarray(jax.jit(lambda m, q: jaxrbd.mass_matrix(m, q))(model, jnp.asarray(q)))
    H_pin = C.pin_mass_matrix(pin_model, q)
    err = float(np.max(np.abs(H - H_pin)))
    tol = 1e-10 if H.dtype == np.float64 else 1e-4 * max(1.0, float(np.abs(H_pin).max()))
    if not err <= tol:
        raise SystemExit(
            f"{name}: jaxrbd and the hand-built Pinocchio chain disagree: "
            f"max |H - H_pin| = {err:.3g} > {tol:.1g}; the Pinocchio twin is wrong"
        )
    return err


class States:
    """Random states per model: q from `jaxrbd.random_configuration`, v/tau normal."""

    def __init__(self, model, max_batch: int, seed: int = 0):
        k_single, k_batch, k_v, k_w = jax.random.split(jax.random.key(seed), 4)
        dt = model.dtype
        self.q = jaxrbd.random_configuration(model, k_single)
        self.v = jax.random.normal(k_v, (model.nv,), dt)
        self.w = jax.random.normal(k_w, (model.nv,), dt)
        keys = jax.random.split(k_batch, max_batch)
        self.Q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(keys)
        self.V = jax.random.normal(k_v, (max_batch, model.nv), dt)
        self.W = jax.random.normal(k_w, (max_batch, model.nv), dt)

    def single(self, nargs):
        return (self.q, self.v, self.w)[:nargs]

    def batch(self, B, nargs):
        return tuple(jnp.array(x[:B]) for x in (self.Q, self.V, self.W)[:nargs])


# --------------------------------------------------------------------------- jobs


def make_jobs(models, functions, batches, body_batch=True) -> list[Job]:
    """Every row, the target rows first; ``body_batch=False``: "body" on single calls only."""
    if body_batch and batches:
        body_batch = BODY_BATCH if BODY_BATCH in batches else max(batches)
    else:
        body_batch = None
    jobs = []
    for name in models:
        body = name == "talos" or name.startswith("chain")
        for fn in functions:
            for trav in ("auto", "level", "body") if body else ("auto",):
                jobs.append(Job(name, fn, "single", trav, None))
                for B in batches:
                    if trav != "auto" and B != body_batch:
                        continue
                    for variant in ("vmap", "batched"):
                        jobs.append(Job(name, fn, variant, trav, B))
    first = [j for j in TARGET_JOBS if j in jobs]
    return first + [j for j in jobs if j not in first]


def jax_function(job: Job):
    nargs = NARGS[job.function]
    if job.variant == "single":
        return getattr(jaxrbd, job.function)
    if job.variant == "vmap":
        return jax.vmap(getattr(jaxrbd, job.function), in_axes=(None,) + (0,) * nargs)
    return getattr(jaxrbd.batched, job.function)


class Runner:
    def __init__(self, args, max_batch):
        self.args = args
        self.max_batch = max_batch
        self.models, self.pin_models, self.states = {}, {}, {}
        self.pin_times, self.checks = {}, {}

    def model(self, name, traversal):
        if name not in self.models:
            m = load_jaxrbd(name)
            self.models[name] = m
            self.states[name] = States(m, self.max_batch)
            self.pin_models[name] = load_pinocchio(name)
            if name.startswith("chain") and self.pin_models[name] is not None:
                self.checks[name] = check_chain(name, m, self.pin_models[name])
                print(f"  check {name}: max |H - H_pin| = {self.checks[name]:.2e}", flush=True)
        m = self.models[name]
        return m.with_traversal(traversal)

    def pin_time(self, name, function):
        key = (name, function)
        if key not in self.pin_times:
            pm = self.pin_models[name]
            if pm is None:
                self.pin_times[key] = None
            else:
                pin = C.pinocchio()
                data = pm.createData()
                q, v, w = C.pin_random_state(pm, np.random.default_rng(0))
                f = getattr(pin, PIN_NAME[function])
                call = {
                    "forward_dynamics": lambda: f(pm, data, q, v, w),
                    "inverse_dynamics": lambda: f(pm, data, q, v, w),
                    "mass_matrix": lambda: f(pm, data, q),
                }[function]
                self.pin_times[key] = C.time_python(call, budget_s=self.args.pin_budget)
        return self.pin_times[key]

    def run(self, job: Job) -> dict:
        model = self.model(job.model, job.traversal)
        st = self.states[job.model]
        nargs = NARGS[job.function]
        data = st.single(nargs) if job.batch is None else st.batch(job.batch, nargs)
        args = (model,) + data
        reps = self.args.target_compile_repeats if job in TARGET_JOBS else 1
        f, lower_s, compile_s = C.compile_jit(jax_function(job), *args, repeats=reps)
        t = C.time_jax(f, *args, budget_s=self.args.budget)
        n = 1 if job.batch is None else job.batch
        pin = self.pin_time(job.model, job.function)
        pin_s = pin and pin["median_s"]
        per_sample = t["median_s"] / n
        return {
            **dataclasses.asdict(job),
            "nq": model.nq,
            "nv": model.nv,
            "nbodies": model.nbodies,
            "lower_s": lower_s,
            "compile_s": compile_s,
            "compile_repeats": reps,
            "time_s": t["median_s"],
            "time_min_s": t["min_s"],
            "per_sample_s": per_sample,
            "pinocchio_s": pin_s,
            "pinocchio_min_s": pin and pin["min_s"],
            "ratio": per_sample / pin_s if pin_s else None,
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
    ("trav", "traversal", str),
    ("batch", "batch", lambda b: "-" if b is None else str(b)),
    ("compile", "compile_s", C.fmt_time),
    ("call", "time_s", C.fmt_time),
    ("per sample", "per_sample_s", C.fmt_time),
    ("pinocchio", "pinocchio_s", C.fmt_time),
    ("ratio", "ratio", _num("{:.3g}")),
    ("reps", "repeats", _num("{}")),
]


def sort_key(row):
    order = {n: i for i, n in enumerate(ALL_MODELS)}
    m = row["model"]
    mk = order.get(m, len(order) + (int(m[5:]) if m.startswith("chain") else 0))
    return (
        mk,
        FUNCTIONS.index(row["function"]),
        row["traversal"] != "auto",
        row["batch"] is not None,
        row["batch"] or 0,
        row["variant"] != "vmap",
    )


def find(rows, job):
    for r in rows:
        if all(r[k] == v for k, v in dataclasses.asdict(job).items()) and r["error"] is None:
            return r
    return None


def targets(rows) -> list[dict]:
    fd_single = find(rows, TARGET_JOBS[0])
    fd_vmap = find(rows, TARGET_JOBS[1])
    fd_batched = find(rows, Job("talos", "forward_dynamics", "batched", "auto", 4096))
    c10, c100 = find(rows, TARGET_JOBS[2]), find(rows, TARGET_JOBS[3])
    out = [
        {
            "target": "talos forward_dynamics vmap B=4096: per-sample time / Pinocchio aba",
            "value": fd_vmap and fd_vmap["ratio"],
            "limit": 1.0,
            "unit": "ratio",
            "note": fd_batched and f"batched variant: {fd_batched['ratio']:.3g}",
        },
        {
            "target": "talos forward_dynamics single jitted call",
            "value": fd_single and fd_single["time_s"],
            "limit": 40e-6,
            "unit": "s",
        },
        {
            "target": "talos forward_dynamics compile (lower + compile, single call)",
            "value": fd_single and fd_single["compile_s"],
            "limit": 1.0,
            "unit": "s",
        },
        {
            "target": "chain100 / chain10 forward_dynamics compile time",
            "value": c10 and c100 and c100["compile_s"] / c10["compile_s"],
            "limit": 1.3,
            "unit": "ratio",
            "note": c10 and c100
            and f"{C.fmt_time(c100['compile_s'])} / {C.fmt_time(c10['compile_s'])}",
        },
    ]
    for t in out:
        t["met"] = None if t["value"] is None else bool(t["value"] <= t["limit"])
        t.setdefault("note", None)
    return out


def print_targets(ts):
    print("\nTargets (float64, talos, default 'auto' traversal):")
    for t in ts:
        fmt = C.fmt_time if t["unit"] == "s" else (lambda x: f"{x:.3g}")
        val = "not measured" if t["value"] is None else fmt(t["value"])
        status = {None: "n/a", True: "MET", False: "MISSED"}[t["met"]]
        note = f"  ({t['note']})" if t.get("note") else ""
        print(f"  [{status:>6}] {t['target']}: {val} (target <= {fmt(t['limit'])}){note}")


# --------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: robots {QUICK['robots']}, batches {QUICK['batches']}, "
                        "'body' traversal on single calls only, short timing budgets "
                        "(unless given explicitly)")
    p.add_argument("--robots", help=f"comma-separated models (default: {','.join(ALL_MODELS)}; "
                                    "any chainN works)")
    p.add_argument("--batches", help="comma-separated batch sizes (default: "
                                     f"{','.join(map(str, BATCHES))}; empty: single calls only)")
    p.add_argument("--functions", default=",".join(FUNCTIONS),
                   help="comma-separated subset of " + ",".join(FUNCTIONS))
    p.add_argument("--float32", action="store_true",
                   help="leave jax_enable_x64 off (float32 models; Pinocchio stays float64)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of timing per jaxrbd row (default 0.4, --quick 0.05)")
    p.add_argument("--pin-budget", type=float, default=None,
                   help="seconds of timing per Pinocchio call (default 0.3, --quick 0.05)")
    p.add_argument("--target-compile-repeats", type=int, default=None,
                   help="fresh compiles (median) for the target rows (default 3, --quick 1)")
    p.add_argument("--time-limit", type=float, default=None,
                   help="soft wall-clock limit in seconds: rows not started by then are "
                        "skipped (and listed)")
    p.add_argument("--out", help="JSON output path")
    C.add_jit_argument(p)
    a = p.parse_args(argv)
    C.use_jit(a.jit)
    a.robots = a.robots or (QUICK["robots"] if a.quick else ",".join(ALL_MODELS))
    if a.batches is None:
        a.batches = QUICK["batches"] if a.quick else ",".join(map(str, BATCHES))
    a.budget = a.budget if a.budget is not None else (QUICK["budget"] if a.quick else 0.4)
    if a.pin_budget is None:
        a.pin_budget = QUICK["pin_budget"] if a.quick else 0.3
    if a.target_compile_repeats is None:
        a.target_compile_repeats = 1 if a.quick else 3
    if a.out is None:
        name = "dynamics" + ("_quick" if a.quick else "") + ("_float32" if a.float32 else "")
        a.out = C.RESULTS / f"{name}{C.jit_suffix()}.json"
    return a


def _warm_up():
    """Pay JAX's one-time start-up costs (backend, first trace of jaxrbd) before timing."""
    m = jaxrbd.models.chain(2)
    q = jnp.zeros((4, m.nq), m.dtype)
    C.compile_jit(jaxrbd.forward_dynamics, m, q[0], q[0], q[0])
    C.compile_jit(jaxrbd.batched.forward_dynamics, m, q, q, q)


def main(argv=None):
    args = parse_args(argv)
    models = [s.strip() for s in args.robots.split(",") if s.strip()]
    for name in models:
        if name not in ROBOTS and not (name.startswith("chain") and name[5:].isdigit()):
            raise SystemExit(f"unknown model {name!r}; expected one of {ALL_MODELS} (or chainN)")
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    functions = [s.strip() for s in args.functions.split(",") if s.strip()]
    for fn in functions:
        if fn not in FUNCTIONS:
            raise SystemExit(f"unknown function {fn!r}; expected a subset of {FUNCTIONS}")
    if C.pinocchio() is None:
        print("pinocchio is not installed: the pinocchio and ratio columns stay empty")

    meta = C.machine_metadata()
    meta.update(
        dtype="float32" if args.float32 else "float64",
        models=models,
        batches=batches,
        functions=functions,
        quick=args.quick,
        budget_s=args.budget,
        pin_budget_s=args.pin_budget,
        complete=False,
    )
    print(f"jax {meta['jax']}, pinocchio {meta['pinocchio']}, {meta['dtype']}, "
          f"{meta['machine']['cpu']} ({meta['machine']['cpu_usable']} usable cores), "
          f"{meta['machine']['platform']}", flush=True)
    load = meta["machine"]["load_avg_1min_at_start"]
    if load is not None and load > 0.5 * (meta["machine"]["cpu_usable"] or 1):
        print(f"warning: load average {load} on {meta['machine']['cpu_usable']} cores: "
              "other processes compete for the CPU, times will be inflated", flush=True)

    t_start = time.perf_counter()
    _warm_up()
    jobs = make_jobs(models, functions, batches, body_batch=not args.quick)
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
        except Exception as e:  # report and go on: the library may be mid-change
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
        C.write_json(args.out, sorted(rows, key=sort_key), meta, targets=targets(rows),
                     chain_checks=runner.checks)
        if i + 1 < len(jobs) and jobs[i + 1].model != job.model:
            jax.clear_caches()

    rows.sort(key=sort_key)
    meta.update(complete=not skipped, total_s=time.perf_counter() - t_start)
    meta["machine"]["load_avg_1min_at_end"] = C.load_average()
    ts = targets(rows)
    C.write_json(args.out, rows, meta, targets=ts, chain_checks=runner.checks, skipped=skipped)
    print()
    C.print_table([r for r in rows if r.get("error") is None], COLUMNS)
    failed = [r for r in rows if r.get("error")]
    for r in failed:
        job = Job(**{k: r[k] for k in ("model", "function", "variant", "traversal", "batch")})
        print(f"FAILED {job.label()}: {r['error']}")
    if not args.float32 and any(t["value"] is not None for t in ts):
        print_targets(ts)
    print(f"\n{len(rows) - len(failed)} rows, {len(failed)} failed, {len(skipped)} skipped "
          f"in {meta['total_s']:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
