"""Test configuration: float64, strict rank promotion, shared models and jitted functions.

Compilation dominates the run time of this suite (one XLA compile per function and model
structure), so every test gets its jitted functions from the session-wide `jitted`
dictionary (`helpers.JIT`) and its models from session fixtures: each (function,
structure) pair compiles once per worker.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import sys

# Compilation, not execution, dominates this suite: LLVM's -O0 cuts XLA:CPU compile
# times by ~30% and leaves the HLO optimisations (and float semantics) alone. Must be set
# before the backend starts; a user's own XLA_FLAGS are kept, and
# JAXRBD_TEST_FULL_OPT=1 restores the default optimisation level.
if not os.environ.get("JAXRBD_TEST_FULL_OPT") and "xla_backend_optimization_level" not in (
    os.environ.get("XLA_FLAGS", "")
):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
        " --xla_llvm_disable_expensive_passes=true"
    ).strip()
# XLA:CPU's MLIR fusion emitters (the default since 2025) compile the element-wise
# fusions of these programs ~2.5x slower than its classic LLVM IR emitters: with the
# classic ones the forward-dynamics JVP of the `all_kinds` tree compiles in 7.5 s of CPU
# instead of 18.3 s (benchmarks/LOG.md, 2026-11-27 suite entry). Both are exact IEEE
# float64 code; results agree to rounding (~1e-13 relative). Also off with
# JAXRBD_TEST_FULL_OPT=1.
if not os.environ.get("JAXRBD_TEST_FULL_OPT") and "xla_cpu_use_fusion_emitters" not in (
    os.environ.get("XLA_FLAGS", "")
):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_fusion_emitters=false"
    ).strip()
# One LLVM codegen module per compile: the two xdist workers already use both cores, and
# each split module of an executable holds memory mappings of its own (see MAX_MAPPINGS
# in the root conftest.py: running out of mappings crashed workers inside a compile).
if "xla_cpu_parallel_codegen_split_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_cpu_parallel_codegen_split_count=1"
    ).strip()

import jax

jax.config.update("jax_enable_x64", True)
# Implicit rank promotion hides shape bugs; the library must not rely on it. The JAX
# environment variable still wins, to bisect a failure (JAX_NUMPY_RANK_PROMOTION=allow).
jax.config.update("jax_numpy_rank_promotion", os.environ.get("JAX_NUMPY_RANK_PROMOTION", "raise"))

import numpy as np
import pytest

import jaxrbd

# ``helpers`` lives next to this file; make it importable when this conftest is loaded
# as a plugin (``pytest jaxrbd -p tests.conftest`` for the doctests).
if str(pathlib.Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
import helpers

DATA = pathlib.Path(__file__).parent / "data"

REFERENCE_ROBOTS = helpers.REFERENCE_ROBOTS


@dataclasses.dataclass(frozen=True)
class Robot:
    """A reference robot: our model, the stored Pinocchio data and the index maps.

    ``q_map``/``v_map`` take reference arrays (Pinocchio's joint order, jaxrbd's per-joint
    layout) to ours: ``q_ours = q_ref[..., q_map]``, ``tau_ours = tau_ref[..., v_map]``.
    """

    name: str
    model: jaxrbd.Model
    ref: dict
    q_map: np.ndarray
    v_map: np.ndarray

    @property
    def nsamples(self) -> int:
        return int(self.ref["q"].shape[0])

    def q(self, s):
        return self.ref["q"][s][self.q_map]

    def v(self, key, s):
        """A per-sample ``(nv,)`` reference vector (``v``, ``a``, ``tau``, ``rnea``...) in our order."""
        return self.ref[key][s][self.v_map]

    def matrix(self, key, s):
        return self.ref[key][s][np.ix_(self.v_map, self.v_map)]


def reference_maps(model, ref) -> tuple[np.ndarray, np.ndarray]:
    """Index maps from the reference joint order to ours, matched by joint name."""
    q_map = np.full(model.nq, -1)
    v_map = np.full(model.nv, -1)
    for name, iq, nq, iv, nv in zip(
        ref["joint_names"].tolist(),
        ref["joint_idx_q"],
        ref["joint_nq"],
        ref["joint_idx_v"],
        ref["joint_nv"],
    ):
        qs, vs = model.q_index(name), model.v_index(name)
        assert qs.stop - qs.start == nq and vs.stop - vs.start == nv, name
        q_map[qs] = np.arange(iq, iq + nq)
        v_map[vs] = np.arange(iv, iv + nv)
    assert (q_map >= 0).all() and (v_map >= 0).all(), "some joints were not mapped"
    return q_map, v_map


def load_robot(name: str, floating: bool) -> Robot:
    with np.load(DATA / f"{name}.npz", allow_pickle=False) as f:
        ref = {k: f[k] for k in f.files}
    assert bool(ref["floating_base"]) == floating
    model = jaxrbd.load_urdf(DATA / f"{name}.urdf", floating_base=floating)
    q_map, v_map = reference_maps(model, ref)
    return Robot(name, model, ref, q_map, v_map)


@pytest.fixture(scope="session")
def robots() -> dict[str, Robot]:
    """The three reference robots, loaded once per worker (lazily, by name)."""
    return _LazyRobots()


class _LazyRobots(dict):
    def __missing__(self, name):
        floating = dict(REFERENCE_ROBOTS)[name]
        self[name] = load_robot(name, floating)
        return self[name]


@pytest.fixture(scope="session")
def jitted() -> dict:
    """Jitted public functions, shared by every test (compiled once per structure)."""
    return helpers.JIT


@pytest.fixture(scope="session")
def zoo() -> dict[str, jaxrbd.Model]:
    """A few fixed models shared across test files (lazily built)."""
    return helpers.ZOO


# ----------------------------------------------------------------------------- test order

#: Tests of half a minute or more that share no module fixture or module-level jitted
#: function with the tests next to them: the docs pages (each one doctest item), the
#: notebooks and the docs build.
_LONG_SINGLES = ("docs/", "tests/test_notebooks.py::test_notebook_executes",
                 "tests/test_docs.py::test_mkdocs_build_strict")


def pytest_collection_modifyitems(config, items):
    """The long single tests first, everything else in collection order.

    xdist's ``load`` scheduler hands out the collection front to back, in chunks that
    shrink to two tests at the end; a long test near the end leaves the other worker idle
    for most of its run. Moved to the front, these tests overlap with the rest and the
    run ends on the library's short doctests. The tests of one file stay together (their
    module fixtures and jitted functions are built once per worker).
    """
    items[:] = sorted(items, key=lambda item: not item.nodeid.startswith(_LONG_SINGLES))


# ----------------------------------------------------------------------------- doctests


@pytest.fixture(autouse=True)
def add_doctest_namespace(doctest_namespace):
    """Names the docstring examples of ``jaxrbd`` rely on (``--doctest-modules``)."""
    doctest_namespace.update(helpers.doctest_globals())
