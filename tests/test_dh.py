"""Denavit-Hartenberg models: `dh_model`, `DHLink`, `dh_transform`.

Checked against hand-built `ModelBuilder` arms, against the closed-form DH matrices
multiplied out in numpy, and between the standard and modified tables of the same arm.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import JIT, assert_allclose, combine_bodies, random_body

import jaxrbd
from jaxrbd import Body, DHLink, ModelBuilder, Transform, dh_model, joints
from jaxrbd._builder import inertia_vector

PI2 = np.pi / 2

#: PUMA 560, standard (distal) DH rows [a, alpha, d, theta] (Corke, "Robotics, Vision and
#: Control", mdl_puma560; lengths in m).
PUMA_STD = np.array(
    [
        [0.0, PI2, 0.0, 0.0],
        [0.4318, 0.0, 0.0, 0.0],
        [0.0203, -PI2, 0.15005, 0.0],
        [0.0, PI2, 0.4318, 0.0],
        [0.0, -PI2, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0],
    ]
)
#: The same arm in the modified (proximal) convention, rows [a_{i-1}, alpha_{i-1}, d_i,
#: theta_i]: Craig's Table 3.4 except for the sign of alpha_1 (Craig's z_2 points the other
#: way), so that q means the same in both tables.
PUMA_MOD = np.array(
    [
        [0.0, 0.0, 0.0, 0.0],
        [0.0, PI2, 0.0, 0.0],
        [0.4318, 0.0, 0.15005, 0.0],
        [0.0203, -PI2, 0.4318, 0.0],
        [0.0, PI2, 0.0, 0.0],
        [0.0, -PI2, 0.0, 0.0],
    ]
)
#: Stanford arm (RRPRRR), standard DH (Corke, mdl_stanford): the prismatic joint 3 adds
#: to d_3 = 0.
STANFORD_STD = np.array(
    [
        [0.0, -PI2, 0.412, 0.0],
        [0.0, PI2, 0.154, 0.0],
        [0.0203, 0.0, 0.0, -PI2],
        [0.0, -PI2, 0.0, 0.0],
        [0.0, PI2, 0.0, 0.0],
        [0.0, 0.0, 0.263, 0.0],
    ]
)

BASE = Transform.from_rpy((0.1, -0.2, 0.7), translation=(0.2, -0.1, 0.6))
TOOL = Transform.from_rpy((0.3, 0.4, -0.5), translation=(0.01, 0.02, 0.15))
NSTATES = 4


def _bodies(seed: int, n: int) -> list[Body]:
    rng = np.random.default_rng(seed)
    return [random_body(rng, (1.0, 15.0)) for _ in range(n)]


PUMA_BODIES = _bodies(560, 6)


# ----------------------------------------------------------------------------- numpy oracle


def _dh_matrix(convention: str, a, alpha, d, theta) -> np.ndarray:
    """Closed-form DH matrices (Spong eq. 3.10, Craig eq. 3.6), not elementary products."""
    ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    if convention == "standard":
        return np.array(
            [
                [ct, -st * ca, st * sa, a * ct],
                [st, ct * ca, -ct * sa, a * st],
                [0.0, sa, ca, d],
                [0.0, 0.0, 0.0, 1.0],
            ]
        )
    return np.array(
        [
            [ct, -st, 0.0, a],
            [st * ca, ct * ca, -sa, -sa * d],
            [st * sa, ct * sa, ca, ca * d],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )


def _homogeneous(t: Transform | None) -> np.ndarray:
    H = np.eye(4)
    if t is not None:
        H[:3, :3], H[:3, 3] = t.arrays()
    return H


def _dh_frames(convention, links, q, base=None, tool=None):
    """World poses of DH frames 1..n (and of the tool) by the matrix product."""
    H = _homogeneous(base)
    out, iq = [], 0
    for link in links:
        theta, d = link.theta, link.d
        if link.joint in ("revolute", "R"):
            theta += q[iq] + link.offset
            iq += 1
        elif link.joint in ("prismatic", "P"):
            d += q[iq] + link.offset
            iq += 1
        H = H @ _dh_matrix(convention, link.a, link.alpha, d, theta)
        out.append(H)
    if tool is not None:
        out.append(H @ _homogeneous(tool))
    return out


# ----------------------------------------------------------------------------- helpers


def _links(table, types=None, bodies=None, offsets=None):
    n = len(table)
    types = types or "R" * n
    bodies = bodies or [None] * n
    offsets = [0.0] * n if offsets is None else offsets
    return [
        DHLink(*row, joint=t, body=b, offset=o)
        for row, t, b, o in zip(table.tolist(), types, bodies, offsets)
    ]


def _to_modified(links, tool):
    """The proximal rewrite of a standard table: ``Rz Tz (Tx Rx)(Rz Tz)...(Tx Rx) tool``.

    Link ``i``'s body is re-expressed in its modified frame, ``F_mod = F_std (Tx(a) Rx(alpha))^-1``.
    """
    out, prev = [], (0.0, 0.0)
    for link in links:
        M = Transform(rotation=_rotx(link.alpha), translation=(link.a, 0.0, 0.0))
        body = None if link.body is None else combine_bodies(Body(), link.body, M)
        out.append(DHLink(prev[0], prev[1], link.d, link.theta, link.joint, body, link.offset))
        prev = (link.a, link.alpha)
    H = _homogeneous(Transform(rotation=_rotx(prev[1]), translation=(prev[0], 0.0, 0.0)))
    H = H @ _homogeneous(tool)
    return out, Transform(rotation=H[:3, :3], translation=H[:3, 3])


def _rotx(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _evaluate(model, q, qd, qdd):
    R, p = jaxrbd.forward_kinematics(model, q)
    return R, p, jaxrbd.mass_matrix(model, q), jaxrbd.inverse_dynamics(model, q, qd, qdd)


#: One compilation per model structure evaluates poses, H and tau at all states at once.
EVALUATE = jax.jit(jax.vmap(_evaluate, in_axes=(None, 0, 0, 0)))


def _states(model, seed: int):
    rng = np.random.default_rng(seed)
    shape = (NSTATES, model.nv)
    q, qd, qdd = (rng.uniform(-2.0, 2.0, size=shape) for _ in range(3))
    return jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd)


def _pose(out, model, name):
    R, p = out[0], out[1]
    b = model.body_id(name)
    return np.asarray(R[:, b]), np.asarray(p[:, b])


def _assert_pose_equals(out, model, name, H_list, what):
    R, p = _pose(out, model, name)
    assert_allclose(R, np.stack([H[:3, :3] for H in H_list]), rtol=1e-12, name=f"{what} R")
    assert_allclose(p, np.stack([H[:3, 3] for H in H_list]), rtol=1e-12, name=f"{what} p")


# ----------------------------------------------------------------------------- builder equivalence


def _puma_by_hand_standard():
    """The standard-DH PUMA with one body per joint (no fixed bodies): body ``i`` is frame
    ``i - 1`` turned by joint ``i`` (theta = 0 everywhere), placed by ``Tz(d) Tx(a)
    Rx(alpha)`` of link ``i - 1``, and link ``i``'s mass is re-expressed in it."""
    b = ModelBuilder()
    parent, placement = "world", BASE
    for i, ((a, alpha, d, _), body) in enumerate(zip(PUMA_STD, PUMA_BODIES), start=1):
        A = Transform(rotation=_rotx(alpha), translation=(a, 0.0, d))  # F_i = B_i A_i
        moved = combine_bodies(Body(), body, A)
        b.add_body(f"joint{i}", parent, joints.revolute((0, 0, 1)), moved, placement)
        parent, placement = f"joint{i}", A
    H = _homogeneous(placement) @ _homogeneous(TOOL)
    b.add_body("tool", parent, joints.fixed(), None, Transform(H[:3, :3], H[:3, 3]))
    return b.build()


def _puma_by_hand_modified():
    """The modified-DH PUMA: body ``i`` at frame ``i``, placed by ``Rx(alpha) Tx(a) Tz(d)``."""
    b = ModelBuilder()
    parent = "world"
    for i, ((a, alpha, d, _), body) in enumerate(zip(PUMA_MOD, PUMA_BODIES), start=1):
        R = _rotx(alpha)
        placement = _homogeneous(Transform(R, np.array([a, 0.0, 0.0]) + R @ np.array([0, 0, d])))
        if i == 1:
            placement = _homogeneous(BASE) @ placement
        b.add_body(
            f"link{i}",
            parent,
            joints.revolute((0, 0, 1)),
            body,
            Transform(placement[:3, :3], placement[:3, 3]),
            joint_name=f"joint{i}",
        )
        parent = f"link{i}"
    b.add_body("tool", parent, joints.fixed(), None, TOOL)
    return b.build()


def test_puma_standard_equals_builder():
    links = _links(PUMA_STD, bodies=PUMA_BODIES)
    model = dh_model(links, "standard", base=BASE, tool=TOOL)
    hand = _puma_by_hand_standard()
    assert model.joint_names == hand.joint_names == tuple(f"joint{i}" for i in range(1, 7))
    states = _states(model, 0)
    out, ref = EVALUATE(model, *states), EVALUATE(hand, *states)
    for name in [f"joint{i}" for i in range(1, 7)] + ["tool"]:
        for k, what in ((0, "R"), (1, "p")):
            got = np.asarray(out[k][:, model.body_id(name)])
            want = np.asarray(ref[k][:, hand.body_id(name)])
            assert_allclose(got, want, rtol=1e-12, name=f"{name} {what}")
    assert_allclose(out[2], ref[2], rtol=1e-12, name="mass_matrix")
    assert_allclose(out[3], ref[3], rtol=1e-12, name="inverse_dynamics")
    # the DH frames themselves, against the numpy product of the DH matrices
    frames = [_dh_frames("standard", links, q, BASE, TOOL) for q in np.asarray(states[0])]
    for i in range(6):
        _assert_pose_equals(out, model, f"link{i + 1}", [f[i] for f in frames], f"link{i + 1}")
    _assert_pose_equals(out, model, "tool", [f[6] for f in frames], "tool")


def test_puma_modified_equals_builder():
    model = dh_model(_links(PUMA_MOD, bodies=PUMA_BODIES), "modified", base=BASE, tool=TOOL)
    hand = _puma_by_hand_modified()
    assert model.body_names == hand.body_names
    assert model.joint_names == hand.joint_names
    states = _states(model, 1)
    out, ref = EVALUATE(model, *states), EVALUATE(hand, *states)
    for got, want, what in zip(out, ref, ("R", "p", "mass_matrix", "inverse_dynamics")):
        assert_allclose(got, want, rtol=1e-12, name=what)
    frames = [
        _dh_frames("modified", _links(PUMA_MOD), q, BASE, TOOL) for q in np.asarray(states[0])
    ]
    for i in range(6):
        _assert_pose_equals(out, model, f"link{i + 1}", [f[i] for f in frames], f"link{i + 1}")


def test_link_body_is_stored_unchanged_in_its_dh_frame():
    for convention, table in (("standard", PUMA_STD), ("modified", PUMA_MOD)):
        model = dh_model(table, convention, bodies=PUMA_BODIES, dtype=jnp.float64)
        for i, body in enumerate(PUMA_BODIES):
            row = np.asarray(model.inertia[model.body_id(f"link{i + 1}")])
            assert_allclose(row, inertia_vector(*body.arrays()), rtol=1e-15, name=convention)
        assert np.isclose(float(model.inertia[:, 0].sum()), sum(b.mass for b in PUMA_BODIES))


# ----------------------------------------------------------------------------- standard vs modified


@pytest.mark.parametrize(
    "table, types, seed",
    [(PUMA_STD, "RRRRRR", 0), (None, "RPFRPR", 1)],
    ids=["puma560", "random-RPFRPR"],
)
def test_standard_and_modified_tables_agree(table, types, seed):
    rng = np.random.default_rng(seed)
    offsets = None
    if table is None:  # a generic arm: nothing zero, offsets on the moving joints
        table = np.column_stack(
            [
                rng.uniform(-0.5, 0.5, 6),
                rng.uniform(-np.pi, np.pi, 6),
                rng.uniform(-0.5, 0.5, 6),
                rng.uniform(-np.pi, np.pi, 6),
            ]
        )
        offsets = [0.0 if t == "F" else float(rng.uniform(-1, 1)) for t in types]
    std = _links(table, types, _bodies(seed + 10, 6), offsets)
    mod, tool_mod = _to_modified(std, TOOL)
    m_std = dh_model(std, "standard", base=BASE, tool=TOOL)
    m_mod = dh_model(mod, "modified", base=BASE, tool=tool_mod)
    assert m_std.nv == m_mod.nv == types.count("R") + types.count("P")
    states = _states(m_std, seed + 2)
    o_std, o_mod = EVALUATE(m_std, *states), EVALUATE(m_mod, *states)
    for k, what in ((0, "tool R"), (1, "tool p")):
        assert_allclose(
            o_std[k][:, m_std.body_id("tool")],
            o_mod[k][:, m_mod.body_id("tool")],
            rtol=1e-12,
            name=what,
        )
    assert_allclose(o_std[2], o_mod[2], rtol=1e-12, name="mass_matrix")
    assert_allclose(o_std[3], o_mod[3], rtol=1e-12, name="inverse_dynamics")
    # both against the matrix products, every DH frame and the tool
    for conv, links, tool, out, model in (
        ("standard", std, TOOL, o_std, m_std),
        ("modified", mod, tool_mod, o_mod, m_mod),
    ):
        frames = [_dh_frames(conv, links, q, BASE, tool) for q in np.asarray(states[0])]
        for i in range(6):
            _assert_pose_equals(out, model, f"link{i + 1}", [f[i] for f in frames], conv)
        _assert_pose_equals(out, model, "tool", [f[6] for f in frames], f"{conv} tool")


# ----------------------------------------------------------------------------- prismatic, offsets, forms


def test_stanford_arm_prismatic_array_form():
    bodies = _bodies(7, 6)
    model = dh_model(STANFORD_STD, joint_types="RRPRRR", bodies=bodies, tool=TOOL)
    same = dh_model(_links(STANFORD_STD, "RRPRRR", bodies), tool=TOOL)
    assert jax.tree_util.tree_structure(model) == jax.tree_util.tree_structure(same)
    for x, y in zip(jax.tree_util.tree_leaves(model), jax.tree_util.tree_leaves(same)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert model.joint_label[model.body_id("joint3")] == "prismatic"
    states = _states(model, 3)
    out = EVALUATE(model, *states)
    links = _links(STANFORD_STD, "RRPRRR")
    frames = [_dh_frames("standard", links, q, None, TOOL) for q in np.asarray(states[0])]
    for i in range(6):
        _assert_pose_equals(out, model, f"link{i + 1}", [f[i] for f in frames], f"link{i + 1}")
    _assert_pose_equals(out, model, "tool", [f[6] for f in frames], "tool")


def test_known_poses_with_offsets_and_prismatic():
    fk = JIT["forward_kinematics"]
    # revolute offset: at q = 0 the arm points along +y; prismatic offset adds to d
    links = [
        DHLink(a=1.0, offset=np.pi / 2),
        DHLink(d=0.1, joint="prismatic", offset=0.05),
        DHLink(a=0.5, joint="fixed"),
    ]
    for convention in ("standard", "modified"):
        model = dh_model(links, convention, tool=Transform(translation=(0.0, 0.0, 0.2)))
        assert (model.nq, model.nv) == (2, 2)
        _, p = fk(model, jnp.array([0.0, 0.25]))
        tip = np.asarray(p[model.body_id("tool")])
        if convention == "standard":
            # Rz(pi/2) Tx(1) . Tz(0.4) . Tx(0.5) . Tz(0.2)
            want = [0.0, 1.5, 0.6]
        else:
            # Rz(pi/2) . Tx(1) Tz(0.4) . Tx(0.5) . Tz(0.2)
            want = [1.0, 0.5, 0.6]
        assert_allclose(tip, np.array(want), rtol=1e-14, atol=1e-15, name=convention)


def test_base_as_homogeneous_matrix_and_names():
    H = _homogeneous(BASE)
    m1 = dh_model(PUMA_MOD[:2], "modified", base=BASE)
    m2 = dh_model(
        PUMA_MOD[:2], "proximal", base=H, names=["shoulder", "arm"], joint_names=["q_s", "q_a"]
    )
    assert m2.body_names == ("world", "shoulder", "arm")
    assert m2.joint_names == ("q_s", "q_a")
    np.testing.assert_allclose(np.asarray(m1.Xtree_E), np.asarray(m2.Xtree_E), atol=1e-15)
    np.testing.assert_allclose(np.asarray(m1.Xtree_r), np.asarray(m2.Xtree_r), atol=1e-15)
    assert "fixed" not in dh_model(PUMA_STD, tool=None).joint_names  # fixed joints hidden
    assert dh_model(PUMA_STD[:1], tool=TOOL, tool_name="flange").body_names[-1] == "flange"


def test_dh_transform_matches_closed_form():
    rng = np.random.default_rng(5)
    for convention in ("standard", "modified"):
        for a, alpha, d, theta in rng.uniform(-2, 2, size=(5, 4)):
            np.testing.assert_allclose(
                jaxrbd.dh_transform(a, alpha, d, theta, convention),
                _dh_matrix(convention, a, alpha, d, theta),
                rtol=0,
                atol=1e-15,
            )


def test_float32_model():
    model = dh_model(PUMA_STD, bodies=PUMA_BODIES, dtype=jnp.float32)
    assert model.inertia.dtype == jnp.float32 and model.Xtree_E.dtype == jnp.float32


# ----------------------------------------------------------------------------- errors

_OK = DHLink(a=0.1)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"links": [_OK], "convention": "craig"}, ValueError, "convention 'craig' is unknown"),
        (
            {"links": [_OK, DHLink(joint="spherical")]},
            ValueError,
            "DH link 1: unknown joint type 'spherical'",
        ),
        ({"links": [_OK, _OK, DHLink(a=np.nan)]}, ValueError, "DH link 2: a = nan is not finite"),
        ({"links": [DHLink(d=[1.0, 2.0])]}, ValueError, r"DH link 0: d has shape \(2,\)"),
        ({"links": [DHLink(theta="x")]}, ValueError, "DH link 0: theta = 'x' is not a number"),
        ({"links": [_OK, DHLink(offset=np.inf)]}, ValueError, "DH link 1: offset = inf"),
        ({"links": np.zeros((3, 3))}, ValueError, r"links has shape \(3, 3\), expected \(n, 4\)"),
        (
            {"links": np.array([[0.0] * 4, [0.0, np.inf, 0, 0]])},
            ValueError,
            "DH link 1: alpha = inf is not finite",
        ),
        ({"links": [[0.0] * 4, [0.0] * 3]}, ValueError, r"DH link 1: row has shape \(3,\)"),
        (
            {"links": np.zeros((3, 4)), "joint_types": "RRX"},
            ValueError,
            "DH link 2: unknown joint type 'X'",
        ),
        ({"links": np.zeros((3, 4)), "joint_types": "RR"}, ValueError, "joint_types has 2 entries"),
        ({"links": np.zeros((2, 4)), "bodies": [None]}, ValueError, "bodies has 1 entries"),
        ({"links": [_OK], "joint_types": "R"}, ValueError, "joint_types and bodies are only used"),
        ({"links": [_OK, _OK], "names": ["a"]}, ValueError, "names has 1 entries, expected 2"),
        (
            {"links": [_OK, _OK], "names": ["a", "a"]},
            ValueError,
            "DH link 1: body 'a': duplicate body name",
        ),
        ({"links": [DHLink(joint="F", offset=0.1)]}, ValueError, "DH link 0: offset 0.1"),
        (
            {"links": [_OK, DHLink(body=Body(mass=-1.0))]},
            ValueError,
            "DH link 1: body 'link2': negative mass",
        ),
        ({"links": [_OK], "base": np.eye(3)}, ValueError, r"base has shape \(3, 3\)"),
        ({"links": [_OK], "tool": 2.0 * np.eye(4)}, ValueError, "tool: .*homogeneous"),
        ({"links": [_OK], "tool": np.diag([2.0, 1, 1, 1])}, ValueError, "tool: .*not a rotation"),
        ({"links": []}, ValueError, "links is empty"),
        ({"links": [_OK, DHLink(body="heavy")]}, TypeError, "DH link 1: body must be"),
        ({"links": [_OK, [0.0] * 4]}, TypeError, "DH link 1: expected a DHLink"),
        ({"links": "RRR"}, TypeError, "links must be"),
        ({"links": 6}, TypeError, "links must be a sequence of DHLink or an"),
        ({"links": [_OK], "base": "identity"}, TypeError, "base must be a jaxrbd.Transform"),
    ],
)
def test_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        dh_model(**kwargs)
