"""Compare the compiled programs of two checkouts of jaxrbd, instruction by instruction.

A refactor that moves code without changing what it computes should leave XLA's
optimised programs unchanged; when they are, no benchmark row can have moved beyond
noise, whatever the timings of one session say. This script compiles a fixed set of
programs (forward and inverse dynamics, the mass matrix, the forward-dynamics
derivatives and a gradient through forward dynamics; one state and vmapped over four)
on talos and solo12 in each checkout, in a subprocess per checkout, strips what
depends on file names (source metadata, stack-frame ids, the module name), and reports
which programs differ.

Run from the repository root, e.g. against the commit before a refactor:

    git worktree add /tmp/before <commit>
    PYTHONPATH=. python benchmarks/compare_programs.py /tmp/before .

Exit status 0 when every program is identical, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
ROBOTS = ("talos", "solo12")

# ruff: noqa: E501
_WORKER = r"""
import hashlib, json, re, sys
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import jaxrbd

def normalise(text):
    keep = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("FileNames", "FunctionNames", "FileLocations", "StackFrames")):
            continue
        if re.match(r"^\d+ ", s):  # entries of the debug tables above
            continue
        line = re.sub(r",?\s*metadata=\{[^}]*\}", "", line)
        line = re.sub(r",?\s*stack_frame_id=\d+", "", line)
        keep.append(re.sub(r"^HloModule \S+", "HloModule", line))
    return "\n".join(keep)

out = {}
for robot in ROBOTS:
    m = jaxrbd.load_urdf(f"{DATA}/{robot}.urdf", floating_base=True)
    q = jnp.stack([jaxrbd.random_configuration(m, jax.random.PRNGKey(i)) for i in range(4)])
    v = jnp.asarray(np.random.default_rng(0).standard_normal((4, m.nv)))
    fns = {
        "forward_dynamics": lambda m, q, v: jaxrbd.forward_dynamics(m, q, v, v),
        "inverse_dynamics": lambda m, q, v: jaxrbd.inverse_dynamics(m, q, v, v),
        "mass_matrix": lambda m, q, v: jaxrbd.mass_matrix(m, q),
        "forward_dynamics_derivatives": lambda m, q, v: jaxrbd.forward_dynamics_derivatives(m, q, v, v),
        "grad_forward_dynamics": lambda m, q, v: jax.grad(lambda t: jaxrbd.forward_dynamics(m, q, v, t).sum())(v),
    }
    for name, f in fns.items():
        for tag, g, args in (("one", f, (m, q[0], v[0])), ("vmap", jax.vmap(f, (None, 0, 0)), (m, q, v))):
            text = normalise(jax.jit(g).lower(*args).compile().as_text())
            out[f"{robot} {name} {tag}"] = hashlib.sha256(text.encode()).hexdigest()
print(json.dumps(out))
"""


def programs(checkout: Path) -> dict[str, str]:
    """The digests of the normalised programs compiled from ``checkout``."""
    code = f"DATA = {str(DATA)!r}\nROBOTS = {ROBOTS!r}\n" + _WORKER
    env = dict(os.environ, PYTHONPATH=str(checkout.resolve()))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=checkout)
    if res.returncode:
        raise SystemExit(f"compiling in {checkout} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="checkout A (e.g. a git worktree)")
    ap.add_argument("after", type=Path, help="checkout B")
    args = ap.parse_args(argv)
    a, b = programs(args.before), programs(args.after)
    differ = [k for k in a if a[k] != b.get(k)]
    for k in a:
        print(f"{k:45s} {'identical' if k not in differ else 'DIFFERENT'}")
    print(f"{len(a) - len(differ)} of {len(a)} programs identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
