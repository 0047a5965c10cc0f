"""Inverse kinematics: Levenberg-Marquardt damped least squares over body targets.

Errors, world frame: ``e_p = p* - p(q)`` for a body point, ``e_R = log(R* R^T)`` for an
orientation. Moving ``q`` to ``integrate(q, v)`` changes them by ``-J v`` to first order,
with ``J_p`` the world Jacobian of the point and ``J_R = Jr^-1(e_R) J_w`` (``J_w`` the
angular rows, ``Jr`` the right Jacobian of SO(3): ``log(E exp(-d)) ~ e - Jr^-1(e) d``),
so the Gauss-Newton model is exact to first order even for large orientation errors.
One iteration is one kinematics pass for all targets plus a small Cholesky solve.
"""

import functools
from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from . import spatial
from ._configuration import euclidean_maps, integrate_batched
from ._core import linalg as _linalg
from ._core.checks import as_float, check_vector
from ._core.rotation import log_quat, so3_left_jacobian_inv
from ._core.topology import topology
from ._kinematics import body_frames, node_jacobian, node_poses, support

__all__ = ["IKResult", "IKTarget", "inverse_kinematics"]


# ---------------------------------------------------------------- targets


def _body_key(body):
    if isinstance(body, np.integer):
        body = int(body)
    if isinstance(body, bool) or not isinstance(body, (str, int)):
        raise TypeError(
            f"IKTarget.body must be a body name (str) or an int id, got {type(body).__name__} "
            "(the body is static: pick it outside the traced computation)"
        )
    return body


def _float_array(x):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def _optional_array(x):
    return None if x is None else _float_array(x)


def _point(x):
    return jnp.zeros(3) if x is None else _float_array(x)


def _concrete(x):
    """``x`` as a numpy array, or None when it is traced."""
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


class IKTarget(eqx.Module):
    """One inverse-kinematics target: where a body point should be, how a body should
    be oriented, or both.

    The body is static (a name or an id, resolved against the model by
    `inverse_kinematics`); every number is an array leaf, so `jax.grad` and `jax.vmap`
    work over targets. To solve a batch, build the targets inside the vmapped function
    from batched arrays (``jax.vmap(lambda p: inverse_kinematics(model, q0,
    IKTarget(body, p)))``); a target built outside a transformation may carry leading
    batch axes on its leaves for use with `jax.vmap` ``in_axes``.

    Attributes:
        body: the body, a name (fixed-merged bodies and frames included) or an id.
        position: `(3,)` the desired world position of ``point`` [m], or None.
        rotation: `(3, 3)` the desired orientation of the body, body -> world
            coordinates (as `forward_kinematics`'s ``R``), or None.
        point: `(3,)` the controlled point in body coordinates [m]; default the body
            origin. Only the position error depends on it.
        position_weight: `()` weight of the position error rows [1/m] (default 1).
        rotation_weight: `()` weight of the orientation error rows [1/rad] (default 1).
            The weights set the trade-off between metres and radians when a target
            cannot be met exactly, and the units of the residual; a weight of 0 turns
            a part off.

    Raises:
        ValueError: neither ``position`` nor ``rotation`` given; an array of the wrong
            shape; a negative weight.
        TypeError: ``body`` is not a name or an int.

    Example:
        >>> t = jaxrbd.IKTarget("body_3", position=jnp.array([0.5, 0.0, -2.5]),
        ...                     point=jnp.array([0.0, 0.0, -1.0]))
        >>> t.rotation is None, t.point.shape
        (True, (3,))
    """

    body: int | str = eqx.field(static=True, converter=_body_key)
    position: Float[Array, "*batch 3"] | None = eqx.field(default=None, converter=_optional_array)
    rotation: Float[Array, "*batch 3 3"] | None = eqx.field(
        default=None, converter=_optional_array
    )
    point: Float[Array, "*batch 3"] = eqx.field(default=None, converter=_point)
    position_weight: Float[Array, "*batch"] = eqx.field(default=1.0, converter=_float_array)
    rotation_weight: Float[Array, "*batch"] = eqx.field(default=1.0, converter=_float_array)

    def __check_init__(self):
        if self.position is None and self.rotation is None:
            raise ValueError(
                f"IKTarget(body={self.body!r}): give a position, a rotation or both "
                "(got neither)"
            )
        for name, core in (("position", (3,)), ("rotation", (3, 3)), ("point", (3,))):
            x = getattr(self, name)
            if x is not None and tuple(x.shape[x.ndim - len(core) :]) != core:
                raise ValueError(
                    f"IKTarget(body={self.body!r}).{name} has shape {x.shape}, expected "
                    f"{core} (or (..., {', '.join(map(str, core))}) for a batch)"
                )
        for name in ("position_weight", "rotation_weight"):
            w = _concrete(getattr(self, name))
            if w is not None and np.any(w < 0):
                raise ValueError(f"IKTarget(body={self.body!r}).{name} must be >= 0, got {w}")


class IKResult(NamedTuple):
    """The outcome of `inverse_kinematics` (a pytree: `jax.vmap` stacks every field).

    Attributes:
        q: `(nq,)` the final configuration (unit quaternions; within the joint limits
            when they were respected).
        residual: `()` the weighted error norm ``|W e|`` at ``q``.
        error: `(m,)` the unweighted error vector at ``q``: for each target in the
            order given, ``p* - p`` `(3,)` [m] if it has a position, then
            ``log(R* R^T)`` `(3,)` [rad] if it has a rotation (world coordinates).
        converged: `()` bool, ``residual <= tol``.
        iterations: `()` int, the iterations run (accepted and rejected steps).
    """

    q: Float[Array, "..."]
    residual: Float[Array, ""]
    error: Float[Array, "..."]
    converged: Bool[Array, ""]
    iterations: Int[Array, ""]


# ---------------------------------------------------------------- the static problem


class _Problem:
    """Host-side, static description of one IK problem (ids, row layout, masks)."""

    def __init__(self, model, targets, active, respect_limits):
        self.nv = model.nv
        self.bodies = np.array(
            [_resolve_body(model, t.body, k) for k, t in enumerate(targets)], dtype=np.int64
        )
        self.kp = np.array([k for k, t in enumerate(targets) if t.position is not None], np.int64)
        self.kr = np.array([k for k, t in enumerate(targets) if t.rotation is not None], np.int64)
        # rows are built as [all position rows; all rotation rows]; `perm` reorders them
        # target by target ([p; R] of target 0, then target 1, ...)
        order = []
        for k in range(len(targets)):
            if k in self.kp:
                j = int(np.flatnonzero(self.kp == k)[0])
                order += [3 * j, 3 * j + 1, 3 * j + 2]
            if k in self.kr:
                j = 3 * len(self.kp) + 3 * int(np.flatnonzero(self.kr == k)[0])
                order += [j, j + 1, j + 2]
        self.perm = np.array(order, dtype=np.int64)
        self.m = len(order)
        node = topology(model).body_node[self.bodies]
        mask = support(model)[node].astype(np.float64)  # (K, nv): velocity j moves body k
        self.active = _active_mask(model, active)
        self.mask = mask * self.active[None, :]
        self.qi, self.vi = euclidean_maps(model)  # plain coordinates: q[qi] moves with v[vi]
        # the plain coordinates with a finite bound (all of them when the limits are traced)
        lo, hi = _concrete(model.q_lower), _concrete(model.q_upper)
        bounded = np.ones(len(self.qi), bool)
        if lo is not None and hi is not None and lo.ndim == 1 and hi.ndim == 1:
            bounded = np.isfinite(lo[self.qi]) | np.isfinite(hi[self.qi])
        self.bqi, self.bvi = self.qi[bounded], self.vi[bounded]
        self.limits = bool(respect_limits) and len(self.bqi) > 0


def _resolve_body(model, body, k):
    try:
        return model.body_id(body)
    except (ValueError, TypeError) as e:
        raise type(e)(f"targets[{k}].body: {e}") from None


def _active_mask(model, active):
    if active is None:
        return np.ones(model.nv)
    if isinstance(active, (str, int)) or not isinstance(active, Sequence):
        raise TypeError(
            f"active must be None or a sequence of joint names, got {type(active).__name__}"
        )
    mask = np.zeros(model.nv)
    for name in active:
        if not isinstance(name, str):
            raise TypeError(f"active: joint names must be str, got {name!r}")
        model.joint_id(name)  # a ValueError naming the movable joints if unknown
        mask[model.v_index(name)] = 1.0
    return mask


def _check_targets(targets):
    if isinstance(targets, IKTarget):
        return (targets,)
    if isinstance(targets, Sequence) and not isinstance(targets, (str, bytes)):
        targets = tuple(targets)
        if not targets:
            raise ValueError("targets is empty, expected an IKTarget or a sequence of them")
        for k, t in enumerate(targets):
            if not isinstance(t, IKTarget):
                raise TypeError(f"targets[{k}] is a {type(t).__name__}, expected an IKTarget")
        return targets
    raise TypeError(
        f"targets must be an IKTarget or a sequence of IKTargets, got {type(targets).__name__}"
    )


def _target_data(prob, targets, dtype):
    """The targets' numbers, stacked: ``point (K, 3)``, ``position (np, 3)``,
    ``rotation (nr, 3, 3)``, ``wp (np,)``, ``wr (nr,)``."""

    def leaf(k, t, name, core):
        x = as_float(f"targets[{k}].{name}", getattr(t, name), dtype)
        if x.shape != core:
            hint = " (use jax.vmap to solve a batch of targets)" if x.ndim > len(core) else ""
            raise ValueError(f"targets[{k}].{name} has shape {x.shape}, expected {core}{hint}")
        return x

    def stack(ks, name, core):
        if not len(ks):
            return jnp.zeros((0,) + core, dtype)
        return jnp.stack([leaf(k, targets[k], name, core) for k in ks])

    every = np.arange(len(targets))
    return (
        stack(every, "point", (3,)),
        stack(prob.kp, "position", (3,)),
        stack(prob.kr, "rotation", (3, 3)),
        stack(prob.kp, "position_weight", ()),
        stack(prob.kr, "rotation_weight", ()),
    )


# ---------------------------------------------------------------- errors and Jacobians


def _row_weights(prob, data):
    """The weight of every error row, ``(m,)``."""
    wp, wr = data[3], data[4]
    w = jnp.concatenate([jnp.repeat(wp, 3), jnp.repeat(wr, 3)])
    return w[prob.perm]


def _errors(prob, model, q, data, with_jacobian):
    """Errors ``e (m,)``, row weights ``w (m,)`` and, if asked, ``J (m, nv)`` with
    ``e(integrate(q, v)) = e - J v + O(|v|^2)`` (unweighted, inactive columns zero)."""
    point, position, rotation = data[:3]
    if with_jacobian:
        E0n, r0n, S0 = node_jacobian(model, q)
    else:
        E0n, r0n = node_poses(model, q)
    E0, r0 = body_frames(model, prob.bodies, E0n, r0n)
    E0, r0 = E0[..., 0], r0[..., 0]  # (K, 3, 3) world -> body, (K, 3)
    P = r0 + jnp.einsum("kji,kj->ki", E0, point)  # world points, R = E0^T
    e_parts, J_parts = [], []
    if len(prob.kp):
        e_parts.append(position - P[prob.kp])
    if len(prob.kr):
        E_err = jnp.matmul(rotation, E0[prob.kr])  # R* R^T
        er = log_quat(spatial.rotation_to_quat(E_err)[..., None])[..., 0]
        e_parts.append(er)
    e = jnp.concatenate([x.reshape(-1) for x in e_parts])[prob.perm]
    w = _row_weights(prob, data)
    if not with_jacobian:
        return e, w, None
    # S0: (nv, 6) node columns [w; v] in world coordinates at the world origin
    mask = jnp.asarray(prob.mask, S0.dtype)
    Sw, Sv = S0[:, :3], S0[:, 3:]
    if len(prob.kp):
        n = len(prob.kp)
        Pk = jnp.broadcast_to(P[prob.kp][:, None, :], (n, prob.nv, 3))
        Swk = jnp.broadcast_to(Sw[None], (n, prob.nv, 3))
        Jv = Sv[None] + jnp.cross(Swk, Pk)  # velocity of the point: v_O + w x P
        J_parts.append(jnp.swapaxes(Jv, -1, -2) * mask[prob.kp][:, None, :])
    if len(prob.kr):
        n = len(prob.kr)
        Jw = jnp.swapaxes(jnp.broadcast_to(Sw[None], (n, prob.nv, 3)), -1, -2)
        Jw = Jw * mask[prob.kr][:, None, :]
        # Jr^-1(e) = Jl^-1(-e): exact first-order change of log(R* R^T) under R -> exp(d) R
        Jr_inv = so3_left_jacobian_inv(-er[..., None])[..., 0]
        J_parts.append(jnp.matmul(Jr_inv, Jw))
    J = jnp.concatenate([x.reshape(-1, prob.nv) for x in J_parts], axis=0)[prob.perm]
    return e, w, J


# ---------------------------------------------------------------- the solver


def _integrate(model, q, v):
    return integrate_batched(model, q[:, None], v[:, None], 1.0)[:, 0]


def _project(prob, q, lo, hi):
    if not prob.limits:
        return q
    qi = prob.bqi
    return q.at[qi].set(jnp.clip(q[qi], lo[qi], hi[qi]))


def _at_bounds(prob, q, lo, hi):
    """``(lower, upper)`` masks over the plain coordinates: sitting on that bound."""
    qi = prob.bqi
    slack = 4 * jnp.finfo(q.dtype).eps
    return (
        q[qi] <= lo[qi] + slack * (1 + jnp.abs(lo[qi])),
        q[qi] >= hi[qi] - slack * (1 + jnp.abs(hi[qi])),
    )


def _dls_step(J, e, lam):
    """``argmin_v |e - J v|^2 + lam |v|^2`` by Cholesky on the smaller normal matrix."""
    m, n = J.shape
    if m <= n:
        A = J @ J.T + lam * jnp.eye(m, dtype=J.dtype)
        return J.T @ _linalg.cho_solve(_linalg.cholesky(A), e)
    A = J.T @ J + lam * jnp.eye(n, dtype=J.dtype)
    return _linalg.cho_solve(_linalg.cholesky(A), J.T @ e)


#: Active-set passes of the bounded step: a joint whose step would cross a bound is
#: put on the bound and the others re-solved (a bound is rarely hit by more than two
#: joints in one step; what is left is projected).
_BOUND_PASSES = 3


def _bounded_step(prob, J, e, lam, q, lo, hi):
    """The damped least-squares step with the plain coordinates kept in the box:
    an approximate active-set solution of the box-constrained problem."""
    if not prob.limits:
        return _dls_step(J, e, lam)
    qi, vi = prob.bqi, prob.bvi
    nv = prob.nv
    at_lo, at_hi = _at_bounds(prob, q, lo, hi)
    # joints on a bound that the descent direction (J^T e) pushes outwards stay put
    g = (J.T @ e)[vi]
    fixed = (at_lo & (g < 0)) | (at_hi & (g > 0))
    held = jnp.zeros(len(vi), J.dtype)  # the steps of the held coordinates
    for _ in range(_BOUND_PASSES):
        free = jnp.ones(nv, J.dtype).at[vi].set(jnp.where(fixed, 0.0, 1.0))
        v_held = jnp.zeros(nv, J.dtype).at[vi].set(held)
        v = _dls_step(J * free[None, :], e - J @ v_held, lam) + v_held
        q_new = q[qi] + v[vi]
        out = ~fixed & ((q_new < lo[qi]) | (q_new > hi[qi]))
        held = jnp.where(out, jnp.clip(q_new, lo[qi], hi[qi]) - q[qi], held)
        fixed = fixed | out
    return v


#: A run whose squared error has not halved in this many iterations is stuck (a local
#: minimum, or a crawl along a singularity or a bound): restart it elsewhere.
_STALL_WINDOW = 10
_STALL_FACTOR = 0.5


def _restart_sampler(prob, model, q0, lo, hi):
    """``n -> q``: the ``n``-th restart configuration. The active plain coordinates
    follow a Weyl sequence (``frac(n alpha_j)`` with irrational ``alpha_j``: an even,
    deterministic cover of the box, no random keys) over their limits, or over
    ``q0 +- pi`` for unbounded angles; everything else keeps its ``q0`` value."""
    qi, vi = prob.qi, prob.vi
    act = prob.active[vi] > 0
    angular = _angular(model)[vi]
    sel = np.flatnonzero(act)
    qi, angular = qi[sel], angular[sel]
    if not len(qi):
        return lambda n: q0
    l, h = lo[qi], hi[qi]
    span = jnp.asarray(np.where(angular, np.pi, 0.0), q0.dtype)
    l = jnp.where(jnp.isfinite(l), l, q0[qi] - span)
    h = jnp.where(jnp.isfinite(h), h, q0[qi] + span)
    alpha = jnp.asarray(np.sqrt(_primes(len(qi))) % 1.0, q0.dtype)

    def sample(n):
        u = (n.astype(q0.dtype) * alpha + 0.5) % 1.0
        return q0.at[qi].set(l + u * (h - l))

    return sample


def _angular(model) -> np.ndarray:
    """Static ``(nv,)`` mask: velocity coordinate ``j`` is a rotation (an angle)."""
    label = [model.joint_label[model.node_body[n]] for n in range(1, model.nv + 1)]
    out = np.array([not lb.startswith(("prismatic", "translation")) for lb in label])
    axes = _concrete(model.axes)  # custom and planar columns: read the axes if known
    if axes is not None and axes.ndim == 2:
        mixed = np.array([lb in ("custom", "planar") for lb in label], bool)
        out[mixed] = np.abs(axes[mixed, :3]).sum(axis=-1) > 0
    return out


@functools.lru_cache(maxsize=16)
def _primes(n: int) -> np.ndarray:
    """The first ``n`` primes (their square roots are rationally independent)."""
    out = []
    k = 2
    while len(out) < n:
        if all(k % p for p in out if p * p <= k):
            out.append(k)
        k += 1
    return np.array(out, dtype=np.float64)


def _solve(prob, model, q0, data, lo, hi, max_iters, tol, damping, max_step, restarts):
    """The Levenberg-Marquardt loop (no derivatives flow through it).

    Returns the best configuration found, its unweighted error and the number of
    iterations. Every iteration evaluates exactly one trial configuration (one
    kinematics pass): the start ``q0`` at iteration 0, a random restart after a stall,
    otherwise the damped least-squares step; trials that do not lower the error are
    rejected (restarts and the start always count as accepted).
    """
    dtype = model.dtype
    eps = float(jnp.finfo(dtype).eps)
    lam_min, lam_max = eps**0.75, 1.0 / eps
    q_start = _project(prob, _integrate(model, q0, jnp.zeros(model.nv, dtype)), lo, hi)
    sample = _restart_sampler(prob, model, q_start, lo, hi) if restarts else None
    two = jnp.asarray(2.0, dtype)

    def cond(c):
        k, stop, F_best = c[0], c[1], c[-1]
        return (k <= max_iters) & ~stop & (2 * F_best > tol * tol)

    def body(c):
        k, _, jump, n_jump, q, e, ew, J, F, lam, nu, F_ref, k_ref, q_best, e_best, F_best = c
        v = _bounded_step(prob, J, ew, lam, q, lo, hi)
        # a trust region on the step: far from a solution the linear model is poor
        vmax = jnp.max(jnp.abs(v))
        v = v * jnp.minimum(1.0, max_step / jnp.where(vmax > 0, vmax, 1.0))
        r = ew - J @ v
        predicted = 0.5 * (jnp.sum(ew * ew) - jnp.sum(r * r))
        q_jump = q_start if sample is None else jnp.where(k == 0, q_start, sample(n_jump))
        n_jump = n_jump + (jump & (k > 0))
        q_t = jnp.where(jump, q_jump, _project(prob, _integrate(model, q, v), lo, hi))
        e_t, w, J_t = _errors(prob, model, q_t, data, True)
        ew_t, J_t = e_t * w, J_t * w[:, None]
        F_t = 0.5 * jnp.sum(ew_t * ew_t)
        ok = jump | (jnp.isfinite(F_t) & (F_t < F))
        # gain ratio and Nielsen's damping update (Madsen, Nielsen & Tingleff 2004, 3.2)
        rho = jnp.clip((F - F_t) / jnp.where(predicted > 0, predicted, 1.0), 0.0, 2.0)
        rho = jnp.where(predicted > 0, rho, 1.0)
        shrink = jnp.maximum(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
        lam = jnp.where(ok, jnp.maximum(lam * shrink, lam_min), lam * nu)
        lam = jnp.where(jump, damping, lam)
        nu = jnp.where(ok, two, jnp.minimum(2.0 * nu, 2.0**30))
        q, e, ew, J, F = (jnp.where(ok, a, b) for a, b in ((q_t, q), (e_t, e), (ew_t, ew),
                                                           (J_t, J), (F_t, F)))
        better = F < F_best
        q_best, e_best, F_best = (jnp.where(better, a, b) for a, b in ((q, q_best),
                                                                        (e, e_best),
                                                                        (F, F_best)))
        k = k + 1
        # no step lowers the error any more (lam huge): a local minimum
        stuck = lam > lam_max
        checkpoint = jump | (k - k_ref >= _STALL_WINDOW)
        if sample is None:
            stop, jump = stuck, jnp.zeros((), bool)
        else:
            stalled = checkpoint & ~jump & (F > _STALL_FACTOR * F_ref)
            stop, jump = jnp.zeros((), bool), stuck | stalled
        F_ref = jnp.where(checkpoint, F, F_ref)
        k_ref = jnp.where(checkpoint, k, k_ref)
        return (k, stop, jump, n_jump, q, e, ew, J, F, lam, nu, F_ref, k_ref, q_best, e_best,
                F_best)

    k0 = jnp.zeros((), jnp.int32)
    e0 = jnp.zeros(prob.m, dtype)
    J0 = jnp.zeros((prob.m, prob.nv), dtype)
    inf = jnp.asarray(jnp.inf, dtype)
    # e_best starts as NaN: if no trial is ever finite, the result does not converge
    c0 = (k0, jnp.zeros((), bool), jnp.ones((), bool), k0, q_start, e0, e0, J0, inf, damping,
          two, inf, k0, q_start, jnp.full(prob.m, jnp.nan, dtype), inf)
    c = lax.while_loop(cond, body, c0)
    k, q_best, e_best = c[0], c[-3], c[-2]
    return q_best, e_best, k - 1


def _norm(x):
    n2 = jnp.sum(x * x)
    ok = n2 > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, n2, 1.0)), 0.0)


def _implicit(prob, model, data, lo, hi, q, e):
    """``(q, e, |W e|)`` at the solution, with the tangents of the solution map:

    * ``q``: a change of targets or model that changes the weighted error by ``d(W e)``
      at fixed ``q`` moves the solution by ``dv = (W J)^+ d(W e)`` (implicit function
      theorem, Gauss-Newton form): the least joint motion that restores the error to
      first order; joints on a bound or not `active` stay put;
    * ``e``: what is left of the change, ``de - J dv`` (zero at a reachable target);
    * ``|W e|``: the partial derivative at fixed ``q``, exact at any stationary point of
      the error (envelope theorem), reachable or not.
    """

    @jax.custom_jvp
    def attach(model, data, lo, hi, q, e):
        return q, e, _norm(e * _row_weights(prob, data))

    @attach.defjvp
    def attach_jvp(primals, tangents):
        model, data, lo, hi, q, e = primals
        dmodel, ddata = tangents[0], tangents[1]

        def errors(m, d):
            e, w, _ = _errors(prob, m, q, d, False)
            return e, e * w

        (_, ew), (de, dew) = jax.jvp(errors, (model, data), (dmodel, ddata))
        _, w, J = _errors(prob, model, q, data, True)
        Jw = J * w[:, None]
        if prob.limits:
            at_lo, at_hi = _at_bounds(prob, q, lo, hi)
            free = jnp.ones(prob.nv, J.dtype).at[prob.bvi].set(jnp.where(at_lo | at_hi, 0.0, 1.0))
            Jw = Jw * free[None, :]
        dv = _linalg.pinv(Jw) @ dew
        zero = jnp.zeros(prob.nv, q.dtype)
        _, dq = jax.jvp(lambda v: _integrate(model, q, v), (zero,), (dv,))
        r = _norm(ew)
        dr = jnp.where(r > 0, jnp.sum(ew * dew) / jnp.where(r > 0, r, 1.0), 0.0)
        return (q, e, r), (dq, de - J @ dv, dr)

    return attach(model, data, lo, hi, q, e)


def _check_options(max_iters, tol, damping, max_step):
    if isinstance(max_iters, bool) or not isinstance(max_iters, (int, np.integer)):
        raise TypeError(f"max_iters must be a Python int, got {type(max_iters).__name__}")
    if max_iters < 0:
        raise ValueError(f"max_iters must be >= 0, got {max_iters}")
    for name, x in (("tol", tol), ("damping", damping), ("max_step", max_step)):
        arr = _concrete(x)
        if arr is not None:
            if arr.shape != () or not np.issubdtype(arr.dtype, np.number):
                raise ValueError(f"{name} must be a real scalar, got {x!r}")
            if not (np.isfinite(arr) and arr > 0):
                raise ValueError(f"{name} must be positive and finite, got {x!r}")


def inverse_kinematics(
    model,
    q0,
    targets,
    *,
    max_iters=100,
    tol=1e-8,
    damping=1e-3,
    respect_limits=True,
    active=None,
    max_step=1.0,
    restarts=True,
):
    """Configuration that puts body points at world positions and bodies at world
    orientations, by Levenberg-Marquardt damped least squares.

    Seed 001's damped least-squares iteration made robust. Each iteration solves
    ``min_v |W (e - J v)|^2 + lam |v|^2`` for the stacked weighted errors ``W e`` of all
    targets (world-frame position errors ``p* - p`` and rotation-vector errors
    ``log(R* R^T)``, with the exact first-order Jacobian of the logarithm), caps the
    step at ``max_step`` per coordinate, moves on the joint manifolds with `integrate`
    (quaternions stay unit) and keeps the step only if the error decreases. The
    damping ``lam`` adapts to the ratio of actual to predicted decrease (Nielsen's
    rule): Gauss-Newton steps near a solution (quadratic convergence), short
    gradient-like steps far from it or near singularities. A run that stalls (no step
    lowers the error, or its square has not halved in 10 iterations: a local minimum)
    restarts, with ``restarts``, from a new configuration: the active scalar
    coordinates spread evenly over their limits (a deterministic low-discrepancy
    sequence; ``q0 +- pi`` for unbounded angles), the rest as in ``q0``. The result is
    the best configuration found. Each iteration costs one kinematics pass over the
    tree for all targets together plus a few ``min(m, nv)``-sized Cholesky solves. The
    loop is a bounded `lax.while_loop` that ends when ``|W e| <= tol`` or after
    ``max_iters`` iterations (or, without restarts, at a stall). It runs under
    `jax.jit` and `jax.vmap` (over targets, starts or models): a vmapped batch runs
    until its last member is done.

    Joint limits: with ``respect_limits``, ``model.q_lower``/``model.q_upper`` bound
    the coordinates of the scalar-coordinate joints (revolute, prismatic, helical,
    custom, Euler, translation). ``q0`` is projected onto the box and each step is
    solved with the joints it would push through a bound held on that bound (an
    active-set approximation of the box-constrained step). Quaternions and free-joint
    positions are never bounded.

    Derivatives (`jax.grad`, `jax.jacrev`, `jax.jvp`... with respect to the targets or
    the model) follow the solution implicitly, never through the iterations: ``q``
    moves by the least joint motion ``dv = (W J)^+ d(W e)`` that keeps the error at its
    solved value to first order (joints on a bound or not ``active`` stay put; exact
    at a reachable target, the Gauss-Newton approximation otherwise); ``residual``
    gets its partial derivative at fixed ``q``, exact at any stationary point
    (envelope theorem), e.g. for an unreachable target. Nothing depends on ``q0`` to
    first order.

    Args:
        model: a `Model`.
        q0: the start configuration, `(nq,)` (quaternions need not be normalised).
        targets: an `IKTarget` or a sequence of them (several bodies, or several
            points of a body), met together in the weighted least-squares sense.
        max_iters: the most iterations (each one kinematics pass), a Python int.
        tol: converged when the weighted error norm ``|W e|`` is at most this
            [m and rad with unit weights].
        damping: the initial Levenberg-Marquardt damping ``lam`` [m² with unit
            weights]; it then adapts.
        respect_limits: keep the scalar coordinates within ``model.q_lower`` and
            ``model.q_upper`` (see above).
        active: None (every joint may move) or a sequence of joint names (as in
            ``model.joint_names``) that may move; the others keep their ``q0`` values,
            e.g. the arm joints of a floating-base robot, to pin its base.
        max_step: the largest change of any velocity coordinate in one step
            [rad | m], a trust region against wild steps far from a solution.
        restarts: restart stalled runs (see above); with False a run ends at its
            first local minimum and depends only on ``q0``.

    Returns:
        An `IKResult` ``(q, residual, error, converged, iterations)``.

    Raises:
        ValueError: ``q0`` of the wrong shape; no targets; a target naming an unknown
            body, with arrays of the wrong shape or with neither position nor
            rotation; an unknown joint in ``active``; ``max_iters < 0``; ``tol``,
            ``damping`` or ``max_step`` not positive.
        equinox.EquinoxRuntimeError: non-finite numbers in the targets or ``q0``
            (``eqx.error_if``; NaN results with ``EQX_ON_ERROR=nan``).
        TypeError: ``targets`` not `IKTarget`s; ``max_iters`` not an int.

    Example:
        >>> tip = jnp.array([0.0, 0.0, -1.0])            # a point of body_3, 1 m below it
        >>> goal = jaxrbd.point_position(model, q, "body_3", tip)
        >>> res = jaxrbd.inverse_kinematics(
        ...     model, jnp.zeros(model.nq), jaxrbd.IKTarget("body_3", position=goal, point=tip))
        >>> bool(res.converged), bool(res.residual <= 1e-8)
        (True, True)
        >>> bool(jnp.allclose(jaxrbd.point_position(model, res.q, "body_3", tip), goal))
        True
    """
    with jax.named_scope("jaxrbd.inverse_kinematics"):
        targets = _check_targets(targets)
        _check_options(max_iters, tol, damping, max_step)
        q0 = check_vector("q0", q0, model.nq, "model.nq", model.dtype)
        prob = _Problem(model, targets, active, respect_limits)
        data = _target_data(prob, targets, model.dtype)
        # a NaN goal has no solution: every trial error is NaN, and no trial can pass
        finite = jnp.all(jnp.isfinite(q0))
        for x in data:
            finite = finite & jnp.all(jnp.isfinite(x))
        data = eqx.error_if(
            data, ~finite,
            "inverse_kinematics: the targets (point, position, rotation, weights) or q0 "
            "hold NaN or inf",
        )
        lo = jnp.asarray(model.q_lower, model.dtype)
        hi = jnp.asarray(model.q_upper, model.dtype)
        tol = jnp.asarray(tol, model.dtype)
        sg = lax.stop_gradient
        q, e, iterations = _solve(
            prob, sg(model), sg(q0), sg(data), sg(lo), sg(hi), int(max_iters), sg(tol),
            sg(jnp.asarray(damping, model.dtype)), sg(jnp.asarray(max_step, model.dtype)),
            bool(restarts),
        )
        q, e, residual = _implicit(prob, model, data, lo, hi, q, e)
        return IKResult(q, residual, e, sg(residual) <= tol, iterations)
