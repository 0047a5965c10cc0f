"""One state's recursion as a single compiled kernel: ``Model.with_traversal("kernel")``.

On XLA:CPU a single-state call of the scan programs executes hundreds to thousands of
small kernels, and its time is theirs, not the arithmetic's (benchmarks/LOG.md). Under
``traversal="kernel"`` the recursion of one state runs instead as one C++ function
(``ffi_kernels.cc``) that XLA calls through its foreign-function interface (`jax.ffi`):
one kernel per call.

What runs natively, and what does not:

* forward dynamics (ABA), inverse dynamics (RNEA) and the mass matrix (CRBA) of one
  state, float64, on the CPU, without external forces, for models whose joints are screw
  joints (revolute, prismatic, helical), free, spherical or ``translation_xyz`` joints
  (`supported`), and whatever calls them for one state (`jaxrbd.rollout`'s steps, ...);
* `jaxrbd.forward_dynamics_derivatives` and `jaxrbd.inverse_dynamics_derivatives` of one
  state (`fd_derivatives`, `id_derivatives`);
* `jax.vmap` of each of these over states of one model: one call whose C++ loops over
  the batch (``batch=True``; `jaxrbd._core.native_vmap`'s ``custom_vmap`` rule);
* reverse-mode derivatives of one state's forward and inverse dynamics: the reverse
  sweep of RNEA (`rnea_vjp`, `fd_vjp` with ``H^-1`` from the primal ABA's factors;
  `jaxrbd._kernel_rules`), and `jax.vmap` of them over states of one model
  (`jax.jacrev` too): one call whose C++ loops over the batch;
* a time step's configuration move ``q (+) v dt`` and its transpose, for the models
  whose dynamics run natively (`jaxrbd._core.ffi_move`, its own source file);
* everything else runs the ``"auto"`` program, with the same results: other functions,
  batches of models (stacked leaves), forward-mode derivatives (`jax.jvp`
  differentiates the XLA program, `jaxrbd._core.native_vmap`), float32, other devices,
  Euler and custom joints.

The C++ source is compiled at first use with the host's C++ compiler (``$CXX``, else
``c++``, ``g++`` or ``clang++``) against the FFI headers that ship with jaxlib, for the
host's vector unit, and cached under ``$JAXRBD_CACHE`` (default ``~/.cache/jaxrbd``) by a
hash of the source, the compiler, jaxlib's version and the host CPU; building it without
a compiler raises `KernelBuildError`.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import pathlib
import platform
import shutil
import subprocess
import tempfile

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np

from ..joints import JOINT_KINDS
from . import algebra as al
from .backend import on_cpu
from .jcalc import node_inertias
from .topology import topology

__all__ = ["AUX", "NODE_KINDS", "KernelBuildError", "aba", "aba_aux", "build", "crba", "fd_derivatives",
           "fd_vjp", "id_derivatives", "library", "node_tables", "rnea", "rnea_vjp",
           "supported"]

SOURCE = pathlib.Path(__file__).with_name("ffi_kernels.cc")

#: the joint kind of a node, as ``ffi_kernels.cc`` reads it; ``inner`` is a node of a
#: multi-DoF joint after its first (``XJ = 1``)
NODE_KINDS = {"world": 0, "screw": 1, "free": 2, "spherical": 3, "inner": 4,
              "translation_xyz": 5}

#: doubles per node of forward dynamics' residuals for its reverse sweep (`aba_aux`;
#: ``kAux`` in ``ffi_kernels.cc``: Xup's rotation and translation, v, vJc, a, U, D)
AUX = 12 + 6 + 6 + 6 + 6 + 1

#: the XLA FFI targets of ``ffi_kernels.cc``: (registered name, exported symbol)
TARGETS = (("jaxrbd_aba", "JaxrbdAba"), ("jaxrbd_aba_aux", "JaxrbdAbaAux"),
           ("jaxrbd_rnea", "JaxrbdRnea"),
           ("jaxrbd_crba", "JaxrbdCrba"), ("jaxrbd_rnea_vjp", "JaxrbdRneaVjp"),
           ("jaxrbd_fd_vjp", "JaxrbdFdVjp"),
           ("jaxrbd_fd_derivatives", "JaxrbdFdDerivatives"),
           ("jaxrbd_id_derivatives", "JaxrbdIdDerivatives"))

#: flags of the build; the hash of the cached library includes them and, for
#: ``-march=native``, the host CPU's features (`_cpu_features`), so that one cache
#: directory shared by hosts of different CPUs holds one library for each
CXXFLAGS = ("-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-w")


class KernelBuildError(RuntimeError):
    """The native kernels of ``traversal="kernel"`` could not be built on this host."""


def _compiler() -> str:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise KernelBuildError(
        'traversal="kernel" compiles a C++ kernel at first use and found no C++ compiler '
        "(set $CXX or install g++ or clang++); the other traversals need none")


def _cpu_features() -> bytes:
    """What ``-march=native`` compiles for: the CPU's model and feature flags."""
    try:
        info = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor().encode() + platform.machine().encode()
    keep = [line for line in info.splitlines()
            if line.startswith(("flags", "model name", "Features", "CPU part"))]
    return "\n".join(sorted(set(keep))).encode()


def library() -> ctypes.CDLL:
    """Build (once per source, compiler and jaxlib version) and load the kernels, and
    register their FFI targets with XLA's CPU backend."""
    return build(SOURCE, TARGETS)


@functools.cache
def build(source: pathlib.Path, targets: tuple) -> ctypes.CDLL:
    """Build the C++ file ``source`` into a cached library (keyed by its text, the
    compiler, jaxlib's version, the flags and the CPU), load it and register its
    ``targets`` (``(registered name, exported symbol)`` pairs) with XLA's CPU backend."""
    cxx = _compiler()
    text = source.read_bytes()
    # jaxlib's version keys the cache: the FFI headers come with it
    key = hashlib.sha256(b"\0".join([text, cxx.encode(), jaxlib.__version__.encode(),
                                     " ".join(CXXFLAGS).encode(), _cpu_features()]))
    key = key.hexdigest()[:16]
    root = pathlib.Path(os.environ.get("JAXRBD_CACHE", pathlib.Path.home() / ".cache" / "jaxrbd"))
    path = root / "kernels" / f"{source.stem}_{key}.so"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # build beside the target and rename: a concurrent or interrupted build never
        # leaves a partial library under the final name
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
        os.close(fd)
        cmd = [cxx, *CXXFLAGS, f"-I{jax.ffi.include_dir()}", str(source), "-o", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            os.unlink(tmp)
            raise KernelBuildError(
                f'traversal="kernel": building {source.name} failed ({" ".join(cmd)}):\n'
                + done.stderr[-2000:])
        os.replace(tmp, path)
    lib = ctypes.cdll.LoadLibrary(str(path))
    for name, symbol in targets:
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, symbol)),
                                    platform="cpu")
    return lib


@functools.cache
def _tables(t):
    kind = np.zeros(t.nn, np.int32)
    qi = np.zeros(t.nn, np.int32)
    if len(t.custom_nodes):
        return None
    kind[t.screw_nodes] = NODE_KINDS["screw"]
    qi[t.screw_nodes] = t.screw_q
    for name, (nodes, qs, _) in t.multi.items():
        if name not in NODE_KINDS:  # Euler joints: S depends on q
            return None
        ndof = JOINT_KINDS[name][1]
        kind[nodes] = NODE_KINDS[name]
        qi[nodes] = qs
        for k in range(1, ndof):
            kind[nodes + k] = NODE_KINDS["inner"]
    parent = np.maximum(np.asarray(t.node_parent), 0)
    tables = (kind, parent, qi, t.bias_target, t.first_body, t.body_node, t.fixed)
    return tuple(np.asarray(x, np.int32) for x in tables)


def node_tables(model):
    """``(kind, parent, qi, bias_to, first_body, body_node, fixed)``, int32, as
    ``ffi_kernels.cc`` reads the tree (its header); ``None`` when a joint has no native
    kernel (custom or Euler joints)."""
    return _tables(topology(model))


def supported(model, q, f_ext=None, *, batch=False) -> bool:
    """Whether one state's call (``q (nq,)``), or with ``batch=True`` a batch's
    (``q (B, nq)``, one model), runs as a native kernel (module docstring)."""
    return (model.traversal == "kernel" and f_ext is None and q.ndim == 1 + batch
            and q.dtype == jnp.float64 and model.gravity.dtype == jnp.float64 and on_cpu()
            and node_tables(model) is not None)


@functools.cache
def _int_buffer(t):
    tables = _tables(t)
    nn, nb = len(tables[0]), len(tables[5])
    return np.concatenate([np.asarray([nn, nb], np.int32), *tables])


def _buffers(model):
    """The model as the kernels read it (``ffi_kernels.cc``'s ``make_tree``): its index
    tables in one int32 array and its leaves in one float64 array. A call pays a fixed
    time per operand, so the thirteen arrays travel as two; with the model closed over
    both are constants of the program, and as a jit argument the leaves' concatenation
    is one small kernel. A constant model's float buffer also carries its node inertias
    (`_node_inertias`), which the kernels would otherwise rebuild at every call."""
    library()
    leaves = (model.Xtree_E, model.Xtree_r, model.inertia, model.axes, model.armature,
              model.gravity)
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
        floats = jnp.concatenate([jnp.ravel(x) for x in leaves])
    else:
        floats = np.concatenate([np.ravel(np.asarray(x)) for x in leaves]
                                + _node_inertias(model))
    return jnp.asarray(_int_buffer(topology(model))), jnp.asarray(floats)


def _node_inertias(model):
    """A constant model's node inertias as ``make_tree`` reads them after its leaves:
    compact rows ``(nn, 10)``, then the 6x6 matrices ``(nn, 6, 6)``, raveled."""
    with jax.ensure_compile_time_eval():
        Ic = node_inertias(model)  # (nn, 10, 1)
        I6 = al.blocks_dense(*al.inertia_blocks(Ic))  # (nn, 6, 6, 1)
    return [np.ravel(np.asarray(Ic)), np.ravel(np.asarray(I6))]


def _call(name, shape, dtype):
    # `native_vmap` batches the kernels itself (``batch=True``); "sequential" only makes a
    # vmap that reaches the call some other way (a vmap of a batch) loop over it
    return jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(shape, dtype), vmap_method="sequential")


# With ``batch=True`` the kernels below take a batch of states of one model, every state
# argument with a leading batch axis (``q (B, nq)``, ...; `native_vmap`'s rule broadcasts
# the unbatched ones), and loop over it in C++: a `jax.vmap` of a kernel model's call is
# one kernel too, and the model's node inertias are built once per batch.


def aba(model, q, qd, tau, f_ext=None, *, batch=False):
    """Forward dynamics of one state by the native kernel: ``q (nq,)``, ``qd, tau (nv,)`` ->
    ``qdd (nv,)`` (each with a leading batch axis with ``batch=True``); ``None`` where it
    does not apply (`supported`), for the caller to run the XLA program."""
    if not supported(model, q, f_ext, batch=batch):
        return None
    return _call("jaxrbd_aba", q.shape[:-1] + (model.nv,), q.dtype)(*_buffers(model), q, qd, tau)


def aba_aux(model, q, qd, tau, *, batch=False):
    """`aba` and the residuals its reverse sweep reads (`fd_vjp`): ``(qdd (nv,), aux
    (AUX * (nv + 1),))`` (each with a leading batch axis with ``batch=True``, which only
    says what ``q``'s shape does: the kernels' calling convention, `kernel_batch_rule`);
    `supported` must hold."""
    b, nn = q.shape[:-1], model.nv + 1
    call = jax.ffi.ffi_call("jaxrbd_aba_aux", [jax.ShapeDtypeStruct(b + (model.nv,), q.dtype),
                                               jax.ShapeDtypeStruct(b + (AUX * nn,), q.dtype)],
                            vmap_method="sequential")
    return tuple(call(*_buffers(model), q, qd, tau))


def rnea(model, q, qd, qdd, f_ext=None, *, batch=False):
    """Inverse dynamics of one state by the native kernel: ``q (nq,)``, ``qd, qdd (nv,)`` ->
    ``tau (nv,)`` (batches as `aba`); ``None`` where it does not apply (`supported`)."""
    if not supported(model, q, f_ext, batch=batch):
        return None
    return _call("jaxrbd_rnea", q.shape[:-1] + (model.nv,), q.dtype)(*_buffers(model), q, qd, qdd)


def crba(model, q, *, batch=False):
    """The mass matrix ``H + diag(armature)`` of one state by the native kernel:
    ``q (nq,)`` -> ``(nv, nv)`` (batches as `aba`); ``None`` where it does not apply
    (`supported`)."""
    if not supported(model, q, batch=batch):
        return None
    return _call("jaxrbd_crba", q.shape[:-1] + (model.nv, model.nv), q.dtype)(*_buffers(model), q)


def rnea_vjp(model, q, qd, qdd, lam, zeros=()):
    """The reverse sweep of inverse dynamics at one state for the cotangent ``lam (nv,)``
    of ``tau``, by the native kernel (`supported` must hold): the cotangents of the
    model's leaves ``(Xtree_E, Xtree_r, inertia, axes, armature, gravity)`` (the others
    do not enter inverse dynamics) and of ``q``, ``qd``, ``qdd``, then one zero array
    for each shape in ``zeros`` (written by the kernel: the cotangents of the leaves
    the dynamics do not read).

    A batch of states of one model (``q (B, nq)``, every state argument with the same
    leading axis) is one call too: every result then has that leading axis (``zeros``
    names the shapes without it)."""
    return _vjp("jaxrbd_rnea_vjp", model, q, qd, qdd, lam, zeros)


def fd_vjp(model, q, qd, qdd, lam, zeros=(), *, aux):
    """The reverse sweep of forward dynamics at one state, whose solution is ``qdd`` with
    the residuals ``aux`` (`aba_aux`), for the cotangent ``lam (nv,)`` of ``qdd``, by one
    native kernel (`supported` must hold): ``u = H^-1 lam`` from the primal's factors of
    ``H``, then `rnea_vjp`'s sweep for ``-u`` from its passes. Returns `rnea_vjp`'s
    outputs with the cotangent of ``tau`` (``u``) in place of ``qdd``'s; batches as
    `rnea_vjp`."""
    return _vjp("jaxrbd_fd_vjp", model, q, qd, qdd, lam, zeros, aux)


def _vjp(name, model, q, qd, qdd, lam, zeros, *extra):
    f, b = q.dtype, q.shape[:-1]
    shapes = [model.Xtree_E.shape, model.Xtree_r.shape, model.inertia.shape, model.axes.shape,
              model.armature.shape, model.gravity.shape, q.shape[-1:], qd.shape[-1:],
              qdd.shape[-1:], *zeros]
    call = jax.ffi.ffi_call(name, [jax.ShapeDtypeStruct(b + s, f) for s in shapes],
                            vmap_method="sequential")
    return tuple(call(*_buffers(model), q, qd, qdd, lam, *extra))


@functools.cache
def _derivative_tables(t):
    tables = (t.p, t.nu_node, t.lam_p_node, t.sub_q, t.anc_q, t.sub_v, t.anc_v)
    return tuple(np.asarray(x, np.int32) for x in tables)


def _derivatives(name, model, q, qd, x):
    nv, f, b = model.nv, q.dtype, q.shape[:-1]
    tables = tuple(jnp.asarray(t) for t in _derivative_tables(topology(model)))
    shapes = [b + (nv,), b + (nv, nv), b + (nv, nv), b + (nv, nv)]
    call = jax.ffi.ffi_call(name, [jax.ShapeDtypeStruct(s, f) for s in shapes],
                            vmap_method="sequential")
    return tuple(call(*_buffers(model), *tables, q, qd, x))


def fd_derivatives(model, q, qd, tau, f_ext=None, *, batch=False):
    """``(qdd (nv,), d qdd / dq, d qdd / dqd, H^-1 (nv, nv))`` of one state by the native
    kernel (`jaxrbd._derivatives`' algorithm; ``dq`` in tangent coordinates; batches as
    `aba`); ``None`` where it does not apply (`supported`)."""
    if not supported(model, q, f_ext, batch=batch):
        return None
    return _derivatives("jaxrbd_fd_derivatives", model, q, qd, tau)


def id_derivatives(model, q, qd, qdd, f_ext=None, *, batch=False):
    """``(tau (nv,), d tau / dq, d tau / dqd, H (nv, nv))`` of one state by the native
    kernel (batches as `aba`); ``None`` where it does not apply (`supported`)."""
    if not supported(model, q, f_ext, batch=batch):
        return None
    return _derivatives("jaxrbd_id_derivatives", model, q, qd, qdd)
