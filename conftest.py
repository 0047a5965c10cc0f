"""Root pytest configuration: the namespace of the docstring examples in `jaxrbd/`.

Every `Example:` in the library's docstrings runs as a doctest against a tiny model
(RBDL's triple pendulum) with `jaxrbd`, `jax`, `jnp` and `np` already imported.
"""

import os
import shutil
import tempfile

# One persistent XLA compilation cache per test run, shared by the xdist workers and the
# subprocesses the tests start (examples, notebooks, multi-process runs): they compile
# many identical programs (the same function on the same model structure in several
# files, an example and its notebook), and a compile found in the cache is loaded from
# disk instead. Set before JAX is imported, which reads these variables then; the
# controller creates the folder, the workers inherit it. A cache folder the user names
# is kept; JAXRBD_TEST_XLA_CACHE=0 turns the cache off.
_OWN_CACHE = None
if os.environ.get("JAXRBD_TEST_XLA_CACHE", "1") != "0" and "JAX_COMPILATION_CACHE_DIR" not in (
    os.environ
):
    _OWN_CACHE = tempfile.mkdtemp(prefix="jaxrbd-test-xla-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _OWN_CACHE
    # small programs (each op of an un-jitted doctest is one) compile faster than a
    # cache entry is written and read
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")

import jax  # noqa: E402 (after the cache variables above)
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
if os.environ.get("JAX_COMPILATION_CACHE_DIR"):  # in case a plugin imported JAX first
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    jax.config.update(
        "jax_persistent_cache_min_compile_time_secs",
        float(os.environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")),
    )

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


def pytest_unconfigure(config):
    # the process that made the cache folder (the xdist controller, or a plain run) removes it
    if _OWN_CACHE is not None and not hasattr(config, "workerinput"):
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)
