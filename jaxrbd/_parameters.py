"""Inertial parameters: the parameter vector of a model, the inverse-dynamics regressor and
the log-Cholesky parameterisation of physically consistent inertias.

Inverse dynamics is linear in the inertial parameters (Atkeson, An and Hollerbach 1986):
the net force on body ``b`` is ``f_b = I_b a_b + v_b x* I_b v_b = A(v_b, a_b) pi_b`` with a
``6 x 10`` matrix ``A`` of the body's velocity and acceleration alone, and the generalized
force of joint DoF ``j`` is the projection ``S_j^T`` of the forces of every body it supports.
`inverse_dynamics_regressor` builds these matrices from one forward pass, moves them to
world coordinates and projects them onto the world-frame motion subspaces through a static
support mask, with no recursion over bodies beyond the forward pass.

The log-Cholesky map follows Rucker and Wensing, "Smooth Parameterization of Rigid-Body
Inertia", IEEE RA-L 7(2), 2022: the 4x4 pseudo-inertia ``J = [[Sigma, h], [h^T, m]]``
(``Sigma = 1/2 tr(Ibar) 1 - Ibar``, the second moment of the mass distribution about the
body origin) of a physically consistent body is positive definite, and ``J = U U^T`` with
``U`` upper triangular and a positive diagonal is unique. Logarithms of that diagonal
give unconstrained coordinates.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._core import algebra as al
from ._core.checks import as_float, check_state
from ._core.jcalc import joint_velocity_terms
from ._core.native_vmap import native_vmap
from ._core.nodes import Xup_and_S, gravity_acceleration, sched
from ._core.passes import velocities_accelerations
from ._core.rows import node_rows, place_rows
from ._core.topology import topology
from ._kinematics import body_frames_batched
from ._model import check_model

__all__ = [
    "from_log_cholesky",
    "inertial_parameters",
    "inverse_dynamics_regressor",
    "is_physically_consistent",
    "regressor_batched",
    "regressor_from_motion",
    "to_log_cholesky",
    "with_inertial_parameters",
]


# ---------------------------------------------------------------- the parameter vector


def inertial_parameters(model):
    """The inertial parameters of every body, ``(nbodies, 10)``.

    Row ``b`` is ``[m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` of body ``b``: mass
    [kg], first moment of mass [kg m] (``c`` the centre of mass) and rotational inertia
    about the **body origin** [kg m^2], all in body coordinates (Pinocchio's dynamic
    parameter order). Bodies merged by fixed joints keep their own rows in their own
    frames; row 0 is mass rigidly attached to the world. This is exactly `Model.inertia`,
    the leaf `jax.grad` differentiates.

    Args:
        model: a `Model`.

    Returns:
        `pi`, `(nbodies, 10)`; `inverse_dynamics_regressor` multiplies ``pi.ravel()``.

    Example:
        >>> pi = jaxrbd.inertial_parameters(model)
        >>> pi.shape, float(pi[1, 0])          # the first link's mass [kg]
        ((4, 10), 0.1)
    """
    check_model(model)
    return model.inertia


def with_inertial_parameters(model, pi):
    """A copy of ``model`` with new inertial parameters (`eqx.tree_at` on `Model.inertia`).

    Args:
        model: a `Model`.
        pi: `(nbodies, 10)` rows ``[m, m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` as in
            `inertial_parameters` (about the body origin, body coordinates, SI units), or
            the flat `(nbodies * 10,)` vector ``pi.ravel()``. Converted to the model's
            dtype. May be traced (`jax.grad` through the new model flows back to ``pi``).
            Nothing checks physical consistency here (see `is_physically_consistent`).

    Returns:
        A new `Model`; ``model`` itself is unchanged.

    Raises:
        ValueError: ``pi`` has neither shape.
        TypeError: ``pi`` is not a real-valued array.

    Example:
        >>> heavier = jaxrbd.with_inertial_parameters(model, 2.0 * jaxrbd.inertial_parameters(model))
        >>> float(heavier.inertia[1, 0]), float(model.inertia[1, 0])
        (0.2, 0.1)
    """
    check_model(model)
    pi = as_float("pi", pi, model.dtype)
    shape = model.inertia.shape  # (..., nbodies, 10); leading axes for stacked models
    lead, nb = shape[:-2], shape[-2]
    if pi.shape == lead + (nb * 10,):
        pi = pi.reshape(shape)
    elif pi.shape != shape:
        raise ValueError(
            f"pi has shape {pi.shape}, expected {shape} = (model.nbodies, 10) or "
            f"{lead + (nb * 10,)} = (model.nbodies * 10,)"
        )
    return eqx.tree_at(lambda m: m.inertia, model, pi)


# ---------------------------------------------------------------- the regressor


def _sym_columns(x):
    """Columns of ``Ibar x`` w.r.t. ``[Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``: ``(..., 6, 3, B)``."""
    x0, x1, x2 = x[..., 0, :], x[..., 1, :], x[..., 2, :]
    z = jnp.zeros_like(x0)
    cols = [(x0, z, z), (x1, x0, z), (z, x1, z), (x2, z, x0), (z, x2, x1), (z, z, x2)]
    return jnp.stack([al.vec(*c) for c in cols], axis=-3)


def body_regressor(v, a):
    """``A(v, a)`` with ``I a + v x* I v = A pi`` for every body, ``(..., 10, 6, B)``.

    The ten *columns* (axis -3) are force 6-vectors. With ``a = [alpha; a_l]``,
    ``v = [w; v_l]`` and ``at = a_l + w x v_l``: the mass column is ``[0; at]``, the
    first-moment columns are ``[e_k x at; alpha x e_k + w x (w x e_k)]`` and the
    rotational-inertia columns ``[L(alpha) + w x L(w); 0]`` with ``Ibar x = L(x) p``.
    """
    w, vl, alpha = al.ang(v), al.lin(v), al.ang(a)
    at = al.lin(a) + al.cross(w, vl)
    zero = jnp.zeros_like(at)
    m_col = al.join(zero, at)[..., None, :, :]
    h_cols = []
    for k in range(3):
        e = zero.at[..., k, :].set(1.0)
        h_cols.append(al.join(al.cross(e, at), al.cross(alpha, e) + al.cross(w, al.cross(w, e))))
    h_cols = jnp.stack(h_cols, axis=-3)
    Lw = _sym_columns(w)
    I_ang = _sym_columns(alpha) + al.cross(w[..., None, :, :], Lw)
    I_cols = al.join(I_ang, jnp.zeros_like(I_ang))
    return jnp.concatenate([m_col, h_cols, I_cols], axis=-3)


def _support(model):
    """The static support pairs ``(j, b)``, row-major, where node ``j + 1`` (velocity
    ``j``) is body ``b``'s node or one of its ancestors."""
    t = topology(model)
    return np.nonzero(t.support[t.body_node].T)


def regressor_from_motion(model, v, a, E0, r0, S0):
    """The regressor from the motion of the nodes: the one implementation behind
    `inverse_dynamics_regressor` and `jaxrbd.forward_dynamics_parameter_derivatives`.

    Args:
        v, a: node velocities and accelerations (gravity as an acceleration of the
            world), node coordinates, ``(nn, 6, B)``.
        E0, r0: the nodes' transforms from world coordinates, ``(nn, 3, 3, B)``,
            ``(nn, 3, B)``.
        S0: the motion subspaces in world coordinates, ``(nv, 6, B)``.

    Returns:
        ``Y (nv, nbodies * 10, B)``.
    """
    # Every body moves with its node (a fixed-merged body at its offset from the node).
    E0b, r0b, vb, ab = body_frames_batched(model, np.arange(model.nbodies), E0, r0, v, a)
    # Body forces per parameter, in world coordinates at the world origin: X0_b^T A_b.
    A = body_regressor(vb, ab)  # (nb, 10, 6, B)
    F0 = al.XT_force(E0b[:, None], r0b[:, None], A)
    # Y[j, b] = S0_j^T F0_b for the supported pairs only (a third of the dense
    # (nv, nbodies) table on a humanoid), placed in the zero matrix (a gather on
    # batches, see `jaxrbd._core.rows`).
    rows, cols = _support(model)
    vals = al.dot(S0[rows][:, None], F0[cols])  # (npairs, 10, B)
    nb = model.nbodies
    Y = place_rows(model.nv * nb, [(rows * nb + cols, vals)])
    return Y.reshape((model.nv, nb * 10, vals.shape[-1]))


def regressor_batched(model, q, qd, qdd):
    """The regressor on the batch-trailing layout: ``q (nq, B)``, ``qd, qdd (nv, B)``
    -> ``Y (nv, nbodies * 10, B)``."""
    B = q.shape[-1]
    s = sched(model, B)
    E, r, S = Xup_and_S(model, q)
    vJ, vJc, cJ = joint_velocity_terms(model, q, qd, S)
    qdd_n = node_rows(qdd)
    a_world = gravity_acceleration(model, B, q.dtype)  # gravity as a world acceleration
    v, a, (E0, r0) = velocities_accelerations(
        s, E, r, vJ, vJc, cJ, S * qdd_n[:, None, :], a_world, with_X0=True
    )
    S0 = al.Xinv_motion(E0, r0, S)[1:]  # (nv, 6, B)
    return regressor_from_motion(model, v, a, E0, r0, S0)


_regressor = native_vmap(regressor_batched)


def inverse_dynamics_regressor(model, q, qd, qdd, *, armature=False):
    """The inverse-dynamics regressor ``Y(q, qd, qdd)``: ``inverse_dynamics == Y @ pi.ravel()``.

    Inverse dynamics is linear in the inertial parameters ``pi = inertial_parameters(model)``
    (Atkeson et al. 1986). Column ``10 b + k`` of ``Y`` is the generalized force that
    parameter ``pi[b, k]`` contributes, gravity included; ``Y`` does not depend on
    ``model.inertia``. The columns of the world (body 0) and of any body rigidly attached
    to the world are zero; a body merged by a fixed joint has its own ten columns in its
    own frame. External forces are not part of ``Y`` (they do not scale with the model's
    parameters): with ``f_ext``, ``inverse_dynamics(..., f_ext) == Y @ pi.ravel() +
    inverse_dynamics(model_without_mass, ..., f_ext)``.

    The armature (`Model.armature`, reflected rotor inertia) is linear in the dynamics
    too: ``inverse_dynamics == Y @ pi.ravel() + model.armature * qdd``. With
    ``armature=True`` its ``nv`` columns ``diag(qdd)`` are appended, so that
    ``inverse_dynamics == Y @ concatenate([pi.ravel(), model.armature])`` and the
    armature is identified with the inertial parameters.

    Cost: one forward pass (a `lax.scan`), a batched ``6 x 10`` body regressor per body
    and one projection per (joint DoF, supported body) pair, O(nv nbodies), with no
    differentiation. Works under `jax.jit`, `jax.vmap` (over states: the batch-trailing
    path, or over models) and `jax.grad`/`jax.jacfwd`.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; quaternion blocks need not be normalised.
        qd: velocities `(nv,)` [rad/s | m/s]; body coordinates for free joints.
        qdd: accelerations `(nv,)` [rad/s^2 | m/s^2], the time derivative of `qd`.
        armature: also return the armature's columns (static).

    Returns:
        `Y`, `(nv, nbodies * 10)` (``(nv, nbodies * 10 + nv)`` with ``armature``), in
        [N m | N] per unit of each parameter (kg, kg m, kg m^2); columns grouped per body
        in the order of `inertial_parameters`, then one per DoF for the armature.

    Raises:
        ValueError: an argument has the wrong shape (message names it).
        TypeError: an argument is not real-valued.

    Example:
        >>> qd, qdd = jnp.full(model.nv, 0.3), jnp.ones(model.nv)
        >>> Y = jax.jit(jaxrbd.inverse_dynamics_regressor)(model, q, qd, qdd)
        >>> Y.shape
        (9, 40)
        >>> pi = jaxrbd.inertial_parameters(model).ravel()
        >>> tau = jax.jit(jaxrbd.inverse_dynamics)(model, q, qd, qdd)
        >>> bool(jnp.allclose(Y @ pi, tau, atol=1e-4))
        True
    """
    with jax.named_scope("jaxrbd.inverse_dynamics_regressor"):
        q, qd, qdd = check_state(model, q=q, qd=qd, qdd=qdd)
        Y = _regressor(model, q, qd, qdd)
        return jnp.concatenate([Y, jnp.diag(qdd)], axis=-1) if armature else Y


# ---------------------------------------------------------------- log-Cholesky


def _check_rows(name: str, x):
    try:
        x = jnp.asarray(x)
    except TypeError as e:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__} ({e})") from None
    if jnp.issubdtype(x.dtype, jnp.integer) and x.dtype != jnp.bool_:
        x = x.astype(jnp.zeros(()).dtype)  # JAX's default float
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{name} has dtype {x.dtype}, expected a real floating dtype")
    if x.ndim < 1 or x.shape[-1] != 10:
        raise ValueError(f"{name} has shape {x.shape}, expected (..., 10)")
    return x


def _ul_cholesky(pi):
    """Pivots and entries of ``J = U U^T`` (``U`` upper triangular), sanitised.

    Eliminates the mass first (``Sigma_c = Sigma - h h^T / m``, the second moment about
    the centre of mass), then the 3x3 ``Sigma_c = V V^T`` bottom-up. Returns
    ``valid`` (``m > 0`` and all pivots > ``100 eps tr(Sigma)``), ``m``, ``c``, the pivots
    ``(p1, p2, p3)`` and ``(v12, v13, v23)``; invalid operands are replaced by 1 before each division, so
    every output (and its gradient) is finite.
    """
    one = jnp.ones((), pi.dtype)
    m = pi[..., 0]
    ok = m > 0
    m_s = jnp.where(ok, m, one)
    c = pi[..., 1:4] / m_s[..., None]
    Ixx, Ixy, Iyy, Ixz, Iyz, Izz = (pi[..., k] for k in range(4, 10))
    half_tr = 0.5 * (Ixx + Iyy + Izz)
    cx, cy, cz = c[..., 0], c[..., 1], c[..., 2]
    # Sigma_c = (tr(Ibar)/2 1 - Ibar) - m c c^T
    Sxx = half_tr - Ixx - m * cx * cx
    Syy = half_tr - Iyy - m * cy * cy
    Szz = half_tr - Izz - m * cz * cz
    Sxy = -Ixy - m * cx * cy
    Sxz = -Ixz - m * cx * cz
    Syz = -Iyz - m * cy * cz
    # Pivots must clear the rounding of Sigma - m c c^T: bodies within a few ulps of
    # the boundary (point masses, rods, plates offset from the origin) are degenerate.
    tol = 100 * jnp.finfo(pi.dtype).eps * jnp.abs(half_tr)  # tr(Sigma) = tr(Ibar) / 2
    p3 = Szz
    ok = ok & (p3 > tol)
    v33 = jnp.sqrt(jnp.where(ok, p3, one))
    v13, v23 = Sxz / v33, Syz / v33
    p2 = Syy - v23 * v23
    ok = ok & (p2 > tol)
    v22 = jnp.sqrt(jnp.where(ok, p2, one))
    v12 = (Sxy - v13 * v23) / v22
    p1 = Sxx - v13 * v13 - v12 * v12
    ok = ok & (p1 > tol)
    p = tuple(jnp.where(ok, x, one) for x in (p1, p2, p3))
    return ok, jnp.where(ok, m, one), c, p, (v12, v13, v23)


def to_log_cholesky(pi):
    """Log-Cholesky coordinates of physically consistent inertial parameters.

    Rucker and Wensing (RA-L 2022): the pseudo-inertia ``J = [[Sigma, h], [h^T, m]]``
    (``Sigma = tr(Ibar)/2 1 - Ibar``) factors uniquely as ``J = U U^T`` with

        U = exp(alpha) [[exp(d1), s12, s13, t1],
                        [0,       exp(d2), s23, t2],
                        [0,       0,   exp(d3), t3],
                        [0,       0,       0,    1]],

    and ``theta = [alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3]`` ranges over all of
    ``R^10``. In physical terms ``m = exp(2 alpha)`` and ``t = c``, the centre of mass.

    Rows that are not strictly physically consistent (see `is_physically_consistent`)
    have no log-Cholesky coordinates: their rows of the result are NaN. This includes
    the world row of a model and massless links (``m = 0``), and the degenerate
    limits point masses and infinitely thin rods. Select the
    representable rows with ``is_physically_consistent(pi)`` as a mask; gradients stay
    finite on the valid rows and are zero on masked-out ones (the operands are sanitised).

    Args:
        pi: `(..., 10)` rows ``[m, m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` (inertia
            about the body origin, as `inertial_parameters`).

    Returns:
        `theta`, `(..., 10)`; ``from_log_cholesky(theta) == pi`` to rounding.

    Raises:
        ValueError: the last axis is not 10.
        TypeError: ``pi`` is not real-valued.

    Example:
        >>> pi = jaxrbd.inertial_parameters(model)
        >>> theta = jaxrbd.to_log_cholesky(pi)
        >>> bool(jnp.isnan(theta[0]).all())          # the massless world row
        True
        >>> bool(jnp.allclose(jaxrbd.from_log_cholesky(theta[1:]), pi[1:]))
        True
    """
    pi = _check_rows("pi", pi)
    ok, m, c, (p1, p2, p3), (v12, v13, v23) = _ul_cholesky(pi)
    half_log_m = 0.5 * jnp.log(m)
    inv_sqrt_m = jnp.exp(-half_log_m)
    theta = jnp.stack(
        [
            half_log_m,
            0.5 * jnp.log(p1) - half_log_m,
            0.5 * jnp.log(p2) - half_log_m,
            0.5 * jnp.log(p3) - half_log_m,
            v12 * inv_sqrt_m,
            v23 * inv_sqrt_m,
            v13 * inv_sqrt_m,
            c[..., 0],
            c[..., 1],
            c[..., 2],
        ],
        axis=-1,
    )
    return jnp.where(ok[..., None], theta, jnp.full((), jnp.nan, theta.dtype))


def from_log_cholesky(theta):
    """Inertial parameters from log-Cholesky coordinates (the inverse of `to_log_cholesky`).

    Every finite ``theta`` gives a physically consistent body: mass ``exp(2 alpha) > 0``,
    a positive definite pseudo-inertia, hence positive principal moments about the
    centre of mass that satisfy strict triangle inequalities. The map is smooth (entire
    in ``theta``), so `jax.grad` through it is finite everywhere; use it to identify or
    optimise inertial parameters without constraints.

    Args:
        theta: `(..., 10)` ``[alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3]`` as in
            `to_log_cholesky`.

    Returns:
        `pi`, `(..., 10)` ``[m, m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``, the inertia about
        the body origin [kg, kg m, kg m^2].

    Raises:
        ValueError: the last axis is not 10.
        TypeError: ``theta`` is not real-valued.

    Example:
        >>> pi = jaxrbd.from_log_cholesky(jnp.zeros(10))   # unit mass at the origin
        >>> pi.tolist()
        [1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 2.0, 0.0, 0.0, 2.0]
        >>> bool(jaxrbd.is_physically_consistent(pi))
        True
    """
    theta = _check_rows("theta", theta)
    alpha = theta[..., 0]
    D1, D2, D3 = (jnp.exp(theta[..., k]) for k in (1, 2, 3))
    s12, s23, s13 = theta[..., 4], theta[..., 5], theta[..., 6]
    t = theta[..., 7:10]
    m = jnp.exp(2.0 * alpha)
    # Sigma = m (Ut Ut^T + t t^T) with Ut the upper 3x3 block of U / exp(alpha)
    tx, ty, tz = t[..., 0], t[..., 1], t[..., 2]
    Sxx = m * (D1 * D1 + s12 * s12 + s13 * s13 + tx * tx)
    Syy = m * (D2 * D2 + s23 * s23 + ty * ty)
    Szz = m * (D3 * D3 + tz * tz)
    Sxy = m * (s12 * D2 + s13 * s23 + tx * ty)
    Sxz = m * (s13 * D3 + tx * tz)
    Syz = m * (s23 * D3 + ty * tz)
    tr = Sxx + Syy + Szz  # Ibar = tr(Sigma) 1 - Sigma
    return jnp.stack(
        [m, m * tx, m * ty, m * tz, tr - Sxx, -Sxy, tr - Syy, -Sxz, -Syz, tr - Szz], axis=-1
    )


def is_physically_consistent(pi):
    """Whether each row of inertial parameters is (strictly) physically consistent.

    True where the pseudo-inertia ``J = [[tr(Ibar)/2 1 - Ibar, m c], [m c^T, m]]`` is
    positive definite (Wensing, Kim and Slotine 2017): ``m > 0`` and the rotational
    inertia about the centre of mass has positive principal moments with strict
    triangle inequalities; exactly the rows `to_log_cholesky` represents. The test is a
    Cholesky factorisation of ``J`` whose pivots must exceed ``100 eps tr(Sigma)``
    (``eps`` of the dtype), so that massless rows and the degenerate limits (point
    masses, thin rods, flat plates), which rounding would put on either side of the
    boundary, are reliably False.

    Args:
        pi: `(..., 10)` rows as in `inertial_parameters`.

    Returns:
        `(...,)` boolean array.

    Raises:
        ValueError: the last axis is not 10.
        TypeError: ``pi`` is not real-valued.

    Example:
        >>> jaxrbd.is_physically_consistent(jaxrbd.inertial_parameters(model)).tolist()
        [False, True, True, True]
    """
    pi = _check_rows("pi", pi)
    return _ul_cholesky(pi)[0]
