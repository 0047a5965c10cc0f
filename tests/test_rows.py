"""Loop-free row placement (`jaxrbd._core.rows`) and in-place tree scans (`jaxrbd._core.schedule.take`).

Two XLA:CPU behaviours cost batched programs dearly and are checked here on the
compiled HLO, since timings belong in `benchmarks/` (marked ``perf``: ``pytest -m perf``
runs only these checks):

* a scatter becomes a while loop with one iteration per index (the mass matrix of a
  20-body chain had two of 190), so placements on batches are gathers;
* a loop-carried buffer whose rows are re-read by a per-step output is copied whole
  every step (O(n^2) articulated-body passes on chains), so those rows are read once.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose

import jaxrbd
from jaxrbd._core.rows import MAX_RUNS, place_rows, sum_rows, take_rows

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("batch", [1, 5])
@pytest.mark.parametrize("base_rows", [None, 1, 9])
def test_place_rows_matches_numpy(batch, base_rows):
    n = 9
    parts_np = [
        (np.array([4, -1, 0]), RNG.standard_normal((3, 2, batch))),
        (np.array([7, 2]), RNG.standard_normal((2, 2, 1))),  # broadcasts against batch
    ]
    base = None if base_rows is None else RNG.standard_normal((base_rows, 2, batch))
    want = np.zeros((n, 2, batch)) if base is None else np.broadcast_to(base, (n, 2, batch)).copy()
    for idx, v in parts_np:
        keep = idx >= 0
        want[idx[keep]] = np.broadcast_to(v, v.shape[:2] + (batch,))[keep]
    vals = [jnp.asarray(v) for _, v in parts_np]
    b = None if base is None else jnp.asarray(base)
    for scatter in (None, True, False):

        def f(vals, b, scatter=scatter):
            return place_rows(n, [(i, v) for (i, _), v in zip(parts_np, vals)], b, scatter=scatter)

        got = jax.jit(f)(vals, b)
        assert got.shape == (n, 2, batch)
        assert_allclose(got, want, rtol=0, atol=0, name=f"scatter={scatter}")


@pytest.mark.parametrize("batch", [1, 4])
def test_sum_rows_matches_numpy(batch):
    n = 6
    idx = np.array([0, 3, 3, -1, 5, 3, 0])
    vals = RNG.standard_normal((7, 3, batch))
    want = np.zeros((n, 3, batch))
    np.add.at(want, idx[idx >= 0], vals[idx >= 0])
    for scatter in (None, True, False):
        got = jax.jit(lambda v, s=scatter: sum_rows(n, idx, v, scatter=s))(jnp.asarray(vals))
        assert_allclose(got, want, rtol=1e-15, atol=1e-15, name=f"scatter={scatter}")
    # nothing to add: zeros
    assert_allclose(sum_rows(n, np.array([-1]), jnp.ones((1, 3, batch))), np.zeros((n, 3, batch)))


def test_place_and_sum_rows_differentiate():
    idx = np.array([2, 0])
    v = jnp.asarray(RNG.standard_normal((2, 3, 4)))
    g = jax.grad(lambda v: jnp.sum(place_rows(4, [(idx, v)]) ** 2))(v)
    assert_allclose(g, 2 * v, rtol=1e-15)
    g = jax.grad(lambda v: jnp.sum(sum_rows(3, np.array([1, 1]), v) ** 2))(v)
    assert_allclose(g, 2 * jnp.broadcast_to(v.sum(0), v.shape), rtol=1e-14)


def test_bad_rows_raise():
    v = jnp.ones((2, 3, 4))
    with pytest.raises(ValueError, match="placed twice"):
        place_rows(5, [(np.array([1, 1]), v)])
    with pytest.raises(ValueError, match="placed twice"):
        place_rows(5, [(np.array([1, 2]), v), (np.array([2, 3]), v)])
    with pytest.raises(ValueError, match="3 indices for 2 rows"):
        place_rows(5, [(np.array([1, 2, 3]), v)])
    with pytest.raises(ValueError, match="base has 2 rows"):
        place_rows(5, [(np.array([1, 2]), v)], jnp.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="1 indices for 2 rows"):
        sum_rows(5, np.array([1]), v)


def test_take_rows_matches_numpy_and_slices_runs():
    x = jnp.asarray(RNG.standard_normal((40, 3)))
    few = np.r_[7:39, 3:7, 0:3]  # a floating base's rows after the joints: three runs
    many = np.arange(0, 40, 2)  # twenty runs: gathered
    for idx in (few, many, np.array([5]), np.arange(40)):
        assert_allclose(take_rows(x, idx), np.asarray(x)[idx], rtol=0, name=str(idx))
    assert take_rows(x, np.zeros(0, np.int64)).shape == (0, 3)
    jaxpr = str(jax.make_jaxpr(lambda x: take_rows(x, few))(x))
    assert "gather" not in jaxpr and "slice" in jaxpr
    assert len(many) > MAX_RUNS and "gather" in str(jax.make_jaxpr(lambda x: take_rows(x, many))(x))
    # the transpose of slices is pads and adds, not a scatter
    g = jax.make_jaxpr(jax.grad(lambda x: jnp.sum(take_rows(x, few) ** 2)))(x)
    assert "scatter" not in str(g)


@pytest.mark.perf
def test_rollout_gradient_has_no_scatter_loops_outside_the_dynamics():
    """`integrate` and `tangent_of_coordinates` (every step of a rollout's gradient) read
    and assemble rows by slices, so a rollout's gradient holds no scatter loop outside the
    forward dynamics (whose one-state code keeps its cheap scatters, see above)."""
    model = jaxrbd.load_urdf("tests/data/talos.urdf", floating_base=True)
    q, v = jaxrbd.neutral_configuration(model), 0.1 * jnp.ones(model.nv)

    def loss(q, v, tau):
        qs, vs = jaxrbd.rollout(model, q, v, tau, 0.01, "rk4")
        return jnp.sum(jnp.sin(qs[-1])) + jnp.sum(vs[-1] ** 2)

    # jaxrbd.jit: with XLA:CPU's loop emitters the gathers' transposes became scatter
    # loops (13 in this program before the slices)
    grad = jaxrbd.jit(jax.grad(loss, argnums=(0, 1, 2)))
    hlo = grad.lower(q, v, jnp.zeros((2, model.nv))).compile().as_text()
    bad = [loop[3] for loop in _while_loops(hlo)
           if re.search(r"scatter(-add)?$", loop[3]) and "forward_dynamics" not in loop[3]]
    assert not bad, f"scatter loops {bad}"


# ------------------------------------------------------------------ compiled programs

_PROGRAMS = {
    "forward_dynamics": lambda m, q, v: jax.vmap(jaxrbd.forward_dynamics, (None, 0, 0, 0))(m, q, v, v),
    "forward_dynamics_f_ext": lambda m, q, v: jax.vmap(jaxrbd.forward_dynamics, (None, 0, 0, 0, 0))(
        m, q, v, v, jnp.ones(q.shape[:1] + (m.nbodies, 6))),
    "inverse_dynamics": lambda m, q, v: jax.vmap(jaxrbd.inverse_dynamics, (None, 0, 0, 0))(m, q, v, v),
    "mass_matrix": lambda m, q, v: jax.vmap(jaxrbd.mass_matrix, (None, 0))(m, q),
    "minv_times": lambda m, q, v: jaxrbd.minv_times(m, q[0], v.T),  # 64 right-hand sides
    "hybrid_dynamics": lambda m, q, v: jax.vmap(
        lambda q, v: jaxrbd.hybrid_dynamics(m, q, v, v, v, prescribed=(0, 5)))(q, v),
    "forward_dynamics_derivatives": lambda m, q, v: jax.vmap(
        jaxrbd.forward_dynamics_derivatives, (None, 0, 0, 0, 0))(
        m, q, v, v, jnp.ones(q.shape[:1] + (m.nbodies, 6))),
}


@pytest.fixture(scope="module")
def chain_hlo():
    """Optimised HLO of each batched program on a 20-body chain, 64 states (two blocks)."""
    m = jaxrbd.models.chain(20)
    q = jnp.zeros((64, m.nq))
    v = jnp.zeros((64, m.nv))
    opts = jaxrbd.compiler_options()
    return {
        name: jax.jit(f, compiler_options=opts).lower(m, q, v).compile().as_text()
        for name, f in _PROGRAMS.items()
    }


def _computations(hlo):
    """``{name: body text}`` of every computation of an HLO module."""
    comps, name = {}, None
    for line in hlo.splitlines():
        if line and not line.startswith(" ") and line.rstrip().endswith("{"):
            name = line.split()[1] if line.startswith("ENTRY") else line.split()[0]
            comps[name] = []
        elif name is not None:
            comps[name].append(line)
    return {k: "\n".join(v) for k, v in comps.items()}


def _while_loops(hlo):
    """``(trip count, body computation, loop state shape, op_name)`` of every while loop."""
    out = []
    for line in hlo.splitlines():
        if " while(" not in line:
            continue
        trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
        body = re.search(r"body=(%[\w.\-]+)", line)
        op = re.search(r'op_name="([^"]*)"', line)
        state = line.split("=", 1)[1].split(" while(")[0]
        out.append((int(trips.group(1)) if trips else -1, body.group(1) if body else "",
                    state, op.group(1) if op else ""))
    return out


_BATCHED = re.compile(r"f64\[[\d,]*,(32|64)\]")  # an array with a block's states trailing


def _scatter_loops(loops, batched):
    """``(trip count, op_name)`` of the scatter loops whose state matches ``batched``."""
    return [(n, op) for n, _, state, op in loops
            if re.search(r"scatter(-add)?$", op) and batched.search(state)]


@pytest.mark.perf
@pytest.mark.parametrize("name", list(_PROGRAMS))
def test_no_scatter_loops_over_batched_arrays(chain_hlo, name):
    """A scatter over per-node or per-entry indices of a batched array would run one loop
    iteration per index in every block. (Scatters of per-model tables, without a batch,
    stay: see `jaxrbd._core.rows`.)"""
    loops = _while_loops(chain_hlo[name])
    assert any(n >= 20 for n, *_ in loops), "expected the tree scans"
    bad = _scatter_loops(loops, _BATCHED)
    assert not bad, f"{name}: scatter loops over batched arrays {bad}"


@pytest.mark.perf
@pytest.mark.parametrize("name", list(_PROGRAMS))
def test_tree_scans_update_their_buffers_in_place(chain_hlo, name):
    """No step of a tree scan (a loop of ~20 steps on a 20-body chain) copies a per-node
    buffer (>= 21 rows, a block's 32 states or the 64 right-hand sides trailing): each
    step would cost O(nbodies)."""
    comps = _computations(chain_hlo[name])
    scans = [body for n, body, _, _ in _while_loops(chain_hlo[name]) if n >= 10]
    assert scans, "expected the tree scans"
    copies = []
    for body in scans:
        for m in re.finditer(r"= f64\[(\d+)((?:,\d+)*)\]\{[^}]*\} copy\(", comps[body]):
            dims = [int(m.group(1))] + [int(d) for d in m.group(2).split(",") if d]
            if dims[0] >= 21 and dims[-1] in (32, 64) and len(dims) >= 3:
                copies.append((body, tuple(dims)))
    assert not copies, f"{name}: whole-buffer copies in scan steps {copies}"


# The rarer paths: Euler joints (their own-angle terms in the derivatives), fixed-merged
# bodies (their frames in the parameter derivatives) and the regressor's support pairs.
_V4 = (None, 0, 0, 0)
_MIXED_PROGRAMS = {
    "forward_dynamics_derivatives": lambda m, q, v: jax.vmap(
        jaxrbd.forward_dynamics_derivatives, _V4)(m, q, v, v),
    "inverse_dynamics_derivatives": lambda m, q, v: jax.vmap(
        jaxrbd.inverse_dynamics_derivatives, _V4)(m, q, v, v),
    "forward_dynamics_parameter_derivatives": lambda m, q, v: jax.vmap(
        jaxrbd.forward_dynamics_parameter_derivatives, _V4)(m, q, v, v),
    "inverse_dynamics_regressor": lambda m, q, v: jax.vmap(
        jaxrbd.inverse_dynamics_regressor, _V4)(m, q, v, v),
}


@pytest.mark.perf
def test_no_scatter_loops_on_the_rarer_paths(zoo):
    """The ``mixed`` tree (free base, ball, fixed body, Euler joint), 64 states: no scatter
    loop over an array with the states in a block's trailing axis or, in the derivatives'
    batch-first matrix phase, the leading one."""
    m = zoo["mixed"]
    assert "euler_zyx" in m.joint_kind and any(m.body_fixed)
    q = jnp.zeros((64, m.nq)).at[:, 3].set(1.0)
    v = jnp.zeros((64, m.nv))
    batched = re.compile(r"f64\[[\d,]*,(32|64)\]|f64\[64,")
    opts = jaxrbd.compiler_options()
    for name, f in _MIXED_PROGRAMS.items():
        hlo = jax.jit(f, compiler_options=opts).lower(m, q, v).compile().as_text()
        bad = _scatter_loops(_while_loops(hlo), batched)
        assert not bad, f"{name}: scatter loops over batched arrays {bad}"
