"""Command line: ``python -m prefixsum [demo|ptx|bench|student|grade] ...``; ``--help`` on each."""

import argparse
import sys

from . import grade


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m prefixsum", description="Parallel prefix sums with numba.cuda, for teaching."
    )
    commands = parser.add_subparsers(dest="command")
    demo = commands.add_parser("demo", help="run every algorithm against the reference and print a table (the default)")
    demo.add_argument("-n", type=int, default=None, help="array length (default: 1000 on the simulator, 2^22 on a GPU)")
    demo.add_argument("--algorithm", action="append", help="only these algorithms (repeatable)")
    ptx = commands.add_parser("ptx", help="compile every kernel to PTX for sm_75 and sm_90 (no GPU needed)")
    ptx.add_argument("--algorithm", action="append", help="only the kernels of these scans, no solver (repeatable)")
    ptx.add_argument("--keep", metavar="DIR", help="write each PTX into DIR, with DIR/index.json naming its kernel")
    commands.add_parser(
        "bench",
        help="time every scan on the GPU beside copy, torch.cumsum and cupy.cumsum (python -m prefixsum bench --help)",
        add_help=False,
    )
    student = commands.add_parser(
        "student", help="write the student version of instructor notebooks (solutions stripped, outputs cleared)"
    )
    student.add_argument("notebooks", nargs="+", help="instructor notebooks (.ipynb)")
    student.add_argument("--out", required=True, help="directory for the student versions")
    grade.add_parser(commands)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from . import bench

        return bench.main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "ptx":
        from . import ptx

        return ptx.main(
            [word for name in args.algorithm or () for word in ("--algorithm", name)]
            + (["--keep", args.keep] if args.keep else [])
        )
    if args.command == "student":
        from ..classroom import student

        for path in student.write_student_versions(args.notebooks, args.out):
            print(f"wrote {path}")
        return 0
    if args.command == "grade":
        return grade.main(args)
    from . import demo

    return demo.main(n=getattr(args, "n", None), algorithms=getattr(args, "algorithm", None))
