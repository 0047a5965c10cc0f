"""Coupled joints (mimic joints, geared rotors): the data of a `CoupledModel` and the
maps between its coordinates and its full tree's.

A coupled model is its full tree (`CoupledModel.base`, every joint a coordinate) seen
through the linear map ``qd_full = A qd`` from the independent velocities; a coupled
joint ``m`` driven by ``j`` has ``q_m = a q_j + b`` and ``qd_m = a qd_j``. Since ``A`` is
constant, accelerations map the same way, and by the principle of virtual work the
generalized forces of the independent coordinates are ``Aᵀ tau_full``.

This module is the bottom floor of coupling: `couple` builds the model, `expand_q`,
`expand_v`, `reduce_cols`, `reduce_forces`, `reduce_matrix` apply ``A``, and `dispatch`
turns a plain function and its coupled variant into one public function. It imports no
algorithm: the coupled variants are in `jaxrbd._coupled`, the choice between plain and
coupled for each public name in `jaxrbd._api`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import jax.numpy as jnp
import numpy as np

from ._body import mass_matrix_bound
from ._model import CoupledModel, Model, check_model

__all__ = [
    "couple",
    "dispatch",
    "expand_q",
    "expand_v",
    "reduce_cols",
    "reduce_forces",
    "reduce_matrix",
    "unsupported",
]


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

    An entry of ``H_full`` is at most `mass_matrix_bound`, and a column of ``A`` sums to
    ``1 + sum |a|`` over the joints one driver moves.
    """
    try:
        inertia = np.asarray(model.inertia, dtype=np.float64)
        r = np.asarray(model.Xtree_r, dtype=np.float64)
        armature = np.asarray(model.armature, dtype=np.float64)
    except jax.errors.TracerArrayConversionError:
        return  # traced leaves: nothing to bound on the host
    if inertia.ndim != 2:
        return  # stacked models
    h = mass_matrix_bound(inertia, r, armature)
    with np.errstate(over="ignore", invalid="ignore"):
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


# ---------------------------------------------------------------- dispatch


#: The one message of a public function that does not take a `CoupledModel`.
UNSUPPORTED = (
    "{name} does not take a CoupledModel yet (not supported for coupled models: mimic or "
    "geared joints); load the model with mimic='independent' to use it on the full tree"
)


def unsupported(name: str) -> ValueError:
    """The error of a public function that does not take a `CoupledModel` yet."""
    return ValueError(UNSUPPORTED.format(name=name))


def dispatch(plain: Callable, coupled: Callable | None = None) -> Callable:
    """The public function of ``plain`` (first argument a `Model`) and its coupled variant.

    The result checks that ``model`` is a model (`jaxrbd._model.check_model`), then calls
    ``coupled`` on a `CoupledModel` and ``plain`` on a `Model` (or a stacked batch); with
    ``coupled=None`` a `CoupledModel` raises `unsupported`. It carries ``plain``'s name,
    signature and docstring. The choice is made at trace time, in Python: compiled
    programs hold one branch only.

    Example:
        >>> from jaxrbd._coupling import dispatch
        >>> f = dispatch(lambda model, q: "plain", lambda model, q: "coupled")
        >>> f(jaxrbd.models.chain(2), None)
        'plain'
    """

    @functools.wraps(plain)
    def public(model, *args, **kwargs):
        check_model(model)  # a TypeError for anything but a model, before any other check
        if isinstance(model, CoupledModel):
            if coupled is None:
                raise unsupported(plain.__name__)
            return coupled(model, *args, **kwargs)
        return plain(model, *args, **kwargs)

    return public
