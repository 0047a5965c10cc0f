"""`jaxrbd.jit`: jax.jit with jaxrbd's XLA compiler options (same results, options merged)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrbd
from jaxrbd import _jit
from jaxrbd._core import backend as _backend


@pytest.fixture(scope="module")
def humanoid_batch():
    model = jaxrbd.models.humanoid()
    keys = jax.random.split(jax.random.key(3), 40)
    Q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(keys)
    rng = np.random.default_rng(3)
    QD = jnp.asarray(rng.standard_normal((40, model.nv)))
    TAU = jnp.asarray(rng.standard_normal((40, model.nv)))
    return model, Q, QD, TAU


def expected_options():
    extra = _backend.AVX512_COMPILER_OPTIONS if _backend.host_has_avx512() else {}
    return {**_backend.CPU_COMPILER_OPTIONS, **extra}


@pytest.mark.perf
def test_options_on_cpu():
    assert jax.default_backend() == "cpu"
    assert jaxrbd.compiler_options() == expected_options()


@pytest.mark.perf
def test_vector_width_follows_the_host(monkeypatch):
    _backend._supported.cache_clear()
    try:
        for has, width in ((True, 512), (False, None)):
            monkeypatch.setattr(_backend, "host_has_avx512", lambda has=has: has)
            opts = jaxrbd.compiler_options()
            assert opts.get("xla_cpu_prefer_vector_width") == width
            assert opts["xla_cpu_use_fusion_emitters"] is False
    finally:
        _backend._supported.cache_clear()


@pytest.mark.perf
def test_avx512_detection_reads_numpy():
    umath = pytest.importorskip("numpy._core._multiarray_umath")  # NumPy 2
    __cpu_features__ = umath.__cpu_features__
    assert _backend.host_has_avx512() == bool(__cpu_features__.get("AVX512F", False))


#: XLA's own default for the plain `jax.jit` side: tests/conftest.py turns the fusion
#: emitters off for the whole suite (compile time), which is jaxrbd's option itself.
XLA_DEFAULT = {"xla_cpu_use_fusion_emitters": True}


def test_same_results_as_jax_jit(humanoid_batch):
    model, Q, QD, TAU = humanoid_batch
    fd = jax.vmap(jaxrbd.forward_dynamics, in_axes=(None, 0, 0, 0))
    plain = jax.jit(fd, compiler_options=XLA_DEFAULT)(model, Q, QD, TAU)
    ours = jaxrbd.jit(fd)(model, Q, QD, TAU)
    np.testing.assert_allclose(ours, plain, rtol=1e-10, atol=1e-10)
    def loss(tau):
        return jnp.sum(jaxrbd.forward_dynamics(model, Q[0], QD[0], tau) ** 2)

    g, g_plain = jaxrbd.jit(jax.grad(loss)), jax.jit(jax.grad(loss), compiler_options=XLA_DEFAULT)
    np.testing.assert_allclose(g(TAU[0]), g_plain(TAU[0]), rtol=1e-9, atol=1e-9)


def test_jit_arguments_pass_through(humanoid_batch):
    model, Q, QD, TAU = humanoid_batch

    @jaxrbd.jit(static_argnames="integrator")
    def step(q, qd, tau, integrator):
        return jaxrbd.step(model, q, qd, tau, 1e-3, integrator=integrator)

    a = step(Q[0], QD[0], TAU[0], integrator="rk4")
    b = jaxrbd.step(model, Q[0], QD[0], TAU[0], 1e-3, integrator="rk4")
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)
    assert step.__name__ == "step"


def test_options_reach_jax_jit(monkeypatch):
    seen = {}
    real = jax.jit

    def spy(fun, **kwargs):
        seen.update(kwargs.get("compiler_options") or {})
        return real(fun, **kwargs)

    monkeypatch.setattr(_jit.jax, "jit", spy)
    assert float(jaxrbd.jit(lambda x: 2 * x)(1.0)) == 2.0
    assert seen == expected_options()  # jaxrbd's options by default
    seen.clear()
    f = jaxrbd.jit(lambda x: 2 * x, compiler_options={"xla_cpu_use_fusion_emitters": True})
    assert float(f(1.0)) == 2.0
    assert seen == {**expected_options(), "xla_cpu_use_fusion_emitters": True}  # the caller's win


def test_rejected_options_fall_back(monkeypatch):
    monkeypatch.setattr(_backend, "CPU_COMPILER_OPTIONS", {"xla_not_an_option": 1})
    _backend._supported.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="compiling with XLA's defaults"):
            assert jaxrbd.compiler_options() == {}
        assert float(jaxrbd.jit(lambda x: x + 1)(1.0)) == 2.0
    finally:
        _backend._supported.cache_clear()


def test_not_callable():
    with pytest.raises(TypeError, match="expects a callable"):
        jaxrbd.jit(3)


def test_nested_in_other_traces(humanoid_batch):
    """Inside jax.jit / vmap / grad a jaxrbd.jit function runs as a plain jit (JAX takes
    compiler options on the outermost jit only)."""
    model, Q, QD, TAU = humanoid_batch
    fd = jaxrbd.jit(jaxrbd.forward_dynamics)
    want = jax.vmap(jaxrbd.forward_dynamics, in_axes=(None, 0, 0, 0))(model, Q, QD, TAU)
    np.testing.assert_allclose(jax.jit(jax.vmap(fd, in_axes=(None, 0, 0, 0)))(model, Q, QD, TAU),
                               want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(jax.vmap(fd, in_axes=(None, 0, 0, 0))(model, Q, QD, TAU),
                               want, rtol=1e-10, atol=1e-10)
    around_batched = jaxrbd.jit(lambda *a: jaxrbd.batched.forward_dynamics(*a))
    np.testing.assert_allclose(around_batched(model, Q, QD, TAU), want, rtol=1e-10, atol=1e-10)
    g = jax.grad(lambda tau: jnp.sum(fd(model, Q[0], QD[0], tau)))(TAU[0])
    assert g.shape == (model.nv,) and bool(jnp.all(jnp.isfinite(g)))


def test_eager_public_calls_compile_once():
    """A public function called outside any trace runs one compiled program per model
    structure and shapes: the second call compiles nothing, a new shape compiles again,
    and the result equals the function traced inside the user's own jit."""
    model = jaxrbd.models.chain(3)
    q, qd, tau = (jnp.asarray(np.full(3, x)) for x in (0.2, -0.1, 0.5))
    compiles = []

    class Count(__import__("logging").Handler):
        def emit(self, record):
            if "Compiling" in record.getMessage():
                compiles.append(record.getMessage())

    logger = __import__("logging").getLogger("jax._src.interpreters.pxla")
    handler = Count()
    logger.addHandler(handler)
    try:
        with jax.log_compiles(True):
            first = jaxrbd.forward_dynamics(model, q, qd, tau)
            n_first = len(compiles)
            second = jaxrbd.forward_dynamics(model, np.asarray(q), qd, tau)  # NumPy: the same key
            n_second = len(compiles)
            z = jnp.zeros(4)
            jaxrbd.forward_dynamics(jaxrbd.models.chain(4), z, z, z)
            n_other = len(compiles)
    finally:
        logger.removeHandler(handler)
    assert n_first >= 1 and n_second == n_first, compiles
    assert n_other > n_second, "a new model structure compiles a new program"
    inside = jax.jit(lambda q: jaxrbd.forward_dynamics(model, q, qd, tau))(q)
    np.testing.assert_allclose(first, inside, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(first, second)
    # checks still raise their own errors on the first call
    with pytest.raises(ValueError, match="q has shape"):
        jaxrbd.forward_dynamics(model, jnp.zeros(4), qd, tau)
