"""Command line entry point: ``shapevm`` and ``python -m shapevm``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shapevm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the built-in demonstration")
    demo.set_defaults(handler=_cmd_demo)
    return parser


def _cmd_demo(args: argparse.Namespace) -> int:
    from shapevm.tools.demo import run_demo

    return run_demo()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
