"""Command line entry point: ``shapevm`` and ``python -m shapevm``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shapevm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the built-in demonstration")
    demo.set_defaults(handler=_cmd_demo)
    dis = sub.add_parser(
        "dis",
        help="disassemble a bytecode file",
        description="Disassemble a bytecode file.",
        epilog="opcodes:\n" + _opcode_legend(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dis.add_argument("file", help="binary (.svbc) or text bytecode file")
    dis.add_argument("--offsets", action="store_true", help="show byte offsets in the file")
    dis.set_defaults(handler=_cmd_dis)
    validate = sub.add_parser(
        "validate",
        help="check a bytecode file (exit 0 valid, 1 invalid, 2 corrupt)",
        description="Load and verify a bytecode file: exit 0 when valid, 1 with the "
        "verifier's report, 2 when the file is corrupt or unreadable.",
    )
    validate.add_argument("file", help="binary (.svbc) or text bytecode file")
    validate.set_defaults(handler=_cmd_validate)
    run = sub.add_parser(
        "run",
        help="run an exported file on random inputs",
        description="Run an exported file on random inputs of the given shapes and print "
        "the result shapes and timings.",
    )
    run.add_argument("file", help="an exported function (.svbc) or an ONNX model (.onnx)")
    run.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="shape of an argument with symbolic dimensions (repeatable)",
    )
    run.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=N",
        help="value of a dimension variable passed as an integer argument",
    )
    run.add_argument("--repeat", type=int, default=10, help="number of calls to time")
    run.set_defaults(handler=_cmd_run)
    imp = sub.add_parser(
        "import",
        help="import an ONNX model as bytecode (.svbc)",
        description="Import an ONNX model as verified shapevm bytecode: exit 0 imported, 1 "
        "unsupported (every unsupported node listed), 2 unreadable file or bad argument.",
    )
    imp.add_argument("file", help="an ONNX model (.onnx)")
    imp.add_argument("-o", "--output", help="the bytecode file to write (default: FILE.svbc)")
    imp.add_argument(
        "--dims",
        action="append",
        default=[],
        metavar="INPUT=D0,D1,...",
        help="shape of a graph input, symbolic dimensions by name (repeatable)",
    )
    imp.add_argument(
        "--constraint",
        action="append",
        default=[],
        metavar="EXPR",
        help="a constraint on the dimensions, e.g. 'h >= 32' (repeatable)",
    )
    imp.set_defaults(handler=_cmd_import)
    bench = sub.add_parser(
        "bench",
        help="measure shapevm and its peers on the benchmark workloads",
        description=_bench_description(),
    )
    _add_bench_arguments(bench)
    bench.set_defaults(handler=_cmd_bench)
    from shapevm.tools.monitor import cli as monitor_cli

    monitor = sub.add_parser(
        "monitor",
        help="run a script with the JIT monitor page on",
        description=monitor_cli.DESCRIPTION,
    )
    monitor_cli.add_arguments(monitor)
    monitor.set_defaults(handler=monitor_cli.run)
    adapter = sub.add_parser(
        "debug-adapter",
        help="the bytecode debugger for editors: the Debug Adapter Protocol over stdio",
        description="Speak the Debug Adapter Protocol on standard input and output: "
        "breakpoints and stepping over a program's bytecode, registers with their shapes "
        "(docs/debugger.md). Editors start it; VS Code through editors/vscode.",
    )
    adapter.add_argument(
        "--port",
        type=int,
        default=None,
        help="serve sessions on this TCP port of 127.0.0.1 instead (0: any free port)",
    )
    adapter.set_defaults(handler=_cmd_debug_adapter)
    from shapevm.serve import server as serve_cli

    serve = sub.add_parser(
        "serve",
        help="serve models over HTTP (KServe V2 protocol; pip install 'shapevm[serve]')",
        description=serve_cli.DESCRIPTION,
    )
    serve_cli.add_arguments(serve)
    serve.set_defaults(handler=serve_cli.run)
    return parser


def _cmd_debug_adapter(args: argparse.Namespace) -> int:
    from shapevm.tools.debug.adapter import main as adapter_main

    return adapter_main(args.port)


def _cmd_run(args: argparse.Namespace) -> int:
    from shapevm.tools.run import run_file

    return run_file(args.file, args.shape, args.dim, args.repeat)


def _cmd_import(args: argparse.Namespace) -> int:
    from shapevm.tools.onnx_import import run_import

    return run_import(args.file, args.output, args.dims, args.constraint)


def _cmd_demo(args: argparse.Namespace) -> int:
    from shapevm.tools.demo import run_demo

    return run_demo()


def _opcode_legend() -> str:
    from shapevm.tools.dis import opcode_legend

    return opcode_legend()


def _cmd_dis(args: argparse.Namespace) -> int:
    from shapevm.tools.dis import run_dis

    return run_dis(args.file, args.offsets)


def _cmd_validate(args: argparse.Namespace) -> int:
    from shapevm.tools.validate import run_validate

    return run_validate(args.file)


def _bench_description() -> str:
    from shapevm.tools.bench.cli import DESCRIPTION

    return DESCRIPTION


def _add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    from shapevm.tools.bench.cli import add_arguments

    add_arguments(parser)


def _cmd_bench(args: argparse.Namespace) -> int:
    from shapevm.tools.bench.cli import run

    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except BrokenPipeError:  # output piped into a reader that stopped early (`| head`)
        sys.stdout = open(os.devnull, "w")
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
