"""Benchmark the derivatives of the dynamics against Pinocchio.

``jaxrbd.forward_dynamics_derivatives`` (d qdd / d(q, qd, tau)) against Pinocchio's
``computeABADerivatives`` and ``jaxrbd.inverse_dynamics_derivatives`` (d tau / d(q, qd,
qdd)) against ``computeRNEADerivatives``, per sample, on panda (fixed base), solo12 and
talos (floating base) from ``tests/data``:

- ``single``: one jitted call on one state;
- ``vmap``: ``jit(jax.vmap(f, in_axes=(None, 0, 0, 0)))`` on a batch of states;
- ``batched``: ``jit(jaxrbd.batched.f)`` on a batch (batch-first arrays);
- ``autodiff`` (``--autodiff``): the alternative the analytic code replaces,
  ``jax.vmap`` of ``jax.jacfwd`` through the public dynamics (tangent-space ``q`` via
  ``integrate``), at the smallest batch.

Pinocchio is timed in the same run on one state (``ratio`` = jaxrbd per sample / one
Pinocchio call; < 1: jaxrbd is faster). Besides wall time the script records process CPU
time per sample for jaxrbd and Pinocchio (``cpu_ratio``), which is less distorted when
other processes share the machine.

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_derivatives.py            # full
    PYTHONPATH=. python benchmarks/bench_derivatives.py --quick    # smoke test (panda, B=64)
    PYTHONPATH=. python benchmarks/bench_derivatives.py --robots talos --batches 4096

Writes ``benchmarks/results/derivatives.json`` (``--quick``: ``derivatives_quick.json``,
``--float32``: ``derivatives_float32.json``; ``--out`` overrides).

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
BATCHES = (64, 1024, 4096)
FUNCTIONS = ("forward_dynamics_derivatives", "inverse_dynamics_derivatives")
PIN_NAME = {
    "forward_dynamics_derivatives": "computeABADerivatives",
    "inverse_dynamics_derivatives": "computeRNEADerivatives",
}
QUICK = {"robots": "panda", "batches": "64", "budget": 0.05, "pin_budget": 0.05}
TARGET = ("talos", "forward_dynamics_derivatives", "vmap", 4096)


@dataclasses.dataclass(frozen=True)
class Job:
    model: str
    function: str
    variant: str  # "single" | "vmap" | "batched" | "autodiff"
    batch: int | None

    def label(self) -> str:
        return f"{self.model} {self.function} {self.variant}" + (
            "" if self.batch is None else f" B={self.batch}"
        )


def autodiff(function):
    """``jax.jacfwd`` through the public dynamics, in the same tangent-space convention."""
    base = {"forward_dynamics_derivatives": jaxrbd.forward_dynamics,
            "inverse_dynamics_derivatives": jaxrbd.inverse_dynamics}[function]

    def f(model, q, qd, x):
        def g(dq, qd, x):
            return base(model, jaxrbd.integrate(model, q, dq), qd, x)

        return jax.jacfwd(g, argnums=(0, 1, 2))(jnp.zeros(model.nv, model.dtype), qd, x)

    return f


def jax_function(job: Job):
    if job.variant == "single":
        return getattr(jaxrbd, job.function)
    if job.variant == "vmap":
        return jax.vmap(getattr(jaxrbd, job.function), in_axes=(None, 0, 0, 0))
    if job.variant == "batched":
        return getattr(jaxrbd.batched, job.function)
    return jax.vmap(autodiff(job.function), in_axes=(None, 0, 0, 0))


class States:
    """Random states: q from `jaxrbd.random_configuration`, the others standard normal."""

    def __init__(self, model, max_batch: int, seed: int = 0):
        k_single, k_batch, k_v, k_w = jax.random.split(jax.random.key(seed), 4)
        dt = model.dtype
        self.single = (
            jaxrbd.random_configuration(model, k_single),
            jax.random.normal(k_v, (model.nv,), dt),
            jax.random.normal(k_w, (model.nv,), dt),
        )
        keys = jax.random.split(k_batch, max_batch)
        self.Q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(keys)
        self.V = jax.random.normal(k_v, (max_batch, model.nv), dt)
        self.W = jax.random.normal(k_w, (max_batch, model.nv), dt)

    def batch(self, B):
        return tuple(jnp.array(x[:B]) for x in (self.Q, self.V, self.W))


def cpu_time(call, n_min: int = 3, budget_s: float = 0.2) -> float:
    """Median process CPU seconds per call (all threads), over a few blocks of calls."""
    call()
    t0 = time.process_time()
    call()
    est = max(time.process_time() - t0, 1e-6)
    inner = max(1, int(0.01 / est))
    reps = max(n_min, min(50, int(budget_s / (inner * est))))
    out = []
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(inner):
            call()
        out.append((time.process_time() - t0) / inner)
    return float(np.median(out))


class Runner:
    def __init__(self, args, max_batch):
        self.args = args
        self.max_batch = max_batch
        self.models, self.states, self.pin_models, self.pin = {}, {}, {}, {}

    def model(self, name):
        if name not in self.models:
            m = jaxrbd.load_urdf(C.DATA / f"{name}.urdf", floating_base=ROBOTS[name])
            self.models[name] = m
            self.states[name] = States(m, self.max_batch)
            self.pin_models[name] = (
                C.pin_load_urdf(C.DATA / f"{name}.urdf", ROBOTS[name]) if C.pinocchio() else None
            )
        return self.models[name]

    def pinocchio(self, name, function):
        key = (name, function)
        if key not in self.pin:
            pm = self.pin_models[name]
            if pm is None:
                self.pin[key] = None
            else:
                pin = C.pinocchio()
                data = pm.createData()
                q, v, w = C.pin_random_state(pm, np.random.default_rng(0))
                f = getattr(pin, PIN_NAME[function])

                def call():
                    return f(pm, data, q, v, w)

                t = C.time_python(call, budget_s=self.args.pin_budget)
                t["cpu_s"] = cpu_time(call)
                self.pin[key] = t
        return self.pin[key]

    def run(self, job: Job) -> dict:
        model = self.model(job.model)
        st = self.states[job.model]
        data = st.single if job.batch is None else st.batch(job.batch)
        args = (model,) + data
        f, lower_s, compile_s = C.compile_jit(jax_function(job), *args)
        t = C.time_jax(f, *args, budget_s=self.args.budget)
        cpu = cpu_time(lambda: jax.block_until_ready(f(*args)))
        n = 1 if job.batch is None else job.batch
        pin = self.pinocchio(job.model, job.function)
        per_sample, cpu_per_sample = t["median_s"] / n, cpu / n
        return {
            **dataclasses.asdict(job),
            "nq": model.nq, "nv": model.nv, "nbodies": model.nbodies,
            "lower_s": lower_s, "compile_s": compile_s,
            "time_s": t["median_s"], "time_min_s": t["min_s"],
            "per_sample_s": per_sample, "cpu_per_sample_s": cpu_per_sample,
            "pinocchio": PIN_NAME[job.function],
            "pinocchio_s": pin and pin["median_s"], "pinocchio_cpu_s": pin and pin["cpu_s"],
            "ratio": per_sample / pin["median_s"] if pin else None,
            "cpu_ratio": cpu_per_sample / pin["cpu_s"] if pin else None,
            "repeats": t["repeats"], "inner": t["inner"], "error": None,
        }


def make_jobs(models, functions, batches, with_autodiff) -> list[Job]:
    jobs = []
    for name in models:
        for fn in functions:
            jobs.append(Job(name, fn, "single", None))
            for B in batches:
                jobs += [Job(name, fn, "vmap", B), Job(name, fn, "batched", B)]
            if with_autodiff and batches:
                jobs.append(Job(name, fn, "autodiff", min(batches)))
    target = Job(*TARGET)
    return ([target] if target in jobs else []) + [j for j in jobs if j != target]


def _num(fmt):
    return lambda x: "-" if x is None else fmt.format(x)


COLUMNS = [
    ("model", "model", str),
    ("nv", "nv", str),
    ("function", "function", lambda s: s.replace("_derivatives", "")),
    ("variant", "variant", str),
    ("batch", "batch", lambda b: "-" if b is None else str(b)),
    ("compile", "compile_s", C.fmt_time),
    ("per sample", "per_sample_s", C.fmt_time),
    ("pinocchio", "pinocchio_s", C.fmt_time),
    ("ratio", "ratio", _num("{:.3g}")),
    ("cpu/sample", "cpu_per_sample_s", C.fmt_time),
    ("pin cpu", "pinocchio_cpu_s", C.fmt_time),
    ("cpu ratio", "cpu_ratio", _num("{:.3g}")),
]


def targets(rows) -> list[dict]:
    row = next((r for r in rows if (r["model"], r["function"], r["variant"], r["batch"]) == TARGET
                and r.get("error") is None), None)
    value = row and row["ratio"]
    return [{
        "target": "talos forward_dynamics_derivatives vmap B=4096: per-sample time / one "
                  "Pinocchio computeABADerivatives call",
        "value": value, "limit": 1.0, "unit": "ratio",
        "cpu_ratio": row and row["cpu_ratio"],
        "met": None if value is None else bool(value <= 1.0),
    }]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="panda, batch 64, short budgets")
    p.add_argument("--robots", default=None, help="comma list of panda, solo12, talos")
    p.add_argument("--batches", default=None, help="comma list of batch sizes")
    p.add_argument("--functions", default=",".join(FUNCTIONS))
    p.add_argument("--autodiff", action="store_true",
                   help="also time vmap(jacfwd) through the dynamics at the smallest batch")
    p.add_argument("--float32", action="store_true", help="leave jax_enable_x64 off")
    p.add_argument("--budget", type=float, default=None, help="seconds of timing per row")
    p.add_argument("--pin-budget", type=float, default=None)
    p.add_argument("--time-limit", type=float, default=None, help="skip rows after S seconds")
    p.add_argument("--out", default=None)
    C.add_jit_argument(p)
    args = p.parse_args()
    C.use_jit(args.jit)
    quick = QUICK if args.quick else {}
    robots = (args.robots or quick.get("robots") or ",".join(ROBOTS)).split(",")
    for r in robots:
        if r not in ROBOTS:
            raise SystemExit(f"unknown robot {r!r}; expected some of {list(ROBOTS)}")
    batches = [int(b) for b in (args.batches if args.batches is not None
                                else quick.get("batches", ",".join(map(str, BATCHES)))).split(",") if b]
    functions = args.functions.split(",")
    for f in functions:
        if f not in FUNCTIONS:
            raise SystemExit(f"unknown function {f!r}; expected some of {FUNCTIONS}")
    args.budget = args.budget if args.budget is not None else quick.get("budget", 0.4)
    args.pin_budget = args.pin_budget if args.pin_budget is not None else quick.get("pin_budget", 0.3)
    suffix = "_quick" if args.quick else ("_float32" if args.float32 else "")
    out = Path(args.out) if args.out else C.RESULTS / f"derivatives{suffix}{C.jit_suffix()}.json"

    meta = C.machine_metadata()
    meta.update(dtype="float32" if args.float32 else "float64", options=vars(args) | {"out": str(out)})
    print(f"jax {meta['jax']}, pinocchio {meta['pinocchio']}, {meta['dtype']}, "
          f"{meta['machine']['cpu']} ({meta['machine']['cpu_usable']} usable cores), "
          f"load {meta['machine']['load_avg_1min_at_start']}", flush=True)
    jobs = make_jobs(robots, functions, batches, args.autodiff)
    runner = Runner(args, max(batches, default=1))
    rows, skipped = [], []
    t_start = time.perf_counter()
    for i, job in enumerate(jobs):
        elapsed = time.perf_counter() - t_start
        if args.time_limit is not None and elapsed > args.time_limit:
            skipped = [j.label() for j in jobs[i:]]
            print(f"time limit reached: skipping {len(skipped)} rows", flush=True)
            break
        try:
            row = runner.run(job)
        except Exception as e:  # noqa: BLE001 (report and go on)
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            row = {**dataclasses.asdict(job), "error": msg}
            print(f"[{i + 1}/{len(jobs)}] {job.label()}: FAILED {msg}", flush=True)
        else:
            print(f"[{i + 1}/{len(jobs)} {elapsed:4.0f}s] {job.label()}: compile "
                  f"{C.fmt_time(row['compile_s'])}, per sample {C.fmt_time(row['per_sample_s'])}"
                  f" (cpu {C.fmt_time(row['cpu_per_sample_s'])}), pinocchio "
                  f"{C.fmt_time(row['pinocchio_s'])}, ratio {_num('{:.3g}')(row['ratio'])}",
                  flush=True)
        rows.append(row)
        C.write_json(out, rows, meta, targets=targets(rows))
        if i + 1 < len(jobs) and jobs[i + 1].model != job.model:
            jax.clear_caches()
    meta.update(complete=not skipped, total_s=time.perf_counter() - t_start)
    meta["machine"]["load_avg_1min_at_end"] = C.load_average()
    ts = targets(rows)
    C.write_json(out, rows, meta, targets=ts, skipped=skipped)
    print()
    C.print_table([r for r in rows if r.get("error") is None], COLUMNS)
    for t in ts:
        if t["value"] is not None:
            print(f"\ntarget: {t['target']}: {t['value']:.3g} (cpu-time ratio "
                  f"{t['cpu_ratio']:.3g}), limit {t['limit']}: {'MET' if t['met'] else 'MISSED'}")
    print(f"\n{len(rows)} rows in {meta['total_s']:.0f} s; wrote {out}")


if __name__ == "__main__":
    main()
