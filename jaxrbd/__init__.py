"""jaxrbd: differentiable, vectorised rigid-body dynamics in JAX."""

from . import joints as joints
from . import spatial as spatial
from ._body import Body as Body
from ._body import Transform as Transform
from ._builder import ModelBuilder as ModelBuilder
from ._model import Model as Model
from .io import load_urdf as load_urdf

__version__ = "0.1.0"
