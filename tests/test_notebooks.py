"""The example notebooks (issue 6): current, stored without outputs, and executing cleanly.

Each ``examples/*.ipynb`` runs top to bottom in a fresh ``python3`` kernel (nbclient)
with ``JAXRBD_NOTEBOOK_QUICK=1``, the notebooks' switch to reduced sizes. The kernel
inherits this process's environment, so the XLA flags set by ``conftest.py`` (cheaper
compilation) apply there too. Skipped when nbclient, nbformat or ipykernel is missing.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
CELL_TIMEOUT = 900  # seconds per cell: compilation on 2 shared cores is slow
QUICK_SWITCH = 'QUICK = os.environ.get("JAXRBD_NOTEBOOK_QUICK", "0") == "1"'


def _generator():
    spec = importlib.util.spec_from_file_location("make_notebooks",
                                                  EXAMPLES / "make_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_has_its_notebook():
    """Each workflow script of issue 6 that exists has a notebook, written by the generator
    from its current cells (``python examples/make_notebooks.py --write`` to refresh)."""
    generator = _generator()
    expected = {f"{name}.ipynb" for name in generator.available()}
    assert expected, "no example script found for any notebook"
    assert expected <= {p.name for p in NOTEBOOKS}
    assert generator.main([]) == 0, "a notebook differs from make_notebooks.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_stored_clean(path):
    """Outputs stripped, the python3 kernel, and the size switch in the first code cell."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code cell"
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, (
            f"{path.name}: cell {cell.id} has stored outputs")
    assert QUICK_SWITCH in code[0].source, f"{path.name}: no size switch in the first cell"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, monkeypatch):
    """Every cell runs without error on the reduced sizes and the plots are produced."""
    monkeypatch.setenv("JAXRBD_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("PYTHONPATH",
                       os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3",
        resources={"metadata": {"path": str(EXAMPLES)}},
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as err:
        pytest.fail(f"{path.name} failed:\n{err}")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: {errors[0].ename}: {errors[0].evalue}"
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, f"{path.name} produced no figure"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "QUICK = True" in text, f"{path.name} did not run in quick mode"
