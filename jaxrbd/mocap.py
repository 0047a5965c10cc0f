"""Motion-capture data: a synthetic gait for `jaxrbd.models.human28`, noisy and occluded
marker trajectories, and reading/writing marker trajectories from files.

A trial is a `MocapTrial`: sample times, marker positions ``(T, K, 3)`` in metres
(``NaN`` where a marker was not seen) and the marker names; synthetic trials also carry
the true joint trajectories. Files:

* **NPZ** (`save_trial` / `load_trial`, ``.npz``): arrays ``time (T,)`` [s],
  ``markers (T, K, 3)`` [m] with ``NaN`` for missing samples, ``marker_names (K,)``
  (str), and optionally ``q (T, nq)``, ``qd``, ``qdd`` ``(T, nv)``.
* **CSV** (``.csv``): a header row ``time,NAME_x,NAME_y,NAME_z,...`` (three columns
  per marker, in that order), one row per frame; an empty cell or ``nan`` is a
  missing sample. Units are metres (`load_trial` takes ``units="mm"`` for millimetres).
* **C3D** (``.c3d``, read only, needs the optional ``ezc3d`` package): the ``POINT``
  data and labels; millimetres are converted to metres, and samples with a negative
  residual or non-finite coordinates become ``NaN``.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._core.rotation import normalize_quat, quat_mul, quat_to_R
from ._markers import MarkerSet, marker_positions

__all__ = [
    "MocapTrial",
    "gait_trajectory",
    "load_trial",
    "save_trial",
    "synthetic_gait_trial",
    "synthetic_markers",
]


class MocapTrial(eqx.Module):
    """One motion-capture trial: marker trajectories (and, if known, the true motion).

    Attributes:
        time: `(T,)` sample times [s], uniformly spaced.
        markers: `(T, K, 3)` marker positions in world coordinates [m]; ``NaN`` marks a
            sample the cameras did not see.
        names: the ``K`` marker names (static), matching a `MarkerSet`'s names.
        q, qd, qdd: the true configuration `(T, nq)`, velocity and acceleration
            `(T, nv)` of a synthetic trial, or None.

    Example:
        >>> trial = jaxrbd.mocap.MocapTrial(jnp.arange(3) * 0.01, jnp.zeros((3, 1, 3)), ("A",))
        >>> trial.rate, trial.visible.shape
        (100.0, (3, 1))
    """

    time: Float[Array, "nframes"]
    markers: Float[Array, "nframes nmarkers 3"]
    names: tuple[str, ...] = eqx.field(static=True, converter=tuple)
    q: Float[Array, "nframes nq"] | None = None
    qd: Float[Array, "nframes nv"] | None = None
    qdd: Float[Array, "nframes nv"] | None = None

    def __check_init__(self):
        t, m = self.time, self.markers
        if t.ndim != 1 or t.shape[0] < 2:
            raise ValueError(f"MocapTrial.time has shape {t.shape}, expected (T,) with T >= 2")
        if m.ndim != 3 or m.shape[0] != t.shape[0] or m.shape[2] != 3:
            raise ValueError(
                f"MocapTrial.markers has shape {m.shape}, expected ({t.shape[0]}, K, 3)"
            )
        if m.shape[1] != len(self.names):
            raise ValueError(
                f"MocapTrial: {len(self.names)} marker names for {m.shape[1]} marker columns"
            )

    @property
    def dt(self) -> float:
        """The sample interval [s] (from the first two samples)."""
        return float(self.time[1] - self.time[0])

    @property
    def rate(self) -> float:
        """The sampling rate [Hz]."""
        return round(1.0 / self.dt, 9)

    @property
    def visible(self):
        """`(T, K)` bool: the marker was seen in that frame (all three coordinates finite)."""
        return jnp.all(jnp.isfinite(self.markers), axis=-1)

    def select(self, markers: MarkerSet) -> MocapTrial:
        """The columns of ``markers``' names, in its order (missing names raise).

        Example:
            >>> ms = jaxrbd.MarkerSet.from_dict({"A": (1, (0.0, 0.0, 0.0))})
            >>> trial = jaxrbd.mocap.MocapTrial(jnp.arange(3) * 0.01, jnp.zeros((3, 2, 3)), ("B", "A"))
            >>> trial.select(ms).names
            ('A',)
        """
        missing = [n for n in markers.names if n not in self.names]
        if missing:
            raise ValueError(f"the trial has no markers {missing}; it has {list(self.names)}")
        idx = np.array([self.names.index(n) for n in markers.names], dtype=np.int64)
        return MocapTrial(self.time, self.markers[:, idx], markers.names, self.q, self.qd, self.qdd)


# ----------------------------------------------------------------------------- the gait

#: Joints of `jaxrbd.models.human28` the synthetic gait drives.
_HUMAN28_JOINTS = ("pelvis", "lumbar", "neck", "l_shoulder", "l_elbow", "l_hip", "l_knee",
                   "l_ankle", "r_shoulder", "r_elbow", "r_hip", "r_knee", "r_ankle")


def _bump(phase, centre, kappa):
    """A smooth periodic bump (von Mises) at ``centre`` (fraction of the cycle), peak 1."""
    return jnp.exp(kappa * (jnp.cos(2 * jnp.pi * (phase - centre)) - 1.0))


def _leg(phase):
    """Sagittal hip, knee and ankle angles [rad] of one leg over the gait cycle (phase 0
    = heel strike), model signs: hip +y = extension, knee flexion, ankle plantarflexion."""
    d = jnp.pi / 180.0
    hip_flexion = 8.0 + 20.0 * jnp.cos(2 * jnp.pi * phase) + 3.0 * jnp.sin(4 * jnp.pi * phase)
    knee = 5.0 + 55.0 * _bump(phase, 0.72, 6.0) + 14.0 * _bump(phase, 0.15, 8.0)
    ankle = 16.0 * _bump(phase, 0.62, 10.0) - 9.0 * _bump(phase, 0.42, 6.0) - 2.0
    return -hip_flexion * d, knee * d, ankle * d


def _quat_zyx(yaw, pitch, roll):
    cy, sy = jnp.cos(yaw / 2), jnp.sin(yaw / 2)
    cp, sp = jnp.cos(pitch / 2), jnp.sin(pitch / 2)
    cr, sr = jnp.cos(roll / 2), jnp.sin(roll / 2)
    return jnp.stack([
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    ])


def _check_human28(model):
    if model.joint_names != _HUMAN28_JOINTS:
        raise ValueError(
            "the synthetic gait drives jaxrbd.models.human28's joints "
            f"{_HUMAN28_JOINTS}, the model has {model.joint_names}"
        )


def gait_trajectory(model, t, *, speed=1.3, stride_frequency=0.9, pelvis_height=None,
                    amplitude=1.0):
    """A smooth, periodic walking motion of `jaxrbd.models.human28` at time ``t``.

    Joint angles are periodic in the gait phase ``f t`` (``f`` the stride frequency;
    the right leg half a cycle behind the left): hip flexion/extension, a knee with its
    loading-response and swing peaks, ankle plantar/dorsiflexion, small hip ab/adduction
    and rotation, arm swing opposite to the legs, trunk counter-rotation; the pelvis
    moves forward along world x at ``speed`` with vertical and lateral oscillations and
    small rotations. The joint trajectories are infinitely smooth, so their derivatives
    (from `jax.jvp`) are exact.

    Args:
        model: `jaxrbd.models.human28` (any mass and height).
        t: time [s], a scalar (``jax.vmap`` for many).
        speed: walking speed [m/s].
        stride_frequency: strides (two steps) per second [Hz].
        pelvis_height: the mean height of the pelvis frame [m]; default standing
            height (foot sole on z = 0) less 2 cm.
        amplitude: scales every joint excursion (1 is a normal walk).

    Returns:
        `q`, `(29,)`.

    Raises:
        ValueError: the model is not `human28`.

    Example:
        >>> m = jaxrbd.models.human28()
        >>> jaxrbd.mocap.gait_trajectory(m, 0.5).shape
        (29,)
    """
    _check_human28(model)
    t = jnp.asarray(t, model.dtype)
    if pelvis_height is None:
        # foot frame below the pelvis, plus the ankle height (model proportions)
        foot_z = model.Xtree_r[model.body_id("l_shank"), 2] + model.Xtree_r[
            model.body_id("l_foot"), 2]
        height_scale = -(model.Xtree_r[model.body_id("l_shank"), 2]) / 0.4222
        pelvis_height = -foot_z + 0.039 * 1.741 * height_scale - 0.02
    w = 2 * jnp.pi * stride_frequency
    phase = stride_frequency * t
    a = amplitude
    d = jnp.pi / 180.0
    q = jnp.zeros(model.nq, model.dtype)
    # pelvis: forward at `speed`, two vertical dips per stride, lateral sway towards the
    # stance leg, rotation and obliquity once per stride
    x = speed * t
    y = 0.02 * a * jnp.sin(w * t)
    z = pelvis_height + 0.015 * a * jnp.cos(2 * w * t)
    yaw = 5.0 * d * a * jnp.sin(w * t)
    pitch = 2.0 * d * a * jnp.cos(2 * w * t) + 4.0 * d
    roll = -4.0 * d * a * jnp.sin(w * t + 0.3)
    q = q.at[0:3].set(jnp.stack([x, y, z]))
    q = q.at[3:7].set(normalize_quat(_quat_zyx(yaw, pitch, roll)[:, None])[:, 0])

    def put(q, joint, values):
        sl = model.q_index(joint)
        return q.at[sl].set(jnp.stack(values) if len(values) > 1 else values[0])

    # trunk: counter-rotation against the pelvis, slight forward lean
    q = put(q, "lumbar", [2.0 * d - 1.5 * d * a * jnp.cos(2 * w * t),
                          3.0 * d * a * jnp.sin(w * t + 0.3), -8.0 * d * a * jnp.sin(w * t)])
    q = put(q, "neck", [-3.0 * d + 2.0 * d * a * jnp.cos(2 * w * t)])
    for side, shift, sy in (("l", 0.0, 1.0), ("r", 0.5, -1.0)):
        p = phase - shift
        hip, knee, ankle = _leg(p)
        c = jnp.cos(2 * jnp.pi * p)
        q = put(q, f"{side}_hip", [a * hip, sy * a * (-3.0 * d * jnp.sin(2 * jnp.pi * p) - 2.0 * d),
                                   sy * a * 4.0 * d * jnp.sin(2 * jnp.pi * p + 0.5)])
        q = put(q, f"{side}_knee", [a * knee])
        q = put(q, f"{side}_ankle", [a * ankle])
        # the arm swings with the opposite leg: forward (negative y) while this leg is back
        q = put(q, f"{side}_shoulder", [a * 18.0 * d * c, sy * (-8.0 * d), sy * 5.0 * d])
        q = put(q, f"{side}_elbow", [-(25.0 + 12.0 * a * (1.0 - c)) * d])
    return q


def _velocity(model, q_of_t, t):
    """``qd`` of the human28 path at ``t``: ``dq/dt`` for the joint angles; for the free
    pelvis the body-frame twist ``[2 vec(conj(quat) quat'); R^T p']``."""
    q, dq = jax.jvp(q_of_t, (t,), (jnp.ones((), t.dtype),))
    quat, dquat = q[3:7], dq[3:7]
    conj = quat * jnp.array([1.0, -1.0, -1.0, -1.0], quat.dtype)
    w = 2.0 * _quat_mul(conj, dquat)[1:]
    R = quat_to_R(quat[:, None])[..., 0]
    v = R.T @ dq[0:3]
    return jnp.concatenate([w, v, dq[7:]])


def _quat_mul(a, b):
    return quat_mul(a[:, None], b[:, None])[:, 0]


def _derivatives(model, q_of_t, t):
    """``q, qd, qdd`` of the human28 path at ``t``, exact (forward-mode AD)."""
    qd, qdd = jax.jvp(lambda s: _velocity(model, q_of_t, s), (t,), (jnp.ones((), t.dtype),))
    return q_of_t(t), qd, qdd


_positions = jax.jit(jax.vmap(marker_positions, (None, 0, None)))


@jax.jit
def _gait_samples_impl(model, t, gait):
    path = lambda s: gait_trajectory(model, s, **gait)
    return jax.vmap(lambda s: _derivatives(model, path, s))(t)


def _gait_samples(model, t, gait):
    # the gait options are Python numbers: pass them as traced scalars (one compile)
    names = tuple(k for k, _ in gait)
    for k in names:
        if k not in ("speed", "stride_frequency", "pelvis_height", "amplitude"):
            raise TypeError(f"gait_trajectory() got an unexpected keyword argument {k!r}")
    return _gait_samples_impl(model, t, {k: jnp.asarray(v, model.dtype) for k, v in gait})


def synthetic_markers(model, markers, q, *, noise_std=0.002, gap_probability=0.005,
                      max_gap=20, seed=0):
    """Marker trajectories of a motion, with Gaussian noise and occlusions.

    A host-side data generator (numpy's random generator draws the noise and the gaps):
    call it outside `jax.jit`.

    Args:
        model: a `Model`.
        markers: a `MarkerSet` (``K`` markers).
        q: `(T, nq)` configurations.
        noise_std: standard deviation of the isotropic Gaussian noise added to every
            coordinate [m].
        gap_probability: the probability that a marker's occlusion starts in a given
            frame (independently per marker and frame); a gap lasts ``1..max_gap``
            frames (uniform).
        max_gap: the longest gap [frames].
        seed: seed of the numpy random generator (noise and gaps).

    Returns:
        `(T, K, 3)` world positions [m], ``NaN`` in occluded frames.

    Example:
        >>> m, ms = jaxrbd.models.human28(markers=True)
        >>> Q = jnp.stack([jaxrbd.neutral_configuration(m)] * 4)
        >>> jaxrbd.mocap.synthetic_markers(m, ms, Q, gap_probability=0.0).shape
        (4, 36, 3)
    """
    q = jnp.asarray(q, model.dtype)
    if q.ndim != 2 or q.shape[1] != model.nq:
        raise ValueError(f"q has shape {q.shape}, expected (T, {model.nq}) = (T, model.nq)")
    for name, x in (("noise_std", noise_std), ("gap_probability", gap_probability)):
        if not (np.isfinite(x) and x >= 0):
            raise ValueError(f"{name} must be >= 0 and finite, got {x!r}")
    if int(max_gap) < 1:
        raise ValueError(f"max_gap must be >= 1 frame, got {max_gap!r}")
    P = np.asarray(_positions(model, q, markers))
    rng = np.random.default_rng(seed)
    P = P + noise_std * rng.standard_normal(P.shape)
    T, K = P.shape[:2]
    start = rng.random((T, K)) < gap_probability
    for t, k in zip(*np.nonzero(start)):
        P[t : t + rng.integers(1, int(max_gap) + 1), k] = np.nan
    return jnp.asarray(P, model.dtype)


def synthetic_gait_trial(model, markers, *, duration=4.0, rate=100.0, noise_std=0.002,
                         gap_probability=0.005, max_gap=20, seed=0, **gait):
    """A synthetic walking trial of `jaxrbd.models.human28`: truth and markers.

    The motion is `gait_trajectory` sampled at ``rate`` for ``duration`` seconds, with
    exact velocities and accelerations; the markers come from `synthetic_markers`.

    Args:
        model: `jaxrbd.models.human28`.
        markers: its `MarkerSet` (``human28(markers=True)``) or a subset.
        duration: length [s]; rate: sampling rate [Hz].
        noise_std: as `synthetic_markers`.
        gap_probability: as `synthetic_markers`.
        max_gap: as `synthetic_markers`.
        seed: as `synthetic_markers`.
        **gait: keyword arguments of `gait_trajectory` (``speed``...).

    Returns:
        A `MocapTrial` with ``q``, ``qd`` and ``qdd`` set.

    Example:
        >>> m, ms = jaxrbd.models.human28(markers=True)
        >>> trial = jaxrbd.mocap.synthetic_gait_trial(m, ms, duration=0.1, rate=100.0)
        >>> trial.markers.shape, trial.q.shape
        ((10, 36, 3), (10, 29))
    """
    _check_human28(model)
    if not (duration > 0 and rate > 0):
        raise ValueError(f"duration and rate must be positive, got {duration!r}, {rate!r}")
    T = round(duration * rate)
    if T < 2:
        raise ValueError(f"duration * rate = {duration * rate} samples, expected at least 2")
    t = jnp.arange(T, dtype=model.dtype) / rate
    q, qd, qdd = _gait_samples(model, t, tuple(sorted(gait.items())))
    P = synthetic_markers(model, markers, q, noise_std=noise_std, gap_probability=gap_probability,
                          max_gap=max_gap, seed=seed)
    return MocapTrial(t, P, markers.names, q, qd, qdd)


# ----------------------------------------------------------------------------- files


def save_trial(path, trial: MocapTrial) -> None:
    """Write a trial as NPZ (``.npz``) or CSV (``.csv``, markers only; see the module
    docstring for both layouts).

    Example:
        >>> import tempfile, pathlib
        >>> trial = jaxrbd.mocap.MocapTrial(jnp.arange(3) * 0.01, jnp.ones((3, 1, 3)), ("A",))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     jaxrbd.mocap.save_trial(pathlib.Path(d) / "t.csv", trial)
        ...     jaxrbd.mocap.load_trial(pathlib.Path(d) / "t.csv").names
        ('A',)
    """
    path = Path(path)
    suffix = path.suffix.lower()
    time, markers = np.asarray(trial.time), np.asarray(trial.markers)
    if suffix == ".npz":
        extra = {k: np.asarray(getattr(trial, k)) for k in ("q", "qd", "qdd")
                 if getattr(trial, k) is not None}
        np.savez(path, time=time, markers=markers, marker_names=np.array(trial.names), **extra)
    elif suffix == ".csv":
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time"] + [f"{n}_{c}" for n in trial.names for c in "xyz"])
            for t, row in zip(time, markers.reshape(len(time), -1)):
                w.writerow([repr(float(t))] + ["" if not np.isfinite(v) else repr(float(v))
                                               for v in row])
    else:
        raise ValueError(f"save_trial: unknown file type {suffix!r}, expected .npz or .csv")


def load_trial(path, *, units="m", dtype=None) -> MocapTrial:
    """Read a trial from NPZ, CSV or C3D (see the module docstring for the layouts).

    Args:
        path: the file; its suffix picks the format.
        units: the length unit of a CSV file, ``"m"`` or ``"mm"`` (NPZ is in metres,
            C3D's own unit is read from the file).
        dtype: the float dtype of the arrays (JAX's default).

    Returns:
        A `MocapTrial` (``q``, ``qd``, ``qdd`` only when an NPZ file has them).

    Raises:
        ValueError: an unknown suffix or unit, a malformed header, inconsistent arrays.
        ImportError: a C3D file without ``ezc3d`` installed.
    """
    path = Path(os.fspath(path))
    dtype = dtype or jnp.zeros(()).dtype
    if units not in ("m", "mm"):
        raise ValueError(f"units must be 'm' or 'mm', got {units!r}")
    suffix = path.suffix.lower()
    extra = {}
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as f:
            missing = [k for k in ("time", "markers", "marker_names") if k not in f.files]
            if missing:
                raise ValueError(f"{path}: NPZ trial without {missing} (has {f.files})")
            time, markers = f["time"], f["markers"]
            names = tuple(str(n) for n in f["marker_names"])
            extra = {k: jnp.asarray(f[k], dtype) for k in ("q", "qd", "qdd") if k in f.files}
    elif suffix == ".csv":
        time, markers, names = _read_csv(path)
        if units == "mm":
            markers = markers / 1000.0
    elif suffix == ".c3d":
        time, markers, names = _read_c3d(path)
    else:
        raise ValueError(f"load_trial: unknown file type {suffix!r}, expected .npz, .csv or .c3d")
    return MocapTrial(jnp.asarray(time, dtype), jnp.asarray(markers, dtype), names, **extra)


def _read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise ValueError(f"{path}: empty CSV file")
    head = [h.strip() for h in rows[0]]
    if not head or head[0].lower() != "time" or (len(head) - 1) % 3:
        raise ValueError(
            f"{path}: the header must be time,NAME_x,NAME_y,NAME_z,... (got {head[:4]}...)"
        )
    names = []
    for k in range(1, len(head), 3):
        base = [h[:-2] for h in head[k : k + 3]]
        tails = [h[-2:] for h in head[k : k + 3]]
        if tails != ["_x", "_y", "_z"] or len(set(base)) != 1:
            raise ValueError(f"{path}: columns {head[k:k + 3]} are not NAME_x, NAME_y, NAME_z")
        names.append(base[0])

    def num(s):
        s = s.strip()
        return float("nan") if s == "" else float(s)

    data = np.array([[num(x) for x in r] for r in rows[1:] if r], dtype=np.float64)
    if data.ndim != 2 or data.shape[1] != len(head):
        raise ValueError(f"{path}: rows do not all have {len(head)} columns")
    return data[:, 0], data[:, 1:].reshape(len(data), len(names), 3), tuple(names)


def _read_c3d(path):
    try:
        import ezc3d  # optional dependency (extra: mocap)
    except ImportError as e:
        raise ImportError(
            "reading C3D files needs the optional ezc3d package: pip install ezc3d"
        ) from e
    c = ezc3d.c3d(str(path))
    pts = np.asarray(c["data"]["points"], dtype=np.float64)  # (4, K, T)
    params = c["parameters"]["POINT"]
    names = tuple(str(n).strip() for n in params["LABELS"]["value"])[: pts.shape[1]]
    units = list(params.get("UNITS", {}).get("value", [])) or ["mm"]  # C3D's default unit
    unit = str(units[0]).strip().lower()
    scale = {"mm": 1e-3, "cm": 1e-2, "m": 1.0}.get(unit)
    if scale is None:
        raise ValueError(f"{path}: unknown POINT:UNITS {unit!r}")
    rate = float(np.asarray(params["RATE"]["value"]).ravel()[0])
    xyz = np.moveaxis(pts[:3], (0, 1, 2), (2, 1, 0)) * scale  # (T, K, 3)
    if "meta_points" in c["data"] and "residuals" in c["data"]["meta_points"]:
        res = np.asarray(c["data"]["meta_points"]["residuals"])[0].T  # (T, K)
        xyz[res < 0] = np.nan
    first = int(c["header"]["points"]["first_frame"])
    time = (first + np.arange(xyz.shape[0])) / rate
    return time, xyz, names
