"""`jaxrbd._linalg`: blocked LAPACK calls that cannot deadlock XLA:CPU's thread pool.

jaxlib 0.10's CPU LAPACK kernels split a batch of at least `PARALLEL_THRESHOLD` elements
over the intra-op pool and block on the pieces; two at once can hang the process (seen
with 1024 vmapped contact solves). These tests check the values and derivatives of the
wrappers, that every LAPACK call in a large vmapped contact solve stays below the
threshold, and (in a subprocess with a time limit) that the former hang is gone.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
from helpers import assert_allclose

import jaxrbd
from jaxrbd import _linalg

RNG = np.random.default_rng(0)


def _spd(n, batch=()):
    M = RNG.standard_normal(batch + (n, n))
    return jnp.asarray(M @ np.swapaxes(M, -1, -2) + n * np.eye(n))


def test_values_match_jnp_linalg():
    for n in (1, 7, 30):
        A = _spd(n)
        b = jnp.asarray(RNG.standard_normal((n, 3)))
        L = _linalg.cholesky(A)
        assert_allclose(L, jnp.linalg.cholesky(A), rtol=1e-13, name=f"cholesky n={n}")
        assert_allclose(_linalg.cho_solve(L, b), jnp.linalg.solve(A, b), rtol=1e-11, name="cho")
        assert_allclose(
            _linalg.cho_solve(L, b[:, 0]), jnp.linalg.solve(A, b[:, 0]), rtol=1e-11, name="vec"
        )
        w, V = _linalg.eigh(A)
        assert_allclose(w, jnp.linalg.eigvalsh(A), rtol=1e-12, name="eigh")
        assert_allclose((V * w[None, :]) @ V.T, A, rtol=1e-12, name="eigh reconstruction")
        J = jnp.asarray(RNG.standard_normal((3, n)))
        assert_allclose(_linalg.pinv(J), jnp.linalg.pinv(J), rtol=1e-10, name="pinv")


def test_derivatives_match_jnp_linalg():
    n = 6
    A, dA = _spd(n), jnp.asarray(RNG.standard_normal((n, n)))
    dA = dA + dA.T
    b, db = (jnp.asarray(RNG.standard_normal(n)) for _ in range(2))

    def ours(A, b):
        return _linalg.cho_solve(_linalg.cholesky(A), b)

    def theirs(A, b):
        return jnp.linalg.solve(0.5 * (A + A.T), b)

    t1 = jax.jvp(ours, (A, b), (dA, db))[1]
    t2 = jax.jvp(theirs, (A, b), (dA, db))[1]
    assert_allclose(t1, t2, rtol=1e-11, name="jvp")
    g1 = jax.grad(lambda A, b: jnp.sum(ours(A, b) ** 2), argnums=(0, 1))(A, b)
    g2 = jax.grad(lambda A, b: jnp.sum(theirs(A, b) ** 2), argnums=(0, 1))(A, b)
    assert_allclose(g1[0] + g1[0].T, g2[0] + g2[0].T, rtol=1e-10, name="grad A (sym)")
    assert_allclose(g1[1], g2[1], rtol=1e-11, name="grad b")


def test_nested_vmap_and_blocks():
    n, per = 12, 12 * 12
    N = 3 * (_linalg.PARALLEL_THRESHOLD // per) + 5  # several blocks and a ragged end
    A = _spd(n, (N,))
    L = jax.jit(jax.vmap(_linalg.cholesky))(A)
    assert_allclose(L, jnp.linalg.cholesky(A), rtol=1e-13, name="blocked batch")
    L2 = jax.jit(jax.vmap(jax.vmap(_linalg.cholesky)))(A[: 40 * 50].reshape(40, 50, n, n))
    assert_allclose(L2.reshape(-1, n, n), L[: 40 * 50], rtol=1e-13, name="nested vmap")


def _lapack_batches(hlo: str):
    """``(target, batch * rows * cols)`` of every LAPACK custom call in an HLO text."""
    out = []
    for line in hlo.splitlines():
        m = re.search(r'custom_call_target="(lapack_\w+)"', line)
        if m:
            dims = re.findall(r"f64\[([\d,]*)\]", line.split("custom-call(")[1])
            out.append((m.group(1), max(int(np.prod([int(d) for d in s.split(",")])) for s in dims)))
    return out


def test_every_lapack_call_of_a_large_batch_stays_on_one_thread():
    model = jaxrbd.models.humanoid()
    cs = jaxrbd.ConstraintSet.contacts_3d([("left_sole", [0.0, 0.0, -0.05])])
    B = 4096
    Q = jnp.tile(jaxrbd.neutral_configuration(model)[None, :], (B, 1))
    V = jnp.zeros((B, model.nv))
    for method in ("kkt", "range_space", "null_space"):
        f = jax.vmap(
            lambda q, v, method=method: jaxrbd.forward_dynamics_contacts(
                model, q, v, v, cs, method=method
            )
        )
        hlo = jax.jit(f).lower(Q, V).compile().as_text()
        calls = _lapack_batches(hlo)
        assert calls, f"{method}: no LAPACK call found; the test no longer sees them"
        for target, size in calls:
            assert size < _linalg.PARALLEL_THRESHOLD, (method, target, size)


def test_large_vmapped_contact_solves_do_not_hang():
    """The former deadlock: 1024 and 4096 range-space solves, called several times."""
    script = textwrap.dedent(
        """
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp, numpy as np, jaxrbd
        m = jaxrbd.models.humanoid()
        cs = jaxrbd.ConstraintSet.contacts_3d([("left_sole", [0.0, 0.0, -0.05]),
                                               ("right_sole", [0.0, 0.0, -0.05])])
        for B in (1024, 4096):
            keys = jax.random.split(jax.random.key(0), B)
            Q = jax.vmap(lambda k: jaxrbd.random_configuration(m, k))(keys)
            V = jnp.asarray(np.random.default_rng(0).standard_normal((B, m.nv)))
            for method in ("range_space", "kkt"):
                f = jax.jit(jax.vmap(lambda q, v: jaxrbd.forward_dynamics_contacts(
                    m, q, v, v, cs, method=method)))
                for _ in range(4):
                    assert bool(jnp.isfinite(f(Q, V)[0]).all())
        print("ok")
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]
