"""Actuators: MuJoCo's actuation model (gain, bias, transmission, clamping) as a pytree,
and `actuation`, the generalized forces they apply.

An `Actuators` is data *next to* a `Model` (as a `ConstraintSet` is): the model stays the
rigid-body tree, and the actuators name its DoFs by index. `jaxrbd.io.load_mjcf` builds one
from an MJCF model's ``<actuator>`` section (``info.actuators``); the function

    ``tau = actuation(model, q, qd, ctrl, actuators, act=None)``

then equals MuJoCo's ``qfrc_actuator`` (in jaxrbd's coordinates, see `jaxrbd.io.qfrc_to_tau`).
For each actuator ``i`` (MuJoCo's ``mj_transmission`` and ``mj_fwdActuation``):

* a *transmission* gives its length ``l_i(q)`` and moment arm ``m_i(q)`` (a row of the
  ``(nu, nv)`` moment matrix ``M``), its velocity is ``m_i · qd``;
* its input is the clamped control ``clip(ctrl, ctrl_lower, ctrl_upper)``, or its activation
  ``act`` for actuators with an activation state (integrator and first-order filters);
* its force is ``gain · input + bias`` with the affine ``gain = g0 + g1 l + g2 l̇`` and
  ``bias = b0 + b1 l + b2 l̇`` (MuJoCo's ``motor``: gain ``g0``; ``position``: bias
  ``(0, -kp, -kv)``; ``velocity``: bias ``(0, 0, -kv)``), clamped to the force range
  (after the total force on a fixed tendon is scaled into the tendon's range);
* ``tau = Mᵀ force``, clamped per DoF to the joints' actuator force ranges.

Transmissions: hinge and slide joints (``l = gear q``, ``m = gear e_dof``), ball joints
(``l = gear · log(quat)``, ``m = gear`` on the three DoFs, or ``Rᵀ gear`` for
``jointinparent``), free joints (``l = 0``; the force ``gear[:3]`` in world axes and the
torque ``gear[3:]`` in body axes), fixed tendons (``l = gear Σ c_k q_k``) and sites without
a reference site (``l = 0``; the wrench ``gear`` in site axes, ``m = J_siteᵀ gear``:
propellers, thrusters). Every quantity
is an array leaf, so `jax.grad` reaches gains, gears and ranges, and `jax.vmap` batches
states and actuator sets.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._core import rotation as _rotation
from ._core.checks import check_state, check_vector
from ._dynamics import inverse_dynamics
from ._kinematics import body_jacobians, forward_kinematics

__all__ = ["Actuators", "actuation", "activation_rate"]

#: MuJoCo's smallest time constant of a filter (``mjMINVAL``).
_MINVAL = 1e-15
_DYNAMICS = ("none", "integrator", "filter", "filterexact")


class Actuators(eqx.Module):
    """A set of actuators acting on the DoFs of a model: MuJoCo's actuation model.

    Built by `jaxrbd.io.load_mjcf` (``info.actuators``); its rows follow MuJoCo's actuator
    order and ``ctrl``/``act`` are MuJoCo's ``ctrl``/``act``. The DoF indices are those of
    the *full* tree (`CoupledModel.base` for a coupled model). Actuators MuJoCo has but this
    model does not represent (spatial tendons, body or slider-crank transmissions, sites
    with a reference site, muscles, plugins) have ``mapped[i] == False`` and apply no force;
    the loader names them in its warning.

    Leaves:
        gear: `(nu, 6)` MuJoCo's ``gear`` (only ``gear[:, 0]`` for scalar transmissions).
        transmission: `(nu, nv)` scalar transmissions: the actuator length before the gear
            is ``transmission[i] · q`` over hinge and slide coordinates (a unit entry for a
            joint, the coefficients of a fixed tendon); zero rows for ball and free joints.
        gain, bias: `(nu, 3)` affine terms ``(c, c_l, c_v)`` (see `actuation`).
        ctrl_lower, ctrl_upper: `(nu,)` control range (``∓inf`` where unlimited).
        force_lower, force_upper: `(nu,)` actuator force range [N·m | N].
        act_lower, act_upper: `(nu,)` activation range (``actearly`` only).
        time_constant: `(nu,)` filter time constant [s].
        timestep: `()` MuJoCo's ``opt.timestep`` [s] (``actearly`` only).
        dof_force_lower, dof_force_upper: `(nv,)` per-DoF limits of the summed actuator
            force (MuJoCo's joint ``actuatorfrcrange``).
        tendon_force_lower, tendon_force_upper: `(ntendon,)` limits of the total actuator
            force on each fixed tendon (MuJoCo's tendon ``actuatorfrcrange``).
        gravity_compensation: `(ngravcomp,)` MuJoCo's ``gravcomp`` of the bodies
            ``gravity_compensation_bodies``; on the DoFs ``gravity_compensation_dofs``
            (joints with ``actuatorgravcomp="true"``) their gravity compensation is part
            of the actuator forces (before the joints' actuator-force ranges), as in
            MuJoCo.

    Static structure: ``names``, ``mapped``, ``ctrl_index`` (the entry of ``ctrl`` each
    actuator reads), ``dynamics`` (``"none"``, ``"integrator"``, ``"filter"``,
    ``"filterexact"``), ``act_index`` (-1 without a state), ``actearly``, ``tendon`` (index
    into the tendon ranges, -1 if none), ``scalar_q``/``scalar_v`` (the hinge and slide
    coordinates), ``ball``/``free`` (``(actuator, q start, v start, in parent frame)``),
    ``site`` (``(actuator, jaxrbd body name of the site)``),
    ``nq``, ``nv``, ``nctrl``, ``na``, ``gravity_compensation_bodies`` (jaxrbd body names)
    and ``gravity_compensation_dofs``.
    """

    gear: Float[Array, "nu 6"]
    transmission: Float[Array, "nu nv"]
    gain: Float[Array, "nu 3"]
    bias: Float[Array, "nu 3"]
    ctrl_lower: Float[Array, "nu"]
    ctrl_upper: Float[Array, "nu"]
    force_lower: Float[Array, "nu"]
    force_upper: Float[Array, "nu"]
    act_lower: Float[Array, "nu"]
    act_upper: Float[Array, "nu"]
    time_constant: Float[Array, "nu"]
    timestep: Float[Array, ""]
    dof_force_lower: Float[Array, "nv"]
    dof_force_upper: Float[Array, "nv"]
    tendon_force_lower: Float[Array, "ntendon"]
    tendon_force_upper: Float[Array, "ntendon"]
    gravity_compensation: Float[Array, "ngravcomp"]
    # ---- structure (static) ----
    names: tuple[str, ...] = eqx.field(static=True)
    mapped: tuple[bool, ...] = eqx.field(static=True)
    ctrl_index: tuple[int, ...] = eqx.field(static=True)
    dynamics: tuple[str, ...] = eqx.field(static=True)
    act_index: tuple[int, ...] = eqx.field(static=True)
    actearly: tuple[bool, ...] = eqx.field(static=True)
    tendon: tuple[int, ...] = eqx.field(static=True)
    scalar_q: tuple[int, ...] = eqx.field(static=True)
    scalar_v: tuple[int, ...] = eqx.field(static=True)
    ball: tuple[tuple[int, int, int, bool], ...] = eqx.field(static=True)
    free: tuple[tuple[int, int, int, bool], ...] = eqx.field(static=True)
    nq: int = eqx.field(static=True)
    nv: int = eqx.field(static=True)
    nctrl: int = eqx.field(static=True)
    na: int = eqx.field(static=True)
    site: tuple[tuple[int, str], ...] = eqx.field(static=True, default=())
    gravity_compensation_bodies: tuple[str, ...] = eqx.field(static=True, default=())
    gravity_compensation_dofs: tuple[int, ...] = eqx.field(static=True, default=())

    def __check_init__(self):
        nu = len(self.names)
        for field, shape in (
            ("gear", (nu, 6)), ("transmission", (nu, self.nv)), ("gain", (nu, 3)),
            ("bias", (nu, 3)), ("ctrl_lower", (nu,)), ("ctrl_upper", (nu,)),
            ("force_lower", (nu,)), ("force_upper", (nu,)), ("act_lower", (nu,)),
            ("act_upper", (nu,)), ("time_constant", (nu,)), ("timestep", ()),
            ("dof_force_lower", (self.nv,)), ("dof_force_upper", (self.nv,)),
        ):
            got = tuple(getattr(self, field).shape)
            if got[len(got) - len(shape):] != shape:
                raise ValueError(f"Actuators.{field} has shape {got}, expected (..., {shape})")
        for field in ("mapped", "ctrl_index", "dynamics", "act_index", "actearly", "tendon"):
            if len(getattr(self, field)) != nu:
                raise ValueError(f"Actuators.{field} has {len(getattr(self, field))} entries, "
                                 f"expected {nu} (one per actuator)")
        nt = self.tendon_force_lower.shape[-1]
        if self.tendon_force_upper.shape[-1] != nt or max(self.tendon, default=-1) >= nt:
            raise ValueError(f"Actuators: tendon indices {self.tendon} do not match the {nt} "
                             "tendon force ranges")
        bad = [d for d in self.dynamics if d not in _DYNAMICS]
        if bad:
            raise ValueError(f"Actuators: unknown dynamics {bad[0]!r}, expected one of {_DYNAMICS}")

    @property
    def nu(self) -> int:
        """Number of actuators (MuJoCo's ``nu``), mapped or not."""
        return len(self.names)


def _moment_and_length(acts: Actuators, base, q, dtype):
    """``(nu, nv)`` moment matrix in jaxrbd's coordinates and ``(nu,)`` lengths at ``q``."""
    gear = acts.gear.astype(dtype)
    T = acts.transmission.astype(dtype)
    g0 = gear[:, 0]
    M = g0[:, None] * T
    sv, sq = np.asarray(acts.scalar_v, np.int64), np.asarray(acts.scalar_q, np.int64)
    length = g0 * (T[:, sv] @ q[sq]) if sv.size else jnp.zeros(g0.shape, dtype)
    if acts.ball:
        u, qs, vs, parent = (np.array(c) for c in zip(*acts.ball))
        quat = q[qs[:, None] + np.arange(4)]
        R = jnp.moveaxis(_rotation.quat_to_R(quat.T), -1, 0)  # (k, 3, 3) body -> parent
        g = gear[u, :3]
        axis = jnp.where(parent[:, None], jnp.einsum("kji,kj->ki", R, g), g)
        # MuJoCo's length: the rotation vector of the (normalised, shortest) quaternion
        length = length.at[u].set(jnp.sum(_rotation.log_quat(quat.T).T * axis, axis=1))
        M = M.at[u[:, None], vs[:, None] + np.arange(3)].set(axis)
    if acts.free:
        u, qs, vs, parent = (np.array(c) for c in zip(*acts.free))
        quat = q[qs[:, None] + np.arange(3, 7)]
        R = jnp.moveaxis(_rotation.quat_to_R(quat.T), -1, 0)
        torque = gear[u, 3:]
        torque = jnp.where(parent[:, None], jnp.einsum("kji,kj->ki", R, torque), torque)
        # MuJoCo's force gear[:3] acts along world axes: Rᵀ of it in body coordinates.
        force = jnp.einsum("kji,kj->ki", R, gear[u, :3])
        M = M.at[u[:, None], vs[:, None] + np.arange(6)].set(jnp.concatenate([torque, force], 1))
        length = length.at[u].set(0.0)
    if acts.site:
        # MuJoCo's wrench (gear[:3] force, gear[3:] torque, in site axes) at the site:
        # the moment arm is J_siteᵀ [torque; force] with J in site coordinates.
        u = np.array([a for a, _ in acts.site])
        ids = np.array([base.body_id(name) for _, name in acts.site])
        J = body_jacobians(base, q, frame="body")[ids]
        wrench = jnp.concatenate([gear[u, 3:], gear[u, :3]], axis=1)
        M = M.at[u].set(jnp.einsum("kj,kjn->kn", wrench, J))
        length = length.at[u].set(0.0)
    return M, length


def _activation_rate(acts: Actuators, ctrl, act, dtype):
    """``act_dot`` of every actuator (zero for stateless ones), ``(nu,)``."""
    tau = jnp.maximum(acts.time_constant.astype(dtype), _MINVAL)
    dyn = np.array(acts.dynamics)
    rate = jnp.where(dyn == "integrator", ctrl, (ctrl - act) / tau)
    return jnp.where(dyn == "none", 0.0, rate)


def _inputs(acts: Actuators, ctrl, act, dtype):
    """The clamped controls and, for stateful actuators, the activation read by the force."""
    c = ctrl[np.asarray(acts.ctrl_index, np.int64)]
    c = jnp.clip(c, acts.ctrl_lower.astype(dtype), acts.ctrl_upper.astype(dtype))
    idx = np.asarray(acts.act_index, np.int64)
    stateful = idx >= 0
    if not stateful.any():
        return c, c
    a = act[np.where(stateful, idx, 0)]
    early = np.asarray(acts.actearly) & stateful
    if early.any():
        # MuJoCo's actearly: the activation after one step of its own dynamics
        rate = _activation_rate(acts, c, a, dtype)
        dt = acts.timestep.astype(dtype)
        tau = jnp.maximum(acts.time_constant.astype(dtype), _MINVAL)
        exact = np.array(acts.dynamics) == "filterexact"
        step = jnp.where(exact, rate * tau * (1 - jnp.exp(-dt / tau)), rate * dt)
        nxt = jnp.clip(a + step, acts.act_lower.astype(dtype), acts.act_upper.astype(dtype))
        a = jnp.where(early, nxt, a)
    return c, jnp.where(stateful, a, c)


def _check_sizes(base, acts):
    if not isinstance(acts, Actuators):
        raise TypeError(f"actuators must be an Actuators, got {type(acts).__name__}")
    if (acts.nq, acts.nv) != (base.nq, base.nv):
        raise ValueError(
            f"actuators act on a tree with nq={acts.nq}, nv={acts.nv}, but the model's tree has "
            f"nq={base.nq}, nv={base.nv}; use the Actuators loaded with this model"
        )


def actuation(
    model,
    q: Float[Array, "nq"],
    qd: Float[Array, "nv"],
    ctrl: Float[Array, "nctrl"],
    actuators: Actuators,
    act: Float[Array, "na"] | None = None,
) -> Float[Array, "nv"]:
    """Generalized forces of the actuators at a state and control, O(nu · nv).

    MuJoCo's ``mj_transmission`` and ``mj_fwdActuation`` (see `jaxrbd._actuation`):
    ``tau = clip(Mᵀ clip(gain · input + bias, force range), joint ranges)`` with ``M`` the
    moment arms at ``q``, ``input`` the clamped ``ctrl`` (or the activation ``act`` of
    stateful actuators), and ``gain``, ``bias`` affine in the actuator length and velocity.
    For a model from `jaxrbd.io.load_mjcf` it equals MuJoCo's ``qfrc_actuator`` (converted
    with `jaxrbd.io.qfrc_to_tau`; for a `CoupledModel`, ``Aᵀ qfrc_actuator``). Unlike
    MuJoCo, a non-finite ``ctrl`` is not replaced by zeros: it gives a non-finite ``tau``.
    The clamps are `jnp.clip`: the gradient is zero where a range is active.

    Args:
        model: the `Model` or `CoupledModel` the actuators were loaded with.
        q: configuration `(nq,)` (quaternions need not be normalised).
        qd: velocity `(nv,)` (body coordinates for free joints).
        ctrl: controls `(actuators.nctrl,)`, MuJoCo's ``ctrl``.
        actuators: an `Actuators` (``info.actuators`` of `load_mjcf`).
        act: activations `(actuators.na,)` (MuJoCo's ``act``); needed only when some
            actuator has an activation state.

    Returns:
        ``tau`` `(nv,)` [N·m | N].

    Raises:
        TypeError: ``actuators`` is not an `Actuators`.
        ValueError: wrong shapes, actuators of another model, or stateful actuators and no
            ``act``.

    Example:
        >>> xml = '''
        ... <mujoco>
        ...   <worldbody><body><joint name="j" axis="0 1 0"/><geom size="0.1" mass="1"/></body>
        ...   </worldbody>
        ...   <actuator><position joint="j" kp="10" kv="1" ctrlrange="-1 1"/></actuator>
        ... </mujoco>'''
        >>> model, info = jaxrbd.load_mjcf(xml, return_info=True)
        >>> q, qd = jnp.array([0.2]), jnp.array([0.5])
        >>> jaxrbd.actuation(model, q, qd, jnp.array([3.0]), info.actuators).tolist()  # 10 (1 - 0.2) - 0.5
        [7.5]
    """
    q, qd = check_state(model, q=q, qd=qd)
    _check_sizes(model, actuators)
    acts, dtype = actuators, model.dtype
    ctrl = check_vector("ctrl", ctrl, acts.nctrl, "actuators.nctrl", dtype)
    if any(i >= 0 for i in acts.act_index):
        if act is None:
            stateful = [n for n, i in zip(acts.names, acts.act_index) if i >= 0]
            raise ValueError(
                "actuation: these actuators have an activation state, pass act "
                f"(MuJoCo's d.act, ({acts.na},)): {', '.join(stateful)}"
            )
        act = check_vector("act", act, acts.na, "actuators.na", dtype)
    M, length = _moment_and_length(acts, model, q, dtype)
    velocity = M @ qd
    _, x = _inputs(acts, ctrl, act, dtype)
    g, b = acts.gain.astype(dtype), acts.bias.astype(dtype)
    gain = g[:, 0] + g[:, 1] * length + g[:, 2] * velocity
    force = gain * x + b[:, 0] + b[:, 1] * length + b[:, 2] * velocity
    force = jnp.where(np.asarray(acts.mapped, bool), force, 0.0)
    tendon = np.asarray(acts.tendon, np.int64)
    if (tendon >= 0).any():
        # MuJoCo scales the forces on a fixed tendon so that their sum lies in its range.
        nt = acts.tendon_force_lower.shape[-1]
        on = tendon >= 0
        seg = np.where(on, tendon, nt)
        total = jnp.zeros(nt + 1, dtype).at[seg].add(force)[:nt]
        lo, hi = acts.tendon_force_lower.astype(dtype), acts.tendon_force_upper.astype(dtype)
        safe = jnp.where(total == 0, 1.0, total)
        scale = jnp.where(total < lo, lo / safe, jnp.where(total > hi, hi / safe, 1.0))
        scale = jnp.where(total == 0, 1.0, scale)  # as MuJoCo: a zero total is left alone
        force = force * jnp.where(on, jnp.concatenate([scale, jnp.ones(1, dtype)])[seg], 1.0)
    force = jnp.clip(force, acts.force_lower.astype(dtype), acts.force_upper.astype(dtype))
    # an actuator that is not mapped applies no force, whatever its force range
    force = jnp.where(np.asarray(acts.mapped, bool), force, 0.0)
    tau = M.T @ force
    if acts.gravity_compensation_dofs:
        tau = tau + _gravity_compensation(model, q, acts)
    return jnp.clip(tau, acts.dof_force_lower.astype(dtype), acts.dof_force_upper.astype(dtype))


def _gravity_compensation(model, q, acts: Actuators):
    """MuJoCo's actuator-level gravity compensation: ``Jᵀ f`` of the forces
    ``-gravcomp · m · g`` at the bodies' centres of mass, on the joints that take it as an
    actuator force (``actuatorgravcomp``), zero elsewhere."""
    ids = np.array([model.body_id(b) for b in acts.gravity_compensation_bodies], np.int64)
    k = acts.gravity_compensation.astype(model.dtype)
    f_ext = gravity_compensation_f_ext(model, q, ids, k)
    zero = jnp.zeros(model.nv, model.dtype)
    # Jᵀ f = ID(q, 0, 0) - ID(q, 0, 0, f): the gravity terms cancel
    jf = inverse_dynamics(model, q, zero, zero) - inverse_dynamics(model, q, zero, zero, f_ext)
    mask = np.zeros(model.nv, bool)
    mask[list(acts.gravity_compensation_dofs)] = True
    return jnp.where(mask, jf, 0.0)


def gravity_compensation_f_ext(model, q, ids: np.ndarray, k):
    """MuJoCo's gravity compensation ``-k · m · g`` at the centres of mass of the bodies
    ``ids`` (static), as ``f_ext`` `(nbodies, 6)` (world coordinates, at the world origin);
    ``k`` is an array, so that `jax.grad` reaches it."""
    R, p = forward_kinematics(model, q)
    mass = model.inertia[ids, 0]
    com = model.inertia[ids, 1:4] / jnp.where(mass > 0, mass, 1.0)[:, None]
    c = jnp.einsum("kij,kj->ki", R[ids], com) + p[ids]
    f = -(k * mass)[:, None] * model.gravity[None, :]
    out = jnp.zeros((model.nbodies, 6), model.dtype)
    return out.at[ids].set(jnp.concatenate([jnp.cross(c, f), f], axis=1))


def activation_rate(
    actuators: Actuators, ctrl: Float[Array, "nctrl"], act: Float[Array, "na"]
) -> Float[Array, "na"]:
    """Time derivative of the activations, MuJoCo's ``act_dot``.

    ``act_dot = ctrl`` (clamped) for an integrator (``intvelocity``, ``dyntype="integrator"``),
    ``(ctrl - act) / time_constant`` for a filter; to be integrated with the state.

    Args:
        actuators: an `Actuators`.
        ctrl: controls `(actuators.nctrl,)`.
        act: activations `(actuators.na,)`.

    Returns:
        ``act_dot`` `(actuators.na,)`.

    Example:
        >>> xml = '''
        ... <mujoco>
        ...   <worldbody><body><joint name="j"/><geom size="0.1" mass="1"/></body></worldbody>
        ...   <actuator><intvelocity joint="j" kp="10" actrange="-1 1"/></actuator>
        ... </mujoco>'''
        >>> model, info = jaxrbd.load_mjcf(xml, return_info=True)
        >>> jaxrbd.activation_rate(info.actuators, jnp.array([0.5]), jnp.array([0.1])).tolist()
        [0.5]
    """
    if not isinstance(actuators, Actuators):
        raise TypeError(f"actuators must be an Actuators, got {type(actuators).__name__}")
    dtype = actuators.gear.dtype
    ctrl = check_vector("ctrl", ctrl, actuators.nctrl, "actuators.nctrl", dtype)
    act = check_vector("act", act, actuators.na, "actuators.na", dtype)
    idx = np.asarray(actuators.act_index, np.int64)
    stateful = idx >= 0
    if not stateful.any():
        return jnp.zeros(actuators.na, dtype)
    c, _ = _inputs(actuators, ctrl, act, dtype)
    a = act[np.where(stateful, idx, 0)]
    rate = _activation_rate(actuators, c, a, dtype)
    return jnp.zeros(actuators.na, dtype).at[idx[stateful]].set(rate[stateful])
