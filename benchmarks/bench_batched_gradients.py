"""Batched gradients: `jax.vmap` of `jax.value_and_grad` through forward dynamics.

talos and solo12 (floating base, ``tests/data``), float64, a batch of states of one model:
``jit(vmap(value_and_grad(loss, argnums), in_axes=(None, 0, 0, 0)))`` with
``loss = sum(forward_dynamics(model, q, qd, tau) ** 2)``, per state, for

- ``state``: the gradient with respect to ``(q, qd, tau)`` (a shooting method's or a
  policy's batch of gradients);
- ``model``: with respect to ``(model, q, qd, tau)`` (one identification gradient per
  sample),

each for the ``Model.traversal`` values named by ``--traversals`` (``auto``, the XLA
programs' derivatives; ``kernel``, the native primal and reverse sweep, one call of each
for the batch, `jaxrbd._kernel_rules`). The peer, timed in the same process, is
Pinocchio's ``computeABADerivatives`` on one state from Python followed by the state
gradient's three transposed products ``J^T (2 qdd)`` in NumPy (``peer``: per state; it
gives no model gradient).

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_batched_gradients.py
    PYTHONPATH=. python benchmarks/bench_batched_gradients.py --robots talos --batch 1024

Writes ``benchmarks/results/batched_gradients.json`` (``--out`` overrides).
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
import numpy as np  # noqa: E402

import jaxrbd  # noqa: E402

ROBOTS = {"solo12": True, "talos": True}  # name -> floating base
ARGNUMS = {"state": (1, 2, 3), "model": (0, 1, 2, 3)}


def _loss(model, q, qd, tau):
    return jnp.sum(jaxrbd.forward_dynamics(model, q, qd, tau) ** 2)


def _pin_gradient(pin, pm, pd, q, v, w):
    def call():
        pin.computeABADerivatives(pm, pd, q, v, w)
        lam = 2.0 * pd.ddq
        return pd.ddq_dq.T @ lam, pd.ddq_dv.T @ lam, pd.Minv.T @ lam

    return call


def run_robot(name, args, rows):
    model = jaxrbd.load_urdf(C.DATA / f"{name}.urdf", floating_base=ROBOTS[name])
    B = args.batch
    keys = jax.random.split(jax.random.key(0), B)
    Q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(keys)
    rng = np.random.default_rng(0)
    QD, TAU = (jnp.asarray(rng.standard_normal((B, model.nv))) for _ in range(2))
    peer = None
    pin = C.pinocchio()
    if pin is not None:
        pm = C.pin_load_urdf(C.DATA / f"{name}.urdf", ROBOTS[name])
        q, v, w = C.pin_random_state(pm, rng)
        peer = C.time_python(_pin_gradient(pin, pm, pm.createData(), q, v, w),
                             budget_s=args.pin_budget)["min_s"]
    for wrt, argnums in ARGNUMS.items():
        for traversal in args.traversals:
            m = model.with_traversal(traversal)
            f = jax.vmap(jax.value_and_grad(_loss, argnums=argnums), in_axes=(None, 0, 0, 0))
            jitted, _, compile_s = C.compile_jit(f, m, Q, QD, TAU)
            t = C.time_jax(jitted, m, Q, QD, TAU, budget_s=args.budget)["min_s"] / B
            text = jax.jit(f).lower(m, Q, QD, TAU).compile().as_text()
            row = {"robot": name, "wrt": wrt, "traversal": traversal, "batch": B,
                   "time_s": t, "compile_s": compile_s, "kernels": C.count_kernels(text),
                   "peer": "pin.computeABADerivatives + J^T products", "peer_s": peer,
                   "ratio": None if peer is None else t / peer}
            rows.append(row)
            print(f"{name} {wrt} {traversal}: {C.fmt_time(t)} per state "
                  f"(compile {compile_s:.2f} s)", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--robots", default="solo12,talos")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--traversals", default="auto,kernel")
    p.add_argument("--budget", type=float, default=2.0, help="seconds per jaxrbd row")
    p.add_argument("--pin-budget", type=float, default=0.5, help="seconds per Pinocchio row")
    p.add_argument("--out", default=str(C.RESULTS / "batched_gradients.json"))
    p.add_argument("--note", default="AMD EPYC VM, AVX2 only (no AVX-512), 2 cores; times "
                   "are the minimum of adaptive repeats", help="machine note for the JSON")
    C.add_jit_argument(p)
    args = p.parse_args(argv)
    C.use_jit(args.jit)
    args.traversals = tuple(args.traversals.split(","))
    rows = []
    for name in args.robots.split(","):
        run_robot(name, args, rows)
    meta = C.machine_metadata()
    meta["machine"]["note"] = args.note
    C.write_json(args.out, rows, meta)
    print()
    C.print_table(rows, [
        ("robot", "robot", str), ("wrt", "wrt", str), ("traversal", "traversal", str),
        ("per state", "time_s", C.fmt_time),
        ("peer", "peer_s", lambda x: "-" if x is None else C.fmt_time(x)),
        ("ratio", "ratio", lambda x: "-" if x is None else f"{x:.2f}"),
        ("kernels", "kernels", str), ("compile", "compile_s", lambda x: f"{x:.2f} s"),
    ])


if __name__ == "__main__":
    main()
