"""`load_mjcf`'s actuators (`jaxrbd.actuation` against MuJoCo's ``qfrc_actuator``), joint
equalities as couplings, model flags, fluid forces, the checks before compiling and the
``allow_external_files=False`` mode."""

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
from jaxrbd._coupling import expand_q, expand_v  # noqa: E402

DATA = pathlib.Path(__file__).parent / "data"
ACTUATORS = DATA / "mjcf_actuators.xml"
TOL = 1e-10


def _quiet_load(src, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jio.load_mjcf(src, return_info=True, **kw)


def _warning_text(src, **kw) -> str:
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        jio.load_mjcf(src, **kw)
    return "\n".join(str(w.message) for w in rec)


def _prepare(cm, full, q, qd):
    """Full-tree states of independent ``(q, qd)`` and MuJoCo's ``qvel`` of them."""
    qf, vf = expand_q(cm, q), expand_v(cm, qd)
    return qf, vf, jio.v_to_qvel(full, qf, vf)


def _evaluate(cm, full, acts, acts_full, q, qd, qf, vf, ctrl, act, qfrc):
    return dict(
        coupled=jaxrbd.actuation(cm, q, qd, ctrl, acts, act),
        independent=jaxrbd.actuation(full, qf, vf, ctrl, acts_full, act),
        rate=jaxrbd.activation_rate(acts, ctrl, act),
        qfrc=jio.qfrc_to_tau(full, qf, qfrc),
        A=jax.jacfwd(lambda v: expand_v(cm, v))(qd),
    )


_PREPARE = jax.jit(jax.vmap(_prepare, in_axes=(None, None, 0, 0)))
_EVALUATE = jax.jit(jax.vmap(_evaluate, in_axes=(None, None, None, None) + (0,) * 7))


@pytest.fixture(scope="module")
def compared():
    """MuJoCo's qfrc_actuator and act_dot at random states that satisfy the coupling, and
    jaxrbd's actuation on the coupled and on the independent model (two compiles)."""
    m = mujoco.MjModel.from_xml_path(str(ACTUATORS))
    cm, info = _quiet_load(ACTUATORS)
    full, info_full = _quiet_load(ACTUATORS, joint_equalities="independent")
    rng = np.random.default_rng(7)
    n = 5
    q = rng.normal(size=(n, cm.nq))
    q[:, 3:7] *= 1.7  # unnormalised quaternions: MuJoCo and jaxrbd read their direction
    qd = rng.normal(size=(n, cm.nv))
    qf, vf, qvel = (np.asarray(x) for x in _PREPARE(cm, full, jnp.asarray(q), jnp.asarray(qd)))
    d = mujoco.MjData(m)
    S = {k: [] for k in ("ctrl", "act", "qfrc", "act_dot", "eq_pos")}
    for s in range(n):
        d.qpos[:], d.qvel[:] = qf[s], qvel[s]
        d.ctrl[:] = rng.uniform(-3, 3, m.nu) if s else 0.0  # beyond the ranges: clamped
        d.act[:] = rng.uniform(-1, 1, m.na)
        mujoco.mj_forward(m, d)
        rows = d.efc_type == int(mujoco.mjtConstraint.mjCNSTR_EQUALITY)
        for k, x in (("ctrl", d.ctrl), ("act", d.act), ("act_dot", d.act_dot),
                     ("eq_pos", d.efc_pos[rows]), ("qfrc", d.qfrc_actuator)):
            S[k].append(np.array(x))
    S = {k: np.array(v) for k, v in S.items()}
    S.update(q=q, qd=qd, qf=qf, vf=vf, qvel=qvel)
    got = _EVALUATE(cm, full, info.actuators, info_full.actuators,
                    *(jnp.asarray(S[k]) for k in ("q", "qd", "qf", "vf", "ctrl", "act", "qfrc")))
    got = {k: np.asarray(v) for k, v in got.items()}
    S["qfrc"] = got.pop("qfrc")
    return dict(m=m, cm=cm, full=full, info=info, info_full=info_full, S=S, A=got.pop("A")[0], **got)


def test_actuation_equals_mujoco(compared):
    """Every actuator of the file is mapped, and `actuation` is MuJoCo's ``qfrc_actuator``:
    on the independent tree exactly, on the coupled model as ``Aᵀ qfrc_actuator``."""
    S, info = compared["S"], compared["info"]
    assert all(info.actuators.mapped) and info.actuators.nu == compared["m"].nu
    # h1 takes the gravity compensation of body b as an actuator force (actuatorgravcomp)
    assert info.actuators.gravity_compensation_dofs == (compared["full"].v_index("h1").start,)
    assert np.abs(S["qfrc"]).max() > 1.0
    scale = max(1.0, np.abs(S["qfrc"]).max())
    np.testing.assert_allclose(compared["independent"], S["qfrc"], rtol=0, atol=TOL * scale)
    want = S["qfrc"] @ compared["A"]
    np.testing.assert_allclose(compared["coupled"], want, rtol=0, atol=TOL * scale)
    np.testing.assert_allclose(compared["rate"], S["act_dot"], rtol=0, atol=1e-12)


def test_ranges_are_active(compared):
    """The states exercise the clamps (else the comparison would not test them)."""
    S, m = compared["S"], compared["m"]
    lo, hi = m.actuator_ctrlrange[0]
    assert np.any(S["ctrl"][:, 0] > hi) or np.any(S["ctrl"][:, 0] < lo)
    d = mujoco.MjData(m)
    hit_force = hit_joint = False
    for s in range(len(S["qf"])):
        d.qpos[:], d.ctrl[:], d.act[:] = S["qf"][s], S["ctrl"][s], S["act"][s]
        d.qvel[:] = S["qvel"][s]
        mujoco.mj_forward(m, d)
        hit_force |= bool(np.isclose(abs(d.actuator_force[1]), 5.0))
        dof = m.jnt_dofadr[m.joint("h2").id]
        hit_joint |= bool(np.isclose(d.qfrc_actuator[dof], -0.7) or np.isclose(d.qfrc_actuator[dof], 0.8))
    assert hit_force and hit_joint


def test_joint_equality_is_an_exact_coupling(compared):
    """``follower = -0.5 h1 + (ref + 0.1)``: the expanded states satisfy MuJoCo's equality
    (its residual is zero at every compared state)."""
    cm, S = compared["cm"], compared["S"]
    assert isinstance(cm, jaxrbd.CoupledModel) and cm.coupled_joints == ("follower",)
    assert compared["info"].couplings["follower"][:2] == ("h1", -0.5)
    assert S["eq_pos"].shape == (len(S["q"]), 1)
    np.testing.assert_allclose(S["eq_pos"], 0.0, atol=1e-14)
    with pytest.raises(TypeError, match="pass model.base"):  # MuJoCo's vectors: full tree
        jio.qvel_to_v(cm, S["qf"][0], S["qvel"][0])


def test_actuation_gradients_and_errors(compared):
    """Forward and reverse mode agree (the ball and free moment arms depend on ``q``), and
    the gain is a leaf `jax.grad` reaches. One JVP and one VJP (a dot-product test:
    ``u · (J v) = (Jᵀ u) · v``) cost half the compile of two full Jacobians."""
    cm, acts = compared["full"], compared["info_full"].actuators
    q, qd = jnp.asarray(compared["S"]["qf"][2]), jnp.asarray(compared["S"]["vf"][2])
    ctrl, act = jnp.asarray(compared["S"]["ctrl"][2]) * 0.1, jnp.asarray(compared["S"]["act"][2])
    rng = np.random.default_rng(3)
    u, v = jnp.asarray(rng.normal(size=cm.nv)), jnp.asarray(rng.normal(size=cm.nq))  # tau, q

    @jax.jit
    def derivatives(x, a):
        def f(y, b):
            return jaxrbd.actuation(cm, y, qd, ctrl, b, act)

        _, Jv = jax.jvp(lambda y: f(y, a), (x,), (v,))
        _, pullback = jax.vjp(f, x, a)
        uJ, u_acts = pullback(u)
        return Jv, uJ, u_acts.gain

    Jv, uJ, g = derivatives(q, acts)
    assert float(jnp.abs(Jv).max()) > 0.1
    assert float(u @ Jv) == pytest.approx(float(uJ @ v), rel=1e-12, abs=1e-12)
    # the motor on h1 (gear 2, control within its range): d (u · tau) / d gain = 2 ctrl u_h1
    h1 = cm.v_index("h1").start
    assert g[0, 0] == pytest.approx(2 * float(ctrl[0]) * float(u[h1]), abs=1e-14)
    with pytest.raises(ValueError, match="ctrl has shape"):
        jaxrbd.actuation(cm, q, qd, ctrl[:3], acts, act)
    with pytest.raises(ValueError, match="activation state, pass act"):
        jaxrbd.actuation(cm, q, qd, ctrl, acts)
    with pytest.raises(TypeError, match="actuators must be an Actuators"):
        jaxrbd.actuation(cm, q, qd, ctrl, None, act)
    other = jaxrbd.models.chain(2)
    with pytest.raises(ValueError, match="actuators act on a tree with"):
        jaxrbd.actuation(other, jnp.zeros(2), jnp.zeros(2), ctrl, acts, act)


UNMAPPED = """
<mujoco>
  <option density="1.2" viscosity="2e-5"><flag spring="disable" damper="disable"/></option>
  <worldbody>
    <body name="a"><joint name="h1" stiffness="3" damping="2" frictionloss="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="1"/>
      <site name="s1" pos="0 0 -0.3"/>
      <body name="b" pos="0 0 -0.3"><joint name="h2" damping="1" stiffness="2"/>
        <geom size="0.05" mass="1"/><site name="s2"/>
        <body name="c" pos="0 0 -0.1"><joint name="h3"/><joint name="h4" axis="1 0 0"/>
          <joint name="h5" axis="0 1 0"/><geom size="0.05" mass="1"/></body>
        <body name="e" pos="0 0.1 0"><joint name="bj" type="ball"/><geom size="0.05" mass="1"/></body>
      </body>
    </body>
  </worldbody>
  <equality>
    <joint name="nonlinear" joint1="h3" joint2="h1" polycoef="0 1 0.5 0 0"/>
    <joint name="lock" joint1="h4"/>
    <joint name="first" joint1="h5" joint2="h1"/>
    <joint name="second" joint1="h5" joint2="h2"/>
  </equality>
  <tendon>
    <spatial name="cable"><site site="s1"/><site site="s2"/></spatial>
    <fixed name="springy" stiffness="5"><joint joint="h1" coef="1"/><joint joint="h2" coef="1"/></fixed>
  </tendon>
  <actuator>
    <motor name="on_site" site="s2" refsite="s1" gear="0 0 1 0 0 0"/>
    <motor name="on_cable" tendon="cable"/>
    <muscle name="muscle" joint="h2" lengthrange="-1 1"/>
    <position name="ball_position" joint="bj" kp="2"/>
    <motor name="fine" joint="h1"/>
  </actuator>
</mujoco>"""


def test_what_is_not_mapped_is_named():
    text = _warning_text(UNMAPPED)
    for needle in ("site transmission with a reference site): on_site", "spatial tendon transmission): on_cable",
                   "(muscle activation dynamics, muscle gain, muscle bias): muscle", "ball joint with a force depending on its angle): ball_position",
                   "nonlinear polynomial: nonlinear", "lock a joint (no joint2): lock",
                   "a joint coupled twice, or a cycle): second", "spatial tendons: cable",
                   "fluid forces (not applied): density=1.2, viscosity=2e-05"):
        assert needle in text, needle
    assert "springy" not in text  # springs disabled by the model's flag: nothing to apply
    assert "fine" not in text


def test_disabled_springs_and_dampers_are_left_out():
    """``<flag spring="disable" damper="disable"/>``: no stiffness and no damping, so
    `passive_forces` is MuJoCo's ``qfrc_spring + qfrc_damper`` (zero); without the flags
    the model has them."""
    import equinox as eqx

    cm, info = _quiet_load(UNMAPPED)
    model = cm.base
    assert np.all(model.stiffness == 0) and np.all(model.damping == 0)
    assert model.friction[model.v_index("h1")][0] == pytest.approx(0.1)  # not disabled
    m = info.mjmodel
    d = mujoco.MjData(m)
    d.qpos[:] = np.r_[0.3, -0.2, 0.1, 0.2, 0.4, np.ones(4) / 2]
    d.qvel[:] = 0.5
    mujoco.mj_forward(m, d)
    # dry friction is a constraint in MuJoCo, not a passive force: left out of both
    no_friction = eqx.tree_at(lambda x: x.friction, model, jnp.zeros_like(model.friction))
    tau = jaxrbd.generalized_forces(jaxrbd.passive_forces(no_friction), no_friction,
                                    jnp.asarray(d.qpos), jnp.asarray(d.qvel))
    np.testing.assert_array_equal(d.qfrc_spring + d.qfrc_damper, 0.0)
    np.testing.assert_array_equal(tau, 0.0)
    on = UNMAPPED.replace('<flag spring="disable" damper="disable"/>', "")
    model_on = _quiet_load(on)[0].base
    assert model_on.stiffness[model_on.v_index("h1")][0] == 3
    assert model_on.damping[model_on.v_index("h2")][0] == 1


# ------------------------------------------------------------------ checks before compiling

JOINTLESS = """<mujoco><worldbody>
  <body name="plate" pos="0 0 1"><inertial pos="0 0 0" mass="{mass}" diaginertia="1 1 1"/></body>
  <body name="arm"><joint name="j"/><geom size="0.1" mass="1"/></body>
</worldbody></mujoco>"""


@pytest.mark.parametrize("mass", ["-1", "-inf", "nan"])
def test_bad_mass_on_a_body_without_joints_is_refused(mass):
    """MuJoCo's compiler sets it to zero silently; the file says otherwise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MuJoCo's own "XML contains a NaN"
        with pytest.raises(ValueError, match="MJCF body 'plate'.*mass"):
            jio.load_mjcf(JOINTLESS.format(mass=mass))
    assert mujoco.MjModel.from_xml_string(JOINTLESS.format(mass="-1")).body_mass[1] == 0


def test_bytes_bom_and_mujoco_warnings():
    xml = JOINTLESS.format(mass="1")
    with pytest.raises(ValueError, match="not UTF-8"):
        jio.load_mjcf(xml.replace("plate", "pl\xe4te").encode("latin-1"))
    for src in ("\ufeff" + xml, "\ufeff  \n" + xml, ("\ufeff" + xml).encode()):
        assert _quiet_load(src)[0].nq == 1
    with pytest.warns(UserWarning, match="MuJoCo: XML contains a 'NaN'"):
        with pytest.raises(ValueError, match="plate"):
            jio.load_mjcf(JOINTLESS.format(mass="nan"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say about a clean model
        jio.load_mjcf(xml)


# ------------------------------------------------------------------ untrusted files

CANARY = "CANARY-7f3a9"


@pytest.fixture
def folders(tmp_path):
    """``tmp_path/secret/canary.xml`` (outside) and ``tmp_path/model/`` (the model's folder,
    with a harmless part to include)."""
    secret = tmp_path / "secret"
    secret.mkdir()
    canary = secret / "canary.xml"
    canary.write_text(f'<mujoco><worldbody><body name="{CANARY}"/></worldbody></mujoco>')
    (secret / "canary.stl").write_bytes(b"solid " + CANARY.encode())
    model = tmp_path / "model"
    (model / "parts").mkdir(parents=True)
    (model / "parts" / "arm.xml").write_text(
        '<mujoco><worldbody><body name="arm"><joint/><geom size="0.1" mass="1"/></body>'
        "</worldbody></mujoco>")
    return model, canary


def _with(body: str) -> str:
    return f"<mujoco>{body}<worldbody><body name='x'><joint/><geom size='0.1' mass='1'/></body></worldbody></mujoco>"


def test_external_files_are_read_by_default(folders):
    """What the mode guards against: MuJoCo includes a file by absolute path, from text."""
    _, canary = folders
    model, _ = _quiet_load(f'<mujoco><include file="{canary}"/></mujoco>')
    assert CANARY in model.body_names


def test_allow_external_files_false_refuses_files_outside(folders):
    model_dir, canary = folders
    rel = "../secret/canary.xml"
    cases = {
        "include, absolute, text": (f'<mujoco><include file="{canary}"/></mujoco>', None),
        "include, ../, file": (f'<mujoco><include file="{rel}"/></mujoco>', "a.xml"),
        "include, absolute, file": (f'<mujoco><include file="{canary}"/></mujoco>', "b.xml"),
        "mesh, ../": (_with('<asset><mesh name="m" file="../secret/canary.stl"/></asset>'), "c.xml"),
        "meshdir": (_with('<compiler meshdir="../secret"/><asset><mesh name="m" file="canary.stl"/>'
                          "</asset>"), "d.xml"),
        "texturedir": (_with('<compiler texturedir="/"/><asset><texture name="t" type="2d" '
                             f'file="{str(canary)[1:]}"/></asset>'), "e.xml"),
        "hfield, absolute": (_with(f'<asset><hfield name="h" file="{canary}"/></asset>'), "f.xml"),
        "include, text, relative": ('<mujoco><include file="parts/arm.xml"/></mujoco>', None),
    }
    nested = model_dir / "parts" / "nested.xml"
    nested.write_text(f'<mujoco><include file="{rel}"/></mujoco>')
    cases["include of an include"] = ('<mujoco><include file="parts/nested.xml"/></mujoco>', "g.xml")
    for what, (xml, name) in cases.items():
        if name is None:
            src = xml
        else:
            src = model_dir / name
            src.write_text(xml)
        with pytest.raises(ValueError, match="allow_external_files=False") as e:
            jio.load_mjcf(src, allow_external_files=False)
        assert CANARY not in str(e.value), what
    given = {"part.xml": f'<mujoco><include file="{canary}"/></mujoco>'.encode()}
    with pytest.raises(ValueError, match="allow_external_files=False") as e:
        jio.load_mjcf('<mujoco><include file="part.xml"/></mujoco>', assets=given,
                      allow_external_files=False)
    assert CANARY not in str(e.value)
    with pytest.raises(ValueError, match="not an MjSpec or MjModel"):
        jio.load_mjcf(mujoco.MjSpec.from_string(_with("")), allow_external_files=False)


def test_allow_external_files_false_loads_files_inside(folders):
    model_dir, _ = folders
    main = model_dir / "main.xml"
    main.write_text('<mujoco><include file="parts/arm.xml"/></mujoco>')
    model, _ = _quiet_load(main, allow_external_files=False)
    assert model.body_names == ("world", "arm")
    import struct

    faces = [((0, 0, 0), (1, 0, 0), (0, 1, 0)), ((0, 0, 0), (0, 0, 1), (1, 0, 0)),
             ((0, 0, 0), (0, 1, 0), (0, 0, 1)), ((1, 0, 0), (0, 0, 1), (0, 1, 0))]
    stl = b"\0" * 80 + struct.pack("<I", len(faces)) + b"".join(
        struct.pack("<12fH", 0, 0, 0, *(0.1 * c for v in f for c in v), 0) for f in faces)
    text = _with('<asset><mesh name="m" file="tet.stl"/></asset>').replace(
        "<geom size='0.1' mass='1'/>", "<geom type='mesh' mesh='m' mass='1'/>")
    model, _ = _quiet_load(text, assets={"tet.stl": stl}, allow_external_files=False)
    assert model.nq == 1
    with pytest.raises(TypeError, match="allow_external_files must be True or False"):
        jio.load_mjcf(text, allow_external_files="no")
