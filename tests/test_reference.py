"""Dynamics and link poses against Pinocchio 4.1 (``tests/data/<robot>.npz``).

Every quantity of every sample must match to ``1e-9`` relative to ``max(1, max|ref|)``
(Pinocchio and jaxrbd agree to ~1e-13 in float64; forward dynamics on talos, whose mass
matrix has condition number 5e5, is the loosest at a few 1e-12).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import REFERENCE_ROBOTS, relative_error

TOL = 1e-9
ROBOTS = [name for name, _ in REFERENCE_ROBOTS]


def _check(robot, key, s, ours, ref):
    ours, ref = np.asarray(ours), np.asarray(ref)
    assert ours.shape == ref.shape, f"{robot}/{key}[{s}]: shape {ours.shape} vs {ref.shape}"
    err = relative_error(ours, ref)
    assert err <= TOL, (
        f"{robot}/{key} sample {s}: relative error {err:.3e} > {TOL:.0e}; "
        f"ours={ours.ravel()[:6]}..., ref={ref.ravel()[:6]}..."
    )


# (reference key, function, argument keys): each function takes (model, q, *vectors)
CASES = {
    "rnea": ("inverse_dynamics", ("v", "a")),
    "aba": ("forward_dynamics", ("v", "tau")),
    "nle": ("bias_forces", ("v",)),
    "gravity": ("gravity_forces", ()),
}


@pytest.mark.parametrize("key", list(CASES))
@pytest.mark.parametrize("robot", ROBOTS)
def test_joint_space_vectors(robots, jitted, robot, key):
    r = robots[robot]
    fname, args = CASES[key]
    f = jitted[fname]
    for s in range(r.nsamples):
        ours = f(r.model, r.q(s), *(r.v(a, s) for a in args))
        _check(robot, key, s, ours, r.v(key, s))


@pytest.mark.parametrize("robot", ROBOTS)
def test_mass_matrix(robots, jitted, robot):
    r = robots[robot]
    for s in range(r.nsamples):
        _check(robot, "crba", s, jitted["mass_matrix"](r.model, r.q(s)), r.matrix("crba", s))


@pytest.mark.parametrize("robot", ROBOTS)
def test_link_poses(robots, jitted, robot):
    """Every URDF link (merged ones included) by name: rotation link->world and origin."""
    r = robots[robot]
    links = r.ref["link_names"].tolist()
    ids = np.array([r.model.body_id(name) for name in links])
    for s in range(r.nsamples):
        R, p = jitted["forward_kinematics"](r.model, r.q(s))
        R, p = np.asarray(R)[ids], np.asarray(p)[ids]
        for k, name in enumerate(links):
            _check(robot, f"R[{name}]", s, R[k], r.ref["R"][s, k])
            _check(robot, f"p[{name}]", s, p[k], r.ref["p"][s, k])


@pytest.mark.parametrize("robot", ROBOTS)
def test_reference_identities(robots, jitted, robot):
    """``H a + nle = rnea`` with our H and nle at the reference samples (a cheap
    self-consistency check that uses the functions compiled above)."""
    r = robots[robot]
    for s in range(0, r.nsamples, 5):
        q, v, a = r.q(s), r.v("v", s), r.v("a", s)
        H = np.asarray(jitted["mass_matrix"](r.model, q))
        C = np.asarray(jitted["bias_forces"](r.model, q, v))
        _check(robot, "H a + C", s, H @ a + C, r.v("rnea", s))
