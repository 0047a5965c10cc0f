"""Per-backend tuning of the batched kernels, decided in `jaxrbd._core.backend`.

On the CPU the batched kernels cut the batch into cache-sized blocks (`_backend.CHUNK`) run
one after the other, step one tree node at a time, and keep LAPACK calls under XLA:CPU's
threading threshold (`jaxrbd._core.linalg`). Off the CPU they take the whole batch at once and
step level by level. CI has no GPU, so these tests make JAX report the default backend they need
(``jax.default_backend`` patched to ``"cpu"`` or ``"gpu"`` while tracing, the arrays on
whatever device there is) and check that each path is the one traced and that the
accelerator path gives the CPU path's numbers; an explicit device and `jax.default_device`
take precedence over the default backend. They pass on a GPU machine too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose

import jaxrbd
from jaxrbd import _jit
from jaxrbd._core import backend as _backend
from jaxrbd._core import linalg as _linalg
from jaxrbd._core import native_vmap as _vmap
from jaxrbd._core import nodes as _nodes
from jaxrbd._core.topology import topology

B = 70  # more than two CPU blocks of 32, with padding


def _report(monkeypatch, backend):
    monkeypatch.setattr(jax, "default_backend", lambda: backend)


@pytest.fixture
def cpu_backend(monkeypatch):
    """Trace as if the default backend were the CPU (it is, in CI)."""
    _report(monkeypatch, "cpu")


@pytest.fixture
def gpu_backend(monkeypatch):
    """Trace as if the default backend were a GPU; fresh traces before and after.

    Tests that call `jaxrbd.jit` wrappers under it request `cpu_results` first: that
    builds the wrappers (whose CPU compiler options are fixed on first use) outside it.
    """
    jax.clear_caches()
    _report(monkeypatch, "gpu")
    yield
    monkeypatch.undo()
    jax.clear_caches()


def _block_sizes(n):
    seen = []

    def fn(x):
        seen.append(x.shape[-1])
        return x * 2.0

    x = jnp.arange(3.0 * n).reshape(3, n)
    assert_allclose(_vmap.blocked(fn, (x,)), 2.0 * x, rtol=0, name="blocked output")
    return seen


def test_cpu_blocks_the_batch(cpu_backend):
    assert _vmap.on_cpu() and _vmap.default_chunk() == _vmap.CHUNK
    assert _block_sizes(B) == [_vmap.CHUNK]  # traced once per block shape, by lax.map


def test_accelerator_takes_the_whole_batch(gpu_backend):
    assert not _vmap.on_cpu()
    assert _vmap.default_chunk() is None and _vmap.default_chunk(128) is None
    assert _block_sizes(B) == [B]


def test_auto_traversal_per_backend(robots, monkeypatch):
    model = robots["talos"].model
    body = topology(model).schedule("body").steps
    level = topology(model).schedule("level").steps
    assert level.shape[0] < body.shape[0]
    _report(monkeypatch, "cpu")
    assert np.array_equal(_nodes.sched(model, B=4096).steps, body)
    assert np.array_equal(_nodes.sched(model, B=1).steps, level)
    _report(monkeypatch, "gpu")
    assert np.array_equal(_nodes.sched(model, B=4096).steps, level)
    assert np.array_equal(_nodes.sched(model, B=1).steps, level)
    # an explicit traversal is kept on every backend
    assert np.array_equal(_nodes.sched(model.with_traversal("body"), B=4096).steps, body)


def _lapack_jaxpr():
    M = np.random.default_rng(1).standard_normal((600, 30, 30))
    A = jnp.asarray(M @ np.swapaxes(M, -1, -2) + 30 * np.eye(30))
    return str(jax.make_jaxpr(jax.vmap(_linalg.cholesky))(A))


def test_lapack_blocks_only_on_the_cpu(monkeypatch):
    _report(monkeypatch, "cpu")
    assert "scan" in _lapack_jaxpr()  # lax.map over blocks below the threading threshold
    _report(monkeypatch, "gpu")
    text = _lapack_jaxpr()
    assert "cholesky" in text and "scan" not in text


def _states(model, seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), B + 2)
    q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(keys[:B])
    qd = jax.random.normal(keys[B], (B, model.nv), model.dtype)
    tau = jax.random.normal(keys[B + 1], (B, model.nv), model.dtype)
    return q, qd, tau


def _batched_results(model, q, qd, tau):
    return {
        "forward_dynamics": jax.vmap(jaxrbd.forward_dynamics, (None, 0, 0, 0))(model, q, qd, tau),
        "inverse_dynamics": jaxrbd.batched.inverse_dynamics(model, q, qd, tau),
        "mass_matrix": jaxrbd.batched.mass_matrix(model, q),
        "forward_dynamics_derivatives": jaxrbd.batched.forward_dynamics_derivatives(
            model, q, qd, tau
        ),
    }


@pytest.fixture(scope="module")
def cpu_results(robots):
    """The CPU path's results (traced as on the CPU, also on a GPU machine)."""
    model = robots["solo12"].model
    args = _states(model)
    with pytest.MonkeyPatch.context() as mp:
        jax.clear_caches()
        _report(mp, "cpu")
        out = _batched_results(model, *args)
    jax.clear_caches()
    return model, args, out


def test_accelerator_path_gives_the_cpu_numbers(cpu_results, gpu_backend):
    model, args, expected = cpu_results
    got = _batched_results(model, *args)
    for name, want in expected.items():
        for i, (g, w) in enumerate(zip(jax.tree_util.tree_leaves(got[name]),
                                       jax.tree_util.tree_leaves(want))):
            assert g.shape == w.shape, name
            scale = max(1.0, float(jnp.max(jnp.abs(w))))
            assert_allclose(g, w, rtol=0, atol=1e-10 * scale, name=f"{name}[{i}]")


# ------------------------------------------------------------------ one module decides


def test_explicit_device_wins_over_the_default_backend(monkeypatch):
    """`jaxrbd._core.backend` follows an explicit device or platform name first."""
    cpu = jax.devices("cpu")[0]
    _report(monkeypatch, "gpu")
    assert _backend.platform(cpu) == "cpu" and _backend.on_cpu("cpu")
    assert _backend.block_size(device=cpu) == _backend.CHUNK
    assert _backend.lapack_guard(cpu) and not _backend.lapack_guard()
    assert _backend.traversal("auto", 4096, device=cpu) == "body"
    assert _backend.traversal("auto", 4096, batch_width=2, device="cpu") == "level2"
    assert _backend.traversal("auto", 4096) == "level"
    _report(monkeypatch, "cpu")
    assert _backend.platform("cuda") == "gpu" and not _backend.on_cpu("gpu")
    assert _backend.block_size(device="gpu") is None
    assert _backend.compiler_options("gpu") == {}
    assert _backend.compiler_options(cpu) == jaxrbd.compiler_options()
    assert _backend.traversal("body", 4096, device="gpu") == "body"  # explicit: kept
    assert _backend.traversal("auto", 1, device="cpu") == "level"  # one state


def test_the_default_device_wins_over_the_default_backend(monkeypatch, robots):
    """Under `jax.default_device` the tuning follows that device, not the process default."""
    model = robots["talos"].model
    body = topology(model).schedule("body").steps
    _report(monkeypatch, "gpu")
    with jax.default_device(jax.devices("cpu")[0]):
        assert _backend.platform() == "cpu" and _vmap.default_chunk() == _vmap.CHUNK
        assert np.array_equal(_nodes.sched(model, B=4096).steps, body)
        assert "scan" in _lapack_jaxpr()
        assert jaxrbd.compiler_options() == _backend.compiler_options("cpu") != {}
    assert not _backend.on_cpu() and jaxrbd.compiler_options() == {}


def test_jit_options_follow_the_platform_of_each_call(monkeypatch):
    """`jaxrbd.jit` compiles once per platform, with that platform's options."""
    opts = jaxrbd.compiler_options()  # its one-off check compile, before the spy
    seen = []
    real = jax.jit

    def spy(fun, **kwargs):
        seen.append(kwargs.get("compiler_options"))
        return real(fun, **kwargs)

    monkeypatch.setattr(_jit.jax, "jit", spy)
    f = jaxrbd.jit(lambda x: 2 * x)
    assert float(f(1.0)) == 2.0 and seen == [opts or None]
    _report(monkeypatch, "gpu")  # the arrays stay on the CPU; only the options change
    assert float(f(1.0)) == 2.0 and seen[-1] is None and len(seen) == 2
    assert float(f(3.0)) == 6.0 and len(seen) == 2  # built once per platform


def test_sharded_rollout_blocks_follow_its_devices(monkeypatch):
    """`batched.rollout` sizes its blocks for the devices it is given, not for the default
    backend: the same numbers either way."""
    model = jaxrbd.models.chain(3)
    Q0 = jnp.zeros((B, model.nq)); QD0 = jnp.zeros((B, model.nv))
    TAU = jnp.ones((B, 4, model.nv))
    want = jaxrbd.batched.rollout(model, Q0, QD0, TAU, 1e-3, "euler")
    _report(monkeypatch, "gpu")
    got = jaxrbd.batched.rollout(model, Q0, QD0, TAU, 1e-3, "euler",
                                 devices=jax.devices("cpu"))
    for g, w in zip(got, want):
        assert_allclose(g, w, rtol=0, atol=0, name="rollout")
