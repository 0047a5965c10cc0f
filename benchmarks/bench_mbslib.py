"""MBSlib's Table II (Wojtusch et al. 2016): KIN, CRBA, ABA, RNEA and their derivatives on
the pendulum on a trolley (2 DoF) and the 28-DoF human body model, with Pinocchio timed in
the same run and MBSlib's published figures printed beside them.

Models: the trolley of MBSlib's §III-A (a prismatic joint along x carrying a 5 kg, 1 m rod
on a revolute joint about z, gravity along -y) and `jaxrbd.models.human28` (free pelvis,
22 joint DoFs). Both are rebuilt in Pinocchio from the jaxrbd `Model` (`to_pinocchio`:
same joint order, Euler joints as chains of revolute joints with massless links between,
the free joint as a ``JointModelFreeFlyer``); the script first checks that the two agree
(forward kinematics, mass matrix, ABA, RNEA) and stops if they do not.

Rows, as MBSlib's: ``KIN`` forward kinematics (all body poses), ``CRBA`` forward dynamics
through the mass matrix (CRBA + bias forces + Cholesky solve), ``ABA`` forward dynamics,
``RNEA`` inverse dynamics. Derivatives:

* ``d/dparam``: one directional derivative with respect to a model parameter, as
  MBSlib's ``dq_i/dl_i`` (a body position with respect to a segment length) and
  ``dqdd_i/dm_i``, ``dtau_i/dm_i`` (with respect to a body mass): `jax.jvp`;
* ``jacfwd state``: the full Jacobian with respect to the state by `jax.jacfwd` (``q``
  through `jaxrbd.integrate`): KIN all body positions by ``q``; CRBA/ABA ``qdd`` by
  ``(q, qd, tau)``; RNEA ``tau`` by ``(q, qd, qdd)``;
* ``analytic state``: `jaxrbd.forward_dynamics_derivatives` (ABA row) and
  `jaxrbd.inverse_dynamics_derivatives` (RNEA row) against Pinocchio's
  ``computeABADerivatives`` / ``computeRNEADerivatives``; Pinocchio's
  ``computeJointJacobians`` stands beside the KIN Jacobian;
* ``analytic params``: `jaxrbd.inverse_dynamics_regressor` (all inertial
  parameters) against Pinocchio's ``computeJointTorqueRegressor`` (the same matrix, as
  the dynamics are linear in them), `jaxrbd.forward_dynamics_parameter_derivatives`.

Each jaxrbd function is timed on one state (``single``, jitted) and per sample over
``vmap`` of 1024 random states (``per sample``), with MBSlib's sampling of the inputs:
``q`` uniform in [-pi/2, pi/2] (the floating base: a position in [-1, 1] m and a random
orientation), ``qd`` in [-5 pi, 5 pi], ``qdd`` in [-50 pi, 50 pi], ``tau`` in [-100, 100].
MBSlib's numbers (i7-4810MQ at 2.8 GHz, Ubuntu 14.04; ``run without ADOL-C`` and
``derivative from tape``) are cited from the paper: another machine and another decade.

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_mbslib.py            # writes results/mbslib.json
    PYTHONPATH=. python benchmarks/bench_mbslib.py --quick    # results/mbslib_quick.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common as C

import jaxrbd
from jaxrbd import Body, ModelBuilder, _linalg, joints

#: Wojtusch et al. (2016), Table II [us]: (run without ADOL-C, derivative from tape).
MBSLIB = {
    "trolley": {"KIN": (0.01, 102.3), "CRBA": (1.03, 135.6), "ABA": (1.04, 200.4),
                "RNEA": (0.01, 169.5)},
    "human28": {"KIN": (16.6, 1197.1), "CRBA": (68.6, 3738.7), "ABA": (44.4, 3226.8),
                "RNEA": (22.3, 1475.2)},
}
BATCH = 1024


# ----------------------------------------------------------------------------- models


def trolley():
    """MBSlib's pendulum on a trolley (§III-A): l = 1 m, m = 5 kg, gravity -9.81 y."""
    b = ModelBuilder(gravity=(0.0, -9.81, 0.0))
    b.add_body("trolley", "world", joints.prismatic((1.0, 0.0, 0.0)), Body(), joint_name="q1")
    rod = 5.0 / 12.0
    b.add_body("rod", "trolley", joints.revolute((0.0, 0.0, 1.0)),
               Body(5.0, (0.0, -0.5, 0.0), np.diag([rod, 0.0, rod])), joint_name="q2")
    return b.build()


def to_pinocchio(model):
    """A Pinocchio model of a jaxrbd `Model` with free, revolute, prismatic and Euler
    joints, and index maps: ``(pin_model, q_to_pin, v_to_pin, v_from_pin)``.

    Joints are added depth first (Pinocchio's CRBA and ABA need every subtree's
    velocities contiguous; jaxrbd's body order need not be), and the maps permute between
    the two layouts; a free joint becomes a ``JointModelFreeFlyer`` (``q``: position,
    quaternion ``(x, y, z, w)``; ``v``: ``[linear; angular]``), an Euler joint a chain of
    revolute joints about its node axes with massless links between.
    """
    pin = C.pinocchio()
    pm = pin.Model()
    pm.gravity.linear = np.asarray(model.gravity, dtype=np.float64)
    axes = np.asarray(model.axes)
    joint_of = {0: 0}
    qperm, vperm = [], []  # our index of each Pinocchio q / v coordinate
    children = {b: [] for b in range(model.nbodies)}
    for b in range(1, model.nbodies):
        children[model.body_parent[b]].append(b)
    order, stack = [], list(reversed(children[0]))
    while stack:
        b = stack.pop()
        order.append(b)
        stack.extend(reversed(children[b]))
    for b in order:
        kind = model.joint_kind[b]
        parent = joint_of[model.body_parent[b]]
        E, r = np.asarray(model.Xtree_E[b]), np.asarray(model.Xtree_r[b])
        placement = pin.SE3(E.T.copy(), r.copy())
        qs, vs = model.q_start[b], model.v_start[b]
        if kind == "free":
            jid = pm.addJoint(parent, pin.JointModelFreeFlyer(), placement, model.joint_name[b])
            qperm += [qs, qs + 1, qs + 2, qs + 4, qs + 5, qs + 6, qs + 3]
            vperm += [vs + 3, vs + 4, vs + 5, vs, vs + 1, vs + 2]
        elif kind == "fixed":
            raise ValueError("to_pinocchio: fixed joints are not needed here")
        else:
            nv = model.joint_nq(b)
            jid = parent
            for k in range(nv):
                w, lin = axes[vs + k, :3], axes[vs + k, 3:]
                if np.any(w != 0) and not np.any(lin != 0):
                    jm = pin.JointModelRevoluteUnaligned(*w)
                elif np.any(lin != 0) and not np.any(w != 0):
                    jm = pin.JointModelPrismaticUnaligned(*lin)
                else:
                    raise ValueError(f"to_pinocchio: joint {model.joint_name[b]!r} is a screw")
                jid = pm.addJoint(jid, jm, placement if k == 0 else pin.SE3.Identity(),
                                  f"{model.joint_name[b]}_{k}")
                if k < nv - 1:
                    pm.appendBodyToJoint(jid, pin.Inertia.Zero(), pin.SE3.Identity())
                qperm.append(qs + k)
                vperm.append(vs + k)
        pm.appendBodyToJoint(jid, pin.Inertia.FromDynamicParameters(
            np.asarray(model.inertia[b], dtype=np.float64)), pin.SE3.Identity())
        joint_of[b] = jid
    qperm, vperm = np.array(qperm), np.array(vperm)
    vinv = np.argsort(vperm)
    return pm, (lambda q: np.asarray(q)[qperm]), (lambda v: np.asarray(v)[vperm]), (
        lambda x: np.asarray(x)[vinv])


def sample_states(model, n, seed=0):
    """MBSlib's input ranges; a floating base gets a random pose."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-np.pi / 2, np.pi / 2, (n, model.nq))
    for b in range(1, model.nbodies):
        if model.joint_kind[b] == "free":
            s = model.q_start[b]
            q[:, s : s + 3] = rng.uniform(-1.0, 1.0, (n, 3))
            quat = rng.normal(size=(n, 4))
            q[:, s + 3 : s + 7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    qd = rng.uniform(-5 * np.pi, 5 * np.pi, (n, model.nv))
    qdd = rng.uniform(-50 * np.pi, 50 * np.pi, (n, model.nv))
    tau = rng.uniform(-100.0, 100.0, (n, model.nv))
    return tuple(jnp.asarray(x) for x in (q, qd, qdd, tau))


# ----------------------------------------------------------------------------- functions


def crba_forward_dynamics(model, q, qd, tau):
    """Forward dynamics through the mass matrix: ``H^-1 (tau - C)`` by Cholesky (jaxrbd's
    blocked LAPACK wrappers, safe for large batches on XLA:CPU)."""
    H = jaxrbd.mass_matrix(model, q)
    return _linalg.cho_solve(_linalg.cholesky(H), tau - jaxrbd.bias_forces(model, q, qd))


def kin(model, q):
    return jaxrbd.forward_kinematics(model, q)[1]


def _tangent(f, model):
    """``f`` with ``q`` replaced by a tangent step ``dq`` at ``q`` (for jacfwd)."""
    return lambda dq, q, *rest: f(model, jaxrbd.integrate(model, q, dq), *rest)


def jaxrbd_functions(model, mass_body, length_body):
    """``{(row, column): f(q, qd, qdd, tau)}`` of everything timed for one model."""
    nv = model.nv
    z = jnp.zeros(nv)
    # d/dm: the body's mass scaled with its CoM and inertia fixed (its inertial
    # parameters scale together); d/dl: the joint placement moved along itself
    e_m = jnp.zeros_like(model.inertia).at[mass_body].set(
        model.inertia[mass_body] / model.inertia[mass_body, 0])
    e_l = jnp.zeros_like(model.Xtree_r).at[length_body].set(
        model.Xtree_r[length_body] / jnp.linalg.norm(model.Xtree_r[length_body]))

    def along(leaf, direction, f):
        """d/ds f(model with leaf + s direction) at 0 (a forward-mode directional derivative)."""
        def g(s):
            return f(_with(model, leaf, getattr(model, leaf) + s * direction))

        return jax.jvp(g, (0.0,), (1.0,))[1]

    fns = {
        ("KIN", "run"): lambda q, qd, qdd, tau: kin(model, q),
        ("CRBA", "run"): lambda q, qd, qdd, tau: crba_forward_dynamics(model, q, qd, tau),
        ("ABA", "run"): lambda q, qd, qdd, tau: jaxrbd.forward_dynamics(model, q, qd, tau),
        ("RNEA", "run"): lambda q, qd, qdd, tau: jaxrbd.inverse_dynamics(model, q, qd, qdd),
        ("KIN", "d/dparam"): lambda q, qd, qdd, tau: along("Xtree_r", e_l, lambda m: kin(m, q)),
        ("CRBA", "d/dparam"): lambda q, qd, qdd, tau: along(
            "inertia", e_m, lambda m: crba_forward_dynamics(m, q, qd, tau)),
        ("ABA", "d/dparam"): lambda q, qd, qdd, tau: along(
            "inertia", e_m, lambda m: jaxrbd.forward_dynamics(m, q, qd, tau)),
        ("RNEA", "d/dparam"): lambda q, qd, qdd, tau: along(
            "inertia", e_m, lambda m: jaxrbd.inverse_dynamics(m, q, qd, qdd)),
        ("KIN", "jacfwd state"): lambda q, qd, qdd, tau: jax.jacfwd(_tangent(kin, model))(z, q),
        ("CRBA", "jacfwd state"): lambda q, qd, qdd, tau: jax.jacfwd(
            _tangent(crba_forward_dynamics, model), argnums=(0, 2, 3))(z, q, qd, tau),
        ("ABA", "jacfwd state"): lambda q, qd, qdd, tau: jax.jacfwd(
            _tangent(jaxrbd.forward_dynamics, model), argnums=(0, 2, 3))(z, q, qd, tau),
        ("RNEA", "jacfwd state"): lambda q, qd, qdd, tau: jax.jacfwd(
            _tangent(jaxrbd.inverse_dynamics, model), argnums=(0, 2, 3))(z, q, qd, qdd),
        ("ABA", "analytic state"): lambda q, qd, qdd, tau: jaxrbd.forward_dynamics_derivatives(
            model, q, qd, tau),
        ("RNEA", "analytic state"): lambda q, qd, qdd, tau: jaxrbd.inverse_dynamics_derivatives(
            model, q, qd, qdd),
        ("ABA", "analytic params"): lambda q, qd, qdd, tau: (
            jaxrbd.forward_dynamics_parameter_derivatives(model, q, qd, tau)),
        ("RNEA", "analytic params"): lambda q, qd, qdd, tau: (
            jaxrbd.inverse_dynamics_regressor(model, q, qd, qdd)),
    }
    return fns


def _with(model, leaf, value):
    import equinox as eqx

    return eqx.tree_at(lambda m: getattr(m, leaf), model, value)


def pinocchio_functions(pm, q, v, a, tau):
    """``{(row, column): call}`` of the Pinocchio peers on one state."""
    pin = C.pinocchio()
    d = pm.createData()

    def crba_fd():
        pin.crba(pm, d, q)
        pin.nonLinearEffects(pm, d, q, v)
        pin.cholesky.decompose(pm, d)
        return pin.cholesky.solve(pm, d, tau - d.nle)

    return {
        ("KIN", "run"): lambda: pin.forwardKinematics(pm, d, q),
        ("CRBA", "run"): crba_fd,
        ("ABA", "run"): lambda: pin.aba(pm, d, q, v, tau),
        ("RNEA", "run"): lambda: pin.rnea(pm, d, q, v, a),
        ("KIN", "analytic state"): lambda: pin.computeJointJacobians(pm, d, q),
        ("ABA", "analytic state"): lambda: pin.computeABADerivatives(pm, d, q, v, tau),
        ("RNEA", "analytic state"): lambda: pin.computeRNEADerivatives(pm, d, q, v, a),
        ("RNEA", "analytic params"): lambda: pin.computeJointTorqueRegressor(pm, d, q, v, a),
    }


def check_agreement(name, model, pm, to_q, to_v, from_v, states):
    """jaxrbd and the converted Pinocchio model agree: poses, H, ABA, RNEA."""
    pin = C.pinocchio()
    d = pm.createData()
    Q, QD, QDD, TAU = (np.asarray(x) for x in states)
    worst = 0.0
    for k in range(5):
        q, qd, qdd, tau = Q[k], QD[k], QDD[k], TAU[k]
        qp, vp, ap, tp = to_q(q), to_v(qd), to_v(qdd), to_v(tau)
        checks = [
            (from_v(pin.rnea(pm, d, qp, vp, ap)), jaxrbd.inverse_dynamics(model, q, qd, qdd)),
            (from_v(pin.aba(pm, d, qp, vp, tp)), jaxrbd.forward_dynamics(model, q, qd, tau)),
        ]
        H = np.asarray(pin.crba(pm, d, qp))
        H = np.triu(H) + np.triu(H, 1).T
        Hp = from_v(from_v(H).T).T
        checks.append((Hp, jaxrbd.mass_matrix(model, q)))
        for a, b in checks:
            b = np.asarray(b)
            worst = max(worst, float(np.max(np.abs(a - b)) / (1.0 + np.max(np.abs(b)))))
    print(f"{name}: jaxrbd vs Pinocchio (RNEA, ABA, CRBA), max relative difference {worst:.1e}")
    if worst > 1e-9:
        raise SystemExit(f"{name}: the Pinocchio model does not match ({worst:.1e})")
    return worst


# ----------------------------------------------------------------------------- main


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short timing budgets, B = 64")
    parser.add_argument("--out", type=Path, default=None)
    C.add_jit_argument(parser)
    args = parser.parse_args(argv)
    C.use_jit(args.jit)
    batch = 64 if args.quick else BATCH
    budget = 0.1 if args.quick else 0.5
    meta = C.machine_metadata()
    print(f"CPU: {meta['machine']['cpu']} ({meta['machine']['cpu_usable']} usable cores), "
          f"jax {meta['jax']}, pinocchio {meta['pinocchio']}, batch {batch}")

    models = {
        "trolley": (trolley(), "rod", "rod"),
        "human28": (jaxrbd.models.human28(), "l_thigh", "l_shank"),
    }
    rows = []
    agreement = {}
    for name, (model, mass_body, length_body) in models.items():
        states = sample_states(model, batch)
        pm, to_q, to_v, from_v = to_pinocchio(model)
        agreement[name] = check_agreement(name, model, pm, to_q, to_v, from_v, states)
        single = tuple(x[0] for x in states)
        fns = jaxrbd_functions(model, model.body_id(mass_body), model.body_id(length_body))
        q0, qd0, qdd0, tau0 = (np.asarray(x) for x in single)
        pins = pinocchio_functions(pm, to_q(q0), to_v(qd0), to_v(qdd0), to_v(tau0))
        for (row, col), f in fns.items():
            fs, _, compile_s = C.compile_jit(f, *single)
            t1 = C.time_jax(fs, *single, budget_s=budget)["median_s"]
            fb, _, _ = C.compile_jit(jax.vmap(f), *states)
            tb = C.time_jax(fb, *states, budget_s=budget)["median_s"] / batch
            tp = None
            if (row, col) in pins:
                tp = C.time_python(pins[(row, col)], budget_s=budget)["median_s"]
            cited = MBSLIB[name][row][0 if col == "run" else 1] * 1e-6 if col in (
                "run", "d/dparam") else None
            r = {"model": name, "algorithm": row, "what": col, "jaxrbd_single_s": t1,
                 "jaxrbd_per_sample_s": tb, "batch": batch, "pinocchio_s": tp,
                 "ratio_single": t1 / tp if tp else None,
                 "ratio_per_sample": tb / tp if tp else None,
                 "compile_s": compile_s, "mbslib_cited_s": cited}
            rows.append(r)
            print(f"  {name:8s} {row:5s} {col:16s} single {C.fmt_time(t1):>9s}  "
                  f"per sample {C.fmt_time(tb):>9s}  pinocchio {C.fmt_time(tp):>9s}  "
                  f"MBSlib (cited) {C.fmt_time(cited):>9s}", flush=True)

    print("\nTable II (us per call; MBSlib's figures are cited from Wojtusch et al. 2016, "
          "measured on an i7-4810MQ at 2.8 GHz, not in this run):")
    cols = [("model", "model", str), ("alg.", "algorithm", str), ("what", "what", str),
            ("jaxrbd 1", "jaxrbd_single_s", C.fmt_time),
            (f"jaxrbd /{batch}", "jaxrbd_per_sample_s", C.fmt_time),
            ("Pinocchio", "pinocchio_s", C.fmt_time),
            ("MBSlib*", "mbslib_cited_s", C.fmt_time)]
    C.print_table(rows, cols)
    print("* cited: MBSlib 'run without ADOL-C' (run rows) and 'derivative from tape' "
          "(d/dparam rows), another machine")
    out = args.out or C.RESULTS / f"mbslib{'_quick' if args.quick else ''}{C.jit_suffix()}.json"
    C.write_json(out, rows, meta, agreement_max_rel_diff=agreement,
                 mbslib_cited_us=MBSLIB,
                 mbslib_machine="Intel i7-4810MQ at 2.8 GHz, Ubuntu 14.04 (cited, not run)")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
