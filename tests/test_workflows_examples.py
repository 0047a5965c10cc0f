"""The trajectory-optimisation and batched-rollout examples, run in quick mode in-process.

Each script's ``main(["--quick", ...])`` returns its key figures; the checks are on those
figures (the objective and the constraint violations shrink, results are finite, the
batch has the promised shapes, throughput is positive, physics checks hold). The scripts
are imported from ``examples/`` by path (they are not a package).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import load_example


@pytest.fixture(scope="module")
def trajopt(tmp_path_factory):
    plot = tmp_path_factory.mktemp("trajopt") / "convergence.png"
    return load_example("trajectory_optimization").main(["--quick", "--plot", str(plot)]), plot


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory):
    plot = tmp_path_factory.mktemp("rollouts") / "distribution.png"
    return load_example("batched_rollouts").main(["--quick", "--plot", str(plot)]), plot


def test_trajectory_optimization_quick(trajopt):
    result, plot = trajopt
    cart, panda = result["cart_pole"], result["panda"]
    for r in (cart, panda):
        figures = [r["objective_start"], r["objective"], r["defect_start"], r["defect"]]
        assert all(math.isfinite(x) for x in figures), figures
        assert len(r["history"]) >= 3
    # multiple shooting: from the interpolated guess (defects ~14) the continuity defects
    # and the final state error fall by over two orders of magnitude; the stitched
    # shooting intervals end upright (theta = pi) at rest
    assert cart["defect"] < 3e-3 * cart["defect_start"], (cart["defect"], cart["defect_start"])
    assert cart["state_error"] < 0.05, cart["state_error"]
    assert cart["objective"] > 0  # the swing-up needs effort
    assert cart["q"].shape == (cart["t"].shape[0], 2)
    assert np.isfinite(cart["q"]).all() and np.isfinite(cart["u"]).all()
    assert abs(cart["q"][-1, 1] - np.pi) < 0.05, cart["q"][-1]
    # panda reaching: the hand ends on the target (0.1 mm) with less effort than holding
    # still, and forward dynamics replaying the torques lands on the same point
    assert panda["position_error"] < 1e-4, panda["position_error"]
    assert panda["torque_cost"] < panda["torque_cost_gravity"]
    assert panda["replay_position_error"] < 1e-3, panda["replay_position_error"]
    assert panda["feedback_share"] < 0.01, panda["feedback_share"]
    assert panda["final_speed"] < 1e-2
    assert panda["max_torque_ratio"] < 1.0
    assert plot.is_file() and plot.stat().st_size > 0


def test_batched_rollouts_quick(rollouts):
    result, plot = rollouts
    B, n = result["batch"], result["n_steps"]
    assert result["shape_q"] == (B, n + 1, 19)
    assert result["shape_qd"] == (B, n + 1, 18)
    assert result["steps_per_s"] > 0 and result["states_per_s"] > 0
    assert result["compile_s"] > 0 and result["run_s"] > 0
    stats = result["stats"]
    assert stats["finite"]
    assert stats["quat_norm_error"] < 1e-12
    # free fall without contacts: the CoM follows the ballistic parabola (RK4, h = 2 ms)
    assert result["ballistic_error"] < 1e-5, result["ballistic_error"]
    # the mean base height drops (gravity) and the PD controller shrinks the joint spread
    assert stats["height_mean"][-1] < stats["height_mean"][0]
    assert stats["joint_spread"][-1] < 0.5 * stats["joint_spread"][0]
    assert stats["t"].shape == (n + 1,) and stats["height_std"].shape == (n + 1,)
    assert plot.is_file() and plot.stat().st_size > 0
