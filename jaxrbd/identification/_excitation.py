"""Excitation design: periodic Fourier-series joint trajectories (Swevers et al. 1997)
optimised by gradient for the conditioning of the base regressor."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._base import BaseParameters
from ._drive import FrictionModel, identification_regressor

__all__ = ["ExcitationResult", "fourier_trajectory", "optimize_excitation"]


def fourier_trajectory(a, b, q0, wf, t):
    """Joint trajectories as finite Fourier series (Swevers, Ganseman, Tukel, De Schutter
    and Van Brussel 1997, eq. 14):

        ``q_j(t) = q0_j + sum_l a_jl / (wf l) sin(wf l t) - b_jl / (wf l) cos(wf l t)``

    and their exact time derivatives. Periodic with period ``2 pi / wf``, so that
    measurements can be averaged over periods and the spectrum is known.

    Args:
        a: `(n, L)` coefficients of the velocity's cosine terms [rad/s].
        b: `(n, L)` coefficients of the velocity's sine terms [rad/s].
        q0: `(n,)` offsets [rad].
        wf: the fundamental angular frequency [rad/s].
        t: `(T,)` times [s].

    Returns:
        ``(q, qd, qdd)``, each `(T, n)`.

    Example:
        >>> q, qd, qdd = jaxrbd.identification.fourier_trajectory(
        ...     jnp.ones((1, 1)), jnp.zeros((1, 1)), jnp.zeros(1), 1.0, jnp.array([0.0, jnp.pi / 2]))
        >>> np.round(np.asarray(q[:, 0]), 6).tolist(), np.round(np.asarray(qd[:, 0]), 6).tolist()
        ([0.0, 1.0], [1.0, 0.0])
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    n, L = a.shape
    wl = (wf * jnp.arange(1, L + 1, dtype=a.dtype))[None, None, :]  # (1, 1, L)
    arg = jnp.asarray(t, a.dtype)[:, None, None] * wl  # (T, 1, L)
    s, c = jnp.sin(arg), jnp.cos(arg)
    a, b = a[None], b[None]  # (1, n, L)
    q = jnp.asarray(q0, a.dtype)[None, :] + jnp.sum(a / wl * s - b / wl * c, axis=-1)
    qd = jnp.sum(a * c + b * s, axis=-1)
    qdd = jnp.sum(-a * wl * s + b * wl * c, axis=-1)
    return q, qd, qdd


class ExcitationResult(NamedTuple):
    """An optimised excitation.

    Attributes:
        a, b: `(nv, L)` Fourier coefficients; q0: `(nv,)` offsets; wf: the fundamental
            angular frequency [rad/s].
        condition: the condition number of the base regressor (columns scaled to unit
            norm) on the optimised trajectory; ``initial_condition`` on the start.
        history: `(steps,)` the cost per step.
        feasible: whether the optimised trajectory keeps every limit (on the cost's
            samples); the penalty discourages violations but does not forbid them.
    """

    a: jax.Array
    b: jax.Array
    q0: jax.Array
    wf: float
    condition: float
    initial_condition: float
    history: jax.Array
    feasible: bool


def optimize_excitation(model, base: BaseParameters, *, harmonics: int = 5, wf: float = 0.2 * np.pi,
                        n_samples: int = 200, steps: int = 200, learning_rate: float = 0.02,
                        q_margin: float = 0.1, qd_max=None, qdd_max=None, seed: int = 0,
                        penalty: float = 100.0) -> ExcitationResult:
    """Fourier-series excitation (`fourier_trajectory`) optimised by gradient descent
    (Adam) on the condition number of the scaled base regressor (Swevers et al. 1997;
    Gautier and Khalil 1992), under joint position, velocity and acceleration limits.

    The cost is ``log cond(Yb D) + penalty sum relu(violation / limit)^2`` over
    ``n_samples`` points of one period, where ``Yb`` is the base regressor stacked over
    the samples, ``D`` scales its columns to unit norm (so the cost does not depend on
    units), and the violations are those of ``q`` outside the limits shrunk by
    ``q_margin`` (a fraction of the range), ``|qd| > qd_max`` and ``|qdd| > qdd_max``.
    Gradients flow exactly through the regressor (`jax.grad`); the loop is one
    `jax.lax.scan`.

    Args:
        model: a `jaxrbd.Model` with finite joint limits.
        base: its `BaseParameters` (the friction model comes from there).
        harmonics: ``L``, harmonics per joint.
        wf: fundamental angular frequency [rad/s] (the period is ``2 pi / wf``).
        n_samples: samples of one period in the cost.
        steps: Adam steps.
        learning_rate: Adam's step size.
        q_margin: fraction of each joint's range kept free at both ends.
        qd_max: `(nv,)` or scalar velocity limits [rad/s] (default
            ``model.velocity_limit`` where finite, else 2).
        qdd_max: `(nv,)` or scalar acceleration limits [rad/s^2] (default 10).
        seed: the random start's seed.
        penalty: weight of the limit violations.

    Returns:
        An `ExcitationResult`.
    """
    nv = model.nv
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("optimize_excitation needs finite joint limits (model.q_lower/q_upper)")
    span = hi - lo
    lo_m, hi_m = lo + q_margin * span, hi - q_margin * span
    vl = np.asarray(model.velocity_limit)
    qd_max = np.where(np.isfinite(vl) & (vl > 0), vl, 2.0) if qd_max is None else qd_max
    qd_max = np.broadcast_to(np.asarray(qd_max, np.float64), (nv,))
    qdd_max = np.broadcast_to(np.asarray(10.0 if qdd_max is None else qdd_max, np.float64), (nv,))
    friction: FrictionModel = base.friction
    ind = jnp.asarray(base.independent)
    t = jnp.linspace(0.0, 2 * np.pi / wf, n_samples, endpoint=False)
    dtype = model.dtype
    rng = np.random.default_rng(seed)
    # a start inside the limits: amplitudes of q about 1/4 of the usable half-range
    amp = 0.25 * (hi_m - lo_m) / 2 * wf / harmonics
    a0 = jnp.asarray(rng.normal(size=(nv, harmonics)) * amp[:, None], dtype)
    b0 = jnp.asarray(rng.normal(size=(nv, harmonics)) * amp[:, None], dtype)
    q00 = jnp.asarray((lo_m + hi_m) / 2, dtype)

    def log_cond(x):
        a, b, q0 = x
        q, qd, qdd = fourier_trajectory(a, b, q0, wf, t)
        Y = jax.vmap(lambda *s: identification_regressor(model, friction, *s))(q, qd, qdd)
        Yb = Y.reshape(-1, Y.shape[-1])[:, ind]
        Yb = Yb / jnp.linalg.norm(Yb, axis=0, keepdims=True)
        sv = jnp.linalg.svd(Yb, compute_uv=False)
        return jnp.log(sv[0] / sv[-1]), (q, qd, qdd)

    def cost(x):
        lc, (q, qd, qdd) = log_cond(x)
        viol = (jnp.sum(jax.nn.relu((q - hi_m[None]) / span[None]) ** 2
                        + jax.nn.relu((lo_m[None] - q) / span[None]) ** 2)
                + jnp.sum(jax.nn.relu(jnp.abs(qd) / qd_max[None] - 1.0) ** 2)
                + jnp.sum(jax.nn.relu(jnp.abs(qdd) / qdd_max[None] - 1.0) ** 2))
        return lc + penalty * viol / n_samples

    opt = optax.adam(learning_rate)

    @jax.jit
    def run(x):
        def step(carry, _):
            x, st = carry
            val, g = jax.value_and_grad(cost)(x)
            upd, st = opt.update(g, st)
            return (optax.apply_updates(x, upd), st), val

        (x, _), hist = jax.lax.scan(step, (x, opt.init(x)), None, length=steps)
        return x, hist

    x0 = (a0, b0, q00)
    x, hist = run(x0)
    c0 = float(jnp.exp(jax.jit(lambda x: log_cond(x)[0])(x0)))
    c1 = float(jnp.exp(jax.jit(lambda x: log_cond(x)[0])(x)))
    q, qd, qdd = (np.asarray(v) for v in fourier_trajectory(*x, wf, t))
    feasible = bool(np.all(q <= hi) and np.all(q >= lo) and np.all(np.abs(qd) <= qd_max)
                    and np.all(np.abs(qdd) <= qdd_max))
    return ExcitationResult(x[0], x[1], x[2], float(wf), c1, c0, hist, feasible)
