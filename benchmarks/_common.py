"""Shared helpers for the jaxrbd benchmarks: timing, Pinocchio models, tables, JSON.

Timing follows STYLE.md section 10: `jaxrbd.jit` (or `jax.jit` with ``--jit jax``, see
`add_jit_argument`), compile timed separately (lower + compile),
a warm-up call, then `jax.block_until_ready(f(*args))` timed and the median of the repeats
reported. Repeats are adaptive: each measurement gets a wall-clock budget, and calls shorter
than the block length are grouped so the timer resolution does not matter. Blocks are kept
short (1 ms for JAX, 0.2 ms for Pinocchio) so that on a shared machine most of them fall
inside one scheduler slice and the median is not the contended time.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
RESULTS = Path(__file__).resolve().parent / "results"


# --------------------------------------------------------------------------- timing

#: The jit the benchmarks compile with: "jaxrbd" (`jaxrbd.jit`, the recommended one) or
#: "jax" (plain `jax.jit`, XLA's default options). Set by `use_jit`.
JIT = "jaxrbd"


def add_jit_argument(parser) -> None:
    parser.add_argument("--jit", choices=("jaxrbd", "jax"), default="jaxrbd",
                        help="compile with jaxrbd.jit (default: jax.jit plus XLA CPU options "
                             "that suit jaxrbd) or plain jax.jit")


def use_jit(name: str) -> None:
    global JIT
    if name not in ("jaxrbd", "jax"):
        raise ValueError(f"jit {name!r}, expected 'jaxrbd' or 'jax'")
    JIT = name


def jit_suffix() -> str:
    """``"_jaxjit"`` for results compiled with plain `jax.jit` (default JSON names)."""
    return "_jaxjit" if JIT == "jax" else ""


def jit(f: Callable) -> Callable:
    """The jit in use (`JIT`) applied to ``f``."""
    import jax

    import jaxrbd

    return jaxrbd.jit(f) if JIT == "jaxrbd" else jax.jit(f)


def compile_jit(f: Callable, *args, repeats: int = 1) -> tuple[Callable, float, float]:
    """`jit` (`jaxrbd.jit` or ``jax.jit``) of ``f`` compiled for ``args``: ``(jitted, lower_s, compile_s)``.

    ``compile_s`` is the whole cost a user waits for before the first call: trace and
    lower plus XLA compile (``jax.jit(f).lower(*args).compile()``); ``lower_s`` is its
    trace + lower part. Each repeat jits a fresh wrapper of ``f``, so JAX's trace and
    compile caches never answer (the median of the repeats is returned). The returned
    ``jitted`` is the last jit object; its first call reuses the executable just
    compiled (and its dispatch is faster than ``Compiled.__call__``).
    """
    lowers, totals = [], []
    for _ in range(max(1, repeats)):
        jitted = jit(lambda *a: f(*a))
        t0 = time.perf_counter()
        lowered = jitted.lower(*args)
        t1 = time.perf_counter()
        lowered.compile()
        t2 = time.perf_counter()
        lowers.append(t1 - t0)
        totals.append(t2 - t0)
    return jitted, statistics.median(lowers), statistics.median(totals)


def _adaptive(call: Callable[[], Any], budget_s: float, block_s: float,
              min_repeats: int, max_repeats: int) -> dict[str, Any]:
    """Median seconds per ``call()`` over adaptive repeats of ``inner`` back-to-back calls."""
    t0 = time.perf_counter()
    call()
    est = max(time.perf_counter() - t0, 1e-9)
    inner = max(1, int(block_s / est))
    per_repeat = inner * est
    repeats = int(budget_s / per_repeat)
    # Calls longer than the whole budget get fewer repeats (at least one): the median of
    # one or two multi-second calls is still far more precise than what it is compared to.
    floor = min_repeats if est * min_repeats <= 4 * budget_s else max(1, int(4 * budget_s / est))
    repeats = max(floor, min(max_repeats, repeats))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        times.append((time.perf_counter() - t0) / inner)
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "repeats": repeats,
        "inner": inner,
    }


def time_jax(f: Callable, *args, budget_s: float = 0.5, block_s: float = 1e-3,
             min_repeats: int = 5, max_repeats: int = 2000) -> dict[str, Any]:
    """Median wall time of ``jax.block_until_ready(f(*args))`` after one warm-up call."""
    import jax

    jax.block_until_ready(f(*args))  # warm-up (and the executable-cache lookup)

    def call():
        jax.block_until_ready(f(*args))

    return _adaptive(call, budget_s, block_s, min_repeats, max_repeats)


def time_python(call: Callable[[], Any], budget_s: float = 0.3, block_s: float = 2e-4,
                min_repeats: int = 21, max_repeats: int = 5001) -> dict[str, Any]:
    """Median wall time of a synchronous call (Pinocchio), in blocks of many calls."""
    call()
    return _adaptive(call, budget_s, block_s, min_repeats, max_repeats)


# --------------------------------------------------------------------------- Pinocchio


def pinocchio():
    """``pinocchio`` or ``None`` when it is not installed."""
    try:
        import pinocchio as pin
    except ImportError:
        return None
    return pin


def pin_load_urdf(path: str | os.PathLike, floating_base: bool):
    """A Pinocchio model of a URDF; floating bases get a ``JointModelFreeFlyer`` root."""
    pin = pinocchio()
    if floating_base:
        return pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(str(path))


def pin_chain(n: int):
    """The Pinocchio twin of ``jaxrbd.models.chain(n)``.

    Link k: revolute about y (k even) or x (k odd), placed at ``(0, 0, -0.1)`` in its
    parent (``0`` for the first link), mass 1 kg, centre of mass ``(0, 0, -0.05)``, the
    inertia about the centre of mass of a ``0.03 x 0.03 x 0.1`` box (``models._box``).
    Gravity is Pinocchio's default ``(0, 0, -9.81)``, as jaxrbd's.
    """
    pin = pinocchio()
    model = pin.Model()
    m, (x, y, z) = 1.0, (0.03, 0.03, 0.1)
    Ic = m / 12.0 * np.diag([y * y + z * z, x * x + z * z, x * x + y * y])
    inertia = pin.Inertia(m, np.array([0.0, 0.0, -0.05]), Ic)
    parent = 0
    for k in range(n):
        joint = pin.JointModelRY() if k % 2 == 0 else pin.JointModelRX()
        placement = pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.1 if k else 0.0]))
        jid = model.addJoint(parent, joint, placement, f"joint{k}")
        model.appendBodyToJoint(jid, inertia, pin.SE3.Identity())
        parent = jid
    return model


def pin_random_state(model, rng: np.random.Generator):
    """``(q, v, w)``: q = neutral ⊕ uniform[-1, 1] tangent step, v and w standard normal."""
    pin = pinocchio()
    q = pin.integrate(model, pin.neutral(model), rng.uniform(-1.0, 1.0, model.nv))
    return q, rng.standard_normal(model.nv), rng.standard_normal(model.nv)


def pin_mass_matrix(model, q) -> np.ndarray:
    """Pinocchio's full (symmetrised) joint-space inertia matrix at ``q``."""
    pin = pinocchio()
    data = model.createData()
    H = np.array(pin.crba(model, data, q))
    return np.triu(H) + np.triu(H, 1).T


# --------------------------------------------------------------------------- reporting


def fmt_time(s: float | None) -> str:
    """Seconds as a short string in ns / µs / ms / s."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, Callable]],
                file=None) -> None:
    """Print ``rows`` as an aligned text table.

    Args:
        columns: ``(header, key, formatter)``; ``formatter(row[key])`` gives the cell.
    """
    file = file or sys.stdout
    cells = [[fmt(r.get(key)) for _, key, fmt in columns] for r in rows]
    heads = [h for h, _, _ in columns]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    line = "  ".join(h.rjust(w) for h, w in zip(heads, widths))
    print(line, file=file)
    print("-" * len(line), file=file)
    for c in cells:
        print("  ".join(x.rjust(w) for x, w in zip(c, widths)), file=file)
    file.flush()


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def load_average() -> float | None:
    """The 1-minute load average (other processes competing for the cores inflate times)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def machine_metadata() -> dict[str, Any]:
    """Machine, library versions, date and repository state for a results file."""
    import jax

    import jaxrbd

    pin = pinocchio()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    dirty = _git("status", "--porcelain", "--", "jaxrbd")
    return {
        "machine": {
            "platform": platform.platform(),
            "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "cpu_usable": usable,
            "jax_devices": [str(d) for d in jax.devices()],
            "jax_device_kind": jax.devices()[0].device_kind,
            "load_avg_1min_at_start": load_average(),
        },
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": getattr(__import__("jaxlib"), "__version__", None),
        "numpy": np.__version__,
        "jaxrbd": jaxrbd.__version__,
        "pinocchio": pin.__version__ if pin is not None else None,
        "git_commit": _git("rev-parse", "HEAD"),
        "jaxrbd_dirty": bool(dirty) if dirty is not None else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "env": {k: os.environ.get(k) for k in ("XLA_FLAGS", "EQX_ON_ERROR", "JAX_ENABLE_X64")},
        "jit": JIT,
        "compiler_options": jaxrbd.compiler_options() if JIT == "jaxrbd" else {},
    }


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_json(path: str | os.PathLike, rows: Sequence[dict[str, Any]],
               metadata: dict[str, Any], **extra) -> None:
    """Write ``{"metadata": ..., "rows": [...], **extra}`` atomically (tmp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    payload = {"metadata": metadata, "rows": list(rows), **extra}
    tmp.write_text(json.dumps(_jsonable(payload), indent=1) + "\n")
    tmp.replace(path)


# --------------------------------------------------------------------------- Menagerie

def menagerie_model(path: str | os.PathLike):
    """A Menagerie scene's compiled ``MjModel`` and how many of its meshes are missing.

    Snapshots of the Menagerie repository lack its largest mesh files. A mesh whose file
    is missing is deleted, with the geoms that use it, when those geoms are visual only
    (they carry no mass); a missing collision mesh raises `FileNotFoundError`.
    """
    import mujoco

    spec = mujoco.MjSpec.from_file(str(path))
    mdir = os.path.join(os.path.dirname(str(path)), spec.meshdir or "")
    missing = {me.name for me in spec.meshes if not os.path.exists(os.path.join(mdir, me.file))}
    for g in list(spec.geoms):
        if g.type == mujoco.mjtGeom.mjGEOM_MESH and g.meshname in missing:
            if g.contype or g.conaffinity:
                raise FileNotFoundError(
                    f"collision mesh {g.meshname!r} missing from this snapshot")
            spec.delete(g)
    for me in list(spec.meshes):
        if me.name in missing:
            spec.delete(me)
    return spec.compile(), len(missing)


# --------------------------------------------------------------------------- kernels

#: HLO instructions that launch no kernel of their own on XLA:CPU (buffer aliases,
#: tuples, constants, parameters).
_FREE_OPS = frozenset({
    "parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
    "opt-barrier", "add-dependency", "domain",
})


def _hlo_computations(text: str) -> tuple[dict[str, list[tuple[str, str]]], str | None]:
    """``{computation name: [(opcode, instruction line), ...]}`` and the entry's name."""
    comps: dict[str, list[tuple[str, str]]] = {}
    entry, current = None, None
    for line in text.splitlines():
        stripped = line.strip()
        if current is None:
            if stripped.endswith("{") and "(" in stripped and not stripped.startswith("HloModule"):
                head = stripped.split("(", 1)[0].split()
                if head:
                    name = head[-1].lstrip("%")
                    if head[0] == "ENTRY":
                        entry = name
                    current = comps.setdefault(name, [])
            continue
        if stripped == "}":
            current = None
            continue
        if " = " not in stripped:
            continue
        rest = stripped.split(" = ", 1)[1]
        if rest.startswith("("):  # a tuple type: skip its balanced parentheses
            depth = 0
            for k, ch in enumerate(rest):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0:
                    rest = rest[k + 1:]
                    break
        else:
            rest = rest.split(" ", 1)[1] if " " in rest else rest
        opcode = rest.strip().split("(", 1)[0].strip()
        current.append((opcode, stripped))
    return comps, entry


def _called(line: str, key: str) -> list[str]:
    """Names of the computations an instruction calls through ``key=`` (``body=``, ...)."""
    out = []
    for part in line.split(key + "=")[1:]:
        part = part.lstrip("{")
        for name in part.split("}", 1)[0].split(","):
            name = name.strip().split(" ", 1)[0].strip().lstrip("%")
            if name:
                out.append(name)
            if not part.startswith(name) or "}" not in part:
                break
    return out


def count_kernels(compiled_text: str) -> int:
    """Kernels one call of a compiled XLA:CPU program executes, from its HLO text
    (``jax.jit(f).lower(*args).compile().as_text()``).

    Every instruction of the entry computation that is not an alias, tuple, constant or
    parameter counts as one kernel (a fusion, a custom call such as a LAPACK routine, a
    copy, a dynamic-update-slice, ...); a ``while`` counts its condition and body once
    per iteration (XLA's ``known_trip_count``; 1 when unknown), a ``call`` its callee,
    a ``conditional`` its largest branch. This is the per-call work that XLA:CPU's
    runtime schedules one thunk at a time, whose fixed cost dominates a small program.
    """
    import re

    comps, entry = _hlo_computations(compiled_text)
    memo: dict[str, int] = {}

    def count(name: str) -> int:
        if name in memo:
            return memo[name]
        memo[name] = 0  # recursion guard
        total = 0
        for opcode, line in comps.get(name, []):
            if opcode in _FREE_OPS:
                continue
            if opcode == "while":
                m = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', line)
                trips = int(m.group(1)) if m else 1
                inner = sum(count(c) for c in _called(line, "body") + _called(line, "condition"))
                total += 1 + trips * inner
            elif opcode == "call":
                total += sum(count(c) for c in _called(line, "to_apply"))
            elif opcode == "conditional":
                branches = _called(line, "branch_computations") or (
                    _called(line, "true_computation") + _called(line, "false_computation"))
                total += 1 + max((count(c) for c in branches), default=0)
            else:
                total += 1
        memo[name] = total
        return total

    if entry is None:
        raise ValueError("count_kernels: no ENTRY computation in the HLO text")
    return count(entry)
