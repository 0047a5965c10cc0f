"""The runnable examples and the demo run to completion and print what they promise."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import load_example

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

#: Scripts whose notebook (executed by tests/test_notebooks.py) runs the same computations
#: as their ``main()`` on reduced sizes: the script's own run would compile and run them a
#: second time (~1 min each on CI's 2 cores). ``test_notebook_calls_what_main_calls``
#: keeps the two in step: every function of the script that ``main()`` calls is called by
#: the notebook too, except the script's figure, which is drawn here from small arrays.
#: The value is the name the notebook imports the script under.
COVERED_BY_NOTEBOOK = {
    "human_motion_estimation.py": "hm",
    "legged_rollouts.py": "lr",
}
#: Functions of ``main()`` the notebook replaces with its own cells (its inline figures).
MAIN_ONLY = {"plot"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "script",
    sorted(p.name for p in (ROOT / "examples").glob("*.py")
           if p.name not in TESTED_ELSEWHERE and p.name not in COVERED_BY_NOTEBOOK),
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


def _calls(tree: ast.AST) -> set[str]:
    """Names called in ``tree``: ``f(...)`` gives ``f``, ``mod.f(...)`` gives ``mod.f``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                out.add(f"{f.value.id}.{f.attr}")
    return out


@pytest.mark.parametrize("script", sorted(COVERED_BY_NOTEBOOK))
def test_notebook_calls_what_main_calls(script):
    """The notebook of a script in `COVERED_BY_NOTEBOOK` imports the script and calls
    every function of it that ``main()`` calls (the notebook's execution then runs them),
    so the script's own run is not repeated; checked on the source text, no import."""
    source = (ROOT / "examples" / script).read_text()
    module = ast.parse(source)
    functions = {n.name for n in module.body if isinstance(n, ast.FunctionDef)}
    main = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    used = (_calls(main) & functions) - MAIN_ONLY - {"main"}
    assert used, f"examples/{script}: main() calls none of the script's functions"
    nb = json.loads((ROOT / "examples" / script.replace(".py", ".ipynb")).read_text())
    cells = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    alias = COVERED_BY_NOTEBOOK[script]
    assert f"import {script[:-3]} as {alias}" in cells, f"{script}: notebook does not import it"
    missing = {f for f in used if f"{alias}.{f}" not in _calls(ast.parse(cells))}
    assert not missing, f"examples/{script}: main() calls {sorted(missing)}, its notebook not"


def test_legged_rollouts_figure(tmp_path):
    """The figure of ``legged_rollouts.main`` (the notebook draws its own), from small
    arrays of the shapes `drop_many` returns."""
    lr = load_example("legged_rollouts")
    rng = np.random.default_rng(0)
    qs, fn = rng.uniform(0.1, 0.3, (3, 6, 19)), rng.uniform(0.0, 30.0, (3, 5))
    lr.plot(qs, fn, 25.0, 2e-3, tmp_path / "legged.png")
    assert (tmp_path / "legged.png").stat().st_size > 0
