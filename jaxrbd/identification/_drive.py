"""Models beyond the rigid bodies: joint friction, armature, torque offsets, drive gains
and payloads; the identification regressor that stacks them with the inertial columns.

The linear terms (armature ``qdd``, viscous ``qd``, Coulomb ``tanh(qd / width)``, offset
``1``) are columns of the regressor next to the ``10 nbodies`` inertial columns; the
nonlinear ones (Stribeck, the sigmoid of Gaz et al. 2019) are differentiable functions
of their parameters (`NonlinearFriction`), fitted next to the linear ones by
`consistent_fit`, or alone by `fit_residual`.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._api import inverse_dynamics_regressor
from .._body import Body
from .._jit import jit
from .._parameters import with_inertial_parameters

__all__ = [
    "FrictionModel",
    "NonlinearFriction",
    "add_payload",
    "identification_regressor",
    "payload_parameters",
    "sigmoid_friction",
    "smooth_sign",
    "stribeck_friction",
]

_TERMS = ("armature", "viscous", "coulomb", "offset")
_INERTIAL = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")


def smooth_sign(x, width):
    """``tanh(x / width)``: a smooth ``sign`` for Coulomb friction.

    It reaches 76 % of ``sign`` at ``|x| = width`` and 99.9 % at ``4 width``, as
    `jaxrbd.JointFriction` and `jaxrbd.PassiveJointForces` (which use the same form, so an
    identified Coulomb coefficient simulates as it was fitted).

    Example:
        >>> float(smooth_sign(jnp.asarray(1.0), 0.01))
        1.0
    """
    return jnp.tanh(x / width)


@dataclasses.dataclass(frozen=True)
class FrictionModel:
    """Which linear joint terms enter the identification, per joint:

        ``tau_j += armature_j qdd_j + viscous_j qd_j + coulomb_j tanh(qd_j / width)
        + offset_j``.

    Each enabled term adds ``nv`` columns after the inertial columns, in the order
    armature, viscous, Coulomb, offset (one block per term, joints in model order). The
    offset absorbs a torque sensor's bias. Hashable: it is a static argument of the
    compiled functions.

    Args:
        armature: reflected rotor inertia [kg m^2] (`jaxrbd.Model.armature`).
        viscous: viscous friction [N m s/rad] (`jaxrbd.Model.damping`).
        coulomb: Coulomb friction [N m] (`jaxrbd.Model.friction`).
        offset: a constant torque [N m].
        coulomb_width: the smooth sign's width [rad/s] (`smooth_sign`).

    Example:
        >>> fm = FrictionModel(armature=False)
        >>> fm.terms, fm.n_columns(7)
        (('viscous', 'coulomb', 'offset'), 21)
    """

    armature: bool = True
    viscous: bool = True
    coulomb: bool = True
    offset: bool = True
    coulomb_width: float = 0.01

    def __post_init__(self):
        if not self.coulomb_width > 0:
            raise ValueError(f"coulomb_width must be positive [rad/s], got {self.coulomb_width}")

    @property
    def terms(self) -> tuple[str, ...]:
        return tuple(t for t in _TERMS if getattr(self, t))

    def n_columns(self, nv: int) -> int:
        return len(self.terms) * nv

    def columns(self, qd, qdd):
        """The linear columns for one sample: `(nv, n_terms nv)` (block diagonal)."""
        cols = {
            "armature": qdd,
            "viscous": qd,
            "coulomb": smooth_sign(qd, self.coulomb_width),
            "offset": jnp.ones_like(qd),
        }
        blocks = [jnp.diag(cols[t]) for t in self.terms]
        if not blocks:
            return jnp.zeros((qd.shape[0], 0), qd.dtype)
        return jnp.concatenate(blocks, axis=-1)

    def values(self, model):
        """The model's values of the enabled terms, `(n_terms nv,)`: armature, damping,
        friction (Coulomb) from the model's leaves, offset 0."""
        vals = {"armature": model.armature, "viscous": model.damping, "coulomb": model.friction,
                "offset": jnp.zeros_like(model.armature)}
        if not self.terms:
            return jnp.zeros((0,), model.dtype)
        return jnp.concatenate([vals[t] for t in self.terms])

    def lower_bounds(self, nv: int):
        """The lower bounds of a passive joint, `(n_columns(nv),)` numpy in column order:
        armature, viscous and Coulomb coefficients ``>= 0`` (a rotor's inertia, and
        friction that dissipates energy: ``tau_f qd >= 0`` at every velocity), offsets
        free (``-inf``). `consistent_fit` holds them by default (``dissipative=True``).

        Example:
            >>> FrictionModel(armature=False).lower_bounds(2).tolist()
            [0.0, 0.0, 0.0, 0.0, -inf, -inf]
        """
        lo = {"armature": 0.0, "viscous": 0.0, "coulomb": 0.0, "offset": -np.inf}
        return np.repeat(np.array([lo[t] for t in self.terms], np.float64), int(nv))

    def column_names(self, model) -> tuple[str, ...]:
        """Names of all identification columns: ``"<body>.<param>"`` then
        ``"<joint>.<term>"``."""
        names = [f"{b}.{p}" for b in model.body_names for p in _INERTIAL]
        names += [f"{j}.{t}" for t in self.terms for j in model.joint_names]
        return tuple(names)


def identification_regressor(model, friction: FrictionModel, q, qd, qdd):
    """The regressor of the rigid bodies and the linear joint terms for one sample.

    ``tau = Y @ concatenate([inertial_parameters(model).ravel(), friction_values])``,
    with ``Y = [inverse_dynamics_regressor(model, q, qd, qdd), friction.columns(qd, qdd)]``.

    Args:
        model: a `jaxrbd.Model` with 1-DoF joints.
        friction: a `FrictionModel`.
        q: `(nv,)` positions of one sample (`jax.vmap` for many).
        qd: `(nv,)` velocities.
        qdd: `(nv,)` accelerations.

    Returns:
        `Y`, `(nv, 10 nbodies + friction.n_columns(nv))`.

    Example:
        >>> arm = jaxrbd.models.chain(3)
        >>> fm = FrictionModel()
        >>> Y = identification_regressor(arm, fm, jnp.zeros(3), jnp.ones(3), jnp.ones(3))
        >>> Y.shape
        (3, 52)
    """
    Y = inverse_dynamics_regressor(model, q, qd, qdd)
    return jnp.concatenate([Y, friction.columns(qd, qdd)], axis=-1)


@functools.partial(jit, static_argnames=("friction",))
def _stacked(model, friction, q, qd, qdd):
    Y = jax.vmap(lambda *x: identification_regressor(model, friction, *x))(q, qd, qdd)
    return Y.reshape(-1, Y.shape[-1])


#: Samples per compiled call of `stacked_regressor`: recordings of any length reuse one
#: compiled program (the last chunk is padded).
CHUNK = 1024


def stacked_regressor(model, friction: FrictionModel, q, qd, qdd, *, chunk: int = CHUNK):
    """The identification regressors of ``T`` samples stacked sample-major.

    Row ``k nv + j`` is joint ``j`` at sample ``k``. The samples are processed in chunks
    of ``chunk`` (the last one padded), so recordings of every length share one compiled
    program per model structure and friction model.

    Args:
        model: a `jaxrbd.Model` with 1-DoF joints.
        friction: a `FrictionModel`.
        q: `(T, nv)` positions.
        qd: `(T, nv)` velocities.
        qdd: `(T, nv)` accelerations.
        chunk: samples per compiled call.

    Returns:
        `(T nv, P)` numpy array, ``P = 10 nbodies + friction.n_columns(nv)``.

    Example:
        >>> arm = jaxrbd.models.chain(3)
        >>> X = np.zeros((5, 3))
        >>> stacked_regressor(arm, FrictionModel(), X, X, X, chunk=4).shape
        (15, 52)
    """
    q, qd, qdd = (np.asarray(x, np.float64) for x in (q, qd, qdd))
    T = len(q)
    for name, x in (("q", q), ("qd", qd), ("qdd", qdd)):
        if x.shape != (T, model.nv):
            raise ValueError(f"{name} has shape {x.shape}, expected ({T}, {model.nv}) = (T, nv)")
    n = int(chunk)
    out = []
    for s in range(0, T, n):
        part = [x[s:s + n] for x in (q, qd, qdd)]
        m = len(part[0])
        if m < n:
            part = [np.concatenate([x, np.zeros((n - m, model.nv))]) for x in part]
        Y = _stacked(model, friction, *(jnp.asarray(x, model.dtype) for x in part))
        out.append(np.asarray(Y)[: m * model.nv])
    return np.concatenate(out)


def stribeck_friction(qd, coulomb, static, stribeck_velocity, viscous=0.0, width=0.01):
    """Stribeck friction: ``(fc + (fs - fc) exp(-(qd / vs)^2)) tanh(qd / width) + fv qd``.

    The friction torque opposing the motion is the negative of this (it is written, as
    the regressor's terms, as the torque the drive spends on friction).

    Args:
        qd: joint velocities [rad/s], any shape.
        coulomb: Coulomb level ``fc`` [N m].
        static: static (breakaway) level ``fs`` [N m].
        stribeck_velocity: ``vs > 0`` [rad/s].
        viscous: ``fv`` [N m s/rad].
        width: the smooth sign's width [rad/s].

    Example:
        >>> round(float(stribeck_friction(jnp.asarray(1.0), 1.0, 2.0, 0.1)), 6)
        1.0
    """
    s = smooth_sign(qd, width)
    return (coulomb + (static - coulomb) * jnp.exp(-jnp.square(qd / stribeck_velocity))) * s \
        + viscous * qd


def sigmoid_friction(qd, phi1, phi2, phi3):
    """The friction model of Gaz et al. (2019, eq. 4) for the Franka Panda:

        ``phi1 / (1 + exp(-phi2 (qd + phi3))) - phi1 / (1 + exp(-phi2 phi3))``,

    a sigmoid in the velocity, zero at ``qd = 0``. ``phi1`` [N m], ``phi2`` [s/rad],
    ``phi3`` [rad/s]; broadcasts over joints (per-joint parameters as `(nv,)` arrays).
    Written, as the regressor terms, as the torque spent on friction.

    Example:
        >>> float(sigmoid_friction(jnp.asarray(0.0), 0.5, 5.0, 0.04))
        0.0
    """
    return phi1 * (jax.nn.sigmoid(phi2 * (qd + phi3)) - jax.nn.sigmoid(phi2 * phi3))


_NONLINEAR = {"stribeck": ("stribeck_excess", "stribeck_velocity"),
              "sigmoid": ("phi1", "phi2", "phi3")}


@dataclasses.dataclass(frozen=True)
class NonlinearFriction:
    """Per-joint friction terms that are nonlinear in their parameters, identified as
    differentiable parameters next to the regressor's linear ones (`consistent_fit`).

    Each joint ``j`` has its own parameters ``theta_j``; the term adds to the joint's
    torque (as the regressor's terms, the torque the drive spends on friction):

    * ``kind="stribeck"``: ``theta_j = (fs_j - fc_j, vs_j)`` [N m, rad/s], the Stribeck
      excess of the static over the Coulomb level and the Stribeck velocity:
      ``(fs - fc) exp(-(qd / vs)^2) tanh(qd / width)``. With the Coulomb and viscous
      columns of a `FrictionModel` (same ``width``) the sum is `stribeck_friction`.
    * ``kind="sigmoid"``: ``theta_j = (phi1_j, phi2_j, phi3_j)`` [N m, s/rad, rad/s],
      the model of Gaz et al. (2019), `sigmoid_friction`.

    Hashable: a static argument of the compiled fit.

    Args:
        kind: ``"stribeck"`` or ``"sigmoid"``.
        width: the smooth sign's width [rad/s] of the Stribeck term (`smooth_sign`).

    Example:
        >>> nl = NonlinearFriction("sigmoid")
        >>> qd = jnp.array([[0.5, -0.5]])
        >>> theta = jnp.array([[0.5, 5.0, 0.04], [0.6, 9.0, 0.03]])
        >>> nl(qd, theta).shape, nl.derivatives(qd, theta).shape
        ((1, 2), (1, 2, 3))
    """

    kind: str = "stribeck"
    width: float = 0.01

    def __post_init__(self):
        if self.kind not in _NONLINEAR:
            raise ValueError(f"kind must be one of {sorted(_NONLINEAR)}, got {self.kind!r}")
        if not self.width > 0:
            raise ValueError(f"width must be positive [rad/s], got {self.width}")

    @property
    def names(self) -> tuple[str, ...]:
        """The names of one joint's parameters."""
        return _NONLINEAR[self.kind]

    @property
    def n_params(self) -> int:
        """Parameters per joint."""
        return len(self.names)

    def _term(self, qd, theta):
        if self.kind == "stribeck":
            excess, vs = theta[..., 0], theta[..., 1]
            return excess * jnp.exp(-jnp.square(qd / vs)) * smooth_sign(qd, self.width)
        return sigmoid_friction(qd, theta[..., 0], theta[..., 1], theta[..., 2])

    def __call__(self, qd, theta):
        """The friction torques, `(T, nv)`, of velocities `(T, nv)` [rad/s] and
        parameters `(nv, n_params)`."""
        qd = jnp.asarray(qd)
        return self._term(qd, jnp.broadcast_to(theta, qd.shape + jnp.shape(theta)[-1:]))

    def derivatives(self, qd, theta):
        """``d tau_tj / d theta_jk``, `(T, nv, n_params)`: the exact Jacobian, by forward
        mode per joint, batched over samples and joints (a joint's term depends only on
        its own parameters, so the full `(T nv, nv n_params)` Jacobian is this,
        block by block)."""
        per = jax.jacfwd(self._term, argnums=1)
        return jax.vmap(jax.vmap(per))(qd, jnp.broadcast_to(theta, qd.shape + theta.shape[-1:]))

    def canonical(self, theta):
        """``theta`` `(nv, n_params)` numpy in one form per friction curve: the Stribeck
        term depends on ``vs`` through ``vs^2`` only, so ``vs`` is made positive."""
        theta = np.array(theta, np.float64)
        if self.kind == "stribeck":
            theta[:, 1] = np.abs(theta[:, 1])
        return theta

    def lower_bounds(self, nv: int):
        """The lower bounds of dissipative parameters, `(nv, n_params)` numpy (``-inf``:
        free), held by `consistent_fit` by default (``dissipative=True``):

        * Stribeck: the excess ``fs - fc >= 0`` (the breakaway level is at least the
          Coulomb level, so with ``fc >= 0`` the term opposes the motion); ``vs`` free
          (only ``vs^2`` enters).
        * sigmoid: ``phi1 >= 0`` and ``phi2 >= 0``, which make the curve increasing
          through zero at ``qd = 0``, hence ``tau_f qd >= 0`` at every velocity
          (``(phi1, phi2)`` and ``(-phi1, -phi2)`` give the same curve, so this is no
          loss); ``phi3`` free.

        Example:
            >>> NonlinearFriction("sigmoid").lower_bounds(1).tolist()
            [[0.0, 0.0, -inf]]
        """
        row = [0.0, -np.inf] if self.kind == "stribeck" else [0.0, 0.0, -np.inf]
        return np.tile(np.asarray(row, np.float64), (int(nv), 1))

    def start(self, nv: int):
        """A neutral start `(nv, n_params)`: no Stribeck excess at ``vs = 0.1`` rad/s; a
        sigmoid of zero height, steepness 10 s/rad, no offset (the height is linear in
        the residual, so the first step gives it a value and the others a gradient)."""
        row = [0.0, 0.1] if self.kind == "stribeck" else [0.0, 10.0, 0.0]
        return np.tile(np.asarray(row, np.float64), (int(nv), 1))

    def column_names(self, model) -> tuple[str, ...]:
        """``"<joint>.<parameter>"`` in the order of the flattened `(nv, n_params)`."""
        return tuple(f"{j}.{n}" for j in model.joint_names for n in self.names)


# ---------------------------------------------------------------------- payloads


def payload_parameters(body: Body):
    """The ten inertial parameters of a payload, `(10,)` numpy, in the order of
    `jaxrbd.inertial_parameters` (inertia about the frame's origin).

    Args:
        body: a `jaxrbd.Body` (mass, centre of mass, inertia about the centre of mass)
            expressed in the frame of the body that carries it.

    Example:
        >>> payload_parameters(jaxrbd.Body(2.0, (0.0, 0.0, 0.1), np.eye(3) * 1e-3)).round(4).tolist()
        [2.0, 0.0, 0.0, 0.2, 0.021, 0.0, 0.021, 0.0, 0.0, 0.001]
    """
    m, c, Ic = body.arrays("payload")
    I0 = Ic + m * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
    return np.array([m, *(m * c), I0[0, 0], I0[0, 1], I0[1, 1], I0[0, 2], I0[1, 2], I0[2, 2]])


def add_payload(model, body, payload: Body):
    """A copy of ``model`` with a payload rigidly attached to ``body`` (its parameters
    added to the body's row of `jaxrbd.Model.inertia`; inertial parameters add).

    Args:
        model: a `jaxrbd.Model`.
        body: a body name or id.
        payload: a `jaxrbd.Body` in ``body``'s frame.

    Example:
        >>> arm = jaxrbd.models.chain(3)
        >>> heavy = add_payload(arm, "link2", jaxrbd.Body(1.0, (0.0, 0.0, -1.0), np.eye(3) * 1e-3))
        >>> float(heavy.inertia[3, 0] - arm.inertia[3, 0])
        1.0
    """
    b = model.body_id(body)
    pi = model.inertia.at[b].add(jnp.asarray(payload_parameters(payload), model.dtype))
    return with_inertial_parameters(model, pi)
