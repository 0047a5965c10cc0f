"""float32: talos (38 DoF, cond(H) up to 5e5) in single precision stays close to float64.

Errors are ``max |x32 - x64| / max(1, max |x64|)`` over the 20 reference samples. The
bounds sit 5-10x above what was measured (XLA:CPU, jax 0.10); a regression in the
numerical conditioning of an algorithm (e.g. an ill-conditioned reformulation) shows up
here long before it does in float64.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import relative_error

# measured max over the samples: FD 1.7e-7, ID 2.0e-7, H 3.0e-8
BOUNDS = {"forward_dynamics": 1e-6, "inverse_dynamics": 1e-6, "mass_matrix": 3e-7}


@pytest.fixture(scope="module")
def talos(robots):
    r = robots["talos"]
    return r, r.model.astype(jnp.float32)


def _f32(x):
    return jnp.asarray(x, jnp.float32)


def test_astype_casts_every_leaf(talos):
    r, m32 = talos
    leaves = jax.tree_util.tree_leaves(m32)
    assert leaves and all(x.dtype == jnp.float32 for x in leaves)
    assert m32.dtype == jnp.float32 and r.model.dtype == jnp.float64


@pytest.mark.parametrize("name", list(BOUNDS))
def test_float32_close_to_float64(jitted, talos, name):
    r, m32 = talos
    f = jitted[name]
    worst = 0.0
    for s in range(r.nsamples):
        q = r.q(s)
        if name == "forward_dynamics":
            args = (r.v("v", s), r.v("tau", s))
        elif name == "inverse_dynamics":
            args = (r.v("v", s), r.v("a", s))
        else:
            args = ()
        out32 = f(m32, _f32(q), *(_f32(a) for a in args))
        assert out32.dtype == jnp.float32, f"{name} returned {out32.dtype} for float32 inputs"
        out64 = f(r.model, q, *args)
        assert np.all(np.isfinite(np.asarray(out32))), f"{name}: non-finite float32 result"
        worst = max(worst, relative_error(out32, out64))
    assert worst <= BOUNDS[name], f"{name}: float32 relative error {worst:.2e} > {BOUNDS[name]:.0e}"
