"""The hard contact step of one state with ``traversal="kernel"``: the contact solve as one
native kernel (`jaxrbd._core.ffi_contact`), held to the XLA solver, and the step's
kernel count.

The kernels are built at first use with the host's C++ compiler; without one these tests
skip.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose

import jaxrbd
from jaxrbd import ground
from jaxrbd._core import ffi, ffi_contact
from jaxrbd.ground._solvers import solve

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from _common import count_kernels  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module", autouse=True)
def built():
    try:
        ffi.library()
        ffi_contact.library()
    except ffi.KernelBuildError as e:
        pytest.skip(f"the native kernels cannot be built here: {e}")


def _problems(K, seed, n=6):
    """Contact problems of ``K`` points: rank-deficient Delassus matrices (redundant
    points) at three scales, some warm-started, every mode of contact."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        B = rng.normal(size=(3 * K, 2 * K + i % 3))
        scale = (1e-3, 1.0, 1e3)[i % 3]
        A = B @ B.T * scale + 1e-6 * scale * np.eye(3 * K)
        c = rng.normal(size=3 * K) * scale
        lam0 = rng.normal(size=3 * K) * (i % 2) / scale
        out.append((A, c, rng.uniform(0.2, 1.2, size=K), lam0))
    return [tuple(jnp.asarray(x) for x in p) for p in out]


@pytest.mark.parametrize("solver,polish", [("admm", True), ("admm", False), ("pgs", True)])
def test_native_solve_is_the_xla_solve(solver, polish):
    run = {native: jax.jit(functools.partial(solve, solver, 100, 0.5, True, polish, 1e-6,
                                             native=native)) for native in (False, True)}
    for A, c, mu, lam0 in _problems(4, seed=4):
        lam_x, res_x, its_x = run[False](A, c, mu, lam0)
        lam_n, res_n, its_n = run[True](A, c, mu, lam0)
        # the same iterations, checks and stop: equal up to round-off (unconverged
        # solves of ADMM without the polish drift further apart: not compared)
        assert int(its_n) == int(its_x)
        if float(res_x) <= 1e-6:
            # the impulses agree to round-off times the Delassus matrix's condition number
            # (about 4e7 here: the kernels' and XLA's roundings differ by CPU, AVX-512 or
            # not), the contact velocities they give to round-off
            scale = float(jnp.abs(lam_x).max()) + 1e-300
            tol = max(1e-9, 1e-15 * float(np.linalg.cond(np.asarray(A))))
            assert_allclose(lam_n, lam_x, rtol=tol, atol=tol * scale, name=solver)
            vel = float(jnp.abs(A @ lam_x).max() + jnp.abs(c).max())
            assert_allclose(A @ lam_n + c, A @ lam_x + c, atol=1e-9 * vel, name=solver)
            assert float(res_n) <= 1e-6
    text = run[True].lower(A, c, mu, lam0).compile().as_text()
    assert "custom-call" in text and count_kernels(text) <= 3, count_kernels(text)


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_native_solve_batches(solver):
    """Under `jax.vmap` one batched native call solves every problem as the single
    kernel solves it, and as the XLA program batched does: impulses, residuals,
    iteration counts; operands the batch shares, and a vmap of a vmap, too."""
    probs = _problems(4, seed=6, n=6)
    A, c, mu, lam0 = (jnp.stack(x) for x in zip(*probs))
    run = {nat: functools.partial(solve, solver, 100, 0.5, True, True, 1e-6, native=nat)
           for nat in (False, True)}
    batch = jax.jit(jax.vmap(run[True]))
    text = batch.lower(A, c, mu, lam0).compile().as_text()
    assert "jaxrbd_contact_solve_batch" in text and " while(" not in text
    lam_b, res_b, its_b = batch(A, c, mu, lam0)
    lam_x, res_x, its_x = jax.jit(jax.vmap(run[False]))(A, c, mu, lam0)
    one = jax.jit(run[True])
    np.testing.assert_array_equal(its_b, its_x)
    for i, p in enumerate(probs):
        lam_1, res_1, its_1 = one(*p)
        # the same code on the same numbers: bit for bit
        np.testing.assert_array_equal(lam_b[i], lam_1)
        assert float(res_b[i]) == float(res_1) and int(its_b[i]) == int(its_1)
        if float(res_x[i]) <= 1e-6:
            scale = float(jnp.abs(lam_x[i]).max()) + 1e-300
            assert_allclose(lam_b[i], lam_x[i], rtol=1e-9, atol=1e-9 * scale, name=solver)
            assert float(res_b[i]) <= 1e-6
    # a shared Delassus matrix and friction (read in place by the kernel)
    shared = jax.jit(jax.vmap(run[True], in_axes=(None, 0, None, 0)))(A[1], c, mu[1], lam0)
    for i in range(len(probs)):
        lam_1, res_1, its_1 = one(A[1], c[i], mu[1], lam0[i])
        np.testing.assert_array_equal(shared[0][i], lam_1)
        assert int(shared[2][i]) == int(its_1)
    # a vmap of a vmap: the outer axis loops over batched calls
    nested = jax.jit(jax.vmap(jax.vmap(run[True])))(
        *(x.reshape((2, 3) + x.shape[1:]) for x in (A, c, mu, lam0)))
    np.testing.assert_array_equal(nested[0].reshape(lam_b.shape), lam_b)
    np.testing.assert_array_equal(nested[2].reshape(-1), its_b)


def test_native_solve_reuses_its_buffers():
    """The kernel's per-thread buffers, reused from problem to problem, carry nothing
    over: problems of other sizes in between leave a problem's answer as it was."""
    run = jax.jit(functools.partial(solve, "admm", 100, 0.5, True, True, 1e-6, native=True))
    big, small = _problems(4, seed=7, n=1)[0], _problems(2, seed=8, n=1)[0]
    first = run(*big)
    lam_s, _, its_s = run(*small)
    again = run(*big)
    np.testing.assert_array_equal(again[0], first[0])
    assert int(again[2]) == int(first[2])
    lam_x, _, its_x = jax.jit(functools.partial(solve, "admm", 100, 0.5, True, True, 1e-6))(
        *small)
    assert int(its_s) == int(its_x)
    assert_allclose(lam_s, lam_x, rtol=1e-9, atol=1e-9 * float(jnp.abs(lam_x).max()))


def test_native_solve_differentiates():
    (A, c, mu, lam0), = _problems(3, seed=5, n=1)
    # gradients are the implicit rule's at the solution: the same with either solve
    w = jnp.linspace(-1.0, 1.0, c.shape[0])

    def loss(A, c, mu, native):
        return w @ solve("admm", 100, 0.5, True, True, 1e-10, A, c, mu, lam0, native)[0]

    g = {nat: jax.jit(jax.grad(loss, argnums=(0, 1, 2)), static_argnums=3)(A, c, mu, nat)
         for nat in (False, True)}
    for a, b in zip(g[True], g[False]):
        assert_allclose(a, b, rtol=1e-7, atol=1e-7 * float(jnp.abs(b).max()))


@pytest.fixture(scope="module")
def box():
    """A free box on its four bottom corners (redundant points: the Newton polish's
    case), dropped tilted from 5 mm: an impact, rocking, then rest."""
    b = jaxrbd.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("box", parent="world", joint=jaxrbd.joints.free(),
               body=jaxrbd.Body(mass=1.0, com=(0.0, 0.0, 0.0),
                                inertia=np.diag([4e-3, 4e-3, 6e-3])))
    model = b.build()
    corners = [("box", [sx * 0.1, sy * 0.08, -0.05]) for sx in (-1, 1) for sy in (-1, 1)]
    feet = ground.ContactPoints.create(model, corners)
    plane = ground.Plane(0.0, friction=0.6)
    q = jnp.zeros(model.nq).at[3:7].set(jnp.array([0.999, 0.03, 0.02, 0.0]))
    gap, _, _, _ = ground.contact_frames(model, q, feet, plane)
    q = q.at[2].add(0.005 - gap.min())
    qd = jnp.zeros(model.nv).at[0].set(0.5).at[3].set(0.2)
    return model, feet, plane, q, qd


def _rollout(model, feet, plane, n=120):
    return jax.jit(lambda q, qd: ground.rollout(model, q, qd, jnp.zeros((n, model.nv)), 1e-3,
                                                feet, plane))


def test_kernel_rollout_is_the_xla_rollout(box):
    model, feet, plane, q0, qd0 = box
    qs_a, vs_a, info_a = _rollout(model, feet, plane)(q0, qd0)
    qs_k, vs_k, info_k = _rollout(model.with_traversal("kernel"), feet, plane)(q0, qd0)
    # the same solves: iterations (the Newton chain's steps included) and convergence,
    # step by step
    np.testing.assert_array_equal(info_k.iterations, info_a.iterations)
    np.testing.assert_array_equal(info_k.converged, info_a.converged)
    assert_allclose(qs_k, qs_a, rtol=1e-9, atol=1e-9)
    assert_allclose(vs_k, vs_a, rtol=1e-7, atol=1e-7)
    fmax = float(jnp.abs(info_a.force).max())
    assert_allclose(info_k.force, info_a.force, rtol=1e-6, atol=1e-6 * fmax)
    assert int(info_a.active[-1].sum()) >= 3  # it landed and rests on its corners


def test_kernel_step_batches_and_differentiates(box):
    model, feet, plane, q0, qd0 = box
    mk = model.with_traversal("kernel")
    Q = jnp.stack([q0, q0.at[2].add(-0.006)])  # apart, then touching

    def step(m, q):
        return ground.step(m, q, qd0, jnp.zeros(model.nv), 1e-3, feet, plane)

    batch = jax.jit(jax.vmap(functools.partial(step, mk)))(Q)
    one = jax.jit(functools.partial(step, mk))(Q[1])
    assert float(one[2].force[:, 0].max()) > 0
    assert_allclose(batch[1][1], one[1], rtol=1e-9, atol=1e-9)
    # the batched native calls against the batched XLA programs
    xla = jax.jit(jax.vmap(functools.partial(step, model)))(Q)
    np.testing.assert_array_equal(batch[2].iterations, xla[2].iterations)
    assert_allclose(batch[0], xla[0], rtol=1e-9, atol=1e-9)
    assert_allclose(batch[1], xla[1], rtol=1e-9, atol=1e-9)

    def loss(m, q):
        return jnp.sum(step(m, q)[1] ** 2)

    g = {t: jax.jit(jax.grad(functools.partial(loss, model.with_traversal(t))))(Q[1])
         for t in ("auto", "kernel")}
    assert_allclose(g["kernel"], g["auto"], rtol=1e-6, atol=1e-6 * float(jnp.abs(g["auto"]).max()))


@pytest.fixture(scope="module")
def solo12():
    model = jaxrbd.load_urdf(DATA / "solo12.urdf", floating_base=True)
    feet = ground.ContactPoints.create(
        model, [(f"{leg}_FOOT", [0.0, 0.0, 0.0], 0.016) for leg in ("FL", "FR", "HL", "HR")])
    return model, feet


def test_native_hard_terms_batch(solo12):
    """The hard step's dynamics terms by the batched native kernel (the tree's L^T L
    factor) against their XLA reference on a branched robot: a batch, one state, and
    a batch sharing its Jacobian."""
    from jaxrbd._api import kernels
    from jaxrbd.ground import _dynamics_terms
    from jaxrbd.ground._geometry import contact_jacobian

    model, feet = solo12
    mk = model.with_traversal("kernel")
    k = kernels(mk)
    rng = np.random.default_rng(3)
    B = 3
    Q = jnp.stack([jaxrbd.neutral_configuration(model)] * B)
    Q = Q.at[:, 3:7].set(jnp.array([0.98, 0.1, -0.1, 0.1]) / 1.0149876)
    Q = Q.at[:, 7:].add(jnp.asarray(rng.normal(size=(B, model.nq - 7))))
    QD, TAU = (jnp.asarray(rng.normal(size=(B, model.nv))) for _ in range(2))
    G = jax.vmap(lambda q: contact_jacobian(model, k, q, feet, ground.Plane())[3])(Q)
    dt, reg = jnp.asarray(1e-3), jnp.asarray(1e-6)
    ref = functools.partial(_dynamics_terms, k)
    args = (Q, QD, TAU, G)
    assert ffi_contact.hard_terms_supported(mk, Q[0], G[0])

    def native(q, qd, tau, G):
        return ffi_contact.hard_terms(ref, mk, q, qd, tau, G, dt, reg)

    want = jax.jit(jax.vmap(lambda *a: ref(mk, *a, dt, reg)))(*args)
    batch = jax.jit(jax.vmap(native))
    assert "jaxrbd_hard_terms_batch" in batch.lower(*args).as_text()
    got = batch(*args)
    one = jax.jit(native)(*(x[1] for x in args))
    shared = jax.jit(jax.vmap(native, in_axes=(0, 0, 0, None)))(Q, QD, TAU, G[1])
    for name, w, g, o, s in zip(("A", "W", "v"), want, got, one, shared):
        assert_allclose(g, w, rtol=1e-11, atol=1e-11 * float(jnp.abs(w).max()), name=name)
        np.testing.assert_array_equal(o, g[1])
        np.testing.assert_array_equal(s[1], g[1])


#: The most kernels one compiled hard step of solo12 (4 points) runs with the kernel
#: traversal (measured 123: the contact kinematics' dense program, the Delassus matrix,
#: the checks and the integration around two dynamics and one contact custom call; the
#: XLA programs run about 1 050, plus about 300 a solver check)
STEP_KERNELS = 160


def test_kernel_step_runs_few_kernels(solo12):
    model, feet = solo12
    mk = model.with_traversal("kernel")
    q0 = jaxrbd.neutral_configuration(model)
    f = jax.jit(lambda q, w: ground.step(mk, q, jnp.zeros(model.nv), jnp.zeros(model.nv),
                                         1e-3, feet, ground.Plane(-0.3), warm_start=w))
    text = f.lower(q0, jnp.zeros((4, 3))).compile().as_text()
    n = count_kernels(text)
    assert n <= STEP_KERNELS, f"one solo12 hard step runs {n} kernels (bound {STEP_KERNELS})"
    # the solve is one custom call: no loop of unknown trip count is left
    assert "jaxrbd_contact_solve" in text
    assert all("known_trip_count" in line for line in text.splitlines()
               if " while(" in line), "a while loop of unknown trip count is left"
