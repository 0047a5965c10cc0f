"""The time delay between a recording's efforts and its motion, chosen by validation.

Torque sensors, current loops and logging paths add latency: the effort logged at ``t``
belongs to the motion a few milliseconds earlier. The dynamics regressor pairs each
torque with the state of the same sample, so a delay shows up as a residual that looks
like a phase lead of the model. `estimate_delay` scores candidate delays by how well a
least-squares fit on one part of the (training) recording predicts the other part, and
`Recording.shift` applies the chosen one.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from ._base import BaseParameters, base_parameters
from ._drive import FrictionModel, stacked_regressor
from ._recording import Recording

__all__ = ["DelayEstimate", "estimate_delay"]


class DelayEstimate(NamedTuple):
    """Candidate delays of the efforts behind the motion and their validation errors.

    Attributes:
        delay: the candidate with the smallest validation error [s]; undo it with
            ``recording.shift(delay)``.
        delays: `(K,)` the candidates [s].
        validation_error: `(K,)` relative torque error ``|tau - Y p| / |tau|`` on the
            validation part of an ordinary least-squares fit on the fitting part.
        training_error: `(K,)` the same on the fitting part.
    """

    delay: float
    delays: np.ndarray
    validation_error: np.ndarray
    training_error: np.ndarray


def estimate_delay(model, friction: FrictionModel, recording: Recording, delays=None, *,
                   base: BaseParameters | None = None, split: float = 0.7,
                   step: int = 1) -> DelayEstimate:
    """The delay of ``recording.tau`` behind its motion, chosen by validation in time.

    For each candidate ``d``, the efforts are moved as by ``recording.shift(d)`` and an
    ordinary least-squares fit of the base parameters (`least_squares`'s estimator) on the
    samples before ``split`` of the duration predicts those after it; the candidate
    with the smallest relative error on that later part wins. Every candidate is scored
    on the same samples (the first and last ``max |d|`` seconds are left out), and the
    regressor is computed once (only the efforts move). Pass only the part of the data
    meant for training: the test part must not choose the delay.

    Args:
        model: a `jaxrbd.Model` with 1-DoF joints.
        friction: the `FrictionModel` of the fit.
        recording: a prepared recording (``q, qd, qdd, tau``, in the model's joint order:
            `Recording.for_model`), typically at its full rate so that the efforts are
            interpolated between close samples.
        delays: `(K,)` candidate delays [s] (default: -10 to 10 samples of the median
            rate).
        base: the `BaseParameters` (default: ``base_parameters(model, friction)``).
        split: the fraction of the duration fitted; the rest validates.
        step: use every ``step``-th sample in the fits (the efforts are still moved on
            the full-rate signal); e.g. 10 for a 1 kHz log filtered at 20 Hz.

    Returns:
        A `DelayEstimate`. A warning says when the best delay is the first or last
        candidate (widen ``delays``).

    Raises:
        ValueError: missing signals, a recording not in the model's joint order, an empty
            fitting or validation part, or a motion that does not excite every base
            parameter.

    Example:
        A 2-link chain whose torque is logged 4 ms late:

        >>> arm = jaxrbd.models.chain(2)
        >>> fm = FrictionModel(armature=False, viscous=True, coulomb=False)
        >>> t = np.arange(0.0, 4.0, 0.001)
        >>> q = np.stack([np.sin(2.1 * t) + 0.3 * np.sin(5.3 * t), np.cos(3.7 * t)], axis=1)
        >>> qd = np.gradient(q, t, axis=0); qdd = np.gradient(qd, t, axis=0)
        >>> Y = stacked_regressor(arm, fm, q, qd, qdd)
        >>> p = np.asarray(jaxrbd.identification.standard_parameters(arm, fm))
        >>> tau = (Y @ p).reshape(-1, 2)
        >>> late = np.stack([np.interp(t - 0.004, t, tau[:, j]) for j in range(2)], axis=1)
        >>> rec = Recording.from_arrays(t, q, qd, qdd, tau=late)
        >>> est = estimate_delay(arm, fm, rec, np.arange(0, 9) * 0.001, step=10)
        >>> round(est.delay, 4)
        0.004
    """
    rec = recording
    for key in ("qd", "qdd", "tau"):
        if getattr(rec, key) is None:
            raise ValueError(f"{rec.name} has no {key}: prepare the recording first "
                             "(Recording.prepared or differentiate)")
    if rec.n_joints != model.nv:
        raise ValueError(f"{rec.name} has {rec.n_joints} joints; the model has nv = "
                         f"{model.nv}")
    if rec.joint_names is not None and tuple(rec.joint_names) != tuple(model.joint_names):
        raise ValueError(f"{rec.name}'s joints are not in the model's order; call "
                         "for_model(model) first")
    if delays is None:
        delays = np.arange(-10, 11) / rec.rate
    delays = np.atleast_1d(np.asarray(delays, np.float64))
    if delays.ndim != 1 or not np.all(np.isfinite(delays)):
        raise ValueError(f"delays must be a 1-D array of finite numbers [s], got {delays}")
    if not 0.0 < split < 1.0:
        raise ValueError(f"split must be in (0, 1), got {split}")
    step = int(step)
    if step < 1:
        raise ValueError(f"step must be a positive int, got {step}")
    margin = float(np.max(np.abs(delays)))
    t = rec.t
    rows = np.flatnonzero((t >= t[0] + margin) & (t <= t[-1] - margin))[::step]
    if len(rows) < 4:
        raise ValueError(f"{rec.name}: delays up to {margin:g} s leave fewer than 4 samples")
    tr = t[rows]
    fit_rows = tr < tr[0] + split * (tr[-1] - tr[0])
    na = int(fit_rows.sum())
    if na == 0 or na == len(rows):
        raise ValueError(f"{rec.name}: split = {split} leaves an empty fitting or "
                         "validation part")
    base = base_parameters(model, friction) if base is None else base
    nv = model.nv
    Yb = np.asarray(base.columns(stacked_regressor(model, friction, rec.q[rows],
                                                   rec.qd[rows], rec.qdd[rows])))
    # one right-hand side per candidate: every delay shares one factorisation
    tau = np.stack([np.stack([np.interp(tr + d, t, rec.tau[:, j]) for j in range(nv)],
                             axis=1).reshape(-1) for d in delays], axis=1)
    n_fit = na * nv
    A, B = Yb[:n_fit], tau[:n_fit]
    sol, _, rank, _ = np.linalg.lstsq(A, B, rcond=None)
    if rank < A.shape[1]:
        raise ValueError(f"{rec.name}: the fitting part does not excite every base "
                         f"parameter (rank {rank} of {A.shape[1]}); use a longer split or "
                         "an exciting motion")
    pred = Yb @ sol

    def relative(sl):
        return np.linalg.norm(pred[sl] - tau[sl], axis=0) / np.linalg.norm(tau[sl], axis=0)

    val = relative(slice(n_fit, None))
    best = int(np.argmin(val))
    if len(delays) > 1 and best in (0, len(delays) - 1):
        warnings.warn(f"estimate_delay: the best delay {delays[best]:g} s is at the end of "
                      f"the candidates [{delays.min():g}, {delays.max():g}] s; widen them",
                      stacklevel=2)
    return DelayEstimate(float(delays[best]), delays, val, relative(slice(0, n_fit)))
