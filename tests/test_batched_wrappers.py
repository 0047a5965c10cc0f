"""`jaxrbd.batched`: contact KKT solves, impulses and parameter sensitivities for a batch,
batches of models (`stack_models`), compile-once behaviour and shape errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from helpers import assert_allclose, random_state

import jaxrbd
from jaxrbd import batched

N = 5

# single-state references, jitted once (same structure for every model below)
_fdc1 = jax.jit(jaxrbd.forward_dynamics_contacts, static_argnames=("method",))
_imp1 = jax.jit(jaxrbd.contact_impulses, static_argnames=("return_impulses",))
_fdp1 = jax.jit(jaxrbd.forward_dynamics_parameter_derivatives)
_fd1, _id1 = jax.jit(jaxrbd.forward_dynamics), jax.jit(jaxrbd.inverse_dynamics)
_H1, _dfd1 = jax.jit(jaxrbd.mass_matrix), jax.jit(jaxrbd.forward_dynamics_derivatives)


@pytest.fixture(scope="module")
def setup():
    model = jaxrbd.models.triple_pendulum()
    states = [random_state(model, k) for k in jax.random.split(jax.random.key(3), N)]
    Q, QD, QDD, TAU = (jnp.stack(x) for x in zip(*states))
    heavier = [
        jaxrbd.with_inertial_parameters(model, (1.0 + 0.2 * i) * jaxrbd.inertial_parameters(model))
        for i in range(N)
    ]
    cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.1, -1.0])])
    return model, heavier, cs, Q, QD, QDD, TAU


def test_contact_solves_and_impulses_equal_single_calls(setup):
    model, _, cs, Q, QD, _, TAU = setup
    QDD, LAM = batched.forward_dynamics_contacts(model, Q, QD, TAU, cs, "range_space")
    QDP, IMP = batched.contact_impulses(model, Q, QD, cs, 0.5)
    for i in range(N):
        qdd, lam = _fdc1(model, Q[i], QD[i], TAU[i], cs)
        assert_allclose(QDD[i], qdd, rtol=1e-10, name=f"qdd[{i}]")
        assert_allclose(LAM[i], lam, rtol=1e-10, name=f"lam[{i}]")
        qdp, imp = _imp1(model, Q[i], QD[i], cs, 0.5, return_impulses=True)
        assert_allclose(QDP[i], qdp, rtol=1e-10, name=f"qd+[{i}]")
        assert_allclose(IMP[i], imp, rtol=1e-10, name=f"impulse[{i}]")


def test_parameter_sensitivities_equal_single_calls(setup):
    model, _, _, Q, QD, QDD, TAU = setup
    DP = batched.forward_dynamics_parameter_derivatives(model, Q, QD, TAU)
    Y = batched.inverse_dynamics_regressor(model, Q, QD, QDD)
    assert DP.shape == Y.shape == (N, model.nv, 10 * model.nbodies)
    for i in (0, N - 1):
        dp = _fdp1(model, Q[i], QD[i], TAU[i])
        assert_allclose(DP[i], dp, rtol=1e-10, name=f"d qdd / d pi [{i}]")
        tau = _id1(model, Q[i], QD[i], QDD[i])
        assert_allclose(Y[i] @ model.inertia.ravel(), tau, rtol=1e-10, name=f"Y pi [{i}]")


def test_a_batch_of_models(setup):
    model, heavier, cs, Q, QD, QDD, TAU = setup
    models = batched.stack_models(heavier)
    assert batched.n_models(models) == N and batched.n_models(model) is None
    out = {
        "fd": batched.forward_dynamics(models, Q, QD, TAU),
        "id": batched.inverse_dynamics(models, Q, QD, QDD),
        "H": batched.mass_matrix(models, Q),
        "fdc": batched.forward_dynamics_contacts(models, Q, QD, TAU, cs)[0],
        "dp": batched.forward_dynamics_parameter_derivatives(models, Q, QD, TAU),
        "dfd": batched.forward_dynamics_derivatives(models, Q, QD, TAU)[0],
    }
    for i, m in enumerate(heavier):
        ref = {
            "fd": _fd1(m, Q[i], QD[i], TAU[i]),
            "id": _id1(m, Q[i], QD[i], QDD[i]),
            "H": _H1(m, Q[i]),
            "fdc": _fdc1(m, Q[i], QD[i], TAU[i], cs)[0],
            "dp": _fdp1(m, Q[i], QD[i], TAU[i]),
            "dfd": _dfd1(m, Q[i], QD[i], TAU[i])[0],
        }
        for k, v in ref.items():
            assert_allclose(out[k][i], v, rtol=1e-10, name=f"{k} of model {i}")
    # the heavier models really differ
    assert not bool(jnp.allclose(out["fd"][0], out["fd"][1]))


def test_compiled_once_per_structure(setup):
    model, heavier, cs, Q, QD, _, TAU = setup
    batched.forward_dynamics_contacts(model, Q, QD, TAU, cs, "null_space")
    before = batched.forward_dynamics_contacts._compiled._cache_size()
    for m in heavier[:3]:  # same structure, other numbers: no new compilation
        batched.forward_dynamics_contacts(m, Q, QD, TAU, cs, "null_space")
    assert batched.forward_dynamics_contacts._compiled._cache_size() == before


def test_errors(setup):
    model, heavier, cs, Q, QD, _, TAU = setup
    with pytest.raises(ValueError, match="no models"):
        batched.stack_models([])
    other = jaxrbd.models.chain(3)
    with pytest.raises(ValueError, match="differs in structure"):
        batched.stack_models([model, other])
    with pytest.raises(ValueError, match="one per model"):
        batched.forward_dynamics(batched.stack_models(heavier), Q[:2], QD[:2], TAU[:2])
    with pytest.raises(ValueError, match="expected"):
        batched.forward_dynamics_contacts(model, Q[:, :2], QD, TAU, cs)


def test_parameter_derivatives_name_is_a_deprecated_alias(setup, monkeypatch):
    from jaxrbd._core import checks as _common

    model, _, _, Q, QD, QDD, _ = setup
    monkeypatch.setattr(_common, "_WARNED", set())
    with pytest.warns(DeprecationWarning, match="batched.inverse_dynamics_regressor"):
        Y = batched.inverse_dynamics_parameter_derivatives(model, Q, QD, QDD)
    assert_allclose(Y, batched.inverse_dynamics_regressor(model, Q, QD, QDD), rtol=0, atol=0,
                    name="alias")
