"""Argument checks shared by the public functions: dtypes, shapes, deprecations, and
`door`, the decorator of a public function's entry (named scope and state checks)."""

from __future__ import annotations

import functools
import inspect
import warnings

import jax
import jax.numpy as jnp

from .._model import check_model

__all__ = [
    "as_float", "check_f_ext", "check_model", "check_state", "check_vector", "door",
    "warn_deprecated",
]


def as_float(name: str, x, dtype):
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
    x = as_float(name, x, dtype)
    if x.shape != (n,):
        raise ValueError(f"{name} has shape {x.shape}, expected ({n},) = ({what},)")
    return x


def check_f_ext(model, f_ext):
    check_model(model)
    if f_ext is None:
        return None
    f_ext = as_float("f_ext", f_ext, model.dtype)
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


def door(*state: str, f_ext: bool = False):
    """Decorator of a public function ``fn(model, ...)``: its door to the kernels.

    The decorated function runs inside ``jax.named_scope("jaxrbd.<fn name>")`` (so its
    operations are named in profiles and compiled programs) with the arguments named in
    ``state`` checked and converted by `check_state`, in that order (``q`` against
    ``model.nq``, the others against ``model.nv``), and ``f_ext`` by `check_f_ext` when
    ``f_ext=True``. Everything else (options, derivative rules) stays in ``fn``. The
    checks run at trace time, in Python.

    Example:
        >>> from jaxrbd._core.checks import door
        >>> @door("q", "qd")
        ... def speed(model, q, qd):
        ...     return qd @ qd
        >>> float(speed(jaxrbd.models.chain(2), [0, 0], [3, 4]))
        25.0
        >>> speed(jaxrbd.models.chain(2), [0, 0], [3, 4, 5])
        Traceback (most recent call last):
        ...
        ValueError: qd has shape (3,), expected (2,) = (model.nv,)
    """

    def wrap(fn):
        sig = inspect.signature(fn)
        scope = f"jaxrbd.{fn.__name__}"

        @functools.wraps(fn)
        def public(*args, **kwargs):
            with jax.named_scope(scope):
                bound = sig.bind(*args, **kwargs)
                a = bound.arguments
                model = a["model"]
                if state:
                    a.update(zip(state, check_state(model, **{k: a[k] for k in state})))
                if f_ext and a.get("f_ext") is not None:
                    a["f_ext"] = check_f_ext(model, a["f_ext"])
                return fn(*bound.args, **bound.kwargs)

        return public

    return wrap


def scoped(name: str, fn):
    """``fn`` run inside ``jax.named_scope("jaxrbd.<name>")``, without any check: a kernel
    that a feature calls for a checked state keeps the name that the public door ``name``
    gives its operations in profiles and compiled programs.

    Example:
        >>> from jaxrbd._core.checks import scoped
        >>> double = scoped("double", lambda x: 2 * x)
        >>> "jaxrbd.double" in str(jax.jit(double).lower(1.0).as_text(debug_info=True))
        True
    """
    scope = f"jaxrbd.{name}"

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with jax.named_scope(scope):
            return fn(*args, **kwargs)

    return run


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
