"""A browser viewer with the robot's meshes: poses, trajectories with a time slider,
batches as translucent ghosts, contact forces as arrows.

Built on `viser <https://viser.studio>`_ (``pip install jaxrbd[viewer]``: viser and
trimesh): a web server in this Python process serves a three.js scene to any browser,
on this machine or through an SSH tunnel, with GUI widgets (sliders, buttons) that call
back into Python. Nothing is fetched from the network: meshes are read from local files.

    >>> viewer = Viewer(model, "robot.urdf", package_dirs=["~/ros/src"])  # doctest: +SKIP
    >>> viewer.show(q)                                                    # doctest: +SKIP
    >>> viewer.play(qs, dt=0.01)          # a time slider and a play box  # doctest: +SKIP

From a shell, ``python -m jaxrbd view robot.urdf`` opens a viewer with a slider per joint.
"""

from __future__ import annotations

import pathlib
import threading
import time

import numpy as np

from . import _viewer_geometry as geo
from ._api import neutral_configuration
from ._core.host_rotation import quat_rpy, rpy_quat
from ._viewer_common import (
    Surface,
    as_configurations,
    ground_plane,
    poses,
    scene_bounds,
    skeleton,
)

__all__ = ["Viewer"]


def _import_viser():
    try:
        import viser  # optional dependency (extra: viewer)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "jaxrbd.viewer needs viser and trimesh: `pip install jaxrbd[viewer]`; "
            f"importing viser failed with: {e}"
        ) from e
    return viser


def _source_kind(source) -> str:
    """``"urdf"`` or ``"mjcf"`` from a path's suffix, an XML text's root, or an MjModel."""
    if type(source).__name__ == "MjModel":
        return "mjcf"
    if isinstance(source, (bytes, bytearray)):
        source = source.decode()
    if isinstance(source, str) and source.lstrip().startswith("<"):
        head = source.lstrip()[:2000]
        if "<robot" in head:
            return "urdf"
        if "<mujoco" in head:
            return "mjcf"
        raise ValueError("urdf_or_mjcf: XML text with neither a <robot> nor a <mujoco> root")
    if isinstance(source, (str, pathlib.Path)):
        suffix = pathlib.Path(source).suffix.lower()
        if suffix == ".urdf":
            return "urdf"
        if suffix in (".xml", ".mjcf"):
            return "mjcf"
        raise ValueError(
            f"urdf_or_mjcf: cannot tell the format of {str(source)!r}: expected a .urdf, "
            ".xml or .mjcf file, XML text or a mujoco.MjModel"
        )
    raise TypeError(
        "urdf_or_mjcf must be a path, XML text or a mujoco.MjModel, "
        f"got {type(source).__name__}"
    )


def _safe(name: str) -> str:
    # scene node names are paths: a '/' inside a body name would nest nodes
    return name.replace("/", "|")


def _rgb(rgba) -> tuple[int, int, int]:
    return tuple(round(255 * float(np.clip(c, 0.0, 1.0))) for c in rgba[:3])


class Viewer:
    """A jaxrbd model in the browser (viser).

    The robot's visual geometry comes from its description file: URDF ``<visual>``
    elements (boxes, cylinders, spheres and STL/DAE/OBJ meshes through trimesh) or
    MJCF geoms of MuJoCo's groups 0-2 (compiled by MuJoCo, meshes included). Without a
    file, or for a link whose mesh cannot be found, links are drawn as capsules between
    joint origins, with spheres at the joints. URDF links and MJCF bodies are matched
    to the model's bodies by name (so a model from `jaxrbd.load_urdf` or
    `jaxrbd.io.load_mjcf` of the same file).

    Every body with geometry is a scene node whose pose is set from
    `jaxrbd.forward_kinematics` (one jitted call per `show`, one vmapped call for a whole
    trajectory in `play`); its meshes are children placed at their visual origins.

    Args:
        model: a `jaxrbd.Model`.
        urdf_or_mjcf: the robot's URDF or MJCF (a path, the XML text, or a
            ``mujoco.MjModel``); ``None`` draws link capsules.
        package_dirs: directories searched for ``package://<pkg>/...`` meshes (as
            ``<dir>/<pkg>/...``, or ``<dir>/...`` when ``<dir>`` is named ``<pkg>``);
            the directories above the description file are searched after them.
        collision: show the URDF ``<collision>`` geometry instead of ``<visual>``.
        ground: ``None`` (a grid under the robot), ``False`` (none), a height [m], a
            terrain plane with ``height`` and optional ``normal`` (a grid in that plane)
            or a height field with a method ``height(x, y)`` (a surface), as in
            `jaxrbd.viz.plot_model`.
        host: interface to serve on; ``"127.0.0.1"`` keeps the viewer on this machine
            (use an SSH tunnel from elsewhere), ``"0.0.0.0"`` serves the network.
        port: port to serve on (the next free one is taken when it is busy).
        force_scale: length of a contact-force arrow per newton [m/N]; by default the
            largest force shown is a third of the robot's size.
        verbose: let viser print its banner and connection messages.

    Raises:
        FileNotFoundError: the description file does not exist.
        ValueError: its format cannot be told or it is not valid XML.
        ImportError: viser or trimesh is not installed.

    Example:
        >>> robot = jaxrbd.load_urdf("robot.urdf", floating_base=True)       # doctest: +SKIP
        >>> viewer = Viewer(robot, "robot.urdf", package_dirs=["~/ws/src"])  # doctest: +SKIP
        >>> viewer.play(qs, dt=0.01)  # qs: (T, nq) or (B, T, nq)           # doctest: +SKIP
        >>> viewer.url                                                       # doctest: +SKIP
        'http://127.0.0.1:8080'
    """

    def __init__(self, model, urdf_or_mjcf=None, *, package_dirs=(), collision: bool = False,
                 ground=None, host: str = "127.0.0.1", port: int = 8080,
                 force_scale: float | None = None, verbose: bool = False):
        viser = _import_viser()
        if isinstance(package_dirs, (str, pathlib.Path)):
            package_dirs = [package_dirs]
        package_dirs = [pathlib.Path(d).expanduser() for d in package_dirs]
        for d in package_dirs:
            if not d.is_dir():
                raise FileNotFoundError(f"package_dirs: no such directory: {d}")
        self.model = model
        self._sk = skeleton(model)
        self._q = np.asarray(_neutral(model), dtype=float)
        R0, p0 = poses(model, self._q[None])
        R0, p0 = R0[0], p0[0]
        self._center, self._half = scene_bounds(self._sk.points(R0, p0))
        self._show_ground = ground is not False
        self._plane = None if ground is False else ground_plane(ground)
        self._force_scale = force_scale
        visuals = self._collect_visuals(urdf_or_mjcf, package_dirs, collision, R0, p0)
        self._visuals = visuals
        self._bodies = np.array(sorted({v.body for v in visuals}), dtype=int)

        self.server = viser.ViserServer(host=host, port=port, verbose=verbose)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._player = None
        self._ghosts = []
        self._contacts = None
        self._gui = {}
        scene = self.server.scene
        scene.set_up_direction("+z")
        # lights of our own: viser's default environment map is an HDR image that the
        # browser would download, and the viewer must work offline
        scene.configure_environment_map(hdri=None)
        scene.configure_default_lights(enabled=False)
        scene.add_light_ambient("/lights/ambient", intensity=0.5)
        scene.add_light_hemisphere("/lights/sky", sky_color=(255, 255, 255),
                                   ground_color=(90, 90, 100), intensity=0.8)
        for k, direction in enumerate(((1.0, -1.5, 2.0), (-1.5, 1.0, 1.0))):
            # a directional light shines from its position towards the origin
            scene.add_light_directional(f"/lights/sun{k}", intensity=2.0 if k == 0 else 0.8,
                                        position=tuple(10.0 * np.asarray(direction)))
        self.server.gui.configure_theme(show_share_button=False)
        self._frames = {}
        with self.server.atomic():
            for b in self._bodies:
                self._frames[int(b)] = scene.add_frame(
                    f"/robot/{_safe(model.body_names[b])}", show_axes=False)
            for k, v in enumerate(visuals):
                scene.add_mesh_simple(
                    f"/robot/{_safe(model.body_names[v.body])}/visual{k}", v.vertices, v.faces,
                    color=_rgb(v.rgba), opacity=None if v.rgba[3] >= 1 else float(v.rgba[3]),
                    wxyz=geo.matrix_to_wxyz(v.rotation), position=v.translation,
                    flat_shading=False, side="double")
            if self._show_ground:
                self._add_ground(R0, p0)
        self._aim_camera(self._center, self._half)
        self.show(self._q)

    # ------------------------------------------------------------ construction

    def _collect_visuals(self, source, package_dirs, collision, R0, p0):
        model = self.model
        radius = float(np.clip(0.06 * self._half, 0.004, 0.05))
        if source is None:
            return geo.skeleton_visuals(model, self._sk, R0, p0, radius)
        kind = _source_kind(source)
        if kind == "urdf":
            visuals, missing = geo.urdf_visuals(model, source, package_dirs, collision)
        else:
            if collision:
                raise ValueError("collision=True is for URDF files; MJCF geoms are chosen by group")
            visuals, missing = geo.mjcf_visuals(model, source), set()
        if not visuals:  # a description without geometry (common in generated URDFs)
            return geo.skeleton_visuals(model, self._sk, R0, p0, radius)
        if missing:
            visuals += geo.skeleton_visuals(model, self._sk, R0, p0, radius, bodies=missing)
        return visuals

    def _add_ground(self, R0, p0):
        plane = self._plane
        size = float(max(4 * self._half, 1.0))
        if isinstance(plane, Surface):
            n = 41
            X, Y, Z = plane.grid(self._center, size / 2, n)
            k = np.arange(n * n).reshape(n, n)[:-1, :-1].ravel()
            faces = np.concatenate([np.stack([k, k + n, k + 1], 1), np.stack([k + 1, k + n, k + n + 1], 1)])
            self.server.scene.add_mesh_simple(
                "/ground", np.stack([X, Y, Z], -1).reshape(-1, 3), faces, color=(205, 205, 210),
                side="double", flat_shading=True, cast_shadow=False)
            return
        if plane is None:
            # a floor under the robot: the lowest point of the neutral pose
            height = float(np.min(self._sk.points(R0, p0)[:, 2]))
            normal = np.array([0.0, 0.0, 1.0])
        else:
            height, normal = plane.height, plane.normal
        R = geo._align_z(normal)
        origin = np.array([self._center[0], self._center[1], 0.0])
        origin = origin - (origin @ normal - height) * normal
        self.server.scene.add_grid("/ground", width=size, height=size, plane="xy",
                                   cell_size=size / 20, section_size=size / 4,
                                   wxyz=geo.matrix_to_wxyz(R), position=origin)

    def _aim_camera(self, center, half):
        cam = self.server.initial_camera
        cam.look_at = tuple(float(x) for x in center)
        cam.position = tuple(float(x) for x in center + half * np.array([2.0, -2.0, 1.2]))
        cam.up = (0.0, 0.0, 1.0)
        cam.fov = float(np.deg2rad(50.0))

    def _frame_scene(self, R, p):
        """Aim the camera at the bodies ``R (..., nbodies, 3, 3)``, ``p`` while no browser
        is connected yet (a connected user keeps the view they chose)."""
        if len(self.server.get_clients()) == 0:
            center, half = scene_bounds(self._sk.points(R, p))
            self._aim_camera(center, half)

    # ------------------------------------------------------------ drawing

    @property
    def url(self) -> str:
        """Where to point a browser."""
        host = self.server.get_host()
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{self.server.get_port()}"

    @property
    def port(self) -> int:
        return self.server.get_port()

    def _place(self, R, p):
        """Move the body nodes to the poses ``R (nbodies, 3, 3)``, ``p (nbodies, 3)``."""
        b = self._bodies
        wxyz = geo.matrix_to_wxyz(R[b])
        with self.server.atomic():
            for k, body in enumerate(b):
                frame = self._frames[int(body)]
                frame.wxyz = wxyz[k]
                frame.position = p[body]

    def _world_visual_poses(self, R, p):
        """World poses of every visual for body poses ``R (..., nbodies, 3, 3)``, ``p``:
        ``(..., nvisuals, 4)`` quaternions and ``(..., nvisuals, 3)`` positions."""
        body = np.array([v.body for v in self._visuals], dtype=int)
        Rv = np.stack([v.rotation for v in self._visuals])
        tv = np.stack([v.translation for v in self._visuals])
        Rb, pb = R[..., body, :, :], p[..., body, :]
        Rw = Rb @ Rv
        pw = pb + np.einsum("...kij,kj->...ki", Rb, tv)
        return geo.matrix_to_wxyz(Rw), pw

    def _set_ghosts(self, R, p, opacity):
        """Translucent copies of the robot at the poses ``R (G, nbodies, 3, 3)``, ``p``."""
        G = 0 if R is None else R.shape[0]
        if len(self._ghosts) and self._ghosts[0][1] != G:
            for handle, _ in self._ghosts:
                handle.remove()
            self._ghosts = []
        if G == 0:
            return
        wxyz, pos = self._world_visual_poses(R, p)  # (G, nvis, 4), (G, nvis, 3)
        with self.server.atomic():
            if not self._ghosts:
                for k, v in enumerate(self._visuals):
                    handle = self.server.scene.add_batched_meshes_simple(
                        f"/ghosts/visual{k}", v.vertices, v.faces,
                        batched_wxyzs=wxyz[:, k], batched_positions=pos[:, k],
                        batched_colors=_rgb(v.rgba), opacity=opacity, lod="off",
                        cast_shadow=False, receive_shadow=False)
                    self._ghosts.append((handle, G))
            else:
                for k, (handle, _) in enumerate(self._ghosts):
                    handle.batched_wxyzs = wxyz[:, k]
                    handle.batched_positions = pos[:, k]

    def _set_contacts(self, contacts, scale=None):
        if contacts is None:
            if self._contacts is not None:
                self._contacts.visible = False
            return
        points, forces = _check_contacts(contacts, ndim=2)
        if scale is None:
            scale = self._auto_force_scale(forces)
        segs = np.stack([points, points + scale * forces], axis=1)
        r = float(np.clip(0.02 * self._half, 0.002, 0.02))
        if self._contacts is not None and self._contacts.points.shape == segs.shape:
            self._contacts.points = segs.astype(np.float32)
            self._contacts.visible = True
        else:
            if self._contacts is not None:
                self._contacts.remove()
            self._contacts = self.server.scene.add_arrows(
                "/contacts", segs, colors=(220, 40, 40), shaft_radius=r, head_radius=2.5 * r,
                head_length=6 * r)

    def _auto_force_scale(self, forces) -> float:
        if self._force_scale is not None:
            return float(self._force_scale)
        fmax = float(np.max(np.linalg.norm(forces, axis=-1), initial=0.0))
        return (2.0 / 3.0) * self._half / fmax if fmax > 0 else 0.0

    def show(self, q, contacts=None, *, max_ghosts: int = 16, ghost_opacity: float = 0.25):
        """Show the robot at configuration ``q``.

        Args:
            q: ``(nq,)``; or ``(B, nq)``: the first pose solid and up to ``max_ghosts``
                of the others (evenly spaced) as translucent ghosts.
            contacts: ``None`` or ``(points, forces)``, both ``(K, 3)`` in world
                coordinates [m, N]: forces on the robot, drawn as red arrows starting at
                the points.
            max_ghosts: the most ghosts drawn.
            ghost_opacity: opacity of the ghosts in ``(0, 1]``.

        Raises:
            ValueError: ``q`` or ``contacts`` has the wrong shape or non-finite values.
        """
        Q = as_configurations(self.model, q, "q", {1: "(nq,)", 2: "(B, nq)"}).reshape(
            -1, self.model.nq)
        rows = _ghost_rows(len(Q), max_ghosts)
        R, p = poses(self.model, Q[np.concatenate([[0], rows])])
        with self._lock:
            self._q = Q[0]
            self._frame_scene(R, p)
            self._place(R[0], p[0])
            self._set_ghosts(R[1:] if len(rows) else None, p[1:], ghost_opacity)
            self._set_contacts(contacts)

    def scene_poses(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The body poses the viewer holds (those sent to the browser):
        ``{body name: (wxyz (4,), position (3,))}`` in world coordinates."""
        return {self.model.body_names[b]: (np.asarray(h.wxyz, float), np.asarray(h.position, float))
                for b, h in self._frames.items()}

    # ------------------------------------------------------------ trajectories

    def play(self, qs, dt, *, contacts=None, loop: bool = True, speed: float = 1.0,
             max_ghosts: int = 16, ghost_opacity: float = 0.25, autoplay: bool = True):
        """Play a trajectory, or a batch of them, with a time slider and a play box.

        Poses of all frames are computed at once (one vmapped `forward_kinematics`), then
        a background thread advances the frame in real time (times ``speed``) while
        "play" is ticked. The slider scrubs through time. For a batch the first
        trajectory is solid and up to ``max_ghosts`` others are translucent ghosts.

        Args:
            qs: ``(T, nq)`` or ``(B, T, nq)``.
            dt: time between rows [s].
            contacts: ``None`` or ``(points, forces)``, both ``(T, K, 3)`` in world
                coordinates [m, N], shown with the first trajectory.
            loop: start over at the end (else stop there).
            speed: playback speed factor.
            max_ghosts: the most ghosts drawn (as in `show`).
            ghost_opacity: opacity of the ghosts in ``(0, 1]``.
            autoplay: start playing at once.

        Raises:
            ValueError: a shape is wrong, ``dt`` or ``speed`` is not positive.
        """
        qs = as_configurations(self.model, qs, "qs", {2: "(T, nq)", 3: "(B, T, nq)"})
        if qs.ndim == 2:
            qs = qs[None]
        if not np.ndim(dt) == 0 or not float(dt) > 0:
            raise ValueError(f"dt must be a positive time step [s], got {dt!r}")
        if not float(speed) > 0:
            raise ValueError(f"speed must be positive, got {speed!r}")
        B, T = qs.shape[:2]
        rows = np.concatenate([[0], _ghost_rows(B, max_ghosts)]).astype(int)
        if contacts is not None:
            points, forces = _check_contacts(contacts, ndim=3)
            if points.shape[0] != T:
                raise ValueError(f"contacts have {points.shape[0]} time steps, qs has {T}")
            contacts = (points, forces)
        R, p = poses(self.model, qs[rows].reshape(-1, self.model.nq))
        R = R.reshape(len(rows), T, *R.shape[1:])
        p = p.reshape(len(rows), T, *p.shape[1:])
        scale = None if contacts is None else self._auto_force_scale(contacts[1])
        self._stop_player()
        self._frame_scene(R, p)
        self._trajectory = {"R": R, "p": p, "dt": float(dt), "T": T, "contacts": contacts,
                            "scale": scale, "opacity": ghost_opacity, "loop": loop}
        gui = self.server.gui
        for handle in self._gui.pop("playback", ()):
            handle.remove()
        folder = gui.add_folder("Playback")
        with folder:
            slider = gui.add_slider("time [s]", min=0.0, max=max((T - 1) * float(dt), float(dt)),
                                    step=float(dt), initial_value=0.0)
            playing = gui.add_checkbox("play", initial_value=autoplay)
            rate = gui.add_slider("speed", min=0.1, max=4.0, step=0.1,
                                  initial_value=float(np.clip(speed, 0.1, 4.0)))
        self._gui["playback"] = (folder,)
        self._slider, self._playing, self._rate = slider, playing, rate

        @slider.on_update
        def _(_event):
            if not getattr(self, "_syncing", False):
                self.frame(round(slider.value / float(dt)))

        self.frame(0)
        self._stop.clear()
        self._player = threading.Thread(target=self._run, daemon=True, name="jaxrbd-viewer-play")
        self._player.start()

    def frame(self, k: int):
        """Show frame ``k`` of the trajectory given to `play`."""
        traj = getattr(self, "_trajectory", None)
        if traj is None:
            raise ValueError("no trajectory: call play(qs, dt) first")
        k = int(np.clip(k, 0, traj["T"] - 1))
        R, p = traj["R"][:, k], traj["p"][:, k]
        with self._lock:
            self._frame = k
            self._place(R[0], p[0])
            self._set_ghosts(R[1:] if len(R) > 1 else None, p[1:], traj["opacity"])
            c = traj["contacts"]
            self._set_contacts(None if c is None else (c[0][k], c[1][k]), traj["scale"])

    def _run(self):
        traj = self._trajectory
        t_sim, last = 0.0, time.perf_counter()
        while not self._stop.is_set():
            now = time.perf_counter()
            wall, last = now - last, now
            if self._playing.value:
                t_sim = self._frame * traj["dt"] + wall * float(self._rate.value)
                k = round(t_sim / traj["dt"])
                if k >= traj["T"]:
                    if traj["loop"]:
                        k = 0
                    else:
                        k = traj["T"] - 1
                        self._playing.value = False
                if k != self._frame:
                    self.frame(k)
                    self._syncing = True
                    try:
                        self._slider.value = k * traj["dt"]
                    finally:
                        self._syncing = False
            self._stop.wait(1.0 / 30.0)

    def _stop_player(self):
        self._stop.set()
        if self._player is not None:
            self._player.join(timeout=2.0)
            self._player = None

    # ------------------------------------------------------------ joint sliders

    def add_joint_sliders(self) -> dict:
        """A GUI folder with a slider per joint coordinate that poses the robot, starting
        from the configuration shown.

        One-DoF joints get one slider over their limits (``±π`` or ``±1 m`` when
        unbounded); a free joint gets x, y, z and roll, pitch, yaw sliders, a spherical
        joint roll, pitch, yaw; other multi-DoF joints one slider per coordinate.

        Returns:
            ``{label: slider handle}``.
        """
        model = self.model
        gui = self.server.gui
        lo, hi = np.asarray(model.q_lower, float), np.asarray(model.q_upper, float)
        q0 = self._q.copy()
        sliders, setters = {}, []
        folder = gui.add_folder("Joints")
        with folder:
            for name in model.joint_names:
                b = model._joint_body(name)
                label = model.joint_label[b]
                qs = model.q_index(name)
                if label == "free" or label == "spherical":
                    pos = qs.start if label == "free" else None
                    quat = qs.start + 3 if label == "free" else qs.start
                    handles = []
                    if pos is not None:
                        for k, axis in enumerate("xyz"):
                            c = float(q0[pos + k])
                            handles.append(gui.add_slider(f"{name} {axis} [m]", min=c - 2.0,
                                                          max=c + 2.0, step=1e-3, initial_value=c))
                    rpy0 = quat_rpy(q0[quat:quat + 4])
                    for k, axis in enumerate(("roll", "pitch", "yaw")):
                        lim = np.pi / 2 if axis == "pitch" else np.pi
                        handles.append(gui.add_slider(f"{name} {axis}", min=-lim, max=lim,
                                                      step=1e-3, initial_value=float(rpy0[k])))
                    sliders.update({h.label: h for h in handles})
                    setters.append(_free_setter(pos, quat, handles))
                    continue
                for i in range(qs.start, qs.stop):
                    unbounded = 1.0 if label == "prismatic" else np.pi
                    a = lo[i] if np.isfinite(lo[i]) else -unbounded
                    z = hi[i] if np.isfinite(hi[i]) else unbounded
                    text = name if qs.stop - qs.start == 1 else f"{name}[{i - qs.start}]"
                    h = gui.add_slider(text, min=float(a), max=float(z), step=1e-3,
                                       initial_value=float(np.clip(q0[i], a, z)))
                    sliders[text] = h
                    setters.append(_index_setter(i, h))
            reset = gui.add_button("reset")
        self._gui["joints"] = (folder,)

        def update(_event=None):
            q = self._q.copy()
            for setter in setters:
                setter(q)
            self.show(q)

        for h in sliders.values():
            h.on_update(update)

        @reset.on_click
        def _(_event):
            for h in sliders.values():
                h.value = h.initial_value
            self.show(q0)

        update()
        return sliders

    # ------------------------------------------------------------ lifetime

    def wait(self, timeout: float | None = None):
        """Block (serving the browser) until Ctrl-C or ``timeout`` seconds."""
        try:
            self._stop.wait(timeout) if timeout is not None else _forever(self._stop)
        except KeyboardInterrupt:
            pass

    def close(self):
        """Stop the playback thread and the server."""
        self._stop_player()
        self._stop.set()
        self.server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (f"Viewer({self.model.nbodies} bodies, {len(self._visuals)} visuals, "
                f"{self.url})")


def _forever(event: threading.Event):
    while not event.wait(0.5):
        pass


def _neutral(model):
    return neutral_configuration(model)


def _ghost_rows(B: int, max_ghosts: int) -> np.ndarray:
    if int(max_ghosts) < 0:
        raise ValueError(f"max_ghosts must be >= 0, got {max_ghosts}")
    if B <= 1 or max_ghosts == 0:
        return np.zeros(0, int)
    return np.unique(np.linspace(1, B - 1, min(B - 1, int(max_ghosts))).round().astype(int))


def _check_contacts(contacts, ndim: int):
    what = "(K, 3)" if ndim == 2 else "(T, K, 3)"
    try:
        points, forces = contacts
    except (TypeError, ValueError):
        raise TypeError(f"contacts must be a pair (points, forces), each {what}") from None
    points, forces = np.asarray(points, float), np.asarray(forces, float)
    for name, x in (("contact points", points), ("contact forces", forces)):
        if x.ndim != ndim or x.shape[-1] != 3:
            raise ValueError(f"{name} have shape {x.shape}, expected {what}")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{name} contain non-finite values")
    if points.shape != forces.shape:
        raise ValueError(f"contact points {points.shape} and forces {forces.shape} differ in shape")
    return points, forces


def _free_setter(pos, quat, handles):
    def set_q(q):
        values = [h.value for h in handles]
        if pos is not None:
            q[pos:pos + 3] = values[:3]
            values = values[3:]
        q[quat:quat + 4] = rpy_quat(values)

    return set_q


def _index_setter(i, handle):
    def set_q(q):
        q[i] = handle.value

    return set_q
