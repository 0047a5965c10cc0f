"""``devices=`` of the batched entry points (`jaxrbd._core.sharding`): a batch split over
devices gives the unsharded numbers, its outputs live on every device, and a bad
``devices`` gets a sentence.

The two-device checks run in a subprocess with two host devices
(``jax_num_cpu_devices``), so this process keeps its single CPU device; everything there
is one small model (nq = 12, nv = 9), so the subprocess is mostly start-up and compiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_allclose

import jaxrbd

ROOT = Path(__file__).resolve().parents[1]
B_ODD, B_EVEN = 5, 6


def _model():
    """RBDL's triple pendulum with ball joints: quaternion blocks, nq = 12, nv = 9."""
    return jaxrbd.models.triple_pendulum("spherical")


def _states(model, B, seed):
    kq, kv, kw = jax.random.split(jax.random.key(seed), 3)
    Q = jax.vmap(lambda k: jaxrbd.random_configuration(model, k))(jax.random.split(kq, B))
    return (np.asarray(Q), np.asarray(jax.random.normal(kv, (B, model.nv))),
            np.asarray(jax.random.normal(kw, (B, model.nv))))


_TWO_DEVICES = textwrap.dedent(
    """
    import json, sys
    import jax
    jax.config.update("jax_num_cpu_devices", 2)
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np
    import jaxrbd
    from jaxrbd import batched
    assert len(jax.devices()) == 2, jax.devices()
    data = np.load(sys.argv[1])
    model = jaxrbd.models.triple_pendulum("spherical")
    out, info = {}, {}

    def record(name, x):
        out[name] = np.asarray(x)
        s = x.sharding
        info[name] = {
            "devices": len(s.device_set),
            "shard_rows": sorted(int(a.data.shape[0]) for a in x.addressable_shards),
        }

    for B in (%(odd)d, %(even)d):
        Q, V, W = (jnp.asarray(data[k + str(B)]) for k in ("Q", "V", "W"))
        record(f"fd{B}", batched.forward_dynamics(model, Q, V, W, devices="all"))
        record(f"id{B}", batched.inverse_dynamics(model, Q, V, W, devices=jax.devices()))
        record(f"mm{B}", batched.mass_matrix(model, Q, devices="all"))
    Q, V, W = (jnp.asarray(data[k + "%(even)d"]) for k in ("Q", "V", "W"))
    for i, d in enumerate(batched.forward_dynamics_derivatives(model, Q, V, W, devices="all")):
        record(f"dfd{i}", d)
    record("reg", batched.inverse_dynamics_regressor(model, Q, V, W, armature=True,
                                                     devices="all"))
    heavy = jaxrbd.with_inertial_parameters(model, 2 * jaxrbd.inertial_parameters(model))
    models = batched.stack_models([model, heavy] * 3)
    record("stacked", batched.forward_dynamics(models, Q, V, W, devices="all"))
    # contact solves: the constraint set (and the restitution) shared by the shares
    cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
    qdd, lam = batched.forward_dynamics_contacts(model, Q, V, W, cs, "range_space",
                                                 devices="all")
    record("fdc_qdd", qdd); record("fdc_lam", lam)
    record("imp", batched.contact_impulses(model, Q, V, cs, 0.5, devices="all")[0])
    # contact rollouts: blocks inside each device's share
    pts = jaxrbd.ground.ContactPoints.create(model, [("body_3", [0.0, 0.0, -1.0], 0.0)])
    Qo, Vo, Wo = (jnp.asarray(data[k + "%(odd)d"]) for k in ("Q", "V", "W"))
    TAU = jnp.broadcast_to(0.1 * Wo[:, None], (Qo.shape[0], 15, model.nv))
    QS, _, ginfo = batched.ground_rollout(model, Qo, 0.1 * Vo, TAU, 1e-3, pts,
                                          jaxrbd.ground.Plane(-1.0), devices="all")
    out["ground_q"], out["ground_f"] = np.asarray(QS), np.asarray(ginfo.force)
    # inside the caller's jit, the caller's jit places the arguments
    run = jax.jit(lambda Q, V, W: batched.forward_dynamics(model, Q, V, W, devices="all"))
    record("nested", run(Q, V, W))
    # the two shares run at the same time, on two threads: each device's program sleeps
    # in a host callback, and the sleeps overlap (sleeping needs no free core)
    import threading, time
    from jaxrbd._core.sharding import shard_batch
    spans = []

    def nap(x):
        t0 = time.perf_counter(); time.sleep(0.5)
        spans.append((threading.get_ident(), t0, time.perf_counter()))
        return x

    def slow_fd(model, Q, V, W):
        Q = jax.pure_callback(nap, jax.ShapeDtypeStruct(Q.shape, Q.dtype), Q)
        return batched.forward_dynamics._kernel(model, Q, V, W, None)

    shard_batch(slow_fd, "all", (None, 0, 0, 0), model, Q, V, W).block_until_ready()
    info["threads"] = len({s[0] for s in spans})
    info["overlap"] = max(s[1] for s in spans) < min(s[2] for s in spans)
    # devices=None is one device everywhere; the rollouts' default still splits, and warns
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        QSd, _ = batched.rollout(model, Qo[:2], Vo[:2], TAU[:2, :3], 1e-3, "euler")
        QSn, _ = batched.rollout(model, Qo[:2], Vo[:2], TAU[:2, :3], 1e-3, "euler",
                                 devices=None)
    info["defaults"] = {
        "warnings": [str(w.message) for w in caught if w.category is FutureWarning],
        "rollout_default": len(QSd.sharding.device_set),
        "rollout_none": len(QSn.sharding.device_set),
        "fd_none": len(batched.forward_dynamics(model, Q, V, W).sharding.device_set),
        "mesh": len(batched.mass_matrix(model, Q, devices=jax.sharding.Mesh(
            np.asarray(jax.devices()), ("x",))).sharding.device_set),
    }
    np.savez(sys.argv[2], **out)
    print(json.dumps(info))
    """
) % {"odd": B_ODD, "even": B_EVEN}


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory):
    """The outputs and their placement from a process with two CPU devices, and the
    inputs they were computed from."""
    tmp = tmp_path_factory.mktemp("sharding")
    model = _model()
    data = {}
    for B, seed in ((B_ODD, 1), (B_EVEN, 2)):
        Q, V, W = _states(model, B, seed)
        data.update({f"Q{B}": Q, f"V{B}": V, f"W{B}": W})
    np.savez(tmp / "in.npz", **data)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES, str(tmp / "in.npz"), str(tmp / "out.npz")],
        check=False, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    return data, dict(np.load(tmp / "out.npz")), info


@pytest.mark.slow
def test_two_devices_equal_unsharded(two_devices):
    """Odd and even batches, each entry point, a batch of models and a call inside
    `jax.jit`: the numbers of the unsharded call in this process."""
    data, out, _ = two_devices
    model, B = _model(), jaxrbd.batched
    tol = {"rtol": 1e-12, "atol": 1e-12}
    for n in (B_ODD, B_EVEN):
        Q, V, W = data[f"Q{n}"], data[f"V{n}"], data[f"W{n}"]
        assert_allclose(out[f"fd{n}"], B.forward_dynamics(model, Q, V, W), **tol, name=f"fd{n}")
        assert_allclose(out[f"id{n}"], B.inverse_dynamics(model, Q, V, W), **tol, name=f"id{n}")
        assert_allclose(out[f"mm{n}"], B.mass_matrix(model, Q), **tol, name=f"mm{n}")
    Q, V, W = data[f"Q{B_EVEN}"], data[f"V{B_EVEN}"], data[f"W{B_EVEN}"]
    for i, d in enumerate(B.forward_dynamics_derivatives(model, Q, V, W)):
        assert_allclose(out[f"dfd{i}"], d, **tol, name=f"forward_dynamics_derivatives[{i}]")
    reg = B.inverse_dynamics_regressor(model, Q, V, W, armature=True)
    assert_allclose(out["reg"], reg, **tol, name="regressor")
    heavy = jaxrbd.with_inertial_parameters(model, 2 * jaxrbd.inertial_parameters(model))
    models = B.stack_models([model, heavy] * 3)
    assert_allclose(out["stacked"], B.forward_dynamics(models, Q, V, W), **tol, name="stacked")
    assert_allclose(out["nested"], B.forward_dynamics(model, Q, V, W), **tol, name="nested")
    cs = jaxrbd.ConstraintSet.contacts_3d([("body_3", [0.0, 0.0, -1.0])])
    qdd, lam = B.forward_dynamics_contacts(model, Q, V, W, cs, "range_space")
    assert_allclose(out["fdc_qdd"], qdd, **tol, name="forward_dynamics_contacts qdd")
    assert_allclose(out["fdc_lam"], lam, **tol, name="forward_dynamics_contacts lambda")
    assert_allclose(out["imp"], B.contact_impulses(model, Q, V, cs, 0.5)[0], **tol,
                    name="contact_impulses")
    Q, V, W = data[f"Q{B_ODD}"], data[f"V{B_ODD}"], data[f"W{B_ODD}"]
    pts = jaxrbd.ground.ContactPoints.create(model, [("body_3", [0.0, 0.0, -1.0], 0.0)])
    TAU = np.broadcast_to(0.1 * W[:, None], (B_ODD, 15, model.nv))
    # jitted: an eager vmap of the rollout compiles each primitive on its own
    QS, _, info = jax.jit(jax.vmap(lambda q, v, tau: jaxrbd.ground.rollout(
        model, q, v, tau, 1e-3, pts, jaxrbd.ground.Plane(-1.0))))(Q, 0.1 * V, TAU)
    assert np.any(np.asarray(info.force)[..., 0] > 0), "no contact in the ground scene"
    assert_allclose(out["ground_q"], QS, **tol, name="ground_rollout states")
    assert_allclose(out["ground_f"], info.force, **tol, name="ground_rollout forces")


@pytest.mark.slow
def test_two_devices_outputs_split(two_devices):
    """The shares run at the same time. A batch that is a multiple of the device count
    comes back split in equal shares; an odd one comes back whole on both devices (arrays
    split in equal shares only)."""
    _, out, info = two_devices
    info = dict(info)
    info.pop("defaults")
    assert info.pop("threads") == 2 and info.pop("overlap"), "the shares ran one after the other"
    for name, where in info.items():
        assert where["devices"] == 2, (name, where)
        if name.endswith(str(B_ODD)):
            assert where["shard_rows"] == [B_ODD, B_ODD], (name, where)
        else:
            assert where["shard_rows"] == [B_EVEN // 2] * 2, (name, where)
    assert out[f"fd{B_ODD}"].shape == (B_ODD, 9)
    assert out[f"mm{B_ODD}"].shape == (B_ODD, 9, 9)


def test_devices_none_is_one_device(two_devices):
    """``devices=None`` runs on one device in every function; the batched rollouts'
    default still splits over every device and says that it will become ``None``; a
    `Mesh` names its devices."""
    d = two_devices[2]["defaults"]
    assert d["fd_none"] == d["rollout_none"] == 1, d
    assert d["rollout_default"] == 2 and d["mesh"] == 2, d
    assert len(d["warnings"]) == 1, d
    assert "default becomes devices=None" in d["warnings"][0], d


def test_one_device_equals_unsharded():
    """``devices`` naming this process's one device runs the sharded path on one share."""
    model = _model()
    Q, V, W = _states(model, B_ODD, 3)
    want = jaxrbd.batched.forward_dynamics(model, Q, V, W)
    for devices in ("all", jax.devices()[:1]):
        got = jaxrbd.batched.forward_dynamics(model, Q, V, W, devices=devices)
        assert_allclose(got, want, rtol=1e-12, atol=1e-12, name=f"devices={devices}")


def test_bad_devices():
    """Each wrong ``devices`` and each wrong batch names the argument."""
    model = _model()
    Q, V, W = (jnp.asarray(x) for x in _states(model, 4, 4))
    fd = jaxrbd.batched.forward_dynamics
    dev = jax.devices()[0]
    with pytest.raises(ValueError, match="devices is 'gpu', expected None, 'all'"):
        fd(model, Q, V, W, devices="gpu")
    with pytest.raises(ValueError, match="non-empty sequence of jax devices"):
        fd(model, Q, V, W, devices=[])
    with pytest.raises(ValueError, match="non-empty sequence of jax devices"):
        fd(model, Q, V, W, devices=["cpu"])
    with pytest.raises(TypeError, match="devices is one device"):
        fd(model, Q, V, W, devices=dev)
    with pytest.raises(TypeError, match="devices must be None, 'all', a Mesh or a sequence"):
        fd(model, Q, V, W, devices=2)
    with pytest.raises(ValueError, match="names a device more than once"):
        fd(model, Q, V, W, devices=[dev, dev])
    # the shape errors show the whole batch, not one device's share
    with pytest.raises(ValueError, match=r"Q has shape \(4, 9\), expected \(batch, 12\)"):
        fd(model, Q[:, :9], V, W, devices="all")
    with pytest.raises(ValueError, match="batch sizes differ"):
        fd(model, Q, V[:3], W, devices="all")
    with pytest.raises(ValueError, match="batch sizes differ"):
        jaxrbd.batched.mass_matrix(jaxrbd.batched.stack_models([model] * 3), Q,
                                   devices="all")
