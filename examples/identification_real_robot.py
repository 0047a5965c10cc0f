"""Identify real robots from their logs with `jaxrbd.identification`.

Two public recordings (not shipped with jaxrbd; their licences are LGPL-3.0 and GPL-3.0):

* **KUKA LWR4+** (FloBaRoID, Bethge et al. 2017): two runs of one trajectory at 200 Hz
  with joint-torque sensors (``measurements_1.npz``, ``measurements_2.npz``) and the
  a priori URDF (``kuka_lwr4.urdf``), from github.com/kjyv/FloBaRoID (``data/KUKA/HW``,
  ``model``). Pipeline: resample, zero-phase filter, differentiate; base parameters;
  least squares; the physically consistent fit with a prior towards the URDF, its
  weight chosen on a split in time of run 1; the prediction of run 2.
* **Franka Panda** (Gaz et al. 2019): one exciting trajectory at about 1 kHz, and the
  published model (modified DH, Tables VIII/IX, Table I friction) typed into CSV files,
  from github.com/marcocognetti/FrankaEmikaPandaDynModel. The published model's
  torques on the logged motion; then identification on the first 14 s and the
  prediction of the rest.

Run:  python examples/identification_real_robot.py --kuka DIR [--panda DIR] [--plot FILE]

where ``DIR`` holds the files named above (the Panda folder: ``dh_modified.csv``,
``published_params_gaz2019.csv``, ``published_friction_gaz2019.csv`` and
``exciting_traj_{time,positions,velocity,torques}.txt``).
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import numpy as np

import jaxrbd
from jaxrbd import identification as ident

jax.config.update("jax_enable_x64", True)

# ---------------------------------------------------------------------- KUKA LWR4+

KUKA_FRICTION = ident.FrictionModel(armature=False, viscous=True, coulomb=True, offset=True,
                                    coulomb_width=0.01)


def kuka(data: str | pathlib.Path, *, cutoff: float = 10.0, split: float = 17.0,
         rule: str = "one_se") -> dict:
    """The KUKA pipeline: returns the models, fits and reports (see the module doc)."""
    data = pathlib.Path(data)
    t0 = time.perf_counter()
    model = jaxrbd.load_urdf(data / "kuka_lwr4.urdf")
    runs = [ident.Recording.from_npz(data / f"measurements_{k}.npz").for_model(model)
            .prepared(cutoff) for k in (1, 2)]
    fm = KUKA_FRICTION

    def stack(rec):
        return ident.stacked_regressor(model, fm, rec.q, rec.qd, rec.qdd), rec.tau.reshape(-1)

    base = ident.base_parameters(model, fm)
    train, val = runs[0].split(split)  # choose the prior's weight on a split in time
    (Yt, tt), (Yv, tv) = stack(train), stack(val)
    sel = ident.select_prior_weight(model, Yt, tt, Yv, tv, fm, rule=rule)
    seconds = time.perf_counter() - t0

    Y1, tau1 = stack(runs[0])
    Y2, tau2 = stack(runs[1])
    ols = ident.least_squares(Y1, tau1, base, nv=model.nv)
    prior = np.asarray(ident.standard_parameters(model, fm))

    def report(p, Y, tau):
        return ident.torque_report(tau.reshape(-1, model.nv), (Y @ np.asarray(p)).reshape(
            -1, model.nv), model.effort_limit)

    fit = sel.fit
    return {
        "model": model, "runs": runs, "base": base, "selection": sel, "ols": ols,
        "pipeline_s": seconds,
        "reports": {
            "a priori URDF on run 2": report(prior, Y2, tau2),
            "OLS (run 1) on run 2": report(ols.params, Y2, tau2),
            "consistent (run 1) on run 2": report(fit.params, Y2, tau2),
        },
        "consistent": bool(np.all(np.asarray(jaxrbd.is_physically_consistent(
            fit.model.inertia[np.asarray(fit.bodies)])))),
        "prediction_run2": (runs[1].t, tau2.reshape(-1, model.nv),
                            (Y2 @ np.asarray(fit.params)).reshape(-1, model.nv)),
    }


# ---------------------------------------------------------------------- Franka Panda


def _csv(path):
    rows = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    return rows


def panda_model(data: str | pathlib.Path):
    """The published Panda model: modified DH kinematics (``dh_modified.csv``, Craig's
    rows ``a_{i-1}, d_i, alpha_{i-1}``), the p-hat link inertias (centre-of-mass frame
    axes parallel to the link frame) and Table I's friction ``(phi1, phi2, phi3)``."""
    data = pathlib.Path(data)
    dh = _csv(data / "dh_modified.csv")
    par = _csv(data / "published_params_gaz2019.csv")
    fr = _csv(data / "published_friction_gaz2019.csv")
    links, types, bodies = [], [], []
    for k, row in enumerate(dh):
        links.append([row["a_im1"], row["alpha_im1"], row["d_i"], 0.0])
        types.append("R" if row["type"] == "revolute" else "F")
        if k < len(par):
            p = par[k]
            inertia = np.array([[p["Ixx"], p["Ixy"], p["Ixz"]], [p["Ixy"], p["Iyy"], p["Iyz"]],
                                [p["Ixz"], p["Iyz"], p["Izz"]]])
            bodies.append(jaxrbd.Body(p["m"], (p["cx"], p["cy"], p["cz"]), inertia))
        else:
            bodies.append(None)
    model = jaxrbd.dh_model(np.array(links), "modified", joint_types=types, bodies=bodies,
                            gravity=(0.0, 0.0, -9.81))
    phi = np.stack([fr["phi1"], fr["phi2"], fr["phi3"]])
    return model, phi


def panda_recording(data: str | pathlib.Path, model):
    data = pathlib.Path(data)

    def load(name):
        return np.loadtxt(data / f"exciting_traj_{name}.txt").reshape(-1, model.nv)

    t = np.loadtxt(data / "exciting_traj_time.txt")
    return ident.Recording.from_arrays(t, load("positions"), qd=load("velocity"),
                                       tau=load("torques"), joint_names=model.joint_names,
                                       name="panda exciting trajectory")


PANDA_FRICTION = ident.FrictionModel(armature=False, viscous=True, coulomb=True, offset=True,
                                     coulomb_width=0.02)


def panda(data: str | pathlib.Path, *, cutoff: float = 20.0, train_s: float = 14.0,
          rule: str = "one_se") -> dict:
    """The Panda checks: the published model on the logged motion, then identification on
    the first ``train_s`` seconds and the prediction of the rest."""
    model, phi = panda_model(data)
    rec = panda_recording(data, model).prepared(cutoff, rate=1000.0, trim=200)
    rid = jax.jit(jax.vmap(jaxrbd.inverse_dynamics, (None, 0, 0, 0)))
    tau_rb = np.asarray(rid(model, rec.q, rec.qd, rec.qdd))
    tau_pub = tau_rb + np.asarray(ident.sigmoid_friction(rec.qd, *phi[:, None, :]))
    # torques filtered as the velocities, for the identification and its test
    tau_f = ident.butterworth_filtfilt(rec.tau, cutoff, rec.rate)
    fm = PANDA_FRICTION
    train, test = rec.split(train_s)
    n_train = train.n_samples
    dec = 10  # 1 kHz filtered at 20 Hz: 100 Hz keeps the information
    tr = train.decimate(dec)
    te = test.decimate(dec)
    tau_tr = tau_f[:n_train:dec]
    tau_te = tau_f[n_train::dec]

    def stack(r):
        return ident.stacked_regressor(model, fm, r.q, r.qd, r.qdd)

    Ytr, Yte = stack(tr), stack(te)
    base = ident.base_parameters(model, fm)
    ols = ident.least_squares(Ytr, tau_tr.ravel(), base, nv=model.nv)
    # the prior's weight on a split in time of the training part
    a, b = tr.split(0.7 * tr.duration)
    sel = ident.select_prior_weight(model, stack(a), tau_tr[:a.n_samples].ravel(), stack(b),
                                    tau_tr[a.n_samples:].ravel(), fm, rule=rule)

    def report(tau, pred):
        return ident.torque_report(tau, pred, model.effort_limit if np.all(
            np.isfinite(model.effort_limit)) else None)

    rb_test = tau_rb[n_train::dec]
    fr_test = np.asarray(ident.sigmoid_friction(te.qd, *phi[:, None, :]))
    return {
        "model": model, "recording": rec, "base": base, "selection": sel,
        "reports": {
            "published, raw torque, whole log": report(rec.tau, tau_pub),
            "published, filtered torque, whole log": report(tau_f, tau_pub),
            "published, test slice (t >= 14 s)": report(tau_te, rb_test + fr_test),
            "OLS (t < 14 s), test slice": report(tau_te, (Yte @ ols.params).reshape(
                -1, model.nv)),
            "consistent (t < 14 s), test slice": report(tau_te, (Yte @ np.asarray(
                sel.fit.params)).reshape(-1, model.nv)),
        },
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kuka", help="folder with the KUKA LWR4+ files")
    parser.add_argument("--panda", help="folder with the Franka Panda files")
    parser.add_argument("--plot", help="save the KUKA run-2 prediction plot here (PNG)")
    args = parser.parse_args(argv)
    out = {}
    if not (args.kuka or args.panda):
        # the recordings are not shipped (LGPL/GPL): without a path there is nothing to fit
        print("no data: pass --kuka DIR and/or --panda DIR (see the module docstring for "
              "the files and their public sources)")
        return out
    if args.kuka:
        k = kuka(args.kuka)
        print(f"KUKA LWR4+: {k['base'].n_base} base parameters of "
              f"{k['base'].E.shape[1]}; prior weight {k['selection'].weight:g} "
              f"(validation errors {np.round(100 * k['selection'].validation_error, 2)} %); "
              f"pipeline {k['pipeline_s']:.1f} s; physically consistent: {k['consistent']}")
        for name, rep in k["reports"].items():
            print(f"  {name:<32} relative {100 * rep.relative:5.2f} %  "
                  f"NRMS {100 * rep.nrms:.3f} %")
        if args.plot:
            t, tau, pred = k["prediction_run2"]
            fig = ident.plot_torques(t - t[0], tau, pred, list(k["model"].joint_names),
                                     title="KUKA LWR4+ run 2: consistent fit on run 1")
            fig.savefig(args.plot, dpi=80)
        out["kuka"] = k
    if args.panda:
        p = panda(args.panda)
        print(f"Franka Panda: prior weight {p['selection'].weight:g}")
        for name, rep in p["reports"].items():
            print(f"  {name:<40} relative {100 * rep.relative:5.2f} %  RMS "
                  f"{np.round(rep.rms, 3)}")
        out["panda"] = p
    return out


if __name__ == "__main__":
    main()
