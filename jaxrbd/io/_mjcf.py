"""`load_mjcf`: an MJCF model compiled by MuJoCo -> `Model` (and its loop closures).

MuJoCo's own compiler reads the XML (defaults and classes, ``<include>``, ``<frame>``,
inertia from geoms, ``autolimits``, ...), so this module never parses MJCF itself: it maps
the *compiled* ``mujoco.MjModel`` onto `ModelBuilder` calls. ``mujoco`` is an optional
dependency (``pip install jaxrbd[mjcf]``), imported when a loader runs.

The coordinate converters (``qpos_to_q``, ``qvel_to_v``, ...) are in `_mjcf_convert`, the
actuators in `_mjcf_actuators`, the checks before compiling in `_mjcf_source`.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any

import numpy as np

from .. import joints
from .._actuation import Actuators
from .._body import Body, Transform
from .._builder import ModelBuilder
from .._constraints import ConstraintSet
from .._core.host_rotation import axis_angle_matrix, quat_matrix
from .._coupling import couple
from .._model import CoupledModel, Model
from ._mjcf_actuators import joint_couplings, mjcf_actuators
from ._mjcf_source import check_files, check_spec_masses, relay_mujoco_warnings, source_text

__all__ = ["MJCFInfo", "load_mjcf"]

# MuJoCo's mjtJoint and mjtEq values, stable across its releases (the disable bits are
# not: they are read from the installed mujoco).
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_EQ_CONNECT, _EQ_WELD, _EQ_JOINT = 0, 1, 2

# A free joint's MuJoCo DoFs are [linear (world); angular (body)], jaxrbd's [angular; linear].
_FREE_PERM = np.array([3, 4, 5, 0, 1, 2])


def _import_mujoco():
    try:
        import mujoco  # optional dependency (extra: mjcf)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "load_mjcf needs MuJoCo's compiler: install it with `pip install jaxrbd[mjcf]` "
            f"(or `pip install mujoco`); importing mujoco failed with: {e}"
        ) from e
    return mujoco


@dataclasses.dataclass(frozen=True)
class MJCFInfo:
    """What `load_mjcf` found besides the `Model` (returned with ``return_info=True``).

    Attributes:
        constraints: the active ``connect`` and ``weld`` equality constraints as one
            `ConstraintSet` of loop closures (rows in MuJoCo's equality order), or
            ``None`` when there are none.
        equalities: one dict per mapped equality (``name``, ``type``, ``rows``: the
            slice of its rows in ``constraints``).
        sites: ``{mujoco site name: jaxrbd body name}`` (the same name unless it is
            taken by a body, see `load_mjcf`).
        bodies: ``{mujoco body name: jaxrbd body name}`` (always the same name; unnamed
            MuJoCo bodies are ``"body<id>"``).
        unmapped: ``{what: [names]}`` of everything the model contains that the jaxrbd
            model does not represent (the content of the warning).
        gravity_compensation: ``{body: factor}`` of MuJoCo's ``gravcomp`` (not part of
            the model; `gravity_compensation_forces` turns it into ``f_ext``).
        keyframes: ``{name: qpos}`` of the model's keyframes (jaxrbd ``q`` is ``qpos``).
        qpos0: MuJoCo's reference configuration, `(nq,)`.
        mjmodel: the compiled ``mujoco.MjModel`` the model was mapped from.
        actuators: the model's actuators as a `jaxrbd.Actuators` for `jaxrbd.actuation`
            (``None`` without actuators); rows in MuJoCo's actuator order.
        couplings: ``{joint: (driver joint, multiplier, offset)}`` of the joint
            equalities made exact couplings (the model is then a `CoupledModel`).
    """

    constraints: ConstraintSet | None
    equalities: tuple[dict[str, Any], ...]
    sites: dict[str, str]
    bodies: dict[str, str]
    unmapped: dict[str, list[str]]
    gravity_compensation: dict[str, float]
    keyframes: dict[str, np.ndarray]
    qpos0: np.ndarray
    mjmodel: Any
    actuators: Actuators | None = None
    couplings: dict[str, tuple] = dataclasses.field(default_factory=dict)


def load_mjcf(
    path_or_xml: str | os.PathLike | bytes | Any,
    *,
    inertia_check: str = "warn",
    return_constraints: bool = False,
    return_info: bool = False,
    assets: dict[str, bytes] | None = None,
    warn_unmapped: bool = True,
    joint_equalities: str = "couple",
    allow_external_files: bool = True,
) -> Model | CoupledModel | tuple:
    """Build a `Model` from an MJCF model, compiled by MuJoCo's own compiler.

    The XML goes through ``mujoco.MjModel.from_xml_path``/``from_xml_string`` (so
    defaults, classes, ``<include>``, ``<frame>``, ``inertiafromgeom`` and meshes are
    handled exactly as MuJoCo handles them), and the *compiled* model is mapped:

    - **Bodies**: every MuJoCo body becomes a jaxrbd body of the same name whose frame
      is MuJoCo's body frame (``body_pos``/``body_quat``), with MuJoCo's mass and
      inertia (``body_mass``, ``body_ipos``, ``body_iquat``, ``body_inertia``). A body
      without joints is welded to its parent (a fixed joint; on the world, its mass
      belongs to the world). Unnamed bodies are called ``"body<id>"``.
    - **Joints** (``hinge`` -> `joints.revolute`, ``slide`` -> `joints.prismatic`,
      ``ball`` -> `joints.spherical`, ``free`` -> `joints.free`), in MuJoCo's order, so
      jaxrbd's ``q`` *is* MuJoCo's ``qpos`` (hinge and slide ``ref`` offsets are folded
      into the joint placement). A joint sits at ``jnt_pos`` in the body frame while a
      jaxrbd body frame is its joint frame after the motion: when ``jnt_pos`` is not
      zero the moving body is named ``"<body>/<joint>"`` and the MuJoCo body frame is a
      fixed frame on it. Several joints on one body become a chain of massless bodies
      ``"<body>/<joint>"`` (RBDL's emulated multi-DoF joints). Joint names are MuJoCo's
      (unnamed joints: ``"joint<id>"``).
    - **Velocities** ``v`` are MuJoCo's ``qvel`` except for free joints, whose linear
      part MuJoCo gives in world coordinates and first: use `qvel_to_v`, `v_to_qvel`
      and the acceleration and force converters.
    - **Sites** become massless named frames (`ModelBuilder.add_frame`) usable wherever
      a body is. A site whose name is taken by a body is called ``"<site>_site"``
      (``info.sites`` has the map); unnamed sites are ``"site<id>"``.
    - **Joint properties** per DoF: ``armature`` (part of the dynamics, `Model.armature`),
      ``damping``, ``frictionloss`` (`Model.friction`), ``stiffness`` and ``springref``
      (`Model.stiffness`, `Model.spring_reference` = MuJoCo's ``qpos_spring``), and the
      ``range`` of limited hinge and slide joints (`Model.q_lower`, `Model.q_upper`).
      `jaxrbd.passive_forces` turns damping, friction and springs into force elements.
    - **Gravity** ``opt.gravity`` (zero when the model disables gravity).
    - **Equality constraints** ``connect`` and ``weld`` (between bodies or sites, active
      at ``qpos0``) become `ConstraintSet.loops` closures: ``connect`` the three
      position rows in world axes, ``weld`` the six pose rows (``relpose`` included;
      ``torquescale`` only scales MuJoCo's rows and is not used).

    - **Joint equalities** (``<equality><joint joint1 joint2 polycoef>``, active at
      ``qpos0``) with a linear polynomial make ``joint1`` follow ``joint2`` exactly:
      ``q1 = c1 q2 + (q1_ref + c0 - c1 q2_ref)`` (MuJoCo's ``ref`` is ``qpos0``). The
      model is then a `CoupledModel` (as ``<mimic>`` in `load_urdf`) whose ``q`` leaves
      the coupled joints out (``info.couplings`` lists them; MuJoCo holds the same
      equality softly, by its constraint solver). ``joint_equalities="independent"``
      keeps every joint independent and names the equalities in the warning.
    - **Actuators** with joint transmissions (hinge, slide, ball, free; ``joint`` and
      ``jointinparent``), on fixed tendons or on sites (without ``refsite``), gain ``fixed``/``affine``, bias
      ``none``/``affine`` (``motor``, ``position``, ``velocity``, ``general``, and with
      an activation state ``intvelocity``, ``integrator`` and filters), with ``gear``,
      control, force, activation and joint/tendon actuator-force ranges, become
      ``info.actuators``: `jaxrbd.actuation` gives their generalized forces, MuJoCo's
      ``qfrc_actuator``.
    - **Flags**: ``<flag spring="disable">`` (``damper``, ``frictionloss``) loads zero
      stiffness (damping, friction), so `jaxrbd.passive_forces` applies what MuJoCo
      applies; ``<flag gravity="disable">`` zero gravity.

    Not mapped, and named in one warning (and in ``info.unmapped``): actuators with
    other transmissions (body, slider-crank, spatial tendon, site with ``refsite``),
    muscles, plugins or delays; spatial tendons, and the springs, dampers, friction and
    limits of fixed tendons; sensors; equality constraints of other kinds, inactive at ``qpos0``, or
    joint equalities that are nonlinear, lock a joint or repeat a coupling; fluid forces
    (``density``/``viscosity`` in ``<option>``); gravity compensation (``gravcomp``, a
    passive force MuJoCo applies at the body's centre of mass;
    ``info.gravity_compensation`` lists the factors and `gravity_compensation_forces`
    makes them an ``f_ext``), mocap bodies (welded at their model pose), flexes,
    polynomial springs and dampers, and limits of ball joints. Geoms (collision and
    visual shapes) are not part of a `Model`. MuJoCo's own compiler warnings are
    relayed as ``UserWarning``s ("MuJoCo: ...").

    **Untrusted files.** MJCF can make MuJoCo read local files: ``<include file>``,
    meshes, textures, height fields and skins, by absolute or ``../`` paths, even from an
    XML string (what it reads can end up in names or fail loudly, revealing that a file
    exists). With ``allow_external_files=False`` the XML is checked before MuJoCo sees
    it: every such path (joined to the ``<compiler>`` ``meshdir``/``texturedir``/
    ``assetdir``, links followed) must lie inside the model file's folder, included files
    are checked the same way, and MJCF text may only name files given in ``assets``.
    Explicit ``<inertial>`` masses that are negative or not finite are refused (MuJoCo
    would zero them on a body without joints).

    Args:
        path_or_xml: a path to an ``.xml`` file (`str` or `os.PathLike`), the MJCF text
            itself (a `str` whose first character after blanks and a byte-order mark is
            ``<``, or UTF-8 `bytes`), an
            ``mujoco.MjSpec`` (compiled here) or an already compiled ``mujoco.MjModel``.
        inertia_check: ``"warn"`` (default), ``"error"`` or ``"ignore"``, as
            `ModelBuilder` (MuJoCo's compiler already checks its own inertias).
        return_constraints: also return the `ConstraintSet` of the equality constraints
            (``None`` if there are none).
        return_info: also return an `MJCFInfo`.
        assets: ``{filename: bytes}`` for meshes referenced by an XML string (passed to
            ``from_xml_string``).
        warn_unmapped: emit the warning about unmapped elements (default ``True``).
        joint_equalities: ``"couple"`` (default: linear joint equalities become exact
            couplings, a `CoupledModel`) or ``"independent"`` (named as unmapped).
        allow_external_files: ``True`` (default) lets MuJoCo read whatever files the
            MJCF names; ``False`` refuses files outside the model's folder (see above),
            for models from untrusted sources.

    Returns:
        The `Model` (a `CoupledModel` when joint equalities couple joints); with
        ``return_constraints``, ``(model, constraints)``; with ``return_info``,
        ``(model, info)``; with both, ``(model, constraints, info)``.

    Raises:
        ImportError: ``mujoco`` is not installed.
        FileNotFoundError: the path does not exist.
        ValueError: MuJoCo rejects the model (its message is included); a free joint
            whose qpos MuJoCo reads differently (none: MuJoCo only allows free joints
            on top-level bodies); bytes that are not UTF-8; a negative or non-finite
            explicit mass or moment of inertia (the body named); with
            ``allow_external_files=False``, a file outside the model's folder.
        TypeError: ``path_or_xml`` is of an unsupported type.

    Example:
        >>> xml = '''
        ... <mujoco>
        ...   <worldbody>
        ...     <body name="arm" pos="0 0 1">
        ...       <joint name="hinge" type="hinge" axis="0 1 0" armature="0.1"/>
        ...       <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05" mass="1"/>
        ...       <site name="tip" pos="0 0 -0.5"/>
        ...     </body>
        ...   </worldbody>
        ... </mujoco>'''
        >>> model = jaxrbd.io.load_mjcf(xml)
        >>> model.nq, model.joint_names, model.body_names
        (1, ('hinge',), ('world', 'arm', 'tip'))
        >>> jaxrbd.point_position(model, jnp.zeros(1), "tip", jnp.zeros(3)).tolist()
        [0.0, 0.0, 0.5]
    """
    if joint_equalities not in ("couple", "independent"):
        raise ValueError(
            f"joint_equalities is {joint_equalities!r}, expected 'couple' or 'independent'"
        )
    if not isinstance(allow_external_files, bool):
        raise TypeError(f"allow_external_files must be True or False, got {allow_external_files!r}")
    m = compile_mjcf(path_or_xml, assets, allow_external_files)
    model, info = _map(m, inertia_check, joint_equalities)
    if warn_unmapped and info.unmapped:
        lines = "\n".join(f"  {what}: {', '.join(names)}" for what, names in info.unmapped.items())
        warnings.warn(
            "load_mjcf: these parts of the MJCF model are not represented in the jaxrbd "
            f"model (see load_mjcf's documentation):\n{lines}",
            UserWarning,
            stacklevel=2,
        )
    out: tuple = (model,)
    if return_constraints:
        out += (info.constraints,)
    if return_info:
        out += (info,)
    return out[0] if len(out) == 1 else out


# ---------------------------------------------------------------- compiling


def compile_mjcf(src, assets, allow_external_files=True):
    mujoco = _import_mujoco()
    if isinstance(src, (mujoco.MjModel, getattr(mujoco, "MjSpec", ()))) and not allow_external_files:
        raise ValueError(
            "load_mjcf(allow_external_files=False) checks the XML before MuJoCo reads it: pass "
            "the MJCF text or its path, not an MjSpec or MjModel (MuJoCo has read their files)"
        )
    if isinstance(src, mujoco.MjModel):
        return src
    if isinstance(src, getattr(mujoco, "MjSpec", ())):  # MjSpec: MuJoCo >= 3.2
        check_spec_masses(src)
        try:
            with relay_mujoco_warnings(mujoco, stacklevel=5):
                return src.compile()
        except Exception as e:
            raise ValueError(f"MuJoCo could not compile the MjSpec: {e}") from e
    src, is_xml = source_text(src)
    if not is_xml and not os.path.isfile(src):
        raise FileNotFoundError(f"load_mjcf: no MJCF file at {src!r}")
    if not allow_external_files:
        check_files(src if is_xml else None, None if is_xml else src, assets)
    what = "the MJCF text" if is_xml else f"the MJCF file {src!r}"
    with relay_mujoco_warnings(mujoco, stacklevel=5):
        try:
            # the spec, read before MuJoCo's compiler silently repairs what it should refuse
            if is_xml:
                spec = mujoco.MjSpec.from_string(src, include=_xml_files(assets),
                                                 assets=assets or None)
            else:
                spec = mujoco.MjSpec.from_file(src, include=_xml_files(assets),
                                               assets=assets or None)
        except Exception as e:
            raise ValueError(f"MuJoCo could not compile {what}: {e}") from e
        check_spec_masses(spec)
        try:
            if is_xml:
                return mujoco.MjModel.from_xml_string(src, assets or {})
            return mujoco.MjModel.from_xml_path(src, assets) if assets else (
                mujoco.MjModel.from_xml_path(src)
            )
        except Exception as e:
            raise ValueError(f"MuJoCo could not compile {what}: {e}") from e


def _xml_files(assets):
    """The XML files among ``assets`` (MjSpec takes included files separately)."""
    return {k: v for k, v in (assets or {}).items() if str(k).lower().endswith(".xml")} or None


# ---------------------------------------------------------------- mapping


def _names(m, kind: str, n: int) -> list[str]:
    mujoco = _import_mujoco()
    obj = getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}")  # BODY, JOINT, SITE, EQUALITY, ...
    return [mujoco.mj_id2name(m, obj, i) or "" for i in range(n)]


def _unique(names: list[str]) -> list[str]:
    """Default names (``"body<id>"``) can repeat an explicit one: suffix ``#<id>``."""
    seen: set[str] = set()
    out = []
    for i, n in enumerate(names):
        out.append(n if n not in seen else f"{n}#{i}")
        seen.add(out[-1])
    return out


class _Namer:
    """Unique jaxrbd body names: MuJoCo's body names first, derived names after."""

    def __init__(self, reserved):
        self.taken = set(reserved)

    def new(self, base: str, fallback_suffix: str) -> str:
        name = base if base not in self.taken else base + fallback_suffix
        k = 2
        while name in self.taken:
            name = f"{base}{fallback_suffix}{k}"
            k += 1
        self.taken.add(name)
        return name


def _map(m, inertia_check, joint_equalities="couple"):
    nbody, njnt = int(m.nbody), int(m.njnt)
    body_names = [n or f"body{i}" for i, n in enumerate(_names(m, "body", nbody))]
    body_names[0] = "world"
    body_names = _unique(body_names)
    joint_names = _unique([n or f"joint{j}" for j, n in enumerate(_names(m, "joint", njnt))])
    namer = _Namer(body_names)
    # Fixed joints have names too (the body's, unless a MuJoCo joint has it).
    fixed_namer = _Namer(joint_names)
    gravity = np.array(m.opt.gravity, dtype=np.float64)
    mujoco = _import_mujoco()
    if int(m.opt.disableflags) & int(mujoco.mjtDisableBit.mjDSBL_GRAVITY):
        gravity = np.zeros(3)
    b = ModelBuilder(gravity=gravity, inertia_check=inertia_check)
    unmapped: dict[str, list[str]] = {}
    # What the model's <flag> disables is left out, so passive_forces applies what MuJoCo does.
    off = {k: bool(int(m.opt.disableflags) & int(getattr(mujoco.mjtDisableBit, f"mjDSBL_{k.upper()}")))
           for k in ("spring", "damper", "frictionloss")}

    for i in range(1, nbody):
        parent = body_names[int(m.body_parentid[i])]
        name = body_names[i]
        mass = float(m.body_mass[i])
        Ri = quat_matrix(m.body_iquat[i])
        inertia = Ri @ np.diag(np.asarray(m.body_inertia[i], dtype=np.float64)) @ Ri.T
        inertial = Body(mass, np.array(m.body_ipos[i], dtype=np.float64), 0.5 * (inertia + inertia.T))
        R0, p0 = quat_matrix(m.body_quat[i]), np.array(m.body_pos[i], dtype=np.float64)
        j0, nj = int(m.body_jntadr[i]), int(m.body_jntnum[i])
        if m.body_mocapid[i] >= 0:
            unmapped.setdefault("mocap bodies (welded at their model pose)", []).append(name)
        if nj == 0:
            b.add_body(name, parent, joints.fixed(), inertial, Transform(R0, p0),
                       fixed_namer.new(name, "_fixed"))
            continue
        types = [int(m.jnt_type[j]) for j in range(j0, j0 + nj)]
        if _FREE in types:
            if nj != 1 or parent != "world":  # MuJoCo's compiler refuses both
                raise ValueError(
                    f"MJCF body {name!r}: a free joint must be the only joint of a top-level body"
                )
            j = j0
            b.add_body(name, "world", joints.free(), inertial, None, joint_names[j],
                       **_dof_kwargs(m, j, _FREE, off))
            continue
        prev, p_prev = parent, None
        for k, j in enumerate(range(j0, j0 + nj)):
            t = types[k]
            p_j = np.array(m.jnt_pos[j], dtype=np.float64)
            axis = np.array(m.jnt_axis[j], dtype=np.float64)
            # The joint frame: at the anchor, with the body's orientation before this
            # joint moves (MuJoCo composes a body's joints in order, each about its
            # anchor in the body frame as moved by the joints before it).
            if k == 0:
                Rj, pj = R0, p0 + R0 @ p_j
            else:
                Rj, pj = np.eye(3), p_j - p_prev
            ref = float(m.qpos0[int(m.jnt_qposadr[j])]) if t in (_HINGE, _SLIDE) else 0.0
            if t == _HINGE:
                # MuJoCo rotates by qpos - ref: fold the -ref turn into the placement.
                Rj = Rj @ axis_angle_matrix(axis, -ref)
                spec = joints.revolute(axis)
            elif t == _SLIDE:
                pj = pj - ref * (Rj @ axis)
                spec = joints.prismatic(axis)
            else:  # ball: MuJoCo reads its quaternion without a reference
                spec = joints.spherical()
            last = k == nj - 1
            own = last and not np.any(p_j)
            bname = name if own else namer.new(f"{name}/{joint_names[j]}", "_")
            b.add_body(
                bname, prev, spec, inertial if own else None, Transform(Rj, pj), joint_names[j],
                **_dof_kwargs(m, j, t, off),
            )
            prev, p_prev = bname, p_j
        if prev != name:
            # The MuJoCo body frame sits at -jnt_pos from the last joint frame.
            b.add_body(name, prev, joints.fixed(), inertial, Transform(translation=-p_prev),
                       fixed_namer.new(name, "_fixed"))

    # Sites: named frames on their body.
    site_names = _names(m, "site", int(m.nsite))
    sites: dict[str, str] = {}
    for s in range(int(m.nsite)):
        base = site_names[s] or f"site{s}"
        sname = namer.new(base, "_site")
        sites[site_names[s] or base] = sname
        b.add_body(
            sname,
            body_names[int(m.site_bodyid[s])],
            joints.fixed(),
            None,
            Transform(quat_matrix(m.site_quat[s]), np.array(m.site_pos[s], dtype=np.float64)),
            fixed_namer.new(sname, "_fixed"),
        )

    constraints, equalities = _equalities(m, body_names, site_names, sites, unmapped,
                                          couple_joints=joint_equalities == "couple")
    couplings = {}
    if joint_equalities == "couple":
        eq_names = _names(m, "equality", int(m.neq))
        couplings = joint_couplings(m, joint_names, lambda e: eq_names[e] or f"equality{e}",
                                    unmapped)
    _report(m, body_names, joint_names, unmapped, off)
    actuators = mjcf_actuators(
        mujoco, m, _unique([n or f"actuator{i}" for i, n in enumerate(_names(m, "actuator", int(m.nu)))]),
        unmapped, body_names, [sites[site_names[k] or f"site{k}"] for k in range(int(m.nsite))],
    )
    gravcomp = {body_names[i]: float(m.body_gravcomp[i]) for i in range(nbody) if m.body_gravcomp[i] != 0}
    if gravcomp:
        on_joints = actuators is not None and actuators.gravity_compensation_dofs
        what = ("gravity compensation (gravcomp, not applied; on joints with actuatorgravcomp "
                "it is part of jaxrbd.actuation)" if on_joints
                else "gravity compensation (gravcomp, not applied)")
        unmapped[what] = [
            f"{k} ({v:g})" for k, v in gravcomp.items()
        ]
    key_names = _names(m, "key", int(m.nkey))
    keyframes = {(key_names[k] or f"key{k}"): np.array(m.key_qpos[k]) for k in range(int(m.nkey))}
    # The builder's inertia warning would point at this module; re-emit it for the caller.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = b.build()
    for w in caught:
        warnings.warn(str(w.message), w.category, stacklevel=4)
    if couplings:
        model = couple(model, couplings)
    info = MJCFInfo(
        constraints=constraints,
        equalities=tuple(equalities),
        sites=sites,
        bodies={n: n for n in body_names},
        unmapped=unmapped,
        gravity_compensation=gravcomp,
        keyframes=keyframes,
        qpos0=np.array(m.qpos0),
        mjmodel=m,
        actuators=actuators,
        couplings=couplings,
    )
    return model, info


def _dof_kwargs(m, j, t, off) -> dict[str, Any]:
    """Per-DoF armature, damping, friction, stiffness, spring reference and limits (zero
    stiffness, damping or friction where the model's flags disable them)."""
    nv = {_FREE: 6, _BALL: 3}.get(t, 1)
    nq = {_FREE: 7, _BALL: 4}.get(t, 1)
    d0, q0 = int(m.jnt_dofadr[j]), int(m.jnt_qposadr[j])
    perm = _FREE_PERM if t == _FREE else np.arange(nv)

    def dof(field):
        return np.array(getattr(m, field)[d0 : d0 + nv], dtype=np.float64)[perm]

    out = dict(
        armature=dof("dof_armature"),
        damping=dof("dof_damping") * (not off["damper"]),
        friction=dof("dof_frictionloss") * (not off["frictionloss"]),
        stiffness=np.full(nv, 0.0 if off["spring"] else float(m.jnt_stiffness[j])),
        spring_reference=np.array(m.qpos_spring[q0 : q0 + nq], dtype=np.float64),
    )
    if t in (_HINGE, _SLIDE) and m.jnt_limited[j]:
        out["lower"], out["upper"] = float(m.jnt_range[j, 0]), float(m.jnt_range[j, 1])
    return out


def _equalities(m, body_names, site_names, sites, unmapped, couple_joints=False):
    """Active connect/weld equalities as loop closures; joint equalities left to
    `joint_couplings` when ``couple_joints``; the rest reported."""
    eq_names = _names(m, "equality", int(m.neq))
    mujoco = _import_mujoco()
    kind_names = {int(v): k[5:].lower() for k, v in mujoco.mjtEq.__members__.items()}
    site_type = int(mujoco.mjtObj.mjOBJ_SITE)
    equalities, sets = [], []
    row = 0
    for e in range(int(m.neq)):
        t = int(m.eq_type[e])
        label = eq_names[e] or f"equality{e}"
        kind = kind_names.get(t, f"type {t}")
        if t == _EQ_JOINT and couple_joints:
            continue
        if t not in (_EQ_CONNECT, _EQ_WELD):
            unmapped.setdefault(f"equality constraints of type {kind}", []).append(label)
            continue
        if not m.eq_active0[e]:
            unmapped.setdefault("equality constraints inactive at qpos0", []).append(label)
            continue
        o1, o2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        data = np.array(m.eq_data[e], dtype=np.float64)
        if int(m.eq_objtype[e]) == site_type:
            # Between sites, MuJoCo makes the site frames coincide (no anchor, no relpose).
            a = sites[site_names[o1] or f"site{o1}"]
            c = sites[site_names[o2] or f"site{o2}"]
            fa, fb = Transform(), Transform()
        elif t == _EQ_CONNECT:
            a, c = body_names[o1], body_names[o2]
            fa, fb = Transform(translation=data[0:3]), Transform(translation=data[3:6])
        else:
            # MuJoCo's weld: anchor data[3:6] on body 1 and data[0:3] on body 2
            # coincide, and R_1 R(relpose) = R_2.
            a, c = body_names[o1], body_names[o2]
            fa = Transform(quat_matrix(data[6:10]), data[3:6])
            fb = Transform(translation=data[0:3])
        axes = "position" if t == _EQ_CONNECT else "pose"
        sets.append(ConstraintSet.loops([(a, fa, c, fb)], axes=axes, frame="world"))
        n = 3 if t == _EQ_CONNECT else 6
        equalities.append(dict(name=label, type=kind, bodies=(a, c), rows=slice(row, row + n)))
        row += n
    cs = ConstraintSet.concat(sets) if sets else None
    return cs, equalities


def _report(m, body_names, joint_names, unmapped, off):
    """Collect the named elements a `Model` does not represent."""
    for kind, count, what in (
        ("sensor", m.nsensor, "sensors"),
        ("flex", m.nflex, "flexes"),
    ):
        n = int(count)
        if n:
            names = _names(m, kind, n)
            unmapped[what] = [x or f"{kind}{i}" for i, x in enumerate(names)]
    # Fixed tendons are linear in q: actuators on them are part of `Actuators`; what a
    # tendon does on its own (springs, dampers, friction, limits, armature) is not mapped.
    tendon_names = _names(m, "tendon", int(m.ntendon))
    for t in range(int(m.ntendon)):
        name = tendon_names[t] or f"tendon{t}"
        adr, num = int(m.tendon_adr[t]), int(m.tendon_num[t])
        if not all(int(m.wrap_type[adr + k]) == 1 for k in range(num)):  # mjWRAP_JOINT
            unmapped.setdefault("spatial tendons", []).append(name)
            continue
        props = [p for p, on in (
            ("stiffness", m.tendon_stiffness[t] != 0 and not off["spring"]),
            ("damping", m.tendon_damping[t] != 0 and not off["damper"]),
            ("frictionloss", m.tendon_frictionloss[t] != 0 and not off["frictionloss"]),
            ("limits", bool(m.tendon_limited[t])),
            ("armature", float(np.asarray(getattr(m, "tendon_armature", np.zeros(m.ntendon)))[t]) != 0),
        ) if on]
        if props:
            unmapped.setdefault("fixed tendons' passive forces and limits", []).append(
                f"{name} ({', '.join(props)})")
    density, viscosity = float(m.opt.density), float(m.opt.viscosity)
    if density or viscosity:
        unmapped["fluid forces (not applied)"] = [f"density={density:g}, viscosity={viscosity:g}"]
    for j in range(int(m.njnt)):
        t = int(m.jnt_type[j])
        if t == _BALL and m.jnt_limited[j]:
            unmapped.setdefault("ball joint limits (cone)", []).append(joint_names[j])
        if np.any(np.asarray(getattr(m, "jnt_stiffnesspoly", np.zeros((m.njnt, 1)))[j]) != 0):
            unmapped.setdefault("polynomial joint stiffness", []).append(joint_names[j])
    if hasattr(m, "dof_dampingpoly"):
        poly = np.asarray(m.dof_dampingpoly)
        for d in range(int(m.nv)):
            if np.any(poly[d] != 0):
                j = int(m.dof_jntid[d])
                lst = unmapped.setdefault("polynomial joint damping", [])
                if joint_names[j] not in lst:
                    lst.append(joint_names[j])
