"""`load_urdf`: reference robots, URDF semantics, error messages, fuzzed input."""

import copy
import pathlib
import re
import xml.etree.ElementTree as ET

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from jaxrbd import Model, Transform, joints, load_urdf  # noqa: E402
from jaxrbd._builder import inertia_vector  # noqa: E402

DATA = pathlib.Path(__file__).parent / "data"
ROBOTS = [("panda", False), ("solo12", True), ("talos", True)]


def _ref(robot):
    return np.load(DATA / f"{robot}.npz", allow_pickle=False)


# ------------------------------------------------------------------ reference robots


@pytest.fixture(scope="module", params=ROBOTS, ids=[r for r, _ in ROBOTS])
def loaded(request):
    robot, floating = request.param
    ref = _ref(robot)
    assert bool(ref["floating_base"]) == floating
    return robot, load_urdf(DATA / f"{robot}.urdf", floating_base=floating), ref


def test_reference_sizes(loaded):
    robot, model, ref = loaded
    assert (model.nq, model.nv) == (int(ref["nq"]), int(ref["nv"])), robot


def test_reference_joint_set_and_order(loaded):
    robot, model, ref = loaded
    assert set(model.joint_names) == set(ref["joint_names"].tolist()), robot
    floating = bool(ref["floating_base"])
    if floating:
        assert model.joint_names[0] == "root_joint"
        assert model.joint_kind[model.body_id(model.joint_name.index("root_joint"))] == "free"
    movable = list(model.joint_names[1:] if floating else model.joint_names)
    assert movable == ref["joint_names_urdf_document_dfs"].tolist(), robot


def test_reference_links_resolve(loaded):
    robot, model, ref = loaded
    for name in ref["link_names"].tolist():
        assert model.body_names[model.body_id(name)] == name, (robot, name)
    assert model.nbodies == len(ref["link_names"]) + 1  # + world


def test_reference_total_mass(loaded):
    robot, model, ref = loaded
    expected = float(ref["total_mass"]) + float(ref["world_fixed_mass"])
    np.testing.assert_allclose(np.sum(model.inertia[:, 0]), expected, rtol=1e-12, err_msg=robot)


def test_fixed_base_root_link_is_fixed_to_world():
    model = load_urdf(str(DATA / "panda.urdf"))
    root = model.body_id("panda_link0")
    assert root == 1 and model.body_parent[root] == 0
    assert model.joint_kind[root] == "fixed" and model.joint_name[root] == "panda_link0"
    np.testing.assert_allclose(model.inertia[root, 0], _ref("panda")["world_fixed_mass"])


def test_path_string_bytes_agree():
    text = (DATA / "panda.urdf").read_text()
    models = [
        load_urdf(DATA / "panda.urdf"),
        load_urdf(str(DATA / "panda.urdf")),
        load_urdf("\n  " + text),
        load_urdf(text.encode()),
    ]
    for m in models[1:]:
        assert m.body_names == models[0].body_names
        assert m.joint_names == models[0].joint_names
        np.testing.assert_array_equal(m.inertia, models[0].inertia)
        np.testing.assert_array_equal(m.Xtree_E, models[0].Xtree_E)


def test_return_info_panda():
    model, info = load_urdf(DATA / "panda.urdf", return_info=True)
    assert isinstance(model, Model)
    assert set(info) == {"limits", "dynamics", "mimic"}
    assert set(info["limits"]) == set(model.joint_names)
    assert info["limits"]["panda_joint1"] == dict(
        lower=-2.8973, upper=2.8973, effort=87.0, velocity=2.175
    )
    assert info["dynamics"]["panda_joint1"] == dict(damping=0.003, friction=0.0)
    assert info["mimic"] == {}


# --------------------------------------------------------------------- URDF semantics


def _urdf(joints_xml, links=("a", "b", "c"), inertial=None):
    body = "".join(
        f'<link name="{n}">{inertial if inertial and n != links[0] else ""}</link>'
        for n in links
    )
    return f'<robot name="r">{body}{joints_xml}</robot>'


def _joint(name, parent, child, jtype="revolute", extra=""):
    return (
        f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/>'
        f'<child link="{child}"/>{extra}</joint>'
    )


CHAIN = _joint("j1", "a", "b") + _joint("j2", "b", "c")


def test_joint_types_and_default_axis():
    xml = _urdf(
        _joint("j1", "a", "b", "continuous")
        + _joint("j2", "b", "c", "prismatic", '<axis xyz="0 0 2"/>')
        + _joint("j3", "a", "d", "fixed")
        + _joint("j4", "d", "e", "floating"),
        links=("a", "b", "c", "d", "e"),
    )
    model = load_urdf(xml)
    assert model.joint_names == ("j1", "j2", "j4")
    assert model.body_names == ("world", "a", "b", "c", "d", "e")
    assert (model.nq, model.nv) == (1 + 1 + 7, 1 + 1 + 6)
    np.testing.assert_allclose(model.axes[0], [1, 0, 0, 0, 0, 0])  # URDF default axis
    np.testing.assert_allclose(model.axes[1], [0, 0, 0, 0, 0, 1])  # normalised
    assert model.joint_kind[model.body_id("e")] == "free"


@pytest.mark.parametrize(
    "axis, cols",
    [
        ("0 0 1", joints.planar().columns),
        (None, [[0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0]]),
        ("0 -1 0", [[0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 1], [0, -1, 0, 0, 0, 0]]),
    ],
)
def test_planar_joint(axis, cols):
    extra = "" if axis is None else f'<axis xyz="{axis}"/>'
    model = load_urdf(_urdf(_joint("p", "a", "b", "planar", extra), links=("a", "b")))
    assert (model.nq, model.nv) == (3, 3)
    assert model.joint_label[model.body_id("b")] == "planar"
    np.testing.assert_allclose(model.axes, cols, atol=1e-15)
    n, u, w = model.axes[2, :3], model.axes[0, 3:], model.axes[1, 3:]
    np.testing.assert_allclose(np.cross(u, w), n, atol=1e-15)  # right-handed (u, w, n)


def test_placement_and_rotated_inertia():
    rpy, xyz = (0.3, -0.2, 1.1), (0.1, 0.2, 0.3)
    irpy, ixyz = (0.5, 0.4, -0.7), (0.05, -0.02, 0.01)
    I = np.array([[0.02, 0.001, -0.002], [0.001, 0.03, 0.003], [-0.002, 0.003, 0.04]])
    inertial = (
        f'<inertial><origin rpy="{" ".join(map(str, irpy))}" xyz="{" ".join(map(str, ixyz))}"/>'
        '<mass value="2.5"/>'
        f'<inertia ixx="{I[0, 0]}" ixy="{I[0, 1]}" ixz="{I[0, 2]}" iyy="{I[1, 1]}" '
        f'iyz="{I[1, 2]}" izz="{I[2, 2]}"/></inertial>'
    )
    origin = f'<origin rpy="{" ".join(map(str, rpy))}" xyz="{" ".join(map(str, xyz))}"/>'
    model = load_urdf(_urdf(_joint("j", "a", "b", extra=origin), ("a", "b"), inertial))
    b = model.body_id("b")
    R = Transform.from_rpy(rpy).rotation
    np.testing.assert_allclose(model.Xtree_E[b], R.T, atol=1e-15)
    np.testing.assert_allclose(model.Xtree_r[b], xyz, atol=1e-15)
    Ri = Transform.from_rpy(irpy).rotation
    expected = inertia_vector(2.5, np.array(ixyz), Ri @ I @ Ri.T)
    np.testing.assert_allclose(model.inertia[b], expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(model.inertia[model.body_id("a")], 0.0)  # no <inertial>


def test_depth_first_document_order():
    xml = _urdf(
        _joint("z", "a", "b") + _joint("y", "a", "c") + _joint("x", "b", "d"),
        links=("d", "c", "b", "a"),  # link order does not matter, joint order does
    )
    model = load_urdf(xml)
    assert model.body_names == ("world", "a", "b", "d", "c")
    assert model.joint_names == ("z", "x", "y")


def test_floating_base():
    model = load_urdf(_urdf(CHAIN), floating_base=True)
    assert model.joint_names == ("root_joint", "j1", "j2")
    assert (model.nq, model.nv) == (9, 8)


def test_world_root_link():
    xml = _urdf(_joint("fix", "world", "a", "fixed") + CHAIN, links=("world", "a", "b", "c"))
    model = load_urdf(xml)
    assert model.body_names == ("world", "a", "b", "c")
    assert model.body_parent[1] == 0 and model.joint_name[1] == "fix"
    assert model.body_id("world") == 0
    # floating: the 'world' link rides the free joint (tests/test_reach.py vs Pinocchio)
    floating = load_urdf(xml, floating_base=True)
    assert floating.body_names == ("world", "world_link", "a", "b", "c")
    assert floating.joint_names[0] == "root_joint" and floating.body_parent[2] == 1


def test_long_chain_is_not_recursive():
    n = 3000
    links = [f"l{i}" for i in range(n)]
    xml = _urdf("".join(_joint(f"j{i}", f"l{i}", f"l{i + 1}") for i in range(n - 1)), links)
    assert load_urdf(xml).nv == n - 1


def test_limits_dynamics_mimic_info():
    lim = '<limit lower="-1" upper="2" effort="3" velocity="4"/><dynamics damping="0.5"/>'
    xml = _urdf(
        _joint("j1", "a", "b", extra=lim)
        + _joint("j2", "b", "c", "continuous",
                 '<limit effort="1" velocity="2"/><mimic joint="j1" multiplier="-2"/>')
    )
    with pytest.raises(ValueError, match=r"joint 'j2'.*mimic.*unsupported.*'fixed'"):
        load_urdf(xml, mimic="error")
    coupled = load_urdf(xml)  # coupled by default: j2 = -2 j1
    assert coupled.joint_names == ("j1",) and coupled.coupled_joints == ("j2",)
    model, info = load_urdf(xml, return_info=True, mimic="independent")
    assert model.joint_names == ("j1", "j2")
    assert info["limits"] == {
        "j1": dict(lower=-1.0, upper=2.0, effort=3.0, velocity=4.0),
        "j2": dict(lower=-np.inf, upper=np.inf, effort=1.0, velocity=2.0),
    }
    assert info["dynamics"] == {"j1": dict(damping=0.5, friction=0.0)}
    assert info["mimic"] == {"j2": dict(joint="j1", multiplier=-2.0, offset=0.0)}
    # A <mimic> on a fixed joint is meaningless and ignored.
    fixed = _urdf(_joint("j1", "a", "b") + _joint("j2", "b", "c", "fixed", '<mimic joint="j1"/>'))
    assert load_urdf(fixed).joint_names == ("j1",)


# ----------------------------------------------------------------------------- errors

GOOD_INERTIAL = (
    '<inertial><mass value="1"/>'
    '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>'
)

ERRORS = {
    "malformed": ('<robot name="r"><link name="a"></robot>', "malformed URDF XML: mismatched"),
    "truncated": ('<robot name="r"><link', "malformed URDF XML"),
    "not robot": ('<model><link name="a"/></model>', r"root element is <model>, expected <robot>"),
    "no links": ('<robot name="r"/>', "no <link>"),
    "link without name": ('<robot name="r"><link/></robot>', "<link> number 1 has no name"),
    "duplicate link": ('<robot name="r"><link name="a"/><link name="a"/></robot>',
                       "link 'a': duplicate link name"),
    "missing parent link": (_urdf(_joint("j1", "nope", "b")),
                            "joint 'j1': parent link 'nope' does not exist"),
    "missing child link": (_urdf(_joint("j1", "a", "nope")),
                           "joint 'j1': child link 'nope' does not exist"),
    "no parent element": (_urdf('<joint name="j1" type="fixed"><child link="b"/></joint>'),
                          r"joint 'j1': missing <parent link=...>"),
    "two parents": (_urdf(CHAIN + _joint("j3", "a", "c")),
                    "link 'c' is the child of two joints, 'j2' and 'j3'"),
    "self loop": (_urdf(_joint("j1", "a", "a")), "joint 'j1': link 'a' is its own parent"),
    "cycle": (_urdf(_joint("j1", "a", "b") + _joint("j2", "c", "d") + _joint("j3", "d", "c"),
                    links=("a", "b", "c", "d")),
              r"joints 'j\d', 'j\d' form a cycle through links"),
    "no root": (_urdf(CHAIN + _joint("j3", "c", "a")), "no root link.*cycle"),
    "several roots": (_urdf(_joint("j1", "a", "b")),
                      r"several root links \('a', 'c'\)"),
    "unknown type": (_urdf(_joint("j1", "a", "b", "hinge") + _joint("j2", "b", "c")),
                     "joint 'j1': unknown joint type 'hinge'"),
    "no type": (_urdf('<joint name="j1"><parent link="a"/><child link="b"/></joint>'),
                "joint 'j1': no type attribute"),
    "no name": (_urdf('<joint type="fixed"><parent link="a"/><child link="b"/></joint>'),
                "<joint> without a name"),
    "duplicate joint": (_urdf(_joint("j", "a", "b") + _joint("j", "b", "c")),
                        "joint 'j': duplicate joint name"),
    "non-numeric origin": (_urdf(_joint("j1", "a", "b", extra='<origin xyz="0 x 0"/>')
                                 + _joint("j2", "b", "c")),
                           r"joint 'j1' <origin> xyz='0 x 0': 'x' is not a number"),
    "short origin": (_urdf(_joint("j1", "a", "b", extra='<origin rpy="0 0"/>')
                           + _joint("j2", "b", "c")),
                     r"joint 'j1' <origin>: rpy='0 0' has 2 numbers, expected 3"),
    "non-finite origin": (_urdf(_joint("j1", "a", "b", extra='<origin xyz="0 nan 0"/>')
                                + _joint("j2", "b", "c")),
                          r"joint 'j1' <origin>.*'nan' is not finite"),
    "infinite axis": (_urdf(_joint("j1", "a", "b", extra='<axis xyz="inf 0 0"/>')
                            + _joint("j2", "b", "c")),
                      r"joint 'j1' xyz='inf 0 0'.*not finite"),
    "zero axis": (_urdf(_joint("j1", "a", "b", extra='<axis xyz="0 0 0"/>')
                        + _joint("j2", "b", "c")),
                  "joint 'j1': <axis xyz> is zero"),
    "non-numeric mass": (_urdf(CHAIN, inertial=GOOD_INERTIAL.replace('"1"/>', '"heavy"/>', 1)),
                         r"link 'b' <mass> value='heavy': 'heavy' is not a number"),
    "infinite inertia": (_urdf(CHAIN, inertial=GOOD_INERTIAL.replace('izz="1"', 'izz="1e999"')),
                         r"link 'b' <inertia> izz='1e999': '1e999' is not finite"),
    "missing inertia entry": (_urdf(CHAIN, inertial=GOOD_INERTIAL.replace('iyz="0" ', '')),
                              r"link 'b' <inertia>: missing attribute 'iyz'"),
    "no mass": (_urdf(CHAIN, inertial='<inertial><inertia ixx="1" ixy="0" ixz="0" iyy="1" '
                                      'iyz="0" izz="1"/></inertial>'),
                r"link 'b': <inertial> without <mass>"),
    "negative mass": (_urdf(CHAIN, inertial=GOOD_INERTIAL.replace('"1"/>', '"-1"/>', 1)),
                      r"link 'b'.*negative mass"),
    "non-physical inertia": (_urdf(CHAIN, inertial=GOOD_INERTIAL.replace('izz="1"', 'izz="3"')),
                             r"link 'b'.*triangle inequality"),
    "indefinite inertia": (_urdf(CHAIN, inertial=GOOD_INERTIAL.replace('ixy="0"', 'ixy="2"')),
                           r"link 'b'.*not positive semidefinite"),
    "mimic": (_urdf(CHAIN.replace("</joint>", '<mimic joint="j1"/></joint>', 2)),
              r"joint 'j1': <mimic>.*unsupported.*make the joint type 'fixed'"),
    "world not root": (_urdf(CHAIN + _joint("j3", "c", "world", "fixed"),
                             links=("a", "b", "c", "world")),
                       r"link 'world' is not the root link \('a' is\)"),
    "root link joint name clash": (_urdf(_joint("a", "a", "b") + _joint("j2", "b", "c")),
                                   "joint 'a': the name is taken by the fixed joint"),
}


@pytest.mark.parametrize("xml, match", list(ERRORS.values()), ids=list(ERRORS))
def test_errors(xml, match):
    mimic = "error"
    with pytest.raises(ValueError, match=match):
        load_urdf(xml, mimic=mimic, inertia_check="error")


def test_mimic_of_a_missing_joint_warns_and_stays_independent():
    xml = _urdf(_joint("j1", "a", "b", extra='<mimic joint="zz"/>') + _joint("j2", "b", "c"))
    for mode in ("couple", "independent"):
        with pytest.warns(UserWarning, match=r"'j1' \(mimics 'zz'\)"):
            assert load_urdf(xml, mimic=mode).joint_names == ("j1", "j2")
    with pytest.raises(ValueError, match=r"joint 'j1': <mimic>.*unsupported"):
        load_urdf(xml, mimic="error")


def test_error_root_joint_reserved():
    xml = _urdf(_joint("root_joint", "a", "b") + _joint("j2", "b", "c"))
    assert load_urdf(xml).joint_names == ("root_joint", "j2")  # fine with a fixed base
    with pytest.raises(ValueError, match="joint 'root_joint': the name is reserved"):
        load_urdf(xml, floating_base=True)


def test_error_bad_option_and_types(tmp_path):
    with pytest.raises(ValueError, match="mimic is 'coupled'"):
        load_urdf(_urdf(CHAIN), mimic="coupled")
    with pytest.raises(TypeError, match="expects a path"):
        load_urdf(3)
    with pytest.raises(FileNotFoundError):
        load_urdf(tmp_path / "missing.urdf")
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot><link name='a'></robot>")
    with pytest.raises(ValueError, match="malformed URDF XML"):
        load_urdf(bad)


# ------------------------------------------------------------------------ fuzzing

PANDA = (DATA / "panda.urdf").read_text()
_NUMBER = re.compile(r"-?\d+(\.\d*)?([eE][-+]?\d+)?")
_GARBAGE = st.one_of(
    st.sampled_from(["", "nan", "inf", "-inf", "1e999", "abc", "0x10", "1,2", "--1", "1 2"]),
    st.text(max_size=6),
)


def _load_or_value_error(source):
    try:
        model = load_urdf(source)
    except ValueError:
        return
    assert isinstance(model, Model)
    assert np.all(np.isfinite(np.asarray(model.Xtree_E)))


def _elements():
    root = ET.fromstring(PANDA)
    return root, [(p, c) for p in root.iter() for c in list(p)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 10**6))
def test_fuzz_delete_element(k):
    root, pairs = _elements()
    parent, child = pairs[k % len(pairs)]
    parent.remove(child)
    _load_or_value_error(ET.tostring(root, encoding="unicode"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 10**6))
def test_fuzz_duplicate_element(k):
    root, pairs = _elements()
    parent, child = pairs[k % len(pairs)]
    parent.insert(list(parent).index(child) + 1, copy.deepcopy(child))
    _load_or_value_error(ET.tostring(root, encoding="unicode"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 10**6), garbage=_GARBAGE)
def test_fuzz_replace_number(k, garbage):
    matches = list(_NUMBER.finditer(PANDA))
    m = matches[k % len(matches)]
    _load_or_value_error(PANDA[: m.start()] + garbage + PANDA[m.end() :])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 10**6), a=st.integers(0, 10**6))
def test_fuzz_swap_link_reference(k, a):
    # Point a <parent>/<child> at another link: cycles, two parents, several roots.
    root = ET.fromstring(PANDA)
    refs = [e for e in root.iter() if e.tag in ("parent", "child") and e.get("link")]
    names = [e.get("name") for e in root.findall("link")]
    refs[k % len(refs)].set("link", names[a % len(names)])
    _load_or_value_error(ET.tostring(root, encoding="unicode"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 10**6), junk=st.binary(min_size=1, max_size=16), replace=st.booleans())
def test_fuzz_random_bytes(k, junk, replace):
    data = PANDA.encode()
    i = k % len(data)
    _load_or_value_error(data[:i] + junk + data[i + len(junk) * replace :])
