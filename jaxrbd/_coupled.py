"""The public functions on a `CoupledModel`: each runs its plain namesake on the full
tree (`CoupledModel.base`) through the maps of `jaxrbd._coupling`.

* kinematics: the full tree's, at ``q_full``, ``A qd``, ``A qdd``; Jacobians ``J A``;
* ``H = Aᵀ H_full A``, inverse dynamics ``Aᵀ ID_full``, bias and gravity likewise;
* forward dynamics: the Cholesky solve of ``H qdd = tau - C`` (a coupling may join two
  branches of the tree, where the articulated-body recursion does not apply);
* constraints: ``G_full A`` with the full tree's bias terms, and the contact solvers on
  the reduced ``H``, ``C``, ``G``;
* derivatives: automatic differentiation of the above.

The functions here take the same arguments as their plain namesakes; `jaxrbd._api`
pairs each with it (`jaxrbd._coupling.dispatch`). A public function without a variant
here raises `jaxrbd._coupling.unsupported` on a `CoupledModel`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from . import (
    _actuation,
    _configuration,
    _constrained_dynamics,
    _constraints,
    _contacts,
    _dynamics,
    _energy,
    _hybrid,
    _kinematics,
    _parameters,
    _zmp,
)
from ._core import linalg
from ._core.checks import as_float, check_f_ext, check_state, check_vector, scoped
from ._coupling import expand_q, expand_v, reduce_cols, reduce_forces, reduce_matrix
from ._dynamics import check_derivatives

# ---------------------------------------------------------------- dynamics


# the full tree's kernels under the named scopes of their doors
_mass_matrix = scoped("mass_matrix", _dynamics.mass_matrix_rule)
_bias_forces = scoped("bias_forces", _dynamics.bias_forces_rule)
_point_positions = scoped("point_position", _kinematics.point_positions)
_world_jacobians = scoped("body_jacobian", _kinematics.world_jacobians)
_move = scoped("integrate", _configuration.move)


def mass_matrix_kernel(cm, q):
    """``Aᵀ H_full A`` for a checked ``q``."""
    return reduce_matrix(cm, _mass_matrix(cm.base, expand_q(cm, q)))


def bias_forces_kernel(cm, q, qd):
    """``Aᵀ C_full`` (no ``f_ext``) for checked ``q``, ``qd``."""
    return reduce_forces(cm, _bias_forces(cm.base, expand_q(cm, q), expand_v(cm, qd)))


def forward_dynamics_kernel(cm, q, qd, tau):
    """The Cholesky solve of ``H qdd = tau - C`` for checked arguments (no ``f_ext``)."""
    H = mass_matrix_kernel(cm, q)
    C = bias_forces_kernel(cm, q, qd)
    return linalg.cho_solve(linalg.cholesky(H), tau - C)


def mass_matrix(cm, q, *, derivatives="analytic"):
    check_derivatives(derivatives)  # coupled models differentiate by AD either way
    (q,) = check_state(cm, q=q)
    return mass_matrix_kernel(cm, q)


def inverse_dynamics(cm, q, qd, qdd, f_ext=None, *, derivatives="analytic"):
    check_derivatives(derivatives)  # coupled models differentiate by AD either way
    q, qd, qdd = check_state(cm, q=q, qd=qd, qdd=qdd)
    tau = _dynamics.inverse_dynamics(cm.base, expand_q(cm, q), expand_v(cm, qd), expand_v(cm, qdd), f_ext)
    return reduce_forces(cm, tau)


def bias_forces(cm, q, qd, f_ext=None, *, derivatives="analytic"):
    check_derivatives(derivatives)  # coupled models differentiate by AD either way
    q, qd = check_state(cm, q=q, qd=qd)
    if f_ext is None:
        return bias_forces_kernel(cm, q, qd)
    return reduce_forces(cm, _dynamics.bias_forces(cm.base, expand_q(cm, q), expand_v(cm, qd), f_ext))


def gravity_forces(cm, q, *, derivatives="analytic"):
    check_derivatives(derivatives)  # coupled models differentiate by AD either way
    (q,) = check_state(cm, q=q)
    return reduce_forces(cm, _dynamics.gravity_forces(cm.base, expand_q(cm, q)))


def forward_dynamics(cm, q, qd, tau, f_ext=None, method="aba", *, derivatives="analytic"):
    check_derivatives(derivatives)  # coupled models differentiate by AD either way
    if method not in ("aba", "crba"):
        raise ValueError(f"method {method!r}, expected 'aba' or 'crba'")
    q, qd, tau = check_state(cm, q=q, qd=qd, tau=tau)
    if f_ext is None:
        return forward_dynamics_kernel(cm, q, qd, tau)
    H = mass_matrix_kernel(cm, q)
    C = bias_forces(cm, q, qd, f_ext)
    return linalg.cho_solve(linalg.cholesky(H), tau - C)


def minv_times(cm, q, tau, *, derivatives="analytic"):
    check_derivatives(derivatives)  # coupled models differentiate by AD either way
    (q,) = check_state(cm, q=q)
    L = linalg.cholesky(mass_matrix(cm, q))
    tau = jnp.asarray(tau, cm.dtype)
    if tau.ndim not in (1, 2) or tau.shape[0] != cm.nv:
        raise ValueError(f"tau has shape {tau.shape}, expected ({cm.nv},) or ({cm.nv}, k)")
    return linalg.cho_solve(L, tau)


def hybrid_dynamics(cm, q, qd, tau, qdd, prescribed, f_ext=None):
    """`hybrid_dynamics` on the independent coordinates, by the dense route: with ``K``
    the prescribed and ``U`` the free DoFs, ``H_UU qdd_U = tau_U - C_U - H_UK qdd_K`` and
    ``tau_K = (H qdd + C)_K``."""
    q, qd, tau, qdd = check_state(cm, q=q, qd=qd, tau=tau, qdd=qdd)
    mask = np.asarray(_hybrid.prescribed_mask(cm, prescribed))
    K, U = np.flatnonzero(mask), np.flatnonzero(~mask)
    H = mass_matrix(cm, q)
    C = bias_forces(cm, q, qd, f_ext)
    rhs = tau[U] - C[U] - H[np.ix_(U, K)] @ qdd[K]
    x = linalg.cho_solve(linalg.cholesky(H[np.ix_(U, U)]), rhs) if U.size else rhs
    qdd_out = qdd.at[U].set(x)
    tau_out = tau.at[K].set((H @ qdd_out + C)[K])
    return qdd_out, tau_out


# ---------------------------------------------------------------- derivatives (AD)


def _tangent_jacobian(cm, f, q):
    """``d f(q ⊕ δ) / dδ`` at ``δ = 0``: the derivative along `integrate`."""
    qf = expand_q(cm, q)
    step = lambda d: f(_configuration.integrate(cm.base, qf, expand_v(cm, d)))  # noqa: E731
    return jax.jacfwd(step)(jnp.zeros(cm.nv, q.dtype))


def forward_dynamics_derivatives(cm, q, qd, tau, f_ext=None):
    q, qd, tau = check_state(cm, q=q, qd=qd, tau=tau)

    def fd(qf, v):
        H = reduce_matrix(cm, _dynamics.mass_matrix(cm.base, qf))
        C = reduce_forces(cm, _dynamics.bias_forces(cm.base, qf, expand_v(cm, v), f_ext))
        return linalg.cho_solve(linalg.cholesky(H), tau - C)

    dq = _tangent_jacobian(cm, lambda qf: fd(qf, qd), q)
    dv = jax.jacfwd(lambda v: fd(expand_q(cm, q), v))(qd)
    Minv = minv_times(cm, q, jnp.eye(cm.nv, dtype=cm.dtype))
    return dq, dv, Minv


def inverse_dynamics_derivatives(cm, q, qd, qdd, f_ext=None):
    q, qd, qdd = check_state(cm, q=q, qd=qd, qdd=qdd)

    def tau(qf, v):
        tau_full = _dynamics.inverse_dynamics(cm.base, qf, expand_v(cm, v), expand_v(cm, qdd), f_ext)
        return reduce_forces(cm, tau_full)

    dq = _tangent_jacobian(cm, lambda qf: tau(qf, qd), q)
    dv = jax.jacfwd(lambda v: tau(expand_q(cm, q), v))(qd)
    return dq, dv, mass_matrix(cm, q)


def forward_dynamics_parameter_derivatives(cm, q, qd, tau, f_ext=None):
    """``d qdd / d inertia = -H⁻¹ Y(q, qd, qdd)`` at the forward dynamics' ``qdd``."""
    q, qd, tau = check_state(cm, q=q, qd=qd, tau=tau)
    qdd = forward_dynamics(cm, q, qd, tau, f_ext)
    return -minv_times(cm, q, inverse_dynamics_regressor(cm, q, qd, qdd))


def inverse_dynamics_regressor(cm, q, qd, qdd, *, armature=False):
    q, qd, qdd = check_state(cm, q=q, qd=qd, qdd=qdd)
    Y = _parameters.inverse_dynamics_regressor(
        cm.base, expand_q(cm, q), expand_v(cm, qd), expand_v(cm, qdd), armature=armature
    )
    return jnp.swapaxes(reduce_cols(cm, jnp.swapaxes(Y, 0, 1)), 0, 1)


# ---------------------------------------------------------------- configurations


def move(cm, q, v, dt):
    """``q (+) v dt`` on the full tree for a checked state (`jaxrbd._configuration.move`)."""
    qf = _move(cm.base, expand_q(cm, q), expand_v(cm, v), dt)
    return qf[np.asarray(cm.independent_q, np.int64)]


def integrate(cm, q, v, dt=1.0):
    q, v = check_state(cm, q=q, v=v)
    qf = _configuration.integrate(cm.base, expand_q(cm, q), expand_v(cm, v), dt)
    return qf[np.asarray(cm.independent_q, np.int64)]


def difference(cm, q0, q1):
    q0 = check_vector("q0", q0, cm.nq, "model.nq", cm.dtype)
    q1 = check_vector("q1", q1, cm.nq, "model.nq", cm.dtype)
    dv = _configuration.difference(cm.base, expand_q(cm, q0), expand_q(cm, q1))
    return dv[np.asarray(cm.independent_v, np.int64)]


def free_rows(cm):
    """`jaxrbd._configuration.free_rows` in the independent coordinates (a free joint is
    never coupled, so each of its rows is one)."""
    q_at = {b: i for i, b in enumerate(cm.independent_q)}
    v_at = {b: i for i, b in enumerate(cm.independent_v)}
    lookup = (q_at, q_at, v_at, v_at)
    return tuple(np.vectorize(m.__getitem__, otypes=[np.int64])(r) if r.size else r
                 for m, r in zip(lookup, _configuration.free_rows(cm.base)))


def frame_rate(cm, v):
    return _configuration.frame_rate(cm, v, rows=free_rows(cm))


def advance(cm, q, v_move, v_end, dt):
    return _configuration.advance(cm, q, v_move, v_end, dt, mover=move, rows=free_rows(cm))


def neutral_configuration(cm):
    return _configuration.neutral_configuration(cm.base)[np.asarray(cm.independent_q, np.int64)]


def random_configuration(cm, key, scale=1.0):
    return _configuration.random_configuration(cm.base, key, scale)[np.asarray(cm.independent_q, np.int64)]


# ---------------------------------------------------------------- kinematics and momentum


def _full_state(cm, q, qd=None, qdd=None):
    arrays = {"q": q}
    if qd is not None:
        arrays["qd"] = qd
    if qdd is not None:
        arrays["qdd"] = qdd
    checked = check_state(cm, **arrays)
    out = [expand_q(cm, checked[0])] + [expand_v(cm, x) for x in checked[1:]]
    return out


def _position_only(plain):
    def f(cm, q, *args, **kwargs):
        return plain(cm.base, *_full_state(cm, q), *args, **kwargs)

    return functools.wraps(plain)(f)


def _with_velocity(plain):
    def f(cm, q, qd, *args, **kwargs):
        return plain(cm.base, *_full_state(cm, q, qd), *args, **kwargs)

    return functools.wraps(plain)(f)


def _with_acceleration(plain):
    def f(cm, q, qd, qdd, *args, **kwargs):
        return plain(cm.base, *_full_state(cm, q, qd, qdd), *args, **kwargs)

    return functools.wraps(plain)(f)


def _jacobian(plain):
    def f(cm, q, *args, **kwargs):
        return reduce_cols(cm, plain(cm.base, *_full_state(cm, q), *args, **kwargs))

    return functools.wraps(plain)(f)


def point_positions(cm, q, p, bodies):
    """`jaxrbd._kinematics.point_positions` for a checked ``q``."""
    return _point_positions(cm.base, expand_q(cm, q), p, bodies)


def world_jacobians(cm, q, p, bodies):
    """`jaxrbd._kinematics.world_jacobians` for a checked ``q``: ``J_full A``."""
    return reduce_cols(cm, _world_jacobians(cm.base, expand_q(cm, q), p, bodies))


forward_kinematics = _position_only(_kinematics.forward_kinematics)
point_position = _position_only(_kinematics.point_position)
center_of_mass = _position_only(_energy.center_of_mass)
potential_energy = _position_only(_energy.potential_energy)
system_inertia = _position_only(_energy.system_inertia)
constraint_residual = _position_only(_constraints.constraint_residual)
body_velocities = _with_velocity(_kinematics.body_velocities)
body_velocity = _with_velocity(_kinematics.body_velocity)
point_velocity = _with_velocity(_kinematics.point_velocity)
point_bias_acceleration = _with_velocity(_kinematics.point_bias_acceleration)
body_bias_acceleration = _with_velocity(_kinematics.body_bias_acceleration)
centroidal_momentum = _with_velocity(_energy.centroidal_momentum)
centroidal_momentum_bias = _with_velocity(_energy.centroidal_momentum_bias)
center_of_mass_velocity = _with_velocity(_energy.center_of_mass_velocity)
kinetic_energy = _with_velocity(_energy.kinetic_energy)
constraint_bias = _with_velocity(_constraints.constraint_bias)
constraint_velocity_residual = _with_velocity(_constraints.constraint_velocity_residual)
body_accelerations = _with_acceleration(_kinematics.body_accelerations)
body_acceleration = _with_acceleration(_kinematics.body_acceleration)
point_acceleration = _with_acceleration(_kinematics.point_acceleration)
center_of_mass_acceleration = _with_acceleration(_energy.center_of_mass_acceleration)
body_jacobians = _jacobian(_kinematics.body_jacobians)
point_jacobian = _jacobian(_kinematics.point_jacobian)
body_jacobian = _jacobian(_kinematics.body_jacobian)
centroidal_momentum_matrix = _jacobian(_energy.centroidal_momentum_matrix)
center_of_mass_jacobian = _jacobian(_energy.center_of_mass_jacobian)
constraint_jacobian = _jacobian(_constraints.constraint_jacobian)


def total_mass(cm):
    return _energy.total_mass(cm.base)


# ---------------------------------------------------------------- contacts


def forward_dynamics_contacts(cm, q, qd, tau, constraints, method="kkt", f_ext=None, *,
                              check_rank=False, rcond=None):
    _contacts.check_method(method)
    _contacts.check_rcond(rcond)
    q, qd, tau = check_state(cm, q=q, qd=qd, tau=tau)
    H = mass_matrix(cm, q)
    C = bias_forces(cm, q, qd, f_ext)
    G = constraint_jacobian(cm, q, constraints)
    gamma = constraint_bias(cm, q, qd, constraints)
    return _contacts.solve_checked(
        method, rcond, check_rank, H, G, tau - C, gamma, "forward_dynamics_contacts"
    )


def contact_impulses(cm, q, qd_minus, constraints, restitution=0.0, method="kkt", *,
                     return_impulses=False, check_rank=False, rcond=None):
    _contacts.check_method(method)
    _contacts.check_rcond(rcond)
    q, qd_minus = check_state(cm, q=q, qd_minus=qd_minus)
    e = as_float("restitution", restitution, cm.dtype)
    if e.shape not in ((), (constraints.size,)):
        raise ValueError(
            f"restitution has shape {e.shape}, expected () or ({constraints.size},) = (constraints.size,)"
        )
    H = mass_matrix(cm, q)
    G = constraint_jacobian(cm, q, constraints)
    qd_plus, Lam = _contacts.solve_checked(
        method, rcond, check_rank, H, G, H @ qd_minus, -e * (G @ qd_minus), "contact_impulses"
    )
    return (qd_plus, Lam) if return_impulses else qd_plus


# ---------------------------------------------------------------- actuators


def actuation(cm, q, qd, ctrl, actuators, act=None):
    """`jaxrbd.actuation` on the full tree (whose DoFs the actuators name), ``Aᵀ tau``."""
    q, qd = check_state(cm, q=q, qd=qd)
    tau = _actuation.actuation(cm.base, expand_q(cm, q), expand_v(cm, qd), ctrl, actuators, act)
    return reduce_forces(cm, tau)


# ---------------------------------------------------------------- constrained inverse dynamics


def actuation_mask(cm, actuated=None):
    """`jaxrbd.actuation_mask` of the independent coordinates: by default every one but
    a floating base's; joint names and boolean masks as on a plain model."""
    if actuated is None:
        base = _constrained_dynamics.actuation_mask(cm.base)
        return base[np.asarray(cm.independent_v, np.int64)]
    return _constrained_dynamics.actuation_mask(cm, actuated)


def _constrained_system(cm, q, qd, constraints, f_ext):
    """``(H, C, G, gamma)`` of the independent coordinates, from the coupled functions."""
    f_ext = check_f_ext(cm, f_ext)
    H = mass_matrix(cm, q)
    C = bias_forces(cm, q, qd, f_ext)
    return H, C, constraint_jacobian(cm, q, constraints), constraint_bias(cm, q, qd, constraints)


_PARTS = _constrained_dynamics.Parts(actuation_mask, _constrained_system)


def inverse_dynamics_constraints(cm, q, qd, qdd_desired, constraints, actuated=None, weights=None,
                                 f_ext=None, *, return_qdd=False, rcond=None):
    return _constrained_dynamics.inverse_dynamics_constraints_with(
        _PARTS, cm, q, qd, qdd_desired, constraints, actuated, weights, f_ext, return_qdd, rcond
    )


def inverse_dynamics_constraints_relaxed(cm, q, qd, qdd_desired, constraints, actuated=None,
                                         weights=None, f_ext=None, method="range_space", *,
                                         return_qdd=False, rcond=None):
    return _constrained_dynamics.inverse_dynamics_constraints_relaxed_with(
        _PARTS, cm, q, qd, qdd_desired, constraints, actuated, weights, f_ext, method,
        return_qdd, rcond,
    )


# ---------------------------------------------------------------- zero-moment point


def zero_moment_point(cm, q, qd, qdd, normal=(0.0, 0.0, 1.0), point=(0.0, 0.0, 0.0)):
    """`jaxrbd.zero_moment_point` from the centroidal quantities, which carry the
    coupling: ``[k_G; m c̈]`` about the CoM, moved to the world origin."""
    q, qd, qdd = check_state(cm, q=q, qd=qd, qdd=qdd)
    normal = _zmp.plane_vector("normal", normal, cm.dtype)
    point = _zmp.plane_vector("point", point, cm.dtype)
    normal = normal / jnp.linalg.norm(normal)
    g = cm.gravity.astype(cm.dtype)
    hdot_G = centroidal_momentum_matrix(cm, q) @ qdd + centroidal_momentum_bias(cm, q, qd)
    c = center_of_mass(cm, q)
    hdot_O = jnp.concatenate([hdot_G[:3] + jnp.cross(c, hdot_G[3:]), hdot_G[3:]])
    return _zmp.zmp_from(hdot_O, total_mass(cm), c, g, normal, point)
