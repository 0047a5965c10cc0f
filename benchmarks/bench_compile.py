"""Compile times: the dynamics, their gradients, an RK4 rollout's gradient, and the
trajectory-optimisation example, against the issue's compile-time targets.

Models: talos (floating base, ``tests/data/talos.urdf``) and ``jaxrbd.models.chain(100)``.
Rows, each the wall time of ``jit(f).lower(*args).compile()`` (trace + lower + XLA
compile, `_common.compile_jit`; column ``cpu``: the process's CPU seconds for the same
compiles, less sensitive to other processes on a shared machine) with the model a jit
argument and float64 states:

- ``forward_dynamics``, ``inverse_dynamics``, ``mass_matrix``: one state (``single``)
  and ``jax.vmap`` over a batch of ``--batch`` states (``vmap``); target <= 1 s;
- ``value_and_grad(fd loss)``: ``jax.value_and_grad`` of ``sum(forward_dynamics(q, qd,
  tau)**2)`` with respect to ``(q, qd, tau)``; target <= 2 s;
- ``value_and_grad(fd loss, model)``: the same with respect to ``(model, q, qd, tau)``
  (parameter sensitivities, the identification use); target <= 3 s;
- ``value_and_grad(rk4 rollout loss)``: the same for ``sum(qs[-1]**2) + sum(qds[-1]**2)``
  of a 100-step RK4 ``jaxrbd.rollout`` with respect to ``(q0, qd0, tau_seq)``; target
  <= 3 s.

By default every row is compiled ``--repeats`` times in this process with
``jax.clear_caches()`` before each compile (and a fresh jit wrapper, so neither JAX's
trace cache nor its executable cache answers) and the median is reported, after one
warm-up compile of a 2-body chain (JAX's start-up is not charged to the first row).
``--traversal kernel`` compiles the models with that traversal
(``Model.with_traversal``; one state's dynamics as native kernels), into
``compile_kernel.json``.
``--fresh-process`` instead compiles each row once in a new Python process (after the
same warm-up): the first compile a user waits for, jaxrbd's host-side caches empty.

The ``example`` row runs ``examples/trajectory_optimization.py`` (``--quick`` unless
``--example-full``) in a subprocess and adds up the compile spans JAX reports through
`jax.monitoring` (jaxpr tracing, lowering to MLIR and XLA compilation, overlaps of
nested traces counted once): the example's total compile time, with the number of XLA
compilations and the example's whole wall time beside it. The issue names no limit for
it, so it is reported without one.

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_compile.py                  # ~5-10 min on 2 cores
    PYTHONPATH=. python benchmarks/bench_compile.py --quick          # smoke test
    PYTHONPATH=. python benchmarks/bench_compile.py --fresh-process  # a process per row

Writes ``benchmarks/results/compile.json`` (``--quick``: ``compile_quick.json``;
``--out`` overrides). ``--jit jax`` compiles with plain `jax.jit` (``*_jaxjit.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common as C  # noqa: E402

import jaxrbd  # noqa: E402

MODELS = ("talos", "chain100")
FUNCTIONS = ("forward_dynamics", "inverse_dynamics", "mass_matrix")
GRADS = ("value_and_grad(fd loss)", "value_and_grad(fd loss, model)",
         "value_and_grad(rk4 rollout loss)")
ROLLOUT_STEPS = 100
BATCH = 4096
EXAMPLE = C.ROOT / "examples" / "trajectory_optimization.py"

#: The issue's compile-time limits [s] per case.
TARGETS = {
    "forward_dynamics": 1.0,
    "inverse_dynamics": 1.0,
    "mass_matrix": 1.0,
    "value_and_grad(fd loss)": 2.0,
    "value_and_grad(fd loss, model)": 3.0,
    "value_and_grad(rk4 rollout loss)": 3.0,
}


@dataclasses.dataclass(frozen=True)
class Case:
    model: str
    function: str
    variant: str  # "single" | "vmap"

    def label(self) -> str:
        return f"{self.model} {self.function} {self.variant}"


def cases(models) -> list[Case]:
    out = []
    for m in models:
        for fn in FUNCTIONS:
            out += [Case(m, fn, "single"), Case(m, fn, "vmap")]
        out += [Case(m, g, "single") for g in GRADS]
    return out


def load_model(name: str, traversal: str = "auto"):
    if name == "talos":
        m = jaxrbd.load_urdf(C.DATA / "talos.urdf", floating_base=True)
        return m.with_traversal(traversal)
    if name.startswith("chain") and name[5:].isdigit():
        return jaxrbd.models.chain(int(name[5:])).with_traversal(traversal)
    raise SystemExit(f"unknown model {name!r}; expected talos or chainN")


def program(case: Case, model, batch: int):
    """``(f, args)``: the function compiled for ``case``, and its arguments (the model,
    then `jax.ShapeDtypeStruct` s: only shapes and dtypes matter to a compile)."""
    dt = model.dtype

    def S(*shape):
        return jax.ShapeDtypeStruct(shape, dt)

    nq, nv = model.nq, model.nv
    if case.function.startswith("value_and_grad(fd loss"):
        def loss(model, q, qd, tau):
            return jnp.sum(jaxrbd.forward_dynamics(model, q, qd, tau) ** 2)

        argnums = (0, 1, 2, 3) if case.function.endswith("model)") else (1, 2, 3)
        return jax.value_and_grad(loss, argnums=argnums), (model, S(nq), S(nv), S(nv))
    if case.function == "value_and_grad(rk4 rollout loss)":
        def loss(model, q0, qd0, tau_seq):
            qs, qds = jaxrbd.rollout(model, q0, qd0, tau_seq, 1e-3, "rk4")
            return jnp.sum(qs[-1] ** 2) + jnp.sum(qds[-1] ** 2)

        args = (model, S(nq), S(nv), S(ROLLOUT_STEPS, nv))
        return jax.value_and_grad(loss, argnums=(1, 2, 3)), args
    f = getattr(jaxrbd, case.function)
    states = (S(nq),) if case.function == "mass_matrix" else (S(nq), S(nv), S(nv))
    if case.variant == "vmap":
        f = jax.vmap(f, in_axes=(None,) + (0,) * len(states))
        states = tuple(S(batch, *s.shape) for s in states)
    return f, (model, *states)


def warm_up():
    """Pay JAX's one-time start-up costs (backend, first trace of jaxrbd) before timing."""
    m = jaxrbd.models.chain(2)
    q = jnp.zeros(m.nq, m.dtype)
    C.compile_jit(jaxrbd.forward_dynamics, m, q, q, q)


def compile_case(case: Case, model, batch: int, repeats: int) -> dict:
    """Median lower + compile wall time of ``case`` over ``repeats`` compiles, each
    after ``jax.clear_caches()``."""
    f, args = program(case, model, batch)
    lowers, totals, cpus = [], [], []
    for _ in range(repeats):
        jax.clear_caches()
        cpu0 = time.process_time()
        _, lower_s, total_s = C.compile_jit(f, *args)
        cpus.append(time.process_time() - cpu0)
        lowers.append(lower_s)
        totals.append(total_s)
    return {
        "lower_s": statistics.median(lowers),
        "compile_s": statistics.median(totals),
        "compile_min_s": min(totals),
        "compile_all_s": totals,
        # the process's CPU seconds (all threads) for the same compiles: on a shared
        # machine the wall time also counts the time other processes hold the core
        "compile_cpu_s": statistics.median(cpus),
        "compile_cpu_all_s": cpus,
        "repeats": repeats,
    }


def _row(case: Case, model, batch, result, mode) -> dict:
    limit = TARGETS[case.function]
    return {
        **dataclasses.asdict(case),
        "nq": model.nq,
        "nv": model.nv,
        "traversal": model.traversal,
        "batch": batch if case.variant == "vmap" else None,
        "mode": mode,
        **result,
        "target_s": limit,
        "met": None if result.get("compile_s") is None else bool(result["compile_s"] <= limit),
        "error": None,
    }


# --------------------------------------------------------------------------- fresh processes

_ONE_ROW = textwrap.dedent(
    """
    import json, sys
    import bench_compile as B
    case = B.Case(*sys.argv[2].split("|"))
    B.C.use_jit(sys.argv[3])
    model = B.load_model(case.model, sys.argv[5])
    B.warm_up()
    res = B.compile_case(case, model, int(sys.argv[4]), 1)
    json.dump(res, open(sys.argv[1], "w"))
    """
)


def compile_case_fresh(case: Case, batch: int, traversal: str = "auto") -> dict:
    """``compile_case`` with one repeat, in a new Python process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        env = dict(os.environ)
        path = [str(Path(__file__).resolve().parent), str(C.ROOT), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
        arg = "|".join((case.model, case.function, case.variant))
        proc = subprocess.run(
            [sys.executable, "-c", _ONE_ROW, str(out), arg, C.JIT, str(batch), traversal],
            env=env, cwd=C.ROOT, capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip()
                               else f"exit status {proc.returncode}")
        return json.loads(out.read_text())


# --------------------------------------------------------------------------- the example

_EXAMPLE_RUNNER = textwrap.dedent(
    """
    import json, runpy, sys, time
    import jax.monitoring as monitoring
    KINDS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
             "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
             "/jax/core/compile/backend_compile_duration": "xla"}
    spans = []

    def on_span(event, start, end, **kwargs):
        if event in KINDS:
            spans.append((KINDS[event], start, end))

    monitoring.register_event_time_span_listener(on_span)
    out, script, *args = sys.argv[1:]
    sys.argv = [script, *args]
    t0 = time.time()
    runpy.run_path(script, run_name="__main__")
    json.dump({"spans": spans, "wall_s": time.time() - t0}, open(out, "w"))
    """
)


def _union(intervals) -> float:
    """Total length of the union of ``(start, end)`` intervals (nested traces overlap)."""
    total, end = 0.0, -float("inf")
    for a, b in sorted(intervals):
        if a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def example_compile(full: bool) -> dict:
    """The trajectory-optimisation example's compile time from `jax.monitoring` spans."""
    args = [] if full else ["--quick"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "spans.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = str(C.ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.run(
            [sys.executable, "-c", _EXAMPLE_RUNNER, str(out), str(EXAMPLE), *args],
            env=env, cwd=tmp, capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip()
                               else f"exit status {proc.returncode}")
        payload = json.loads(out.read_text())
    spans = payload["spans"]
    by_kind = {k: [(a, b) for kind, a, b in spans if kind == k] for k in ("trace", "lower", "xla")}
    return {
        "compile_s": _union([(a, b) for _, a, b in spans]),
        # trace + lower, as in the other rows
        "lower_s": _union(by_kind["trace"] + by_kind["lower"]),
        "trace_s": _union(by_kind["trace"]),
        "mlir_s": _union(by_kind["lower"]),
        "xla_s": _union(by_kind["xla"]),
        "xla_compilations": len(by_kind["xla"]),
        "example_wall_s": payload["wall_s"],
        "example_args": args,
    }


# --------------------------------------------------------------------------- report


def _num(fmt):
    return lambda x: "-" if x is None else fmt.format(x)


COLUMNS = [
    ("model", "model", str),
    ("nv", "nv", _num("{}")),
    ("program", "function", str),
    ("variant", "variant", str),
    ("batch", "batch", _num("{}")),
    ("lower", "lower_s", C.fmt_time),
    ("compile", "compile_s", C.fmt_time),
    ("cpu", "compile_cpu_s", lambda t: "-" if t is None else C.fmt_time(t)),
    ("target", "target_s", lambda t: "-" if t is None else f"<= {C.fmt_time(t)}"),
    ("met", "met", lambda m: {None: "-", True: "MET", False: "MISSED"}[m]),
    ("reps", "repeats", _num("{}")),
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="smoke test: chain100's single-state forward dynamics and its "
                        "value_and_grad, batch 64, one repeat, the example in --quick mode")
    p.add_argument("--robots", default=",".join(MODELS),
                   help=f"comma-separated models (default {','.join(MODELS)}; any chainN)")
    p.add_argument("--batch", type=int, default=None,
                   help=f"states of the vmap rows (default {BATCH}, --quick 64)")
    p.add_argument("--repeats", type=int, default=None,
                   help="compiles per row, median reported (default 3, --quick 1)")
    p.add_argument("--fresh-process", action="store_true",
                   help="compile each row once in a new Python process instead")
    p.add_argument("--example-full", action="store_true",
                   help="run the example without --quick (its full problem sizes)")
    p.add_argument("--no-example", action="store_true", help="skip the example row")
    p.add_argument("--traversal", default="auto",
                   help="the models' traversal (Model.with_traversal; default auto)")
    p.add_argument("--out", help="JSON output path")
    C.add_jit_argument(p)
    a = p.parse_args(argv)
    C.use_jit(a.jit)
    a.batch = a.batch or (64 if a.quick else BATCH)
    a.repeats = a.repeats or (1 if a.quick else 3)
    if a.out is None:
        trav = "" if a.traversal == "auto" else f"_{a.traversal}"
        a.out = C.RESULTS / f"compile{trav}{'_quick' if a.quick else ''}{C.jit_suffix()}.json"
    return a


def main(argv=None):
    args = parse_args(argv)
    models = [s.strip() for s in args.robots.split(",") if s.strip()]
    todo = cases(models)
    if args.quick:
        todo = [c for c in todo if c.model == models[-1] and c.variant == "single"
                and c.function in ("forward_dynamics", "value_and_grad(fd loss)")]
    mode = "fresh process" if args.fresh_process else "jax.clear_caches() between compiles"
    meta = C.machine_metadata()
    meta.update(dtype="float64", traversal=args.traversal, models=models, batch=args.batch, repeats=args.repeats,
                mode=mode, rollout_steps=ROLLOUT_STEPS, quick=args.quick, complete=False)
    mach = meta["machine"]
    print(f"CPU: {mach['cpu']} ({mach['cpu_usable']} usable cores), {mach['platform']}\n"
          f"jax {meta['jax']}, jit {C.JIT}, float64; compile = trace + lower + XLA compile, "
          f"{mode}", flush=True)
    load = mach["load_avg_1min_at_start"]
    if load is not None and load > 0.5 * (mach["cpu_usable"] or 1):
        print(f"warning: load average {load} on {mach['cpu_usable']} cores: "
              "other processes compete for the CPU, times will be inflated", flush=True)

    t_start = time.perf_counter()
    if not args.fresh_process:
        warm_up()
    loaded, rows = {}, []
    for i, case in enumerate(todo):
        if case.model not in loaded:
            loaded[case.model] = load_model(case.model, args.traversal)
        model = loaded[case.model]
        try:
            if args.fresh_process:
                res = compile_case_fresh(case, args.batch, args.traversal)
            else:
                res = compile_case(case, model, args.batch, args.repeats)
        except Exception as e:  # report and go on: the library may be mid-change
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            row = {**dataclasses.asdict(case), "error": msg}
            print(f"[{i + 1:>2}/{len(todo)}] {case.label()}: FAILED {msg}", flush=True)
        else:
            row = _row(case, model, args.batch, res, mode)
            print(f"[{i + 1:>2}/{len(todo)}] {case.label()}: compile "
                  f"{C.fmt_time(row['compile_s'])} (target <= {C.fmt_time(row['target_s'])})",
                  flush=True)
        rows.append(row)
        C.write_json(args.out, rows, meta)

    if not args.no_example:
        print(f"example: {EXAMPLE.name} {'(full)' if args.example_full else '--quick'} "
              "in a subprocess ...", flush=True)
        base = {"model": "-", "function": f"example {EXAMPLE.stem}", "variant": "total",
                "batch": None, "nv": None, "mode": "fresh process (the example's own run)",
                "target_s": None, "met": None, "repeats": 1}
        try:
            res = example_compile(args.example_full)
        except Exception as e:
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            rows.append({**base, "error": msg})
            print(f"example: FAILED {msg}", flush=True)
        else:
            rows.append({**base, **res, "error": None})
            print(f"example: compile {C.fmt_time(res['compile_s'])} in "
                  f"{res['xla_compilations']} XLA compilations (trace {C.fmt_time(res['trace_s'])}, "
                  f"lower {C.fmt_time(res['mlir_s'])}, XLA {C.fmt_time(res['xla_s'])}); "
                  f"the whole example ran {C.fmt_time(res['example_wall_s'])}", flush=True)

    meta.update(complete=True, total_s=time.perf_counter() - t_start)
    meta["machine"]["load_avg_1min_at_end"] = C.load_average()
    C.write_json(args.out, rows, meta, targets_s=TARGETS)
    print()
    C.print_table([r for r in rows if r.get("error") is None], COLUMNS)
    failed = [r for r in rows if r.get("error")]
    for r in failed:
        print(f"FAILED {r['model']} {r['function']} {r['variant']}: {r['error']}")
    missed = [r for r in rows if r.get("met") is False]
    print(f"\n{len(rows) - len(failed)} rows ({len(missed)} above target), {len(failed)} "
          f"failed, in {meta['total_s']:.0f} s ({mode}); wrote {args.out}")


if __name__ == "__main__":
    main()
