"""The external Pinocchio-equivalence suite's robots (A2R-Lab/RBDReference): every quantity it
checks, on every robot, fixed and floating, against Pinocchio.

The suite's 9 robot files are read at run time from ``../shared/robots/rbdreference/``
(override with ``--robots`` or ``$RBDREFERENCE_ROBOTS``; licences and provenance in that
folder's ``SOURCES.md``); nothing here is copied into the repository. Each robot is loaded
with `jaxrbd.load_urdf`'s defaults (mimic joints coupled), fixed and with
``floating_base=True`` (Pinocchio: ``JointModelFreeFlyer`` root; a root link named
``world`` floats with the robot welded to it), and compared over random states with

- ``H``: `jaxrbd.mass_matrix` / ``crba``;
- ``rnea``: `jaxrbd.inverse_dynamics` / ``rnea``;
- ``aba``: `jaxrbd.forward_dynamics` / ``aba``;
- ``dtau_dq``, ``dtau_dqd``: `jaxrbd.inverse_dynamics_derivatives` /
  ``computeRNEADerivatives`` (its third output is ``H``, checked above);
- ``dqdd_dq``, ``dqdd_dqd``, ``dqdd_dtau``: `jaxrbd.forward_dynamics_derivatives` /
  ``computeABADerivatives`` (``dqdd_dtau = H⁻¹``);
- ``cmm``: `jaxrbd.centroidal_momentum_matrix` / ``computeCentroidalMap`` (rows
  ``[linear; angular]`` there, ``[angular; linear]`` here).

Mimic joints: Pinocchio's ``aba`` refuses its mimic joints (see `corpus.run_urdf_case`), so
for a coupled model every quantity's oracle is Pinocchio's full tree (``mimic=False``) restricted to
``qd_full = A qd`` (``H = Aᵀ H_full A``, ``tau = Aᵀ tau_full``, the ABA quantities solved
with that ``H``), the same maths as Pinocchio's ``JointModelMimic``; ``H`` and ``rnea`` are
also compared with Pinocchio's ``mimic=True`` model (``H_pin_mimic``, ``rnea_pin_mimic``).
Coordinates are mapped by joint name (`corpus._pin_maps`: free joints ``[v; ω]`` there,
``[ω; v]`` here; quaternions ``(x, y, z, w)`` there). Derivatives with respect to ``q`` are
in the tangent space on both sides.

Errors are relative, ``max |a - b| / max |b|`` over all states. A check passes at
``TOL = 1e-12`` for the quantities that need no solve (``H``, ``rnea``, ``dtau_*``, ``cmm``)
and at ``max(TOL, cond(H) · 1e-15)`` for those that solve with ``H`` (``aba``, ``dqdd_*``).

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_rbdreference.py [--states 5] [--filter gen3,fetch]

Writes ``benchmarks/results/rbdreference.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402
import corpus  # noqa: E402  (sets the XLA flags and float64 before JAX starts)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxrbd  # noqa: E402
from jaxrbd._coupling import expand_q, expand_v  # noqa: E402

ROBOTS = ("iiwa14", "fr3", "gen3", "rizon4", "baxter", "fetch", "go2", "g1", "h1_2")
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "robots" / "rbdreference"
TOL = 1e-12
#: quantities computed by solving with H: their tolerance grows with cond(H)
SOLVED = ("aba", "dqdd_dq", "dqdd_dqd", "dqdd_dtau")
QUANTITIES = ("H", "rnea", "aba", "dtau_dq", "dtau_dqd", "dqdd_dq", "dqdd_dqd", "dqdd_dtau",
              "cmm")


def _jaxrbd_side(model, q, qd, qdd, tau):
    dtau_dq, dtau_dqd, _ = jaxrbd.inverse_dynamics_derivatives(model, q, qd, qdd)
    dqdd_dq, dqdd_dqd, dqdd_dtau = jaxrbd.forward_dynamics_derivatives(model, q, qd, tau)
    return dict(
        H=jaxrbd.mass_matrix(model, q),
        rnea=jaxrbd.inverse_dynamics(model, q, qd, qdd),
        aba=jaxrbd.forward_dynamics(model, q, qd, tau),
        dtau_dq=dtau_dq, dtau_dqd=dtau_dqd,
        dqdd_dq=dqdd_dq, dqdd_dqd=dqdd_dqd, dqdd_dtau=dqdd_dtau,
        cmm=jaxrbd.centroidal_momentum_matrix(model, q),
    )


#: one compile per model: all states at once
JAXRBD = jax.jit(jax.vmap(_jaxrbd_side, in_axes=(None, 0, 0, 0, 0)))


def _sym(H):
    H = np.array(H)
    return np.triu(H) + np.triu(H, 1).T


def _pinocchio_side(pin, pm, model, q, qd, qdd, tau):
    """The oracle's quantities in jaxrbd's coordinates of ``model`` (coupled or not)."""
    coupled = isinstance(model, jaxrbd.CoupledModel)
    full = model.base if coupled else model
    q_pin, P = corpus._pin_maps(pin, pm, full)
    if coupled:
        A = np.array(jax.vmap(lambda e: expand_v(model, e), out_axes=1)(jnp.eye(model.nv)))
        q_full = np.array(expand_q(model, jnp.asarray(q)))
    else:
        A, q_full = np.eye(model.nv), q
    PA = P @ A  # independent jaxrbd velocities -> Pinocchio's full velocities
    data = pm.createData()
    qp = q_pin(q_full)
    H = PA.T @ _sym(pin.crba(pm, data, qp)) @ PA
    out = dict(H=H, rnea=PA.T @ pin.rnea(pm, data, qp, PA @ qd, PA @ qdd))
    dq, dv, _ = pin.computeRNEADerivatives(pm, data, qp, PA @ qd, PA @ qdd)
    out.update(dtau_dq=PA.T @ dq @ PA, dtau_dqd=PA.T @ dv @ PA)
    if coupled:  # ABA on the restricted tree: H qdd = tau - Aᵀ nle(A qd)
        nle = PA.T @ pin.rnea(pm, data, qp, PA @ qd, np.zeros(pm.nv))
        aba = np.linalg.solve(H, tau - nle)
        dq, dv, _ = pin.computeRNEADerivatives(pm, data, qp, PA @ qd, PA @ aba)
        Hinv = np.linalg.inv(H)
        out.update(aba=aba, dqdd_dq=-Hinv @ (PA.T @ dq @ PA), dqdd_dqd=-Hinv @ (PA.T @ dv @ PA),
                   dqdd_dtau=Hinv)
    else:
        out["aba"] = P.T @ pin.aba(pm, data, qp, P @ qd, P @ tau)
        dq, dv, Minv = pin.computeABADerivatives(pm, data, qp, P @ qd, P @ tau)
        out.update(dqdd_dq=P.T @ dq @ P, dqdd_dqd=P.T @ dv @ P, dqdd_dtau=P.T @ _sym(Minv) @ P)
    Ag = np.array(pin.computeCentroidalMap(pm, data, qp))
    out["cmm"] = Ag[[3, 4, 5, 0, 1, 2]] @ PA
    return out


def _pin_mimic_side(pin, pm, model, q, qd, qdd):
    """H and RNEA of Pinocchio's own mimic model (``mimic=True``) for a coupled model."""
    q_pin, P = corpus._pin_maps(pin, pm, model)
    data = pm.createData()
    qp = q_pin(q)
    return (P.T @ _sym(pin.crba(pm, data, qp)) @ P,
            P.T @ pin.rnea(pm, data, qp, P @ qd, P @ qdd))


def run_case(name, path, floating, nstates, seed):
    pin = common.pinocchio()
    row = dict(robot=name, floating_base=floating)
    t0 = time.perf_counter()
    root = pin.JointModelFreeFlyer() if floating else None

    def build(mimic):
        args = (str(path),) + ((root,) if floating else ())
        return pin.buildModelFromUrdf(*args, mimic=mimic)

    try:
        pm = build(False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = jaxrbd.load_urdf(str(path), floating_base=floating)
        row.update(model=type(model).__name__, nq=model.nq, nv=model.nv,
                   oracle_nv_full=pm.nv, warnings=corpus._warned(caught))
        rng = np.random.default_rng(seed)
        states = []
        for _ in range(nstates):
            q = corpus.random_q(model, rng)
            states.append((q, *(rng.uniform(-1, 1, model.nv) for _ in range(3))))
        ref = [_pinocchio_side(pin, pm, model, *s) for s in states]
        t1 = time.perf_counter()
        got = JAXRBD(model, *(jnp.asarray(np.array(x)) for x in zip(*states, strict=True)))
        got = jax.tree.map(np.asarray, got)
        row["jaxrbd_seconds"] = round(time.perf_counter() - t1, 2)
        cond = max(np.linalg.cond(r["H"]) for r in ref)
        row["cond_H"] = float(cond)
        errors, failed = {}, []
        for k in QUANTITIES:
            errors[k] = corpus.rel(got[k], np.array([r[k] for r in ref]))
            tol = max(TOL, cond * 1e-15) if k in SOLVED else TOL
            if not (np.isfinite(errors[k]) and errors[k] <= tol):
                failed.append(k)
        if isinstance(model, jaxrbd.CoupledModel):
            pmm = build(True)
            mim = [_pin_mimic_side(pin, pmm, model, s[0], s[1], s[2]) for s in states]
            errors["H_pin_mimic"] = corpus.rel(got["H"], np.array([m[0] for m in mim]))
            errors["rnea_pin_mimic"] = corpus.rel(got["rnea"], np.array([m[1] for m in mim]))
            failed += [k for k in ("H_pin_mimic", "rnea_pin_mimic") if not errors[k] <= TOL]
        row.update(errors=errors, failed=failed, status="ok" if not failed else "mismatch")
    except Exception as e:
        row.update(status="error", error=corpus._short(e))
        traceback.print_exc()
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def _print(row):
    head = f"{row['robot']:8s} {'floating' if row['floating_base'] else 'fixed':8s}"
    if row["status"] == "error":
        print(f"{head} ERROR {row['error']}", flush=True)
        return
    errs = " ".join(f"{k}={v:.1e}" for k, v in row["errors"].items())
    print(f"{head} nv={row['nv']:<3d} cond(H)={row['cond_H']:.1e} {row['status']:8s} {errs}"
          + (f"  FAILED {row['failed']}" if row["failed"] else ""), flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robots", default=os.environ.get("RBDREFERENCE_ROBOTS", str(DEFAULT_DIR)),
                   help="folder with the suite's URDF files (default ../shared/robots/rbdreference)")
    p.add_argument("--filter", help="comma-separated robot names")
    p.add_argument("--states", type=int, default=5, help="random states per case (default 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(common.RESULTS / "rbdreference.json"))
    args = p.parse_args(argv)
    folder = Path(args.robots)
    if common.pinocchio() is None or not folder.is_dir():
        print(f"skipped: Pinocchio missing or no robot folder {folder}")
        return
    names = [r for r in ROBOTS if not args.filter or r in args.filter.split(",")]
    rows = []
    for name in names:
        for floating in (False, True):
            rows.append(run_case(name, folder / f"{name}.urdf", floating, args.states,
                                 args.seed))
            _print(rows[-1])
    checks = [(r["robot"], r["floating_base"], k) for r in rows if "errors" in r
              for k in r["errors"]]
    failed = [(r["robot"], r["floating_base"], k) for r in rows for k in r.get("failed", [])]
    errors = [r for r in rows if r["status"] == "error"]
    summary = dict(cases=len(rows), checks=len(checks), failed_checks=len(failed),
                   case_errors=len(errors), tolerance=TOL, states=args.states)
    print(f"SUMMARY: {len(rows)} cases, {len(checks) - len(failed)} of {len(checks)} checks "
          f"within tolerance ({TOL:g}; cond(H)·1e-15 for solved quantities), "
          f"{len(errors)} cases with errors; failed: {failed}")
    meta = common.machine_metadata()
    meta["pinocchio"] = common.pinocchio().__version__
    meta["robots"] = str(folder)
    common.write_json(args.out, rows, meta, summary=summary)


if __name__ == "__main__":
    main()
