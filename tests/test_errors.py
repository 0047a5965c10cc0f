"""Loud failures: wrong shapes and dtypes at every entry point, and non-physical models.

Shape and dtype checks run at trace time, before anything is compiled, so these tests
are cheap; the few calls that must *succeed* use the small triple pendulum.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, joints


@pytest.fixture(scope="module")
def model():
    return jaxrbd.models.triple_pendulum()  # nq = nv = 9, nbodies = 4


def _ok(model):
    return jnp.zeros(model.nq), jnp.zeros(model.nv)


NQ, NV, NB = 9, 9, 4
Z, BAD = np.zeros(9), np.zeros(5)
F_OK, F_BAD = np.zeros((NB, 6)), np.zeros((NB + 1, 6))

# (call, message) for one wrong argument per case; every other argument is valid
SHAPE_CASES = {
    "inverse_dynamics q": (lambda m: jaxrbd.inverse_dynamics(m, BAD, Z, Z), r"q has shape \(5,\)"),
    "inverse_dynamics qd": (
        lambda m: jaxrbd.inverse_dynamics(m, Z, BAD, Z),
        r"qd has shape \(5,\)",
    ),
    "inverse_dynamics qdd": (
        lambda m: jaxrbd.inverse_dynamics(m, Z, Z, BAD),
        r"qdd has shape \(5,\)",
    ),
    "inverse_dynamics f_ext": (
        lambda m: jaxrbd.inverse_dynamics(m, Z, Z, Z, F_BAD),
        r"f_ext has shape \(5, 6\)",
    ),
    "forward_dynamics q": (lambda m: jaxrbd.forward_dynamics(m, BAD, Z, Z), r"q has shape"),
    "forward_dynamics qd": (lambda m: jaxrbd.forward_dynamics(m, Z, BAD, Z), r"qd has shape"),
    "forward_dynamics tau": (lambda m: jaxrbd.forward_dynamics(m, Z, Z, BAD), r"tau has shape"),
    "forward_dynamics f_ext": (
        lambda m: jaxrbd.forward_dynamics(m, Z, Z, Z, F_BAD),
        r"f_ext has shape",
    ),
    "forward_dynamics f_ext (nbodies,)": (
        lambda m: jaxrbd.forward_dynamics(m, Z, Z, Z, np.zeros(NB)),
        r"f_ext has shape",
    ),
    "forward_dynamics crba tau": (
        lambda m: jaxrbd.forward_dynamics(m, Z, Z, BAD, method="crba"),
        r"tau has shape",
    ),
    "mass_matrix q": (lambda m: jaxrbd.mass_matrix(m, BAD), r"q has shape"),
    "mass_matrix q (1, nq)": (lambda m: jaxrbd.mass_matrix(m, np.zeros((1, NQ))), r"q has shape"),
    "bias_forces q": (lambda m: jaxrbd.bias_forces(m, BAD, Z), r"q has shape"),
    "bias_forces qd": (lambda m: jaxrbd.bias_forces(m, Z, BAD), r"qd has shape"),
    "bias_forces f_ext": (lambda m: jaxrbd.bias_forces(m, Z, Z, F_BAD), r"f_ext has shape"),
    "gravity_forces q": (lambda m: jaxrbd.gravity_forces(m, BAD), r"q has shape"),
    "minv_times q": (lambda m: jaxrbd.minv_times(m, BAD, Z), r"q has shape"),
    "minv_times tau": (lambda m: jaxrbd.minv_times(m, Z, BAD), r"tau has shape"),
    "minv_times tau (nv, K, 1)": (
        lambda m: jaxrbd.minv_times(m, Z, np.zeros((NV, 2, 1))),
        r"tau has shape",
    ),
    "forward_kinematics q": (lambda m: jaxrbd.forward_kinematics(m, BAD), r"q has shape"),
    "integrate q": (lambda m: jaxrbd.integrate(m, BAD, Z), r"q has shape"),
    "integrate v": (lambda m: jaxrbd.integrate(m, Z, BAD), r"v has shape"),
    "difference q0": (lambda m: jaxrbd.difference(m, BAD, Z), r"q0 has shape"),
    "difference q1": (lambda m: jaxrbd.difference(m, Z, BAD), r"q1 has shape"),
    "batched.forward_dynamics Q": (
        lambda m: jaxrbd.batched.forward_dynamics(
            m, np.zeros((2, 5)), np.zeros((2, NV)), np.zeros((2, NV))
        ),
        r"Q has shape \(2, 5\)",
    ),
    "batched.forward_dynamics QD": (
        lambda m: jaxrbd.batched.forward_dynamics(
            m, np.zeros((2, NQ)), np.zeros((2, 5)), np.zeros((2, NV))
        ),
        r"QD has shape",
    ),
    "batched.forward_dynamics TAU": (
        lambda m: jaxrbd.batched.forward_dynamics(
            m, np.zeros((2, NQ)), np.zeros((2, NV)), np.zeros(NV)
        ),
        r"TAU has shape",
    ),
    "batched.forward_dynamics F_ext": (
        lambda m: jaxrbd.batched.forward_dynamics(
            m, np.zeros((2, NQ)), np.zeros((2, NV)), np.zeros((2, NV)), np.zeros((3, NB, 6))
        ),
        r"F_ext has shape",
    ),
    "batched.forward_dynamics batch sizes": (
        lambda m: jaxrbd.batched.forward_dynamics(
            m, np.zeros((2, NQ)), np.zeros((3, NV)), np.zeros((2, NV))
        ),
        r"batch sizes differ",
    ),
    "batched.inverse_dynamics Q": (
        lambda m: jaxrbd.batched.inverse_dynamics(
            m, np.zeros(NQ), np.zeros((1, NV)), np.zeros((1, NV))
        ),
        r"Q has shape",
    ),
    "batched.inverse_dynamics QDD": (
        lambda m: jaxrbd.batched.inverse_dynamics(
            m, np.zeros((2, NQ)), np.zeros((2, NV)), np.zeros((2, 5))
        ),
        r"QDD has shape",
    ),
    "batched.inverse_dynamics F_ext": (
        lambda m: jaxrbd.batched.inverse_dynamics(
            m, np.zeros((2, NQ)), np.zeros((2, NV)), np.zeros((2, NV)), np.zeros((2, NB, 5))
        ),
        r"F_ext has shape",
    ),
    "batched.mass_matrix Q": (
        lambda m: jaxrbd.batched.mass_matrix(m, np.zeros((2, 5))),
        r"Q has shape",
    ),
}


@pytest.mark.parametrize("case", list(SHAPE_CASES))
def test_wrong_shapes_raise_value_error(model, case):
    call, match = SHAPE_CASES[case]
    with pytest.raises(ValueError, match=match):
        call(model)
    with pytest.raises(ValueError, match=match):  # the same inside jit (trace time)
        jax.jit(call)(model)


def test_shape_message_says_what_was_expected(model):
    with pytest.raises(ValueError) as info:
        jaxrbd.forward_dynamics(model, Z, Z, BAD)
    msg = str(info.value)
    assert "(5,)" in msg and "(9,)" in msg and "model.nv" in msg


def test_none_argument_is_named(model):
    with pytest.raises(TypeError, match="tau is None"):
        jaxrbd.forward_dynamics(model, Z, Z, None)


def test_integrate_needs_scalar_dt(model):
    with pytest.raises(ValueError, match="dt has shape"):
        jaxrbd.integrate(model, Z, Z, jnp.ones(2))


def test_unknown_joint_is_named(model):
    with pytest.raises(ValueError, match="unknown joint 'nope'"):
        model.q_index("nope")


DTYPE_CASES = {
    "complex q": lambda m: jaxrbd.inverse_dynamics(m, Z + 1j, Z, Z),
    "complex qd": lambda m: jaxrbd.forward_dynamics(m, Z, Z.astype(complex), Z),
    "bool tau": lambda m: jaxrbd.forward_dynamics(m, Z, Z, Z.astype(bool)),
    "bool q": lambda m: jaxrbd.mass_matrix(m, Z.astype(bool)),
    "complex f_ext": lambda m: jaxrbd.inverse_dynamics(m, Z, Z, Z, F_OK.astype(complex)),
    "complex minv_times tau": lambda m: jaxrbd.minv_times(m, Z, Z.astype(complex)),
    "bool forward_kinematics": lambda m: jaxrbd.forward_kinematics(m, Z.astype(bool)),
    "complex integrate": lambda m: jaxrbd.integrate(m, Z, Z.astype(complex)),
    "complex batched Q": lambda m: jaxrbd.batched.mass_matrix(m, np.zeros((2, NQ), complex)),
    "string tau": lambda m: jaxrbd.forward_dynamics(m, Z, Z, "abc"),
}


@pytest.mark.parametrize("case", list(DTYPE_CASES))
def test_non_real_dtypes_raise_type_error(model, case):
    with pytest.raises(TypeError, match=r"dtype|array of numbers"):
        DTYPE_CASES[case](model)


def test_integer_inputs_are_accepted(model):
    """Integer arrays are numbers: they are converted to the model's float dtype."""
    tau = jaxrbd.gravity_forces(model, np.zeros(NQ, dtype=np.int32))
    assert tau.dtype == model.dtype and tau.shape == (NV,)


def test_unknown_method(model):
    with pytest.raises(ValueError, match="method"):
        jaxrbd.forward_dynamics(model, Z, Z, Z, method="newton")


def test_lookup_errors(model):
    with pytest.raises(ValueError, match="nope"):
        model.body_id("nope")
    with pytest.raises(ValueError, match="out of range"):
        model.body_id(99)
    with pytest.raises(ValueError, match="nope"):
        model.q_index("nope")
    with pytest.raises(ValueError, match="traversal"):
        model.with_traversal("sideways")


# ----------------------------------------------------------------------------- the builder

I3 = np.eye(3) * 0.1
GOOD = Body(1.0, (0.0, 0.0, 0.1), I3)


def _builder():
    b = ModelBuilder()
    b.add_body("base", "world", joints.revolute((0, 0, 1)), GOOD)
    return b


BUILDER_CASES = {
    "unknown parent": (
        lambda b: b.add_body("arm", "nowhere", joints.revolute(), GOOD),
        "unknown parent",
    ),
    "unknown parent id": (
        lambda b: b.add_body("arm", 7, joints.revolute(), GOOD),
        "unknown parent",
    ),
    "duplicate body name": (
        lambda b: b.add_body("base", "world", joints.revolute(), GOOD),
        "duplicate body name",
    ),
    "duplicate joint name": (
        lambda b: b.add_body("arm", "base", joints.revolute(), GOOD, joint_name="base"),
        "duplicate joint name",
    ),
    "negative mass": (
        lambda b: b.add_body("arm", "base", joints.revolute(), Body(-1.0, (0, 0, 0), I3)),
        "negative mass",
    ),
    "non-finite mass": (
        lambda b: b.add_body("arm", "base", joints.revolute(), Body(np.nan, (0, 0, 0), I3)),
        "not finite",
    ),
    "non-symmetric inertia": (
        lambda b: b.add_body(
            "arm",
            "base",
            joints.revolute(),
            Body(1.0, (0, 0, 0), [[0.1, 0.01, 0], [0, 0.1, 0], [0, 0, 0.1]]),
        ),
        "not symmetric",
    ),
    "non-PSD inertia": (
        lambda b: b.add_body(
            "arm", "base", joints.revolute(), Body(1.0, (0, 0, 0), np.diag([0.1, 0.1, -0.1]))
        ),
        "positive semidefinite",
    ),
    "triangle inequality": (
        lambda b: b.add_body(
            "arm", "base", joints.revolute(), Body(1.0, (0, 0, 0), np.diag([0.1, 0.1, 0.3]))
        ),
        "triangle inequality",
    ),
    "com shape": (
        lambda b: b.add_body("arm", "base", joints.revolute(), Body(1.0, (0, 0), I3)),
        r"com has shape \(2,\)",
    ),
    "inertia shape": (
        lambda b: b.add_body("arm", "base", joints.revolute(), Body(1.0, (0, 0, 0), np.eye(2))),
        r"inertia has shape \(2, 2\)",
    ),
    "placement translation shape": (
        lambda b: b.add_body("arm", "base", joints.revolute(), GOOD, Transform(translation=(1, 2))),
        "translation has shape",
    ),
    "placement rotation shape": (
        lambda b: b.add_body("arm", "base", joints.revolute(), GOOD, Transform(rotation=np.eye(2))),
        "rotation has shape",
    ),
    "placement not a rotation": (
        lambda b: b.add_body(
            "arm", "base", joints.revolute(), GOOD, Transform(rotation=np.diag([1.0, 2.0, 1.0]))
        ),
        "not a rotation",
    ),
    "placement reflection": (
        lambda b: b.add_body(
            "arm", "base", joints.revolute(), GOOD, Transform(rotation=np.diag([1.0, 1.0, -1.0]))
        ),
        "not a rotation",
    ),
    "placement not finite": (
        lambda b: b.add_body(
            "arm", "base", joints.revolute(), GOOD, Transform(translation=(0, np.inf, 0))
        ),
        "finite",
    ),
}


@pytest.mark.parametrize("case", list(BUILDER_CASES))
def test_builder_rejects_bad_bodies_naming_them(case):
    call, match = BUILDER_CASES[case]
    b = _builder()
    # physically inconsistent inertias warn by default (tests/test_robots.py); strict here
    b.inertia_check = "error"
    with pytest.raises(ValueError, match=match) as info:
        call(b)
    name = "base" if case == "duplicate body name" else "arm"
    assert repr(name) in str(info.value), f"message does not name body {name!r}: {info.value}"


def test_builder_rejects_a_non_joint():
    with pytest.raises(TypeError, match="arm"):
        _builder().add_body("arm", "base", "revolute", GOOD)


def test_builder_failure_leaves_the_builder_usable():
    b = _builder()
    with pytest.raises(ValueError):
        b.add_body("arm", "base", joints.revolute(), Body(-1.0, (0, 0, 0), I3))
    b.add_body("arm", "base", joints.revolute(), GOOD)
    assert b.build().body_names == ("world", "base", "arm")


JOINT_CASES = {
    "revolute zero axis": (lambda: joints.revolute((0, 0, 0)), "zero"),
    "prismatic zero axis": (lambda: joints.prismatic((0.0, 0.0, 0.0)), "zero"),
    "helical zero axis": (lambda: joints.helical((0, 0, 0), 0.1), "zero"),
    "revolute axis shape": (lambda: joints.revolute((1, 0)), r"axis has shape \(2,\)"),
    "revolute axis not finite": (lambda: joints.revolute((np.nan, 0, 1)), "not finite"),
    "helical pitch not finite": (lambda: joints.helical((0, 0, 1), np.inf), "pitch"),
    "custom zero column": (lambda: joints.custom([[0, 0, 0, 0, 0, 0]]), "zero"),
    "custom too many columns": (
        lambda: joints.custom(np.eye(6).tolist() + [[1, 0, 0, 0, 0, 0]]),
        r"shape \(7, 6\)",
    ),
    "custom wrong width": (lambda: joints.custom([[1, 0, 0, 0, 0]]), r"shape"),
    "custom non-unit rotation": (lambda: joints.custom([[0, 0, 2, 0, 0, 0]]), "norm"),
}


@pytest.mark.parametrize("case", list(JOINT_CASES))
def test_joint_constructors_reject_bad_axes(case):
    call, match = JOINT_CASES[case]
    with pytest.raises(ValueError, match=match):
        call()


def test_builder_gravity_must_be_a_3_vector():
    with pytest.raises(ValueError, match="gravity"):
        ModelBuilder(gravity=(0.0, -9.81))
    with pytest.raises(ValueError, match="gravity"):
        ModelBuilder(gravity=(0.0, 0.0, np.nan))


def test_models_reject_bad_arguments():
    with pytest.raises(ValueError, match="joint"):
        jaxrbd.models.triple_pendulum("hinge")
    with pytest.raises(ValueError, match="n >= 1"):
        jaxrbd.models.chain(0)
