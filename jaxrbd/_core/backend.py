"""Backend tuning: the one place that decides how jaxrbd's work is cut and compiled for
the device it runs on.

Each decision is taken at trace time, from an explicit ``device`` argument (a
`jax.Device` or a platform name such as ``"cpu"`` or ``"gpu"``) where the caller has one,
else from the device the computation runs on: the one `jax.default_device` names (the
context manager or the ``jax_default_device`` option), else JAX's default backend.

* **Block size** (`block_size`). On a CPU the batched kernels run the batch in blocks of
  `CHUNK` samples, one after the other (`jaxrbd._core.native_vmap.blocked`): a block keeps every
  per-node buffer in the cache. The contact solves and the ground-contact rollouts,
  whose per-sample matrices are dense, block by their size (`contact_block`). On an
  accelerator every iteration of the loop over blocks costs kernel launches, so the
  whole batch is one block.
* **Traversal** (`traversal`). ``Model.traversal == "auto"`` steps one tree node at a
  time on a CPU batch (in-place row updates), and level by level on accelerators, where
  a level's nodes for the whole batch run in the same kernels and each sequential step
  costs launches. ``Model.with_traversal("dense")`` makes one state's calls products over
  the ancestor mask (`jaxrbd._core.dense`): far fewer kernels, opt-in for now.
* **Compiler options** (`compiler_options`). On a CPU, `jaxrbd.jit` compiles with
  `CPU_COMPILER_OPTIONS`, plus `AVX512_COMPILER_OPTIONS` on hosts with AVX-512: XLA:CPU's
  newer fusion emitters split the body of jaxrbd's tree scans into more, smaller
  kernels, each of which costs runtime overhead per scan step, and 512-bit vectors cover
  a block's samples in half the instructions. Elsewhere there are none.
* **LAPACK guard** (`lapack_guard`). XLA:CPU's LAPACK kernels can deadlock when two of
  them split batches over the thread pool at once (`jaxrbd._core.linalg`); the guard keeps
  every call below the splitting threshold whenever the work runs on a CPU.

The figures behind these choices are in ``benchmarks/LOG.md``.
"""

from __future__ import annotations

import functools
import warnings

import jax

try:  # NumPy's runtime-dispatch table of CPU features (private; moved in NumPy 2)
    from numpy._core._multiarray_umath import __cpu_features__ as _CPU_FEATURES
except ImportError:  # NumPy 1.x
    try:
        from numpy.core._multiarray_umath import __cpu_features__ as _CPU_FEATURES
    except ImportError:
        _CPU_FEATURES = {}

__all__ = [
    "AVX512_COMPILER_OPTIONS",
    "CHUNK",
    "CONTACT_BLOCK_BYTES",
    "CPU_COMPILER_OPTIONS",
    "block_size",
    "compiler_options",
    "contact_block",
    "host_has_avx512",
    "lapack_guard",
    "on_cpu",
    "platform",
    "traversal",
]

#: Samples per block of the batched kernels on a CPU: small enough that a block's
#: per-node buffers stay in the cache.
CHUNK = 32

#: Bytes of one block's dense ``(nv, nv)`` matrices that the contact solves and the
#: ground-contact rollouts aim for on a CPU (`contact_block`): about a core's L2 cache.
CONTACT_BLOCK_BYTES = 1 << 20

#: XLA options `jaxrbd.jit` adds on a CPU (see the module docstring).
CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}

#: XLA options added on top of `CPU_COMPILER_OPTIONS` when the host CPU has AVX-512
#: (`host_has_avx512`); ``{"xla_cpu_prefer_vector_width": 256}`` passed to `jaxrbd.jit`
#: opts out (e.g. on chips that lower their clock for 512-bit work).
AVX512_COMPILER_OPTIONS = {"xla_cpu_prefer_vector_width": 512}

# platform names that `jax.default_device` and `jax.devices` accept for a GPU
_GPU_NAMES = ("cuda", "rocm")


def platform(device=None) -> str:
    """The platform (``"cpu"``, ``"gpu"``, ``"tpu"``, ...) the tuning follows.

    Args:
        device: a `jax.Device`, a platform name, or ``None``: the device the computation
            runs on (`jax.default_device` if set, else JAX's default backend).
    """
    if device is None:
        device = jax.config.jax_default_device
        if device is None:
            return jax.default_backend()
    if isinstance(device, str):
        return "gpu" if device in _GPU_NAMES else device
    return device.platform


def on_cpu(device=None) -> bool:
    """Whether the work runs on a CPU (`platform`)."""
    return platform(device) == "cpu"


def block_size(cpu_chunk: int = CHUNK, device=None) -> int | None:
    """Samples per block: ``cpu_chunk`` on a CPU, ``None`` (the whole batch) elsewhere."""
    return cpu_chunk if on_cpu(device) else None


def contact_block(nv: int, itemsize: int = 8, device=None) -> int | None:
    """Samples per block of a vmapped contact solve (`jaxrbd.forward_dynamics_contacts`,
    `jaxrbd.contact_impulses`) and of the batched ground-contact rollouts
    (`jaxrbd.batched.ground_rollout`, whose dense per-sample matrices then stay in cache
    through the whole rollout): on a CPU the largest power of two whose ``(nv, nv)``
    matrices (``itemsize`` bytes per entry) fit in `CONTACT_BLOCK_BYTES`, within [16, 256];
    ``None`` (the whole batch) elsewhere (measurements: benchmarks/LOG.md).

    Example:
        >>> from jaxrbd._core.backend import contact_block
        >>> contact_block(38, device="cpu"), contact_block(18, device="cpu")
        (64, 256)
    """
    if not on_cpu(device):
        return None
    fit = CONTACT_BLOCK_BYTES // (itemsize * max(nv, 1) ** 2)
    return int(min(256, max(16, 1 << max(int(fit).bit_length() - 1, 0))))


def traversal(model_traversal: str, B: int, batch_width: int = 1, device=None) -> str:
    """The schedule (`jaxrbd._core.topology.Topology.schedule`) for ``Model.traversal``, ``B`` states.

    An explicit traversal is kept, except that ``"dense"`` (the shared recursions as
    dense products on one state, `jaxrbd._core.dense`; fewest kernels) applies to one
    state only and a batch takes what ``"auto"`` picks. ``"auto"`` is ``"level"`` for one
    state (fewest sequential steps) and off the CPU; on a CPU batch, ``batch_width``
    nodes per step (``1``: ``"body"``, no padding and in-place updates). ``"dense"`` is
    opt-in (`Model.with_traversal`) until it is timed on a quiet machine: it runs 20-40x
    fewer kernels, but its time per call was not measurable reliably (benchmarks/LOG.md).
    """
    if model_traversal == "kernel":
        # the native kernel replaces one state's forward dynamics (`jaxrbd._core.ffi`);
        # every program around it is the one "auto" picks
        model_traversal = "auto"
    if model_traversal == "dense":
        # one state only: a batch takes what "auto" picks for it
        if B == 1:
            return "dense"
        model_traversal = "auto"
    if model_traversal != "auto":
        return model_traversal
    if B == 1 or not on_cpu(device):
        return "level"
    return "body" if batch_width == 1 else f"level{batch_width}"


def lapack_guard(device=None) -> bool:
    """Whether batched LAPACK calls are cut below XLA:CPU's threading threshold: on
    whenever the work runs on a CPU (`jaxrbd._core.linalg`)."""
    return on_cpu(device)


# ---------------------------------------------------------------- compiler options


@functools.cache
def host_has_avx512() -> bool:
    """Whether this machine's CPU has AVX-512F, as NumPy's runtime dispatch detects it
    (False where that table cannot be read)."""
    return bool(_CPU_FEATURES.get("AVX512F", False))


def _cpu_options() -> dict:
    extra = AVX512_COMPILER_OPTIONS if host_has_avx512() else {}
    return {**CPU_COMPILER_OPTIONS, **extra}


@functools.cache
def _supported() -> bool:
    """Whether this jax/jaxlib accepts jaxrbd's CPU options (one tiny compile, once)."""
    options = _cpu_options()
    try:
        with jax.default_device(jax.devices("cpu")[0]):
            jax.jit(lambda x: x + 1, compiler_options=options).lower(1.0).compile()
    except (TypeError, ValueError, RuntimeError) as e:  # XLA without the option (a
        # JaxRuntimeError), a jax.jit without the argument (TypeError), no CPU backend
        warnings.warn(
            f"jaxrbd.jit: this jax/jaxlib rejects the compiler options {options} "
            f"({type(e).__name__}: {e}); compiling with XLA's defaults",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    return True


def compiler_options(device=None) -> dict:
    """The XLA compiler options `jaxrbd.jit` uses for ``device``.

    `CPU_COMPILER_OPTIONS` (and `AVX512_COMPILER_OPTIONS` on a CPU with AVX-512) when
    the work runs on a CPU (`platform`) and this jaxlib accepts them, otherwise ``{}``.
    Calling it initialises JAX's backend.

    Args:
        device: a `jax.Device`, a platform name or ``None`` (the device the computation
            runs on: `jax.default_device` if set, else JAX's default backend).

    Example:
        >>> opts = jaxrbd.compiler_options()   # e.g. {'xla_cpu_use_fusion_emitters': False}
        >>> f = jax.jit(jaxrbd.mass_matrix, compiler_options=opts)
    """
    if not on_cpu(device) or not _supported():
        return {}
    return _cpu_options()
