"""`load_urdf`: a URDF robot description -> `Model` (standard library XML only)."""

from __future__ import annotations

import math
import os
import warnings
import xml.etree.ElementTree as ET
from typing import Any
from xml.parsers import expat

import numpy as np

from .. import joints
from .._body import Body, Transform, check_inertia_option
from .._builder import ModelBuilder, inertia_vector
from .._coupling import couple
from .._model import Model
from ._source import is_xml_text, strip_bom

__all__ = ["load_urdf"]

_MOVABLE = ("revolute", "continuous", "prismatic", "floating", "planar")
_JOINT_TYPES = ("fixed",) + _MOVABLE
_MIMIC_MODES = ("couple", "independent", "error")

#: the body a root link named 'world' becomes with floating_base=True ('world' is body 0)
WORLD_LINK = "world_link"


def load_urdf(
    path_or_xml_string: str | os.PathLike | bytes,
    floating_base: bool = False,
    return_info: bool = False,
    mimic: str = "couple",
    inertia_check: str = "warn",
) -> Model | tuple[Model, dict[str, Any]]:
    """Build a `Model` from a URDF file or string; meshes are never opened.

    Every URDF link becomes a body of the same name, every URDF joint the joint of its
    child body, with the URDF joint name. Bodies are numbered depth-first from the root
    link, siblings in the document order of their joints (so ``q`` follows that order;
    Pinocchio sorts siblings by joint name instead). The root link is attached to the
    world by a free joint named ``"root_joint"`` when ``floating_base`` is true, and
    otherwise by a fixed joint named after the root link, so its mass belongs to the
    world and it stays addressable by name. A root link named ``"world"`` *is* the
    world with ``floating_base=False``: its children attach to body 0. With
    ``floating_base=True`` it floats as in Pinocchio (``JointModelFreeFlyer``): the
    free joint ``"root_joint"`` carries it as a body named ``"world_link"`` (body 0
    keeps the name ``"world"``), with its own mass if it has any, and the robot stays
    attached to it by the URDF's joints (Kinova Gen3 and Flexiv Rizon as published).

    Joint types: ``revolute`` and ``continuous`` -> `joints.revolute` (a plain angle;
    limits play no part in the dynamics), ``prismatic`` -> `joints.prismatic`,
    ``fixed`` -> `joints.fixed`, ``floating`` -> `joints.free`. A ``planar`` joint with
    unit normal ``n`` (its ``<axis>``) becomes a 3-DoF custom joint: translations along
    ``u`` then ``w`` and a rotation about ``n``, where ``(u, w, n)`` is right-handed,
    ``u`` is the basis vector least aligned with ``n`` projected onto the plane (first
    such in x, y, z order) and ``w = n x u``; for ``n = z`` this is RBDL's planar joint
    (x, y, angle), for the URDF default ``n = x`` it is (y, z, angle). The axis
    defaults to ``(1, 0, 0)`` and is normalised.

    The joint ``<origin xyz rpy>`` is the joint frame in the parent link frame
    (``R = Rz(yaw) Ry(pitch) Rx(roll)``). The ``<inertial>`` ``<inertia>`` entries are
    the tensor entries themselves, about the ``<inertial>`` origin and in its rotated
    frame, so the body gets ``inertia = R I R^T`` about ``com = xyz``. A link without
    ``<inertial>`` is massless. ``<visual>``, ``<collision>``, ``<transmission>``,
    ``<gazebo>``, ``<calibration>`` and ``<safety_controller>`` are ignored.

    The XML is read without namespace processing: element and attribute names with a
    prefix nobody declared (``<sensor:camera>`` in a ``<gazebo>`` block, common in
    published files) load, with one warning naming each and where it is; the loader
    reads no prefixed name. Entity declarations are refused (no entity expansion) and
    nothing outside the given text or file is read (no external entities or DTDs).

    The ``<limit>`` (lower, upper, velocity, effort) and ``<dynamics>`` (damping,
    friction) of revolute, continuous and prismatic joints are kept on the model as
    `Model.q_lower`, `Model.q_upper`, `Model.velocity_limit`, `Model.effort_limit`,
    `Model.damping` and `Model.friction` (data only: the dynamics do not apply them).
    A negative ``friction`` (what least-squares identification returns, as FloBaRoID's
    KUKA LWR4+) loads with a warning naming the joint; `jaxrbd.passive_forces`, which
    needs its sign, refuses it.

    Mimic joints (``<mimic joint multiplier offset>``) are coupled by default
    (``mimic="couple"``, as Pinocchio's ``mimic=True``): the mimicking joint follows
    ``q_m = multiplier * q_j + offset`` and has no coordinate of its own, so the result
    is a `jaxrbd.CoupledModel` whose ``q``/``v`` hold the independent joints only.
    ``mimic="independent"`` loads it as an ordinary independent joint instead (a plain
    `Model`, the coupling reported in ``info["mimic"]``), and ``mimic="error"`` refuses
    it. A ``<mimic>`` on a fixed joint is ignored. A mimic of a mimic joint is resolved
    to the independent joint at the end of the chain (``q_3 = a_3 (a_2 q_1 + b_2) +
    b_3``; Pinocchio refuses such chains). A multiplier that makes the mass matrix
    overflow is refused.

    Inertias that are finite and symmetric but physically inconsistent (the triangle
    inequality violated, eigenvalues slightly below zero: common in CAD exports) load
    with one warning naming every such link (``inertia_check="warn"``, the default, as
    Pinocchio and urdfdom load them); ``"error"`` refuses them and ``"ignore"`` is
    silent. A principal moment below -50 % of the largest
    (`jaxrbd._body.NEGATIVE_MOMENT_RTOL`) is no rounding error: ``"warn"`` refuses it
    too, and only ``"ignore"`` loads it. Non-finite numbers, negative masses,
    non-symmetric inertias and parallel-axis terms that overflow (``<origin xyz="1e200
    0 0"/>`` with a mass of 1e300) are always errors naming the link, and a joint
    ``<origin>`` so far out that the mass matrix would overflow is an error naming the
    joint.

    Args:
        path_or_xml_string: a filesystem path (`str` or `os.PathLike`), or the URDF
            text itself: a `str` whose first character after a byte-order mark and
            blanks is ``<``, or `bytes` (always parsed as XML).
        floating_base: a `bool`: attach the root link to the world by a free joint
            (nq 7, nv 6).
        return_info: also return a dict with the raw per-joint extras (below).
        mimic: ``"couple"`` (default), ``"independent"`` or ``"error"``, see above.
        inertia_check: ``"warn"`` (default), ``"error"`` or ``"ignore"``, see above.

    Returns:
        The `Model` (leaves in JAX's default float dtype) or, with ``return_info``,
        ``(model, info)`` where ``info`` is a dict with keys

        - ``"limits"``: ``{joint: dict(lower, upper, effort, velocity)}`` for every
            movable joint with a ``<limit>`` element (URDF defaults: ``lower = upper =
            0``; a missing ``effort``/``velocity`` is ``inf``; continuous joints get
            ``lower = -inf``, ``upper = inf``), in [rad | m], [N·m | N], [rad/s | m/s];
        - ``"dynamics"``: ``{joint: dict(damping, friction)}`` for every movable
            joint with a ``<dynamics>`` element (missing attributes are 0);
        - ``"mimic"``: ``{joint: dict(joint, multiplier, offset)}`` for every movable
            mimic joint: ``q[joint] = multiplier * q[mimicked] + offset``.

    Raises:
        TypeError: ``floating_base`` or ``return_info`` is not a `bool` (the string
            ``"False"`` is true).
        ValueError: malformed XML (with the parser's message); an entity declaration;
            no ``<robot>`` root; a link or joint without a name, duplicated names; a
            joint without a type, of an unknown type, without ``<parent>``/``<child>``
            or naming a link that does not exist; a link that is the child of two
            joints; a cycle; zero or several root links; a non-numeric, non-finite or
            wrongly sized number; a zero axis; a non-finite, negative-mass,
            non-symmetric, clearly negative or overflowing ``<inertial>`` (the message
            names the link); a joint ``<origin>`` whose offset makes the mass matrix
            overflow (the message names the joint); a mimic joint with
            ``mimic="error"``, or one whose joints are not both 1-DoF, that form a
            cycle, or whose multiplier makes the mass matrix overflow.
        OSError: ``path_or_xml_string`` names a file that cannot be read.

    Example:
        >>> from jaxrbd import load_urdf
        >>> urdf = '''
        ... <robot name="pendulum">
        ...   <link name="base"/>
        ...   <link name="arm">
        ...     <inertial>
        ...       <origin xyz="0 0 -0.5"/>
        ...       <mass value="1.0"/>
        ...       <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.001"/>
        ...     </inertial>
        ...   </link>
        ...   <joint name="hinge" type="continuous">
        ...     <parent link="base"/>
        ...     <child link="arm"/>
        ...     <axis xyz="0 1 0"/>
        ...   </joint>
        ... </robot>'''
        >>> model = load_urdf(urdf)
        >>> model.nq, model.nv, model.body_names, model.joint_names
        (1, 1, ('world', 'base', 'arm'), ('hinge',))
        >>> load_urdf(urdf, floating_base=True).joint_names
        ('root_joint', 'hinge')
    """
    for key, flag in (("floating_base", floating_base), ("return_info", return_info)):
        if not isinstance(flag, (bool, np.bool_)):  # "False" is a truthy string
            raise TypeError(f"load_urdf: {key} must be a bool, got {flag!r}")
    if mimic not in _MIMIC_MODES:
        raise ValueError(f"mimic is {mimic!r}, expected one of {_MIMIC_MODES}")
    check_inertia_option(inertia_check)
    robot = _parse_robot(path_or_xml_string)

    links = _read_links(robot)
    urdf_joints = [_read_joint(el, links) for el in robot.findall("joint")]

    # Tree structure: the parent joint of every link, the children of every link.
    parent_joint: dict[str, dict[str, Any]] = {}
    children: dict[str, list[dict[str, Any]]] = {name: [] for name in links}
    joint_names: set[str] = set()
    for j in urdf_joints:
        if j["name"] in joint_names:
            raise ValueError(f"URDF joint {j['name']!r}: duplicate joint name")
        joint_names.add(j["name"])
        if j["parent"] == j["child"]:
            raise ValueError(
                f"URDF joint {j['name']!r}: link {j['child']!r} is its own parent (a cycle)"
            )
        if j["child"] in parent_joint:
            raise ValueError(
                f"URDF link {j['child']!r} is the child of two joints, "
                f"{parent_joint[j['child']]['name']!r} and {j['name']!r}; a URDF must be a tree"
            )
        parent_joint[j["child"]] = j
        children[j["parent"]].append(j)
    root = _find_root(links, parent_joint)
    if "world" in links and root != "world":
        raise ValueError(
            f"URDF link 'world' is not the root link ({root!r} is); the name 'world' is "
            "reserved for the world, body 0"
        )

    info: dict[str, Any] = {"limits": {}, "dynamics": {}, "mimic": {}}
    for j in urdf_joints:
        _read_extras(j, info, mimic)
    missing = [name for name, m in info["mimic"].items() if m["joint"] not in joint_names]
    if missing:
        # Pinocchio (mimic=False) and urdfdom load such files: the joint stays independent
        warnings.warn(
            "URDF: <mimic> names no joint of the URDF, so these joints stay independent: "
            + ", ".join(f"{n!r} (mimics {info['mimic'][n]['joint']!r})" for n in missing),
            UserWarning,
            stacklevel=2,
        )
        for name in missing:
            del info["mimic"][name]

    builder = ModelBuilder(inertia_check=inertia_check)
    top = root  # the body the root link's children hang from
    if root == "world" and not floating_base:
        mass, com, Ic = _body_arrays("world", links["world"], inertia_check)
        builder.world_inertia = builder.world_inertia + inertia_vector(mass, com, Ic, "world")
        top = 0
    elif floating_base:
        if "root_joint" in joint_names:
            raise ValueError(
                "URDF joint 'root_joint': the name is reserved for the floating base "
                "joint with floating_base=True"
            )
        if root == "world":
            # Pinocchio's reading: the free joint carries the (massless) world link and
            # the robot stays welded to it; body 0 keeps the name 'world'
            if WORLD_LINK in links:
                raise ValueError(
                    f"URDF link {WORLD_LINK!r}: the name is taken by the floating 'world' "
                    "link with floating_base=True"
                )
            top = WORLD_LINK
        _add(builder, top, "world", joints.free(), links[root], None, "root_joint")
    else:
        if root in joint_names:
            raise ValueError(
                f"URDF joint {root!r}: the name is taken by the fixed joint attaching the "
                f"root link {root!r} to the world"
            )
        _add(builder, root, "world", joints.fixed(), links[root], None, root)

    # Depth first from the root, siblings in document order (an explicit stack, so
    # long chains do not hit Python's recursion limit).
    stack = list(reversed(children[root]))
    visited = {root}
    while stack:
        j = stack.pop()
        child = j["child"]
        visited.add(child)
        parent = top if j["parent"] == root else j["parent"]
        _add(builder, child, parent, j["spec"], links[child], j["placement"], j["name"], info)
        stack.extend(reversed(children[child]))
    if len(visited) != len(links):
        raise ValueError(_cycle_message(links, parent_joint, visited))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = builder.build()
    for w in caught:  # the builder's inertia warning, re-issued at the caller
        warnings.warn(f"URDF: {w.message}", w.category, stacklevel=2)
    if mimic == "couple" and info["mimic"]:
        model = couple(model, {
            name: (m["joint"], m["multiplier"], m["offset"]) for name, m in info["mimic"].items()
        })
    return (model, info) if return_info else model


# ---------------------------------------------------------------------------- parsing


def _parse_robot(source: str | os.PathLike | bytes) -> ET.Element:
    """The ``<robot>`` element of a URDF path, string or bytes."""
    if isinstance(source, (bytes, bytearray)):
        data: str | bytes = bytes(source).lstrip()
    elif isinstance(source, str) and is_xml_text(source):
        data = strip_bom(source).lstrip()  # an XML declaration must come first
    elif isinstance(source, (str, os.PathLike)):
        with open(os.fspath(source), "rb") as f:  # bytes: the XML declares its encoding
            data = f.read()
    else:
        raise TypeError(
            "load_urdf expects a path (str or os.PathLike) or URDF text (str or bytes), "
            f"got {type(source).__name__}"
        )
    root, skipped = _parse_xml(data)
    if root.tag != "robot":
        raise ValueError(f"URDF root element is <{root.tag}>, expected <robot>")
    if skipped:
        shown = "; ".join(skipped[:8]) + (f"; and {len(skipped) - 8} more" if len(skipped) > 8
                                          else "")
        warnings.warn(
            "URDF: XML names with undeclared namespace prefixes are skipped (the loader reads "
            f"none of them): {shown}",
            UserWarning,
            stacklevel=3,
        )
    return root


def _parse_xml(data: str | bytes) -> tuple[ET.Element, list[str]]:
    """The element tree of ``data`` and the names with undeclared namespace prefixes.

    Expat runs without namespace processing, so a prefix nobody declared (``<sensor:camera>``
    in a ``<gazebo>`` block, as many published URDFs have) is part of a name the loader
    never asks for instead of an error. Entity declarations are refused (no expansion
    bombs) and nothing outside ``data`` is read (no external entities or DTDs).
    """
    parser = expat.ParserCreate()
    tree = ET.TreeBuilder()
    scopes = [{"xml"}]  # the prefixes declared around the current element
    path: list[str] = []  # open elements below <robot>: where a skipped name sits
    skipped: list[str] = []

    def start(tag, attrs):
        declared = scopes[-1] | {k[6:] for k in attrs if k.startswith("xmlns:")}
        scopes.append(declared)
        where = f"line {parser.CurrentLineNumber}"
        where = f"in {path[0]}, {where}" if path else where
        for name in (tag, *attrs):
            prefix, colon, _ = name.partition(":")
            if colon and prefix != "xmlns" and prefix not in declared:
                skipped.append(f"<{name}> {where}" if name == tag
                               else f"attribute {name!r} of <{tag}> {where}")
        if len(scopes) == 3:  # a child of <robot>: remember it with its name
            label = attrs.get("name") or attrs.get("reference")
            path.append(f"<{tag} {label!r}>" if label else f"<{tag}>")
        elif len(scopes) > 3:
            path.append(tag)
        tree.start(tag, attrs)

    def end(tag):
        scopes.pop()
        if path and len(scopes) >= 2:
            path.pop()
        tree.end(tag)

    def refuse_entity(name, *_):
        raise ValueError(
            f"URDF XML declares the entity {name!r}; entity declarations are refused (they "
            "can expand without bound or read other files), and URDF does not need them"
        )

    def refuse_external(*_):
        raise ValueError("URDF XML refers to an external entity; nothing outside the URDF is read")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = tree.data
    parser.EntityDeclHandler = refuse_entity
    parser.ExternalEntityRefHandler = refuse_external
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise ValueError(f"malformed URDF XML: {e}") from None
    return tree.close(), skipped


def _read_links(robot: ET.Element) -> dict[str, ET.Element]:
    links: dict[str, ET.Element] = {}
    for k, el in enumerate(robot.findall("link")):
        name = el.get("name")
        if not name:
            raise ValueError(f"URDF <link> number {k + 1} has no name attribute")
        if name in links:
            raise ValueError(f"URDF link {name!r}: duplicate link name")
        links[name] = el
    if not links:
        raise ValueError("URDF <robot> has no <link> elements")
    return links


def _read_joint(el: ET.Element, links: dict[str, ET.Element]) -> dict[str, Any]:
    """Name, type, parent/child link names, placement and `JointSpec` of a ``<joint>``."""
    name = el.get("name")
    if not name:
        raise ValueError("URDF <joint> without a name attribute")
    what = f"URDF joint {name!r}"
    jtype = el.get("type")
    if not jtype:
        raise ValueError(f"{what}: no type attribute")
    if jtype not in _JOINT_TYPES:
        raise ValueError(
            f"{what}: unknown joint type {jtype!r}, expected one of {', '.join(_JOINT_TYPES)}"
        )
    ends = {}
    for tag in ("parent", "child"):
        sub = el.find(tag)
        if sub is None or not sub.get("link"):
            raise ValueError(f"{what}: missing <{tag} link=...>")
        link = sub.get("link")
        if link not in links:
            raise ValueError(f"{what}: {tag} link {link!r} does not exist")
        ends[tag] = link
    rpy, xyz = _origin(el.find("origin"), what)
    return {
        "name": name,
        "type": jtype,
        "element": el,
        "parent": ends["parent"],
        "child": ends["child"],
        "placement": Transform.from_rpy(rpy, xyz),
        "spec": _joint_spec(jtype, el, what),
    }


def _joint_spec(jtype: str, el: ET.Element, what: str) -> joints.JointSpec:
    if jtype == "fixed":
        return joints.fixed()
    if jtype == "floating":
        return joints.free()
    axis_el = el.find("axis")
    axis = (1.0, 0.0, 0.0) if axis_el is None else _numbers(axis_el, "xyz", 3, what, "1 0 0")
    a = np.asarray(axis)
    scale = np.abs(a).max()  # normalise in two steps so huge entries do not overflow
    if scale == 0.0:
        raise ValueError(f"{what}: <axis xyz> is zero; a joint axis needs a direction")
    a = a / scale
    n = a / np.linalg.norm(a)
    if jtype in ("revolute", "continuous"):
        return joints.revolute(n)
    if jtype == "prismatic":
        return joints.prismatic(n)
    # planar: translations along u and w = n x u, then a rotation about n.
    e = np.eye(3)[int(np.argmin(np.abs(n)))]
    u = e - (e @ n) * n
    u = u / np.linalg.norm(u)
    w = np.cross(n, u)
    cols = np.zeros((3, 6))
    cols[0, 3:], cols[1, 3:], cols[2, :3] = u, w, n
    return joints.custom(cols, name="planar")


def _read_extras(j: dict[str, Any], info: dict[str, Any], mimic: str) -> None:
    """Limits, dynamics and mimic data of a joint into ``info``."""
    el, name, what = j["element"], j["name"], f"URDF joint {j['name']!r}"
    if j["type"] == "fixed":
        return  # nothing moves: limits, dynamics and mimic data mean nothing here
    lim = el.find("limit")
    if lim is not None:
        vals = {
            key: _scalar(lim, key, what, default, finite=False)
            for key, default in (("lower", 0.0), ("upper", 0.0), ("effort", math.inf),
                                 ("velocity", math.inf))
        }
        if j["type"] == "continuous":
            vals["lower"], vals["upper"] = -math.inf, math.inf
        info["limits"][name] = vals
    dyn = el.find("dynamics")
    if dyn is not None:
        info["dynamics"][name] = {
            key: _scalar(dyn, key, what, 0.0) for key in ("damping", "friction")
        }
    mim = el.find("mimic")
    if mim is not None:
        if mimic == "error":
            raise ValueError(
                f"{what}: <mimic> (a joint coupled to another) is unsupported; make the "
                "joint type 'fixed' in the URDF, or pass mimic='independent' to load it as "
                "an independent joint"
            )
        target = mim.get("joint")
        if not target:
            raise ValueError(f"{what}: <mimic> without a joint attribute")
        info["mimic"][name] = {
            "joint": target,
            "multiplier": _scalar(mim, "multiplier", what, 1.0),
            "offset": _scalar(mim, "offset", what, 0.0),
        }


def _body_arrays(name: str, link: ET.Element, inertia_check: str = "warn"
                 ) -> tuple[float, np.ndarray, np.ndarray]:
    """Checked ``(mass, com, inertia about the com)`` of a link, in link coordinates."""
    try:
        return _body(name, link).arrays(name, inertia_check)
    except ValueError as e:
        raise ValueError(f"URDF link {name!r}: {e}") from None


def _body(name: str, link: ET.Element) -> Body:
    what = f"URDF link {name!r}"
    inertial = link.find("inertial")
    if inertial is None:
        return Body()
    mass_el = inertial.find("mass")
    if mass_el is None:
        raise ValueError(f"{what}: <inertial> without <mass>")
    mass = _scalar(mass_el, "value", what + " <mass>", None)
    inertia_el = inertial.find("inertia")
    if inertia_el is None:
        raise ValueError(f"{what}: <inertial> without <inertia>")
    ixx, ixy, ixz, iyy, iyz, izz = (
        _scalar(inertia_el, key, what + " <inertia>", None)
        for key in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    )
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    rpy, xyz = _origin(inertial.find("origin"), what + " <inertial>")
    R = np.asarray(Transform.from_rpy(rpy).rotation)
    with np.errstate(over="ignore", invalid="ignore"):  # huge entries -> inf, caught below
        Ic = R @ I @ R.T
    return Body(mass=mass, com=xyz, inertia=0.5 * (Ic + Ic.T))


def _add(builder, name, parent, spec, link, placement, joint_name, info=None) -> None:
    body = _body(name, link)
    extra = {}
    if info is not None and spec.kind == "screw":
        # 1-DoF joints carry their URDF <limit> and <dynamics> on the model
        lim = info["limits"].get(joint_name)
        if lim is not None:
            extra.update(lower=lim["lower"], upper=lim["upper"],
                         velocity_limit=lim["velocity"], effort_limit=lim["effort"])
        dyn = info["dynamics"].get(joint_name)
        if dyn is not None:
            extra.update(damping=dyn["damping"], friction=dyn["friction"])
    try:
        builder.add_body(name, parent, spec, body=body, placement=placement,
                         joint_name=joint_name, **extra)
    except ValueError as e:
        raise ValueError(f"URDF link {name!r} (joint {joint_name!r}): {e}") from None


# ----------------------------------------------------------------------- tree checks


def _find_root(links: dict[str, ET.Element], parent_joint: dict[str, Any]) -> str:
    roots = [name for name in links if name not in parent_joint]
    if len(roots) == 1:
        return roots[0]
    if not roots:
        raise ValueError(
            "URDF has no root link: every link is the child of a joint, so the joints "
            f"form a cycle ({_cycle_message(links, parent_joint, set())})"
        )
    raise ValueError(
        f"URDF has several root links ({', '.join(repr(r) for r in roots)}); a URDF must "
        "be one tree, so connect them by joints"
    )


def _cycle_message(links: dict[str, ET.Element], parent_joint: dict[str, Any],
                   visited: set[str]) -> str:
    """Describe one cycle among the links not reached from the root."""
    start = next(name for name in links if name not in visited)
    path, seen = [start], {start}
    while True:
        nxt = parent_joint[path[-1]]["parent"]
        if nxt in seen:
            cycle = path[path.index(nxt):] + [nxt]
            break
        path.append(nxt)
        seen.add(nxt)
    joints_in = [parent_joint[link]["name"] for link in cycle[:-1]]
    return (
        f"URDF joints {', '.join(repr(j) for j in joints_in)} form a cycle through links "
        f"{' <- '.join(repr(link) for link in cycle)}; a URDF must be a tree"
    )


# ---------------------------------------------------------------------------- numbers


def _origin(el: ET.Element | None, what: str) -> tuple[list[float], list[float]]:
    """``(rpy, xyz)`` of an optional ``<origin>`` element (default: zeros)."""
    if el is None:
        return [0.0] * 3, [0.0] * 3
    where = what + " <origin>"
    return _numbers(el, "rpy", 3, where, "0 0 0"), _numbers(el, "xyz", 3, where, "0 0 0")


def _numbers(el: ET.Element, key: str, n: int, what: str, default: str) -> list[float]:
    text = el.get(key, default)
    parts = text.split()
    if len(parts) != n:
        raise ValueError(f"{what}: {key}={text!r} has {len(parts)} numbers, expected {n}")
    return [_float(p, f"{what} {key}={text!r}") for p in parts]


def _scalar(el: ET.Element, key: str, what: str, default: float | None,
            finite: bool = True) -> float:
    text = el.get(key)
    if text is None:
        if default is None:
            raise ValueError(f"{what}: missing attribute {key!r}")
        return default
    return _float(text.strip(), f"{what} {key}={text!r}", finite)


def _float(text: str, what: str, finite: bool = True) -> float:
    try:
        x = float(text)
    except ValueError:
        raise ValueError(f"{what}: {text!r} is not a number") from None
    if finite and not math.isfinite(x):
        raise ValueError(f"{what}: {text!r} is not finite")
    if not finite and math.isnan(x):
        raise ValueError(f"{what}: {text!r} is not a number")
    return x
