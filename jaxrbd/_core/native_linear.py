"""Linear maps whose application and transpose may run native kernels.

`jax.grad` transposes the linear part of a JVP rule op by op, so a native kernel (an
XLA foreign-function call, `jaxrbd._core.ffi`) inside a JVP rule cannot be transposed
by JAX. A `LinearMap` is a linear function ``lin -> out`` (given residuals ``res``)
that JAX sees as one primitive, paired with its transpose:

* applied (and lowered) by ``native(res, lin)``, or by ``reference(res, lin)`` where
  ``native`` is absent or returns ``None``;
* transposed by applying the paired map (`pair`), so reverse mode runs that map's
  native kernel;
* batched (`jax.vmap`, `jax.jacfwd`, `jax.jacrev`) by ``batched(args, dims)`` where
  given and it returns a result (every output batched on its first axis), else through
  ``reference``, plain JAX code linear in ``lin``;
* differentiated in the residuals (second derivatives) through ``reference``.

``reference`` defines the map; ``native`` must compute the same numbers, and the tests
hold each native map to its reference.
"""

from __future__ import annotations

import jax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

__all__ = ["LinearMap", "apply", "pair"]


class LinearMap:
    """A linear map ``(res, lin) -> out`` on tuples of arrays (module docstring).

    ``shapes(res, lin)``, given `jax.ShapeDtypeStruct` s, returns those of ``out``
    without tracing ``reference`` (whose trace may cost more than the program's);
    without it they come from `jax.eval_shape` of ``reference``. Compared and hashed
    by identity (a primitive's parameter): build each map once.
    """

    def __init__(self, reference, native=None, name="linear", shapes=None, batched=None):
        self.reference = reference
        self.native = native
        self.batched = batched
        self.name = name
        self.shapes = shapes
        self.transpose = None

    def __repr__(self):
        return f"LinearMap({self.name})"

    def run(self, res, lin):
        out = None if self.native is None else self.native(res, lin)
        return tuple(self.reference(res, lin) if out is None else out)


def pair(forward: LinearMap, transpose: LinearMap) -> LinearMap:
    """Make ``transpose`` the transpose of ``forward`` (and the other way round)."""
    forward.transpose, transpose.transpose = transpose, forward
    return forward


def apply(op: LinearMap, res, lin):
    """``op`` at residuals ``res`` and linear arguments ``lin`` (tuples of arrays)."""
    return tuple(_p.bind(*res, *lin, op=op, nres=len(res)))


_p = Primitive("jaxrbd_linear_map")
_p.multiple_results = True


def _run(*args, op, nres):
    return op.run(args[:nres], args[nres:])


def _abstract(*avals, op, nres):
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
    if op.shapes is not None:
        outs = op.shapes(tuple(structs[:nres]), tuple(structs[nres:]))
    else:
        outs = jax.eval_shape(lambda *a: op.reference(a[:nres], a[nres:]), *structs)
    return [jax.core.ShapedArray(o.shape, o.dtype) for o in outs]


def _jvp(primals, tangents, *, op, nres):
    out = _p.bind(*primals, op=op, nres=nres)
    res, lin = primals[:nres], primals[nres:]
    dres = tangents[:nres]
    dlin = [ad.instantiate_zeros(t) for t in tangents[nres:]]
    tout = list(_p.bind(*res, *dlin, op=op, nres=nres))
    if any(type(t) is not ad.Zero for t in dres):
        # second derivatives: the reference's dependence on the residuals
        _, extra = jax.jvp(lambda *r: tuple(op.reference(r, lin)), tuple(res),
                           tuple(ad.instantiate_zeros(t) for t in dres))
        tout = [a + b for a, b in zip(tout, extra)]
    return out, tout


def _transpose(cts, *args, op, nres):
    res, lin = args[:nres], args[nres:]
    if any(ad.is_undefined_primal(r) for r in res):
        raise NotImplementedError(f"{op}: not linear in its residuals")
    cts = [ad.instantiate_zeros(c) for c in cts]
    back = _p.bind(*res, *cts, op=op.transpose, nres=nres)
    return [None] * nres + [b if ad.is_undefined_primal(x) else None
                            for b, x in zip(back, lin)]


def _batch(args, dims, *, op, nres):
    mapped = getattr(batching, "not_mapped", None)
    axes = [None if d is None or d is mapped else d for d in dims]
    out = None if op.batched is None else op.batched(args, axes)
    if out is not None:
        return tuple(out), [0] * len(out)
    out = jax.vmap(lambda *a: tuple(op.reference(a[:nres], a[nres:])), in_axes=axes)(*args)
    return out, [0] * len(out)


_p.def_impl(_run)
_p.def_abstract_eval(_abstract)
ad.primitive_jvps[_p] = _jvp
ad.primitive_transposes[_p] = _transpose
batching.primitive_batchers[_p] = _batch
mlir.register_lowering(_p, mlir.lower_fun(_run, multiple_results=True))
