"""Batched entry points: many states in one call, batch axis first.

These run the algorithms in their native batch-trailing layout (every per-sample
quantity carries the batch as its last, contiguous axis), which vectorises much
better on CPU than `jax.vmap` of the single-state functions. Results equal
`jax.vmap` of the single-state functions. Wrap them in `jax.jit` (compiled once per
model structure and batch size).

Example:
    >>> Q = jnp.zeros((16, model.nq)); Z = jnp.zeros((16, model.nv))
    >>> jaxrbd.batched.forward_dynamics(model, Q, Z, Z).shape
    (16, 9)
"""

from __future__ import annotations

import jax.numpy as jnp

from ._aba import aba_batched
from ._common import _as_float
from ._crba import crba_batched
from ._rnea import rnea_batched
from ._vmap import blocked as _blocked

__all__ = ["forward_dynamics", "inverse_dynamics", "mass_matrix"]

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
    return [x.T for x in out]


def _f_ext(model, F_ext, n):
    if F_ext is None:
        return None
    F = _as_float("F_ext", F_ext, model.dtype)
    if F.shape != (n, model.nbodies, 6):
        raise ValueError(f"F_ext has shape {F.shape}, expected ({n}, {model.nbodies}, 6)")
    return jnp.moveaxis(F, 0, -1)


def _run(impl, model, arrays, F_ext):
    """``impl(model, *arrays[, F])`` in cache blocks; arrays batch-trailing, result batch-first."""
    F = _f_ext(model, F_ext, arrays[0].shape[1])
    if F is not None:
        arrays = (*arrays, F)
    return _blocked(lambda *xs: impl(model, *xs), tuple(arrays)).T


def forward_dynamics(model, Q, QD, TAU, F_ext=None):
    """`jaxrbd.forward_dynamics` for a batch: `Q (N, nq)`, `QD, TAU (N, nv)` -> `(N, nv)`."""
    return _run(aba_batched, model, _batch(model, Q=Q, QD=QD, TAU=TAU), F_ext)


def inverse_dynamics(model, Q, QD, QDD, F_ext=None):
    """`jaxrbd.inverse_dynamics` for a batch: `Q (N, nq)`, `QD, QDD (N, nv)` -> `(N, nv)`."""
    return _run(rnea_batched, model, _batch(model, Q=Q, QD=QD, QDD=QDD), F_ext)


def mass_matrix(model, Q):
    """`jaxrbd.mass_matrix` for a batch: `Q (N, nq)` -> `(N, nv, nv)`."""
    (q,) = _batch(model, Q=Q)
    return jnp.moveaxis(_blocked(lambda q: crba_batched(model, q), (q,)), -1, 0)


def forward_dynamics_derivatives(model, Q, QD, TAU, F_ext=None):
    """`jaxrbd.forward_dynamics_derivatives` for a batch: `Q (N, nq)`, `QD, TAU (N, nv)`,
    optional `F_ext (N, nbodies, 6)` -> `(dQDD_dQ, dQDD_dQD, dQDD_dTAU)`, each `(N, nv, nv)`."""
    from ._derivatives import fd_derivatives_batched

    arrays = _batch(model, Q=Q, QD=QD, TAU=TAU)
    F = _f_ext(model, F_ext, arrays[0].shape[1])
    return fd_derivatives_batched(model, *arrays, *(() if F is None else (F,)))


def inverse_dynamics_derivatives(model, Q, QD, QDD, F_ext=None):
    """`jaxrbd.inverse_dynamics_derivatives` for a batch: `Q (N, nq)`, `QD, QDD (N, nv)`,
    optional `F_ext (N, nbodies, 6)` -> `(dTAU_dQ, dTAU_dQD, H)`, each `(N, nv, nv)`."""
    from ._derivatives import id_derivatives_batched

    arrays = _batch(model, Q=Q, QD=QD, QDD=QDD)
    F = _f_ext(model, F_ext, arrays[0].shape[1])
    return id_derivatives_batched(model, *arrays, *(() if F is None else (F,)))


# -- rollouts (issue 5) --


def rollout(model, Q0, QD0, TAU_SEQ, dt, integrator="rk4", *, n_steps=None, policy=None,
            forces=(), dynamics=None, checkpoint=None, devices=None):
    """`jaxrbd.rollout` for a batch of initial states, sharded over devices.

    Each sample is an independent `jaxrbd.rollout` with the same `dt`, integrator,
    `policy`, `forces`, `dynamics` and `checkpoint`. The batch axis is split over a 1-D
    `jax.sharding.Mesh` of `devices` (`jax.shard_map`, inputs placed with a
    `NamedSharding`); the batch is padded with copies of sample 0 to a multiple of the
    device count, and the padding is dropped from the results. Inside each device the
    samples run in cache-sized blocks (128 on CPU), each block one vmapped rollout.
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
        devices: the devices to shard over; default `jax.devices()` (all of the default
            backend). On CPU, ``XLA_FLAGS=--xla_force_host_platform_device_count=K``
            (set before JAX starts) splits the host into ``K`` devices.

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
    import jax

    from ._integrators import rollout_batched

    with jax.named_scope("jaxrbd.batched.rollout"):
        return rollout_batched(model, Q0, QD0, TAU_SEQ, dt, integrator, n_steps=n_steps,
                               policy=policy, forces=forces, dynamics=dynamics,
                               checkpoint=checkpoint, devices=devices)


__all__ += ["rollout"]
