"""Inertial parameter identification of a real robot (the Franka Panda) from joint torques.

1. Excite the arm along a smooth trajectory (a finite Fourier series per joint) and
   "measure" the joint torques of the true model with Gaussian noise.
2. Linear least squares on the inverse-dynamics regressor, tau = Y(q, qd, qdd) pi
   (`jaxrbd.inverse_dynamics_regressor`): only a subspace of pi (the base parameters) is
   identifiable, so `lstsq` returns the minimum-norm solution, which predicts torques
   exactly as well as any other.
3. Physically consistent identification: the bodies with mass are parameterised by
   log-Cholesky coordinates (`jaxrbd.from_log_cholesky`, every value physically
   consistent), fitted by optax (Adam, then L-BFGS) on the torque residual, starting from
   a perturbed model.
4. The torque prediction error of each estimate on held-out data (a second trajectory).

With ``--gif DIR`` the first seconds of the training motion are saved as an animation
(``DIR/panda_excitation.gif``).

Run:  python examples/inertial_identification.py [--quick] [--gif DIR]
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

jax.config.update("jax_enable_x64", True)

URDF = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "panda.urdf"


def excitation(model, n_samples: int, duration: float, seed: int):
    """Fourier-series joint trajectories inside the joint limits: (q, qd, qdd), each (N, nv)."""
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    mid, half = (lo + hi) / 2, 0.35 * (hi - lo) / 2
    w = 2 * np.pi * 0.1  # base frequency [rad/s]
    harmonics = np.arange(1, 6)
    a = rng.normal(size=(model.nv, 5)) / harmonics
    b = rng.normal(size=(model.nv, 5)) / harmonics
    scale = half / (np.abs(a).sum(1) + np.abs(b).sum(1))
    a, b = a * scale[:, None], b * scale[:, None]
    t = np.linspace(0.0, duration, n_samples)
    arg = w * harmonics[None, None, :] * t[:, None, None]  # (N, 1, 5)
    q = mid + (a * np.sin(arg) + b * np.cos(arg)).sum(-1)
    qd = (a * w * harmonics * np.cos(arg) - b * w * harmonics * np.sin(arg)).sum(-1)
    qdd = -((a * np.sin(arg) + b * np.cos(arg)) * (w * harmonics) ** 2).sum(-1)
    return jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd)


@jaxrbd.jit
def regressors(model, q, qd, qdd):
    """Stacked regressor (N nv, nbodies 10)."""
    Y = jax.vmap(lambda *x: jaxrbd.inverse_dynamics_regressor(model, *x))(q, qd, qdd)
    return Y.reshape(-1, Y.shape[-1])


@jaxrbd.jit
def torques(model, q, qd, qdd):
    return jax.vmap(lambda *x: jaxrbd.inverse_dynamics(model, *x))(q, qd, qdd)


def rms(x):
    return float(jnp.sqrt(jnp.mean(jnp.square(x))))


def animate_excitation(model, q, duration: float, seconds: float = 6.0, fps: float = 15.0):
    """The first ``seconds`` of an excitation trajectory ``q`` ``(N, nv)`` sampled evenly
    over ``duration`` as a matplotlib animation, the hand's path traced."""
    from jaxrbd import viz

    dt = duration / (len(q) - 1)
    n = min(len(q), round(seconds / dt) + 1)
    return viz.animate(model, q[:n], dt, fps=fps, trace="panda_hand_tcp")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples and steps")
    parser.add_argument("--gif", metavar="DIR", help="save the excitation motion as a GIF here")
    args = parser.parse_args(argv)
    n_train, n_test = (400, 200) if args.quick else (4000, 1000)
    adam_steps = 300 if args.quick else 3000
    lbfgs_steps = 50 if args.quick else 300

    model = jaxrbd.load_urdf(URDF)
    pi_true = jaxrbd.inertial_parameters(model)
    train = excitation(model, n_train, 20.0, seed=0)
    test = excitation(model, n_test, 10.0, seed=1)
    noise = 0.5  # N m, per joint torque sample
    rng = np.random.default_rng(2)
    tau_train = torques(model, *train) + rng.normal(0.0, noise, (n_train, model.nv))
    tau_test = torques(model, *test)  # noise-free: prediction error against the truth
    if args.gif:
        path = pathlib.Path(args.gif) / "panda_excitation.gif"
        path.parent.mkdir(parents=True, exist_ok=True)
        animate_excitation(model, train[0], 20.0).save(path, writer="pillow", dpi=60)
        print(f"animation saved to {path}")

    # --- linear least squares on the regressor ------------------------------------------
    t0 = time.perf_counter()
    Y = regressors(model, *train)
    pi_ls, *_ = jnp.linalg.lstsq(Y, tau_train.ravel())
    rank = int(jnp.linalg.matrix_rank(Y))
    Y_test = regressors(model, *test)
    err_ls = rms(Y_test @ pi_ls - tau_test.ravel())
    print(f"regressor: {Y.shape[0]} x {Y.shape[1]}, rank {rank} (base parameters), "
          f"least squares in {time.perf_counter() - t0:.1f} s")
    pi_ls_model = pi_ls.reshape(pi_true.shape)
    consistent = jaxrbd.is_physically_consistent(pi_ls_model[1:])
    print(f"least squares: held-out torque RMS error {err_ls:.4f} N m; physically consistent "
          f"bodies: {int(consistent.sum())}/{len(consistent)}")

    # --- physically consistent fit: log-Cholesky + optax --------------------------------
    massive = np.flatnonzero(np.asarray(pi_true[:, 0]) > 0)
    massive = massive[massive > 0]  # the world (and its attached mass) is not identified
    moving = np.asarray([model.body_node[b] != 0 for b in massive])
    massive = massive[moving]
    start = pi_true.at[massive].multiply(1.3)  # a 30% wrong prior
    theta0 = jaxrbd.to_log_cholesky(start[massive])
    Ytr = Y.reshape(n_train, model.nv, -1)

    def loss(theta):
        pi = pi_true.at[massive].set(jaxrbd.from_log_cholesky(theta))
        pred = jnp.einsum("nvp,p->nv", Ytr, pi.ravel())
        return jnp.mean(jnp.square(pred - tau_train))

    t0 = time.perf_counter()
    opt = optax.adam(1e-2)

    @jaxrbd.jit
    def adam_run(theta):
        def body(carry, _):
            theta, state = carry
            val, g = jax.value_and_grad(loss)(theta)
            upd, state = opt.update(g, state)
            return (optax.apply_updates(theta, upd), state), val

        (theta, _), hist = jax.lax.scan(body, (theta, opt.init(theta)), None, length=adam_steps)
        return theta, hist

    theta, hist = adam_run(theta0)
    lbfgs = optax.lbfgs()

    @jaxrbd.jit
    def lbfgs_run(theta):
        vg = optax.value_and_grad_from_state(loss)

        def body(carry, _):
            theta, state = carry
            val, g = vg(theta, state=state)
            upd, state = lbfgs.update(g, state, theta, value=val, grad=g, value_fn=loss)
            return (optax.apply_updates(theta, upd), state), val

        (theta, _), h = jax.lax.scan(body, (theta, lbfgs.init(theta)), None, length=lbfgs_steps)
        return theta, h

    theta, hist2 = lbfgs_run(theta)
    pi_pc = pi_true.at[massive].set(jaxrbd.from_log_cholesky(theta))
    err_pc = rms(Y_test @ pi_pc.ravel() - tau_test.ravel())
    err_prior = rms(Y_test @ start.ravel() - tau_test.ravel())
    print(f"log-Cholesky + optax ({adam_steps} Adam + {lbfgs_steps} L-BFGS steps, "
          f"{time.perf_counter() - t0:.1f} s): training MSE {float(hist[0]):.3g} -> "
          f"{float(hist2[-1]):.3g}")
    print(f"held-out torque RMS error: prior {err_prior:.4f}, least squares {err_ls:.4f}, "
          f"physically consistent {err_pc:.4f} N m (noise {noise} N m)")
    consistent_pc = bool(jnp.all(jaxrbd.is_physically_consistent(pi_pc[massive])))
    mass_err = np.abs(np.asarray(pi_pc[massive, 0] - pi_true[massive, 0])).max()
    print(f"summary: held-out RMS torque error LS {err_ls:.4f} N m, physically consistent "
          f"{err_pc:.4f} N m (all bodies consistent: {consistent_pc}); max mass error "
          f"{mass_err:.3f} kg")
    return {"err_ls": err_ls, "err_pc": err_pc, "err_prior": err_prior, "rank": rank,
            "consistent": consistent_pc, "noise": noise}


if __name__ == "__main__":
    main()
