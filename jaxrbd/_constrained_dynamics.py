"""Inverse dynamics of constrained, underactuated systems (RBDL 3's
``InverseDynamicsConstraints`` and ``InverseDynamicsConstraintsRelaxed``).

A floating base in contact or a loop-closed mechanism obeys

    H q̈ + C = Bᵀ τ_a + Gᵀ λ,     G q̈ = γ                                   (1)

where ``B`` selects the actuated velocity coordinates (``τ`` is zero on the others),
``G``/``γ`` come from the `ConstraintSet` (`constraint_jacobian`, `constraint_bias`)
and ``λ`` is the constraint force on the robot (the convention of
`forward_dynamics_contacts`). Given desired accelerations ``q̈*``, not every ``q̈*``
satisfies (1): the unactuated rows ``P (H q̈ + C - Gᵀ λ) = 0`` (``P`` selects the
unactuated coordinates) and the constraints restrict it.

`inverse_dynamics_constraints` realises ``q̈*`` as closely as (1) allows, exactly when
it can: ``q̈`` minimises ``½ |q̈ - q̈*|²_W`` over the accelerations for which some
``λ`` satisfies (1), the minimum-norm ``λ`` is taken among those that realise it, and
``τ = H q̈ + C - Gᵀ λ``. With ``M = P Gᵀ`` and ``Π = 1 - M M⁺`` (the directions of the
unactuated rows the constraint forces cannot reach), the admissible accelerations are

    G q̈ = γ,    Π P (H q̈ + C) = 0,

one KKT solve gives ``q̈`` and ``λ = M⁺ P (H q̈ + C)``. RBDL's operator fixes the actuated
accelerations to ``q̈*`` and solves for the rest; the default weights (one on the
actuated coordinates, zero on the others) give the same result whenever RBDL's system is
consistent, and the closest admissible motion otherwise.

`inverse_dynamics_constraints_relaxed` is RBDL's relaxed operator (after Koch 2015,
with Millard's modification): every actuator acts as a stiff acceleration servo
``τ_a = B C + W (B q̈* - B q̈)`` and ``(q̈, λ)`` is the constrained motion this produces,
i.e. the KKT system of Gauss's principle

    (H + Bᵀ W B) q̈ - Gᵀ λ = Bᵀ W B q̈* - Pᵀ P C,    G q̈ = γ.

It always has a solution (no rank condition on ``P Gᵀ``), the returned ``τ`` reproduces
``(q̈, λ)`` through `forward_dynamics_contacts`, and ``q̈ → q̈*`` on the actuated
coordinates as ``W`` grows when ``q̈*`` is admissible. RBDL's default ``W`` is
``100 B H Bᵀ``.

References: RBDL 3 documentation of ``InverseDynamicsConstraints`` /
``InverseDynamicsConstraintsRelaxed`` (Felis 2017; Millard et al.); H. Koch, "Using
model-based optimal control for conceptional motion generation for the humanoid robot
HRP-2 14 and design investigations for exo-skeletons", PhD thesis, Heidelberg 2015.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._constraints import constraint_bodies, terms
from ._contacts import check_method, check_rcond, kkt_solve
from ._core.checks import as_float, check_f_ext, check_state
from ._dynamics import bias_forces, mass_matrix
from ._model import check_model

__all__ = [
    "actuation_mask",
    "inverse_dynamics_constraints",
    "inverse_dynamics_constraints_relaxed",
    "solve_constrained_system",
]


def actuation_mask(model, actuated=None) -> np.ndarray:
    """Static ``(nv,)`` boolean mask of the actuated velocity coordinates.

    Args:
        model: a `Model`.
        actuated: ``None`` (every coordinate except those of free joints: a floating
            base is unactuated), a boolean sequence of length ``nv``, or a sequence of
            movable joint names (all of a named joint's coordinates are actuated).

    Returns:
        A numpy boolean array `(nv,)`.

    Raises:
        ValueError: a wrong length, an unknown joint name, or no unactuated and no
            actuated coordinate left where one is needed.

    Example:
        >>> int(jaxrbd.actuation_mask(model, ["body_1"]).sum())   # an euler_zyx joint
        3
    """
    check_model(model)
    if actuated is None:
        mask = np.ones(model.nv, dtype=bool)
        for b in model.movable_joint_bodies:
            if model.joint_kind[b] == "free":
                mask[model.v_index(b)] = False
        return mask
    if isinstance(actuated, (str, bytes)) or not isinstance(actuated, (Sequence, np.ndarray)):
        raise TypeError(
            f"actuated must be None, an (nv,) boolean sequence or a list of joint names, got {actuated!r}"
        )
    items = list(np.asarray(actuated).tolist()) if isinstance(actuated, np.ndarray) else list(actuated)
    if items and all(isinstance(a, (bool, np.bool_)) for a in items):
        if len(items) != model.nv:
            raise ValueError(f"actuated has {len(items)} entries, expected {model.nv} = (model.nv,)")
        return np.asarray(items, dtype=bool)
    if all(isinstance(a, str) for a in items):
        mask = np.zeros(model.nv, dtype=bool)
        for name in items:
            model.joint_id(name)  # a clear error for a name that is no movable joint
            mask[model.v_index(name)] = True
        return mask
    raise TypeError(
        "actuated must be None, an (nv,) boolean sequence or a list of joint names, "
        f"got {actuated!r}"
    )


def solve_constrained_system(H, G, c, gamma, method="kkt", *, rcond=None):
    """Solve ``H x = c + Gᵀ λ``, ``G x = γ`` for given matrices (RBDL's
    ``SolveConstrainedSystemDirect`` / ``RangeSpaceSparse`` / ``NullSpace``).

    The solver behind `forward_dynamics_contacts` and `contact_impulses`, for systems
    assembled by hand (e.g. with extra rows or a modified ``H``). Redundant rows get the
    minimum-norm ``λ``; derivatives are implicit (exact for ``G`` of full row rank).

    Args:
        H: `(n, n)` symmetric (positive definite for ``"range_space"`` and
            ``"null_space"``; positive definite on ``null(G)`` for ``"kkt"``).
        G: `(m, n)`. c: `(n,)`. gamma: `(m,)`.
        method: ``"kkt"``, ``"range_space"`` or ``"null_space"`` (see
            `forward_dynamics_contacts`).
        rcond: relative cut-off of the pseudo-inverse (default ``10 (n + m) eps``).

    Returns:
        ``(x, lam)``: `(n,)` and `(m,)`.

    Example:
        >>> x, lam = jaxrbd.solve_constrained_system(jnp.eye(2), jnp.array([[1.0, 1.0]]),
        ...                                          jnp.zeros(2), jnp.array([2.0]))
        >>> x.tolist(), lam.tolist()
        ([1.0, 1.0], [1.0])
    """
    with jax.named_scope("jaxrbd.solve_constrained_system"):
        check_method(method)
        check_rcond(rcond)
        H, G, c, gamma = (jnp.asarray(x) for x in (H, G, c, gamma))
        dtype = jnp.result_type(H, G, c, gamma, float)
        H, G, c, gamma = (x.astype(dtype) for x in (H, G, c, gamma))
        n = H.shape[0] if H.ndim == 2 else -1
        if H.shape != (n, n):
            raise ValueError(f"H has shape {H.shape}, expected a square (n, n) matrix")
        if G.ndim != 2 or G.shape[1] != n:
            raise ValueError(f"G has shape {G.shape}, expected (m, {n})")
        if c.shape != (n,):
            raise ValueError(f"c has shape {c.shape}, expected ({n},)")
        if gamma.shape != (G.shape[0],):
            raise ValueError(f"gamma has shape {gamma.shape}, expected ({G.shape[0]},)")
        return kkt_solve(method, rcond, H, G, c, gamma)


def _qdd_desired(model, qdd_desired):
    (x,) = check_state(model, qdd_desired=qdd_desired)
    return x


def _system(model, q, qd, constraints, f_ext):
    bodies = constraint_bodies(model, constraints)
    f_ext = check_f_ext(model, f_ext)
    H = mass_matrix(model, q)
    C = bias_forces(model, q, qd, f_ext)
    G, gamma = terms(model, q, qd, constraints, bodies)
    return H, C, G, gamma


class Parts(NamedTuple):
    """What the constrained solvers read from a model: ``mask(model, actuated)`` (the
    actuated coordinates, `actuation_mask`) and ``system(model, q, qd, constraints,
    f_ext)`` -> ``(H, C, G, gamma)``. `jaxrbd._coupled` gives a `CoupledModel`'s."""

    mask: Callable
    system: Callable


_PLAIN = Parts(actuation_mask, _system)


def _weights(model, weights, mask):
    if weights is None:
        return jnp.asarray(mask, model.dtype)
    w = as_float("weights", weights, model.dtype)
    if w.shape != (model.nv,):
        raise ValueError(f"weights has shape {w.shape}, expected ({model.nv},) = (model.nv,)")
    return w


def inverse_dynamics_constraints(
    model,
    q,
    qd,
    qdd_desired,
    constraints,
    actuated=None,
    weights=None,
    f_ext=None,
    *,
    return_qdd=False,
    rcond=None,
):
    """Actuator forces and constraint forces that realise desired accelerations of an
    underactuated, constrained system (RBDL's ``InverseDynamicsConstraints``).

    Solves, for the admissible motions of ``H q̈ + C = Bᵀ τ_a + Gᵀ λ``, ``G q̈ = γ``
    (``τ`` zero on the unactuated coordinates), ``min ½ |q̈ - q̈*|²_W``; among the forces
    realising the optimal ``q̈`` it returns the minimum-norm ``λ`` (module docstring).
    When the constraint forces can act on every unactuated direction (``P Gᵀ`` of full
    row rank: a floating base standing on enough contacts, a loop-closed mechanism),
    every ``q̈`` with ``G q̈ = γ`` is admissible, and the actuated accelerations are
    realised exactly whenever the constraints allow them. ``O(nv³ + m³)``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocity `(nv,)`.
        qdd_desired: desired accelerations `(nv,)` [rad/s² | m/s²]; entries with weight
            zero (by default the unactuated ones) are ignored.
        constraints: a `ConstraintSet` with ``m`` rows (Baumgarte terms included in ``γ``).
        actuated: which coordinates carry actuator forces (`actuation_mask`); default:
            all but those of free joints.
        weights: `(nv,)` non-negative weights ``W`` of the acceleration error; default
            one on the actuated coordinates, zero on the others.
        f_ext: optional `(nbodies, 6)` external forces, world coordinates at the world
            origin.
        return_qdd: also return the realised ``q̈``.
        rcond: relative cut-off of the pseudo-inverses (default ``10 (nv + m) eps``).

    Returns:
        ``(tau, lam)`` or ``(tau, lam, qdd)``: generalized forces `(nv,)` (exactly zero on
        the unactuated coordinates) [N·m | N], constraint forces `(m,)` on the robot
        (as `forward_dynamics_contacts`), realised accelerations `(nv,)`. With them,
        ``forward_dynamics_contacts(model, q, qd, tau, constraints)`` gives ``qdd``.

    Raises:
        ValueError: bad shapes, ``actuated`` or ``weights``.

    Example:
        >>> cs = jaxrbd.ConstraintSet.loops([("body_1", [0.0, 0.0, -1.0], "body_3", [0.0, 0.0, -1.0])],
        ...                                 axes="position")
        >>> tau, lam = jaxrbd.inverse_dynamics_constraints(model, q, qd, jnp.zeros(9), cs)
        >>> tau.shape, lam.shape
        ((9,), (3,))
    """
    check_model(model)
    return inverse_dynamics_constraints_with(
        _PLAIN, model, q, qd, qdd_desired, constraints, actuated, weights, f_ext, return_qdd, rcond
    )


def inverse_dynamics_constraints_with(parts, model, q, qd, qdd_desired, constraints, actuated, weights,
                                      f_ext, return_qdd, rcond):
    """`inverse_dynamics_constraints` on the model's `Parts` (its mask and system)."""
    with jax.named_scope("jaxrbd.inverse_dynamics_constraints"):
        check_rcond(rcond)
        mask = parts.mask(model, actuated)
        q, qd = check_state(model, q=q, qd=qd)
        qdd_des = _qdd_desired(model, qdd_desired)
        w = _weights(model, weights, mask)
        H, C, G, gamma = parts.system(model, q, qd, constraints, f_ext)
        un = np.flatnonzero(~mask)
        if len(un):
            M = G[:, un].T  # (nu, m): what the constraint forces do on the unactuated rows
            Mp = jnp.linalg.pinv(M, rtol=rcond) if rcond is not None else jnp.linalg.pinv(M)
            Pi = jnp.eye(len(un), dtype=H.dtype) - M @ Mp
            A = jnp.concatenate([G, Pi @ H[un]], axis=0)
            b = jnp.concatenate([gamma, -Pi @ C[un]])
        else:
            A, b = G, gamma
        qdd, _ = kkt_solve("kkt", rcond, jnp.diag(w), A, w * qdd_des, b)
        r = H @ qdd + C
        lam = Mp @ r[un] if len(un) else jnp.zeros(G.shape[0], H.dtype)
        tau = jnp.where(jnp.asarray(mask), r - G.T @ lam, 0.0)
        return (tau, lam, qdd) if return_qdd else (tau, lam)


def inverse_dynamics_constraints_relaxed(
    model,
    q,
    qd,
    qdd_desired,
    constraints,
    actuated=None,
    weights=None,
    f_ext=None,
    method="range_space",
    *,
    return_qdd=False,
    rcond=None,
):
    """RBDL's relaxed constrained inverse dynamics (``InverseDynamicsConstraintsRelaxed``).

    Each actuated coordinate acts as a stiff acceleration servo,
    ``τ_a = B C + W (B q̈* - B q̈)``, and ``(q̈, λ)`` is the constrained motion it
    produces: ``(H + Bᵀ W B) q̈ = Bᵀ W B q̈* - Pᵀ P C + Gᵀ λ``, ``G q̈ = γ`` (module
    docstring). Unlike `inverse_dynamics_constraints` it needs no rank condition on the
    unactuated rows: it always has a solution, which satisfies the equations of motion
    exactly but tracks ``q̈*`` only approximately (better with larger ``W``).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocity `(nv,)`.
        qdd_desired: desired accelerations `(nv,)`; only the actuated entries are used.
        constraints: a `ConstraintSet` with ``m`` rows.
        actuated: as `inverse_dynamics_constraints`.
        weights: the servo gain ``W``: `(na,)` positive weights (a diagonal, in the order
            of the actuated coordinates) or an `(na, na)` symmetric positive definite
            matrix; default RBDL's ``100 B H Bᵀ``.
        f_ext: optional `(nbodies, 6)` external forces, world coordinates at the world
            origin.
        method: the KKT method (``"kkt"``, ``"range_space"``, ``"null_space"``; see
            `forward_dynamics_contacts`).
        return_qdd: also return the realised ``q̈``.
        rcond: as `forward_dynamics_contacts`.

    Returns:
        ``(tau, lam)`` or ``(tau, lam, qdd)`` as `inverse_dynamics_constraints`.

    Raises:
        ValueError: bad shapes, ``actuated``, ``weights`` or ``method``.

    Example:
        >>> cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
        >>> tau, lam, qdd = jaxrbd.inverse_dynamics_constraints_relaxed(
        ...     model, q, qd, jnp.zeros(9), cs, return_qdd=True)
        >>> qdd2, _ = jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs)
        >>> bool(jnp.allclose(qdd, qdd2))
        True
    """
    check_model(model)
    return inverse_dynamics_constraints_relaxed_with(
        _PLAIN, model, q, qd, qdd_desired, constraints, actuated, weights, f_ext, method, return_qdd,
        rcond,
    )


def inverse_dynamics_constraints_relaxed_with(parts, model, q, qd, qdd_desired, constraints, actuated,
                                              weights, f_ext, method, return_qdd, rcond):
    """`inverse_dynamics_constraints_relaxed` on the model's `Parts` (its mask and system)."""
    with jax.named_scope("jaxrbd.inverse_dynamics_constraints_relaxed"):
        check_method(method)
        check_rcond(rcond)
        mask = parts.mask(model, actuated)
        act = np.flatnonzero(mask)
        if len(act) == 0:
            raise ValueError("inverse_dynamics_constraints_relaxed: no actuated coordinate")
        q, qd = check_state(model, q=q, qd=qd)
        qdd_des = _qdd_desired(model, qdd_desired)
        na = len(act)
        if weights is not None:
            W = as_float("weights", weights, model.dtype)
            if W.shape == (na,):
                W = jnp.diag(W)
            elif W.shape != (na, na):
                raise ValueError(
                    f"weights has shape {W.shape}, expected ({na},) or ({na}, {na}) "
                    "(the number of actuated coordinates)"
                )
        H, C, G, gamma = parts.system(model, q, qd, constraints, f_ext)
        if weights is None:
            W = 100.0 * H[np.ix_(act, act)]
        Bm = jnp.asarray(np.eye(model.nv)[act], H.dtype)  # (na, nv) selection
        BWB = Bm.T @ W @ Bm
        Cu = jnp.where(jnp.asarray(mask), 0.0, C)  # Pᵀ P C
        qdd, lam = kkt_solve(method, rcond, H + BWB, G, BWB @ qdd_des - Cu, gamma)
        tau = jnp.where(jnp.asarray(mask), C + BWB @ (qdd_des - qdd), 0.0)
        return (tau, lam, qdd) if return_qdd else (tau, lam)
