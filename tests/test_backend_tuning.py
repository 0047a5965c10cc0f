"""Per-backend tuning of the batched kernels (`jaxrbd._vmap.on_cpu`).

On the CPU the batched kernels cut the batch into cache-sized blocks (`_vmap.CHUNK`) run
one after the other, step one tree node at a time, and keep LAPACK calls under XLA:CPU's
threading threshold (`jaxrbd._linalg`). Off the CPU they take the whole batch at once and
step level by level. CI has no GPU, so these tests make JAX report the default backend they need
(``jax.default_backend`` patched to ``"cpu"`` or ``"gpu"`` while tracing, the arrays on
whatever device there is) and check that each path is the one traced and that the
accelerator path gives the CPU path's numbers. They pass on a GPU machine too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose

import jaxrbd
from jaxrbd import _common, _linalg, _tree, _vmap

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
    body = _tree.schedule(model.node_parent, "body").steps
    level = _tree.schedule(model.node_parent, "level").steps
    assert level.shape[0] < body.shape[0]
    _report(monkeypatch, "cpu")
    assert np.array_equal(_common.sched(model, B=4096).steps, body)
    assert np.array_equal(_common.sched(model, B=1).steps, level)
    _report(monkeypatch, "gpu")
    assert np.array_equal(_common.sched(model, B=4096).steps, level)
    assert np.array_equal(_common.sched(model, B=1).steps, level)
    # an explicit traversal is kept on every backend
    assert np.array_equal(_common.sched(model.with_traversal("body"), B=4096).steps, body)


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
