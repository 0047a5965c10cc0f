"""The public functions that take a model, each made once from its plain door and its
coupled variant (`jaxrbd._coupling.dispatch`); `jaxrbd/__init__.py` re-exports them.

The tables `COUPLED` and `PLAIN_ONLY` are the one place where a public name chooses
between a `Model` and a `CoupledModel`: a name in `COUPLED` is ``dispatch(door,
variant)``, which runs the variant of the same name in `jaxrbd._coupled` on a
`CoupledModel`; a name in `PLAIN_ONLY` is ``dispatch(door)``, which raises the shared "not
supported for coupled models" error (`jaxrbd._coupling.unsupported`). The plain functions never test the
model's kind. The features above this floor (`jaxrbd._integrators`, `jaxrbd.ground`,
`jaxrbd._forces`, `jaxrbd.estimation`, `jaxrbd.batched`, ...) import the public functions
from here, so they take a `CoupledModel` wherever their parts do; one of them without a
coupled variant is decorated ``@dispatch`` where it is defined (`passive_forces`).

Adding a public function ``f(model, ...)``: write it in its module, write its coupled
variant ``f`` in `jaxrbd._coupled` (or decide it has none), add ``"f"`` under its module
in `COUPLED` (or `PLAIN_ONLY`) and re-export it in `jaxrbd/__init__.py`;
`tests/test_layers.py` calls every public name on a `CoupledModel`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from . import (
    _actuation,
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
from ._core.checks import scoped, warn_deprecated
from ._coupling import dispatch
from ._jit import compiled_when_eager

# ---------------------------------------------------------------- the table

#: the public names with a coupled variant of the same name in `jaxrbd._coupled`, by the
#: module of their door
COUPLED = {
    _dynamics: ("forward_dynamics", "minv_times", "mass_matrix", "inverse_dynamics",
                "bias_forces", "gravity_forces"),
    _hybrid: ("hybrid_dynamics",),
    _configuration: ("integrate", "difference", "neutral_configuration",
                     "random_configuration"),
    _kinematics: ("forward_kinematics", "body_velocities", "body_accelerations",
                  "body_jacobians", "body_velocity", "body_acceleration",
                  "body_bias_acceleration", "body_jacobian", "point_position", "point_velocity",
                  "point_acceleration", "point_bias_acceleration", "point_jacobian"),
    _energy: ("total_mass", "center_of_mass", "center_of_mass_velocity",
              "center_of_mass_acceleration", "center_of_mass_jacobian", "centroidal_momentum",
              "centroidal_momentum_matrix", "centroidal_momentum_bias", "kinetic_energy",
              "potential_energy", "system_inertia"),
    _zmp: ("zero_moment_point",),
    _constraints: ("constraint_jacobian", "constraint_bias", "constraint_residual",
                   "constraint_velocity_residual"),
    _contacts: ("forward_dynamics_contacts", "contact_impulses"),
    _actuation: ("actuation",),
    _constrained_dynamics: ("actuation_mask", "inverse_dynamics_constraints",
                            "inverse_dynamics_constraints_relaxed"),
    _derivatives: ("forward_dynamics_derivatives", "inverse_dynamics_derivatives",
                   "forward_dynamics_parameter_derivatives"),
    _parameters: ("inverse_dynamics_regressor",),
}

#: the public names without a coupled variant: a `CoupledModel` gets the shared error
PLAIN_ONLY = {
    _ik: ("inverse_kinematics",),
    _contacts: ("assemble_q", "assemble_qd"),
    _markers: ("marker_positions", "marker_jacobian", "marker_kinematics"),
}

#: the public names that stay eager when called outside a trace: their results are not
#: all arrays (`actuation_mask` returns a NumPy mask)
EAGER = ("actuation_mask",)


def _public(name, door, variant=None):
    public = dispatch(door, variant) if variant is not None else dispatch(door)
    return public if name in EAGER else compiled_when_eager(public)


#: public name -> its function (`dispatch` of its door and its coupled variant, or of its
#: door alone, compiled as one program when called eagerly: `compiled_when_eager`); bound
#: as the names of this module below
PUBLIC = {
    **{name: _public(name, getattr(module, name), getattr(_coupled, name))
       for module, names in COUPLED.items() for name in names},
    **{name: _public(name, getattr(module, name))
       for module, names in PLAIN_ONLY.items() for name in names},
}
globals().update(PUBLIC)


def inverse_dynamics_parameter_derivatives(model, q, qd, qdd):
    """Deprecated alias of `jaxrbd.inverse_dynamics_regressor` (the same matrix ``Y``,
    `(nv, nbodies * 10)`, ``inverse_dynamics == Y @ model.inertia.ravel()``).

    Warns once (`DeprecationWarning`); call `jaxrbd.inverse_dynamics_regressor` instead.
    """
    warn_deprecated("jaxrbd.inverse_dynamics_parameter_derivatives",
                    "jaxrbd.inverse_dynamics_regressor")
    return PUBLIC["inverse_dynamics_regressor"](model, q, qd, qdd)


# ---------------------------------------------------------------- the features' kernels


class Kernels(NamedTuple):
    """The parts of a time step on one kind of model, for a state that its feature's door
    (`jaxrbd.step`, `jaxrbd.ground.step`, ...) has checked once: no argument checks, no
    kind tests inside. Get them with `kernels`; each takes the model first."""

    #: ``(model, q, qd, tau) -> qdd`` (no ``f_ext``)
    forward_dynamics: Callable
    #: ``(model, q) -> H (nv, nv)``
    mass_matrix: Callable
    #: ``(model, q, qd) -> C (nv,)`` (no ``f_ext``)
    bias_forces: Callable
    #: ``(model, q, p (K, 3), bodies) -> (K, 3)``: world positions of body points
    point_positions: Callable
    #: ``(model, q, p (K, 3), bodies) -> (K, 6, nv)``: `body_jacobian`, ``frame="world"``
    world_jacobians: Callable
    #: ``(model, q, v, dt) -> q (+) v dt`` on the joint manifolds
    move: Callable
    #: ``(model, q, v_move, v_end, dt) -> (q, v)``: a time step's move
    #: (`jaxrbd._configuration.advance`)
    advance: Callable
    #: ``(model, v) -> (nv,)``: `jaxrbd._configuration.frame_rate`
    frame_rate: Callable
    #: whether ``forward_dynamics`` runs the analytic rule, whose derivative matrices
    #: carry `jaxrbd._dynamics.DERIVATIVE_MATRICES` (the RK4 stages' checkpoints)
    analytic_rule: bool


# each under the named scope of its public door, as when the features called the doors
_PLAIN = Kernels(
    forward_dynamics=scoped("forward_dynamics", lambda model, q, qd, tau: (
        _dynamics.forward_dynamics_rule(model, q, qd, tau, None, "aba"))),
    mass_matrix=scoped("mass_matrix", _dynamics.mass_matrix_rule),
    bias_forces=scoped("bias_forces", _dynamics.bias_forces_rule),
    point_positions=scoped("point_position", _kinematics.point_positions),
    world_jacobians=scoped("body_jacobian", _kinematics.world_jacobians),
    move=_configuration.move,
    advance=_configuration.advance,
    frame_rate=_configuration.frame_rate,
    analytic_rule=True,
)

_COUPLED = Kernels(
    forward_dynamics=_coupled.forward_dynamics_kernel,
    mass_matrix=_coupled.mass_matrix_kernel,
    bias_forces=_coupled.bias_forces_kernel,
    point_positions=_coupled.point_positions,
    world_jacobians=_coupled.world_jacobians,
    move=_coupled.move,
    advance=_coupled.advance,
    frame_rate=_coupled.frame_rate,
    analytic_rule=False,
)


def _plain_kernels(model) -> Kernels:
    return _PLAIN


def _coupled_kernels(cm) -> Kernels:
    return _COUPLED


#: ``kernels(model)``: the `Kernels` of ``model``'s kind (one model check, one kind test)
kernels = dispatch(_plain_kernels, _coupled_kernels)
