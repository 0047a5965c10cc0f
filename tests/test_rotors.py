"""Geared rotors (`ModelBuilder.add_rotor`) and the Manutec r3 (`jaxrbd.models.manutec_r3`).

Oracle: a brute-force Lagrangian written here from the builder's inputs alone. Every link
pose comes from `forward_kinematics` of the model *without* rotors; every rotor pose is
composed by hand (carrier pose, rotor position, Rodrigues rotation by ``n q_j`` about the
axis). ``T = Σ ½ m |ċ|² + ½ ωᵀ I ω`` over links and rotors, ``V = -Σ m gᵀ c``;
``H = ∂²T/∂qd²`` and ``C = (∂²T/∂qd∂q) qd - ∂T/∂q + ∂V/∂q`` by automatic differentiation.
Trees use joint kinds with ``qd = dq/dt`` (no quaternions), so Euler-Lagrange applies as is.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import JIT, assert_allclose, make_joint, random_body, random_placement, random_rotation

import jaxrbd
from jaxrbd import Body, ModelBuilder, Transform, joints

# one structure, values drawn per seed: every seed reuses the same compilations
KINDS = ("revolute", "helical", "euler_zyx", "prismatic", "fixed", "revolute", "custom")
PARENTS = (0, 1, 1, 2, 3, 5, 3)  # body i + 1 hangs from PARENTS[i] (0 = world)
SEEDS = (0, 1, 2)


@dataclasses.dataclass(frozen=True)
class RotorSpec:
    """What the test passes to `add_rotor`, in the form the oracle needs."""

    joint: str
    carrier: str
    axis: np.ndarray  # unit, carrier coordinates
    position: np.ndarray  # carrier coordinates
    ratio: float
    mass: float
    com: np.ndarray  # rotor frame
    inertia: np.ndarray  # (3, 3) about the CoM, rotor frame


def _unit(v):
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v)


def rotor_tree(seed, symmetric=False):
    """``(builder, [RotorSpec])``: the random tree of `KINDS`/`PARENTS` with six rotors
    on assorted carriers (the world, a sibling branch, a fixed-merged body, the driven
    link itself, two rotors on one joint). ``symmetric``: axisymmetric rotors with their
    mass on the axis (the setting of the diagonal-armature limit)."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    added = {}  # joint -> (joint spec, placement, parent name)
    for i, (kind, parent) in enumerate(zip(KINDS, PARENTS)):
        joint, placement = make_joint(kind, rng, 2), random_placement(rng)
        b.add_body(f"b{i + 1}", parent, joint, random_body(rng), placement,
                   joint_name=f"j{i + 1}")
        added[f"j{i + 1}"] = (joint, placement, f"b{parent}" if parent else "world")
    # (joint, carrier or None for the default, explicit axis needed)
    layout = [("j1", None), ("j2", "b3"), ("j4", None), ("j6", None), ("j6", "b7"),
              ("j6", "b6")]
    specs = []
    for k, (joint, carrier) in enumerate(layout):
        ratio = float(rng.choice([-1.0, 1.0]) * rng.uniform(3.0, 30.0))
        J = float(rng.uniform(1e-3, 1e-2))
        kw = {"name": f"rotor{k}"}
        spec, placement, carrier_name = added[joint]
        if carrier is not None or joint == "j4":  # j4 is prismatic: no default axis
            axis, position = _unit(rng.normal(size=3)), rng.uniform(-0.3, 0.3, 3)
            kw.update(axis=axis, position=position)
            if carrier is not None:
                kw["carrier"] = carrier_name = carrier
        else:
            # the defaults: the joint's axis and origin in the parent frame
            R, position = placement.arrays()
            axis = _unit(R @ spec.columns[0, :3])
        if symmetric:
            Jt, mass = J * rng.uniform(0.5, 2.0), float(rng.uniform(0.0, 0.5))
            com = np.zeros(3)
            kw.update(inertia=J, transverse_inertia=Jt, mass=mass)
            inertia = Jt * (np.eye(3) - np.outer(axis, axis)) + J * np.outer(axis, axis)
        else:
            body = random_body(rng, (0.1, 0.5))
            mass, com = body.mass, np.asarray(body.com) * 0.2
            inertia = np.asarray(body.inertia) * 0.1
            kw.update(inertia=inertia, mass=mass, com=com)
        b.add_rotor(joint, gear_ratio=ratio, **kw)
        specs.append(RotorSpec(joint, carrier_name, axis, np.asarray(position), ratio, mass,
                               com, inertia))
    return b, specs


# ---------------------------------------------------------------- the brute-force oracle


def _rodrigues(a, theta):
    K = jnp.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return jnp.eye(3) + jnp.sin(theta) * K + (1.0 - jnp.cos(theta)) * (K @ K)


def oracle_params(bare, specs):
    """Arrays of every massive body, links then rotors, and the static rotor layout."""
    inertia = np.asarray(bare.inertia)[1:]
    m = inertia[:, 0]
    c = inertia[:, 1:4] / np.where(m > 0, m, 1.0)[:, None]
    xx, xy, yy, xz, yz, zz = inertia[:, 4:].T
    Io = np.stack([np.stack([xx, xy, xz], -1), np.stack([xy, yy, yz], -1),
                   np.stack([xz, yz, zz], -1)], -2)
    Ic = Io - m[:, None, None] * (np.einsum("bi,bi->b", c, c)[:, None, None] * np.eye(3)
                                  - np.einsum("bi,bj->bij", c, c))
    links = {"m": m, "c": c, "I": Ic}
    rotors = {
        "m": np.array([s.mass for s in specs]),
        "c": np.stack([s.com for s in specs]),
        "I": np.stack([s.inertia for s in specs]),
        "axis": np.stack([s.axis for s in specs]),
        "pos": np.stack([s.position for s in specs]),
        "n": np.array([s.ratio for s in specs]),
    }
    layout = tuple((bare.body_id(s.carrier), bare.q_index(s.joint).start) for s in specs)
    tree = jax.tree_util.tree_map(jnp.asarray, (links, rotors))
    return tree, layout


@functools.partial(jax.jit, static_argnums=2)
def brute_force(bare, params, layout, q, qd):
    """``(H, C)`` of links plus rotors from the Lagrangian."""
    links, rotors = params
    g = bare.gravity

    def frames(q):
        R, p = jaxrbd.forward_kinematics(bare, q)
        R, p = R[1:], p[1:]
        c = p + jnp.einsum("bij,bj->bi", R, links["c"])
        Rr, cr = [], []
        for k, (carrier, iq) in enumerate(layout):
            Rc, pc = (jnp.eye(3), jnp.zeros(3)) if carrier == 0 else (R[carrier - 1],
                                                                      p[carrier - 1])
            Rk = Rc @ _rodrigues(rotors["axis"][k], rotors["n"][k] * q[iq])
            Rr.append(Rk)
            cr.append(pc + Rc @ rotors["pos"][k] + Rk @ rotors["c"][k])
        return jnp.concatenate([R, jnp.stack(Rr)]), jnp.concatenate([c, jnp.stack(cr)])

    m = jnp.concatenate([links["m"], rotors["m"]])
    I = jnp.concatenate([links["I"], rotors["I"]])

    def momentum_and_energy(q):
        """``(H qd, T, V)``: ``H = Σ m J_cᵀ J_c + J_ωᵀ I J_ω`` from the Jacobians of every
        centre of mass (``ċ = J_c qd``) and orientation (``ω× = Ṙ Rᵀ``, ``ω = J_ω qd``)."""
        R, c = frames(q)
        dR, Jc = jax.jacfwd(frames)(q)  # (N, 3, 3, nv), (N, 3, nv)
        W = jnp.einsum("bijk,blj->bilk", dR, R)
        Jw = jnp.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], 1)  # (N, 3, nv)
        Iw = jnp.einsum("bij,bjk,blk->bil", R, I, R)
        H = jnp.einsum("b,bik,bil->kl", m, Jc, Jc) + jnp.einsum("bik,bij,bjl->kl", Jw, Iw, Jw)
        return H, 0.5 * qd @ H @ qd, -jnp.sum(m * (c @ g))

    # Euler-Lagrange: H qdd + C = tau, C = (dH/dt) qd - ∂T/∂q + ∂V/∂q (the Christoffel
    # terms); one forward-mode pass along qd (for dH/dt) and along every e_k (for ∂/∂q_k)
    nv = qd.shape[0]
    (H, _, _), (dH, dT, dV) = jax.vmap(
        lambda t: jax.jvp(momentum_and_energy, (q,), (t,)), out_axes=((None, None, None), 0)
    )(jnp.concatenate([qd[None], jnp.eye(nv)]))
    return H, dH[0] @ qd - dT[1:] + dV[1:]


# the suite's shared jits (one compilation per structure for every test file)
MM = JIT["mass_matrix"]
BIAS = JIT["bias_forces"]
ID = JIT["inverse_dynamics"]
FD = JIT["forward_dynamics"]
FK = JIT["forward_kinematics"]
KE = jax.jit(jaxrbd.kinetic_energy)
JACOBIANS = jax.jit(jaxrbd.body_jacobians, static_argnames="frame")


@pytest.fixture(scope="module")
def trees():
    """``seed -> (builder, specs, exact, armature, bare)``."""
    out = {}
    for seed in SEEDS:
        b, specs = rotor_tree(seed)
        out[seed] = (b, specs, b.build(), b.build(rotors="armature"), b.build(rotors="none"))
    return out


def state(model, seed):
    key = jax.random.key(100 + seed)
    k1, k2, k3 = jax.random.split(key, 3)
    q = jax.random.uniform(k1, (model.nq,), jnp.float64, -1.5, 1.5)
    qd = jax.random.uniform(k2, (model.nv,), jnp.float64, -2.0, 2.0)
    qdd = jax.random.uniform(k3, (model.nv,), jnp.float64, -2.0, 2.0)
    return q, qd, qdd


# ---------------------------------------------------------------- (a) exact = Lagrangian


@pytest.mark.parametrize("seed", SEEDS)
def test_exact_rotors_match_the_lagrangian(trees, seed):
    b, specs, exact, _, bare = trees[seed]
    assert isinstance(exact, jaxrbd.CoupledModel)
    # the rotors add bodies at the end and no coordinate
    assert exact.joint_names == bare.joint_names and exact.nq == bare.nq
    assert exact.body_names[: bare.nbodies] == bare.body_names
    assert exact.coupled_joints == tuple(f"rotor{k}" for k in range(len(specs)))
    assert exact.driver_joints == tuple(s.joint for s in specs)
    q, qd, qdd = state(exact, seed)
    params, layout = oracle_params(bare, specs)
    H, C = brute_force(bare, params, layout, q, qd)
    assert_allclose(MM(exact, q), H, rtol=1e-10, name="H")
    assert_allclose(BIAS(exact, q, qd), C, rtol=1e-10, name="C")
    assert_allclose(ID(exact, q, qd, qdd), H @ qdd + C, rtol=1e-10, name="tau")
    assert_allclose(KE(exact, q, qd), 0.5 * qd @ H @ qd, rtol=1e-10, name="T")
    # the rotors matter: the rotor-less model is far from it
    assert float(jnp.max(jnp.abs(MM(bare, q) - H))) > 1e-3


# ---------------------------------------------------------------- (b) FD ∘ ID


@pytest.mark.parametrize("seed", SEEDS)
def test_forward_inverse_round_trip(trees, seed):
    _, _, exact, _, _ = trees[seed]
    q, qd, qdd = state(exact, seed)
    tau = ID(exact, q, qd, qdd)
    assert_allclose(FD(exact, q, qd, tau), qdd, rtol=1e-9, name="FD(ID(qdd))")
    H = MM(exact, q)
    assert_allclose(H, H.T, rtol=1e-14, name="H symmetric")
    assert float(jnp.linalg.eigvalsh(H)[0]) > 0.0


# ---------------------------------------------------------------- (c) the armature limit


def test_armature_limit_structure():
    """Axisymmetric rotors with their mass on the axis:
    ``H_exact - H_armature = Σ_r J_cᵀ M_r J_c + n J_a (e_j gᵀ + g e_jᵀ)``, with ``J_c`` the
    carrier's world Jacobian at the rotor, ``M_r`` the rotor's rigid inertia there and
    ``g = J_ωᵀ a`` the carrier's angular velocity about the spin axis per joint velocity."""
    b, specs = rotor_tree(7, symmetric=True)
    exact, arm, bare = b.build(), b.build(rotors="armature"), b.build(rotors="none")
    q, qd, qdd = state(exact, 7)
    R, _ = FK(bare, q)
    J0 = JACOBIANS(bare, q, frame="world")  # [ω; v] at each body origin
    expected = jnp.zeros((exact.nv, exact.nv))
    for s in specs:
        j = bare.v_index(s.joint).start
        # the armature is n^2 J_a on the driven joint only
        assert s.com.tolist() == [0.0, 0.0, 0.0]
        if s.carrier == "world":
            continue  # a fixed carrier: nothing beyond the armature
        Rc, Jc = R[bare.body_id(s.carrier)], J0[bare.body_id(s.carrier)]
        r = Rc @ s.position  # the rotor origin from the carrier's, world-aligned
        Jc = Jc.at[3:].add(jnp.cross(Jc[:3].T, r).T)  # v_point = v_origin + ω × r
        Mr = jnp.zeros((6, 6)).at[:3, :3].set(Rc @ s.inertia @ Rc.T)
        Mr = Mr.at[3:, 3:].set(s.mass * jnp.eye(3))
        g = Jc[:3].T @ (Rc @ s.axis)
        e = jnp.zeros(exact.nv).at[j].set(1.0)
        Ja = float(s.axis @ s.inertia @ s.axis)
        expected += Jc.T @ Mr @ Jc + s.ratio * Ja * (jnp.outer(e, g) + jnp.outer(g, e))
    assert_allclose(MM(exact, q) - MM(arm, q), expected, rtol=1e-10, name="H_exact - H_arm")
    # the armature: n^2 J_a per rotor, summed per joint
    arm_expected = np.zeros(bare.nv)
    for s in specs:
        arm_expected[bare.v_index(s.joint).start] += s.ratio**2 * float(
            s.axis @ s.inertia @ s.axis)
    assert_allclose(arm.armature, arm_expected, rtol=1e-14, name="armature")
    assert_allclose(MM(arm, q), MM(bare, q) + jnp.diag(arm.armature), rtol=1e-12, name="H_arm")


def test_fixed_carrier_exact_equals_armature():
    """Rotors on the fixed base (direct drives' motors, axis 1 of most arms): exact == armature."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    for i, parent in enumerate((0, 0, 1)):
        b.add_body(f"b{i + 1}", parent, joints.revolute(rng.normal(size=3)), random_body(rng),
                   random_placement(rng))
    b.add_rotor("b1", inertia=2e-3, gear_ratio=-50.0, transverse_inertia=5e-3, mass=0.3)
    b.add_rotor("b2", inertia=1e-3, gear_ratio=80.0, carrier="world", axis=(1.0, 2.0, 0.5),
                position=(0.1, 0.0, 0.2), mass=0.2)
    exact, arm = b.build(), b.build(rotors="armature")
    q, qd, qdd = state(exact, 3)
    assert_allclose(MM(exact, q), MM(arm, q), rtol=1e-12, name="H")
    assert_allclose(BIAS(exact, q, qd), BIAS(arm, q, qd), rtol=1e-12, name="C")
    assert_allclose(arm.armature, [2e-3 * 50.0**2, 1e-3 * 80.0**2, 0.0], rtol=1e-14,
                    name="armature")


def test_relative_error_of_the_armature_falls_as_one_over_n():
    """The dropped terms are O(n J) against the armature's O(n^2 J): halving J while
    doubling n keeps the armature and halves the error."""
    def scara(J, n):
        b = ModelBuilder(inertia_check="ignore")  # a massless spin-only rotor
        link = Body(1.0, (0.5, 0.0, 0.0), np.eye(3) * 0.01)
        b.add_body("upper", "world", joints.revolute((0, 0, 1)), link)
        b.add_body("fore", "upper", joints.revolute((0, 0, 1)), link,
                   Transform(translation=(1.0, 0.0, 0.0)))
        b.add_rotor("fore", inertia=J, gear_ratio=n, transverse_inertia=0.0)
        return b.build(), b.build(rotors="armature")

    q = jnp.array([0.3, -0.4])
    errors = []
    for J, n in ((1e-3, 50.0), (0.25e-3, 100.0)):
        exact, arm = scara(J, n)
        dH = MM(exact, q) - MM(arm, q)
        # n J between the joints, J on the carrier's own coordinate
        assert_allclose(dH, [[J, n * J], [n * J, 0.0]], rtol=1e-12, name="dH")
        errors.append(float(dH[0, 1]))
    assert errors[1] == pytest.approx(errors[0] / 2, rel=1e-12)


# ---------------------------------------------------------------- (d) the Manutec r3

#: Otter & Tuerk (1988), as in the Modelica Standard Library's RobotR3 (typed in here
#: again, not read from jaxrbd.models): (mass, com, (I11, I22, I33, I21)) per link.
R3_LINKS = {
    "link1": (1.0, (0, 0, 0), (0.001, 1.16, 0.001, 0.0)),
    "link2": (56.5, (0.172, 0.205, 0), (2.58, 0.64, 2.73, -0.46)),
    "link3": (26.4, (0.064, -0.034, 0), (0.279, 0.245, 0.413, -0.070)),
    "link4": (28.7, (0, 0, 0), (1.67, 0.081, 1.67, 0.0)),
    "link5": (5.2, (0, 0, 0), (1.25, 0.81, 1.53, 0.0)),
    "link6": (0.5, (0.05, 0.05, 0.05), (0.001, 0.001, 0.001, 0.0)),
}
R3_ORIGINS = [(0, 0.351, 0), (0, 0.324, 0.3), (0, 0.65, 0), (0, 0.414, -0.155),
              (0, 0.186, 0), (0, 0.125, 0)]
R3_AXES = [(0, 1, 0), (1, 0, 0), (1, 0, 0), (0, 1, 0), (1, 0, 0), (0, 1, 0)]
R3_J = [1.3e-3, 1.3e-3, 1.3e-3, 1.6e-4, 1.8e-4, 4.3e-5]
R3_RATIO = [-105.0, 210.0, 60.0, -99.0, 79.2, -99.0]


@pytest.fixture(scope="module")
def r3():
    return {v: jaxrbd.models.manutec_r3(v) for v in ("exact", "armature", "none")}


def test_manutec_r3_holds_the_published_parameters(r3):
    none, arm, exact = r3["none"], r3["armature"], r3["exact"]
    assert isinstance(exact, jaxrbd.CoupledModel) and isinstance(arm, jaxrbd.Model)
    for m in (none, arm, exact):
        assert m.nq == m.nv == 6
        assert m.joint_names == tuple(f"axis{k}" for k in range(1, 7))
    assert_allclose(none.gravity, [0.0, -9.81, 0.0], rtol=0, name="gravity")
    inertia = np.asarray(none.inertia)
    for name, (mass, com, (i11, i22, i33, i21)) in R3_LINKS.items():
        row = inertia[none.body_id(name)]
        com = np.asarray(com, np.float64)
        assert row[0] == pytest.approx(mass, rel=1e-14), name
        assert_allclose(row[1:4] / mass, com, rtol=1e-14, atol=1e-15, name=f"{name} com")
        # [Ixx, Ixy, Iyy, Ixz, Iyz, Izz] about the origin = I_c + parallel axis
        Ic = np.array([[i11, i21, 0], [i21, i22, 0], [0, 0, i33]])
        Io = Ic + mass * (com @ com * np.eye(3) - np.outer(com, com))
        assert_allclose(row[4:], Io[[0, 0, 1, 0, 1, 2], [0, 1, 1, 2, 2, 2]], rtol=1e-14,
                        name=f"{name} inertia")
    load = inertia[none.body_id("load")]
    assert load[0] == 15.0 and load[1:4].tolist() == [0.0, 15.0 * 0.25, 0.0]
    # joint placements and axes: link origins at q = 0 are the running sums of the origins
    _, p = FK(none, jnp.zeros(6))
    for k in range(6):
        assert_allclose(p[none.body_id(f"link{k + 1}")], np.sum(R3_ORIGINS[: k + 1], 0),
                        rtol=1e-14, name=f"origin {k + 1}")
    assert_allclose(none.axes[:, :3], R3_AXES, rtol=0, name="axes")
    # drives: armature J i^2; exact rotors spin at i q with moment J about the joint axis
    assert_allclose(none.armature, np.zeros(6), rtol=0, name="no armature")
    assert_allclose(arm.armature, np.array(R3_J) * np.array(R3_RATIO) ** 2, rtol=1e-14,
                    name="armature")
    assert exact.coupled_joints == tuple(f"motor{k}" for k in range(1, 7))
    assert exact.driver_joints == exact.joint_names
    assert_allclose(exact.multiplier, R3_RATIO, rtol=0, name="gear ratios")
    rows = np.asarray(exact.base.inertia)
    for k in range(6):
        motor = rows[exact.body_id(f"motor{k + 1}")]
        a = np.asarray(R3_AXES[k], np.float64)
        xx, xy, yy, xz, yz, zz = motor[4:]
        Io = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        assert motor[0] == 0.0
        assert a @ Io @ a == pytest.approx(R3_J[k], rel=1e-14)
    # motor 1 sits on the base, motor k on link k - 1
    parent = exact.base.body_parent
    assert exact.body_names[parent[exact.body_id("motor1")]] == "base"
    for k in range(2, 7):
        assert exact.body_names[parent[exact.body_id(f"motor{k}")]] == f"link{k - 1}"


def test_manutec_r3_variants_agree_where_they_must(r3):
    none, arm, exact = r3["none"], r3["armature"], r3["exact"]
    q, qd, qdd = state(none, 11)
    H0, Ha, He = MM(none, q), MM(arm, q), MM(exact, q)
    assert_allclose(Ha, H0 + jnp.diag(arm.armature), rtol=1e-12, name="H_arm")
    # same gravity torques: the rotors are massless
    zero = jnp.zeros(6)
    assert_allclose(ID(exact, q, zero, zero), ID(none, q, zero, zero), rtol=1e-12, name="g")
    # exact differs from the armature by terms far below the armature itself
    dH = He - Ha
    assert 0.0 < float(jnp.max(jnp.abs(dH))) < 0.05 * float(jnp.max(arm.armature))
    assert_allclose(ID(exact, q, qd, qdd), He @ qdd + ID(exact, q, qd, zero), rtol=1e-12,
                    name="ID = H qdd + C")
    with pytest.raises(ValueError, match="rotors='fast'"):
        jaxrbd.models.manutec_r3("fast")


# ---------------------------------------------------------------- (e) transforms


def test_rotor_model_under_jit_vmap_grad(trees):
    _, _, exact, _, _ = trees[0]
    q, qd, qdd = state(exact, 0)
    # vmap over states, against one at a time
    Q = jnp.stack([q, 0.5 * q, -q])
    QD = jnp.stack([qd, -qd, 2 * qd])
    TAU = jax.jit(jax.vmap(jaxrbd.inverse_dynamics, in_axes=(None, 0, 0, None)))(
        exact, Q, QD, qdd)
    for k in range(3):
        assert_allclose(TAU[k], ID(exact, Q[k], QD[k], qdd), rtol=1e-12, name=f"vmap {k}")
    # grad with respect to q, against central differences
    f = lambda q: jnp.sum(ID(exact, q, qd, qdd) ** 2)
    dq = jnp.linspace(-1.0, 1.0, exact.nq)
    eps = 1e-6
    assert float(jax.jit(jax.grad(f))(q) @ dq) == pytest.approx(
        float(f(q + eps * dq) - f(q - eps * dq)) / (2 * eps), rel=1e-6)
    # derivatives with respect to the gear ratios (a leaf), against central differences
    n0 = exact.multiplier

    def tau_of(n):
        return ID(eqx.tree_at(lambda m: m.multiplier, exact, n), q, qd, qdd)

    dn = jnp.zeros_like(n0).at[1].set(1.0)
    dtau = jax.jit(lambda n: jax.jvp(tau_of, (n,), (dn,))[1])(n0)
    fd = (tau_of(n0 + eps * dn) - tau_of(n0 - eps * dn)) / (2 * eps)
    assert_allclose(dtau, fd, rtol=1e-6, name="dtau/dn")


# ---------------------------------------------------------------- (f) errors and options


def _two_links():
    b = ModelBuilder()
    b.add_body("a", "world", joints.revolute((0, 0, 1)), Body(1.0, (0.1, 0, 0), np.eye(3)))
    b.add_body("ball", "a", joints.spherical(), Body(1.0, (0.1, 0, 0), np.eye(3)))
    b.add_body("s", "a", joints.prismatic((1, 0, 0)), Body(1.0, (0.1, 0, 0), np.eye(3)))
    return b


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"joint": "nope"}, "unknown joint 'nope'"),
        ({"joint": "ball"}, "joint 'ball' is spherical with nv = 3; a geared rotor drives a "
                            "1-DoF joint"),
        ({"axis": (0.0, 0.0, 0.0)}, "axis .* is zero"),
        ({"axis": (1.0, 0.0)}, "axis must be a finite 3-vector"),
        ({"inertia": -1e-3}, "inertia .* must be finite and >= 0"),
        ({"transverse_inertia": -1.0}, "must be finite and >= 0"),
        ({"inertia": -np.eye(3)}, "negative moments"),
        ({"inertia": np.eye(3), "transverse_inertia": 1.0}, "transverse_inertia goes with"),
        ({"mass": -1.0}, "negative mass"),
        ({"gear_ratio": np.inf}, "gear_ratio inf is not finite"),
        ({"gear_ratio": "fast"}, "gear_ratio must be a number"),
        ({"carrier": "nowhere", "axis": (0, 0, 1)}, "unknown parent 'nowhere'"),
        ({"carrier": "a"}, "give the spin axis"),
        ({"joint": "s"}, "joint 's' has no rotation axis"),
        ({"name": "a"}, "duplicate body or joint name 'a'"),
    ],
)
def test_add_rotor_errors(kwargs, match):
    args = {"joint": "a", "inertia": 1e-3, "gear_ratio": 10.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        _two_links().add_rotor(**args)


def test_rotor_names_options_and_warnings():
    b = _two_links()
    assert b.add_rotor("s", 1e-4, 2 * np.pi / 0.005, axis=(1, 0, 0)) == "s_rotor"  # a ball screw
    with pytest.raises(ValueError, match="duplicate body or joint name 's_rotor'"):
        b.add_rotor("a", 1e-3, 10.0, name="s_rotor")
    with pytest.raises(ValueError, match="duplicate body name"):
        b.add_body("s_rotor", "a", joints.revolute(), Body(1.0))
    with pytest.raises(ValueError, match="rotors='fast', expected 'exact', 'armature' or 'none'"):
        b.build(rotors="fast")
    # without rotors, build is unchanged
    plain = ModelBuilder()
    plain.add_body("a", "world", joints.revolute(), Body(1.0))
    assert isinstance(plain.build(), jaxrbd.Model)
    assert isinstance(plain.build(rotors="armature"), jaxrbd.Model)
    # a physically inconsistent rotor inertia warns at build, as a body's does
    warned = _two_links()
    warned.add_rotor("a", np.diag([1e-4, 1e-4, 1e-3]), 10.0)
    with pytest.warns(UserWarning, match="'a_rotor': inertia violates the triangle"):
        warned.build()
    # "none" is the model without rotors
    none = b.build(rotors="none")
    assert none.body_names == ("world", "a", "ball", "s") and none.nv == 5
    assert_allclose(none.armature, np.zeros(5), rtol=0, name="armature")
    # a ball screw's rotor: the armature is J (2 pi / lead)^2
    arm = b.build(rotors="armature")
    assert float(arm.armature[arm.v_index("s").start]) == pytest.approx(
        1e-4 * (2 * np.pi / 0.005) ** 2, rel=1e-14)
    assert "s_rotor" in b.build().summary()


def test_default_carrier_axis_and_position_follow_the_joint():
    """The default rotor sits on the joint's parent, at the joint origin, about the joint
    axis, whatever the placement rotation: same model as the explicit arguments."""
    rng = np.random.default_rng(5)
    P = Transform(rotation=random_rotation(rng), translation=(0.2, -0.1, 0.3))
    link = Body(1.0, (0.1, 0.0, 0.0), np.eye(3) * 0.02)

    def build(**kw):
        b = ModelBuilder()
        b.add_body("a", "world", joints.revolute((0, 1, 0)), link)
        b.add_body("c", "a", joints.revolute((1, 2, 3)), link, P)
        b.add_rotor("c", 1e-3, 40.0, **kw)
        return b.build()

    R, p = P.arrays()
    default = build()
    explicit = build(carrier="a", axis=R @ _unit([1, 2, 3]), position=p)
    q = jnp.array([0.4, -0.7])
    assert_allclose(MM(default, q), MM(explicit, q), rtol=1e-12, name="H")
    assert default.body_names[default.base.body_parent[-1]] == "a"
