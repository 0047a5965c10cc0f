"""The hard ground step's implicit gradient against central differences, feet sticking.

A legged robot stands with every foot pushing and none sliding (strict complementarity),
the situation in which `ground.step`'s implicit gradient is exact when the contact solve
has converged. One step from that state, with a tight solve (``HardContact(tolerance=
1e-13)``), is differentiated in reverse mode with respect to the joint angles, all
velocities and all torques, and compared with central differences along random
directions at several step sizes: the relative error ``|ad - fd| / max(1, |fd|)`` of a
random linear functional of ``(q+, qd+)``.

Robots: solo12 (``tests/data/solo12.urdf``, four foot spheres) and, when
``MENAGERIE_ROOT`` names a MuJoCo Menagerie checkout, ANYmal C (``anybotics_anymal_c/scene_mjx.xml``,
``ContactPoints.from_mjcf``: its four foot spheres), at the ``standing`` keyframe
lowered 0.1 mm into the ground, zero torques (the legs give way under the weight, so
every foot pushes).

    PYTHONPATH=. python benchmarks/bench_contact_gradients.py
    MENAGERIE_ROOT=/path/to/mujoco_menagerie PYTHONPATH=. python benchmarks/bench_contact_gradients.py

Writes ``benchmarks/results/contact_gradients.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

import jaxrbd  # noqa: E402
from jaxrbd import ground  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DT = 1e-3
MU = 1.0
EPS = (1e-3, 1e-4, 1e-5, 1e-6)


def solo12():
    model = jaxrbd.load_urdf(ROOT / "tests" / "data" / "solo12.urdf", floating_base=True)
    feet = ground.ContactPoints.create(
        model, [(f"{leg}_FOOT", [0.0, 0.0, 0.0], 0.016) for leg in ("FL", "FR", "HL", "HR")])
    pose = jnp.array([0, 0.8, -1.6] * 2 + [0, -0.8, 1.6] * 2)
    q = jnp.zeros(model.nq).at[3].set(1.0).at[7:].set(pose)
    return model, feet, q


def anymal_c(root):
    import mujoco

    path = Path(root) / "anybotics_anymal_c" / "scene_mjx.xml"
    m, _ = C.menagerie_model(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = jaxrbd.load_mjcf(m)
    pts = ground.ContactPoints.from_mjcf(model, m)
    key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "standing")
    q = jnp.asarray(m.key_qpos[key])
    world = np.asarray(jaxrbd.point_position(model, q, list(pts.bodies), pts.points))
    low = world[:, 2] - np.asarray(pts.radius)
    feet = pts.select([n for n, z in zip(pts.names, low) if z <= low.min() + 1e-3])
    return model, feet, q


def check(name, model, feet, q):
    plane = ground.Plane(0.0, friction=MU)
    gap, _, _, _ = ground.contact_frames(model, q, feet, plane)
    # 0.1 mm deep: at a gap of exactly 0 the normal target switches from -gap/dt to
    # -baumgarte gap/dt, a kink that central differences across it would see
    q = q.at[2].add(-float(jnp.min(gap)) - 1e-4)
    qd = jnp.zeros(model.nv)
    tau = jnp.zeros(model.nv)
    tight = ground.HardContact(iterations=5000, tolerance=1e-13)
    rng = np.random.default_rng(0)
    w_q, w_v = jnp.asarray(rng.normal(size=model.nq)), jnp.asarray(rng.normal(size=model.nv))

    def f(joints, qd, tau):
        q1, qd1, info = ground.step(model, q.at[7:].set(joints), qd, tau, DT, feet, plane,
                                    tight)
        return w_q @ q1 + w_v @ qd1, info

    (_, info), grads = jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2), has_aux=True))(
        q[7:], qd, tau)
    forces = np.asarray(info.force)
    slip = np.linalg.norm(forces[:, 1:], axis=1) / (MU * forces[:, 0])
    fj = jax.jit(lambda *a: f(*a)[0])
    args = (q[7:], qd, tau)
    errors = {}
    for eps in EPS:
        worst = 0.0
        for seed in range(3):
            d = [jnp.asarray(np.random.default_rng(seed + 10 * k).normal(size=a.shape))
                 for k, a in enumerate(args)]
            fd = (fj(*(a + eps * v for a, v in zip(args, d)))
                  - fj(*(a - eps * v for a, v in zip(args, d)))) / (2 * eps)
            ad = sum(jnp.vdot(g, v) for g, v in zip(grads, d))
            worst = max(worst, abs(float(ad - fd)) / max(1.0, abs(float(fd))))
        errors[f"{eps:.0e}"] = worst
    row = dict(
        robot=name, nv=model.nv, points=len(feet.names), friction=MU,
        converged=bool(info.converged), residual=float(info.residual),
        iterations=int(info.iterations), min_normal_force=float(forces[:, 0].min()),
        max_tangential_ratio=float(slip.max()), **{f"rel_err_eps_{k}": v
                                                   for k, v in errors.items()},
        best_rel_err=min(errors.values()),
    )
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(C.RESULTS / "contact_gradients.json"))
    args = p.parse_args(argv)
    rows, skipped = [check("solo12", *solo12())], {}
    root = os.environ.get("MENAGERIE_ROOT")
    if root:
        rows.append(check("ANYmal C", *anymal_c(root)))
    else:
        skipped["ANYmal C"] = "MENAGERIE_ROOT is not set (a MuJoCo Menagerie checkout)"
    cols = [("robot", "robot", str), ("nv", "nv", str), ("pts", "points", str),
            ("conv", "converged", str), ("residual", "residual", lambda x: f"{x:.1e}"),
            ("min f_n [N]", "min_normal_force", lambda x: f"{x:.3g}"),
            ("max |f_t|/mu f_n", "max_tangential_ratio", lambda x: f"{x:.2f}")]
    cols += [(f"err eps={e:.0e}", f"rel_err_eps_{e:.0e}", lambda x: f"{x:.1e}") for e in EPS]
    C.print_table(rows, cols)
    for k, v in skipped.items():
        print(f"skipped {k}: {v}")
    C.write_json(args.out, rows, C.machine_metadata(), skipped=skipped)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
