"""The public dynamics functions and their JVP rules, on the kernels of `jaxrbd._aba`,
`jaxrbd._rnea` and `jaxrbd._crba`.

Each public function here is a door (`jaxrbd._core.checks.door`): it opens the named
scope ``jaxrbd.<name>``, checks the state and picks the derivative rule; the recursions
themselves are the kernels'. The coupled variants are in `jaxrbd._coupled`, and
`jaxrbd._api` chooses between the two.

`forward_dynamics`, `inverse_dynamics` (so `bias_forces` and `gravity_forces`),
`mass_matrix` and `minv_times` are differentiated by `jax.custom_jvp` rules whose
tangents come from the matrices of `jaxrbd._derivatives` (Carpentier & Mansard 2018)
instead of forward-mode AD through the recursions:

* ``q``: the coordinate tangent ``dq`` (R^nq) is mapped to the manifold tangent of the
  analytic derivatives (`tangent_of_coordinates`), then multiplied by ``d f / dq``;
* ``qd``, ``tau`` / ``qdd``: ``d f / dqd`` and ``H^-1`` / ``H`` times the tangent;
* ``f_ext``: the generalized force of the tangent (RNEA at rest without gravity, O(n),
  linear), through ``H^-1`` for forward dynamics;
* the model's leaves: forward-mode AD of the plain implementation in the model alone.

With a ``q`` or ``qd`` tangent the rules take the primal output (``qdd`` / ``tau``) from
the derivative pass, which solves for it anyway (`jaxrbd._derivatives._fdq` / ``_idq``):
the differentiated program holds no ABA or RNEA beside that pass, so it traces and
compiles less. Without such a tangent the primal comes from the plain recursion.

The derivative matrices depend on the primal point only, so under `jax.jacfwd` (a vmap
over tangents) they are computed once; the tangent parts are matrix products and linear
recursions, which JAX transposes for `jax.grad` / `jax.jacrev`. Symbolic zeros
(``defjvp(..., symbolic_zeros=True)``) skip the work of absent tangents. Second derivatives
differentiate through the rules (AD of the analytic derivative code).

``mass_matrix``: ``dH / dq`` along a tangent is the tangent derivative of
``H(q) e_j = RNEA(q, 0, e_j)`` without gravity, so one batched evaluation of the RNEA
derivatives at the ``nv`` unit accelerations gives the ``(nv, nv, nv)`` tensor
(O(nv^3) per primal point; O(nv^3) per tangent to contract). `minv_times` uses the same
identity per right-hand side: ``d(H^-1 b) = H^-1 (db - dH x)`` with
``dH x = d RNEA(q, 0, x) / dq`` (no gravity).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.custom_derivatives import SymbolicZero

from . import _derivatives as _d
from . import _kernel_rules as _kr
from ._aba import aba_single, minv_times_batched
from ._configuration import tangent_of_coordinates
from ._core import ffi
from ._core.checks import as_float, door
from ._core.linalg import cho_solve, cholesky
from ._crba import crba_single
from ._rnea import rnea_batched, rnea_single

__all__ = [
    "DERIVATIVES",
    "DERIVATIVE_MATRICES",
    "bias_forces",
    "check_derivatives",
    "forward_dynamics",
    "gravity_forces",
    "inverse_dynamics",
    "mass_matrix",
    "minv_times",
]

#: The `checkpoint_name` of the derivative matrices of the forward-dynamics rule: a
#: `jax.checkpoint` policy that saves only these (`jaxrbd._integrators`' RK4 stages)
#: keeps them and recomputes the cheap rest of a step in the backward pass.
DERIVATIVE_MATRICES = "jaxrbd.forward_dynamics_derivative_matrices"

#: The values of the ``derivatives=`` keyword of the public dynamics functions.
DERIVATIVES = ("analytic", "ad")


def check_derivatives(derivatives):
    """``derivatives`` if it is one of `DERIVATIVES`, else a ValueError naming it."""
    if not isinstance(derivatives, str) or derivatives not in DERIVATIVES:
        raise ValueError(f"derivatives {derivatives!r}, expected 'analytic' or 'ad'")
    return derivatives


# ------------------------------------------------------------------ helpers


def _zero(t):
    return t is None or isinstance(t, SymbolicZero)


def _precision(x):
    # float64 ignores the precision; float32 must not drop to TF32/bf16
    return "highest" if x.dtype == jnp.float32 else None


def _mv(A, x):
    return jnp.matmul(A, x, precision=_precision(A))


def _total(terms, like):
    """The sum of the non-None ``terms``; zeros like ``like`` when there are none."""
    terms = [t for t in terms if t is not None]
    if not terms:
        return jnp.zeros_like(like)
    return functools.reduce(jnp.add, terms)


def _model_tangent(model, dmodel):
    """``dmodel`` with its symbolic zeros made arrays, or None when every leaf is zero."""
    leaves = jax.tree_util.tree_leaves(dmodel, is_leaf=_zero)
    if all(_zero(t) for t in leaves):
        return None
    return jax.tree_util.tree_map(
        lambda t, p: jnp.zeros_like(p) if _zero(t) else t, dmodel, model, is_leaf=_zero
    )


def _model_jvp(f, model, dmodel):
    """The tangent of ``f(model)`` along ``dmodel`` by forward-mode AD (None if zero)."""
    dm = _model_tangent(model, dmodel)
    return None if dm is None else jax.jvp(f, (model,), (dm,))[1]


def _fext_tau(model, q, df):
    """``ID(q, 0, 0, df)`` without gravity: minus the generalized force of ``df``, linear."""
    z = jnp.zeros((model.nv, 1), q.dtype)
    return rnea_batched(model, q[:, None], z, z, df[..., None], gravity=False)[:, 0]


def _minv_dense(model, q):
    return minv_times_batched(model, q[:, None], jnp.eye(model.nv, dtype=q.dtype))


def _no_gravity(model):
    return eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))


def _dHx(model, q, x):
    """``d (H(q) x_k) / d(q tangent)`` for the columns ``x_k`` of ``x (nv, K)``: ``(K, nv, nv)``.

    ``H(q) x = RNEA(q, 0, x)`` without gravity (armature does not depend on ``q``), so it is
    the analytic ``d tau / dq`` of that RNEA, batched over the ``K`` columns.
    """
    m0 = _no_gravity(model)
    zero = jnp.zeros((model.nv,), q.dtype)
    return jax.vmap(lambda xk: _d.inverse_dynamics_derivatives(m0, q, zero, xk)[0], in_axes=1)(x)


# ------------------------------------------------------------------ AD paths (primal)


def forward_dynamics_ad(model, q, qd, tau, f_ext, method):
    """`jaxrbd.forward_dynamics` for checked arguments, differentiated by AD."""
    if method == "crba":
        H = mass_matrix_ad(model, q)
        C = inverse_dynamics_ad(model, q, qd, jnp.zeros_like(qd), f_ext)
        return cho_solve(cholesky(H), tau - C)
    return aba_single(model, q, qd, tau, f_ext)


def inverse_dynamics_ad(model, q, qd, qdd, f_ext):
    """`jaxrbd.inverse_dynamics` for checked arguments, differentiated by AD."""
    return rnea_single(model, q, qd, qdd, f_ext)


def mass_matrix_ad(model, q):
    """`jaxrbd.mass_matrix` for a checked ``q``, differentiated by AD."""
    return crba_single(model, q)


def minv_times_ad(model, q, tau):
    """``H(q)^-1 tau`` for a checked ``q`` and ``tau (nv, K)``, differentiated by AD."""
    return minv_times_batched(model, q[:, None], tau)


# ------------------------------------------------------------------ forward dynamics


def _array(t, like):
    return jnp.zeros_like(like) if _zero(t) else t


def _model_arrays(model, dmodel):
    """`_model_tangent`, with zeros like ``model`` where every leaf is zero."""
    dm = _model_tangent(model, dmodel)
    return jax.tree_util.tree_map(jnp.zeros_like, model) if dm is None else dm


def _fd_jvp(method, primals, tangents):
    model, q, qd, tau, f_ext = primals
    dmodel, dq, dqd, dtau, df = tangents
    if ffi.supported(model, q, f_ext):  # one state on the native kernels
        qdd, aux = _kr.fd_primal(model, q, qd, tau)
        return qdd, _kr.fd_tangent(model, q, qd, qdd, aux, _model_arrays(model, dmodel),
                                   _array(dq, q), _array(dqd, qd), _array(dtau, tau))
    rhs = [None if _zero(dtau) else dtau,
           None if f_ext is None or _zero(df) else -_fext_tau(model, q, df)]
    rhs = None if all(r is None for r in rhs) else _total(rhs, tau)
    terms = []
    if not (_zero(dq) and _zero(dqd)):
        # the derivative pass solves for qdd itself: no ABA beside it in the program
        qdd, Jq, Jv, Minv = _d._fdq(model, q, qd, tau, f_ext)
        Jq, Jv, Minv = (checkpoint_name(x, DERIVATIVE_MATRICES) for x in (Jq, Jv, Minv))
        if not _zero(dq):
            terms.append(_mv(Jq, tangent_of_coordinates(model, q, dq)))
        if not _zero(dqd):
            terms.append(_mv(Jv, dqd))
    else:
        qdd = forward_dynamics_ad(model, q, qd, tau, f_ext, method)
        if rhs is not None:
            Minv = _minv_dense(model, q)
    if rhs is not None:
        terms.append(_mv(Minv, rhs))
    terms.append(_model_jvp(lambda m: forward_dynamics_ad(m, q, qd, tau, f_ext, method),
                            model, dmodel))
    return qdd, _total(terms, qdd)


def _make_fd(method):
    @jax.custom_jvp
    def fd(model, q, qd, tau, f_ext):
        return forward_dynamics_ad(model, q, qd, tau, f_ext, method)

    fd.defjvp(functools.partial(_fd_jvp, method), symbolic_zeros=True)
    return fd


_FD = {method: _make_fd(method) for method in ("aba", "crba")}


def forward_dynamics_rule(model, q, qd, tau, f_ext, method):
    """`jaxrbd.forward_dynamics` for checked arguments, with the analytic JVP rule."""
    return _FD[method](model, q, qd, tau, f_ext)


# ------------------------------------------------------------------ inverse dynamics


@jax.custom_jvp
def _id(model, q, qd, qdd, f_ext):
    return inverse_dynamics_ad(model, q, qd, qdd, f_ext)


@functools.partial(_id.defjvp, symbolic_zeros=True)
def _id_jvp(primals, tangents):
    model, q, qd, qdd, f_ext = primals
    dmodel, dq, dqd, dqdd, df = tangents
    if ffi.supported(model, q, f_ext):  # one state on the native kernels
        tau = inverse_dynamics_ad(model, q, qd, qdd, f_ext)
        return tau, _kr.id_tangent(model, q, qd, qdd, _model_arrays(model, dmodel),
                                   _array(dq, q), _array(dqd, qd), _array(dqdd, qdd))
    terms = []
    if not (_zero(dq) and _zero(dqd)):
        # the derivative pass gives tau too: no RNEA beside it in the program
        tau, Jq, Jv, H = _d._idq(model, q, qd, qdd, f_ext)
        if not _zero(dq):
            terms.append(_mv(Jq, tangent_of_coordinates(model, q, dq)))
        if not _zero(dqd):
            terms.append(_mv(Jv, dqd))
    else:
        tau = inverse_dynamics_ad(model, q, qd, qdd, f_ext)
        if not _zero(dqdd):
            H = crba_single(model, q)
    if not _zero(dqdd):
        terms.append(_mv(H, dqdd))
    if f_ext is not None and not _zero(df):
        terms.append(_fext_tau(model, q, df))
    terms.append(_model_jvp(lambda m: inverse_dynamics_ad(m, q, qd, qdd, f_ext), model, dmodel))
    return tau, _total(terms, tau)


def inverse_dynamics_rule(model, q, qd, qdd, f_ext):
    """`jaxrbd.inverse_dynamics` for checked arguments, with the analytic JVP rule."""
    return _id(model, q, qd, qdd, f_ext)


# ------------------------------------------------------------------ mass matrix


@jax.custom_jvp
def _mm(model, q):
    return mass_matrix_ad(model, q)


@functools.partial(_mm.defjvp, symbolic_zeros=True)
def _mm_jvp(primals, tangents):
    model, q = primals
    dmodel, dq = tangents
    H = mass_matrix_ad(model, q)
    terms = []
    if not _zero(dq):
        # G[j, i, k] = d H[i, j] / d(tangent k): the columns H e_j differentiated
        G = _dHx(model, q, jnp.eye(model.nv, dtype=q.dtype))
        dH = jnp.einsum("jik,k->ij", G, tangent_of_coordinates(model, q, dq),
                        precision=_precision(G))
        terms.append(0.5 * (dH + dH.T))  # symmetric up to rounding; make it exact
    terms.append(_model_jvp(lambda m: mass_matrix_ad(m, q), model, dmodel))
    return H, _total(terms, H)


def mass_matrix_rule(model, q):
    """`jaxrbd.mass_matrix` for a checked ``q``, with the analytic JVP rule."""
    return _mm(model, q)


# ------------------------------------------------------------------ H^-1 times


@jax.custom_jvp
def _minv(model, q, tau):
    return minv_times_ad(model, q, tau)


@functools.partial(_minv.defjvp, symbolic_zeros=True)
def _minv_jvp(primals, tangents):
    model, q, tau = primals
    dmodel, dq, dtau = tangents
    x = minv_times_ad(model, q, tau)
    rhs = []
    if not _zero(dtau):
        rhs.append(dtau)
    if not _zero(dq):
        Gx = _dHx(model, q, x)  # (K, nv, nv)
        t = tangent_of_coordinates(model, q, dq)
        rhs.append(-jnp.einsum("kij,j->ik", Gx, t, precision=_precision(Gx)))
    terms = []
    if rhs:
        terms.append(_mv(_minv_dense(model, q), _total(rhs, tau)))
    terms.append(_model_jvp(lambda m: minv_times_ad(m, q, tau), model, dmodel))
    return x, _total(terms, x)


def minv_times_rule(model, q, tau):
    """``H(q)^-1 tau`` for a checked ``q`` and ``tau (nv, K)``, with the analytic JVP rule."""
    return _minv(model, q, tau)


def bias_forces_rule(model, q, qd):
    """`jaxrbd.bias_forces` (no ``f_ext``) for checked ``q``, ``qd``, with the analytic
    JVP rule."""
    return inverse_dynamics_rule(model, q, qd, jnp.zeros_like(qd), None)


# ------------------------------------------------------------------ the doors


def _inverse_dynamics(model, q, qd, qdd, f_ext, derivatives):
    """RNEA for checked arguments, by the rule ``derivatives`` names."""
    if check_derivatives(derivatives) == "analytic":
        return inverse_dynamics_rule(model, q, qd, qdd, f_ext)
    return rnea_single(model, q, qd, qdd, f_ext)


@door("q", "qd", "tau", f_ext=True)
def forward_dynamics(model, q, qd, tau, f_ext=None, method="aba", *, derivatives="analytic"):
    """Joint accelerations, by the articulated-body algorithm in O(nbodies) (default).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; quaternion blocks need not be normalised.
        qd: velocities `(nv,)` [rad/s | m/s]; body coordinates for free joints.
        tau: generalized forces `(nv,)` [N m | N]; ``[n; f]`` in body coordinates for
            free joints.
        f_ext: optional `(nbodies, 6)` spatial forces in world coordinates at the world
            origin; row 0 is ignored.
        method: ``"aba"`` (articulated-body algorithm) or ``"crba"`` (mass matrix by
            the CRBA, then a Cholesky solve; O(n^3) but often as fast for small n).
        derivatives: how `jax.jvp`, `jax.grad`, `jax.jacfwd`, ... differentiate this
            call (either method): ``"analytic"`` (default), a JVP rule built on
            `forward_dynamics_derivatives` (Carpentier & Mansard 2018; model leaves by
            AD of the plain code); ``"ad"``, automatic differentiation through the
            recursions, kept for checking the rule. The value is the same.

    Returns:
        `qdd`, `(nv,)`, such that `inverse_dynamics(model, q, qd, qdd, f_ext) == tau`.

    Raises:
        ValueError: wrong shapes or an unknown method.

    Example:
        >>> qdd = jaxrbd.forward_dynamics(model, q, jnp.zeros(model.nv), tau)
    """
    if method not in ("aba", "crba"):
        raise ValueError(f"method {method!r}, expected 'aba' or 'crba'")
    if check_derivatives(derivatives) == "analytic":
        return forward_dynamics_rule(model, q, qd, tau, f_ext, method)
    return forward_dynamics_ad(model, q, qd, tau, f_ext, method)


@door("q")
def minv_times(model, q, tau, *, derivatives="analytic"):
    """``H(q)^-1 tau`` in O(n) per right-hand side, reusing the articulated inertias.

    RBDL's ``CalcMInvTimesTau``: one backward pass for the articulated inertias, then a
    bias pass and an acceleration pass (ABA with ``qd = 0`` and no gravity) for all
    right-hand sides together.

    Args:
        q: `(nq,)`.
        tau: `(nv,)` or `(nv, K)` (K right-hand sides).
        derivatives: ``"analytic"`` (default): JVPs as ``H^-1 (dtau - dH x)`` with
            ``dH x`` from the analytic RNEA derivatives; ``"ad"``: automatic
            differentiation through the passes (for checking). See `forward_dynamics`.

    Returns:
        ``H^-1 tau`` with the shape of `tau`.

    Example:
        >>> x = jaxrbd.minv_times(model, q, jnp.eye(model.nv))   # = inv(H)
    """
    tau = as_float("tau", tau, model.dtype)
    if tau.ndim not in (1, 2) or tau.shape[0] != model.nv:
        raise ValueError(
            f"tau has shape {tau.shape}, expected ({model.nv},) or ({model.nv}, K) "
            "= (model.nv,) or (model.nv, K)"
        )
    t2 = tau if tau.ndim == 2 else tau[:, None]
    if check_derivatives(derivatives) == "analytic":
        out = minv_times_rule(model, q, t2)
    else:
        out = minv_times_ad(model, q, t2)
    return out if tau.ndim == 2 else out[:, 0]


@door("q", "qd", "qdd", f_ext=True)
def inverse_dynamics(model, q, qd, qdd, f_ext=None, *, derivatives="analytic"):
    """Generalized forces by the recursive Newton-Euler algorithm, O(nbodies).

    Args:
        model: a `Model`.
        q: configuration `(nq,)`; quaternion blocks need not be normalised (they are
            normalised inside; a zero quaternion gives NaN).
        qd: velocities `(nv,)` [rad/s | m/s]; body coordinates for free joints.
        qdd: accelerations `(nv,)` [rad/s^2 | m/s^2], the time derivative of `qd`.
        f_ext: optional `(nbodies, 6)` spatial forces `[n; f]` on each body, in world
            coordinates at the world origin [N m; N]; row 0 (world) is ignored.
        derivatives: how `jax.jvp`, `jax.grad`, `jax.jacfwd`, ... differentiate this
            call: ``"analytic"`` (default), a JVP rule built on
            `inverse_dynamics_derivatives` (model leaves by AD of the plain code);
            ``"ad"``, automatic differentiation through the recursions, kept for
            checking the rule. The value is the same.

    Returns:
        `tau`, `(nv,)` [N m | N] with `H(q) qdd + C(q, qd) = tau` (+ the `f_ext` work).

    Raises:
        ValueError: an argument has the wrong shape (message names it).
        TypeError: an argument is not real-valued.

    Example:
        >>> model = jaxrbd.models.triple_pendulum()
        >>> tau = jaxrbd.inverse_dynamics(model, jnp.zeros(9), jnp.zeros(9), jnp.zeros(9))
        >>> tau.shape
        (9,)
    """
    return _inverse_dynamics(model, q, qd, qdd, f_ext, derivatives)


@door("q", "qd", f_ext=True)
def bias_forces(model, q, qd, f_ext=None, *, derivatives="analytic"):
    """Coriolis, centrifugal and gravity forces ``C(q, qd)``: `inverse_dynamics` at ``qdd = 0``.

    Args:
        q: `(nq,)`. qd: `(nv,)`. f_ext: optional `(nbodies, 6)`, world coordinates.
        derivatives: ``"analytic"`` (default) or ``"ad"``, as in `inverse_dynamics`.

    Returns:
        `C`, `(nv,)`, with `H qdd + C = tau`.

    Example:
        >>> C = jaxrbd.bias_forces(model, jnp.zeros(model.nq), jnp.ones(model.nv))
    """
    return _inverse_dynamics(model, q, qd, jnp.zeros_like(qd), f_ext, derivatives)


@door("q")
def gravity_forces(model, q, *, derivatives="analytic"):
    """Generalized gravity ``g(q)``: `inverse_dynamics` at ``qd = qdd = 0``.

    Args:
        q: `(nq,)`.
        derivatives: ``"analytic"`` (default) or ``"ad"``, as in `inverse_dynamics`.

    Returns:
        `g`, `(nv,)` [N m | N].

    Example:
        >>> g = jaxrbd.gravity_forces(model, jnp.zeros(model.nq))
    """
    z = jnp.zeros(model.nv, model.dtype)
    return _inverse_dynamics(model, q, z, z, None, derivatives)


@door("q")
def mass_matrix(model, q, *, derivatives="analytic"):
    """Joint-space inertia matrix ``H(q)`` by the composite-rigid-body algorithm.

    Args:
        model: a `Model`.
        q: configuration `(nq,)`.
        derivatives: how `jax.jvp`, `jax.grad`, ... differentiate this call:
            ``"analytic"`` (default), ``dH`` from the analytic RNEA derivatives of
            ``H e_j = inverse_dynamics(q, 0, e_j)`` without gravity (O(nv^3) per
            configuration; model leaves by AD); ``"ad"``, automatic differentiation
            through the CRBA, kept for checking. The value is the same.

    Returns:
        `H`, `(nv, nv)`, symmetric positive definite [kg m^2 | kg m | kg].

    Example:
        >>> H = jaxrbd.mass_matrix(model, jnp.zeros(model.nq))
        >>> H.shape == (model.nv, model.nv)
        True
    """
    if check_derivatives(derivatives) == "analytic":
        return mass_matrix_rule(model, q)
    return crba_single(model, q)
