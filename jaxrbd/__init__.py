"""jaxrbd: differentiable, vectorised rigid-body dynamics in JAX.

The public surface: build a `Model` with `ModelBuilder` (or `load_urdf`), then call
the pure functions below, which all work under `jax.jit`, `jax.vmap` and `jax.grad`.
"""

# -- building and loading models --
from . import joints as joints
from . import models as models
from ._body import Body as Body
from ._body import Transform as Transform
from ._builder import ModelBuilder as ModelBuilder
from ._model import Model as Model
from ._model import CoupledModel as CoupledModel
from ._coupling import couple as couple
from .io import load_mjcf as load_mjcf
from .io import load_urdf as load_urdf
# -- spatial algebra --
from . import spatial as spatial
# -- dynamics --
from ._api import forward_dynamics as forward_dynamics
from ._api import minv_times as minv_times
from ._api import mass_matrix as mass_matrix
from ._api import bias_forces as bias_forces
from ._api import gravity_forces as gravity_forces
from ._api import inverse_dynamics as inverse_dynamics
# -- configuration space --
from ._api import difference as difference
from ._api import integrate as integrate
from ._api import neutral_configuration as neutral_configuration
from ._api import random_configuration as random_configuration
# -- compiling (backend tuning) --
from ._core.backend import compiler_options as compiler_options
from ._jit import jit as jit
# -- kinematics, mass properties, frames --
from ._api import forward_kinematics as forward_kinematics
from ._api import body_acceleration as body_acceleration
from ._api import body_accelerations as body_accelerations
from ._api import body_bias_acceleration as body_bias_acceleration
from ._api import body_jacobian as body_jacobian
from ._api import body_jacobians as body_jacobians
from ._api import body_velocities as body_velocities
from ._api import body_velocity as body_velocity
from ._api import point_acceleration as point_acceleration
from ._api import point_bias_acceleration as point_bias_acceleration
from ._api import point_jacobian as point_jacobian
from ._api import point_position as point_position
from ._api import point_velocity as point_velocity
from ._api import center_of_mass as center_of_mass
from ._api import center_of_mass_acceleration as center_of_mass_acceleration
from ._api import center_of_mass_jacobian as center_of_mass_jacobian
from ._api import center_of_mass_velocity as center_of_mass_velocity
from ._api import centroidal_momentum as centroidal_momentum
from ._api import centroidal_momentum_bias as centroidal_momentum_bias
from ._api import centroidal_momentum_matrix as centroidal_momentum_matrix
from ._api import kinetic_energy as kinetic_energy
from ._api import potential_energy as potential_energy
from ._api import system_inertia as system_inertia
from ._api import total_mass as total_mass
# -- inverse kinematics --
from ._ik import IKResult as IKResult
from ._ik import IKTarget as IKTarget
from ._api import inverse_kinematics as inverse_kinematics
# -- Denavit-Hartenberg models --
from ._dh import DHLink as DHLink
from ._dh import dh_model as dh_model
from ._dh import dh_transform as dh_transform
# -- inertial parameters and regressor --
from ._parameters import from_log_cholesky as from_log_cholesky
from ._parameters import inertial_parameters as inertial_parameters
from ._api import inverse_dynamics_regressor as inverse_dynamics_regressor
from ._parameters import is_physically_consistent as is_physically_consistent
from ._parameters import to_log_cholesky as to_log_cholesky
from ._parameters import with_inertial_parameters as with_inertial_parameters
# -- integrators and rollouts --
from ._integrators import rollout as rollout
from ._integrators import step as step
# -- force elements --
from ._forces import AbstractForceElement as AbstractForceElement
from ._forces import JointDamper as JointDamper
from ._forces import JointFriction as JointFriction
from ._forces import JointSpring as JointSpring
from ._forces import PassiveJointForces as PassiveJointForces
from ._forces import passive_forces as passive_forces
from ._forces import PointToPointSpringDamper as PointToPointSpringDamper
from ._forces import SpringDamperDrive as SpringDamperDrive
from ._forces import UserForce as UserForce
# -- actuators (MuJoCo's actuation model) --
from ._actuation import Actuators as Actuators
from ._actuation import activation_rate as activation_rate
from ._forces import elastic_potential_energy as elastic_potential_energy
from ._forces import generalized_forces as generalized_forces
# -- hybrid dynamics --
from ._api import hybrid_dynamics as hybrid_dynamics
# -- contacts and constraints --
from ._constraints import ConstraintSet as ConstraintSet
from ._api import constraint_bias as constraint_bias
from ._api import constraint_jacobian as constraint_jacobian
from ._api import constraint_residual as constraint_residual
from ._api import constraint_velocity_residual as constraint_velocity_residual
from ._api import assemble_q as assemble_q
from ._api import assemble_qd as assemble_qd
from ._api import contact_impulses as contact_impulses
from ._api import forward_dynamics_contacts as forward_dynamics_contacts
# -- derivatives / sensitivities --
from ._api import forward_dynamics_derivatives as forward_dynamics_derivatives
from ._api import forward_dynamics_parameter_derivatives as forward_dynamics_parameter_derivatives
from ._api import inverse_dynamics_derivatives as inverse_dynamics_derivatives
# deprecated alias of inverse_dynamics_regressor
from ._api import inverse_dynamics_parameter_derivatives as inverse_dynamics_parameter_derivatives
from ._derivatives import model_derivatives as model_derivatives
# -- RBDL parity: constrained inverse dynamics, zero-moment point --
from ._api import actuation as actuation
from ._api import actuation_mask as actuation_mask
from ._api import inverse_dynamics_constraints as inverse_dynamics_constraints
from ._api import inverse_dynamics_constraints_relaxed as inverse_dynamics_constraints_relaxed
from ._constrained_dynamics import solve_constrained_system as solve_constrained_system
from ._api import zero_moment_point as zero_moment_point
# -- markers, motion capture and estimation --
from ._markers import MarkerSet as MarkerSet
from ._api import marker_jacobian as marker_jacobian
from ._api import marker_kinematics as marker_kinematics
from ._api import marker_positions as marker_positions
from . import estimation as estimation
from . import identification as identification
from . import mocap as mocap
# -- batches, ground contact, reference algorithms, visualisation --
from . import batched as batched
from . import ground as ground
from . import reference as reference
from . import viewer as viewer
from . import viz as viz

__version__ = "0.1.0"
