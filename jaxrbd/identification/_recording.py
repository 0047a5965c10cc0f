"""Recordings of joint motion and effort: loading, checking, resampling, zero-phase
filtering, differentiation, trimming and splitting.

Everything here is host-side numpy: a `Recording` is data from a file, prepared once,
before the traced identification.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Sequence

import numpy as np

__all__ = ["Recording", "butterworth_filtfilt", "concatenate_recordings"]

_SIGNALS = ("q", "qd", "qdd", "tau", "current")


def _signal(name: str, x, n: int | None, what: str) -> np.ndarray:
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be an array of numbers ({e})") from None
    if x.ndim == 1 and n is not None and n == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"{name} has shape {x.shape}, expected (T, n) = (samples, joints)")
    if n is not None and x.shape[1] != n:
        raise ValueError(f"{name} has shape {x.shape}, expected (T, {n}) = (samples, {what})")
    return x


@dataclasses.dataclass(frozen=True, eq=False)
class Recording:
    """A log of one robot motion: time, joint positions and (optionally) velocities,
    accelerations, joint torques and motor currents.

    All arrays are numpy float64 with one row per sample and one column per joint, in
    the order of ``joint_names``. Methods return new recordings (the object is frozen).
    A recording without ``qd``/``qdd`` gets them from `differentiate`; one without
    ``tau`` but with ``current`` gets torques from `with_drive_gains`.

    Attributes:
        t: `(T,)` sample times [s], strictly increasing.
        q: `(T, n)` joint positions [rad | m].
        qd, qdd: `(T, n)` velocities [rad/s] and accelerations [rad/s^2], or None.
        tau: `(T, n)` joint efforts [N m | N], or None.
        current: `(T, n)` motor currents [A], or None.
        joint_names: `n` joint names (None: the model's joint order is assumed).
        name: a label for reports.

    Example:
        >>> t = np.linspace(0.0, 1.0, 101)
        >>> q = np.stack([np.sin(2 * np.pi * t), np.cos(2 * np.pi * t)], axis=1)
        >>> rec = Recording.from_arrays(t, q, tau=np.zeros_like(q)).differentiate()
        >>> rec.qd.shape, rec.rate
        ((101, 2), 100.0)
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray | None = None
    qdd: np.ndarray | None = None
    tau: np.ndarray | None = None
    current: np.ndarray | None = None
    joint_names: tuple[str, ...] | None = None
    name: str = "recording"

    def __post_init__(self):
        t = np.asarray(self.t, dtype=np.float64)
        if t.ndim != 1 or len(t) < 2:
            raise ValueError(f"{self.name}: t has shape {t.shape}, expected (T,) with T >= 2")
        if not np.all(np.isfinite(t)):
            bad = np.flatnonzero(~np.isfinite(t))
            raise ValueError(f"{self.name}: t has non-finite samples at indices {bad[:5].tolist()}")
        steps = np.diff(t)
        if np.any(steps <= 0):
            k = int(np.flatnonzero(steps <= 0)[0])
            raise ValueError(
                f"{self.name}: t is not strictly increasing: t[{k}] = {t[k]!r}, "
                f"t[{k + 1}] = {t[k + 1]!r} (sort the samples or drop duplicates)"
            )
        object.__setattr__(self, "t", t)
        q = _signal(f"{self.name}: q", self.q, None, "")
        n = q.shape[1]
        object.__setattr__(self, "q", q)
        for key in _SIGNALS[1:]:
            x = getattr(self, key)
            if x is not None:
                object.__setattr__(self, key, _signal(f"{self.name}: {key}", x, n,
                                                      "joints, as q"))
        for key in _SIGNALS:
            x = getattr(self, key)
            if x is None:
                continue
            if len(x) != len(t):
                raise ValueError(
                    f"{self.name}: {key} has {len(x)} samples but t has {len(t)}; "
                    "every signal needs one row per time stamp"
                )
            if not np.all(np.isfinite(x)):
                rows = np.flatnonzero(~np.all(np.isfinite(x), axis=1))
                raise ValueError(
                    f"{self.name}: {key} has NaN or infinite values in {len(rows)} samples "
                    f"(first at t = {t[rows[0]]:.6g} s, index {rows[0]}); drop or interpolate "
                    "them before identification"
                )
        if self.joint_names is not None:
            names = tuple(str(s) for s in self.joint_names)
            if len(names) != n:
                raise ValueError(
                    f"{self.name}: {len(names)} joint_names for {n} columns of q"
                )
            if len(set(names)) != n:
                raise ValueError(f"{self.name}: duplicate joint_names {names}")
            object.__setattr__(self, "joint_names", names)

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_arrays(cls, t, q, qd=None, qdd=None, tau=None, *, current=None,
                    joint_names=None, name="recording"):
        """A recording from arrays (see the class attributes for shapes and units).

        Raises:
            ValueError: mismatched lengths or widths, non-finite samples, time not
                strictly increasing, ``joint_names`` of the wrong length.
        """
        return cls(t, q, qd, qdd, tau, current, joint_names, name)

    @classmethod
    def from_npz(cls, path, *, keys=None, joint_names=None, name=None):
        """A recording from a numpy ``.npz`` file.

        Args:
            path: the file.
            keys: a mapping from this class's fields (``t, q, qd, qdd, tau, current``) to
                the file's keys; default: those names, or FloBaRoID's ``times``,
                ``positions``, ``velocities``, ``accelerations``, ``torques``, ``currents``.
            joint_names: names of the columns (optional).
            name: a label (default: the file name).
        """
        path = pathlib.Path(path)
        data = np.load(path)
        default = {"t": ("t", "times", "time"), "q": ("q", "positions"),
                   "qd": ("qd", "velocities"), "qdd": ("qdd", "accelerations"),
                   "tau": ("tau", "torques"), "current": ("current", "currents")}
        keys = dict(keys or {})
        fields = {}
        for field, candidates in default.items():
            if field in keys:
                if keys[field] not in data:
                    raise ValueError(f"{path}: no key {keys[field]!r} (keys: {sorted(data)})")
                fields[field] = data[keys[field]]
                continue
            for c in candidates:
                if c in data:
                    fields[field] = data[c]
                    break
        for req in ("t", "q"):
            if req not in fields:
                raise ValueError(f"{path}: no {req} (keys: {sorted(data)}); pass keys=")
        return cls(**fields, joint_names=joint_names, name=name or path.stem)

    @classmethod
    def from_csv(cls, path, *, time="t", joint_names, columns=None, delimiter=",", name=None):
        """A recording from a CSV file with a header row.

        Columns are found by name: ``time`` for the time stamps, and for each signal
        ``<prefix>_<joint>`` with prefixes ``q``, ``qd``, ``qdd``, ``tau`` and ``current``
        (e.g. ``q_joint1, tau_joint1``). Signals with no column for any joint are left
        out; a signal with some joints missing is an error.

        Args:
            path: the file.
            time: the time column's name.
            joint_names: the joints, in the order of the recording's columns.
            columns: optional mapping from prefix to another prefix
                (``{"tau": "effort"}`` reads ``effort_joint1`` ...).
            delimiter: the field separator.
            name: a label (default: the file name).
        """
        path = pathlib.Path(path)
        with open(path) as f:
            header = [h.strip() for h in f.readline().strip().split(delimiter)]
        data = np.loadtxt(path, delimiter=delimiter, skiprows=1, ndmin=2)
        if data.shape[1] != len(header):
            raise ValueError(f"{path}: {len(header)} header names but {data.shape[1]} columns")
        index = {h: k for k, h in enumerate(header)}
        if time not in index:
            raise ValueError(f"{path}: no time column {time!r} (columns: {header})")
        joint_names = tuple(joint_names)
        columns = dict(columns or {})
        fields = {"t": data[:, index[time]]}
        for sig in _SIGNALS:
            prefix = columns.get(sig, sig)
            names = [f"{prefix}_{j}" for j in joint_names]
            present = [c in index for c in names]
            if not any(present):
                continue
            if not all(present):
                missing = [c for c, p in zip(names, present) if not p]
                raise ValueError(f"{path}: {sig} columns missing: {missing}")
            fields[sig] = data[:, [index[c] for c in names]]
        if "q" not in fields:
            raise ValueError(f"{path}: no position columns q_<joint> (columns: {header})")
        return cls(**fields, joint_names=joint_names, name=name or path.stem)

    # ------------------------------------------------------------------ properties

    @property
    def n_samples(self) -> int:
        return len(self.t)

    @property
    def n_joints(self) -> int:
        return self.q.shape[1]

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0])

    @property
    def rate(self) -> float:
        """The median sample rate [Hz]."""
        return float(1.0 / np.median(np.diff(self.t)))

    def is_uniform(self, rtol: float = 1e-6) -> bool:
        dt = np.diff(self.t)
        return bool(np.ptp(dt) <= rtol * np.median(dt))

    def replace(self, **changes) -> Recording:
        return dataclasses.replace(self, **changes)

    def _map(self, f, signals=_SIGNALS) -> dict:
        return {k: (f(getattr(self, k)) if getattr(self, k) is not None else None)
                for k in signals}

    # ------------------------------------------------------------------ processing

    def for_model(self, model) -> Recording:
        """The columns reordered to ``model.joint_names`` (by name).

        Raises:
            ValueError: a recorded joint is not in the model, or a model joint is not
                recorded; without ``joint_names``, a column count other than ``model.nv``.
        """
        names = tuple(model.joint_names)
        if model.nq != model.nv:
            raise ValueError("identification needs a model with nq == nv (1-DoF joints)")
        if self.joint_names is None:
            if self.n_joints != model.nv:
                raise ValueError(
                    f"{self.name} has {self.n_joints} joints and no joint_names; the model "
                    f"has nv = {model.nv} ({', '.join(names)})"
                )
            return self.replace(joint_names=names)
        unknown = [j for j in self.joint_names if j not in names]
        if unknown:
            raise ValueError(
                f"{self.name}: joints {unknown} are not in the model (model joints: "
                f"{', '.join(names)})"
            )
        missing = [j for j in names if j not in self.joint_names]
        if missing:
            raise ValueError(f"{self.name}: the model's joints {missing} are not recorded")
        order = [self.joint_names.index(j) for j in names]
        return self.replace(**self._map(lambda x: x[:, order]), joint_names=names)

    def resample(self, rate: float | None = None) -> Recording:
        """Linear interpolation onto a uniform grid from the first to the last time stamp.

        Args:
            rate: samples per second [Hz]; default: the median rate of the recording.
        """
        rate = self.rate if rate is None else float(rate)
        if not rate > 0:
            raise ValueError(f"rate must be positive, got {rate}")
        n = int(np.floor(self.duration * rate + 1e-9)) + 1
        t = self.t[0] + np.arange(n) / rate

        def interp(x):
            return np.stack([np.interp(t, self.t, x[:, j]) for j in range(x.shape[1])], axis=1)

        return self.replace(t=t, **self._map(interp))

    def lowpass(self, cutoff: float, order: int = 4, signals: Sequence[str] = ("q", "qd", "qdd",
                "tau", "current")) -> Recording:
        """Zero-phase Butterworth low-pass filtering (`butterworth_filtfilt`) of the named
        signals; the recording must be uniformly sampled (`resample` first).

        Args:
            cutoff: the -6 dB cut-off frequency of the forward-backward filter [Hz]
                (the -3 dB frequency of the Butterworth filter of ``order``).
            order: the Butterworth order of one pass.
            signals: which signals to filter (absent ones are skipped).
        """
        if not self.is_uniform(1e-3):
            raise ValueError(f"{self.name} is not uniformly sampled; call resample() first")
        unknown = set(signals) - set(_SIGNALS)
        if unknown:
            raise ValueError(f"unknown signals {sorted(unknown)}; choose from {_SIGNALS}")
        fs = self.rate
        return self.replace(**self._map(lambda x: butterworth_filtfilt(x, cutoff, fs, order),
                                        tuple(signals)))

    def differentiate(self, *, velocities: bool | None = None) -> Recording:
        """Velocities and accelerations by central differences (second order in the
        interior, one-sided at the ends; non-uniform steps handled).

        ``qd`` is computed from ``q`` when absent (or when ``velocities=True``), and
        ``qdd`` always from ``qd``. Filter first: differences amplify noise by ``1/dt``.
        """
        qd = self.qd
        if qd is None or velocities:
            qd = np.gradient(self.q, self.t, axis=0)
        qdd = np.gradient(qd, self.t, axis=0)
        return self.replace(qd=qd, qdd=qdd)

    def trim(self, start: int = 0, end: int = 0) -> Recording:
        """Drop ``start`` samples at the beginning and ``end`` at the end (e.g. the filter's
        edge transients)."""
        if start < 0 or end < 0 or start + end >= self.n_samples - 1:
            raise ValueError(
                f"cannot drop {start} + {end} samples of {self.n_samples} in {self.name}"
            )
        sl = slice(start, self.n_samples - end)
        return self.replace(t=self.t[sl], **self._map(lambda x: x[sl]))

    def window(self, t_start: float = -np.inf, t_end: float = np.inf) -> Recording:
        """The samples with ``t_start <= t < t_end`` [s]."""
        keep = (self.t >= t_start) & (self.t < t_end)
        if keep.sum() < 2:
            raise ValueError(f"{self.name}: fewer than 2 samples in [{t_start}, {t_end})")
        return self.replace(t=self.t[keep], **self._map(lambda x: x[keep]))

    def split(self, at: float) -> tuple[Recording, Recording]:
        """Two recordings, before and from ``at`` seconds after the first sample (a split
        in time for training and validation)."""
        a = self.window(-np.inf, self.t[0] + at)
        b = self.window(self.t[0] + at, np.inf)
        return a.replace(name=f"{self.name}[:{at:g}s]"), b.replace(name=f"{self.name}[{at:g}s:]")

    def split_by_excitation(self, fraction: float = 0.3) -> tuple[Recording, Recording]:
        """Two recordings: the ``1 - fraction`` of the samples with the least motion and
        the ``fraction`` with the most (a split by excitation for validation).

        A sample's motion is ``|(qd / s_qd, qdd / s_qdd)|``, each joint's velocity and
        acceleration divided by its standard deviation over the recording. Fitting on the
        calmer samples and scoring on the faster ones tests what a model is used for on
        a new, faster trajectory: extrapolation in speed and acceleration, where the
        velocity- and acceleration-dependent parameters (the ones a repeated trajectory
        or a split in time cannot check) decide the error. Both parts keep the samples in
        time order; their time stamps are no longer uniform, so filter and differentiate
        before splitting (`prepared`).

        Args:
            fraction: the share of samples in the second part, in ``(0, 1)``.

        Example:
            >>> t = np.linspace(0.0, 1.0, 101)
            >>> rec = Recording.from_arrays(t, np.sin(6 * t)[:, None]).differentiate()
            >>> calm, fast = rec.split_by_excitation(0.2)
            >>> calm.n_samples, fast.n_samples
            (81, 20)
        """
        if self.qd is None or self.qdd is None:
            raise ValueError(f"{self.name}: split_by_excitation needs qd and qdd "
                             "(differentiate or prepared first)")
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"fraction must be in (0, 1), got {fraction}")
        n = self.n_samples
        k = int(round(fraction * n))
        if k < 2 or n - k < 2:
            raise ValueError(f"{self.name}: a fraction of {fraction:g} of {n} samples leaves "
                             "fewer than 2 samples in a part")

        def scaled(x):
            sd = x.std(axis=0)
            return x / np.where(sd > 0, sd, 1.0)

        motion = np.linalg.norm(np.concatenate([scaled(self.qd), scaled(self.qdd)], 1), axis=1)
        fast = np.zeros(n, bool)
        fast[np.argsort(motion, kind="stable")[n - k:]] = True
        calm = ~fast
        return (self.replace(t=self.t[calm], name=f"{self.name}[calm {1 - fraction:g}]",
                             **self._map(lambda x: x[calm])),
                self.replace(t=self.t[fast], name=f"{self.name}[fast {fraction:g}]",
                             **self._map(lambda x: x[fast])))

    def shift(self, delay: float, signals: Sequence[str] = ("tau",)) -> Recording:
        """The named signals moved ``delay`` seconds earlier against the others:
        ``x_new(t) = x(t + delay)``, by linear interpolation.

        A positive ``delay`` undoes a lag of the named signals (a torque sensor or a
        logging path that records ``tau`` late by ``delay``); a negative one undoes a
        lead. Samples whose ``t + delay`` falls outside the recording are dropped, so the
        result is shorter by about ``|delay| * rate`` samples at one end. `estimate_delay`
        chooses ``delay`` by validation.

        Args:
            delay: [s].
            signals: which signals to move (absent ones are skipped).

        Example:
            >>> t = np.arange(6) * 0.01
            >>> rec = Recording.from_arrays(t, t[:, None], tau=t[:, None] - 0.02)
            >>> late = rec.shift(0.02)
            >>> late.n_samples, np.allclose(late.tau, late.q)
            (4, True)
        """
        delay = float(delay)
        if not np.isfinite(delay):
            raise ValueError(f"delay must be finite, got {delay}")
        unknown = set(signals) - set(_SIGNALS)
        if unknown:
            raise ValueError(f"unknown signals {sorted(unknown)}; choose from {_SIGNALS}")
        keep = (self.t + delay >= self.t[0]) & (self.t + delay <= self.t[-1])
        if keep.sum() < 2:
            raise ValueError(f"{self.name}: a delay of {delay:g} s leaves fewer than 2 "
                             f"samples of {self.duration:g} s")
        t = self.t[keep]

        def move(x):
            return np.stack([np.interp(t + delay, self.t, x[:, j]) for j in range(x.shape[1])],
                            axis=1)

        moved = self._map(move, tuple(signals))
        rest = self._map(lambda x: x[keep], tuple(k for k in _SIGNALS if k not in signals))
        return self.replace(t=t, **moved, **rest)

    def decimate(self, step: int) -> Recording:
        """Every ``step``-th sample (low-pass filter first to avoid aliasing)."""
        step = int(step)
        if step < 1:
            raise ValueError(f"step must be a positive int, got {step}")
        return self.replace(t=self.t[::step], **self._map(lambda x: x[::step]))

    def with_drive_gains(self, gains) -> Recording:
        """Joint torques from motor currents: ``tau = gains * current`` (per joint drive
        gains, [N m / A], the motor torque constant times the gear ratio)."""
        if self.current is None:
            raise ValueError(f"{self.name} has no current to convert")
        g = np.broadcast_to(np.asarray(gains, np.float64), (self.n_joints,))
        return self.replace(tau=self.current * g)

    def prepared(self, cutoff: float, *, rate: float | None = None, order: int = 4,
                 trim: int | None = None) -> Recording:
        """The usual preparation in one call: resample to a uniform ``rate``, low-pass
        ``q``/``qd`` at ``cutoff``, differentiate (``qdd`` from the filtered ``qd``,
        filtered the same way), and drop ``trim`` samples at both ends (default: one
        period of the cut-off frequency). Torques are left as measured."""
        r = self.resample(rate)
        r = r.lowpass(cutoff, order, ("q", "qd")).differentiate()
        r = r.lowpass(cutoff, order, ("qdd",))
        trim = int(np.ceil(r.rate / cutoff)) if trim is None else int(trim)
        return r.trim(trim, trim) if trim else r


def concatenate_recordings(recordings: Sequence[Recording]) -> dict:
    """The samples of several recordings stacked, as ``{signal: (sum T, n)}``, for
    identification (time stamps are not stacked: each recording keeps its own)."""
    recs = list(recordings)
    if not recs:
        raise ValueError("no recordings given")
    names = {r.joint_names for r in recs}
    if len(names) > 1:
        raise ValueError(f"recordings have different joint_names: {names}")
    out = {}
    for key in _SIGNALS:
        xs = [getattr(r, key) for r in recs]
        if all(x is None for x in xs):
            continue
        if any(x is None for x in xs):
            missing = [r.name for r, x in zip(recs, xs) if x is None]
            raise ValueError(f"recordings {missing} have no {key}")
        out[key] = np.concatenate(xs)
    return out


# ---------------------------------------------------------------------- filtering


def butterworth_filtfilt(x, cutoff: float, fs: float, order: int = 4, *, pad: int | None = None):
    """Zero-phase Butterworth low-pass filtering along axis 0 (as forward-backward
    filtering, ``filtfilt``).

    Forward-backward filtering with a digital Butterworth filter of ``order`` (bilinear
    transform with pre-warping) has the real, non-negative frequency response
    ``|H|^2 = 1 / (1 + (tan(pi f / fs) / tan(pi cutoff / fs))^(2 order))``: no phase lag,
    -6 dB at ``cutoff``. It is applied here exactly in the frequency domain, after an odd
    extension of the signal at both ends (as ``filtfilt``'s default padding) that keeps
    the ends free of wrap-around transients; the result matches ``filtfilt`` away from
    the first and last ``pad`` samples.

    Args:
        x: `(T,)` or `(T, n)` uniformly sampled signal.
        cutoff: cut-off frequency [Hz], ``0 < cutoff < fs / 2``.
        fs: sample rate [Hz].
        order: the order of one pass (the magnitude falls at ``40 order`` dB/decade).
        pad: samples of odd extension at each end (default: ``3 fs / cutoff``, at most
            ``T - 1``).

    Returns:
        The filtered signal, the shape of ``x``.

    Example:
        >>> t = np.arange(1000) / 1000.0
        >>> x = np.sin(2 * np.pi * 2 * t) + 0.1 * np.sin(2 * np.pi * 200 * t)
        >>> y = butterworth_filtfilt(x, 20.0, 1000.0)
        >>> float(np.abs(y - np.sin(2 * np.pi * 2 * t))[150:-150].max()) < 1e-4   # away from the ends
        True
    """
    x = np.asarray(x, np.float64)
    fs, cutoff = float(fs), float(cutoff)
    if not 0 < cutoff < fs / 2:
        raise ValueError(f"cutoff must be in (0, fs/2) = (0, {fs / 2:g}) Hz, got {cutoff:g}")
    if int(order) != order or order < 1:
        raise ValueError(f"order must be a positive int, got {order!r}")
    one_d = x.ndim == 1
    X = x[:, None] if one_d else x.reshape(len(x), -1)
    T = len(X)
    if T < 2:
        raise ValueError("need at least 2 samples to filter")
    pad = int(min(T - 1, 3 * fs / cutoff if pad is None else pad))
    # odd extension: 2 x[0] - x[pad:0:-1] and 2 x[-1] - x[-2:-pad-2:-1]
    head = 2 * X[0] - X[pad:0:-1]
    tail = 2 * X[-1] - X[-2:-pad - 2:-1]
    Z = np.concatenate([head, X, tail])
    n = len(Z)
    f = np.fft.rfftfreq(n, d=1.0 / fs)
    ratio = np.tan(np.pi * np.minimum(f, 0.5 * fs * (1 - 1e-12)) / fs) / np.tan(np.pi * cutoff / fs)
    H2 = 1.0 / (1.0 + ratio ** (2 * int(order)))
    # the mean-removed linear trend keeps the extension's end mismatch small for the FFT
    ramp = np.linspace(0.0, 1.0, n)[:, None]
    trend = Z[:1] + (Z[-1:] - Z[:1]) * ramp
    Y = np.fft.irfft(np.fft.rfft(Z - trend, axis=0) * H2[:, None], n=n, axis=0) + trend
    Y = Y[pad:pad + T]
    return Y[:, 0] if one_d else Y.reshape(x.shape)
