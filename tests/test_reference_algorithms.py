"""The fast algorithms against the reference algorithms of `jaxrbd.reference`.

`jaxrbd.reference` writes RNEA, CRBA and ABA as in Featherstone (2008), one body at a
time with dense 6x6 matrices and multi-DoF joints as ``6 x k`` subspaces: an oracle that
shares nothing with the fast machinery (nodes, schedules, batch-trailing kernels). Here
hypothesis draws random trees (every joint kind, fixed bodies, branches, floating
bases, armature), and `inverse_dynamics`, `mass_matrix`, `forward_dynamics` and
`bias_forces` must match the reference to ~1e-10 for one state and for a vmapped batch.

The reference runs eagerly (a few tenths of a second per call once the small
operations are compiled); the fast side is one jit per tree structure.
"""

from __future__ import annotations

import equinox as eqx
import helpers
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxrbd
from jaxrbd import ModelBuilder, joints, reference, spatial

#: Every joint kind of the contract, by constructor; "custom" has general (skewed)
#: columns whose S depends on q, "custom_parallel" has w || v or w = 0 (where the RBDL
#: semantics of `joints.custom` and the exact screws of `joints.screw` agree).
KINDS = (
    "revolute",
    "prismatic",
    "helical",
    "fixed",
    "spherical",
    "free",
    "euler_zyx",
    "euler_xyz",
    "euler_yxz",
    "euler_zxy",
    "translation_xyz",
    "custom",
    "custom_parallel",
    "screw",
    "planar",
)


def _columns(rng, k, skewed):
    """``k`` random columns ``[w; v]``; ``skewed``: ``v`` not along ``w``."""
    cols = np.zeros((k, 6))
    for j in range(k):
        w = rng.normal(size=3)
        w /= np.linalg.norm(w)
        kind = rng.integers(3) if not skewed else 0
        if kind == 0:  # rotation, translation anywhere (skewed) or along w
            cols[j, :3] = w
            cols[j, 3:] = rng.uniform(-0.5, 0.5, 3) if skewed else rng.uniform(-0.3, 0.3) * w
        elif kind == 1:  # pure translation
            cols[j, 3:] = w
        else:  # pure rotation
            cols[j, :3] = w
    return cols


def make_joint(kind, rng):
    if kind in ("revolute", "prismatic"):
        return getattr(joints, kind)(rng.normal(size=3))
    if kind == "helical":
        return joints.helical(rng.normal(size=3), pitch=rng.uniform(-0.2, 0.2))
    k = int(rng.integers(1, 4))
    if kind == "custom":
        return joints.custom(_columns(rng, k, skewed=True))
    if kind == "custom_parallel":
        return joints.custom(_columns(rng, k, skewed=False))
    if kind == "screw":
        return joints.screw(_columns(rng, k, skewed=True))
    return getattr(joints, kind)()


def build_tree(seed, kinds, parents, armature=True):
    """A tree with body ``i + 1`` on joint ``kinds[i]`` below body ``parents[i]``."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder(gravity=rng.uniform(-10.0, 10.0, 3))
    for i, (kind, parent) in enumerate(zip(kinds, parents)):
        b.add_body(
            f"b{i + 1}",
            parent,
            make_joint(kind, rng),
            helpers.random_body(rng),
            helpers.random_placement(rng),
        )
    model = b.build()
    if armature:
        arm = jnp.asarray(rng.uniform(0.0, 0.5, model.nv) * (rng.uniform(size=model.nv) < 0.5))
        model = eqx.tree_at(lambda m: m.armature, model, arm)
    return model


def _fast(model, q, qd, qdd, tau, f_ext):
    return (
        jaxrbd.inverse_dynamics(model, q, qd, qdd, f_ext),
        jaxrbd.mass_matrix(model, q),
        jaxrbd.forward_dynamics(model, q, qd, tau, f_ext),
    )


def _reference(model, q, qd, qdd, tau, f_ext):
    return (
        reference.inverse_dynamics(model, q, qd, qdd, f_ext),
        reference.mass_matrix(model, q),
        reference.forward_dynamics(model, q, qd, tau, f_ext),
    )


NAMES = ("inverse_dynamics", "mass_matrix", "forward_dynamics")
# One compile per tree structure (compiling dominates this file): a single state, or a
# vmapped batch of two (the batch-trailing kernels, traversed body by body on a CPU).
SINGLE = jax.jit(_fast)
BATCH = jax.jit(jax.vmap(_fast, in_axes=(None, 0, 0, 0, 0, 0)))


def _states(model, seed):
    """A random state, and a special one: joint coordinates at zero, quaternions at the
    identity but scaled by 3 (not normalised), tiny velocities."""
    key = jax.random.key(seed)
    q, qd, qdd, tau = helpers.random_state(model, key)
    f = helpers.random_f_ext(model, jax.random.fold_in(key, 1))
    q0 = 3.0 * jaxrbd.neutral_configuration(model)
    return (q, qd, qdd, tau, f), (q0, 1e-9 * qd, qdd, tau, 0.1 * f)


def _close(name, a, r):
    scale = max(1.0, float(jnp.max(jnp.abs(r))))
    helpers.assert_allclose(a, r, rtol=0.0, atol=1e-10 * scale, name=name)


def check_against_reference(model, seed, batched):
    """The fast functions (one state, or both states vmapped) against the reference."""
    states = _states(model, seed)
    if batched:
        fast = BATCH(model, *(jnp.stack(x) for x in zip(*states)))
        fast = [tuple(x[s] for x in fast) for s in range(2)]
    else:
        fast = [SINGLE(model, *states[0])]
    for s, out in enumerate(fast):
        for name, a, r in zip(NAMES, out, _reference(model, *states[s])):
            _close(f"{'vmapped ' if batched else ''}{name}, state {s}, {model.joint_label}", a, r)


@st.composite
def trees(draw):
    n = draw(st.integers(2, 3))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=n, max_size=n))
    parents = [draw(st.integers(0, i)) for i in range(n)]
    if draw(st.booleans()):  # a floating base: everything hangs below body 1
        kinds[0], parents = "free", [0] + [max(p, 1) for p in parents[1:]]
    return kinds, parents, draw(st.integers(0, 2**31 - 1)), draw(st.booleans())


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=trees())
def test_random_trees_match_reference(spec):
    kinds, parents, seed, batched = spec
    check_against_reference(build_tree(seed, kinds, parents), seed, batched)


def test_every_joint_kind_matches_reference():
    """One tree with every kind, a floating base, armature, fixed bodies in the middle of
    chains (their children's placements are relative to the moving ancestor), a fixed
    body on the world and branches; `bias_forces` too."""
    kinds = ["free", *[k for k in KINDS if k != "free"], "fixed", "revolute"]
    rng = np.random.default_rng(7)
    parents = [0] + [int(rng.integers(1, i + 1)) for i in range(1, len(kinds))]
    parents[kinds.index("fixed")] = 0  # mass on the world belongs to the world
    parents[-1] = len(kinds) - 1  # the revolute below the trailing fixed body
    model = build_tree(11, kinds, parents)
    check_against_reference(model, 11, batched=False)
    (q, qd, _, _, f), _ = _states(model, 11)
    _close("bias_forces", jax.jit(jaxrbd.bias_forces)(model, q, qd, f),
           reference.bias_forces(model, q, qd, f))


def test_floating_base_batch_matches_reference():
    """The batched kernels (vmap) on a floating base with a fixed body and a branch."""
    model = build_tree(8, ["free", "spherical", "fixed", "revolute", "custom"], [0, 1, 2, 3, 1])
    check_against_reference(model, 8, batched=True)


# ----------------------------------------------------------------------------- the reference itself


def test_reference_is_self_consistent():
    """Independent of the fast code: ``H e = ID(q, 0, e) - ID(q, 0, 0)``, ABA inverts
    RNEA, and the armature adds ``diag(armature)`` to ``H``."""
    model = build_tree(3, ["free", "custom", "euler_zxy", "fixed", "screw"], [0, 1, 2, 2, 4])
    q, qd, qdd, tau = helpers.random_state(model, jax.random.key(3))
    H = reference.mass_matrix(model, q)
    z, e = jnp.zeros(model.nv), qdd / jnp.linalg.norm(qdd)  # a random direction
    He = reference.inverse_dynamics(model, q, z, e) - reference.inverse_dynamics(model, q, z, z)
    helpers.assert_allclose(H @ e, He, atol=1e-11, name="CRBA vs RNEA")
    helpers.assert_allclose(H, H.T, atol=1e-12, name="H symmetric")
    assert np.linalg.eigvalsh(np.asarray(H)).min() > 0
    tau = reference.inverse_dynamics(model, q, qd, qdd)
    helpers.assert_allclose(reference.forward_dynamics(model, q, qd, tau), qdd, atol=1e-10,
                            name="ABA(RNEA(qdd)) = qdd")
    H0 = reference.mass_matrix(eqx.tree_at(lambda m: m.armature, model, jnp.zeros(model.nv)), q)
    helpers.assert_allclose(H - H0, jnp.diag(model.armature), atol=1e-12, name="armature")


def _config_rate(kind, q, qd):
    """``dq/dt`` of one joint for the velocity ``qd`` (quaternion kinematics for free and
    spherical joints: ``d quat/dt = quat (0, w) / 2`` with ``w`` in child coordinates)."""
    if kind not in ("free", "spherical"):
        return qd
    quat, w = (q[3:], qd[:3]) if kind == "free" else (q, qd)
    a, v = quat[0], quat[1:]
    dquat = 0.5 * jnp.concatenate([-(v @ w)[None], a * w + jnp.cross(v, w)])
    if kind == "spherical":
        return dquat
    return jnp.concatenate([spatial.quat_to_rotation(quat) @ qd[3:], dquat])


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "fixed"])
def test_jcalc_S_is_the_velocity_of_XJ(kind):
    """``d XJ/dt = -crm(vJ) XJ`` with ``vJ = S qd`` in child coordinates (the derivative
    of a Plücker transform whose target frame moves with ``vJ``): every ``S`` against its
    ``XJ``."""
    spec = make_joint(kind, np.random.default_rng(4))
    rng = np.random.default_rng(5)
    cols = jnp.asarray(spec.columns)
    q = jnp.asarray(rng.uniform(-1.0, 1.0, spec.nq))
    if kind in ("free", "spherical"):
        quat = q[-4:] / jnp.linalg.norm(q[-4:])
        q = jnp.concatenate([q[:-4], quat])
    qd = jnp.asarray(rng.uniform(-1.0, 1.0, spec.nv))
    model_kind = spec.kind
    XJ, S = reference.jcalc(model_kind, cols, q)
    dXJ = jax.jvp(lambda x: reference.jcalc(model_kind, cols, x)[0], (q,),
                  (_config_rate(model_kind, q, qd),))[1]
    helpers.assert_allclose(dXJ, -spatial.crm(S @ qd) @ XJ, atol=1e-12, name=f"{kind}: dXJ/dt")


def test_screw_is_the_exponential_and_custom_follows_rbdl():
    col = jnp.array([0.0, 0.0, 1.0, 1.0, 0.0, 0.0])  # RBDL's roller
    q = jnp.array([1.0])
    # screw: XJ = exp(-crm(s) q) (the frame moves with the constant twist s)
    XJ, S = reference.jcalc("screw", col[None], q)
    expm = jax.scipy.linalg.expm(-spatial.crm(col) * q[0])
    helpers.assert_allclose(XJ, expm, atol=1e-12, name="screw = exp")
    helpers.assert_allclose(S[:, 0], col, atol=0.0, name="screw S constant")
    # custom (RBDL): rotated by q about z, child origin at (1, 0, 0) (CONVENTIONS.md)
    XJ, S = reference.jcalc("custom", col[None], q)
    E, r = spatial.from_matrix(XJ)
    helpers.assert_allclose(r, jnp.array([1.0, 0.0, 0.0]), atol=1e-14, name="roller origin")
    helpers.assert_allclose(E, spatial.rz(1.0), atol=1e-14, name="roller rotation")
    helpers.assert_allclose(S[:, 0], jnp.concatenate([col[:3], spatial.rz(1.0) @ col[3:]]),
                            atol=1e-14, name="roller S")


def test_reference_works_under_jit_and_grad():
    model = build_tree(2, ["revolute", "spherical"], [0, 1], armature=False)
    q, qd, qdd, _ = helpers.random_state(model, jax.random.key(2))
    tau = jax.jit(reference.inverse_dynamics)(model, q, qd, qdd)
    helpers.assert_allclose(tau, reference.inverse_dynamics(model, q, qd, qdd), atol=1e-12,
                            name="jit")
    g = jax.grad(lambda x: reference.inverse_dynamics(model, q, qd, x) @ qdd)(qdd)
    helpers.assert_allclose(g, reference.mass_matrix(model, q) @ qdd, atol=1e-10,
                            name="grad of tau . qdd")


def test_unknown_kind():
    with pytest.raises(ValueError, match="unknown joint kind 'hinge'"):
        reference.jcalc("hinge", jnp.zeros((1, 6)), jnp.zeros(1))
