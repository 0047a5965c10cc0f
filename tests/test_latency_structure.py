"""Guards on the structure of single-state programs: the kernels one compiled call runs.

On one state a compiled call's time is set by the number of kernels XLA:CPU executes
(a fixed cost each), not by its arithmetic: the ``"dense"`` schedule
(`jaxrbd._core.dense`, forward dynamics by `jaxrbd._dense_dynamics`) brought a talos
call from thousands of kernels to about a hundred. These tests count them in the
compiled HLO (`benchmarks/_common.count_kernels`: while bodies times their trip counts)
and bound them, so that a change which brings back a per-node loop (a scan over the
tree, a scatter on one state, a gather whose transpose is a scatter under `jax.grad`)
fails here instead of in a benchmark. Timings are in ``benchmarks/bench_latency.py``.

The Python side of a call is guarded too: jit compares a `Model` argument's static
structure with its cached programs' on every call, so that structure is one interned
value (`jaxrbd._model._Structure`) and the comparison an identity test.
"""

from __future__ import annotations

import pickle
import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrbd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from _common import count_kernels  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"

#: Upper bounds on the kernels of one talos call, the model a jit argument (measured
#: 118, 98, 79 and 176 at the commit that added them, and 714 for ``value_and_grad``
#: with respect to the model too; before the dense schedule 3371, 2831, 2537, 9609 and
#: 27959).
BOUNDS = {
    "forward_dynamics": 160,
    "inverse_dynamics": 130,
    "mass_matrix": 110,
    "forward_dynamics_derivatives": 230,
    "value_and_grad": 300,
}


def _loss(m, q, qd, tau):
    return jnp.sum(jaxrbd.forward_dynamics(m, q, qd, tau) ** 2)


CALLS = {
    "forward_dynamics": lambda m, q, qd, x: jaxrbd.forward_dynamics(m, q, qd, x),
    "inverse_dynamics": lambda m, q, qd, x: jaxrbd.inverse_dynamics(m, q, qd, x),
    "mass_matrix": lambda m, q, qd, x: jaxrbd.mass_matrix(m, q),
    "forward_dynamics_derivatives":
        lambda m, q, qd, x: jaxrbd.forward_dynamics_derivatives(m, q, qd, x),
    # the state only: with the model too the compile takes tens of seconds (its bound is
    # checked by benchmarks/bench_latency.py's kernel column)
    "value_and_grad": jax.value_and_grad(_loss, argnums=(1, 2, 3)),
}


@pytest.fixture(scope="module")
def talos():
    model = jaxrbd.load_urdf(DATA / "talos.urdf", floating_base=True).with_traversal("dense")
    rng = np.random.default_rng(0)
    q = jaxrbd.neutral_configuration(model) + 0.1 * rng.standard_normal(model.nq)
    qd, x = (jnp.asarray(rng.standard_normal(model.nv)) for _ in range(2))
    return model, q, qd, x


def _hlo(call, talos):
    return jaxrbd.jit(call).lower(*talos).compile().as_text()


@pytest.mark.perf
@pytest.mark.parametrize("name", list(BOUNDS))
def test_single_state_kernels_are_bounded(name, talos):
    text = _hlo(CALLS[name], talos)
    n = count_kernels(text)
    assert n <= BOUNDS[name], f"{name}: one talos call runs {n} kernels (bound {BOUNDS[name]})"
    # no loop whose trip count follows the bodies (a scan over the tree, a scatter loop):
    # the only loops left are the pointer-doubling steps, log2 of the tree's depth
    trips = [int(t) for t in re.findall(r'"known_trip_count":\{"n":"(\d+)"\}', text)]
    assert max(trips, default=0) <= 8, f"{name}: loops of {sorted(trips)} iterations"


def test_count_kernels_counts_loop_bodies():
    """A scan of 10 steps whose body is a kernel or two counts about 10x those kernels."""
    def f(x):
        return jax.lax.scan(lambda c, _: (jnp.sin(c) * 2.0 + c, None), x, None, length=10)[0]

    one = count_kernels(jax.jit(lambda x: jnp.sin(x) * 2.0 + x).lower(jnp.ones(3)).compile()
                        .as_text())
    ten = count_kernels(jax.jit(f).lower(jnp.ones(3)).compile().as_text())
    assert one >= 1
    assert 10 <= ten <= 10 * (one + 4) + 4


def test_model_structure_is_one_value_shared_across_loads():
    """Two separate loads of one robot share one structure object (equal, one hash) and
    one compiled program; another traversal is another structure and another program."""
    a = jaxrbd.load_urdf(DATA / "talos.urdf", floating_base=True)
    b = jaxrbd.load_urdf(DATA / "talos.urdf", floating_base=True)
    assert a.inertia is not b.inertia
    assert a._structure is b._structure
    assert a._structure == b._structure and hash(a._structure) == hash(b._structure)
    ta, tb = jax.tree_util.tree_structure(a), jax.tree_util.tree_structure(b)
    assert ta == tb and hash(ta) == hash(tb)
    # the static structure is the pytree's one static value; the leaves are the arrays
    assert ta.num_leaves == 14 and ta.num_nodes == 15
    assert jax.tree_util.tree_unflatten(ta, jax.tree_util.tree_leaves(b))._structure is (
        a._structure)
    assert pickle.loads(pickle.dumps(a))._structure is a._structure

    traces = []

    @jax.jit
    def f(model, q):
        traces.append(model.traversal)
        return q + model.inertia[1, 0]

    q = jnp.zeros(a.nq)
    np.testing.assert_array_equal(f(a, q), f(b, q))
    assert traces == ["auto"] and f._cache_size() == 1
    c = b.with_traversal("dense")
    assert c._structure is not a._structure and c._structure != a._structure
    assert (c.body_names, c.node_parent, c.nq, c.nv) == (a.body_names, a.node_parent, 39, 38)
    f(c, q)
    assert traces == ["auto", "dense"] and f._cache_size() == 2
