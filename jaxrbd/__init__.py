"""jaxrbd: differentiable, vectorised rigid-body dynamics in JAX.

The public surface: build a `Model` with `ModelBuilder` (or `load_urdf`), then call
the pure functions below, which all work under `jax.jit`, `jax.vmap` and `jax.grad`.
"""

from . import joints as joints
from . import models as models
from . import spatial as spatial
from ._aba import forward_dynamics as forward_dynamics
from ._aba import minv_times as minv_times
from ._body import Body as Body
from ._body import Transform as Transform
from ._builder import ModelBuilder as ModelBuilder
from ._configuration import difference as difference
from ._configuration import integrate as integrate
from ._configuration import neutral_configuration as neutral_configuration
from ._configuration import random_configuration as random_configuration
from ._crba import mass_matrix as mass_matrix
from ._kinematics import forward_kinematics as forward_kinematics
from ._model import Model as Model
from ._rnea import bias_forces as bias_forces
from ._rnea import gravity_forces as gravity_forces
from ._rnea import inverse_dynamics as inverse_dynamics
from . import batched as batched
from .io import load_urdf as load_urdf

__version__ = "0.1.0"
