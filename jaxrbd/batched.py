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
* `rollout`, `ground_rollout`: rollouts in cache-sized blocks of samples;
* ``devices=``: the batch split over several devices (`jaxrbd._core.sharding`).

``devices`` means the same in every function:

* ``None`` (the default): one device, the one an unsharded `jax.jit` call runs on;
* ``"all"``: `jax.devices()`, every device of the default backend (of every process
  after `jax.distributed.initialize`);
* a `jax.sharding.Mesh` (its devices, in mesh order) or a sequence of `jax.Device`.

On a CPU host, ``jax.config.update("jax_num_cpu_devices", 2)`` before JAX starts splits
it into two devices. With devices of several processes, each process passes its own
part of the batch and gets its own part of the results (or passes global arrays and
gets global arrays): see docs/scaling-out.md. Results do not depend on the devices.
`rollout` and `ground_rollout` still split over ``"all"`` by default when more than one
device is visible, with a `FutureWarning`: pass ``devices="all"`` to keep that, or
``devices=None`` for one device, which becomes their default in a future release.

Example:
    >>> Q = jnp.zeros((16, model.nq)); Z = jnp.zeros((16, model.nv))
    >>> jaxrbd.batched.forward_dynamics(model, Q, Z, Z).shape
    (16, 9)
"""

from __future__ import annotations

import functools
import inspect
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ._api import contact_impulses as _contact_impulses
from ._api import forward_dynamics as _forward_dynamics
from ._api import forward_dynamics_contacts as _forward_dynamics_contacts
from ._api import forward_dynamics_derivatives as _forward_dynamics_derivatives
from ._api import (
    forward_dynamics_parameter_derivatives as _forward_dynamics_parameter_derivatives,
)
from ._api import inverse_dynamics as _inverse_dynamics
from ._api import inverse_dynamics_derivatives as _inverse_dynamics_derivatives
from ._api import inverse_dynamics_regressor as _inverse_dynamics_regressor
from ._api import mass_matrix as _mass_matrix
from ._core.checks import as_float, warn_deprecated
from ._core.sharding import check_devices, resolve_devices, shard_batch
from ._coupling import dispatch
from ._integrators import rollout_batched as _rollout_batched
from ._jit import jit as _jit
from .ground import rollout_batched as _ground_rollout_batched

__all__ = [
    "contact_impulses",
    "forward_dynamics",
    "forward_dynamics_contacts",
    "forward_dynamics_derivatives",
    "forward_dynamics_parameter_derivatives",
    "ground_rollout",
    "inverse_dynamics",
    "inverse_dynamics_derivatives",
    "inverse_dynamics_parameter_derivatives",
    "inverse_dynamics_regressor",
    "mass_matrix",
    "n_models",
    "rollout",
    "stack_models",
]


def _check(model, name, x, n, what):
    x = as_float(name, x, model.dtype)
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
    F = as_float("F_ext", F_ext, model.dtype)
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


def _states_plain(model, F_ext=None, **arrays):
    """Check batch-first states (and ``F_ext``) against a single model; a stacked batch
    is checked per model."""
    if n_models(model) is None:
        (first, *_) = _batch(model, **arrays)
        _f_ext(model, F_ext, first.shape[0])


def _checked_per_state(cm, F_ext=None, **arrays):
    """A `CoupledModel`'s states are checked by its public functions, state by state."""


_states = dispatch(_states_plain, _checked_per_state)


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


# ----------------------------------------------------------------------------- the table


def _entry(one, batched, static=()):
    """The batched entry point whose signature and docstring are those of the decorated
    stub, made from ``one``, the function of one state.

    The stub's parameters after ``model`` (``devices`` aside) are passed to ``one`` in
    the stub's order, keyword-only ones by name. Those named in ``batched`` carry the
    batch on axis 0 (``Q`` is checked as ``(N, nq)``, ``F_ext`` as
    ``(N, nbodies, 6)``, the others as ``(N, nv)``), those in ``static`` are hashable
    options (static under jit), and the rest are shared by the batch (a constraint set,
    a restitution). ``devices=None`` runs the compiled batch-first kernel on one device,
    anything else splits the batch over the devices (`shard_batch`).

    The entry point keeps its kernel (``_kernel``, batch first, statics as keywords)
    and its compiled form (``_compiled``) as attributes.
    """

    def make(stub):
        sig = inspect.signature(stub)
        params = [p for n, p in sig.parameters.items() if n not in ("model", "devices")]
        positional = [p.name for p in params if p.kind is not p.KEYWORD_ONLY]
        keyword = [p.name for p in params if p.kind is p.KEYWORD_ONLY]
        arrays = [p.name for p in params if p.name not in static]
        states = [n for n in batched if n != "F_ext"]
        in_axes = tuple(0 if n in batched else None for n in arrays)

        def kernel(model, *xs, **options):
            values = dict(zip(arrays, xs), **options)
            _states(model, values.get("F_ext"), **{n: values[n] for n in states})

            def f(m, *xb):
                v = {**values, **dict(zip(batched, xb))}
                return one(m, *(v[n] for n in positional), **{n: v[n] for n in keyword})

            return _vmap(f, model, *(values[n] for n in batched))

        kernel.__name__ = kernel.__qualname__ = f"_{stub.__name__}_kernel"
        compiled = _jit(kernel, static_argnames=tuple(static) or None)

        @functools.wraps(stub)
        def entry(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            v = bound.arguments
            model, devices = v["model"], v.get("devices")
            xs = [v[n] for n in arrays]
            options = {n: v[n] for n in static}
            if devices is None:
                return compiled(model, *xs, **options)
            check_devices(devices)  # its errors first, then the batch's (whole batch)
            _states(model, v.get("F_ext"), **{n: v[n] for n in states})
            xs = [jnp.asarray(x) if ax is None and isinstance(x, float | int | np.number)
                  else x for x, ax in zip(xs, in_axes)]
            model_axis = None if n_models(model) is None else 0
            return shard_batch(kernel, devices, (model_axis, *in_axes), model, *xs,
                               **options)

        entry._kernel, entry._compiled = kernel, compiled
        return entry

    return make


_STATE = ("Q", "QD", "TAU", "F_ext")
_ID_STATE = ("Q", "QD", "QDD", "F_ext")


# ----------------------------------------------------------------------------- dynamics


@_entry(_forward_dynamics, _STATE)
def forward_dynamics(model, Q, QD, TAU, F_ext=None, *, devices=None):
    """`jaxrbd.forward_dynamics` for a batch: `Q (N, nq)`, `QD, TAU (N, nv)`, optional
    `F_ext (N, nbodies, 6)` -> `(N, nv)`. `model` may be a `stack_models` batch of N.
    `devices` (``None``: one device; ``"all"``, a `Mesh` or a sequence) splits the batch
    over those devices."""


@_entry(_inverse_dynamics, _ID_STATE)
def inverse_dynamics(model, Q, QD, QDD, F_ext=None, *, devices=None):
    """`jaxrbd.inverse_dynamics` for a batch: `Q (N, nq)`, `QD, QDD (N, nv)`, optional
    `F_ext (N, nbodies, 6)` -> `(N, nv)`. `model` may be a `stack_models` batch of N.
    `devices` (``None``: one device; ``"all"``, a `Mesh` or a sequence) splits the batch
    over those devices."""


@_entry(_mass_matrix, ("Q",))
def mass_matrix(model, Q, *, devices=None):
    """`jaxrbd.mass_matrix` for a batch: `Q (N, nq)` -> `(N, nv, nv)`. `model` may be a
    `stack_models` batch of N. `devices` (``None``: one device; ``"all"``, a `Mesh` or a
    sequence) splits the batch over those devices."""


# ----------------------------------------------------------------------------- sensitivities


@_entry(_forward_dynamics_derivatives, _STATE)
def forward_dynamics_derivatives(model, Q, QD, TAU, F_ext=None, *, devices=None):
    """`jaxrbd.forward_dynamics_derivatives` for a batch: `Q (N, nq)`, `QD, TAU (N, nv)`,
    optional `F_ext (N, nbodies, 6)` -> `(dQDD_dQ, dQDD_dQD, dQDD_dTAU)`, each `(N, nv, nv)`.
    `model` may be a `stack_models` batch of N. `devices` (``None``: one device;
    ``"all"``, a `Mesh` or a sequence) splits the batch over those devices."""


@_entry(_inverse_dynamics_derivatives, _ID_STATE)
def inverse_dynamics_derivatives(model, Q, QD, QDD, F_ext=None, *, devices=None):
    """`jaxrbd.inverse_dynamics_derivatives` for a batch: `Q (N, nq)`, `QD, QDD (N, nv)`,
    optional `F_ext (N, nbodies, 6)` -> `(dTAU_dQ, dTAU_dQD, H)`, each `(N, nv, nv)`.
    `model` may be a `stack_models` batch of N. `devices` (``None``: one device;
    ``"all"``, a `Mesh` or a sequence) splits the batch over those devices."""


@_entry(_forward_dynamics_parameter_derivatives, _STATE)
def forward_dynamics_parameter_derivatives(model, Q, QD, TAU, F_ext=None, *, devices=None):
    """`jaxrbd.forward_dynamics_parameter_derivatives` for a batch: `Q (N, nq)`,
    `QD, TAU (N, nv)`, optional `F_ext (N, nbodies, 6)` -> `(N, nv, 10 nbodies)`
    (columns in the order of ``model.inertia.ravel()``). `model` may be a
    `stack_models` batch of N. `devices` (``None``: one device; ``"all"``, a `Mesh` or a
    sequence) splits the batch over those devices.

    Example:
        >>> Q = jnp.stack([q, q0, q1]); Z = jnp.zeros((3, model.nv))
        >>> jaxrbd.batched.forward_dynamics_parameter_derivatives(model, Q, Z, Z).shape
        (3, 9, 40)
    """


@_entry(_inverse_dynamics_regressor, ("Q", "QD", "QDD"), static=("armature",))
def inverse_dynamics_regressor(model, Q, QD, QDD, *, armature=False, devices=None):
    """`jaxrbd.inverse_dynamics_regressor` for a batch: `Q (N, nq)`, `QD, QDD (N, nv)` ->
    `(N, nv, 10 nbodies)` (`(N, nv, 10 nbodies + nv)` with ``armature``). Stacking the
    rows of a trajectory gives the least-squares matrix of parameter identification.
    `model` may be a `stack_models` batch of N. `devices` (``None``: one device;
    ``"all"``, a `Mesh` or a sequence) splits the batch over those devices.

    Example:
        >>> Q = jnp.stack([q, q0, q1]); Z = jnp.zeros((3, model.nv))
        >>> jaxrbd.batched.inverse_dynamics_regressor(model, Q, Z, Z).shape
        (3, 9, 40)
    """


def inverse_dynamics_parameter_derivatives(model, Q, QD, QDD):
    """Deprecated alias of `jaxrbd.batched.inverse_dynamics_regressor` (the same
    matrices); warns once (`DeprecationWarning`)."""
    warn_deprecated("jaxrbd.batched.inverse_dynamics_parameter_derivatives",
                    "jaxrbd.batched.inverse_dynamics_regressor")
    return inverse_dynamics_regressor(model, Q, QD, QDD)


# ----------------------------------------------------------------------------- contacts


def _impulses(model, q, qd_minus, constraints, restitution, method, *, rcond):
    return _contact_impulses(model, q, qd_minus, constraints, restitution, method,
                             return_impulses=True, rcond=rcond)


@_entry(_forward_dynamics_contacts, _STATE, static=("method", "check_rank", "rcond"))
def forward_dynamics_contacts(
    model, Q, QD, TAU, constraints, method="kkt", F_ext=None, *, check_rank=False, rcond=None,
    devices=None,
):
    """`jaxrbd.forward_dynamics_contacts` for a batch (the contact KKT solves):
    `Q (N, nq)`, `QD, TAU (N, nv)`, optional `F_ext (N, nbodies, 6)`, one `ConstraintSet`
    shared by the batch -> `(QDD (N, nv), LAM (N, m))`. `model` may be a `stack_models`
    batch of N. Compiled once per model structure, constraint set and `method`. On a CPU
    the states run in blocks that keep each block's dense matrices in cache
    (`jaxrbd._core.backend.contact_block`). `devices` (``None``: one device; ``"all"``, a
    `Mesh` or a sequence) splits the batch over those devices.

    Example:
        >>> cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
        >>> Q = jnp.stack([q, q0, q1]); Z = jnp.zeros((3, model.nv))
        >>> QDD, LAM = jaxrbd.batched.forward_dynamics_contacts(model, Q, Z, Z, cs)
        >>> QDD.shape, LAM.shape
        ((3, 9), (3, 3))
    """


@_entry(_impulses, ("Q", "QD_minus"), static=("method", "rcond"))
def contact_impulses(model, Q, QD_minus, constraints, restitution=0.0, method="kkt", *,
                     rcond=None, devices=None):
    """`jaxrbd.contact_impulses` for a batch: `Q (N, nq)`, `QD_minus (N, nv)` ->
    `(QD_plus (N, nv), IMPULSES (N, m))`; `restitution` a scalar or `(m,)`, shared by the
    batch. `model` may be a `stack_models` batch of N. Blocked on a CPU as
    `forward_dynamics_contacts`; `devices` (``None``: one device; ``"all"``, a `Mesh` or a
    sequence) splits the batch over those devices."""


# ----------------------------------------------------------------------------- rollouts


class _Default:
    """The default ``devices`` of `rollout` and `ground_rollout` while it moves from
    every device to one (``None``, as in the other functions)."""

    def __repr__(self):
        return "<all devices; deprecated, becomes None>"


_DEFAULT = _Default()


def _rollout_devices(devices, name):
    """The devices of a batched rollout (`resolve_devices`); the default warns where it
    still means more than one device."""
    if devices is _DEFAULT:
        if len(jax.devices()) == 1:
            devices = None
        else:
            warnings.warn(
                f"jaxrbd.batched.{name} splits the batch over all {len(jax.devices())} "
                "devices by default; in a future release its default becomes "
                "devices=None (one device), as in every other jaxrbd.batched function. "
                "Pass devices='all' to keep splitting, or devices=None for one device",
                FutureWarning, stacklevel=3,
            )
            devices = "all"
    return resolve_devices(devices)


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
    devices=_DEFAULT,
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
        devices: ``None`` (one device), ``"all"``, a `Mesh` or a sequence of devices
            to shard over, as in every `jaxrbd.batched` function. Left out, it is still
            ``"all"`` where more than one device is visible, with a `FutureWarning`
            (``None`` in a future release). On CPU,
            ``jax.config.update("jax_num_cpu_devices", K)`` (before JAX starts) splits
            the host into ``K`` devices.

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
    devices = _rollout_devices(devices, "rollout")
    with jax.named_scope("jaxrbd.batched.rollout"):
        return _rollout_batched(
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
    devices=_DEFAULT,
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
        devices: the devices to shard over, as in `rollout` (left out: ``"all"``
            with a `FutureWarning` where more than one device is visible).

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
    devices = _rollout_devices(devices, "ground_rollout")
    with jax.named_scope("jaxrbd.batched.ground_rollout"):
        return _ground_rollout_batched(model, Q0, QD0, TAU_SEQ, dt, contacts, terrain, contact_model,
                               n_steps=n_steps, policy=policy, checkpoint=checkpoint,
                               devices=devices)
