"""`jaxrbd.viz`: matplotlib drawings checked as a person sees them.

Each drawing is rendered to a PNG (Agg backend) and read back: the image is not blank,
and the joint positions held by the drawn artists equal `forward_kinematics`.
"""

from __future__ import annotations

import io
import pathlib

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="jaxrbd.viz needs matplotlib")
matplotlib.use("Agg")
import jax
import matplotlib.pyplot as plt
from PIL import Image

import jaxrbd
from jaxrbd import viz

DATA = pathlib.Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def panda():
    return jaxrbd.load_urdf(DATA / "panda.urdf")


@pytest.fixture(scope="module")
def pendulum():
    return jaxrbd.models.chain(3)


_FK = jax.jit(jaxrbd.forward_kinematics)


def _fk(model, q):
    R, p = _FK(model, q)
    return np.asarray(R), np.asarray(p)


def _png(fig) -> np.ndarray:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=60)
    plt.close(fig)
    with Image.open(buf) as image:
        return np.asarray(image.convert("RGB"), dtype=float)


def _ink(image, background=255.0) -> float:
    """Fraction of pixels that are not the white background."""
    return float(np.mean(np.any(np.abs(image - background) > 30, axis=-1)))


def _artists(ax, gid):
    return [a for a in [*ax.lines, *ax.collections, *ax.texts] if a.get_gid() == gid]


def _points(line) -> np.ndarray:
    return np.stack([np.asarray(c, float) for c in line.get_data_3d()], axis=-1)


def _segments(line) -> np.ndarray:
    """A NaN-separated polyline -> its segments ``(K, 2, 3)``."""
    P = _points(line)
    assert P.shape[0] % 3 == 0 and np.all(np.isnan(P[2::3]))
    return np.stack([P[0::3], P[1::3]], axis=1)


def test_plot_model_draws_the_kinematic_tree(panda):
    """Joint markers sit at the moving bodies' origins, links join each body's parent
    origin to its origin, axes pass through the joints along R @ z, and the picture
    shows the robot (ink in the axes area, not blank)."""
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.1, 1.6, 0.7])
    R, p = _fk(panda, q)
    ax = viz.plot_model(panda, q, frames=True, com=True, names=True)
    moving = [panda.body_id(f"panda_link{k}") for k in range(1, 8)]
    (joints,) = _artists(ax, "jaxrbd:joints")
    np.testing.assert_allclose(_points(joints), p[moving], atol=1e-12)
    (links,) = _artists(ax, "jaxrbd:links")
    segs = _segments(links)
    for b in moving:  # each moving body is joined to its parent
        parent = panda.body_parent[b]
        assert np.any(np.all(np.isclose(segs, np.stack([p[parent], p[b]])), axis=(1, 2)))
    (axes,) = _artists(ax, "jaxrbd:axes")
    ends = _segments(axes)
    mid, direction = ends.mean(axis=1), ends[:, 1] - ends[:, 0]
    np.testing.assert_allclose(mid, p[moving], atol=1e-12)
    z = R[moving][:, :, 2]  # every panda joint turns about its body's z axis
    np.testing.assert_allclose(direction / np.linalg.norm(direction, axis=1)[:, None], z,
                               atol=1e-12)
    (com,) = _artists(ax, "jaxrbd:com")
    inertia = np.asarray(panda.inertia)
    massive = np.flatnonzero(inertia[1:, 0] > 0) + 1
    c = inertia[massive, 1:4] / inertia[massive, :1]  # centres of mass, body coordinates
    np.testing.assert_allclose(_points(com), np.einsum("kij,kj->ki", R[massive], c) + p[massive],
                               atol=1e-12)
    assert {t.get_text() for t in _artists(ax, "jaxrbd:name")} == set(panda.body_names[1:])
    assert len(_artists(ax, "jaxrbd:frames:x")) == 1
    image = _png(ax.figure)
    assert image.std() > 5 and 0.02 < _ink(image) < 0.9, "the figure looks blank"
    # the tree itself is drawn in the links' colour (matplotlib's tab:blue)
    blue = np.all(np.abs(image - np.array([31, 119, 180])) < 40, axis=-1)
    assert blue.sum() > 50, "no link drawn in the picture"


def test_plot_model_batch_ground_and_errors(pendulum):
    q = np.array([[0.1, 0.2, 0.3], [1.0, -0.5, 0.2], [-1.0, 0.4, 0.0]])
    ax = viz.plot_model(pendulum, q, ground=-3.2, axes=False)
    joints = _artists(ax, "jaxrbd:joints")
    assert len(joints) == 3 and all(0 < j.get_alpha() < 1 for j in joints)
    for k, line in enumerate(joints):
        np.testing.assert_allclose(_points(line), _fk(pendulum, q[k])[1][1:], atol=1e-12)
    assert not _artists(ax, "jaxrbd:axes")
    (ground,) = _artists(ax, "jaxrbd:ground")
    np.testing.assert_allclose(ground.jaxrbd_vertices[:, 2], -3.2)
    plt.close(ax.figure)
    with pytest.raises(ValueError, match=r"q has shape \(2,\), expected \(nq,\) or \(B, nq\)"):
        viz.plot_model(pendulum, np.zeros(2))
    with pytest.raises(ValueError, match="non-finite"):
        viz.plot_model(pendulum, np.array([0.0, np.nan, 0.0]))
    with pytest.raises(TypeError, match="3-D matplotlib axes"):
        viz.plot_model(pendulum, np.zeros(3), ax=plt.figure().add_subplot())
    with pytest.raises(TypeError, match="`height` attribute"):
        viz.plot_model(pendulum, np.zeros(3), ground="floor")
    plt.close("all")


class _Hills:
    """A height field as `jaxrbd.ground.Heightfield` describes one."""

    @staticmethod
    def height(x, y):
        return 0.1 * jax.numpy.sin(3.0 * x) - 0.3


def test_ground_shapes(pendulum):
    """A height, a tilted plane through (0, 0, height) and a height field."""
    from jaxrbd._viewer_common import ground_plane

    class Tilted:
        height, normal = 0.5, (0.0, 0.6, 0.8)

    plane = ground_plane(Tilted())
    np.testing.assert_allclose(plane.normal @ np.array([0.0, 0.0, 0.5]), plane.height)
    np.testing.assert_allclose(plane.project(np.array([1.0, 2.0, 3.0])) @ plane.normal, plane.height)
    try:
        from jaxrbd import ground
    except ImportError:
        ground = None
    if ground is not None:  # the terrains of jaxrbd.ground draw as they are
        flat = ground_plane(ground.Plane(0.2, normal=(0.0, 0.6, 0.8)))
        np.testing.assert_allclose([flat.height, *flat.normal], [0.16, 0.0, 0.6, 0.8], atol=1e-12)
        hills = ground_plane(ground.Heightfield(lambda x, y: 0.1 * x))
        np.testing.assert_allclose(hills.heights(np.array([1.0]), np.array([2.0])), [0.1])
    ax = viz.plot_model(pendulum, np.zeros(3), ground=_Hills())
    (surface,) = _artists(ax, "jaxrbd:ground")
    V = surface.jaxrbd_vertices
    np.testing.assert_allclose(V[:, 2], 0.1 * np.sin(3.0 * V[:, 0]) - 0.3, atol=1e-12)
    plt.close(ax.figure)


def test_animate_frames_match_forward_kinematics(pendulum, tmp_path):
    """A batch animation: 16 of 40 trajectories drawn translucent, real-time playback,
    each saved frame shows the robot, and after the last frame the drawn joints are the
    forward kinematics of the last configuration."""
    t = np.linspace(0.0, 1.0, 11)
    qs = np.stack([np.outer(np.sin((1 + 0.05 * b) * 3 * t), [1.0, 0.5, 0.3]) for b in range(40)])
    anim = viz.animate(pendulum, qs, dt=0.1, fps=2.5, ground=-3.5,
                       trace=("link2", (0.0, 0.0, -1.0)))
    fig = anim._fig
    ax = fig.axes[0]
    joints = _artists(ax, "jaxrbd:joints")
    assert len(joints) == 16 and all(j.get_alpha() < 1 for j in joints)
    assert len(_artists(ax, "jaxrbd:ground")) == 1
    path = tmp_path / "motion.gif"
    anim.save(path, writer="pillow", dpi=30)
    with Image.open(path) as gif:
        assert gif.n_frames == 4  # rows 0, 4, 8 at 2.5 fps of a 10 Hz trajectory, and the last
        gif.seek(gif.n_frames - 1)
        last = np.asarray(gif.convert("RGB"), dtype=float)
    assert last.std() > 5 and _ink(last) > 0.02
    chosen = np.unique(np.linspace(0, 39, 16).round().astype(int))
    for line, b in zip(joints, chosen):
        np.testing.assert_allclose(_points(line), _fk(pendulum, qs[b, -1])[1][1:], atol=1e-12)
    (trace, *_) = _artists(ax, "jaxrbd:trace")
    R, p = _fk(pendulum, qs[0, -1])
    np.testing.assert_allclose(_points(trace)[-1], p[3] + R[3] @ [0.0, 0.0, -1.0], atol=1e-12)
    plt.close(fig)


def test_animate_single_trajectory_and_errors(pendulum):
    qs = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, 0.2]])
    anim = viz.animate(pendulum, qs, dt=0.5, follow="link2")  # the view centred on link2
    ax = anim._fig.axes[0]
    assert all(j.get_alpha() == 1.0 for j in _artists(ax, "jaxrbd:joints"))
    p = _fk(pendulum, qs[0])[1][3]
    np.testing.assert_allclose([np.mean(ax.get_xlim()), np.mean(ax.get_ylim()),
                                np.mean(ax.get_zlim())], p, atol=1e-9)
    assert viz.html(anim) is not None  # renders every frame and closes the figure
    with pytest.raises(ValueError, match=r"qs has shape \(3,\), expected \(T, nq\)"):
        viz.animate(pendulum, np.zeros(3), dt=0.1)
    with pytest.raises(ValueError, match="dt must be a positive"):
        viz.animate(pendulum, qs, dt=0.0)
    with pytest.raises(ValueError, match="max_trajectories"):
        viz.animate(pendulum, qs, dt=0.1, max_trajectories=0)
    with pytest.raises(ValueError, match="kind must be"):
        viz.html(anim, kind="gif")
    plt.close("all")
