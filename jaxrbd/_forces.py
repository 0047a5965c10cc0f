"""Force elements: springs, dampers, drives, friction, polyline spring-dampers, user forces.

MBSlib's *generators* (Wojtusch et al. 2016, §II): elements that produce generalized forces from the
state and time, to be added to the joint forces ``tau``. Every element is an immutable
equinox Module and a callable

    ``element(model, q, qd, t=0.0) -> (nv,)``

Which joints or bodies an element acts on is static structure (names or ids, resolved
against the model at trace time); its constants (stiffnesses, damping, rest values,
attachment points) are array leaves, so `jax.grad` differentiates with respect to them and
`jax.vmap` batches over them (construct the element inside the mapped function, or map
over a stacked element). `generalized_forces` sums a sequence of elements and
`elastic_potential_energy` sums the energy they store.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._api import difference, inverse_dynamics, point_jacobian, point_position
from ._core.checks import as_float, check_state, check_vector
from ._coupling import dispatch
from ._kinematics import resolve_bodies
from ._model import check_model

__all__ = [
    "AbstractForceElement",
    "JointDamper",
    "JointFriction",
    "JointSpring",
    "PassiveJointForces",
    "PointToPointSpringDamper",
    "SpringDamperDrive",
    "UserForce",
    "elastic_potential_energy",
    "generalized_forces",
    "passive_forces",
]


# ---------------------------------------------------------------- construction helpers


def _concrete(x):
    """``x`` as numpy, or ``None`` when it is traced (value checks only when known)."""
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _floating(name: str, x):
    """``x`` as an array: floating arrays keep their dtype, anything else numeric gets
    JAX's default float dtype; a TypeError names ``name`` otherwise."""
    try:
        dtype = jnp.asarray(x).dtype
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(float)
    return as_float(name, x, dtype)


def _leaf(name: str, x, shapes: tuple[tuple[int, ...], ...], what: str):
    """A constant as a floating array leaf with one of the allowed ``shapes``.

    Python numbers and integer arrays become JAX's default float dtype; floating arrays
    (and tracers) keep theirs. Algorithms cast to the model dtype at call time.
    """
    if callable(x) and not isinstance(x, (jax.Array, np.ndarray)):
        raise TypeError(f"{name} must be an array of numbers, got the callable {x!r}")
    x = _floating(name, x)
    if x.shape not in shapes:
        raise ValueError(f"{name} has shape {x.shape}, expected {what}")
    value = _concrete(x)
    if value is not None and not np.all(np.isfinite(value)):
        raise ValueError(f"{name} has non-finite values {value.tolist()}")
    return x


def _per_joint(name: str, x, n: int):
    return _leaf(name, x, ((), (n,)), f"() or ({n},) (a scalar or one value per joint)")


def _scalar(name: str, x):
    return _leaf(name, x, ((),), "() (a scalar)")


def _check_positive(name: str, x):
    value = _concrete(x)
    if value is not None and not np.all(value > 0):
        raise ValueError(f"{name} is {value.tolist()}, expected values > 0")


def _joint_list(joints) -> tuple[str | int, ...]:
    """``joints`` (a name, an index, or a sequence of them) -> a static tuple."""
    if isinstance(joints, (str, int, np.integer)) and not isinstance(joints, bool):
        joints = (joints,)
    if isinstance(joints, (jax.Array, np.ndarray)):
        if isinstance(joints, jax.Array) or not np.issubdtype(joints.dtype, np.integer):
            raise TypeError(
                "joints must be joint names or int indices (static), got an array of "
                f"dtype {joints.dtype}"
            )
        joints = joints.tolist()
    if not isinstance(joints, Sequence) or isinstance(joints, bytes):
        raise TypeError(
            f"joints must be a joint name, an int index or a sequence of them, got {joints!r}"
        )
    out = []
    for j in joints:
        if isinstance(j, str):
            out.append(j)
        elif isinstance(j, (int, np.integer)) and not isinstance(j, bool):
            out.append(int(j))
        else:
            raise TypeError(f"joints entries must be names or int indices, got {j!r}")
    if not out:
        raise ValueError("joints is empty, expected at least one joint")
    return tuple(out)


def _joint_indices(model, joints: tuple[str | int, ...], who: str):
    """Static ``q`` and ``v`` indices of 1-DoF joints given by name or by index in
    ``model.joint_names``."""
    names = model.joint_names
    qi, vi = [], []
    for j in joints:
        if isinstance(j, int):
            if not 0 <= j < len(names):
                raise ValueError(
                    f"{who}: joint index {j} out of range, the model has {len(names)} movable "
                    "joints (indices into model.joint_names)"
                )
            j = names[j]
        elif j not in names:
            raise ValueError(
                f"{who}: unknown joint {j!r}; movable joints: {', '.join(names)}"
            )
        qs, vs = model.q_index(j), model.v_index(j)
        if qs.stop - qs.start != 1 or vs.stop - vs.start != 1:
            body = model.movable_joint_bodies[names.index(j)]
            raise ValueError(
                f"{who}: joint {j!r} is a {model.joint_label[body]} joint with "
                f"nq = {qs.stop - qs.start}, nv = {vs.stop - vs.start}; joint force elements "
                "act on 1-DoF joints only (revolute, prismatic, helical, one-column custom)"
            )
        qi.append(qs.start)
        vi.append(vs.start)
    return np.asarray(qi), np.asarray(vi)


def _time(model, t):
    t = as_float("t", t, model.dtype)
    if t.shape != ():
        raise ValueError(f"t has shape {t.shape}, expected a scalar () [s]")
    return t


def _cast(model, x, n):
    """A per-joint constant in the model dtype, broadcast to ``(n,)``."""
    x = jnp.asarray(x, model.dtype)
    if x.shape not in ((), (n,)):
        raise ValueError(f"a constant has shape {x.shape}, expected () or ({n},)")
    return jnp.broadcast_to(x, (n,))


class _Static(eqx.Module):
    """A plain function kept as static structure (a pytree without leaves)."""

    fn: Callable = eqx.field(static=True)

    def __call__(self, *args):
        return self.fn(*args)


def _wrap_callable(name: str, fn):
    """``fn`` as a pytree: a pytree callable (an equinox Module, `jax.tree_util.Partial`)
    keeps its leaves (differentiable); a plain function becomes static."""
    if not callable(fn):
        raise TypeError(f"{name} is a {type(fn).__name__}, expected a callable")
    leaves = jax.tree_util.tree_leaves(fn)
    if len(leaves) == 1 and leaves[0] is fn:
        return _Static(fn)
    return fn


def _scatter(model, vi, values):
    """``(n,)`` joint values -> ``(nv,)`` generalized forces (repeated joints add up)."""
    return jnp.zeros(model.nv, model.dtype).at[vi].add(values)


# ---------------------------------------------------------------- the element protocol


class AbstractForceElement(eqx.Module):
    """Base class of force elements: ``element(model, q, qd, t=0.0) -> (nv,)``.

    A subclass implements `forces` (and `energy`, the potential energy it stores: zero for
    purely dissipative elements) on checked arrays in the model dtype; calling the element
    checks the arguments first. Its constants should be array leaves and its structure
    static fields.
    """

    @abc.abstractmethod
    def forces(self, model, q, qd, t):
        """Generalized forces `(nv,)` for checked ``q (nq,)``, ``qd (nv,)``, scalar ``t``."""

    @abc.abstractmethod
    def energy(self, model, q, t):
        """Stored potential energy ``()`` [J] for checked ``q (nq,)`` and scalar ``t``."""

    def __call__(self, model, q, qd, t=0.0):
        """Generalized forces of the element, to be added to ``tau``.

        Args:
            model: a `Model`.
            q: configuration `(nq,)`.
            qd: velocities `(nv,)` [rad/s | m/s].
            t: time [s], a scalar (used by time-dependent elements only).

        Returns:
            `(nv,)` generalized forces [N·m | N].
        """
        with jax.named_scope(f"jaxrbd.{type(self).__name__}"):
            q, qd = check_state(model, q=q, qd=qd)
            return self.forces(model, q, qd, _time(model, t))

    def potential_energy(self, model, q, t=0.0):
        """Potential energy stored in the element [J], a scalar; zero for dampers and
        friction. Its gradient is minus the element's conservative generalized force."""
        with jax.named_scope(f"jaxrbd.{type(self).__name__}.potential_energy"):
            (q,) = check_state(model, q=q)
            return self.energy(model, q, _time(model, t))


# ---------------------------------------------------------------- joint elements


class JointSpring(AbstractForceElement):
    """Linear springs on 1-DoF joints: ``tau_j = -k_j (q_j - rest_j)``.

    Args:
        joints: joint names or indices into ``model.joint_names`` (static); 1-DoF joints
            only (revolute, prismatic, helical, one-column custom).
        stiffness: `()` or `(n,)` per joint [N·m/rad | N/m].
        rest: rest positions `()` or `(n,)` [rad | m], default 0.

    Potential energy ``½ Σ k_j (q_j - rest_j)²``.

    Example:
        >>> chain = jaxrbd.models.chain(3)
        >>> spring = jaxrbd.JointSpring(["link0", "link2"], stiffness=jnp.array([10.0, 20.0]))
        >>> spring(chain, jnp.array([0.1, 0.2, 0.3]), jnp.zeros(3))
        Array([-1., 0., -6.], dtype=float64)
    """

    stiffness: jax.Array
    rest: jax.Array
    joints: tuple[str | int, ...] = eqx.field(static=True)

    def __init__(self, joints, stiffness, rest=0.0):
        self.joints = _joint_list(joints)
        self.stiffness = _per_joint("stiffness", stiffness, len(self.joints))
        self.rest = _per_joint("rest", rest, len(self.joints))

    def _deflection(self, model, q):
        qi, vi = _joint_indices(model, self.joints, "JointSpring")
        n = len(qi)
        return vi, _cast(model, self.stiffness, n), q[qi] - _cast(model, self.rest, n)

    def forces(self, model, q, qd, t):
        vi, k, dq = self._deflection(model, q)
        return _scatter(model, vi, -k * dq)

    def energy(self, model, q, t):
        _, k, dq = self._deflection(model, q)
        return 0.5 * jnp.sum(k * dq * dq)


class JointDamper(AbstractForceElement):
    """Linear (viscous) dampers on 1-DoF joints: ``tau_j = -d_j qd_j``.

    Args:
        joints: joint names or indices into ``model.joint_names`` (static), 1-DoF joints.
        damping: `()` or `(n,)` per joint [N·m·s/rad | N·s/m]; ``d >= 0`` dissipates
            ``Σ d_j qd_j²`` watts.

    Example:
        >>> chain = jaxrbd.models.chain(3)
        >>> jaxrbd.JointDamper([0, 1], damping=0.5)(chain, jnp.zeros(3), jnp.array([1.0, 2.0, 3.0]))
        Array([-0.5, -1. , 0. ], dtype=float64)
    """

    damping: jax.Array
    joints: tuple[str | int, ...] = eqx.field(static=True)

    def __init__(self, joints, damping):
        self.joints = _joint_list(joints)
        self.damping = _per_joint("damping", damping, len(self.joints))

    def forces(self, model, q, qd, t):
        _, vi = _joint_indices(model, self.joints, "JointDamper")
        return _scatter(model, vi, -_cast(model, self.damping, len(vi)) * qd[vi])

    def energy(self, model, q, t):
        return jnp.zeros((), model.dtype)


class SpringDamperDrive(AbstractForceElement):
    """MBSlib's spring-damper drives: a motor position ``r(t)`` in series with a
    spring and a damper on each 1-DoF joint (an elastic actuator):

        ``tau_j = k_j (r_j(t) - q_j) + d_j (ṙ_j(t) - qd_j)``.

    With the default ``reference = 0`` it is MBSlib's *passive* spring-damper drive
    (``-k q - d qd``); with a time function it is the *active* drive.

    Args:
        joints: joint names or indices into ``model.joint_names`` (static), 1-DoF joints.
        stiffness: `()` or `(n,)` [N·m/rad | N/m].
        damping: `()` or `(n,)` [N·m·s/rad | N·s/m].
        reference: motor positions [rad | m]: constants `()`/`(n,)`, or a callable
            ``r(t) -> ()`` or `(n,)` of the time ``t`` [s]. A pytree callable (an equinox
            Module, `jax.tree_util.Partial`) keeps its arrays as differentiable leaves.
        reference_velocity: motor velocities ``ṙ`` [rad/s | m/s], constants or a callable
            of ``t``; default: ``d r/dt`` by forward-mode differentiation of a callable
            `reference`, zero for a constant one.

    Potential energy (the springs' elastic energy at time ``t``) ``½ Σ k_j (q_j - r_j(t))²``.

    Example:
        >>> chain = jaxrbd.models.chain(3)
        >>> drive = jaxrbd.SpringDamperDrive("link1", 100.0, 2.0, reference=jnp.sin)
        >>> drive(chain, jnp.zeros(3), jnp.zeros(3), t=0.0)  # r = 0, dr/dt = cos(0) = 1
        Array([0., 2., 0.], dtype=float64)
    """

    stiffness: jax.Array
    damping: jax.Array
    reference: jax.Array | Callable
    reference_velocity: jax.Array | Callable | None
    joints: tuple[str | int, ...] = eqx.field(static=True)

    def __init__(self, joints, stiffness, damping, reference=0.0, reference_velocity=None):
        self.joints = _joint_list(joints)
        n = len(self.joints)
        self.stiffness = _per_joint("stiffness", stiffness, n)
        self.damping = _per_joint("damping", damping, n)
        if callable(reference) and not isinstance(reference, (jax.Array, np.ndarray)):
            self.reference = _wrap_callable("reference", reference)
        else:
            self.reference = _per_joint("reference", reference, n)
        if reference_velocity is None:
            self.reference_velocity = None
        elif callable(reference_velocity) and not isinstance(
            reference_velocity, (jax.Array, np.ndarray)
        ):
            self.reference_velocity = _wrap_callable("reference_velocity", reference_velocity)
        else:
            self.reference_velocity = _per_joint("reference_velocity", reference_velocity, n)

    def _value(self, model, fn, t, n, name):
        out = as_float(f"{name}(t)", fn(t), model.dtype)
        if out.shape not in ((), (n,)):
            raise ValueError(f"{name}(t) returned shape {out.shape}, expected () or ({n},)")
        return jnp.broadcast_to(out, (n,))

    def motor(self, model, t=0.0):
        """Motor positions and velocities ``(r(t), ṙ(t))``, each `(n,)`, at time ``t``."""
        t = _time(model, t)
        n = len(self.joints)
        if callable(self.reference):
            if self.reference_velocity is None:
                r, rd = jax.jvp(
                    lambda s: self._value(model, self.reference, s, n, "reference"),
                    (t,),
                    (jnp.ones((), model.dtype),),
                )
                return r, rd
            r = self._value(model, self.reference, t, n, "reference")
        else:
            r = _cast(model, self.reference, n)
        if self.reference_velocity is None:
            rd = jnp.zeros(n, model.dtype)
        elif callable(self.reference_velocity):
            rd = self._value(model, self.reference_velocity, t, n, "reference_velocity")
        else:
            rd = _cast(model, self.reference_velocity, n)
        return r, rd

    def forces(self, model, q, qd, t):
        qi, vi = _joint_indices(model, self.joints, "SpringDamperDrive")
        n = len(qi)
        r, rd = self.motor(model, t)
        k, d = _cast(model, self.stiffness, n), _cast(model, self.damping, n)
        return _scatter(model, vi, k * (r - q[qi]) + d * (rd - qd[vi]))

    def energy(self, model, q, t):
        qi, _ = _joint_indices(model, self.joints, "SpringDamperDrive")
        r, _ = self.motor(model, t)
        dq = q[qi] - r
        return 0.5 * jnp.sum(_cast(model, self.stiffness, len(qi)) * dq * dq)


class JointFriction(AbstractForceElement):
    """Viscous and smooth Coulomb friction on 1-DoF joints:

        ``tau_j = -b_j qd_j - c_j tanh(qd_j / eps_j)``.

    ``tanh`` replaces ``sign`` so the force is smooth (differentiable, integrable by
    explicit methods); it reaches 76 % of the Coulomb level at ``|qd| = eps`` and
    99.9 % at ``4 eps``. Small ``eps`` is closer to dry friction but makes the equations
    stiff near ``qd = 0`` (stable explicit steps need ``dt ≲ eps · inertia / c``).

    Args:
        joints: joint names or indices into ``model.joint_names`` (static), 1-DoF joints.
        viscous: ``b``, `()` or `(n,)` [N·m·s/rad | N·s/m], default 0.
        coulomb: ``c``, `()` or `(n,)` [N·m | N], default 0.
        smoothing: ``eps > 0``, `()` or `(n,)` [rad/s | m/s], default 0.01.

    Example:
        >>> chain = jaxrbd.models.chain(3)
        >>> fr = jaxrbd.JointFriction("link0", viscous=0.1, coulomb=2.0, smoothing=1e-3)
        >>> fr(chain, jnp.zeros(3), jnp.array([1.0, 0.0, 0.0]))
        Array([-2.1, 0. , 0. ], dtype=float64)
    """

    viscous: jax.Array
    coulomb: jax.Array
    smoothing: jax.Array
    joints: tuple[str | int, ...] = eqx.field(static=True)

    def __init__(self, joints, viscous=0.0, coulomb=0.0, smoothing=0.01):
        self.joints = _joint_list(joints)
        n = len(self.joints)
        self.viscous = _per_joint("viscous", viscous, n)
        self.coulomb = _per_joint("coulomb", coulomb, n)
        self.smoothing = _per_joint("smoothing", smoothing, n)
        _check_positive("smoothing", self.smoothing)

    def forces(self, model, q, qd, t):
        _, vi = _joint_indices(model, self.joints, "JointFriction")
        n = len(vi)
        w = qd[vi]
        b, c = _cast(model, self.viscous, n), _cast(model, self.coulomb, n)
        eps = _cast(model, self.smoothing, n)
        return _scatter(model, vi, -b * w - c * jnp.tanh(w / eps))

    def energy(self, model, q, t):
        return jnp.zeros((), model.dtype)


class PassiveJointForces(AbstractForceElement):
    """The joints' own passive forces, read from the model's leaves at every call:

        ``tau = -stiffness * difference(spring_reference, q) - damping * qd
        - friction * tanh(qd / smoothing)``

    on every DoF, multi-DoF joints included (the spring deflection of a ball or free joint
    is the tangent `jaxrbd.difference` from ``spring_reference`` to ``q``, as MuJoCo's
    ball-joint spring). The coefficients come from `Model.stiffness`,
    `Model.spring_reference`, `Model.damping` and `Model.friction` (filled by the URDF
    ``<dynamics>`` and the MJCF ``stiffness``, ``springref``, ``damping`` and
    ``frictionloss`` attributes), so gradients with respect to them flow through the
    model. Dry friction is smoothed by ``tanh`` (see `JointFriction`); MuJoCo solves it as
    a constraint instead, so the two agree away from ``qd = 0``. Build it with
    `passive_forces`.

    Potential energy ``½ Σ stiffness_k d_k²`` with ``d = difference(spring_reference, q)``.
    """

    smoothing: jax.Array

    def __init__(self, smoothing=0.01):
        self.smoothing = _scalar("smoothing", smoothing)
        _check_positive("smoothing", self.smoothing)

    def _deflection(self, model, q):

        return difference(model, model.spring_reference, q)

    def forces(self, model, q, qd, t):
        eps = jnp.asarray(self.smoothing, model.dtype)
        tau = (
            -model.stiffness * self._deflection(model, q)
            - model.damping * qd
            - model.friction * jnp.tanh(qd / eps)
        )
        # a model edited after passive_forces checked it: negative friction pushes
        return eqx.error_if(
            tau, jnp.any(model.friction < 0),
            "PassiveJointForces: Model.friction has negative entries; a Coulomb force "
            "needs friction >= 0",
        )

    def energy(self, model, q, t):
        d = self._deflection(model, q)
        return 0.5 * jnp.sum(model.stiffness * d * d)


@dispatch  # no coupled variant: a CoupledModel gets the shared error
def passive_forces(model, smoothing=0.01):
    """The model's joint springs, dampers and dry friction as force elements, in one call.

    Returns ``(PassiveJointForces(smoothing),)`` when any of `Model.stiffness`,
    `Model.damping` or `Model.friction` is non-zero, else ``()``: pass it as ``forces=``
    to `jaxrbd.rollout`, `jaxrbd.step` or `generalized_forces`.

    Args:
        model: a `Model` (its coefficients are read again at every call of the element,
            so one tuple serves every model of the same structure).
        smoothing: the ``tanh`` velocity scale of the dry friction [rad/s | m/s], > 0.

    Example:
        >>> forces = jaxrbd.passive_forces(model)   # the triple pendulum has none
        >>> forces
        ()
        >>> import equinox as eqx
        >>> damped = eqx.tree_at(lambda m: m.damping, model, jnp.full(model.nv, 0.5))
        >>> jaxrbd.generalized_forces(jaxrbd.passive_forces(damped), damped, q, jnp.ones(9))
        Array([-0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5], dtype=float64)
    """
    check_model(model)
    coefficients = (model.stiffness, model.damping, model.friction)
    try:
        active = any(bool(np.any(np.asarray(c) != 0)) for c in coefficients)
    except jax.errors.TracerArrayConversionError:
        active = True  # traced coefficients: keep the element, it is exact for zeros too
    friction = _concrete(model.friction)
    if friction is not None and np.any(friction < 0):
        raise ValueError(
            f"passive_forces: joints {_joints_of_dofs(model, np.flatnonzero(friction < 0))} "
            f"have negative dry friction {friction[friction < 0].tolist()} (an identified "
            "value?); a Coulomb force needs friction >= 0: set Model.friction of these "
            "joints to zero or to a physical value with eqx.tree_at"
        )
    return (PassiveJointForces(smoothing),) if active else ()


def _joints_of_dofs(model, dofs) -> list[str]:
    """The names of the joints owning velocity coordinates ``dofs``, in model order."""
    names = []
    for name in model.joint_names:
        s = model.v_index(name)
        if any(s.start <= d < s.stop for d in dofs):
            names.append(name)
    return names


# ---------------------------------------------------------------- polyline spring-damper


def _safe_norm(x):
    """Row norms of ``(K, 3)`` and unit vectors, finite values and gradients at 0."""
    n2 = jnp.sum(x * x, axis=-1)
    ok = n2 > jnp.finfo(x.dtype).eps ** 2
    n = jnp.where(ok, jnp.sqrt(jnp.where(ok, n2, 1.0)), 0.0)
    u = x / jnp.where(ok, n, 1.0)[:, None]
    return n, u


class PointToPointSpringDamper(AbstractForceElement):
    """A linear spring-damper along a polyline of points fixed on bodies (MBSlib's
    point-to-point generators; a tendon or cable routed over via points).

    Its length is the sum of the segment lengths, ``L = Σ_k |p_{k+1} - p_k|``, and its
    tension ``T = k (L - L0) + d dL/dt`` acts along every segment, pulling the points
    towards each other (a via point feels both adjacent segments). The generalized
    force is ``tau = -T (dL/dq)ᵀ = -T Σ_k (J_{k+1} - J_k)ᵀ u_k`` with ``u_k`` the unit
    vector of segment ``k`` and ``J`` the point Jacobians (`jaxrbd.point_jacobian`, one
    pass for all points). A zero-length segment contributes no direction (finite values
    and gradients).

    Args:
        points: a sequence of ``K >= 2`` pairs ``(body, point)``: a body id or name
            (static; ``"world"`` for a fixed anchor) and the point in body coordinates
            `(3,)` [m] (an array leaf, differentiable).
        stiffness: ``k``, a scalar [N/m].
        damping: ``d``, a scalar [N·s/m], default 0.
        rest_length: ``L0``, a scalar [m], default 0.
        cable: static; ``True`` clips the tension at zero (a cable or tendon that cannot
            push), default ``False`` (the spring pushes when compressed).

    Potential energy ``½ k (L - L0)²`` (for a cable: only while stretched).

    Example:
        >>> chain = jaxrbd.models.chain(2)
        >>> band = jaxrbd.PointToPointSpringDamper(
        ...     [("world", jnp.array([0.1, 0.0, 0.0])), ("link1", jnp.array([0.0, 0.0, -0.1]))],
        ...     stiffness=50.0, rest_length=0.1)
        >>> float(band.length(chain, jnp.zeros(2)))  # from (0.1, 0, 0) to (0, 0, -0.2)
        0.223606797749979
    """

    points: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    rest_length: jax.Array
    bodies: tuple[str | int, ...] = eqx.field(static=True)
    cable: bool = eqx.field(static=True)

    def __init__(self, points, stiffness, damping=0.0, rest_length=0.0, *, cable=False):
        try:
            pairs = list(points)
            bodies = [b for b, _ in pairs]
            coords = [p for _, p in pairs]
        except (TypeError, ValueError):
            raise TypeError(
                "points must be a sequence of (body, point) pairs, body a name or id and "
                f"point (3,) in body coordinates; got {points!r}"
            ) from None
        if len(pairs) < 2:
            raise ValueError(
                f"points has {len(pairs)} entries, expected at least 2 (body, point) pairs"
            )
        for b in bodies:
            if isinstance(b, bool) or not isinstance(b, (str, int, np.integer)):
                raise TypeError(f"points: body must be a name or an int id (static), got {b!r}")
        self.bodies = tuple(b if isinstance(b, str) else int(b) for b in bodies)
        pts = []
        for i, p in enumerate(coords):
            p = _floating(f"points[{i}] point", p)
            if p.shape != (3,):
                raise ValueError(f"points[{i}] point has shape {p.shape}, expected (3,) [m]")
            pts.append(p)
        self.points = jnp.stack(pts)
        self.stiffness = _scalar("stiffness", stiffness)
        self.damping = _scalar("damping", damping)
        self.rest_length = _scalar("rest_length", rest_length)
        if not isinstance(cable, bool):
            raise TypeError(f"cable must be a bool, got {cable!r}")
        self.cable = cable

    def _kinematics(self, model, q, with_jacobian=True):
        bodies, _ = resolve_bodies(model, list(self.bodies))
        bodies = bodies.tolist()
        pts = jnp.asarray(self.points, model.dtype)
        if pts.shape != (len(bodies), 3):
            raise ValueError(
                f"points has shape {pts.shape}, expected ({len(bodies)}, 3) (one per body)"
            )
        P = point_position(model, q, bodies, pts)
        seg_len, u = _safe_norm(P[1:] - P[:-1])
        if not with_jacobian:
            return seg_len, u, None
        J = point_jacobian(model, q, bodies, pts)  # (K, 3, nv)
        return seg_len, u, jnp.einsum("ki,kin->n", u, J[1:] - J[:-1])

    def _stretch(self, model, L):
        return L - jnp.asarray(self.rest_length, model.dtype)

    def length(self, model, q):
        """Polyline length ``L`` [m], a scalar."""
        (q,) = check_state(model, q=q)
        return jnp.sum(self._kinematics(model, q, with_jacobian=False)[0])

    def tension(self, model, q, qd):
        """Tension ``T = k (L - L0) + d dL/dt`` [N] (clipped at 0 for a cable), a scalar."""
        q, qd = check_state(model, q=q, qd=qd)
        return self._tension(model, q, qd)[0]

    def _tension(self, model, q, qd):
        seg_len, _, dL = self._kinematics(model, q)
        L, Ld = jnp.sum(seg_len), dL @ qd
        T = jnp.asarray(self.stiffness, model.dtype) * self._stretch(model, L) + jnp.asarray(
            self.damping, model.dtype
        ) * Ld
        if self.cable:
            T = jnp.maximum(T, 0.0)
        return T, dL

    def forces(self, model, q, qd, t):
        T, dL = self._tension(model, q, qd)
        return -T * dL

    def energy(self, model, q, t):
        L = jnp.sum(self._kinematics(model, q, with_jacobian=False)[0])
        s = self._stretch(model, L)
        if self.cable:
            s = jnp.maximum(s, 0.0)
        return 0.5 * jnp.asarray(self.stiffness, model.dtype) * s * s


# ---------------------------------------------------------------- user forces


class UserForce(AbstractForceElement):
    """Any force law as a force element.

    Args:
        fn: ``fn(model, q, qd, t)`` returning generalized forces `(nv,)` (``kind =
            "generalized"``) or spatial forces `(nbodies, 6)` on the bodies, each
            ``[n; f]`` in world coordinates at the world origin like ``f_ext``, row 0
            ignored (``kind = "wrench"``; mapped to joint space by ``Σ_i J_iᵀ f_i``, one
            RNEA pass). A pytree callable (an equinox Module, `jax.tree_util.Partial`)
            keeps its arrays as differentiable leaves; a plain function is static.
        kind: ``"generalized"`` (default) or ``"wrench"`` (static).
        potential: optional ``potential(model, q, t) -> ()`` [J] returned by
            `potential_energy`; without it `potential_energy` raises.

    Example:
        >>> push = jaxrbd.UserForce(lambda model, q, qd, t: -0.1 * qd)
        >>> push(model, q, jnp.ones(model.nv)).shape
        (9,)
    """

    fn: Callable
    potential: Callable | None
    kind: str = eqx.field(static=True)

    def __init__(self, fn, kind="generalized", potential=None):
        if kind not in ("generalized", "wrench"):
            raise ValueError(f"kind must be 'generalized' or 'wrench', got {kind!r}")
        self.fn = _wrap_callable("fn", fn)
        self.kind = kind
        self.potential = None if potential is None else _wrap_callable("potential", potential)

    def forces(self, model, q, qd, t):
        out = self.fn(model, q, qd, t)
        if self.kind == "generalized":
            return check_vector(
                "UserForce fn(model, q, qd, t)", out, model.nv, "model.nv", model.dtype
            )
        f = as_float("UserForce fn(model, q, qd, t)", out, model.dtype)
        if f.shape != (model.nbodies, 6):
            raise ValueError(
                f"UserForce fn(model, q, qd, t) returned shape {f.shape}, expected "
                f"({model.nbodies}, 6) = (model.nbodies, 6) for kind='wrench'"
            )
        # RNEA at rest without gravity is -Σ J_iᵀ f_i (H qdd + C = tau + Σ J_iᵀ f_i)
        still = eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))
        zero = jnp.zeros(model.nv, model.dtype)
        return -inverse_dynamics(still, q, zero, zero, f_ext=f)

    def energy(self, model, q, t):
        if self.potential is None:
            raise ValueError(
                "UserForce has no potential energy; pass potential=fn(model, q, t) -> () "
                "when the force is conservative"
            )
        e = as_float("UserForce potential(model, q, t)", self.potential(model, q, t), model.dtype)
        if e.shape != ():
            raise ValueError(f"UserForce potential returned shape {e.shape}, expected ()")
        return e


# ---------------------------------------------------------------- sums


def _elements(elements) -> tuple[AbstractForceElement, ...]:
    if isinstance(elements, AbstractForceElement):
        return (elements,)
    if callable(elements):
        return (UserForce(elements),)
    try:
        elements = tuple(elements)
    except TypeError:
        raise TypeError(
            "elements must be a force element or a sequence of them, "
            f"got {type(elements).__name__}"
        ) from None
    out = []
    for i, e in enumerate(elements):
        if isinstance(e, AbstractForceElement):
            out.append(e)
        elif callable(e):
            out.append(UserForce(e))
        else:
            raise TypeError(
                f"elements[{i}] is a {type(e).__name__}, expected a force element or a "
                "callable fn(model, q, qd, t) -> (nv,)"
            )
    return tuple(out)


def generalized_forces(elements, model, q, qd, t=0.0):
    """Sum of the generalized forces of force elements, to be added to ``tau``.

    Args:
        elements: a force element or a sequence of them; a plain callable
            ``fn(model, q, qd, t) -> (nv,)`` counts as a `UserForce`.
        model: a `Model`.
        q: configuration `(nq,)`.
        qd: velocities `(nv,)` [rad/s | m/s].
        t: time [s], a scalar.

    Returns:
        `(nv,)` [N·m | N] (zeros for an empty sequence).

    Raises:
        ValueError: wrong shapes, unknown joints or bodies, joints that are not 1-DoF.
        TypeError: an entry that is neither a force element nor a callable.

    Example:
        >>> chain = jaxrbd.models.chain(3)
        >>> elements = [jaxrbd.JointSpring("link0", 10.0), jaxrbd.JointDamper("link0", 1.0)]
        >>> jaxrbd.generalized_forces(elements, chain, jnp.full(3, 0.1), jnp.ones(3))
        Array([-2., 0., 0.], dtype=float64)
    """
    with jax.named_scope("jaxrbd.generalized_forces"):
        elements = _elements(elements)
        q, qd = check_state(model, q=q, qd=qd)
        t = _time(model, t)
        total = jnp.zeros(model.nv, model.dtype)
        for e in elements:
            total = total + e.forces(model, q, qd, t)
        return total


def elastic_potential_energy(elements, model, q, t=0.0):
    """Potential energy stored in force elements [J] (springs; dampers and friction
    store none), so ``kinetic_energy + potential_energy + elastic_potential_energy`` is
    conserved when all elements are conservative and time-independent.

    Args:
        elements: a force element or a sequence of them.
        model: a `Model`.
        q: configuration `(nq,)`.
        t: time [s], a scalar (time-dependent drives).

    Returns:
        A scalar [J].

    Raises:
        ValueError: an element without a potential (a `UserForce` without ``potential``).

    Example:
        >>> chain = jaxrbd.models.chain(3)
        >>> spring = jaxrbd.JointSpring(0, 10.0)  # on joint 0, "link0"
        >>> float(jaxrbd.elastic_potential_energy(spring, chain, jnp.full(3, 0.1)))
        0.05
    """
    with jax.named_scope("jaxrbd.elastic_potential_energy"):
        elements = _elements(elements)
        (q,) = check_state(model, q=q)
        t = _time(model, t)
        total = jnp.zeros((), model.dtype)
        for e in elements:
            total = total + e.energy(model, q, t)
        return total
