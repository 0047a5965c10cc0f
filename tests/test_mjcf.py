"""`load_mjcf` against MuJoCo: dynamics, kinematics, sites, equality constraints, passive
forces, the qpos/qvel converters, the unmapped-elements warning and the errors."""

from __future__ import annotations

import pathlib
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

mujoco = pytest.importorskip("mujoco", reason="load_mjcf needs MuJoCo (pip install jaxrbd[mjcf])")

import jaxrbd  # noqa: E402
from jaxrbd import io as jio  # noqa: E402

DATA = pathlib.Path(__file__).parent / "data"
MODELS = ["mjcf_floating.xml", "mjcf_arm.xml"]
TOL = 1e-9


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jio.load_mjcf(path, return_constraints=True, return_info=True, **kw)


@pytest.fixture(scope="module", params=MODELS)
def loaded(request):
    path = DATA / request.param
    m = mujoco.MjModel.from_xml_path(str(path))
    model, cs, info = _load(path)
    return request.param, m, model, cs, info


def random_qpos(m, rng):
    qpos = np.array(m.qpos0)
    for j in range(m.njnt):
        a, t = m.jnt_qposadr[j], m.jnt_type[j]
        if t == mujoco.mjtJoint.mjJNT_FREE:
            qpos[a : a + 3] = rng.uniform(-1, 1, 3)
            u = rng.normal(size=4)
            qpos[a + 3 : a + 7] = u / np.linalg.norm(u)
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            u = rng.normal(size=4)
            qpos[a : a + 4] = u / np.linalg.norm(u)
        else:
            qpos[a] = rng.uniform(-1.5, 1.5)
    return qpos


def _full_M(m, d):
    """MuJoCo's dense mass matrix (``mj_fullM`` takes ``d`` from MuJoCo 4, ``d.qM`` before)."""
    M = np.zeros((m.nv, m.nv))
    try:
        mujoco.mj_fullM(m, d, M)
    except TypeError:
        mujoco.mj_fullM(m, M, d.qM)
    return M


def _mj_state(m, seed):
    rng = np.random.default_rng(seed)
    return random_qpos(m, rng), rng.uniform(-1, 1, m.nv), rng.uniform(-1, 1, m.nv), rng.uniform(-1, 1, m.nv)


# ------------------------------------------------------------------ structure


def test_joint_order_is_qpos_order(loaded):
    _, m, model, _, _ = loaded
    assert (model.nq, model.nv) == (m.nq, m.nv)
    for j in range(m.njnt):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
        assert model.q_index(name).start == m.jnt_qposadr[j], name
        assert model.v_index(name).start == m.jnt_dofadr[j], name
    kinds = {0: "free", 1: "spherical", 2: "prismatic", 3: "revolute"}
    got = [model.joint_label[model._joint_body(n)] for n in model.joint_names]
    assert got == [kinds[int(t)] for t in m.jnt_type]


def test_bodies_and_sites_resolve_by_mujoco_name(loaded):
    _, m, model, _, info = loaded
    for i in range(m.nbody):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i)
        assert model.body_names[model.body_id(name)] == name
    for s in range(m.nsite):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, s)
        assert info.sites[name] == name and model.body_id(name) > 0


def test_joint_properties(loaded):
    _, m, model, _, _ = loaded
    # MuJoCo's DoF order, with a free joint's [linear; angular] swapped to jaxrbd's.
    perm = np.arange(m.nv)
    for j in range(m.njnt):
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            a = m.jnt_dofadr[j]
            perm[a : a + 6] = a + np.array([3, 4, 5, 0, 1, 2])
    np.testing.assert_array_equal(model.armature, m.dof_armature[perm])
    np.testing.assert_array_equal(model.damping, m.dof_damping[perm])
    np.testing.assert_array_equal(model.friction, m.dof_frictionloss[perm])
    np.testing.assert_array_equal(model.spring_reference, m.qpos_spring)
    np.testing.assert_array_equal(model.stiffness, m.jnt_stiffness[m.dof_jntid][perm])
    assert np.any(model.armature > 0)
    np.testing.assert_allclose(model.gravity, m.opt.gravity, rtol=0, atol=0)
    for j in range(m.njnt):
        if m.jnt_limited[j] and m.jnt_type[j] in (2, 3):
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
            s = model.q_index(name).start
            assert (model.q_lower[s], model.q_upper[s]) == tuple(m.jnt_range[j])


# ------------------------------------------------------------------ against MuJoCo

NSTATES = 3


def _jaxrbd_side(model, cs, qpos, qvel, qacc, qfrc, site, gravcomp):
    """Everything the comparisons need from jaxrbd at one MuJoCo state (one compile per
    model: the suite's time is compile time)."""
    import equinox as eqx

    v = jio.qvel_to_v(model, qpos, qvel)
    R, p = jaxrbd.forward_kinematics(model, qpos)
    no_friction = eqx.tree_at(lambda x: x.friction, model, jnp.zeros_like(model.friction))
    return dict(
        T=jax.jacfwd(lambda x: jio.v_to_qvel(model, qpos, x))(v),
        H=jaxrbd.mass_matrix(model, qpos),
        tau=jaxrbd.inverse_dynamics(model, qpos, v, jio.qacc_to_qdd(model, qpos, qvel, qacc)),
        qdd=jaxrbd.forward_dynamics(model, qpos, v, jio.qfrc_to_tau(model, qpos, qfrc)),
        R=R,
        p=p,
        passive=jaxrbd.generalized_forces(jaxrbd.passive_forces(no_friction), no_friction, qpos, v),
        residual=jaxrbd.constraint_residual(model, qpos, cs),
        G=jaxrbd.constraint_jacobian(model, qpos, cs),
        site=jaxrbd.point_position(model, qpos, site, jnp.zeros(3, qpos.dtype)),
        # J^T f of the gravity-compensation forces: ID without them minus ID with them
        gravcomp=jaxrbd.inverse_dynamics(model, qpos, v * 0, v * 0)
        - jaxrbd.inverse_dynamics(model, qpos, v * 0, v * 0,
                                  jio.gravity_compensation_forces(model, qpos, dict(gravcomp))),
    )


_JAXRBD_SIDE = jax.jit(
    jax.vmap(_jaxrbd_side, in_axes=(None, None, 0, 0, 0, 0, None, None)), static_argnums=(6, 7)
)


@pytest.fixture(scope="module")
def compared(loaded):
    """MuJoCo's and jaxrbd's quantities at ``NSTATES`` random states."""
    name, m, model, cs, info = loaded
    states = [_mj_state(m, seed) for seed in range(NSTATES)]
    states.append((np.array(m.qpos0),) + states[0][1:])  # the model's reference configuration
    ref = {k: [] for k in ("M", "rne", "qacc", "xpos", "xmat", "site_xpos", "site_xmat",
                           "passive", "efc_pos", "efc_J", "gravcomp")}
    # Unconstrained forward dynamics: MuJoCo's own qacc with constraints, passive forces
    # and actuators switched off.
    m_free = mujoco.MjModel.from_xml_path(str(DATA / name))
    for flag in ("CONSTRAINT", "SPRING", "DAMPER", "ACTUATION"):
        m_free.opt.disableflags |= int(getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag}"))
    d, d_free = mujoco.MjData(m), mujoco.MjData(m_free)
    for qpos, qvel, qacc, qfrc in states:
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        M = _full_M(m, d)
        rows = np.flatnonzero(d.efc_type == int(mujoco.mjtConstraint.mjCNSTR_EQUALITY))
        ref["efc_pos"].append(d.efc_pos[rows].copy())
        ref["efc_J"].append(d.efc_J.reshape(-1, m.nv)[rows].copy())
        ref["passive"].append(d.qfrc_spring + d.qfrc_damper)
        ref["gravcomp"].append(d.qfrc_gravcomp.copy())
        for k in ("xpos", "xmat", "site_xpos", "site_xmat"):
            ref[k].append(np.array(getattr(d, k)))
        d.qacc[:] = qacc
        rne = np.zeros(m.nv)
        mujoco.mj_rne(m, d, 1, rne)
        ref["rne"].append(rne + m.dof_armature * qacc)  # mj_rne is the rigid-body part only
        ref["M"].append(M)
        d_free.qpos[:], d_free.qvel[:], d_free.qfrc_applied[:] = qpos, qvel, qfrc
        mujoco.mj_forward(m_free, d_free)
        ref["qacc"].append(d_free.qacc.copy())
    args = [jnp.asarray(np.array([s[k] for s in states])) for k in range(4)]
    gravcomp = tuple(info.gravity_compensation.items())
    got = {k: np.asarray(x)
           for k, x in _JAXRBD_SIDE(model, cs, *args, next(iter(info.sites)), gravcomp).items()}
    return name, m, model, info, states, ref, got


def _check_dynamics_match_mujoco(compared):
    """``mj_fullM`` vs `mass_matrix` (armature included), ``mj_rne`` (+ armature) vs
    `inverse_dynamics`, MuJoCo's unconstrained ``qacc`` vs `forward_dynamics`."""
    name, m, model, _, states, ref, got = compared
    for s, (qpos, qvel, qacc, qfrc) in enumerate(states):
        q, T = jnp.asarray(qpos), got["T"][s]
        assert rel(got["H"][s], T.T @ ref["M"][s] @ T) < TOL, (name, s)
        assert rel(got["tau"][s], jio.qfrc_to_tau(model, q, ref["rne"][s])) < TOL, (name, s)
        assert rel(got["qdd"][s], jio.qacc_to_qdd(model, q, qvel, ref["qacc"][s])) < TOL, (name, s)


def _check_body_and_site_poses_match_mujoco(compared):
    name, m, model, info, states, ref, got = compared
    for s in range(len(states)):
        for i in range(1, m.nbody):
            b = model.body_id(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i))
            np.testing.assert_allclose(got["p"][s, b], ref["xpos"][s][i], atol=1e-12, err_msg=name)
            np.testing.assert_allclose(got["R"][s, b].ravel(), ref["xmat"][s][i], atol=1e-12)
        for site, jname in info.sites.items():
            b, sid = model.body_id(jname), mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, site)
            np.testing.assert_allclose(got["p"][s, b], ref["site_xpos"][s][sid], atol=1e-12, err_msg=site)
            np.testing.assert_allclose(got["R"][s, b].ravel(), ref["site_xmat"][s][sid], atol=1e-12)


def _check_site_is_usable_as_a_body(compared):
    name, m, model, info, states, ref, got = compared
    sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, next(iter(info.sites)))
    for s in range(len(states)):
        np.testing.assert_allclose(got["site"][s], ref["site_xpos"][s][sid], atol=1e-12)


def _check_equalities_hold_at_qpos0(compared):
    """MuJoCo computes the second anchor of a connect between bodies from qpos0, so the
    closure holds there (between sites it need not)."""
    name, m, model, info, states, ref, got = compared
    between_bodies = [e for e in info.equalities
                      if e["type"] == "connect" and not set(e["bodies"]) & set(info.sites.values())]
    for e in between_bodies:
        np.testing.assert_allclose(got["residual"][-1][e["rows"]], 0.0, atol=1e-12)
    assert between_bodies or name == "mjcf_arm.xml"


def _check_passive_forces_match_mujoco(compared):
    """Springs (hinge, slide and ball joints) and dampers: `passive_forces` against MuJoCo's
    ``qfrc_spring + qfrc_damper`` (dry friction is a constraint in MuJoCo, left out here)."""
    name, m, model, _, states, ref, got = compared
    for s, (qpos, *_) in enumerate(states):
        want = jio.qfrc_to_tau(model, jnp.asarray(qpos), ref["passive"][s])
        assert rel(got["passive"][s], want) < TOL, (name, s)
        assert np.abs(ref["passive"][s]).max() > 0


def _check_gravity_compensation_matches_mujoco(compared):
    """`gravity_compensation_forces` as ``f_ext`` against MuJoCo's ``qfrc_gravcomp``."""
    name, m, model, info, states, ref, got = compared
    assert bool(info.gravity_compensation) == (name == "mjcf_floating.xml")
    for s, (qpos, *_) in enumerate(states):
        want = jio.qfrc_to_tau(model, jnp.asarray(qpos), ref["gravcomp"][s])
        np.testing.assert_allclose(got["gravcomp"][s], want, rtol=0,
                                   atol=TOL * max(1.0, np.abs(want).max()), err_msg=name)


def _check_equality_constraints_match_mujoco(compared):
    """Residuals and Jacobians of the loop closures against MuJoCo's equality rows:
    connect rows equal; weld position rows equal, orientation rows MuJoCo's
    ``torquescale · (quaternion vector part)`` in body 2's frame, ``± sin(θ/2) axis``,
    against jaxrbd's ``θ axis`` in world axes."""
    name, m, model, info, states, ref, got = compared
    cs_rows = sum(3 if e["type"] == "connect" else 6 for e in info.equalities)
    assert info.constraints.size == cs_rows and got["residual"].shape[1] == cs_rows
    for s in range(len(states)):
        r, pos = got["residual"][s], ref["efc_pos"][s]
        k = 0
        for e in info.equalities:
            rows = r[e["rows"]]
            if e["type"] == "connect":
                np.testing.assert_allclose(rows, pos[k : k + 3], atol=1e-12, err_msg=e["name"])
                k += 3
                continue
            np.testing.assert_allclose(rows[3:], pos[k : k + 3], atol=1e-12, err_msg=e["name"])
            theta = np.linalg.norm(rows[:3])
            mj = got["R"][s, model.body_id(e["bodies"][1])] @ pos[k + 3 : k + 6]
            want = np.sin(theta / 2) * rows[:3] / theta
            sign = np.sign(mj @ want)  # MuJoCo's quaternion difference is not sign-canonical
            np.testing.assert_allclose(sign * mj, want, atol=1e-12, err_msg=e["name"])
            k += 6
        # Same constrained directions: MuJoCo's rows lie in the span of jaxrbd's, same rank.
        G, JT = got["G"][s], ref["efc_J"][s] @ got["T"][s]
        coef, *_ = np.linalg.lstsq(G.T, JT.T, rcond=None)
        np.testing.assert_allclose(G.T @ coef, JT.T, atol=1e-10)
        assert np.linalg.matrix_rank(G) == np.linalg.matrix_rank(JT)


def test_against_mujoco(compared):
    """Every comparison with MuJoCo on one model, in one test: the jaxrbd side compiles
    once per model, and xdist then never compiles a model in two workers."""
    for check in (
        _check_dynamics_match_mujoco,
        _check_body_and_site_poses_match_mujoco,
        _check_site_is_usable_as_a_body,
        _check_equalities_hold_at_qpos0,
        _check_passive_forces_match_mujoco,
        _check_equality_constraints_match_mujoco,
        _check_gravity_compensation_matches_mujoco,
    ):
        check(compared)


# ------------------------------------------------------------------ converters


def _round_trips(model, qpos, qvel, qacc, qfrc):
    q = jio.qpos_to_q(model, qpos)
    v = jio.qvel_to_v(model, q, qvel)
    qdd = jio.qacc_to_qdd(model, q, qvel, qacc)
    tau = jio.qfrc_to_tau(model, q, qfrc)
    return dict(
        qpos=jio.q_to_qpos(model, q), v=v, qvel=jio.v_to_qvel(model, q, v),
        qacc=jio.qdd_to_qacc(model, q, v, qdd), tau=tau, qfrc=jio.tau_to_qfrc(model, q, tau),
    )


def test_converters_round_trip_and_power():
    """Round trips, the free joint's ``[ω_body; Rᵀ ṗ]`` and kept power, under jit and vmap."""
    model, _, info = _load(DATA / "mjcf_floating.xml")
    m = info.mjmodel
    states = [_mj_state(m, seed) for seed in (11, 12)]
    args = [jnp.asarray(np.array([s[k] for s in states])) for k in range(4)]
    out = jax.jit(jax.vmap(_round_trips, in_axes=(None, 0, 0, 0, 0)))(model, *args)
    d = mujoco.MjData(m)
    for s, (qpos, qvel, qacc, qfrc) in enumerate(states):
        np.testing.assert_array_equal(out["qpos"][s], qpos)
        for key, want in (("qvel", qvel), ("qacc", qacc), ("qfrc", qfrc)):
            np.testing.assert_allclose(out[key][s], want, atol=1e-14, err_msg=key)
        np.testing.assert_allclose(out["v"][s] @ out["tau"][s], qvel @ qfrc, rtol=1e-13)
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        R = d.xmat[m.body("torso").id].reshape(3, 3)
        np.testing.assert_allclose(out["v"][s][:3], qvel[3:6], atol=1e-15)
        np.testing.assert_allclose(out["v"][s][3:6], R.T @ qvel[:3], atol=1e-14)
        np.testing.assert_array_equal(out["v"][s][6:], qvel[6:])


def test_converter_shape_errors():
    model, _, _ = _load(DATA / "mjcf_arm.xml")
    with pytest.raises(ValueError, match="qpos has shape"):
        jio.qpos_to_q(model, np.zeros(model.nq + 1))
    with pytest.raises(ValueError, match="qvel has shape"):
        jio.qvel_to_v(model, np.zeros(model.nq), np.zeros(model.nv + 2))


# ------------------------------------------------------------------ input forms, warnings, errors


def test_input_forms_and_return_forms():
    path = DATA / "mjcf_arm.xml"
    text = path.read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = jio.load_mjcf(path)
        b = jio.load_mjcf(str(path))
        c = jio.load_mjcf(text)
        d = jio.load_mjcf(text.encode())
        e = jio.load_mjcf(mujoco.MjSpec.from_file(str(path)))
        f = jio.load_mjcf(mujoco.MjModel.from_xml_path(str(path)))
        model, cs = jio.load_mjcf(path, return_constraints=True)
        model2, info = jio.load_mjcf(path, return_info=True)
    for x in (b, c, d, e, f, model, model2):
        assert isinstance(x, jaxrbd.Model) and x.body_names == a.body_names
        np.testing.assert_array_equal(x.inertia, a.inertia)
    assert isinstance(cs, jaxrbd.ConstraintSet) and cs.size == 9
    assert isinstance(info, jio.MJCFInfo) and info.constraints.size == 9
    assert jaxrbd.io.load_mjcf is jio.load_mjcf


def test_unmapped_elements_are_named_in_one_warning():
    with pytest.warns(UserWarning, match="not represented") as rec:
        jio.load_mjcf(DATA / "mjcf_floating.xml")
    msgs = [str(w.message) for w in rec if "not represented" in str(w.message)]
    assert len(msgs) == 1
    assert "gravity compensation (gravcomp, not applied): hip (0.5), block (1)" in msgs[0]
    # a fixed tendon without springs or limits and a motor on a hinge are mapped
    assert "coupling" not in msgs[0] and "hip_motor" not in msgs[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jio.load_mjcf(DATA / "mjcf_floating.xml", warn_unmapped=False)


def test_gravcomp_mocap_gravity_flag_and_names():
    xml = """
    <mujoco>
      <option><flag gravity="disable"/></option>
      <worldbody>
        <body name="mocap" mocap="true" pos="0 0 1"/>
        <body pos="0 0 1" gravcomp="1">
          <joint name="s" type="hinge" axis="1 0 0"/>
          <geom size="0.1" mass="1"/>
          <site name="s" pos="0 0 -0.1"/>
          <body name="s" pos="0 0 -0.3">
            <joint type="slide" pos="0 0.1 0"/>
            <geom size="0.1" mass="1"/>
          </body>
        </body>
      </worldbody>
      <equality><weld body1="mocap" body2="s" active="false"/></equality>
    </mujoco>"""
    with pytest.warns(UserWarning) as rec:
        model, info = jio.load_mjcf(xml, return_info=True)
    msg = "\n".join(str(w.message) for w in rec)
    assert "gravcomp" in msg and "mocap" in msg and "inactive" in msg
    assert info.gravity_compensation == {"body2": 1.0}
    np.testing.assert_array_equal(model.gravity, 0.0)
    # Joint names are MuJoCo's ("joint<id>" when unnamed); a fixed joint whose default
    # name (its body's) is taken by a MuJoCo joint gets a suffix.
    assert model.joint_names == ("s", "joint1")
    assert model.joint_name[model.body_id("s")] == "s_fixed"
    # The site named like a body gets a suffix; the slide joint's anchor is off the body
    # origin, so the moving body has a derived name and "s" (the body) is MuJoCo's frame.
    assert info.sites == {"s": "s_site"}
    assert "s/joint1" in model.body_names and model.body_id("s") > model.body_id("s/joint1")
    assert info.constraints is None


def test_several_joints_on_one_body_are_a_massless_chain():
    model, _, _ = _load(DATA / "mjcf_floating.xml")
    hip_x = model.body_id("hip/hip_x")
    hip_y = model.body_id("hip/hip_y")
    assert model.inertia[hip_x, 0] == 0 and model.inertia[hip_y, 0] == 0
    assert model.body_parent[model.body_id("hip")] == hip_y
    assert model.inertia[model.body_id("hip")][0] > 0


def test_errors():
    with pytest.raises(FileNotFoundError, match="no MJCF file"):
        jio.load_mjcf(DATA / "does_not_exist.xml")
    with pytest.raises(ValueError, match="MuJoCo could not compile"):
        jio.load_mjcf("<mujoco><worldbody><body><joint type='hinge'/></body></worldbody></mujoco>")
    with pytest.raises(ValueError, match="MuJoCo could not compile"):
        jio.load_mjcf("<mujoco><worldbody><bogus/></worldbody></mujoco>")
    with pytest.raises(TypeError, match="expected a path"):
        jio.load_mjcf(3.0)
    with pytest.raises(ValueError, match="inertia_check"):
        jio.load_mjcf(DATA / "mjcf_arm.xml", inertia_check="maybe")
