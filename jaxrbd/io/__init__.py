"""Model loaders."""

from ._urdf import load_urdf as load_urdf
