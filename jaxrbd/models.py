"""Bundled example models (embedded, no download)."""

from __future__ import annotations

import numpy as np

from . import joints
from ._body import Body, Transform
from ._builder import ModelBuilder
from ._markers import MarkerSet

__all__ = ["triple_pendulum", "humanoid", "chain", "human28", "manutec_r3"]


def triple_pendulum(joint: str = "euler_zyx", dtype=None):
    """RBDL's triple pendulum (Felis 2017, Algorithm 4).

    Three bodies of mass 0.1 kg with the centre of mass at ``(0, 0, -1)`` and inertia
    ``0.1 * 1``, joined by three-DoF rotational joints 1 m apart, gravity ``-9.81 z``.

    Args:
        joint: ``"euler_zyx"`` (RBDL's ``JointTypeEulerZYX``), ``"custom"`` (Algorithm
            4 as written: columns z, y, x) or ``"spherical"`` (quaternions).

    Returns:
        A `Model` with ``nv = 9``.

    Example:
        >>> jaxrbd.models.triple_pendulum().nv
        9
    """
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    body = Body(0.1, (0.0, 0.0, -1.0), np.eye(3) * 0.1)
    make = {
        "euler_zyx": joints.euler_zyx,
        "spherical": joints.spherical,
        "custom": lambda: joints.custom(
            [[0, 0, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]]
        ),
    }
    if joint not in make:
        raise ValueError(f"joint {joint!r}, expected one of {sorted(make)}")
    parent = "world"
    for k, z in enumerate((0.0, -1.0, -1.0), start=1):
        b.add_body(f"body_{k}", parent, make[joint](), body, Transform(translation=(0, 0, z)))
        parent = f"body_{k}"
    return b.build(dtype)


def _box(mass, size, com=(0.0, 0.0, 0.0)):
    x, y, z = size
    I = mass / 12.0 * np.diag([y * y + z * z, x * x + z * z, x * x + y * y])
    return Body(mass, com, I)


def humanoid(dtype=None):
    """A 36-DoF humanoid (82.8 kg) built in code: free-floating pelvis, 2-DoF lumbar
    and neck, 7-DoF arms, 6-DoF legs, and fixed hands, soles and a head camera.

    The sizes follow adult anthropometry; link boxes give the inertias. It is the
    "humanoid-sized" model of the demo and benchmarks (nq = 37, nv = 36, 33 bodies).

    Example:
        >>> m = jaxrbd.models.humanoid()
        >>> m.nq, m.nv
        (37, 36)
    """
    b = ModelBuilder()
    R, P = joints.revolute, Transform
    b.add_body("pelvis", "world", joints.free(), _box(10.0, (0.2, 0.3, 0.15)))
    b.add_body("lumbar_link", "pelvis", R((0, 1, 0)), _box(2.0, (0.1, 0.1, 0.1)),
               P(translation=(0, 0, 0.1)), joint_name="lumbar_pitch")
    b.add_body("torso", "lumbar_link", R((0, 0, 1)), _box(25.0, (0.25, 0.35, 0.45), (0, 0, 0.2)),
               P(translation=(0, 0, 0.05)), joint_name="lumbar_yaw")
    b.add_body("neck", "torso", R((0, 0, 1)), _box(1.0, (0.08, 0.08, 0.1)),
               P(translation=(0, 0, 0.45)), joint_name="neck_yaw")
    b.add_body("head", "neck", R((0, 1, 0)), _box(5.0, (0.2, 0.18, 0.22), (0, 0, 0.12)),
               P(translation=(0, 0, 0.05)), joint_name="neck_pitch")
    b.add_body("head_camera", "head", joints.fixed(), _box(0.2, (0.05, 0.1, 0.05)),
               P(translation=(0.1, 0, 0.12)))
    for side, sy in (("left", 1.0), ("right", -1.0)):
        parent = "torso"
        arm = [
            ("shoulder_pitch", (0, 1, 0), (0, sy * 0.2, 0.4), 1.0, (0.1, 0.1, 0.1), (0, 0, 0)),
            ("shoulder_roll", (1, 0, 0), (0, 0, 0), 0.5, (0.08, 0.08, 0.08), (0, 0, 0)),
            ("shoulder_yaw", (0, 0, 1), (0, 0, 0), 2.0, (0.08, 0.08, 0.28), (0, 0, -0.14)),
            ("elbow", (0, 1, 0), (0, 0, -0.28), 1.2, (0.07, 0.07, 0.25), (0, 0, -0.12)),
            ("wrist_yaw", (0, 0, 1), (0, 0, -0.25), 0.3, (0.05, 0.05, 0.05), (0, 0, 0)),
            ("wrist_pitch", (0, 1, 0), (0, 0, 0), 0.2, (0.04, 0.04, 0.04), (0, 0, 0)),
            ("wrist_roll", (1, 0, 0), (0, 0, 0), 0.4, (0.08, 0.04, 0.1), (0, 0, -0.05)),
        ]
        for jn, axis, xyz, m, size, com in arm:
            name = f"{side}_{jn}_link"
            b.add_body(name, parent, R(axis), _box(m, size, com), P(translation=xyz),
                       joint_name=f"{side}_{jn}")
            parent = name
        b.add_body(f"{side}_hand", parent, joints.fixed(), _box(0.4, (0.08, 0.03, 0.1)),
                   P(translation=(0, 0, -0.12)))
        parent = "pelvis"
        leg = [
            ("hip_yaw", (0, 0, 1), (0, sy * 0.1, -0.08), 1.0, (0.1, 0.1, 0.1), (0, 0, 0)),
            ("hip_roll", (1, 0, 0), (0, 0, 0), 1.0, (0.1, 0.1, 0.1), (0, 0, 0)),
            ("hip_pitch", (0, 1, 0), (0, 0, 0), 7.0, (0.14, 0.14, 0.42), (0, 0, -0.2)),
            ("knee", (0, 1, 0), (0, 0, -0.42), 3.5, (0.1, 0.1, 0.4), (0, 0, -0.2)),
            ("ankle_pitch", (0, 1, 0), (0, 0, -0.4), 0.3, (0.05, 0.05, 0.05), (0, 0, 0)),
            ("ankle_roll", (1, 0, 0), (0, 0, 0), 1.0, (0.22, 0.1, 0.06), (0.04, 0, -0.05)),
        ]
        for jn, axis, xyz, m, size, com in leg:
            name = f"{side}_{jn}_link"
            b.add_body(name, parent, R(axis), _box(m, size, com), P(translation=xyz),
                       joint_name=f"{side}_{jn}")
            parent = name
        b.add_body(f"{side}_sole", parent, joints.fixed(), Body(), P(translation=(0.04, 0, -0.08)))
    return b.build(dtype)


def chain(n: int, joint: str = "revolute", dtype=None):
    """A serial chain of ``n`` identical links (benchmarks, trace-size tests).

    Revolute joints alternate between the y and x axes; links are 0.1 m, 1 kg.

    Example:
        >>> jaxrbd.models.chain(5).nv
        5
    """
    if n < 1:
        raise ValueError(f"chain needs n >= 1 links, got {n}")
    b = ModelBuilder()
    parent = "world"
    for k in range(n):
        j = joints.revolute((0, 1, 0) if k % 2 == 0 else (1, 0, 0))
        if joint != "revolute":
            j = getattr(joints, joint)()
        b.add_body(f"link{k}", parent, j, _box(1.0, (0.03, 0.03, 0.1), (0, 0, -0.05)),
                   Transform(translation=(0, 0, -0.1 if k else 0.0)))
        parent = f"link{k}"
    return b.build(dtype)


# ---------------------------------------------------------------------------- human28

#: de Leva (1996), Table 4, male: segment ``(mass fraction, length [m] in the reference
#: subject, CM from the origin landmark as a fraction of the length, radii of gyration as
#: fractions of the length about the sagittal, transverse and longitudinal axes)``.
#: Reference subject: stature 1.741 m. Landmarks: head VERT-MIDG, upper trunk SUPR-XYPH,
#: mid trunk XYPH-OMPH, lower trunk OMPH-MIDH, upper arm SJC-EJC, forearm EJC-WJC, hand
#: WJC-MET3, thigh HJC-KJC, shank KJC-LMAL, foot HEEL-TTIP.
DE_LEVA_1996_MALE = {
    "head": (0.0694, 0.2033, 0.5976, (0.362, 0.376, 0.312)),
    "upper_trunk": (0.1596, 0.1707, 0.2999, (0.716, 0.454, 0.659)),
    "mid_trunk": (0.1633, 0.2155, 0.4502, (0.482, 0.383, 0.468)),
    "lower_trunk": (0.1117, 0.1457, 0.6115, (0.615, 0.551, 0.587)),
    "upper_arm": (0.0271, 0.2817, 0.5772, (0.285, 0.269, 0.158)),
    "forearm": (0.0162, 0.2689, 0.4574, (0.276, 0.265, 0.121)),
    "hand": (0.0061, 0.0862, 0.7900, (0.628, 0.513, 0.401)),
    "thigh": (0.1416, 0.4222, 0.4095, (0.329, 0.329, 0.149)),
    "shank": (0.0433, 0.4340, 0.4459, (0.255, 0.249, 0.103)),
    "foot": (0.0137, 0.2581, 0.4415, (0.257, 0.245, 0.124)),
}
#: de Leva's (1996) male reference stature [m]: lengths scale with ``height / 1.741``.
DE_LEVA_1996_STATURE = 1.741

# Dimensions de Leva's table does not give, as fractions of the stature (adult
# anthropometry): lateral malleolus height, half the hip-joint-centre distance, shoulder
# joint centre lateral from the midline and below the suprasternale, heel behind the ankle
# (fraction of the foot length).
_ANKLE_HEIGHT, _HIP_HALF_WIDTH = 0.039, 0.0505
_SHOULDER_LATERAL, _SHOULDER_DROP = 0.1000, 0.0200
_HEEL_BEHIND = 0.20


def _segment(name, mass, scale, com_from_top=True):
    """``(mass [kg], length [m], CM distance from the origin landmark [m],
    principal moments (sag, trans, long) about the CM [kg m^2])`` of a de Leva segment."""
    frac, L, cm, r = DE_LEVA_1996_MALE[name]
    m, L = frac * mass, L * scale
    return m, L, cm * L, tuple(m * (ri * L) ** 2 for ri in r)


def _combine(parts):
    """Mass, CM and inertia about the CM of rigidly joined ``(m, c (3,), I_c (3, 3))``."""
    m = sum(p[0] for p in parts)
    c = sum(p[0] * np.asarray(p[1]) for p in parts) / m
    I = np.zeros((3, 3))
    for mi, ci, Ii in parts:
        d = np.asarray(ci) - c
        I += Ii + mi * (d @ d * np.eye(3) - np.outer(d, d))
    return m, c, I


def _human28_geometry(height):
    s = height / DE_LEVA_1996_STATURE
    g = {k: DE_LEVA_1996_MALE[k][1] * s for k in DE_LEVA_1996_MALE}
    g["torso"] = g["upper_trunk"] + g["mid_trunk"]
    g["ankle"] = _ANKLE_HEIGHT * height
    g["hip"] = _HIP_HALF_WIDTH * height
    g["shoulder_y"] = _SHOULDER_LATERAL * height
    g["shoulder_z"] = g["torso"] - _SHOULDER_DROP * height
    # the neck (suprasternale to the head's lower landmark) closes the stature
    g["neck"] = height - (g["ankle"] + g["shank"] + g["thigh"] + g["lower_trunk"] + g["torso"]
                          + g["head"])
    g["heel"] = -_HEEL_BEHIND * g["foot"]
    return g


def human28(mass: float = 75.0, height: float = 1.75, *, markers: bool = False, dtype=None):
    """A 28-DoF human body model for gait analysis, with 36 motion-capture markers.

    The structure of Wojtusch et al. (2016, Fig. 6): 13 rigid segments and 12 joints, a
    free-floating pelvis (6 DoF) and 22 joint DoFs:

    | joint | joint kind | DoF | child segment |
    |---|---|---|---|
    | ``pelvis`` | free | 6 | pelvis (de Leva's lower trunk) |
    | ``lumbar`` | ``euler_yxz`` | 3 | torso (upper + mid trunk) |
    | ``neck`` | revolute y | 1 | head (with neck) |
    | ``{l,r}_shoulder`` | ``euler_yxz`` | 3 | upper arm |
    | ``{l,r}_elbow`` | revolute y | 1 | forearm with hand |
    | ``{l,r}_hip`` | ``euler_yxz`` | 3 | thigh |
    | ``{l,r}_knee`` | revolute y | 1 | shank |
    | ``{l,r}_ankle`` | revolute y | 1 | foot |

    Segment masses, centres of mass and radii of gyration are de Leva's (1996) adjusted
    Zatsiorsky-Seluyanov parameters for males (de Leva, P. (1996) Adjustments to
    Zatsiorsky-Seluyanov's segment inertia parameters, J. Biomech. 29(9), 1223-1230),
    scaled by ``mass`` and by ``height / 1.741`` (de Leva's reference stature): masses
    are fractions of ``mass``, the moments of inertia ``m (r L)^2``. Segments joined in
    one body (upper and mid trunk; forearm and hand) are combined exactly (parallel
    axes). Dimensions the table does not give (ankle height, hip and shoulder widths,
    heel position) are typical adult proportions of the stature; the neck length closes
    the stature, so the head's vertex is at ``height`` in the neutral pose.

    Frames: in the neutral configuration (``q = neutral_configuration``) the subject
    stands upright facing world +x with +y to its left and +z up; every body frame is
    parallel to the world, at its joint centre (the pelvis frame at the mid-point of the
    hip joint centres, at height ``0.039 h + shank + thigh``). Joint angles follow the
    right-hand rule about these axes: a positive ``y`` angle is flexion for the lumbar,
    neck and knee joints and extension for the hips; for the shoulders and elbows it
    swings the distal segment backwards; for the ankles it is plantarflexion.
    ``euler_yxz`` joints rotate about y (flexion/extension), then the new x
    (abduction/adduction), then the new z (internal/external rotation).

    Markers: 36 at standard landmarks (Plug-in-Gait-like names): head ``LFHD, RFHD,
    LBHD, RBHD``; torso ``C7, T10, CLAV, STRN``; pelvis ``LASI, RASI, LPSI, RPSI``; each
    arm ``SHO, ELB, WRA, WRB, FIN``; each leg ``THI, KNE, TIB, ANK, HEE, TOE, MT5``
    (prefixed ``L``/``R``), placed at skin positions scaled with the height.

    Args:
        mass: body mass [kg].
        height: stature [m].
        markers: also return the `MarkerSet`.
        dtype: the model's float dtype (JAX's default).

    Returns:
        The `Model` (``nq = 29``, ``nv = 28``, bodies ``pelvis, torso, head,
        l_upper_arm, l_forearm, ...``), or ``(model, markers)`` with ``markers=True``.

    Raises:
        ValueError: a mass or height that is not positive and finite.

    Example:
        >>> m, ms = jaxrbd.models.human28(mass=70.0, height=1.80, markers=True)
        >>> m.nq, m.nv, len(ms)
        (29, 28, 36)
        >>> round(float(jaxrbd.total_mass(m)), 6)
        70.0
    """
    for name, x in (("mass", mass), ("height", height)):
        if not (isinstance(x, (int, float, np.floating, np.integer)) and np.isfinite(x) and x > 0):
            raise ValueError(f"human28: {name} must be a positive finite number, got {x!r}")
    mass, height = float(mass), float(height)
    s = height / DE_LEVA_1996_STATURE
    g = _human28_geometry(height)
    P = lambda *xyz: Transform(translation=xyz)

    def body(parts):
        m, c, I = _combine(parts)
        return Body(m, tuple(c), I)

    def along_z(name, top_z, down=True):
        """A de Leva segment along the body z axis from ``top_z``, pointing down (or up)."""
        m, _, cm, (rs, rt, rl) = _segment(name, mass, s)
        z = top_z - cm if down else top_z + cm
        return (m, (0.0, 0.0, z), np.diag([rs, rt, rl]))

    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    # pelvis: lower trunk from OMPH (top, z = L) down to MIDH (the frame origin)
    b.add_body("pelvis", "world", joints.free(),
               body([along_z("lower_trunk", g["lower_trunk"])]), joint_name="pelvis")
    # torso: mid trunk (XYPH above OMPH) and upper trunk (SUPR at the top)
    torso = [along_z("mid_trunk", g["mid_trunk"]), along_z("upper_trunk", g["torso"])]
    b.add_body("torso", "pelvis", joints.euler_yxz(), body(torso),
               P(0.0, 0.0, g["lower_trunk"]), joint_name="lumbar")
    # head: VERT at the top, its CM 59.76 % of the head length below it
    b.add_body("head", "torso", joints.revolute((0.0, 1.0, 0.0)),
               body([along_z("head", g["neck"] + g["head"])]), P(0.0, 0.0, g["torso"]),
               joint_name="neck")
    for side, sy in (("l", 1.0), ("r", -1.0)):
        b.add_body(f"{side}_upper_arm", "torso", joints.euler_yxz(),
                   body([along_z("upper_arm", 0.0)]),
                   P(0.0, sy * g["shoulder_y"], g["shoulder_z"]), joint_name=f"{side}_shoulder")
        forearm = [along_z("forearm", 0.0), along_z("hand", -g["forearm"])]
        b.add_body(f"{side}_forearm", f"{side}_upper_arm", joints.revolute((0.0, 1.0, 0.0)),
                   body(forearm), P(0.0, 0.0, -g["upper_arm"]), joint_name=f"{side}_elbow")
        b.add_body(f"{side}_thigh", "pelvis", joints.euler_yxz(), body([along_z("thigh", 0.0)]),
                   P(0.0, sy * g["hip"], 0.0), joint_name=f"{side}_hip")
        b.add_body(f"{side}_shank", f"{side}_thigh", joints.revolute((0.0, 1.0, 0.0)),
                   body([along_z("shank", 0.0)]), P(0.0, 0.0, -g["thigh"]),
                   joint_name=f"{side}_knee")
        # foot: HEEL to TTIP along +x on the sole's level, the CM half the ankle height up
        m, _, cm, (rs, rt, rl) = _segment("foot", mass, s)
        foot = (m, (g["heel"] + cm, 0.0, -0.5 * g["ankle"]), np.diag([rl, rt, rs]))
        b.add_body(f"{side}_foot", f"{side}_shank", joints.revolute((0.0, 1.0, 0.0)),
                   body([foot]), P(0.0, 0.0, -g["shank"]), joint_name=f"{side}_ankle")
    model = b.build(dtype)
    if not markers:
        return model
    return model, _human28_markers(height, model.dtype)


def _human28_markers(height, dtype):
    g = _human28_geometry(height)
    s = height / DE_LEVA_1996_STATURE
    head_z = g["neck"]
    entries = {
        "LFHD": ("head", (0.085, 0.055, head_z + 0.145 * s)),
        "RFHD": ("head", (0.085, -0.055, head_z + 0.145 * s)),
        "LBHD": ("head", (-0.085, 0.055, head_z + 0.125 * s)),
        "RBHD": ("head", (-0.085, -0.055, head_z + 0.125 * s)),
        "C7": ("torso", (-0.075, 0.0, g["torso"] + 0.03 * s)),
        "T10": ("torso", (-0.11, 0.0, 0.55 * g["mid_trunk"])),
        "CLAV": ("torso", (0.06, 0.0, g["torso"] - 0.01 * s)),
        "STRN": ("torso", (0.10, 0.0, g["mid_trunk"])),
        "LASI": ("pelvis", (0.065, 0.125 * s, 0.085 * s)),
        "RASI": ("pelvis", (0.065, -0.125 * s, 0.085 * s)),
        "LPSI": ("pelvis", (-0.105, 0.045 * s, 0.10 * s)),
        "RPSI": ("pelvis", (-0.105, -0.045 * s, 0.10 * s)),
    }
    for side, sy in (("L", 1.0), ("R", -1.0)):
        b = side.lower()
        entries.update({
            f"{side}SHO": (f"{b}_upper_arm", (0.0, sy * 0.02, 0.045 * s)),
            f"{side}ELB": (f"{b}_upper_arm", (-0.01, sy * 0.04, -g["upper_arm"])),
            f"{side}WRA": (f"{b}_forearm", (0.03, sy * 0.01, -g["forearm"])),
            f"{side}WRB": (f"{b}_forearm", (-0.03, sy * 0.01, -g["forearm"])),
            f"{side}FIN": (f"{b}_forearm", (0.01, sy * 0.025, -g["forearm"] - 0.8 * g["hand"])),
        })
    for side, sy in (("L", 1.0), ("R", -1.0)):
        b = side.lower()
        entries.update({
            f"{side}THI": (f"{b}_thigh", (0.02, sy * 0.08, -0.5 * g["thigh"])),
            f"{side}KNE": (f"{b}_thigh", (0.0, sy * 0.05, -g["thigh"])),
            f"{side}TIB": (f"{b}_shank", (0.03, sy * 0.055, -0.5 * g["shank"])),
            f"{side}ANK": (f"{b}_shank", (0.0, sy * 0.035, -g["shank"])),
            f"{side}HEE": (f"{b}_foot", (g["heel"] - 0.01, 0.0, -g["ankle"] + 0.03 * s)),
            f"{side}TOE": (f"{b}_foot", (g["heel"] + 0.75 * g["foot"], sy * 0.005,
                                         -g["ankle"] + 0.02 * s)),
            f"{side}MT5": (f"{b}_foot", (g["heel"] + 0.62 * g["foot"], sy * 0.04,
                                         -g["ankle"] + 0.02 * s)),
        })
    ms = MarkerSet.from_dict(entries)
    return MarkerSet(ms.names, ms.bodies, ms.offsets.astype(dtype))


# ---------------------------------------------------------------------------- manutec_r3

#: The Manutec r3 links as published (Otter and Tuerk 1988; Modelica Standard Library,
#: ``Modelica.Mechanics.MultiBody.Examples.Systems.RobotR3.Utilities.MechanicalStructure``):
#: ``name: (joint axis, joint origin in the previous link's frame [m], mass [kg], centre of
#: mass [m], inertia about the centre of mass (I11, I22, I33, I21) [kg m^2])``. Frames are
#: parallel at ``q = 0``, with ``y`` up; inertias the library leaves unset are its default
#: 0.001 kg m^2 (products 0).
MANUTEC_R3_LINKS = {
    "link1": ((0, 1, 0), (0.0, 0.351, 0.0), 1.0, (0.0, 0.0, 0.0), (0.001, 1.16, 0.001, 0.0)),
    "link2": ((1, 0, 0), (0.0, 0.324, 0.3), 56.5, (0.172, 0.205, 0.0), (2.58, 0.64, 2.73, -0.46)),
    "link3": ((1, 0, 0), (0.0, 0.65, 0.0), 26.4, (0.064, -0.034, 0.0), (0.279, 0.245, 0.413, -0.070)),
    "link4": ((0, 1, 0), (0.0, 0.414, -0.155), 28.7, (0.0, 0.0, 0.0), (1.67, 0.081, 1.67, 0.0)),
    "link5": ((1, 0, 0), (0.0, 0.186, 0.0), 5.2, (0.0, 0.0, 0.0), (1.25, 0.81, 1.53, 0.0)),
    "link6": ((0, 1, 0), (0.0, 0.125, 0.0), 0.5, (0.05, 0.05, 0.05), (0.001, 0.001, 0.001, 0.0)),
}
#: The Manutec r3 drives (same sources, ``RobotR3.FullRobot``'s axis parameters): motor
#: rotor inertia ``J`` [kg m^2] and gear ratio ``i`` (motor angle / joint angle) per axis.
MANUTEC_R3_MOTORS = {
    "axis1": (1.3e-3, -105.0),
    "axis2": (1.3e-3, 210.0),
    "axis3": (1.3e-3, 60.0),
    "axis4": (1.6e-4, -99.0),
    "axis5": (1.8e-4, 79.2),
    "axis6": (4.3e-5, -99.0),
}


def manutec_r3(
    rotors: str = "exact",
    *,
    load_mass: float = 15.0,
    load_com=(0.0, 0.25, 0.0),
    dtype=None,
):
    """The six-axis Manutec r3 industrial robot with its geared motor rotors.

    The DLR (then DFVLR) model of the Siemens Manutec r3: Otter, M. and Tuerk, S. (1988)
    *The DFVLR models 1 and 2 of the Manutec r3 robot*, DFVLR-Mitt. 88-13, Oberpfaffenhofen
    (parameters measured by Tuerk; see also Franke and Otter (1993), *The Manutec r3
    benchmark models for the dynamic simulation of robots*, DLR TR R101-93). The numbers
    are those of the Modelica Standard Library's
    ``Modelica.Mechanics.MultiBody.Examples.Systems.RobotR3``, which implements that model:

    * links (``Utilities.MechanicalStructure``): joint axes and origins, masses, centres of
      mass, inertias (`MANUTEC_R3_LINKS`); the world has ``y`` up, gravity
      ``(0, -9.81, 0)``; the base (1 kg) is fixed to the world at the origin;
    * the load: ``load_mass`` at ``load_com`` in the last link's frame (the library's
      ``mLoad = 15`` kg, ``rLoad = (0, 0.25, 0)``; its ``FullRobot`` uses ``(0.1, 0.25,
      0.1)``) with the library's default inertia ``0.001 * 1``;
    * drives (``FullRobot``'s axis parameters and the ``Motor`` default): motor inertias
      ``J`` = 1.3e-3, 1.3e-3, 1.3e-3, 1.6e-4, 1.8e-4, 4.3e-5 kg m^2 and gear ratios
      ``i`` = -105, 210, 60, -99, 79.2, -99 (`MANUTEC_R3_MOTORS`).

    The library's 1-D drive trains (motor inertia behind an ideal gear) are the diagonal
    armature ``J i^2``; the gear elasticity of axes 1-3, friction and the motor electrics
    are left out (rigid gears). With ``rotors="exact"`` each motor is a rotor spinning at
    ``i q`` on the link before its joint (motor 1 on the base), about the joint's axis
    through the joint's origin, massless (the motors' masses are in the measured link
    data) with its spin moment ``J`` and transverse moments ``J / 2``: this mounting is
    our assumption, the library's 1-D model does not place the motors.

    The link-1 inertia ``(0.001, 1.16, 0.001)`` violates the triangle inequality (only its
    ``I22``, about axis 1, enters the dynamics); it is kept as published, silently.

    Args:
        rotors: ``"exact"`` (a `CoupledModel` with the six rotors, `ModelBuilder.add_rotor`),
            ``"armature"`` (a `Model` with ``armature = J i^2``) or ``"none"``.
        load_mass: the payload [kg].
        load_com: `(3,)` the payload's centre of mass in the last link's frame [m].
        dtype: the model's float dtype (JAX's default).

    Returns:
        The model: joints ``axis1`` ... ``axis6`` (``nq = nv = 6``), bodies ``base``,
        ``link1`` ... ``link6``, ``load`` (and ``motor1`` ... ``motor6`` when exact).

    Example:
        >>> exact = jaxrbd.models.manutec_r3()
        >>> exact.joint_names, exact.coupled_joints[0]
        (('axis1', 'axis2', 'axis3', 'axis4', 'axis5', 'axis6'), 'motor1')
        >>> np.round(jaxrbd.models.manutec_r3("armature").armature, 4).tolist()
        [14.3325, 57.33, 4.68, 1.5682, 1.1291, 0.4214]
    """
    if rotors not in ("exact", "armature", "none"):
        raise ValueError(f"manutec_r3: rotors={rotors!r}, expected 'exact', 'armature' or 'none'")
    b = ModelBuilder(gravity=(0.0, -9.81, 0.0), inertia_check="ignore")
    b.add_body("base", "world", joints.fixed(), Body(1.0))
    parent = "base"
    for k, (name, (axis, origin, m, com, (i11, i22, i33, i21))) in enumerate(
        MANUTEC_R3_LINKS.items(), start=1
    ):
        inertia = np.array([[i11, i21, 0.0], [i21, i22, 0.0], [0.0, 0.0, i33]])
        b.add_body(name, parent, joints.revolute(axis), Body(m, com, inertia),
                   Transform(translation=origin), joint_name=f"axis{k}")
        parent = name
    b.add_body("load", "link6", joints.fixed(), Body(load_mass, load_com, np.eye(3) * 0.001))
    for k, (joint, (J, i)) in enumerate(MANUTEC_R3_MOTORS.items(), start=1):
        b.add_rotor(joint, inertia=J, gear_ratio=i, name=f"motor{k}")
    return b.build(dtype, rotors=rotors)
