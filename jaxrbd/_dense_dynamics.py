"""Forward dynamics of one state as ``H(q) qdd = tau - C(q, qd)``: the mass matrix by the
CRBA, the bias by the RNEA, one Cholesky factorisation and two triangular solves.

On one state every pass of the articulated-body algorithm is a sequence of level steps
(the backward inertia pass cannot be a product over a constant mask: each step divides
by the articulated inertia of the step before), whose kernels set the time, while the
RNEA and the CRBA run as dense products over the ancestor mask (`jaxrbd._core.dense`):
a few dozen kernels each, and the ``O(nv^3 / 3)`` factorisation is a single LAPACK call
(about 20 k flops for a humanoid's ``nv = 38``). `jaxrbd._core.backend.traversal` picks
the ``"dense"`` schedule for one state, and with it these functions
(`jaxrbd._aba.aba_batched`, `jaxrbd._aba.minv_times_batched`,
`jaxrbd._derivatives`): the same results to rounding.
"""

from __future__ import annotations

import jax.numpy as jnp

from ._core.linalg import cho_solve, cholesky, solve_triangular
from ._crba import crba_batched
from ._rnea import rnea_batched

__all__ = ["fd_dense", "inverse_factor", "minv_times_dense", "use_cholesky"]


def use_cholesky(s, dtype) -> bool:
    """Whether one state's dynamics go through ``H`` and its Cholesky factor: on a
    ``"dense"`` schedule in float64. In float32 the factorisation of a humanoid's ``H``
    loses about two more digits than the articulated-body recursion (relative error
    4e-5 against 1e-6 on talos, ``tests/test_float32.py``), so float32 keeps the ABA."""
    return bool(s.dense) and jnp.finfo(dtype).bits >= 64


def _mass_matrix(model, q):
    return crba_batched(model, q)[0]  # (nv, nv); q (nq, 1)


def fd_dense(model, q, qd, tau, f_ext=None):
    """``qdd (nv, 1)`` for one state on the batch-trailing layout (``q (nq, 1)``, ...)."""
    C = rnea_batched(model, q, qd, jnp.zeros_like(qd), f_ext)
    return cho_solve(cholesky(_mass_matrix(model, q)), tau - C)


def minv_times_dense(model, q, tau):
    """``H(q)^-1 tau`` for one ``q (nq, 1)`` and right-hand sides ``tau (nv, K)``."""
    return cho_solve(cholesky(_mass_matrix(model, q)), tau)


def inverse_factor(H):
    """``(L, W)``: the lower Cholesky factor of ``H (nv, nv)`` and ``W = L^-T``, so that
    ``H^-1 = W W^T``."""
    L = cholesky(H)
    eye = jnp.eye(H.shape[-1], dtype=H.dtype)
    return L, solve_triangular(L, eye, True, True)
