"""The runnable examples and the demo run to completion and print what they promise."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args, timeout=600, cwd=ROOT):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


#: Scripts with their own tests of their figures (in-process, ``main(["--quick"])``).
TESTED_ELSEWHERE = {
    "elastic_arm_identification.py",  # tests/test_workflows.py
    "inertial_identification.py",  # tests/test_workflows.py
    "trajectory_optimization.py",  # tests/test_workflows_examples.py
    "batched_rollouts.py",  # tests/test_workflows_examples.py
    "four_bar_linkage.py",  # tests/test_contact_examples.py
    "slider_crank.py",  # tests/test_contact_examples.py
    "humanoid_standing.py",  # tests/test_contact_examples.py
    "make_notebooks.py",  # tests/test_notebooks.py (the notebooks are current)
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "script",
    sorted(p.name for p in (ROOT / "examples").glob("*.py") if p.name not in TESTED_ELSEWHERE),
)
def test_example_runs(script, tmp_path):
    """Every other script runs as is; the long ones (those with a ``--quick`` flag) in
    quick mode, and those print a final ``summary:`` line. They run in a scratch
    directory, so figures they write by default stay out of the checkout."""
    path = ROOT / "examples" / script
    quick = "--quick" in path.read_text()
    out = _run([str(path)] + (["--quick"] if quick else []), cwd=tmp_path)
    assert out.strip(), f"examples/{script} printed nothing"
    if quick:
        assert out.strip().splitlines()[-1].startswith("summary:"), out[-2000:]


def test_demo_runs():
    out = _run(["-m", "jaxrbd", "demo", "--model", "triple_pendulum", "--batch", "256",
                "--repeats", "1"])
    assert "max |tau' - tau|" in out
    assert "per sample" in out
    assert "dL/dm" in out
