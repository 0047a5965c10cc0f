"""Bundled example models (embedded, no download)."""

from __future__ import annotations

import numpy as np

from ._body import Body, Transform
from ._builder import ModelBuilder
from . import joints

__all__ = ["triple_pendulum", "humanoid", "chain"]


def triple_pendulum(joint: str = "euler_zyx", dtype=None):
    """RBDL's triple pendulum (seed 000, Algorithm 4).

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
