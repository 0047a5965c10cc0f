"""Time integration of the equations of motion on the joint manifolds: `step`, `rollout`.

The state is ``(q, qd)``: ``q`` on the product of the joint manifolds (angles and
displacements, unit quaternions, SE(3) poses of free joints) and ``qd`` in its tangent
space. The equations of motion are ``q' = q (+) qd`` (the velocity moves ``q`` along the
manifold, `jaxrbd.integrate`) and ``qd' = qdd(q, qd, tau)``. Every integrator moves ``q``
on the joint manifolds (exponential maps), so quaternions stay unit to round-off; the
Euler methods move a free joint's origin on a straight line, in coordinates frozen at
the start of the step (`_configuration.advance`).

RK4 is the commutator-free Lie-group method CF4 of Celledoni, Marthinsen and Owren
(FGCS 19, 2003): the classical four stages, each started from a point reached by
exponentials of *frozen* stage velocities (Crouch-Grossman style), and an update that
composes two exponentials. On the Euclidean coordinates it is exactly the classical RK4;
on quaternions and free joints it keeps order four without commutators.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._api import Kernels, kernels
from ._core.checks import as_float, check_state, check_vector
from ._core.sharding import blocked_over_devices, check_devices
from ._dynamics import DERIVATIVE_MATRICES
from ._model import check_model

__all__ = ["INTEGRATORS", "rollout", "rollout_batched", "step"]

#: The integrator names `step` and `rollout` accept.
INTEGRATORS = ("euler", "semi_implicit_euler", "rk4")


# ---------------------------------------------------------------- argument checks


def _concrete(x):
    """``x`` as a numpy value, or ``None`` when it is traced (checked only when known)."""
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def check_dt(dt, dtype):
    dt = as_float("dt", dt, dtype)
    if dt.ndim != 0:
        raise ValueError(f"dt has shape {dt.shape}, expected a scalar () [s]")
    value = _concrete(dt)
    if value is not None and not (np.isfinite(value) and value > 0):
        raise ValueError(f"dt is {value.item()!r}, expected a finite time step > 0 [s]")
    return dt


def _check_integrator(integrator):
    if not isinstance(integrator, str) or integrator not in INTEGRATORS:
        raise ValueError(
            f"integrator {integrator!r} is unknown, expected one of "
            + ", ".join(repr(n) for n in INTEGRATORS)
        )


def _check_callables(forces, dynamics):
    """``forces`` as a tuple of callables (a single callable is accepted too)."""
    if forces is None:
        forces = ()
    elif callable(forces):
        forces = (forces,)
    try:
        forces = tuple(forces)
    except TypeError:
        raise TypeError(
            "forces must be a sequence of callables f(model, q, qd) -> (nv,), "
            f"got {type(forces).__name__}"
        ) from None
    for i, f in enumerate(forces):
        if not callable(f):
            raise TypeError(
                f"forces[{i}] is a {type(f).__name__}, expected a callable "
                "f(model, q, qd) -> (nv,)"
            )
    if dynamics is not None and not callable(dynamics):
        raise TypeError(
            f"dynamics is a {type(dynamics).__name__}, expected a callable "
            "(model, q, qd, tau) -> qdd or None"
        )
    return forces, dynamics


def check_result(name, x, model):
    """A user callable's output as an ``(nv,)`` array of the model dtype."""
    x = as_float(name, x, model.dtype)
    if x.shape != (model.nv,):
        raise ValueError(
            f"{name} returned shape {x.shape}, expected ({model.nv},) = (model.nv,)"
        )
    return x


def _check_n_steps(n_steps):
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 0:
        raise ValueError(f"n_steps is {n_steps!r}, expected an int >= 0")
    return int(n_steps)


def check_controls(model, tau_seq, n_steps, policy, name="tau_seq"):
    """The scanned inputs: ``tau_seq (n, nv)``, or the step indices for a policy."""
    if (tau_seq is None) == (policy is None):
        raise ValueError(
            f"pass exactly one of {name} (n_steps, nv) and policy(t, q, qd) -> tau; got "
            + ("both" if policy is not None else "neither")
        )
    if policy is not None:
        if not callable(policy):
            raise TypeError(
                f"policy is a {type(policy).__name__}, expected a callable (t, q, qd) -> tau"
            )
        if n_steps is None:
            raise ValueError("n_steps is required with a policy (tau_seq=None)")
        n = _check_n_steps(n_steps)
        return jnp.arange(n), n
    tau_seq = as_float(name, tau_seq, model.dtype)
    if tau_seq.ndim != 2 or tau_seq.shape[1] != model.nv:
        raise ValueError(
            f"{name} has shape {tau_seq.shape}, expected (n_steps, {model.nv}) "
            "= (n_steps, model.nv)"
        )
    n = tau_seq.shape[0]
    if n_steps is not None and _check_n_steps(n_steps) != n:
        raise ValueError(f"n_steps is {n_steps} but {name} has {n} steps (shape {tau_seq.shape})")
    return tau_seq, n


def check_checkpoint(checkpoint, n):
    """Segment length of the checkpointed scan, or ``None`` for a plain scan."""
    if checkpoint is None or checkpoint is False:
        return None
    if checkpoint is True:
        return max(1, math.isqrt(max(n - 1, 0)) + 1)  # ceil(sqrt(n)) for n >= 1
    if not isinstance(checkpoint, (int, np.integer)) or checkpoint < 1:
        raise ValueError(
            f"checkpoint is {checkpoint!r}, expected None, True or a segment length int >= 1"
        )
    return int(checkpoint)


# ---------------------------------------------------------------- integrators


def _euler(model, kern: Kernels, accel, q, qd, tau, dt):
    # the velocity update in coordinates frozen at the start of the step (free joints'
    # linear velocities do not turn with the body during it), see `advance`
    qd1 = qd + dt * (accel(q, qd, tau) + kern.frame_rate(model, qd))
    return kern.advance(model, q, qd, qd1, dt)


def _semi_implicit_euler(model, kern: Kernels, accel, q, qd, tau, dt):
    qd1 = qd + dt * (accel(q, qd, tau) + kern.frame_rate(model, qd))
    return kern.advance(model, q, qd1, qd1, dt)


#: CF4 stage table, one row per stage: the stage's step fraction ``c``, whether it starts
#: from stage 2's point (stage 4), and the weights of its velocity in the two composed
#: exponentials and of its acceleration in the velocity update.
_CF4 = np.array(
    [
        # c,  from q2, first, second, accel
        [0.0, 0.0, 3.0 / 12, -1.0 / 12, 1.0 / 6],
        [0.5, 0.0, 2.0 / 12, 2.0 / 12, 2.0 / 6],
        [0.5, 0.0, 2.0 / 12, 2.0 / 12, 2.0 / 6],
        [1.0, 1.0, -1.0 / 12, 3.0 / 12, 1.0 / 6],
    ]
)


def _rk4(model, kern: Kernels, accel, q, qd, tau, dt, remat_stages=False):
    """CF4 (Celledoni-Marthinsen-Owren 2003, classical RK4 coefficients).

    Stage velocities ``v_i`` are the frozen directions. Stage 4 starts from stage 2's
    point (``exp(h(v3 - v1/2)) exp(h v1/2)``) and the update composes two exponentials
    with weights ``(3, 2, 2, -1)/12`` then ``(-1, 2, 2, 3)/12``; the velocities, a vector
    space, get the classical ``(1, 2, 2, 1)/6``.

    The four stages run as a `lax.scan` over `_CF4`, so the forward dynamics appears
    once in the program, not four times: a quarter of the compile time of an unrolled
    RK4, for rollouts and their gradients alike. The final two exponentials run as a
    second scan of two steps, for the same reason. With ``remat_stages`` the stages
    keep only the forward-dynamics rule's derivative matrices for reverse mode
    (`_SAVE_DERIVATIVE_MATRICES`) and recompute the rest.
    """
    table = jnp.asarray(_CF4, dtype=qd.dtype)
    # zeros derived from qd, not jnp.zeros_like: under vmap and reverse mode the stage
    # carries are then batched and carry tangents from the first step, so JAX's scan
    # rules trace the stage (the forward dynamics inside) once instead of twice on the
    # way to their fixpoint
    zero = qd * 0

    def stage(carry, row):
        q2, v1, v_prev, a_prev, first, second, a_sum, k = carry
        c, from_q2, w1, w2, wa = row[0], row[1], row[2], row[3], row[4]
        base = jnp.where(from_q2 > 0, q2, q)
        direction = v_prev - from_q2 * 0.5 * v1
        q_s = kern.move(model, base, direction, c * dt)
        v_s = qd + (c * dt) * a_prev
        a_s = accel(q_s, v_s, tau)
        v1 = jnp.where(k == 0, v_s, v1)
        q2 = jnp.where(k == 1, q_s, q2)
        carry = (q2, v1, v_s, a_s, first + w1 * v_s, second + w2 * v_s, a_sum + wa * a_s, k + 1)
        return carry, None

    init = (q, zero, zero, zero, zero, zero, zero, 0)
    if remat_stages:
        stage = jax.checkpoint(stage, policy=_SAVE_DERIVATIVE_MATRICES)
    (_, _, _, _, first, second, a_sum, _), _ = jax.lax.scan(stage, init, table)
    # the two exponentials in a scan too: one more copy of the move, not two; recomputed
    # in reverse mode from the scan's inputs rather than stored (dozens of small residuals)
    compose = jax.checkpoint(lambda q_, v: (kern.move(model, q_, v, dt), None))
    q_new, _ = jax.lax.scan(compose, q, jnp.stack([first, second]))
    return q_new, qd + dt * a_sum


#: The `jax.checkpoint` policy of the RK4 stages: keep the forward-dynamics rule's
#: derivative matrices, recompute the rest. A stage's other residuals are dozens of small
#: arrays (the moves' quaternion algebra), each stacked per stage and step by a kernel of
#: its own: recomputing them makes a rollout's gradient smaller to compile and faster.
_SAVE_DERIVATIVE_MATRICES = jax.checkpoint_policies.save_only_these_names(DERIVATIVE_MATRICES)

_STEPS = {"euler": _euler, "semi_implicit_euler": _semi_implicit_euler, "rk4": _rk4}


def _stepper(model, integrator, forces, dynamics) -> Callable:
    """``(q, qd, tau, dt) -> (q, qd)`` for checked arguments: the kernels of ``model``'s
    kind (`jaxrbd._api.kernels`), chosen once."""
    kern = kernels(model)

    def accel(q, qd, tau):
        for i, f in enumerate(forces):
            tau = tau + check_result(f"forces[{i}]", f(model, q, qd), model)
        if dynamics is None:
            return kern.forward_dynamics(model, q, qd, tau)
        return check_result("dynamics", dynamics(model, q, qd, tau), model)

    method = _STEPS[integrator]
    if method is _rk4:
        # the stages keep only the rule's derivative matrices for reverse mode when the
        # dynamics are jaxrbd's (a user's `dynamics` would be recomputed in full)
        remat = dynamics is None and kern.analytic_rule
        return lambda q, qd, tau, dt: _rk4(model, kern, accel, q, qd, tau, dt, remat_stages=remat)
    return lambda q, qd, tau, dt: method(model, kern, accel, q, qd, tau, dt)


def step(model, q, qd, tau, dt, integrator="rk4", *, forces=(), dynamics=None):
    """Advance the state ``(q, qd)`` by one time step on the joint manifolds.

    The configuration always moves with `jaxrbd.integrate` (exponential maps for
    quaternions and free joints), so quaternions stay unit to round-off.

    Integrators (``qdd = dynamics(model, q, qd, tau + sum(f(model, q, qd) for f in forces))``,
    one evaluation per stage):

    - ``"euler"``: explicit Euler, order 1: ``q+ = q (+) qd dt``, ``qd+ = qd + qdd dt``.
    - ``"semi_implicit_euler"``: symplectic Euler, order 1: ``qd+ = qd + qdd dt`` first,
      then ``q+ = q (+) qd+ dt``; good long-time energy behaviour for its cost.

    Both Euler methods take a free joint's velocity update in coordinates frozen at the
    start of the step and move its origin on a straight line (`_configuration.advance`),
    so a force-free spinning body keeps its world-frame momentum to round-off.
    - ``"rk4"`` (default): four-stage, order 4. On plain coordinates it is the classical
      RK4; on quaternions and free joints it is the commutator-free Lie-group RK4 (CF4,
      Celledoni-Marthinsen-Owren 2003): stages start from points reached by exponentials
      of the frozen stage velocities, and the update composes two exponentials.

    ``tau`` is held constant over the step (all stages).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        qd: velocities `(nv,)` [rad/s | m/s]; body coordinates for free joints.
        tau: generalized forces `(nv,)` [N m | N], held over the step.
        dt: time step [s], a positive scalar (may be traced, e.g. differentiated).
        integrator: ``"euler"``, ``"semi_implicit_euler"`` or ``"rk4"``.
        forces: a sequence of callables ``f(model, q, qd) -> (nv,)`` whose generalized
            forces are added to `tau` at every stage (force elements, user forces).
        dynamics: optional ``(model, q, qd, tau) -> qdd (nv,)`` replacing
            `jaxrbd.forward_dynamics` (e.g. constrained dynamics).

    Returns:
        ``(q, qd)`` after the step, `(nq,)` and `(nv,)`.

    Raises:
        ValueError: wrong shapes, a non-positive or non-scalar `dt`, an unknown
            integrator, or a force/dynamics callable returning the wrong shape.
        TypeError: `forces` or `dynamics` not callables.

    Example:
        >>> step = jax.jit(jaxrbd.step, static_argnames="integrator")
        >>> q1, qd1 = step(model, q, jnp.zeros(model.nv), tau, 1e-3, "semi_implicit_euler")
        >>> q1.shape, qd1.shape
        ((9,), (9,))
    """
    with jax.named_scope("jaxrbd.step"):
        q, qd, tau = check_state(model, q=q, qd=qd, tau=tau)
        dt = check_dt(dt, model.dtype)
        _check_integrator(integrator)
        forces, dynamics = _check_callables(forces, dynamics)
        return _stepper(model, integrator, forces, dynamics)(q, qd, tau, dt)


# ---------------------------------------------------------------- rollouts


def scan_steps(body, carry, xs, n, segment):
    """``lax.scan(body, carry, xs)`` with the outputs stacked; with ``segment = k``,
    nested scans whose inner ``k``-step scans are rematerialised (``jax.checkpoint``)."""
    if segment is None or segment >= n:
        return lax.scan(body, carry, xs, length=n)[1]
    m = -(-n // segment)
    padn = m * segment - n
    step = body
    if padn:
        # Pad to whole segments with steps that leave the carry unchanged, rather than
        # a separate tail scan: one segment body to compile, <= k - 1 wasted steps.
        # xs padding repeats the last entry (valid torques / times for the discarded steps).
        xs = jax.tree_util.tree_map(
            lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], padn, axis=0)]), xs
        )
        xs = (xs, jnp.arange(m * segment) < n)

        def step(c, x):
            x, keep = x
            c_new, y = body(c, x)
            return jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), c_new, c), y

    # prevent_cse=False: the checkpoint sits inside a scan, which already keeps XLA from
    # merging the recomputation with the forward pass (the JAX docs' recommendation)
    run = jax.checkpoint(lambda c, x: lax.scan(step, c, x), prevent_cse=False)
    xs = jax.tree_util.tree_map(lambda x: x.reshape((m, segment) + x.shape[1:]), xs)
    _, ys = lax.scan(run, carry, xs)
    return jax.tree_util.tree_map(lambda y: y.reshape((m * segment,) + y.shape[2:])[:n], ys)


def rollout(
    model,
    q0,
    qd0,
    tau_seq,
    dt,
    integrator="rk4",
    *,
    n_steps=None,
    policy=None,
    forces=(),
    dynamics=None,
    checkpoint=None,
):
    """Simulate ``n_steps`` steps of `step` with one `lax.scan`; returns the trajectory.

    Either open loop, with ``tau_seq[k]`` held over step ``k``, or closed loop with
    ``tau_seq=None, n_steps=N, policy=lambda t, q, qd: tau`` evaluated once at the start
    of every step, at ``t = k dt``. Works under `jax.jit`, `jax.vmap` (batches of initial
    states, torques or models) and `jax.grad` (with respect to the initial state, the
    torques, `dt`, the model and anything `forces`, `dynamics` or `policy` close over).

    Gradient checkpointing: reverse mode normally stores the residuals of every step
    (for ``"rk4"`` four forward-dynamics passes' worth, a few hundred numbers per body),
    so memory grows as ``O(n_steps * r)``. With ``checkpoint=k`` the scan is split into
    segments of ``k`` steps wrapped in `jax.checkpoint` (a nested scan): reverse mode
    stores only the state at the start of each segment and recomputes one segment's
    ``k`` steps at a time during the backward pass, so it keeps ``O(n_steps / k)``
    states plus ``O(k)`` steps of residuals, for one extra forward simulation. ``k``
    near ``sqrt(n_steps)`` (``checkpoint=True``) minimises the sum; e.g. 10^4 RK4 steps
    of a 3-body pendulum need ~0.2 GB of residuals without checkpointing and ~2 MB with
    ``checkpoint=100``. The returned trajectory itself is always
    ``(n_steps + 1) * (nq + nv)`` numbers.

    Args:
        model: a `Model`.
        q0: initial configuration `(nq,)`.
        qd0: initial velocities `(nv,)` [rad/s | m/s].
        tau_seq: generalized forces `(n_steps, nv)` [N m | N], or ``None`` with `policy`.
        dt: time step [s], a positive scalar.
        integrator: ``"euler"``, ``"semi_implicit_euler"`` or ``"rk4"`` (see `step`).
        n_steps: number of steps; required with `policy`, checked against `tau_seq`.
        policy: ``(t, q, qd) -> tau (nv,)``, ``t`` a scalar time [s]; replaces `tau_seq`.
        forces: callables ``f(model, q, qd) -> (nv,)`` added to the torques at every stage.
        dynamics: optional ``(model, q, qd, tau) -> qdd`` replacing `jaxrbd.forward_dynamics`.
        checkpoint: ``None`` (no rematerialisation), a segment length ``k >= 1``, or
            ``True`` for ``k = ceil(sqrt(n_steps))``.

    Returns:
        ``(qs, qds)``, `(n_steps + 1, nq)` and `(n_steps + 1, nv)`; row 0 is the initial
        state and row ``k`` the state at ``t = k dt``.

    Raises:
        ValueError: wrong shapes, a bad `dt`, `n_steps` or `checkpoint`, an unknown
            integrator, both or neither of `tau_seq` and `policy`, or a callable
            returning the wrong shape.
        TypeError: `policy`, `forces` or `dynamics` not callables.

    Example:
        >>> qd0, tau_seq = jnp.zeros(model.nv), jnp.zeros((100, model.nv))
        >>> qs, qds = jaxrbd.rollout(model, q, qd0, tau_seq, 1e-3)
        >>> qs.shape, qds.shape
        ((101, 9), (101, 9))
        >>> damped = lambda t, q, qd: -0.5 * qd
        >>> qs, qds = jaxrbd.rollout(model, q, qd0, None, 1e-3, "euler", n_steps=50,
        ...                          policy=damped)
        >>> qs.shape
        (51, 9)
    """
    with jax.named_scope("jaxrbd.rollout"):
        check_model(model)
        q0 = check_vector("q0", q0, model.nq, "model.nq", model.dtype)
        qd0 = check_vector("qd0", qd0, model.nv, "model.nv", model.dtype)
        dt = check_dt(dt, model.dtype)
        _check_integrator(integrator)
        forces, dynamics = _check_callables(forces, dynamics)
        xs, n = check_controls(model, tau_seq, n_steps, policy)
        segment = check_checkpoint(checkpoint, n)
        advance = _stepper(model, integrator, forces, dynamics)

        def body(carry, x):
            q, qd = carry
            if policy is None:
                tau = x
            else:
                t = x.astype(dt.dtype) * dt
                tau = check_result("policy", policy(t, q, qd), model)
            q, qd = advance(q, qd, tau, dt)
            return (q, qd), (q, qd)

        qs, qds = scan_steps(body, (q0, qd0), xs, n, segment)
        return (
            jnp.concatenate([q0[None], qs], axis=0),
            jnp.concatenate([qd0[None], qds], axis=0),
        )


# ---------------------------------------------------------------- batched, sharded


def _check_batch(model, name, x, n, what):
    x = as_float(name, x, model.dtype)
    if x.ndim != 2 or x.shape[1] != n:
        raise ValueError(f"{name} has shape {x.shape}, expected (batch, {n}) = (batch, {what})")
    return x


def rollout_devices(devices):
    """The rollouts' devices: `jax.devices()` by default, else `_sharding.check_devices`."""

    return list(jax.devices()) if devices is None else list(check_devices(devices))


def check_batch_inputs(model, Q0, QD0, TAU_SEQ):
    """``(Q0, QD0[, TAU_SEQ])`` of a batched rollout, checked: ``(N, nq)``, ``(N, nv)``,
    ``(N, n_steps, nv)`` or None, one batch size ``N >= 1``."""
    Q0 = _check_batch(model, "Q0", Q0, model.nq, "model.nq")
    QD0 = _check_batch(model, "QD0", QD0, model.nv, "model.nv")
    if TAU_SEQ is not None:
        TAU_SEQ = as_float("TAU_SEQ", TAU_SEQ, model.dtype)
        if TAU_SEQ.ndim != 3 or TAU_SEQ.shape[2] != model.nv:
            raise ValueError(
                f"TAU_SEQ has shape {TAU_SEQ.shape}, expected (batch, n_steps, {model.nv}) "
                "= (batch, n_steps, model.nv)"
            )
    arrays = (Q0, QD0) if TAU_SEQ is None else (Q0, QD0, TAU_SEQ)
    if len({x.shape[0] for x in arrays}) != 1:
        raise ValueError(f"batch sizes differ: {[x.shape for x in arrays]}")
    if Q0.shape[0] == 0:
        raise ValueError("Q0 has batch size 0, expected at least one sample")
    return arrays


def rollout_batched(model, Q0, QD0, TAU_SEQ, dt, integrator="rk4", *, n_steps=None,
                    policy=None, forces=(), dynamics=None, checkpoint=None, devices=None,
                    chunk=None):
    """`rollout` for a batch (batch first), blocked per device and sharded over devices.

    The batch is padded (copies of sample 0) to ``ndevices * nblocks * block`` and split
    over a 1-D `Mesh` of ``devices`` with `jax.shard_map`; inside a device, equal blocks
    of at most ``chunk`` samples (default `jaxrbd._core.backend.block_size` for ``devices``:
    `jaxrbd._core.backend.CHUNK` on CPUs, the whole local batch elsewhere) run `jax.vmap` of
    `rollout` one after the other, so a block's states stay in cache for the whole
    rollout.
    """

    arrays = check_batch_inputs(model, Q0, QD0, TAU_SEQ)
    # the single-sample checks (dt, integrator, callables, n_steps vs policy) up front,
    # so their errors name the arguments before any tracing of the batch
    check_dt(dt, model.dtype)
    _check_integrator(integrator)
    _check_callables(forces, dynamics)
    if (TAU_SEQ is None) == (policy is None):
        check_controls(model, None if TAU_SEQ is None else TAU_SEQ[0], n_steps, policy,
                        name="TAU_SEQ")
    devices = rollout_devices(devices)


    def one(q0, qd0, tau_seq=None):
        return rollout(model, q0, qd0, tau_seq, dt, integrator, n_steps=n_steps,
                       policy=policy, forces=forces, dynamics=dynamics,
                       checkpoint=checkpoint)

    return blocked_over_devices(one, arrays, devices, chunk)
