"""The public functions that take a model, each made once from its plain door and its
coupled variant (`jaxrbd._coupling.dispatch`); `jaxrbd/__init__.py` re-exports them.

A line here is the one place where a public name chooses between a `Model` and a
`CoupledModel`: ``dispatch(plain, coupled)`` runs ``coupled`` (from `jaxrbd._coupled`) on
a `CoupledModel`, and ``dispatch(plain)`` raises the shared "not supported for coupled
models" error (`jaxrbd._coupling.unsupported`). The plain functions never test the
model's kind. The features above this floor (`jaxrbd._integrators`, `jaxrbd.ground`,
`jaxrbd._forces`, `jaxrbd.estimation`, `jaxrbd.batched`, ...) import the public functions
from here, so they take a `CoupledModel` wherever their parts do; one of them without a
coupled variant is decorated ``@dispatch`` where it is defined (`passive_forces`).

Adding a public function ``f(model, ...)``: write it in its module, write its coupled
variant in `jaxrbd._coupled` (or decide it has none), add ``f = dispatch(...)`` below and
re-export it in `jaxrbd/__init__.py`; `tests/test_layers.py` calls every public name on
a `CoupledModel`.
"""

from __future__ import annotations

from . import (
    _configuration,
    _constrained_dynamics,
    _constraints,
    _contacts,
    _coupled,
    _derivatives,
    _dynamics,
    _energy,
    _hybrid,
    _ik,
    _kinematics,
    _markers,
    _parameters,
    _zmp,
)
from ._core.checks import warn_deprecated
from ._coupling import dispatch

# ---------------------------------------------------------------- dynamics
forward_dynamics = dispatch(_dynamics.forward_dynamics, _coupled.forward_dynamics)
minv_times = dispatch(_dynamics.minv_times, _coupled.minv_times)
mass_matrix = dispatch(_dynamics.mass_matrix, _coupled.mass_matrix)
inverse_dynamics = dispatch(_dynamics.inverse_dynamics, _coupled.inverse_dynamics)
bias_forces = dispatch(_dynamics.bias_forces, _coupled.bias_forces)
gravity_forces = dispatch(_dynamics.gravity_forces, _coupled.gravity_forces)
hybrid_dynamics = dispatch(_hybrid.hybrid_dynamics, _coupled.hybrid_dynamics)

# ---------------------------------------------------------------- configuration space
integrate = dispatch(_configuration.integrate, _coupled.integrate)
difference = dispatch(_configuration.difference, _coupled.difference)
neutral_configuration = dispatch(
    _configuration.neutral_configuration, _coupled.neutral_configuration
)
random_configuration = dispatch(_configuration.random_configuration, _coupled.random_configuration)

# ---------------------------------------------------------------- kinematics
forward_kinematics = dispatch(_kinematics.forward_kinematics, _coupled.forward_kinematics)
body_velocities = dispatch(_kinematics.body_velocities, _coupled.body_velocities)
body_accelerations = dispatch(_kinematics.body_accelerations, _coupled.body_accelerations)
body_jacobians = dispatch(_kinematics.body_jacobians, _coupled.body_jacobians)
body_velocity = dispatch(_kinematics.body_velocity, _coupled.body_velocity)
body_acceleration = dispatch(_kinematics.body_acceleration, _coupled.body_acceleration)
body_bias_acceleration = dispatch(
    _kinematics.body_bias_acceleration, _coupled.body_bias_acceleration
)
body_jacobian = dispatch(_kinematics.body_jacobian, _coupled.body_jacobian)
point_position = dispatch(_kinematics.point_position, _coupled.point_position)
point_velocity = dispatch(_kinematics.point_velocity, _coupled.point_velocity)
point_acceleration = dispatch(_kinematics.point_acceleration, _coupled.point_acceleration)
point_bias_acceleration = dispatch(
    _kinematics.point_bias_acceleration, _coupled.point_bias_acceleration
)
point_jacobian = dispatch(_kinematics.point_jacobian, _coupled.point_jacobian)

# ---------------------------------------------------------------- mass properties, momentum
total_mass = dispatch(_energy.total_mass, _coupled.total_mass)
center_of_mass = dispatch(_energy.center_of_mass, _coupled.center_of_mass)
center_of_mass_velocity = dispatch(
    _energy.center_of_mass_velocity, _coupled.center_of_mass_velocity
)
center_of_mass_acceleration = dispatch(
    _energy.center_of_mass_acceleration, _coupled.center_of_mass_acceleration
)
center_of_mass_jacobian = dispatch(
    _energy.center_of_mass_jacobian, _coupled.center_of_mass_jacobian
)
centroidal_momentum = dispatch(_energy.centroidal_momentum, _coupled.centroidal_momentum)
centroidal_momentum_matrix = dispatch(
    _energy.centroidal_momentum_matrix, _coupled.centroidal_momentum_matrix
)
centroidal_momentum_bias = dispatch(
    _energy.centroidal_momentum_bias, _coupled.centroidal_momentum_bias
)
kinetic_energy = dispatch(_energy.kinetic_energy, _coupled.kinetic_energy)
potential_energy = dispatch(_energy.potential_energy, _coupled.potential_energy)
system_inertia = dispatch(_energy.system_inertia, _coupled.system_inertia)
zero_moment_point = dispatch(_zmp.zero_moment_point, _coupled.zero_moment_point)

# ---------------------------------------------------------------- constraints and contacts
constraint_jacobian = dispatch(_constraints.constraint_jacobian, _coupled.constraint_jacobian)
constraint_bias = dispatch(_constraints.constraint_bias, _coupled.constraint_bias)
constraint_residual = dispatch(_constraints.constraint_residual, _coupled.constraint_residual)
constraint_velocity_residual = dispatch(
    _constraints.constraint_velocity_residual, _coupled.constraint_velocity_residual
)
forward_dynamics_contacts = dispatch(
    _contacts.forward_dynamics_contacts, _coupled.forward_dynamics_contacts
)
contact_impulses = dispatch(_contacts.contact_impulses, _coupled.contact_impulses)
actuation_mask = dispatch(_constrained_dynamics.actuation_mask, _coupled.actuation_mask)
inverse_dynamics_constraints = dispatch(
    _constrained_dynamics.inverse_dynamics_constraints, _coupled.inverse_dynamics_constraints
)
inverse_dynamics_constraints_relaxed = dispatch(
    _constrained_dynamics.inverse_dynamics_constraints_relaxed,
    _coupled.inverse_dynamics_constraints_relaxed,
)

# ---------------------------------------------------------------- derivatives, parameters
forward_dynamics_derivatives = dispatch(
    _derivatives.forward_dynamics_derivatives, _coupled.forward_dynamics_derivatives
)
inverse_dynamics_derivatives = dispatch(
    _derivatives.inverse_dynamics_derivatives, _coupled.inverse_dynamics_derivatives
)
forward_dynamics_parameter_derivatives = dispatch(
    _derivatives.forward_dynamics_parameter_derivatives,
    _coupled.forward_dynamics_parameter_derivatives,
)
inverse_dynamics_regressor = dispatch(
    _parameters.inverse_dynamics_regressor, _coupled.inverse_dynamics_regressor
)


def inverse_dynamics_parameter_derivatives(model, q, qd, qdd):
    """Deprecated alias of `jaxrbd.inverse_dynamics_regressor` (the same matrix ``Y``,
    `(nv, nbodies * 10)`, ``inverse_dynamics == Y @ model.inertia.ravel()``).

    Warns once (`DeprecationWarning`); call `jaxrbd.inverse_dynamics_regressor` instead.
    """
    warn_deprecated("jaxrbd.inverse_dynamics_parameter_derivatives",
                    "jaxrbd.inverse_dynamics_regressor")
    return inverse_dynamics_regressor(model, q, qd, qdd)


# ---------------------------------------------------------------- not for coupled models
inverse_kinematics = dispatch(_ik.inverse_kinematics)
assemble_q = dispatch(_contacts.assemble_q)
assemble_qd = dispatch(_contacts.assemble_qd)
marker_positions = dispatch(_markers.marker_positions)
marker_jacobian = dispatch(_markers.marker_jacobian)
marker_kinematics = dispatch(_markers.marker_kinematics)


# ---------------------------------------------------------------- entries of the features


#: ``q (+) v dt`` for a state the caller has checked (the integrators' stages); a
#: `CoupledModel` goes through its public `integrate`
move = dispatch(_configuration.move, _coupled.integrate)


def advance(model, q, v_move, v_end, dt):
    """`jaxrbd._configuration.advance` (a time step's move, free joints kept straight)
    with the ``move`` of ``model``'s kind."""
    return _configuration.advance(model, q, v_move, v_end, dt, mover=move)

#: whether `forward_dynamics` of ``model`` runs the analytic rule, whose derivative
#: matrices carry `jaxrbd._dynamics.DERIVATIVE_MATRICES` (the RK4 stages' checkpoints)
has_analytic_rule = dispatch(lambda model: True, lambda model: False)
