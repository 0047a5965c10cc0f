"""MuJoCo's compiled actuators -> `jaxrbd.Actuators` (what `load_mjcf` returns in
``info.actuators``), and the joint equalities that become couplings."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._actuation import Actuators

__all__ = ["joint_couplings", "mjcf_actuators"]

_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_TRN_JOINT, _TRN_JOINTINPARENT, _TRN_TENDON, _TRN_SITE = 0, 1, 3, 4
_WRAP_JOINT = 1
_DYNAMICS = {0: "none", 1: "integrator", 2: "filter", 3: "filterexact"}
_GAIN_FIXED, _GAIN_AFFINE = 0, 1
_BIAS_NONE, _BIAS_AFFINE = 0, 1


def _enum_names(enum, prefix):
    return {int(v): k[len(prefix):].lower() for k, v in enum.__members__.items()}


def mjcf_actuators(mujoco, m, names: list[str], unmapped: dict[str, list[str]],
                   body_names: list[str], site_bodies: list[str]) -> Actuators | None:
    """The `Actuators` of a compiled model (``None`` without actuators); what it cannot
    represent is added to ``unmapped`` under a heading that says why."""
    nu, nv = int(m.nu), int(m.nv)
    if nu == 0:
        return None
    trn_name = _enum_names(mujoco.mjtTrn, "mjTRN_")
    dyn_name = _enum_names(mujoco.mjtDyn, "mjDYN_")
    gain_name = _enum_names(mujoco.mjtGain, "mjGAIN_")
    bias_name = _enum_names(mujoco.mjtBias, "mjBIAS_")
    flags = int(m.opt.disableflags)
    dsbl = mujoco.mjtDisableBit
    T = np.zeros((nu, nv))
    gain, bias = np.zeros((nu, 3)), np.zeros((nu, 3))
    mapped = [True] * nu
    ball, free, site = [], [], []
    tendons: dict[int, int] = {}  # MuJoCo tendon id -> index into the tendon ranges
    tendon = [-1] * nu
    dynamics = ["none"] * nu

    why_not: dict[int, list[str]] = {}

    def drop(i, why):
        mapped[i] = False
        why_not.setdefault(i, []).append(why)

    for i in range(nu):
        trn, tid = int(m.actuator_trntype[i]), int(m.actuator_trnid[i, 0])
        if trn in (_TRN_JOINT, _TRN_JOINTINPARENT):
            t, qa, va = int(m.jnt_type[tid]), int(m.jnt_qposadr[tid]), int(m.jnt_dofadr[tid])
            if t in (_HINGE, _SLIDE):
                T[i, va] = 1.0
            else:
                (ball if t == _BALL else free).append((i, qa, va, trn == _TRN_JOINTINPARENT))
        elif trn == _TRN_TENDON:
            adr, num = int(m.tendon_adr[tid]), int(m.tendon_num[tid])
            if not all(int(m.wrap_type[adr + k]) == _WRAP_JOINT for k in range(num)):
                drop(i, "spatial tendon transmission")
            else:  # a fixed tendon: length = Σ coef q over scalar joints
                for k in range(adr, adr + num):
                    T[i, int(m.jnt_dofadr[int(m.wrap_objid[k])])] += float(m.wrap_prm[k])
                if getattr(m, "tendon_actfrclimited", np.zeros(m.ntendon))[tid]:
                    tendon[i] = tendons.setdefault(tid, len(tendons))
        elif trn == _TRN_SITE and int(m.actuator_trnid[i, 1]) < 0:
            site.append((i, site_bodies[tid]))
        elif trn == _TRN_SITE:
            drop(i, "site transmission with a reference site")
        else:
            drop(i, f"{trn_name.get(trn, trn)} transmission")
        dyn, gt, bt = int(m.actuator_dyntype[i]), int(m.actuator_gaintype[i]), int(m.actuator_biastype[i])
        if dyn in _DYNAMICS:
            dynamics[i] = _DYNAMICS[dyn]
        else:
            drop(i, f"{dyn_name.get(dyn, dyn)} activation dynamics")
        if gt == _GAIN_FIXED:
            gain[i, 0] = m.actuator_gainprm[i, 0]
        elif gt == _GAIN_AFFINE:
            gain[i] = m.actuator_gainprm[i, :3]
        else:
            drop(i, f"{gain_name.get(gt, gt)} gain")
        if bt == _BIAS_AFFINE:
            bias[i] = m.actuator_biasprm[i, :3]
        elif bt != _BIAS_NONE:
            drop(i, f"{bias_name.get(bt, bt)} bias")
        if ball and ball[-1][0] == i and (gain[i, 1] != 0 or bias[i, 1] != 0):
            # MuJoCo wraps such a force into (-pi, pi] of the joint angle, undocumented
            drop(i, "on a ball joint with a force depending on its angle")
        if int(m.actuator_plugin[i]) >= 0:
            drop(i, "plugin")
        if int(getattr(m, "actuator_ctrlnum", np.ones(nu))[i]) != 1:
            drop(i, "several controls")
        if float(np.asarray(getattr(m, "actuator_delay", np.zeros(nu)))[i]) > 0:
            drop(i, "delayed control")
        group = int(m.actuator_group[i])
        if 0 <= group <= 30 and (int(m.opt.disableactuator) >> group) & 1:
            drop(i, f"group {group} disabled by the model: no force")
        for field, what in (("actuator_damping", "damping"), ("actuator_armature", "armature")):
            if np.any(np.asarray(getattr(m, field, np.zeros(nu)))[i] != 0):
                unmapped.setdefault(f"actuator {what} (not applied)", []).append(names[i])
    if flags & int(dsbl.mjDSBL_ACTUATION):
        for i in range(nu):
            if mapped[i]:
                drop(i, "actuation disabled by the model's flags: no force")
    for i, why in why_not.items():
        unmapped.setdefault(f"actuators ({', '.join(why)})", []).append(names[i])

    inf = np.full(nu, np.inf)
    if flags & int(dsbl.mjDSBL_CLAMPCTRL):
        clo, chi = -inf, inf
    else:
        lim = np.asarray(m.actuator_ctrllimited, bool)
        clo = np.where(lim, m.actuator_ctrlrange[:, 0], -np.inf)
        chi = np.where(lim, m.actuator_ctrlrange[:, 1], np.inf)
    flim = np.asarray(m.actuator_forcelimited, bool)
    alim = np.asarray(m.actuator_actlimited, bool)
    dlo, dhi = np.full(nv, -np.inf), np.full(nv, np.inf)
    for j in range(int(m.njnt)):
        if not getattr(m, "jnt_actfrclimited", np.zeros(m.njnt))[j]:
            continue
        if int(m.jnt_type[j]) == _FREE:
            # MuJoCo clamps the first DoF of the joint, the world-x force: no jaxrbd DoF.
            unmapped.setdefault("actuator force ranges of free joints", []).append(
                _joint_name(mujoco, m, j))
            continue
        # as MuJoCo: the joint's first DoF only
        dlo[int(m.jnt_dofadr[j])], dhi[int(m.jnt_dofadr[j])] = m.jnt_actfrcrange[j]
    gc_dofs: list[int] = []
    for j in np.flatnonzero(np.asarray(getattr(m, "jnt_actgravcomp", np.zeros(m.njnt)))):
        n = {_FREE: 6, _BALL: 3}.get(int(m.jnt_type[j]), 1)
        gc_dofs.extend(range(int(m.jnt_dofadr[j]), int(m.jnt_dofadr[j]) + n))
    gc_bodies = [i for i in range(1, int(m.nbody)) if m.body_gravcomp[i] != 0] if gc_dofs else []
    tids = sorted(tendons, key=tendons.get)
    actadr, actnum = np.asarray(m.actuator_actadr), np.asarray(m.actuator_actnum)
    act_index = tuple(int(actadr[i] + actnum[i] - 1) if actadr[i] >= 0 else -1 for i in range(nu))
    scalar = [j for j in range(int(m.njnt)) if int(m.jnt_type[j]) in (_HINGE, _SLIDE)]
    used = np.flatnonzero(np.any(T != 0, axis=0))
    scalar = [j for j in scalar if int(m.jnt_dofadr[j]) in set(used.tolist())]

    def arr(x):
        return jnp.asarray(np.asarray(x, dtype=np.float64))

    return Actuators(
        gear=arr(m.actuator_gear),
        transmission=arr(T),
        gain=arr(gain),
        bias=arr(bias),
        ctrl_lower=arr(clo),
        ctrl_upper=arr(chi),
        force_lower=arr(np.where(flim, m.actuator_forcerange[:, 0], -np.inf)),
        force_upper=arr(np.where(flim, m.actuator_forcerange[:, 1], np.inf)),
        act_lower=arr(np.where(alim, m.actuator_actrange[:, 0], -np.inf)),
        act_upper=arr(np.where(alim, m.actuator_actrange[:, 1], np.inf)),
        time_constant=arr(m.actuator_dynprm[:, 0]),
        timestep=arr(m.opt.timestep),
        dof_force_lower=arr(dlo),
        dof_force_upper=arr(dhi),
        tendon_force_lower=arr([m.tendon_actfrcrange[t, 0] for t in tids]),
        tendon_force_upper=arr([m.tendon_actfrcrange[t, 1] for t in tids]),
        names=tuple(names),
        mapped=tuple(mapped),
        ctrl_index=tuple(int(x) for x in np.asarray(getattr(m, "actuator_ctrladr", np.arange(nu)))),
        dynamics=tuple(dynamics),
        act_index=act_index,
        actearly=tuple(bool(x) for x in m.actuator_actearly),
        tendon=tuple(tendon),
        scalar_q=tuple(int(m.jnt_qposadr[j]) for j in scalar),
        scalar_v=tuple(int(m.jnt_dofadr[j]) for j in scalar),
        ball=tuple(ball),
        free=tuple(free),
        site=tuple(site),
        nq=int(m.nq),
        nv=nv,
        nctrl=nu,
        na=int(m.na),
        gravity_compensation=arr([m.body_gravcomp[i] for i in gc_bodies]),
        gravity_compensation_bodies=tuple(body_names[i] for i in gc_bodies),
        gravity_compensation_dofs=tuple(gc_dofs),
    )


def _joint_name(mujoco, m, j) -> str:
    return mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}"


def joint_couplings(m, joint_names: list[str], eq_label, unmapped) -> dict[str, tuple]:
    """``{joint1: (joint2, a, b)}`` of the active joint equalities with a linear polynomial
    that make one joint follow another.

    MuJoCo's joint equality holds ``q1 - q1_ref = c0 + c1 (q2 - q2_ref) + c2 (...)² + ...``
    (``ref`` = ``qpos0``), so a linear one is the coupling ``q1 = c1 q2 + b`` with
    ``b = q1_ref + c0 - c1 q2_ref``. Nonlinear ones, those that lock a joint (no
    ``joint2``), a second equality on the same joint and cycles are named in ``unmapped``.
    """
    out: dict[str, tuple] = {}
    qpos0 = np.asarray(m.qpos0)
    for e in range(int(m.neq)):
        if int(m.eq_type[e]) != 2:  # mjEQ_JOINT
            continue
        label = eq_label(e)
        if not m.eq_active0[e]:
            unmapped.setdefault("equality constraints inactive at qpos0", []).append(label)
            continue
        j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        c = np.asarray(m.eq_data[e, :5], dtype=np.float64)
        if j2 < 0:
            unmapped.setdefault("joint equalities that lock a joint (no joint2)", []).append(label)
            continue
        if np.any(c[2:] != 0):
            unmapped.setdefault("joint equalities with a nonlinear polynomial", []).append(label)
            continue
        n1, n2 = joint_names[j1], joint_names[j2]
        # a joint already coupled, or a coupling that closes a cycle, would over-constrain
        k, cycle = n2, False
        while k in out:
            k = out[k][0]
            cycle |= k == n1
        if n1 in out or cycle or n1 == n2:
            unmapped.setdefault("joint equalities redundant with others (a joint coupled "
                                "twice, or a cycle)", []).append(label)
            continue
        q1, q2 = qpos0[int(m.jnt_qposadr[j1])], qpos0[int(m.jnt_qposadr[j2])]
        out[n1] = (n2, float(c[1]), float(q1 + c[0] - c[1] * q2))
    return out
