"""Matplotlib drawings of a model: one pose (`plot_model`) and a motion (`animate`).

No service, no browser: a 3-D stick figure of the kinematic tree in a matplotlib axes,
for notebooks, scripts and saved files. Links are segments between joint origins (and,
for a body without children, from its origin to its centre of mass), joints are
markers with their axes, and body frames, centres of mass and names are drawn on
request. The poses of every body at every configuration come from one jitted, vmapped
`jaxrbd.forward_kinematics` call.

Needs matplotlib (``pip install jaxrbd[examples]``). In a notebook::

    from jaxrbd import viz
    viz.plot_model(model, q)                       # a pose
    viz.html(viz.animate(model, qs, dt))           # a motion, as an interactive player

Every artist carries a ``gid`` so it can be restyled or read back:
``"jaxrbd:links"``, ``"jaxrbd:joints"``, ``"jaxrbd:axes"`` (revolute and helical),
``"jaxrbd:axes:prismatic"``, ``"jaxrbd:frames:x"`` (``y``, ``z``), ``"jaxrbd:com"``,
``"jaxrbd:name"``, ``"jaxrbd:trace"`` and ``"jaxrbd:ground"``.
"""

from __future__ import annotations

import numpy as np

from ._viewer_common import (
    Plane,
    Skeleton,
    Surface,
    as_configurations,
    ground_plane,
    poses,
    scene_bounds,
    skeleton,
)

__all__ = ["animate", "html", "plot_model"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt  # optional dependency (extra: examples)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "jaxrbd.viz needs matplotlib: `pip install jaxrbd[examples]` (or `pip install "
            f"matplotlib`); importing it failed with: {e}"
        ) from e
    return plt


def _polyline(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Segments ``a[k] -> b[k]`` ``(K, 3)`` as one NaN-separated polyline ``(3K, 3)``."""
    out = np.full((a.shape[0], 3, 3), np.nan)
    out[:, 0], out[:, 1] = a, b
    return out.reshape(-1, 3)


def _xyz(P: np.ndarray):
    return P[:, 0], P[:, 1], P[:, 2]


class _Figure:
    """The artists of one drawn configuration, updated in place for animations."""

    def __init__(self, ax, sk: Skeleton, R, p, *, scale, color, alpha, axes, frames, com,
                 names, width):
        self.ax, self.sk, self.scale = ax, sk, scale
        self.artists = []
        kw = {"alpha": alpha}

        def line(gid, **style):
            (artist,) = ax.plot([], [], [], **{**kw, **style})
            artist.set_gid(gid)
            self.artists.append(artist)
            return artist

        self.links = line("jaxrbd:links", color=color, lw=width, solid_capstyle="round")
        self.joints = line("jaxrbd:joints", ls="none", marker="o", ms=1.8 * width, mfc="white",
                           mec=color, mew=1.2)
        self.axes = self.prismatic = None
        if axes and np.any(~sk.axis_prismatic):
            self.axes = line("jaxrbd:axes", color="tab:orange", lw=max(width * 0.6, 1.0))
        if axes and np.any(sk.axis_prismatic):
            self.prismatic = line("jaxrbd:axes:prismatic", color="tab:purple",
                                  lw=max(width * 0.6, 1.0), ls="--")
        self.frames = ()
        if frames:
            self.frames = tuple(
                line(f"jaxrbd:frames:{a}", color=c, lw=1.0)
                for a, c in zip("xyz", ("tab:red", "tab:green", "tab:blue"))
            )
        self.com = None
        if com and len(sk.massive):
            self.com = line("jaxrbd:com", ls="none", marker="o", ms=1.6 * width, color="black")
        self.names = []
        if names:
            for b in range(1, len(sk.names)):
                text = ax.text(0.0, 0.0, 0.0, sk.names[b], fontsize=7, alpha=alpha)
                text.set_gid("jaxrbd:name")
                self.names.append(text)
        self.update(R, p)

    def update(self, R, p):
        sk, L = self.sk, self.scale
        seg = sk.segments(R, p)
        self.links.set_data_3d(*_xyz(_polyline(seg[:, 0], seg[:, 1])))
        self.joints.set_data_3d(*_xyz(p[sk.moving]))
        if self.axes is not None or self.prismatic is not None:
            c = p[sk.axis_body]
            d = sk.axes(R) * (0.5 * L)
            for artist, sel in ((self.axes, ~sk.axis_prismatic), (self.prismatic, sk.axis_prismatic)):
                if artist is not None:
                    artist.set_data_3d(*_xyz(_polyline(c[sel] - d[sel], c[sel] + d[sel])))
        for k, artist in enumerate(self.frames):
            o = p[1:]
            artist.set_data_3d(*_xyz(_polyline(o, o + 0.6 * L * R[1:, :, k])))
        if self.com is not None:
            self.com.set_data_3d(*_xyz(sk.points(R, p)[len(sk.names) + sk.massive]))
        for text, b in zip(self.names, range(1, len(sk.names))):
            text.set_position_3d(p[b])


def _axes3d(ax):
    plt = _pyplot()
    if ax is None:
        fig = plt.figure(figsize=(5.0, 5.0))
        # a 3-D axes keeps its own margins for the tick labels: the figure needs none
        fig.subplots_adjust(left=0.0, right=0.94, bottom=0.04, top=1.0)
        ax = fig.add_subplot(projection="3d")
    elif getattr(ax, "name", None) != "3d":
        raise TypeError(
            "ax must be a 3-D matplotlib axes (fig.add_subplot(projection='3d')), "
            f"got {type(ax).__name__}"
        )
    return ax


def _frame_scene(ax, center, half, plane: Plane | Surface | None):
    for set_lim, c in zip((ax.set_xlim, ax.set_ylim, ax.set_zlim), center):
        set_lim(c - half, c + half)
    ax.set_box_aspect((1.0, 1.0, 1.0))
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")
    if isinstance(plane, Surface):
        X, Y, Z = plane.grid(center, half)
        surface = ax.plot_surface(X, Y, Z, color="0.75", alpha=0.35, linewidth=0.3,
                                  edgecolor="0.6", shade=False)
        surface.set_gid("jaxrbd:ground")
        surface.jaxrbd_vertices = np.stack([X, Y, Z], axis=-1).reshape(-1, 3)
    elif plane is not None:
        # optional dependency (matplotlib, extra: examples)
        from mpl_toolkits.mplot3d.art3d import Poly3DCollection

        u, v = plane.basis()
        o = plane.project(center)
        corners = [o + half * (su * u + sv * v) for su, sv in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        patch = Poly3DCollection([corners], facecolor="0.8", edgecolor="0.6", alpha=0.35)
        patch.set_gid("jaxrbd:ground")
        patch.jaxrbd_vertices = np.array(corners)  # the 3-D corners, for reading back
        ax.add_collection3d(patch)


def _style(n: int, alpha, color):
    if alpha is None:
        alpha = 1.0 if n == 1 else float(np.clip(2.0 / np.sqrt(n), 0.15, 0.6))
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    return alpha, "tab:blue" if color is None else color


def plot_model(model, q, ax=None, frames: bool = False, com: bool = False, names: bool = False,
               axes: bool = True, *, ground=None, color=None, alpha=None, scale=None, width=2.5):
    """Draw the kinematic tree at configuration ``q`` in a 3-D matplotlib axes.

    Links are segments from each body's parent origin to its origin (the joint origins;
    a floating base is not joined to the world) and, for bodies without children, from
    the origin to the centre of mass. Moving joints are circles at their origins, with
    their axes (revolute and helical: solid orange, prismatic: dashed purple) when
    ``axes``. With ``q`` of shape ``(B, nq)`` the ``B`` poses are overlaid, translucent.

    Args:
        model: a `jaxrbd.Model`.
        q: configuration ``(nq,)``, or ``(B, nq)`` for several overlaid poses.
        ax: a 3-D axes to draw into (``fig.add_subplot(projection="3d")``); by default a
            new figure.
        frames: draw each body frame (x red, y green, z blue).
        com: mark each body's centre of mass (black dots).
        names: write each body's name at its origin.
        axes: draw the joint axes.
        ground: ``None``; a height [m] (the plane ``z = height``); a terrain plane with
            ``height`` and an optional ``normal`` (the plane through ``(0, 0, height)``,
            as `jaxrbd.ground.Plane`); or a height field with a method ``height(x, y)``
            (as `jaxrbd.ground.Heightfield`): drawn as a grey patch under the robot.
        color: the links' colour (any matplotlib colour).
        alpha: opacity in ``(0, 1]``; by default 1 for one pose, less for several.
        scale: length of joint axes and frame arrows [m]; by default a tenth of the
            drawing's size.
        width: line width of the links [points].

    Returns:
        The matplotlib 3-D axes. The artists carry the gids listed in the module
        docstring; the links are one NaN-separated line per pose.

    Raises:
        ValueError: ``q`` has the wrong shape or non-finite values.
        TypeError: ``ax`` is not a 3-D axes, or ``ground`` is not a height or a plane.

    Example:
        >>> import matplotlib; matplotlib.use("Agg")
        >>> from jaxrbd import viz
        >>> ax = viz.plot_model(model, q, com=True)
        >>> gids = [line.get_gid() for line in ax.lines]
        >>> gids[0], gids[1]
        ('jaxrbd:links', 'jaxrbd:joints')
    """
    Q = as_configurations(model, q, "q", {1: "(nq,)", 2: "(B, nq)"}).reshape(-1, model.nq)
    plane = ground_plane(ground)
    ax = _axes3d(ax)
    sk = skeleton(model)
    R, p = poses(model, Q)
    center, half = scene_bounds(sk.points(R, p), plane)
    scale = 0.2 * half if scale is None else float(scale)
    alpha, color = _style(len(Q), alpha, color)
    for k in range(len(Q)):
        _Figure(ax, sk, R[k], p[k], scale=scale, color=color, alpha=alpha, axes=axes,
                frames=frames, com=com, names=names and k == 0, width=width)
    _frame_scene(ax, center, half, plane)
    return ax


def animate(model, qs, dt, *, ax=None, ground=None, fps: float = 30.0,
            max_trajectories: int = 16, trace=None, follow=None, frames: bool = False,
            com: bool = False,
            names: bool = False, axes: bool = True, color=None, alpha=None, scale=None,
            width=2.5, repeat: bool = True):
    """Animate a trajectory (or a batch of them, overlaid) as a matplotlib animation.

    Playback is in real time: configurations ``dt`` apart are shown every
    ``1 / fps`` seconds, skipping rows when ``1 / dt`` exceeds ``fps`` (the last row is
    always shown). The view is fixed to hold the whole motion, or moves with a body
    (``follow``, e.g. the floating base of a walking or falling robot). For a batch
    ``(B, T, nq)``
    at most ``max_trajectories`` trajectories, evenly spaced in the batch, are drawn
    translucent over each other.

    In a notebook, `html` shows the result as an interactive player; to a file,
    ``anim.save("motion.gif", writer="pillow")`` or ``anim.save("motion.mp4")`` (ffmpeg).

    Args:
        model: a `jaxrbd.Model`.
        qs: configurations ``(T, nq)``, or a batch ``(B, T, nq)``.
        dt: time between rows of ``qs`` [s].
        ax: a 3-D axes to draw into; by default a new figure.
        ground: ``None``, a height [m], a terrain plane or a height field (see
            `plot_model`).
        fps: frames per second of the animation.
        max_trajectories: the most trajectories of a batch that are drawn.
        trace: a body (name or id) whose origin leaves a trail (its path so far), or
            ``(body, point)`` with ``point`` in body coordinates [m] (e.g. a tool tip).
        follow: a body (name or id) the view moves with (its mean position over the
            drawn trajectories stays at the centre); ``None`` keeps the view fixed.
        frames: draw the body frames (as in `plot_model`).
        com: mark the centres of mass.
        names: write the body names.
        axes: draw the joint axes.
        color: the links' colour.
        alpha: opacity; by default 1 for one trajectory, less for a batch.
        scale: length of joint axes and frame arrows [m].
        width: line width of the links [points].
        repeat: loop when played interactively.

    Returns:
        A `matplotlib.animation.FuncAnimation` (``anim.to_jshtml()``, ``anim.save(...)``).

    Raises:
        ValueError: ``qs`` has the wrong shape or non-finite values, ``dt`` or ``fps`` is
            not positive, or ``max_trajectories < 1``.

    Example:
        >>> import matplotlib; matplotlib.use("Agg")
        >>> from jaxrbd import viz
        >>> anim = viz.animate(model, jnp.stack([q0, q, q1]), dt=0.5)
        >>> "<img" in anim.to_jshtml()
        True
    """
    from matplotlib.animation import FuncAnimation  # optional dependency (extra: examples)

    qs = as_configurations(model, qs, "qs", {2: "(T, nq)", 3: "(B, T, nq)"})
    if qs.ndim == 2:
        qs = qs[None]
    if not (np.isscalar(dt) or np.ndim(dt) == 0) or not float(dt) > 0:
        raise ValueError(f"dt must be a positive time step [s], got {dt!r}")
    if not float(fps) > 0:
        raise ValueError(f"fps must be positive, got {fps!r}")
    if int(max_trajectories) < 1:
        raise ValueError(f"max_trajectories must be >= 1, got {max_trajectories!r}")
    dt, fps = float(dt), float(fps)
    B, T = qs.shape[:2]
    chosen = np.unique(np.linspace(0, B - 1, min(B, int(max_trajectories))).round().astype(int))
    stride = max(1, round(1.0 / (fps * dt)))
    rows = np.arange(0, T, stride)
    if rows[-1] != T - 1:
        rows = np.append(rows, T - 1)
    plane = ground_plane(ground)
    traced, tip = None, np.zeros(3)
    if trace is not None:
        if isinstance(trace, tuple) and len(trace) == 2:
            trace, tip = trace
            tip = np.asarray(tip, dtype=float)
            if tip.shape != (3,):
                raise ValueError(f"trace point has shape {tip.shape}, expected (3,)")
        traced = model.body_id(trace)

    sk = skeleton(model)
    R, p = poses(model, qs[chosen][:, rows].reshape(-1, model.nq))
    n, m = len(chosen), len(rows)
    R = R.reshape(n, m, *R.shape[1:])
    p = p.reshape(n, m, *p.shape[1:])
    ax = _axes3d(ax)
    path = None
    if traced is not None:
        path = p[:, :, traced] + np.einsum("nmij,j->nmi", R[:, :, traced], tip)
    shown = sk.points(R, p).reshape(-1, 3)
    center, half = scene_bounds(shown if path is None else np.concatenate(
        [shown, path.reshape(-1, 3)]), plane)
    scale = 0.2 * half if scale is None else float(scale)
    alpha, color = _style(n, alpha, color)
    figures = [
        _Figure(ax, sk, R[k, 0], p[k, 0], scale=scale, color=color, alpha=alpha, axes=axes,
                frames=frames, com=com, names=names and k == 0, width=width)
        for k in range(n)
    ]
    trails = []
    if path is not None:
        for _ in range(n):
            (trail,) = ax.plot([], [], [], color="tab:gray", lw=1.0, alpha=min(1.0, alpha + 0.2))
            trail.set_gid("jaxrbd:trace")
            trails.append(trail)
    clock = ax.text2D(0.02, 0.96, "", transform=ax.transAxes)
    _frame_scene(ax, center, half, plane)
    moving_view = None
    if follow is not None:
        # the view's centre per frame, and one half-width holding every frame around it
        centers = p[:, :, model.body_id(follow)].mean(axis=0)  # (m, 3)
        nb = model.nbodies
        P = sk.points(R, p)
        P = np.concatenate([P[..., 1:nb, :], P[..., nb + 1:, :]], axis=-2)  # not the world
        spread = np.abs(P - centers[None, :, None, :]).max()
        moving_view = (centers, max(1.1 * float(spread), 0.05))

    def update(j):
        for k, fig in enumerate(figures):
            fig.update(R[k, j], p[k, j])
        for k, trail in enumerate(trails):
            trail.set_data_3d(*_xyz(path[k, : j + 1]))
        if moving_view is not None:
            c, h = moving_view[0][j], moving_view[1]
            ax.set_xlim(c[0] - h, c[0] + h)
            ax.set_ylim(c[1] - h, c[1] + h)
            ax.set_zlim(c[2] - h, c[2] + h)
        clock.set_text(f"t = {rows[j] * dt:.2f} s")
        return [a for f in figures for a in f.artists] + trails + [clock]

    update(0)
    return FuncAnimation(ax.figure, update, frames=m, interval=1000.0 * dt * stride,
                         blit=False, repeat=repeat)


def html(anim, kind: str = "jshtml"):
    """An animation as HTML for a notebook, closing its figure (no stray still image).

    Args:
        anim: a matplotlib animation (e.g. from `animate`).
        kind: ``"jshtml"`` (a JavaScript player, no external tool) or ``"html5"`` (an
            HTML5 video, needs ffmpeg).

    Returns:
        `IPython.display.HTML` when IPython is installed, else the HTML string.
    """
    if kind not in ("jshtml", "html5"):
        raise ValueError(f"kind must be 'jshtml' or 'html5', got {kind!r}")
    text = anim.to_jshtml() if kind == "jshtml" else anim.to_html5_video()
    _pyplot().close(anim._fig)
    try:
        from IPython.display import HTML  # optional dependency (notebooks)
    except ImportError:  # pragma: no cover - depends on the environment
        return text
    return HTML(text)
