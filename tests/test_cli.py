"""``python -m jaxrbd info`` and ``bench`` (called in-process through ``main``)."""

from __future__ import annotations

import pathlib

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
