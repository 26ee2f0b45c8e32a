"""Running the application with uvicorn, and the ``shapevm serve`` command line.

``shapevm serve MODEL [MODEL...]`` loads each model (``.svbc``, or ``.onnx`` with
``--runtime onnxruntime``), checks how its requests may be batched, prints one line per
model and the address, then serves until SIGINT or SIGTERM. On SIGTERM the server stops
accepting connections, reports not ready, finishes the requests in flight (up to
``--graceful-timeout-s``) and exits 0. ``--ray`` runs the same application as a Ray Serve
deployment instead (`shapevm.serve.ray`).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from shapevm.serve.model import RUNTIMES, ServedModel, ServeOptions, load_model

if TYPE_CHECKING:
    from shapevm.serve.app import ModelServer, ModelSource

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
DESCRIPTION = (
    "Serve models over HTTP with the KServe V2 inference protocol (what Triton, KServe and "
    "tritonclient speak), with dynamic batching and Prometheus metrics at /metrics."
)


def serve(
    models: Sequence[ModelSource] | ModelServer,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    options: ServeOptions | None = None,
    log_level: str = "warning",
    announce: TextIO | None = None,
) -> None:
    """Serve ``models`` (paths, `Exported`s or `ServedModel`s) until SIGINT/SIGTERM, as
    ``shapevm serve`` does (``port=0``: any free port; the address is printed)::

        from shapevm.serve import ServeOptions, serve
        serve(["mlp.svbc"], port=8000, options=ServeOptions(max_batch_size=64))
    """
    import uvicorn

    from shapevm.serve.app import ModelServer, build_server, create_app

    server = models if isinstance(models, ModelServer) else build_server(models, options)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)  # connections made before uvicorn's loop runs wait in the backlog
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(server),
        host=host,
        port=bound,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=int(server.options.graceful_timeout_s) or None,
    )
    out = announce or sys.stderr
    for model in server.models.values():
        print(describe(model), file=out)
    print(f"shapevm serve: http://{host}:{bound} (Ctrl-C or SIGTERM to stop)", file=out, flush=True)
    _uvicorn_server(config, server).run(sockets=[sock])
    print("shapevm serve: stopped", file=out, flush=True)


def _uvicorn_server(config: Any, server: ModelServer) -> Any:
    """uvicorn's server, reporting not ready as soon as a stop signal arrives, and exiting
    normally (status 0) once a stop signal has been handled gracefully."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            server.ready = False
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server(config)


def describe(model: ServedModel) -> str:
    """One line: the signature, the executor and how requests are batched."""
    r = model.runner
    sig = ", ".join(f"{t.name}: {t.dtype.name}[{', '.join(map(str, t.dims))}]" for t in r.inputs)
    outs = ", ".join(f"{t.dtype.name}[{', '.join(map(str, t.dims))}]" for t in r.outputs)
    where = f" where {', '.join(r.constraints)}" if r.constraints else ""
    info = model.batching_info()
    if info["enabled"]:
        failed = [c["reason"] for c in info["checked"] if not c["bit_identical"]]
        batching = (
            f"not joined: {failed[0]}"
            if failed
            else f"joined along {info['dimension']} up to {info['max_batch_size']} rows"
        )
    else:
        batching = f"not joined: {info['reason']}"
    return (
        f"model {model.name!r}: ({sig}) -> ({outs}){where}; {_executor(model)}; requests {batching}"
    )


def _executor(model: ServedModel) -> str:
    """The executor, and why a model warmed up on the JIT still runs in the interpreter."""
    info = model.runner.info()
    executor = str(info.get("executor", model.runner.platform))
    if model.warm_path == "interpreted" and "jit_failure" in info:
        reason = str(info["jit_failure"]).splitlines()[0]
        executor += f" (not compiled, calls interpreted: {reason})"
    return executor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = ServeOptions()
    parser.add_argument("models", nargs="+", metavar="MODEL", help=".svbc (or .onnx) file")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port)")
    parser.add_argument(
        "--name", action="append", default=[], help="model name, one per MODEL in order "
        "(default: the file's stem)",
    )  # fmt: skip
    parser.add_argument("--max-batch-size", type=int, default=d.max_batch_size,
                        help="rows of a joined call (1: no dynamic batching)")  # fmt: skip
    parser.add_argument("--max-batch-delay-ms", type=float, default=d.max_batch_delay_ms,
                        help="how long a request waits for others to join it")  # fmt: skip
    parser.add_argument("--max-queue", type=int, default=d.max_queue,
                        help="queued requests per model before answering 503")  # fmt: skip
    parser.add_argument("--max-body-mb", type=float, default=d.max_body_mb,
                        help="largest request body accepted")  # fmt: skip
    parser.add_argument("--no-jit", action="store_true", help="run the interpreter only")
    parser.add_argument("--runtime", choices=RUNTIMES, default=d.runtime,
                        help="onnxruntime: run .onnx files with ONNX Runtime")  # fmt: skip
    parser.add_argument("--threads", type=int, default=None,
                        help="ONNX Runtime's intra-op threads")  # fmt: skip
    parser.add_argument("--graceful-timeout-s", type=float, default=d.graceful_timeout_s,
                        help="on SIGTERM, how long to wait for requests in flight")  # fmt: skip
    parser.add_argument("--log-level", default="warning",
                        choices=["critical", "error", "warning", "info", "debug"])  # fmt: skip
    ray = parser.add_argument_group("Ray Serve (pip install 'shapevm[ray]')")
    ray.add_argument("--ray", action="store_true", help="run as a Ray Serve application")
    ray.add_argument("--num-replicas", type=int, default=1, help="replicas of the model server")
    ray.add_argument("--ray-address", default=None,
                     help="Ray cluster to join ('auto': the local `ray start` cluster; "
                     "default: start a local Ray)")  # fmt: skip


def run(args: argparse.Namespace, err: TextIO | None = None) -> int:
    """The ``shapevm serve`` command; returns the exit status."""
    errors = err or sys.stderr
    if args.name and len(args.name) != len(args.models):
        print(
            f"shapevm serve: {len(args.name)} --name for {len(args.models)} models: "
            "give one name per model, in order",
            file=errors,
        )
        return 2
    try:
        options = ServeOptions(
            max_batch_size=args.max_batch_size,
            max_batch_delay_ms=args.max_batch_delay_ms,
            max_queue=args.max_queue,
            max_body_mb=args.max_body_mb,
            jit=not args.no_jit,
            runtime=args.runtime,
            threads=args.threads,
            graceful_timeout_s=args.graceful_timeout_s,
        )
    except ValueError as exc:
        print(f"shapevm serve: {exc}", file=errors)
        return 2
    names = args.name or [None] * len(args.models)
    if args.ray:
        from shapevm.serve.ray import run_cli

        return run_cli(args.models, names, options, args, errors)
    try:
        from shapevm.serve.app import ModelServer
    except ImportError as exc:
        print(f"shapevm serve: {exc}\n  fix: pip install 'shapevm[serve]'", file=errors)
        return 2
    try:
        server = ModelServer(
            [load_model(p, n, options) for p, n in zip(args.models, names, strict=True)], options
        )
    except (OSError, ValueError, ImportError) as exc:
        print(f"shapevm serve: {exc}", file=errors)
        return 2
    try:
        serve(server, host=args.host, port=args.port, log_level=args.log_level, announce=errors)
    except OSError as exc:
        print(f"shapevm serve: cannot listen on {args.host}:{args.port}: {exc}", file=errors)
        return 2
    return 0
