"""Visual geometry for the browser viewer: URDF ``<visual>`` elements, MJCF geoms through
MuJoCo's compiled model, mesh files through trimesh, and link capsules for models without
any of these.

Each visual becomes a `Visual`: a triangle mesh in the frame of a jaxrbd body, with its
placement in that body frame and a colour. Mesh files are read from the local disk only:
``package://`` URIs are resolved through the directories the user gives (and the
directories above the description file), never fetched from the network.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from ._core.host_rotation import matrix_to_wxyz, quat_matrix, rpy_matrix

__all__ = [
    "Visual",
    "matrix_to_wxyz",
    "mjcf_visuals",
    "resolve_mesh",
    "skeleton_visuals",
    "urdf_visuals",
]

DEFAULT_RGBA = (0.5, 0.53, 0.58, 1.0)


@dataclasses.dataclass
class Visual:
    """A triangle mesh attached to a body.

    Attributes:
        body: the jaxrbd body id the mesh moves with.
        name: a label (link name and index, or geom name).
        vertices: `(V, 3)` in the visual's own frame [m] (scale applied).
        faces: `(F, 3)` vertex indices.
        rotation, translation: `(3, 3)`, `(3,)` the visual frame in body coordinates
            (rotation maps visual to body coordinates).
        rgba: colour in ``[0, 1]``.
    """

    body: int
    name: str
    vertices: np.ndarray
    faces: np.ndarray
    rotation: np.ndarray
    translation: np.ndarray
    rgba: tuple[float, float, float, float] = DEFAULT_RGBA


def _trimesh():
    try:
        import trimesh  # optional dependency (extra: viewer)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the browser viewer needs trimesh: `pip install jaxrbd[viewer]` (viser, trimesh); "
            f"importing it failed with: {e}"
        ) from e
    return trimesh


# ---------------------------------------------------------------- primitives


def _box(size) -> tuple[np.ndarray, np.ndarray]:
    m = _trimesh().creation.box(extents=np.asarray(size, dtype=float))
    return np.asarray(m.vertices), np.asarray(m.faces)


def _sphere(radius) -> tuple[np.ndarray, np.ndarray]:
    m = _trimesh().creation.icosphere(subdivisions=2, radius=float(radius))
    return np.asarray(m.vertices), np.asarray(m.faces)


def _cylinder(radius, length) -> tuple[np.ndarray, np.ndarray]:
    m = _trimesh().creation.cylinder(radius=float(radius), height=float(length), sections=24)
    return np.asarray(m.vertices), np.asarray(m.faces)


def _capsule(radius, length) -> tuple[np.ndarray, np.ndarray]:
    m = _trimesh().creation.capsule(height=float(length), radius=float(radius), count=[12, 12])
    return np.asarray(m.vertices), np.asarray(m.faces)


def _ellipsoid(radii) -> tuple[np.ndarray, np.ndarray]:
    v, f = _sphere(1.0)
    return v * np.asarray(radii, dtype=float), f


def _plane(half_x, half_y) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[-half_x, -half_y, 0], [half_x, -half_y, 0], [half_x, half_y, 0],
                  [-half_x, half_y, 0]], dtype=float)
    # both windings: the plane is seen from above and below
    f = np.array([[0, 1, 2], [0, 2, 3], [0, 2, 1], [0, 3, 2]])
    return v, f


# ---------------------------------------------------------------- mesh files


def resolve_mesh(filename: str, base_dir: pathlib.Path | None,
                 package_dirs=()) -> pathlib.Path | None:
    """The local file a URDF/MJCF mesh reference points to, or ``None``.

    ``package://pkg/rest`` is looked up as ``<dir>/pkg/rest`` and ``<dir>/rest`` (when
    ``<dir>`` is the package itself) for each of ``package_dirs``, then in the
    directories above ``base_dir`` (a ROS package layout). ``file://`` and plain paths
    are taken relative to ``base_dir``. Network URLs are never fetched: ``None``.
    """
    if "://" in filename and not filename.startswith(("package://", "file://")):
        return None
    filename = filename.removeprefix("file://")
    if filename.startswith("package://"):
        rest = filename[len("package://"):].lstrip("/")
        pkg, _, sub = rest.partition("/")
        dirs = [pathlib.Path(d) for d in package_dirs]
        if base_dir is not None:
            dirs += list(pathlib.Path(base_dir).resolve().parents)[:6]
            dirs.insert(len(package_dirs), pathlib.Path(base_dir).resolve())
        for d in dirs:
            for candidate in (d / pkg / sub, d / sub if d.name == pkg else None):
                if candidate is not None and candidate.is_file():
                    return candidate
        return None
    path = pathlib.Path(os.path.expanduser(filename))
    if not path.is_absolute() and base_dir is not None:
        path = pathlib.Path(base_dir) / path
    return path if path.is_file() else None


def load_mesh(path: pathlib.Path, scale=(1.0, 1.0, 1.0)) -> list[tuple[np.ndarray, np.ndarray, tuple]]:
    """The parts of a mesh file (STL, OBJ, DAE, ...) as ``(vertices, faces, rgba)``
    with the file's transforms and ``scale`` applied (``rgba`` is ``None`` when the
    file has no colour)."""
    trimesh = _trimesh()
    loaded = trimesh.load(str(path), force="scene")
    parts = []
    for geometry in loaded.dump() if hasattr(loaded, "dump") else [loaded]:
        if not hasattr(geometry, "faces") or len(geometry.faces) == 0:
            continue
        rgba = None
        visual = getattr(geometry, "visual", None)
        # textured parts (DAE/OBJ materials) carry their colour on the material
        source = getattr(visual, "material", None) if visual is not None else None
        source = source if source is not None else visual
        try:
            if source is not None and (visual.kind is not None or source is not visual):
                c = np.asarray(source.main_color, dtype=float) / 255.0
                rgba = tuple(float(x) for x in c[:4])
        except (AttributeError, ValueError, IndexError, TypeError):
            rgba = None
        parts.append((np.asarray(geometry.vertices, dtype=float) * np.asarray(scale, dtype=float),
                      np.asarray(geometry.faces, dtype=np.int64), rgba))
    return parts


# ---------------------------------------------------------------- URDF


def _floats(text: str | None, n: int, default) -> np.ndarray:
    if text is None:
        return np.asarray(default, dtype=float)
    vals = np.array([float(x) for x in text.split()], dtype=float)
    if vals.size == 1 and n == 3:
        vals = np.repeat(vals, 3)
    if vals.size != n:
        raise ValueError(f"expected {n} numbers, got {text!r}")
    return vals


def urdf_visuals(model, source, package_dirs=(), collision: bool = False):
    """The visuals of a URDF (path or XML text) attached to the model's bodies.

    Returns ``(visuals, bodies_missing)``: the `Visual` list, and the body ids whose
    meshes could not be read (after one warning naming the files).
    """
    text, base_dir = _read_source(source)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ValueError(f"urdf_or_mjcf: not valid XML ({e})") from e
    if root.tag != "robot":
        raise ValueError(f"urdf_or_mjcf: expected a URDF <robot> element, got <{root.tag}>")
    materials = {}
    for mat in root.findall("material"):
        color = mat.find("color")
        if mat.get("name") and color is not None and color.get("rgba"):
            materials[mat.get("name")] = tuple(_floats(color.get("rgba"), 4, DEFAULT_RGBA))
    tag = "collision" if collision else "visual"
    visuals, missing, unreadable, bodies_missing = [], [], [], set()
    for link in root.findall("link"):
        name = link.get("name")
        try:
            body = model.body_id(name)
        except (KeyError, ValueError):
            continue
        for k, vis in enumerate(link.findall(tag)):
            origin = vis.find("origin")
            rpy = _floats(origin.get("rpy") if origin is not None else None, 3, (0, 0, 0))
            xyz = _floats(origin.get("xyz") if origin is not None else None, 3, (0, 0, 0))
            rgba = None
            mat = vis.find("material")
            if mat is not None:
                color = mat.find("color")
                if color is not None and color.get("rgba"):
                    rgba = tuple(_floats(color.get("rgba"), 4, DEFAULT_RGBA))
                elif mat.get("name") in materials:
                    rgba = materials[mat.get("name")]
            geom = vis.find("geometry")
            shape = None if geom is None else next(iter(geom), None)
            if shape is None:
                continue
            label = f"{name}/{tag}{k}"
            parts = []
            if shape.tag == "box":
                parts = [(*_box(_floats(shape.get("size"), 3, (0.1, 0.1, 0.1))), None)]
            elif shape.tag == "sphere":
                parts = [(*_sphere(float(shape.get("radius", 0.05))), None)]
            elif shape.tag == "cylinder":
                parts = [(*_cylinder(float(shape.get("radius", 0.05)),
                                     float(shape.get("length", 0.1))), None)]
            elif shape.tag == "capsule":
                parts = [(*_capsule(float(shape.get("radius", 0.05)),
                                    float(shape.get("length", 0.1))), None)]
            elif shape.tag == "mesh":
                filename = shape.get("filename", "")
                path = resolve_mesh(filename, base_dir, package_dirs)
                if path is None:
                    missing.append(filename)
                    bodies_missing.add(body)
                    continue
                try:
                    parts = load_mesh(path, _floats(shape.get("scale"), 3, (1, 1, 1)))
                except Exception as e:  # noqa: BLE001 - any reader failure: fall back, named
                    unreadable.append(f"{path} ({type(e).__name__}: {e})")
                    bodies_missing.add(body)
                    continue
            for j, (v, f, own) in enumerate(parts):
                visuals.append(Visual(body, f"{label}.{j}" if len(parts) > 1 else label, v, f,
                                      rpy_matrix(rpy), xyz, rgba or own or DEFAULT_RGBA))
    if missing:
        warnings.warn(
            f"{len(missing)} mesh file(s) not found locally (drawn as link capsules): "
            + ", ".join(sorted(set(missing))[:8])
            + ("..." if len(set(missing)) > 8 else "")
            + "; pass package_dirs=[...] with the directory holding the packages",
            stacklevel=3,
        )
    if unreadable:
        warnings.warn("mesh file(s) could not be read (drawn as link capsules): "
                      + "; ".join(unreadable[:4]), stacklevel=3)
    return visuals, bodies_missing


def _read_source(source) -> tuple[str, pathlib.Path | None]:
    if isinstance(source, (bytes, bytearray)):
        return source.decode(), None
    if isinstance(source, str) and source.lstrip().startswith("<"):
        return source, None
    path = pathlib.Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"urdf_or_mjcf: no such file: {source}")
    return path.read_text(), path.parent


# ---------------------------------------------------------------- MJCF

# mjtGeom
_PLANE, _HFIELD, _SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX, _MESH = range(8)


def mjcf_visuals(model, source, groups=(0, 1, 2)):
    """The geoms of an MJCF model (MuJoCo's compiled ``MjModel``) in ``groups`` (MuJoCo's
    viewer shows groups 0-2 by default) attached to the model's bodies by name."""
    import mujoco  # optional dependency (extra: mjcf)

    if isinstance(source, mujoco.MjModel):
        m = source
    else:
        text, base_dir = _read_source(source)
        m = (mujoco.MjModel.from_xml_path(str(source)) if base_dir is not None
             else mujoco.MjModel.from_xml_string(text))
    visuals = []
    for g in range(m.ngeom):
        if int(m.geom_group[g]) not in groups:
            continue
        rgba = np.array(m.geom_rgba[g], dtype=float)
        if m.geom_matid[g] >= 0:
            rgba = np.array(m.mat_rgba[m.geom_matid[g]], dtype=float)
        if rgba[3] <= 0:
            continue
        b = int(m.geom_bodyid[g])
        bname = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or ("world" if b == 0 else f"body{b}")
        try:
            body = model.body_id(bname)
        except (KeyError, ValueError):
            continue
        kind, size = int(m.geom_type[g]), np.array(m.geom_size[g], dtype=float)
        if kind == _SPHERE:
            v, f = _sphere(size[0])
        elif kind == _CAPSULE:
            v, f = _capsule(size[0], 2 * size[1])
        elif kind == _CYLINDER:
            v, f = _cylinder(size[0], 2 * size[1])
        elif kind == _ELLIPSOID:
            v, f = _ellipsoid(size)
        elif kind == _BOX:
            v, f = _box(2 * size)
        elif kind == _PLANE:
            v, f = _plane(size[0] if size[0] > 0 else 5.0, size[1] if size[1] > 0 else 5.0)
        elif kind == _MESH:
            mid = int(m.geom_dataid[g])
            va, vn = int(m.mesh_vertadr[mid]), int(m.mesh_vertnum[mid])
            fa, fn = int(m.mesh_faceadr[mid]), int(m.mesh_facenum[mid])
            v = np.array(m.mesh_vert[va:va + vn], dtype=float)
            f = np.array(m.mesh_face[fa:fa + fn], dtype=np.int64)
        else:  # height fields and SDFs are not drawn
            continue
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"
        visuals.append(Visual(body, f"{bname}/{name}", v, f, quat_matrix(m.geom_quat[g]),
                              np.array(m.geom_pos[g], dtype=float), tuple(rgba)))
    return visuals


# ---------------------------------------------------------------- link capsules

LINK_RGBA = (0.35, 0.55, 0.8, 1.0)
JOINT_RGBA = (0.95, 0.6, 0.2, 1.0)


def _align_z(d: np.ndarray) -> np.ndarray:
    """A rotation taking the z axis onto the unit vector ``d``."""
    z = np.array([0.0, 0.0, 1.0])
    c = float(z @ d)
    if c > 1 - 1e-12:
        return np.eye(3)
    if c < -1 + 1e-12:
        return np.diag([1.0, -1.0, -1.0])
    k = np.cross(z, d)
    s = np.linalg.norm(k)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]]) / s
    return np.eye(3) + s * K + (1 - c) * K @ K


def skeleton_visuals(model, sk, R0, p0, radius: float, bodies=None):
    """Capsules along the links and spheres at the moving joints (the `Skeleton` of the
    model at the pose ``R0, p0``), for the bodies in ``bodies`` (all by default).

    A link from a parent origin to a child origin is rigid in the parent frame unless
    the child's joint translates; such links are left out.
    """
    nb = model.nbodies
    # a joint translates its child when one of its motion columns [w; v] has a linear part
    node_body = np.asarray(model.node_body)[1:]
    moves = np.linalg.norm(np.asarray(model.axes, dtype=float)[:, 3:], axis=1) > 1e-12
    translating = np.zeros(nb, bool)
    np.logical_or.at(translating, node_body, moves)
    P = sk.points(R0, p0)
    visuals = []
    for a, b in zip(sk.seg_start, sk.seg_end):
        if b < nb:  # parent origin -> child origin, drawn on the parent
            owner = int(a)
            if translating[b]:
                continue
        else:  # origin -> CoM of a childless body, drawn on the body
            owner = int(b - nb)
        if bodies is not None and owner not in bodies:
            continue
        start, end = P[a], P[b]
        length = float(np.linalg.norm(end - start))
        if length < 1e-6:
            continue
        Rw = _align_z((end - start) / length)
        v, f = _capsule(radius, length)
        # capsule frame in world -> in the owner's body frame
        E = R0[owner].T
        visuals.append(Visual(owner, f"{model.body_names[owner]}/link{b}", v, f, E @ Rw,
                              E @ ((start + end) / 2 - p0[owner]), LINK_RGBA))
    for b in sk.moving:
        if bodies is not None and int(b) not in bodies:
            continue
        v, f = _sphere(1.6 * radius)
        visuals.append(Visual(int(b), f"{model.body_names[b]}/joint", v, f, np.eye(3),
                              np.zeros(3), JOINT_RGBA))
    return visuals
