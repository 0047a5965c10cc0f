"""Write the example notebooks `examples/*.ipynb` from the cell sources below.

The notebooks present the example scripts step by step with plots: they import the
scripts' functions (``examples/`` on ``sys.path``) instead of copying them, so a fix to a
script reaches its notebook. Edit the cells here, not the ``.ipynb`` files, then run

    python examples/make_notebooks.py --write    # (re)write the notebooks, outputs stripped
    python examples/make_notebooks.py            # check: exit 1 if a notebook is out of date

Every notebook starts with the size switch
``QUICK = os.environ.get("JAXRBD_NOTEBOOK_QUICK", "0") == "1"``: the test suite
(`tests/test_notebooks.py`) executes them with ``JAXRBD_NOTEBOOK_QUICK=1``.
A notebook is only written when its script exists.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import textwrap

import nbformat
from nbformat import v4

HERE = pathlib.Path(__file__).resolve().parent

#: The first code cell of every notebook: imports, the size switch, the path to the scripts.
SETUP = '''
import os
import pathlib
import sys

import jax
import matplotlib.pyplot as plt
import numpy as np

# Size switch: JAXRBD_NOTEBOOK_QUICK=1 (set by the test suite) runs reduced sizes.
QUICK = os.environ.get("JAXRBD_NOTEBOOK_QUICK", "0") == "1"

# The notebook calls the functions of the example script next to it.
EXAMPLES = pathlib.Path.cwd()
if not (EXAMPLES / "{script}.py").exists():  # started from the repository root
    EXAMPLES = EXAMPLES / "examples"
sys.path.insert(0, str(EXAMPLES))
print(f"jax {{jax.__version__}} on {{jax.default_backend()}}, QUICK = {{QUICK}}")
'''


def md(text: str) -> tuple[str, str]:
    return ("markdown", text)


def code(text: str) -> tuple[str, str]:
    return ("code", text)


# ------------------------------------------------------------------ elastic arm

ELASTIC = [
    md(r"""
# Elastic-arm identification (MBSlib, Table I)

A 4-link arm (a base yaw joint and three pitch joints) whose joints are ideal rotary
drives in series with rotary springs $k_i$ and dampers $d_i$
([`jaxrbd.SpringDamperDrive`](../docs/api/forces.md)):

$$\tau_i = k_i\,(r_i(t) - q_i) + d_i\,(\dot r_i(t) - \dot q_i),$$

driven by known sinusoidal motor motions $r(t)$. From joint accelerations sampled at
100 Hz we identify $p = (k, d)$, starting from $k = 20$, $d = 0.1$, by
Levenberg-Marquardt (`optimistix.LevenbergMarquardt`) on the residual

$$e(p) = \ddot q(q_m, \dot q_m, t; p) - \ddot q_m,$$

where $\ddot q(\cdot; p)$ is jaxrbd's forward dynamics with the drive torques at the
measured states. The Jacobian $\partial e / \partial p$ comes from automatic
differentiation through the articulated-body algorithm.

This notebook presents `examples/elastic_arm_identification.py` step by step; run the
script for the plain-text version (`--quick` for a short one).
"""),
    code(SETUP.format(script="elastic_arm_identification")),
    code('''
import time

import elastic_arm_identification as ea  # the example script (it enables float64)
import jax.numpy as jnp

DURATION = 2.0 if QUICK else 20.0  # seconds of measurements at 100 Hz
NOISE_SEEDS = 1 if QUICK else 10   # noisy data sets, to see the spread of the estimates
'''),
    md("""
## The arm

`build_arm` uses `jaxrbd.ModelBuilder`: slender links with their mass along the link.
A model prints as its tree, with each joint's kind, name, coordinates and mass.
"""),
    code('''
model = ea.build_arm()
print(model)
'''),
    md("""
## Measurements

The "measurements" are simulated: an RK4 rollout (`jaxrbd.rollout`, step 1 ms) with the
reference parameters, sampled at 100 Hz, and the accelerations of the sampled states. The
arm follows the motors through the springs; the accelerations are dominated by the fast,
lightly damped spring modes.
"""),
    code('''
t0 = time.perf_counter()
t, q, qd, qdd_m = ea.simulate(model, DURATION)
print(f"{len(t)} samples over {DURATION:.0f} s in {time.perf_counter() - t0:.1f} s "
      f"(compilation included); max|qdd_m| = {float(jnp.abs(qdd_m).max()):.1f} rad/s^2")

r = jax.vmap(ea.motor())(t)
fig, ax = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
for i in range(4):
    ax[0].plot(t, q[:, i], color=f"C{i}", label=f"$q_{i + 1}$")
    ax[0].plot(t, r[:, i], "--", color=f"C{i}", lw=1)
    ax[1].plot(t, qdd_m[:, i], color=f"C{i}", lw=0.8)
ax[0].set(ylabel="angle [rad]", title="joint angles (solid) and motor positions (dashed)")
ax[0].legend(ncol=4)
ax[1].set(xlabel="t [s]", ylabel=r"$\\ddot q_m$ [rad/s$^2$]", title="measured accelerations")
fig.tight_layout()
plt.show()
'''),
    md("""
The measured motion in real time (`jaxrbd.viz.animate`, the tip's path traced):
"""),
    code('''
from jaxrbd import viz

viz.html(ea.animate_motion(model, q, seconds=2.0 if QUICK else 5.0, fps=5 if QUICK else 20))
'''),
    md("""
## Identification from ideal data

`identify` runs `optimistix.least_squares` with Levenberg-Marquardt on the stacked
residual of all samples. From noise-free data the reference parameters are recovered
to machine precision.
"""),
    code('''
p_ref = np.concatenate([ea.K_REF, ea.D_REF])
p0 = jnp.concatenate([jnp.full(4, ea.K_START), jnp.full(4, ea.D_START)])
names = [f"k{i}" for i in range(1, 5)] + [f"d{i}" for i in range(1, 5)]

t0 = time.perf_counter()
p_ideal, steps, converged = ea.identify(model, t, q, qd, qdd_m, p0)
p_ideal = np.asarray(p_ideal)
rel_ideal = np.abs(p_ideal - p_ref) / p_ref
print(f"{steps} LM steps, converged: {converged}, {time.perf_counter() - t0:.1f} s; "
      f"max relative error {rel_ideal.max():.1e}")
'''),
    md(r"""
## Identification from noisy data

As in the paper, Gaussian white noise with $3\sigma = 0.1 \max|\ddot q_m|$ is added to
the accelerations. The fit is repeated for several noise realisations to show the
spread of the estimates.
"""),
    code('''
sigma = 0.1 * float(jnp.abs(qdd_m).max()) / 3.0
estimates, noisy_data = [], []
t0 = time.perf_counter()
for seed in range(NOISE_SEEDS):
    rng = np.random.default_rng(seed)
    data = qdd_m + rng.normal(0.0, sigma, size=qdd_m.shape)
    p, steps, converged = ea.identify(model, t, q, qd, jnp.asarray(data), p0)
    estimates.append(np.asarray(p))
    noisy_data.append(data)
    rel = np.abs(estimates[-1] - p_ref) / p_ref
    print(f"noise seed {seed:2d}: {steps:3d} LM steps, converged: {converged}, "
          f"max relative error {rel.max():.3f}  ({time.perf_counter() - t0:.0f} s so far)")
estimates = np.stack(estimates)
'''),
    md("""
### Table I

Reference, start, the estimate from ideal data, the estimate from the first noisy data
set, and the mean and standard deviation over all noisy data sets.
"""),
    code('''
from IPython.display import Markdown, display

rows = ["| parameter | reference | start | ideal | noisy (seed 0) | noisy mean ± std |",
        "|---|---:|---:|---:|---:|---:|"]
for i, name in enumerate(names):
    rows.append(f"| {name} | {p_ref[i]:.4g} | {float(p0[i]):.4g} | {p_ideal[i]:.6g} | "
                f"{estimates[0, i]:.4g} | {estimates[:, i].mean():.4g} ± "
                f"{estimates[:, i].std():.2g} |")
display(Markdown("\\n".join(rows)))
'''),
    md(r"""
### Residuals

If the model explains the data, the residuals of the noisy fit are the measurement noise:
normalised by $\sigma$ they follow a standard normal distribution. The right panel shows
the relative error of each parameter over the noise realisations: the stiffnesses are
well determined, the small dampers less so.
"""),
    code('''
ref = ea.motor()
residual = np.asarray(ea.accelerations(model, jnp.asarray(estimates[0]), ref, t, q, qd)
                      - noisy_data[0])
residual_ideal = np.asarray(ea.accelerations(model, jnp.asarray(p_ideal), ref, t, q, qd)
                            - qdd_m)
print(f"ideal fit: max |residual| = {np.abs(residual_ideal).max():.1e} rad/s^2; "
      f"noisy fit: residual std / sigma = {residual.std() / sigma:.3f}")

fig, ax = plt.subplots(1, 2, figsize=(12, 4))
z = np.linspace(-4, 4, 200)
for i in range(4):
    ax[0].hist(residual[:, i] / sigma, bins=30, density=True, histtype="step",
               label=f"joint {i + 1}")
ax[0].plot(z, np.exp(-z**2 / 2) / np.sqrt(2 * np.pi), "k--", label="N(0, 1)")
ax[0].set(xlabel=r"residual / $\\sigma$", ylabel="density",
          title="residuals of the noisy fit (seed 0)")
ax[0].legend()
ax[1].boxplot((estimates - p_ref) / p_ref, tick_labels=names)
ax[1].axhline(0.0, color="k", lw=0.5)
ax[1].set(ylabel="relative error", title=f"estimates over {NOISE_SEEDS} noise realisations")
fig.tight_layout()
plt.show()
'''),
]

# ------------------------------------------------------------------ inertial identification

INERTIAL = [
    md(r"""
# Inertial identification of the Franka Panda

The joint torques are linear in the inertial parameters $\pi$ (ten per body: mass, first
moments, rotational inertia about the body origin):

$$\tau = Y(q, \dot q, \ddot q)\,\pi ,$$

with the regressor $Y$ from `jaxrbd.inverse_dynamics_regressor`. We

1. excite the arm along smooth trajectories (a finite Fourier series per joint) and
   "measure" the torques of the true model with Gaussian noise;
2. identify $\pi$ by linear least squares, which determines only the identifiable
   combinations (the *base parameters*) and may give physically impossible bodies;
3. identify a physically consistent $\pi$ by optax on the log-Cholesky
   parameterisation (`jaxrbd.from_log_cholesky`), where every value is a valid body;
4. compare the torque predictions of both on held-out data.

This notebook presents `examples/inertial_identification.py` step by step.
"""),
    code(SETUP.format(script="inertial_identification")),
    code('''
import time

import inertial_identification as ii  # the example script (it enables float64)
import jax.numpy as jnp
import optax

import jaxrbd

N_TRAIN, N_TEST = (200, 100) if QUICK else (4000, 1000)  # samples (20 s and 10 s)
ADAM_STEPS, LBFGS_STEPS = (200, 20) if QUICK else (3000, 300)
CHUNK = 50 if QUICK else 500  # optimiser steps per jitted chunk (progress printed after each)
NOISE = 0.5  # N m, standard deviation of the torque noise
'''),
    md("""
## The robot and its parameters

The Panda is loaded from URDF. `jaxrbd.inertial_parameters` returns the
`(nbodies, 10)` parameter array, one row `[m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]` per
body (about the body origin, in body coordinates), the world row included.
"""),
    code('''
model = jaxrbd.load_urdf(ii.URDF)
print(model)
pi_true = jaxrbd.inertial_parameters(model)
print("parameters:", pi_true.shape)
'''),
    md("""
## Excitation and measurements

Training and held-out trajectories use different random Fourier coefficients. Training
torques carry Gaussian noise; the held-out set keeps both the noisy "measurement" and the
true torques.
"""),
    code('''
train = ii.excitation(model, N_TRAIN, 20.0, seed=0)
test = ii.excitation(model, N_TEST, 10.0, seed=1)
rng = np.random.default_rng(2)
tau_train = ii.torques(model, *train) + rng.normal(0.0, NOISE, (N_TRAIN, model.nv))
tau_test_true = ii.torques(model, *test)
tau_test = tau_test_true + rng.normal(0.0, NOISE, (N_TEST, model.nv))

t_train = np.linspace(0.0, 20.0, N_TRAIN)
fig, ax = plt.subplots(1, 2, figsize=(12, 4))
lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
for j in range(model.nv):
    ax[0].plot(t_train, (train[0][:, j] - lo[j]) / (hi[j] - lo[j]), label=f"joint {j + 1}")
    ax[1].plot(t_train, tau_train[:, j], lw=0.7)
ax[0].set(xlabel="t [s]", ylabel="(q - lower) / (upper - lower)",
          title="training trajectory within the joint limits", ylim=(0, 1))
ax[0].legend(ncol=2, fontsize=8)
ax[1].set(xlabel="t [s]", ylabel="torque [N m]", title="measured training torques")
fig.tight_layout()
plt.show()
'''),
    md("""
The first seconds of the training motion (`jaxrbd.viz.animate`, the hand's path traced):
"""),
    code('''
from jaxrbd import viz

viz.html(ii.animate_excitation(model, train[0], 20.0, seconds=2.0 if QUICK else 6.0,
                               fps=5 if QUICK else 15))
'''),
    md("""
## Linear least squares on the regressor

The stacked regressor has one row per joint and sample. Its rank is the number of base
parameters: fewer than the 10 per body, since some parameters never affect the torques
(the world's, those of bodies merged by fixed joints) and others only in combinations.
`lstsq` returns the minimum-norm solution, which predicts torques exactly as well as any
other least-squares solution.
"""),
    code('''
t0 = time.perf_counter()
Y = ii.regressors(model, *train)
pi_ls = jnp.linalg.lstsq(Y, tau_train.ravel())[0].reshape(pi_true.shape)
rank = int(jnp.linalg.matrix_rank(Y))
Y_test = ii.regressors(model, *test)
pred_ls = (Y_test @ pi_ls.ravel()).reshape(N_TEST, model.nv)
consistent_ls = jaxrbd.is_physically_consistent(pi_ls[1:])
print(f"regressor {Y.shape[0]} x {Y.shape[1]}, rank {rank}; "
      f"{time.perf_counter() - t0:.1f} s")
print(f"held-out RMS error against the true torques: {ii.rms(pred_ls - tau_test_true):.4f} N m;"
      f" physically consistent bodies: {int(consistent_ls.sum())}/{len(consistent_ls)}")
'''),
    md(r"""
## Physically consistent identification (log-Cholesky + optax)

Every body with mass is parameterised by its log-Cholesky coordinates $\theta$
(`jaxrbd.to_log_cholesky` / `from_log_cholesky`): any real $\theta$ maps to a physically
consistent body (positive mass, inertia satisfying the triangle inequalities). Starting
from a prior that is 30 % wrong, Adam and then L-BFGS minimise the mean squared torque
error $\lVert Y(\theta)\,\pi(\theta) - \tau_m\rVert^2$. The optimisation runs in jitted
chunks of `lax.scan` steps, printing progress after each chunk.
"""),
    code('''
massive = np.flatnonzero(np.asarray(pi_true[:, 0]) > 0)
massive = np.array([b for b in massive if b > 0 and model.body_node[b] != 0])  # moving bodies
prior = pi_true.at[massive].multiply(1.3)
Y_train = Y.reshape(N_TRAIN, model.nv, -1)


def parameters(theta):
    return pi_true.at[massive].set(jaxrbd.from_log_cholesky(theta))


def loss(theta):
    pred = jnp.einsum("nvp,p->nv", Y_train, parameters(theta).ravel())
    return jnp.mean(jnp.square(pred - tau_train))


def make_chunk(optimizer, value_and_grad, steps):
    """`steps` optimiser steps in one jitted `lax.scan`, returning the loss values."""
    @jax.jit
    def chunk(theta, state):
        def body(carry, _):
            theta, state = carry
            value, grad = value_and_grad(theta, state)
            updates, state = optimizer.update(grad, state, theta, value=value, grad=grad,
                                              value_fn=loss)
            return (optax.apply_updates(theta, updates), state), value
        (theta, state), values = jax.lax.scan(body, (theta, state), None, length=steps)
        return theta, state, values
    return chunk


def run(name, optimizer, value_and_grad, theta, total):
    chunk = make_chunk(optimizer, value_and_grad, CHUNK)
    state, history, t0 = optimizer.init(theta), [], time.perf_counter()
    for done in range(CHUNK, total + CHUNK, CHUNK):
        theta, state, values = chunk(theta, state)
        history.append(np.asarray(values))
        print(f"{name} step {min(done, total):5d}: training MSE {float(values[-1]):.4g} "
              f"({time.perf_counter() - t0:.1f} s)")
    return theta, np.concatenate(history)[:total]


adam = optax.adam(1e-2)
lbfgs = optax.lbfgs()
lbfgs_value_and_grad = optax.value_and_grad_from_state(loss)
theta, hist_adam = run("Adam  ", adam, lambda th, st: jax.value_and_grad(loss)(th),
                       jaxrbd.to_log_cholesky(prior[massive]), ADAM_STEPS)
theta, hist_lbfgs = run("L-BFGS", lbfgs, lambda th, st: lbfgs_value_and_grad(th, state=st),
                        theta, LBFGS_STEPS)
pi_pc = parameters(theta)
print("all fitted bodies physically consistent:",
      bool(jnp.all(jaxrbd.is_physically_consistent(pi_pc[massive]))))

fig, ax = plt.subplots(figsize=(7, 3.5))
ax.semilogy(np.arange(ADAM_STEPS), hist_adam, label="Adam")
ax.semilogy(ADAM_STEPS + np.arange(len(hist_lbfgs)), hist_lbfgs, label="L-BFGS")
ax.axhline(NOISE**2, color="k", ls="--", lw=1, label="noise variance")
ax.set(xlabel="step", ylabel="training MSE [N$^2$ m$^2$]", title="convergence")
ax.legend()
plt.show()
'''),
    md("""
## Torque prediction on held-out data

Both estimates predict the held-out torques to well within the measurement noise, while
the prior is far off. The table gives the RMS errors against the noisy measurement and
against the true torques.
"""),
    code('''
from IPython.display import Markdown, display

pred_pc = (Y_test @ pi_pc.ravel()).reshape(N_TEST, model.nv)
pred_prior = (Y_test @ prior.ravel()).reshape(N_TEST, model.nv)
rows = ["| parameters | RMS error vs measurement [N m] | RMS error vs truth [N m] |",
        "|---|---:|---:|"]
for name, pred in (("prior (30 % off)", pred_prior), ("least squares", pred_ls),
                   ("physically consistent", pred_pc)):
    rows.append(f"| {name} | {ii.rms(pred - tau_test):.4f} | "
                f"{ii.rms(pred - tau_test_true):.4f} |")
display(Markdown("\\n".join(rows)))

t_test = np.linspace(0.0, 10.0, N_TEST)
fig, axes = plt.subplots(2, 4, figsize=(15, 6))
for j, ax in enumerate(axes.flat[: model.nv]):
    ax.plot(t_test, tau_test[:, j], ".", ms=2, color="0.6", label="measured")
    ax.plot(t_test, pred_ls[:, j], lw=1.2, label="least squares")
    ax.plot(t_test, pred_pc[:, j], "--", lw=1.2, label="physically consistent")
    ax.set(title=f"joint {j + 1}", xlabel="t [s]", ylabel="torque [N m]")
ax = axes.flat[-1]
ax.plot(tau_test.ravel(), pred_pc.ravel(), ".", ms=2)
ax.plot(tau_test.ravel(), tau_test.ravel(), "k", lw=0.5)
ax.set(title="predicted vs measured", xlabel="measured [N m]", ylabel="predicted [N m]")
axes.flat[0].legend(fontsize=8)
fig.tight_layout()
plt.show()
'''),
    md("""
## Masses

The torque data determine the masses only through their combinations with the other
parameters, so the physically consistent fit need not recover each mass exactly.
"""),
    code('''
rows = ["| body | true mass [kg] | prior [kg] | fitted [kg] |", "|---|---:|---:|---:|"]
for b in massive:
    rows.append(f"| {model.body_names[b]} | {float(pi_true[b, 0]):.3f} | "
                f"{float(prior[b, 0]):.3f} | {float(pi_pc[b, 0]):.3f} |")
display(Markdown("\\n".join(rows)))
'''),
]

# ------------------------------------------------------------------ trajectory optimisation

TRAJOPT = [
    md(r"""
# Trajectory optimisation through rollouts

Two problems solved with gradients through `jaxrbd.rollout` (RK4) and optax L-BFGS
inside an augmented Lagrangian
$L(z) = f(z) + \lambda^\top c(z) + \tfrac{\rho}{2}\lVert c(z)\rVert^2$:

1. **Cart-pole swing-up by multiple shooting.** The horizon is cut into intervals whose
   start states are decision variables, together with the cart forces. All intervals are
   simulated at once by `jax.vmap` of `jaxrbd.rollout`; the continuity defects
   $c_k = x_k(\text{end}) - s_{k+1}$ and the final state's error are the constraints.
2. **Panda reaching with minimum torque effort.** Rest to rest in 1 s, minimising
   $\int \lVert\tau\rVert^2 dt$ subject to the hand ending at a target. The arm is fully
   actuated, so the joint motion is the decision variable and the torques come from
   inverse dynamics; a forward-dynamics rollout then replays them.

This notebook presents `examples/trajectory_optimization.py` step by step; each outer
iteration of the augmented Lagrangian prints a progress line.
"""),
    code(SETUP.format(script="trajectory_optimization")),
    code('''
import trajectory_optimization as trajopt  # the example script (it enables float64)
'''),
    md("""
## Cart-pole swing-up

A cart on a prismatic joint carries a pole on a revolute joint ($\\theta = 0$ hangs
down, $\\theta = \\pi$ is upright). Only the cart is actuated. The initial guess
interpolates the states linearly from hanging to upright, with zero forces: multiple
shooting can start from such an infeasible but sensible trajectory.
"""),
    code('''
print(trajopt.cart_pole())
cart = trajopt.swing_up(QUICK)
'''),
    md("""
### Convergence

Left: the augmented Lagrangian over all L-BFGS iterations (it jumps when $\\lambda$ and
$\\rho$ are updated). Middle: the norm of the continuity defects after each outer
iteration. Right: the objective (the control effort).
"""),
    code('''
def convergence(result, constraint_label):
    history = result["history"]
    its = [h["iteration"] for h in history]
    fig, ax = plt.subplots(1, 3, figsize=(15, 3.8))
    start = 0
    for h in history[1:]:
        values = h["lagrangian"]
        ax[0].semilogy(start + np.arange(len(values)), np.maximum(values, 1e-16))
        start += len(values)
    ax[0].set(xlabel="L-BFGS iteration", ylabel="augmented Lagrangian",
              title="inner solves (one colour per outer iteration)")
    ax[1].semilogy(its, [max(h["defect"], 1e-16) for h in history], "o-")
    ax[1].set(xlabel="L-BFGS iteration", ylabel=constraint_label, title="constraints")
    ax[2].plot(its, [h["objective"] for h in history], "o-")
    ax[2].set(xlabel="L-BFGS iteration", ylabel="objective", title="objective")
    fig.tight_layout()
    plt.show()


convergence(cart, "defect norm")
'''),
    md("""
### The swing-up

The shooting intervals of the solution, each simulated from its start state (the small
remaining defects are the jumps between them), and a stroboscopic view of the motion.
Replaying all the forces in one rollout from the hanging state drifts away from this: the
upright pole is unstable, so a real swing-up closes the loop.
"""),
    code('''
t, qs, u = cart["t"], cart["q"], cart["u"]
length = 0.6  # the pole length of trajopt.cart_pole()
fig, ax = plt.subplots(1, 2, figsize=(14, 4))
ax[0].plot(t, qs[:, 0], label="cart x [m]")
ax[0].plot(t, qs[:, 1], label=r"pole $\\theta$ [rad]")
ax[0].axhline(np.pi, color="k", ls=":", lw=1)
ax[0].step(t[:-1], u / 10, where="post", label="force / 10 [N]")
ax[0].set(xlabel="t [s]", title="states and control")
ax[0].legend()
for k in np.linspace(0, len(t) - 1, 12).astype(int):
    x, th = qs[k, 0], qs[k, 1]
    tip = (x + length * np.sin(th), -length * np.cos(th))
    shade = str(0.8 * (1 - k / (len(t) - 1)))
    ax[1].plot([x, tip[0]], [0.0, tip[1]], "-o", color=shade, ms=3)
    ax[1].plot([x - 0.1, x + 0.1], [0.0, 0.0], color=shade, lw=4)
ax[1].set(aspect="equal", xlabel="x [m]", ylabel="z [m]",
          title="swing-up (light: early, dark: late)")
fig.tight_layout()
plt.show()
print(f"final state error {cart['state_error']:.2e} (multiple shooting), "
      f"{cart['replay_state_error']:.2e} (replayed from the start); "
      f"effort {cart['effort']:.3g} N^2 s")
'''),
    md("""
## Panda reaching

The Panda starts at rest in its ready pose. The decision variables are the coefficients
of rest-to-rest polynomials per joint (the initial guess, all zero, holds the arm still);
the torques along the motion come from `jaxrbd.inverse_dynamics`, and the constraint is
the final hand position. The optimised torques are replayed by a forward-dynamics
rollout with a light PD on the plan; the PD's share of the torque shows how exactly
forward dynamics reproduces the plan.
"""),
    md("""
The swing-up (the stitched shooting intervals), in real time:
"""),
    code('''
from jaxrbd import viz

viz.html(trajopt.animate_swing_up(cart, fps=5 if QUICK else 20))
'''),
    code('''
panda = trajopt.reach(QUICK)
convergence(panda, "|constraints|")
'''),
    md("""
The reach, replayed by forward dynamics, the hand's path traced:
"""),
    code('''
viz.html(trajopt.animate_reach(panda, fps=5 if QUICK else 20))
'''),
    code('''
from IPython.display import Markdown, display

display(Markdown("\\n".join([
    "| quantity | value |", "|---|---:|",
    f"| hand distance to target at the start | {panda['distance_start'] * 1e3:.1f} mm |",
    f"| final hand position error | {panda['position_error'] * 1e3:.3f} mm |",
    f"| hand error replayed by forward dynamics | {panda['replay_position_error'] * 1e3:.3f} mm |",
    f"| PD share of the replayed torque | {panda['feedback_share']:.2%} |",
    f"| final joint speed (replay) | {panda['final_speed']:.2e} rad/s |",
    f"| torque cost ∫\\\\|τ\\\\|² dt | {panda['torque_cost']:.4g} N² m² s |",
    f"| holding still for 1 s | {panda['torque_cost_gravity']:.4g} N² m² s |",
    f"| max \\\\|τ\\\\| / effort limit | {panda['max_torque_ratio']:.2f} |",
    f"| optimisation time | {panda['seconds']:.1f} s |",
])))
'''),
]

# ------------------------------------------------------------------ batched rollouts

BATCHED = [
    md("""
# Batched rollouts

Solo-12, a quadruped with a floating base, from thousands of random initial states, all
simulated by one `jaxrbd.batched.rollout` (RK4, `jax.vmap` over the batch, blocked per
device). There are no contacts: the robot falls freely while a joint-space PD controller
drives its twelve joints towards a nominal crouched pose. We look at the throughput and
at the distribution of the states over time, and check the physics: without contacts the
centre of mass of every sample follows the ballistic parabola, whatever the joints do.

This notebook presents `examples/batched_rollouts.py` step by step.
"""),
    code(SETUP.format(script="batched_rollouts")),
    code('''
import time

import batched_rollouts as br  # the example script (it enables float64)
import jax.numpy as jnp

import jaxrbd

BATCH = 128 if QUICK else 10_000  # random initial states
N_STEPS = 40 if QUICK else 500    # RK4 steps of DT
CHUNKS = 2 if QUICK else 5        # the rollout runs in CHUNKS pieces, printing progress
DT = 2e-3
'''),
    md("""
## The robot and the initial states

`initial_states` draws the base height, a small base tilt (a random rotation vector, as
a unit quaternion `(w, x, y, z)`), joint angles around the nominal pose and random base
and joint velocities.
"""),
    code('''
model = jaxrbd.load_urdf(br.URDF, floating_base=True)
print(model)
Q0, QD0 = br.initial_states(model, BATCH, seed=0)
print("Q0", Q0.shape, "QD0", QD0.shape)
'''),
    md("""
## One jitted batched rollout

The PD policy does not depend on time, so the rollout can run in pieces, each continuing
from the last state of the previous one: one compiled function, called `CHUNKS` times.
Compilation is timed separately from the run.
"""),
    code('''
policy = br.pd_policy(model)
steps = N_STEPS // CHUNKS
run = jax.jit(lambda Q, QD: jaxrbd.batched.rollout(model, Q, QD, None, DT, n_steps=steps,
                                                   policy=policy))
t0 = time.perf_counter()
compiled = run.lower(Q0, QD0).compile()
print(f"compile {time.perf_counter() - t0:.1f} s")

pieces_q, pieces_qd, run_s = [Q0[:, None]], [QD0[:, None]], 0.0
Q, QD = Q0, QD0
for k in range(CHUNKS):
    t0 = time.perf_counter()
    QS, QDS = jax.block_until_ready(compiled(Q, QD))
    run_s += time.perf_counter() - t0
    pieces_q.append(QS[:, 1:])
    pieces_qd.append(QDS[:, 1:])
    Q, QD = QS[:, -1], QDS[:, -1]
    print(f"steps {(k + 1) * steps:4d}/{CHUNKS * steps}: t = {(k + 1) * steps * DT:.2f} s, "
          f"{run_s:.2f} s of run time so far")
QS, QDS = jnp.concatenate(pieces_q, axis=1), jnp.concatenate(pieces_qd, axis=1)
n = CHUNKS * steps
print(f"{BATCH} samples x {n} steps on {jax.default_backend()}: "
      f"{BATCH * n / run_s:,.0f} states/s, {run_s / (BATCH * n) * 1e6:.2f} us per "
      f"sample-step ({4 * BATCH * n / run_s:,.0f} forward dynamics/s with RK4)")
'''),
    md("""
## The state distribution over time

`statistics` reduces the batch to percentiles per time step. The base falls freely (the
spread of the heights grows with the spread of the initial vertical velocities), while
the PD controller pulls the joints towards the nominal pose.
"""),
    code('''
stats = br.statistics(model, QS, QDS, DT)
t = stats["t"]
fig, ax = plt.subplots(1, 3, figsize=(16, 4))
panels = ((ax[0], "height_pct", "base height [m]", "free fall (no contacts)"),
          (ax[1], "joint_pct", "mean |q_j - q_nominal| [rad]", "joint PD"))
for a, key, label, title in panels:
    p = stats[key]
    a.fill_between(t, p[0], p[4], alpha=0.25, label="5-95 %")
    a.fill_between(t, p[1], p[3], alpha=0.45, label="25-75 %")
    a.plot(t, p[2], "k", label="median")
    a.set(xlabel="t [s]", ylabel=label, title=title)
    a.legend()
dev = np.abs(np.asarray(QS[:, :, 7:]) - br.nominal_joints(model)).mean(-1)
for k in np.linspace(0, n, 4).round().astype(int):
    ax[2].hist(dev[:, k], bins=40, density=True, histtype="step", label=f"t = {t[k]:.2f} s")
ax[2].set(xlabel="mean |q_j - q_nominal| [rad]", ylabel="density",
          title="distribution over the batch")
ax[2].legend()
fig.tight_layout()
plt.show()
print(f"joint spread {stats['joint_spread'][0]:.3f} -> {stats['joint_spread'][-1]:.3f} rad;"
      f" max |quaternion norm - 1| = {stats['quat_norm_error']:.1e}; "
      f"all finite: {stats['finite']}")
'''),
    md("""
Sixteen of the rollouts, evenly spaced in the batch, overlaid (`jaxrbd.viz.animate`
draws at most `max_trajectories` of a batch, translucent):
"""),
    code('''
from jaxrbd import viz

viz.html(br.animate_batch(model, QS, DT, fps=5 if QUICK else 20))
'''),
    md("""
## A physics check

Without contacts the only external force is gravity, so the centre of mass of every
sample moves on the parabola $c(t) = c_0 + v_0 t + g t^2 / 2$: the joint torques are
internal. The error is the integration error of RK4.
"""),
    code('''
err = br.ballistic_error(model, Q0, QD0, QS, n * DT)
print(f"centre of mass vs ballistic parabola at t = {n * DT:.2f} s: max error {err:.2e} m "
      f"over {BATCH} samples")
'''),
]

# ------------------------------------------------------------------ human motion estimation

HUMAN = [
    md(r"""
# Human motion from motion-capture markers (MBSlib, §IV-B)

A 28-DoF human body model ([`jaxrbd.models.human28`](../docs/human-motion.md): floating
pelvis, 22 joint DoFs, de Leva's 1996 segment parameters) with 36 markers walks a
synthetic gait. Its marker trajectories get 2 mm Gaussian noise and occlusions (NaN).
From the markers alone we estimate $q$, $\dot q$, $\ddot q$

* with the **extended Kalman smoother** of `jaxrbd.estimation` (Wojtusch et al. 2016):
  state $[q, \dot q, \ddot q, \dddot q]$, constant-jerk process model, marker
  measurement update with missing markers masked, Rauch–Tung–Striebel backward pass;
  one `lax.scan` each way, batched over trials with `jax.vmap`;
* with **per-frame inverse kinematics** on the same markers, differentiated by central
  differences (the usual baseline),

and compare both with the truth. This notebook presents
`examples/human_motion_estimation.py` step by step.
"""),
    code(SETUP.format(script="human_motion_estimation")),
    code("""
import human_motion_estimation as hm
import jax.numpy as jnp

import jaxrbd
from jaxrbd import estimation, mocap

jax.config.update("jax_enable_x64", True)
model, ms = jaxrbd.models.human28(mass=75.0, height=1.75, markers=True)
duration, n_trials = (1.0, 1) if QUICK else (4.0, 2)
dt = 1.0 / hm.RATE
trials = [
    mocap.synthetic_gait_trial(model, ms, duration=duration, rate=hm.RATE,
                               noise_std=hm.NOISE, gap_probability=0.004, max_gap=20,
                               seed=k, speed=1.25 + 0.1 * k, stride_frequency=0.9 + 0.04 * k)
    for k in range(n_trials)
]
Z = jnp.stack([tr.markers for tr in trials])       # (trials, frames, 36 markers, 3)
print(model.nq, "coordinates,", len(ms), "markers,", Z.shape[1], "frames per trial,",
      f"{100 * float(jnp.mean(~jnp.all(jnp.isfinite(Z), -1))):.1f}% occluded")
"""),
    md(r"""
## Smoother and per-frame IK, batched over trials

Both run under `jax.jit(jax.vmap(...))`: one compiled program for every trial.
"""),
    code("""
eks = jax.jit(jax.vmap(lambda z: estimation.extended_kalman_smoother(
    model, ms, z, dt, marker_std=hm.NOISE)))
ik = jax.jit(jax.vmap(lambda z: estimation.marker_inverse_kinematics(model, ms, z)))
res, eks_first, eks_time = hm.timed(eks, Z, repeats=1)
q_ik, ik_first, ik_time = hm.timed(ik, Z, repeats=1)
frames = Z.shape[0] * Z.shape[1]
print(f"smoother {1e6 * eks_time / frames:.0f} us/frame, IK {1e6 * ik_time / frames:.0f} us/frame")
"""),
    md(r"""
## Errors against the truth

RMS over frames and the 22 joint DoFs (the floating base left out).
"""),
    code("""
for k, tr in enumerate(trials):
    qd_ik, qdd_ik = estimation.trajectory_derivatives(model, q_ik[k], dt)
    e_eks = hm.rms_errors(model, tr, res.q[k], res.qd[k], res.qdd[k])
    e_ik = hm.rms_errors(model, tr, q_ik[k], qd_ik, qdd_ik)
    print(f"trial {k}: smoother q {e_eks[0]:.3f} deg, qd {e_eks[1]:.2f} deg/s, "
          f"qdd {e_eks[2]:.1f} deg/s^2 | IK q {e_ik[0]:.3f} deg, qd {e_ik[1]:.2f} deg/s, "
          f"qdd {e_ik[2]:.1f} deg/s^2")
"""),
    md(r"""
## Estimated against true joint angles, and the marker residuals

The smoother follows the truth through the occlusions; per-frame IK is noisier, and its
accelerations by central differences are far noisier still.
"""),
    code("""
tr, t = trials[0], np.asarray(trials[0].time)
fig, axes = plt.subplots(1, 3, figsize=(14, 3.5), constrained_layout=True)
for ax, joint in zip(axes[:2], ("l_hip", "l_knee")):
    i = model.q_index(joint).start
    ax.plot(t, np.asarray(tr.q[:, i]) * hm.DEG, "k", lw=2, label="truth")
    ax.plot(t, np.asarray(q_ik[0, :, i]) * hm.DEG, "C1", lw=1, label="per-frame IK")
    ax.plot(t, np.asarray(res.q[0, :, i]) * hm.DEG, "C0--", lw=1.5, label="smoother")
    ax.set_title(joint)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("deg")
axes[0].legend()
r = np.linalg.norm(np.asarray(res.residuals[0]), axis=-1) * 1000.0   # (frames, markers) mm
axes[2].plot(t, np.nanmean(r, axis=1), label="mean over visible markers")
axes[2].plot(t, np.nanmax(r, axis=1), lw=0.8, label="largest")
axes[2].set_title("marker residuals at the smoothed poses")
axes[2].set_xlabel("time [s]")
axes[2].set_ylabel("mm")
axes[2].legend()
plt.show()
"""),
]


# ------------------------------------------------------------------ legged rollouts

LEGGED = [
    md(r"""
# Legged robots on the ground: many quadrupeds at once, and a jump through contact

Solo-12 quadrupeds ([`jaxrbd.ground`](../docs/ground-contact.md)): four spherical feet on
a flat plane with Coulomb friction ($\mu = 0.9$), **hard contacts** (velocity-level time
stepping, the unilateral contact problem with the friction cone solved on the Delassus
matrix), under a PD standing policy.

1. A batch of robots dropped from random poses in one `jax.vmap`-ed
   `jaxrbd.ground.rollout`: base heights and the total normal force.
2. The take-off torques of a jump, optimised by gradient steps so that the base reaches
   a target height: the gradient flows through the contact impulses by implicit
   differentiation of the contact solver, not through its iterations.

This notebook presents `examples/legged_rollouts.py` step by step.
"""),
    code(SETUP.format(script="legged_rollouts")),
    code("""
import legged_rollouts as lr

from jaxrbd import viz

jax.config.update("jax_enable_x64", True)
model, feet, plane = lr.setup()
dt = 2e-3
n, steps = (16, 100) if QUICK else (4096, 500)
print(f"solo12: nq={model.nq}, nv={model.nv}; {n} robots x {steps} steps of {dt * 1e3:.0f} ms")
"""),
    md(r"""
## Dropping the batch

`drop_many` runs `jaxrbd.batched.ground_rollout` (blocks of `jax.vmap`-ed
`ground.rollout`) from random base heights, tilts and
joint angles; `info.force` holds every foot's contact force at every step.
"""),
    code("""
qs, fn, mg = lr.drop_many(model, feet, plane, n, steps, dt)
t = np.arange(qs.shape[1]) * dt
fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 3.5), constrained_layout=True)
a1.plot(t, np.asarray(qs[:64, :, 2]).T, lw=0.5, alpha=0.6)
a1.set_xlabel("time [s]")
a1.set_ylabel("base height [m]")
f = np.asarray(fn) / mg
a2.fill_between(t[1:], np.percentile(f, 5, axis=0), np.percentile(f, 95, axis=0), alpha=0.3,
                label="5-95 %")
a2.plot(t[1:], np.median(f, axis=0), label="median")
a2.set_ylim(0, 5)
a2.set_xlabel("time [s]")
a2.set_ylabel("total normal force / (m g)")
a2.legend()
plt.show()
"""),
    md(r"""
Sixteen of the robots, overlaid, on the ground plane (`jaxrbd.viz.animate`):
"""),
    code("""
every = max(1, (steps + 1) // (20 if QUICK else 100))
viz.html(viz.animate(model, qs[:16, ::every], dt * every, ground=0.0,
                     fps=5 if QUICK else 20))
"""),
    md(r"""
## A jump optimised through contact

The base height after a push of extra hip and knee torques is a differentiable function
of the two torques; damped Gauss–Newton steps on `height(push) = target` use
`jax.value_and_grad` through the whole rollout, contact impulses included.
"""),
    code("""
n_push, n_flight = (20, 20) if QUICK else (50, 60)
push, height = lr.optimise_jump(model, feet, plane, target=0.32,
                                iterations=2 if QUICK else 8, dt=dt, n_push=n_push,
                                n_flight=n_flight)
"""),
]


# ------------------------------------------------------------------ real-robot identification

REAL_ROBOT = [
    md(r"""
# Identifying a KUKA LWR4+ and a Franka Panda from their logs

`jaxrbd.identification` takes a recording to a validated model: resampling, zero-phase
filtering and differentiation; the base parameters (Gautier 1990); least squares; a
physically consistent fit with a prior towards the URDF, its weight chosen by
validation (Lee, Wensing and Park 2019); the prediction of data the fit has not seen.

The recordings are public but not shipped with jaxrbd (LGPL-3.0 and GPL-3.0): the KUKA
LWR4+ runs of FloBaRoID (github.com/kjyv/FloBaRoID, `data/KUKA/HW` and `model`) and the
Franka Panda trajectory and published model of Gaz et al. 2019
(github.com/marcocognetti/FrankaEmikaPandaDynModel). Set `JAXRBD_SYSID_DATA` to a folder
holding `kuka_lwr4/` and `panda_gaz2019/` laid out as `identification_real_robot.py`
describes, or `JAXRBD_SYSID_DOWNLOAD=1` to download the recordings from their public
sources (pinned commits, checked SHA-256) into `~/.cache/jaxrbd/` on first use; the
Panda's published model is a set of tables in the paper's supplement, so its three CSV
files have to be put there by hand. Without data, the notebook shows the excitation
design on a small arm and skips the real data.

This notebook presents `examples/identification_real_robot.py` step by step.
"""),
    code(SETUP.format(script="identification_real_robot")),
    code('''
import identification_real_robot as ex  # the example script (it enables float64)

import jaxrbd
from jaxrbd import identification as ident

# A data folder, or the cached download (fetched on first use with JAXRBD_SYSID_DOWNLOAD=1)
DATA = os.environ.get("JAXRBD_SYSID_DATA")
DOWNLOAD = os.environ.get("JAXRBD_SYSID_DOWNLOAD", "0") == "1" and not QUICK


def folder(robot):
    try:
        return ex.data_folder(robot, pathlib.Path(DATA) / robot if DATA else None,
                              download=DOWNLOAD)
    except (FileNotFoundError, ConnectionError) as e:
        print(f"{robot}: {e}")
        return None


KUKA, PANDA = folder("kuka_lwr4"), folder("panda_gaz2019")
HAVE_KUKA = KUKA is not None
HAVE_PANDA = PANDA is not None and all((PANDA / n).exists() for n in ex.PANDA_MODEL_FILES)
print(f"KUKA data: {HAVE_KUKA}, Panda data: {HAVE_PANDA}")
'''),
    md(r"""
## Exciting trajectories

A new experiment starts with a trajectory that excites every base parameter. Finite
Fourier series per joint (Swevers et al. 1997) are periodic, smooth and band-limited;
`optimize_excitation` tunes their coefficients by gradient for the conditioning of the
base regressor under joint limits. Here on a two-link arm, so that it runs without data.
"""),
    code('''
import equinox as eqx
import jax.numpy as jnp

arm = jaxrbd.models.chain(2)
arm = eqx.tree_at(lambda m: (m.q_lower, m.q_upper), arm,  # excitation needs joint limits
                  (jnp.full(2, -2.5), jnp.full(2, 2.5)))
fm = ident.FrictionModel(armature=False, coulomb=False, offset=False)
base = ident.base_parameters(arm, fm, n_samples=60)
res = ident.optimize_excitation(arm, base, harmonics=3, n_samples=40,
                                steps=20 if QUICK else 200, learning_rate=0.03,
                                qd_max=2.0, qdd_max=8.0)
print(f"condition number {res.initial_condition:.1f} -> {res.condition:.1f}, "
      f"within limits: {res.feasible}")
t = np.linspace(0.0, 10.0, 400)
q, qd, qdd = ident.fourier_trajectory(res.a, res.b, res.q0, res.wf, t)
fig, ax = plt.subplots(figsize=(7, 2.5))
ax.plot(t, np.asarray(q))
ax.set_xlabel("t [s]")
ax.set_ylabel("q [rad]")
ax.set_title("optimised excitation")
plt.show()
'''),
    md(r"""
## KUKA LWR4+: fit on run 1, predict run 2

The dissipative consistent fit's prior weight is chosen on a split of run 1 by excitation
(fitted on the calmer 70 % of the samples, scored on the fastest 30 %; one-standard-error
rule), then the fit on all of run 1 predicts run 2. The relative error is
$\|\tau - \hat\tau\| / \|\tau\|$ and the NRMS the RMS over twice the effort limit.
"""),
    code('''
if HAVE_KUKA:
    k = ex.kuka(KUKA)
    for name, rep in k["reports"].items():
        print(f"{name:<32} relative {100 * rep.relative:5.2f} %  NRMS {100 * rep.nrms:.3f} %")
    t2, tau2, pred2 = k["prediction_run2"]
    ident.plot_torques(t2 - t2[0], tau2, pred2, list(k["model"].joint_names),
                       title="KUKA LWR4+ run 2: consistent fit on run 1")
    plt.show()
else:
    print("skipped: set JAXRBD_SYSID_DATA to a folder with kuka_lwr4/")
'''),
    md(r"""
## Franka Panda: the published model, then a fit on the first 14 s

The published model (modified DH parameters, inertias and the sigmoid friction of Gaz
et al. 2019) is built with `jaxrbd.dh_model`; then least squares and the consistent fit
on the first 14 s predict the rest.
"""),
    code('''
if HAVE_PANDA:
    p = ex.panda(PANDA)
    for name, rep in p["reports"].items():
        print(f"{name:<40} relative {100 * rep.relative:5.2f} %  RMS {np.round(rep.rms, 3)}")
else:
    print("skipped: set JAXRBD_SYSID_DATA to a folder with panda_gaz2019/")
'''),
]


NOTEBOOKS = {
    "elastic_arm_identification": ELASTIC,
    "inertial_identification": INERTIAL,
    "trajectory_optimization": TRAJOPT,
    "batched_rollouts": BATCHED,
    "human_motion_estimation": HUMAN,
    "legged_rollouts": LEGGED,
    "identification_real_robot": REAL_ROBOT,
}


def build(cells) -> nbformat.NotebookNode:
    """A notebook with the given cells, outputs stripped, for the ``python3`` kernel."""
    nb = v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for i, (kind, source) in enumerate(cells):
        source = textwrap.dedent(source).strip("\n")
        cell = v4.new_markdown_cell(source) if kind == "markdown" else v4.new_code_cell(source)
        cell.id = f"cell-{i:02d}"  # stable ids: regenerating gives identical files
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def available() -> dict[str, list]:
    """The notebooks whose example script exists."""
    return {name: cells for name, cells in NOTEBOOKS.items()
            if (HERE / f"{name}.py").exists()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="(re)write the notebooks; default: only check they are current")
    args = parser.parse_args(argv)
    stale = []
    for name, cells in available().items():
        path = HERE / f"{name}.ipynb"
        text = nbformat.writes(build(cells)) + "\n"
        if args.write:
            path.write_text(text)
            print(f"wrote {path.relative_to(HERE.parent)}")
        elif not path.exists() or path.read_text() != text:
            stale.append(path.name)
        else:
            print(f"up to date: {path.relative_to(HERE.parent)}")
    if stale:
        print("out of date (run python examples/make_notebooks.py --write):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
