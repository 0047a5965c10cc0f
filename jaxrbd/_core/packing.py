"""The packed articulated-inertia row: the buffer layout of the articulated-body passes.

A node's articulated inertia ``IA = [[A, B], [B^T, C]]`` (three 3x3 blocks of the
compact form, `jaxrbd._core.algebra.inertia_blocks`) and, where a pass propagates it,
its bias force ``pA`` travel as one row of ``ROW`` (``ROW_WITH_BIAS``) numbers in one
carried buffer ``(nbuf, ROW[_WITH_BIAS], B)``: a scan step then does one read and one
read-modify-write of one buffer, which XLA updates in place (separate buffers made it
copy whole buffers every step). Rows ``0:9``, ``9:18``, ``18:27`` are ``A``, ``B``,
``C`` flattened row-major; rows ``27:33`` are ``pA``.

>>> import jax.numpy as jnp
>>> I3 = jnp.eye(3)[..., None]
>>> row = pack(I3, 0 * I3, 2 * I3)
>>> row.shape, float(unpack(row).C[1, 1, 0])
((27, 1), 2.0)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["ROW", "ROW_WITH_BIAS", "ArticulatedRow", "pack", "unpack"]

ROW = 27
ROW_WITH_BIAS = 33


class ArticulatedRow(NamedTuple):
    """A packed row, unpacked: ``A, B, C`` ``(..., 3, 3, B)``; ``p`` ``(..., 6, B)``, or an
    empty ``(..., 0, B)`` slice for a row packed without a bias force."""

    A: jax.Array
    B: jax.Array
    C: jax.Array
    p: jax.Array


def pack(A, Bk, C, p=None) -> jax.Array:
    """``(..., ROW, B)`` from the blocks of ``IA``, or ``(..., ROW_WITH_BIAS, B)`` with ``p``."""
    flat = [x.reshape(x.shape[:-3] + (9, x.shape[-1])) for x in (A, Bk, C)]
    return jnp.concatenate(flat + ([] if p is None else [p]), axis=-2)


def unpack(row) -> ArticulatedRow:
    """The blocks (and bias force) of packed rows ``(..., ROW[_WITH_BIAS], B)``."""
    blk = lambda k: row[..., 9 * k : 9 * k + 9, :].reshape(row.shape[:-2] + (3, 3, row.shape[-1]))
    return ArticulatedRow(blk(0), blk(1), blk(2), row[..., ROW:, :])
