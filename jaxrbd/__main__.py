"""Command line: ``python -m jaxrbd <command>``.

Commands:
    demo     a tour of the library on RBDL's triple pendulum and the bundled humanoid
    info     the body tree, sizes, masses and joint limits of a URDF or MJCF robot
    bench    batched timings of the main algorithms on a URDF or MJCF robot
    view     the robot in the browser (meshes, a slider per joint; needs jaxrbd[viewer])
    version  print the versions of jaxrbd, JAX and equinox, and the JAX devices
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import equinox as eqx
import jax

from . import __version__
from ._cli_tools import bench, info, view
from ._demo import run


def _demo(args: argparse.Namespace) -> int:
    run(
        models=args.model or ("triple_pendulum", "humanoid"),
        batch=args.batch,
        repeats=args.repeats,
        seed=args.seed,
        float32=args.float32,
    )
    return 0


def _info(args: argparse.Namespace) -> int:
    try:
        print(info(args.urdf, floating_base=args.floating_base))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _bench(args: argparse.Namespace) -> int:
    try:
        bench(args.urdf, floating_base=args.floating_base, batches=args.batch or (1, 128, 4096),
              repeats=args.repeats, float32=args.float32)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _view(args: argparse.Namespace) -> int:
    try:
        return view(args.robot, floating_base=args.floating_base, host=args.host, port=args.port,
                    package_dirs=args.package_dir or (), collision=args.collision,
                    timeout=args.timeout)
    except (OSError, ValueError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _version(args: argparse.Namespace) -> int:
    print(f"jaxrbd {__version__}, jax {jax.__version__}, equinox {eqx.__version__}")
    print(f"devices: {', '.join(str(d) for d in jax.devices())}")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jaxrbd",
        description="jaxrbd: differentiable, vectorised rigid-body dynamics in JAX.",
    )
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="forward/inverse dynamics, batching and gradients on two bundled models",
        description=(
            "Builds RBDL's triple pendulum and the bundled humanoid and, for each, prints "
            "the model, forward dynamics at a random state, the inverse-dynamics round "
            "trip, a batched call (jax.vmap and jaxrbd.batched) with compile and "
            "per-sample times, and gradients (jax.grad, jax.jacfwd). Runs in float64."
        ),
    )
    demo.add_argument(
        "--model",
        action="append",
        choices=("triple_pendulum", "humanoid"),
        help="run only this model (repeatable; default: both)",
    )
    demo.add_argument("--batch", type=_positive_int, default=4096,
                      help="number of states in the batched call (default: 4096)")
    demo.add_argument("--repeats", type=_positive_int, default=3,
                      help="timed repeats; the median is reported (default: 3)")
    demo.add_argument("--seed", type=int, default=0, help="PRNG seed (default: 0)")
    demo.add_argument("--float32", action="store_true",
                      help="run in JAX's default float32 instead of float64")
    demo.set_defaults(func=_demo)

    robot_help = "path to a URDF (.urdf) or MJCF (.xml, .mjcf) file"
    base_help = "attach the URDF root link by a free joint"
    info = sub.add_parser("info", help="tree, nq/nv, masses and limits of a URDF or MJCF robot")
    info.add_argument("urdf", metavar="robot", help=robot_help)
    info.add_argument("--floating-base", action="store_true", help=base_help)
    info.set_defaults(func=_info)

    bench = sub.add_parser("bench", help="batched timings of the main algorithms on a robot")
    bench.add_argument("urdf", metavar="robot", help=robot_help)
    bench.add_argument("--floating-base", action="store_true", help=base_help)
    bench.add_argument("--batch", type=_positive_int, action="append",
                       help="batch size (repeatable; default: 1, 128, 4096)")
    bench.add_argument("--repeats", type=_positive_int, default=5,
                       help="timed repeats; the median is reported (default: 5)")
    bench.add_argument("--float32", action="store_true", help="float32 instead of float64")
    bench.set_defaults(func=_bench)

    view = sub.add_parser(
        "view",
        help="the robot in the browser, a slider per joint (pip install jaxrbd[viewer])",
        description=(
            "Serves the robot's meshes (URDF <visual> or MJCF geoms; link capsules where "
            "there are none) with viser and prints the address to open in a browser. "
            "package:// meshes are searched in the --package-dir directories and above "
            "the file, never downloaded."
        ),
    )
    view.add_argument("robot", help=robot_help)
    view.add_argument("--floating-base", action="store_true", help=base_help)
    view.add_argument("--port", type=int, default=8080,
                      help="port (default: 8080; the next free one when busy)")
    view.add_argument("--host", default="127.0.0.1",
                      help="interface (default: 127.0.0.1, this machine only; 0.0.0.0: all)")
    view.add_argument("--package-dir", action="append", metavar="DIR",
                      help="directory holding the packages of package:// meshes (repeatable)")
    view.add_argument("--collision", action="store_true",
                      help="show the URDF collision geometry instead of the visual one")
    view.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                      help="stop serving after this many seconds (default: until Ctrl-C)")
    view.set_defaults(func=_view)

    version = sub.add_parser("version", help="print versions and JAX devices")
    version.set_defaults(func=_version)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
