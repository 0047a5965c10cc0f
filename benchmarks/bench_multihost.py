"""Weak scaling of `jaxrbd.batched.forward_dynamics` from one process to two on one machine.

Each process holds the same number of samples (``--batch``) of the humanoid model
(nq = 37, nv = 36), float64. Rows:

* ``1 process``: one process, one CPU device, ``devices="all"`` (= that device);
* ``2 processes, local parts``: two processes (`jax.distributed`, gloo), one CPU device
  each, each passing its own part and getting its part back (``devices="all"``), the
  recipe of docs/scaling-out.md; a call includes the all-gather of the part sizes;
* ``2 processes, global arrays``: the same with global `jax.Array` s in and out;
* ``1 process, 2 devices``: the peer on one machine, one process with the CPU split in
  two devices (``jax_num_cpu_devices``), the whole ``2 x batch`` in one call.

A call's time is the minimum over ``--repeats`` calls (each call synchronised with
`jax.block_until_ready`; with two processes the slower process's time); the per-sample
time divides it by the samples of the call (all processes). Ideal weak scaling keeps the
time per call and halves the per-sample time. On a machine shared with other jobs the
times are noisy: the load average is recorded with them.

Usage (from the repository root):
    PYTHONPATH=. python benchmarks/bench_multihost.py
    PYTHONPATH=. python benchmarks/bench_multihost.py --batch 4096 --repeats 20
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_WORKER = r"""
import json, sys, time
import jax
mode, pid, nproc, port, batch, repeats = sys.argv[1], *map(int, sys.argv[2:4]), sys.argv[4], \
    *map(int, sys.argv[5:7])
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_num_cpu_devices", 2 if mode == "two_devices" else 1)
if nproc > 1:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=nproc, process_id=pid,
                               initialization_timeout=120)
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import jaxrbd

model = jaxrbd.models.humanoid()
n = batch * (2 if mode == "two_devices" else 1)
k = jax.random.split(jax.random.fold_in(jax.random.key(0), pid), 3)
Q = np.asarray(jax.vmap(lambda kk: jaxrbd.random_configuration(model, kk))(
    jax.random.split(k[0], n)))
V, W = (np.asarray(jax.random.normal(kk, (n, model.nv))) for kk in k[1:])
args = (Q, V, W)
if mode == "global":
    rows = NamedSharding(Mesh(np.asarray(jax.devices()), ("batch",)), P("batch"))
    args = tuple(jax.make_array_from_process_local_data(rows, x) for x in args)
else:
    args = tuple(jnp.asarray(x) for x in args)
fd = lambda: jaxrbd.batched.forward_dynamics(model, *args, devices="all")
jax.block_until_ready(fd())  # compile
times = []
for _ in range(repeats):
    if nproc > 1:
        multihost_utils.sync_global_devices("start")
    t0 = time.perf_counter()
    jax.block_until_ready(fd())
    times.append(time.perf_counter() - t0)
print(json.dumps({"times": times, "samples": n, "devices": len(jax.devices())}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(mode: str, nproc: int, batch: int, repeats: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("XLA_FLAGS", None)
    port = str(_free_port())
    procs = [subprocess.Popen(
        [sys.executable, "-c", _WORKER, mode, str(i), str(nproc), port, str(batch),
         str(repeats)], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for i in range(nproc)]
    outs = [p.communicate(timeout=900) for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError("\n".join(e[-3000:] for _, e in outs))
    res = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    # the call ends when the slower process ends: per repeat, the max over processes
    per_call = [max(r["times"][i] for r in res) for i in range(repeats)]
    samples = sum(r["samples"] for r in res)
    return {"processes": nproc, "devices": res[0]["devices"], "samples_per_call": samples,
            "call_s": min(per_call), "per_sample_s": min(per_call) / samples}


def main() -> None:
    sys.path.insert(0, str(HERE))
    import _common as C

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2048, help="samples per process")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", default=str(HERE / "results" / "multihost.json"))
    args = parser.parse_args()
    setups = [("1 process", "local", 1), ("2 processes, local parts", "local", 2),
              ("2 processes, global arrays", "global", 2),
              ("1 process, 2 devices", "two_devices", 1)]
    rows, load = [], []
    for name, mode, nproc in setups:
        load.append(C.load_average())
        t0 = time.perf_counter()
        row = {"setup": name, **_run(mode, nproc, args.batch, args.repeats)}
        row["run_s"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
    base = rows[0]["call_s"]  # twice the samples in the same time is 1.0
    for row in rows:
        twice = row["samples_per_call"] == 2 * args.batch
        row["weak_scaling_efficiency"] = base / row["call_s"] if twice else None
    C.print_table(rows, [
        ("setup", "setup", str),
        ("samples/call", "samples_per_call", str),
        ("time/call", "call_s", C.fmt_time),
        ("time/sample", "per_sample_s", C.fmt_time),
        ("weak eff.", "weak_scaling_efficiency", lambda x: "-" if x is None else f"{x:.2f}"),
    ])
    meta = C.machine_metadata()
    meta["machine"]["shared"] = ("a 2-core VM shared with other jobs: times are noisy; "
                                 "see the load averages")
    meta["load_avg_1min_per_setup"] = load
    C.write_json(args.out, rows, meta, model="humanoid (nq 37, nv 36), float64",
                 batch_per_process=args.batch, repeats=args.repeats)
    print(f"wrote {args.out} ({meta['machine']['cpu']}, load {load})")


if __name__ == "__main__":
    main()
