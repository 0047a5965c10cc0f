"""Ground contact: unilateral contacts with Coulomb friction against a terrain.

Collidable spheres on the bodies (`ContactPoints`) meet a terrain (`Plane`,
`Heightfield`); `step` advances the state by one semi-implicit time step under the
contact forces of one of two models, and `rollout` scans it:

* ``"hard"`` (`HardContact`): velocity-level time stepping (Stewart and Trinkle 1996,
  Anitescu and Potra 1997). The post-step velocity ``qd+ = v_free + H^-1 G^T lam``
  satisfies, per contact, Signorini's condition on the normal velocity (shifted by the
  gap, restitution and a position-error correction) and Coulomb's law with the circular
  friction cone, solved on the Delassus matrix ``G H^-1 G^T`` by ADMM (adaptive
  penalty, Newton polish) or projected Gauss-Seidel iterations until a tolerance, with
  the residual reported; its gradients come from the implicit
  function theorem at the solution (`jax.custom_vjp`), not from the iterations.
* ``"compliant"`` (`CompliantContact`): Hunt and Crossley (1975) normal force
  ``k d^p (1 + c d')`` with a regularised Coulomb friction ``-mu f_n u_t / sqrt(|u_t|^2 +
  eps^2)``; smooth, differentiable by plain AD, integrated linearly implicitly in the
  contact forces so that stiff contacts stay stable at millisecond steps.

Contact forces are reported per point in the contact frame, ``[normal; tangent1;
tangent2]`` components along the rows of ``frame`` (world coordinates), acting on the
robot; `ContactInfo.world_force` gives them as world vectors.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._api import Kernels, kernels
from .._core import ffi_contact
from .._core import linalg as _linalg
from .._core.backend import contact_block
from .._core.checks import as_float, check_state, check_vector
from .._core.sharding import blocked_over_devices
from .._integrators import (
    check_batch_inputs,
    check_checkpoint,
    check_controls,
    check_dt,
    check_result,
    rollout_devices,
    scan_steps,
)
from .._model import Model, check_model
from ._geometry import (
    AbstractTerrain,
    ContactPoints,
    Heightfield,
    Plane,
    check_contacts,
    check_terrain,
    contact_frames,
    contact_jacobian,
    tangent_basis,
)
from ._solvers import SOLVERS, lu_solve, solve

__all__ = [
    "AbstractTerrain",
    "CompliantContact",
    "ContactInfo",
    "ContactPoints",
    "HardContact",
    "Heightfield",
    "Plane",
    "contact_frames",
    "contact_problem",
    "rollout",
    "solve_contact_problem",
    "step",
    "tangent_basis",
]


# ---------------------------------------------------------------- contact models


#: The hard solver's default tolerance [m/s] (`HardContact.tolerance`).
_TOLERANCE = 1e-6


def _scalar(x):
    return jnp.asarray(x)


class HardContact(eqx.Module):
    """Rigid unilateral contact with Coulomb friction, velocity-level time stepping.

    Per contact, with ``u+`` the post-step contact velocity ``[u_n; u_t]`` and ``lam`` the
    impulse: ``lam_n >= 0``, ``u_n+ >= target``, complementary; ``|lam_t| <= mu lam_n``
    with maximal dissipation. The normal target is ``-gap/dt`` while apart (the contact
    closes exactly at the end of the step), ``-baumgarte * gap/dt`` when penetrating
    (position-error correction), and at least ``-restitution * u_n-`` at an impact
    (approach speed above ``restitution_threshold``).

    Attributes:
        restitution: Newton's coefficient of restitution ``e`` in [0, 1].
        baumgarte: fraction of a penetration removed per step, in [0, 1].
        restitution_threshold: slowest approach [m/s] that bounces (resting contacts
            must not chatter: keep it above ``|g| dt``).
        regularization: relative diagonal added to the Delassus matrix (makes redundant
            contacts, e.g. four corners of a foot, well posed; the bias it leaves in the
            contact velocities is ``regularization`` times the velocity change).
        solver: ``"admm"`` (default) or ``"pgs"`` (projected Gauss-Seidel: cheaper per
            sweep, but it does not converge on every robot; see the ground-contact
            docs' solver table).
        iterations: the most solver iterations (sweeps) per step; with ``polish`` a solve
            still above ``tolerance`` then takes up to 20 Newton steps, counted in
            `ContactInfo.iterations`.
        tolerance: the residual [m/s] (`ContactInfo.residual`: the largest violation
            of the contact conditions) at which the solver stops, checked every 10
            iterations; ``0`` runs exactly ``iterations``. A step whose solve stops
            above it reports ``ContactInfo.converged = False``.
        admm_rho: ADMM's initial penalty, relative to the mean diagonal of the Delassus
            matrix.
        admm_adaptive: whether ADMM balances its primal and dual residuals by doubling
            or halving the penalty (and refactoring ``A + rho I``) at the checks where
            one exceeds the other tenfold (Boyd et al. 2011, section 3.4.1); ``False``
            keeps ``admm_rho`` fixed.
        polish: whether a check that finds the solve unfinished tries a semismooth
            Newton step on the contact conditions from the current iterate (one dense
            ``3K x 3K`` LU) and restarts the solver from it when it lowers the residual;
            it ends most solves on redundant contact points (flat feet), where the
            first-order iterations stall.

    Example:
        >>> hard = jaxrbd.ground.HardContact(restitution=0.5, iterations=50)
    """

    restitution: Float[Array, ""] = eqx.field(default=0.0, converter=_scalar)
    baumgarte: Float[Array, ""] = eqx.field(default=0.2, converter=_scalar)
    restitution_threshold: Float[Array, ""] = eqx.field(default=0.1, converter=_scalar)
    regularization: Float[Array, ""] = eqx.field(default=1e-6, converter=_scalar)
    solver: str = eqx.field(default="admm", static=True)
    iterations: int = eqx.field(default=100, static=True)
    tolerance: float = eqx.field(default=_TOLERANCE, static=True)
    admm_rho: float = eqx.field(default=0.5, static=True)
    admm_adaptive: bool = eqx.field(default=True, static=True)
    polish: bool = eqx.field(default=True, static=True)

    def __check_init__(self):
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) or self.iterations < 1:
            raise ValueError(f"iterations must be an int >= 1, got {self.iterations!r}")
        if not (isinstance(self.admm_rho, (int, float)) and self.admm_rho > 0):
            raise ValueError(f"admm_rho must be a positive float, got {self.admm_rho!r}")
        for name in ("admm_adaptive", "polish"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if isinstance(self.tolerance, bool) or not (
            isinstance(self.tolerance, (int, float)) and 0 <= self.tolerance < float("inf")
        ):
            raise ValueError(f"tolerance must be a float >= 0 [m/s], got {self.tolerance!r}")


class CompliantContact(eqx.Module):
    """Hunt-Crossley normal force with a regularised Coulomb friction.

    With the penetration ``d = max(-gap, 0)`` and its rate ``d' = -u_n``:
    ``f_n = max(0, k d^p (1 + c d'))``, ``f_t = -mu f_n u_t / sqrt(|u_t|^2 + eps^2)``.
    A sliding contact gets the full Coulomb force; a "sticking" one creeps at
    ``eps s / sqrt(1 - s^2)`` where ``s = |f_t| / (mu f_n)``. The step treats the forces
    linearly implicitly (their derivatives in the contact velocity and, through the
    gap, the position), which keeps stiff contacts stable at ``dt = 1e-3``.

    Attributes:
        stiffness: ``k`` [N/m^p].
        damping: ``c`` [s/m] (Hunt and Crossley: ``c = 3 (1 - e) / (2 v_impact)`` for a
            restitution ``e`` at the impact speed ``v_impact``).
        exponent: ``p`` (1.5: Hertz's sphere on a plane; 1: linear spring).
        friction_velocity: ``eps`` [m/s], the slip speed below which friction is smoothed.
        linearization: how the step treats the forces implicitly. ``"dissipative"``
            (default): only the symmetric dissipative blocks of their derivative (the
            normal stiffness and damping, the tangential friction), which keeps the
            step's matrix symmetric positive definite (a Cholesky solve). ``"full"``:
            the whole ``3 x 3`` derivative per contact (friction's dependence on the
            normal force and the gap included), solved by LU: a little slower, and the
            variant to differentiate. The dissipative one leaves the coupling terms
            explicit, and their linearisation grows without bound over a tumbling
            rollout: its gradients are exact derivatives of the discrete simulation,
            but huge (1e8 and more) and useless. With ``"full"`` and a
            ``friction_velocity`` of about 1e-2 m/s (a softer stick), gradients
            through impacts and tumbling agree with finite differences.

    Example:
        >>> soft = jaxrbd.ground.CompliantContact(stiffness=1e5, damping=2.0)
    """

    stiffness: Float[Array, ""] = eqx.field(default=1e6, converter=_scalar)
    damping: Float[Array, ""] = eqx.field(default=1.0, converter=_scalar)
    exponent: Float[Array, ""] = eqx.field(default=1.5, converter=_scalar)
    friction_velocity: Float[Array, ""] = eqx.field(default=1e-4, converter=_scalar)
    linearization: str = eqx.field(default="dissipative", static=True)

    def __check_init__(self):
        if self.linearization not in ("dissipative", "full"):
            raise ValueError(
                f"linearization must be 'dissipative' or 'full', got {self.linearization!r}")


class ContactInfo(eqx.Module):
    """Per-point contact outputs of a step (stacked over time by `rollout`).

    Attributes:
        force: `(K, 3)` force on the robot [N], components along ``frame``'s rows
            ``[normal; tangent1; tangent2]`` (for the hard model: impulse / dt).
        frame: `(K, 3, 3)` rows ``[n; t1; t2]`` in world coordinates.
        gap: `(K,)` signed gap at the start of the step [m].
        active: `(K,)` whether the point carries a normal force.
        residual: `()` the largest violation of the contact conditions the hard
            solver left [m/s] (`ground.solve_contact_problem`); 0 for the compliant
            model. It carries no gradient.
        iterations: `()` the solver iterations run (0 for the compliant model).
        converged: `()` whether ``residual`` is within the solver's tolerance. Check
            it (``info.converged.all()`` after a rollout): a step whose solve did not
            converge has contact forces that are not the model's.
    """

    force: Float[Array, "K 3"]
    frame: Float[Array, "K 3 3"]
    gap: Float[Array, " K"]
    active: Bool[Array, " K"]
    residual: Float[Array, ""]
    iterations: Int[Array, ""]
    converged: Bool[Array, ""]

    @property
    def world_force(self):
        """`(..., K, 3)`: the forces as world vectors [N]."""
        return jnp.einsum("...ki,...kij->...kj", self.force, self.frame)

    @property
    def total_force(self):
        """`(..., 3)`: the sum of the world forces over the points [N]."""
        return jnp.sum(self.world_force, axis=-2)


def _contact_model(contact_model):
    if isinstance(contact_model, (HardContact, CompliantContact)):
        return contact_model
    if contact_model == "hard":
        return HardContact()
    if contact_model == "compliant":
        return CompliantContact()
    raise ValueError(
        f"contact_model must be 'hard', 'compliant', a HardContact or a CompliantContact, "
        f"got {contact_model!r}"
    )


# ---------------------------------------------------------------- shared terms


def _free_motion(model, k: Kernels, q, qd, contacts, terrain):
    gap, frame, mu, G = contact_jacobian(_kinematics(model), k, q, contacts, terrain)
    H = k.mass_matrix(model, q)
    C = k.bias_forces(model, q, qd)
    return gap, frame, mu, G, H, C


def _delassus(L, G, reg):
    """``(A + R, Y)``: the regularised Delassus matrix ``G H^-1 G^T`` and ``Y = L^-1 G^T``."""
    Y = _linalg.solve_triangular(L, G.T, lower=True)
    A = Y.T @ Y
    d = jnp.diagonal(A)
    # relative to each row, plus a floor for rows the robot cannot move
    R = reg * (d + jnp.mean(d) * 1e-3)
    return A + jnp.diag(R), Y


def _factored_terms(k: Kernels, model, q, qd, tau, G, dt, reg):
    """``(L, A, Y, v)`` by XLA: the Cholesky factor of ``H``, the regularised Delassus
    matrix and ``Y = L^-1 G^T`` (`_delassus`), and ``v = qd + dt H^-1 (tau - C)``."""
    L = _linalg.cholesky(k.mass_matrix(model, q))
    A, Y = _delassus(L, G, reg)
    return L, A, Y, qd + dt * _linalg.cho_solve(L, tau - k.bias_forces(model, q, qd))


def _dynamics_terms(k: Kernels, model, q, qd, tau, G, dt, reg):
    """``(A, W, v)`` of `_factored_terms` with ``W = H^-1 G^T`` (the reference of
    `ffi_contact.hard_terms`)."""
    L, A, Y, v = _factored_terms(k, model, q, qd, tau, G, dt, reg)
    return A, _linalg.solve_triangular(L, Y, lower=True, trans=True), v


def _hard_terms(model, k: Kernels, q, qd, tau, dt, contacts, terrain, p):
    """``(gap, frame, mu, A, c, impulse_velocity, v_free)`` of one step, where
    ``impulse_velocity(lam) = H^-1 G^T lam`` is the velocity change of impulses ``lam``."""
    gap, frame, mu, G = contact_jacobian(_kinematics(model), k, q, contacts, terrain)
    reg = p.regularization.astype(q.dtype)
    if (_native(model) and isinstance(model, Model)  # a coupled model's dynamics are projected
            and ffi_contact.hard_terms_supported(model, q, G)):
        # one native call per state, or per batch under vmap
        reference = functools.partial(_dynamics_terms, k)
        A, W, v = ffi_contact.hard_terms(reference, model, q, qd, tau, G, dt, reg)
        v_free = v + dt * k.frame_rate(model, qd)
        impulse_velocity = lambda lam: W @ lam
    else:
        L, A, Y, v = _factored_terms(k, model, q, qd, tau, G, dt, reg)
        v_free = v + dt * k.frame_rate(model, qd)
        impulse_velocity = lambda lam: _linalg.solve_triangular(L, Y @ lam, lower=True,
                                                                trans=True)
    # v_free: the free velocity in coordinates frozen at the start of the step (`advance`)
    un0 = (G @ qd)[0::3]
    e = p.restitution.astype(q.dtype)
    t_pos = jnp.where(gap >= 0, -gap / dt, -p.baumgarte.astype(q.dtype) * gap / dt)
    impact = (gap + dt * un0 <= 0) & (un0 < -p.restitution_threshold.astype(q.dtype))
    target = jnp.where(impact, jnp.maximum(t_pos, -e * un0), t_pos)
    shift = jnp.concatenate([target[:, None], jnp.zeros((gap.shape[0], 2), q.dtype)], axis=1)
    c = G @ v_free - shift.reshape(-1)
    return gap, frame, mu, A, c, impulse_velocity, v_free


def _limit_work(lam, A, c, converged):
    """The impulses ``t lam``, ``t in [0, 1]``, that do no more work than the solve allows.

    An exact solution satisfies ``lam . (A lam + c) = 0``; then the change of kinetic
    energy ``lam . G v_free + lam . A0 lam / 2`` (``A0 <= A``, the unregularised Delassus
    matrix) is at most ``lam_n . target``, the work the position correction and
    restitution ask for. An unconverged solve (a robot falling with a Delassus matrix
    of condition 1e8, say) can return impulses far from that, which fling the robot. The
    largest ``t`` with ``t lam . c + t^2 lam . A lam / 2 <= 0`` restores the bound;
    converged solves keep ``lam`` exactly (``t = 1``).
    """
    work = lam @ c
    curv = lam @ (A @ lam)
    t = jnp.where(curv > 0, -2.0 * work / jnp.where(curv > 0, curv, 1.0), 1.0)
    t = jnp.where(work + 0.5 * curv > 0, jnp.clip(t, 0.0, 1.0), 1.0)
    return jnp.where(converged, lam, jax.lax.stop_gradient(t) * lam)


def _native(model) -> bool:
    """Whether one state's contact problem is solved by the native kernel
    (`jaxrbd._core.ffi_contact`): where the model (a coupled model's base) asks for the
    ``"kernel"`` traversal, as its dynamics do."""
    return model.traversal == "kernel"


def _kinematics(model):
    """The model the contact kinematics run on: a model of traversal "kernel" runs one
    state's dynamics and contact solve as native kernels, and its kinematics as the XLA
    program of fewest kernels (``"dense"``: one state only, batches keep their schedule;
    the same numbers)."""
    return model.with_traversal("dense") if _native(model) else model


def _step_hard(model, k: Kernels, q, qd, tau, dt, contacts, terrain, p, lam0):
    gap, frame, mu, A, c, impulse_velocity, v_free = _hard_terms(model, k, q, qd, tau, dt,
                                                                 contacts, terrain, p)
    lam, res, its = solve(p.solver, p.iterations, p.admm_rho, p.admm_adaptive, p.polish,
                          p.tolerance, A, c, mu, lam0, _native(model))
    res = jax.lax.stop_gradient(res)
    # with tolerance 0 the solver runs a fixed count: judge it by the default tolerance
    converged = res <= (p.tolerance if p.tolerance > 0 else _TOLERANCE)
    lam = _limit_work(lam, A, c, converged)
    qd1 = v_free + impulse_velocity(lam)
    q1, qd1 = k.advance(model, q, qd1, qd1, dt)
    force = lam.reshape(-1, 3) / dt
    return q1, qd1, ContactInfo(force=force, frame=frame, gap=gap, active=force[:, 0] > 0,
                                residual=res, iterations=its, converged=converged)


def _compliant_law(p, gap, u, mu):
    """Force ``[f_n, f_t1, f_t2]`` of one contact at gap ``gap`` and velocity ``u (3,)``."""
    delta = -gap
    pos = delta > 0
    dpow = jnp.where(pos, jnp.where(pos, delta, 1.0) ** p.exponent.astype(u.dtype), 0.0)
    fn = jnp.maximum(0.0, p.stiffness.astype(u.dtype) * dpow * (1.0 - p.damping.astype(u.dtype) * u[0]))
    eps = p.friction_velocity.astype(u.dtype)
    slip = jnp.sqrt(u[1] ** 2 + u[2] ** 2 + eps * eps)
    ft = -mu * fn * u[1:] / slip
    return jnp.concatenate([fn[None], ft])


def _step_compliant(model, k: Kernels, q, qd, tau, dt, contacts, terrain, p):
    gap, frame, mu, G, H, C = _free_motion(model, k, q, qd, contacts, terrain)
    K = gap.shape[0]
    u = (G @ qd).reshape(K, 3)

    def law_at(g, uk, m):
        # the force at the end of the step, as a function of the end velocity: the
        # gap moves with it, so the linearisation covers stiffness and damping
        implicit = lambda v: _compliant_law(p, g + dt * (v[0] - uk[0]), v, m)
        return implicit(uk), jax.jacfwd(implicit)(uk)

    f0, Jf = jax.vmap(law_at)(gap, u, mu)
    # keep the symmetric dissipative blocks (normal-normal, tangent-tangent): H stays SPD
    Dn = jnp.maximum(-Jf[:, 0, 0], 0.0)
    Dt = -0.5 * (Jf[:, 1:, 1:] + jnp.swapaxes(Jf[:, 1:, 1:], 1, 2))
    D = jnp.zeros((K, 3, 3), q.dtype).at[:, 0, 0].set(Dn).at[:, 1:, 1:].set(Dt)
    if p.linearization == "full":
        D = -Jf
    Gk = G.reshape(K, 3, model.nv)
    GtDG = jnp.einsum("kin,kij,kjm->nm", Gk, D, Gk)
    Hhat = H + dt * GtDG
    # the velocity in coordinates frozen at the start of the step (`advance`): the drift
    # of free joints' body-frame velocities, dt * frame_rate, is explicit
    drift = dt * k.frame_rate(model, qd)
    rhs = tau - C + G.T @ f0.reshape(-1) - GtDG @ drift
    if p.linearization == "full":
        dv = lu_solve(Hhat, rhs)
    else:
        dv = _linalg.cho_solve(_linalg.cholesky(Hhat), rhs)
    qd1 = qd + drift + dt * dv
    du = (G @ (qd1 - qd)).reshape(K, 3)
    force = f0 - jnp.einsum("kij,kj->ki", D, du)
    q1, qd1 = k.advance(model, q, qd1, qd1, dt)
    return q1, qd1, ContactInfo(
        force=force, frame=frame, gap=gap, active=force[:, 0] > 0,
        residual=jnp.zeros((), q.dtype), iterations=jnp.zeros((), jnp.int32),
        converged=jnp.ones((), bool))


def _advance(model, q, qd, tau, dt, contacts, terrain, p, lam0):
    """One step for checked arguments, through the kernels of ``model``'s kind."""
    k = kernels(model)
    if isinstance(p, HardContact):
        return _step_hard(model, k, q, qd, tau, dt, contacts, terrain, p, lam0)
    return _step_compliant(model, k, q, qd, tau, dt, contacts, terrain, p)


def _checked(model, contacts, terrain, contact_model):
    check_model(model)
    check_contacts(model, contacts)
    check_terrain(terrain)
    return _contact_model(contact_model)


def _finite(name, x):
    """``x``, or an error (under `jax.jit` too) if it holds a NaN or an infinity."""
    return eqx.error_if(x, ~jnp.all(jnp.isfinite(x)), f"{name} contains NaN or inf")


def _checked_values(q, qd, terrain, names=("q", "qd")):
    """The state checked for NaN and inf and the terrain's friction for a finite value
    >= 0: traced values (under `jax.jit`, `jax.vmap`) the constructors could not see."""
    q, qd = _finite(names[0], q), _finite(names[1], qd)
    mu = getattr(terrain, "friction", None)
    if mu is not None:
        mu = jnp.asarray(mu)
        bad = ~jnp.all(jnp.isfinite(mu) & (mu >= 0))
        q = eqx.error_if(q, bad, "terrain friction must be a finite coefficient >= 0")
    return q, qd


# ---------------------------------------------------------------- public


def step(model, q, qd, tau, dt, contacts, terrain, contact_model="hard", *, warm_start=None):
    """One semi-implicit Euler step with ground contact.

    ``qd+ = qd + dt H^-1 (tau - C) + H^-1 G^T lam`` with the contact impulses ``lam`` of
    the chosen model, then ``q+ = q (+) qd+ dt`` on the joint manifolds. Cost: one CRBA,
    one RNEA, a Cholesky factor of ``H``, the contact Jacobian and, for the hard model,
    the ``3K x 3K`` Delassus matrix and the fixed iterations of its solver.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; qd: velocities `(nv,)`; tau: generalized forces `(nv,)`.
        dt: time step [s], a positive scalar.
        contacts: `ContactPoints` (``K`` points).
        terrain: `Plane`, `Heightfield` or another `AbstractTerrain`.
        contact_model: ``"hard"`` (default), ``"compliant"``, or a `HardContact` /
            `CompliantContact` with parameters (its numbers are differentiable).
        warm_start: optional `(K, 3)` forces [N] to start the hard solver from (e.g. the
            previous step's `ContactInfo.force`); the result does not depend on it.

    Returns:
        ``(q, qd, info)``: the state after the step and a `ContactInfo`.

    Raises:
        ValueError: wrong shapes, a bad `dt` or contact model.
        TypeError: `contacts` or `terrain` of the wrong type.
        RuntimeError: (`eqx.error_if`, when the step runs, under `jax.jit` too) NaN or
            inf in ``q``, ``qd`` or ``tau``, or a terrain friction that is negative or
            not finite (one traced under `jax.jit`, which `Plane` cannot check).

    Example:
        >>> ground = jaxrbd.ground.Plane(-3.5, friction=0.8)
        >>> tip = jaxrbd.ground.ContactPoints.create(model, [("body_3", [0.0, 0.0, -1.0], 0.0)])
        >>> q1, qd1, info = jaxrbd.ground.step(model, q, jnp.zeros(model.nv), tau, 1e-3, tip, ground)
        >>> info.force.shape, info.active.shape
        ((1, 3), (1,))
    """
    with jax.named_scope("jaxrbd.ground.step"):
        p = _checked(model, contacts, terrain, contact_model)
        q, qd, tau = check_state(model, q=q, qd=qd, tau=tau)
        q, qd = _checked_values(q, qd, terrain)
        tau = _finite("tau", tau)
        dt = check_dt(dt, model.dtype)
        K = len(contacts)
        lam0 = jnp.zeros(3 * K, model.dtype)
        if warm_start is not None:
            ws = as_float("warm_start", warm_start, model.dtype)
            if ws.shape != (K, 3):
                raise ValueError(f"warm_start has shape {ws.shape}, expected ({K}, 3) = (n_points, 3)")
            lam0 = ws.reshape(-1) * dt
        return _advance(model, q, qd, tau, dt, contacts, terrain, p, lam0)


def rollout(
    model,
    q0,
    qd0,
    tau_seq,
    dt,
    contacts,
    terrain,
    contact_model="hard",
    *,
    n_steps=None,
    policy=None,
    checkpoint=None,
):
    """Simulate ``n_steps`` contact steps (`step`) in one `lax.scan`.

    Open loop with ``tau_seq[k]`` held over step ``k``, or closed loop with
    ``tau_seq=None, n_steps=N, policy=lambda t, q, qd: tau`` at ``t = k dt``, as
    `jaxrbd.rollout`. The hard solver starts every step from the previous impulses.
    Works under `jax.jit`, `jax.vmap` (batches of states, torques, terrains, contact
    parameters or models) and `jax.grad` (reverse mode: the hard model's solver has an
    implicit `custom_vjp`); ``checkpoint`` rematerialises segments as in `jaxrbd.rollout`.

    Args:
        model: a `Model`.
        q0: initial configuration `(nq,)`; qd0: initial velocities `(nv,)`.
        tau_seq: `(n_steps, nv)` generalized forces, or ``None`` with `policy`.
        dt: time step [s].
        contacts: as `step`.
        terrain: as `step`.
        contact_model: as `step`.
        n_steps: number of steps (required with `policy`).
        policy: ``(t, q, qd) -> tau (nv,)``.
        checkpoint: ``None``, a segment length, or ``True`` (``ceil(sqrt(n_steps))``).

    Returns:
        ``(qs, qds, info)``: `(n_steps + 1, nq)` and `(n_steps + 1, nv)` with the initial
        state in row 0, and a `ContactInfo` whose arrays have a leading `(n_steps,)` axis
        (row ``k``: the forces acting during step ``k``, and the solver's residual,
        iterations and convergence flag: check ``info.converged.all()``).

    Raises:
        RuntimeError: (`eqx.error_if`, under `jax.jit` too) NaN or inf in ``q0``,
            ``qd0`` or ``tau_seq``, or a terrain friction that is negative or not finite;
            the other errors of `step`.

    Example:
        >>> ground = jaxrbd.ground.Plane(-3.5, friction=0.8)
        >>> tip = jaxrbd.ground.ContactPoints.create(model, [("body_3", [0.0, 0.0, -1.0])])
        >>> qs, qds, info = jaxrbd.ground.rollout(model, q, jnp.zeros(model.nv), None, 1e-3,
        ...     tip, ground, n_steps=20, policy=lambda t, q, qd: -2.0 * qd)
        >>> qs.shape, info.force.shape
        ((21, 9), (20, 1, 3))
    """
    with jax.named_scope("jaxrbd.ground.rollout"):
        p = _checked(model, contacts, terrain, contact_model)
        q0 = check_vector("q0", q0, model.nq, "model.nq", model.dtype)
        qd0 = check_vector("qd0", qd0, model.nv, "model.nv", model.dtype)
        q0, qd0 = _checked_values(q0, qd0, terrain, ("q0", "qd0"))
        dt = check_dt(dt, model.dtype)
        xs, n = check_controls(model, tau_seq, n_steps, policy)
        if policy is None:
            xs = _finite("tau_seq", xs)
        segment = check_checkpoint(checkpoint, n)
        K = len(contacts)

        def body(carry, x):
            q, qd, lam = carry
            if policy is None:
                tau = x
            else:
                tau = check_result("policy", policy(x.astype(dt.dtype) * dt, q, qd), model)
            q, qd, info = _advance(model, q, qd, tau, dt, contacts, terrain, p, lam)
            return (q, qd, jax.lax.stop_gradient(info.force.reshape(-1) * dt)), (q, qd, info)

        lam0 = jnp.zeros(3 * K, model.dtype)
        qs, qds, info = scan_steps(body, (q0, qd0, lam0), xs, n, segment)
        return (
            jnp.concatenate([q0[None], qs], axis=0),
            jnp.concatenate([qd0[None], qds], axis=0),
            info,
        )


def rollout_batched(model, Q0, QD0, TAU_SEQ, dt, contacts, terrain, contact_model="hard", *,
                    n_steps=None, policy=None, checkpoint=None, devices=None, chunk=None):
    """`rollout` for a batch (batch first), in blocks per device, sharded over devices
    (`jaxrbd.batched.ground_rollout`; ``chunk`` default `backend.contact_block` of the
    model on a CPU). Returns ``(QS, QDS, INFO)`` with the batch first."""

    arrays = check_batch_inputs(model, Q0, QD0, TAU_SEQ)
    # the single-sample checks up front, so that their errors name the arguments
    _checked(model, contacts, terrain, contact_model)
    check_dt(dt, model.dtype)
    if (TAU_SEQ is None) == (policy is None):
        check_controls(model, None if TAU_SEQ is None else TAU_SEQ[0], n_steps, policy)
    devices = rollout_devices(devices)
    if chunk is None:
        chunk = contact_block(model.nv, jnp.dtype(model.dtype).itemsize, device=devices[0])

    def one(q0, qd0, tau_seq=None):
        return rollout(model, q0, qd0, tau_seq, dt, contacts, terrain, contact_model,
                       n_steps=n_steps, policy=policy, checkpoint=checkpoint)

    return blocked_over_devices(one, arrays, devices, chunk)


def contact_problem(model, q, qd, tau, dt, contacts, terrain, contact_model="hard"):
    """The hard model's contact problem of one step, for analysis and solver studies.

    Returns:
        ``(A, c, mu)``: the regularised Delassus matrix `(3K, 3K)`, the contact velocity
        offset `(3K,)` (``u+ = A lam + c`` per contact ``[n, t1, t2]``, the normal rows
        shifted by their targets) and the friction coefficients `(K,)`.

    Example:
        >>> tip = jaxrbd.ground.ContactPoints.create(model, [("body_3", [0.0, 0.0, -1.0])])
        >>> A, c, mu = jaxrbd.ground.contact_problem(model, q, qd, tau, 1e-3, tip,
        ...                                          jaxrbd.ground.Plane(-3.5))
        >>> A.shape, c.shape, mu.shape
        ((3, 3), (3,), (1,))
    """
    with jax.named_scope("jaxrbd.ground.contact_problem"):
        p = _checked(model, contacts, terrain, contact_model)
        if not isinstance(p, HardContact):
            raise TypeError("contact_problem is defined for the hard contact model")
        q, qd, tau = check_state(model, q=q, qd=qd, tau=tau)
        dt = check_dt(dt, model.dtype)
        _, _, mu, A, c, _, _ = _hard_terms(model, kernels(model), q, qd, tau, dt, contacts,
                                           terrain, p)
        return A, c, mu


def solve_contact_problem(A, c, mu, contact_model="hard", warm_start=None):
    """Impulses `(3K,)` of a contact problem from `contact_problem` by the model's solver
    (implicit gradients), and the largest violation of the contact conditions [m/s].

    Example:
        >>> A = jnp.eye(3); c = jnp.array([-1.0, 0.5, 0.0]); mu = jnp.array([0.2])
        >>> lam, res = jaxrbd.ground.solve_contact_problem(A, c, mu)
        >>> lam.round(3).tolist(), bool(res < 1e-6)
        ([1.0, -0.2, 0.0], True)
    """
    p = _contact_model(contact_model)
    if not isinstance(p, HardContact):
        raise TypeError("solve_contact_problem needs the hard contact model")
    A = jnp.asarray(A)
    c = jnp.asarray(c, A.dtype)
    mu = jnp.asarray(mu, A.dtype)
    m = A.shape[0]
    if A.shape != (m, m) or m % 3 or c.shape != (m,) or mu.shape != (m // 3,):
        raise ValueError(
            f"A {A.shape}, c {c.shape} and mu {mu.shape} must be (3K, 3K), (3K,) and (K,)"
        )
    lam0 = jnp.zeros(m, A.dtype) if warm_start is None else jnp.asarray(warm_start, A.dtype)
    lam, res, _ = solve(p.solver, p.iterations, p.admm_rho, p.admm_adaptive, p.polish,
                        p.tolerance, A, c, mu, lam0)
    return lam, res

