"""Argument checks shared by the public functions: dtypes, shapes, deprecations."""

from __future__ import annotations

import warnings

import jax.numpy as jnp

from .._model import check_model

__all__ = [
    "check_f_ext", "check_model", "check_state", "check_vector", "warn_deprecated",
]



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
    check_model(model)
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
    check_model(model)
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
