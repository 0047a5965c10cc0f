"""Validation figures: per-joint RMS, relative error, NRMS, predicted-vs-measured plots."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["TorqueReport", "plot_torques", "torque_report"]


class TorqueReport(NamedTuple):
    """Errors of predicted against measured joint efforts.

    Attributes:
        rms: `(nv,)` RMS error per joint [N m].
        relative: ``|tau - tau_hat| / |tau|`` over all samples and joints.
        relative_per_joint: `(nv,)` the same per joint.
        nrms: the mean over joints of ``rms_j / (2 effort_limit_j)`` (FloBaRoID's
            NRMSE, a fraction; multiply by 100 for percent); NaN without effort limits.
        max_abs: `(nv,)` the largest absolute error per joint [N m].
    """

    rms: np.ndarray
    relative: float
    relative_per_joint: np.ndarray
    nrms: float
    max_abs: np.ndarray

    def table(self, joint_names=None) -> str:
        """A plain-text table, one row per joint."""
        n = len(self.rms)
        names = joint_names or [f"joint {j}" for j in range(n)]
        w = max(len(s) for s in names)
        lines = [f"{'joint':<{w}}  RMS [N m]  max [N m]  relative"]
        for j in range(n):
            lines.append(f"{names[j]:<{w}}  {self.rms[j]:9.4f}  {self.max_abs[j]:9.4f}  "
                         f"{100 * self.relative_per_joint[j]:7.2f} %")
        lines.append(f"relative error {100 * self.relative:.2f} %, NRMS {100 * self.nrms:.3f} %")
        return "\n".join(lines)


def torque_report(tau, tau_hat, effort_limit=None) -> TorqueReport:
    """Per-joint RMS, relative error and NRMS of a torque prediction.

    Args:
        tau: `(T, nv)` measured efforts [N m].
        tau_hat: `(T, nv)` predicted efforts.
        effort_limit: `(nv,)` effort limits for the NRMS (e.g. ``model.effort_limit``).

    Returns:
        A `TorqueReport`.

    Raises:
        ValueError: shapes differ or are not `(T, nv)`.

    Example:
        >>> r = jaxrbd.identification.torque_report(np.ones((4, 2)), np.full((4, 2), 1.1),
        ...                                         effort_limit=[10.0, 10.0])
        >>> r.rms.round(3).tolist(), round(r.relative, 3), round(r.nrms, 4)
        ([0.1, 0.1], 0.1, 0.005)
    """
    tau = np.asarray(tau, np.float64)
    tau_hat = np.asarray(tau_hat, np.float64)
    if tau.ndim != 2 or tau.shape != tau_hat.shape:
        raise ValueError(f"tau has shape {tau.shape} and tau_hat {tau_hat.shape}: "
                         "expected equal (T, nv)")
    e = tau_hat - tau
    rms = np.sqrt(np.mean(e**2, axis=0))
    rel = float(np.linalg.norm(e) / np.linalg.norm(tau))
    rel_j = np.linalg.norm(e, axis=0) / np.maximum(np.linalg.norm(tau, axis=0), 1e-300)
    nrms = float("nan")
    if effort_limit is not None:
        lim = np.broadcast_to(np.asarray(effort_limit, np.float64), rms.shape)
        if not np.all(np.isfinite(lim) & (lim > 0)):
            raise ValueError(f"effort_limit must be positive and finite, got {lim}")
        nrms = float(np.mean(rms / (2 * lim)))
    return TorqueReport(rms, rel, rel_j, nrms, np.abs(e).max(axis=0))


def plot_torques(t, tau, tau_hat, joint_names=None, *, labels=("measured", "predicted"),
                 title=None):
    """Predicted against measured efforts, one panel per joint (matplotlib, imported
    lazily: install the ``examples`` extra).

    Args:
        t: `(T,)` time [s].
        tau: `(T, nv)` measured efforts [N m].
        tau_hat: `(T, nv)` predicted efforts [N m].
        joint_names: panel titles.
        labels: the two curves' legend labels.
        title: the figure's title.

    Returns:
        The matplotlib ``Figure``.
    """
    import matplotlib.pyplot as plt  # optional dependency (extra: examples)

    tau, tau_hat = np.asarray(tau), np.asarray(tau_hat)
    nv = tau.shape[1]
    fig, axes = plt.subplots(nv, 1, sharex=True, figsize=(8, 1.6 * nv), squeeze=False)
    for j, ax in enumerate(axes[:, 0]):
        ax.plot(t, tau[:, j], lw=0.8, label=labels[0])
        ax.plot(t, tau_hat[:, j], lw=0.8, label=labels[1])
        ax.set_ylabel(joint_names[j] if joint_names else f"joint {j}", fontsize=8)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("t [s]")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
