"""Identify real robots from their logs with `jaxrbd.identification`.

Two public recordings (not shipped with jaxrbd; their licences are LGPL-3.0 and GPL-3.0):

* **KUKA LWR4+** (FloBaRoID, Bethge et al. 2017): two runs of one trajectory at 200 Hz
  with joint-torque sensors (``measurements_1.npz``, ``measurements_2.npz``) and the
  a priori URDF (``kuka_lwr4.urdf``), from github.com/kjyv/FloBaRoID (``data/KUKA/HW``,
  ``model``). Pipeline: resample, zero-phase filter, differentiate; base parameters;
  least squares; the physically consistent fit with dissipative friction and a prior
  towards the URDF, its weight chosen on a split of run 1 by excitation (fitted on the
  calmer 70 % of the samples, scored on the fastest 30 %); the prediction of run 2.
* **Franka Panda** (Gaz et al. 2019): one exciting trajectory at about 1 kHz, and the
  published model (modified DH, Tables VIII/IX, Table I friction) typed into CSV files,
  from github.com/marcocognetti/FrankaEmikaPandaDynModel. The published model's
  torques on the logged motion; then identification on the first 14 s and the
  prediction of the rest.

Run:  python examples/identification_real_robot.py --kuka [DIR] [--panda DIR] [--plot FILE]

where ``DIR`` holds the files named above (the Panda folder: ``dh_modified.csv``,
``published_params_gaz2019.csv``, ``published_friction_gaz2019.csv`` and
``exciting_traj_{time,positions,velocity,torques}.txt``). Without ``DIR`` the recordings
are downloaded from their public sources at pinned commits on first use, checked
against their SHA-256 and cached (`data_folder`, `jaxrbd.identification.cached_download`,
in ``~/.cache/jaxrbd/`` or ``$JAXRBD_CACHE``). The Panda's published model exists only
as tables in the paper's supplement: its three CSV files have to be in the Panda folder
(the cache's ``panda_gaz2019/`` when downloading).
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

# ---------------------------------------------------------------------- data

_FLOBAROID = "https://raw.githubusercontent.com/kjyv/FloBaRoID/"
_GAZ = ("https://raw.githubusercontent.com/marcocognetti/FrankaEmikaPandaDynModel/"
        "24d85ce4e648e2e894c832bfeee9b16711eb1a1a/matlab/data/Exciting_Traj/Trajectory_1/"
        "rbt_log/")
#: The public files at pinned commits and their SHA-256: the KUKA data before the
#: repository moved them to Git LFS, the URDF before its 2026 friction edit.
SOURCES = {
    "kuka_lwr4": {
        "kuka_lwr4.urdf": (
            _FLOBAROID + "3a5e02be49f7da6a6838e70a6a18823234cfffd9/model/kuka_lwr4.urdf",
            "4cc6628d0d75fd530d55b69ae2a96ca1419f3a24079597237709a13c8872543b"),
        "measurements_1.npz": (
            _FLOBAROID + "4e2e5a2992f2175aa4e494c0d827590435a969a8/data/KUKA/HW/"
            "measurements_1.npz",
            "55b94c07e86a75311a584cc945c4436e7a5dbeafd5f7378a53225a0dd820c1fd"),
        "measurements_2.npz": (
            _FLOBAROID + "4e2e5a2992f2175aa4e494c0d827590435a969a8/data/KUKA/HW/"
            "measurements_2.npz",
            "e15b6df10dd26ecdd3f870bf9a908184207db26f13ae34b9e96931ab9fa14de8"),
    },
    "panda_gaz2019": {
        f"exciting_traj_{k}.txt": (_GAZ + f"exciting_traj_{k}.txt", h) for k, h in (
            ("time", "031063612f297011dc005ab29830903e36f4bfeba77bce59c0fbde13620fb20d"),
            ("positions", "50bf82a082c439aff8220e8142985c8dd783f7ddc1415987cd75c9efb88bcf69"),
            ("velocity", "3340f299e926c501b66d540fa461ea0a7184b8dda32e505ebed062db57860d49"),
            ("torques", "11fda32785bb29ce444e14e0f45f4893aab7142dc6ee29576d828ab154852f9c"))
    },
}
#: Files that exist only as tables of Gaz et al. (2019)'s supplement (typed in by hand).
PANDA_MODEL_FILES = {
    "dh_modified.csv": "columns i,a_im1,d_i,alpha_im1,type: modified DH rows (the repository's "
                       "matlab/utils/Load_Franka_DH.m), row 8 the fixed flange",
    "published_params_gaz2019.csv": "columns link,m,cx,cy,cz,Ixx,Ixy,Ixz,Iyy,Iyz,Izz: "
                                    "Tables VIII/IX (p-hat), inertia about the centre of mass",
    "published_friction_gaz2019.csv": "columns joint,phi1,phi2,phi3: Table I",
}


def data_folder(robot: str, path=None, *, download: bool = True, sources=None):
    """The folder of ``robot``'s recording (``"kuka_lwr4"`` or ``"panda_gaz2019"``):
    ``path`` if given, else the cache's copy, downloaded first if needed (and allowed).

    Raises:
        FileNotFoundError: ``path`` lacks a file, or the cache lacks one and ``download``
            is false.
        ConnectionError: a download failed (offline): the message says where to put the
            file by hand.
    """
    sources = SOURCES if sources is None else sources
    if robot not in sources:
        raise ValueError(f"robot must be one of {sorted(sources)}, got {robot!r}")
    if path is not None:
        folder = pathlib.Path(path)
        missing = [n for n in sources[robot] if not (folder / n).exists()]
        if missing:
            raise FileNotFoundError(f"{folder} lacks {missing} (see the module docstring)")
        return folder
    folder = ident.cache_directory() / robot
    for name, (url, sha) in sources[robot].items():
        if not download and not (folder / name).exists():
            raise FileNotFoundError(f"{folder / name} is not cached (download=False); its "
                                    f"source is {url}")
        ident.cached_download(url, sha, filename=name, cache_dir=folder)
    return folder


def _panda_model_files(folder):
    missing = {n: why for n, why in PANDA_MODEL_FILES.items() if not (folder / n).exists()}
    if missing:
        lines = "; ".join(f"{n} ({why})" for n, why in missing.items())
        raise FileNotFoundError(
            f"{folder} lacks the published Panda model, which Gaz et al. (2019) give only "
            f"as tables in their supplement (pdf/RA-L_2019_PandaDynIdent_SUPPLEMENTARY_"
            f"MATERIAL.pdf in their repository): {lines}")


# ---------------------------------------------------------------------- KUKA LWR4+

KUKA_FRICTION = ident.FrictionModel(armature=False, viscous=True, coulomb=True, offset=True,
                                    coulomb_width=0.01)


def kuka(data: str | pathlib.Path, *, cutoff: float = 10.0, validation: str = "excitation",
         fraction: float = 0.3, split: float = 17.0, rule: str = "one_se",
         dissipative: bool = True) -> dict:
    """The KUKA pipeline: returns the models, fits and reports (see the module doc).

    The recommended estimator (``docs/identification.md``): the physically consistent fit
    with dissipative friction, its prior weight chosen by the one-standard-error rule on
    a split of run 1 by excitation (``validation="excitation"``: fitted on the calmer
    ``1 - fraction`` of the samples, scored on the fastest ``fraction``,
    `jaxrbd.identification.Recording.split_by_excitation`), then fitted on all of run 1.
    ``validation="time"`` scores on run 1 after ``split`` seconds instead."""
    data = pathlib.Path(data)
    t0 = time.perf_counter()
    model = jaxrbd.load_urdf(data / "kuka_lwr4.urdf")
    runs = [ident.Recording.from_npz(data / f"measurements_{k}.npz").for_model(model)
            .prepared(cutoff) for k in (1, 2)]
    fm = KUKA_FRICTION

    def stack(rec):
        return ident.stacked_regressor(model, fm, rec.q, rec.qd, rec.qdd), rec.tau.reshape(-1)

    base = ident.base_parameters(model, fm)
    if validation == "excitation":
        train, val = runs[0].split_by_excitation(fraction)
    elif validation == "time":
        train, val = runs[0].split(split)
    else:
        raise ValueError(f"validation must be 'excitation' or 'time', got {validation!r}")
    (Yt, tt), (Yv, tv) = stack(train), stack(val)
    sel = ident.select_prior_weight(model, Yt, tt, Yv, tv, fm, rule=rule,
                                    dissipative=dissipative)
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
        "consistent": bool(np.all(np.asarray(jax.jit(jaxrbd.is_physically_consistent)(
            np.asarray(fit.model.inertia)[np.asarray(fit.bodies)])))),
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
    _panda_model_files(data)
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


#: The linear joint terms beside the fitted sigmoid of Gaz et al. (2019): its saturation
#: plays the Coulomb part.
PANDA_SIGMOID_FRICTION = ident.FrictionModel(armature=False, viscous=True, coulomb=False,
                                             offset=True)


#: Candidate cut-offs of the motion signals (q, qd, qdd) [Hz] and delays of the torque
#: behind the motion [s], chosen by validation inside the training part.
PANDA_MOTION_CUTOFFS = (6.0, 8.0, 10.0, 12.0, 15.0, 20.0)
PANDA_DELAYS = np.arange(-10, 11) * 1e-3


def panda(data: str | pathlib.Path, *, cutoff: float = 20.0, train_s: float = 14.0,
          rule: str = "one_se", sigmoid: bool = False,
          motion_cutoffs=PANDA_MOTION_CUTOFFS, delays=PANDA_DELAYS,
          validation: str = "excitation", fraction: float = 0.3) -> dict:
    """The Panda checks: the published model on the logged motion, then identification on
    the first ``train_s`` seconds and the prediction of the rest. With ``sigmoid``, also
    the consistent fit with Gaz et al.'s sigmoid friction fitted as nonlinear parameters
    (started from their Table I).

    The torques are low-passed at ``cutoff`` throughout (the target every prediction is
    scored against). The first fits use the motion filtered at ``cutoff`` too; the
    "validated" ones use the motion cut-off of ``motion_cutoffs`` and the torque delay
    of ``delays`` that predict the last 30 % of the training part best from its first
    70 % (`jaxrbd.identification.estimate_delay`): the test part chooses nothing."""
    model, phi = panda_model(data)
    raw = panda_recording(data, model)
    rec = raw.prepared(cutoff, rate=1000.0, trim=200)
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
    tr = tr.replace(tau=tau_tr)  # the filtered target travels with its samples

    def stack(r):
        return ident.stacked_regressor(model, fm, r.q, r.qd, r.qdd)

    Ytr, Yte = stack(tr), stack(te)
    base = ident.base_parameters(model, fm)
    ols = ident.least_squares(Ytr, tau_tr.ravel(), base, nv=model.nv)
    def weight_split(r):
        # the prior's weight is chosen inside the training part: on its fastest samples
        # (fitted on the calmer rest), or on its last 30 % in time
        if validation == "excitation":
            return r.split_by_excitation(fraction)
        if validation == "time":
            return r.split(0.7 * r.duration)
        raise ValueError(f"validation must be 'excitation' or 'time', got {validation!r}")

    a, b = weight_split(tr)
    sel = ident.select_prior_weight(model, stack(a), a.tau.ravel(), stack(b), b.tau.ravel(), fm,
                                    rule=rule)

    def report(tau, pred):
        return ident.torque_report(tau, pred, model.effort_limit if np.all(
            np.isfinite(model.effort_limit)) else None)

    rb_test = tau_rb[n_train::dec]
    fr_test = np.asarray(ident.sigmoid_friction(te.qd, *phi[:, None, :]))
    extra = {}
    if sigmoid:
        fs, nl = PANDA_SIGMOID_FRICTION, ident.NonlinearFriction("sigmoid")

        def stack_s(r):
            return ident.stacked_regressor(model, fs, r.q, r.qd, r.qdd)

        sel_s = ident.select_prior_weight(
            model, stack_s(a), a.tau.ravel(), stack_s(b), b.tau.ravel(), fs, rule=rule,
            nonlinear=nl, qd_train=a.qd, qd_val=b.qd, nonlinear_start=phi.T)
        extra["consistent + fitted sigmoid friction, test slice"] = report(
            tau_te, sel_s.fit.torques(stack_s(te), te.qd))
    # the motion cut-off and the torque delay, chosen inside the training part against
    # the same torque target
    choices = {}
    for cm in motion_cutoffs:
        r = raw.prepared(cm, rate=1000.0, trim=200).replace(tau=tau_f)
        choices[cm] = ident.estimate_delay(model, fm, r.split(train_s)[0], delays, base=base,
                                           step=dec)
    cm = min(choices, key=lambda c: choices[c].validation_error.min())
    delay = choices[cm].delay
    rv = raw.prepared(cm, rate=1000.0, trim=200).replace(tau=tau_f)
    train_v, test_v = (x.shift(delay) for x in rv.split(train_s))
    trv, tev = train_v.decimate(dec), test_v.decimate(dec)
    Ytrv, Ytev = stack(trv), stack(tev)
    ols_v = ident.least_squares(Ytrv, trv.tau.ravel(), base, nv=model.nv)
    av, bv = weight_split(trv)
    sel_v = ident.select_prior_weight(model, stack(av), av.tau.ravel(), stack(bv),
                                      bv.tau.ravel(), fm, rule=rule)
    pub_v = np.asarray(rid(model, tev.q, tev.qd, tev.qdd)) + np.asarray(
        ident.sigmoid_friction(tev.qd, *phi[:, None, :]))
    label = f"motion {cm:g} Hz, delay {1e3 * delay:g} ms"
    extra[f"published, test slice, {label}"] = report(tev.tau, pub_v)
    extra[f"OLS, test slice, {label}"] = report(tev.tau, (Ytev @ ols_v.params).reshape(
        -1, model.nv))
    extra[f"consistent, test slice, {label}"] = report(tev.tau, (Ytev @ np.asarray(
        sel_v.fit.params)).reshape(-1, model.nv))
    sel_vs = None
    if sigmoid:
        sel_vs = ident.select_prior_weight(
            model, stack_s(av), av.tau.ravel(), stack_s(bv), bv.tau.ravel(), fs, rule=rule,
            nonlinear=nl, qd_train=av.qd, qd_val=bv.qd, nonlinear_start=phi.T)
        extra[f"consistent + fitted sigmoid, test slice, {label}"] = report(
            tev.tau, sel_vs.fit.torques(stack_s(tev), tev.qd))
    return {
        "model": model, "recording": rec, "base": base, "selection": sel,
        "sigmoid_selection": sel_s if sigmoid else None,
        "motion_cutoff": cm, "delay": delay, "delay_estimates": choices,
        "validated_selection": sel_v, "validated_sigmoid_selection": sel_vs,
        "reports": {
            "published, raw torque, whole log": report(rec.tau, tau_pub),
            "published, filtered torque, whole log": report(tau_f, tau_pub),
            "published, test slice (t >= 14 s)": report(tau_te, rb_test + fr_test),
            "OLS (t < 14 s), test slice": report(tau_te, (Yte @ ols.params).reshape(
                -1, model.nv)),
            "consistent (t < 14 s), test slice": report(tau_te, (Yte @ np.asarray(
                sel.fit.params)).reshape(-1, model.nv)),
            **extra,
        },
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kuka", nargs="?", const="download",
                        help="folder with the KUKA LWR4+ files; without one, download and "
                             "cache them")
    parser.add_argument("--panda", nargs="?", const="download",
                        help="folder with the Franka Panda files; without one, download the "
                             "recording into the cache (the model CSVs must be put there)")
    parser.add_argument("--plot", help="save the KUKA run-2 prediction plot here (PNG)")
    args = parser.parse_args(argv)
    out = {}
    if not (args.kuka or args.panda):
        # the recordings are not shipped (LGPL/GPL): without a path there is nothing to fit
        print("no data: pass --kuka [DIR] and/or --panda [DIR] (see the module docstring "
              "for the files and their public sources; without DIR they are downloaded)")
        return out

    def folder(robot, arg):
        return data_folder(robot, None if arg == "download" else arg)

    if args.kuka:
        k = kuka(folder("kuka_lwr4", args.kuka))
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
        p = panda(folder("panda_gaz2019", args.panda))
        print(f"Franka Panda: prior weight {p['selection'].weight:g}; chosen inside the "
              f"training part: motion cut-off {p['motion_cutoff']:g} Hz, torque delay "
              f"{1e3 * p['delay']:g} ms")
        for name, rep in p["reports"].items():
            print(f"  {name:<50} relative {100 * rep.relative:5.2f} %  RMS "
                  f"{np.round(rep.rms, 3)}")
        out["panda"] = p
    return out


if __name__ == "__main__":
    main()
