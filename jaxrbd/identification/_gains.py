"""Drive gains (motor current -> joint torque) identified with the dynamic parameters.

A drive delivers ``tau_j = k_j i_j``. With the gains unknown, the model
``Y p = diag(i) k`` is homogeneous: ``(c p, c k)`` fits as well as ``(p, k)`` for every
``c``, so the currents alone fix the parameters only up to one common scale. A torque
known in newtons metres breaks the symmetry: a payload of known mass and inertia carried
in part of the recording (Gautier and Briot 2014), a link whose mass was weighed, or a
calibrated torque on one joint. Its torque moves to the right-hand side,
``[Y_b, -diag(i)] [p_b; k] = -tau_known``, and the gains become a column scaling of the
currents, identified with the base parameters by least squares.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._base import BaseParameters
from ._drive import payload_parameters

__all__ = ["DriveGainFit", "fit_drive_gains", "payload_torque"]


def payload_torque(model, Y, body, payload):
    """The joint torques `(T nv,)` a payload adds to a recording whose stacked regressor
    ``Y`` was built with ``model`` (without the payload): ``Y`` restricted to
    ``body``'s ten inertial columns times the payload's parameters (inertial parameters
    add, and the regressor is linear in them).

    Args:
        model: the `jaxrbd.Model` ``Y`` was built with.
        Y: `(T nv, P)` stacked regressor (`stacked_regressor`).
        body: the body that carries the payload (name or id).
        payload: a `jaxrbd.Body` in ``body``'s frame.

    Example:
        >>> arm = jaxrbd.models.chain(2)
        >>> ident = jaxrbd.identification
        >>> Y = ident.stacked_regressor(arm, ident.FrictionModel(), np.zeros((1, 2)),
        ...                             np.zeros((1, 2)), np.zeros((1, 2)))
        >>> payload_torque(arm, Y, "link1", jaxrbd.Body(1.0, (0.0, 0.0, 0.0), np.eye(3))).shape
        (2,)
    """
    b = model.body_id(body)
    Y = np.asarray(Y, np.float64)
    return Y[:, 10 * b: 10 * b + 10] @ payload_parameters(payload)


class DriveGainFit(NamedTuple):
    """Drive gains and base parameters identified together.

    Attributes:
        gains: `(nv,)` torque per unit current [N m / A] (or per the current's unit).
        gains_std: `(nv,)` their standard deviations (from the residual, as
            `LeastSquaresResult`).
        base: `(nb,)` the base parameters.
        base_std: `(nb,)` their standard deviations.
        params: `(P,)` standard parameters with these base parameters, closest to the
            prior.
        joint_sigma: `(nv,)` RMS torque residual per joint [N m].
        condition: condition number of ``[Y_b, -diag(i)]``.
    """

    gains: np.ndarray
    gains_std: np.ndarray
    base: np.ndarray
    base_std: np.ndarray
    params: np.ndarray
    joint_sigma: np.ndarray
    condition: float


def fit_drive_gains(Y, current, base: BaseParameters, *, nv: int, known_torque,
                    prior=None) -> DriveGainFit:
    """Least squares for the drive gains and the base parameters from motor currents.

    Solves ``min |Y_b p_b - diag(i) k + tau_known|^2`` over ``p_b`` and ``k``: the
    measured torque is ``k_j i_j``, of which ``tau_known`` is known (a payload's,
    `payload_torque`; zero on rows without it). Without a known torque the problem is
    homogeneous and has no scale (see the module docstring), which is refused.

    Args:
        Y: `(T nv, P)` stacked regressor (`stacked_regressor`) of the model without the
            known part, rows sample-major.
        current: `(T, nv)` or `(T nv,)` motor currents.
        base: the `BaseParameters`.
        nv: joints per sample.
        known_torque: `(T nv,)` or `(T, nv)` the torque of the known part [N m].
        prior: `(P,)` standard parameters the returned ``params`` stay closest to.

    Returns:
        A `DriveGainFit`.

    Raises:
        ValueError: mismatched shapes, non-finite values, a zero known torque, or data
            that do not determine the gains (a joint that never carries current).
    """
    Y = np.asarray(Y, np.float64)
    i = np.asarray(current, np.float64).reshape(-1)
    known = np.asarray(known_torque, np.float64).reshape(-1)
    n = Y.shape[0] if Y.ndim == 2 else -1
    if Y.ndim != 2 or i.shape != (n,) or known.shape != (n,) or n % nv:
        raise ValueError(f"Y has shape {Y.shape}, current {np.shape(current)} and "
                         f"known_torque {np.shape(known_torque)}: expected (T nv, P), "
                         f"(T, nv) and (T, nv) with nv = {nv}")
    if not (np.all(np.isfinite(Y)) and np.all(np.isfinite(i)) and np.all(np.isfinite(known))):
        raise ValueError("Y, current or known_torque has NaN or infinite entries")
    if not np.any(known):
        raise ValueError("known_torque is zero: with unknown gains, currents determine the "
                         "parameters only up to a common scale; add rows with a known "
                         "torque (a payload of known inertia: payload_torque)")
    D = np.zeros((n, nv))
    D[np.arange(n), np.tile(np.arange(nv), n // nv)] = i
    A = np.concatenate([base.columns(Y), -D], axis=1)
    # unit columns for the conditioning of the solve and the reported condition number
    scale = np.linalg.norm(A, axis=0)
    if np.any(scale <= 1e-12 * scale.max()):
        raise ValueError("a base column or a joint's current is zero on all rows: the data "
                         "do not determine its parameter")
    U, s, Vt = np.linalg.svd(A / scale, full_matrices=False)
    if s[-1] <= 1e-12 * s[0]:
        raise ValueError("[Y_b, -diag(current)] is rank deficient: the known torque does "
                         "not fix the scale, or the motion does not excite every base "
                         "parameter")
    x = (Vt.T @ ((U.T @ -known) / s)) / scale
    r = A @ x + known
    dof = max(n - len(x), 1)
    cov = (Vt.T / s ** 2) @ Vt * (np.sum(r ** 2) / dof) / np.outer(scale, scale)
    std = np.sqrt(np.diag(cov))
    nb = base.n_base
    params = np.asarray(base.from_base(x[:nb], prior))
    return DriveGainFit(x[nb:], std[nb:], x[:nb], std[:nb], params,
                        np.sqrt(np.mean(r.reshape(-1, nv) ** 2, axis=0)), float(s[0] / s[-1]))
