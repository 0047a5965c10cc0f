"""Identification of two real robots from their logs (`jaxrbd.identification`), the
issue's targets, and the exact parameter Jacobian against finite differences.

Data (not in the repository; LGPL-3.0 / GPL-3.0): ``--data DIR`` with ``kuka_lwr4/`` and
``panda_gaz2019/`` as described in ``examples/identification_real_robot.py`` (default:
``../shared/sysid`` beside the repository). A robot whose folder is absent is skipped
with the reason printed and recorded.

Rows:

* KUKA LWR4+: relative torque error and NRMS on run 2 of the a priori URDF, of ordinary
  least squares and of the physically consistent fit (both on run 1; the prior's weight
  chosen on a split of run 1 by excitation, the recommended estimator, or in time, by
  the one-standard-error rule and by the minimum; with dissipative friction, and with
  free friction on the split in time);
  the whole pipeline (load, filter, base parameters, weight selection and consistent
  fit) timed in a fresh process, compilation included.
* Franka Panda: the published model (modified DH, Tables VIII/IX, Table I friction) on
  the logged trajectory, against the independent check's per-joint RMS; then OLS, the
  consistent fit, and the consistent fit with the sigmoid friction of Gaz et al. (2019)
  as fitted nonlinear parameters, on t < 14 s, predicting t >= 14 s (torques low-passed
  at 20 Hz); the same with the motion's cut-off and the torque's delay chosen inside
  t < 14 s by `jaxrbd.identification.estimate_delay` (published model re-scored on that
  motion too).
* Output-error fit (``--simulation``, its own JSON ``sysid_simulation.json``):
  `jaxrbd.identification.simulation_error_fit` on windows spread over KUKA run 1, from
  the recommended torque fit, scored on run 2 by the open-loop position RMS of 20 ms
  windows from measured states (`jaxrbd.identification.simulation_rms`) and by the
  torque error, with its wall and CPU time (``--no-jacobian``: these rows only).
* Simulation Jacobian (``--simulation``): the output-error residual of `jaxrbd.identification.simulation_error_fit` (positions of
  windows of run 1 simulated from their measured start states with the recorded
  torques) differentiated with respect to every standard parameter, exactly by
  forward mode through `jaxrbd.rollout` against forward finite differences with one
  batched rollout per parameter, as MuJoCo's system-identification toolbox does.
* Jacobian: the torque residual's Jacobian with respect to all inertial parameters on
  run 1 (T samples x 7 joints by 100 parameters): exactly, by the regressor
  (`jaxrbd.identification.stacked_regressor`, which *is* that Jacobian since the torques
  are linear in the parameters) and by `jax.jacfwd` of batched inverse dynamics, against
  central finite differences (two batched inverse-dynamics passes per parameter, as a
  finite-difference toolbox does with one simulation per parameter).

Run from the repository root:

    PYTHONPATH=. python benchmarks/bench_sysid.py [--data DIR]    # results/sysid.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))

import _common  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "sysid"
#: README figures of the independent check (../shared/sysid/panda_gaz2019/README.md)
PANDA_RMS_REFERENCE = [0.457, 0.780, 0.431, 0.520, 0.173, 0.146, 0.073]

_PIPELINE = """
import time, json, sys, resource
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
sys.path.insert(0, {examples!r})
import identification_real_robot as ex
k = ex.kuka({data!r})
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"pipeline_s": time.perf_counter() - t0, "inner_s": k["pipeline_s"],
                  "cpu_s": ru.ru_utime + ru.ru_stime}}))
"""


#: KUKA rows: (validation split of run 1, rule, dissipative friction); the first is the
#: recommended estimator (docs/identification.md), the others show what each choice moves.
KUKA_CONFIGS = (("excitation", "one_se", True), ("excitation", "min", True),
                ("time", "one_se", True), ("time", "min", True),
                ("time", "one_se", False), ("time", "min", False))


def _kuka_key(validation, rule, dissipative):
    return f"{validation}/{rule}/{'dissipative' if dissipative else 'free friction'}"


KUKA_RECOMMENDED = _kuka_key(*KUKA_CONFIGS[0])


def _rep(r):
    return {"relative": r.relative, "nrms": r.nrms, "rms": r.rms.tolist()}


def kuka_rows(data):
    import identification_real_robot as ex

    out = {"recommended": KUKA_RECOMMENDED, "rows": {}}
    for validation, rule, dissipative in KUKA_CONFIGS:
        k = ex.kuka(data, validation=validation, rule=rule, dissipative=dissipative)
        sel = k["selection"]
        fit = sel.fit
        out["rows"][_kuka_key(validation, rule, dissipative)] = {
            "validation": validation, "rule": rule, "dissipative": dissipative,
            "weight": sel.weight,
            "weights": sel.weights.tolist(),
            "validation_error": sel.validation_error.tolist(),
            "standard_error": sel.standard_error.tolist(),
            "reports": {n: _rep(r) for n, r in k["reports"].items()},
            "consistent": k["consistent"],
            "viscous": np.asarray(fit.model.damping).tolist(),
            "coulomb": np.asarray(fit.model.friction).tolist(),
            "at_bound": list(fit.at_bound),
            "n_base": k["base"].n_base,
            "n_standard": int(k["base"].E.shape[1]),
            "base_condition_random_states": k["base"].condition,
        }
    # the full pipeline in a fresh process: import, load, filter, base parameters,
    # weight selection, consistent fit; compilation included
    code = _PIPELINE.format(examples=str(ROOT / "examples"), data=str(data))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=900)
    if res.returncode:
        raise RuntimeError(res.stderr[-2000:])
    out["pipeline"] = json.loads(res.stdout.strip().splitlines()[-1])
    out["jacobian"] = jacobian_rows(k["model"], k["runs"][0])
    return out


def jacobian_rows(model, rec):
    import jax
    import jax.numpy as jnp

    import jaxrbd
    from jaxrbd import identification as ident

    q, qd, qdd = (jnp.asarray(x) for x in (rec.q, rec.qd, rec.qdd))
    pi0 = jaxrbd.inertial_parameters(model).ravel()

    def torques(pi):
        m = jaxrbd.with_inertial_parameters(model, pi)
        return jax.vmap(jaxrbd.inverse_dynamics, (None, 0, 0, 0))(m, q, qd, qdd).ravel()

    fm = ident.FrictionModel(armature=False, viscous=False, coulomb=False, offset=False)
    rows = {}

    def timed(name, f, *args):
        t0 = time.perf_counter()
        out = jax.block_until_ready(f(*args))
        first = time.perf_counter() - t0
        best = np.inf
        for _ in range(3):
            t0 = time.perf_counter()
            jax.block_until_ready(f(*args))
            best = min(best, time.perf_counter() - t0)
        rows[name] = {"first_call_s": first, "best_s": best}
        return out

    J_reg = timed("regressor (exact)", lambda: jnp.asarray(
        ident.stacked_regressor(model, fm, rec.q, rec.qd, rec.qdd)))
    J_ad = timed("jax.jacfwd of batched RNEA (exact)", jax.jit(jax.jacfwd(torques)), pi0)

    @jax.jit
    def fd(pi):
        h = 1e-6 * jnp.maximum(jnp.abs(pi), 1.0)
        E = jnp.eye(pi.size, dtype=pi.dtype) * h[:, None]
        cols = jax.lax.map(lambda e: torques(pi + e) - torques(pi - e), E)
        return (cols / (2 * h[:, None])).T

    J_fd = timed("central finite differences (2 RNEA passes per parameter)", fd, pi0)
    ref = np.asarray(J_reg)
    scale = np.abs(ref).max()
    rows["max_abs_diff_jacfwd_vs_regressor"] = float(np.abs(np.asarray(J_ad) - ref).max() / scale)
    rows["max_abs_diff_fd_vs_regressor"] = float(np.abs(np.asarray(J_fd) - ref).max() / scale)
    rows["shape"] = list(ref.shape)
    return rows


def simulation_jacobian_rows(kdir, windows=20, length=21):
    """The output-error residual's Jacobian on KUKA run 1, exact and by finite
    differences. The friction model leaves out Coulomb friction: its smooth sign of
    width 0.01 rad/s is too stiff for explicit 200 Hz steps, and the comparison is about
    the cost of the Jacobian, not the fit."""
    import jax
    import jax.numpy as jnp

    import jaxrbd
    from jaxrbd import identification as ident

    model = jaxrbd.load_urdf(kdir / "kuka_lwr4.urdf")
    rec = ident.Recording.from_npz(kdir / "measurements_1.npz").for_model(model).prepared(10.0)
    fm = ident.FrictionModel(armature=False, viscous=True, coulomb=False, offset=True)
    n = windows * (length - 1) + 1
    qw, tw, starts = ident.shooting_windows(rec.q[:n], rec.tau[:n], length)
    q0, qd0 = jnp.asarray(rec.q[starts]), jnp.asarray(rec.qd[starts])
    qw, tw = jnp.asarray(qw), jnp.asarray(tw)
    dt = 1.0 / rec.rate
    p0 = jnp.asarray(ident.standard_parameters(model, fm))

    def residual(p):
        qs, _ = ident.simulate_windows(model, p, fm, q0, qd0, tw, dt)
        return (qs - qw).ravel()

    exact = jax.jit(jax.jacfwd(residual))

    @jax.jit
    def finite_differences(p):
        h = 1e-6 * jnp.maximum(jnp.abs(p), 1e-2)
        r0 = residual(p)
        cols = jax.lax.map(lambda e: residual(p + e) - r0, jnp.diag(h))
        return (cols / h[:, None]).T

    rows = {"shape": None, "windows": windows, "samples_per_window": length,
            "rate_hz": rec.rate, "parameters": int(p0.size)}
    out = {}
    for name, f in (("exact (jax.jacfwd through rollout)", exact),
                    ("forward differences (one batched rollout per parameter)",
                     finite_differences)):
        w0, c0 = time.perf_counter(), time.process_time()
        out[name] = np.asarray(jax.block_until_ready(f(p0)))
        first = (time.perf_counter() - w0, time.process_time() - c0)
        best = (np.inf, np.inf)
        for _ in range(3):
            w0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(f(p0))
            best = (min(best[0], time.perf_counter() - w0), min(best[1], time.process_time() - c0))
        rows[name] = {"first_call_s": first[0], "first_call_cpu_s": first[1],
                      "best_s": best[0], "best_cpu_s": best[1]}
    J, Jfd = out.values()
    rows["shape"] = list(J.shape)
    rows["max_rel_diff_fd_vs_exact"] = float(np.abs(Jfd - J).max() / np.abs(J).max())
    return rows


#: The output-error fit on KUKA data: Coulomb smooth-sign width [rad/s] (wider than the
#: torque fit's, so that explicit RK4 steps of 5 ms / SIM_SUBSTEPS stay stable at rest),
#: samples per window (20 ms), windows spread over run 1, RK4 substeps per sample,
#: and the prior weights tried.
SIM_WIDTH, SIM_WINDOW, SIM_COUNT, SIM_SUBSTEPS = 0.05, 5, 150, 4
SIM_WEIGHTS = (1e2, 1e4)


def simulation_fit_rows(kdir, weights=SIM_WEIGHTS, count=SIM_COUNT, max_iters=6):
    """The output-error fit on KUKA run 1 from the recommended torque fit (the one-SE
    weight on the split by excitation, dissipative friction), evaluated on run 2: the
    open-loop position RMS per joint of 20 ms windows from the filtered measured start
    states (200 consecutive windows from t = 2 s, as the torque fit's figure in the LOG,
    and ``count`` windows spread over the whole run), the run-2 torque error, physical
    consistency and the wall and CPU time of each fit (compilation included in the
    first)."""
    import jax

    import jaxrbd
    from jaxrbd import identification as ident

    model = jaxrbd.load_urdf(kdir / "kuka_lwr4.urdf")
    runs = [ident.Recording.from_npz(kdir / f"measurements_{k}.npz").for_model(model)
            .prepared(10.0) for k in (1, 2)]
    fm = ident.FrictionModel(armature=False, viscous=True, coulomb=True, offset=True,
                             coulomb_width=SIM_WIDTH)

    def stack(r):
        return ident.stacked_regressor(model, fm, r.q, r.qd, r.qdd), r.tau.ravel()

    tr, va = runs[0].split_by_excitation(0.3)
    sel = ident.select_prior_weight(model, *stack(tr), *stack(va), fm)
    Y2, tau2 = stack(runs[1])
    consistent = jax.jit(jaxrbd.is_physically_consistent)

    def evaluate(params):
        r2 = runs[1]
        s0 = int(2.0 * r2.rate)
        n = 200 * (SIM_WINDOW - 1) + 1
        seg = slice(s0, s0 + n)
        kw = dict(window=SIM_WINDOW, integrator="rk4", substeps=SIM_SUBSTEPS)
        p = np.asarray(params)
        rep = ident.torque_report(tau2.reshape(-1, model.nv), (Y2 @ p).reshape(-1, model.nv),
                                 model.effort_limit)
        return {
            "open_loop_rms_mrad_200_windows_from_2s": (1e3 * ident.simulation_rms(
                model, p, fm, r2.t[seg], r2.q[seg], r2.tau[seg], qd=r2.qd[seg], **kw)).tolist(),
            f"open_loop_rms_mrad_{count}_windows_spread": (1e3 * ident.simulation_rms(
                model, p, fm, r2.t, r2.q, r2.tau, qd=r2.qd, count=count, **kw)).tolist(),
            "run2_torque": _rep(rep),
            "consistent": bool(np.all(np.asarray(consistent(
                np.asarray(p)[: 10 * model.nbodies].reshape(-1, 10)[list(sel.fit.bodies)])))),
            "viscous": p[10 * model.nbodies: 10 * model.nbodies + model.nv].tolist(),
        }

    out = {"coulomb_width": SIM_WIDTH, "window_samples": SIM_WINDOW, "windows": count,
           "substeps": SIM_SUBSTEPS, "integrator": "rk4", "rate_hz": runs[0].rate,
           "max_iters_per_stage": max_iters,
           "torque_fit": {"weight": sel.weight, **evaluate(sel.fit.params)}, "fits": {}}
    print(f"  torque fit (weight {sel.weight:g}): {out['torque_fit']}", flush=True)
    r1 = runs[0]
    for w in weights:
        w0, c0 = time.perf_counter(), time.process_time()
        fit = ident.simulation_error_fit(
            model, r1.t, r1.q, r1.tau, fm, window=SIM_WINDOW, count=count, qd=r1.qd,
            start=sel.fit, prior_weight=w, integrator="rk4", substeps=SIM_SUBSTEPS,
            max_iters=max_iters)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        out["fits"][f"{w:g}"] = {
            "prior_weight": w, "wall_s": wall, "cpu_s": cpu, "iterations": fit.iterations,
            "train_rms_mrad": (1e3 * fit.joint_rms).tolist(),
            "train_start_rms_mrad": (1e3 * fit.start_rms).tolist(),
            "at_bound": list(fit.at_bound), **evaluate(fit.params)}
        print(f"  weight {w:g}: {wall:.0f} s wall {cpu:.0f} s CPU, "
              f"{out['fits'][f'{w:g}']}", flush=True)
    return out


def panda_rows(data):
    import identification_real_robot as ex

    out = {}
    for rule in ("one_se", "min"):
        p = ex.panda(data, rule=rule, sigmoid=True)
        s = p["sigmoid_selection"]
        out[rule] = {"weight": p["selection"].weight,
                     "validation_error": p["selection"].validation_error.tolist(),
                     "sigmoid_weight": s.weight,
                     "sigmoid_validation_error": s.validation_error.tolist(),
                     "sigmoid_params": np.asarray(s.fit.nonlinear_params).tolist(),
                     "motion_cutoff_hz": p["motion_cutoff"], "delay_s": p["delay"],
                     "delay_validation": {
                         f"{c:g} Hz": {"delay_s": e.delay,
                                       "validation_error": e.validation_error.tolist()}
                         for c, e in p["delay_estimates"].items()},
                     "validated_weight": p["validated_selection"].weight,
                     "validated_sigmoid_weight": p["validated_sigmoid_selection"].weight,
                     "reports": {n: _rep(r) for n, r in p["reports"].items()}}
    rms = np.asarray(out["one_se"]["reports"]["published, raw torque, whole log"]["rms"])
    out["published_rms_minus_reference"] = (rms - PANDA_RMS_REFERENCE).tolist()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--out", default=None)
    parser.add_argument("--simulation", action="store_true",
                        help="only the output-error fit and its Jacobian rows "
                             "(sysid_simulation.json)")
    parser.add_argument("--no-jacobian", action="store_true",
                        help="with --simulation: the fit rows only")
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    data = pathlib.Path(args.data)
    meta = _common.machine_metadata()
    if args.simulation:
        return _simulation_main(data, meta, args.out or str(_common.RESULTS /
                                                            "sysid_simulation.json"),
                                not args.no_jacobian)
    args.out = args.out or str(_common.RESULTS / "sysid.json")
    result, skipped = {}, {}
    kdir, pdir = data / "kuka_lwr4", data / "panda_gaz2019"
    if (kdir / "measurements_1.npz").exists():
        result["kuka"] = kuka_rows(kdir)
    else:
        skipped["kuka"] = f"no {kdir}/measurements_1.npz (the FloBaRoID KUKA data)"
    if (pdir / "exciting_traj_torques.txt").exists():
        result["panda"] = panda_rows(pdir)
    else:
        skipped["panda"] = f"no {pdir}/exciting_traj_torques.txt (Gaz et al. 2019 data)"
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    if "kuka" in result:
        k = result["kuka"]
        print(f"\nKUKA LWR4+ (CPU: {meta['machine']['cpu']}, load at start "
              f"{meta['machine']['load_avg_1min_at_start']})")
        print(f"{'estimator, evaluated on run 2':<32} {'weight chosen by':<40} {'weight':>8} "
              f"{'rel %':>7} {'NRMS %':>8}")
        for key, row in k["rows"].items():
            for name, r in row["reports"].items():
                if name.startswith("consistent") or key == KUKA_RECOMMENDED:
                    tag = key + (" (recommended)" if key == KUKA_RECOMMENDED else "")
                    print(f"{name:<32} {tag:<40} {row['weight']:8.0e} "
                          f"{100 * r['relative']:7.2f} {100 * r['nrms']:8.3f}")
        print(f"pipeline in a fresh process, compilation included: "
              f"{k['pipeline']['pipeline_s']:.1f} s wall, {k['pipeline']['cpu_s']:.1f} s CPU "
              f"(target 15 s on 2 cores)")
        for name, r in k["jacobian"].items():
            if isinstance(r, dict):
                print(f"  Jacobian {name:<60} first {r['first_call_s']:7.3f} s  "
                      f"best {r['best_s']:7.4f} s")
        print(f"  rel. max diff: jacfwd {k['jacobian']['max_abs_diff_jacfwd_vs_regressor']:.1e}, "
              f"FD {k['jacobian']['max_abs_diff_fd_vs_regressor']:.1e}")
    if "panda" in result:
        p = result["panda"]
        print("\nFranka Panda")
        for rule in ("one_se", "min"):
            for name, r in p[rule]["reports"].items():
                print(f"{name:<62} {rule:<7} rel {100 * r['relative']:6.2f} %  RMS "
                      f"{np.round(r['rms'], 3).tolist()}")
        print(f"chosen inside t < 14 s: motion cut-off {p['one_se']['motion_cutoff_hz']:g} Hz, "
              f"torque delay {1e3 * p['one_se']['delay_s']:g} ms")
        print("published RMS minus the independent check's: "
              f"{np.round(p['published_rms_minus_reference'], 4).tolist()}")
    _common.write_json(args.out, [], meta, results=result, skipped=skipped)
    print(f"\nwrote {args.out}")


def _simulation_main(data, meta, out, jacobian=True):
    kdir = data / "kuka_lwr4"
    if not (kdir / "measurements_1.npz").exists():
        why = f"no {kdir}/measurements_1.npz (the FloBaRoID KUKA data)"
        print(f"skipped: {why}")
        _common.write_json(out, [], meta, results={}, skipped={"kuka": why})
        return
    fits = simulation_fit_rows(kdir)
    print(f"KUKA LWR4+ output-error fit on run 1 ({fits['windows']} windows of "
          f"{fits['window_samples']} samples, RK4 x {fits['substeps']}), evaluated on run 2")
    print(f"{'start / prior weight':<22} {'run-2 torque %':>14} {'consistent':>10}  "
          "open-loop RMS per joint on 200 windows from t = 2 s [mrad]")
    for name, r in [("torque fit", fits["torque_fit"])] + [
            (f"output error, w={k}", r) for k, r in fits["fits"].items()]:
        print(f"{name:<22} {100 * r['run2_torque']['relative']:14.2f} {r['consistent']!s:>10}  "
              f"{np.round(r['open_loop_rms_mrad_200_windows_from_2s'], 2).tolist()}"
              + (f"  ({r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU)" if "wall_s" in r
                 else ""))
    if not jacobian:
        _common.write_json(out, [], meta, results={"kuka_simulation_fit": fits})
        print(f"wrote {out}")
        return
    rows = simulation_jacobian_rows(kdir)
    print(f"KUKA LWR4+ output-error Jacobian {rows['shape']} ({rows['windows']} windows of "
          f"{rows['samples_per_window']} samples at {rows['rate_hz']:.0f} Hz, "
          f"{rows['parameters']} parameters; CPU: {meta['machine']['cpu']}, load at start "
          f"{meta['machine']['load_avg_1min_at_start']})")
    for name, r in rows.items():
        if isinstance(r, dict):
            print(f"  {name:<58} first {r['first_call_s']:7.2f} s ({r['first_call_cpu_s']:.1f} "
                  f"CPU)  best {r['best_s']:7.3f} s ({r['best_cpu_s']:.3f} CPU)")
    print(f"  max |J_fd - J| / max |J| = {rows['max_rel_diff_fd_vs_exact']:.1e}")
    _common.write_json(out, [], meta, results={"kuka_simulation_fit": fits,
                                               "kuka_simulation_jacobian": rows})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
