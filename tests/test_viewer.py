"""`jaxrbd.viewer.Viewer`: the browser viewer, checked as a person sees it.

The scene is served on 127.0.0.1 only. The poses the viewer sends for every body are
compared with `forward_kinematics`; URDF and MJCF visual geometry is read back; and a real
headless Chromium (Debian's ``chromium``, software WebGL) loads the page of a shipped
robot, whose screenshot must show the robot where the camera projects it.
"""

from __future__ import annotations

import base64
import importlib.metadata
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
import warnings

import numpy as np
import pytest

viser = pytest.importorskip("viser", reason="the browser viewer needs viser: pip install jaxrbd[viewer]")
trimesh = pytest.importorskip("trimesh", reason="the browser viewer needs trimesh: pip install jaxrbd[viewer]")

import jax

import jaxrbd
from jaxrbd import _viewer_geometry as geo
from jaxrbd.viewer import Viewer

DATA = pathlib.Path(__file__).parent / "data"
CHROMIUM = pathlib.Path("/usr/bin/chromium")
_FK = jax.jit(jaxrbd.forward_kinematics)


def _fk(model, q):
    R, p = _FK(model, q)
    return np.asarray(R), np.asarray(p)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _robot_data_share() -> list[pathlib.Path]:
    """The directory holding example-robot-data's meshes when that package is installed
    (the shipped URDFs name them ``package://example-robot-data/...``)."""
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        return []
    share = pathlib.Path(dist.locate_file("cmeel.prefix/share"))
    return [share] if (share / "example-robot-data").is_dir() else []


def _rotation_close(wxyz, R, atol=1e-9):
    np.testing.assert_allclose(geo.quat_matrix(wxyz), R, atol=atol)


# ------------------------------------------------------------------ visual geometry

URDF = """<robot name="toy">
  <material name="red"><color rgba="0.9 0.1 0.1 1"/></material>
  <link name="base">
    <visual><origin xyz="0 0 0.05"/><geometry><box size="0.4 0.2 0.1"/></geometry>
      <material name="red"/></visual>
  </link>
  <link name="arm">
    <inertial><origin xyz="0 0 -0.25"/><mass value="1"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.001"/></inertial>
    <visual><origin xyz="0 0 -0.25" rpy="0 0 0"/>
      <geometry><cylinder radius="0.03" length="0.5"/></geometry>
      <material name="blue"><color rgba="0.1 0.2 0.9 1"/></material></visual>
    <visual><origin xyz="0 0 -0.5" rpy="1.5707963 0 0"/>
      <geometry><mesh filename="package://toy_description/meshes/part.stl" scale="2 2 2"/></geometry></visual>
  </link>
  <link name="tip">
    <inertial><mass value="0.1"/><inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial>
    <visual><geometry><mesh filename="https://example.com/tip.stl"/></geometry></visual>
  </link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  <joint name="wrist" type="fixed"><parent link="arm"/><child link="tip"/><origin xyz="0 0 -0.6"/></joint>
</robot>"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy URDF in a ROS-like layout: ``<root>/toy_description/{urdf,meshes}``."""
    root = tmp_path_factory.mktemp("ros")
    (root / "toy_description" / "meshes").mkdir(parents=True)
    (root / "toy_description" / "urdf").mkdir()
    trimesh.creation.box(extents=(0.1, 0.05, 0.02)).export(root / "toy_description" / "meshes" / "part.stl")
    path = root / "toy_description" / "urdf" / "toy.urdf"
    path.write_text(URDF)
    return root, path, jaxrbd.load_urdf(path)


def test_urdf_visual_geometry(toy, monkeypatch):
    """Primitives with their sizes, origins and colours, a ``package://`` mesh found next
    to the file and through ``package_dirs``, and a URL that is never fetched (the link
    is drawn with capsules instead, after a warning naming the file)."""
    root, path, model = toy
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    with pytest.warns(UserWarning, match="https://example.com/tip.stl"):
        visuals, missing = geo.urdf_visuals(model, path)
    assert missing == {model.body_id("tip")}
    by_name = {v.name: v for v in visuals}
    box = by_name["base/visual0"]
    np.testing.assert_allclose(np.ptp(box.vertices, axis=0), [0.4, 0.2, 0.1])
    np.testing.assert_allclose(box.translation, [0, 0, 0.05])
    assert box.rgba == (0.9, 0.1, 0.1, 1.0) and box.body == model.body_id("base")
    cyl = by_name["arm/visual0"]
    np.testing.assert_allclose(np.ptp(cyl.vertices, axis=0), [0.06, 0.06, 0.5], atol=1e-3)
    assert cyl.rgba == (0.1, 0.2, 0.9, 1.0)
    part = by_name["arm/visual1"]  # found above the URDF's directory, scaled by 2
    np.testing.assert_allclose(np.ptp(part.vertices, axis=0), [0.2, 0.1, 0.04], atol=1e-9)
    np.testing.assert_allclose(part.rotation, geo.rpy_matrix([1.5707963, 0, 0]))
    # the same mesh through an explicit search path, from XML text (no file location)
    with pytest.warns(UserWarning, match="not found locally"):
        visuals2, _ = geo.urdf_visuals(model, URDF, package_dirs=[root])
    assert "arm/visual1" in {v.name for v in visuals2}
    with pytest.warns(UserWarning, match="not found locally"):
        visuals3, _ = geo.urdf_visuals(model, URDF)
    assert "arm/visual1" not in {v.name for v in visuals3}
    assert geo.resolve_mesh("http://example.com/x.stl", root, [root]) is None
    assert geo.resolve_mesh("package://toy_description/meshes/part.stl", None,
                            [root / "toy_description"]) is not None  # the package dir itself


def _no_network(*args, **kwargs):
    raise AssertionError("the viewer must not fetch anything from the network")


def test_matrix_to_wxyz_round_trip():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(200, 4))
    q[:4] = np.eye(4)  # the branches of Shepperd's method
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    R = np.stack([geo.quat_matrix(x) for x in q])
    back = geo.matrix_to_wxyz(R)
    np.testing.assert_allclose(np.stack([geo.quat_matrix(x) for x in back]), R, atol=1e-12)


# ------------------------------------------------------------------ poses sent


@pytest.fixture(scope="module")
def solo_viewer():
    model = jaxrbd.load_urdf(DATA / "solo12.urdf", floating_base=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # meshes may be absent: capsules then
        viewer = Viewer(model, DATA / "solo12.urdf", package_dirs=_robot_data_share(),
                        port=_free_port(), ground=0.0)
    yield model, viewer
    viewer.close()


def _random_q(model, seed, n):
    """``n`` random configurations of a floating-base model (free joint first)."""
    rng = np.random.default_rng(seed)
    Q = rng.uniform(-1.0, 1.0, (n, model.nq))
    Q[:, 3:7] /= np.linalg.norm(Q[:, 3:7], axis=1, keepdims=True)
    return Q


def test_poses_sent_equal_forward_kinematics(solo_viewer):
    """Every body node's pose held by the viewer (what the browser receives) is the
    forward kinematics of the configuration shown; ghosts and contact arrows too."""
    model, viewer = solo_viewer
    assert viewer.url.startswith("http://127.0.0.1:")
    Q = _random_q(model, 1, n=3)
    viewer.show(Q[0])
    R, p = _fk(model, Q[0])
    sent = viewer.scene_poses()
    assert {"base_link", "FL_UPPER_LEG", "HR_LOWER_LEG"} <= set(sent)
    for name, (wxyz, pos) in sent.items():
        b = model.body_id(name)
        np.testing.assert_allclose(pos, p[b], atol=1e-6, err_msg=name)  # sent as float32
        _rotation_close(wxyz, R[b], atol=1e-6)
    # a batch: the first solid, the others as ghosts at their own poses
    points, forces = np.array([[0.1, 0.0, 0.0], [0.0, 0.2, 0.0]]), np.array([[0, 0, 5.0], [0, 0, 10.0]])
    viewer.show(Q, contacts=(points, forces))
    Rg, pg = _fk(model, Q[2])
    v = viewer._visuals[0]
    ghost = viewer._ghosts[0][0]  # ghosts of Q[1] and Q[2]
    np.testing.assert_allclose(ghost.batched_positions[1], pg[v.body] + Rg[v.body] @ v.translation,
                               atol=1e-5)
    arrows = np.asarray(viewer._contacts.points)
    np.testing.assert_allclose(arrows[:, 0], points, atol=1e-6)
    direction = arrows[:, 1] - arrows[:, 0]
    np.testing.assert_allclose(direction / np.linalg.norm(direction, axis=1)[:, None], [[0, 0, 1]] * 2,
                               atol=1e-6)
    assert np.linalg.norm(direction[1]) == pytest.approx(2 * np.linalg.norm(direction[0]), rel=1e-5)


def test_play_and_joint_sliders(solo_viewer):
    model, viewer = solo_viewer
    Q = _random_q(model, 2, n=5)
    viewer.play(Q, dt=0.05, autoplay=False)
    viewer.frame(3)
    R, p = _fk(model, Q[3])
    for name, (wxyz, pos) in viewer.scene_poses().items():
        np.testing.assert_allclose(pos, p[model.body_id(name)], atol=1e-6)
    viewer._slider.value = 0.05  # the time slider scrubs to frame 1
    p1 = _fk(model, Q[1])[1]
    np.testing.assert_allclose(viewer.scene_poses()["base_link"][1], p1[model.body_id("base_link")],
                               atol=1e-6)
    viewer._playing.value = True  # the player thread moves on in real time
    deadline = time.time() + 10
    while viewer._frame == 1 and time.time() < deadline:
        time.sleep(0.05)
    assert viewer._frame != 1
    viewer._playing.value = False
    with pytest.raises(ValueError, match=r"qs has shape \(5,\)"):
        viewer.play(np.zeros(5), dt=0.1)
    with pytest.raises(ValueError, match="contacts have 2 time steps"):
        viewer.play(Q, dt=0.1, contacts=(np.zeros((2, 1, 3)), np.zeros((2, 1, 3))))
    viewer.show(Q[4])
    sliders = viewer.add_joint_sliders()  # starting from the configuration shown
    assert {"root_joint z [m]", "root_joint yaw", "FL_KFE"} <= set(sliders)
    sliders["FL_KFE"].value = 0.7
    sliders["root_joint z [m]"].value = 0.4
    q = Q[4].copy()
    q[2] = 0.4
    q[model.q_index("FL_KFE")] = 0.7
    R, p = _fk(model, q)
    sent = viewer.scene_poses()
    np.testing.assert_allclose(sent["FL_LOWER_LEG"][1], p[model.body_id("FL_LOWER_LEG")], atol=1e-6)
    _rotation_close(sent["FL_LOWER_LEG"][0], R[model.body_id("FL_LOWER_LEG")], atol=1e-6)


def test_viewer_errors(toy, solo_viewer):
    _, path, model = toy
    with pytest.raises(FileNotFoundError, match="no such file"):
        Viewer(model, path.with_name("missing.urdf"))
    with pytest.raises(ValueError, match="cannot tell the format"):
        Viewer(model, path.with_suffix(".txt"))
    with pytest.raises(FileNotFoundError, match="package_dirs: no such directory"):
        Viewer(model, path, package_dirs=[path.parent / "nope"])
    model, viewer = solo_viewer
    with pytest.raises(ValueError, match=r"q has shape \(3,\)"):
        viewer.show(np.zeros(3))
    with pytest.raises(ValueError, match="contact points have shape"):
        viewer.show(np.asarray(jaxrbd.neutral_configuration(model)), contacts=(np.zeros(3), np.zeros(3)))
    with pytest.raises(TypeError, match="pair"):
        viewer.show(np.asarray(jaxrbd.neutral_configuration(model)), contacts=5.0)


MJCF = """<mujoco model="cart">
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" rgba="0.8 0.8 0.8 1"/>
    <body name="cart" pos="0 0 0.2">
      <joint name="slide" type="slide" axis="1 0 0"/>
      <geom name="chassis" type="box" size="0.2 0.1 0.05" rgba="0.2 0.4 0.8 1"/>
      <body name="pole" pos="0 0 0.05">
        <joint name="hinge" type="hinge" axis="0 1 0"/>
        <geom name="rod" type="capsule" fromto="0 0 0 0 0 0.6" size="0.02"/>
        <geom name="hidden" type="sphere" size="0.05" pos="0 0 0.6" group="3"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_mjcf_geoms(tmp_path):
    """MJCF geoms come from MuJoCo's compiled model, on the bodies of the same names."""
    pytest.importorskip("mujoco", reason="MJCF files are compiled by MuJoCo")
    io = pytest.importorskip("jaxrbd.io")
    if not hasattr(io, "load_mjcf"):
        pytest.skip("jaxrbd.io.load_mjcf is not available")
    path = tmp_path / "cart.xml"
    path.write_text(MJCF)
    model = io.load_mjcf(path)
    visuals = geo.mjcf_visuals(model, path)
    names = {v.name: v for v in visuals}
    assert set(names) == {"world/floor", "cart/chassis", "pole/rod"}  # group 3 is hidden
    np.testing.assert_allclose(np.ptp(names["cart/chassis"].vertices, axis=0), [0.4, 0.2, 0.1])
    rod = names["pole/rod"]
    np.testing.assert_allclose(np.ptp(rod.vertices, axis=0), [0.04, 0.04, 0.64], atol=1e-3)
    np.testing.assert_allclose(rod.translation, [0, 0, 0.3], atol=1e-12)
    with Viewer(model, path, port=_free_port()) as viewer:
        q = np.array([0.3, 0.8])
        viewer.show(q)
        R, p = _fk(model, q)
        wxyz, pos = viewer.scene_poses()["pole"]
        np.testing.assert_allclose(pos, p[model.body_id("pole")], atol=1e-6)
        _rotation_close(wxyz, R[model.body_id("pole")], atol=1e-6)


# ------------------------------------------------------------------ in a real browser

_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--hide-scrollbars",
          "--mute-audio"]


def screenshot(url: str, size=(900, 600), ready=lambda: True, wait: float = 3.0,
               timeout: float = 60.0) -> np.ndarray:
    """Load ``url`` in a fresh headless Chromium, wait until ``ready()`` and then ``wait``
    seconds, and return the page as RGB pixels (the Chrome DevTools protocol over a local
    websocket)."""
    from PIL import Image
    from websockets.sync.client import connect

    profile = tempfile.mkdtemp(prefix="jaxrbd-chromium-")
    proc = subprocess.Popen([str(CHROMIUM), *_FLAGS, f"--user-data-dir={profile}",
                             f"--window-size={size[0]},{size[1]}", "--remote-debugging-port=0",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        port_file = pathlib.Path(profile) / "DevToolsActivePort"
        start = time.time()
        while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
            if time.time() - start > timeout or proc.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=timeout) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout) as ws:
            counter = iter(range(1, 1 << 30))

            def call(method, **params):
                n = next(counter)
                ws.send(json.dumps({"id": n, "method": method, "params": params}))
                while True:
                    msg = json.loads(ws.recv(timeout=timeout))
                    if msg.get("id") == n:
                        if "error" in msg:
                            raise RuntimeError(f"{method}: {msg['error']}")
                        return msg.get("result", {})

            call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1],
                 deviceScaleFactor=1, mobile=False)
            call("Page.enable")
            call("Page.navigate", url=url)
            start = time.time()
            while not ready():
                if time.time() - start > timeout:
                    raise RuntimeError(f"the page at {url} did not get ready in {timeout} s")
                time.sleep(0.1)
            time.sleep(wait)  # the scene streams in and renders (software WebGL)
            data = call("Page.captureScreenshot", format="png")["data"]
        import io

        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            return np.asarray(image.convert("RGB"), dtype=float)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)


def _project(points, position, look_at, fov, size):
    """Pixel coordinates of world points seen by a three.js perspective camera (z up)."""
    f = look_at - position
    f /= np.linalg.norm(f)
    r = np.cross(f, [0.0, 0.0, 1.0])
    r /= np.linalg.norm(r)
    u = np.cross(r, f)
    d = points - position
    z = d @ f
    t = np.tan(fov / 2)
    W, H = size
    return np.stack([W / 2 + (d @ r) / (z * t) * H / 2, H / 2 - (d @ u) / (z * t) * H / 2], axis=-1)


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(),
                    reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)")
def test_browser_shows_the_robot(tmp_path):
    """Chromium renders the panda (its meshes when example-robot-data and pycollada are
    installed, link capsules otherwise): the robot's pixels are where the camera
    projects its bodies, and the rest of the view is mostly background."""
    model = jaxrbd.load_urdf(DATA / "panda.urdf")
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.1, 1.6, 0.7])
    size = (1200, 600)
    free = size[0] - 340  # the control panel covers the right of the page
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        viewer = Viewer(model, DATA / "panda.urdf", package_dirs=_robot_data_share(),
                        port=_free_port(), ground=False)  # plain background around the robot
    try:
        viewer.show(q)
        cam = viewer.server.initial_camera
        image = screenshot(viewer.url, size=size,
                           ready=lambda: len(viewer.server.get_clients()) > 0)
    finally:
        viewer.close()
    from PIL import Image

    Image.fromarray(image.astype(np.uint8)).save(tmp_path / "panda.png")
    _, p = _fk(model, q)
    bodies = [model.body_id(f"panda_link{k}") for k in range(1, 8)]
    every = _project(p[1:], np.asarray(cam.position), np.asarray(cam.look_at), cam.fov, size)
    uv = every[np.array(bodies) - 1]
    ink = np.any(np.abs(image - 255.0) > 8, axis=-1)  # not the white background (a white robot is shaded)
    (lo_u, lo_v), (hi_u, hi_v) = every.min(axis=0) - 40, every.max(axis=0) + 40
    assert 0 <= lo_u and hi_u <= free and 0 <= lo_v and hi_v <= size[1], \
        f"the robot projects outside the free part of the view: {uv}"
    box = ink[int(lo_v):int(hi_v), int(lo_u):int(hi_u)]
    assert box.mean() > 0.15, f"robot region mostly background ({box.mean():.3f}), see {tmp_path}"
    hits = [ink[int(v) - 4:int(v) + 5, int(u) - 4:int(u) + 5].mean() > 0.5 for u, v in uv]
    assert sum(hits) >= 5, f"joints not drawn where projected ({hits}), see {tmp_path}"
    # around the robot the view is background: outside its box, left of the control
    # panel, away from the notice (top left) and the axes gizmo (bottom left)
    outside = np.ones_like(ink)
    outside[max(int(lo_v) - 30, 0):int(hi_v) + 30, max(int(lo_u) - 30, 0):int(hi_u) + 30] = False
    outside[:, free:] = outside[:170, :330] = outside[-80:, :80] = False
    assert ink[outside].mean() < 0.01, f"ink outside the robot's region, see {tmp_path}"
