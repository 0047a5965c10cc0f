"""Static traversal schedules over the node tree, and the scans that use them.

A *schedule* is a list of steps, each a fixed-width row of node indices whose
parents were all handled by earlier steps. ``traversal="body"`` has one node per
step (a plain topological order); ``traversal="level"`` puts every node of one tree
depth in one step, vectorised; ``"level<k>"`` (e.g. ``"level2"``) splits each level
into steps of at most ``k`` nodes (fewer steps than ``"body"``, less padding than
``"level"``); ``"dense"`` is ``"level"`` whose shared recursions run without a scan
(`jaxrbd._core.dense`). Rows are padded to the width with *scratch* node
indices ``nnodes, nnodes + 1, ...`` (one per slot, so writes never collide); the
per-node buffers carry those extra rows, filled with harmless values.

All tables are numpy (trace-time constants); `jaxrbd._core.topology.Topology.schedule`
builds each once per tree structure.
"""

from __future__ import annotations

import copy

import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["Schedule", "add", "backward_scan", "forward_scan", "put", "scan_schedule", "take"]


class Schedule:
    """Traversal tables for one tree (``parent[0] == -1``); get them from
    `jaxrbd._core.topology.Topology.schedule`, which caches one per traversal."""

    def __init__(self, parent: tuple[int, ...], traversal: str):
        n = len(parent)
        depth = np.zeros(n, dtype=np.int64)
        for i in range(1, n):
            depth[i] = depth[parent[i]] + 1
        self.n = n
        self.depth = depth
        self.max_depth = int(depth.max()) if n > 1 else 0
        #: ``"dense"``: one state's schedule; the shared recursions of `jaxrbd._core.passes`
        #: run as dense products over the ancestor mask (`jaxrbd._core.dense`), the other
        #: scans step level by level
        self.dense = traversal == "dense"
        self.parent = tuple(int(p) for p in parent)
        if self.dense:
            traversal = "level"
        if traversal.startswith("level"):
            groups = [np.flatnonzero(depth == d) for d in range(1, self.max_depth + 1)]
            if traversal != "level":  # "level<k>": levels split into steps of <= k nodes
                cap = traversal[5:]
                if not cap.isdigit() or int(cap) < 1:
                    raise ValueError(f"traversal {traversal!r}: 'level<k>' needs an integer k >= 1")
                cap = int(cap)
                groups = [g[i : i + cap] for g in groups for i in range(0, len(g), cap)]
        elif traversal == "body":
            groups = [np.array([i]) for i in range(1, n)]
        else:
            raise ValueError(
                f"traversal {traversal!r}, expected 'level', 'level<k>', 'body' or 'dense'")
        self.width = max((len(g) for g in groups), default=1)
        W = self.width
        #: padded buffer size: real nodes + one scratch row per slot
        self.nbuf = n + W
        steps = np.empty((len(groups), W), dtype=np.int32)
        for s, g in enumerate(groups):
            steps[s, : len(g)] = g
            steps[s, len(g) :] = n + np.arange(len(g), W)
        par = np.concatenate([np.asarray(parent), n + np.arange(W)])
        par[0] = 0
        self.steps = steps  # (nsteps, W) node indices
        #: node of each step slot, flattened, with -1 for the scratch slots: where the
        #: per-step outputs of a scan go in node order (`jaxrbd._core.rows.place_rows`)
        self.slot_nodes = np.where(steps < n, steps, -1).reshape(-1)
        self.step_parent = par[steps].astype(np.int32)  # (nsteps, W)
        self.parent_padded = par.astype(np.int32)  # (nbuf,)

    def tail(self, k: int) -> Schedule:
        """This schedule without its first ``k`` steps (a shallow copy)."""
        if k == 0:
            return self
        t = copy.copy(self)
        t.steps, t.step_parent = self.steps[k:], self.step_parent[k:]
        t.slot_nodes = self.slot_nodes[k * self.width :]
        return t


def scan_schedule(step, carry, sched: Schedule, xs_nodes, reverse=False, step_xs=()):
    """The one `lax.scan` over a schedule: ``step(carry, idx, par, xs) -> (carry, ys)``.

    ``xs_nodes`` is a tuple of per-node arrays with ``nbuf`` leading rows; each step
    receives the rows of its nodes (``(W, ...)``) followed by its slice of the per-step
    arrays ``step_xs`` (leading axis ``nsteps``, e.g. the ``ys`` of an earlier scan).
    ``reverse=True`` runs leaves to root. Returns ``(carry, ys)`` stacked per step.
    """
    xs = tuple(x[sched.steps] for x in xs_nodes) + tuple(step_xs)

    def body(c, inp):
        idx, par, x = inp
        return step(c, idx, par, x)

    return lax.scan(body, carry, (sched.steps, sched.step_parent, xs), reverse=reverse)


def forward_scan(step, carry, sched: Schedule, xs_nodes):
    """`scan_schedule` root to leaves for a ``step(carry, idx, par, xs) -> carry``."""
    return scan_schedule(lambda *a: (step(*a), None), carry, sched, xs_nodes)[0]


def backward_scan(step, carry, sched: Schedule, xs_nodes):
    """`scan_schedule` leaves to root for a ``step(carry, idx, par, xs) -> carry``."""
    return scan_schedule(lambda *a: (step(*a), None), carry, sched, xs_nodes, reverse=True)[0]


# ---------------------------------------------------------------- buffer access
# A step of width 1 (body-by-body traversal) reads and writes rows with in-place
# dynamic slices; wider steps use gathers and scatters with static-shaped indices.
#
# XLA updates a loop-carried buffer in place only if every read of it in the step is
# ordered before the update. A dynamic slice is cheap, so XLA fuses it into each of
# its consumers, each re-reading the buffer; when one of those consumers is not an
# ancestor of the update (a per-step output, another buffer), the reads are unordered
# and XLA copies the whole buffer every step: O(n) per step, O(n^2) per pass. A gather
# is materialised once, by one kernel that the update depends on, so it needs no copy.


def take(buf, idx, once=False):
    """Rows ``idx`` (``(W,)``) of ``buf``.

    ``once=True``: read them in one materialised gather even for a width-1 step (see
    above). Use it where a row of a carried buffer feeds more than that buffer's own
    update; reads that feed only their own buffer's update stay dynamic slices, which
    are cheaper than a gather.
    """
    if idx.shape[0] == 1:
        if not once:
            return lax.dynamic_slice_in_dim(buf, idx[0], 1, axis=0)
        # a one-index gather is simplified back into a dynamic slice: gather the row twice
        return buf.at[jnp.concatenate([idx, idx])].get(mode="promise_in_bounds")[:1]
    return buf.at[idx].get(mode="promise_in_bounds")


def put(buf, idx, val):
    """``buf`` with rows ``idx`` (distinct) replaced by ``val``."""
    if idx.shape[0] == 1:
        val = lax.broadcast_in_dim(val, (1,) + buf.shape[1:], tuple(range(val.ndim))) if (
            val.shape != (1,) + buf.shape[1:]) else val
        return lax.dynamic_update_slice_in_dim(buf, val.astype(buf.dtype), idx[0], axis=0)
    return buf.at[idx].set(val, unique_indices=True, indices_are_sorted=True,
                           mode="promise_in_bounds")


def add(buf, idx, val):
    """``buf`` with ``val`` added to rows ``idx`` (repeats accumulate)."""
    if idx.shape[0] == 1:  # the parent's row, read once (see `take`)
        return put(buf, idx, take(buf, idx, once=True) + val)
    return buf.at[idx].add(val, mode="promise_in_bounds")
