"""Menagerie's legged robots standing on `jaxrbd.ground`, side by side with MuJoCo's `mj_step`.

Every legged robot of MuJoCo Menagerie that compiles (``MENAGERIE_ROOT``; skipped with a
reason when unset) stands at its keyframe (the named one, else the first, else ``qpos0``),
held by the same joint PD torques in jaxrbd and in MuJoCo, for ``--seconds`` at
``dt = 1 ms``, with the hard (`HardContact()` defaults) and compliant (`CompliantContact()`
defaults) models.

Scene rules (the same for both simulators):

- **Missing meshes**: this Menagerie snapshot lacks some mesh files. A mesh whose file is
  missing is deleted with the geoms that use it when those geoms are visual only (no
  collision, no mass: Menagerie's visual classes have ``density="0"`` and the bodies carry
  explicit inertials); a robot that loses a collision geom this way is skipped.
- **Feet**: the robot's collision geoms become points (`ContactPoints.from_mjcf`: spheres,
  capsule end caps, box corners, cylinder rims; mesh vertices only for the robots in
  ``MESH_FEET``, whose feet are meshes: the leaf bodies' collision meshes, at most
  ``MESH_POINTS`` vertices of each spread over its sole); the feet are the points
  whose lowest surface point is within ``--band`` (2 cm) of the lowest one at the pose.
  The base is then lowered or raised so that the lowest point touches the ground
  (``z = 0``). In MuJoCo only the geoms these points come from collide, with the floor.
- **Friction** 1 (MuJoCo: sliding friction 1 on the feet and the floor; its cone type is
  the model's own). MuJoCo's joint limits, equality constraints, joint damping, friction
  loss, springs, gravity compensation and actuators are switched off: jaxrbd's step has
  none of them, and the PD torques go in through ``qfrc_applied``.
- **Keyframe set down**: the keyframe with its joints locked rests on the floor as a
  rigid body would (`settle`: rotated about the facet of its points' lower convex hull
  that holds the centre of mass until that facet is level; Apollo's soles are pitched
  2.2 degrees at its keyframe, the other robots move by less than 0.6 degrees). The points
  within ``TOUCH`` (0.1 mm) of the ground then are the touching points.
- **Compliant rest**: the hard model rests at the rigid keyframe (gap 0). The compliant
  model carries a load only while its springs are compressed, and each point sinks by its
  own load's depth; its rows start at rest in its own static equilibrium
  (`compliant_rest`: the configuration nearest the keyframe, base orientation and centre
  of mass kept, whose Hunt-Crossley forces balance the weight and its moments; the legs
  take up the feet's tilt), with the feed-forward torques and the PD reference of that
  configuration. MuJoCo's soft contact has its own rest and starts at the keyframe.
- **Controller** (the same in both simulators), ``tau = tau_ff + kp (q_ref - q) - kd qd``
  on every joint but the free one:

  * ``tau_ff``: the static torques that hold the keyframe with vertical forces
    ``f_z >= 0`` (inside every friction cone) on the touching points only, of smallest
    norm (`feed_forward`);
  * ``kp_i = max(h_i w^2, 2 s_i)``: ``h_i = 1 / (H^-1)_ii`` the joint's apparent
    inertia with the base free, ``w = 2 pi 20 Hz`` (``--pd-hz``), ``s_i`` the gravity
    stiffness of the mass the joint tips (a leg joint tips the rest of the robot about
    its axis, any other joint its own subtree): each joint alone holds that mass upright
    with a margin of 2;
  * ``kd_i = 2 sqrt(kp_i c_i)`` (damping ratio 1), ``c_i`` the joint's inertia with the
    touching points held, at most ``h_i / dt``; then all scaled by one factor so that
    ``dt H^-1 Kd`` (joint block, base free) has no eigenvalue above 1 where one
    explicit PD step of the free robot would otherwise be unstable (`gains`: PND Adam
    Lite only).

  It is a posture controller, not a balance controller: nothing moves the centre of
  mass back over the feet once the whole robot leans (see the docs for who falls).
- Robots with closed kinematic loops (``connect``/``weld`` equality constraints that
  carry the legs: Cassie) do not apply (`ground.step` has no loop constraints); neither
  do robots without a free joint.

Per robot and contact model: the vertical contact force over the weight minus 1 (the
mean over the last 0.5 s and the worst step of it), the base's horizontal drift (the
largest over the run, and the largest after the first second, when the PD has settled the
pose), the largest ``|f_t| / (mu f_n)`` over every step and point, the
hard solver's largest residual, converged fraction and mean iterations, and whether it
stands (base height within 5 cm of the start, tilt below 10 degrees, drift below 1 cm).
MuJoCo: its final base height against jaxrbd's, its total vertical contact force (mean
over the last 0.5 s), and the time per step (`mj_step` alone, one thread) against
jaxrbd's (one jitted single-trajectory `ground.rollout`, per step), in the same process.

Writes ``benchmarks/results/legged_corpus.json``. Run:
``MENAGERIE_ROOT=/path/to/mujoco_menagerie PYTHONPATH=. nice python
benchmarks/bench_legged_corpus.py`` from the repository root (without ``PYTHONPATH=.`` the
installed jaxrbd runs; ``--robots`` a subset, ``--out`` elsewhere; ``--models compliant``
one contact model; ``--merge a.json b.json`` joins partial runs, a later file's row replacing
an earlier one of the same robot and model; one robot per process keeps memory and compile
caches apart).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import _common as cm  # noqa: E402

import jaxrbd  # noqa: E402

jax.config.update("jax_enable_x64", True)

DT = 1e-3
MU = 1.0
W = 2 * np.pi * 20.0

#: (label, directory, scene file, keyframe name or None)
ROBOTS = [
    ("ANYmal B", "anybotics_anymal_b", "scene.xml", None),
    ("ANYmal C", "anybotics_anymal_c", "scene.xml", None),
    ("Go1", "unitree_go1", "scene.xml", None),
    ("Go2", "unitree_go2", "scene.xml", None),
    ("A1", "unitree_a1", "scene.xml", None),
    ("Spot", "boston_dynamics_spot", "scene.xml", None),
    ("Barkour v0", "google_barkour_v0", "scene.xml", "standing"),
    ("Barkour vB", "google_barkour_vb", "scene.xml", "home"),
    ("H1", "unitree_h1", "scene.xml", "home"),
    ("G1", "unitree_g1", "scene.xml", "stand"),
    ("Talos", "pal_talos", "scene_motor.xml", None),
    ("Apollo", "apptronik_apollo", "scene.xml", None),
    ("OP3", "robotis_op3", "scene.xml", None),
    ("Cassie", "agility_cassie", "scene.xml", "home"),
    ("Berkeley humanoid", "berkeley_humanoid", "scene.xml", None),
    ("Booster T1", "booster_t1", "scene.xml", "home"),
    ("Fourier N1", "fourier_n1", "scene.xml", None),
    ("PND Adam Lite", "pndbotics_adam_lite", "scene.xml", None),
    ("ToddlerBot 2xc", "toddlerbot_2xc", "scene.xml", "home"),
]


#: Robots whose feet are meshes: their mesh vertices become points. Elsewhere meshes are
#: left out: the vertices of a shin mesh near the ground would add hundreds of points.
MESH_FEET = {"Barkour v0", "Barkour vB"}


class Skip(Exception):
    """A robot the corpus cannot run, with the reason."""


def load_spec(path):
    """The scene's MjModel, with missing visual-only meshes deleted (see the module doc)."""
    try:
        return cm.menagerie_model(path)
    except FileNotFoundError as e:
        raise Skip(str(e)) from None
    except Exception as e:  # noqa: BLE001 - any compiler error skips the robot
        raise Skip(f"does not compile: {str(e)[:120]}") from None


def scene(root, label, directory, fname, key):
    import mujoco

    path = os.path.join(root, directory, fname)
    if not os.path.isfile(path):
        raise Skip(f"no {directory}/{fname}")
    m, n_missing = load_spec(path)
    if m.njnt == 0 or m.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE or m.nq - 7 != m.nv - 6:
        raise Skip("not one free joint followed by hinge/slide joints")
    loops = [i for i in range(m.neq) if m.eq_type[i] in (mujoco.mjtEq.mjEQ_CONNECT,
                                                        mujoco.mjtEq.mjEQ_WELD)]
    if loops:
        raise Skip(f"{len(loops)} connect/weld equality constraints close kinematic loops; "
                   "ground.step has no loop constraints")
    qref = m.qpos0.copy()
    key_name = "qpos0"
    if m.nkey:
        k = 0 if key is None else mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, key)
        qref = m.key_qpos[k].copy()
        key_name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_KEY, k) or f"key {k}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # every joint independent: MuJoCo's equality constraints are switched off too
        model = jaxrbd.load_mjcf(m, joint_equalities="independent")
    geoms = None
    if label in MESH_FEET:
        # only the collision geoms of the leaf bodies (the lower legs): the chassis and
        # thigh meshes have ~190 000 vertices in all
        parents = set(m.body_parentid[1:].tolist())
        geoms = lambda mm, g: (int(mm.geom_bodyid[g]) not in parents
                               and bool(mm.geom_contype[g] or mm.geom_conaffinity[g]))
    try:
        pts = jaxrbd.ground.ContactPoints.from_mjcf(model, m, geoms=geoms,
                                                    meshes=label in MESH_FEET)
    except ValueError as e:
        raise Skip(str(e)) from None
    world = np.asarray(jaxrbd.point_position(model, jnp.asarray(qref), list(pts.bodies),
                                             pts.points))
    low = world[:, 2] - np.asarray(pts.radius)
    keep = [n for n, z in zip(pts.names, low) if z <= low.min() + ARGS.band]
    if label in MESH_FEET:
        keep = thin_mesh_points(keep, dict(zip(pts.names, world)))
    feet = pts.select(keep)
    qref[2] -= low.min()
    qref, tilt = settle(model, feet, qref)
    world = np.asarray(jaxrbd.point_position(model, jnp.asarray(qref), list(feet.bodies),
                                             feet.points))
    low = world[:, 2] - np.asarray(feet.radius)
    touching = [n for n, z in zip(feet.names, low) if z <= TOUCH]
    gid = {(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"): g
           for g in range(m.ngeom)}
    geoms = sorted({gid[n.split("/")[0]] for n in keep})
    tau_ff, fz, ff_residual = feed_forward(model, feet.select(touching), qref)
    pd = gains(model, m, feet.select(touching), [gid[n.split("/")[0]] for n in touching], qref)
    # the joint rows of g(q*) against MuJoCo's bias force at rest (its free joint's
    # velocity coordinates differ from jaxrbd's, its hinge coordinates are the same)
    d = mujoco.MjData(m)
    d.qpos[:] = qref
    mujoco.mj_forward(m, d)
    g = np.asarray(jaxrbd.gravity_forces(model, jnp.asarray(qref)))[6:]
    g_vs_mujoco = float(np.max(np.abs(g - d.qfrc_bias[6:])) / max(np.max(np.abs(g)), 1e-300))
    return dict(m=m, model=model, feet=feet, qref=qref, key=key_name, geoms=geoms,
                missing_meshes=n_missing, gains=pd[:2], gain_info=pd[2], tau_ff=tau_ff,
                ff_forces=fz, ff_residual=ff_residual, gravity_vs_mujoco=g_vs_mujoco,
                settle_tilt_deg=tilt, touching=touching)


#: The most vertices a mesh foot keeps (spread over its sole).
MESH_POINTS = 6


def thin_mesh_points(names, world):
    """Per mesh geom, at most `MESH_POINTS` of its band's vertices, spread over the sole.

    The lowest vertex first, then farthest-point sampling in the horizontal plane: a
    foot's hundreds of near-coplanar vertices would make the contact problem hundreds of
    redundant rows for the same support polygon.
    """
    groups = {}
    for n in names:
        groups.setdefault(n.split("/")[0], []).append(n)
    out = []
    for group in groups.values():
        xyz = np.array([world[n] for n in group])
        pick = [int(np.argmin(xyz[:, 2]))]
        dist = np.linalg.norm(xyz[:, :2] - xyz[pick[0], :2], axis=1)
        while len(pick) < min(MESH_POINTS, len(group)):
            pick.append(int(np.argmax(dist)))
            dist = np.minimum(dist, np.linalg.norm(xyz[:, :2] - xyz[pick[-1], :2], axis=1))
        out += [group[i] for i in pick]
    return out


#: Points whose lowest surface point is within this of the ground at the (settled)
#: keyframe carry the feed-forward forces and define the legs [m].
TOUCH = 1e-4


#: The steepest facet a keyframe is set down on [deg]: steeper ones (a near-vertical
#: facet's horizontal projection is a sliver) would tip the robot over, not level it.
MAX_SETTLE_DEG = 10.0


def settle(model, feet, qref, rounds=8):
    """The keyframe set down on the floor as a rigid body (joints locked): ``(qref, tilt)``.

    A keyframe's soles need not be level (Apollo's are pitched toes-up by 2.5 degrees): on
    its lowest points alone its centre of mass may lie outside the support polygon. The
    locked robot comes to rest on the facet of the lower convex hull of its points'
    lowest surface points whose horizontal projection holds the centre of mass; the whole
    robot is rotated about that facet until it is horizontal, and lowered to touch
    (repeated: spheres' lowest points move with the rotation). ``tilt`` is the total
    rotation [deg]; it is 0 where the keyframe already rests level.
    """
    from scipy.spatial import ConvexHull, QhullError
    from scipy.spatial.transform import Rotation

    q = qref.copy()
    total = Rotation.identity()
    r = np.asarray(feet.radius)
    for _ in range(rounds):
        world = np.asarray(jaxrbd.point_position(model, jnp.asarray(q), list(feet.bodies),
                                                 feet.points))
        low = world - r[:, None] * np.array([0.0, 0.0, 1.0])
        q[2] -= low[:, 2].min()
        low[:, 2] -= low[:, 2].min()
        if np.ptp(low[:, 2]) < 1e-12 or len(low) < 3:
            break
        com = np.asarray(jaxrbd.center_of_mass(model, jnp.asarray(q)))
        try:
            hull = ConvexHull(low, qhull_options="QJ")
        except QhullError:
            break
        normal = None
        for simplex, eq in zip(hull.simplices, hull.equations):
            if eq[2] > -np.cos(np.radians(MAX_SETTLE_DEG)):
                continue  # not a lower facet, or one the upright robot cannot rest on
            a, b, c = low[simplex, :2]
            lam = np.linalg.lstsq(np.array([b - a, c - a]).T, com[:2] - a, rcond=None)[0]
            if lam.min() >= -1e-9 and lam.sum() <= 1 + 1e-9:
                normal, pivot = eq[:3], low[simplex[0]]
                break
        if normal is None:
            break
        axis = np.cross(normal, [0.0, 0.0, -1.0])
        angle = np.arctan2(np.linalg.norm(axis), -normal[2])
        if angle < 1e-10:
            break
        rot = Rotation.from_rotvec(axis / np.linalg.norm(axis) * angle)
        total = rot * total
        q[:3] = pivot + rot.apply(q[:3] - pivot)
        w, x, y, z = q[3:7]
        q[3:7] = np.roll((rot * Rotation.from_quat([x, y, z, w])).as_quat(), 1)
    return q, float(np.degrees(total.magnitude()))


#: Each joint's stiffness over the gravity stiffness of the mass it tips (see `gains`).
STIFFNESS_MARGIN = 2.0
#: Damping ratio against the joint's inertia with the touching points held.
DAMPING_RATIO = 1.0


def gains(model, m, touching, touching_geoms, qref):
    """PD gains ``(kp, kd, info)`` per joint (the free joint left out), from the model.

    * Stiffness: ``kp_i = max(h_i w^2, STIFFNESS_MARGIN * s_i)``. ``h_i = 1 / (H^-1)_ii``
      is the joint's apparent inertia with the base free (``w = 2 pi --pd-hz``, the
      bandwidth floor); ``s_i`` the gravity stiffness of the mass that the joint tips
      (``m g r_perp,z``, with ``r_perp`` the part of that mass's centre, from the joint's
      anchor, normal to its axis: zero for a vertical axis, ``m g h`` for a horizontal
      one). A joint that carries a touching point in its subtree (a leg's) tips the rest
      of the robot about its axis; any other joint tips its own subtree. Each joint alone
      holds the body upright with the margin: legs in parallel only add to it.
    * Damping: ``kd_i = 2 DAMPING_RATIO sqrt(kp_i c_i)`` with ``c_i = 1 / (H_c^-1)_ii`` the
      joint's inertia with the touching points held (``H_c^-1 = H^-1 - H^-1 J^T (J H^-1
      J^T)^+ J H^-1``, ``J`` their 3-D Jacobians), at most ``h_i / dt`` (the explicit
      PD's damping stays stable with the foot free). The per-joint cap does not
      bound coupled joints (an ankle's pitch and roll) together: where one explicit PD
      step of the free robot is unstable (its spectral radius above 1), all ``kd`` are
      divided by ``lam_max(dt Kd^1/2 H_jj^-1 Kd^1/2)``, ``H_jj^-1`` the joint block of
      ``H^-1``. ``info["free_pd_radius"]`` is that radius with the final gains.
    """
    import mujoco

    q = jnp.asarray(qref)
    H = np.asarray(jaxrbd.mass_matrix(model, q))
    Hi = np.linalg.inv(H)
    h = 1.0 / np.diag(Hi)[6:]
    J = np.asarray(jaxrbd.point_jacobian(model, q, list(touching.bodies), touching.points))
    J = J.reshape(-1, model.nv)
    HJ = Hi @ J.T
    Hc_inv = Hi - HJ @ np.linalg.pinv(J @ HJ, rcond=1e-10) @ HJ.T
    c = 1.0 / np.maximum(np.diag(Hc_inv)[6:], 1e-300)
    d = mujoco.MjData(m)
    d.qpos[:] = qref
    mujoco.mj_forward(m, d)
    gz = abs(float(m.opt.gravity[2]))
    root = int(m.body_rootid[m.jnt_bodyid[0]])
    M, com = float(m.body_subtreemass[root]), d.subtree_com[root]
    leg_bodies = set()
    for g in touching_geoms:
        b = int(m.geom_bodyid[g])
        while b > root:
            leg_bodies.add(b)
            b = int(m.body_parentid[b])
    s = np.zeros(model.nv - 6)
    for j in range(1, m.njnt):
        b, k = int(m.jnt_bodyid[j]), int(m.jnt_dofadr[j]) - 6
        if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            continue  # a slide joint's gravity load is constant: no stiffness
        mb, cb = float(m.body_subtreemass[b]), d.subtree_com[b]
        mass, centre = (M - mb, (M * com - mb * cb) / (M - mb)) if b in leg_bodies else (mb, cb)
        a = d.xaxis[j]
        rel = centre - d.xanchor[j]
        s[k] = mass * gz * (rel - a * (a @ rel))[2]
    kp = np.maximum(h * W * W, STIFFNESS_MARGIN * s)
    kd = np.minimum(2 * DAMPING_RATIO * np.sqrt(kp * c), h / DT)
    capped = kd >= h / DT * (1 - 1e-12)
    # per joint dt kd_i / h_i <= 1 does not bound dt H^-1 Kd, whose coupled joints (an
    # ankle's pitch and roll) add up: where that makes one explicit PD step of the free
    # robot unstable (PND Adam Lite: lam 1.99, radius 1.17), the damping of all joints
    # together is brought to deadbeat
    Hj = Hi[6:, 6:]
    sk = np.sqrt(kd)
    lam = float(np.linalg.eigvalsh(DT * sk[:, None] * Hj * sk[None, :]).max())
    if _pd_radius(Hj, kp, kd) <= 1.0:
        lam = 1.0
    kd = kd / max(1.0, lam)
    info = dict(kp=kp, kd=kd, gravity_stiffness=s, inertia_free=h, inertia_held=c,
                stiffness_bound=kp > h * W * W, damping_capped=capped,
                damping_scale=1.0 / max(1.0, lam), w_dt=np.sqrt(kp / h) * DT,
                free_pd_radius=_pd_radius(Hj, kp, kd))
    return kp, kd, info


def _pd_radius(Hj, kp, kd):
    """The spectral radius of one explicit PD step of the free robot (the joint block
    ``Hj`` of ``H^-1``, base free, gravity and contact left out): below 1 is stable."""
    n = len(kp)
    eye = np.eye(n)
    v = eye - DT * Hj @ np.diag(kd)
    x = -DT * Hj @ np.diag(kp)
    step = np.block([[eye + DT * x, DT * v], [x, v]])
    return float(np.max(np.abs(np.linalg.eigvals(step))))


def feed_forward(model, feet, qref):
    """The static joint torques that hold the keyframe on the feet, and the foot forces.

    At rest ``g(q*) = S^T tau + J_c^T f``. Only vertical forces ``f_z >= 0`` are used: they
    lie inside every friction cone, and a vertical force through a sphere's centre acts
    along the same line as one at its lowest point, so the centres' Jacobians serve. The
    six base rows ``g_b = J_b^T f_z`` fix the forces: the smallest-norm ``f_z >= 0`` that
    meets them (least squares with a ``1e-5`` weight on ``|f_z|``, bounded below by 0),
    then ``tau = g_j - J_j^T f_z`` on the joint rows.

    Returns ``(tau (nv - 6,), f_z (K,), base-row residual / weight)``.
    """
    from scipy.optimize import lsq_linear

    q = jnp.asarray(qref)
    g = np.asarray(jaxrbd.gravity_forces(model, q))
    J = np.asarray(jaxrbd.point_jacobian(model, q, list(feet.bodies), feet.points))[:, 2, :]
    weight = float(np.linalg.norm(g[3:6]))  # the base's force rows: the total weight
    A, b = J[:, :6].T, g[:6]
    scale = weight / len(feet)
    # the base rows as equations, a small penalty on |f_z| picks the smallest-norm answer
    sol = lsq_linear(np.vstack([A, 1e-5 * np.eye(len(feet))]),
                     np.concatenate([b / scale, np.zeros(len(feet))]),
                     bounds=(0.0, np.inf), method="bvls", tol=1e-14)
    fz = sol.x * scale
    residual = float(np.linalg.norm(A @ fz - b) / weight)
    return g[6:] - J[:, 6:].T @ fz, fz, residual


def compliant_rest(model, feet, qref, contact_model, tol=1e-12, steps=50):
    """The settled keyframe resting on the compliant model's springs: ``(q, tau_ff, f_z)``.

    The compliant contact carries a load only while it penetrates, ``f = k d^p``: at
    rest each foot point sinks by its own depth (a heel that carries 250 N sinks 4 mm,
    a toe that carries 20 N 0.7 mm), and a rigid foot tilts by the difference. Tilting
    the whole locked robot with its feet would move its centre of mass by its height
    times that tilt (H1: 2 cm, most of its heel margin). So the posture is kept and the
    legs take up the tilt: ``q`` is the configuration nearest the keyframe (Gauss-Newton
    with smallest-norm steps over the base's translation and the joints; the base keeps
    its orientation) whose foot points' Hunt-Crossley forces balance the weight and
    the moments about the centre of mass, with the centre of mass over the same ground
    point. ``tau_ff = g_j(q) - J_j^T f_z`` then holds the joints. Starting at rest there,
    the compliant model starts in its own static equilibrium, as the hard model starts
    in its at the rigid keyframe.
    """
    k = float(contact_model.stiffness)
    p = float(contact_model.exponent)
    r = jnp.asarray(feet.radius)
    bodies = list(feet.bodies)
    g0 = np.asarray(jaxrbd.gravity_forces(model, jnp.asarray(qref)))
    weight = float(np.linalg.norm(g0[3:6]))
    depth = (weight / len(feet) / k) ** (1 / p)
    start = jnp.asarray(qref).at[2].add(-depth)
    com0 = jaxrbd.center_of_mass(model, jnp.asarray(qref))[:2]

    def configuration(x):
        # the base's orientation is kept: its angular velocity components are zero
        v = jnp.concatenate([jnp.zeros(3), x])
        return jaxrbd.integrate(model, start, v)

    def forces(q):
        z = jaxrbd.point_position(model, q, bodies, feet.points)[:, 2] - r
        d = jnp.maximum(-z, 0.0)
        return jnp.where(d > 0, k * jnp.where(d > 0, d, 1.0) ** p, 0.0)

    def residual(x):
        q = configuration(x)
        f = forces(q)
        arm = jaxrbd.point_position(model, q, bodies, feet.points)[:, :2]
        com = jaxrbd.center_of_mass(model, q)
        arm = arm - com[:2]
        # the vertical force and the moments of the vertical forces about the CoM; the
        # CoM over the keyframe's ground point (per 1 cm)
        return jnp.concatenate([jnp.array([f.sum() - weight, arm[:, 1] @ f, -(arm[:, 0] @ f)])
                                / weight, (com[:2] - com0) / 1e-2])

    res, jac = jax.jit(residual), jax.jit(jax.jacfwd(residual))
    x = jnp.zeros(model.nv - 3)
    for _ in range(steps):
        rx = res(x)
        if float(jnp.max(jnp.abs(rx))) <= tol:
            break
        x = x - jnp.linalg.pinv(jac(x), rtol=1e-12) @ rx
    err = float(jnp.max(jnp.abs(res(x))))
    if not err <= tol:
        raise RuntimeError(f"compliant rest: residual {err:.1e} after {steps} steps")
    q = configuration(x)
    fz = forces(q)
    J = jaxrbd.point_jacobian(model, q, bodies, feet.points)[:, 2, :]
    g = jaxrbd.gravity_forces(model, q)
    return np.asarray(q), np.asarray(g[6:] - J[:, 6:].T @ fz), np.asarray(fz)


def run_jaxrbd(s, contact_model, n):
    model, feet, qref = s["model"], s["feet"], jnp.asarray(s["qref"])
    kp, kd = (jnp.asarray(g) for g in s["gains"])
    tau0 = jnp.asarray(s["tau_ff"])
    q0 = qref
    if isinstance(contact_model, jaxrbd.ground.CompliantContact):
        # start at rest in the compliant model's static equilibrium (`compliant_rest`),
        # with the feed-forward that holds it; the PD reference is its pose
        q0, tau0, _ = compliant_rest(model, feet, s["qref"], contact_model)
        q0, tau0 = jnp.asarray(q0), jnp.asarray(tau0)
        qref = q0

    def policy(t, q, qd):
        return jnp.zeros(model.nv).at[6:].set(tau0 + kp * (qref[7:] - q[7:]) - kd * qd[6:])

    ground = jaxrbd.ground.Plane(0.0, friction=MU)
    f = jax.jit(lambda q0: jaxrbd.ground.rollout(model, q0, jnp.zeros(model.nv), None, DT, feet,
                                                 ground, contact_model, n_steps=n,
                                                 policy=policy))
    # compiled ahead, then run once: that run is both the result and the timing (a 5 s
    # hard-model run of a 48-point robot takes minutes; a second, timing-only run would
    # double it)
    t0 = time.perf_counter()
    compiled = f.lower(q0).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(q0))
    return out, compile_s, (time.perf_counter() - t0) / n


def run_mujoco(s, n):
    import mujoco

    m = s["m"]
    D = mujoco.mjtDisableBit
    m.opt.timestep = DT
    for bit in (D.mjDSBL_LIMIT, D.mjDSBL_EQUALITY, D.mjDSBL_SPRING, D.mjDSBL_DAMPER,
                D.mjDSBL_FRICTIONLOSS, D.mjDSBL_ACTUATION):
        m.opt.disableflags |= int(bit)
    m.body_gravcomp[:] = 0
    floor = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0
             and m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE]
    if not floor:
        raise Skip("the scene has no floor plane")
    m.geom_contype[:] = 0
    m.geom_conaffinity[:] = 0
    for g in s["geoms"]:
        m.geom_contype[g], m.geom_conaffinity[g], m.geom_friction[g, 0] = 1, 0, MU
    for g in floor:
        m.geom_contype[g], m.geom_conaffinity[g], m.geom_friction[g, 0] = 0, 1, MU
        m.geom_pos[g, 2] = 0.0
    d = mujoco.MjData(m)
    d.qpos[:] = s["qref"]
    mujoco.mj_forward(m, d)
    kp, kd = s["gains"]
    qref = s["qref"][7:]
    fz, xy, spent = [], [], 0.0
    f6 = np.zeros(6)
    for _ in range(n):
        d.qfrc_applied[6:] = s["tau_ff"] + kp * (qref - d.qpos[7:]) - kd * d.qvel[6:]
        t0 = time.perf_counter()
        mujoco.mj_step(m, d)
        spent += time.perf_counter() - t0
        total = 0.0
        for i in range(d.ncon):
            mujoco.mj_contactForce(m, d, i, f6)
            frame = d.contact[i].frame.reshape(3, 3)
            w = frame.T @ f6[:3]
            # MuJoCo's force acts on geom2 from geom1; the floor is geom1 here
            total += w[2] if d.contact[i].geom[0] in floor else -w[2]
        fz.append(total)
        xy.append(d.qpos[:2].copy())
    return np.array(fz), np.array(xy), d.qpos.copy(), spent / n


def tilt_deg(quat):
    w, x, y, _ = quat
    # the angle between the base's z axis and the world's
    cz = 1 - 2 * (x * x + y * y)
    return float(np.degrees(np.arccos(np.clip(cz / np.linalg.norm(quat) ** 2, -1, 1))))


def analyse(s, qs, info, n, weight):
    tail = max(1, n // 4) if n < 2000 else 500
    fz = np.asarray(info.total_force[:, 2])
    f = np.asarray(info.force)
    mu = MU
    fn = f[..., 0]
    ft = np.linalg.norm(f[..., 1:], axis=-1)
    on = fn > 1e-9 * weight
    cone = float(np.max(np.where(on, ft / (mu * np.where(on, fn, 1.0)), 0.0)))
    cone_off = float(np.max(np.where(on, 0.0, ft)))  # tangential force without normal force
    q = np.asarray(qs)
    drift = float(np.max(np.linalg.norm(q[:, :2] - q[0, :2], axis=1)))
    # after the first second the PD has settled the pose: what moves then is slip
    k1 = min(1000, n // 2)
    settled = float(np.max(np.linalg.norm(q[k1:, :2] - q[k1, :2], axis=1)))
    dz = float(q[-1, 2] - q[0, 2])
    tilt = tilt_deg(q[-1, 3:7])
    ok = bool(np.all(np.isfinite(q))) and abs(dz) < 0.05 and tilt < 10 and drift < 0.01
    return dict(
        force_ratio_mean=float(np.mean(fz[-tail:]) / weight - 1),
        force_ratio_worst=float(np.max(np.abs(fz[-tail:] / weight - 1))),
        drift_m=drift, drift_settled_m=settled, height_change_m=dz, tilt_deg=tilt, cone_max=cone,
        tangential_without_normal_N=cone_off,
        residual_max=float(np.max(np.asarray(info.residual))),
        converged_fraction=float(np.mean(np.asarray(info.converged))),
        iterations_mean=float(np.mean(np.asarray(info.iterations))),
        final_base_z=float(q[-1, 2]), stands=ok,
        # the bar: force to 1e-3 on every step of the last 0.5 s, drift <= 1 mm,
        # inside the cone everywhere, every solve converged
        meets_target=ok and float(np.max(np.abs(fz[-tail:] / weight - 1))) <= 1e-3
        and drift <= 1e-3 and cone <= 1 + 1e-9
        and bool(np.all(np.asarray(info.converged))))


def one_robot(root, entry, n):
    label, directory, fname, key = entry
    s = scene(root, label, directory, fname, key)
    weight = float(np.sum(s["m"].body_mass[1:])) * abs(float(s["m"].opt.gravity[2]))
    common = dict(robot=label, key=s["key"], seconds=n * DT, pd_hz=W / (2 * np.pi), nv=s["model"].nv, points=len(s["feet"]),
                  foot_geoms=len(s["geoms"]), mass_kg=weight / abs(s["m"].opt.gravity[2]),
                  missing_meshes=s["missing_meshes"], ff_residual=s["ff_residual"],
                  ff_points_loaded=int(np.sum(s["ff_forces"] > 1e-6 * np.max(s["ff_forces"]))),
                  touching=len(s["touching"]), settle_tilt_deg=s["settle_tilt_deg"],
                  kp_from_gravity=int(np.sum(s["gain_info"]["stiffness_bound"])),
                  kd_capped=int(np.sum(s["gain_info"]["damping_capped"])),
                  w_dt_max=float(np.max(s["gain_info"]["w_dt"])),
                  damping_scale=s["gain_info"]["damping_scale"],
                  free_pd_radius=s["gain_info"]["free_pd_radius"],
                  gravity_vs_mujoco=s["gravity_vs_mujoco"])
    fz_mj, xy_mj, q_mj, mj_step_s = run_mujoco(s, n)
    k1 = min(1000, n // 2)
    tail = 500 if n >= 2000 else max(1, n // 4)
    rows = []
    for name, cmodel in (("hard", jaxrbd.ground.HardContact()),
                         ("compliant", jaxrbd.ground.CompliantContact())):
        if name not in ARGS.models:
            continue
        (qs, _, info), compile_s, step_s = run_jaxrbd(s, cmodel, n)
        row = dict(common, model=name, **analyse(s, qs, info, n, weight))
        row.update(compile_s=compile_s, s_per_step=step_s, mujoco_s_per_step=mj_step_s,
                   mujoco_force_ratio_mean=float(np.mean(fz_mj[-tail:]) / weight - 1),
                   mujoco_final_base_z=float(q_mj[2]),
                   height_vs_mujoco_m=row["final_base_z"] - float(q_mj[2]),
                   mujoco_drift_m=float(np.max(np.linalg.norm(xy_mj - s["qref"][:2], axis=1))),
                   mujoco_drift_settled_m=float(np.max(np.linalg.norm(xy_mj[k1:] - xy_mj[k1],
                                                                      axis=1))))
        rows.append(row)
        print(f"  {label} {name}: stands={row['stands']} target={row['meets_target']} "
              f"F/W-1={row['force_ratio_mean']:.1e} "
              f"drift={row['drift_m']:.1e} settled={row['drift_settled_m']:.1e} "
              f"res={row['residual_max']:.1e} "
              f"conv={row['converged_fraction']:.3f} it={row['iterations_mean']:.1f} "
              f"{1e6 * step_s:.0f}us/step (MuJoCo {1e6 * mj_step_s:.0f}us) "
              f"compile {compile_s:.0f}s", flush=True)
    return rows


def report(rows, skipped):
    e = lambda x: "nan" if x is None else f"{x:.1e}"  # write_json stores NaN as null
    cm.print_table(rows, [
        ("robot", "robot", str), ("model", "model", str), ("pts", "points", str),
        ("F/W-1", "force_ratio_mean", e), ("worst", "force_ratio_worst", e),
        ("drift m", "drift_m", e), ("after 1 s", "drift_settled_m", e),
        ("cone", "cone_max", lambda x: f"{x:.6f}"),
        ("resid", "residual_max", e), ("conv", "converged_fraction", lambda x: f"{x:.3f}"),
        ("iters", "iterations_mean", lambda x: f"{x:.1f}"), ("stands", "stands", str),
        ("target", "meets_target", str), ("MJ drift", "mujoco_drift_m", e),
        ("dz vs MJ m", "height_vs_mujoco_m", e), ("MJ F/W-1", "mujoco_force_ratio_mean", e),
        ("us/step", "s_per_step", lambda x: f"{1e6 * x:.0f}"),
        ("MJ us/step", "mujoco_s_per_step", lambda x: f"{1e6 * x:.1f}")])
    for s in skipped:
        print(f"skipped {s['robot']}: {s['reason']}")


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--band", type=float, default=0.02, help="foot band above the lowest point [m]")
    p.add_argument("--pd-hz", type=float, default=20.0, help="PD bandwidth w / 2 pi [Hz]")
    p.add_argument("--robots", nargs="*", help="labels to run (default all)")
    p.add_argument("--models", nargs="*", default=["hard", "compliant"],
                   choices=["hard", "compliant"], help="contact models to run (default both)")
    p.add_argument("--out", default=None)
    p.add_argument("--merge", nargs="*", help="JSON files of partial runs to merge into --out")
    ARGS = p.parse_args()
    global W
    W = 2 * np.pi * ARGS.pd_hz
    if ARGS.merge:
        parts = [json.loads(open(f).read()) for f in ARGS.merge]
        # a later part's row replaces an earlier one of the same robot and model (a rerun
        # of one model), in the order of `ROBOTS`
        rows = {(r["robot"], r["model"]): r for part in parts for r in part["rows"]}
        order = {e[0]: i for i, e in enumerate(ROBOTS)}
        rows = [rows[k] for k in sorted(rows, key=lambda k: (order.get(k[0], len(order)),
                                                             k[1] != "hard"))]
        skipped = list({r["robot"]: r for part in parts for r in part["skipped"]}.values())
        meta = dict(parts[0]["metadata"], merged_from=[part["metadata"] for part in parts[1:]])
        extra = {k: v for k, v in parts[0].items() if k not in ("metadata", "rows", "skipped")}
        out = ARGS.out or cm.RESULTS / "legged_corpus.json"
        cm.write_json(out, rows, meta, skipped=skipped, **extra)
        report(rows, skipped)
        print("wrote", out)
        return
    root = os.environ.get("MENAGERIE_ROOT")
    if not root:
        print("skipped: MENAGERIE_ROOT is not set (a MuJoCo Menagerie checkout)")
        return
    try:
        import mujoco  # noqa: F401
    except ImportError:
        print("skipped: mujoco is not installed")
        return
    n = int(round(ARGS.seconds / DT))
    meta = cm.machine_metadata()
    meta["machine"]["note"] = "AMD EPYC, AVX2, 2 cores, shared with other jobs"
    rows, skipped = [], []
    out = ARGS.out or cm.RESULTS / "legged_corpus.json"
    for entry in ROBOTS:
        if ARGS.robots and entry[0] not in ARGS.robots:
            continue
        print(entry[0], flush=True)
        try:
            rows += one_robot(root, entry, n)
        except Skip as e:
            print(f"  skipped: {e}", flush=True)
            skipped.append(dict(robot=entry[0], reason=str(e)))
        cm.write_json(out, rows, meta, skipped=skipped, seconds=ARGS.seconds, dt=DT,
                      friction=MU, band_m=ARGS.band, pd_hz=W / (2 * np.pi),
                      pd_gains=f"kp = max(h w^2, {STIFFNESS_MARGIN} m g r_perp,z), kd = "
                      f"min(2 {DAMPING_RATIO} sqrt(kp c), h / dt), divided by lam_max(dt "
                      "Kd^1/2 H_jj^-1 Kd^1/2) where the free PD step is unstable; "
                      "h = 1/(H^-1)_ii, "
                      "c = 1/(H_c^-1)_ii with the touching points held",
                      compliant_start="compliant_rest: static equilibrium on the springs",
                      feed_forward=f"vertical forces on the points within {TOUCH} m of the "
                      "ground at the settled keyframe", settle=True)

    report(rows, skipped)
    print("wrote", out)


ARGS = None

if __name__ == "__main__":
    main()
