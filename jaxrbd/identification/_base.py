"""Identifiable (base) parameters by QR with column pivoting (Gautier 1990)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ._drive import FrictionModel, stacked_regressor

__all__ = ["BaseParameters", "base_parameters", "pivoted_qr"]


def pivoted_qr(A, rtol: float = 1e-8):
    """``R`` and the column order of a Householder QR with column pivoting of ``A``
    (host-side numpy; Businger and Golub 1965): at every step the remaining column of
    largest norm is moved to the front.

    A tall ``A`` is first reduced to its triangular factor (``A^T A = R0^T R0``), which
    keeps the column norms and linear dependencies and costs one unpivoted QR.

    Returns:
        ``(R, perm, rank)``: ``A[:, perm] = Q R``; ``rank`` counts the diagonal entries
        with ``|R_kk| > rtol |R_00|``.
    """
    A = np.asarray(A, np.float64)
    if A.shape[0] > A.shape[1]:
        A = np.linalg.qr(A, mode="r")
    R = A.copy()
    m, n = R.shape
    perm = np.arange(n)
    norms = np.sum(R * R, axis=0)
    for k in range(min(m, n)):
        j = k + int(np.argmax(norms[k:]))
        if j != k:
            R[:, [k, j]] = R[:, [j, k]]
            perm[[k, j]] = perm[[j, k]]
            norms[[k, j]] = norms[[j, k]]
        x = R[k:, k]
        alpha = np.linalg.norm(x)
        if alpha == 0.0:
            break
        v = x.copy()
        v[0] += np.copysign(alpha, x[0])
        v /= np.linalg.norm(v)
        R[k:, k:] -= 2.0 * np.outer(v, v @ R[k:, k:])
        R[k + 1:, k] = 0.0
        # recompute rather than downdate: exact for the small matrices used here
        norms[k + 1:] = np.sum(R[k + 1:, k + 1:] ** 2, axis=0)
    d = np.abs(np.diag(R))
    rank = int(np.sum(d > rtol * d[0])) if d.size and d[0] > 0 else 0
    return R, perm, rank


@dataclasses.dataclass(frozen=True, eq=False)
class BaseParameters:
    """The identifiable combinations of the standard parameters (Gautier 1990).

    The ``P`` standard parameters ``p`` (inertial, then the `FrictionModel` terms) split
    into ``nb`` independent columns ``ind`` of the regressor and the dependent rest
    ``dep``: ``Y[:, dep] = Y[:, ind] beta``, so ``Y p = Y[:, ind] (p[ind] + beta p[dep])``
    and the **base parameters** ``p_b = p[ind] + beta p[dep] = E p`` are what the data
    determine.

    Attributes:
        independent: `(nb,)` column indices of the base parameters.
        dependent: the other column indices, including the structurally zero columns.
        beta: `(nb, P - nb)` the linear relations.
        E: `(nb, P)` the map from standard to base parameters.
        names: the base parameters' names (the leading standard parameter's name, with
            ``+`` when others are grouped into it).
        condition: the condition number of the scaled random-state regressor's base
            columns (a property of the model, not of a trajectory).
    """

    independent: np.ndarray
    dependent: np.ndarray
    beta: np.ndarray
    E: np.ndarray
    names: tuple[str, ...]
    condition: float
    friction: FrictionModel

    @property
    def n_base(self) -> int:
        return len(self.independent)

    def to_base(self, p):
        """Base parameters ``E p`` of standard parameters ``p`` `(P,)` (or `(..., P)`)."""
        return jnp.asarray(p) @ jnp.asarray(self.E).T

    def from_base(self, p_base, prior=None):
        """Standard parameters with the given base parameters: the one closest to
        ``prior`` in the Euclidean norm (default prior: zeros, i.e. the minimum-norm
        solution), ``p = prior + E^+ (p_base - E prior)``. Not in general physically
        consistent (see `consistent_fit`)."""
        if isinstance(p_base, jax.core.Tracer) or isinstance(prior, jax.core.Tracer):
            E = jnp.asarray(self.E)
            prior = jnp.zeros(E.shape[1]) if prior is None else jnp.asarray(prior)
            return prior + jnp.linalg.pinv(E) @ (jnp.asarray(p_base) - E @ prior)
        # concrete values: on the host (eagerly, each jnp operation compiles on first use)
        E = np.asarray(self.E, np.float64)
        prior = np.zeros(E.shape[1]) if prior is None else np.asarray(prior, np.float64)
        return prior + np.linalg.pinv(E) @ (np.asarray(p_base, np.float64) - E @ prior)

    def columns(self, Y):
        """The base-parameter columns ``Y[..., independent]``."""
        return Y[..., self.independent]


def _random_states(model, n, seed, qd_scale, qdd_scale):
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    lo = np.where(np.isfinite(lo), lo, -np.pi)
    hi = np.where(np.isfinite(hi), hi, np.pi)
    q = rng.uniform(lo, hi, (n, model.nq))
    qd = rng.uniform(-qd_scale, qd_scale, (n, model.nv))
    qdd = rng.uniform(-qdd_scale, qdd_scale, (n, model.nv))
    return q, qd, qdd


def base_parameters(model, friction: FrictionModel | None = None, *, n_samples: int = 500,
                    seed: int = 0, rtol: float | None = None, qd_scale: float = 2.0,
                    qdd_scale: float = 10.0) -> BaseParameters:
    """The base parameters of ``model`` with the linear joint terms of ``friction``, by
    Gautier's numerical method (1990): QR with column pivoting of the regressor stacked
    over random states.

    The states are uniform within the joint limits (``[-pi, pi]`` where a limit is
    infinite) with velocities and accelerations uniform in ``+-qd_scale`` and
    ``+-qdd_scale``. Columns are scaled to unit norm before pivoting so that the choice
    of independent columns does not depend on units; a column whose scaled ``|R_kk|`` is
    below ``rtol`` is dependent. ``beta`` then solves ``R11 beta = R12`` exactly.

    Args:
        model: a `jaxrbd.Model` with 1-DoF joints.
        friction: the linear joint terms (default `FrictionModel()`).
        n_samples: number of random states.
        seed: their seed.
        rtol: the rank threshold relative to the largest pivot (default 1e-8 for a
            float64 model, 1e-4 for float32, whose regressor carries rounding ~1e-7).
        qd_scale: velocity range [rad/s].
        qdd_scale: acceleration range [rad/s^2].

    Returns:
        A `BaseParameters`.

    Example:
        >>> arm = jaxrbd.models.chain(3)
        >>> bp = base_parameters(arm, FrictionModel(), n_samples=50)
        >>> bp.n_base, bp.E.shape            # 15 inertial combinations, 12 joint terms
        (27, (27, 52))
    """
    friction = FrictionModel() if friction is None else friction
    if rtol is None:
        rtol = 1e-8 if model.dtype == np.float64 else 1e-4
    q, qd, qdd = _random_states(model, n_samples, seed, qd_scale, qdd_scale)
    Y = np.asarray(stacked_regressor(model, friction, q, qd, qdd))
    scale = np.linalg.norm(Y, axis=0)
    nonzero = scale > 1e-12 * max(scale.max(), 1e-300)
    Ys = np.where(nonzero, Y / np.where(nonzero, scale, 1.0), 0.0)
    _, perm, rank = pivoted_qr(Ys, rtol)
    ind = np.sort(perm[:rank])
    # beta on the unscaled columns, in the sorted order of ind
    dep = np.setdiff1d(np.arange(Y.shape[1]), ind)
    beta = np.linalg.lstsq(Y[:, ind], Y[:, dep], rcond=None)[0]
    beta[np.abs(beta) < 1e-10 * max(1.0, np.abs(beta).max())] = 0.0
    P = Y.shape[1]
    E = np.zeros((rank, P))
    E[:, ind] = np.eye(rank)
    E[:, dep] = beta
    names_all = friction.column_names(model)
    names = []
    for k, i in enumerate(ind):
        grouped = [names_all[dep[c]] for c in np.flatnonzero(beta[k])]
        names.append(names_all[i] + (" + " + " + ".join(grouped) if grouped else ""))
    Yb = Ys[:, ind]
    s = np.linalg.svd(Yb, compute_uv=False)
    return BaseParameters(ind, dep, beta, E, tuple(names), float(s[0] / s[-1]), friction)


def condition_number(Yb):
    """The 2-norm condition number of a regressor's base columns, ``s_max / s_min``
    (differentiable, e.g. for excitation design)."""
    s = jnp.linalg.svd(Yb, compute_uv=False)
    return s[0] / s[-1]

