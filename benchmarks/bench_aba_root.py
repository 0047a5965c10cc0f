"""The floating-base shortcut of the articulated-body passes (`jaxrbd._aba_root`) against
today's generic traversal, interleaved in one process.

Variant A is the library as it is: on batches the root joint's inner nodes run in the
small dense scan of `_aba_root`. Variant B patches `jaxrbd._aba.root_chain` to 0 while
compiling, so the same batch runs every node through the generic passes. Both programs
are compiled first, then timed alternately (A, B, A, B, ...); the table gives the
minimum and median per-sample time of each, and the compile times.

    PYTHONPATH=. python benchmarks/bench_aba_root.py
    PYTHONPATH=. python benchmarks/bench_aba_root.py --robots talos --batch 1024 --rounds 9
    PYTHONPATH=. taskset -c 1 python benchmarks/bench_aba_root.py   # pinned to one core

The table gives wall-clock minima and medians and the minimum process CPU time (all
threads), which a shared machine disturbs less than the wall clock.

Writes ``benchmarks/results/aba_root.json`` (``--out`` overrides).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import jaxrbd  # noqa: E402
import jaxrbd._aba as aba  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _compile(fn, args, shortcut: bool):
    """``fn`` lowered and compiled with the shortcut on or off; (executable, seconds, HLO)."""
    original = aba.root_chain
    jax.clear_caches()  # nothing traced with the other variant may be reused
    if not shortcut:
        aba.root_chain = lambda model, s, B: 0
    try:
        t0 = time.perf_counter()
        exe = jax.jit(fn).lower(*args).compile()
        return exe, time.perf_counter() - t0, exe.as_text()
    finally:
        aba.root_chain = original


def _time(exe, args, calls: int) -> tuple[float, float]:
    """Best of ``calls`` calls: (wall seconds, process CPU seconds). The CPU time (all
    threads) counts the work, not the waits for a core that other processes hold."""
    wall = cpu = float("inf")
    for _ in range(calls):
        t0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(exe(*args))
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["talos", "solo12"])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=7, help="interleaved A/B rounds")
    ap.add_argument("--calls", type=int, default=3, help="calls per round (best kept)")
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parent / "results" / "aba_root.json")
    args = ap.parse_args()

    rows = []
    for robot in args.robots:
        model = jaxrbd.load_urdf(DATA / f"{robot}.urdf", floating_base=True)
        keys = jax.random.split(jax.random.PRNGKey(0), args.batch)
        Q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(keys)
        rng = np.random.default_rng(0)
        QD = jnp.asarray(rng.standard_normal((args.batch, model.nv)))
        TAU = jnp.asarray(rng.standard_normal((args.batch, model.nv)))
        fns = {
            "forward_dynamics": (
                lambda m, q, v, t: jax.vmap(jaxrbd.forward_dynamics, (None, 0, 0, 0))(m, q, v, t),
                (model, Q, QD, TAU)),
            "minv_times": (
                lambda m, q, t: jax.vmap(jaxrbd.minv_times, (None, 0, 0))(m, q, t),
                (model, Q, TAU)),
        }
        for name, (fn, fargs) in fns.items():
            exe_a, ca, hlo_a = _compile(fn, fargs, shortcut=True)
            exe_b, cb, hlo_b = _compile(fn, fargs, shortcut=False)
            assert hlo_a != hlo_b, "both variants compiled to one program"
            np.testing.assert_allclose(exe_a(*fargs), exe_b(*fargs), rtol=1e-8, atol=1e-8)
            ta, tb, pa, pb = [], [], [], []
            for _ in range(args.rounds):
                for exe, wall, cpu in ((exe_a, ta, pa), (exe_b, tb, pb)):
                    w, c = _time(exe, fargs, args.calls)
                    wall.append(w)
                    cpu.append(c)
            us = 1e6 / args.batch
            row = dict(robot=robot, function=name, batch=args.batch,
                       shortcut_min_us=min(ta) * us, shortcut_median_us=statistics.median(ta) * us,
                       generic_min_us=min(tb) * us, generic_median_us=statistics.median(tb) * us,
                       shortcut_cpu_min_us=min(pa) * us, generic_cpu_min_us=min(pb) * us,
                       shortcut_compile_s=ca, generic_compile_s=cb)
            rows.append(row)
            print(f"{robot:8s} {name:17s} shortcut {row['shortcut_min_us']:7.2f} "
                  f"(median {row['shortcut_median_us']:7.2f}, CPU {row['shortcut_cpu_min_us']:7.2f})"
                  f" us  generic {row['generic_min_us']:7.2f} (median "
                  f"{row['generic_median_us']:7.2f}, CPU {row['generic_cpu_min_us']:7.2f}) us  "
                  f"compile {ca:5.2f} / {cb:5.2f} s", flush=True)
    meta = dict(cpu=_cpu_name(), machine=platform.machine(), jax=jax.__version__,
                devices=[str(d) for d in jax.devices()], rounds=args.rounds, calls=args.calls,
                affinity=sorted(os.sched_getaffinity(0)),
                note="interleaved A/B in one process; shared VM")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
