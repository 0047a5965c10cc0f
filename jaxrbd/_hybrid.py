"""Hybrid dynamics by the hybrid articulated-body algorithm (Featherstone 2008, §9.2;
Wojtusch et al. 2016, §II).

Some joints have prescribed accelerations, the others prescribed forces; the algorithm
returns the unknown half of each pair in O(nbodies). It is the ABA of `_aba` with a
static per-node mask: a prescribed node is a *rigid* connection with a known relative
acceleration, so in the backward pass it passes its articulated inertia through
unchanged (no rank-1 projection) and adds the force its known acceleration needs to its
bias force; in the forward pass it uses its given ``qdd`` and reads its force off the
articulated-body equation ``f_i = IA_i a_i + pA_i``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import jax
import jax.numpy as jnp
import numpy as np

from ._aba import node_armature, velocity_pass
from ._core import algebra as al
from ._core.checks import check_f_ext, check_state
from ._core.native_vmap import native_vmap
from ._core.nodes import gravity_acceleration, pad, pad_E, pad_inertia, pad_S
from ._core.packing import pack, unpack
from ._core.rows import node_rows, place_rows
from ._core.schedule import add, put, scan_schedule, take

__all__ = ["hybrid_batched", "hybrid_dynamics", "prescribed_mask"]


# ---------------------------------------------------------------- the two passes


def _hybrid_inertia_pass(s, E, r, S, Ic, c, pA, tau, qdd, mask, arm):
    """Backward pass of the hybrid ABA (RBDA Table 9.1 with eq. 9.21-9.23).

    Per node ``i`` with ``U = IA S``, ``D = S^T U + armature``, ``w = S^T pA``:

    * free (torque given): ``Ia = IA - U U^T / D``,
      ``pa = pA + Ia c + U (tau - w) / D`` (the ordinary ABA step);
    * prescribed (``qdd`` given): ``Ia = IA``, ``pa = pA + IA (c + S qdd)``, i.e.
      ``pA + Ia c + U qdd``: a rigid joint moving with a known relative acceleration.

    ``IA_lam += Xup^T Ia Xup``, ``pA_lam += Xup^T pa`` as in `_aba._inertia_pass`, on
    the same packed ``[IA | pA]`` buffer. Returns per-step ``(U, Dinv, w)``; ``Dinv`` is
    1 on prescribed nodes (never used there, and never ``1/0`` for a massless subtree).
    """
    B = E.shape[-1]
    A, Bk, C = al.inertia_blocks(pad_inertia(Ic, s))
    shape = lambda x: jnp.broadcast_to(x, x.shape[:-1] + (B,))
    buf = pack(shape(A), shape(Bk), shape(C), pad(pA, s))
    xs = (pad_E(E, s), pad(r, s), pad_S(S, s), pad(c, s), pad(tau, s), pad(qdd, s), pad(mask, s),
          pad(arm, s))

    def step(buf, idx, par, x):
        Ei, ri, Si, ci, taui, qddi, mi, armi = x
        A, Bk, C, pi = unpack(take(buf, idx, once=True))
        U = al.blocks_mul(A, Bk, C, Si)
        D = al.dot(Si, U) + armi
        w = al.dot(Si, pi)
        # sanitise D before dividing: a prescribed node may carry a massless subtree
        Dinv = 1.0 / jnp.where(mi, 1.0, D)
        k = jnp.where(mi, 0.0, Dinv)[..., None, None, :]
        Uw, Uv = al.ang(U), al.lin(U)
        Ia = (A - k * al.outer(Uw, Uw), Bk - k * al.outer(Uw, Uv), C - k * al.outer(Uv, Uv))
        mult = jnp.where(mi, qddi, Dinv * (taui - w))
        pa = pi + al.blocks_mul(*Ia, ci) + U * mult[..., None, :]
        contrib = pack(*al.XT_blocks_X(Ei, ri, *Ia), al.XT_force(Ei, ri, pa))
        return add(buf, par, contrib), (U, Dinv, w)

    return scan_schedule(step, buf, s, xs, reverse=True)[1]


def _hybrid_acceleration_pass(s, E, r, S, c, tau, qdd, mask, arm, U, Dinv, w, a_world):
    """Forward pass: ``a_i = Xup a_lam + c_i``; a free node solves
    ``qdd_i = (tau_i - w_i - U^T a_i) / D``, a prescribed node keeps its ``qdd_i`` and
    gets ``tau_i = S^T (IA a_i + pA) + armature_i qdd_i = U^T a_i + w_i + armature_i
    qdd_i`` (with ``a_i`` including ``S qdd_i``). Returns ``(qdd, tau)``, ``(nv, B)``
    each, in node order."""
    B = max(tau.shape[-1], E.shape[-1])
    a0 = jnp.zeros((s.nbuf, 6, B), tau.dtype).at[0].set(jnp.broadcast_to(a_world, (6, B)))
    xs = (pad_E(E, s), pad(r, s), pad_S(S, s), pad(c, s), pad(tau, s), pad(qdd, s), pad(mask, s),
          pad(arm, s))

    def step(a, idx, par, x):
        Ei, ri, Si, ci, taui, qddi, mi, armi, Ui, Dinvi, wi = x
        ai = al.X_motion(Ei, ri, take(a, par)) + ci
        qddi = jnp.where(mi, qddi, Dinvi * (taui - wi - al.dot(Ui, ai)))
        ai = ai + Si * qddi[..., None, :]
        taui = jnp.where(mi, al.dot(Ui, ai) + wi + armi * qddi, taui)
        return put(a, idx, ai), (qddi, taui)

    _, ys = scan_schedule(step, a0, s, xs, step_xs=(U, Dinv, w))

    def to_nodes(y):  # per-step outputs back to node order (a gather on batches)
        flat = y.reshape((-1,) + y.shape[2:])
        return place_rows(s.n, [(s.slot_nodes, flat)])[1:]

    return to_nodes(ys[0]), to_nodes(ys[1])


def hybrid_batched(model, q, qd, tau, qdd, mask, f_ext=None):
    """Hybrid ABA on the batch-trailing layout.

    Args:
        q: `(nq, B)`. qd, tau, qdd: `(nv, B)`.
        mask: static, a tuple of ``nv`` bools: ``True`` where ``qdd`` is prescribed.
        f_ext: `(nbodies, 6, B)` or ``None``.

    Returns:
        ``(qdd, tau)``, `(nv, B)` each.
    """
    B = q.shape[-1]
    s, E, r, S, Ic, c, pA = velocity_pass(model, q, qd, f_ext)
    tau_n, qdd_n = node_rows(tau), node_rows(qdd)
    m = jnp.asarray(np.concatenate([[False], np.asarray(mask, dtype=bool)]))[:, None]
    arm = node_armature(model, B)
    U, Dinv, w = _hybrid_inertia_pass(s, E, r, S, Ic, c, pA, tau_n, qdd_n, m, arm)
    a_world = gravity_acceleration(model, B, q.dtype)
    return _hybrid_acceleration_pass(s, E, r, S, c, tau_n, qdd_n, m, arm, U, Dinv, w, a_world)


@functools.lru_cache(maxsize=256)
def _kernel(mask: tuple[bool, ...]):
    """The single-state function for one static mask (vmap runs the batch-trailing form);
    ``f_ext`` may be None."""
    return native_vmap(
        lambda m, q, qd, tau, qdd, f: hybrid_batched(m, q, qd, tau, qdd, mask, f)
    )


# ---------------------------------------------------------------- resolving `prescribed`


def prescribed_mask(model, prescribed) -> tuple[bool, ...]:
    """The static per-DoF mask of `hybrid_dynamics`: ``True`` where ``qdd`` is given.

    Args:
        model: a `Model`.
        prescribed: a joint name, a velocity index, or an iterable of them (see
            `hybrid_dynamics`).

    Returns:
        A tuple of ``model.nv`` bools.

    Raises:
        TypeError: `prescribed` holds something other than names and Python ints
            (e.g. a JAX array: the set must be static).
        ValueError: an unknown or fixed joint, an index out of range, or indices that
            cover only part of a multi-DoF joint.

    Example:
        >>> from jaxrbd._hybrid import prescribed_mask
        >>> prescribed_mask(model, "body_2")
        (False, False, False, True, True, True, False, False, False)
    """
    if isinstance(prescribed, (str, int, np.integer)):
        prescribed = (prescribed,)
    if isinstance(prescribed, jax.Array) or not isinstance(prescribed, Iterable):
        raise TypeError(
            "prescribed must be a joint name, a velocity index (int) or a sequence of them, "
            f"known before tracing; got {type(prescribed).__name__}"
        )
    movable = model.joint_names
    mask = np.zeros(model.nv, dtype=bool)
    for entry in prescribed:
        if isinstance(entry, str):
            if entry not in movable:
                coupled = getattr(model, "coupled_joints", ())
                if entry in coupled:
                    driver = model.driver_joints[coupled.index(entry)]
                    raise ValueError(
                        f"prescribed: joint {entry!r} is coupled (it follows {driver!r}); "
                        "prescribe its driver"
                    )
                if entry in model.joint_name:
                    raise ValueError(
                        f"prescribed: joint {entry!r} is fixed (it has no DoF); "
                        f"movable joints: {', '.join(movable)}"
                    )
                raise ValueError(
                    f"prescribed: unknown joint {entry!r}; movable joints: {', '.join(movable)}"
                )
            mask[model.v_index(entry)] = True
        elif isinstance(entry, (int, np.integer)) and not isinstance(entry, (bool, np.bool_)):
            if not 0 <= int(entry) < model.nv:
                raise ValueError(
                    f"prescribed: velocity index {int(entry)} out of range [0, {model.nv}) "
                    "= [0, model.nv)"
                )
            mask[int(entry)] = True
        else:
            raise TypeError(
                "prescribed entries must be joint names (str) or velocity indices (int), "
                f"got {type(entry).__name__}"
            )
    # a joint is prescribed as a whole: its DoFs share one child body
    for name in movable:
        sl = model.v_index(name)
        part = mask[sl]
        if part.any() and not part.all():
            raise ValueError(
                f"prescribed: velocity indices {np.flatnonzero(part) + sl.start} cover only part "
                f"of joint {name!r} (v[{sl.start}:{sl.stop}]); a multi-DoF joint is prescribed "
                "as a whole: give its name or all of its indices"
            )
    return tuple(bool(x) for x in mask)


# ---------------------------------------------------------------- public function


def hybrid_dynamics(model, q, qd, tau, qdd, prescribed, f_ext=None):
    """Hybrid dynamics: accelerations of torque-driven joints and forces of
    acceleration-driven joints, by the hybrid articulated-body algorithm, O(nbodies).

    The joints in `prescribed` have known accelerations (their entries of `qdd` are
    used, those of `tau` ignored); every other joint has a known force (its entry of
    `tau` is used, that of `qdd` ignored). The algorithm (Featherstone, RBDA §9.2;
    MBSlib's ABA-hybrid) is the articulated-body algorithm in which a prescribed joint
    is treated as rigid with a known relative acceleration: one velocity pass, one
    backward pass of articulated inertias and bias forces, one forward pass. With no
    prescribed joint it is `forward_dynamics`; with all of them, `inverse_dynamics`.
    Typical uses: a floating base driven by its legs' joint trajectories, a
    manipulator with some joints position-controlled and others passive.

    The returned pair satisfies ``inverse_dynamics(model, q, qd, qdd_out, f_ext) ==
    tau_out``, with ``qdd_out`` equal to `qdd` on the prescribed DoFs and ``tau_out``
    equal to `tau` on the others.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; quaternion blocks need not be normalised.
        qd: velocities `(nv,)` [rad/s | m/s]; body coordinates for free joints.
        tau: generalized forces `(nv,)` [N m | N] of the torque-driven DoFs (entries of
            prescribed DoFs are ignored); ``[n; f]`` in body coordinates for free joints.
        qdd: accelerations `(nv,)` [rad/s^2 | m/s^2] of the prescribed DoFs (entries of
            the other DoFs are ignored); body coordinates for free joints.
        prescribed: the joints with prescribed acceleration, **static** (known before
            tracing; each distinct set compiles once): a joint name, a velocity index
            into `qd` (an `int`), or a sequence of them. Multi-DoF joints (spherical,
            free, Euler, ...) are prescribed as a whole: by name, or by all of their
            velocity indices.
        f_ext: optional `(nbodies, 6)` spatial forces in world coordinates at the world
            origin; row 0 is ignored.

    Returns:
        ``(qdd, tau)``, `(nv,)` each: the full accelerations and generalized forces.

    Raises:
        ValueError: wrong shapes; an unknown or fixed joint, an index out of range or
            part of a multi-DoF joint in `prescribed`.
        TypeError: non-real arrays, or a `prescribed` that is not names and ints.

    Example:
        >>> qdd_given = jnp.zeros(model.nv)
        >>> qdd, tau_out = jaxrbd.hybrid_dynamics(model, q, qd, tau, qdd_given,
        ...                                       prescribed=("body_1",))
        >>> bool(jnp.allclose(qdd[:3], 0.0)), bool(jnp.allclose(tau_out[3:], tau[3:]))
        (True, True)
        >>> tau_id = jaxrbd.inverse_dynamics(model, q, qd, qdd)
        >>> bool(jnp.allclose(tau_id, tau_out))
        True
    """
    with jax.named_scope("jaxrbd.hybrid_dynamics"):
        q, qd, tau, qdd = check_state(model, q=q, qd=qd, tau=tau, qdd=qdd)
        f_ext = check_f_ext(model, f_ext)
        mask = prescribed_mask(model, prescribed)
        return _kernel(mask)(model, q, qd, tau, qdd, f_ext)
