"""Root pytest configuration: the namespace of the docstring examples in `jaxrbd/`.

Every `Example:` in the library's docstrings runs as a doctest against a tiny model
(RBDL's triple pendulum) with `jaxrbd`, `jax`, `jnp` and `np` already imported.
"""

import os

import jax
import pytest

jax.config.update("jax_enable_x64", True)

#: Every compiled XLA:CPU executable holds a few memory mappings (~3 for a small one,
#: more for large programs), and Linux allows 65 530 per process (vm.max_map_count).
#: A test worker compiles tens of thousands of executables (each op of an un-jitted
#: doctest is one): past the limit, LLVM's JIT cannot map code and the worker dies with
#: SIGSEGV inside a compile (seen twice in CI, ~97 % through the run). Between test
#: modules, past this many mappings, the compilation caches are dropped (the shared
#: jitted functions then recompile once).
MAX_MAPPINGS = int(os.environ.get("JAXRBD_TEST_MAX_MAPPINGS", "30000"))


def _mappings() -> int:
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:  # not Linux
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_code():
    yield
    if _mappings() > MAX_MAPPINGS:
        jax.clear_caches()


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    import jax.numpy as jnp
    import numpy as np

    import jaxrbd

    model = jaxrbd.models.triple_pendulum()
    doctest_namespace.update(
        jax=jax,
        jnp=jnp,
        np=np,
        jaxrbd=jaxrbd,
        model=model,
        q=jaxrbd.random_configuration(model, jax.random.key(0)),
        q0=jaxrbd.random_configuration(model, jax.random.key(1)),
        q1=jaxrbd.random_configuration(model, jax.random.key(2)),
        qd=jnp.linspace(-1.0, 1.0, model.nv),
        tau=jnp.ones(model.nv),
    )
