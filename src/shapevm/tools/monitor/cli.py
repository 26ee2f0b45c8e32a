"""``shapevm monitor [--host H] [--port P] script.py [args...]``: run a script with the
monitor page on, the way ``python script.py args...`` runs it."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import threading
import traceback

from shapevm.tools.monitor import MonitorError, start, stop

DESCRIPTION = (
    "Run a Python script with the monitor page on: its jitted functions, their variants, "
    "the compile queue, memory pools, a latency chart and each variant's code, live in a "
    "browser. Prints the page's URL on standard error before the script starts."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    parser.add_argument(
        "--token", default=None, help="token the URL must carry (made for non-local hosts)"
    )
    parser.add_argument(
        "--keep-open",
        action="store_true",
        help="keep serving after the script ends, until Ctrl-C",
    )
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")


def run(args: argparse.Namespace) -> int:
    if not os.path.isfile(args.script):
        print(f"shapevm monitor: no such script: {args.script}", file=sys.stderr)
        return 2
    try:
        url = start(args.host, args.port, args.token)
    except MonitorError as exc:
        print(f"shapevm monitor: {exc}", file=sys.stderr)
        return 2
    print(f"shapevm monitor: {url}", file=sys.stderr, flush=True)
    code = _run_script(args.script, args.args)
    if args.keep_open:
        print(
            f"shapevm monitor: the script ended (exit {code}); the page stays at {url} "
            "until Ctrl-C",
            file=sys.stderr,
            flush=True,
        )
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    stop()
    return code


def _run_script(path: str, argv: list[str]) -> int:
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        return 130
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0
