"""Issue 32 (reach): the last real files and bad inputs, on small files written here.

A root link named ``world`` floats as in Pinocchio; undeclared XML prefixes in blocks the
loader ignores load with a warning; identified (negative) friction loads; inertias are
checked by severity; fuzz findings (NaN IK targets, non-models, overflowing mimic
multipliers, mimic chains); the KKT solves on RBDL's floating-base spatial biped.
"""

import functools
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from helpers import assert_allclose  # noqa: E402

import jaxrbd  # noqa: E402
from jaxrbd import Body, ConstraintSet, ModelBuilder, Transform, joints, load_urdf  # noqa: E402
from jaxrbd.io._source import is_xml_text  # noqa: E402

INERTIAL = ('<inertial><origin xyz="{xyz}"/><mass value="{m}"/><inertia ixx="{i[0]}" '
            'ixy="0" ixz="0" iyy="{i[1]}" iyz="0" izz="{i[2]}"/></inertial>')


def _inertial(m=1.0, xyz="0 0 -0.3", i=(0.02, 0.02, 0.01)):
    return INERTIAL.format(m=m, xyz=xyz, i=i)


def _robot(body: str) -> str:
    return f'<robot name="r">{body}</robot>'


def _link(name, inertial=""):
    return f'<link name="{name}">{inertial}</link>'


def _joint(name, parent, child, kind="revolute", extra="", xyz="0 0 0", axis="0 1 0"):
    if kind == "revolute":  # urdfdom (Pinocchio's parser) wants limits on revolute joints
        extra = '<limit lower="-3" upper="3" effort="10" velocity="5"/>' + extra
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child '
            f'link="{child}"/><origin xyz="{xyz}"/><axis xyz="{axis}"/>{extra}</joint>')


ARM = (_link("base", _inertial(2.0, "0.05 0 0.02", (0.03, 0.04, 0.05)))
       + _link("a", _inertial()) + _link("b", _inertial(0.7, "0.1 0 -0.2"))
       + _joint("j1", "base", "a", xyz="0 0 0.1")
       + _joint("j2", "a", "b", xyz="0 0 -0.6", axis="1 0 0"))
# Kinova Gen3 / Flexiv Rizon: a massless 'world' link welded to the robot's base
WORLD_ARM = _robot(_link("world") + _joint("weld", "world", "base", "fixed", xyz="0.1 0 0.5")
                   + ARM)


#: mass matrix and inverse dynamics in one compile per model structure (eager calls of
#: the scanned algorithms compile op by op and cost several times more)
H_AND_ID = jax.jit(lambda model, q, v, a: (jaxrbd.mass_matrix(model, q),
                                           jaxrbd.inverse_dynamics(model, q, v, a)))


def _warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in caught]


# ------------------------------------------------------------------ root link 'world'


def test_world_root_floats_as_pinocchio():
    """The free joint carries the 'world' link, the robot stays welded to it: nq/nv,
    mass, mass matrix and inverse dynamics equal Pinocchio's JointModelFreeFlyer."""
    pin = pytest.importorskip("pinocchio")
    model = load_urdf(WORLD_ARM, floating_base=True)
    assert (model.nq, model.nv) == (9, 8)
    assert model.body_names[:3] == ("world", "world_link", "base")
    assert model.joint_names == ("root_joint", "j1", "j2")
    fixed = load_urdf(WORLD_ARM)  # unchanged: 'world' is the world
    assert (fixed.nq, fixed.body_names[1]) == (2, "base")

    pm = pin.buildModelFromXML(WORLD_ARM, pin.JointModelFreeFlyer())
    assert (pm.nq, pm.nv) == (model.nq, model.nv)
    assert_allclose(float(jaxrbd.total_mass(model)), sum(i.mass for i in pm.inertias),
                    rtol=1e-14, name="mass")
    rng = np.random.default_rng(0)
    quat = rng.normal(size=4)
    q = np.r_[rng.normal(size=3), quat / np.linalg.norm(quat), rng.normal(size=2)]
    v, a = rng.normal(size=8), rng.normal(size=8)
    # Pinocchio: quaternion (x, y, z, w), velocity (linear, angular) of the free joint
    q_pin = np.r_[q[:3], q[4:7], q[3], q[7:]]
    P = np.zeros((8, 8))
    P[0:3, 3:6], P[3:6, 0:3], P[6:, 6:] = np.eye(3), np.eye(3), np.eye(2)
    data = pm.createData()
    H_pin = np.array(pin.crba(pm, data, q_pin))
    H_pin = np.triu(H_pin) + np.triu(H_pin, 1).T
    H, tau = H_AND_ID(model, q, v, a)
    assert_allclose(H, P.T @ H_pin @ P, rtol=1e-13, name="H")
    assert_allclose(tau, P.T @ pin.rnea(pm, data, q_pin, P @ v, P @ a), rtol=1e-13, name="ID")


def test_world_root_float_name_clash_and_floating_base_type():
    clash = WORLD_ARM.replace('name="b"', 'name="world_link"').replace(
        'link="b"', 'link="world_link"')
    with pytest.raises(ValueError, match="'world_link': the name is taken"):
        load_urdf(clash, floating_base=True)
    for bad in ("False", 0, None):
        with pytest.raises(TypeError, match="floating_base must be a bool"):
            load_urdf(WORLD_ARM, floating_base=bad)


# ------------------------------------------------------------------ sloppy XML


def test_undeclared_prefix_in_ignored_block_loads_with_warning():
    gazebo = ('<gazebo reference="b"><sensor:camera name="cam"><sensor:image width="640"/>'
              '</sensor:camera></gazebo>')
    clean = _robot(ARM)
    model, msgs = _warnings(lambda: load_urdf(_robot(ARM + gazebo)))
    assert len(msgs) == 1
    assert "<sensor:camera> in <gazebo 'b'>, line 1" in msgs[0]
    assert "<sensor:image> in <gazebo 'b'>" in msgs[0]
    assert_allclose(model.inertia, load_urdf(clean).inertia, rtol=0, name="inertia")
    # a declared prefix (xacro leftovers) is no news
    declared = _robot('<xacro:property xmlns:xacro="http://ros.org/wiki/xacro" name="x"/>'
                      + ARM)
    assert _warnings(lambda: load_urdf(declared))[1] == []


@pytest.mark.parametrize("doctype, match", [
    ('<!DOCTYPE robot [<!ENTITY big "aaaaaaaaaa">]>', "declares the entity 'big'"),
    ('<!DOCTYPE robot [<!ENTITY ext SYSTEM "file:///etc/hostname">]>', "entity 'ext'"),
    ("", "malformed URDF XML: undefined entity"),
])
def test_entities_are_refused(doctype, match):
    xml = doctype + _robot(ARM.replace('name="a"', 'name="&big;&ext;"', 1))
    with pytest.raises(ValueError, match=match):
        load_urdf(xml)


def test_bom_string_and_bytes_are_xml(tmp_path):
    xml = _robot(ARM)
    assert is_xml_text("\ufeff\n " + xml) and not is_xml_text(str(tmp_path / "x.urdf"))
    for src in ("\ufeff" + xml, ("\ufeff" + xml).encode("utf-8")):
        assert load_urdf(src).nv == 2
    path = tmp_path / "bom.urdf"
    path.write_bytes(("\ufeff" + xml).encode("utf-8"))
    assert load_urdf(path).nv == 2
    path.write_bytes(b'<?xml version="1.0" encoding="latin-1"?>'
                     + _robot(ARM.replace('"b"', '"b\xe9"')).encode("latin-1"))
    assert "b\xe9" in load_urdf(str(path)).body_names


# ------------------------------------------------------------------ identified friction


def test_negative_friction_loads_with_warning_and_passive_forces_refuse_it():
    dyn = '<dynamics damping="0.1" friction="-0.4"/>'
    xml = _robot(ARM.replace('<axis xyz="1 0 0"/>', '<axis xyz="1 0 0"/>' + dyn))
    model, msgs = _warnings(lambda: load_urdf(xml))
    assert any("['j2'] have negative dry friction" in m for m in msgs), msgs
    assert_allclose(model.friction, [0.0, -0.4], rtol=0, name="friction")
    with pytest.raises(ValueError, match=r"passive_forces: joints \['j2'\] have negative"):
        jaxrbd.passive_forces(model)
    element = jaxrbd.PassiveJointForces()
    with pytest.raises(eqx.EquinoxRuntimeError, match="negative entries"):
        element(model, jnp.zeros(2), jnp.ones(2))
    with pytest.raises(ValueError, match="damping must be >= 0"):  # others keep their sign
        load_urdf(xml.replace('damping="0.1"', 'damping="-0.1"'))


# ------------------------------------------------------------------ inertias by severity


@pytest.mark.parametrize("moments, severe", [
    ((-0.1, -0.1, -0.1), True),  # the case: tau = +1 gave qdd = -10
    ((0.1, 0.1, -0.06), True),
    ((0.1, 0.1, -0.03), False),  # as Romeo's trunk (-22 %) in example-robot-data
    ((0.1, 0.1, -1e-9), False),  # rounding
])
def test_negative_principal_moments_by_severity(moments, severe):
    xml = _robot(ARM.replace(_inertial(), _inertial(i=moments)))
    if severe:
        with pytest.raises(ValueError, match=r"link 'a'.*beyond the 50 %.*'ignore'"):
            load_urdf(xml)
        with pytest.raises(ValueError, match=r"body 'arm'.*not positive semidefinite"):
            ModelBuilder().add_body("arm", "world", joints.revolute(),
                                    Body(1.0, inertia=np.diag(moments)))
    else:
        _, msgs = _warnings(lambda: load_urdf(xml))
        assert any("'a': inertia is not positive semidefinite" in m for m in msgs), msgs
        with pytest.raises(ValueError, match="link 'a'"):
            load_urdf(xml, inertia_check="error")
    _, msgs = _warnings(lambda: load_urdf(xml, inertia_check="ignore"))
    assert msgs == []


def test_overflowing_parallel_axis_terms_are_refused():
    huge = _robot(ARM.replace(_inertial(), _inertial(1e300, "1e200 0 0")))
    with pytest.raises(ValueError, match=r"link 'a'.*mass 1e\+300.*overflows"):
        load_urdf(huge)
    with pytest.raises(ValueError, match=r"body 'arm'.*overflows"):
        ModelBuilder().add_body("arm", "world", joints.revolute(),
                                Body(1e300, (0.0, 0.0, 1e200), np.eye(3)))
    b = ModelBuilder()
    b.add_body("arm", "world", joints.revolute(), Body(1e39, (0.0, 0.0, 0.0), np.eye(3)))
    with pytest.raises(ValueError, match=r"\['arm'\].*overflow float32"):
        b.build(jnp.float32)


def test_overflowing_joint_placements_are_refused_naming_the_joint():
    """A finite but huge joint offset would make m |r|^2 in the composite inertias, so the
    mass matrix, inf at run time: refused at load, in every loader and in the builder."""
    with pytest.raises(ValueError, match=r"joint 'j2' \(body 'b'\): placement offset.*"
                                         r"overflow float64"):
        load_urdf(_robot(ARM.replace('xyz="0 0 -0.6"', 'xyz="0 1e200 0"')))
    mjcf = ('<mujoco><worldbody><body name="a"><joint name="h1"/><geom size=".1" mass="1"/>'
            '<body name="b" pos="1e200 0 0"><joint name="h2"/><geom size=".1" mass="1"/>'
            '</body></body></worldbody></mujoco>')
    with pytest.raises(ValueError, match=r"joint 'h2' \(body 'b'\).*overflow float64"):
        jaxrbd.load_mjcf(mjcf)
    b = ModelBuilder()
    b.add_body("arm", "world", joints.revolute(), Body(1.0, (0.0, 0.0, -0.3)),
               Transform(translation=(1e20, 0.0, 0.0)), joint_name="shoulder")
    assert b.build(jnp.float64).nv == 1  # 1e40 fits float64, not float32
    with pytest.raises(ValueError, match=r"joint 'shoulder'.*overflow float32"):
        b.build(jnp.float32)


# ------------------------------------------------------------------ fuzz findings


def test_ik_nan_target_raises():
    model = jaxrbd.models.chain(3)
    bad = jaxrbd.IKTarget("link2", position=jnp.array([jnp.nan, 0.0, 0.0]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="hold NaN or inf"):
        jaxrbd.inverse_kinematics(model, jnp.zeros(3), bad)


@pytest.mark.parametrize("bad", [None, {}, ConstraintSet.contacts_3d([("link0", [0.0, 0, 0])])],
                         ids=["None", "dict", "ConstraintSet"])
def test_non_models_give_a_type_error_naming_the_argument(bad):
    z = jnp.zeros(3)
    cs = ConstraintSet.contacts_3d([("link0", [0.0, 0, 0])])
    calls = [
        lambda: jaxrbd.forward_dynamics(bad, z, z, z),
        lambda: jaxrbd.mass_matrix(bad, z),
        lambda: jaxrbd.forward_kinematics(bad, z),
        lambda: jaxrbd.forward_dynamics_contacts(bad, z, z, z, cs),
        lambda: jaxrbd.inverse_dynamics_constraints(bad, z, z, z, cs),
        lambda: jaxrbd.passive_forces(bad),
        lambda: jaxrbd.couple(bad, {}),
        lambda: jaxrbd.inertial_parameters(bad),
        lambda: jaxrbd.rollout(bad, z, z, None, 0.01, n_steps=2, policy=lambda t, q, qd: qd),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="model must be a jaxrbd Model or CoupledModel"):
            call()


MIMIC_CHAIN = _robot(
    ARM + _link("c", _inertial(0.5, "0 0.1 -0.2"))
    + _joint("j3", "b", "c", xyz="0 0 -0.4", extra='<mimic joint="j2" multiplier="-0.5" '
                                                   'offset="0.2"/>')
).replace('axis xyz="1 0 0"/>', 'axis xyz="1 0 0"/><mimic joint="j1" multiplier="2" '
                                  'offset="0.1"/>')


def test_mimic_chain_resolves_to_the_independent_joint():
    """j3 mimics j2, which mimics j1: the chain equals j3 mimicking j1 directly with
    the composed map (Pinocchio refuses the chain and loads the direct file)."""
    direct = MIMIC_CHAIN.replace('joint="j2" multiplier="-0.5" offset="0.2"',
                                 'joint="j1" multiplier="-1.0" offset="0.15"')
    chain, ref = load_urdf(MIMIC_CHAIN), load_urdf(direct)
    assert chain.nq == 1 and chain.joint_names == ("j1",)
    q, v, a = jnp.array([0.3]), jnp.array([0.5]), jnp.array([0.2])
    (H, tau), (H_ref, tau_ref) = H_AND_ID(chain, q, v, a), H_AND_ID(ref, q, v, a)  # 1 compile
    assert_allclose(H, H_ref, rtol=1e-14, name="H")
    assert_allclose(tau, tau_ref, rtol=1e-14, name="ID")
    pin = pytest.importorskip("pinocchio")
    pm = pin.buildModelFromXML(direct, mimic=True)
    assert_allclose(H, pin.crba(pm, pm.createData(), np.asarray(q)), rtol=1e-13,
                    name="H vs Pinocchio")


def test_mimic_multiplier_that_overflows_the_mass_matrix_is_refused():
    for m in ("1e308", "1e160"):
        xml = MIMIC_CHAIN.replace('multiplier="2"', f'multiplier="{m}"')
        with pytest.raises(ValueError, match="driven by 'j1' make the mass matrix overflow"):
            load_urdf(xml)
    with pytest.raises(ValueError, match=r"chain j3 -> j2 -> j1 gives a non-finite"):
        load_urdf(MIMIC_CHAIN.replace('multiplier="2"', 'multiplier="1e200"').replace(
            'multiplier="-0.5"', 'multiplier="1e200"'))


# ------------------------------------------------------------------ RBDL's spatial biped


def _cuboid(m, x, y, z):
    return np.diag([m / 12 * (y * y + z * z), m / 12 * (x * x + z * z), m / 12 * (x * x + y * y)])


@functools.cache
def _spatial_biped():
    """RBDL's ``SpatialBipedFloatingBase`` (tests/InverseDynamicsWithConstraintsTests.cc):
    a 6-DoF pelvis (Txyz then Rxyz), 3-DoF hips, knees about y, 2-DoF ankles, both feet
    held to the world by six loop constraints each (linear rows first, as RBDL's)."""
    w, L, lf = 0.2, 0.5, 0.3
    segment = Body(5.0, (0, 0, -0.5 * L), _cuboid(5.0, 0.1 * L, 0.1 * L, L))
    pelvis = Body(50.0, (0, 0, 0), _cuboid(50.0, 0.75 * w, w, 0.5 * w))
    foot = Body(1.0, (0.5 * lf, 0, 0), _cuboid(1.0, lf, 0.1 * lf, 0.1 * lf))
    e = np.eye(6)  # [angular; linear] columns
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("pelvis", "world", joints.custom([e[3], e[4], e[5], e[0], e[1], e[2]]), pelvis)
    for side, x in (("left", -0.5 * w), ("right", 0.5 * w)):
        b.add_body(f"{side}_upper", "pelvis", joints.custom([e[0], e[1], e[2]]), segment,
                   Transform(translation=(x, 0, 0)))
        b.add_body(f"{side}_lower", f"{side}_upper", joints.revolute((0, 1, 0)), segment,
                   Transform(translation=(0, 0, -L)))
        b.add_body(f"{side}_foot", f"{side}_lower", joints.custom([e[0], e[1]]), foot,
                   Transform(translation=(0, 0, -L)))
    cs = ConstraintSet.loops(
        [(f"{s}_foot", Transform(), "world", Transform()) for s in ("left", "right")],
        axes=[e[3], e[4], e[5], e[0], e[1], e[2]], frame="a")
    return b.build(), cs


def test_rbdl_spatial_biped_idc_then_forward_dynamics():
    """RBDL's TestCorrectness2: assemble the standing pose, torques from constrained
    inverse dynamics for qdd = 0, forward dynamics returns qdd = 0 to RBDL's 1e-11 with
    the kkt and range_space methods, which agree with an LU solve of the same KKT system
    to a small multiple of cond(K) eps."""
    model, cs = _spatial_biped()
    q0 = np.zeros(18)
    q0[2], q0[7], q0[9], q0[13], q0[15] = 0.75, np.pi / 4, -np.pi / 4, -np.pi / 4, np.pi / 4
    act = [False] * 6 + [True] * 12

    @jax.jit
    def run(q0):
        q, ok = jaxrbd.assemble_q(model, q0, cs, jnp.ones(18))
        qd = jnp.zeros(18)  # RBDL assembles qd from 0: it stays 0 (G 0 = 0)
        tau, lam, qdd = jaxrbd.inverse_dynamics_constraints(model, q, qd, jnp.zeros(18), cs,
                                                            actuated=act, return_qdd=True)
        # the two refined methods (null_space already met 1e-11 and is tested elsewhere)
        fwd = {m: jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs, method=m)
               for m in ("kkt", "range_space")}
        system = (jaxrbd.mass_matrix(model, q), jaxrbd.bias_forces(model, q, qd),
                  jaxrbd.constraint_jacobian(model, q, cs), jaxrbd.constraint_bias(model, q, qd, cs))
        return ok, tau, lam, qdd, fwd, system

    ok, tau, lam, qdd, fwd, (H, C, G, gamma) = run(jnp.asarray(q0))
    assert bool(ok)
    assert_allclose(qdd, np.zeros(18), atol=1e-11, name="IDC qdd")
    K = np.block([[np.asarray(H), np.asarray(G).T], [np.asarray(G), np.zeros((12, 12))]])
    z = np.linalg.solve(K, np.r_[np.asarray(tau) - np.asarray(C), np.asarray(gamma)])
    bound = 10 * np.linalg.cond(K) * np.finfo(float).eps * np.abs(z).max()
    for method, (qdd_fd, lam_fd) in fwd.items():
        assert_allclose(qdd_fd, np.zeros(18), atol=1e-11, name=f"{method}: FD(tau_IDC)")
        assert_allclose(lam_fd, lam, rtol=1e-11, name=f"{method}: lambda")
        assert_allclose(qdd_fd, z[:18], atol=bound, name=f"{method} vs LU")
