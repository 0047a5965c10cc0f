"""Corpus check: every robot of example-robot-data (URDF, against Pinocchio) and of MuJoCo
Menagerie (MJCF, against MuJoCo) loads in jaxrbd and agrees with its oracle.

For each robot it records the sizes, whether the oracle and jaxrbd load it (or the exact
error), and the largest relative error over a few random states of

- ``H``: `jaxrbd.mass_matrix` against Pinocchio ``crba`` / MuJoCo ``mj_fullM`` (armature
  included);
- ``rnea``: `jaxrbd.inverse_dynamics` against Pinocchio ``rnea`` / MuJoCo ``mj_rne`` plus
  ``armature * qacc`` (``mj_rne`` leaves the armature out);
- ``aba``: `jaxrbd.forward_dynamics` against Pinocchio ``aba`` (``crba`` and ``rnea``
  solved where ``aba`` refuses mimic joints) / MuJoCo's unconstrained
  acceleration ``M⁻¹ (qfrc - qfrc_bias)`` (``mj_solveM``: no contacts, limits,
  equalities, passive forces or actuators);
- ``kernel`` (URDF): the same three, one state at a time, with
  ``traversal="kernel"`` (one state's dynamics as compiled C++ kernels,
  `jaxrbd._core.ffi`), where the kernels cover the model's joints;
- ``kin`` (MJCF): world poses of every MuJoCo body and site (``xpos``/``xmat``,
  ``site_xpos``/``site_xmat``) against `jaxrbd.forward_kinematics`;
- ``actuation`` (MJCF, models with actuators): `jaxrbd.actuation` with the loader's
  ``info.actuators`` against MuJoCo's ``qfrc_actuator`` (converted with
  `jaxrbd.io.qfrc_to_tau`) at random ``qpos``, ``qvel``, ``ctrl`` (20 % beyond the control
  ranges, so the clamps act) and ``act``, as the largest absolute difference (a row
  passes within ``1e-10 · max(1, max |qfrc_actuator|)``); on
  MuJoCo's side every actuator jaxrbd does not map is switched off (zero gear, gain and
  bias), and the rows name those actuators and why (``unmapped_actuators``);

where the relative error of an array is ``max |a - b| / max |b|``. Rows also give the
largest condition number of ``H`` over the states: forward dynamics cannot be expected to
agree much better than ``cond(H) · 1e-16``. MuJoCo's coordinates
are converted with `jaxrbd.io.qvel_to_v` and friends (free joints), Pinocchio's by joint
name (siblings are sorted differently; free joints ``[v; ω]``, quaternions ``(x, y, z, w)``,
continuous joints ``(cos, sin)``).

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/corpus.py --menagerie /path/to/mujoco_menagerie
    PYTHONPATH=. python benchmarks/corpus.py --quick          # a few robots of each
    PYTHONPATH=. python benchmarks/corpus.py --only mjcf --filter unitree
    PYTHONPATH=. python benchmarks/corpus.py --only mjcf --actuation-only --standin-meshes

``--menagerie`` defaults to ``$MENAGERIE_ROOT``; the MJCF part is skipped (and says so)
when neither is given. Writes ``benchmarks/results/corpus.json`` (``corpus_quick.json``
with ``--quick``, ``corpus_actuation.json`` with ``--actuation-only``, which runs the MJCF
actuation comparison alone). The rigid-body comparisons load MJCF models with
``joint_equalities="independent"``: MuJoCo's mass matrix is that of the full tree.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

# Compile time dominates (one XLA compile per robot); LLVM's -O0 halves it and leaves the
# numerics alone (as the test suite does).
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
        " --xla_llvm_disable_expensive_passes=true"
    ).strip()

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

import jaxrbd  # noqa: E402
from jaxrbd import io as jio  # noqa: E402
from jaxrbd._core import ffi  # noqa: E402

#: Robots of example-robot-data also checked with a floating base (legged, humanoid).
FLOATING = (
    "a1", "alex", "alexander", "anymal", "b1", "bolt", "cassie", "centauro", "g1", "go1",
    "go2", "human", "hyq", "icub", "laikago", "quadruped", "romeo", "simple_humanoid", "solo",
    "talos",
)
QUICK_URDF = ("double_pendulum.urdf", "solo12.urdf", "talos_reduced.urdf", "romeo_small.urdf")
QUICK_MJCF = ("franka_emika_panda/panda.xml", "unitree_h1/h1.xml", "agility_cassie/cassie.xml",
              "robotiq_2f85/2f85.xml")
TOL = 1e-9
#: Largest difference between `jaxrbd.actuation` and MuJoCo's ``qfrc_actuator``, relative to
#: ``max(1, max |qfrc_actuator|)`` (stiff position servos reach 1e6 N·m: rounding, not a bug).
ACT_TOL = 1e-10


def _actuation_ok(row) -> bool:
    err = row["err_actuation"]
    return bool(np.isfinite(err) and err <= ACT_TOL * max(1.0, row["actuation_scale"]))


def rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)) if b.size else 0.0


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().replace("\n", " | ")
    return text if len(text) <= 400 else text[:397] + "..."


def _warned(caught) -> list[str]:
    return [str(w.message).splitlines()[0][:200] for w in caught]


# ============================================================================ jaxrbd side


def _dynamics(model, q, v, qdd, tau):
    return (
        jaxrbd.mass_matrix(model, q),
        jaxrbd.inverse_dynamics(model, q, v, qdd),
        jaxrbd.forward_dynamics(model, q, v, tau),
    )


#: One compile per model structure: all states at once.
DYNAMICS = jax.jit(jax.vmap(_dynamics, in_axes=(None, 0, 0, 0, 0)))
#: One state at a time: with ``traversal="kernel"`` each call is the native kernels
SINGLE = jax.jit(_dynamics)


def kernel_errors(model, states, refs) -> dict:
    """``traversal="kernel"`` (one state's dynamics as compiled C++ kernels) state by state
    against the oracle's ``(H, rnea, aba)``: ``kernel`` says whether the kernels cover the
    model, ``err_kernel`` is the largest relative error of the three."""
    if model.nv == 0:
        return {"kernel": "not covered (no joints)"}
    mk = model.with_traversal("kernel")
    try:
        # a coupled model (mimic joints) runs its base model's kernels
        covered = ffi.supported(getattr(mk, "base", mk), jnp.asarray(states[0][0]))
    except ffi.KernelBuildError as e:
        return {"kernel": f"unavailable: {_short(e)}"}
    if not covered:
        return {"kernel": "not covered (joint kinds)"}
    out = [SINGLE(mk, *(jnp.asarray(x) for x in s)) for s in states]
    errs = [rel(np.stack([o[i] for o in out]), refs[i]) for i in range(3)
            if np.all(np.isfinite(refs[i]))]
    return {"kernel": "covered", "err_kernel": max(errs)}


def random_q(model, rng) -> np.ndarray:
    """A jaxrbd configuration: angles and displacements within the limits (clipped to
    [-π, π] and [-1, 1] m), free-joint positions in [-1, 1]³, uniform unit quaternions.
    A coupled model (mimic joints) gets its independent coordinates of such a sample."""
    if isinstance(model, jaxrbd.CoupledModel):
        return random_q(model.base, rng)[np.asarray(model.independent_q)]
    q = np.zeros(model.nq)
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    for b in range(1, model.nbodies):
        kind, s = model.joint_kind[b], model.q_start[b]
        if kind == "fixed":
            continue
        if kind in ("free", "spherical"):
            k = 3 if kind == "free" else 0
            q[s : s + k] = rng.uniform(-1, 1, k)
            u = rng.normal(size=4)
            q[s + k : s + k + 4] = u / np.linalg.norm(u)
            continue
        n = model.joint_nq(b)
        lim = np.pi if model.joint_label[b] == "revolute" else 1.0
        a = np.maximum(lo[s : s + n], -lim)
        c = np.minimum(hi[s : s + n], lim)
        q[s : s + n] = rng.uniform(a, np.maximum(a, c))
    return q


# ============================================================================ URDF vs Pinocchio


def urdf_cases(root: Path, quick: bool, filt: str | None):
    files = sorted(glob.glob(str(root / "**" / "*.urdf"), recursive=True))
    cases = []
    for f in files:
        rel_path = os.path.relpath(f, root)
        if quick and os.path.basename(f) not in QUICK_URDF:
            continue
        if filt and not any(f in rel_path for f in filt.split(",")):
            continue
        robot = rel_path.split(os.sep)[0].removesuffix("_description").removesuffix("_data")
        cases.append((rel_path, f, False))
        if any(robot == r or robot.startswith(r + "_") for r in FLOATING):
            cases.append((rel_path, f, True))
    return cases


def example_robot_data_root() -> Path | None:
    try:
        import example_robot_data  # older wheels ship a module with the path

        return Path(example_robot_data.getModelPath("ur_description/urdf/ur5_robot.urdf")).parent
    except Exception:
        pass
    try:
        import importlib.metadata as md

        p = Path(md.distribution("example-robot-data").locate_file(
            "cmeel.prefix/share/example-robot-data/robots"))
        return p if p.is_dir() else None
    except Exception:
        return None


def _pin_maps(pin, pm, model):
    """q of Pinocchio from ours, and the ``(nv, nv)`` permutation ``v_pin = P v``."""
    P = np.zeros((pm.nv, model.nv))
    plan = []
    for j in range(1, pm.njoints):
        jm, name = pm.joints[j], pm.names[j]
        short = jm.shortname()
        if "Mimic" in short or jm.nv == 0:
            continue
        if name not in model.joint_names:
            raise KeyError(f"Pinocchio joint {name!r} is not a joint of the jaxrbd model")
        qs, vs = model.q_index(name), model.v_index(name)
        if vs.stop - vs.start != jm.nv:
            raise ValueError(f"joint {name!r}: nv {vs.stop - vs.start} in jaxrbd, {jm.nv} in Pinocchio")
        if short == "JointModelFreeFlyer":
            P[jm.idx_v : jm.idx_v + 3, vs.start + 3 : vs.start + 6] = np.eye(3)
            P[jm.idx_v + 3 : jm.idx_v + 6, vs.start : vs.start + 3] = np.eye(3)
        else:
            P[jm.idx_v : jm.idx_v + jm.nv, vs] = np.eye(jm.nv)
        plan.append((short, jm.idx_q, jm.nq, qs))

    def q_pin(q):
        out = np.array(pin.neutral(pm))
        for short, iq, nq, qs in plan:
            x = q[qs]
            if short == "JointModelFreeFlyer":
                out[iq : iq + 7] = np.concatenate([x[:3], x[4:7], x[3:4]])
            elif short == "JointModelSpherical":
                out[iq : iq + 4] = np.concatenate([x[1:4], x[0:1]])
            elif nq == 2 and len(x) == 1:  # continuous: (cos, sin)
                out[iq : iq + 2] = [np.cos(x[0]), np.sin(x[0])]
            else:
                out[iq : iq + nq] = x
        return out

    return q_pin, P


def run_urdf_case(name, path, floating, nstates, seed):
    pin = common.pinocchio()
    row = dict(corpus="urdf", name=name + (" (floating)" if floating else ""), file=name,
               floating_base=floating)
    t0 = time.perf_counter()

    def build(mimic):
        if floating:
            return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer(), mimic=mimic)
        return pin.buildModelFromUrdf(path, mimic=mimic)

    coupled = True
    try:
        pm = build(True)
    except Exception as e:
        try:  # compare the uncoupled models where Pinocchio cannot couple the mimic joints
            pm, coupled = build(False), False
            row["oracle_note"] = (f"Pinocchio mimic=True failed ({_short(e)}); compared with "
                                  "Pinocchio mimic=False and jaxrbd mimic='independent'")
        except Exception:
            row.update(status="oracle_error", error=f"Pinocchio: {_short(e)}")
            return row
    row.update(oracle_nq=pm.nq, oracle_nv=pm.nv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = jaxrbd.load_urdf(path, floating_base=floating)  # the defaults
            row["model"] = type(model).__name__
            if not coupled:
                model = jaxrbd.load_urdf(path, floating_base=floating, mimic="independent")
        except Exception as e:
            row.update(status="load_error", error=_short(e), warnings=_warned(caught))
            return row
    row.update(nq=model.nq, nv=model.nv, warnings=_warned(caught))
    try:
        q_pin, P = _pin_maps(pin, pm, model)
        if model.nv != pm.nv:
            raise ValueError(f"nv {model.nv} in jaxrbd, {pm.nv} in Pinocchio")
        rng = np.random.default_rng(seed)
        data = pm.createData()
        qs, vs, as_, ts, Hr, Ir, Fr = [], [], [], [], [], [], []
        for _ in range(nstates):
            q = random_q(model, rng)
            v, a, tau = (rng.uniform(-1, 1, model.nv) for _ in range(3))
            qp = q_pin(q)
            H = np.array(pin.crba(pm, data, qp))
            H = np.triu(H) + np.triu(H, 1).T
            Hr.append(P.T @ H @ P)
            Ir.append(P.T @ pin.rnea(pm, data, qp, P @ v, P @ a))
            try:
                Fr.append(P.T @ pin.aba(pm, data, qp, P @ v, P @ tau))
            except RuntimeError:  # Pinocchio's ABA refuses mimic joints: solve with its CRBA
                nle = pin.rnea(pm, data, qp, P @ v, np.zeros(pm.nv))
                Fr.append(P.T @ np.linalg.solve(H, P @ tau - nle))
                row["aba_oracle"] = "Pinocchio crba + rnea, solved"
            qs.append(q), vs.append(v), as_.append(a), ts.append(tau)
        H, ID, FD = DYNAMICS(model, *(jnp.asarray(np.array(x)) for x in (qs, vs, as_, ts)))
        row.update(err_H=rel(H, Hr), err_rnea=rel(ID, Ir))
        if model.nv:  # a model of no joints (a lone body) has an empty H
            row["cond_H"] = float(max(np.linalg.cond(h) for h in Hr))
        errs = [row["err_H"], row["err_rnea"]]
        if np.all(np.isfinite(Fr)):
            row["err_aba"] = rel(FD, Fr)
            errs.append(row["err_aba"])
        else:  # a massless subtree on a joint: H is singular and so is the oracle's ABA
            rank = min(np.linalg.matrix_rank(h) for h in Hr)
            row["aba_note"] = (f"forward dynamics undefined: H has rank {rank} < nv = {model.nv} "
                               "(the oracle's ABA is not finite either)")
        row["status"] = "ok" if all(np.isfinite(e) and e <= TOL for e in errs) else "mismatch"
        row.update(kernel_errors(model, list(zip(qs, vs, as_, ts)), (Hr, Ir, Fr)))
    except Exception as e:
        row.update(status="compare_error", error=_short(e))
        traceback.print_exc()
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


# ============================================================================ MJCF vs MuJoCo


def mjcf_cases(root: Path, quick: bool, filt: str | None):
    files = sorted(glob.glob(str(root / "*" / "*.xml")))
    out = []
    for f in files:
        rel_path = os.path.relpath(f, root)
        if os.path.basename(f).lower().startswith("scene"):
            continue  # a robot plus a floor and lights: the robot file is listed too
        if quick and rel_path not in QUICK_MJCF:
            continue
        if filt and not any(f in rel_path for f in filt.split(",")):
            continue
        out.append((rel_path, f))
    return out


def _mj_random_state(mujoco, m, rng):
    qpos = np.array(m.qpos0)
    for j in range(m.njnt):
        a, t = m.jnt_qposadr[j], m.jnt_type[j]
        if t == mujoco.mjtJoint.mjJNT_FREE:
            qpos[a : a + 3] = rng.uniform(-1, 1, 3)
            u = rng.normal(size=4)
            qpos[a + 3 : a + 7] = u / np.linalg.norm(u)
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            u = rng.normal(size=4)
            qpos[a : a + 4] = u / np.linalg.norm(u)
        else:
            lim = np.pi if t == mujoco.mjtJoint.mjJNT_HINGE else 0.5
            lo, hi = (m.jnt_range[j] if m.jnt_limited[j] else (-lim, lim))
            qpos[a] = rng.uniform(max(lo, -lim), max(min(hi, lim), max(lo, -lim)))
    return qpos


def _mj_evaluate(model, qpos, qvel, qacc, qfrc, M, rne, qacc_ref, body_ids, xpos, xmat):
    v = jio.qvel_to_v(model, qpos, qvel)
    qdd = jio.qacc_to_qdd(model, qpos, qvel, qacc)
    tau = jio.qfrc_to_tau(model, qpos, qfrc)
    T = jax.jacfwd(lambda x: jio.v_to_qvel(model, qpos, x))(v)
    H, ID, FD = _dynamics(model, qpos, v, qdd, tau)
    R, p = jaxrbd.forward_kinematics(model, qpos)
    return dict(
        H=H, H_ref=T.T @ M @ T,
        rnea=ID, rnea_ref=jio.qfrc_to_tau(model, qpos, rne),
        aba=FD, aba_ref=jio.qacc_to_qdd(model, qpos, qvel, qacc_ref),
        pos=p[body_ids], pos_ref=xpos, rot=R[body_ids], rot_ref=xmat,
    )


MJ_EVALUATE = jax.jit(
    jax.vmap(_mj_evaluate, in_axes=(None, 0, 0, 0, 0, 0, 0, 0, None, 0, 0)),
)


#: A small cube standing in for a mesh file missing from a checkout.
_CUBE = [c * 0.01 for v in range(8) for c in ((v & 1) * 2 - 1, (v >> 1 & 1) * 2 - 1, (v >> 2 & 1) * 2 - 1)]


def _compile_with_standins(mujoco, path):
    """Compile ``path`` with a small cube in place of every mesh file that is missing.

    Returns ``(model, missing mesh files, bodies whose inertia comes from a stand-in)``:
    a body with an explicit ``<inertial>`` keeps its real mass properties (under MuJoCo's
    default ``inertiafromgeom="auto"``), so only the listed bodies differ from the robot.
    """
    spec = mujoco.MjSpec.from_file(path)
    base = Path(path).parent / (spec.meshdir or "")
    missing = {}
    for mesh in spec.meshes:
        if mesh.file and not (base / mesh.file).is_file():
            missing[mesh.name] = mesh.file
            mesh.file = ""
            mesh.uservert = _CUBE
    if not missing:
        return None, [], []
    from_geoms = set()
    for g in spec.geoms:
        if g.meshname in missing:
            body = g.parent
            if not body.explicitinertial or spec.compiler.inertiafromgeom == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE:
                from_geoms.add(body.name)
    return spec.compile(), sorted(set(missing.values())), sorted(from_geoms)


def _actuation(model, acts, qpos, qvel, ctrl, act, qfrc):
    v = jio.qvel_to_v(model, qpos, qvel)
    return jaxrbd.actuation(model, qpos, v, ctrl, acts, act), jio.qfrc_to_tau(model, qpos, qfrc)


ACTUATION = jax.jit(jax.vmap(_actuation, in_axes=(None, None, 0, 0, 0, 0, 0)))


def compare_actuation(mujoco, m, model, acts, nstates, rng) -> dict:
    """``err_actuation``: max |actuation - qfrc_actuator| over ``nstates`` random states,
    with the actuators jaxrbd does not map switched off on MuJoCo's side (zero gear)."""
    import copy

    mm = copy.deepcopy(m)
    # Switch off what jaxrbd does not map: zero force (a body transmission's moment
    # ignores the gear, so the gain and bias go to zero too, and the force range).
    off = [i for i, ok in enumerate(acts.mapped) if not ok]
    mm.actuator_gear[off] = 0.0
    mm.actuator_gaintype[off] = int(mujoco.mjtGain.mjGAIN_FIXED)
    mm.actuator_biastype[off] = int(mujoco.mjtBias.mjBIAS_NONE)
    mm.actuator_gainprm[off] = 0.0
    mm.actuator_biasprm[off] = 0.0
    mm.actuator_forcelimited[off] = 0
    d = mujoco.MjData(mm)
    lo, hi = mm.actuator_ctrlrange[:, 0], mm.actuator_ctrlrange[:, 1]
    lim = np.asarray(mm.actuator_ctrllimited, bool) & (hi > lo)
    width = np.where(lim, hi - lo, 2.0)
    mid = np.where(lim, (hi + lo) / 2, 0.0)
    S = {k: [] for k in ("qpos", "qvel", "ctrl", "act", "qfrc")}
    for _ in range(nstates):
        qpos = _mj_random_state(mujoco, mm, rng)
        qvel = rng.uniform(-1, 1, mm.nv)
        ctrl = mid + 0.6 * width * rng.uniform(-1, 1, mm.nu)  # 20 % beyond each side
        act = rng.uniform(-1, 1, mm.na)
        d.qpos[:], d.qvel[:], d.ctrl[:], d.act[:] = qpos, qvel, ctrl, act
        mujoco.mj_forward(mm, d)
        for k, x in (("qpos", qpos), ("qvel", qvel), ("ctrl", ctrl), ("act", act),
                     ("qfrc", d.qfrc_actuator)):
            S[k].append(np.array(x))
    tau, ref = ACTUATION(model, acts, *(jnp.asarray(np.array(S[k]))
                                        for k in ("qpos", "qvel", "ctrl", "act", "qfrc")))
    tau, ref = np.asarray(tau), np.asarray(ref)
    return dict(err_actuation=float(np.abs(tau - ref).max()),
                actuation_scale=float(np.abs(ref).max()),
                nu=int(m.nu), mapped_actuators=int(sum(acts.mapped)))


def run_mjcf_case(name, path, nstates, seed, standins=False, actuation_only=False):
    import mujoco

    row = dict(corpus="mjcf", name=name, file=name)
    t0 = time.perf_counter()
    try:
        m = mujoco.MjModel.from_xml_path(path)
    except Exception as e:
        msg = " | ".join(str(e).strip().splitlines())
        m = None
        if standins and "Error opening file" in msg:
            try:
                m, files, bodies = _compile_with_standins(mujoco, path)
            except Exception as e2:
                msg += f" (with stand-in meshes: {' | '.join(str(e2).strip().splitlines())})"
                m = None
        if m is None:
            row.update(status="oracle_error", error="MuJoCo: " + msg[:400])
            return row
        row.update(standin_meshes=files, standin_inertia_bodies=bodies)
    row.update(oracle_nq=int(m.nq), oracle_nv=int(m.nv), nbody=int(m.nbody))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model, info = jio.load_mjcf(m, return_info=True, warn_unmapped=False,
                                        joint_equalities="independent")
        except Exception as e:
            row.update(status="load_error", error=_short(e), warnings=_warned(caught))
            traceback.print_exc()
            return row
    row.update(nq=model.nq, nv=model.nv, warnings=_warned(caught),
               unmapped=sorted(info.unmapped),
               equality_rows=0 if info.constraints is None else info.constraints.size)
    row["unmapped_actuators"] = {k: v for k, v in info.unmapped.items() if k.startswith("actuator")}
    if actuation_only:
        if info.actuators is None:
            row.update(status="no_actuators")
        else:
            try:
                row.update(compare_actuation(mujoco, m, model, info.actuators, nstates,
                                             np.random.default_rng(seed)))
                row["status"] = "ok" if _actuation_ok(row) else "mismatch"
            except Exception as e:
                row.update(status="compare_error", error=_short(e))
                traceback.print_exc()
        row["seconds"] = round(time.perf_counter() - t0, 2)
        return row
    try:
        d = mujoco.MjData(m)
        # Contacts and constraints play no part in M, qfrc_bias or mj_rne; skipping them
        # only saves time.
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(
            mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
        rng = np.random.default_rng(seed)
        bodies = list(range(1, m.nbody))
        body_ids = [model.body_id(info.bodies[n]) for n in
                    [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) or f"body{i}" for i in bodies]]
        site_names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, s) or f"site{s}"
                      for s in range(m.nsite)]
        body_ids += [model.body_id(info.sites[n]) for n in site_names]
        S = {k: [] for k in ("qpos", "qvel", "qacc", "qfrc", "M", "rne", "qacc_ref", "xpos", "xmat")}
        for _ in range(nstates):
            qpos = _mj_random_state(mujoco, m, rng)
            qvel, qacc, qfrc = (rng.uniform(-1, 1, m.nv) for _ in range(3))
            d.qpos[:], d.qvel[:] = qpos, qvel
            mujoco.mj_forward(m, d)
            M = np.zeros((m.nv, m.nv))
            try:
                mujoco.mj_fullM(m, d, M)  # MuJoCo >= 4
            except TypeError:
                mujoco.mj_fullM(m, M, d.qM)
            d.qacc[:] = qacc
            rne = np.zeros(m.nv)
            mujoco.mj_rne(m, d, 1, rne)
            rne += m.dof_armature * qacc  # mj_rne leaves the armature out
            qacc_ref = np.zeros(m.nv)
            mujoco.mj_solveM(m, d, qacc_ref.reshape(1, -1), (qfrc - d.qfrc_bias).reshape(1, -1))
            for k, x in (("qpos", qpos), ("qvel", qvel), ("qacc", qacc), ("qfrc", qfrc), ("M", M),
                         ("rne", rne), ("qacc_ref", qacc_ref),
                         ("xpos", np.concatenate([d.xpos[1:], d.site_xpos])),
                         ("xmat", np.concatenate([d.xmat[1:], d.site_xmat]).reshape(-1, 3, 3))):
                S[k].append(np.array(x))
        args = [jnp.asarray(np.array(S[k])) for k in ("qpos", "qvel", "qacc", "qfrc", "M", "rne", "qacc_ref")]
        out = MJ_EVALUATE(model, *args, np.array(body_ids), jnp.asarray(np.array(S["xpos"])),
                          jnp.asarray(np.array(S["xmat"])))
        row.update(
            err_H=rel(out["H"], out["H_ref"]),
            err_rnea=rel(out["rnea"], out["rnea_ref"]),
            err_aba=rel(out["aba"], out["aba_ref"]),
            err_kin=max(rel(out["pos"], out["pos_ref"]), rel(out["rot"], out["rot_ref"])),
            cond_H=float(max(np.linalg.cond(M) for M in S["M"])),
        )
        errs = [row["err_H"], row["err_rnea"], row["err_aba"], row["err_kin"]]
        row["status"] = "ok" if all(np.isfinite(e) and e <= TOL for e in errs) else "mismatch"
        if info.actuators is not None:
            row.update(compare_actuation(mujoco, m, model, info.actuators, nstates, rng))
            if not _actuation_ok(row):
                row["status"] = "mismatch"
    except Exception as e:
        row.update(status="compare_error", error=_short(e))
        traceback.print_exc()
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


# ============================================================================ main


def _fmt_err(x):
    return "-" if x is None else f"{x:.1e}"


def _print_row(r):
    errs = " ".join(f"{k}={_fmt_err(r.get('err_' + k))}"
                    for k in ("H", "rnea", "aba", "kin", "actuation") if ("err_" + k) in r)
    if "nu" in r:
        errs += f" actuators {r['mapped_actuators']}/{r['nu']} mapped"
    sizes = f"nq={r.get('nq', r.get('oracle_nq', '-'))} nv={r.get('nv', r.get('oracle_nv', '-'))}"
    tail = errs if r["status"] in ("ok", "mismatch") else r.get("error", "")
    if r["status"] == "no_actuators":
        tail = "no actuators"
    if r.get("aba_note"):
        tail += " aba: " + r["aba_note"]
    if "err_kernel" in r:
        tail += f" kernel={_fmt_err(r['err_kernel'])}"
    if "cond_H" in r:
        tail += f" cond(H)={r['cond_H']:.1e}"
    if r.get("standin_meshes"):
        tail += f"  [{len(r['standin_meshes'])} stand-in meshes"
        tail += f", inertia of {len(r['standin_inertia_bodies'])} bodies from them]" if r["standin_inertia_bodies"] else "]"
    print(f"[{r['corpus']}] {r['name']:<58} {sizes:<14} {r['status']:<13} {tail}", flush=True)


def summary(rows, corpus):
    rs = [r for r in rows if r["corpus"] == corpus]
    if not rs:
        return None
    count = lambda s: sum(r["status"] == s for r in rs)
    oracle_ok = [r for r in rs if r["status"] != "oracle_error"]
    worst = max((max(r.get(k) or 0.0 for k in ("err_H", "err_rnea", "err_aba", "err_kin"))
                 for r in rs if r["status"] in ("ok", "mismatch")), default=None)
    act = [r for r in rs if "err_actuation" in r]
    extra = {}
    kern = [r["err_kernel"] for r in rs if "err_kernel" in r]
    if kern:
        extra.update(kernel_covered=len(kern), kernel_worst_relative_error=max(kern),
                     kernel_not_covered=sum(str(r.get("kernel", "")).startswith("not")
                                            for r in rs))
    if act:
        unmapped: dict[str, int] = {}
        for r in act:
            for why, names in r.get("unmapped_actuators", {}).items():
                unmapped[why] = unmapped.get(why, 0) + len(names)
        extra = dict(
            actuation_models=len(act),
            actuation_within_tol=sum(_actuation_ok(r) for r in act),
            actuation_within_abs_tol=sum(r["err_actuation"] <= ACT_TOL for r in act),
            actuation_worst_abs=max(r["err_actuation"] for r in act),
            actuation_worst_rel=max(r["err_actuation"] / max(1.0, r["actuation_scale"]) for r in act),
            actuators=sum(r["nu"] for r in act),
            actuators_mapped=sum(r["mapped_actuators"] for r in act),
            models_all_actuators_mapped=sum(r["mapped_actuators"] == r["nu"] for r in act),
            unmapped_actuators_by_reason=unmapped,
        )
    return dict(**extra,
        corpus=corpus, cases=len(rs), oracle_loads=len(oracle_ok), ok=count("ok"),
        mismatch=count("mismatch"), load_error=count("load_error"),
        compare_error=count("compare_error"), oracle_error=count("oracle_error"),
        worst_relative_error=worst,
        with_standin_meshes=sum(bool(r.get("standin_meshes")) for r in rs),
        standin_inertia=sum(bool(r.get("standin_inertia_bodies")) for r in rs),
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--menagerie", default=os.environ.get("MENAGERIE_ROOT"),
                   help="MuJoCo Menagerie checkout (default: $MENAGERIE_ROOT)")
    p.add_argument("--only", choices=("urdf", "mjcf"), help="run one corpus only")
    p.add_argument("--filter", help="only files whose path contains one of these comma-separated strings")
    p.add_argument("--quick", action="store_true", help=f"{len(QUICK_URDF)} URDFs and {len(QUICK_MJCF)} MJCF models")
    p.add_argument("--standin-meshes", action="store_true",
                   help="compile MJCF models whose mesh files are missing with small cubes in their "
                        "place (rows say which files and which bodies' inertias that changes)")
    p.add_argument("--actuation-only", action="store_true",
                   help="run only the MJCF actuation comparison (writes corpus_actuation.json)")
    p.add_argument("--states", type=int, default=3, help="random states per robot (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--update", action="store_true",
                   help="replace only the rows checked now in an existing results file")
    p.add_argument("--jobs", type=int, default=1, help="robots checked in parallel processes (default 1)")
    p.add_argument("--out", help="JSON path (default results/corpus.json, corpus_quick.json with --quick)")
    args = p.parse_args(argv)

    rows, notes, cases = [], [], []
    if args.only in (None, "urdf"):
        root = example_robot_data_root()
        if root is None or common.pinocchio() is None:
            notes.append("URDF corpus skipped: example-robot-data or Pinocchio is not installed")
        else:
            cases += [(run_urdf_case, (name, path, floating, args.states, args.seed))
                      for name, path, floating in urdf_cases(root, args.quick, args.filter)]
    if args.only in (None, "mjcf"):
        if not args.menagerie:
            notes.append("MJCF corpus skipped: no --menagerie and no $MENAGERIE_ROOT")
        else:
            try:
                import mujoco  # noqa: F401
            except ImportError:
                notes.append("MJCF corpus skipped: mujoco is not installed")
            else:
                cases += [(run_mjcf_case, (name, path, args.states, args.seed, args.standin_meshes,
                                           args.actuation_only))
                          for name, path in mjcf_cases(Path(args.menagerie), args.quick, args.filter)]
    if args.jobs > 1:
        import concurrent.futures as cf
        import multiprocessing as mp

        # Fresh interpreters (JAX does not survive fork); rows print as they finish and
        # are stored in case order.
        with cf.ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(f, *a): k for k, (f, a) in enumerate(cases)}
            done = {}
            for fut in cf.as_completed(futures):
                done[futures[fut]] = fut.result()
                _print_row(done[futures[fut]])
        rows = [done[k] for k in range(len(cases))]
    else:
        for f, a in cases:
            rows.append(f(*a))
            _print_row(rows[-1])
    for n in notes:
        print(n)
    meta = common.machine_metadata()
    try:
        import mujoco

        meta["mujoco"] = mujoco.__version__
    except ImportError:
        pass
    if args.menagerie:
        meta["menagerie"] = str(args.menagerie)
    default = "corpus_actuation.json" if args.actuation_only else "corpus.json"
    out = args.out or common.RESULTS / ("corpus_quick.json" if args.quick else default)
    if args.update and Path(out).is_file():
        import json

        # Replace the rows just checked in the previous results, keep the others.
        fresh = {(r["corpus"], r["name"]): r for r in rows}
        old = json.loads(Path(out).read_text())["rows"]
        merged = [fresh.pop((r["corpus"], r["name"]), r) for r in old]
        rows = merged + list(fresh.values())
    sums = [s for s in (summary(rows, "urdf"), summary(rows, "mjcf")) if s]
    for s in sums:
        print(
            f"SUMMARY {s['corpus']}: {s['cases']} cases, oracle loads {s['oracle_loads']}, "
            f"jaxrbd agrees to <= {TOL:g} on {s['ok']}, mismatch {s['mismatch']}, "
            f"jaxrbd load errors {s['load_error']}, comparison errors {s['compare_error']}, "
            f"oracle errors {s['oracle_error']}; worst relative error "
            f"{_fmt_err(s['worst_relative_error'])}"
            + (f"; {s['with_standin_meshes']} compiled with stand-in meshes "
               f"({s['standin_inertia']} with inertias from them)" if s["with_standin_meshes"] else "")
        )
        if "actuation_models" in s:
            print(f"SUMMARY actuation: {s['actuation_models']} models with actuators, "
                  f"{s['actuation_within_tol']} within {ACT_TOL:g} · max(1, |qfrc_actuator|) "
                  f"({s['actuation_within_abs_tol']} within {ACT_TOL:g} absolute; worst "
                  f"{_fmt_err(s['actuation_worst_abs'])} absolute, "
                  f"{_fmt_err(s['actuation_worst_rel'])} relative); {s['actuators_mapped']} of "
                  f"{s['actuators']} actuators mapped, all mapped in "
                  f"{s['models_all_actuators_mapped']} models; unmapped by reason: "
                  f"{s['unmapped_actuators_by_reason']}")
    common.write_json(out, rows, meta, summary=sums, notes=notes, tolerance=TOL,
                      states=args.states, seed=args.seed, standin_meshes=args.standin_meshes)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
