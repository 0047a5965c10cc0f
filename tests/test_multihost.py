"""Two processes on one machine (`jax.distributed`, CPU devices, gloo collectives) run
`jaxrbd.batched` over a global mesh and give the single-process numbers.

Each process passes its own part of the batch (process 0 four samples, process 1 three:
the parts need not be equal) to `jaxrbd.batched.forward_dynamics` and
`jaxrbd.batched.rollout` with ``devices="all"``, and gets its part of the results back;
then both build global arrays of an identification data set, compute the regressor on
the global mesh and take one Levenberg-Marquardt step on log-Cholesky inertial
parameters whose normal equations are summed over the processes (``lax.psum`` in a
`jax.shard_map`). This process compares each with its own single-process result.

One small model (a 3-link chain) keeps the workers' compiles to a few seconds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose

import jaxrbd

ROOT = Path(__file__).resolve().parents[1]
PARTS = (4, 3)  # samples of process 0 and 1 (forward dynamics and rollout)
N_ID = 8  # identification samples, 4 per process
N_STEPS, DT = 5, 1e-3
# both workers together; they need ~20 CPU-seconds, far more wall time on a loaded machine
TIMEOUT_S = 600
LAM = 1.0  # Levenberg damping: (A + LAM I) has a condition number of ~2e3 here

# the identification step, shared by the workers and this process: the residual of one
# device's share, its normal equations summed over the mesh axis, one damped step
_LM = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    from jax.sharding import PartitionSpec as P
    import jaxrbd

    def normal_equations(model, theta, Y, TAU):
        def residual(theta):
            pi = model.inertia.at[1:].set(jaxrbd.from_log_cholesky(theta)).ravel()
            return (Y @ pi - TAU).ravel()

        r = residual(theta)
        J = jax.jacfwd(residual)(theta).reshape(r.shape[0], -1)
        return tuple(jax.lax.psum(x, "batch") for x in (J.T @ J, J.T @ r, r @ r))

    def lm_step(model, mesh, theta, Y, TAU, lam):
        eqs = jax.shard_map(lambda t, y, tau: normal_equations(model, t, y, tau), mesh=mesh,
                            in_specs=(P(), P("batch"), P("batch")), out_specs=P())
        A, g, cost = jax.jit(eqs)(theta, Y, TAU)
        A = A + lam * jnp.eye(A.shape[0])  # some parameters do not move the torques
        return theta - jnp.linalg.solve(A, g).reshape(theta.shape), cost
    """
)

_WORKER = _LM + textwrap.dedent(
    """
    import sys, json
    import numpy as np
    pid, port, data, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_num_cpu_devices", 1)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid,
                               initialization_timeout=300)
    from jax.sharding import Mesh, NamedSharding
    from jaxrbd import batched

    d = np.load(data)
    parts = [int(x) for x in d["parts"]]
    lo, hi = sum(parts[:pid]), sum(parts[:pid + 1])
    model = jaxrbd.models.chain(3)
    info = {"process_count": jax.process_count(), "devices": len(jax.devices()),
            "local_devices": len(jax.local_devices())}
    res = {}
    # this process's part of the batch in, its part of the results out
    qdd = batched.forward_dynamics(model, d["Q"][lo:hi], d["V"][lo:hi], d["W"][lo:hi],
                                   devices="all")
    info["fd_rows"], info["fd_local"] = qdd.shape[0], qdd.is_fully_addressable
    res["fd"] = np.asarray(qdd)
    QS, QDS = batched.rollout(model, d["Q"][lo:hi], d["V"][lo:hi], d["TAU"][lo:hi],
                              float(d["dt"]), "euler", devices="all")
    res["qs"], res["qds"] = np.asarray(QS), np.asarray(QDS)
    # global arrays in, global arrays out; the normal equations summed over processes
    mesh = Mesh(np.asarray(jax.devices()), ("batch",))
    rows = NamedSharding(mesh, P("batch"))
    n = d["Qid"].shape[0] // 2
    glob = [jax.make_array_from_process_local_data(rows, d[k][pid * n:(pid + 1) * n])
            for k in ("Qid", "QDid", "QDDid", "TAUid")]
    Y = batched.inverse_dynamics_regressor(model, *glob[:3], devices=mesh)
    info["Y_global"] = (not Y.is_fully_addressable, list(Y.shape))
    try:  # a global Q with this process's parts of QD, TAU
        batched.forward_dynamics(model, glob[0], d["QDid"][:n], d["QDDid"][:n], devices=mesh)
    except ValueError as e:
        info["mixed"] = str(e)
    theta1, cost = lm_step(model, mesh, jnp.asarray(d["theta0"]), Y, glob[3], float(d["lam"]))
    res["theta1"], res["cost"] = np.asarray(theta1), np.asarray(cost)
    np.savez(out, **res)
    print(json.dumps(info))
    """
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _data():
    model = jaxrbd.models.chain(3)
    B = sum(PARTS)
    k = jax.random.split(jax.random.key(7), 8)
    Q = jax.random.uniform(k[0], (B, model.nq), minval=-1.0, maxval=1.0)
    V, W = jax.random.normal(k[1], (B, model.nv)), jax.random.normal(k[2], (B, model.nv))
    TAU = 0.1 * jax.random.normal(k[3], (B, N_STEPS, model.nv))
    Qid = jax.random.uniform(k[4], (N_ID, model.nq), minval=-2.0, maxval=2.0)
    QDid, QDDid = (jax.random.normal(kk, (N_ID, model.nv)) for kk in k[5:7])
    TAUid = jaxrbd.batched.inverse_dynamics(model, Qid, QDid, QDDid)
    # the first guess: every body 30 % heavier, its centre of mass moved by 2 cm
    guess = jaxrbd.to_log_cholesky(model.inertia[1:])
    theta0 = guess.at[:, 0].add(0.5 * np.log(1.3)).at[:, 7].add(0.02)
    return {name: np.asarray(x) for name, x in dict(
        Q=Q, V=V, W=W, TAU=TAU, Qid=Qid, QDid=QDid, QDDid=QDDid, TAUid=TAUid, theta0=theta0,
        parts=np.asarray(PARTS), dt=np.asarray(DT), lam=np.asarray(LAM)).items()}


def _run_workers(tmp, data_path):
    """Both workers' outputs and printed facts; one retry if the port was taken."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # each process owns one CPU device: a device count in XLA_FLAGS would change that;
    # the suite's compile-time flags (tests/conftest.py) stay
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split()
                                if "xla_force_host_platform_device_count" not in f)
    script = tmp / "worker.py"
    script.write_text(_WORKER)
    for attempt in range(2):
        port = _free_port()
        procs = [subprocess.Popen(
            [sys.executable, str(script), str(i), str(port), str(data_path),
             str(tmp / f"out{i}.npz")],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(2)]
        results, deadline = [], time.monotonic() + TIMEOUT_S
        try:
            for p in procs:
                results.append(p.communicate(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            pytest.fail(f"the workers did not finish in {TIMEOUT_S} s (a loaded machine, or "
                        "a process that never reached the coordinator)")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        codes = [p.returncode for p in procs]
        if codes == [0, 0]:
            infos = [json.loads(o.strip().splitlines()[-1]) for o, _ in results]
            return [dict(np.load(tmp / f"out{i}.npz")) for i in range(2)], infos
        errors = "\n".join(e[-2000:] for _, e in results)
        if attempt == 0 and "ddress already in use" in errors:
            continue
        pytest.fail(f"the workers exited with {codes}:\n{errors}")


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multihost")
    data = _data()
    np.savez(tmp / "in.npz", **data)
    outs, infos = _run_workers(tmp, tmp / "in.npz")
    return data, outs, infos


def test_every_process_sees_the_global_mesh(two_processes):
    _, _, infos = two_processes
    for pid, info in enumerate(infos):
        assert info["process_count"] == 2 and info["devices"] == 2, info
        assert info["local_devices"] == 1, info
        # a process's part in, its part of the results out, on its own device
        assert info["fd_rows"] == PARTS[pid] and info["fd_local"], info
        assert info["Y_global"] == [True, [N_ID, 3, 40]], info
        assert "batch sizes differ" in info["mixed"], info


def test_forward_dynamics_and_rollout_equal_one_process(two_processes):
    """Against one process's call on the whole batch: to 1e-12. Not bit for bit: a
    vectorised kernel may round a sample differently in a batch of another size or in
    another program (one ulp seen in a sample of process 1's share, padded to four)."""
    data, outs, _ = two_processes
    model = jaxrbd.models.chain(3)
    B = jaxrbd.batched
    got = {k: np.concatenate([o[k] for o in outs]) for k in ("fd", "qs", "qds")}
    want = {"fd": B.forward_dynamics(model, data["Q"], data["V"], data["W"])}
    want["qs"], want["qds"] = B.rollout(model, data["Q"], data["V"], data["TAU"], DT, "euler",
                                        devices=None)
    for name in got:
        assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12, name=name)


def test_identification_step_equals_one_process(two_processes):
    """The summed normal equations differ from one process's sum only in the order of
    the additions: to 1e-12. The step lowers the cost."""
    from jax.sharding import Mesh

    ns = {}
    exec(_LM, ns)  # the workers' step, on this process's one device
    data, outs, _ = two_processes
    model = jaxrbd.models.chain(3)
    mesh = Mesh(np.asarray(jax.devices()[:1]), ("batch",))
    Y = jaxrbd.batched.inverse_dynamics_regressor(model, data["Qid"], data["QDid"],
                                                  data["QDDid"])
    theta1, cost0 = ns["lm_step"](model, mesh, jnp.asarray(data["theta0"]), Y,
                                  jnp.asarray(data["TAUid"]), LAM)
    for out in outs:
        assert_allclose(out["theta1"], theta1, rtol=1e-12, atol=1e-12, name="theta after LM")
        assert_allclose(out["cost"], cost0, rtol=1e-12, atol=0, name="cost")
    _, cost1 = ns["lm_step"](model, mesh, theta1, Y, jnp.asarray(data["TAUid"]), LAM)
    assert float(cost1) < 0.5 * float(cost0), (float(cost0), float(cost1))
