"""Trajectory optimisation with gradients through jaxrbd rollouts, optimised with optax.

1. Cart-pole swing-up by MULTIPLE SHOOTING. A cart on a prismatic joint (x) carries a
   pole on a revolute joint (theta = 0 hanging down, theta = pi upright); only the cart
   is actuated. The horizon is split into N shooting intervals; the decision variables
   are the start states s_1..s_{N-1} of the intervals (s_0 is the given initial state)
   and per-step cart forces. All intervals are simulated at once by `jax.vmap` of
   `jaxrbd.rollout` (RK4); the continuity defects d_k = x_k(end) - s_{k+1} and the
   final state's error to the upright state are the equality constraints c of an
   augmented Lagrangian: effort + lam . c + rho/2 |c|^2, minimised by optax L-BFGS
   (backtracking line search) in each outer iteration, then lam += rho c and rho grows
   while the constraints shrink too slowly.
   The state guess interpolates linearly from hanging to upright: multiple shooting lets
   the optimiser start from such an infeasible but sensible trajectory.

2. Panda reaching with minimum torque effort, rest to rest in 1 s, the hand ending at a
   target point. The arm is fully actuated, so the joint motion is the decision variable
   (rest-to-rest polynomials per joint) and the torques follow from inverse dynamics
   along it; the final hand position is an augmented-Lagrangian equality constraint.
   The optimised torques are replayed by a forward-dynamics rollout (with a light PD on
   the plan, as a real controller would add), which must land on the same point.

The cart-pole's gradients are reverse-mode through the rollouts (`jax.value_and_grad`);
one L-BFGS step is one jitted function, compiled once per problem, and the loops run in
Python on host numbers (compilation, not iteration, dominates the run time on CPU).

Run:  python examples/trajectory_optimization.py [--quick] [--plot out.png] [--gif DIR]

With ``--gif DIR`` both motions are saved as animations (`jaxrbd.viz`):
``DIR/cart_pole_swing_up.gif`` and ``DIR/panda_reach.gif``.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, joints

jax.config.update("jax_enable_x64", True)

URDF = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "panda.urdf"


# ------------------------------------------------------------------ augmented Lagrangian


def augmented_lagrangian(objective, constraints, z0, *, outer, inner, rho0, growth=10.0,
                         rho_max=1e8, tol=1e-8, memory=20, report=None, name=""):
    """Minimise ``objective(z)`` subject to ``constraints(z) = 0`` (``z`` a pytree).

    Outer iteration ``k`` runs up to ``inner`` optax L-BFGS steps (backtracking line search) on
    ``L(z) = f(z) + lam . c(z) + rho/2 |c(z)|^2``, stopping early when the gradient norm
    falls below ``tol``; then ``lam += rho c`` and ``rho`` grows by ``growth`` (up to
    ``rho_max``) unless ``|c|`` fell below a quarter of its previous value. One L-BFGS
    step (the gradient through the rollouts and the line search) is ONE jitted function
    with ``lam`` and ``rho`` as arguments: it compiles once for the whole solve, and the
    loops run in Python on host numbers (an eager `jax.numpy` call in the loop would
    compile a small program of its own). The step also returns ``f`` and ``c`` at the
    point it starts from (the Lagrangian computes them anyway), so measuring a point is a
    step whose update is discarded, not a second compiled program. ``report(z)``
    (optional: a dict of arrays) is compiled once and evaluated at the returned ``z``.
    Returns ``(z, history, extra)``: ``history`` a list of dicts (cumulative L-BFGS
    iteration, objective, defect = |c|, rho, the Lagrangian values of the inner steps).
    """
    # backtracking (Armijo) line search: it evaluates only L, not its gradient, so the
    # compiled step holds one gradient through the rollouts
    solver = optax.lbfgs(
        memory_size=memory,
        linesearch=optax.scale_by_backtracking_linesearch(max_backtracking_steps=20),
    )

    def lagrangian(z, lam, rho):
        f, c = objective(z), constraints(z)
        return f + jnp.dot(lam, c) + 0.5 * rho * jnp.dot(c, c), (f, c)

    @jaxrbd.jit
    def lbfgs_step(z, state, lam, rho):
        def fn(z):
            return lagrangian(z, lam, rho)[0]

        (value, (f, c)), grad = jax.value_and_grad(lagrangian, has_aux=True)(z, lam, rho)
        updates, state = solver.update(grad, state, z, value=value, grad=grad, value_fn=fn)
        z_new = optax.apply_updates(z, updates)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x))
                                    for x in jax.tree_util.tree_leaves(z_new)]))
        return z_new, state, value, optax.tree.norm(grad), f, c, finite

    t0 = time.perf_counter()
    c_shape = jax.eval_shape(constraints, z0)
    lam = np.zeros(c_shape.shape, c_shape.dtype)
    rho = np.asarray(rho0, c_shape.dtype)
    step = lbfgs_step.lower(z0, solver.init(z0), lam, rho).compile()
    show = None if report is None else jaxrbd.jit(report).lower(z0).compile()
    compile_s = time.perf_counter() - t0

    def measure(z):
        """``f(z)``, ``|c(z)|``, ``c(z)`` (host numbers) from a step whose update is dropped."""
        *_, f, c, _ = step(z, solver.init(z), lam, rho)
        c = np.asarray(c)
        return float(f), float(np.linalg.norm(c)), c

    f0, d0, _ = measure(z0)
    history = [{"iteration": 0, "objective": f0, "defect": d0}]
    print(f"{name}: compiled in {compile_s:.1f} s")
    print(f"{name}: {'outer':>5s} {'L-BFGS its':>10s} {'objective':>12s} {'|defects|':>11s} "
          f"{'rho':>8s} {'Lagrangian (first -> last inner step)':>40s}")
    print(f"{name}: {0:5d} {0:10d} {f0:12.5g} {d0:11.3e}", flush=True)
    t0, z, its, previous = time.perf_counter(), z0, 0, d0
    for k in range(outer):
        state, values = solver.init(z), []
        for _ in range(inner):
            z_new, state, value, gnorm, *_, finite = step(z, state, lam, rho)
            if not bool(finite):
                break  # the line search failed at convergence: keep the last point
            z, its = z_new, its + 1
            values.append(float(value))
            if float(gnorm) < tol:
                break
        f, d, c = measure(z)
        history.append({"iteration": its, "objective": f, "defect": d,
                        "rho": float(rho), "lagrangian": np.asarray(values)})
        print(f"{name}: {k + 1:5d} {its:10d} {f:12.5g} {d:11.3e} "
              f"{float(rho):8.2g} {values[0] if values else float('nan'):19.5g} -> "
              f"{values[-1] if values else float('nan'):.5g}", flush=True)
        lam = lam + rho * c
        if d > 0.25 * previous:
            rho = np.minimum(rho * growth, rho_max)
        previous = d
    extra = {} if show is None else jax.tree_util.tree_map(np.asarray, show(z))
    run_s = time.perf_counter() - t0
    print(f"{name}: solved in {run_s:.1f} s ({its} L-BFGS iterations)")
    return z, history, {"compile_s": compile_s, "run_s": run_s, **extra}


# ------------------------------------------------------------------ cart-pole swing-up


def cart_pole(cart_mass=1.0, pole_mass=0.3, length=0.6) -> jaxrbd.Model:
    """Cart on x (prismatic), pole on y (revolute); theta = 0 hangs down."""
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("cart", "world", joints.prismatic((1, 0, 0)),
               Body(cart_mass, (0.0, 0.0, 0.0), np.diag([0.01, 0.02, 0.02])),
               joint_name="slider")
    rod = pole_mass * length**2 / 12
    b.add_body("pole", "cart", joints.revolute((0, 1, 0)),
               Body(pole_mass, (0.0, 0.0, -length / 2), np.diag([rod, rod, 1e-5])),
               Transform(translation=(0.0, 0.0, 0.0)), joint_name="hinge")
    return b.build()


def swing_up(quick: bool, integrator: str = "rk4") -> dict:
    model = cart_pole()
    T = 2.5
    N, M = (10, 5) if quick else (25, 4)  # intervals, RK4 steps per interval
    dt = T / (N * M)
    # set-up numbers in NumPy: an eager jax.numpy call compiles a small program each
    x0 = np.zeros(4)                                    # [x, theta, xd, thetad]
    target = np.array([0.0, np.pi, 0.0, 0.0])
    w_u = 1e-2
    select = np.array([[1.0], [0.0]])                   # only the cart is actuated

    def shoot(s, u):
        """End states of all intervals: s (N, 4) starts, u (N, M) cart forces."""
        def one(s_k, u_k):
            tau = u_k[:, None] * select[:, 0][None, :]
            qs, qds = jaxrbd.rollout(model, s_k[:2], s_k[2:], tau, dt, integrator)
            return jnp.concatenate([qs[-1], qds[-1]])
        return jax.vmap(one)(s, u)

    def split(z):
        s = jnp.concatenate([x0[None], z["s"]], axis=0)
        return s, shoot(s, z["u"])

    def objective(z):
        return w_u * dt * jnp.sum(jnp.square(z["u"]))

    def defects(z):
        """Continuity defects of the intervals, then the final state's error."""
        s, ends = split(z)
        return jnp.concatenate([(ends[:-1] - s[1:]).ravel(), ends[-1] - target])

    # linear interpolation from hanging to upright; zero forces
    alpha = np.linspace(0.0, 1.0, N + 1)[1:N, None]
    z0 = {"s": (1.0 - alpha) * x0[None] + alpha * target[None], "u": np.zeros((N, M))}
    outer, inner = (10, 100) if quick else (12, 300)

    def report(z):
        # a single-shooting replay of the optimised controls from x0 (no defects by design)
        u = z["u"].reshape(-1)
        qs, qds = jaxrbd.rollout(model, x0[:2], x0[2:], u[:, None] * select[:, 0][None, :],
                                 dt, integrator)
        # the multiple-shooting solution itself: every interval simulated from its start
        # (one vmapped rollout gives both the stitched path and the interval ends)
        s = jnp.concatenate([x0[None], z["s"]], axis=0)

        def interval(s_k, u_k):
            tau = u_k[:, None] * select[:, 0][None, :]
            return jaxrbd.rollout(model, s_k[:2], s_k[2:], tau, dt, integrator)

        qs_k, qds_k = jax.vmap(interval)(s, z["u"])                 # (N, M + 1, 2) each
        ends = jnp.concatenate([qs_k[:, -1], qds_k[:, -1]], axis=1)
        stitched = jnp.concatenate([qs_k[:, :-1].reshape(N * M, 2), qs_k[-1:, -1]])
        return {"ends": ends, "qs": qs, "qds": qds, "stitched": stitched}

    z, history, extra = augmented_lagrangian(objective, defects, z0, outer=outer, inner=inner,
                                             rho0=10.0, report=report, name="cart-pole")
    # the report is NumPy already; results in NumPy too (no eager jax.numpy programs)
    u, qs, qds, ends = np.asarray(z["u"]).reshape(-1), extra["qs"], extra["qds"], extra["ends"]
    final = np.concatenate([qs[-1], qds[-1]])
    seconds = extra["compile_s"] + extra["run_s"]
    result = {
        "objective_start": history[0]["objective"],
        "objective": history[-1]["objective"],
        "defect_start": history[0]["defect"],
        "defect": history[-1]["defect"],
        "state_error": float(np.linalg.norm(ends[-1] - target)),
        "replay_state_error": float(np.linalg.norm(final - target)),
        "effort": float(dt * np.sum(np.square(u))),
        "max_force": float(np.abs(u).max()),
        "seconds": seconds,
        "compile_s": extra["compile_s"],
        "history": history,
        "t": np.arange(N * M + 1) * dt,
        "q": np.asarray(extra["stitched"]),
        "q_replay": np.asarray(qs),
        "u": np.asarray(u),
    }
    print(f"cart-pole: {N} intervals x {M} {integrator} steps (dt = {dt * 1e3:.0f} ms), "
          f"{outer} x {inner} L-BFGS steps in {seconds:.1f} s")
    print(f"cart-pole: objective {result['objective_start']:.4g} -> {result['objective']:.4g}, "
          f"defect norm {result['defect_start']:.3g} -> {result['defect']:.2e}, final state "
          f"error {result['state_error']:.2e} (replayed from x0: "
          f"{result['replay_state_error']:.2e}), effort {result['effort']:.3g} N^2 s, "
          f"max |u| {result['max_force']:.3g} N")
    return result


# ------------------------------------------------------------------ panda reaching


def _rest_to_rest(K: int):
    """Velocity basis ``s^k s (1 - s)`` (k < K) on ``s = t / T`` and its integral and
    derivative: motions that start and end at rest, as ``(pos, vel, acc)(s)`` of shape
    ``(K,)`` each, per unit coefficient (position in units of ``T``)."""
    k = np.arange(K, dtype=np.float64)

    def basis(s):
        vel = s ** (k + 1) - s ** (k + 2)
        pos = s ** (k + 2) / (k + 2) - s ** (k + 3) / (k + 3)
        acc = (k + 1) * s**k - (k + 2) * s ** (k + 1)
        return pos, vel, acc

    return basis


def reach(quick: bool, integrator: str = "rk4") -> dict:
    """Panda reaching: minimum torque effort from rest to rest with the hand at a target.

    The arm is fully actuated, so the joint trajectory itself is the decision variable
    (a rest-to-rest polynomial per joint) and the torques follow from
    `jaxrbd.inverse_dynamics` along it: the effort int |tau|^2 dt and the final hand
    position are smooth functions of the coefficients, and the gradient goes through
    inverse dynamics and forward kinematics. The optimised torques are then REPLAYED by
    `jaxrbd.rollout` (forward dynamics, torque policy tau(t)), which must bring the hand
    to the same point: forward and inverse dynamics agree.
    """
    model = jaxrbd.load_urdf(URDF)
    # set-up numbers in NumPy: an eager jax.numpy call compiles a small program each
    q_rest = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    hand, tip = "panda_hand", np.array([0.0, 0.0, 0.1034])
    # one jitted call for the set-up numbers (un-jitted, every operation compiles alone)
    p_rest, g_rest = (np.asarray(x) for x in jax.jit(
        lambda q: (jaxrbd.point_position(model, q, hand, tip),
                   jaxrbd.gravity_forces(model, q)))(q_rest))
    target = p_rest + np.array([0.15, 0.2, -0.1])
    T = 1.0
    K, n_quad = (4, 41) if quick else (6, 101)  # basis size per joint, quadrature points
    basis = _rest_to_rest(K)
    s_quad = np.linspace(0.0, 1.0, n_quad)
    w_quad = np.full(n_quad, T / (n_quad - 1))  # trapezoidal weights
    w_quad[[0, -1]] *= 0.5
    effort_rest = T * float(np.dot(g_rest, g_rest))  # holding still: the objective's unit

    def trajectory(c, s):
        """``(q, qd, qdd)`` at ``s = t/T`` for coefficients ``c (K, nv)``."""
        pos, vel, acc = basis(s)
        return q_rest + T * pos @ c, vel @ c, (acc @ c) / T

    def torques(c):
        return jax.vmap(lambda s: jaxrbd.inverse_dynamics(model, *trajectory(c, s)))(s_quad)

    def objective(c):
        tau = torques(c)
        return jnp.dot(w_quad, jnp.sum(tau * tau, axis=1)) / effort_rest

    def constraints(c):
        q_end, _, _ = trajectory(c, 1.0)
        return jaxrbd.point_position(model, q_end, hand, tip) - target

    c0 = np.zeros((K, model.nv))
    outer, inner = 8, 150  # in quick mode too: cheap to solve, and fewer iterations left
    # the hand error (limit 0.1 mm) at the mercy of rounding (0.01-0.5 mm)

    def report(c):
        q_end = trajectory(c, 1.0)[0]
        return {"tau": torques(c), "p_end": jaxrbd.point_position(model, q_end, hand, tip)}

    c, history, extra = augmented_lagrangian(objective, constraints, c0, outer=outer,
                                             inner=inner, rho0=100.0, report=report,
                                             name="panda")
    # replay: forward dynamics under the optimised torques tau(t), held over each step
    # (taken at its midpoint), plus a light PD on the planned motion: an open-loop arm
    # under gravity amplifies any error, so real controllers close the loop too. The PD
    # share of the torque measures how well forward dynamics reproduces the plan.
    steps = 200
    dt = T / steps
    kp, kd = 100.0, 20.0

    def feedforward(t):
        return jaxrbd.inverse_dynamics(model, *trajectory(c, jnp.clip(t / T, 0.0, 1.0)))

    def feedback(t, q, qd):
        # PD in acceleration units, scaled by the mass matrix: the same closed-loop
        # poles on every joint, however light its link (explicit RK4 stays stable)
        q_d, qd_d, _ = trajectory(c, jnp.clip(t / T, 0.0, 1.0))
        return jaxrbd.mass_matrix(model, q) @ (kp * (q_d - q) + kd * (qd_d - qd))

    def policy(t, q, qd):
        return feedforward(t + 0.5 * dt) + feedback(t, q, qd)

    @jaxrbd.jit  # it runs once: compiling faster matters more than running faster
    def replay(c):
        qs, qds = jaxrbd.rollout(model, q_rest, jnp.zeros(model.nv), None, dt, integrator,
                                 n_steps=steps, policy=policy)
        t = jnp.arange(steps) * dt
        fb = jax.vmap(feedback)(t, qs[:-1], qds[:-1])
        ff = jax.vmap(feedforward)(t + 0.5 * dt)
        p_replay = jaxrbd.point_position(model, qs[-1], hand, tip)
        return qs, qds, jnp.max(jnp.abs(fb)) / jnp.max(jnp.abs(ff)), p_replay

    qs_replay, qds, feedback_share, p_replay = (np.asarray(x) for x in replay(c))
    p_end = extra["p_end"]
    tau = extra["tau"]
    seconds = extra["compile_s"] + extra["run_s"]
    result = {
        "objective_start": history[0]["objective"],
        "objective": history[-1]["objective"],
        "distance_start": float(np.linalg.norm(p_rest - target)),
        "position_error": float(np.linalg.norm(p_end - target)),
        "replay_position_error": float(np.linalg.norm(p_replay - target)),
        "final_speed": float(np.linalg.norm(qds[-1])),
        "feedback_share": float(feedback_share),
        "torque_cost_gravity": float(effort_rest),
        "torque_cost": float(np.dot(w_quad, np.sum(tau * tau, axis=1))),
        "max_torque_ratio": float(np.max(np.abs(tau) / np.asarray(model.effort_limit)[None, :])),
        "defect_start": history[0]["defect"],
        "defect": history[-1]["defect"],
        "seconds": seconds,
        "compile_s": extra["compile_s"],
        "history": history,
        "dt": dt,
        "q_replay": np.asarray(qs_replay),
    }
    print(f"panda: {K} rest-to-rest polynomials per joint, {n_quad} quadrature points, "
          f"replayed by {steps} {integrator} steps; solved in {seconds:.1f} s")
    print(f"panda: hand error {result['distance_start'] * 1e3:.1f} mm -> "
          f"{result['position_error'] * 1e3:.3f} mm (replayed by forward dynamics: "
          f"{result['replay_position_error'] * 1e3:.3f} mm, final |qd| "
          f"{result['final_speed']:.1e} rad/s, PD share of the torque "
          f"{result['feedback_share']:.1%}), torque cost int|tau|^2 dt "
          f"{result['torque_cost']:.4g} N^2 m^2 s (holding still: "
          f"{result['torque_cost_gravity']:.4g}), max |tau|/limit {result['max_torque_ratio']:.2f}")
    return result


def plot(path, cart, panda):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    for res, label in ((cart, "cart-pole"), (panda, "panda")):
        its = [h["iteration"] for h in res["history"]]
        ax[0].semilogy(its, [max(h["defect"], 1e-16) for h in res["history"]], "o-",
                       label=label)
        ax[1].plot(its, [h["objective"] for h in res["history"]], "o-", label=label)
    ax[0].set(xlabel="L-BFGS iteration", ylabel="constraint / defect norm",
              title="convergence")
    ax[1].set(xlabel="L-BFGS iteration", ylabel="objective (effort, scaled)", title="objective")
    ax[2].plot(cart["t"], cart["q"][:, 0], label="cart x [m]")
    ax[2].plot(cart["t"], cart["q"][:, 1], label="pole theta [rad]")
    ax[2].plot(cart["t"][:-1], cart["u"] / 10, label="force / 10 [N]")
    ax[2].set(xlabel="t [s]", title="cart-pole swing-up (shooting intervals)")
    for a in ax:
        a.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"plot saved to {path}")


def animate_swing_up(cart, fps=20.0):
    """The cart-pole swing-up (the stitched shooting intervals) as a matplotlib animation."""
    from jaxrbd import viz

    dt = float(cart["t"][1] - cart["t"][0])
    # the pole's tip leaves a trail (the pole hangs along -z of its body, 0.6 m long)
    return viz.animate(cart_pole(), cart["q"], dt, fps=fps, trace=("pole", (0.0, 0.0, -0.6)))


def animate_reach(panda, fps=20.0):
    """The panda's reach, replayed by forward dynamics, with the hand's path traced."""
    from jaxrbd import viz

    model = jaxrbd.load_urdf(URDF)
    return viz.animate(model, panda["q_replay"], panda["dt"], fps=fps, trace="panda_hand_tcp")


def save_gifs(directory, cart, panda, fps=15.0):
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, anim in (("cart_pole_swing_up", animate_swing_up(cart, fps)),
                       ("panda_reach", animate_reach(panda, fps))):
        anim.save(directory / f"{name}.gif", writer="pillow", dpi=60)
        print(f"animation saved to {directory / name}.gif")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="coarse discretisation and few iterations")
    parser.add_argument("--plot", metavar="PNG", help="save convergence plots to this file")
    parser.add_argument("--gif", metavar="DIR", help="save both motions as GIFs in this directory")
    parser.add_argument("--integrator", choices=("euler", "semi_implicit_euler", "rk4"),
                        default="rk4", help="integrator of the rollouts (default rk4; "
                        "semi_implicit_euler compiles a smaller gradient)")
    args = parser.parse_args(argv)
    cart = swing_up(args.quick, args.integrator)
    panda = reach(args.quick, args.integrator)
    if args.plot:
        plot(args.plot, cart, panda)
    if args.gif:
        save_gifs(args.gif, cart, panda)
    print(f"summary: cart-pole objective {cart['objective_start']:.3g} -> "
          f"{cart['objective']:.3g}, defect {cart['defect_start']:.2g} -> "
          f"{cart['defect']:.1e}, state error {cart['state_error']:.1e}; panda hand error "
          f"{panda['position_error'] * 1e3:.2f} mm, torque cost {panda['torque_cost']:.4g} "
          f"N^2 m^2 s")
    return {"cart_pole": cart, "panda": panda}


if __name__ == "__main__":
    main()
