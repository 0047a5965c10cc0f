"""Markers (`MarkerSet`, `marker_positions`, `marker_jacobian`, `marker_kinematics`),
the `human28` model against de Leva's (1996) table, and motion-capture file I/O."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose, fd_jvp

import jaxrbd
from jaxrbd import mocap
from jaxrbd._markers import MarkerSet, marker_jacobian, marker_kinematics, marker_positions
from jaxrbd.models import DE_LEVA_1996_MALE, DE_LEVA_1996_STATURE

MASS, HEIGHT = 68.0, 1.82


@pytest.fixture(scope="module")
def human():
    return jaxrbd.models.human28(mass=MASS, height=HEIGHT, markers=True)


@pytest.fixture(scope="module")
def kin():
    """Jitted marker functions (compiled once per structure)."""
    return {
        "pos": jax.jit(marker_positions),
        "kin": jax.jit(marker_kinematics),
        "vkin": jax.jit(jax.vmap(marker_kinematics, (None, 0, None))),
        "point_pos": jax.jit(jaxrbd.point_position, static_argnums=2),
        "point_jac": jax.jit(jaxrbd.point_jacobian, static_argnums=2),
        "grad_offsets": jax.jit(jax.grad(
            lambda model, q, ms, o: jnp.sum(marker_positions(model, q, MarkerSet(ms.names, ms.bodies, o))),
            argnums=3)),
        "fk": jax.jit(jaxrbd.forward_kinematics),
    }


def _q(model, seed, scale=0.5):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-scale, scale, model.nq)
    q[3:7] = rng.normal(size=4)
    q[3:7] /= np.linalg.norm(q[3:7])
    return jnp.asarray(q)


def test_positions_and_jacobian_match_point_kinematics(human, kin):
    model, ms = human
    q = _q(model, 0)
    P, J = kin["kin"](model, q, ms)
    assert P.shape == (36, 3) and J.shape == (108, model.nv)
    bodies = tuple(ms.bodies)
    assert_allclose(P, kin["point_pos"](model, q, bodies, ms.offsets), rtol=1e-13, name="P")
    assert_allclose(kin["pos"](model, q, ms), P, rtol=1e-13, name="marker_positions")
    J_ref = kin["point_jac"](model, q, bodies, ms.offsets).reshape(108, model.nv)
    assert_allclose(J, J_ref, rtol=1e-13, name="J vs point_jacobian")
    assert_allclose(jax.jit(marker_jacobian)(model, q, ms), J, rtol=1e-13, name="marker_jacobian")


def test_jacobian_matches_finite_differences_on_the_manifold(human, kin):
    model, ms = human
    q = _q(model, 1)
    _, J = kin["kin"](model, q, ms)
    v = jax.random.normal(jax.random.key(2), (model.nv,))
    fd = fd_jvp(lambda q: kin["kin"](model, q, ms)[0], model, q, v)
    assert_allclose(J @ v, fd.reshape(-1), rtol=1e-7, name="J v vs central differences")


def test_batched_and_gradient_wrt_offsets(human, kin):
    model, ms = human
    Q = jnp.stack([_q(model, s) for s in (3, 4, 5)])
    P, J = kin["vkin"](model, Q, ms)
    assert P.shape == (3, 36, 3) and J.shape == (3, 108, model.nv)
    P1, J1 = kin["kin"](model, Q[1], ms)
    assert_allclose(P[1], P1, rtol=1e-13, name="vmap P")
    assert_allclose(J[1], J1, rtol=1e-13, name="vmap J")
    # d(sum of marker k's world coordinates)/d offset_k = R_k^T (1, 1, 1)
    g = kin["grad_offsets"](model, Q[0], ms, ms.offsets)
    R, _ = kin["fk"](model, Q[0])
    ids = [model.body_id(b) for b in ms.bodies]
    assert_allclose(g, jnp.einsum("kij,i->kj", R[np.array(ids)], jnp.ones(3)), rtol=1e-12,
                    name="grad offsets")


def test_marker_set_api_and_errors(human):
    model, ms = human
    assert ms.index("LASI") == ms.names.index("LASI")
    sub = ms.subset(["RTOE", "LASI"])
    assert sub.names == ("RTOE", "LASI") and sub.bodies == ("r_foot", "pelvis")
    assert_allclose(sub.offsets[1], ms.offsets[ms.index("LASI")], name="subset offsets")
    with pytest.raises(ValueError, match="duplicate marker names"):
        MarkerSet(("a", "a"), (1, 1), np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"offsets has shape \(2, 2\)"):
        MarkerSet(("a", "b"), (1, 1), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="2 bodies for 1 marker"):
        MarkerSet(("a",), (1, 2), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="unknown marker 'nope'"):
        ms.index("nope")
    bad = MarkerSet(("a",), ("no_such_body",), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="marker 'a'"):
        marker_positions(model, jaxrbd.neutral_configuration(model), bad)
    with pytest.raises(ValueError, match="q has shape"):
        marker_positions(model, jnp.zeros(3), ms)
    with pytest.raises(TypeError, match="MarkerSet"):
        marker_positions(model, jaxrbd.neutral_configuration(model), {"a": 1})


# ----------------------------------------------------------------------------- human28


def test_human28_mass_and_de_leva_proportions(human):
    model, ms = human
    assert (model.nq, model.nv, model.nbodies, len(ms)) == (29, 28, 14, 36)
    assert_allclose(jaxrbd.total_mass(model), MASS, rtol=1e-13, name="total mass")
    masses = {n: float(model.inertia[i, 0]) for i, n in enumerate(model.body_names)}
    frac = {k: v[0] for k, v in DE_LEVA_1996_MALE.items()}
    expected = {
        "pelvis": frac["lower_trunk"], "torso": frac["upper_trunk"] + frac["mid_trunk"],
        "head": frac["head"], "l_upper_arm": frac["upper_arm"],
        "l_forearm": frac["forearm"] + frac["hand"], "l_thigh": frac["thigh"],
        "l_shank": frac["shank"], "l_foot": frac["foot"],
    }
    for body, f in expected.items():
        for name in {body, body.replace("l_", "r_")}:
            assert_allclose(masses[name], f * MASS, rtol=1e-13, name=f"mass {name}")
    # joint-centre distances are de Leva's segment lengths scaled by the stature
    s = HEIGHT / DE_LEVA_1996_STATURE
    q0 = jaxrbd.neutral_configuration(model)
    _, p = jax.jit(jaxrbd.forward_kinematics)(model, q0)
    pos = dict(zip(model.body_names, np.asarray(p)))
    for a, b, seg in (("l_thigh", "l_shank", "thigh"), ("r_shank", "r_foot", "shank"),
                      ("l_upper_arm", "l_forearm", "upper_arm"), ("pelvis", "torso", "lower_trunk")):
        assert_allclose(np.linalg.norm(pos[b] - pos[a]), DE_LEVA_1996_MALE[seg][1] * s,
                        rtol=1e-12, name=f"{seg} length")
    # thigh: CM 40.95 % down from the hip, principal moments m (r L)^2
    i = model.body_id("l_thigh")
    m, mc = model.inertia[i, 0], model.inertia[i, 1:4]
    L = DE_LEVA_1996_MALE["thigh"][1] * s
    assert_allclose(mc / m, [0.0, 0.0, -0.4095 * L], atol=1e-14, name="thigh CM")
    I_o = np.asarray(model.inertia[i, 4:])  # about the origin: Ixx, Ixy, Iyy, Ixz, Iyz, Izz
    d2 = (0.4095 * L) ** 2
    assert_allclose(I_o[[0, 2, 5]], [m * ((0.329 * L) ** 2 + d2), m * ((0.329 * L) ** 2 + d2),
                                     m * (0.149 * L) ** 2], rtol=1e-12, name="thigh inertia")
    # standing: the foot markers are near the ground plane of the head's vertex
    P = jax.jit(marker_positions)(model, q0, ms)
    z = dict(zip(ms.names, np.asarray(P[:, 2])))
    assert z["LFHD"] > z["CLAV"] > z["LASI"] > z["LKNE"] > z["LANK"] > z["LHEE"]
    assert np.all(np.isfinite(P))


def test_human28_errors():
    with pytest.raises(ValueError, match="mass must be a positive"):
        jaxrbd.models.human28(mass=-1.0)
    with pytest.raises(ValueError, match="height must be a positive"):
        jaxrbd.models.human28(height=float("nan"))


# ----------------------------------------------------------------------------- mocap files


def _trial():
    rng = np.random.default_rng(0)
    markers = rng.normal(size=(6, 3, 3))
    markers[2, 1] = np.nan
    return mocap.MocapTrial(jnp.arange(6) / 120.0, jnp.asarray(markers), ("A", "B", "C"),
                            q=jnp.asarray(rng.normal(size=(6, 4))))


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_trial_round_trip(tmp_path, suffix):
    trial = _trial()
    path = tmp_path / f"trial{suffix}"
    mocap.save_trial(path, trial)
    back = mocap.load_trial(path)
    assert back.names == trial.names and back.rate == pytest.approx(120.0)
    np.testing.assert_array_equal(np.isnan(back.markers), np.isnan(trial.markers))
    np.testing.assert_allclose(np.nan_to_num(back.markers), np.nan_to_num(trial.markers),
                               rtol=1e-15)
    assert (back.q is not None) == (suffix == ".npz")
    np.testing.assert_array_equal(back.visible, np.isfinite(trial.markers).all(-1))


def test_csv_millimetres_and_errors(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("time,A_x,A_y,A_z\n0.0,1000,,3\n0.01,1,2,3\n")
    t = mocap.load_trial(path, units="mm")
    assert bool(jnp.isnan(t.markers[0, 0, 1])) and float(t.markers[0, 0, 0]) == 1.0
    bad = tmp_path / "bad.csv"
    bad.write_text("time,A_x,A_y,B_z\n0,1,2,3\n0.1,1,2,3\n")
    with pytest.raises(ValueError, match="not NAME_x"):
        mocap.load_trial(bad)
    with pytest.raises(ValueError, match="unknown file type"):
        mocap.load_trial(tmp_path / "t.trc")
    with pytest.raises(ValueError, match="markers has shape"):
        mocap.MocapTrial(jnp.arange(3.0), jnp.zeros((2, 1, 3)), ("A",))
    ms = MarkerSet.from_dict({"Z": (1, (0, 0, 0))})
    with pytest.raises(ValueError, match="no markers"):
        _trial().select(ms)


def test_c3d_reader(tmp_path):
    ezc3d = pytest.importorskip("ezc3d", reason="optional C3D support")
    c = ezc3d.c3d()
    c["parameters"]["POINT"]["RATE"]["value"] = [100.0]
    c["parameters"]["POINT"]["LABELS"]["value"] = ("A", "B")
    pts = np.ones((4, 2, 5))
    pts[:3] = np.arange(30, dtype=float).reshape(3, 2, 5) * 10.0  # mm
    c["data"]["points"] = pts
    c.write(str(tmp_path / "t.c3d"))
    t = mocap.load_trial(tmp_path / "t.c3d")
    assert t.names == ("A", "B") and t.rate == pytest.approx(100.0)
    np.testing.assert_allclose(np.asarray(t.markers), np.moveaxis(pts[:3], 0, 2).swapaxes(0, 1)
                               * 1e-3, rtol=1e-12)
