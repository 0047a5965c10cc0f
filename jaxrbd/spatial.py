"""Spatial (6-D) vector algebra in Featherstone's notation, as in RBDL.

Motion and force vectors are 6-vectors ``[angular; linear]``. The Plücker transform
``X(E, r)`` from frame A to frame B, where B is rotated by ``E`` (A coordinates to B
coordinates) and has its origin at ``r`` (A coordinates), is ``[[E, 0], [-E r×, E]]``;
forces transform with ``X* = X^-T = [[E, -E r×], [0, E]]`` (Featherstone 2008, ch. 2).

Three representations of the same objects are offered:

* 6x6 matrices (``crm``, ``rotx``, ``plux``, ``mcI``, ``inv_X``, ...), as in Featherstone's
  Table 1, for clarity;
* products computed from 3-vector pieces without building a 6x6 (``cross_motion``,
  ``cross_force``, ``inertia_mul``);
* the compact transform ``(E (..., 3, 3), r (..., 3))`` and the compact rigid-body inertia
  ``pi (..., 10)`` (Featherstone 2008, Table 2.8), with ``compose``, ``inverse``, ``apply_*``.

Every function accepts leading batch axes ``...`` that broadcast against each other, is
pure ``jax.numpy`` and works under ``jit``, ``vmap`` and ``grad``. Integer inputs are
converted to the default floating dtype; floating inputs keep theirs.

The products and transforms are those of the algorithms' own algebra
(`jaxrbd._core.algebra`, `jaxrbd._core.rotation`), which keeps a trailing batch axis; this module
checks and broadcasts the arguments, adds that axis and takes it off again, so each
formula exists once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Real

from ._core import algebra as al
from ._core import rotation as _rotation

__all__ = [
    "X_star",
    "XtoV",
    "apply_force",
    "apply_inertia",
    "apply_inverse_motion",
    "apply_motion",
    "apply_transpose_force",
    "apply_transpose_inertia",
    "compose",
    "crf",
    "crm",
    "cross_force",
    "cross_motion",
    "from_matrix",
    "inertia_from_vector",
    "inertia_mul",
    "inertia_to_vector",
    "inv_X",
    "inverse",
    "mcI",
    "mcI_from_vector",
    "mcI_to_vector",
    "plux",
    "quat_to_rotation",
    "rotation_to_quat",
    "rotx",
    "roty",
    "rotz",
    "rpy_to_rotation",
    "rx",
    "ry",
    "rz",
    "skew",
    "to_matrix",
    "vee",
    "xlt",
]


# --------------------------------------------------------------------------- helpers


def _float(name: str, x, core: tuple[int, ...], fn: str) -> Array:
    """``x`` as a floating array whose trailing axes are ``core``; else a ValueError."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    k = len(core)
    if x.ndim < k or tuple(x.shape[x.ndim - k :]) != core:
        want = "(..., " + ", ".join(map(str, core)) + ")" if core else "(...)"
        raise ValueError(f"{fn}: {name} has shape {x.shape}, expected {want}")
    return x


def _broadcast(fn: str, *items: tuple[str, Array, int]) -> list[Array]:
    """Broadcast the leading (batch) axes of ``(name, array, core_ndim)`` explicitly.

    Explicit broadcasting keeps every later elementwise op rank-equal, so the module also
    runs under ``jax_numpy_rank_promotion="raise"``.
    """
    batches = [x.shape[: x.ndim - k] for _, x, k in items]
    try:
        batch = np.broadcast_shapes(*batches)
    except ValueError:
        desc = ", ".join(f"{n} {x.shape}" for n, x, _ in items)
        raise ValueError(f"{fn}: batch axes do not broadcast: {desc}") from None
    return [jnp.broadcast_to(x, batch + x.shape[x.ndim - k :]) for _, x, k in items]


def _bt(fn, *xs: Array):
    """``fn`` of `jaxrbd._core.algebra` (batch-trailing layout) on arrays without a batch axis."""
    return jax.tree_util.tree_map(lambda o: o[..., 0], fn(*(x[..., None] for x in xs)))


def _mT(A: Array) -> Array:
    return jnp.swapaxes(A, -1, -2)


def _mv(M: Array, v: Array) -> Array:
    return jnp.einsum("...ij,...j->...i", M, v)


def _cross(a: Array, b: Array) -> Array:
    return _bt(al.cross, a, b)


def _skew(v: Array) -> Array:
    return _bt(al.skew, v)


def _vee(S: Array) -> Array:
    return 0.5 * jnp.stack(
        [S[..., 2, 1] - S[..., 1, 2], S[..., 0, 2] - S[..., 2, 0], S[..., 1, 0] - S[..., 0, 1]],
        axis=-1,
    )


def _blocks(A: Array, B: Array, C: Array, D: Array) -> Array:
    """The 6x6 ``[[A, B], [C, D]]`` from 3x3 blocks of equal batch shape."""
    return jnp.concatenate(
        [jnp.concatenate([A, B], axis=-1), jnp.concatenate([C, D], axis=-1)], axis=-2
    )


def _split(M: Array) -> tuple[Array, Array, Array, Array]:
    return M[..., :3, :3], M[..., :3, 3:], M[..., 3:, :3], M[..., 3:, 3:]


def _eye3(like: Array) -> Array:
    return jnp.broadcast_to(jnp.eye(3, dtype=like.dtype), like.shape[:-1] + (3, 3))


def _sym_to_vec(S: Array) -> Array:
    """Symmetric 3x3 -> ``[xx, xy, yy, xz, yz, zz]`` (Pinocchio's ``Symmetric3`` order)."""
    return _bt(al.unsym3, S)


def _vec_to_sym(s: Array) -> Array:
    return _bt(al.sym3, s)


def _sym(A: Array) -> Array:
    return 0.5 * (A + _mT(A))


# --------------------------------------------------------------------------- cross products


def skew(v: Real[ArrayLike, "... 3"]) -> Float[Array, "... 3 3"]:
    """Skew-symmetric cross-product matrix ``v×``, so that ``skew(a) @ b == a × b``.

    Args:
        v: 3-vectors, `(..., 3)`.

    Returns:
        `(..., 3, 3)` matrices ``[[0, -z, y], [z, 0, -x], [-y, x, 0]]``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> spatial.skew(jnp.array([1.0, 2.0, 3.0])).tolist()
        [[0.0, -3.0, 2.0], [3.0, 0.0, -1.0], [-2.0, 1.0, 0.0]]
    """
    return _skew(_float("v", v, (3,), "skew"))


def vee(S: Real[ArrayLike, "... 3 3"]) -> Float[Array, "... 3"]:
    """Inverse of `skew`: the 3-vector of the antisymmetric part of ``S``.

    Args:
        S: `(..., 3, 3)` matrices; only ``(S - Sᵀ) / 2`` is used.

    Returns:
        `(..., 3)` vectors ``v`` with ``skew(v) == (S - Sᵀ) / 2``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> spatial.vee(spatial.skew(jnp.array([1.0, 2.0, 3.0]))).tolist()
        [1.0, 2.0, 3.0]
    """
    return _vee(_float("S", S, (3, 3), "vee"))


def crm(v: Real[ArrayLike, "... 6"]) -> Float[Array, "... 6 6"]:
    """Motion cross-product matrix ``v×`` (Featherstone 2008, ch. 2).

    ``crm(v) @ m`` is the derivative of a motion vector ``m`` fixed in a body moving with
    velocity ``v``. Prefer `cross_motion` for the product itself.

    Args:
        v: spatial motion vectors ``[ω; v_O]``, `(..., 6)`.

    Returns:
        `(..., 6, 6)` matrices ``[[ω×, 0], [v_O×, ω×]]``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> spatial.crm(jnp.arange(6.0)).shape
        (6, 6)
    """
    v = _float("v", v, (6,), "crm")
    w, vo = _skew(v[..., :3]), _skew(v[..., 3:])
    return _blocks(w, jnp.zeros_like(w), vo, w)


def crf(v: Real[ArrayLike, "... 6"]) -> Float[Array, "... 6 6"]:
    """Force cross-product matrix ``v×* = -crm(v)ᵀ`` (Featherstone 2008, ch. 2).

    Args:
        v: spatial motion vectors ``[ω; v_O]``, `(..., 6)`.

    Returns:
        `(..., 6, 6)` matrices ``[[ω×, v_O×], [0, ω×]]``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> v = jnp.arange(6.0)
        >>> bool(jnp.all(spatial.crf(v) == -spatial.crm(v).T))
        True
    """
    v = _float("v", v, (6,), "crf")
    w, vo = _skew(v[..., :3]), _skew(v[..., 3:])
    return _blocks(w, vo, jnp.zeros_like(w), w)


def cross_motion(v: Real[ArrayLike, "... 6"], m: Real[ArrayLike, "... 6"]) -> Float[Array, "... 6"]:
    """Spatial cross product of motions ``v × m = crm(v) @ m``, from 3-D cross products.

    Args:
        v: motion vectors ``[ω; v_O]``, `(..., 6)`.
        m: motion vectors ``[m_ω; m_O]`` in the same coordinates, `(..., 6)`.

    Returns:
        `(..., 6)` motion vectors ``[ω × m_ω; v_O × m_ω + ω × m_O]``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> v = jnp.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
        >>> spatial.cross_motion(v, jnp.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])).tolist()
        [0.0, 1.0, 0.0, -1.0, 0.0, 0.0]
    """
    v, m = _broadcast(
        "cross_motion",
        ("v", _float("v", v, (6,), "cross_motion"), 1),
        ("m", _float("m", m, (6,), "cross_motion"), 1),
    )
    return _bt(al.cross_motion, v, m)


def cross_force(v: Real[ArrayLike, "... 6"], f: Real[ArrayLike, "... 6"]) -> Float[Array, "... 6"]:
    """Spatial cross product of a motion and a force ``v ×* f = crf(v) @ f``.

    Args:
        v: motion vectors ``[ω; v_O]``, `(..., 6)`.
        f: force vectors ``[n_O; f]`` in the same coordinates, `(..., 6)`.

    Returns:
        `(..., 6)` force vectors ``[ω × n_O + v_O × f; ω × f]``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> v = jnp.array([0.0, 0.0, 1.0, 1.0, 0.0, 0.0])
        >>> spatial.cross_force(v, jnp.array([0.0, 0.0, 0.0, 0.0, 1.0, 0.0])).tolist()
        [0.0, 0.0, 1.0, -1.0, 0.0, 0.0]
    """
    v, f = _broadcast(
        "cross_force",
        ("v", _float("v", v, (6,), "cross_force"), 1),
        ("f", _float("f", f, (6,), "cross_force"), 1),
    )
    return _bt(al.cross_force, v, f)


# --------------------------------------------------------------------------- 6x6 transforms


def _coordinate_rotation(theta, axis: int, fn: str) -> Array:
    theta = _float("theta", theta, (), fn)
    c, s = jnp.cos(theta), jnp.sin(theta)
    o, one = jnp.zeros_like(c), jnp.ones_like(c)
    rows = {
        0: [[one, o, o], [o, c, s], [o, -s, c]],
        1: [[c, o, -s], [o, one, o], [s, o, c]],
        2: [[c, s, o], [-s, c, o], [o, o, one]],
    }[axis]
    return jnp.stack([jnp.stack(row, -1) for row in rows], -2)


def rx(theta: Real[ArrayLike, "..."]) -> Float[Array, "... 3 3"]:
    """Coordinate rotation ``E`` by ``theta`` [rad] about x (Featherstone's ``rx``).

    ``E`` maps A coordinates to those of B, rotated by ``theta`` about x; it is the
    transpose of the robotics rotation ``Rx(theta)``.

    Args:
        theta: angles [rad], `(...)`.

    Returns:
        `(..., 3, 3)` matrices ``[[1, 0, 0], [0, c, s], [0, -s, c]]``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> spatial.rx(jnp.zeros(4)).shape
        (4, 3, 3)
    """
    return _coordinate_rotation(theta, 0, "rx")


def ry(theta: Real[ArrayLike, "..."]) -> Float[Array, "... 3 3"]:
    """Coordinate rotation about y, ``[[c, 0, -s], [0, 1, 0], [s, 0, c]]`` (see `rx`).

    Args:
        theta: angles [rad], `(...)`.

    Returns:
        `(..., 3, 3)` coordinate rotation matrices.

    Example:
        >>> from jaxrbd import spatial
        >>> spatial.ry(0.0).tolist()
        [[1.0, 0.0, -0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    return _coordinate_rotation(theta, 1, "ry")


def rz(theta: Real[ArrayLike, "..."]) -> Float[Array, "... 3 3"]:
    """Coordinate rotation about z, ``[[c, s, 0], [-s, c, 0], [0, 0, 1]]`` (see `rx`).

    Args:
        theta: angles [rad], `(...)`.

    Returns:
        `(..., 3, 3)` coordinate rotation matrices.

    Example:
        >>> import numpy as np
        >>> from jaxrbd import spatial
        >>> np.round(np.asarray(spatial.rz(np.pi / 2), float), 6).tolist()
        [[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    return _coordinate_rotation(theta, 2, "rz")


def _rot6(E: Array) -> Array:
    return _blocks(E, jnp.zeros_like(E), jnp.zeros_like(E), E)


def rotx(theta: Real[ArrayLike, "..."]) -> Float[Array, "... 6 6"]:
    """Plücker transform to a frame rotated by ``theta`` [rad] about x (Table 1).

    Args:
        theta: angles [rad], `(...)`.

    Returns:
        `(..., 6, 6)` transforms ``[[E, 0], [0, E]]`` with ``E = rx(theta)``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> spatial.rotx(jnp.zeros((2, 3))).shape
        (2, 3, 6, 6)
    """
    return _rot6(_coordinate_rotation(theta, 0, "rotx"))


def roty(theta: Real[ArrayLike, "..."]) -> Float[Array, "... 6 6"]:
    """Plücker transform to a frame rotated by ``theta`` [rad] about y (Table 1).

    Args:
        theta: angles [rad], `(...)`.

    Returns:
        `(..., 6, 6)` transforms ``[[E, 0], [0, E]]`` with ``E = ry(theta)``.

    Example:
        >>> from jaxrbd import spatial
        >>> spatial.roty(0.3).shape
        (6, 6)
    """
    return _rot6(_coordinate_rotation(theta, 1, "roty"))


def rotz(theta: Real[ArrayLike, "..."]) -> Float[Array, "... 6 6"]:
    """Plücker transform to a frame rotated by ``theta`` [rad] about z (Table 1).

    Args:
        theta: angles [rad], `(...)`.

    Returns:
        `(..., 6, 6)` transforms ``[[E, 0], [0, E]]`` with ``E = rz(theta)``.

    Example:
        >>> import numpy as np
        >>> from jaxrbd import spatial
        >>> v = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # angular velocity along x_A
        >>> np.round(np.asarray(spatial.rotz(np.pi / 2) @ v, float), 6).tolist()
        [0.0, -1.0, 0.0, 0.0, 0.0, 0.0]
    """
    return _rot6(_coordinate_rotation(theta, 2, "rotz"))


def xlt(r: Real[ArrayLike, "... 3"]) -> Float[Array, "... 6 6"]:
    """Plücker transform to a frame translated by ``r`` [m] (Table 1).

    Args:
        r: origin of B in A coordinates [m], `(..., 3)`.

    Returns:
        `(..., 6, 6)` transforms ``[[1, 0], [-r×, 1]]``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> w = jnp.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])  # spin about z through A's origin
        >>> (spatial.xlt(jnp.array([1.0, 0.0, 0.0])) @ w).tolist()  # seen from x = 1
        [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    """
    r = _float("r", r, (3,), "xlt")
    one = _eye3(r)
    return _blocks(one, jnp.zeros_like(one), -_skew(r), one)


def plux(E: Real[ArrayLike, "... 3 3"], r: Real[ArrayLike, "... 3"]) -> Float[Array, "... 6 6"]:
    """Plücker transform ``X(E, r) = rot(E) @ xlt(r) = [[E, 0], [-E r×, E]]``.

    Args:
        E: coordinate rotation from A to B (B's axes in A are the rows of ``E``),
            `(..., 3, 3)`; the transpose of the robotics rotation ``A_R_B``.
        r: origin of B in A coordinates [m], `(..., 3)`.

    Returns:
        `(..., 6, 6)` transforms ``B_X_A`` for motion vectors.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> X = spatial.plux(spatial.rz(0.5), jnp.array([1.0, 2.0, 3.0]))
        >>> bool(jnp.allclose(X, spatial.rotz(0.5) @ spatial.xlt(jnp.array([1.0, 2.0, 3.0]))))
        True
    """
    E, r = _broadcast(
        "plux", ("E", _float("E", E, (3, 3), "plux"), 2), ("r", _float("r", r, (3,), "plux"), 1)
    )
    return _blocks(E, jnp.zeros_like(E), -E @ _skew(r), E)


def XtoV(X: Real[ArrayLike, "... 6 6"]) -> Float[Array, "... 6"]:
    """Small-displacement motion vector of a Plücker transform (Table 1, ``XtoV``).

    For frames A and B close together, the returned vector approximates the velocity
    that moves A onto B in one time unit; it is invariant under ``X``.

    Args:
        X: Plücker transforms ``B_X_A``, `(..., 6, 6)`.

    Returns:
        `(..., 6)` motion vectors, equal in A and B coordinates.

    Example:
        >>> from jaxrbd import spatial
        >>> round(float(spatial.XtoV(spatial.rotz(1e-3))[2]), 9)
        0.001
    """
    X = _float("X", X, (6, 6), "XtoV")
    return 0.5 * jnp.stack(
        [
            X[..., 1, 2] - X[..., 2, 1],
            X[..., 2, 0] - X[..., 0, 2],
            X[..., 0, 1] - X[..., 1, 0],
            X[..., 4, 2] - X[..., 5, 1],
            X[..., 5, 0] - X[..., 3, 2],
            X[..., 3, 1] - X[..., 4, 0],
        ],
        axis=-1,
    )


def inv_X(X: Real[ArrayLike, "... 6 6"]) -> Float[Array, "... 6 6"]:
    """Inverse of a Plücker transform from its structure, no matrix inversion.

    ``X = [[E, 0], [B, E]]`` with ``B = -E r×`` has ``X⁻¹ = [[Eᵀ, 0], [Bᵀ, Eᵀ]]``
    (``Bᵀ = r× Eᵀ``). Valid only for Plücker transforms (orthonormal ``E``).

    Args:
        X: Plücker transforms ``B_X_A``, `(..., 6, 6)`.

    Returns:
        `(..., 6, 6)` transforms ``A_X_B``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> X = spatial.plux(spatial.rx(0.3), jnp.array([1.0, -2.0, 0.5]))
        >>> bool(jnp.allclose(spatial.inv_X(X) @ X, jnp.eye(6), atol=1e-6))
        True
    """
    A, _, C, D = _split(_float("X", X, (6, 6), "inv_X"))
    return _blocks(_mT(A), jnp.zeros_like(A), _mT(C), _mT(D))


def X_star(X: Real[ArrayLike, "... 6 6"]) -> Float[Array, "... 6 6"]:
    """Force transform ``X* = X⁻ᵀ = [[E, -E r×], [0, E]]`` of a Plücker transform.

    Args:
        X: Plücker transforms ``B_X_A`` for motion vectors, `(..., 6, 6)`.

    Returns:
        `(..., 6, 6)` transforms ``B_X*_A`` for force vectors, equal to ``inv_X(X)ᵀ``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> X = spatial.plux(spatial.ry(0.2), jnp.array([0.1, 0.2, 0.3]))
        >>> bool(jnp.all(spatial.X_star(X) == jnp.swapaxes(spatial.inv_X(X), -1, -2)))
        True
    """
    A, _, C, D = _split(_float("X", X, (6, 6), "X_star"))
    return _blocks(A, C, jnp.zeros_like(A), D)


# --------------------------------------------------------------------------- compact transforms


def _Er(fn: str, E, r, *more: tuple[str, object, tuple[int, ...]]) -> list[Array]:
    items = [("E", _float("E", E, (3, 3), fn), 2), ("r", _float("r", r, (3,), fn), 1)]
    items += [(n, _float(n, x, core, fn), len(core)) for n, x, core in more]
    return _broadcast(fn, *items)


def compose(
    E2: Real[ArrayLike, "... 3 3"],
    r2: Real[ArrayLike, "... 3"],
    E1: Real[ArrayLike, "... 3 3"],
    r1: Real[ArrayLike, "... 3"],
) -> tuple[Float[Array, "... 3 3"], Float[Array, "... 3"]]:
    """Product of compact transforms, ``X(E, r) = X(E2, r2) @ X(E1, r1)``.

    If ``(E1, r1)`` is ``B_X_A`` and ``(E2, r2)`` is ``C_X_B``, the result is ``C_X_A``:
    ``E = E2 E1`` and ``r = r1 + E1ᵀ r2`` (RBDA Table 2.5).

    Args:
        E2: rotation of the second (outer) transform, `(..., 3, 3)`.
        r2: translation of the second transform [m], `(..., 3)`.
        E1: rotation of the first (inner) transform, `(..., 3, 3)`.
        r1: translation of the first transform [m], `(..., 3)`.

    Returns:
        ``(E (..., 3, 3), r (..., 3))`` of the product.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> E, r = spatial.compose(jnp.eye(3), jnp.array([0.0, 0.0, 1.0]),
        ...                        spatial.rz(jnp.pi / 2), jnp.array([1.0, 0.0, 0.0]))
        >>> jnp.round(r, 6).tolist()
        [1.0, 0.0, 1.0]
    """
    fn = "compose"
    E2, r2, E1, r1 = _broadcast(
        fn,
        ("E2", _float("E2", E2, (3, 3), fn), 2),
        ("r2", _float("r2", r2, (3,), fn), 1),
        ("E1", _float("E1", E1, (3, 3), fn), 2),
        ("r1", _float("r1", r1, (3,), fn), 1),
    )
    return _bt(al.compose, E2, r2, E1, r1)


def inverse(
    E: Real[ArrayLike, "... 3 3"], r: Real[ArrayLike, "... 3"]
) -> tuple[Float[Array, "... 3 3"], Float[Array, "... 3"]]:
    """Inverse of a compact transform: ``X(E, r)⁻¹ = X(Eᵀ, -E r)``.

    Args:
        E: rotation of ``B_X_A``, `(..., 3, 3)`.
        r: origin of B in A coordinates [m], `(..., 3)`.

    Returns:
        ``(Eᵀ, -E r)``: the compact form of ``A_X_B``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> Ei, ri = spatial.inverse(jnp.eye(3), jnp.array([1.0, 2.0, 3.0]))
        >>> ri.tolist()
        [-1.0, -2.0, -3.0]
    """
    E, r = _Er("inverse", E, r)
    return _mT(E), -_mv(E, r)


def to_matrix(
    E: Real[ArrayLike, "... 3 3"], r: Real[ArrayLike, "... 3"]
) -> Float[Array, "... 6 6"]:
    """The 6x6 Plücker matrix of a compact transform (same as `plux`).

    Args:
        E: coordinate rotation, `(..., 3, 3)`.
        r: origin of B in A coordinates [m], `(..., 3)`.

    Returns:
        `(..., 6, 6)` matrices ``[[E, 0], [-E r×, E]]``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> spatial.to_matrix(jnp.eye(3), jnp.zeros((5, 3))).shape
        (5, 6, 6)
    """
    E, r = _Er("to_matrix", E, r)
    return _blocks(E, jnp.zeros_like(E), -E @ _skew(r), E)


def from_matrix(
    X: Real[ArrayLike, "... 6 6"],
) -> tuple[Float[Array, "... 3 3"], Float[Array, "... 3"]]:
    """Compact form ``(E, r)`` of a 6x6 Plücker transform.

    ``E`` is the upper-left block and ``r = vee(-Eᵀ X[3:, :3])``.

    Args:
        X: Plücker transforms, `(..., 6, 6)`.

    Returns:
        ``(E (..., 3, 3), r (..., 3))`` with ``to_matrix(E, r) == X``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> E, r = spatial.from_matrix(spatial.xlt(jnp.array([1.0, 2.0, 3.0])))
        >>> r.tolist()
        [1.0, 2.0, 3.0]
    """
    X = _float("X", X, (6, 6), "from_matrix")
    E = X[..., :3, :3]
    return E, _vee(-_mT(E) @ X[..., 3:, :3])


def apply_motion(
    E: Real[ArrayLike, "... 3 3"], r: Real[ArrayLike, "... 3"], m: Real[ArrayLike, "... 6"]
) -> Float[Array, "... 6"]:
    """Motion vector from A to B coordinates, ``X m = [E ω; E (v - r × ω)]``.

    Args:
        E: rotation of ``B_X_A``, `(..., 3, 3)`.
        r: origin of B in A coordinates [m], `(..., 3)`.
        m: motion vectors in A coordinates, `(..., 6)`.

    Returns:
        `(..., 6)` motion vectors in B coordinates.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> w = jnp.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
        >>> spatial.apply_motion(jnp.eye(3), jnp.array([1.0, 0.0, 0.0]), w).tolist()
        [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    """
    return _bt(al.X_motion, *_Er("apply_motion", E, r, ("m", m, (6,))))


def apply_inverse_motion(
    E: Real[ArrayLike, "... 3 3"], r: Real[ArrayLike, "... 3"], m: Real[ArrayLike, "... 6"]
) -> Float[Array, "... 6"]:
    """Motion vector from B back to A coordinates, ``X⁻¹ m = [Eᵀ ω; Eᵀ v + r × Eᵀ ω]``.

    Args:
        E: rotation of ``B_X_A``, `(..., 3, 3)`.
        r: origin of B in A coordinates [m], `(..., 3)`.
        m: motion vectors in B coordinates, `(..., 6)`.

    Returns:
        `(..., 6)` motion vectors in A coordinates.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> w = jnp.array([0.0, 0.0, 1.0, 0.0, 1.0, 0.0])
        >>> spatial.apply_inverse_motion(jnp.eye(3), jnp.array([1.0, 0.0, 0.0]), w).tolist()
        [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    """
    return _bt(al.Xinv_motion, *_Er("apply_inverse_motion", E, r, ("m", m, (6,))))


def apply_force(
    E: Real[ArrayLike, "... 3 3"], r: Real[ArrayLike, "... 3"], f: Real[ArrayLike, "... 6"]
) -> Float[Array, "... 6"]:
    """Force vector from A to B coordinates, ``X* f = [E (n - r × f); E f]``.

    Args:
        E: rotation of ``B_X_A``, `(..., 3, 3)`.
        r: origin of B in A coordinates [m], `(..., 3)`.
        f: force vectors ``[n_A; f]`` in A coordinates [N m; N], `(..., 6)`.

    Returns:
        `(..., 6)` force vectors in B coordinates (moment about B's origin).

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> f = jnp.array([0.0, 0.0, 0.0, 0.0, 1.0, 0.0])  # unit force along y through A
        >>> spatial.apply_force(jnp.eye(3), jnp.array([1.0, 0.0, 0.0]), f).tolist()
        [0.0, 0.0, -1.0, 0.0, 1.0, 0.0]
    """
    return _bt(al.X_force, *_Er("apply_force", E, r, ("f", f, (6,))))


def apply_transpose_force(
    E: Real[ArrayLike, "... 3 3"], r: Real[ArrayLike, "... 3"], f: Real[ArrayLike, "... 6"]
) -> Float[Array, "... 6"]:
    """Force vector from B back to A coordinates, ``Xᵀ f = [Eᵀ n + r × Eᵀ f; Eᵀ f]``.

    This is ``A_X*_B f``, the step ``f[lam] += Xup[i]ᵀ f[i]`` of the backward passes.

    Args:
        E: rotation of ``B_X_A``, `(..., 3, 3)`.
        r: origin of B in A coordinates [m], `(..., 3)`.
        f: force vectors in B coordinates [N m; N], `(..., 6)`.

    Returns:
        `(..., 6)` force vectors in A coordinates (moment about A's origin).

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> f = jnp.array([0.0, 0.0, 0.0, 0.0, 1.0, 0.0])  # unit force along y through B
        >>> spatial.apply_transpose_force(jnp.eye(3), jnp.array([1.0, 0.0, 0.0]), f).tolist()
        [0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    """
    return _bt(al.XT_force, *_Er("apply_transpose_force", E, r, ("f", f, (6,))))


def _translate_inertia6(I: Array, r: Array) -> Array:
    """``xlt(r)* I xlt(r)⁻¹`` for a general 6x6 ``I`` by 3x3 blocks."""
    A, B, C, D = _split(I)
    S = _skew(r)
    SD = S @ D
    return _blocks(A - S @ C + (B - SD) @ S, B - SD, C + D @ S, D)


def _inertia_arg(fn: str, I) -> tuple[Array, bool]:
    I = jnp.asarray(I)
    if I.ndim >= 2 and I.shape[-2:] == (6, 6):
        return _float("I", I, (6, 6), fn), False
    if I.ndim >= 1 and I.shape[-1] == 10:
        return _float("I", I, (10,), fn), True
    raise ValueError(f"{fn}: I has shape {I.shape}, expected (..., 6, 6) or (..., 10)")


def apply_inertia(
    E: Real[ArrayLike, "... 3 3"],
    r: Real[ArrayLike, "... 3"],
    I: Real[ArrayLike, "... 6 6"] | Real[ArrayLike, "... 10"],
) -> Float[Array, "... 6 6"] | Float[Array, "... 10"]:
    """Inertia from A to B coordinates, ``X* I X⁻¹`` (Featherstone 2008, ch. 2).

    A 6x6 ``I`` may be any spatial inertia (rigid, composite or articulated); a compact
    ``(..., 10)`` rigid-body inertia (see `inertia_to_vector`) is transformed in compact
    form and returned as such.

    Args:
        E: rotation of ``B_X_A``, `(..., 3, 3)`.
        r: origin of B in A coordinates [m], `(..., 3)`.
        I: inertias in A coordinates, `(..., 6, 6)` or `(..., 10)`.

    Returns:
        The inertias in B coordinates, in the form of ``I``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> I = spatial.mcI(2.0, jnp.array([1.0, 0.0, 0.0]), jnp.eye(3))
        >>> IB = spatial.apply_inertia(jnp.eye(3), jnp.array([1.0, 0.0, 0.0]), I)
        >>> bool(jnp.allclose(IB, spatial.mcI(2.0, jnp.zeros(3), jnp.eye(3))))
        True
    """
    I, compact = _inertia_arg("apply_inertia", I)
    E, r, I = _Er("apply_inertia", E, r, ("I", I, I.shape[-1:] if compact else (6, 6)))
    if compact:  # X* I X^-1 = Y^T I Y with Y = X^-1 = X(E^T, -E r)
        return _bt(al.XT_compact_X, _mT(E), -_mv(E, r), I)
    A, B, C, D = _split(_translate_inertia6(I, r))
    ET = _mT(E)
    return _blocks(E @ A @ ET, E @ B @ ET, E @ C @ ET, E @ D @ ET)


def apply_transpose_inertia(
    E: Real[ArrayLike, "... 3 3"],
    r: Real[ArrayLike, "... 3"],
    I: Real[ArrayLike, "... 6 6"] | Real[ArrayLike, "... 10"],
) -> Float[Array, "... 6 6"] | Float[Array, "... 10"]:
    """Inertia from B back to A coordinates, ``Xᵀ I X`` (e.g. ``IC[lam] += XupᵀIC[i]Xup``).

    Args:
        E: rotation of ``B_X_A``, `(..., 3, 3)`.
        r: origin of B in A coordinates [m], `(..., 3)`.
        I: inertias in B coordinates, `(..., 6, 6)` or compact `(..., 10)`.

    Returns:
        The inertias in A coordinates, in the form of ``I``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> I = spatial.mcI(2.0, jnp.zeros(3), jnp.eye(3))
        >>> IA = spatial.apply_transpose_inertia(jnp.eye(3), jnp.array([1.0, 0.0, 0.0]), I)
        >>> bool(jnp.allclose(IA, spatial.mcI(2.0, jnp.array([1.0, 0.0, 0.0]), jnp.eye(3))))
        True
    """
    I, compact = _inertia_arg("apply_transpose_inertia", I)
    E, r, I = _Er("apply_transpose_inertia", E, r, ("I", I, I.shape[-1:] if compact else (6, 6)))
    ET = _mT(E)
    if compact:
        return _bt(al.XT_compact_X, E, r, I)
    # xlt(r)^T rot(E)^T I rot(E) xlt(r): rotate back, then translate by -r.
    A, B, C, D = _split(I)
    I = _blocks(ET @ A @ E, ET @ B @ E, ET @ C @ E, ET @ D @ E)
    return _translate_inertia6(I, -r)


# --------------------------------------------------------------------------- inertia


def mcI(
    m: Real[ArrayLike, "..."], c: Real[ArrayLike, "... 3"], I_c: Real[ArrayLike, "... 3 3"]
) -> Float[Array, "... 6 6"]:
    """Spatial inertia of a rigid body (Featherstone 2008, ch. 2).

    Args:
        m: mass [kg], `(...)`.
        c: centre of mass in body coordinates [m], `(..., 3)`.
        I_c: rotational inertia about the centre of mass [kg m^2], `(..., 3, 3)`.

    Returns:
        `(..., 6, 6)` inertias ``[[I_c + m c× c×ᵀ, m c×], [m c×ᵀ, m 1]]``.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> I = spatial.mcI(2.0, jnp.array([0.0, 0.0, 1.0]), jnp.eye(3))
        >>> jnp.diag(I).tolist()
        [3.0, 3.0, 1.0, 2.0, 2.0, 2.0]
    """
    fn = "mcI"
    m, c, I_c = _broadcast(
        fn,
        ("m", _float("m", m, (), fn), 0),
        ("c", _float("c", c, (3,), fn), 1),
        ("I_c", _float("I_c", I_c, (3, 3), fn), 2),
    )
    mC = m[..., None, None] * _skew(c)
    return _blocks(I_c - mC @ _skew(c), mC, _mT(mC), m[..., None, None] * _eye3(c))


def mcI_to_vector(
    m: Real[ArrayLike, "..."], c: Real[ArrayLike, "... 3"], I_c: Real[ArrayLike, "... 3 3"]
) -> Float[Array, "... 10"]:
    """Compact inertia ``[m, m c, I_O]`` (see `inertia_to_vector`) from ``(m, c, I_c)``.

    Args:
        m: mass [kg], `(...)`.
        c: centre of mass in body coordinates [m], `(..., 3)`.
        I_c: rotational inertia about the centre of mass [kg m^2], `(..., 3, 3)`.

    Returns:
        `(..., 10)` vectors ``[m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``, with
        ``I = I_c + m (cᵀc 1 - c cᵀ)`` about the frame origin.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> spatial.mcI_to_vector(2.0, jnp.array([0.0, 0.0, 1.0]), jnp.eye(3)).tolist()
        [2.0, 0.0, 0.0, 2.0, 3.0, 0.0, 3.0, 0.0, 0.0, 1.0]
    """
    fn = "mcI_to_vector"
    m, c, I_c = _broadcast(
        fn,
        ("m", _float("m", m, (), fn), 0),
        ("c", _float("c", c, (3,), fn), 1),
        ("I_c", _float("I_c", I_c, (3, 3), fn), 2),
    )
    C = _skew(c)
    I_O = I_c - m[..., None, None] * (C @ C)
    return jnp.concatenate([m[..., None], m[..., None] * c, _sym_to_vec(_sym(I_O))], axis=-1)


def mcI_from_vector(
    pi: Real[ArrayLike, "... 10"],
) -> tuple[Float[Array, "..."], Float[Array, "... 3"], Float[Array, "... 3 3"]]:
    """``(m, c, I_c)`` from a compact inertia; the inverse of `mcI_to_vector`.

    A massless body (``m == 0``) gets ``c = 0`` and ``I_c = I_O``, with finite gradients.

    Args:
        pi: compact inertias ``[m, m c, I_O]``, `(..., 10)`.

    Returns:
        Mass `(...)` [kg], centre of mass `(..., 3)` [m] and rotational inertia about the
        centre of mass `(..., 3, 3)` [kg m^2].

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> pi = spatial.mcI_to_vector(2.0, jnp.array([0.0, 0.0, 1.0]), jnp.eye(3))
        >>> m, c, I_c = spatial.mcI_from_vector(pi)
        >>> c.tolist(), jnp.diag(I_c).tolist()
        ([0.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    """
    pi = _float("pi", pi, (10,), "mcI_from_vector")
    m, h = pi[..., 0], pi[..., 1:4]
    ok = m != 0
    c = jnp.where(ok[..., None], h / jnp.where(ok, m, 1.0)[..., None], 0.0)
    C = _skew(c)
    return m, c, _vec_to_sym(pi[..., 4:]) + m[..., None, None] * (C @ C)


def inertia_to_vector(I: Real[ArrayLike, "... 6 6"]) -> Float[Array, "... 10"]:
    """Compact 10-parameter form of a rigid-body spatial inertia.

    Pinocchio's dynamic-parameter order ``[m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz,
    Izz]``, where ``I`` is the rotational inertia about the *frame origin*. Read from
    ``I = [[I_O, h×], [h×ᵀ, m 1]]`` (symmetrised, ``h = m c``).

    Args:
        I: spatial inertias, `(..., 6, 6)`.

    Returns:
        `(..., 10)` parameter vectors [kg, kg m, kg m^2].

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> pi = spatial.inertia_to_vector(spatial.mcI(2.0, jnp.array([0.0, 0.0, 1.0]), jnp.eye(3)))
        >>> pi.tolist()
        [2.0, 0.0, 0.0, 2.0, 3.0, 0.0, 3.0, 0.0, 0.0, 1.0]
    """
    A, B, C, D = _split(_float("I", I, (6, 6), "inertia_to_vector"))
    m = (D[..., 0, 0] + D[..., 1, 1] + D[..., 2, 2]) / 3.0
    h = _vee(0.5 * (B + _mT(C)))
    return jnp.concatenate([m[..., None], h, _sym_to_vec(_sym(A))], axis=-1)


def inertia_from_vector(pi: Real[ArrayLike, "... 10"]) -> Float[Array, "... 6 6"]:
    """6x6 spatial inertia ``[[I_O, h×], [h×ᵀ, m 1]]`` from its compact form.

    Args:
        pi: ``[m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` about the frame origin,
            `(..., 10)`; see `inertia_to_vector`.

    Returns:
        `(..., 6, 6)` spatial inertias.

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> pi = jnp.array([2.0, 0.0, 0.0, 2.0, 3.0, 0.0, 3.0, 0.0, 0.0, 1.0])
        >>> bool(jnp.allclose(spatial.inertia_from_vector(pi),
        ...                   spatial.mcI(2.0, jnp.array([0.0, 0.0, 1.0]), jnp.eye(3))))
        True
    """
    pi = _float("pi", pi, (10,), "inertia_from_vector")
    H = _skew(pi[..., 1:4])
    return _blocks(
        _vec_to_sym(pi[..., 4:]), H, _mT(H), pi[..., 0, None, None] * _eye3(pi[..., 1:4])
    )


def inertia_mul(
    I: Real[ArrayLike, "... 6 6"] | Real[ArrayLike, "... 10"], v: Real[ArrayLike, "... 6"]
) -> Float[Array, "... 6"]:
    """Spatial inertia times motion vector, ``I v`` (momentum or ``I a`` force).

    With a compact ``(..., 10)`` inertia no 6x6 is built:
    ``I v = [I_O ω + h × v_O; m v_O - h × ω]``.

    Args:
        I: spatial inertias, `(..., 6, 6)`, or compact `(..., 10)` (see
            `inertia_to_vector`), in the coordinates of ``v``.
        v: motion vectors ``[ω; v_O]``, `(..., 6)`.

    Returns:
        `(..., 6)` force vectors [N m s; N s] (or [N m; N] for accelerations).

    Example:
        >>> import jax.numpy as jnp
        >>> from jaxrbd import spatial
        >>> pi = spatial.mcI_to_vector(2.0, jnp.array([0.0, 0.0, 1.0]), jnp.eye(3))
        >>> spatial.inertia_mul(pi, jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0])).tolist()
        [0.0, 2.0, 0.0, 2.0, 0.0, 0.0]
    """
    I, compact = _inertia_arg("inertia_mul", I)
    I, v = _broadcast(
        "inertia_mul",
        ("I", I, 1 if compact else 2),
        ("v", _float("v", v, (6,), "inertia_mul"), 1),
    )
    if not compact:
        return _mv(I, v)
    return _bt(al.inertia_mul, I, v)


# --------------------------------------------------------------------------- rotations


def quat_to_rotation(q: Real[ArrayLike, "... 4"]) -> Float[Array, "... 3 3"]:
    """Rotation matrix of a quaternion ``(w, x, y, z)``, robotics convention.

    ``R`` maps body coordinates to world (parent) coordinates; its transpose is the ``E``
    of a Plücker transform. ``q`` need not be normalised (``R`` is that of ``q / |q|``).
    A zero quaternion names no rotation and gives NaN, as in every algorithm of jaxrbd
    (see the conventions page).

    Args:
        q: quaternions ``(w, x, y, z)``, `(..., 4)`.

    Returns:
        `(..., 3, 3)` rotation matrices.

    Example:
        >>> import numpy as np
        >>> from jaxrbd import spatial
        >>> q = np.array([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)])  # 90 deg about z
        >>> np.round(np.asarray(spatial.quat_to_rotation(q), float), 6).tolist()
        [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    return _bt(_rotation.quat_to_R, _float("q", q, (4,), "quat_to_rotation"))


def rotation_to_quat(R: Real[ArrayLike, "... 3 3"]) -> Float[Array, "... 4"]:
    """Unit quaternion ``(w, x, y, z)`` with ``w >= 0`` of a rotation matrix.

    Shepperd's method: of the four candidate formulas the one with the largest pivot
    (``4 w²``, ``4 x²``, ``4 y²`` or ``4 z²``, at least 1) is used, so the result is
    accurate and differentiable everywhere, including at 180-degree rotations.

    Args:
        R: rotation matrices (robotics convention), `(..., 3, 3)`.

    Returns:
        `(..., 4)` unit quaternions with ``quat_to_rotation(q) == R``.

    Example:
        >>> import numpy as np
        >>> from jaxrbd import spatial
        >>> R = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
        >>> np.round(np.asarray(spatial.rotation_to_quat(R), float), 6).tolist()
        [0.707107, 0.0, 0.0, 0.707107]
    """
    R = _float("R", R, (3, 3), "rotation_to_quat")
    r00, r01, r02 = R[..., 0, 0], R[..., 0, 1], R[..., 0, 2]
    r10, r11, r12 = R[..., 1, 0], R[..., 1, 1], R[..., 1, 2]
    r20, r21, r22 = R[..., 2, 0], R[..., 2, 1], R[..., 2, 2]
    t = jnp.stack(
        [
            1.0 + r00 + r11 + r22,
            1.0 + r00 - r11 - r22,
            1.0 - r00 + r11 - r22,
            1.0 - r00 - r11 + r22,
        ],
        axis=-1,
    )
    # Row k is 4 q_k q (q_k the pivot component), unnormalised.
    cand = jnp.stack(
        [
            jnp.stack([t[..., 0], r21 - r12, r02 - r20, r10 - r01], -1),
            jnp.stack([r21 - r12, t[..., 1], r01 + r10, r02 + r20], -1),
            jnp.stack([r02 - r20, r01 + r10, t[..., 2], r12 + r21], -1),
            jnp.stack([r10 - r01, r02 + r20, r12 + r21, t[..., 3]], -1),
        ],
        axis=-2,
    )
    k = jnp.argmax(t, axis=-1)
    qk = jnp.take_along_axis(cand, k[..., None, None], axis=-2)[..., 0, :]
    tk = jnp.take_along_axis(t, k[..., None], axis=-1)
    # tk >= 1 for any rotation; the clamp only guards non-rotations against NaN.
    q = qk * (0.5 / jnp.sqrt(jnp.maximum(tk, jnp.finfo(R.dtype).eps)))
    return jnp.where(q[..., :1] < 0, -q, q)


def rpy_to_rotation(rpy: Real[ArrayLike, "... 3"]) -> Float[Array, "... 3 3"]:
    """Rotation matrix of URDF roll-pitch-yaw angles, ``R = Rz(yaw) Ry(pitch) Rx(roll)``.

    Args:
        rpy: ``(roll, pitch, yaw)`` [rad], `(..., 3)`, fixed-axis x, y, z rotations.

    Returns:
        `(..., 3, 3)` rotation matrices (child coordinates to parent coordinates).

    Example:
        >>> import numpy as np
        >>> from jaxrbd import spatial
        >>> R = spatial.rpy_to_rotation(np.array([0.0, 0.0, np.pi / 2]))
        >>> np.round(np.asarray(R, float), 6).tolist()
        [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    rpy = _float("rpy", rpy, (3,), "rpy_to_rotation")
    cr, cp, cy = jnp.cos(rpy[..., 0]), jnp.cos(rpy[..., 1]), jnp.cos(rpy[..., 2])
    sr, sp, sy = jnp.sin(rpy[..., 0]), jnp.sin(rpy[..., 1]), jnp.sin(rpy[..., 2])
    return jnp.stack(
        [
            jnp.stack([cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr], -1),
            jnp.stack([sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr], -1),
            jnp.stack([-sp, cp * sr, cp * cr], -1),
        ],
        -2,
    )
