"""Shared test helpers: random trees and states, comparisons, finite differences.

Imported by the test modules as ``helpers`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, joints

#: (robot, floating_base) of the Pinocchio reference data in ``tests/data``.
REFERENCE_ROBOTS: tuple[tuple[str, bool], ...] = (
    ("panda", False),
    ("solo12", True),
    ("talos", True),
)

#: Every joint kind `random_tree` can build (constructor names of `jaxrbd.joints`).
ALL_KINDS: tuple[str, ...] = (
    "revolute",
    "prismatic",
    "helical",
    "fixed",
    "spherical",
    "free",
    "euler_zyx",
    "euler_xyz",
    "euler_yxz",
    "translation_xyz",
    "custom",
    "planar",
)

# ----------------------------------------------------------------------------- rotations


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random rotation matrix (from a normalised Gaussian quaternion)."""
    return quat_to_matrix(rng.normal(size=4))


def quat_to_matrix(quat) -> np.ndarray:
    """Rotation matrix of a unit quaternion ``(w, x, y, z)`` (maps child to parent)."""
    w, x, y, z = np.asarray(quat, dtype=np.float64) / np.linalg.norm(quat)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


# ----------------------------------------------------------------------------- bodies


def random_body(rng: np.random.Generator, mass_range=(0.5, 2.0)) -> Body:
    """A physically valid body: random mass, CoM and rotated principal inertia.

    The principal moments come from random second moments ``a, b, c > 0`` of the mass
    distribution, ``(b + c, a + c, a + b)``, so they satisfy the triangle inequality.
    """
    mass = rng.uniform(*mass_range)
    com = rng.uniform(-0.3, 0.3, size=3)
    a, b, c = mass * rng.uniform(0.005, 0.05, size=3)
    R = random_rotation(rng)
    inertia = R @ np.diag([b + c, a + c, a + b]) @ R.T
    return Body(mass, com, 0.5 * (inertia + inertia.T))


def random_placement(rng: np.random.Generator) -> Transform:
    return Transform(rotation=random_rotation(rng), translation=rng.uniform(-0.5, 0.5, size=3))


def combine_bodies(b1: Body, b2: Body, placement: Transform) -> Body:
    """The single body equal to ``b1`` plus ``b2`` rigidly attached at ``placement``
    (``b2``'s frame in ``b1``'s frame), in ``b1``'s frame."""
    m1, c1, I1 = b1.arrays()
    m2, c2, I2 = b2.arrays()
    R, r = placement.arrays()
    c2 = r + R @ c2
    I2 = R @ I2 @ R.T
    m = m1 + m2
    c = (m1 * c1 + m2 * c2) / m

    def shift(mi, d):  # parallel-axis term
        return mi * (np.dot(d, d) * np.eye(3) - np.outer(d, d))

    return Body(m, c, I1 + shift(m1, c1 - c) + I2 + shift(m2, c2 - c))


# ----------------------------------------------------------------------------- joints


def random_custom_columns(rng: np.random.Generator, k: int) -> np.ndarray:
    """``k`` independent screw columns ``[w; v]``: revolute, prismatic or helical about
    the axes of a random frame (so the DoFs are never redundant)."""
    Q = random_rotation(rng)
    cols = np.zeros((k, 6))
    axes = rng.permutation(3)
    for j in range(k):
        a = Q[:, axes[j]]
        kind = rng.integers(3)
        if kind == 0:
            cols[j, :3] = a
        elif kind == 1:
            cols[j, 3:] = a
        else:
            cols[j, :3], cols[j, 3:] = a, rng.uniform(-0.3, 0.3) * a
    return cols


def make_joint(kind: str, rng: np.random.Generator, ncols: int | None = None):
    """A `jaxrbd.joints` spec of the named kind with random axes where it has any."""
    if kind in ("revolute", "prismatic"):
        return getattr(joints, kind)(rng.normal(size=3))
    if kind == "helical":
        return joints.helical(rng.normal(size=3), pitch=rng.uniform(-0.2, 0.2))
    if kind == "custom":
        return joints.custom(random_custom_columns(rng, ncols or int(rng.integers(1, 4))))
    return getattr(joints, kind)()


def random_tree(
    seed: int,
    nbodies: int = 8,
    kinds: Sequence[str] | None = None,
    parents: Sequence[int] | None = None,
    custom_cols: Sequence[int] | None = None,
    gravity=(0.0, 0.0, -9.81),
    dtype=None,
):
    """A random kinematic tree of ``nbodies`` bodies (world not counted).

    Args:
        seed: seeds every number (axes, inertias, placements, unspecified structure).
        kinds: joint kind of each body (entries of `ALL_KINDS`); default: cycle through
            `ALL_KINDS` in a random order, so 12+ bodies use every kind.
        parents: parent of each body, ``parents[i] in range(i + 1)`` (0 = world, body
            ``i`` is ``i + 1``); default: random (branching).
        custom_cols: number of columns (1-3) of each custom joint; default: random.

    Returns:
        A `Model`. Body ``i + 1`` is named ``"b{i+1}"``, its joint ``"j{i+1}"``.
    """
    rng = np.random.default_rng(seed)
    if kinds is None:
        order = rng.permutation(len(ALL_KINDS))
        kinds = [ALL_KINDS[order[i % len(ALL_KINDS)]] for i in range(nbodies)]
    if parents is None:
        parents = [int(rng.integers(i + 1)) for i in range(nbodies)]
    if len(kinds) != nbodies or len(parents) != nbodies:
        raise ValueError("kinds and parents need one entry per body")
    b = ModelBuilder(gravity=gravity)
    for i, (kind, parent) in enumerate(zip(kinds, parents)):
        ncols = None if custom_cols is None else custom_cols[i]
        b.add_body(
            f"b{i + 1}",
            parent,
            make_joint(kind, rng, ncols),
            random_body(rng),
            random_placement(rng),
            joint_name=f"j{i + 1}",
        )
    return b.build(dtype)


def random_state(model, key, scale: float = 1.0):
    """``(q, qd, qdd, tau)`` for ``model``: a random configuration (unit quaternions),
    and velocities, accelerations and forces uniform in ``[-scale, scale]``."""
    kq, kv, ka, kt = jax.random.split(key, 4)
    q = jaxrbd.random_configuration(model, kq)
    shape, dt = (model.nv,), model.dtype
    qd = jax.random.uniform(kv, shape, dt, -scale, scale)
    qdd = jax.random.uniform(ka, shape, dt, -scale, scale)
    tau = jax.random.uniform(kt, shape, dt, -scale, scale)
    return q, qd, qdd, tau


def random_f_ext(model, key, scale: float = 1.0):
    """Random external forces ``(nbodies, 6)`` (row 0, the world, zero)."""
    f = jax.random.uniform(key, (model.nbodies, 6), model.dtype, -scale, scale)
    return f.at[0].set(0.0)


def quaternion_blocks(model) -> list[slice]:
    """Slices of ``q`` holding quaternions (spherical and free joints)."""
    out = []
    for b in range(1, model.nbodies):
        kind, s = model.joint_kind[b], model.q_start[b]
        if kind == "spherical":
            out.append(slice(s, s + 4))
        elif kind == "free":
            out.append(slice(s + 3, s + 7))
    return out


# ----------------------------------------------------------------------------- comparisons


def assert_allclose(a, b, *, rtol: float = 1e-10, atol: float = 0.0, name: str = ""):
    """``max |a - b| <= atol + rtol * max |b|`` (norm-wise, robust to zero entries).

    The failure message names the quantity, the largest error, where it is and the
    scale it was measured against.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"{name}: shapes differ, {a.shape} vs {b.shape}")
    if a.size == 0:
        return
    if not np.all(np.isfinite(a)):
        raise AssertionError(f"{name}: non-finite values in the result:\n{a}")
    err = np.abs(a - b)
    scale = float(np.max(np.abs(b)))
    bound = atol + rtol * scale
    worst = float(err.max())
    if not worst <= bound:
        where = np.unravel_index(int(np.argmax(err)), err.shape)
        raise AssertionError(
            f"{name}: max |a - b| = {worst:.3e} at {tuple(int(i) for i in where)} "
            f"(a = {a[where]:.17g}, b = {b[where]:.17g}) exceeds {bound:.3e} "
            f"= atol {atol:.1e} + rtol {rtol:.1e} * max|b| {scale:.3e}"
        )


def relative_error(a, b) -> float:
    """``max |a - b| / max(1, max |b|)``."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


# ----------------------------------------------------------------------------- finite differences


def curve(model, f: Callable, q, dq, args=(), dargs=None):
    """The one-parameter family ``t -> f(integrate(q, t dq), *(args + t dargs))``.

    Configurations move on the joint manifolds (quaternions stay unit), every other
    argument moves linearly; ``d/dt`` at 0 is the directional derivative of ``f`` along
    the velocity ``dq``.
    """
    if dargs is None:
        dargs = tuple(jnp.zeros_like(a) for a in args)

    def g(t):
        qt = jaxrbd.integrate(model, q, t * dq)
        return f(qt, *(a + t * da for a, da in zip(args, dargs)))

    return g


def fd_jvp(f: Callable, model, q, dq, args=(), dargs=None, eps: float = 1e-6):
    """Central-difference directional derivative of ``f(q, *args)`` along ``(dq, dargs)``,
    with the configuration perturbed through `jaxrbd.integrate` (see `curve`).

    Pass a jitted ``f``: it is evaluated twice, at ``t = +-eps``. Any pytree output.
    """
    g = curve(model, f, q, dq, args, dargs)
    plus, minus = g(eps), g(-eps)
    return jax.tree_util.tree_map(
        lambda a, b: (np.asarray(a) - np.asarray(b)) / (2 * eps), plus, minus
    )


# ----------------------------------------------------------------------------- shared jits and models

#: Jitted public functions shared by the whole suite (see ``conftest.jitted``). A jit
#: compiles once per model structure and argument shapes, so sharing these objects
#: shares compilations between tests and files.
JIT: dict[str, Callable] = {
    "forward_dynamics": jax.jit(jaxrbd.forward_dynamics, static_argnames="method"),
    "inverse_dynamics": jax.jit(jaxrbd.inverse_dynamics),
    "mass_matrix": jax.jit(jaxrbd.mass_matrix),
    "bias_forces": jax.jit(jaxrbd.bias_forces),
    "gravity_forces": jax.jit(jaxrbd.gravity_forces),
    "minv_times": jax.jit(jaxrbd.minv_times),
    "forward_kinematics": jax.jit(jaxrbd.forward_kinematics),
    "integrate": jax.jit(jaxrbd.integrate),
    "difference": jax.jit(jaxrbd.difference),
    "random_configuration": jax.jit(jaxrbd.random_configuration),
    "batched.forward_dynamics": jax.jit(jaxrbd.batched.forward_dynamics),
    "batched.inverse_dynamics": jax.jit(jaxrbd.batched.inverse_dynamics),
    "batched.mass_matrix": jax.jit(jaxrbd.batched.mass_matrix),
}


def _mixed_tree():
    """Small tree with a floating base, a ball joint, a fixed body and plain joints."""
    return random_tree(
        3,
        5,
        kinds=["free", "spherical", "revolute", "fixed", "euler_zyx"],
        parents=[0, 1, 1, 3, 2],
    )


class _Zoo(dict):
    """Lazily built shared models (one instance each, so jit caches are shared)."""

    _makers: ClassVar[dict[str, Callable]] = {
        # every joint kind once (12 bodies), random branching
        "all_kinds": lambda: random_tree(12345, len(ALL_KINDS)),
        "mixed": _mixed_tree,
        "triple_pendulum": lambda: jaxrbd.models.triple_pendulum(),
        "humanoid": lambda: jaxrbd.models.humanoid(),
    }

    def __missing__(self, name):
        self[name] = self._makers[name]()
        return self[name]


ZOO = _Zoo()


def doctest_globals() -> dict:
    """The namespace the docstring examples of ``jaxrbd`` assume."""
    model = jaxrbd.models.triple_pendulum()
    k0, k1, k2 = jax.random.split(jax.random.key(0), 3)
    return {
        "jaxrbd": jaxrbd,
        "jnp": jnp,
        "np": np,
        "jax": jax,
        "model": model,
        "q": jaxrbd.random_configuration(model, k0),
        "q0": jaxrbd.random_configuration(model, k1),
        "q1": jaxrbd.random_configuration(model, k2),
        "qd": jnp.linspace(-1.0, 1.0, model.nv),
        "tau": jnp.ones(model.nv),
    }


# ----------------------------------------------------------------------------- examples


def load_example(name: str):
    """Import ``examples/<name>.py`` as a module (the examples are scripts, not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
