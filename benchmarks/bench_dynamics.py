"""Benchmark forward_dynamics, inverse_dynamics and mass_matrix against Pinocchio.

Models: panda (fixed base), solo12 and talos (floating base) from ``tests/data`` and
serial chains of 5 to 100 bodies (``jaxrbd.models.chain``, rebuilt by hand in
Pinocchio and checked to give the same mass matrix). For every model and function:

- ``single``: one jitted call on one state;
- ``vmap``: ``jit(jax.vmap(f, in_axes=(None, 0, ...)))`` on a batch of states;
- ``batched``: ``jit(jaxrbd.batched.f)`` (native batch-trailing layout) on a batch;
- ``sharded``: ``jit(jaxrbd.batched.f(..., devices="all"))`` on the batch-4096 states
  split over ``--shard-devices`` CPU devices (default 2: both cores of the VM); it runs
  in a subprocess of this script started with that many devices (``--shard-worker``),
  which also times the unsharded ``batched`` call and Pinocchio in that process;

with the default ``"auto"`` traversal (level by level for one state, body by body for a
batch), and for talos and the chains also explicit ``"level"`` and ``"body"``
traversal (single call and the batch-4096 rows).

Pinocchio is timed in the same process. The headline peer (``peer``, ``ratio``) is its
C++ loop over the batch-4096 states: ``abaInParallel`` / ``rneaInParallel`` with one
thread (with ``--shard-devices`` threads for the ``sharded`` rows), per state. Beside it
(``pin py``, ``ratio py``) is one Python call of ``pin.aba`` / ``pin.rnea`` /
``pin.crba``, binding overhead included; that overhead (the same call on an empty
model) is printed and stored. Pinocchio has no C++ batch loop for the mass matrix, so
the ``crba`` Python call is its peer. ``ratio`` is the jaxrbd time per sample over the
peer's time per state (< 1: jaxrbd is faster).

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_dynamics.py            # full, 20-30 min on 2 cores
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
import json
import sys
import time
from pathlib import Path

# x64 must be switched on before any array is created, and the CPU device count set
# before the backend starts, so parse those flags first.
_FLOAT32 = "--float32" in sys.argv
_SHARD_WORKER = next((int(a.split("=", 1)[1]) for a in sys.argv
                      if a.startswith("--shard-worker=")), 0)
import jax  # noqa: E402

if not _FLOAT32:
    jax.config.update("jax_enable_x64", True)
if _SHARD_WORKER:
    jax.config.update("jax_num_cpu_devices", _SHARD_WORKER)

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
# Pinocchio's C++ loops over a batch (OpenMP over a `ModelPool`); none for the CRBA
PIN_PARALLEL = {"forward_dynamics": "abaInParallel", "inverse_dynamics": "rneaInParallel"}
SHARD_DEVICES = 2  # the VM's two cores

QUICK = {"robots": "panda,chain5", "batches": "64", "budget": 0.05, "pin_budget": 0.05}


@dataclasses.dataclass(frozen=True)
class Job:
    model: str
    function: str
    variant: str  # "single" | "vmap" | "batched"
    traversal: str  # "auto" (the default) | "level" | "body" | "dense"
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


def make_jobs(models, functions, batches, body_batch=True, traversals=None) -> list[Job]:
    """Every row, the target rows first; ``body_batch=False``: "body" on single calls only.

    ``traversals`` given: those schedules on every robot and every batch size."""
    if body_batch and batches:
        body_batch = BODY_BATCH if BODY_BATCH in batches else max(batches)
    else:
        body_batch = None
    jobs = []
    for name in models:
        body = name == "talos" or name.startswith("chain")
        for fn in functions:
            travs = traversals or (("auto", "level", "body") if body else ("auto",))
            for trav in travs:
                jobs.append(Job(name, fn, "single", trav, None))
                for B in batches:
                    if not traversals and trav != "auto" and B != body_batch:
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
    f = getattr(jaxrbd.batched, job.function)
    if job.variant == "sharded":  # over every device of the (--shard-worker) process
        return lambda model, *a: f(model, *a, devices="all")
    return f


class Runner:
    def __init__(self, args, max_batch):
        self.args = args
        self.max_batch = max_batch
        self.models, self.pin_models, self.states = {}, {}, {}
        self.pin_times, self.pin_cpp_times, self.pin_states = {}, {}, {}
        self.pin_overheads, self.checks, self.pin_checks = {}, {}, {}

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
        """One Pinocchio call from Python on one state (binding overhead included)."""
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

    def pin_overhead(self, function):
        """The Python call of the same Pinocchio function on an empty model (no joints):
        what the binding costs per call, measured."""
        if function not in self.pin_overheads:
            pin = C.pinocchio()
            if pin is None:
                self.pin_overheads[function] = None
            else:
                pm = pin.Model()
                data, z = pm.createData(), np.zeros(0)
                f = getattr(pin, PIN_NAME[function])
                call = (lambda: f(pm, data, z)) if function == "mass_matrix" else (
                    lambda: f(pm, data, z, z, z))
                t = C.time_python(call, budget_s=self.args.pin_budget)
                self.pin_overheads[function] = t["median_s"]
        return self.pin_overheads[function]

    def _pin_batch(self, name):
        """``(pool, Q, V, W, out)`` for the C++ loops: ``--pin-batch`` random states in
        Pinocchio's layout (``nq x N``, Fortran order), a `ModelPool` with a data per
        thread, and the output buffer."""
        if name not in self.pin_states:
            pin, pm = C.pinocchio(), self.pin_models[name]
            N = self.args.pin_batch
            rng = np.random.default_rng(0)
            cols = [C.pin_random_state(pm, rng) for _ in range(N)]
            Q, V, W = (np.asfortranarray(np.stack([c[k] for c in cols], axis=1)) for k in range(3))
            pool = pin.ModelPool(pm, max(1, self.args.shard_devices))
            self.pin_states[name] = (pool, Q, V, W, np.zeros((pm.nv, N), order="F"))
        return self.pin_states[name]

    def pin_cpp_time(self, name, function, threads):
        """Per-state time of Pinocchio's C++ batch loop (``abaInParallel`` /
        ``rneaInParallel`` with ``threads`` threads over ``--pin-batch`` states), or
        ``None`` (no such loop, or no Pinocchio)."""
        key = (name, function, threads)
        if key not in self.pin_cpp_times:
            self.pin_cpp_times[key] = None
            if self.pin_models[name] is not None and function in PIN_PARALLEL:
                pin, pm = C.pinocchio(), self.pin_models[name]
                pool, Q, V, W, out = self._pin_batch(name)
                f = getattr(pin, PIN_PARALLEL[function])
                if (name, function) not in self.pin_checks:  # the loop computes the same
                    f(threads, pool, Q, V, W, out)
                    data, one = pm.createData(), getattr(pin, PIN_NAME[function])
                    ref = np.stack([np.array(one(pm, data, Q[:, i], V[:, i], W[:, i]))
                                    for i in range(min(8, Q.shape[1]))], axis=1)
                    err = float(np.max(np.abs(out[:, :ref.shape[1]] - ref))
                                / max(1.0, np.max(np.abs(ref))))
                    self.pin_checks[(name, function)] = err
                    if not err <= 1e-9:
                        raise RuntimeError(f"{name}: pin.{PIN_PARALLEL[function]} differs from "
                                           f"pin.{PIN_NAME[function]} by {err:.3g} (relative)")
                t = C.time_python(lambda: f(threads, pool, Q, V, W, out),
                                  budget_s=self.args.pin_budget, min_repeats=5)
                n = Q.shape[1]
                self.pin_cpp_times[key] = {k: t[k] / n for k in ("median_s", "min_s")}
        return self.pin_cpp_times[key]

    def pin_fields(self, job: Job, per_sample: float, threads: int = 1) -> dict:
        """The Pinocchio columns of a row: the headline peer (C++ loop with ``threads``
        threads, else the Python call) and the Python call beside it."""
        py = self.pin_time(job.model, job.function)
        cpp = self.pin_cpp_time(job.model, job.function, threads)
        py_s, cpp_s = py and py["median_s"], cpp and cpp["median_s"]
        if cpp_s:
            peer, peer_s = f"{PIN_PARALLEL[job.function]} x{threads}", cpp_s
        elif py_s:
            peer, peer_s = f"{PIN_NAME[job.function]} (Python call)", py_s
        else:
            peer, peer_s = None, None
        return {
            "pinocchio_peer": peer,
            "pinocchio_peer_s": peer_s,
            "ratio": per_sample / peer_s if peer_s else None,
            "pinocchio_cpp_s": cpp_s,
            "pinocchio_cpp_min_s": cpp and cpp["min_s"],
            "pinocchio_threads": threads if cpp_s else None,
            "pinocchio_batch": self.args.pin_batch if cpp_s else None,
            "pinocchio_s": py_s,
            "pinocchio_min_s": py and py["min_s"],
            "ratio_python": per_sample / py_s if py_s else None,
            "pinocchio_overhead_s": self.pin_overhead(job.function),
        }

    def jax_args(self, job: Job):
        model = self.model(job.model, job.traversal)
        st = self.states[job.model]
        nargs = NARGS[job.function]
        data = st.single(nargs) if job.batch is None else st.batch(job.batch, nargs)
        return model, data

    def time_row(self, job: Job, model, data) -> dict:
        args = (model,) + data
        reps = self.args.target_compile_repeats if job in TARGET_JOBS else 1
        f, lower_s, compile_s = C.compile_jit(jax_function(job), *args, repeats=reps)
        t = C.time_jax(f, *args, budget_s=self.args.budget)
        n = 1 if job.batch is None else job.batch
        return {
            **dataclasses.asdict(job),
            "nq": model.nq,
            "nv": model.nv,
            "nbodies": model.nbodies,
            "devices": 1,
            "lower_s": lower_s,
            "compile_s": compile_s,
            "compile_repeats": reps,
            "time_s": t["median_s"],
            "time_min_s": t["min_s"],
            "per_sample_s": t["median_s"] / n,
            "repeats": t["repeats"],
            "inner": t["inner"],
            "error": None,
        }

    def run(self, job: Job) -> dict:
        row = self.time_row(job, *self.jax_args(job))
        return {**row, **self.pin_fields(job, row["per_sample_s"])}

    def run_sharded(self, job: Job) -> dict:
        """The ``sharded`` row (this process has ``--shard-worker`` devices), with the
        unsharded ``batched`` call and Pinocchio's loops timed here too."""
        from jax.sharding import NamedSharding, PartitionSpec

        model, data = self.jax_args(job)
        nd = len(jax.devices())
        # the states already split over the devices, as a sharded pipeline keeps them
        mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("batch",))
        split = NamedSharding(mesh, PartitionSpec("batch"))
        sharded = tuple(jax.device_put(x, split) for x in data)
        row = self.time_row(job, model, sharded)
        base = self.time_row(dataclasses.replace(job, variant="batched"), model, data)
        cpp1 = self.pin_cpp_time(job.model, job.function, 1)
        return {
            **row,
            **self.pin_fields(job, row["per_sample_s"], threads=nd),
            "devices": nd,
            "unsharded_time_s": base["time_s"],
            "unsharded_compile_s": base["compile_s"],
            "speedup": base["time_s"] / row["time_s"],
            "pinocchio_cpp_1thread_s": cpp1 and cpp1["median_s"],
        }


# --------------------------------------------------------------------------- report


def _num(fmt):
    return lambda x: "-" if x is None else fmt.format(x)


COLUMNS = [
    ("model", "model", str),
    ("nv", "nv", str),
    ("function", "function", str),
    ("variant", "variant", str),
    ("dev", "devices", _num("{}")),
    ("trav", "traversal", str),
    ("batch", "batch", lambda b: "-" if b is None else str(b)),
    ("compile", "compile_s", C.fmt_time),
    ("call", "time_s", C.fmt_time),
    ("per sample", "per_sample_s", C.fmt_time),
    ("pinocchio peer", "pinocchio_peer", lambda p: p or "-"),
    ("peer/state", "pinocchio_peer_s", C.fmt_time),
    ("ratio", "ratio", _num("{:.3g}")),
    ("pin py", "pinocchio_s", C.fmt_time),
    ("ratio py", "ratio_python", _num("{:.3g}")),
    ("reps", "repeats", _num("{}")),
]

VARIANTS = ("single", "vmap", "batched", "sharded")


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
        VARIANTS.index(row["variant"]),
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
    fd_sharded = find(rows, Job("talos", "forward_dynamics", "sharded", "auto", 4096))
    c10, c100 = find(rows, TARGET_JOBS[2]), find(rows, TARGET_JOBS[3])

    def notes(*parts):
        return "; ".join(p for p in parts if p) or None

    out = [
        {
            "target": "talos forward_dynamics vmap B=4096: per-sample time / Pinocchio "
                      "abaInParallel (1 thread, C++ loop) per state",
            "value": fd_vmap and fd_vmap["ratio"],
            "limit": 1.0,
            "unit": "ratio",
            "note": notes(
                fd_vmap and fd_vmap["ratio_python"] is not None
                and f"vs the Python call of pin.aba: {fd_vmap['ratio_python']:.3g}",
                fd_batched and fd_batched["ratio"] is not None
                and f"batched variant: {fd_batched['ratio']:.3g}",
            ),
        },
        {
            "target": "talos forward_dynamics sharded B=4096: per-sample time / Pinocchio "
                      "abaInParallel per state, as many threads as devices",
            "value": fd_sharded and fd_sharded["ratio"],
            "limit": None,  # the issue sets none: reported beside the one-core figures
            "unit": "ratio",
            "note": fd_sharded and notes(
                f"{fd_sharded['devices']} devices",
                f"speedup over the unsharded call in that process: {fd_sharded['speedup']:.3g}",
            ),
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
        t["met"] = None if t["value"] is None or t["limit"] is None else bool(
            t["value"] <= t["limit"])
        t["note"] = t.get("note") or None
    return out


def print_targets(ts):
    print("\nTargets (float64, talos, default 'auto' traversal):")
    for t in ts:
        fmt = C.fmt_time if t["unit"] == "s" else (lambda x: f"{x:.3g}")
        val = "not measured" if t["value"] is None else fmt(t["value"])
        status = "info" if t["limit"] is None else {None: "n/a", True: "MET", False: "MISSED"}[t["met"]]
        limit = "" if t["limit"] is None else f" (target <= {fmt(t['limit'])})"
        note = f"  ({t['note']})" if t.get("note") else ""
        print(f"  [{status:>6}] {t['target']}: {val}{limit}{note}")


def print_pinocchio_notes(meta, runner):
    """What the Pinocchio columns are, with the measured call overhead."""
    over = ", ".join(f"{PIN_NAME[f]} {C.fmt_time(t)}" for f, t in runner.pin_overheads.items()
                     if t is not None)
    if not over:
        return
    print(f"\nPinocchio peer: its C++ loop over {meta['pin_batch']} states "
          "(abaInParallel / rneaInParallel, 1 thread; sharded rows: as many threads as "
          "devices), per state. 'pin py' is one Python call on one state; the binding "
          f"overhead per call (the same call on an empty model) is {over}. The mass "
          "matrix has no C++ batch loop in Pinocchio: its peer is the crba Python call, "
          "overhead included.")


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
    p.add_argument("--traversals", default=None,
                   help="comma-separated Model.traversal values (auto, level, body, dense) run "
                        "at every batch size (default: auto everywhere; level and body on "
                        "talos and chains at one batch size)")
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
    p.add_argument("--pin-batch", type=int, default=BODY_BATCH,
                   help="states of Pinocchio's C++ loops, the headline peer (default "
                        f"{BODY_BATCH})")
    p.add_argument("--shard-devices", type=int, default=SHARD_DEVICES,
                   help="CPU devices of the 'sharded' rows, and Pinocchio threads they are "
                        f"compared with (default {SHARD_DEVICES}; 0 or 1: no sharded rows)")
    p.add_argument("--shard-worker", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--out", help="JSON output path")
    C.add_jit_argument(p)
    a = p.parse_args(argv)
    if a.shard_worker and a.shard_worker != _SHARD_WORKER:
        raise SystemExit("--shard-worker must be written --shard-worker=K (read before JAX starts)")
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


def shard_worker(args, models, functions, batch):
    """``--shard-worker=K``: the ``sharded`` rows, in a process with K CPU devices."""
    if len(jax.devices()) != args.shard_worker:
        raise SystemExit(f"shard worker: {len(jax.devices())} devices, expected "
                         f"{args.shard_worker}: {jax.devices()}")
    meta = C.machine_metadata()
    _warm_up()
    runner = Runner(args, batch)
    rows = []
    for name in models:
        for fn in functions:
            job = Job(name, fn, "sharded", "auto", batch)
            try:
                row = runner.run_sharded(job)
            except Exception as e:  # report and go on, as the main loop does
                msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                row = {**dataclasses.asdict(job), "devices": args.shard_worker, "error": msg}
                print(f"[sharded] {job.label()}: FAILED {msg}", flush=True)
            else:
                print(f"[sharded] {job.label()} on {row['devices']} devices: "
                      f"compile {C.fmt_time(row['compile_s'])}, call {C.fmt_time(row['time_s'])} "
                      f"(unsharded {C.fmt_time(row['unsharded_time_s'])}, speedup "
                      f"{row['speedup']:.3g}), per sample {C.fmt_time(row['per_sample_s'])}, "
                      f"{row['pinocchio_peer']} {C.fmt_time(row['pinocchio_peer_s'])}, ratio "
                      f"{'-' if row['ratio'] is None else format(row['ratio'], '.3g')}",
                      flush=True)
            rows.append(row)
        jax.clear_caches()
    C.write_json(args.out, rows, meta, chain_checks=runner.checks,
                 pin_parallel_checks={f"{m} {f}": e for (m, f), e in runner.pin_checks.items()})


def run_shard_worker(args, models, functions, batch) -> tuple[list[dict], dict]:
    """Run `shard_worker` in a subprocess with ``--shard-devices`` CPU devices (this
    process's backend has started with one): its rows and its metadata."""
    import subprocess
    import tempfile

    K = args.shard_devices
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sharded.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), f"--shard-worker={K}",
               "--robots", ",".join(models), "--functions", ",".join(functions),
               "--batches", str(batch), "--budget", str(args.budget),
               "--pin-budget", str(args.pin_budget), "--pin-batch", str(args.pin_batch),
               "--shard-devices", str(K), "--jit", C.JIT, "--out", str(out)]
        if args.float32:
            cmd.append("--float32")
        print(f"sharded rows: a subprocess with {K} CPU devices ({' '.join(cmd[1:3])} ...)",
              flush=True)
        proc = subprocess.run(cmd, check=False, cwd=C.ROOT)
        if proc.returncode != 0 or not out.exists():
            msg = f"shard worker exited with status {proc.returncode}"
            print(f"[sharded] FAILED: {msg}", flush=True)
            return [{**dataclasses.asdict(Job(m, f, "sharded", "auto", batch)), "devices": K,
                     "error": msg} for m in models for f in functions], {}
        payload = json.loads(out.read_text())
    info = {"metadata": payload["metadata"],
            "pin_parallel_checks": payload.get("pin_parallel_checks", {})}
    return payload["rows"], info


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
    shard_batch = (BODY_BATCH if BODY_BATCH in batches else max(batches)) if batches else None
    if args.shard_worker:
        return shard_worker(args, models, functions, shard_batch)
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
        pin_batch=args.pin_batch,
        shard_devices=args.shard_devices if args.shard_devices > 1 and batches else None,
        complete=False,
    )
    mach = meta["machine"]
    print(f"CPU: {mach['cpu']} ({mach['cpu_usable']} usable cores), {mach['platform']}\n"
          f"jax {meta['jax']}, pinocchio {meta['pinocchio']}, {meta['dtype']}", flush=True)
    load = mach["load_avg_1min_at_start"]
    if load is not None and load > 0.5 * (mach["cpu_usable"] or 1):
        print(f"warning: load average {load} on {mach['cpu_usable']} cores: "
              "other processes compete for the CPU, times will be inflated", flush=True)

    t_start = time.perf_counter()
    _warm_up()
    traversals = tuple(args.traversals.split(",")) if args.traversals else None
    jobs = make_jobs(models, functions, batches, body_batch=not args.quick,
                     traversals=traversals)
    n_first = sum(j in TARGET_JOBS for j in jobs)  # the target rows come first
    sharded = meta["shard_devices"] is not None
    runner = Runner(args, max(batches, default=1))
    rows, skipped, extra = [], [], {"chain_checks": runner.checks}

    def save(**more):
        checks = {f"{m} {f}": e for (m, f), e in runner.pin_checks.items()}
        checks.update(extra.get("shard_worker", {}).get("pin_parallel_checks", {}))
        C.write_json(args.out, sorted(rows, key=sort_key), meta, targets=targets(rows),
                     pin_parallel_checks=checks,
                     pinocchio_call_overhead_s={PIN_NAME[f]: t for f, t
                                                in runner.pin_overheads.items()},
                     **extra, **more)

    for i, job in enumerate(jobs + [None]):
        elapsed = time.perf_counter() - t_start
        if sharded and i == n_first:  # after the target rows, before the rest
            sharded = False
            if args.time_limit is None or elapsed <= args.time_limit:
                shard_rows, extra["shard_worker"] = run_shard_worker(
                    args, models, functions, shard_batch)
                rows += shard_rows
                save()
                elapsed = time.perf_counter() - t_start
            else:
                skipped += [Job(m, f, "sharded", "auto", shard_batch).label()
                            for m in models for f in functions]
        if job is None:
            break
        if args.time_limit is not None and elapsed > args.time_limit:
            skipped += [j.label() for j in jobs[i:]]
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
                  f"per sample {C.fmt_time(row['per_sample_s'])}, "
                  f"{row['pinocchio_peer'] or 'pinocchio'} "
                  f"{C.fmt_time(row['pinocchio_peer_s'])}, ratio "
                  f"{'-' if row['ratio'] is None else format(row['ratio'], '.3g')} "
                  f"(Python call {C.fmt_time(row['pinocchio_s'])}, ratio "
                  f"{'-' if row['ratio_python'] is None else format(row['ratio_python'], '.3g')})",
                  flush=True)
        rows.append(row)
        save()
        if i + 1 < len(jobs) and jobs[i + 1].model != job.model:
            jax.clear_caches()

    rows.sort(key=sort_key)
    meta.update(complete=not skipped, total_s=time.perf_counter() - t_start)
    meta["machine"]["load_avg_1min_at_end"] = C.load_average()
    ts = targets(rows)
    save(skipped=skipped)
    print()
    C.print_table([r for r in rows if r.get("error") is None], COLUMNS)
    print_pinocchio_notes(meta, runner)
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
