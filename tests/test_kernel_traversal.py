"""``traversal="kernel"``: one state's forward and inverse dynamics and mass matrix as one
compiled C++ kernel (`jaxrbd._core.ffi`), held to the XLA programs.

The kernels are built at first use with the host's C++ compiler; without one these tests
skip (and `KernelBuildError` names what is missing).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ZOO, assert_allclose, random_tree

import jaxrbd
from jaxrbd._core import ffi

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from _common import count_kernels  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module", autouse=True)
def built():
    try:
        ffi.library()
    except ffi.KernelBuildError as e:
        pytest.skip(f"the native kernels cannot be built here: {e}")


def _every_native_kind():
    """Every joint kind the kernels take, in a branching tree, with armature."""
    m = random_tree(
        7, 9,
        kinds=["free", "revolute", "prismatic", "helical", "spherical", "fixed",
               "translation_xyz", "revolute", "revolute"],
        parents=[0, 1, 2, 1, 4, 5, 6, 3, 8])
    arm = jnp.asarray(np.random.default_rng(1).uniform(0.0, 0.2, m.nv))
    return eqx.tree_at(lambda m: m.armature, m, arm)


@functools.cache
def _talos():
    return jaxrbd.load_urdf(DATA / "talos.urdf", floating_base=True)


@pytest.fixture(scope="module", params=["kinds", "talos"])
def model(request):
    if request.param == "kinds":
        return _every_native_kind()
    return _talos()


def _state(model, seed=0):
    q = jaxrbd.random_configuration(model, jax.random.key(seed))
    rng = np.random.default_rng(seed)
    return (q,) + tuple(jnp.asarray(rng.standard_normal(model.nv)) for _ in range(2))


CALLS = {
    "forward_dynamics": lambda m, q, qd, x: jaxrbd.forward_dynamics(m, q, qd, x),
    "inverse_dynamics": lambda m, q, qd, x: jaxrbd.inverse_dynamics(m, q, qd, x),
    "mass_matrix": lambda m, q, qd, x: jaxrbd.mass_matrix(m, q),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_kernel_equals_the_xla_program(model, name):
    mk = model.with_traversal("kernel")
    assert ffi.supported(mk, _state(model)[0])
    f = CALLS[name]
    kernel = jax.jit(lambda *a: f(mk, *a))
    xla = jax.jit(lambda *a: f(model, *a))
    for seed in range(3):
        s = _state(model, seed)
        assert_allclose(kernel(*s), xla(*s), rtol=1e-11, atol=1e-11, name=name)
    # one custom call is the whole program (and a copy or two of constants)
    text = kernel.lower(*_state(model)).compile().as_text()
    assert "custom-call" in text and count_kernels(text) <= 4, count_kernels(text)


def test_model_as_argument_and_batches(model):
    mk = model.with_traversal("kernel")
    q, qd, tau = _state(model)
    fd = jax.jit(jaxrbd.forward_dynamics)
    assert_allclose(fd(mk, q, qd, tau), fd(model, q, qd, tau), rtol=1e-11, atol=1e-11)
    # a batch of states (here with qd shared) is one native call that loops over it,
    # state by state equal to the one-state kernel (which the test above holds to XLA)
    Q = jnp.stack([_state(model, seed)[0] for seed in range(3)])
    X = jnp.stack([_state(model, seed)[2] for seed in range(3)])
    calls = dict(CALLS, fd_derivatives=lambda m, q, qd, x: jaxrbd.forward_dynamics_derivatives(
        m, q, qd, x), id_derivatives=lambda m, q, qd, x: jaxrbd.inverse_dynamics_derivatives(
        m, q, qd, x))
    for name, f in calls.items():
        one = jax.jit(lambda q, x, f=f: f(mk, q, qd, x))
        batch = jax.jit(jax.vmap(lambda q, x, f=f: f(mk, q, qd, x)))
        got = batch(Q, X)
        for i in range(3):
            want = one(Q[i], X[i])
            assert_allclose(jax.tree.map(lambda a, i=i: a[i], got), want, rtol=1e-13, atol=1e-13,
                            name=name)
        text = batch.lower(Q, X).compile().as_text()
        assert text.count("custom_call_target=\"jaxrbd_") == 1, name
        assert count_kernels(text) <= 4, (name, count_kernels(text))
    # (derivatives: test_reverse_mode_runs_the_native_sweeps)


def _loss_fd(m, q, qd, tau):
    return jnp.sum(jaxrbd.forward_dynamics(m, q, qd, tau) ** 2)


def _loss_id(m, q, qd, qdd):
    return jnp.sum(jnp.sin(jaxrbd.inverse_dynamics(m, q, qd, qdd)))


@pytest.mark.parametrize("case", ["fd-kinds", "id-kinds", "fd-talos"])
def test_reverse_mode_runs_the_native_sweeps(case):
    # jax.grad transposes the JVP rules' linear maps into the native kernels
    # (`jaxrbd._kernel_rules`): the gradient with respect to every leaf of the model and
    # the state is the XLA program's
    loss = _loss_fd if case.startswith("fd") else _loss_id
    model = _every_native_kind() if case.endswith("kinds") else _talos()
    mk = model.with_traversal("kernel")
    vg = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))
    for seed in range(2):
        s = _state(model, seed)
        got, want = vg(mk, *s), vg(model, *s)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            scale = float(jnp.max(jnp.abs(b))) + 1.0
            assert_allclose(a, b, rtol=1e-10, atol=1e-10 * scale)
    # the call and its sweep (FD's with H^-1 inside) as custom calls, which also write
    # the zero cotangents, and the loss's few elementwise kernels around them
    text = vg.lower(mk, *_state(model)).compile().as_text()
    assert text.count("custom_call_target=\"jaxrbd_") == 2
    assert count_kernels(text) <= 10, count_kernels(text)
    # a vmap of the gradient over states (the model shared, tau too) is one call of each
    # kernel, whose C++ loops over the batch: per state, the one-state kernels' numbers
    states = [_state(model, seed) for seed in range(2)]
    Q, QD = (jnp.stack([s[i] for s in states]) for i in range(2))
    tau = states[0][2]
    batched = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1, 2, 3)), in_axes=(None, 0, 0, None)))
    got = batched(mk, Q, QD, tau)
    for i in range(2):
        want = jax.grad(loss, argnums=(0, 1, 2, 3))(mk, Q[i], QD[i], tau)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            assert_allclose(a[i], b, rtol=1e-13, atol=1e-13 * (1.0 + float(jnp.max(jnp.abs(b)))))
    text = batched.lower(mk, Q, QD, tau).compile().as_text()
    assert text.count("custom_call_target=\"jaxrbd_") == 2


@pytest.mark.parametrize("name", ["forward_dynamics_derivatives", "inverse_dynamics_derivatives"])
def test_derivative_matrices_kernel(model, name):
    # the analytic derivative matrices (tangent coordinates) and H^-1 or H as one call
    mk = model.with_traversal("kernel")
    f = jax.jit(getattr(jaxrbd, name))
    for seed in range(2):
        s = _state(model, seed)
        for a, b in zip(f(mk, *s), f(model, *s)):
            assert_allclose(a, b, rtol=1e-10, atol=1e-10 * (1.0 + float(jnp.max(jnp.abs(b)))))
    text = f.lower(mk, *_state(model)).compile().as_text()
    target = "jaxrbd_" + name[0] + "d_derivatives"
    assert target in text and count_kernels(text) <= 6, count_kernels(text)


def test_forward_mode_batches_and_second_derivatives_of_the_kernel_rules():
    # forward mode (the reference maps) against reverse mode (the native sweeps, batched
    # over the basis through the references), Hessian-vector products against central
    # differences of the native gradient, and a vmap of gradients against one gradient per state:
    # each side computed another way, none of them the XLA model's derivative programs
    # (test_reverse_mode_runs_the_native_sweeps holds the gradient to those)
    model = _every_native_kind()
    mk = model.with_traversal("kernel")
    q, qd, tau = _state(model)

    def fd(q, qd):
        return jaxrbd.forward_dynamics(mk, q, qd, tau)

    assert_allclose(jax.jit(jax.jacfwd(fd))(q, qd), jax.jit(jax.jacrev(fd))(q, qd),
                    rtol=1e-10, atol=1e-10)
    grad = jax.jit(jax.grad(_loss_fd, argnums=2))
    # Hessian-vector products (forward over the native reverse sweep)
    hvp = jax.jit(lambda qd, v: jax.jvp(lambda x: grad(mk, q, x, tau), (qd,), (v,))[1])
    eps = 1e-6
    for seed in range(2):
        v = jnp.asarray(np.random.default_rng(seed).standard_normal(model.nv))
        fdiff = (grad(mk, q, qd + eps * v, tau) - grad(mk, q, qd - eps * v, tau)) / (2 * eps)
        got = hvp(qd, v)
        assert_allclose(got, fdiff, rtol=1e-6, atol=1e-6 * float(jnp.max(jnp.abs(got))))
    Q = jnp.stack([q, _state(model, 1)[0]])
    g = jax.jit(jax.vmap(jax.grad(_loss_fd, argnums=1), in_axes=(None, 0, None, None)))(
        mk, Q, qd, tau)
    one = jax.jit(jax.grad(_loss_fd, argnums=1))
    for i in range(2):
        assert_allclose(g[i], one(mk, Q[i], qd, tau), rtol=1e-10, atol=1e-10)
    # a vmap over models (stacked leaves): the primal kernel and its residuals one by one
    heavier = eqx.tree_at(lambda m: m.inertia, mk, mk.inertia * 1.5)
    stacked = jaxrbd.batched.stack_models([mk, heavier])
    g = jax.jit(jax.vmap(jax.grad(_loss_fd, argnums=1), in_axes=(0, None, None, None)))(
        stacked, q, qd, tau)
    for i, m in enumerate((mk, heavier)):
        assert_allclose(g[i], one(m, q, qd, tau), rtol=1e-10, atol=1e-10)


def test_rollout_steps_run_the_kernel():
    model = _every_native_kind()
    mk = model.with_traversal("kernel")
    q0, qd0, _ = _state(model)
    tau = jnp.zeros((50, model.nv))

    def run(m):
        return jax.jit(lambda q0, qd0, tau: jaxrbd.rollout(
            m, q0, qd0, tau, 1e-3, "semi_implicit_euler"))

    qs_k, vs_k = run(mk)(q0, qd0, tau)
    qs_a, vs_a = run(model)(q0, qd0, tau)
    assert_allclose(qs_k, qs_a, rtol=1e-11, atol=1e-11)
    assert_allclose(vs_k, vs_a, rtol=1e-11, atol=1e-11)
    assert "custom-call" in run(mk).lower(q0, qd0, tau).compile().as_text()

    # the gradient of a rollout (the step's reverse mode on the native sweeps)
    def loss(tau, m):
        qs, vs = jaxrbd.rollout(m, q0, qd0, tau, 1e-3, "semi_implicit_euler")
        return jnp.sum(qs[-1] ** 2) + jnp.sum(vs[-1] ** 2)

    g = jax.jit(jax.grad(loss))
    tau = 0.1 * jnp.ones_like(tau)
    assert_allclose(g(tau, mk), g(tau, model), rtol=1e-10, atol=1e-12)


def test_what_the_kernels_do_not_cover_runs_the_xla_program():
    # Euler joints (their S depends on q), float32 and external forces
    mixed = ZOO["mixed"]
    q, qd, tau = _state(mixed)
    fd = jax.jit(jaxrbd.forward_dynamics)
    mk = mixed.with_traversal("kernel")
    assert not ffi.supported(mk, q)
    assert "custom-call" not in fd.lower(mk, q, qd, tau).compile().as_text()
    assert_allclose(fd(mk, q, qd, tau), fd(mixed, q, qd, tau), rtol=1e-12, atol=1e-12)
    model = _every_native_kind().with_traversal("kernel")
    q, qd, tau = _state(model)
    assert not ffi.supported(model, q.astype(jnp.float32))
    f_ext = jnp.ones((model.nbodies, 6))
    assert not ffi.supported(model, q, f_ext)
    with_f = jax.jit(lambda m: jaxrbd.forward_dynamics(m, q, qd, tau, f_ext=f_ext))
    assert_allclose(with_f(model), with_f(model.with_traversal("auto")), rtol=1e-12,
                    atol=1e-12)


def test_no_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("CXX", "")
    monkeypatch.setattr(ffi.shutil, "which", lambda name: None)
    with pytest.raises(ffi.KernelBuildError, match="no C\\+\\+ compiler"):
        ffi._compiler()


def test_unknown_traversal_names_the_choices():
    with pytest.raises(ValueError, match="'kernel'"):
        jaxrbd.models.triple_pendulum().with_traversal("native")


def test_coupled_models_take_the_traversal():
    cm = jaxrbd.load_urdf(DATA / "gripper_mimic.urdf")
    ck = cm.with_traversal("kernel")
    assert ck.base.traversal == "kernel"
    q = jnp.linspace(0.1, 0.4, cm.nq)
    v = jnp.linspace(-1.0, 1.0, cm.nv)
    fd = jax.jit(jaxrbd.forward_dynamics)
    assert_allclose(fd(ck, q, v, v), fd(cm, q, v, v), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("at_rest", [False, True])
def test_the_configuration_move_kernel_equals_the_xla_program(model, at_rest):
    # `_configuration.move` on `ffi_move.cc` (its transpose too) against the XLA program:
    # values, reverse and forward mode, batches and second derivatives, at rest included
    # (the exponential's Taylor branch)
    from jaxrbd import _configuration as cfg
    from jaxrbd._core import ffi_move

    mk = model.with_traversal("kernel")
    q, v, _ = _state(model, seed=3)
    v = 0 * v if at_rest else v
    ct = jnp.cos(jnp.arange(model.nq))
    dt = jnp.asarray(0.01)
    assert ffi_move.supported(mk, q, v, dt)
    assert not ffi_move.supported(model.with_traversal("auto"), q, v, dt)

    def native(q, v, dt):
        return cfg.move(mk, q, v, dt)

    def xla(q, v, dt):
        return cfg.move_xla(mk, q, v, dt)

    def loss(f):
        return lambda q, v, dt: jnp.sum(jnp.sin(f(q, v, dt)) * ct)

    def close(a, b):
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
            assert np.all(np.isfinite(x))
            assert_allclose(x, y, rtol=1e-12, atol=1e-13)

    close(jax.jit(native)(q, v, dt), xla(q, v, dt))
    grad = functools.partial(jax.grad, argnums=(0, 1, 2))
    close(jax.jit(grad(loss(native)))(q, v, dt), grad(loss(xla))(q, v, dt))
    tangents = (jnp.ones_like(q), jnp.ones_like(v), jnp.asarray(0.5))
    close(jax.jvp(native, (q, v, dt), tangents), jax.jvp(xla, (q, v, dt), tangents))
    Q, V = jnp.stack([q, 2 * q]), jnp.stack([v, -v])
    close(jax.vmap(native, (0, 0, None))(Q, V, dt), jax.vmap(xla, (0, 0, None))(Q, V, dt))
    close(jax.vmap(grad(loss(native)), (0, 0, None))(Q, V, dt),
          jax.vmap(grad(loss(xla)), (0, 0, None))(Q, V, dt))
    close(jax.hessian(loss(native))(q, v, dt), jax.hessian(loss(xla))(q, v, dt))
    # reverse mode is the two kernels, not the XLA program's transpose
    text = jax.jit(grad(loss(native))).lower(q, v, dt).as_text()
    assert "@jaxrbd_move(" in text and "@jaxrbd_move_vjp(" in text
