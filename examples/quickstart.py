"""Quickstart: a two-link arm; forward and inverse dynamics, jit, vmap and grad.

Run with ``python examples/quickstart.py``. Uses the public API only.
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, joints

jax.config.update("jax_enable_x64", True)  # float64, as for checking against RBDL/Pinocchio

# --- 1. Build a planar two-link arm hanging under gravity (links swing about y). ---------
# Each link is a 1 m rod of 1 kg with its centre of mass half-way down (-z in its frame).
rod = Body(mass=1.0, com=(0.0, 0.0, -0.5), inertia=np.diag([1 / 12, 1 / 12, 1e-4]))
b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
b.add_body("upper_arm", parent="world", joint=joints.revolute((0, 1, 0)), body=rod,
           joint_name="shoulder")
b.add_body("forearm", parent="upper_arm", joint=joints.revolute((0, 1, 0)), body=rod,
           placement=Transform(translation=(0.0, 0.0, -1.0)), joint_name="elbow")
model = b.build()  # an immutable equinox Module (a pytree)
print(model)

# --- 2. Forward dynamics (ABA) and the inverse-dynamics round trip (RNEA). --------------
# Every function is pure and unbatched; wrap it in jax.jit (compiled once per model
# structure, then fast; calling it un-jitted works too, op by op).
fd = jax.jit(jaxrbd.forward_dynamics)
rnea = jax.jit(jaxrbd.inverse_dynamics)
q = jnp.array([0.3, -0.5])      # [rad]
qd = jnp.array([0.1, 0.2])      # [rad/s]
tau = jnp.array([1.0, -0.5])    # [N m]
qdd = fd(model, q, qd, tau)
print("qdd = forward_dynamics    =", qdd)
print("inverse_dynamics(qdd)     =", rnea(model, q, qd, qdd), " (equals tau)")


@jax.jit
def residual(model, q, qd, qdd, tau):
    """H(q) qdd + C(q, qd) - tau: the equation of motion (CRBA + RNEA)."""
    H = jaxrbd.mass_matrix(model, q)
    return H @ qdd + jaxrbd.bias_forces(model, q, qd) - tau


print("H qdd + C - tau           =", residual(model, q, qd, qdd, tau))

# --- 3. vmap: many states at once (the model is shared: in_axes=None). -----------------
n = 1000
Q = jax.random.uniform(jax.random.key(0), (n, model.nq), minval=-np.pi, maxval=np.pi)
QD = jnp.zeros((n, model.nv))
TAU = jnp.zeros((n, model.nv))
QDD = jax.jit(jax.vmap(jaxrbd.forward_dynamics, in_axes=(None, 0, 0, 0)))(model, Q, QD, TAU)
print(f"vmap over {n} states      -> qdd of shape {QDD.shape}")
# the same with the batch-first helpers in jaxrbd.batched
QDD2 = jax.jit(jaxrbd.batched.forward_dynamics)(model, Q, QD, TAU)
print("batched == vmap           :", bool(jnp.allclose(QDD, QDD2)))

# --- 4. grad: with respect to the state, the torques, or the model itself. -------------
# d qdd / d tau is the inverse of the mass matrix
J = jax.jit(jax.jacfwd(jaxrbd.forward_dynamics, argnums=3))(model, q, qd, tau)
H = jax.jit(jaxrbd.mass_matrix)(model, q)
print("d qdd / d tau == H^-1     :", bool(jnp.allclose(J, jnp.linalg.inv(H))))


# a scalar loss of the model: its gradient is a Model with the same structure
def loss(model):
    return jnp.sum(jaxrbd.forward_dynamics(model, q, qd, tau) ** 2)


g = jax.jit(jax.grad(loss))(model)
# model.inertia rows are [m, m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz] about the body origin
print("d loss / d inertia[forearm] =", g.inertia[model.body_id("forearm")])
print("d loss / d gravity          =", g.gravity)
