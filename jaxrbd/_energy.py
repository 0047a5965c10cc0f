"""Mass properties, momentum and energy of the moving bodies (Felis 2017, §6.5).

Mass rigidly attached to the world (fixed joints to the root of a fixed-base model)
never moves: like Pinocchio and RBDL, it is left out of every quantity here.
All outputs are in world coordinates; momenta are spatial forces ``[angular; linear]``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._core import algebra as al
from ._core.checks import check_state
from ._core.jcalc import node_inertias
from ._core.nodes import sched
from ._core.passes import subtree_sums
from ._kinematics import (
    node_accelerations_batched,
    node_jacobian_batched,
    node_poses_batched,
    node_velocities_batched,
    run_native,
)

__all__ = [
    "center_of_mass",
    "center_of_mass_acceleration",
    "center_of_mass_jacobian",
    "center_of_mass_velocity",
    "centroidal_momentum",
    "centroidal_momentum_bias",
    "centroidal_momentum_matrix",
    "kinetic_energy",
    "potential_energy",
    "system_inertia",
    "total_mass",
]


def moving_inertias(model):
    """Inertias of the moving nodes ``1..nv`` (node coordinates, compact, ``(nv, 10, 1)``)."""
    return node_inertias(model)[1:]


def world_inertias(model, E0, r0):
    """Moving nodes' inertias in world coordinates about the world origin ``(nv, 10, B)``."""
    return al.XT_compact_X(E0[1:], r0[1:], moving_inertias(model))


def forces_to_world(E0, r0, f):
    """Node forces (node coordinates) -> world coordinates at the world origin."""
    return al.XT_force(E0[1:], r0[1:], f)


def _about_com(h0, c):
    """A world-origin momentum (or column block) ``(..., 6, B)`` -> about the CoM ``c (3, B)``."""
    return al.join(al.ang(h0) - al.cross(c, al.lin(h0)), al.lin(h0))


def com_from_inertias(I0):
    tot = jnp.sum(I0, axis=0)  # (10, B)
    return tot, tot[1:4] / tot[0:1]


def total_mass(model):
    """Mass of the moving bodies [kg] (world-attached mass excluded).

    Example:
        >>> round(float(jaxrbd.total_mass(model)), 6)
        0.3
    """
    return jnp.sum(moving_inertias(model)[:, 0, 0])


def center_of_mass(model, q):
    """Centre of mass of the moving bodies in world coordinates, `(3,)` [m].

    NaN for a model whose moving bodies have no mass.

    Example:
        >>> jaxrbd.center_of_mass(model, jnp.zeros(model.nq)).shape
        (3,)
    """
    with jax.named_scope("jaxrbd.center_of_mass"):
        (q,) = check_state(model, q=q)
        return run_native(_center_of_mass, model, (q,))


def _center_of_mass(model, q):
    return com_from_inertias(world_inertias(model, *node_poses_batched(model, q)))[1]


def centroidal_momentum(model, q, qd):
    """Spatial momentum ``[angular about the CoM; linear]`` in world axes, `(6,)`.

    [kg·m²/s, kg·m/s]. Equals ``centroidal_momentum_matrix(model, q) @ qd``.

    Example:
        >>> h = jaxrbd.centroidal_momentum(model, q, qd)
        >>> bool(jnp.allclose(h, jaxrbd.centroidal_momentum_matrix(model, q) @ qd))
        True
    """
    with jax.named_scope("jaxrbd.centroidal_momentum"):
        q, qd = check_state(model, q=q, qd=qd)
        return run_native(_centroidal_momentum, model, (q, qd))


def _centroidal_momentum(model, q, qd):
    E0, r0, v = node_velocities_batched(model, q, qd)
    _, c = com_from_inertias(world_inertias(model, E0, r0))
    h = jnp.sum(forces_to_world(E0, r0, al.inertia_mul(moving_inertias(model), v[1:])), 0)
    return _about_com(h, c)


def centroidal_momentum_matrix(model, q):
    """Centroidal momentum matrix ``A(q)``: ``centroidal_momentum = A @ qd``, `(6, nv)`.

    Column ``k`` is the momentum about the CoM (world axes) that a unit velocity of
    DoF ``k`` gives the subtree it moves (composite inertia times the world-frame
    motion subspace).

    Example:
        >>> jaxrbd.centroidal_momentum_matrix(model, q).shape
        (6, 9)
    """
    with jax.named_scope("jaxrbd.centroidal_momentum_matrix"):
        (q,) = check_state(model, q=q)
        return run_native(_centroidal_momentum_matrix, model, (q,))


def _centroidal_momentum_matrix(model, q):
    E0, r0, S0 = node_jacobian_batched(model, q)
    I0 = world_inertias(model, E0, r0)  # (nv, 10, B)
    _, c = com_from_inertias(I0)
    IC0 = subtree_sums(I0, sched(model, q.shape[-1]))  # composite inertias, world frame
    A0 = al.inertia_mul(IC0, S0)  # (nv, 6, B)
    return jnp.swapaxes(_about_com(A0, c[None]), 0, 1)


def centroidal_momentum_bias(model, q, qd):
    """``Ȧ q̇``: the rate of centroidal momentum at ``q̈ = 0`` (gravity not included), `(6,)`.

    ``d/dt centroidal_momentum = A q̈ + Ȧ q̇`` [N·m, N].

    Example:
        >>> jaxrbd.centroidal_momentum_bias(model, q, qd).shape
        (6,)
    """
    with jax.named_scope("jaxrbd.centroidal_momentum_bias"):
        q, qd = check_state(model, q=q, qd=qd)
        return run_native(_centroidal_momentum_bias, model, (q, qd))


def _centroidal_momentum_bias(model, q, qd):
    E0, r0, v, a = node_accelerations_batched(model, q, qd, jnp.zeros_like(qd))
    Ic = moving_inertias(model)
    _, c = com_from_inertias(world_inertias(model, E0, r0))
    v, a = v[1:], a[1:]
    f = al.inertia_mul(Ic, a) + al.cross_force(v, al.inertia_mul(Ic, v))
    hdot = jnp.sum(forces_to_world(E0, r0, f), 0)
    # d/dt of the shift: -(d c/dt) x l = -(l / M) x l = 0, so only the shift of hdot
    return _about_com(hdot, c)


def center_of_mass_velocity(model, q, qd):
    """Velocity of the centre of mass in world coordinates, `(3,)` [m/s].

    Example:
        >>> v = jaxrbd.center_of_mass_velocity(model, q, qd)
        >>> bool(jnp.allclose(v, jaxrbd.center_of_mass_jacobian(model, q) @ qd))
        True
    """
    with jax.named_scope("jaxrbd.center_of_mass_velocity"):
        return centroidal_momentum(model, q, qd)[3:] / total_mass(model)


def center_of_mass_jacobian(model, q):
    """Jacobian of the centre of mass, `(3, nv)`: ``center_of_mass_velocity = J @ qd``.

    Example:
        >>> jaxrbd.center_of_mass_jacobian(model, q).shape
        (3, 9)
    """
    with jax.named_scope("jaxrbd.center_of_mass_jacobian"):
        return centroidal_momentum_matrix(model, q)[3:] / total_mass(model)


def center_of_mass_acceleration(model, q, qd, qdd):
    """Acceleration of the centre of mass in world coordinates, `(3,)` [m/s²].

    Example:
        >>> jaxrbd.center_of_mass_acceleration(model, q, qd, jnp.zeros(model.nv)).shape
        (3,)
    """
    with jax.named_scope("jaxrbd.center_of_mass_acceleration"):
        (qdd,) = check_state(model, qdd=qdd)
        J = center_of_mass_jacobian(model, q)
        return J @ qdd + centroidal_momentum_bias(model, q, qd)[3:] / total_mass(model)


def kinetic_energy(model, q, qd):
    """Kinetic energy ``qdᵀ H qd / 2`` [J].

    Example:
        >>> H = jaxrbd.mass_matrix(model, q)
        >>> bool(jnp.allclose(jaxrbd.kinetic_energy(model, q, qd), qd @ H @ qd / 2))
        True
    """
    with jax.named_scope("jaxrbd.kinetic_energy"):
        q, qd = check_state(model, q=q, qd=qd)
        return run_native(_kinetic_energy, model, (q, qd))


def _kinetic_energy(model, q, qd):
    v = node_velocities_batched(model, q, qd)[2][1:]
    return 0.5 * jnp.sum(al.dot(v, al.inertia_mul(moving_inertias(model), v)), axis=0)


def potential_energy(model, q):
    """Gravitational potential energy ``-Σ mᵢ gᵀ cᵢ`` of the moving bodies [J].

    Zero for the world-origin CoM height; world-attached mass is excluded.

    Example:
        >>> float(jaxrbd.potential_energy(model, jnp.zeros(model.nq))) < 0.0
        True
    """
    with jax.named_scope("jaxrbd.potential_energy"):
        (q,) = check_state(model, q=q)
        return run_native(_potential_energy, model, (q,))


def _potential_energy(model, q):
    tot = jnp.sum(world_inertias(model, *node_poses_batched(model, q)), axis=0)
    return -al.dot(model.gravity[:, None], tot[1:4])


def system_inertia(model, q, about="world"):
    """Spatial inertia of all moving bodies together, world axes, `(6, 6)`.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        about: ``"world"``: about the world origin; ``"com"``: about the centre of
            mass (the centroidal composite rigid-body inertia ``diag(I_G, M 1)``).

    Returns:
        `(6, 6)` ``[[Ī, h×], [h×ᵀ, M 1]]`` [kg·m², kg·m, kg].

    Example:
        >>> I = jaxrbd.system_inertia(model, q, about="com")
        >>> bool(jnp.allclose(I[3:, 3:], jaxrbd.total_mass(model) * jnp.eye(3)))
        True
    """
    if about not in ("world", "com"):
        raise ValueError(f"about must be 'world' or 'com', got {about!r}")
    with jax.named_scope("jaxrbd.system_inertia"):
        (q,) = check_state(model, q=q)
        return run_native(_system_inertia, model, (q,), (about,))


def _system_inertia(model, q, about):
    tot, c = com_from_inertias(world_inertias(model, *node_poses_batched(model, q)))
    if about == "com":
        # parallel axis: Ī_G = Ī_O - M c× c×ᵀ; h = 0
        M = tot[0:1]
        cx = al.skew(c)
        IG = al.sym3(tot[4:]) - M[None] * al.mm(cx, al.transpose(cx))
        tot = jnp.concatenate([M, jnp.zeros_like(c), al.unsym3(IG)], axis=0)
    return al.blocks_dense(*al.inertia_blocks(tot))
