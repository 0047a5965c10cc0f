"""`jaxrbd.jit`: `jax.jit` with the XLA options jaxrbd's programs compile best with.

The options come from `jaxrbd._core.backend.compiler_options` for the device the program
runs on (`jax.default_device` if set, else JAX's default backend), decided on each
call and compiled once per platform: on a CPU, XLA:CPU's older loop emitters (and
512-bit vectors on hosts with AVX-512); elsewhere none. Results agree with `jax.jit`
to rounding (the same arithmetic, generated differently).

The options are per computation: they leave the rest of a program alone, and they only
take effect on the *outermost* jit (a `jaxrbd.jit` function called inside a plain
`jax.jit` is compiled with the outer function's options).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax

try:  # JAX's private trace state (`nested`); where it moved, `nested` assumes the top level
    from jax._src import core as _jax_core
except ImportError:
    _jax_core = None

from ._core.backend import (
    AVX512_COMPILER_OPTIONS,
    CPU_COMPILER_OPTIONS,
    compiler_options,
    platform,
)

__all__ = [
    "AVX512_COMPILER_OPTIONS", "CPU_COMPILER_OPTIONS", "compiled_when_eager", "compiler_options",
    "jit",
]


def nested() -> bool:
    """Whether a trace (jit, vmap, grad, ...) is in progress: JAX accepts compiler options
    on the outermost jit only."""
    try:
        return not _jax_core.trace_state_clean()
    except AttributeError:  # the private API moved: assume top level
        # (_Jit.__call__ still falls back when JAX refuses nested options)
        return False


class _Jit:
    """A `jax.jit` built on first use, so that importing jaxrbd never starts a backend.

    Called inside another trace (a jit, vmap or grad around it) it runs as a plain
    `jax.jit` (the outer computation's options apply).
    """

    def __init__(self, fun, kwargs):
        self._fun, self._kwargs, self._jitted, self._plain = fun, kwargs, {}, None
        functools.update_wrapper(self, fun)

    def _get(self):
        """The `jax.jit` with the options of the platform the call runs on (one each)."""
        where = platform()
        jitted = self._jitted.get(where)
        if jitted is None:
            kwargs = dict(self._kwargs)
            opts = {**compiler_options(where), **(kwargs.pop("compiler_options", None) or {})}
            jitted = self._jitted[where] = jax.jit(
                self._fun, compiler_options=opts or None, **kwargs
            )
        return jitted

    def _get_plain(self):
        if self._plain is None:
            kwargs = {k: v for k, v in self._kwargs.items() if k != "compiler_options"}
            self._plain = jax.jit(self._fun, **kwargs)
        return self._plain

    def __call__(self, *args, **kwargs):
        if nested():
            return self._get_plain()(*args, **kwargs)
        try:
            return self._get()(*args, **kwargs)
        except ValueError as e:
            if "compiler_options" not in str(e) or "top-level" not in str(e):
                raise
            return self._get_plain()(*args, **kwargs)

    def __getattr__(self, name):  # the jitted function's API: lower, trace, _cache_size, ...
        if name.startswith("__") or name in ("_fun", "_kwargs", "_jitted", "_plain"):
            raise AttributeError(name)
        return getattr(self._get(), name)

    def __get__(self, obj, objtype=None):  # used as a method decorator
        return self if obj is None else functools.partial(self, obj)


def jit(fun=None, **kwargs):
    """`jax.jit` with jaxrbd's XLA compiler options (`compiler_options`) on CPU.

    Takes the arguments of `jax.jit` (``static_argnames``, ``donate_argnums``, ...);
    ``compiler_options`` given here are added to, and override, jaxrbd's. Use it as
    the outermost jit of a program built from jaxrbd functions, above all of batched
    work (`jax.vmap`, `jaxrbd.batched`); single-state programs vary, and one long
    sequential trajectory can run slower, so compile those with `jax.jit`. The options
    follow the device the call runs on (`jaxrbd._core.backend`): on a GPU it is `jax.jit`.
    The `jaxrbd.batched` entry points use it.

    Example:
        >>> fd = jaxrbd.jit(jax.vmap(jaxrbd.forward_dynamics, in_axes=(None, 0, 0, 0)))
        >>> Q = jnp.zeros((4, model.nq))
        >>> fd(model, Q, jnp.zeros((4, model.nv)), jnp.zeros((4, model.nv))).shape == (4, model.nv)
        True
    """
    if fun is None:
        return functools.partial(jit, **kwargs)
    if not callable(fun):
        raise TypeError(f"jaxrbd.jit expects a callable, got {type(fun).__name__}")
    return _Jit(fun, kwargs)


def compiled_when_eager(fun):
    """``fun`` compiled as one program (`eqx.filter_jit`) when it is called outside any
    trace, and ``fun`` itself inside one.

    A public function called eagerly would otherwise run op by op: each `lax.scan` of a
    recursion compiles its body on every call, and one talos ``forward_dynamics`` costs
    seconds instead of microseconds. Compiled, the first call per model structure and
    argument shapes pays one compilation and the next ones run the program. Inside a
    user's `jax.jit`, `jax.vmap` or `jax.grad` nothing changes: the trace goes straight
    through ``fun``.

    The arguments are split as `eqx.filter_jit` does: arrays (JAX and NumPy) are inputs of
    the program, everything else (body names, frames, options, Python numbers) is part of
    its key, so a new Python number compiles again. Under `jax.disable_jit` the call runs
    op by op, as before. Checks that raise on the arguments' shapes, dtypes or names raise
    the same errors on the first call; Python warnings of the function are issued when it
    is traced, i.e. on the first call per key.

    Example:
        >>> from jaxrbd._jit import compiled_when_eager
        >>> f = compiled_when_eager(lambda x, k: x * k)
        >>> f(jnp.ones(2), 3)
        Array([3., 3.], dtype=float64)
    """
    jitted = eqx.filter_jit(fun)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        if nested() or jax.config.jax_disable_jit:
            return fun(*args, **kwargs)
        return jitted(*args, **kwargs)

    return call
