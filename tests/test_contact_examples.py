"""The constrained-dynamics examples, run in-process in quick mode, and their figures.

``examples/four_bar_linkage.py`` and ``examples/slider_crank.py`` (loop closures,
assembly, RK4 rollouts with Baumgarte stabilisation) and ``examples/humanoid_standing.py``
(two soles in contact, contact-consistent gravity compensation): each ``main(["--quick"])``
returns its key figures, checked here against the physics they claim.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import load_example

_RUNS: dict = {}


def _quick(name, capsys):
    """``(module, figures)`` of ``main(["--quick"])``, run once per session."""
    if name not in _RUNS:
        module = load_example(name)
        out = module.main(["--quick"])
        printed = capsys.readouterr().out.strip().splitlines()
        assert printed and printed[-1].startswith("summary:"), printed[-3:]
        _RUNS[name] = module, out
    return _RUNS[name]


@pytest.mark.parametrize("name", ["four_bar_linkage", "slider_crank"])
def test_loop_closure_drift_and_energy(name, capsys):
    """Loops stay closed (position and velocity residuals bounded, and Baumgarte does
    better than no stabilisation), energy is conserved and the crank turns periodically."""
    _, out = _quick(name, capsys)
    assert out["max_phi"] < 1e-7, out["max_phi"]
    assert out["max_velocity_residual"] < 1e-6, out["max_velocity_residual"]
    assert out["max_phi"] < 0.2 * out["max_phi_unstabilised"], (
        out["max_phi"], out["max_phi_unstabilised"])
    # no damping, ideal joints: the loop force does no work (RK4 error only)
    assert out["energy_drift_relative"] < 1e-5, out["energy_drift_relative"]
    assert out["crank_turns"] >= 2, out["crank_periods"]
    assert out["period_spread"] < 1e-4, out["crank_periods"]


def test_four_bar_freudenstein(capsys):
    """The simulated crank and rocker angles satisfy Freudenstein's closed-form relation."""
    _, out = _quick("four_bar_linkage", capsys)
    assert out["freudenstein_residual"] < 1e-6, out["freudenstein_residual"]


def test_slider_crank_closed_form(capsys):
    """Slider position and velocity follow x(theta) = r cos(theta) + sqrt(l^2 - r^2 sin^2(theta))."""
    mod, out = _quick("slider_crank", capsys)
    assert out["slider_position_error"] < 1e-7, out["slider_position_error"]
    assert out["slider_velocity_error"] < 1e-5, out["slider_velocity_error"]
    lo, hi = out["slider_stroke"]  # the crank turns fully: the whole stroke l - r .. l + r
    np.testing.assert_allclose([lo, hi], [mod.L_ROD - mod.R_CRANK, mod.L_ROD + mod.R_CRANK], atol=1e-4)


def test_humanoid_standing(capsys):
    """Contact forces carry the weight inside the friction cones, the robot stays still."""
    mod, out = _quick("humanoid_standing", capsys)
    mass = float(np.sum(np.asarray(mod.jaxrbd.models.humanoid().inertia)[1:, 0]))
    assert out["weight"] == pytest.approx(mass * 9.81, rel=1e-12)
    assert abs(out["vertical_force_sum"] - out["weight"]) < 1e-8 * out["weight"]
    assert out["base_residual"] < 1e-9
    for method, qdd in out["qdd_at_rest"].items():  # all methods, redundant contact set
        assert qdd < 1e-8, (method, qdd)
    assert out["lam_gap"] < 1e-8  # forward dynamics returns the designed forces
    assert out["min_normal_force"] > 50.0  # every corner pushes, over the whole rollout
    assert out["max_friction_ratio"] < 0.7  # friction cones (mu = 0.7) hold
    assert out["max_weight_error_rollout"] < 1e-6
    assert out["base_drift"] < 1e-8, out["base_drift"]
    assert out["base_rotation"] < 1e-8, out["base_rotation"]
    assert out["max_phi"] < 1e-10
