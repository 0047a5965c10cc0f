"""`Topology`: every static index table of one model structure, built once.

A model's structure (its tree of nodes, the joint kind of each body, where each body's
coordinates start) is a set of static fields; the algorithms read it through tables
(numpy, trace-time constants) computed from those fields. `topology(model)` builds them
once per structure and caches the result, so two models with the same structure (a model
and its re-parameterised copy, the models of a stacked batch) share one object.

The tables, by concern:

* **ancestry**, in one encoding: ``support[n, k]`` (velocity ``k`` moves node ``n``) and
  ``ancestors[i, d]`` (the DoF ``d + 1`` levels above DoF ``i``, nearest first, padded
  with the dummy index ``nv``); everything else about ancestry derives from these two;
* **joints** (read by `jaxrbd._core.jcalc`): which nodes carry a joint transform, the
  nodes and coordinates of each joint kind, where each node's bias term goes;
* **derivatives** (read by `jaxrbd._derivatives`): the node a tangent step of each DoF
  moves, and the subtree/ancestor masks of the analytic derivative passes;
* **traversal**: `Topology.schedule` (one `jaxrbd._core.schedule.Schedule` per
  traversal kind) and the entries of the mass matrix (`Topology.mass_matrix_pairs`).

Indices named ``*_node`` are node indices (world = 0); others are DoF indices
``0..nv-1`` (node ``i + 1``). Do not modify the returned arrays.
"""

from __future__ import annotations

import functools

import numpy as np

from .schedule import Schedule

__all__ = ["MULTI_DOF_KINDS", "ONE_DOF_KINDS", "Topology", "topology"]

#: Joint kinds with several DoFs on one transform: the transform sits on the joint's first
#: node, its inner nodes have ``XJ = 1`` and share the child frame.
MULTI_DOF_KINDS = (
    "spherical", "free", "euler_zyx", "euler_xyz", "euler_yxz", "euler_zxy", "translation_xyz",
)
#: Kinds whose every node is its own frame (one column per node).
ONE_DOF_KINDS = ("screw", "custom")


def _frozen(x):
    x = np.asarray(x)
    x.flags.writeable = False
    return x


class Topology:
    """The static tables of one model structure (see the module docstring).

    Attributes (numpy, read-only):
        nn, nv, nbodies: numbers of nodes (world included), DoFs, bodies (world included).
        node_parent, node_body, body_node: the model's numberings as arrays.
        fixed: ``(nbodies,)`` bool, the body is welded to its parent.
        support: ``(nn, nv)`` bool, velocity ``k`` moves node ``n``; read the other way,
            ``support.T[k, n]``: node ``n`` lies in the subtree of node ``k + 1``.
        ancestors: ``(nv, D)`` int, DoF ``i``'s ancestors nearest first, padded with ``nv``.
        max_chain: the most ancestors any DoF has (``D``, or 0 for a tree of depth one).
        first_body: ``(nn,)`` the body whose ``Xtree`` node ``n`` carries, or -1.
        screw_nodes, screw_q, custom_nodes, custom_q: the nodes of one-DoF columns of
            each kind and their coordinate index.
        multi: ``{kind: (first nodes, q starts, v starts)}`` per multi-DoF kind present.
        bias_target: ``(nn,)`` the node that receives node ``n``'s ``vJ`` in the bias.
        multi_dof_last: the last node of every multi-DoF joint.
        p, nu_node, lam_p_node: per DoF, the node a tangent step moves (as a DoF
            index), the last node of its joint, and the parent of that node.
        sub_q, anc_q, sub_v, anc_v: ``(nv, nv)`` masks of the derivative passes.
        body_dof: ``(nbodies,)`` each body's node as a DoF index (-1: world or welded
            to it).
    """

    def __init__(self, node_parent, node_body, body_node, joint_kind, q_start, v_start, fixed):
        nn = len(node_parent)
        nv = nn - 1
        self.nn, self.nv, self.nbodies = nn, nv, len(joint_kind)
        self.node_parent = _frozen(np.asarray(node_parent, dtype=np.int64))
        self.node_body = _frozen(np.asarray(node_body, dtype=np.int64))
        self.body_node = _frozen(np.asarray(body_node, dtype=np.int64))
        self.fixed = _frozen(np.asarray(fixed, dtype=bool))
        self._parent = tuple(node_parent)
        self._schedules: dict[str, Schedule] = {}
        self._ancestry(node_parent)
        self._joints(node_body, body_node, joint_kind, q_start, v_start)
        self._derivative_masks(node_parent, node_body, body_node, joint_kind)

    # ------------------------------------------------------------ ancestry

    def _ancestry(self, parent):
        nn, nv = self.nn, self.nv
        sup = np.zeros((nn, nv), dtype=bool)
        for n in range(1, nn):
            sup[n] = sup[parent[n]]
            sup[n, n - 1] = True
        self.support = _frozen(sup)
        chains = []
        for i in range(nv):
            chain, k = [], parent[i + 1]
            while k > 0:
                chain.append(k - 1)
                k = parent[k]
            chains.append(chain)
        self.max_chain = max([0] + [len(c) for c in chains])  # most ancestors of a DoF
        anc = np.full((nv, max(self.max_chain, 1)), nv, dtype=np.int64)
        for i, c in enumerate(chains):
            anc[i, : len(c)] = c
        self.ancestors = _frozen(anc)

    # ------------------------------------------------------------ joints

    def _joints(self, node_body, body_node, joint_kind, q_start, v_start):
        nn = self.nn
        first_node = {}
        for n in range(1, nn):
            first_node.setdefault(node_body[n], n)
        self.first_body = _frozen(
            [-1] + [node_body[n] if first_node[node_body[n]] == n else -1 for n in range(1, nn)]
        )

        def column_nodes(kind):
            nodes = [n for n in range(1, nn) if joint_kind[node_body[n]] == kind]
            qs = [q_start[node_body[n]] + n - first_node[node_body[n]] for n in nodes]
            return _frozen(np.array(nodes, dtype=np.int64)), _frozen(np.array(qs, dtype=np.int64))

        self.screw_nodes, self.screw_q = column_nodes("screw")
        self.custom_nodes, self.custom_q = column_nodes("custom")
        self.multi = {}
        for kind in MULTI_DOF_KINDS:
            bodies = [b for b in range(len(joint_kind)) if joint_kind[b] == kind]
            if bodies:
                self.multi[kind] = tuple(
                    _frozen(np.array(x)) for x in (
                        [first_node[b] for b in bodies],
                        [q_start[b] for b in bodies],
                        [v_start[b] for b in bodies],
                    )
                )
        target = np.arange(nn)
        for n in range(1, nn):
            b = node_body[n]
            if joint_kind[b] not in ONE_DOF_KINDS:
                target[n] = body_node[b]  # the joint's last node
        self.bias_target = _frozen(target)
        self.multi_dof_last = _frozen(np.array(
            [body_node[b] for b in range(len(joint_kind)) if joint_kind[b] in MULTI_DOF_KINDS],
            dtype=np.int64,
        ))

    # ------------------------------------------------------------ derivatives

    def _derivative_masks(self, node_parent, node_body, body_node, joint_kind):
        nn, nv = self.nn, self.nv
        first = {}
        for n in range(1, nn):
            first.setdefault(node_body[n], n)
        p_node, nu_node = np.arange(nn), np.arange(nn)
        for n in range(1, nn):
            b = node_body[n]
            if joint_kind[b] not in ONE_DOF_KINDS:
                # a tangent step of a multi-DoF joint moves the child frame, which every
                # node of the joint shares; their columns are fixed in the child frame
                p_node[n], nu_node[n] = first[b], body_node[b]
        self.p = _frozen(p_node[1:] - 1)
        self.nu_node = _frozen(nu_node[1:])
        self.lam_p_node = _frozen(np.asarray(node_parent)[p_node[1:]])
        A = self.support[1:].T  # A[i, j]: DoF i is j or an ancestor of j
        eye = np.eye(nv, dtype=bool)
        P = self.p
        self.sub_q = _frozen(A[P, :].T)  # [i, j]: i in the subtree moved by a q-step of j
        self.anc_q = _frozen(A[:, P] & ~eye[:, P])  # i strictly above that subtree
        self.sub_v = _frozen(A.T)
        self.anc_v = _frozen(A & ~eye)
        self.body_dof = _frozen(np.asarray(body_node) - 1)

    # ------------------------------------------------------------ traversal

    def schedule(self, traversal: str = "level") -> Schedule:
        """The `Schedule` of this tree for ``traversal`` (``"level"``, ``"level<k>"``,
        ``"body"``), built once."""
        s = self._schedules.get(traversal)
        if s is None:
            s = self._schedules[traversal] = Schedule(self._parent, traversal)
        return s

    @functools.cached_property
    def mass_matrix_pairs(self):
        """The entries of ``H`` the CRBA computes: DoF ``i`` an ancestor of (or equal to)
        DoF ``j``, as ``(i, j, table)``; ``table (nv * nv,)`` reads entry ``(a, b)`` of
        ``H``, row-major, from the pair list (either order), or from index ``npairs`` (a
        zero) where neither DoF supports the other."""
        j, i = np.nonzero(self.support[1:])
        nv, npairs = self.nv, len(i)
        table = np.full(nv * nv, npairs, dtype=np.int64)
        table[i * nv + j] = np.arange(npairs)
        table[j * nv + i] = np.arange(npairs)
        return _frozen(i), _frozen(j), _frozen(table)


@functools.lru_cache(maxsize=256)
def _topology(key) -> Topology:
    return Topology(*key)


def topology(model) -> Topology:
    """The `Topology` of ``model``'s structure (a `Model`; cached per structure)."""
    return _topology((model.node_parent, model.node_body, model.body_node, model.joint_kind,
                      model.q_start, model.v_start, model.body_fixed))
