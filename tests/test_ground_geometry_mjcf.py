"""`ground.ContactPoints.from_mjcf` on a small bundled MJCF (tests/data/toy_quadruped.xml)."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrbd

mujoco = pytest.importorskip("mujoco")

XML = os.path.join(os.path.dirname(__file__), "data", "toy_quadruped.xml")


@pytest.fixture(scope="module")
def toy():
    m = mujoco.MjModel.from_xml_path(XML)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    return jaxrbd.load_mjcf(XML), m, d


def test_points_sit_where_mujoco_puts_the_geoms(toy):
    model, m, d = toy
    pts = jaxrbd.ground.ContactPoints.from_mjcf(model, XML)
    # trunk box 8, sphere 1, capsule 2, box 8, sphere on a welded body 1; no floor, no visual
    assert len(pts) == 20
    assert pts.names[8:12] == ("fl_foot", "fr_foot/0", "fr_foot/1", "hl_foot/0")
    assert pts.names[-1] == "hr_foot"
    assert "trunk_marker" not in pts.names
    q = jnp.asarray(d.qpos)
    with jax.disable_jit():  # six bodies: cheaper op by op than compiled
        world = np.asarray(jaxrbd.point_position(model, q, list(pts.bodies), pts.points))
    # MuJoCo's own placement of each geom's points, from its world geom frames
    expect = []
    for name in pts.names:
        gname, _, k = name.partition("/")
        g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, gname)
        R, x, size = d.geom_xmat[g].reshape(3, 3), d.geom_xpos[g], m.geom_size[g]
        if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE:
            local = np.zeros(3)
        elif m.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE:
            local = np.array([0.0, 0.0, size[1] * (1 - 2 * int(k))])
        else:
            k = int(k)
            local = size * np.array([1 - 2 * (k // 4), 1 - 2 * (k // 2 % 2), 1 - 2 * (k % 2)])
        expect.append(x + R @ local)
    np.testing.assert_allclose(world, np.array(expect), atol=1e-12)
    # every foot touches the floor at the keyframe: its lowest surface point is at z = 0
    low = world[:, 2] - np.asarray(pts.radius)
    for foot in ("fl_foot", "fr_foot", "hl_foot", "hr_foot"):
        sel = [i for i, n in enumerate(pts.names) if n.split("/")[0] == foot]
        assert abs(low[sel].min()) < 1e-6, foot


def test_selection_by_geom_body_and_predicate(toy):
    model, m, _ = toy
    cp = jaxrbd.ground.ContactPoints
    assert cp.from_mjcf(model, XML, geoms=["hl_foot", "fl_foot"]).names[0] == "fl_foot"
    assert len(cp.from_mjcf(model, XML, geoms="hl_foot")) == 8
    # a named geom is kept even when it does not collide
    marker = cp.from_mjcf(model, XML, geoms=["trunk_marker"])
    assert marker.radius.tolist() == [0.02]
    on_body = cp.from_mjcf(model, XML, bodies=["hr_foot_link", "fr_leg"])
    assert on_body.names == ("fr_foot/0", "fr_foot/1", "hr_foot")
    spheres = cp.from_mjcf(model, m, geoms=lambda mm, g: mm.geom_type[g] == 2)
    assert spheres.names == ("trunk_marker", "fl_foot", "hr_foot")
    assert len(cp.from_mjcf(model, XML, meshes=True)) == 20  # no meshes here
    with pytest.raises(ValueError, match="'nope'"):
        cp.from_mjcf(model, XML, geoms=["nope"])
    with pytest.raises(ValueError, match="plane"):
        cp.from_mjcf(model, XML, geoms=["floor"])
    with pytest.raises(ValueError, match="'ghost'"):
        cp.from_mjcf(model, XML, bodies=["ghost"])
    with pytest.raises(ValueError, match="cylinder_points"):
        cp.from_mjcf(model, XML, cylinder_points=2)
    other = jaxrbd.load_mjcf('<mujoco><worldbody><body name="b"><freejoint/>'
                             '<geom size="0.1"/></body></worldbody></mujoco>')
    with pytest.raises(ValueError, match="not a body of the model"):
        cp.from_mjcf(other, XML)


def test_toy_stands_on_its_mjcf_feet(toy):
    model, m, d = toy
    feet = jaxrbd.ground.ContactPoints.from_mjcf(
        model, XML, geoms=["fl_foot", "fr_foot", "hl_foot", "hr_foot"])
    q0 = jnp.asarray(d.qpos)
    kp, kd = 200.0, 5.0

    def policy(t, q, qd):
        return jnp.zeros(model.nv).at[6:].set(kp * (q0[7:] - q[7:]) - kd * qd[6:])

    ground = jaxrbd.ground.Plane(0.0, friction=1.0)
    run = jax.jit(lambda: jaxrbd.ground.rollout(
        model, q0, jnp.zeros(model.nv), None, 1e-3, feet, ground, n_steps=300, policy=policy))
    qs, _, info = run()
    weight = float(m.body_subtreemass[1]) * 9.81
    fz = np.asarray(info.total_force[:, 2])
    assert abs(fz[-1] / weight - 1) < 1e-3
    # the landing steps of the box foot (4 redundant corners) may stop above the
    # tolerance; the settled stance must not
    assert bool(info.converged[-100:].all())
    assert float(jnp.linalg.norm(qs[-1, :2] - q0[:2])) < 1e-3


def test_contact_pairs_make_geoms_collidable():
    xml = """<mujoco><worldbody>
      <geom name="floor" type="plane" size="1 1 0.1" contype="0" conaffinity="0"/>
      <body name="b"><freejoint/>
        <geom name="s" size="0.1" contype="0" conaffinity="0"/>
        <geom name="t" size="0.1" pos="1 0 0" contype="0" conaffinity="0"/>
      </body></worldbody>
      <contact><pair geom1="s" geom2="floor"/></contact></mujoco>"""
    model = jaxrbd.load_mjcf(xml)
    assert jaxrbd.ground.ContactPoints.from_mjcf(model, xml).names == ("s",)
