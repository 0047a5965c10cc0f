"""Integrators and rollouts: convergence orders, manifold and energy behaviour, the policy
form, batching and sharding, gradient checkpointing, and errors.

Compilation dominates: every rollout here runs through a few module-level jitted functions
(16 steps per call, `dt` and the damping coefficient traced), called repeatedly from
Python for longer horizons, so each (function, model, integrator) compiles once.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import JIT, ZOO, assert_allclose, quaternion_blocks

import jaxrbd
from jaxrbd._integrators import rollout_batched
from jaxrbd.spatial import quat_to_rotation

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 16  # steps per jitted call


@functools.cache
def pendulum():
    """RBDL's triple pendulum with ball joints: three quaternions, nq = 12, nv = 9."""
    return jaxrbd.models.triple_pendulum("spherical")


def _damping(c):
    return lambda model, q, qd: -c * qd


@functools.partial(jax.jit, static_argnames="integrator")
def _chunk(model, q0, qd0, tau_seq, dt, c, integrator):
    """CHUNK steps with tau_seq (CHUNK, nv) and a joint damper ``-c qd`` as a force element."""
    return jaxrbd.rollout(model, q0, qd0, tau_seq, dt, integrator, forces=[_damping(c)])


def simulate(model, q0, qd0, dt, n, integrator, c=0.0, tau=None):
    """``n`` steps (a multiple of CHUNK) through `_chunk`; trajectories ``(n + 1, ...)``."""
    assert n % CHUNK == 0
    tau = jnp.zeros((n, model.nv)) if tau is None else tau
    qs, qds = [q0[None]], [qd0[None]]
    q, qd = q0, qd0
    for k in range(0, n, CHUNK):
        a, b = _chunk(model, q, qd, tau[k : k + CHUNK], dt, c, integrator)
        qs.append(a[1:])
        qds.append(b[1:])
        q, qd = a[-1], b[-1]
    return jnp.concatenate(qs), jnp.concatenate(qds)


def state_error(model, a, b):
    """Distance between two states ``(q, qd)`` on the manifold (max norm)."""
    dq = JIT["difference"](model, b[0], a[0])
    return float(max(jnp.max(jnp.abs(dq)), jnp.max(jnp.abs(a[1] - b[1]))))


@jax.jit
def energy(model, qs, qds):
    """Total energy ``T + V`` [J] along a trajectory."""
    T = jax.vmap(jaxrbd.kinetic_energy, in_axes=(None, 0, 0))(model, qs, qds)
    return T + jax.vmap(jaxrbd.potential_energy, in_axes=(None, 0))(model, qs)


def initial_state(model, seed, scale=1.0):
    kq, kv = jax.random.split(jax.random.key(seed))
    q0 = JIT["random_configuration"](model, kq)
    return q0, jax.random.uniform(kv, (model.nv,), model.dtype, -scale, scale)


# ----------------------------------------------------------------------------- accuracy


def test_convergence_orders_on_quaternion_pendulum():
    """Global error at T = 0.5 s against a fine RK4 run: explicit Euler is first order,
    RK4 (CF4 on the quaternions) fourth order. (Semi-implicit Euler's update is checked in
    closed form in `test_step_matches_closed_forms_with_custom_dynamics`.)"""
    model = pendulum()
    q0, qd0 = initial_state(model, 1)
    T = 0.5
    ref = simulate(model, q0, qd0, T / 1024, 1024, "rk4")
    ref = (ref[0][-1], ref[1][-1])

    def order(integrator, n):
        errs = []
        for k in (n, 2 * n):
            qs, qds = simulate(model, q0, qd0, T / k, k, integrator)
            errs.append(state_error(model, (qs[-1], qds[-1]), ref))
        return np.log2(errs[0] / errs[1]), errs

    p, errs = order("euler", 256)
    assert 0.95 < p < 1.05, (p, errs)
    p, errs = order("rk4", 64)
    # measured 3.94 (errors 1.1e-7 -> 7.2e-9); the reference's own error is ~2e-12
    assert 3.8 < p < 4.2, (p, errs)
    assert errs[1] < 1e-7


def test_rk4_conserves_energy_on_pendulum():
    """Conservative triple pendulum, 2 s at 1 ms: |E(t) - E(0)| / |E(0)| stays below 1e-9
    (measured ~1e-11; explicit Euler drifts by ~1e-2 over the same run)."""
    model = pendulum()
    q0, qd0 = initial_state(model, 2)
    qs, qds = simulate(model, q0, qd0, 1e-3, 2048, "rk4")
    E = np.asarray(energy(model, qs, qds))
    drift = np.max(np.abs(E - E[0])) / abs(E[0])
    assert drift < 1e-9, drift
    qs, qds = simulate(model, q0, qd0, 1e-3, 2048, "euler")
    E = np.asarray(energy(model, qs, qds))
    # the contrast that makes the bound mean something
    assert np.max(np.abs(E - E[0])) / abs(E[0]) > 1e-4


def test_humanoid_quaternion_stays_unit_and_energy():
    """Free-floating humanoid (free base + 30 revolute joints) in gravity, RK4, 0.4 s at
    2 ms from random velocities: the base quaternion stays unit to 1e-13, the conservative
    run keeps relative energy drift below 1e-6 (measured ~1e-9), and a damped run
    (dampers -0.02 qd on every DoF, base included) never gains energy."""
    model = ZOO["humanoid"]
    q0, qd0 = initial_state(model, 3)
    (blk,) = quaternion_blocks(model)
    qs, qds = simulate(model, q0, qd0, 2e-3, 192, "rk4")
    norms = np.linalg.norm(np.asarray(qs[:, blk]), axis=1)
    assert np.max(np.abs(norms - 1.0)) < 1e-13
    E = np.asarray(energy(model, qs, qds))
    assert np.max(np.abs(E - E[0])) / abs(E[0]) < 1e-6
    # the base did move: the test is not vacuous
    assert float(jnp.max(jnp.abs(JIT["difference"](model, qs[0], qs[-1])))) > 0.1

    qs, qds = simulate(model, q0, qd0, 2e-3, 96, "rk4", c=0.02)
    E = np.asarray(energy(model, qs, qds))
    assert np.all(np.diff(E) <= 1e-12 * abs(E[0])), np.max(np.diff(E))
    assert E[-1] < E[0] - 1e-3


def test_step_matches_closed_forms_with_custom_dynamics():
    """`dynamics` and `forces` plug in: with qdd = tau + f (a unit point mass per DoF)
    RK4 and semi-implicit Euler are exact / known in closed form, and on a free body with
    zero acceleration every integrator follows the exponential map exactly."""
    model = jaxrbd.models.chain(2)
    q, qd, tau = jnp.array([0.3, -0.2]), jnp.array([1.0, 2.0]), jnp.array([0.5, -1.0])
    push = jnp.array([0.25, 0.5])
    kw = {"forces": [lambda m, q, qd: push], "dynamics": lambda m, q, qd, tau: tau}
    h = 0.1
    a = tau + push
    q1, qd1 = jaxrbd.step(model, q, qd, tau, h, "rk4", **kw)
    assert_allclose(q1, q + h * qd + 0.5 * h * h * a, rtol=1e-15, atol=1e-15, name="rk4 q")
    assert_allclose(qd1, qd + h * a, rtol=1e-15, atol=1e-15, name="rk4 qd")
    q1, qd1 = jaxrbd.step(model, q, qd, tau, h, "semi_implicit_euler", **kw)
    assert_allclose(q1, q + h * (qd + h * a), rtol=1e-15, atol=1e-15, name="sie q")
    q1, qd1 = jaxrbd.step(model, q, qd, tau, h, "euler", **kw)
    assert_allclose(q1, q + h * qd, rtol=1e-15, atol=1e-15, name="euler q")
    assert_allclose(qd1, qd + h * a, rtol=1e-15, atol=1e-15, name="euler qd")

    body = ZOO["mixed"]  # free base, ball joint, plain joints
    q0, v = initial_state(body, 4)
    still = {"dynamics": lambda m, q, qd, tau: jnp.zeros(m.nv)}
    q1, qd1 = jaxrbd.step(body, q0, v, jnp.zeros(body.nv), 0.3, "rk4", **still)
    assert_allclose(q1, JIT["integrate"](body, q0, v, 0.3), rtol=1e-13, atol=1e-13,
                    name="rk4 exp map")
    # the Euler methods step a free joint in coordinates frozen at the start of the step:
    # its origin moves on the straight line p + h R v_lin, the rest as `integrate`, and
    # the linear velocity it returns is the frozen one turned into the new body frame
    h = 0.3
    b = next(b for b in range(1, body.nbodies) if body.joint_kind[b] == "free")
    i, j = body.q_start[b], body.v_start[b]
    R0 = quat_to_rotation(q0[i + 3:i + 7])
    for integrator in ("euler", "semi_implicit_euler"):
        q1, qd1 = jaxrbd.step(body, q0, v, jnp.zeros(body.nv), h, integrator, **still)
        frozen = v.at[j + 3:j + 6].add(h * jnp.cross(v[j:j + 3], v[j + 3:j + 6]))
        moving = frozen if integrator == "semi_implicit_euler" else v
        want = JIT["integrate"](body, q0, moving, h)
        want = want.at[i:i + 3].set(q0[i:i + 3] + h * R0 @ moving[j + 3:j + 6])
        assert_allclose(q1, want, rtol=1e-13, atol=1e-13, name=f"{integrator} straight")
        R1 = quat_to_rotation(q1[i + 3:i + 7])
        assert_allclose(R1 @ qd1[j + 3:j + 6], R0 @ frozen[j + 3:j + 6], rtol=1e-13,
                        atol=1e-13, name=f"{integrator} world velocity")


# ----------------------------------------------------------------------------- forms and batching


def test_policy_form_equals_tau_seq_form():
    model = pendulum()
    q0, qd0 = initial_state(model, 5)
    dt, phase = 2e-3, jnp.linspace(0.0, 1.0, model.nv)

    @jax.jit
    def closed_loop(model, q0, qd0, dt):
        policy = lambda t, q, qd: jnp.sin(3.0 * t + phase)
        return jaxrbd.rollout(model, q0, qd0, None, dt, "euler", n_steps=CHUNK, policy=policy,
                              forces=[_damping(0.0)])

    t = jnp.arange(CHUNK) * dt
    tau_seq = jnp.sin(3.0 * t[:, None] + phase[None, :])
    a = closed_loop(model, q0, qd0, dt)
    b = _chunk(model, q0, qd0, tau_seq, dt, 0.0, "euler")
    for x, y, name in zip(a, b, ("qs", "qds")):
        assert_allclose(x, y, rtol=1e-14, atol=1e-14, name=name)


def _batch(model, B, seed):
    kq, kv, kt = jax.random.split(jax.random.key(seed), 3)
    Q0 = jax.vmap(JIT["random_configuration"], in_axes=(None, 0))(model, jax.random.split(kq, B))
    QD0 = jax.random.uniform(kv, (B, model.nv), model.dtype, -1.0, 1.0)
    TAU = jax.random.uniform(kt, (B, CHUNK, model.nv), model.dtype, -1.0, 1.0)
    return Q0, QD0, TAU


def test_vmap_and_batched_rollout_equal_a_loop():
    """`jax.vmap(rollout)` and the blocked batched rollout (here 5 samples in blocks of 2,
    so padded to 6) equal one rollout per sample."""
    model = pendulum()
    Q0, QD0, TAU = _batch(model, 5, 6)
    loop = [_chunk(model, Q0[i], QD0[i], TAU[i], 1e-3, 0.0, "euler") for i in range(5)]
    loop = tuple(jnp.stack([r[k] for r in loop]) for k in range(2))
    one = lambda q0, qd0, tau: jaxrbd.rollout(
        model, q0, qd0, tau, 1e-3, "euler", forces=[_damping(0.0)])
    vm = jax.jit(jax.vmap(one))(Q0, QD0, TAU)
    batched = jax.jit(
        lambda m, *a: rollout_batched(m, *a, 1e-3, "euler", forces=[_damping(0.0)], chunk=2)
    )(model, Q0, QD0, TAU)
    for got, how in ((vm, "vmap"), (batched, "batched")):
        assert got[0].shape == (5, CHUNK + 1, model.nq) and got[1].shape == (5, CHUNK + 1, model.nv)
        for x, y, name in zip(got, loop, ("qs", "qds")):
            assert_allclose(x, y, rtol=1e-13, atol=1e-13, name=f"{how} {name}")


_SHARDED = textwrap.dedent(
    """
    import json, sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np
    import jaxrbd
    assert len(jax.devices()) == 4, jax.devices()
    data = np.load(sys.argv[1])
    model = jaxrbd.models.triple_pendulum("spherical")
    run = jax.jit(lambda Q0, QD0, TAU: jaxrbd.batched.rollout(model, Q0, QD0, TAU, 1e-3, "euler"))
    # batch 6 on 4 devices: padded to 8, 2 samples per device
    qs, qds = run(data["Q0"], data["QD0"], data["TAU"])
    np.savez(sys.argv[2], qs=qs, qds=qds)
    print(json.dumps({"devices": len(qs.sharding.device_set)}))
    """
)


@pytest.mark.slow
def test_sharded_rollout_equals_unsharded(tmp_path):
    """4 host devices (a subprocess: this process already has one): a batch of 6, padded to
    8 and split 2 per device, equals the unsharded in-process rollouts."""
    model = pendulum()
    Q0, QD0, TAU = _batch(model, 6, 7)
    np.savez(tmp_path / "in.npz", Q0=Q0, QD0=QD0, TAU=TAU)
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    env["XLA_FLAGS"] = flags.strip()
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", _SHARDED, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        check=False, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["devices"] == 4, info
    out = np.load(tmp_path / "out.npz")
    assert out["qs"].shape == (6, CHUNK + 1, model.nq)
    for i in range(6):
        qs, qds = _chunk(model, Q0[i], QD0[i], TAU[i], 1e-3, 0.0, "euler")
        assert_allclose(out["qs"][i], qs, rtol=1e-13, atol=1e-13, name=f"sample {i} qs")
        assert_allclose(out["qds"][i], qds, rtol=1e-13, atol=1e-13, name=f"sample {i} qds")


# ----------------------------------------------------------------------------- gradients and memory

#: Temp-memory budget of the reverse-mode gradient of 10^4 semi-implicit Euler steps of a
#: pendulum (`models.chain(1)`) with checkpoint=128 (79 segments, the last padded with 112
#: no-op steps), differentiated through the recursions (``derivatives="ad"``, whose
#: residuals per step are what checkpointing trades for recomputation; the analytic
#: rules keep only the small derivative matrices). Measured (XLA:CPU memory_analysis,
#: float64): 0.81 MiB with checkpointing, 32 MiB without. The documented budget: 4 MiB,
#: and at least 20x below the plain scan.
CHECKPOINT_BUDGET_BYTES = 4 * 2**20
N_LONG = 10_000


def _fd_ad(model, q, qd, tau):
    return jaxrbd.forward_dynamics(model, q, qd, tau, derivatives="ad")


def _long_loss(model, checkpoint):
    def loss(tau_seq, q0, qd0):
        qs, qds = jaxrbd.rollout(model, q0, qd0, tau_seq, 1e-4, "semi_implicit_euler",
                                 checkpoint=checkpoint, dynamics=_fd_ad)
        return jnp.sum(qs[-1] ** 2) + jnp.sum(qds[-1] ** 2) + 1e-3 * jnp.sum(qs[:, 0])

    return loss


def test_checkpointed_gradient_of_long_rollout():
    """Reverse mode through 10^4 steps: checkpointing cuts the temp memory below the
    documented budget, and the gradient equals the plain one and finite differences."""
    model = jaxrbd.models.chain(1)
    q0, qd0 = jnp.array([0.4]), jnp.array([0.5])
    tau = 0.1 * jnp.sin(jnp.arange(N_LONG * 1.0).reshape(N_LONG, 1) * 1e-3)
    args = (tau, q0, qd0)
    grads, temp = {}, {}
    for ck in (None, 128):
        grad = jax.jit(jax.grad(_long_loss(model, ck), argnums=(0, 1, 2)))
        compiled = grad.lower(*args).compile()
        temp[ck] = compiled.memory_analysis().temp_size_in_bytes
        grads[ck] = compiled(*args)
    assert temp[128] < CHECKPOINT_BUDGET_BYTES, temp
    assert temp[128] * 20 < temp[None], temp
    for a, b, name in zip(grads[128], grads[None], ("tau", "q0", "qd0")):
        assert_allclose(a, b, rtol=1e-12, atol=1e-14, name=f"d loss / d {name}")

    loss = jax.jit(_long_loss(model, None))
    rng = np.random.default_rng(0)
    for k in range(2):
        d = tuple(jnp.asarray(rng.standard_normal(x.shape)) for x in args)
        eps = 1e-6
        plus = loss(*(x + eps * dx for x, dx in zip(args, d)))
        minus = loss(*(x - eps * dx for x, dx in zip(args, d)))
        fd = float(plus - minus) / (2 * eps)
        ad = sum(float(jnp.vdot(g, dx)) for g, dx in zip(grads[128], d))
        assert abs(fd - ad) <= 1e-6 * max(1.0, abs(ad)), (k, fd, ad)


# ----------------------------------------------------------------------------- errors


def test_errors():
    model = pendulum()
    q0, qd0 = jaxrbd.neutral_configuration(model), jnp.zeros(model.nv)
    tau = jnp.zeros((4, model.nv))
    R = jaxrbd.rollout
    with pytest.raises(ValueError, match=r"q0 has shape \(9,\), expected \(12,\)"):
        R(model, jnp.zeros(9), qd0, tau, 1e-3)
    with pytest.raises(ValueError, match=r"qd0 has shape"):
        R(model, q0, jnp.zeros(12), tau, 1e-3)
    with pytest.raises(ValueError, match=r"tau_seq has shape \(9,\), expected \(n_steps, 9\)"):
        R(model, q0, qd0, jnp.zeros(9), 1e-3)
    with pytest.raises(ValueError, match="dt has shape"):
        R(model, q0, qd0, tau, jnp.ones(2))
    for bad in (0.0, -1e-3, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="dt is .*expected a finite time step > 0"):
            R(model, q0, qd0, tau, bad)
    with pytest.raises(ValueError, match="integrator 'rk45' is unknown"):
        R(model, q0, qd0, tau, 1e-3, "rk45")
    with pytest.raises(ValueError, match="exactly one of tau_seq .* got both"):
        R(model, q0, qd0, tau, 1e-3, n_steps=4, policy=lambda t, q, qd: qd)
    with pytest.raises(ValueError, match="exactly one of tau_seq .* got neither"):
        R(model, q0, qd0, None, 1e-3, n_steps=4)
    with pytest.raises(ValueError, match="n_steps is required"):
        R(model, q0, qd0, None, 1e-3, policy=lambda t, q, qd: qd)
    with pytest.raises(ValueError, match="n_steps is 5 but tau_seq has 4 steps"):
        R(model, q0, qd0, tau, 1e-3, n_steps=5)
    with pytest.raises(ValueError, match="n_steps is -1"):
        R(model, q0, qd0, None, 1e-3, n_steps=-1, policy=lambda t, q, qd: qd)
    with pytest.raises(ValueError, match="checkpoint is 0"):
        R(model, q0, qd0, tau, 1e-3, checkpoint=0)
    with pytest.raises(TypeError, match="policy is a int"):
        R(model, q0, qd0, None, 1e-3, n_steps=4, policy=3)
    with pytest.raises(TypeError, match=r"forces\[1\] is a str"):
        R(model, q0, qd0, tau, 1e-3, forces=[_damping(1.0), "spring"])
    with pytest.raises(TypeError, match="dynamics is a float"):
        R(model, q0, qd0, tau, 1e-3, dynamics=1.0)
    with pytest.raises(ValueError, match=r"policy returned shape \(3,\), expected \(9,\)"):
        R(model, q0, qd0, None, 1e-3, n_steps=4, policy=lambda t, q, qd: jnp.zeros(3))
    with pytest.raises(ValueError, match=r"forces\[0\] returned shape \(12,\)"):
        R(model, q0, qd0, tau, 1e-3, forces=[lambda m, q, qd: q])
    with pytest.raises(ValueError, match=r"dynamics returned shape \(\)"):
        R(model, q0, qd0, tau, 1e-3, dynamics=lambda m, q, qd, tau: jnp.sum(tau))
    with pytest.raises(ValueError, match=r"tau has shape \(8,\)"):
        jaxrbd.step(model, q0, qd0, jnp.zeros(8), 1e-3)
    with pytest.raises(ValueError, match="integrator 'midpoint' is unknown"):
        jaxrbd.step(model, q0, qd0, qd0, 1e-3, "midpoint")

    B = jaxrbd.batched.rollout
    Q0, QD0 = jnp.broadcast_to(q0, (3, model.nq)), jnp.zeros((3, model.nv))
    with pytest.raises(ValueError, match=r"Q0 has shape \(12,\), expected \(batch, 12\)"):
        B(model, q0, QD0, jnp.zeros((3, 4, 9)), 1e-3)
    with pytest.raises(ValueError, match=r"TAU_SEQ has shape \(4, 9\), expected \(batch, n_"):
        B(model, Q0, QD0, tau, 1e-3)
    with pytest.raises(ValueError, match="batch sizes differ"):
        B(model, Q0, QD0[:2], jnp.zeros((3, 4, 9)), 1e-3)
    with pytest.raises(ValueError, match="exactly one of TAU_SEQ"):
        B(model, Q0, QD0, None, 1e-3, n_steps=4)
    with pytest.raises(ValueError, match="non-empty sequence of jax devices"):
        B(model, Q0, QD0, jnp.zeros((3, 4, 9)), 1e-3, devices=[])
    with pytest.raises(ValueError, match="dt is"):
        B(model, Q0, QD0, jnp.zeros((3, 4, 9)), -1.0)


def test_move_derivatives_finite_and_exact_at_rest():
    """At zero velocity the exponential maps run their series branch: the derivatives of
    a step's move must stay finite there (the branch not taken must not produce 0 * inf)
    and equal central differences, for free and spherical joints."""
    from helpers import random_tree

    from jaxrbd._configuration import move

    model = random_tree(7, 3, kinds=["free", "revolute", "spherical"], parents=[0, 1, 2])
    q = jaxrbd.random_configuration(model, jax.random.PRNGKey(1))
    v = jnp.zeros(model.nv)
    J = jax.jacfwd(lambda v_: move(model, q, v_, 0.1))(v)
    Jr = jax.jacrev(lambda v_: move(model, q, v_, 0.1))(v)
    assert np.all(np.isfinite(J)) and np.all(np.isfinite(Jr))
    assert_allclose(Jr, J, atol=1e-14)
    h = 1e-6
    fd = jnp.stack([(move(model, q, v.at[i].set(h), 0.1) - move(model, q, v.at[i].set(-h), 0.1))
                    / (2 * h) for i in range(model.nv)], axis=1)
    assert_allclose(J, fd, atol=1e-8)
