"""Properties of the public spatial algebra, `jaxrbd.spatial` (float64)."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.flatten_util  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxtyping  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from jaxrbd import spatial  # noqa: E402

TOL = 1e-12
SEEDS = st.integers(0, 2**32 - 1)
# Rotation angles sampled on purpose near the singular cases (0, ±π) as well as at random.
ANGLE_KINDS = st.sampled_from(["random", "zero", "tiny", "pi", "minus_pi", "near_pi"])


@pytest.fixture(autouse=True)
def _strict_numpy():
    # The library must not rely on implicit rank or dtype promotion (STYLE §9).
    with jax.numpy_rank_promotion("raise"), jax.numpy_dtype_promotion("strict"):
        yield


def close(a, b, tol=TOL, name=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{name}: shape {a.shape} != {b.shape}"
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    assert err <= tol * scale, f"{name}: max abs error {err:.3e} > {tol:.0e} * {scale:.3g}"


# ----------------------------------------------------------------------------- random data


def np_skew(v):
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def robot_Rx(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def robot_Ry(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def robot_Rz(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def axis_angle(axis, t):
    """Robotics rotation by ``t`` about the unit ``axis`` (Rodrigues)."""
    K = np_skew(axis)
    return np.eye(3) + np.sin(t) * K + (1.0 - np.cos(t)) * K @ K


def angle(rng, kind):
    return {
        "random": rng.uniform(-np.pi, np.pi),
        "zero": 0.0,
        "tiny": rng.choice([-1.0, 1.0]) * 1e-9,
        "pi": np.pi,
        "minus_pi": -np.pi,
        "near_pi": np.pi - 1e-7,
    }[kind]


def rand_rotation(rng, kind="random"):
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    return axis_angle(axis, angle(rng, kind))


def rand_rotations(rng, batch):
    q = rng.normal(size=batch + (4,))
    return np.asarray(spatial.quat_to_rotation(q))


def rand_transform(rng, batch=(), kind="random"):
    """Compact ``(E, r)`` and the numpy 6x6 ``[[E, 0], [-E r×, E]]``, built independently."""
    if batch:
        E = np.swapaxes(rand_rotations(rng, batch), -1, -2)
    else:
        E = rand_rotation(rng, kind).T
    r = rng.normal(size=batch + (3,))
    X = np.zeros(batch + (6, 6))
    X[..., :3, :3] = E
    X[..., 3:, 3:] = E
    X[..., 3:, :3] = -E @ np.vectorize(np_skew, signature="(3)->(3,3)")(r)
    return E, r, X


def rand_body(rng, batch=()):
    m = rng.uniform(0.1, 5.0, size=batch)
    c = rng.normal(size=batch + (3,))
    A = rng.normal(size=batch + (3, 3))
    I_c = A @ np.swapaxes(A, -1, -2) + 0.1 * np.eye(3)
    return m, c, I_c


def np_mcI(m, c, I_c):
    C = np_skew(c)
    return np.block([[I_c + m * C @ C.T, m * C], [m * C.T, m * np.eye(3)]])


def np_rot6(E):
    Z = np.zeros((3, 3))
    return np.block([[E, Z], [Z, E]])


# ----------------------------------------------------------------------------- cross products


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_skew_and_vee(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(2, 3))
    S = spatial.skew(a)
    close(S, np_skew(a), name="skew formula")
    close(S @ b, np.cross(a, b), name="skew(a) b = a x b")
    close(S, -S.T, name="skew antisymmetric")
    close(spatial.vee(S), a, name="vee(skew(a))")
    M = rng.normal(size=(3, 3))
    close(spatial.vee(M), spatial.vee(0.5 * (M - M.T)), name="vee of antisymmetric part")


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_cross_products(seed):
    rng = np.random.default_rng(seed)
    v, m, f = rng.normal(size=(3, 6))
    X = spatial.crm(v)
    Xs = spatial.crf(v)
    w, vo = np_skew(v[:3]), np_skew(v[3:])
    close(X, np.block([[w, np.zeros((3, 3))], [vo, w]]), name="crm formula")
    close(Xs, -X.T, name="crf = -crm^T")
    close(spatial.cross_motion(v, m), X @ m, name="cross_motion")
    close(spatial.cross_force(v, f), Xs @ f, name="cross_force")
    close(spatial.cross_motion(v, v), np.zeros(6), name="v x v = 0")
    # Duality: (v x m) . f = -m . (v x* f).
    close(spatial.cross_motion(v, m) @ f, -(m @ spatial.cross_force(v, f)), name="duality")


# ----------------------------------------------------------------------------- 6x6 transforms


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, kind=ANGLE_KINDS)
def test_inv_X_and_X_star(seed, kind):
    rng = np.random.default_rng(seed)
    E, r, X = rand_transform(rng, kind=kind)
    Xi = spatial.inv_X(X)
    close(Xi @ X, np.eye(6), name="inv_X(X) X")
    close(X @ Xi, np.eye(6), name="X inv_X(X)")
    close(Xi, np.linalg.inv(X), tol=1e-11, name="inv_X vs linalg.inv")
    Xs = spatial.X_star(X)
    close(Xs, Xi.T, name="X_star = inv_X^T")
    Z = np.zeros((3, 3))
    close(Xs, np.block([[E, -E @ np_skew(r)], [Z, E]]), name="X_star formula")
    close(spatial.plux(E, r), X, name="plux")
    close(spatial.plux(E, r), np_rot6(E) @ np.asarray(spatial.xlt(r)), name="plux = rot xlt")
    close(spatial.xlt(r), spatial.plux(np.eye(3), r), name="xlt = plux(1, r)")
    # Power is invariant: (X* f) . (X m) = f . m.
    m, f = rng.normal(size=(2, 6))
    close((Xs @ f) @ (X @ m), f @ m, name="power invariance")


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, kind=ANGLE_KINDS)
def test_elementary_rotations(seed, kind):
    rng = np.random.default_rng(seed)
    t = angle(rng, kind)
    for coord, six, robot in [
        (spatial.rx, spatial.rotx, robot_Rx),
        (spatial.ry, spatial.roty, robot_Ry),
        (spatial.rz, spatial.rotz, robot_Rz),
    ]:
        R = robot(t)
        close(coord(t), R.T, name=f"{coord.__name__} = R^T")
        close(six(t), spatial.plux(R.T, np.zeros(3)), name=f"{six.__name__} = plux(R^T, 0)")


def test_table1_literals():
    # Featherstone Table 1, written out.
    c, s = np.cos(0.3), np.sin(0.3)
    close(spatial.rx(0.3), [[1, 0, 0], [0, c, s], [0, -s, c]], name="rx")
    close(spatial.ry(0.3), [[c, 0, -s], [0, 1, 0], [s, 0, c]], name="ry")
    close(spatial.rz(0.3), [[c, s, 0], [-s, c, 0], [0, 0, 1]], name="rz")
    r = np.array([0.1, -0.2, 0.3])
    close(spatial.xlt(r), np.block([[np.eye(3), np.zeros((3, 3))], [-np_skew(r), np.eye(3)]]))


def test_XtoV():
    # A small rotation about z plus a small translation: XtoV recovers the displacement
    # to first order, and it is an invariant of X.
    d = 1e-6
    X = np.asarray(spatial.rotz(d) @ spatial.xlt(np.array([d, 2 * d, 0.0])))
    v = np.asarray(spatial.XtoV(X))
    close(v / d, [0, 0, 1, 1, 2, 0], tol=1e-5, name="XtoV small displacement")
    close(X @ v, v, tol=1e-12, name="XtoV invariant")


# ----------------------------------------------------------------------------- compact transforms


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, kind=ANGLE_KINDS)
def test_compact_transforms_match_matrices(seed, kind):
    rng = np.random.default_rng(seed)
    E1, r1, X1 = rand_transform(rng, kind=kind)
    E2, r2, X2 = rand_transform(rng)
    E, r = spatial.compose(E2, r2, E1, r1)
    close(spatial.to_matrix(E, r), X2 @ X1, name="compose")
    Ei, ri = spatial.inverse(E1, r1)
    close(spatial.to_matrix(Ei, ri), np.linalg.inv(X1), tol=1e-11, name="inverse")
    close(spatial.to_matrix(E1, r1), X1, name="to_matrix")
    Eb, rb = spatial.from_matrix(X1)
    close(Eb, E1, name="from_matrix E")
    close(rb, r1, name="from_matrix r")

    m, f = rng.normal(size=(2, 6))
    Xs = np.asarray(spatial.X_star(X1))
    close(spatial.apply_motion(E1, r1, m), X1 @ m, name="apply_motion")
    close(spatial.apply_inverse_motion(E1, r1, m), np.linalg.solve(X1, m), name="apply_inv_motion")
    close(spatial.apply_force(E1, r1, f), Xs @ f, name="apply_force")
    close(spatial.apply_transpose_force(E1, r1, f), X1.T @ f, name="apply_transpose_force")

    # A general (non-symmetric) 6x6 operator and a rigid-body inertia.
    Xi = np.asarray(spatial.inv_X(X1))
    for I in [rng.normal(size=(6, 6)), np_mcI(*rand_body(rng))]:
        close(spatial.apply_inertia(E1, r1, I), Xs @ I @ Xi, name="apply_inertia")
        close(spatial.apply_transpose_inertia(E1, r1, I), X1.T @ I @ X1, name="apply_T_inertia")


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, kind=ANGLE_KINDS)
def test_compact_inertia_transforms(seed, kind):
    rng = np.random.default_rng(seed)
    E, r, _ = rand_transform(rng, kind=kind)
    I6 = np_mcI(*rand_body(rng))
    pi = spatial.inertia_to_vector(I6)
    close(
        spatial.apply_inertia(E, r, pi),
        spatial.inertia_to_vector(spatial.apply_inertia(E, r, I6)),
        name="apply_inertia on (10,)",
    )
    close(
        spatial.apply_transpose_inertia(E, r, pi),
        spatial.inertia_to_vector(spatial.apply_transpose_inertia(E, r, I6)),
        name="apply_transpose_inertia on (10,)",
    )


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, kind=ANGLE_KINDS)
def test_inertia_transforms_preserve_kinetic_energy(seed, kind):
    rng = np.random.default_rng(seed)
    E, r, _ = rand_transform(rng, kind=kind)
    I_A = np_mcI(*rand_body(rng))
    v_A = rng.normal(size=6)
    T_A = 0.5 * v_A @ I_A @ v_A

    # A -> B: v_B = X v_A, I_B = X* I_A X^-1.
    v_B = spatial.apply_motion(E, r, v_A)
    I_B = spatial.apply_inertia(E, r, I_A)
    close(0.5 * v_B @ I_B @ v_B, T_A, name="T in B (6x6)")
    pi_B = spatial.apply_inertia(E, r, spatial.inertia_to_vector(I_A))
    close(0.5 * v_B @ spatial.inertia_mul(pi_B, v_B), T_A, name="T in B (compact)")
    # Momentum transforms as a force.
    close(spatial.inertia_mul(I_B, v_B), spatial.apply_force(E, r, I_A @ v_A), name="h_B = X* h_A")

    # B -> A: I_A = X^T I_B X, v_A = X^-1 v_B.
    close(spatial.apply_transpose_inertia(E, r, I_B), I_A, name="round trip of inertia")
    close(spatial.apply_inverse_motion(E, r, v_B), v_A, name="round trip of motion")


# ----------------------------------------------------------------------------- inertia


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_mcI(seed):
    rng = np.random.default_rng(seed)
    m, c, I_c = rand_body(rng)
    I = np.asarray(spatial.mcI(m, c, I_c))
    close(I, np_mcI(m, c, I_c), name="mcI formula")
    C = np_skew(c)
    # Featherstone's Table 1 writes the same matrix as [[I_C - m c×c×, m c×], [-m c×, m 1]].
    close(I, np.block([[I_c - m * C @ C, m * C], [-m * C, m * np.eye(3)]]), name="Table 1 form")
    close(I, I.T, name="symmetric")
    assert np.all(np.linalg.eigvalsh(I) > 0)
    # Moving the body from its centre of mass to c in body coordinates: mcI(m, 0, I_c)
    # expressed in the frame whose origin is at -c relative to the CoM frame.
    close(
        spatial.apply_transpose_inertia(np.eye(3), c, spatial.mcI(m, np.zeros(3), I_c)),
        I,
        name="parallel axis via transforms",
    )
    # The kinetic energy of a body spinning about its CoM at rate w is ½ wᵀ I_c w.
    w = rng.normal(size=3)
    v = np.concatenate([w, -np.cross(w, c)])  # velocity of the origin; the CoM is at rest
    close(0.5 * v @ I @ v, 0.5 * w @ I_c @ w, name="kinetic energy about CoM")


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_inertia_vectors(seed):
    rng = np.random.default_rng(seed)
    m, c, I_c = rand_body(rng)
    I6 = np.asarray(spatial.mcI(m, c, I_c))
    pi = np.asarray(spatial.inertia_to_vector(I6))
    close(spatial.inertia_from_vector(pi), I6, name="from(to(I6))")
    close(spatial.inertia_to_vector(spatial.inertia_from_vector(pi)), pi, name="to(from(pi))")
    close(spatial.mcI_to_vector(m, c, I_c), pi, name="mcI_to_vector")
    m2, c2, I_c2 = spatial.mcI_from_vector(pi)
    close(m2, m, name="mcI_from_vector m")
    close(c2, c, tol=1e-11, name="mcI_from_vector c")
    close(I_c2, I_c, tol=1e-11, name="mcI_from_vector I_c")
    # Pinocchio's order: [m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] about the frame origin.
    I_O = I_c + m * (c @ c * np.eye(3) - np.outer(c, c))
    expected = [m, *(m * c), I_O[0, 0], I_O[0, 1], I_O[1, 1], I_O[0, 2], I_O[1, 2], I_O[2, 2]]
    close(pi, np.array(expected), name="parameter order")
    v = rng.normal(size=6)
    close(spatial.inertia_mul(pi, v), I6 @ v, name="inertia_mul compact")
    close(spatial.inertia_mul(I6, v), I6 @ v, name="inertia_mul 6x6")


def test_inertia_vector_literal_order():
    I_c = np.array([[1.0, 0.1, 0.2], [0.1, 2.0, 0.3], [0.2, 0.3, 3.0]])
    pi = spatial.mcI_to_vector(2.0, np.zeros(3), I_c)
    close(pi, [2.0, 0.0, 0.0, 0.0, 1.0, 0.1, 2.0, 0.2, 0.3, 3.0])


def test_massless_body_is_finite():
    pi = jnp.zeros(10)
    _, c, _ = spatial.mcI_from_vector(pi)
    close(c, np.zeros(3))
    g = jax.grad(lambda p: jnp.sum(spatial.mcI_from_vector(p)[1]))(pi)
    assert np.all(np.isfinite(g))


# ----------------------------------------------------------------------------- rotations


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, kind=ANGLE_KINDS)
def test_quaternions(seed, kind):
    rng = np.random.default_rng(seed)
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    t = angle(rng, kind)
    q = np.concatenate([[np.cos(t / 2)], np.sin(t / 2) * axis])
    R = np.asarray(spatial.quat_to_rotation(q))
    close(R, axis_angle(axis, t), name="quat_to_rotation vs Rodrigues")
    close(spatial.quat_to_rotation(3.7 * q), R, name="normalises")
    close(spatial.quat_to_rotation(-q), R, name="q and -q")
    q2 = np.asarray(spatial.rotation_to_quat(R))
    assert q2[0] >= 0
    close(np.linalg.norm(q2), 1.0, name="unit")
    close(spatial.quat_to_rotation(q2), R, name="round trip R")
    close(q2, q if q[0] >= 0 else -q, tol=1e-11, name="round trip q")
    # Gradients stay finite at the branch points (identity, half turns).
    g = jax.jacfwd(spatial.rotation_to_quat)(jnp.asarray(R))
    assert np.all(np.isfinite(g))


def test_quaternion_zero_is_nan_everywhere():
    """One rule for the zero quaternion: it names no rotation, so the public conversion,
    the algorithms' own and the dynamics all give NaN (docs/conventions.md); any other
    scale is normalised away, with finite gradients."""
    from jaxrbd._core import rotation as _rotation

    assert np.all(np.isnan(spatial.quat_to_rotation(jnp.zeros(4))))
    assert np.all(np.isnan(_rotation.quat_to_R(jnp.zeros((4, 1)))))
    q = jnp.array([0.3, -0.1, 0.5, 0.2])
    close(spatial.quat_to_rotation(1e-150 * q), spatial.quat_to_rotation(q), name="tiny")
    close(spatial.quat_to_rotation(q), _rotation.quat_to_R(q[:, None])[..., 0], name="same R")
    g = jax.grad(lambda q: jnp.sum(spatial.quat_to_rotation(q)[0]))(q)
    assert np.all(np.isfinite(g))
    import jaxrbd

    b = jaxrbd.ModelBuilder()
    b.add_body("ball", "world", jaxrbd.joints.spherical(), jaxrbd.Body(1.0, (0, 0, -1), np.eye(3)))
    model = b.build()
    tau = jaxrbd.inverse_dynamics(model, jnp.zeros(4), jnp.zeros(3), jnp.zeros(3))
    assert np.all(np.isnan(tau))


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_rpy(seed):
    rng = np.random.default_rng(seed)
    r, p, y = rng.uniform(-np.pi, np.pi, size=3)
    R = spatial.rpy_to_rotation(np.array([r, p, y]))
    close(R, robot_Rz(y) @ robot_Ry(p) @ robot_Rx(r), name="Rz Ry Rx")


# ----------------------------------------------------------------------------- batching, dtypes


def test_batch_axes():
    rng = np.random.default_rng(0)
    b = (4, 5)
    v, m = rng.normal(size=(2, *b, 6))
    assert spatial.crm(v).shape == (*b, 6, 6)
    close(spatial.cross_motion(v, m), np.einsum("...ij,...j->...i", spatial.crm(v), m))
    close(spatial.cross_force(v, m), np.einsum("...ij,...j->...i", spatial.crf(v), m))
    close(spatial.crf(v), -np.swapaxes(spatial.crm(v), -1, -2))
    assert spatial.skew(v[..., :3]).shape == (*b, 3, 3)
    assert spatial.rotx(rng.normal(size=b)).shape == (*b, 6, 6)

    E, r, X = rand_transform(rng, b)
    close(spatial.plux(E, r), X)
    close(spatial.inv_X(X) @ X, np.broadcast_to(np.eye(6), (*b, 6, 6)))
    close(spatial.apply_motion(E, r, m), np.einsum("...ij,...j->...i", X, m))
    E2, r2, X2 = rand_transform(rng, b)
    Ec, rc = spatial.compose(E2, r2, E, r)
    close(spatial.to_matrix(Ec, rc), X2 @ X)

    # Broadcasting: one transform against a batch of vectors, and a batch of transforms.
    E0, r0, X0 = rand_transform(rng)
    close(spatial.apply_force(E0, r0, m), np.einsum("ij,...j->...i", spatial.X_star(X0), m))
    close(spatial.apply_motion(E[0], r[0], m), np.einsum("...ij,...j->...i", X[0], m))
    close(
        spatial.apply_motion(E, r0, m[0, 0]),
        np.einsum("...ij,j->...i", spatial.plux(E, r0), m[0, 0]),
    )

    mass, c, I_c = rand_body(rng, b)
    I6 = spatial.mcI(mass, c, I_c)
    assert I6.shape == (*b, 6, 6)
    close(spatial.mcI(2.0, c, np.eye(3))[1, 2], np_mcI(2.0, c[1, 2], np.eye(3)))
    pi = spatial.inertia_to_vector(I6)
    assert pi.shape == (*b, 10)
    close(spatial.inertia_mul(pi, v), np.einsum("...ij,...j->...i", I6, v))
    close(spatial.inertia_mul(I6, v), np.einsum("...ij,...j->...i", I6, v))
    close(
        spatial.apply_inertia(E, r, pi), spatial.inertia_to_vector(spatial.apply_inertia(E, r, I6))
    )
    q = rng.normal(size=(*b, 4))
    R = spatial.quat_to_rotation(q)
    close(spatial.quat_to_rotation(spatial.rotation_to_quat(R)), R)
    assert spatial.rpy_to_rotation(rng.normal(size=(*b, 3))).shape == (*b, 3, 3)


def test_dtypes():
    v32 = np.ones(6, np.float32)
    assert spatial.crm(v32).dtype == jnp.float32
    assert spatial.cross_motion(v32, v32).dtype == jnp.float32
    assert spatial.rotx(np.float32(0.1)).dtype == jnp.float32
    # Integers become the default float.
    assert spatial.skew(np.array([1, 2, 3])).dtype == jnp.float64
    assert spatial.rotz(0).dtype == jnp.float64


def raises_shape_error(match):
    """A shape error: our ValueError, or jaxtyping's TypeCheckError when the tests run
    with ``--jaxtyping-packages=jaxrbd,...`` (the annotations then catch it first)."""
    return pytest.raises((ValueError, jaxtyping.TypeCheckError), match=match)


def test_shape_errors():
    with raises_shape_error(r"crm: v has shape \(5,\), expected \(\.\.\., 6\)|'\.\.\. 6'"):
        spatial.crm(np.ones(5))
    with raises_shape_error("apply_motion: batch axes do not broadcast"):
        spatial.apply_motion(np.ones((2, 3, 3)), np.ones((2, 3)), np.ones((3, 6)))
    with raises_shape_error(r"inertia_mul: I has shape \(6,\)|'\.\.\. 10'"):
        spatial.inertia_mul(np.ones(6), np.ones(6))
    with raises_shape_error(r"plux: E has shape \(3,\)|'\.\.\. 3 3'"):
        spatial.plux(np.ones(3), np.ones(3))


# ----------------------------------------------------------------------------- jit / vmap / grad


def _transform_data():
    rng = np.random.default_rng(1)
    E, r, X = rand_transform(rng, (3,))
    m, c, I_c = rand_body(rng, (3,))
    I6 = np.asarray(spatial.mcI(m, c, I_c))
    v = rng.normal(size=(3, 6))
    return rng, E, r, X, I6, v


def test_jit_vmap_grad():
    rng, E, r, _, I6, v = _transform_data()

    def energy_in_B(E, r, I, v):
        vB = spatial.apply_motion(E, r, v)
        return 0.5 * jnp.sum(vB * spatial.inertia_mul(spatial.apply_inertia(E, r, I), vB))

    T = 0.5 * np.einsum("bi,bij,bj->", v, I6, v)
    close(jax.jit(energy_in_B)(E, r, I6, v), T, name="jit")
    close(jnp.sum(jax.jit(jax.vmap(energy_in_B))(E, r, I6, v)), T, name="vmap")

    # Energy is frame-invariant, so its gradient with respect to the translation vanishes.
    # (Not so for E, which is unconstrained in the ambient 3x3 space.)
    gE, gr = jax.jit(jax.grad(energy_in_B, argnums=(0, 1)))(E, r, I6, v)
    close(gr, np.zeros_like(r), tol=1e-10, name="d T / d r")
    assert np.all(np.isfinite(gE))

    def f(params):
        q, rr, pi, w = params
        R = spatial.quat_to_rotation(q)
        x = spatial.apply_force(jnp.swapaxes(R, -1, -2), rr, spatial.inertia_mul(pi, w))
        x = spatial.cross_force(w, x) + spatial.cross_motion(w, x)
        return jnp.sum(jnp.sin(x)) + jnp.sum(spatial.rotation_to_quat(R) ** 3)

    params = (
        jnp.asarray(rng.normal(size=4)),
        jnp.asarray(rng.normal(size=3)),
        spatial.mcI_to_vector(1.5, rng.normal(size=3), np.diag([0.1, 0.2, 0.25])),
        jnp.asarray(rng.normal(size=6)),
    )
    flat, unravel = jax.flatten_util.ravel_pytree(params)

    def fr(z):
        return f(unravel(z))

    jf = jax.jit(jax.jacfwd(fr))(flat)
    jr = jax.jit(jax.jacrev(fr))(flat)
    close(jf, jr, tol=1e-10, name="jacfwd == jacrev")
    # Central differences along a random tangent.
    dz = jnp.asarray(rng.normal(size=flat.shape))
    h = 1e-5
    fd = jax.jit(lambda z: (fr(z + h * dz) - fr(z - h * dz)) / (2 * h))(flat)
    close(jf @ dz, fd, tol=1e-7, name="jvp vs central differences")


def test_jit_and_vmap_of_every_function():
    _, E, r, X, I6, v = _transform_data()
    pi = np.asarray(spatial.inertia_to_vector(I6))
    cases = [
        (spatial.skew, (v[:, :3],)),
        (spatial.vee, (X[:, :3, :3],)),
        (spatial.crm, (v,)),
        (spatial.crf, (v,)),
        (spatial.cross_motion, (v, v[::-1])),
        (spatial.cross_force, (v, v[::-1])),
        (spatial.rx, (v[:, 0],)),
        (spatial.rotx, (v[:, 0],)),
        (spatial.roty, (v[:, 1],)),
        (spatial.rotz, (v[:, 2],)),
        (spatial.xlt, (r,)),
        (spatial.plux, (E, r)),
        (spatial.XtoV, (X,)),
        (spatial.inv_X, (X,)),
        (spatial.X_star, (X,)),
        (spatial.compose, (E, r, E[::-1], r[::-1])),
        (spatial.inverse, (E, r)),
        (spatial.to_matrix, (E, r)),
        (spatial.from_matrix, (X,)),
        (spatial.apply_motion, (E, r, v)),
        (spatial.apply_inverse_motion, (E, r, v)),
        (spatial.apply_force, (E, r, v)),
        (spatial.apply_transpose_force, (E, r, v)),
        (spatial.apply_inertia, (E, r, I6)),
        (spatial.apply_transpose_inertia, (E, r, pi)),
        (spatial.mcI, (pi[:, 0], v[:, :3], I6[:, :3, :3])),
        (spatial.mcI_to_vector, (pi[:, 0], v[:, :3], I6[:, :3, :3])),
        (spatial.mcI_from_vector, (pi,)),
        (spatial.inertia_to_vector, (I6,)),
        (spatial.inertia_from_vector, (pi,)),
        (spatial.inertia_mul, (pi, v)),
        (spatial.quat_to_rotation, (v[:, :4],)),
        (spatial.rotation_to_quat, (np.swapaxes(E, -1, -2),)),
        (spatial.rpy_to_rotation, (v[:, :3],)),
    ]
    assert {fn.__name__ for fn, _ in cases} | {"ry", "rz"} == set(spatial.__all__)

    @jax.jit  # one compilation for all of them
    def both(args_list):
        return [(fn(*a), jax.vmap(fn)(*a)) for (fn, _), a in zip(cases, args_list, strict=True)]

    for (fn, _), (batched, mapped) in zip(cases, both([a for _, a in cases]), strict=True):
        for x, y in zip(
            jax.tree_util.tree_leaves(mapped), jax.tree_util.tree_leaves(batched), strict=True
        ):
            close(x, y, name=f"vmap({fn.__name__})")
