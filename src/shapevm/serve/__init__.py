"""``shapevm.serve``: an inference server speaking the KServe V2 protocol.

Install with ``pip install 'shapevm[serve]'``; ``shapevm serve model.svbc`` runs it, and
``tritonclient.http`` (or any KServe V2 client) talks to it. Requests of changing shapes
are joined along their batch dimension where that changes no bit of any result
(`shapevm.serve.batching`); `shapevm.serve.ray.deployment` runs replicas on Ray Serve.
See ``docs/serve.md``.

The names below are imported on first use, so that ``shapevm serve --help`` and the rest of
shapevm work without the HTTP libraries installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shapevm.serve.app import ModelServer, build_server, create_app
    from shapevm.serve.model import ServedModel, ServeOptions, load_model
    from shapevm.serve.protocol import V2Error
    from shapevm.serve.server import serve

_MODULES = {
    "ModelServer": "app",
    "build_server": "app",
    "create_app": "app",
    "ServedModel": "model",
    "ServeOptions": "model",
    "load_model": "model",
    "V2Error": "protocol",
    "serve": "server",
}

__all__ = [
    "ModelServer",
    "ServeOptions",
    "ServedModel",
    "V2Error",
    "build_server",
    "create_app",
    "load_model",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'shapevm.serve' has no attribute {name!r}")
    return getattr(importlib.import_module(f"shapevm.serve.{module}"), name)
