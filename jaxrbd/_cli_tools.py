"""``python -m jaxrbd info``, ``bench`` and ``view``: a quick look at a URDF or MJCF robot."""

from __future__ import annotations

import time
from collections.abc import Sequence

import jax
import numpy as np

import jaxrbd

from .io import load_mjcf, load_urdf
from .viewer import Viewer

__all__ = ["bench", "info", "load", "view"]

MJCF_SUFFIXES = (".xml", ".mjcf")


def is_mjcf(path: str) -> bool:
    return str(path).lower().endswith(MJCF_SUFFIXES)


def load(path: str, floating_base: bool = False):
    """A URDF (``.urdf``) or MJCF (``.xml``, ``.mjcf``) file -> `Model`.

    MJCF files go through `jaxrbd.io.load_mjcf` (MuJoCo's compiler), which decides the
    root joint itself: ``floating_base`` is for URDF files.
    """
    if not is_mjcf(path):
        return load_urdf(path, floating_base=floating_base)
    if floating_base:
        raise ValueError(
            "--floating-base is for URDF files; an MJCF model declares its free joint "
            "(<freejoint/>) itself"
        )
    try:
        return load_mjcf(path)
    except ImportError as e:  # MuJoCo itself is missing
        raise ValueError(str(e)) from e


def _load(path: str, floating_base: bool, float32: bool):
    jax.config.update("jax_enable_x64", not float32)
    return load(path, floating_base)


def info(path: str, floating_base: bool = False) -> str:
    """The summary of a URDF or MJCF robot: tree, sizes, masses and joint limits (as text).

    Example:
        >>> import pathlib
        >>> text = info(str(pathlib.Path("tests/data/panda.urdf")))
        >>> text.splitlines()[0]
        'Model: 14 bodies (7 moving), nq=7, nv=7, moving mass 16.8221 kg'
    """
    model = _load(path, floating_base, float32=False)
    lines = [model.summary(), "", "joint limits (q_lower, q_upper | velocity, effort | damping, friction):"]
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    vel, eff = np.asarray(model.velocity_limit), np.asarray(model.effort_limit)
    damp, fric = np.asarray(model.damping), np.asarray(model.friction)
    for name in model.joint_names:
        qs, vs = model.q_index(name), model.v_index(name)
        if qs.stop - qs.start != 1:
            lines.append(f"  {name}: {model.joint_kind[model.joint_name.index(name)]} joint")
            continue
        i, k = qs.start, vs.start
        lines.append(
            f"  {name}: [{lo[i]:.4g}, {hi[i]:.4g}] | {vel[k]:.4g}, {eff[k]:.4g} | "
            f"{damp[k]:.4g}, {fric[k]:.4g}"
        )
    return "\n".join(lines)


def _time(f, args, repeats: int) -> tuple[float, float]:
    """Compile time and the median run time of ``f(*args)`` [s]."""
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))
    compile_s = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        runs.append(time.perf_counter() - t0)
    return compile_s, float(np.median(runs))


def bench(
    path: str,
    floating_base: bool = False,
    batches: Sequence[int] = (1, 128, 4096),
    repeats: int = 5,
    float32: bool = False,
) -> list[dict]:
    """Time the main algorithms on a URDF or MJCF robot, single state and batched; prints a table.

    Returns one row per (function, batch): compile time and the per-sample time [µs].
    """
    model = _load(path, floating_base, float32)
    key = jax.random.key(0)
    fns = {
        "forward_dynamics": lambda q, v, u: jaxrbd.forward_dynamics(model, q, v, u),
        "inverse_dynamics": lambda q, v, u: jaxrbd.inverse_dynamics(model, q, v, u),
        "mass_matrix": lambda q, v, u: jaxrbd.mass_matrix(model, q),
        "forward_kinematics": lambda q, v, u: jaxrbd.forward_kinematics(model, q),
        "body_jacobians": lambda q, v, u: jaxrbd.body_jacobians(model, q, frame="body"),
        "centroidal_momentum_matrix": lambda q, v, u: jaxrbd.centroidal_momentum_matrix(model, q),
    }
    rows = []
    print(f"{path}: nq={model.nq}, nv={model.nv}, dtype={model.dtype}, device={jax.devices()[0]}")
    print(f"{'function':28s} {'batch':>6s} {'compile [s]':>12s} {'per sample [us]':>16s}")
    for n in batches:
        keys = jax.random.split(key, n)
        Q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(keys)
        V = jax.random.uniform(key, (n, model.nv), model.dtype, -1, 1)
        for name, f in fns.items():
            g = jax.jit(f) if n == 1 else jaxrbd.jit(jax.vmap(f))  # jaxrbd.jit for batches
            args = (Q[0], V[0], V[0]) if n == 1 else (Q, V, V)
            compile_s, run_s = _time(g, args, repeats)
            per = run_s / n * 1e6
            rows.append({"function": name, "batch": n, "compile_s": compile_s, "per_sample_us": per})
            print(f"{name:28s} {n:6d} {compile_s:12.2f} {per:16.2f}")
    return rows


def view(
    path: str,
    floating_base: bool = False,
    host: str = "127.0.0.1",
    port: int = 8080,
    package_dirs: Sequence[str] = (),
    collision: bool = False,
    timeout: float | None = None,
):
    """Serve a URDF or MJCF robot in the browser viewer with a slider per joint.

    Blocks until Ctrl-C (or ``timeout`` seconds), then stops the server. Prints the URL.
    """
    jax.config.update("jax_enable_x64", True)
    model = load(path, floating_base)
    viewer = Viewer(model, path, package_dirs=package_dirs, collision=collision, host=host,
                    port=port)
    try:
        viewer.add_joint_sliders()
        print(f"{path}: nq={model.nq}, nv={model.nv}, {model.nbodies} bodies")
        print(f"viewer at {viewer.url}  (Ctrl-C to stop)", flush=True)
        viewer.wait(timeout)
    finally:
        viewer.close()
    return 0
