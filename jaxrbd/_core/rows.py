"""Rows placed or summed at static indices: gathers on batches, 0/1 products on one state.

XLA:CPU lowers a scatter (``x.at[idx].set(v)`` / ``.add(v)``) to a while loop with one
iteration per index, and inside a batched program that loop runs once per batch block.
With the indices known at trace time (numpy), the same result is a gather from the
stacked values with a constant index table, which XLA emits as one fused loop; the
HLO-text tests in ``tests/test_rows.py`` check that batched programs keep no scatter
loop. For values without a batch (trailing axis 1: one state, or per-model tables) a
product with a constant 0/1 table does it in one kernel, whose transpose under
`jax.grad` is no loop either (`_select_sum`); above `MAX_SELECT` the scatter stays.

Both functions take numpy index arrays and arrays whose leading axis is the row axis;
trailing axes broadcast (``(..., 1)`` against ``(..., B)``). A negative index drops
its row (e.g. the scratch slots of a padded schedule).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

__all__ = ["node_rows", "place_rows", "sum_rows", "take_rows", "take_static"]

#: `take_rows` gathers instead of slicing when the index splits into more runs than this.
MAX_RUNS = 8


#: Largest ``rows out x rows in`` for which one state's rows are placed or summed by a
#: 0/1 product (`_select_sum`) instead of a scatter.
MAX_SELECT = 1 << 14


def _select_sum(P, src):
    """``out[i] = sum_j P[i, j] src[j]`` for a constant 0/1 table ``P (n, k)``, as one
    matrix product: exact (each output sums its rows times one, plus zeros), one kernel,
    and its transpose (for `jax.grad`) is a product too, where a scatter or a gather's
    transpose is a while loop of one iteration per row on XLA:CPU. (A select-and-reduce
    formulation measured slower: two kernels, benchmarks/LOG.md.) A NaN or inf in any
    row of ``src`` reaches every output row."""
    flat = src.reshape((src.shape[0], -1))
    out = jnp.matmul(jnp.asarray(P, src.dtype), flat,
                     precision="highest" if src.dtype == jnp.float32 else None)
    return out.reshape((P.shape[0],) + src.shape[1:])


def _unbatched(values) -> bool:
    return all(v.shape[-1] == 1 for v in values)


def _indices(idx, vals):
    """``idx`` as a flat numpy array, and the positions of its kept (non-negative) entries."""
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    if vals.shape[0] != idx.shape[0]:
        raise ValueError(f"{idx.shape[0]} indices for {vals.shape[0]} rows")
    return idx, np.flatnonzero(idx >= 0)


def _kept(vals, keep):
    return vals if len(keep) == vals.shape[0] else vals[keep]


def place_rows(n: int, parts, base=None, *, scatter=None, slices=False):
    """An ``(n, ...)`` array with ``out[idx] = vals`` for each ``(idx, vals)`` of
    ``parts``, and every other row from ``base``.

    Args:
        n: number of rows.
        parts: ``[(idx, vals), ...]``: numpy ``idx (k,)`` (no row named twice across all
            parts; negative: dropped) and ``vals (k, ...)``.
        base: ``(n, ...)`` (row ``i`` of the output unless placed), ``(1, ...)`` (the
            same row everywhere) or None (zeros).
        scatter: force the scatter (True) or the gather (False); default: scatter when
            every array has a trailing axis of size 1.
        slices: assemble the output from slices of the stacked rows (`take_rows`), so
            that its transpose under `jax.grad` is pads: for a few rows placed into one
            vector whose runs of untouched rows are long (the free joints' rows of a
            time step), where a 0/1 product would cost ``n`` times the stacked rows.

    Raises:
        ValueError: a row placed twice, or counts that do not match.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> x = jnp.zeros(6)
        >>> place_rows(6, [(np.array([4, 1]), jnp.array([7.0, 8.0]))], x, slices=True).tolist()
        [0.0, 8.0, 0.0, 0.0, 7.0, 0.0]
    """
    parts = [(*_indices(i, v), v) for i, v in parts]
    if base is None:
        tail = np.broadcast_shapes(*(v.shape[1:] for *_, v in parts))
        base = jnp.zeros((1,) + tail, jnp.result_type(*(v for *_, v in parts)))
    nb = base.shape[0]
    if nb not in (1, n):
        raise ValueError(f"base has {nb} rows, expected 1 or {n}")
    table = np.arange(n) if nb == n else np.zeros(n, dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    off = nb
    for idx, keep, v in parts:
        rows = idx[keep]
        if seen[rows].any() or len(np.unique(rows)) != len(rows):
            raise ValueError("place_rows: a row is placed twice")
        seen[rows] = True
        table[rows] = off + keep
        off += v.shape[0]
    arrays = [base] + [v for *_, v in parts]
    tail = np.broadcast_shapes(*(a.shape[1:] for a in arrays))
    dtype = jnp.result_type(*arrays)
    select = scatter is None and _unbatched(arrays) and n * off <= MAX_SELECT
    if slices or select:  # both read the base and the placed rows stacked
        src = jnp.concatenate([jnp.broadcast_to(a, a.shape[:1] + tail).astype(dtype)
                               for a in arrays])
        if slices:
            return take_rows(src, table)
        return _select_sum(table[:, None] == np.arange(off)[None], src)
    if _unbatched(arrays) if scatter is None else scatter:
        out = jnp.broadcast_to(base, (n,) + tail).astype(dtype)
        for idx, keep, v in parts:
            out = out.at[idx[keep]].set(_kept(v, keep))
        return out
    src = jnp.concatenate([jnp.broadcast_to(a, a.shape[:1] + tail).astype(dtype) for a in arrays])
    return src[table]


def sum_rows(n: int, idx, vals, *, scatter=None):
    """``out[i] = sum(vals[j] for j with idx[j] == i)``, ``(n, ...)``; rows that no
    index names are zero.

    Args:
        idx: numpy ``(k,)``; repeats add up, negative indices are dropped.
        vals: ``(k, ...)``.
        scatter: as in `place_rows`.

    The gather form reads ``max(repeats)`` rows per output row and adds them.
    """
    idx, keep = _indices(idx, vals)
    if scatter is None and _unbatched([vals]) and n * idx.shape[0] <= MAX_SELECT:
        return _select_sum(np.arange(n)[:, None] == idx[None], vals)
    if _unbatched([vals]) if scatter is None else scatter:
        return jnp.zeros((n,) + vals.shape[1:], vals.dtype).at[idx[keep]].add(_kept(vals, keep))
    k = idx.shape[0]
    depth = max(int(np.bincount(idx[keep], minlength=n).max()), 1) if len(keep) else 1
    # table[i, d]: the d-th row added into row i, or k (an appended zero row)
    table = np.full((n, depth), k, dtype=np.int64)
    used = np.zeros(n, dtype=np.int64)
    for j in keep:
        table[idx[j], used[idx[j]]] = j
        used[idx[j]] += 1
    src = jnp.concatenate([vals, jnp.zeros((1,) + vals.shape[1:], vals.dtype)], axis=0)
    out = src[table[:, 0]]
    for d in range(1, depth):
        out = out + src[table[:, d]]
    return out


def take_rows(x, idx):
    """``x[idx]`` for a static numpy ``idx`` along axis 0, as slices of its contiguous
    runs joined by one concatenation: slices fuse into their consumers and transpose to
    pads, where a gather would transpose to a scatter-add (a while loop on XLA:CPU).
    An index of more than `MAX_RUNS` runs is gathered.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> take_rows(jnp.arange(10.0), np.array([3, 4, 5, 0, 1])).tolist()
        [3.0, 4.0, 5.0, 0.0, 1.0]
    """
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    if idx.size == 0:
        return x[:0]
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = np.concatenate([[0], breaks])
    if len(starts) > MAX_RUNS:
        return x[idx]
    ends = np.concatenate([breaks, [idx.size]])
    runs = [x[int(idx[a]):int(idx[a]) + int(b - a)] for a, b in zip(starts, ends)]
    return runs[0] if len(runs) == 1 else jnp.concatenate(runs, axis=0)


def take_static(x, idx, *, select=None):
    """``x[idx]`` for a static numpy ``idx`` along axis 0; a negative index reads zeros.

    One state's rows (``x`` with a trailing axis of 1) or a model's table
    (``select=True``) are read by a 0/1 product (`_select_sum`) when it is small
    (`MAX_SELECT`): under `jax.grad` a gather's transpose is a scatter, a while loop of
    one iteration per row on XLA:CPU. Batches keep the gather.

    Example:
        >>> import jax.numpy as jnp, numpy as np
        >>> take_static(jnp.arange(4.0)[:, None], np.array([2, -1, 0]))[:, 0].tolist()
        [2.0, 0.0, 0.0]
    """
    idx = np.asarray(idx, dtype=np.int64)
    shape = idx.shape
    idx = idx.reshape(-1)
    if select is None:
        select = x.ndim >= 2 and x.shape[-1] == 1
    if select and idx.size * x.shape[0] <= MAX_SELECT:
        out = _select_sum(idx[:, None] == np.arange(x.shape[0])[None], x)
    else:
        ext = jnp.concatenate([x, jnp.zeros_like(x[:1])]) if (idx < 0).any() else x
        out = ext[np.where(idx < 0, x.shape[0], idx)]
    return out.reshape(shape + x.shape[1:])


def node_rows(x):
    """Per-DoF rows ``(nv, ...)`` -> per-node rows ``(nn, ...)``: node ``n >= 1`` owns
    DoF ``n - 1``, and the world (node 0) gets a row of zeros.

    Example:
        >>> node_rows(jnp.array([1.0, 2.0])).tolist()
        [0.0, 1.0, 2.0]
    """
    return jnp.concatenate([jnp.zeros_like(x[:1]), x], axis=0)
