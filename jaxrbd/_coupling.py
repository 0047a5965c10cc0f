"""Coupled joints (mimic joints, geared rotors): `couple` and the public functions on a
`CoupledModel`.

A coupled model is its full tree (`CoupledModel.base`, every joint a coordinate) seen
through the linear map ``qd_full = A qd`` from the independent velocities; a coupled
joint ``m`` driven by ``j`` has ``q_m = a q_j + b`` and ``qd_m = a qd_j``. Since ``A`` is
constant, accelerations map the same way, and by the principle of virtual work the
generalized forces of the independent coordinates are ``Aᵀ tau_full``:

* kinematics: the full tree's, at ``q_full``, ``A qd``, ``A qdd``; Jacobians ``J A``;
* ``H = Aᵀ H_full A``, inverse dynamics ``Aᵀ ID_full``, bias and gravity likewise;
* forward dynamics: the Cholesky solve of ``H qdd = tau - C`` (a coupling may join two
  branches of the tree, where the articulated-body recursion does not apply);
* constraints: ``G_full A`` with the full tree's bias terms, and the contact solvers on
  the reduced ``H``, ``C``, ``G``;
* derivatives: automatic differentiation of the above.

Each public function checks `jaxrbd._model.is_coupled` first and calls its namesake here.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ._model import CoupledModel, Model, check_model

__all__ = ["couple"]


def couple(model: Model, couplings: Mapping[str, tuple]) -> CoupledModel:
    """Couple joints of ``model``: ``q[m] = multiplier * q[j] + offset`` for each entry
    ``m: (j, multiplier, offset)`` (joint names; 1-DoF joints).

    A coupled joint keeps its body, mass and motion but loses its coordinate; chains
    (``m`` driven by a joint that is itself coupled) are resolved to the independent
    driver. The result works with every public function (see `CoupledModel`).

    Args:
        model: a plain `Model` with every joint independent.
        couplings: ``{coupled joint: (driver joint, multiplier, offset)}``.

    Returns:
        A `CoupledModel`.

    Raises:
        ValueError: an unknown joint, a joint that is not 1-DoF, a cycle of couplings,
            a non-finite multiplier or offset.

    Example:
        >>> chain = jaxrbd.models.chain(3)
        >>> cm = jaxrbd.couple(chain, {"link2": ("link0", 0.5, 0.1)})
        >>> cm.nq, cm.joint_names
        (2, ('link0', 'link1'))
    """
    check_model(model)
    if isinstance(model, CoupledModel):
        raise TypeError("couple expects a plain Model; couple the base model once, with all couplings")
    names = model.joint_names

    def one_dof(name, role):
        if name not in names:
            raise ValueError(
                f"couple: unknown {role} joint {name!r}; movable joints: {', '.join(names)}"
            )
        qs, vs = model.q_index(name), model.v_index(name)
        if qs.stop - qs.start != 1 or vs.stop - vs.start != 1:
            raise ValueError(
                f"couple: {role} joint {name!r} has nq = {qs.stop - qs.start}, nv = "
                f"{vs.stop - vs.start}; couplings join 1-DoF joints (revolute, prismatic, "
                "helical)"
            )
        return qs.start, vs.start

    raw = {}
    for m, spec in couplings.items():
        try:
            j, a, b = spec
            a, b = float(a), float(b)
        except (TypeError, ValueError):
            raise ValueError(
                f"couple: joint {m!r}: expected (driver, multiplier, offset), got {spec!r}"
            ) from None
        if not (np.isfinite(a) and np.isfinite(b)):
            raise ValueError(f"couple: joint {m!r}: multiplier {a} and offset {b} must be finite")
        if m == j:
            raise ValueError(f"couple: joint {m!r} cannot drive itself")
        one_dof(m, "coupled")
        one_dof(j, "driver")
        raw[m] = (j, a, b)
    # resolve chains: m -> j -> k ... until an independent driver
    resolved = {}
    for m in raw:
        j, a, b = raw[m]
        seen = [m]
        while j in raw:
            if j in seen:
                raise ValueError(f"couple: the couplings of {' -> '.join(seen + [j])} form a cycle")
            seen.append(j)
            j2, a2, b2 = raw[j]
            j, a, b = j2, a * a2, a * b2 + b
        if not (np.isfinite(a) and np.isfinite(b)):
            raise ValueError(
                f"couple: the chain {' -> '.join(seen + [j])} gives a non-finite multiplier "
                f"{a} or offset {b}"
            )
        resolved[m] = (j, a, b)
    _check_overflow(model, resolved)
    coupled = [n for n in names if n in resolved]  # base order
    independent = [n for n in names if n not in resolved]

    def cols(joint_list, index):
        out = []
        for n in joint_list:
            s = index(n)
            out.extend(range(s.start, s.stop))
        return tuple(out)

    ind_q, ind_v = cols(independent, model.q_index), cols(independent, model.v_index)
    drivers = [resolved[m][0] for m in coupled]
    return CoupledModel(
        base=model,
        multiplier=jnp.asarray([resolved[m][1] for m in coupled], model.dtype),
        offset=jnp.asarray([resolved[m][2] for m in coupled], model.dtype),
        coupled_joints=tuple(coupled),
        driver_joints=tuple(drivers),
        independent_q=ind_q,
        independent_v=ind_v,
        coupled_q=tuple(model.q_index(m).start for m in coupled),
        coupled_v=tuple(model.v_index(m).start for m in coupled),
        driver_q=tuple(ind_q.index(model.q_index(j).start) for j in drivers),
        driver_v=tuple(ind_v.index(model.v_index(j).start) for j in drivers),
    )


def _check_overflow(model: Model, resolved: dict) -> None:
    """Refuse multipliers that make ``H = Aᵀ H_full A`` overflow the model's dtype.

    An entry of ``H_full`` is at most ``sum_b (tr I_b + 2 R |m c|_b + R² m_b)`` with
    ``R`` the sum of all joint offsets (no point of the tree is further than that from a
    joint axis) plus the armature, and a column of ``A`` sums to ``1 + sum |a|`` over
    the joints one driver moves.
    """
    try:
        inertia = np.asarray(model.inertia, dtype=np.float64)
        r = np.asarray(model.Xtree_r, dtype=np.float64)
        armature = np.asarray(model.armature, dtype=np.float64)
    except jax.errors.TracerArrayConversionError:
        return  # traced leaves: nothing to bound on the host
    if inertia.ndim != 2:
        return  # stacked models
    with np.errstate(over="ignore", invalid="ignore"):
        mass = np.abs(inertia[:, 0])
        first = np.linalg.norm(inertia[:, 1:4], axis=1)
        reach = np.linalg.norm(r, axis=1).sum() + np.max(first / np.maximum(mass, 1e-300))
        trace = np.abs(inertia[:, [4, 6, 9]]).sum()
        h = trace + 2 * reach * first.sum() + reach**2 * mass.sum() + armature.max(initial=0.0)
        top = float(np.finfo(model.dtype).max) / max(model.nv, 1)
        for driver in {j for j, _, _ in resolved.values()}:
            moved = {m: a for m, (j, a, _) in resolved.items() if j == driver}
            col = 1.0 + sum(abs(a) for a in moved.values())
            if not col * col * max(h, 1.0) < top:
                raise ValueError(
                    f"couple: the multipliers {moved} of the joints driven by {driver!r} "
                    f"make the mass matrix overflow {np.dtype(model.dtype).name} (its entries "
                    f"reach about (1 + sum |multiplier|)^2 * {h:.3g})"
                )


# ---------------------------------------------------------------- the map A


def _perm(independent, coupled, n):
    """Static gather indices putting ``concat([independent values, coupled values])``
    in the base order."""
    order = np.empty(n, dtype=np.int64)
    order[list(independent)] = np.arange(len(independent))
    order[list(coupled)] = len(independent) + np.arange(len(coupled))
    return order


def expand_q(cm: CoupledModel, q):
    """Independent ``q (nq,)`` -> the base model's ``q_full``."""
    qc = cm.multiplier.astype(q.dtype) * q[np.asarray(cm.driver_q, np.int64)] + cm.offset
    full = jnp.concatenate([q, qc.astype(q.dtype)])
    return full[_perm(cm.independent_q, cm.coupled_q, cm.base.nq)]


def expand_v(cm: CoupledModel, v):
    """Independent velocities ``(nv,)`` -> the base model's ``A v`` (also for ``qdd``)."""
    vc = cm.multiplier.astype(v.dtype) * v[np.asarray(cm.driver_v, np.int64)]
    return jnp.concatenate([v, vc])[_perm(cm.independent_v, cm.coupled_v, cm.base.nv)]


def _onehot(cm):
    """``(ncoupled, nv)``: row k selects the driver of coupled joint k."""
    P = np.zeros((len(cm.coupled_v), cm.nv))
    P[np.arange(len(cm.coupled_v)), list(cm.driver_v)] = 1.0
    return P


def reduce_cols(cm: CoupledModel, J):
    """``J_full (..., nv_full)`` -> ``J_full A`` ``(..., nv)``."""
    Ji = J[..., np.asarray(cm.independent_v, np.int64)]
    if not cm.coupled_v:
        return Ji
    a = cm.multiplier.astype(J.dtype).reshape((1,) * (J.ndim - 1) + (-1,))
    Jc = J[..., np.asarray(cm.coupled_v, np.int64)] * a
    return Ji + Jc @ jnp.asarray(_onehot(cm), J.dtype)


def reduce_forces(cm: CoupledModel, tau):
    """Generalized forces of the full tree ``(nv_full,)`` -> ``Aᵀ tau`` ``(nv,)``."""
    return reduce_cols(cm, tau[None])[0]


def reduce_matrix(cm: CoupledModel, H):
    """``Aᵀ H A`` for ``H (nv_full, nv_full)``."""
    return reduce_cols(cm, jnp.swapaxes(reduce_cols(cm, H), -1, -2))


def _check(cm, **arrays):
    from ._core.checks import check_state

    return check_state(cm, **arrays)


# ---------------------------------------------------------------- dynamics


def mass_matrix(cm, q):
    from ._crba import mass_matrix as mm

    (q,) = _check(cm, q=q)
    return reduce_matrix(cm, mm(cm.base, expand_q(cm, q)))


def inverse_dynamics(cm, q, qd, qdd, f_ext=None):
    from ._rnea import inverse_dynamics as rnea

    q, qd, qdd = _check(cm, q=q, qd=qd, qdd=qdd)
    tau = rnea(cm.base, expand_q(cm, q), expand_v(cm, qd), expand_v(cm, qdd), f_ext)
    return reduce_forces(cm, tau)


def bias_forces(cm, q, qd, f_ext=None):
    from ._rnea import bias_forces as bias

    q, qd = _check(cm, q=q, qd=qd)
    return reduce_forces(cm, bias(cm.base, expand_q(cm, q), expand_v(cm, qd), f_ext))


def gravity_forces(cm, q):
    from ._rnea import gravity_forces as grav

    (q,) = _check(cm, q=q)
    return reduce_forces(cm, grav(cm.base, expand_q(cm, q)))


def forward_dynamics(cm, q, qd, tau, f_ext=None, method="aba"):
    from ._core import linalg as _linalg

    if method not in ("aba", "crba"):
        raise ValueError(f"method {method!r}, expected 'aba' or 'crba'")
    q, qd, tau = _check(cm, q=q, qd=qd, tau=tau)
    H = mass_matrix(cm, q)
    C = bias_forces(cm, q, qd, f_ext)
    return _linalg.cho_solve(_linalg.cholesky(H), tau - C)


def minv_times(cm, q, tau):
    from ._core import linalg as _linalg

    (q,) = _check(cm, q=q)
    L = _linalg.cholesky(mass_matrix(cm, q))
    tau = jnp.asarray(tau, cm.dtype)
    if tau.ndim not in (1, 2) or tau.shape[0] != cm.nv:
        raise ValueError(f"tau has shape {tau.shape}, expected ({cm.nv},) or ({cm.nv}, k)")
    return _linalg.cho_solve(L, tau)


def hybrid_dynamics(cm, q, qd, tau, qdd, prescribed, f_ext=None):
    """`hybrid_dynamics` on the independent coordinates, by the dense route: with ``K``
    the prescribed and ``U`` the free DoFs, ``H_UU qdd_U = tau_U - C_U - H_UK qdd_K`` and
    ``tau_K = (H qdd + C)_K``."""
    from ._core import linalg as _linalg
    from ._hybrid import prescribed_mask

    q, qd, tau, qdd = _check(cm, q=q, qd=qd, tau=tau, qdd=qdd)
    mask = np.asarray(prescribed_mask(cm, prescribed))
    K, U = np.flatnonzero(mask), np.flatnonzero(~mask)
    H = mass_matrix(cm, q)
    C = bias_forces(cm, q, qd, f_ext)
    rhs = tau[U] - C[U] - H[np.ix_(U, K)] @ qdd[K]
    x = _linalg.cho_solve(_linalg.cholesky(H[np.ix_(U, U)]), rhs) if U.size else rhs
    qdd_out = qdd.at[U].set(x)
    tau_out = tau.at[K].set((H @ qdd_out + C)[K])
    return qdd_out, tau_out


# ---------------------------------------------------------------- derivatives (AD)


def _tangent_jacobian(cm, f, q):
    """``d f(q ⊕ δ) / dδ`` at ``δ = 0``: the derivative along `integrate`."""
    from ._configuration import integrate as integ

    qf = expand_q(cm, q)
    return jax.jacfwd(lambda d: f(integ(cm.base, qf, expand_v(cm, d))))(jnp.zeros(cm.nv, q.dtype))


def forward_dynamics_derivatives(cm, q, qd, tau, f_ext=None):
    from ._core import linalg as _linalg
    from ._crba import mass_matrix as mm
    from ._rnea import bias_forces as bias

    q, qd, tau = _check(cm, q=q, qd=qd, tau=tau)

    def fd(qf, v):
        H = reduce_matrix(cm, mm(cm.base, qf))
        C = reduce_forces(cm, bias(cm.base, qf, expand_v(cm, v), f_ext))
        return _linalg.cho_solve(_linalg.cholesky(H), tau - C)

    dq = _tangent_jacobian(cm, lambda qf: fd(qf, qd), q)
    dv = jax.jacfwd(lambda v: fd(expand_q(cm, q), v))(qd)
    Minv = minv_times(cm, q, jnp.eye(cm.nv, dtype=cm.dtype))
    return dq, dv, Minv


def inverse_dynamics_derivatives(cm, q, qd, qdd, f_ext=None):
    from ._rnea import inverse_dynamics as rnea

    q, qd, qdd = _check(cm, q=q, qd=qd, qdd=qdd)

    def tau(qf, v):
        return reduce_forces(cm, rnea(cm.base, qf, expand_v(cm, v), expand_v(cm, qdd), f_ext))

    dq = _tangent_jacobian(cm, lambda qf: tau(qf, qd), q)
    dv = jax.jacfwd(lambda v: tau(expand_q(cm, q), v))(qd)
    return dq, dv, mass_matrix(cm, q)


def forward_dynamics_parameter_derivatives(cm, q, qd, tau, f_ext=None):
    """``d qdd / d inertia = -H⁻¹ Y(q, qd, qdd)`` at the forward dynamics' ``qdd``."""
    q, qd, tau = _check(cm, q=q, qd=qd, tau=tau)
    qdd = forward_dynamics(cm, q, qd, tau, f_ext)
    return -minv_times(cm, q, inverse_dynamics_regressor(cm, q, qd, qdd))


def inverse_dynamics_regressor(cm, q, qd, qdd, *, armature=False):
    from ._parameters import inverse_dynamics_regressor as reg

    q, qd, qdd = _check(cm, q=q, qd=qd, qdd=qdd)
    Y = reg(cm.base, expand_q(cm, q), expand_v(cm, qd), expand_v(cm, qdd), armature=armature)
    return jnp.swapaxes(reduce_cols(cm, jnp.swapaxes(Y, 0, 1)), 0, 1)


# ---------------------------------------------------------------- configurations


def integrate(cm, q, v, dt=1.0):
    from ._configuration import integrate as integ

    q, v = _check(cm, q=q, v=v)
    qf = integ(cm.base, expand_q(cm, q), expand_v(cm, v), dt)
    return qf[np.asarray(cm.independent_q, np.int64)]


def difference(cm, q0, q1):
    from ._configuration import difference as diff
    from ._core.checks import check_vector

    q0 = check_vector("q0", q0, cm.nq, "model.nq", cm.dtype)
    q1 = check_vector("q1", q1, cm.nq, "model.nq", cm.dtype)
    return diff(cm.base, expand_q(cm, q0), expand_q(cm, q1))[np.asarray(cm.independent_v, np.int64)]


def neutral_configuration(cm):
    from ._configuration import neutral_configuration as neutral

    return neutral(cm.base)[np.asarray(cm.independent_q, np.int64)]


def random_configuration(cm, key, scale=1.0):
    from ._configuration import random_configuration as rand

    return rand(cm.base, key, scale)[np.asarray(cm.independent_q, np.int64)]


# ---------------------------------------------------------------- kinematics and momentum


def _full_state(cm, q, qd=None, qdd=None):
    arrays = {"q": q}
    if qd is not None:
        arrays["qd"] = qd
    if qdd is not None:
        arrays["qdd"] = qdd
    checked = _check(cm, **arrays)
    out = [expand_q(cm, checked[0])] + [expand_v(cm, x) for x in checked[1:]]
    return out


def _position_only(name):
    def f(cm, q, *args, **kwargs):
        from importlib import import_module

        mod = import_module(_MODULE[name], __package__)
        return getattr(mod, name)(cm.base, *_full_state(cm, q), *args, **kwargs)

    f.__name__ = name
    return f


def _with_velocity(name):
    def f(cm, q, qd, *args, **kwargs):
        from importlib import import_module

        mod = import_module(_MODULE[name], __package__)
        return getattr(mod, name)(cm.base, *_full_state(cm, q, qd), *args, **kwargs)

    f.__name__ = name
    return f


def _with_acceleration(name):
    def f(cm, q, qd, qdd, *args, **kwargs):
        from importlib import import_module

        mod = import_module(_MODULE[name], __package__)
        return getattr(mod, name)(cm.base, *_full_state(cm, q, qd, qdd), *args, **kwargs)

    f.__name__ = name
    return f


def _jacobian(name):
    def f(cm, q, *args, **kwargs):
        from importlib import import_module

        mod = import_module(_MODULE[name], __package__)
        return reduce_cols(cm, getattr(mod, name)(cm.base, *_full_state(cm, q), *args, **kwargs))

    f.__name__ = name
    return f


_MODULE = {}
for _name in ("forward_kinematics", "point_position", "body_jacobians", "point_jacobian",
              "body_jacobian", "body_velocities", "body_velocity", "point_velocity",
              "point_bias_acceleration", "body_bias_acceleration", "body_accelerations",
              "body_acceleration", "point_acceleration"):
    _MODULE[_name] = "._kinematics"
for _name in ("center_of_mass", "centroidal_momentum", "centroidal_momentum_matrix",
              "centroidal_momentum_bias", "center_of_mass_velocity", "center_of_mass_jacobian",
              "center_of_mass_acceleration", "kinetic_energy", "potential_energy",
              "system_inertia"):
    _MODULE[_name] = "._energy"
for _name in ("constraint_jacobian", "constraint_bias", "constraint_residual",
              "constraint_velocity_residual"):
    _MODULE[_name] = "._constraints"

forward_kinematics = _position_only("forward_kinematics")
point_position = _position_only("point_position")
center_of_mass = _position_only("center_of_mass")
potential_energy = _position_only("potential_energy")
system_inertia = _position_only("system_inertia")
constraint_residual = _position_only("constraint_residual")
body_velocities = _with_velocity("body_velocities")
body_velocity = _with_velocity("body_velocity")
point_velocity = _with_velocity("point_velocity")
point_bias_acceleration = _with_velocity("point_bias_acceleration")
body_bias_acceleration = _with_velocity("body_bias_acceleration")
centroidal_momentum = _with_velocity("centroidal_momentum")
centroidal_momentum_bias = _with_velocity("centroidal_momentum_bias")
center_of_mass_velocity = _with_velocity("center_of_mass_velocity")
kinetic_energy = _with_velocity("kinetic_energy")
constraint_bias = _with_velocity("constraint_bias")
constraint_velocity_residual = _with_velocity("constraint_velocity_residual")
body_accelerations = _with_acceleration("body_accelerations")
body_acceleration = _with_acceleration("body_acceleration")
point_acceleration = _with_acceleration("point_acceleration")
center_of_mass_acceleration = _with_acceleration("center_of_mass_acceleration")
body_jacobians = _jacobian("body_jacobians")
point_jacobian = _jacobian("point_jacobian")
body_jacobian = _jacobian("body_jacobian")
centroidal_momentum_matrix = _jacobian("centroidal_momentum_matrix")
center_of_mass_jacobian = _jacobian("center_of_mass_jacobian")
constraint_jacobian = _jacobian("constraint_jacobian")


def total_mass(cm):
    from ._energy import total_mass as tm

    return tm(cm.base)


# ---------------------------------------------------------------- contacts


def forward_dynamics_contacts(cm, q, qd, tau, constraints, method="kkt", f_ext=None, *,
                              check_rank=False, rcond=None):
    from ._contacts import _check_method, _check_rcond, _solve

    _check_method(method)
    _check_rcond(rcond)
    q, qd, tau = _check(cm, q=q, qd=qd, tau=tau)
    H = mass_matrix(cm, q)
    C = bias_forces(cm, q, qd, f_ext)
    G = constraint_jacobian(cm, q, constraints)
    gamma = constraint_bias(cm, q, qd, constraints)
    return _solve(method, rcond, check_rank, H, G, tau - C, gamma, "forward_dynamics_contacts")


def contact_impulses(cm, q, qd_minus, constraints, restitution=0.0, method="kkt", *,
                     return_impulses=False, check_rank=False, rcond=None):
    from ._contacts import _check_method, _check_rcond, _solve
    from ._core.checks import _as_float

    _check_method(method)
    _check_rcond(rcond)
    q, qd_minus = _check(cm, q=q, qd_minus=qd_minus)
    e = _as_float("restitution", restitution, cm.dtype)
    if e.shape not in ((), (constraints.size,)):
        raise ValueError(
            f"restitution has shape {e.shape}, expected () or ({constraints.size},) = (constraints.size,)"
        )
    H = mass_matrix(cm, q)
    G = constraint_jacobian(cm, q, constraints)
    qd_plus, Lam = _solve(
        method, rcond, check_rank, H, G, H @ qd_minus, -e * (G @ qd_minus), "contact_impulses"
    )
    return (qd_plus, Lam) if return_impulses else qd_plus


def unsupported(name: str):
    """The error of a public function that does not take a `CoupledModel` yet."""
    return ValueError(
        f"{name} does not take a CoupledModel (a model with mimic/coupled joints) yet; "
        "load the model with mimic='independent' to use it on the full tree"
    )
