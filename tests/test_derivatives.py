"""The derivatives API: d qdd / d(q, qd, tau), d tau / d(q, qd, qdd) and the inertial-parameter
sensitivities, against `jax.jacfwd`, central finite differences (configurations moved
through `jaxrbd.integrate`), the algebraic identities they must satisfy, and Pinocchio.

Compilation dominates, so the models are few: the `all_kinds` zoo tree (every joint kind,
a fixed body, branching) for the state derivatives, the `mixed` zoo tree (free base, ball,
fixed body, Euler joint) for the parameter derivatives, solo12 (free base) as the
reference robot, and a 3-body tree for the transformation tests. Each function is jitted
once per structure (module-level jits shared by the tests).
"""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import JIT, assert_allclose, fd_jvp, random_f_ext, random_state, random_tree

import jaxrbd


def _ours(model, q, qd, qdd, tau, f_ext):
    return (
        jaxrbd.forward_dynamics_derivatives(model, q, qd, tau, f_ext),
        jaxrbd.inverse_dynamics_derivatives(model, q, qd, qdd, f_ext),
    )


def _ours_nofext(model, q, qd, qdd, tau):
    return (
        jaxrbd.forward_dynamics_derivatives(model, q, qd, tau),
        jaxrbd.inverse_dynamics_derivatives(model, q, qd, qdd),
    )


def _id_jacfwd(model, q, qd, qdd, f_ext):
    """``d ID / d(q tangent, qd)`` by forward-mode autodiff through the recursions of
    `inverse_dynamics` (``derivatives="ad"``: not through its analytic JVP rule)."""

    def f(dq, qd):
        return jaxrbd.inverse_dynamics(model, jaxrbd.integrate(model, q, dq), qd, qdd, f_ext,
                                       derivatives="ad")

    return jax.jacfwd(f, argnums=(0, 1))(jnp.zeros(model.nv), qd)


def _params(model, q, qd, qdd, tau, f_ext):
    return (
        jaxrbd.inverse_dynamics_regressor(model, q, qd, qdd),
        jaxrbd.forward_dynamics_parameter_derivatives(model, q, qd, tau, f_ext),
    )


def _with_inertia(model, I):
    return eqx.tree_at(lambda m: m.inertia, model, I)


def _regressor_jacfwd(model, q, qd, qdd):
    Y = jax.jacfwd(lambda I: jaxrbd.inverse_dynamics(_with_inertia(model, I), q, qd, qdd,
                                                     derivatives="ad"))
    return Y(model.inertia).reshape(model.nv, -1)


OURS = jax.jit(_ours)
OURS_NOFEXT = jax.jit(_ours_nofext)
ID_JACFWD = jax.jit(_id_jacfwd)
PARAMS = jax.jit(_params)
REGRESSOR_JACFWD = jax.jit(_regressor_jacfwd)


def _state(model, seed, kind):
    """``(q, qd, qdd, tau, f_ext)``: random, or a near-singular one (neutral configuration:
    zero angles and identity quaternions, tiny velocities)."""
    q, qd, qdd, tau = random_state(model, jax.random.key(seed))
    f_ext = random_f_ext(model, jax.random.key(seed + 1000))
    if kind == "neutral":
        q, qd = jaxrbd.neutral_configuration(model), 1e-7 * qd
    return q, qd, qdd, tau, f_ext


CASES = [(0, "random"), (1, "neutral")]


@pytest.fixture(scope="module")
def tree(zoo):
    return zoo["all_kinds"]


# ----------------------------------------------------------------------------- every joint kind


@pytest.mark.parametrize("seed, kind", CASES)
def test_inverse_dynamics_derivatives_match_jacfwd(tree, seed, kind):
    q, qd, qdd, tau, f_ext = _state(tree, seed, kind)
    _, (dq, dqd, H) = OURS(tree, q, qd, qdd, tau, f_ext)
    ref_q, ref_qd = ID_JACFWD(tree, q, qd, qdd, f_ext)
    # float64: the analytic derivatives equal autodiff up to rounding (STYLE: 1e-9)
    assert_allclose(dq, ref_q, rtol=1e-9, name="dtau_dq vs jacfwd")
    assert_allclose(dqd, ref_qd, rtol=1e-9, name="dtau_dqd vs jacfwd")
    assert_allclose(H, JIT["mass_matrix"](tree, q), rtol=1e-12, name="dtau_dqdd vs mass_matrix")


@pytest.mark.parametrize("seed, kind", CASES)
def test_forward_dynamics_derivatives_identities(tree, seed, kind):
    """``d qdd / dx = -H^-1 d tau / dx`` at ``qdd = FD(q, qd, tau)`` and ``d qdd / dtau = H^-1``,
    with ``H^-1`` from a dense inverse of the CRBA mass matrix and ``d tau / dx`` checked
    against jacfwd above: this checks the sparse factorisation and the qdd update."""
    q, qd, _, tau, f_ext = _state(tree, seed, kind)
    qdd = JIT["forward_dynamics"](tree, q, qd, tau, f_ext)
    (fq, fqd, ftau), (dq, dqd, _) = OURS(tree, q, qd, qdd, tau, f_ext)
    Hinv = np.linalg.inv(np.asarray(JIT["mass_matrix"](tree, q)))
    assert_allclose(ftau, Hinv, rtol=1e-10, name="dqdd_dtau vs inv(H)")
    assert_allclose(ftau, np.asarray(ftau).T, rtol=1e-13, name="dqdd_dtau symmetric")
    assert_allclose(fq, -Hinv @ dq, rtol=1e-10, name="dqdd_dq vs -inv(H) dtau_dq")
    assert_allclose(fqd, -Hinv @ dqd, rtol=1e-10, name="dqdd_dqd vs -inv(H) dtau_dqd")


@pytest.mark.parametrize("seed, kind", CASES)
def test_derivatives_match_finite_differences(tree, seed, kind):
    """Each matrix along random directions vs central differences of the public dynamics."""
    q, qd, qdd, tau, f_ext = _state(tree, seed, kind)
    (fq, fqd, ftau), (dq, dqd, H) = OURS(tree, q, qd, qdd, tau, f_ext)
    keys = jax.random.split(jax.random.key(seed + 7), 3)
    v = [jax.random.normal(k, (tree.nv,), tree.dtype) for k in keys]
    fd = JIT["forward_dynamics"]
    rnea = JIT["inverse_dynamics"]

    def FD(q, qd, tau):
        return fd(tree, q, qd, tau, f_ext)

    def ID(q, qd, qdd):
        return rnea(tree, q, qd, qdd, f_ext)

    zero = jnp.zeros(tree.nv)
    for i, (name, J) in enumerate((("dq", fq), ("dqd", fqd), ("dtau", ftau))):
        dargs = [zero, zero]
        dq_dir = v[0] if i == 0 else zero
        if i:
            dargs[i - 1] = v[i]
        ref = fd_jvp(FD, tree, q, dq_dir, args=(qd, tau), dargs=tuple(dargs))
        assert_allclose(J @ v[i], ref, rtol=1e-6, atol=1e-7, name=f"dqdd_{name} vs differences")
    for i, (name, J) in enumerate((("dq", dq), ("dqd", dqd), ("dqdd", H))):
        dargs = [zero, zero]
        dq_dir = v[0] if i == 0 else zero
        if i:
            dargs[i - 1] = v[i]
        ref = fd_jvp(ID, tree, q, dq_dir, args=(qd, qdd), dargs=tuple(dargs))
        assert_allclose(J @ v[i], ref, rtol=1e-6, atol=1e-7, name=f"dtau_{name} vs differences")


# ----------------------------------------------------------------------------- reference robot


#: Runs in a subprocess: Pinocchio (and its bundled native libraries) is never imported
#: into the test workers, which keeps their memory map small and free of it.
_PIN_SCRIPT = r"""
import json, sys
import numpy as np
import pinocchio as pin

urdf, inp, out = sys.argv[1:4]
d = np.load(inp)
index = json.loads(str(d["index"]))  # joint name -> (q indices, v indices) in jaxrbd
pm = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
data = pm.createData()
nq, nv = d["q"].shape[1], d["v"].shape[1]
# Pinocchio orders a free joint's velocity [v; w] and its quaternion (x, y, z, w);
# jaxrbd [w; v] and (w, x, y, z). Joints are matched by name.
perm, qperm = np.full(nv, -1), np.full(nq, -1)
for j in range(1, pm.njoints):
    name, jm = pm.names[j], pm.joints[j]
    qs, vs = (np.asarray(x) for x in index[name])
    if jm.nv == 6:
        perm[vs] = jm.idx_v + np.array([3, 4, 5, 0, 1, 2])
        qperm[qs] = jm.idx_q + np.array([0, 1, 2, 6, 3, 4, 5])
    else:
        perm[vs] = jm.idx_v + np.arange(jm.nv)
        qperm[qs] = jm.idx_q + np.arange(jm.nq)
assert (perm >= 0).all() and (qperm >= 0).all()
ix = np.ix_(perm, perm)
res = {}
for s in range(d["q"].shape[0]):
    q_pin = np.empty(nq)
    q_pin[qperm] = d["q"][s]
    v_pin, a_pin, tau_pin = (np.empty(nv) for _ in range(3))
    v_pin[perm], a_pin[perm], tau_pin[perm] = d["v"][s], d["a"][s], d["tau"][s]
    aba = pin.computeABADerivatives(pm, data, q_pin, v_pin, tau_pin)
    rnea = pin.computeRNEADerivatives(pm, data, q_pin, v_pin, a_pin)
    for k, x in enumerate(list(aba) + list(rnea)):
        res[f"{s}_{k}"] = np.array(x)[ix]
np.savez(out, **res)
"""


@pytest.mark.slow
def test_solo12_matches_pinocchio(robots, tmp_path):
    """Pinocchio's computeABADerivatives / computeRNEADerivatives (tangent-space q, free
    joint reordered), on stored reference states; Pinocchio runs in a subprocess."""
    import importlib.util
    import json
    import subprocess
    import sys

    if importlib.util.find_spec("pinocchio") is None:  # look, do not import
        pytest.skip("pinocchio is not installed")
    from conftest import DATA

    r = robots["solo12"]
    m = r.model

    def indices(sl):
        return list(range(sl.start, sl.stop))

    index = {n: (indices(m.q_index(n)), indices(m.v_index(n))) for n in m.joint_names}
    states = [(r.q(s), r.v("v", s), r.v("a", s), r.v("tau", s)) for s in range(2)]
    q, v, a, tau = (np.stack(x) for x in zip(*states))
    np.savez(tmp_path / "in.npz", q=q, v=v, a=a, tau=tau, index=json.dumps(index))
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            _PIN_SCRIPT,
            str(DATA / "solo12.urdf"),
            str(tmp_path / "in.npz"),
            str(tmp_path / "out.npz"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    ref = np.load(tmp_path / "out.npz")
    for s in range(2):
        fd, idd = OURS_NOFEXT(m, *(jnp.asarray(x[s]) for x in (q, v, a, tau)))
        for k, (ours, name) in enumerate(
            zip(fd + idd, ("ddq_dq", "ddq_dv", "Minv", "dtau_dq", "dtau_dv", "dtau_da"))
        ):
            # conditioning of solo12's H is ~2e4: the FD derivatives carry it
            assert_allclose(ours, ref[f"{s}_{k}"], rtol=1e-9, name=f"solo12 {name} [{s}]")


def test_solo12_matches_finite_differences(robots):
    """Without Pinocchio the reference robot is still checked against differences."""
    r = robots["solo12"]
    m = r.model
    q, qd, qdd, tau = (jnp.asarray(x) for x in (r.q(3), r.v("v", 3), r.v("a", 3), r.v("tau", 3)))
    (fq, fqd, _), (dq, dqd, _) = OURS_NOFEXT(m, q, qd, qdd, tau)
    d = jax.random.normal(jax.random.key(3), (m.nv,), m.dtype)
    z = jnp.zeros(m.nv)

    def FD(q, qd):
        return JIT["forward_dynamics"](m, q, qd, tau)

    def ID(q, qd):
        return JIT["inverse_dynamics"](m, q, qd, qdd)

    assert_allclose(fq @ d, fd_jvp(FD, m, q, d, args=(qd,)), rtol=1e-6, name="dqdd_dq")
    assert_allclose(fqd @ d, fd_jvp(FD, m, q, z, (qd,), (d,)), rtol=1e-6, name="dqdd_dqd")
    assert_allclose(dq @ d, fd_jvp(ID, m, q, d, args=(qd,)), rtol=1e-6, name="dtau_dq")
    assert_allclose(dqd @ d, fd_jvp(ID, m, q, z, (qd,), (d,)), rtol=1e-6, name="dtau_dqd")


# ----------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("seed", [0, 1])
def test_parameter_derivatives(zoo, seed):
    """``Y`` against jacfwd w.r.t. ``model.inertia`` and ``Y @ pi = ID``; ``d qdd / d pi``
    against ``-H^-1 Y(q, qd, FD(q, qd, tau))`` and central differences in the parameters."""
    m = zoo["mixed"]
    q, qd, qdd, tau, f_ext = _state(m, seed, "random")
    Y, P = PARAMS(m, q, qd, qdd, tau, f_ext)
    assert Y.shape == P.shape == (m.nv, m.nbodies * 10)
    assert_allclose(Y, REGRESSOR_JACFWD(m, q, qd, qdd), rtol=1e-9, name="regressor vs jacfwd")
    assert_allclose(Y[:, :10], np.zeros((m.nv, 10)), name="world columns")
    tau_id = JIT["inverse_dynamics"](m, q, qd, qdd)
    assert_allclose(Y @ m.inertia.ravel(), tau_id, rtol=1e-12, name="Y pi == inverse_dynamics")
    fd = JIT["forward_dynamics"]
    qdd_fd = fd(m, q, qd, tau, f_ext)
    Y_fd, _ = PARAMS(m, q, qd, qdd_fd, tau, f_ext)
    Hinv = np.linalg.inv(np.asarray(JIT["mass_matrix"](m, q)))
    assert_allclose(P, -Hinv @ Y_fd, rtol=1e-10, name="dqdd_dpi vs -inv(H) Y")
    d = jax.random.normal(jax.random.key(seed + 3), m.inertia.shape, m.dtype).at[0].set(0.0)
    eps = 1e-6
    plus = fd(_with_inertia(m, m.inertia + eps * d), q, qd, tau, f_ext)
    minus = fd(_with_inertia(m, m.inertia - eps * d), q, qd, tau, f_ext)
    assert_allclose(
        P @ d.ravel(), (plus - minus) / (2 * eps), rtol=1e-6, name="dqdd_dpi vs differences"
    )


def test_parameter_derivatives_name_is_a_deprecated_alias(zoo, monkeypatch):
    """`inverse_dynamics_parameter_derivatives` is `inverse_dynamics_regressor`, and says
    so once per process."""
    from jaxrbd._core import checks as _common

    monkeypatch.setattr(_common, "_WARNED", set())
    m = zoo["mixed"]
    q, qd, qdd, _, _ = _state(m, 0, "random")
    with pytest.warns(DeprecationWarning, match="inverse_dynamics_regressor"):
        Y = jaxrbd.inverse_dynamics_parameter_derivatives(m, q, qd, qdd)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = jaxrbd.inverse_dynamics_parameter_derivatives(m, q, qd, qdd)
    want = jaxrbd.inverse_dynamics_regressor(m, q, qd, qdd)
    assert_allclose(Y, want, rtol=0, atol=0, name="alias")
    assert_allclose(again, want, rtol=0, atol=0, name="alias, second call")


def test_model_derivatives(zoo):
    m = zoo["mixed"]
    q, qd, qdd, _, _ = _state(m, 0, "random")
    J = jax.jit(
        lambda m, q, qd, qdd: jaxrbd.model_derivatives(
            jaxrbd.inverse_dynamics, m, q, qd, qdd, leaves="gravity"
        )
    )(m, q, qd, qdd)
    assert set(J) == {"gravity"} and J["gravity"].shape == (m.nv, 3)
    # gravity enters ID linearly: tau(g) = tau(0) + J_g g
    g0 = eqx.tree_at(lambda x: x.gravity, m, jnp.zeros(3))
    lin = JIT["inverse_dynamics"](g0, q, qd, qdd) + J["gravity"] @ m.gravity
    assert_allclose(lin, JIT["inverse_dynamics"](m, q, qd, qdd), rtol=1e-12, name="gravity")
    with pytest.raises(ValueError, match="leaves contains 'mass'"):
        jaxrbd.model_derivatives(jaxrbd.inverse_dynamics, m, q, qd, qdd, leaves=("mass",))
    with pytest.raises(ValueError, match="leaves is empty"):
        jaxrbd.model_derivatives(jaxrbd.inverse_dynamics, m, q, qd, qdd, leaves=())


# ----------------------------------------------------------------------------- transformations


@pytest.fixture(scope="module")
def small():
    return random_tree(11, 3, kinds=["revolute", "prismatic", "revolute"], parents=[0, 1, 1])


FDD = jax.jit(jaxrbd.forward_dynamics_derivatives)


def test_jvp_and_grad(small):
    """The derivatives are differentiable themselves (through the single-state code):
    forward and reverse mode of ``d tau / dq`` along ``qd`` against central differences."""
    q, qd, qdd, _ = random_state(small, jax.random.key(5))
    d = jax.random.normal(jax.random.key(6), (small.nv,), small.dtype)

    def f(qd):
        return jaxrbd.inverse_dynamics_derivatives(small, q, qd, qdd)[0]

    def both(qd, d):
        return jax.jvp(f, (qd,), (d,)), jax.grad(lambda x: jnp.sum(f(x)))(qd)

    run = jax.jit(both)
    (_, tangent), grad = run(qd, d)
    eps = 1e-6
    plus, minus = run(qd + eps * d, d)[0][0], run(qd - eps * d, d)[0][0]
    assert_allclose(tangent, (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-8, name="jvp")
    assert_allclose(grad @ d, jnp.sum(tangent), rtol=1e-9, name="grad . d == sum(jvp)")


def test_vmap_over_states_equals_loop(small):
    """`jax.vmap` over states runs the batched path (blocks of `_derivatives.CHUNK`, the last
    one padded, with external forces); it equals one call per state."""
    n = 37
    states = [_state(small, 50 + k, "random") for k in range(n)]
    Q, QD, _, TAU, F = (jnp.stack(x) for x in zip(*states))
    out = jax.jit(jax.vmap(FDD, in_axes=(None, 0, 0, 0, 0)))(small, Q, QD, TAU, F)
    for k in (0, 31, 32, n - 1):
        single = FDD(small, *states[k][:2], states[k][3], states[k][4])
        for a, b, name in zip(out, single, ("dq", "dqd", "dtau")):
            assert_allclose(a[k], b, rtol=1e-12, name=f"vmap dqdd_{name}, state {k}")
    # both levels of blocking, each with a padded last block: 37 states in super-blocks
    # of 12 (the matrices), each in blocks of 5 (the per-node recursions)
    from jaxrbd._derivatives import fd_derivatives_batched

    def small_blocks(Q, QD, TAU, F):
        return fd_derivatives_batched(small, Q.T, QD.T, TAU.T, jnp.moveaxis(F, 0, -1),
                                      chunk=5, super_chunk=12)

    for a, b, name in zip(jax.jit(small_blocks)(Q, QD, TAU, F), out, ("dq", "dqd", "dtau")):
        assert a.shape == b.shape, (name, a.shape, b.shape)
        assert_allclose(a, b, rtol=1e-12, name=f"blocks of 5 in 12, dqdd_{name}")


def test_vmap_over_models_and_batched(small):
    q, qd, _, tau = random_state(small, jax.random.key(8))
    models = jax.tree_util.tree_map(lambda x: jnp.stack([x, 1.5 * x]), small)
    out = jax.jit(jax.vmap(FDD, in_axes=(0, None, None, None)))(models, q, qd, tau)
    for k in range(2):
        mk = jax.tree_util.tree_map(lambda x, k=k: x[k], models)
        for a, b in zip(out, FDD(mk, q, qd, tau)):
            assert_allclose(a[k], b, rtol=1e-12, name=f"vmap over models [{k}]")
    # the batch-first wrappers: one call per state for FD; for ID, d tau / dx = -H d qdd / dx
    # at qdd = FD(q, qd, tau), and d tau / d qdd = H
    QD, TAU = (jnp.stack([x, x + 0.1, x - 0.2]) for x in (qd, tau))
    Q = jax.vmap(lambda x: jaxrbd.integrate(small, q, x))(QD)

    def both(m, Q, QD, TAU):
        QDD = jaxrbd.batched.forward_dynamics(m, Q, QD, TAU)
        return (
            jaxrbd.batched.forward_dynamics_derivatives(m, Q, QD, TAU),
            jaxrbd.batched.inverse_dynamics_derivatives(m, Q, QD, QDD),
        )

    fb, ib = jax.jit(both)(small, Q, QD, TAU)
    for k in range(3):
        for a, b in zip(fb, FDD(small, Q[k], QD[k], TAU[k])):
            assert_allclose(a[k], b, rtol=1e-12, name=f"batched vs single [{k}]")
        H = JIT["mass_matrix"](small, Q[k])
        assert_allclose(ib[2][k], H, rtol=1e-12, name="batched dtau_dqdd")
        assert_allclose(ib[0][k], -H @ fb[0][k], rtol=1e-10, name="batched dtau_dq")
        assert_allclose(ib[1][k], -H @ fb[1][k], rtol=1e-10, name="batched dtau_dqd")


# ----------------------------------------------------------------------------- errors


def test_errors(small):
    m = small
    q, qd, qdd, tau = random_state(m, jax.random.key(0))
    f = jaxrbd.forward_dynamics_derivatives
    g = jaxrbd.inverse_dynamics_derivatives
    with pytest.raises(ValueError, match="q has shape"):
        f(m, q[:-1], qd, tau)
    with pytest.raises(ValueError, match="qd has shape"):
        f(m, q, qd[:-1], tau)
    with pytest.raises(ValueError, match="tau has shape"):
        f(m, q, qd, jnp.zeros((m.nv, 2)))
    with pytest.raises(ValueError, match="qdd has shape"):
        g(m, q, qd, qdd[:1])
    with pytest.raises(ValueError, match="f_ext has shape"):
        g(m, q, qd, qdd, jnp.zeros((m.nbodies, 3)))
    with pytest.raises(TypeError, match="q has dtype"):
        f(m, q.astype(jnp.complex64), qd, tau)
    with pytest.raises(ValueError, match="qd has shape"):
        jaxrbd.inverse_dynamics_regressor(m, q, qd[:1], qdd)
    with pytest.raises(ValueError, match="tau has shape"):
        jaxrbd.forward_dynamics_parameter_derivatives(m, q, qd, tau[:1])
    with pytest.raises(ValueError, match="QD has shape"):
        jaxrbd.batched.forward_dynamics_derivatives(m, q[None], qd, tau[None])
    with pytest.raises(ValueError, match="F_ext has shape"):
        jaxrbd.batched.inverse_dynamics_derivatives(m, q[None], qd[None], qdd[None], jnp.zeros(3))
