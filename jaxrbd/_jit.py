"""`jaxrbd.jit`: `jax.jit` with the XLA options jaxrbd's programs compile best with.

XLA:CPU has two code generators for fused elementwise kernels. Its newer "fusion
emitters" (the default) split the body of jaxrbd's tree scans into more, smaller
kernels than the older loop emitters, and each kernel of a scan step costs runtime
overhead. With ``xla_cpu_use_fusion_emitters=False`` (`CPU_COMPILER_OPTIONS`) jaxrbd's
programs compile faster everywhere and batched work runs faster; single-state programs
vary, and one long sequential trajectory can run slower: compile those with plain
`jax.jit`. Results agree to rounding (the same arithmetic, generated differently).

On a CPU with AVX-512, XLA still asks LLVM for 256-bit vectors by default. jaxrbd's
batched kernels work on rows of `jaxrbd._vmap.CHUNK` states, which 512-bit vectors
cover in half the instructions, so `jaxrbd.jit` adds
``xla_cpu_prefer_vector_width=512`` there (`AVX512_COMPILER_OPTIONS`); pass
``compiler_options={"xla_cpu_prefer_vector_width": 256}`` to `jit` to opt out (e.g. on
chips that lower their clock for 512-bit work).

The options are per computation: they leave the rest of a program alone, and they only
take effect on the *outermost* jit (a `jaxrbd.jit` function called inside a plain
`jax.jit` is compiled with the outer function's options). The measurements behind
these choices are in ``benchmarks/LOG.md``.
"""

from __future__ import annotations

import functools
import warnings

import jax

from ._vmap import on_cpu

__all__ = ["AVX512_COMPILER_OPTIONS", "CPU_COMPILER_OPTIONS", "compiler_options", "jit"]

#: XLA options `jaxrbd.jit` adds on CPU (see the module docstring).
CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}

#: XLA options `jaxrbd.jit` adds on top of `CPU_COMPILER_OPTIONS` when the host CPU has
#: AVX-512 (`host_has_avx512`).
AVX512_COMPILER_OPTIONS = {"xla_cpu_prefer_vector_width": 512}


@functools.cache
def host_has_avx512() -> bool:
    """Whether this machine's CPU has AVX-512F, as NumPy's runtime dispatch detects it
    (False where that table cannot be read)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # NumPy 1.x
        try:
            from numpy.core._multiarray_umath import __cpu_features__
        except ImportError:
            return False
    return bool(__cpu_features__.get("AVX512F", False))


def _cpu_options() -> dict:
    extra = AVX512_COMPILER_OPTIONS if host_has_avx512() else {}
    return {**CPU_COMPILER_OPTIONS, **extra}


@functools.cache
def _supported() -> bool:
    """Whether this jax/jaxlib accepts jaxrbd's CPU options (one tiny compile, once)."""
    options = _cpu_options()
    try:
        jax.jit(lambda x: x + 1, compiler_options=options).lower(1.0).compile()
    except (TypeError, ValueError, RuntimeError) as e:  # XLA without the option (a
        # JaxRuntimeError), or a jax.jit without the argument (TypeError)
        warnings.warn(
            f"jaxrbd.jit: this jax/jaxlib rejects the compiler options {options} "
            f"({type(e).__name__}: {e}); compiling with XLA's defaults",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return True


def compiler_options() -> dict:
    """The XLA compiler options `jaxrbd.jit` uses on the default backend.

    `CPU_COMPILER_OPTIONS` (and `AVX512_COMPILER_OPTIONS` on a CPU with AVX-512) when
    the default backend is the CPU and this jaxlib accepts them, otherwise ``{}``.
    Calling it initialises JAX's backend.

    Example:
        >>> opts = jaxrbd.compiler_options()   # e.g. {'xla_cpu_use_fusion_emitters': False}
        >>> f = jax.jit(jaxrbd.mass_matrix, compiler_options=opts)
    """
    if not on_cpu() or not _supported():
        return {}
    return _cpu_options()


def _nested() -> bool:
    """Whether a trace (jit, vmap, grad, ...) is in progress: JAX accepts compiler options
    on the outermost jit only."""
    try:
        from jax._src import core

        return not core.trace_state_clean()
    except (ImportError, AttributeError):  # the private API moved: assume top level
        # (_Jit.__call__ still falls back when JAX refuses nested options)
        return False


class _Jit:
    """A `jax.jit` built on first use, so that importing jaxrbd never starts a backend.

    Called inside another trace (a jit, vmap or grad around it) it runs as a plain
    `jax.jit` (the outer computation's options apply).
    """

    def __init__(self, fun, kwargs):
        self._fun, self._kwargs, self._jitted, self._plain = fun, kwargs, None, None
        functools.update_wrapper(self, fun)

    def _get(self):
        if self._jitted is None:
            kwargs = dict(self._kwargs)
            opts = {**compiler_options(), **(kwargs.pop("compiler_options", None) or {})}
            self._jitted = jax.jit(self._fun, compiler_options=opts or None, **kwargs)
        return self._jitted

    def _get_plain(self):
        if self._plain is None:
            kwargs = {k: v for k, v in self._kwargs.items() if k != "compiler_options"}
            self._plain = jax.jit(self._fun, **kwargs)
        return self._plain

    def __call__(self, *args, **kwargs):
        if _nested():
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
    the outermost jit of a program built from jaxrbd functions: on CPU it compiles
    faster and runs batched work faster than plain `jax.jit` (more so with 512-bit
    vectors on CPUs with AVX-512; figures in ``benchmarks/LOG.md``). Single-state
    programs vary, and one long trajectory can run slower, so compile those with
    `jax.jit`. On GPU it is `jax.jit`. The `jaxrbd.batched` entry points use it.

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
