"""`python -m jaxrbd demo`: a tour of jaxrbd on two bundled models.

For RBDL's triple pendulum and the bundled 36-DoF humanoid it prints the model, forward
dynamics at a random state, the inverse-dynamics round trip, a batched call over many
states (``jax.vmap`` of the single-state function and `jaxrbd.batched`) with compile
and per-sample times, and two gradients taken by ``jax.grad``/``jax.jacfwd``.

This module is the only place in jaxrbd that switches on float64: the demo is an entry
point (a program), not library code.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import jaxrbd

__all__ = ["run"]

_WIDTH = 78
_MODELS = ("triple_pendulum", "humanoid")


def _rule(char: str = "-") -> None:
    print(char * _WIDTH)


def _title(text: str) -> None:
    print()
    _rule("=")
    print(text)
    _rule("=")


def _section(text: str) -> None:
    print()
    print(text)
    _rule("-")


def _vec(x, head: int = 6, fmt: str = "{:+.4f}") -> str:
    """A short one-line rendering of a vector: its first ``head`` entries."""
    x = np.asarray(x).ravel()
    body = ", ".join(fmt.format(v) for v in x[:head])
    more = f", ... ({x.size} values)" if x.size > head else ""
    return f"[{body}{more}]"


def _fmt_time(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.2f} us"


def _compile(fn: Callable, *args):
    """AOT-compile the jitted ``fn`` for ``args``; returns ``(compiled, seconds)``."""
    t0 = time.perf_counter()
    compiled = fn.lower(*args).compile()
    return compiled, time.perf_counter() - t0


def _median_time(fn: Callable, *args, repeats: int) -> tuple[float, object]:
    """Median wall time of ``jax.block_until_ready(fn(*args))`` over ``repeats`` calls.

    ``fn`` is already compiled (`_compile`), so no warm-up call is needed.
    """
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _with_masses(model, masses):
    """``model`` whose body ``i`` has mass ``masses[i]``, centre of mass and shape fixed.

    The inertia leaf ``[m, m c, I_O]`` is linear in the mass at fixed ``c`` and fixed
    inertia per unit mass (uniform density), so each row is scaled by ``m_new / m``.
    Massless rows (world, massless frames) are left alone.
    """
    m0 = model.inertia[:, 0]
    scale = jnp.where(m0 > 0, masses / jnp.where(m0 > 0, m0, 1.0), 1.0)
    return eqx.tree_at(lambda m: m.inertia, model, model.inertia * scale[:, None])


def _demo_model(model, batch: int, repeats: int, seed: int) -> None:
    key = jax.random.key(seed)
    k_q, k_qd, k_tau, k_batch = jax.random.split(key, 4)
    dtype = model.dtype

    _section("Model (print(model))")
    print(model)
    print(f"nq = {model.nq}, nv = {model.nv}, nbodies = {model.nbodies}, dtype = {dtype}")

    # ------------------------------------------------------------------ one state
    q = jaxrbd.random_configuration(model, k_q)
    qd = 0.5 * jax.random.normal(k_qd, (model.nv,), dtype)
    tau = jax.random.normal(k_tau, (model.nv,), dtype)

    _section("Forward dynamics (ABA) at a random state")
    fd, t_fd = _compile(jax.jit(jaxrbd.forward_dynamics), model, q, qd, tau)
    t_run, qdd = _median_time(fd, model, q, qd, tau, repeats=repeats)
    print("q = random_configuration(model, key), qd ~ 0.5 N(0, 1), tau ~ N(0, 1)")
    print(f"q   = {_vec(q)}")
    print(f"qd  = {_vec(qd)}")
    print(f"tau = {_vec(tau)}")
    print(f"qdd = {_vec(qdd)}")
    print(f"jax.jit(jaxrbd.forward_dynamics): compile {_fmt_time(t_fd)}, "
          f"run {_fmt_time(t_run)} (median of {repeats})")

    _section("Inverse dynamics (RNEA) of that qdd recovers tau")
    inv, t_id = _compile(jax.jit(jaxrbd.inverse_dynamics), model, q, qd, qdd)
    t_run, tau_back = _median_time(inv, model, q, qd, qdd, repeats=repeats)
    err = float(jnp.max(jnp.abs(tau_back - tau)))
    print(f"tau' = inverse_dynamics(model, q, qd, qdd) = {_vec(tau_back)}")
    print(f"max |tau' - tau| = {err:.2e}")
    print(f"jax.jit(jaxrbd.inverse_dynamics): compile {_fmt_time(t_id)}, "
          f"run {_fmt_time(t_run)} (median of {repeats})")

    # ------------------------------------------------------------------ a batch
    _section(f"Forward dynamics over a batch of {batch} random states")
    keys = jax.random.split(k_batch, 3)
    Q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(jax.random.split(keys[0], batch))
    QD = 0.5 * jax.random.normal(keys[1], (batch, model.nv), dtype)
    TAU = jax.random.normal(keys[2], (batch, model.nv), dtype)
    variants = (
        ("jax.jit(jax.vmap(forward_dynamics, in_axes=(None, 0, 0, 0)))",
         jax.jit(jax.vmap(jaxrbd.forward_dynamics, in_axes=(None, 0, 0, 0)))),
        ("jaxrbd.jit(jax.vmap(forward_dynamics, in_axes=(None, 0, 0, 0)))",
         jaxrbd.jit(jax.vmap(jaxrbd.forward_dynamics, in_axes=(None, 0, 0, 0)))),
        ("jaxrbd.jit(jaxrbd.batched.forward_dynamics)", jaxrbd.jit(jaxrbd.batched.forward_dynamics)),
    )
    results = []
    print(f"{'call':<62} {'compile':>7} {'per sample':>11}")
    for label, fn in variants:
        compiled, t_c = _compile(fn, model, Q, QD, TAU)
        t_run, out = _median_time(compiled, model, Q, QD, TAU, repeats=repeats)
        results.append(out)
        print(f"{label:<62} {_fmt_time(t_c):>7} {_fmt_time(t_run / batch):>11}")
    diff = max(float(jnp.max(jnp.abs(results[0] - r))) for r in results[1:])
    scale = float(jnp.max(jnp.abs(results[0])))
    print(f"(median of {repeats} calls of the whole batch, divided by {batch}; largest "
          f"difference to the first row {diff:.1e}, max |qdd| = {scale:.1e}; jaxrbd.jit is "
          "jax.jit with XLA CPU options that suit jaxrbd)")

    # ------------------------------------------------------------------ gradients
    _section("Gradient of sum(qdd^2) with respect to the link masses (jax.grad)")
    masses = model.inertia[:, 0]

    def loss(masses):
        qdd = jaxrbd.forward_dynamics(_with_masses(model, masses), q, qd, tau)
        return jnp.sum(qdd**2)

    grad_fn, t_g = _compile(jax.jit(jax.value_and_grad(loss)), masses)
    t_run, (L, g) = _median_time(grad_fn, masses, repeats=repeats)
    g = np.asarray(g)
    print(f"L = sum(qdd^2) = {float(L):.6g};  dL/dm_i with each body's centre of mass "
          "and shape fixed")
    print("(the mass is scaled into the body's inertia leaf with eqx.tree_at, then jax.grad)")
    order = [b for b in np.argsort(-np.abs(g)) if b > 0 and float(masses[b]) > 0]
    shown = order if len(order) <= 6 else order[:6]
    print(f"  {'body':<28} {'mass [kg]':>10} {'dL/dm':>20}")
    for b in shown:
        print(f"  {model.body_names[b]:<28} {float(masses[b]):>10.3f} {g[b]:>+20.6e}")
    if len(shown) < len(order):
        print(f"  ... ({len(order) - len(shown)} more bodies; largest |dL/dm| shown)")
    # central finite difference on the body with the largest gradient (no recompile:
    # same model structure, new leaves)
    b = shown[0]
    h = 1e-6 * max(1.0, float(masses[b])) if dtype == jnp.float64 else 1e-2 * float(masses[b])
    e = jnp.zeros_like(masses).at[b].set(h)
    fd_grad = (float(grad_fn(masses + e)[0]) - float(grad_fn(masses - e)[0])) / (2 * h)
    rel = abs(fd_grad - g[b]) / max(abs(g[b]), 1e-30)
    print(f"finite-difference check on {model.body_names[b]}: {fd_grad:+.6e} "
          f"(relative difference {rel:.1e})")
    print(f"jax.jit(jax.value_and_grad(loss)): compile {_fmt_time(t_g)}, "
          f"run {_fmt_time(t_run)}")

    _section("Jacobian d qdd / d tau (jax.jacfwd)")
    jac_fn, t_j = _compile(jax.jit(jax.jacfwd(jaxrbd.forward_dynamics, argnums=3)),
                           model, q, qd, tau)
    t_run, J = _median_time(jac_fn, model, q, qd, tau, repeats=repeats)
    # qdd is affine in tau (J = H(q)^-1), so J predicts the change of qdd exactly
    dtau = jax.random.normal(jax.random.key(seed + 1), (model.nv,), dtype)
    predicted = J @ dtau
    actual = fd(model, q, qd, tau + dtau) - qdd
    err = float(jnp.max(jnp.abs(predicted - actual)))
    print(f"J = d qdd / d tau = H(q)^-1: shape {tuple(J.shape)}, J[0, :] = {_vec(J[0])}")
    print(f"qdd is affine in tau: max |J dtau - (qdd(tau + dtau) - qdd(tau))| = {err:.2e}")
    print(f"jax.jit(jax.jacfwd(forward_dynamics, argnums=3)): compile {_fmt_time(t_j)}, "
          f"run {_fmt_time(t_run)}")


def run(
    models: Sequence[str] = _MODELS,
    batch: int = 4096,
    repeats: int = 3,
    seed: int = 0,
    float32: bool = False,
) -> None:
    """Run the demo; see ``python -m jaxrbd demo --help``."""
    if batch < 1 or repeats < 1:
        raise ValueError(f"batch and repeats must be >= 1, got batch={batch}, repeats={repeats}")
    unknown = [m for m in models if m not in _MODELS]
    if unknown:
        raise ValueError(f"unknown model(s) {unknown}, expected some of {list(_MODELS)}")
    if not float32:
        jax.config.update("jax_enable_x64", True)

    start = time.perf_counter()
    dev = jax.devices()[0]
    _title("jaxrbd demo: differentiable, vectorised rigid-body dynamics in JAX")
    print(f"jaxrbd {jaxrbd.__version__}, jax {jax.__version__}, equinox {eqx.__version__}, "
          f"Python {platform.python_version()}")
    print(f"device: {dev.platform} ({dev.device_kind}), {jax.device_count()} device(s); "
          f"dtype {'float32' if float32 else 'float64 (jax_enable_x64)'}")
    print("Timings are wall-clock; the first call of a jitted function compiles it.")

    builders = {
        "triple_pendulum": (
            "RBDL's triple pendulum (Felis 2017, Algorithm 4; euler_zyx joints)",
            jaxrbd.models.triple_pendulum,
        ),
        "humanoid": (
            "The bundled humanoid (floating base, 36 DoF, 82.8 kg)",
            jaxrbd.models.humanoid,
        ),
    }
    for i, name in enumerate(models, start=1):
        title, build = builders[name]
        _title(f"{i}. {title}\n   jaxrbd.models.{name}()")
        _demo_model(build(), batch, repeats, seed)

    _title(f"Done in {time.perf_counter() - start:.1f} s")
    print("Next: README.md (usage), docs/ (conventions and API), examples/quickstart.py.")
