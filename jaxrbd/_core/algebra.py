"""Structure-exploiting spatial algebra in the *batch-trailing* layout used inside the algorithms.

Every per-sample quantity carries a trailing batch axis ``B`` (``B = 1`` for a single
call) and its components come just before it:

| quantity | shape |
|---|---|
| 3-vector | ``(..., 3, B)`` |
| 3x3 matrix | ``(..., 3, 3, B)`` |
| motion / force 6-vector ``[angular; linear]`` | ``(..., 6, B)`` |
| Plücker transform ``X(E, r)`` | ``E (..., 3, 3, B)``, ``r (..., 3, B)`` |
| rigid-body inertia (compact) | ``(..., 10, B)``: ``[m, h = m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` |
| articulated inertia | blocks ``A, Bk, C`` (``(..., 3, 3, B)`` each) of ``[[A, Bk], [Bk^T, C]]`` |

The compact inertia's rotational part is about the frame origin.

Leading axes (bodies, levels) broadcast. Transforms act as a rotation and a
translation instead of dense 6x6 matrices (Featherstone 2008, Table 2.8), and products
are written as explicit sums of elementwise products, so XLA fuses them into loops
vectorised along the contiguous batch axis instead of lowering tiny batched
``dot_general``s. The public `jaxrbd.spatial` runs these same formulas with a unit batch
axis.
"""

from __future__ import annotations

import jax.numpy as jnp

# ---------------------------------------------------------------- 3-D pieces


def vec(x, y, z):
    """A 3-vector ``(..., 3, B)`` from its components ``(..., B)``."""
    return jnp.stack([x, y, z], axis=-2)


def cross(a, b):
    a0, a1, a2 = a[..., 0, :], a[..., 1, :], a[..., 2, :]
    b0, b1, b2 = b[..., 0, :], b[..., 1, :], b[..., 2, :]
    return vec(a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0)


def dot(a, b):
    """Sum over the component axis: ``(..., k, B) . (..., k, B) -> (..., B)``.

    Written as explicit products (no XLA ``reduce``) so it fuses with its neighbours.
    """
    p = a * b
    out = p[..., 0, :]
    for k in range(1, p.shape[-2]):
        out = out + p[..., k, :]
    return out


def mv(E, x):
    """``E @ x``."""
    return E[..., :, 0, :] * x[..., None, 0, :] + E[..., :, 1, :] * x[..., None, 1, :] + (
        E[..., :, 2, :] * x[..., None, 2, :]
    )


def mtv(E, x):
    """``E^T @ x``."""
    return E[..., 0, :, :] * x[..., 0:1, :] + E[..., 1, :, :] * x[..., 1:2, :] + (
        E[..., 2, :, :] * x[..., 2:3, :]
    )


def mm(A, Bm):
    """``A @ B`` for 3x3 blocks."""
    return sum(A[..., :, k, None, :] * Bm[..., None, k, :, :] for k in range(3))


def mtm(A, Bm):
    """``A^T @ B``."""
    return sum(A[..., k, :, None, :] * Bm[..., k, None, :, :] for k in range(3))


def mmt(A, Bm):
    """``A @ B^T``."""
    return sum(A[..., :, k, None, :] * Bm[..., None, :, k, :] for k in range(3))


def transpose(A):
    return jnp.swapaxes(A, -3, -2)


def skew(a):
    """``a x`` as a matrix: ``(..., 3, B) -> (..., 3, 3, B)``."""
    a0, a1, a2 = a[..., 0, :], a[..., 1, :], a[..., 2, :]
    z = jnp.zeros_like(a0)
    return jnp.stack([vec(z, a2, -a1), vec(-a2, z, a0), vec(a1, -a0, z)], axis=-2)


def rx_mm(a, M):
    """``skew(a) @ M`` as cross products of ``a`` with the columns of ``M``, without
    building ``skew(a)``: XLA materialises a stacked skew matrix in a kernel of its own
    wherever several fused loops read it (four extra kernels per articulated-inertia
    step)."""
    a0, a1, a2 = (a[..., k, None, :] for k in range(3))
    m0, m1, m2 = M[..., 0, :, :], M[..., 1, :, :], M[..., 2, :, :]
    return jnp.stack([a1 * m2 - a2 * m1, a2 * m0 - a0 * m2, a0 * m1 - a1 * m0], axis=-3)


def outer(a, b):
    return a[..., :, None, :] * b[..., None, :, :]


def eye3(like, lead=None):
    """Identity ``(1, ..., 3, 3, 1)`` broadcastable against 3x3 blocks with the leading
    axes of the vector ``like`` (``(..., k, B)``), or ``lead`` leading axes."""
    lead = like.ndim - 2 if lead is None else lead
    return jnp.eye(3, dtype=like.dtype).reshape((1,) * lead + (3, 3, 1))


# ---------------------------------------------------------------- 6-D vectors


def ang(x):
    return x[..., :3, :]


def lin(x):
    return x[..., 3:, :]


def join(a, b):
    return jnp.concatenate([a, b], axis=-2)


def cross_motion(v, m):
    """``v x m`` (crm): ``[w x mw; w x mv + vv x mw]``."""
    w, vv = ang(v), lin(v)
    return join(cross(w, ang(m)), cross(w, lin(m)) + cross(vv, ang(m)))


def cross_force(v, f):
    """``v x* f`` (crf): ``[w x n + vv x f; w x f]``."""
    w, vv = ang(v), lin(v)
    return join(cross(w, ang(f)) + cross(vv, lin(f)), cross(w, lin(f)))


# ---------------------------------------------------------------- transforms


def X_motion(E, r, m):
    """``X m = [E w; E (v - r x w)]``."""
    w = ang(m)
    return join(mv(E, w), mv(E, lin(m) - cross(r, w)))


def XT_force(E, r, f):
    """``X^T f = [E^T n + r x E^T f; E^T f]`` (a force from frame B back to A)."""
    fl = mtv(E, lin(f))
    return join(mtv(E, ang(f)) + cross(r, fl), fl)


def X_force(E, r, f):
    """``X* f = [E (n - r x f); E f]``."""
    fl = lin(f)
    return join(mv(E, ang(f) - cross(r, fl)), mv(E, fl))


def Xinv_motion(E, r, m):
    """``X^-1 m = [E^T w; E^T v + r x E^T w]``."""
    w = mtv(E, ang(m))
    return join(w, mtv(E, lin(m)) + cross(r, w))


def compose(E2, r2, E1, r1):
    """``X2 X1`` with X1: A->B, X2: B->C: ``E = E2 E1``, ``r = r1 + E1^T r2``."""
    return mm(E2, E1), r1 + mtv(E1, r2)


# ---------------------------------------------------------------- inertias


def sym3(I6):
    """``(..., 6, B)`` entries ``[xx, xy, yy, xz, yz, zz]`` -> symmetric ``(..., 3, 3, B)``."""
    xx, xy, yy, xz, yz, zz = (I6[..., k, :] for k in range(6))
    return jnp.stack([vec(xx, xy, xz), vec(xy, yy, yz), vec(xz, yz, zz)], axis=-3)


def unsym3(M):
    return jnp.stack(
        [M[..., 0, 0, :], M[..., 0, 1, :], M[..., 1, 1, :], M[..., 0, 2, :], M[..., 1, 2, :],
         M[..., 2, 2, :]],
        axis=-2,
    )


def inertia_mul(Ic, v):
    """Rigid-body inertia (compact) times a motion vector: ``[Ibar w + h x v; m v - h x w]``."""
    m, h, Ibar = Ic[..., 0:1, :], Ic[..., 1:4, :], sym3(Ic[..., 4:, :])
    w, vv = ang(v), lin(v)
    return join(mv(Ibar, w) + cross(h, vv), m * vv - cross(h, w))


def inertia_blocks(Ic):
    """Compact rigid-body inertia -> ``(A, Bk, C)`` blocks of the 6x6 matrix."""
    m, h = Ic[..., 0:1, :], Ic[..., 1:4, :]
    C = m[..., None, :] * eye3(m)  # m: (..., 1, B)
    return sym3(Ic[..., 4:, :]), skew(h), C


def blocks_mul(A, Bk, C, v):
    """``[[A, Bk], [Bk^T, C]] v``."""
    w, vv = ang(v), lin(v)
    return join(mv(A, w) + mv(Bk, vv), mtv(Bk, w) + mv(C, vv))


def blocks_dense(A, Bk, C):
    """``[[A, Bk], [Bk^T, C]]`` as one ``(..., 6, 6, B)`` array."""
    top = jnp.concatenate([A, Bk], axis=-2)
    bottom = jnp.concatenate([transpose(Bk), C], axis=-2)
    return jnp.concatenate([top, bottom], axis=-3)


def dense_mul(M, v):
    """``M v`` for a dense ``M (..., 6, 6, B)`` and ``v (..., 6, B)``, as explicit sums
    (fused with its neighbours, no XLA ``reduce``)."""
    out = M[..., :, 0, :] * v[..., None, 0, :]
    for i in range(1, 6):
        out = out + M[..., :, i, :] * v[..., None, i, :]
    return out


def XT_blocks_X(E, r, A, Bk, C):
    """Congruence ``X^T [[A, Bk], [Bk^T, C]] X`` for ``X = X(E, r)``.

    With ``A' = E^T A E`` (likewise ``B'``, ``C'``) and ``X = diag(E, E) [[1, 0], [-rx, 1]]``:
    ``C'' = C'``, ``B'' = B' + rx C'``, ``A'' = A' + rx B'^T - B'' rx``.
    """
    A1 = mtm(E, mm(A, E))
    B1 = mtm(E, mm(Bk, E))
    C1 = mtm(E, mm(C, E))
    B2 = B1 + rx_mm(r, C1)
    # rx B1^T, and B2 rx = -(rx B2^T)^T since rx^T = -rx
    A2 = A1 + rx_mm(r, transpose(B1)) + transpose(rx_mm(r, transpose(B2)))
    return A2, B2, C1


def XT_compact_X(E, r, Ic):
    """Rigid-body inertia of frame B expressed in frame A (``X^T I X``), compact form."""
    m, h, Ibar = Ic[..., 0:1, :], Ic[..., 1:4, :], sym3(Ic[..., 4:, :])
    h1 = mtv(E, h)
    hA = h1 + m * r
    # Ibar_A = E^T Ibar E - rx h1x - (h1 + m r)x rx   (from XT_blocks_X with B = h x, C = m 1)
    #        = E^T Ibar E - h1 r^T - r hA^T + (r.h1 + r.hA) 1   (ax bx = b a^T - (a.b) 1),
    # entry by entry: no skew matrices for XLA to materialise
    I1 = mtm(E, mm(Ibar, E))
    tr = dot(r, h1) + dot(r, hA)
    IA = unsym3(I1 - outer(h1, r) - outer(r, hA) + tr[..., None, None, :] * eye3(r))
    lead = jnp.broadcast_shapes(m.shape[:-2], hA.shape[:-2], IA.shape[:-2])
    B = max(m.shape[-1], hA.shape[-1], IA.shape[-1])
    parts = [jnp.broadcast_to(x, lead + x.shape[-2:-1] + (B,)) for x in (m, hA, IA)]
    return jnp.concatenate(parts, axis=-2)
