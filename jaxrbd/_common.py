"""Shared pieces of the recursive algorithms: argument checks, ``Xup``, padding."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np

from . import _algebra as al
from ._backend import traversal
from ._jcalc import _MULTI, joint_transforms, node_Xtree, tables
from ._rows import sum_rows
from ._tree import Schedule, schedule

# ---------------------------------------------------------------- argument checks


def _as_float(name: str, x, dtype):
    if x is None:
        raise TypeError(f"{name} is None, expected an array of numbers")
    try:
        x = jnp.asarray(x)
    except TypeError as e:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__} ({e})") from None
    if jnp.issubdtype(x.dtype, jnp.complexfloating) or x.dtype == jnp.bool_ or not (
        jnp.issubdtype(x.dtype, jnp.floating) or jnp.issubdtype(x.dtype, jnp.integer)
    ):
        raise TypeError(f"{name} has dtype {x.dtype}, expected a real floating dtype")
    return x.astype(dtype)


def check_vector(name: str, x, n: int, what: str, dtype):
    """``x`` as a ``(n,)`` array of ``dtype``, or a ValueError naming ``name``."""
    x = _as_float(name, x, dtype)
    if x.shape != (n,):
        raise ValueError(f"{name} has shape {x.shape}, expected ({n},) = ({what},)")
    return x


def check_f_ext(model, f_ext):
    if f_ext is None:
        return None
    f_ext = _as_float("f_ext", f_ext, model.dtype)
    if f_ext.shape != (model.nbodies, 6):
        raise ValueError(
            f"f_ext has shape {f_ext.shape}, expected ({model.nbodies}, 6) = (model.nbodies, 6)"
        )
    return f_ext


def check_state(model, **arrays):
    """Check and convert each named vector; sizes by name (q: nq, others: nv)."""
    out = []
    for name, x in arrays.items():
        if name == "q":
            out.append(check_vector("q", x, model.nq, "model.nq", model.dtype))
        else:
            out.append(check_vector(name, x, model.nv, "model.nv", model.dtype))
    return out


_WARNED: set[str] = set()


def warn_deprecated(old: str, new: str) -> None:
    """A `DeprecationWarning`, once per process, that ``old`` is an alias of ``new``."""
    if old in _WARNED:
        return
    _WARNED.add(old)
    warnings.warn(
        f"{old} is deprecated and will be removed; call {new} (same arguments, same result)",
        DeprecationWarning,
        stacklevel=3,
    )


# ---------------------------------------------------------------- per-node terms


def sched(model, B: int = 1, batch_width: int = 1, device=None) -> Schedule:
    """The traversal schedule of ``model`` for ``B`` states: ``model.traversal``, or for
    ``"auto"`` the one `jaxrbd._backend.traversal` picks for the device (``batch_width``:
    nodes per step on a CPU batch)."""
    return schedule(model.node_parent, traversal(model.traversal, B, batch_width, device))


def root_chain(model, s: Schedule, B: int) -> int:
    """Number ``k`` of nodes of a multi-DoF root joint (a floating base: 6) whose steps the
    articulated-body passes on batches run outside their main scan, or 0.

    Nonzero when ``B > 1``, the world has one child, its joint is a multi-DoF kind whose
    inner nodes have ``Xup = 1`` (see `_jcalc`), and the first ``k`` steps of ``s`` hold
    the nodes ``1..k`` alone. The shortcut costs compile time, which one state does not
    win back, so single calls keep the plain passes.
    """
    parent = model.node_parent
    if B == 1 or len(parent) < 3 or parent.count(0) != 1:
        return 0
    if model.joint_kind[model.node_body[1]] not in _MULTI:
        return 0
    k = model.node_body.count(model.node_body[1])
    if k < 2 or s.steps.shape[0] < k:
        return 0
    head = s.steps[:k]
    if not ((head[:, 0] == np.arange(1, k + 1)).all() and (head[:, 1:] >= s.n).all()):
        return 0
    return k


def Xup_and_S(model, q):
    """``Xup_i = XJ_i Xtree_i`` (``E, r``) and ``S_i`` for every node: ``(nn, ..., B)``."""
    EJ, rJ, S = joint_transforms(model, q)
    Et, rt = node_Xtree(model)
    E, r = al.compose(EJ, rJ, Et, rt)
    return E, r, S


def pad(x, s: Schedule, fill=0.0):
    """Append the scratch rows (``nbuf - nn``) to a per-node array (leading axis)."""
    extra = s.nbuf - x.shape[0]
    if extra <= 0:
        return x
    filler = jnp.full((extra,) + x.shape[1:], fill, x.dtype)
    return jnp.concatenate([x, filler], axis=0)


def pad_E(E, s: Schedule):
    extra = s.nbuf - E.shape[0]
    eye = jnp.broadcast_to(jnp.eye(3, dtype=E.dtype)[:, :, None], (extra, 3, 3, E.shape[-1]))
    return jnp.concatenate([E, eye], axis=0)


def pad_S(S, s: Schedule):
    """Scratch rows get ``S = e_1`` so their ``D`` stays positive (no NaN anywhere)."""
    extra = s.nbuf - S.shape[0]
    e1 = jnp.zeros((extra, 6, S.shape[-1]), S.dtype).at[:, 0].set(1.0)
    return jnp.concatenate([S, e1], axis=0)


def pad_inertia(I, s: Schedule):
    extra = s.nbuf - I.shape[0]
    unit = jnp.asarray([1.0, 0, 0, 0, 1.0, 0, 1.0, 0, 0, 1.0], I.dtype)
    filler = jnp.broadcast_to(unit[None, :, None], (extra, 10, I.shape[-1]))
    return jnp.concatenate([I, filler], axis=0)


def gravity_acceleration(model, B, dtype):
    """Acceleration of the world frame that emulates gravity: ``[0; -g]``, ``(6, B)``."""
    g = jnp.asarray(model.gravity, dtype)
    return jnp.broadcast_to(jnp.concatenate([jnp.zeros(3, dtype), -g])[:, None], (6, B))


def f_ext_nodes(model, f_ext, E0, r0):
    """External forces (world coordinates at the world origin) -> node coordinates.

    Rows of bodies merged into the same node add up (a force on a fixed-merged body
    acts on its node); the world's rows are dropped.
    """
    t = tables(model)
    node = np.asarray(t.body_node)
    f = sum_rows(t.nn, np.where(node > 0, node, -1), f_ext)  # the world's rows dropped
    return al.X_force(E0, r0, f)


__all__ = [
    "Xup_and_S",
    "check_f_ext",
    "check_state",
    "check_vector",
    "f_ext_nodes",
    "gravity_acceleration",
    "pad",
    "pad_E",
    "pad_S",
    "pad_inertia",
    "sched",
    "tables",
    "warn_deprecated",
]
