"""The server as a Ray Serve application: the same V2 routes from every replica.

``deployment(model, num_replicas=4)`` returns a Ray Serve application (``pip install
'shapevm[ray]'``) whose replicas each load the models and run the same Starlette
application as ``shapevm serve`` (`shapevm.serve.app`): their own dynamic batcher, their
own ``/metrics``. Ray's HTTP proxy spreads requests over the replicas.

    from ray import serve
    from shapevm.serve.ray import deployment
    serve.run(deployment("mlp.svbc", num_replicas=2), route_prefix="/")

A model given as a path is read by each replica from that path on its own node (put it
where every node sees it, e.g. shared storage); an `Exported` is shipped in the
application's arguments (its bytes), so it needs no shared storage. See ``docs/serve.md``
for running it on a cluster.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from shapevm.frontend.export import Exported, deserialize
from shapevm.serve.model import ServeOptions

ModelArg = str | os.PathLike[str] | Exported


@dataclass(frozen=True)
class _Replica:
    """What each replica needs to build its application: plain, picklable data."""

    models: tuple[tuple[str | None, str | bytes], ...]  # (name, path or serialized Exported)
    options: ServeOptions

    def build(self) -> Any:
        from shapevm.serve.app import create_app

        sources: list[tuple[str | None, Any]] = []
        for name, source in self.models:
            if isinstance(source, bytes):
                exp = deserialize(source)
                sources.append((name or exp.fun_name, exp))
            else:
                sources.append((name, source))
        if any(name is None for name, _ in sources):
            return create_app([s for _, s in sources], self.options)
        return create_app({str(name): s for name, s in sources}, self.options)


def deployment(
    model: ModelArg | Sequence[ModelArg],
    *,
    names: Sequence[str] | None = None,
    num_replicas: int | str = 1,
    options: ServeOptions | None = None,
    ray_actor_options: dict[str, Any] | None = None,
    name: str = "shapevm",
    **deployment_options: Any,
) -> Any:
    """A Ray Serve application serving ``model`` (one path or `Exported`, or a list) with
    ``num_replicas`` replicas (``"auto"`` lets Ray autoscale); ``ray_actor_options`` and
    other keywords go to ``ray.serve.deployment``. Run it with ``serve.run(app,
    route_prefix="/")`` or ``shapevm serve --ray``."""
    from ray import serve

    models = [model] if isinstance(model, (str, os.PathLike, Exported)) else list(model)
    if names is not None and len(names) != len(models):
        raise ValueError(f"{len(names)} names for {len(models)} models: give one per model")
    spec = _Replica(
        tuple((names[i] if names else None, _shippable(m)) for i, m in enumerate(models)),
        options or ServeOptions(),
    )

    def build_app() -> Any:
        return spec.build()

    ingress = serve.ingress(build_app)()
    make = serve.deployment(
        name=name,
        num_replicas=num_replicas,
        ray_actor_options=ray_actor_options or {"num_cpus": 1},
        **deployment_options,
    )
    return make(ingress).bind()


def build(args: dict[str, str]) -> Any:
    """The application builder for Ray's own tools: ``serve run shapevm.serve.ray:build
    models=/shared/mlp.svbc num_replicas=2``, or ``import_path: shapevm.serve.ray:build``
    with ``args`` in a ``serve deploy`` config file. ``models`` and ``names`` are
    comma-separated; ``num_replicas``, ``max_batch_size``, ``max_batch_delay_ms``,
    ``max_queue``, ``max_body_mb`` and ``jit`` (``true``/``false``) are optional."""
    known = {"models", "names", "num_replicas", "max_batch_size", "max_batch_delay_ms",
             "max_queue", "max_body_mb", "jit"}  # fmt: skip
    unknown = sorted(set(args) - known)
    if unknown or "models" not in args:
        raise ValueError(
            f"shapevm.serve.ray:build takes {', '.join(sorted(known))} (models is required); "
            f"found {', '.join(unknown) or 'no models'}"
        )
    options = ServeOptions(
        max_batch_size=int(args.get("max_batch_size", ServeOptions.max_batch_size)),
        max_batch_delay_ms=float(args.get("max_batch_delay_ms", ServeOptions.max_batch_delay_ms)),
        max_queue=int(args.get("max_queue", ServeOptions.max_queue)),
        max_body_mb=float(args.get("max_body_mb", ServeOptions.max_body_mb)),
        jit=str(args.get("jit", "true")).lower() not in ("false", "0", "no"),
    )
    replicas = args.get("num_replicas", "1")
    return deployment(
        [m.strip() for m in str(args["models"]).split(",")],
        names=[n.strip() for n in str(args["names"]).split(",")] if "names" in args else None,
        num_replicas=replicas if replicas == "auto" else int(replicas),
        options=options,
    )


def _shippable(model: ModelArg) -> str | bytes:
    if isinstance(model, Exported):
        return model.serialize()
    path = os.path.abspath(os.fspath(model))
    if not os.path.exists(path):
        raise FileNotFoundError(f"no model file {path}")
    return path


def run_cli(
    paths: Sequence[str],
    names: Sequence[str | None],
    options: ServeOptions,
    args: argparse.Namespace,
    errors: TextIO,
) -> int:
    """``shapevm serve --ray``: deploy on Ray and block until SIGINT/SIGTERM."""
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        print(f"shapevm serve --ray: {exc}\n  fix: pip install 'shapevm[ray]'", file=errors)
        return 2
    given = [n for n in names if n]
    try:
        app = deployment(
            list(paths),
            names=given or None,
            num_replicas=args.num_replicas,
            options=options,
            logging_config={"log_level": args.log_level.upper()},  # no access log by default
        )
    except (OSError, ValueError) as exc:
        print(f"shapevm serve --ray: {exc}", file=errors)
        return 2
    ray.init(address=args.ray_address, include_dashboard=False, logging_level=logging.WARNING)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": args.host, "port": args.port})
        serve.run(app, name="shapevm", route_prefix="/")
        print(
            f"shapevm serve --ray: http://{args.host}:{args.port} "
            f"({args.num_replicas} replicas; Ctrl-C or SIGTERM to stop)",
            file=errors,
            flush=True,
        )
        stop.wait()
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0
