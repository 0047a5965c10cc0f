"""Constrained dynamics: contact KKT solves, impulses and assembly (Felis 2017, §2.2-2.3).

Every solve here is one of the KKT system

    [[H, Gᵀ], [G, 0]] [x; -λ] = [b; c]                        (Felis 2017, eq. 7, 10)

by one of three methods, all giving the same ``(x, λ)``:

* ``"kkt"``: the full symmetric system, through its eigendecomposition;
* ``"range_space"``: a Cholesky factor of ``H`` and the Schur complement
  ``G H⁻¹ Gᵀ λ = c - G H⁻¹ b`` (Featherstone & Orin 2008, eq. 21);
* ``"null_space"``: an orthonormal basis ``Z`` of ``null(G)`` from the SVD of ``G``,
  ``x = G⁺ c + Z y`` with ``Zᵀ H Z y = Zᵀ (b - H G⁺ c)`` (Featherstone & Orin 2008, eq. 22).

Redundant constraints (``G`` without full row rank): every method drops the directions
whose eigen/singular value is below ``rcond`` times the largest (a pseudo-inverse), so
``x`` is the exact unique solution whenever ``c`` is consistent, and ``λ`` is the
minimum-norm multiplier. Nothing becomes NaN; ``check_rank=True`` raises instead.

Derivatives are implicit: a `jax.custom_jvp` around the solve differentiates the KKT
equations and solves the same (already factored) system for the tangents, so they are
exact and never differentiate through a factorisation.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

from ._configuration import integrate
from ._constraints import constraint_bodies, frame_poses, jacobian_kernel, residual, terms
from ._core import linalg as _linalg
from ._core.backend import contact_block
from ._core.checks import as_float, check_f_ext, check_state
from ._core.native_vmap import vmap_in_blocks
from ._dynamics import bias_forces, mass_matrix
from ._model import check_model

__all__ = [
    "assemble_q",
    "assemble_qd",
    "contact_impulses",
    "forward_dynamics_contacts",
]

METHODS = ("kkt", "range_space", "null_space")


# ---------------------------------------------------------------- factor / apply


def _cutoff(w, rcond, n):
    """Mask of the eigen/singular values kept by the pseudo-inverse."""
    if rcond is None:
        rcond = 10.0 * n * float(jnp.finfo(w.dtype).eps)
    aw = jnp.abs(w)
    return aw > rcond * jnp.max(aw)


def _safe_inv(w, keep):
    return jnp.where(keep, 1.0 / jnp.where(keep, w, 1.0), 0.0)


def _factor(method, H, G, rcond):
    """Factorisation of the KKT system and a flag: ``G`` lacks full row rank."""
    n, m = H.shape[0], G.shape[0]
    if method == "kkt":
        top = jnp.concatenate([H, G.T], axis=1)
        bottom = jnp.concatenate([G, jnp.zeros((m, m), G.dtype)], axis=1)
        w, V = _linalg.eigh(jnp.concatenate([top, bottom], axis=0))
        keep = _cutoff(w, rcond, n + m)
        return (H, V, _safe_inv(w, keep)), jnp.sum(keep) < n + m
    if method == "range_space":
        L = _linalg.cholesky(H)
        Y = _linalg.solve_triangular(L, G.T, lower=True)  # L⁻¹ Gᵀ
        HinvGT = _linalg.solve_triangular(L, Y, lower=True, trans=True)  # H⁻¹ Gᵀ
        w, U = _linalg.eigh(Y.T @ Y)  # Schur complement G H⁻¹ Gᵀ (PSD)
        keep = _cutoff(w, rcond, m)
        return (H, L, HinvGT, U, _safe_inv(w, keep)), jnp.sum(keep) < m
    # null_space
    U, s, Vt = _linalg.svd(G)
    k = s.shape[0]
    keep = _cutoff(s, rcond, max(n, m))
    Gpinv = Vt[:k].T @ (_safe_inv(s, keep)[:, None] * U[:, :k].T)  # (n, m)
    null = jnp.concatenate([~keep, jnp.ones(n - k, bool)]).astype(H.dtype)
    Z = Vt.T * null[None, :]  # null(G) basis; row-space columns zeroed
    M = Z.T @ H @ Z + jnp.diag(1.0 - null)  # the zeroed directions get y = 0
    return (H, Gpinv, Z, _linalg.cholesky(M)), jnp.sum(keep) < m


def _apply(method, F, G, b, c):
    """Solve the factored system for ``(x, λ)``; linear in ``(b, c)``.

    ``"kkt"`` and ``"range_space"`` add one step of iterative refinement (Wilkinson
    1963; Higham 2002, ch. 12): the residual of the first solution, solved again with
    the same factors. The eigenvectors of the indefinite KKT matrix and the Schur
    complement ``Yᵀ Y`` lose more than an LU solve of the same system (20 times on
    RBDL's spatial biped); one step brings both to its accuracy, about
    ``cond(K) · eps``. The null-space method is accurate without it.
    """
    if method == "null_space":
        return _apply_once(method, F, G, b, c)
    H = F[0]
    x, lam = _apply_once(method, F, G, b, c)
    dx, dlam = _apply_once(method, F, G, b + G.T @ lam - H @ x, c - G @ x)
    return x + dx, lam + dlam


def _apply_once(method, F, G, b, c):
    if method == "kkt":
        _, V, winv = F
        n = b.shape[0]
        z = V @ (winv * (V.T @ jnp.concatenate([b, c])))
        return z[:n], -z[n:]
    if method == "range_space":
        _, L, HinvGT, U, winv = F
        u = _linalg.cho_solve(L, b)
        lam = U @ (winv * (U.T @ (c - G @ u)))
        return u + HinvGT @ lam, lam
    H, Gpinv, Z, Lz = F
    x0 = Gpinv @ c
    y = _linalg.cho_solve(Lz, Z.T @ (b - H @ x0))
    x = x0 + Z @ y
    return x, Gpinv.T @ (H @ x - b)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def kkt_solve(method, rcond, H, G, b, c):
    """``(x, λ)`` with ``H x = b + Gᵀ λ``, ``G x = c``; implicit derivatives."""
    F, _ = _factor(method, H, G, rcond)
    return _apply(method, F, G, b, c)


@kkt_solve.defjvp
def _kkt_solve_jvp(method, rcond, primals, tangents):
    H, G, b, c = primals
    dH, dG, db, dc = tangents
    F, _ = _factor(method, H, G, rcond)
    x, lam = _apply(method, F, G, b, c)
    # d(H x - Gᵀ λ) = db, d(G x) = dc  =>  the same system for (dx, -dλ)
    rb = db - dH @ x + dG.T @ lam
    rc = dc - dG @ x
    dx, dlam = _apply(method, F, G, rb, rc)
    return (x, lam), (dx, dlam)


def solve_checked(method, rcond, check_rank, H, G, b, c, who):
    x, lam = kkt_solve(method, rcond, H, G, b, c)
    if check_rank:
        _, deficient = _factor(method, jax.lax.stop_gradient(H), jax.lax.stop_gradient(G), rcond)
        x = eqx.error_if(
            x,
            deficient,
            f"{who}: the constraint Jacobian G is rank deficient (redundant constraints); "
            "remove them or pass check_rank=False to get the minimum-norm multipliers",
        )
    return x, lam


def _in_blocks(one, model):
    """``one`` (a contact solve of one state) whose `jax.vmap` runs in blocks of
    `jaxrbd._core.backend.contact_block` states: the dense ``(nv, nv)`` and KKT matrices
    of a block stay in cache, where one vmap over thousands of states would stream them
    through memory at every step of the solve."""
    return vmap_in_blocks(one, lambda args: contact_block(model.nv, args[1].dtype.itemsize))


def check_method(method):
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def check_rcond(rcond):
    if rcond is not None and not (isinstance(rcond, (float, int)) and 0 <= rcond < 1):
        raise ValueError(f"rcond must be None or a float in [0, 1), got {rcond!r}")


# ---------------------------------------------------------------- public


def forward_dynamics_contacts(
    model, q, qd, tau, constraints, method="kkt", f_ext=None, *, check_rank=False, rcond=None
):
    """Accelerations and constraint forces of a constrained system (Felis 2017, eq. 7).

    Solves ``H q̈ + C = tau + Gᵀ λ`` with ``G q̈ = gamma`` (`constraint_bias`,
    Baumgarte terms included) for ``(q̈, λ)``: ``O(nv³ + m³)`` after one CRBA, one RNEA
    and one kinematic pass for ``G`` and ``gamma``.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocity `(nv,)`; tau: generalized forces `(nv,)`.
        constraints: a `ConstraintSet` with ``m`` rows.
        method: ``"kkt"`` (full symmetric system), ``"range_space"`` (Cholesky of ``H``
            and the Schur complement ``G H⁻¹ Gᵀ``; usually fastest for few
            constraints) or ``"null_space"`` (basis of ``null(G)`` by SVD). All agree.
        f_ext: optional `(nbodies, 6)` external forces, world coordinates at the world
            origin (row 0 ignored).
        check_rank: raise (`eqx.error_if`, works under `jit`) if ``G`` lacks full row
            rank. Without it, redundant rows give the minimum-norm ``λ`` and the exact
            ``q̈`` (finite, never NaN).
        rcond: relative cut-off of the pseudo-inverse (default ``10 (nv + m) eps``).

    Returns:
        ``(qdd, lam)``: `(nv,)` accelerations and `(m,)` multipliers, the force (or
        torque) of each row on the robot along its axis [N | N·m]. For a
        `ConstraintSet.contacts_3d` contact, its three entries are the contact force on
        the robot in world axes. Derivatives (any mode) are exact, by implicit
        differentiation of the KKT system (``G`` of full rank assumed).

    Raises:
        ValueError: bad shapes, unknown ``method`` or body names.

    Example:
        >>> cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
        >>> qdd, lam = jaxrbd.forward_dynamics_contacts(model, q, qd, tau, cs)
        >>> G = jaxrbd.constraint_jacobian(model, q, cs)
        >>> bool(jnp.allclose(G @ qdd, jaxrbd.constraint_bias(model, q, qd, cs)))
        True
    """
    with jax.named_scope("jaxrbd.forward_dynamics_contacts"):
        check_method(method)
        check_rcond(rcond)
        bodies = constraint_bodies(model, constraints)
        q, qd, tau = check_state(model, q=q, qd=qd, tau=tau)
        f_ext = check_f_ext(model, f_ext)

        def one(model, q, qd, tau, f_ext, constraints):
            H = mass_matrix(model, q)
            C = bias_forces(model, q, qd, f_ext)
            G, gamma = terms(model, q, qd, constraints, bodies)
            return solve_checked(method, rcond, check_rank, H, G, tau - C, gamma,
                          "forward_dynamics_contacts")

        return _in_blocks(one, model)(model, q, qd, tau, f_ext, constraints)


def contact_impulses(
    model,
    q,
    qd_minus,
    constraints,
    restitution=0.0,
    method="kkt",
    *,
    return_impulses=False,
    check_rank=False,
    rcond=None,
):
    """Velocity after an impact that closes the constraints (Felis 2017, eq. 10-12).

    Solves ``H (q̇⁺ - q̇⁻) = Gᵀ Λ`` with ``G q̇⁺ = -e G q̇⁻``: a perfectly inelastic
    impact for ``e = 0`` (the constraint velocities vanish), an elastic one for
    ``e = 1`` (they reverse; kinetic energy is conserved for a single row).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd_minus: velocity before the impact `(nv,)`.
        constraints: a `ConstraintSet` with ``m`` rows.
        restitution: coefficient of restitution ``e``, a scalar or `(m,)` per row.
        method: as `forward_dynamics_contacts`.
        return_impulses: also return ``Λ``.
        check_rank: as `forward_dynamics_contacts`.
        rcond: as `forward_dynamics_contacts`.

    Returns:
        ``qd_plus`` `(nv,)`, or ``(qd_plus, Lambda)`` with ``Lambda`` `(m,)` the impulse
        of each row on the robot [N·s | N·m·s] (world axes for 3-D contacts).

    Example:
        >>> cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
        >>> qd_plus = jaxrbd.contact_impulses(model, q, qd, cs)
        >>> bool(jnp.allclose(jaxrbd.constraint_velocity_residual(model, q, qd_plus, cs), 0.0))
        True
    """
    with jax.named_scope("jaxrbd.contact_impulses"):
        check_method(method)
        check_rcond(rcond)
        bodies = constraint_bodies(model, constraints)
        q, qd_minus = check_state(model, q=q, qd_minus=qd_minus)
        e = as_float("restitution", restitution, model.dtype)
        if e.shape not in ((), (constraints.size,)):
            raise ValueError(
                f"restitution has shape {e.shape}, expected () or ({constraints.size},) = (constraints.size,)"
            )

        def one(model, q, qd_minus, e, constraints):
            H = mass_matrix(model, q)
            R, _ = frame_poses(model, q, constraints, bodies)
            G = jacobian_kernel(model, q, constraints, bodies, R)
            return solve_checked(method, rcond, check_rank, H, G, H @ qd_minus, -e * (G @ qd_minus),
                          "contact_impulses")

        qd_plus, Lam = _in_blocks(one, model)(model, q, qd_minus, e, constraints)
        return (qd_plus, Lam) if return_impulses else qd_plus


def _weights(model, weights):
    if weights is None:
        return jnp.ones(model.nv, model.dtype)
    w = as_float("weights", weights, model.dtype)
    if w.shape != (model.nv,):
        raise ValueError(f"weights has shape {w.shape}, expected ({model.nv},) = (model.nv,)")
    return w


def _tolerance(model, tol):
    if tol is None:
        return float(jnp.finfo(model.dtype).eps) ** 0.75
    if not (isinstance(tol, (float, int)) and tol > 0):
        raise ValueError(f"tol must be a positive float, got {tol!r}")
    return float(tol)


def assemble_q(
    model, q_guess, constraints, weights=None, *, tol=None, max_iter=50, max_step=0.5, rcond=None
):
    """Project a configuration onto the constraint manifold ``φ(q) = 0`` (RBDL's
    ``CalcAssemblyQ``).

    Damped Gauss-Newton on `constraint_residual`: each step is the weighted
    minimum-norm ``Δ`` with ``J Δ = -φ`` (``J`` the exact derivative of ``φ`` along
    `integrate`, redundant rows handled by the pseudo-inverse), clipped to
    ``max |Δ| <= max_step`` and applied with `integrate`, in a bounded
    ``while_loop`` (``max_iter`` steps at most; reverse-mode differentiable).

    Args:
        model: a `Model`.
        q_guess: configuration `(nq,)` to start from.
        constraints: a `ConstraintSet` (loops; contacts and welds use their targets).
        weights: optional `(nv,)` positive weights of the velocity components
            (a larger weight moves that coordinate less); default ones.
        tol: convergence threshold on ``max |φ|`` [m | rad] (default ``eps^0.75``).
        max_iter: the most Gauss-Newton steps.
        max_step: largest step component [rad | m] (the damping).
        rcond: as `forward_dynamics_contacts`.

    Returns:
        ``(q, converged)``: the projected configuration `(nq,)` and a boolean scalar
        (``max |φ(q)| <= tol``).

    Example:
        >>> cs = jaxrbd.ConstraintSet.loops([("body_1", [0.0, 0.0, -1.0], "body_3", [0.0, 0.0, -1.0])],
        ...                                 axes="position")
        >>> q1, ok = jaxrbd.assemble_q(model, q, cs)
        >>> bool(ok), bool(jnp.abs(jaxrbd.constraint_residual(model, q1, cs)).max() < 1e-9)
        (True, True)
    """
    check_model(model)
    with jax.named_scope("jaxrbd.assemble_q"):
        check_rcond(rcond)
        bodies = constraint_bodies(model, constraints)
        (q,) = check_state(model, q=q_guess)
        W = jnp.diag(_weights(model, weights))
        tol = _tolerance(model, tol)
        if not (isinstance(max_iter, int) and max_iter >= 1):
            raise ValueError(f"max_iter must be a positive int, got {max_iter!r}")
        if not (isinstance(max_step, (float, int)) and max_step > 0):
            raise ValueError(f"max_step must be a positive float, got {max_step!r}")

        def phi(qq):
            return residual(model, qq, constraints, bodies)

        def step(carry):
            qq, _, k = carry
            v0 = jnp.zeros(model.nv, model.dtype)
            r = phi(qq)
            J = jax.jacfwd(lambda v: phi(integrate(model, qq, v)))(v0)  # exact, on the manifold
            zero_b = jnp.zeros(model.nv, model.dtype)
            dq, _ = kkt_solve("range_space", rcond, W, J, zero_b, -r)
            scale = jnp.minimum(1.0, max_step / jnp.maximum(jnp.max(jnp.abs(dq)), max_step))
            qq = integrate(model, qq, scale * dq)
            return qq, jnp.max(jnp.abs(phi(qq))), k + 1

        def cond(carry):
            _, err, k = carry
            return (err > tol) & (k < max_iter)

        err0 = jnp.max(jnp.abs(phi(q)))
        q, err, _ = eqx.internal.while_loop(
            cond, step, (q, err0, jnp.asarray(0)), max_steps=max_iter, kind="bounded"
        )
        return q, err <= tol


def assemble_qd(model, q, qd_guess, constraints, weights=None, *, tol=None, rcond=None):
    """Project a velocity onto the constraints, ``G(q) q̇ = 0`` (RBDL's
    ``CalcAssemblyQDot``): the weighted minimum-norm correction
    ``q̇ = argmin ½ |q̇ - q̇_guess|²_W`` subject to ``G q̇ = 0``, one KKT solve.

    Args:
        model: a `Model`.
        q: configuration `(nq,)` (on the constraint manifold, e.g. from `assemble_q`).
        qd_guess: velocity `(nv,)` to correct.
        constraints: a `ConstraintSet`.
        weights: optional `(nv,)` positive weights (a larger weight keeps that component
            closer to its guess); default ones.
        tol: threshold on ``max |G q̇|`` [rad/s | m/s] for the flag (default ``eps^0.75``
            times ``max(1, max |q̇_guess|)``).
        rcond: as `forward_dynamics_contacts`.

    Returns:
        ``(qd, ok)``: the corrected velocity `(nv,)` and whether ``max |G q̇| <= tol``.

    Example:
        >>> cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
        >>> qd1, ok = jaxrbd.assemble_qd(model, q, qd, cs)
        >>> bool(ok)
        True
    """
    check_model(model)
    with jax.named_scope("jaxrbd.assemble_qd"):
        check_rcond(rcond)
        bodies = constraint_bodies(model, constraints)
        q, qd = check_state(model, q=q, qd_guess=qd_guess)
        w = _weights(model, weights)
        tol = _tolerance(model, tol) * jnp.maximum(1.0, jnp.max(jnp.abs(qd)))
        R, _ = frame_poses(model, q, constraints, bodies)
        G = jacobian_kernel(model, q, constraints, bodies, R)
        zero = jnp.zeros(constraints.size, model.dtype)
        qd, _ = kkt_solve("range_space", rcond, jnp.diag(w), G, w * qd, zero)
        return qd, jnp.max(jnp.abs(G @ qd)) <= tol
