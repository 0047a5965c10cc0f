"""``python -m jaxrbd info``, ``bench`` and ``view`` (called in-process through ``main``)."""

from __future__ import annotations

import pathlib
import re

import pytest

from jaxrbd.__main__ import main

DATA = pathlib.Path(__file__).parent / "data"

PENDULUM = """<robot name="p">
  <link name="base"/>
  <link name="arm"><inertial><origin xyz="0 0 -0.5"/><mass value="1"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.001"/></inertial></link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="arm"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="2" effort="5" velocity="3"/>
    <dynamics damping="0.1"/></joint>
</robot>"""


def test_info_prints_tree_and_limits(capsys):
    assert main(["info", str(DATA / "panda.urdf")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Model: 14 bodies (7 moving), nq=7, nv=7")
    assert "panda_link7  <- revolute 'panda_joint7' q[6] v[6]" in out
    assert "panda_joint4: [-3.072, -0.0698] | 2.175, 87 | 0.003, 0" in out


def test_info_floating_base(capsys):
    assert main(["info", str(DATA / "solo12.urdf"), "--floating-base"]) == 0
    out = capsys.readouterr().out
    assert "base_link  <- free 'root_joint' q[0:7] v[0:6]" in out
    assert "root_joint: free joint" in out


def test_info_and_bench_errors(capsys, tmp_path):
    assert main(["info", str(tmp_path / "missing.urdf")]) == 2
    assert "No such file" in capsys.readouterr().err
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot><link name='a'/><joint name='j' type='weird'/></robot>")
    assert main(["bench", str(bad)]) == 2
    assert "unknown joint type 'weird'" in capsys.readouterr().err


def test_bench_runs_and_reports(capsys, tmp_path):
    path = tmp_path / "pendulum.urdf"
    path.write_text(PENDULUM)
    assert main(["bench", str(path), "--batch", "1", "--batch", "3", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "nq=1, nv=1" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("forward_dynamics")]
    assert [r[1] for r in rows] == ["1", "3"]
    assert all(float(r[3]) > 0 for r in rows)


CART_MJCF = """<mujoco model="cart">
  <worldbody>
    <body name="cart" pos="0 0 0.2">
      <joint name="slide" type="slide" axis="1 0 0" range="-1 1" limited="true"/>
      <geom type="box" size="0.2 0.1 0.05" mass="1"/>
      <body name="pole"><joint name="hinge" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.6" size="0.02" mass="0.1"/></body>
    </body>
  </worldbody>
</mujoco>"""


def test_info_reads_mjcf(capsys, tmp_path):
    """``info robot.xml`` goes through jaxrbd.io.load_mjcf (MuJoCo's compiler)."""
    pytest.importorskip("mujoco", reason="MJCF files are compiled by MuJoCo")
    path = tmp_path / "cart.xml"
    path.write_text(CART_MJCF)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "nq=2, nv=2" in out
    assert "slide: [-1, 1]" in out
    assert main(["info", str(path), "--floating-base"]) == 2
    assert "--floating-base is for URDF files" in capsys.readouterr().err


def test_view_serves_and_stops(capsys, tmp_path):
    """``view`` serves the robot with joint sliders on 127.0.0.1 and stops (--timeout)."""
    pytest.importorskip("viser", reason="the viewer needs viser: pip install jaxrbd[viewer]")
    pytest.importorskip("trimesh", reason="the viewer needs trimesh: pip install jaxrbd[viewer]")
    path = tmp_path / "pendulum.urdf"
    path.write_text(PENDULUM)
    assert main(["view", str(path), "--port", "0", "--timeout", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "nq=1, nv=1" in out
    assert re.search(r"viewer at http://127\.0\.0\.1:[1-9]\d*\s", out), out
    assert main(["view", str(tmp_path / "missing.urdf"), "--timeout", "0"]) == 2
    assert "no such file" in capsys.readouterr().err.lower()
