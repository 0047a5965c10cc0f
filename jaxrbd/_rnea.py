"""Inverse dynamics by the recursive Newton-Euler algorithm (Felis 2017, Alg. 1, RBDA Table 5.1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import _coupling
from ._core import algebra as al
from ._core.checks import check_f_ext, check_state
from ._core.jcalc import joint_velocity_terms, node_inertias
from ._core.native_vmap import native_vmap
from ._core.nodes import Xup_and_S, f_ext_nodes, gravity_acceleration, sched
from ._core.passes import accumulate_forces, velocities_accelerations
from ._model import is_coupled

__all__ = ["inverse_dynamics", "bias_forces", "gravity_forces", "rnea_batched"]


def rnea_batched(model, q, qd, qdd, f_ext=None, gravity=True):
    """RNEA on the batch-trailing layout: ``q (nq, B)``, ``qd, qdd (nv, B)`` -> ``tau (nv, B)``.

    ``f_ext``: ``(nbodies, 6, B)`` or ``None``. ``gravity=False`` drops gravity.
    """
    B = q.shape[-1]
    s = sched(model, B)
    E, r, S = Xup_and_S(model, q)
    vJ, vJc, cJ = joint_velocity_terms(model, q, qd, S)
    qdd_n = jnp.concatenate([jnp.zeros_like(qdd[:1]), qdd], axis=0)
    a_world = gravity_acceleration(model, B, q.dtype)
    if not gravity:
        a_world = jnp.zeros_like(a_world)
    v, a, X0 = velocities_accelerations(
        s, E, r, vJ, vJc, cJ, S * qdd_n[:, None, :], a_world, with_X0=f_ext is not None
    )
    Ic = node_inertias(model)
    # f_i = I_i a_i + v_i x* I_i v_i - f_ext_i, in node coordinates (batched, no recursion)
    f = al.inertia_mul(Ic, a) + al.cross_force(v, al.inertia_mul(Ic, v))
    if f_ext is not None:
        f = f - f_ext_nodes(model, f_ext, *X0)
    f = accumulate_forces(s, E, r, f)
    # the rotors' reaction on their own coordinate (H + diag(armature), Featherstone 2008 §9.4)
    return al.dot(S, f)[1:] + model.armature[:, None] * qdd


#: single-state RNEA; ``f_ext`` may be None (`native_vmap`'s optional arguments). The
#: lambda looks `rnea_batched` up at each trace, so a patched module function is used.
_rnea = native_vmap(lambda m, q, qd, qdd, f: rnea_batched(m, q, qd, qdd, f))


def _single(model, q, qd, qdd, f_ext, gravity, derivatives="analytic"):
    q, qd, qdd = check_state(model, q=q, qd=qd, qdd=qdd)
    f_ext = check_f_ext(model, f_ext)
    from . import _analytic_rules as rules

    if rules.check_derivatives(derivatives) == "analytic":
        return rules.inverse_dynamics(model, q, qd, qdd, f_ext)
    return _rnea(model, q, qd, qdd, f_ext)


def inverse_dynamics(model, q, qd, qdd, f_ext=None, *, derivatives="analytic"):
    """Generalized forces by the recursive Newton-Euler algorithm, O(nbodies).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; quaternion blocks need not be normalised (they are
            normalised inside; a zero quaternion gives NaN).
        qd: velocities `(nv,)` [rad/s | m/s]; body coordinates for free joints.
        qdd: accelerations `(nv,)` [rad/s^2 | m/s^2], the time derivative of `qd`.
        f_ext: optional `(nbodies, 6)` spatial forces `[n; f]` on each body, in world
            coordinates at the world origin [N m; N]; row 0 (world) is ignored.
        derivatives: how `jax.jvp`, `jax.grad`, `jax.jacfwd`, ... differentiate this
            call: ``"analytic"`` (default), a JVP rule built on
            `inverse_dynamics_derivatives` (model leaves by AD of the plain code);
            ``"ad"``, automatic differentiation through the recursions, kept for
            checking the rule. The value is the same.

    Returns:
        `tau`, `(nv,)` [N m | N] with `H(q) qdd + C(q, qd) = tau` (+ the `f_ext` work).

    Raises:
        ValueError: an argument has the wrong shape (message names it).
        TypeError: an argument is not real-valued.

    Example:
        >>> model = jaxrbd.models.triple_pendulum()
        >>> tau = jaxrbd.inverse_dynamics(model, jnp.zeros(9), jnp.zeros(9), jnp.zeros(9))
        >>> tau.shape
        (9,)
    """
    if is_coupled(model):
        return _coupling.inverse_dynamics(model, q, qd, qdd, f_ext)
    with jax.named_scope("jaxrbd.inverse_dynamics"):
        return _single(model, q, qd, qdd, f_ext, True, derivatives)


def bias_forces(model, q, qd, f_ext=None, *, derivatives="analytic"):
    """Coriolis, centrifugal and gravity forces ``C(q, qd)``: `inverse_dynamics` at ``qdd = 0``.

    Args:
        q: `(nq,)`. qd: `(nv,)`. f_ext: optional `(nbodies, 6)`, world coordinates.
        derivatives: ``"analytic"`` (default) or ``"ad"``, as in `inverse_dynamics`.

    Returns:
        `C`, `(nv,)`, with `H qdd + C = tau`.

    Example:
        >>> C = jaxrbd.bias_forces(model, jnp.zeros(model.nq), jnp.ones(model.nv))
    """
    if is_coupled(model):
        return _coupling.bias_forces(model, q, qd, f_ext)
    with jax.named_scope("jaxrbd.bias_forces"):
        qd = check_state(model, qd=qd)[0]
        return _single(model, q, qd, jnp.zeros_like(qd), f_ext, True, derivatives)


def gravity_forces(model, q, *, derivatives="analytic"):
    """Generalized gravity ``g(q)``: `inverse_dynamics` at ``qd = qdd = 0``.

    Args:
        q: `(nq,)`.
        derivatives: ``"analytic"`` (default) or ``"ad"``, as in `inverse_dynamics`.

    Returns:
        `g`, `(nv,)` [N m | N].

    Example:
        >>> g = jaxrbd.gravity_forces(model, jnp.zeros(model.nq))
    """
    if is_coupled(model):
        return _coupling.gravity_forces(model, q)
    with jax.named_scope("jaxrbd.gravity_forces"):
        z = jnp.zeros(model.nv, model.dtype)
        return _single(model, q, z, z, None, True, derivatives)
