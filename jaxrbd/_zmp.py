"""The zero-moment point (RBDL's ``CalcZeroMomentPoint``; Vukobratović & Borovac 2004).

The contact wrench a motion needs is the rate of change of the system's momentum minus
the gravity wrench. Written at the world origin, ``W = [n_O; f]`` with
``f = m (c̈ - g)`` and ``n_O = L̇_O - c × m g``; its moment about a point ``a`` is
``n_a = n_O - a × f``. On the plane through ``a`` with unit normal ``n``, the ZMP is the
point ``p`` where that moment has no tangential component (``n × n_p = 0``):

    p = a + n × n_a / (nᵀ f).

The momentum rate is the sum of the bodies' net forces ``I_i a_i + v_i ×* I_i v_i``
(one RNEA forward pass without gravity), transformed to the world origin.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._core import algebra as al
from ._core.checks import as_float, check_state
from ._energy import com_from_inertias, forces_to_world, moving_inertias, world_inertias
from ._kinematics import node_accelerations_batched, run_native

__all__ = ["plane_vector", "zero_moment_point", "zmp_from"]


def plane_vector(name, x, dtype):
    x = as_float(name, x, dtype)
    if x.shape != (3,):
        raise ValueError(f"{name} has shape {x.shape}, expected (3,)")
    return x


def _momentum_rate_at_origin(model, q, qd, qdd):
    """``[L̇_O; ṗ]`` (world axes, world origin) ``(6, B)``, mass ``()`` and CoM ``(3, B)``."""
    E0, r0, v, a = node_accelerations_batched(model, q, qd, qdd)
    Ic = moving_inertias(model)
    v, a = v[1:], a[1:]
    f = al.inertia_mul(Ic, a) + al.cross_force(v, al.inertia_mul(Ic, v))
    tot, c = com_from_inertias(world_inertias(model, E0, r0))
    return jnp.sum(forces_to_world(E0, r0, f), 0), tot[0], c


def zmp_from(hdot_O, mass, c, g, normal, point):
    """ZMP from the momentum rate at the world origin (all in world axes)."""
    f = hdot_O[3:] - mass * g
    n_O = hdot_O[:3] - jnp.cross(c, mass * g)
    n_a = n_O - jnp.cross(point, f)
    return point + jnp.cross(normal, n_a) / jnp.dot(normal, f)


def zero_moment_point(model, q, qd, qdd, normal=(0.0, 0.0, 1.0), point=(0.0, 0.0, 0.0)):
    """Zero-moment point of a motion on a contact plane (RBDL's ``CalcZeroMomentPoint``).

    The point of the plane (through ``point``, unit normal ``normal``) about which the
    contact wrench that the motion ``(q, qd, qdd)`` needs (the momentum rate minus the
    gravity wrench) has no moment tangent to the plane (Vukobratović & Borovac 2004).
    While it lies inside the support polygon, flat feet need no tipping moment. One
    forward pass over the tree, O(nbodies). Mass rigidly attached to the world is left
    out, as in the centre of mass.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocity `(nv,)`; qdd: acceleration `(nv,)`.
        normal: `(3,)` normal of the contact plane in world coordinates (normalised
            here; its sign does not matter).
        point: `(3,)` a point of the contact plane in world coordinates [m].

    Returns:
        `(3,)` the ZMP in world coordinates [m], on the plane. Infinite or NaN when the
        contact force has no component along ``normal`` (e.g. free fall).

    Raises:
        ValueError: a state vector, ``normal`` or ``point`` has the wrong shape.

    Example:
        >>> p = jaxrbd.zero_moment_point(model, q, qd, jnp.zeros(model.nv))
        >>> p.shape
        (3,)
    """
    with jax.named_scope("jaxrbd.zero_moment_point"):
        q, qd, qdd = check_state(model, q=q, qd=qd, qdd=qdd)
        normal = plane_vector("normal", normal, model.dtype)
        point = plane_vector("point", point, model.dtype)
        normal = normal / jnp.linalg.norm(normal)
        g = model.gravity.astype(model.dtype)
        hdot_O, mass, c = run_native(_momentum_rate_at_origin, model, (q, qd, qdd))
        return zmp_from(hdot_O, mass, c, g, normal, point)
