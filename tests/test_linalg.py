"""`jaxrbd._core.linalg`: blocked LAPACK calls that cannot deadlock XLA:CPU's thread pool.

jaxlib 0.10's CPU LAPACK kernels split a batch whose ``batch · cost`` (their flop estimate
per matrix) reaches `PARALLEL_THRESHOLD` over the intra-op pool and block on the pieces;
two at once can hang the process (seen with 1024 vmapped contact solves, and in CI with
the 20 reference samples of solo12 and talos, whose 30x30 and 44x44 KKT eigh cost 1.4e5
and 4.3e5 per matrix). These tests check the values and derivatives of the wrappers,
that every LAPACK call of small and large vmapped contact solves stays below the
threshold, and (in a subprocess with a time limit) that the former hangs are gone.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose

import jaxrbd
from jaxrbd._core import linalg as _linalg

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


def test_block_size():
    assert _linalg.block_size(1) == (_linalg.PARALLEL_THRESHOLD - 1) // _linalg.COST_MARGIN
    for cost in (1, 37, 18_290, 99_999, 100_000, 10**7):
        k = _linalg.block_size(cost)
        assert k >= 1 and (k == 1 or _linalg.COST_MARGIN * k * cost < _linalg.PARALLEL_THRESHOLD)
    assert _linalg.block_size(10**7) == 1


def test_nested_vmap_and_blocks():
    n = 12
    chunk = _linalg.block_size(n**3 // 3)
    N = 3 * chunk + 5  # several blocks and a ragged end
    A = _spd(n, (N,))
    L = jax.jit(jax.vmap(_linalg.cholesky))(A)
    assert_allclose(L, jnp.linalg.cholesky(A), rtol=1e-13, name="blocked batch")
    L2 = jax.jit(jax.vmap(jax.vmap(_linalg.cholesky)))(A[: 4 * 25].reshape(4, 25, n, n))
    assert_allclose(L2.reshape(-1, n, n), L[: 4 * 25], rtol=1e-13, name="nested vmap")


def _jaxlib_cost(target, shapes):
    """jaxlib 0.10.2's flop estimate for ONE matrix of a LAPACK call (``shapes``: the
    operands' shapes, batch first), written out independently of `_linalg`."""
    if "potrf" in target:
        n = shapes[0][-1]
        return n**3 // 3
    if "syevd" in target:
        n = shapes[0][-1]
        return 5 * n**3
    if "trsm" in target:  # rows · cols · leading dimension of the triangular matrix
        (n, _), (rows, cols) = shapes[0][-2:], shapes[1][-2:]
        return rows * cols * n
    if "gesdd" in target or "gesvd" in target:
        m, n = shapes[0][-2:]
        return 10 * m * n * min(m, n)
    raise AssertionError(f"no cost model for {target}")


def _lapack_calls(hlo: str):
    """``(target, batch, cost per matrix)`` of every LAPACK custom call in an HLO text."""
    out = []
    for line in hlo.splitlines():
        m = re.search(r'custom_call_target="(lapack_\w+)"', line)
        if m:
            operands = re.search(r"operand_layout_constraints=\{(.*?)\}\}", line).group(1)
            shapes = [
                tuple(int(d) for d in s.split(","))
                for s in re.findall(r"f64\[([\d,]+)\]", operands)
            ]
            batch = int(np.prod(shapes[0][:-2]))
            out.append((m.group(1), batch, _jaxlib_cost(m.group(1), shapes)))
    return out


@pytest.mark.perf
def test_every_lapack_call_of_a_vmapped_contact_solve_stays_on_one_thread():
    """Small batches of large systems (the CI hang: 20 reference samples, 44x44 KKT) and
    large batches of small ones."""
    model = jaxrbd.models.humanoid()
    cs = jaxrbd.ConstraintSet.contacts_3d(
        [("left_sole", [0.0, 0.0, -0.05]), ("right_sole", [0.0, 0.0, -0.05])]
    )
    for B in (12, 4096):
        Q = jnp.tile(jaxrbd.neutral_configuration(model)[None, :], (B, 1))
        V = jnp.zeros((B, model.nv))
        for method in ("kkt", "range_space", "null_space"):
            f = jax.vmap(
                lambda q, v, method=method: jaxrbd.forward_dynamics_contacts(
                    model, q, v, v, cs, method=method
                )
            )
            calls = _lapack_calls(jax.jit(f).lower(Q, V).compile().as_text())
            assert calls, f"{method}: no LAPACK call found; the test no longer sees them"
            for target, batch, cost in calls:
                assert batch == 1 or batch * cost < _linalg.PARALLEL_THRESHOLD, (
                    B, method, target, batch, cost,
                )


@pytest.mark.slow
def test_large_vmapped_contact_solves_do_not_hang():
    """The former deadlocks: 1024 and 4096 range-space and KKT solves called several times,
    and 12 KKT solves called many times (before the cost rule, a loop of such calls hung
    within 10 to 36 of them)."""
    script = textwrap.dedent(
        """
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp, numpy as np, jaxrbd
        m = jaxrbd.models.humanoid()
        cs = jaxrbd.ConstraintSet.contacts_3d([("left_sole", [0.0, 0.0, -0.05]),
                                               ("right_sole", [0.0, 0.0, -0.05])])
        for B, calls in ((12, 60), (1024, 4), (4096, 4)):
            keys = jax.random.split(jax.random.key(0), B)
            Q = jax.vmap(lambda k: jaxrbd.random_configuration(m, k))(keys)
            V = jnp.asarray(np.random.default_rng(0).standard_normal((B, m.nv)))
            for method in ("range_space", "kkt"):
                f = jax.jit(jax.vmap(lambda q, v: jaxrbd.forward_dynamics_contacts(
                    m, q, v, v, cs, method=method)))
                for _ in range(calls):
                    assert bool(jnp.isfinite(f(Q, V)[0]).all())
        print("ok")
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]
