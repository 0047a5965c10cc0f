"""Benchmark the analytic derivative rules of the dynamics against AD through the recursions.

`jaxrbd.forward_dynamics` with ``derivatives="analytic"`` (the default: a `jax.custom_jvp`
rule built on `jaxrbd.forward_dynamics_derivatives`) against ``derivatives="ad"``, on
talos (floating base, ``tests/data``) and a 100-link revolute chain, float64, one state:

- ``grad``: ``jit(jax.grad(loss))`` with ``loss = sum(forward_dynamics(q, qd, tau)^2)``,
  w.r.t. ``(q, qd, tau)``;
- ``jacfwd``: ``jit(jax.jacfwd(forward_dynamics, argnums=(0, 1, 2)))``.

Compile time (trace + lower + XLA compile, `_common.compile_jit`) and the median run
time are reported separately; ``speedup`` = AD time / analytic time (> 1: the rule is
faster). No Pinocchio peer: this compares two jaxrbd paths.

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_grad_rules.py
    PYTHONPATH=. python benchmarks/bench_grad_rules.py --models talos --budget 0.5

Writes ``benchmarks/results/grad_rules.json`` (``--out`` overrides).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common as C  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jaxrbd  # noqa: E402

MODELS = ("talos", "chain100")
MODES = ("analytic", "ad")


def load(name):
    if name == "talos":
        return jaxrbd.load_urdf(C.DATA / "talos.urdf", floating_base=True)
    if name.startswith("chain"):
        return jaxrbd.models.chain(int(name[len("chain"):]), dtype=jnp.float64)
    raise ValueError(f"model {name!r}, expected one of {MODELS}")


def programs(model, mode):
    def fd(q, qd, tau):
        return jaxrbd.forward_dynamics(model, q, qd, tau, derivatives=mode)

    def loss(q, qd, tau):
        return jnp.sum(fd(q, qd, tau) ** 2)

    return {
        "grad": jax.grad(loss, argnums=(0, 1, 2)),
        "jacfwd": jax.jacfwd(fd, argnums=(0, 1, 2)),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--budget", type=float, default=1.0, help="seconds of timing per row")
    p.add_argument("--compile-repeats", type=int, default=1)
    p.add_argument("--out", default=str(C.RESULTS / f"grad_rules{C.jit_suffix()}.json"))
    C.add_jit_argument(p)
    args = p.parse_args()
    C.use_jit(args.jit)
    meta = C.machine_metadata()
    rows = []
    for name in args.models:
        model = load(name)
        q, qd, _, tau = (jaxrbd.random_configuration(model, jax.random.key(0)),
                         0.3 * jnp.ones(model.nv), None, jnp.linspace(-1.0, 1.0, model.nv))
        for what in ("grad", "jacfwd"):
            times = {}
            for mode in MODES:
                f = programs(model, mode)[what]
                jitted, lower_s, compile_s = C.compile_jit(f, q, qd, tau, repeats=args.compile_repeats)
                t = C.time_jax(jitted, q, qd, tau, budget_s=args.budget)
                times[mode] = t["median_s"]
                rows.append({"model": name, "nv": model.nv, "what": what, "derivatives": mode,
                             "compile_s": compile_s, "lower_s": lower_s, "median_s": t["median_s"],
                             "min_s": t["min_s"], "repeats": t["repeats"],
                             "load_avg_1min": C.load_average()})
            for r in rows[-2:]:
                r["speedup"] = times["ad"] / times["analytic"]
            C.print_table(rows[-2:], [
                ("model", "model", str), ("nv", "nv", str), ("what", "what", str),
                ("derivatives", "derivatives", str), ("compile", "compile_s", C.fmt_time),
                ("median", "median_s", C.fmt_time), ("min", "min_s", C.fmt_time),
                ("AD/analytic", "speedup", lambda x: f"{x:.2f}"),
                ("load", "load_avg_1min", str),
            ])
    print()
    C.print_table(rows, [
        ("model", "model", str), ("nv", "nv", str), ("what", "what", str),
        ("derivatives", "derivatives", str), ("compile", "compile_s", C.fmt_time),
        ("median", "median_s", C.fmt_time), ("min", "min_s", C.fmt_time),
        ("AD/analytic", "speedup", lambda x: f"{x:.2f}"),
    ])
    C.write_json(args.out, rows, meta)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
