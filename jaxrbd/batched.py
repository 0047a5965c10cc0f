"""Batched entry points: many states in one call, batch axis first.

Each function here is `jax.vmap` of its single-state twin, compiled with `jaxrbd.jit`;
`jax.vmap` already runs jaxrbd's batch-trailing kernels (`jaxrbd._core.native_vmap.native_vmap`),
so the numbers and the speed are those of ``jaxrbd.jit(jax.vmap(f))``. What they add
is what `jax.vmap` does not do by itself:

* batch-first arguments checked with errors that name them (``Q (N, nq)``, ...);
* a batch of models (`stack_models`): one model per state, the same call;
* a compiled program per model structure and batch size, made with `jaxrbd.jit` (the
  compiler options for the device it runs on); called inside your own jit, the outer
  jit's options apply, so make that one a `jaxrbd.jit` too;
* `rollout`: rollouts sharded over devices;
* ``devices=``: the batch split over several devices, e.g. both cores of a CPU host
  split into two devices with ``jax.config.update("jax_num_cpu_devices", 2)`` before
  JAX starts (`jaxrbd._core.sharding`). ``"all"`` takes `jax.devices()`; the default
  ``None`` runs on one device.

Example:
    >>> Q = jnp.zeros((16, model.nq)); Z = jnp.zeros((16, model.nv))
    >>> jaxrbd.batched.forward_dynamics(model, Q, Z, Z).shape
    (16, 9)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._core.checks import _as_float, warn_deprecated
from ._jit import jit as _jit
from ._model import is_coupled

__all__ = [
    "contact_impulses",
    "forward_dynamics",
    "forward_dynamics_contacts",
    "forward_dynamics_derivatives",
    "forward_dynamics_parameter_derivatives",
    "inverse_dynamics",
    "inverse_dynamics_derivatives",
    "inverse_dynamics_parameter_derivatives",
    "inverse_dynamics_regressor",
    "mass_matrix",
    "n_models",
    "stack_models",
]


def _check(model, name, x, n, what):
    x = _as_float(name, x, model.dtype)
    if x.ndim != 2 or x.shape[1] != n:
        raise ValueError(f"{name} has shape {x.shape}, expected (batch, {n}) = (batch, {what})")
    return x


def _batch(model, **arrays):
    out = []
    for name, x in arrays.items():
        n, what = (model.nq, "model.nq") if name == "Q" else (model.nv, "model.nv")
        out.append(_check(model, name, x, n, what))
    sizes = {x.shape[0] for x in out}
    if len(sizes) != 1:
        raise ValueError(f"batch sizes differ: {[x.shape for x in out]}")
    return out


def _f_ext(model, F_ext, n):
    if F_ext is None:
        return None
    F = _as_float("F_ext", F_ext, model.dtype)
    if F.shape != (n, model.nbodies, 6):
        raise ValueError(f"F_ext has shape {F.shape}, expected ({n}, {model.nbodies}, 6)")
    return F


# ----------------------------------------------------------------------------- batches of models


def stack_models(models):
    """One `Model` whose leaves carry a leading axis of ``len(models)``: a batch of models.

    The models must share their structure (tree, joint kinds, names); only their numbers
    (masses, inertias, joint placements, axes, gravity, limits) may differ. Every
    function of this module accepts the result in place of a single model, with one state
    per model (``Q (N, nq)`` for ``N`` models), and vmaps over both.

    Raises:
        ValueError: an empty list, or models of different structure.

    Example:
        >>> heavy = jaxrbd.with_inertial_parameters(model, 2 * jaxrbd.inertial_parameters(model))
        >>> models = jaxrbd.batched.stack_models([model, heavy])
        >>> Q = jnp.stack([q, q]); Z = jnp.zeros((2, model.nv))
        >>> jaxrbd.batched.forward_dynamics(models, Q, Z, Z).shape
        (2, 9)
    """
    models = list(models)
    if not models:
        raise ValueError("stack_models: no models given")
    treedef = jax.tree_util.tree_structure(models[0])
    for i, m in enumerate(models[1:], 1):
        if jax.tree_util.tree_structure(m) != treedef:
            raise ValueError(
                f"stack_models: model {i} differs in structure from model 0 (tree, joints or "
                "names); only the numbers of the models may differ"
            )
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *models)


def n_models(model):
    """The number of models of a `stack_models` batch, or ``None`` for a single model."""
    shape = jnp.shape(model.gravity)
    return shape[0] if len(shape) == 2 else None


def _states(model, F_ext=None, **arrays):
    """Check batch-first states (and ``F_ext``) against a single model; a stacked batch
    is checked per model, and a `CoupledModel` by its public functions."""
    if n_models(model) is None and not is_coupled(model):
        (first, *_) = _batch(model, **arrays)
        _f_ext(model, F_ext, first.shape[0])


def _vmap(fn, model, *arrays):
    """``fn(model, *arrays_i)`` for every state ``i`` (batch axis first; ``None`` arrays
    stay ``None``), with one model per state for a `stack_models` batch."""
    n = n_models(model)
    if n is not None:
        for x in arrays:
            if x is not None and jnp.shape(x)[:1] != (n,):
                raise ValueError(
                    f"a batch of {n} models takes {n} states (one per model); got an "
                    f"argument of shape {jnp.shape(x)}"
                )
    in_axes = (None if n is None else 0,) + tuple(None if x is None else 0 for x in arrays)
    return jax.vmap(fn, in_axes=in_axes)(model, *arrays)


def _sharded(fn, devices, model, *arrays, shared=(), **static):
    """``fn(model, *arrays, **static)`` with the batch split over ``devices``
    (`jaxrbd._core.sharding`); the model is shared, or split with the states when it is a
    `stack_models` batch. The ``arrays`` at the positions in ``shared`` (a constraint
    set, a restitution) are shared by the batch too."""
    from ._core.sharding import shard_batch

    in_axes = (None if n_models(model) is None else 0,) + tuple(
        None if i in shared else 0 for i in range(len(arrays)))
    return shard_batch(fn, devices, in_axes, model, *arrays, **static)


# ----------------------------------------------------------------------------- dynamics


def _fd(model, Q, QD, TAU, F_ext):
    from ._aba import forward_dynamics

    _states(model, F_ext, Q=Q, QD=QD, TAU=TAU)
    return _vmap(forward_dynamics, model, Q, QD, TAU, F_ext)


def _id(model, Q, QD, QDD, F_ext):
    from ._rnea import inverse_dynamics

    _states(model, F_ext, Q=Q, QD=QD, QDD=QDD)
    return _vmap(inverse_dynamics, model, Q, QD, QDD, F_ext)


def _mm(model, Q):
    from ._crba import mass_matrix

    _states(model, Q=Q)
    return _vmap(mass_matrix, model, Q)


_fd_jit, _id_jit, _mm_jit = _jit(_fd), _jit(_id), _jit(_mm)


def forward_dynamics(model, Q, QD, TAU, F_ext=None, *, devices=None):
    """`jaxrbd.forward_dynamics` for a batch: `Q (N, nq)`, `QD, TAU (N, nv)`, optional
    `F_ext (N, nbodies, 6)` -> `(N, nv)`. `model` may be a `stack_models` batch of N.
    `devices` (``"all"`` or a sequence) splits the batch over those devices."""
    if devices is not None:
        _states(model, F_ext, Q=Q, QD=QD, TAU=TAU)  # errors name the whole batch
        return _sharded(_fd, devices, model, Q, QD, TAU, F_ext)
    return _fd_jit(model, Q, QD, TAU, F_ext)


def inverse_dynamics(model, Q, QD, QDD, F_ext=None, *, devices=None):
    """`jaxrbd.inverse_dynamics` for a batch: `Q (N, nq)`, `QD, QDD (N, nv)`, optional
    `F_ext (N, nbodies, 6)` -> `(N, nv)`. `model` may be a `stack_models` batch of N.
    `devices` (``"all"`` or a sequence) splits the batch over those devices."""
    if devices is not None:
        _states(model, F_ext, Q=Q, QD=QD, QDD=QDD)
        return _sharded(_id, devices, model, Q, QD, QDD, F_ext)
    return _id_jit(model, Q, QD, QDD, F_ext)


def mass_matrix(model, Q, *, devices=None):
    """`jaxrbd.mass_matrix` for a batch: `Q (N, nq)` -> `(N, nv, nv)`. `model` may be a
    `stack_models` batch of N. `devices` (``"all"`` or a sequence) splits the batch over
    those devices."""
    if devices is not None:
        _states(model, Q=Q)
        return _sharded(_mm, devices, model, Q)
    return _mm_jit(model, Q)


# ----------------------------------------------------------------------------- sensitivities


def _fd_derivs(model, Q, QD, TAU, F_ext):
    from ._derivatives import forward_dynamics_derivatives

    _states(model, F_ext, Q=Q, QD=QD, TAU=TAU)
    return _vmap(forward_dynamics_derivatives, model, Q, QD, TAU, F_ext)


def _id_derivs(model, Q, QD, QDD, F_ext):
    from ._derivatives import inverse_dynamics_derivatives

    _states(model, F_ext, Q=Q, QD=QD, QDD=QDD)
    return _vmap(inverse_dynamics_derivatives, model, Q, QD, QDD, F_ext)


def _fd_param(model, Q, QD, TAU, F_ext):
    from ._derivatives import forward_dynamics_parameter_derivatives

    _states(model, F_ext, Q=Q, QD=QD, TAU=TAU)
    return _vmap(forward_dynamics_parameter_derivatives, model, Q, QD, TAU, F_ext)


def _regressor(model, Q, QD, QDD, armature):
    from ._parameters import inverse_dynamics_regressor

    _states(model, Q=Q, QD=QD, QDD=QDD)
    return _vmap(
        lambda m, q, qd, qdd: inverse_dynamics_regressor(m, q, qd, qdd, armature=armature),
        model, Q, QD, QDD,
    )


_fd_derivs_jit, _id_derivs_jit = _jit(_fd_derivs), _jit(_id_derivs)
_fd_param_jit = _jit(_fd_param)
_regressor_jit = _jit(_regressor, static_argnames="armature")


def forward_dynamics_derivatives(model, Q, QD, TAU, F_ext=None, *, devices=None):
    """`jaxrbd.forward_dynamics_derivatives` for a batch: `Q (N, nq)`, `QD, TAU (N, nv)`,
    optional `F_ext (N, nbodies, 6)` -> `(dQDD_dQ, dQDD_dQD, dQDD_dTAU)`, each `(N, nv, nv)`.
    `model` may be a `stack_models` batch of N.
    `devices` (``"all"`` or a sequence) splits the batch over those devices."""
    if devices is not None:
        _states(model, F_ext, Q=Q, QD=QD, TAU=TAU)
        return _sharded(_fd_derivs, devices, model, Q, QD, TAU, F_ext)
    return _fd_derivs_jit(model, Q, QD, TAU, F_ext)


def inverse_dynamics_derivatives(model, Q, QD, QDD, F_ext=None, *, devices=None):
    """`jaxrbd.inverse_dynamics_derivatives` for a batch: `Q (N, nq)`, `QD, QDD (N, nv)`,
    optional `F_ext (N, nbodies, 6)` -> `(dTAU_dQ, dTAU_dQD, H)`, each `(N, nv, nv)`.
    `model` may be a `stack_models` batch of N.
    `devices` (``"all"`` or a sequence) splits the batch over those devices."""
    if devices is not None:
        _states(model, F_ext, Q=Q, QD=QD, QDD=QDD)
        return _sharded(_id_derivs, devices, model, Q, QD, QDD, F_ext)
    return _id_derivs_jit(model, Q, QD, QDD, F_ext)


def forward_dynamics_parameter_derivatives(model, Q, QD, TAU, F_ext=None, *, devices=None):
    """`jaxrbd.forward_dynamics_parameter_derivatives` for a batch: `Q (N, nq)`,
    `QD, TAU (N, nv)`, optional `F_ext (N, nbodies, 6)` -> `(N, nv, 10 nbodies)`
    (columns in the order of ``model.inertia.ravel()``). `model` may be a
    `stack_models` batch of N.
    `devices` (``"all"`` or a sequence) splits the batch over those devices.

    Example:
        >>> Q = jnp.stack([q, q0, q1]); Z = jnp.zeros((3, model.nv))
        >>> jaxrbd.batched.forward_dynamics_parameter_derivatives(model, Q, Z, Z).shape
        (3, 9, 40)
    """
    if devices is not None:
        _states(model, F_ext, Q=Q, QD=QD, TAU=TAU)
        return _sharded(_fd_param, devices, model, Q, QD, TAU, F_ext)
    return _fd_param_jit(model, Q, QD, TAU, F_ext)


def inverse_dynamics_regressor(model, Q, QD, QDD, *, armature=False, devices=None):
    """`jaxrbd.inverse_dynamics_regressor` for a batch: `Q (N, nq)`, `QD, QDD (N, nv)` ->
    `(N, nv, 10 nbodies)` (`(N, nv, 10 nbodies + nv)` with ``armature``). Stacking the
    rows of a trajectory gives the least-squares matrix of parameter identification.
    `model` may be a `stack_models` batch of N.
    `devices` (``"all"`` or a sequence) splits the batch over those devices.

    Example:
        >>> Q = jnp.stack([q, q0, q1]); Z = jnp.zeros((3, model.nv))
        >>> jaxrbd.batched.inverse_dynamics_regressor(model, Q, Z, Z).shape
        (3, 9, 40)
    """
    if devices is not None:
        _states(model, Q=Q, QD=QD, QDD=QDD)
        return _sharded(_regressor, devices, model, Q, QD, QDD, armature=armature)
    return _regressor_jit(model, Q, QD, QDD, armature=armature)


def inverse_dynamics_parameter_derivatives(model, Q, QD, QDD):
    """Deprecated alias of `jaxrbd.batched.inverse_dynamics_regressor` (the same
    matrices); warns once (`DeprecationWarning`)."""
    warn_deprecated("jaxrbd.batched.inverse_dynamics_parameter_derivatives",
                    "jaxrbd.batched.inverse_dynamics_regressor")
    return _regressor_jit(model, Q, QD, QDD, armature=False)


# ----------------------------------------------------------------------------- contacts


def _fdc(model, Q, QD, TAU, constraints, F_ext, method, check_rank, rcond):
    from ._contacts import forward_dynamics_contacts as one

    def f(m, q, v, t, fe):
        return one(m, q, v, t, constraints, method, fe, check_rank=check_rank, rcond=rcond)

    _states(model, F_ext, Q=Q, QD=QD, TAU=TAU)
    return _vmap(f, model, Q, QD, TAU, F_ext)


def _imp(model, Q, QD_minus, constraints, restitution, method, rcond):
    from ._contacts import contact_impulses as one

    def f(m, q, v):
        return one(m, q, v, constraints, restitution, method, return_impulses=True, rcond=rcond)

    _states(model, Q=Q, QD=QD_minus)
    return _vmap(f, model, Q, QD_minus)


_fdc_jit = _jit(_fdc, static_argnames=("method", "check_rank", "rcond"))
_imp_jit = _jit(_imp, static_argnames=("method", "rcond"))


def forward_dynamics_contacts(
    model, Q, QD, TAU, constraints, method="kkt", F_ext=None, *, check_rank=False, rcond=None,
    devices=None,
):
    """`jaxrbd.forward_dynamics_contacts` for a batch (the contact KKT solves):
    `Q (N, nq)`, `QD, TAU (N, nv)`, optional `F_ext (N, nbodies, 6)`, one `ConstraintSet`
    shared by the batch -> `(QDD (N, nv), LAM (N, m))`. `model` may be a `stack_models`
    batch of N. Compiled once per model structure, constraint set and `method`. On a CPU
    the states run in blocks that keep each block's dense matrices in cache
    (`jaxrbd._core.backend.contact_block`). `devices` (``"all"`` or a sequence) splits
    the batch over those devices.

    Example:
        >>> cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
        >>> Q = jnp.stack([q, q0, q1]); Z = jnp.zeros((3, model.nv))
        >>> QDD, LAM = jaxrbd.batched.forward_dynamics_contacts(model, Q, Z, Z, cs)
        >>> QDD.shape, LAM.shape
        ((3, 9), (3, 3))
    """
    static = {"method": method, "check_rank": check_rank, "rcond": rcond}
    if devices is not None:
        _states(model, F_ext, Q=Q, QD=QD, TAU=TAU)
        return _sharded(_fdc, devices, model, Q, QD, TAU, constraints, F_ext, shared=(3,),
                        **static)
    return _fdc_jit(model, Q, QD, TAU, constraints, F_ext, **static)


def contact_impulses(model, Q, QD_minus, constraints, restitution=0.0, method="kkt", *,
                     rcond=None, devices=None):
    """`jaxrbd.contact_impulses` for a batch: `Q (N, nq)`, `QD_minus (N, nv)` ->
    `(QD_plus (N, nv), IMPULSES (N, m))`; `restitution` a scalar or `(m,)`, shared by the
    batch. `model` may be a `stack_models` batch of N. Blocked on a CPU as
    `forward_dynamics_contacts`; `devices` (``"all"`` or a sequence) splits the batch over
    those devices."""
    if devices is not None:
        _states(model, Q=Q, QD=QD_minus)
        return _sharded(_imp, devices, model, Q, QD_minus, constraints,
                        jnp.asarray(restitution), shared=(2, 3), method=method, rcond=rcond)
    return _imp_jit(model, Q, QD_minus, constraints, restitution, method=method, rcond=rcond)


# ----------------------------------------------------------------------------- rollouts


def rollout(
    model,
    Q0,
    QD0,
    TAU_SEQ,
    dt,
    integrator="rk4",
    *,
    n_steps=None,
    policy=None,
    forces=(),
    dynamics=None,
    checkpoint=None,
    devices=None,
):
    """`jaxrbd.rollout` for a batch of initial states, sharded over devices.

    Each sample is an independent `jaxrbd.rollout` with the same `dt`, integrator,
    `policy`, `forces`, `dynamics` and `checkpoint`. The batch axis is split over a 1-D
    `jax.sharding.Mesh` of `devices` (`jax.shard_map`, inputs placed with a
    `NamedSharding`); the batch is padded with copies of sample 0 to a multiple of the
    device count, and the padding is dropped from the results. Inside each device the
    samples run in blocks sized for those devices (`jaxrbd._core.backend.block_size`), each
    block one vmapped rollout.
    Results equal `jax.vmap(jaxrbd.rollout)` and do not depend on the device count.

    Args:
        model: a `Model`, shared by the batch.
        Q0: initial configurations `(N, nq)`.
        QD0: initial velocities `(N, nv)` [rad/s | m/s].
        TAU_SEQ: generalized forces `(N, n_steps, nv)` [N m | N], or ``None`` with
            `policy` (then vmapped over the batch).
        dt: time step [s], a positive scalar.
        integrator: ``"euler"``, ``"semi_implicit_euler"`` or ``"rk4"`` (see `jaxrbd.step`).
        n_steps: number of steps; required with `policy`, checked against `TAU_SEQ`.
        policy: ``(t, q, qd) -> tau (nv,)`` for one sample; replaces `TAU_SEQ`.
        forces: callables ``f(model, q, qd) -> (nv,)`` added to the torques at every stage.
        dynamics: optional ``(model, q, qd, tau) -> qdd`` replacing `jaxrbd.forward_dynamics`.
        checkpoint: gradient checkpointing of each sample's scan, as in `jaxrbd.rollout`.
        devices: ``"all"`` or a sequence of devices to shard over; default (``None``)
            `jax.devices()`, all of the default backend. On CPU,
            ``XLA_FLAGS=--xla_force_host_platform_device_count=K`` (set before JAX
            starts) splits the host into ``K`` devices.

    Returns:
        ``(QS, QDS)``, `(N, n_steps + 1, nq)` and `(N, n_steps + 1, nv)`.

    Raises:
        ValueError: wrong shapes or batch sizes, an empty `devices`, and every error of
            `jaxrbd.rollout`.

    Example:
        >>> Q0 = jnp.broadcast_to(q, (8, model.nq)); QD0 = jnp.zeros((8, model.nv))
        >>> TAU = jnp.zeros((8, 20, model.nv))
        >>> QS, QDS = jaxrbd.batched.rollout(model, Q0, QD0, TAU, 1e-3, "semi_implicit_euler")
        >>> QS.shape, QDS.shape
        ((8, 21, 9), (8, 21, 9))
    """
    from ._integrators import rollout_batched

    with jax.named_scope("jaxrbd.batched.rollout"):
        return rollout_batched(
            model,
            Q0,
            QD0,
            TAU_SEQ,
            dt,
            integrator,
            n_steps=n_steps,
            policy=policy,
            forces=forces,
            dynamics=dynamics,
            checkpoint=checkpoint,
            devices=devices,
        )


__all__ += ["rollout"]


def ground_rollout(
    model,
    Q0,
    QD0,
    TAU_SEQ,
    dt,
    contacts,
    terrain,
    contact_model="hard",
    *,
    n_steps=None,
    policy=None,
    checkpoint=None,
    devices=None,
):
    """`jaxrbd.ground.rollout` for a batch of initial states, in blocks, sharded over devices.

    Each sample is an independent `jaxrbd.ground.rollout` with the same `dt`, contact
    points, terrain, contact model, `policy` and `checkpoint`. The batch is split over a
    1-D mesh of `devices` as in `rollout`; inside a device the samples run in blocks
    (on a CPU of `jaxrbd._core.backend.contact_block` samples), each block one vmapped
    rollout whose per-sample matrices stay in cache for all its steps: on a CPU this runs
    large batches faster than `jax.vmap` of `jaxrbd.ground.rollout` over the whole batch,
    with the same results. Call it inside `jax.jit` (or `jaxrbd.jit`) when it runs more
    than once: called plainly, each call traces and compiles the rollout again.

    Args:
        model: a `Model`, shared by the batch.
        Q0: initial configurations `(N, nq)`; QD0: initial velocities `(N, nv)`.
        TAU_SEQ: generalized forces `(N, n_steps, nv)`, or ``None`` with `policy`.
        dt: time step [s].
        contacts: a `jaxrbd.ground.ContactPoints`, shared by the batch.
        terrain: a `jaxrbd.ground.Plane` or `jaxrbd.ground.Heightfield`, shared.
        contact_model: ``"hard"``, ``"compliant"`` or a parameter object, as in
            `jaxrbd.ground.step`.
        n_steps: number of steps (required with `policy`).
        policy: ``(t, q, qd) -> tau (nv,)`` for one sample; replaces `TAU_SEQ`.
        checkpoint: gradient checkpointing of each sample's scan, as in
            `jaxrbd.ground.rollout`.
        devices: the devices to shard over; default `jax.devices()`.

    Returns:
        ``(QS, QDS, INFO)``: `(N, n_steps + 1, nq)`, `(N, n_steps + 1, nv)` and a
        `jaxrbd.ground.ContactInfo` whose arrays lead with `(N, n_steps)`.

    Raises:
        ValueError, TypeError: wrong shapes or batch sizes, an empty `devices`, and every
            error of `jaxrbd.ground.rollout`.

    Example:
        >>> tip = jaxrbd.ground.ContactPoints.create(model, [("body_3", [0.0, 0.0, -1.0])])
        >>> Q0 = jnp.broadcast_to(q, (4, model.nq)); QD0 = jnp.zeros((4, model.nv))
        >>> QS, QDS, info = jaxrbd.batched.ground_rollout(
        ...     model, Q0, QD0, jnp.zeros((4, 10, model.nv)), 1e-3, tip,
        ...     jaxrbd.ground.Plane(-3.5))
        >>> QS.shape, info.force.shape
        ((4, 11, 9), (4, 10, 1, 3))
    """
    from .ground import rollout_batched

    with jax.named_scope("jaxrbd.batched.ground_rollout"):
        return rollout_batched(model, Q0, QD0, TAU_SEQ, dt, contacts, terrain, contact_model,
                               n_steps=n_steps, policy=policy, checkpoint=checkpoint,
                               devices=devices)


__all__ += ["ground_rollout"]
