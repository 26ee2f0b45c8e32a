"""The HTTP application: KServe V2 routes on Starlette, plus ``/metrics``.

Routes (``[/versions/1]`` optional; every model has the one version ``1``):

- ``GET /v2``: server metadata (name, version, extensions: ``binary_tensor_data``);
- ``GET /v2/health/live``, ``GET /v2/health/ready`` (503 until the models are loaded and
  checked, and again once shutdown has begun);
- ``GET /v2/models/{name}[/versions/1]``: model metadata; ``.../ready``: model readiness;
- ``POST /v2/models/{name}[/versions/1]/infer``: inference, JSON or binary tensors,
  ``gzip``/``deflate`` request bodies (``Content-Encoding``) and responses
  (``Accept-Encoding``) as ``tritonclient`` sends and accepts them;
- ``GET /metrics``: Prometheus text format (`shapevm.serve.metrics`).

Errors are ``{"error": message}`` with status 400 (bad request: unknown model, wrong inputs,
malformed JSON or binary data, a body over the limit), 503 (the model's queue is full, or
the server is stopping) or 500 (the model failed on valid input).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import zlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from shapevm import __version__
from shapevm.frontend.export import Exported
from shapevm.runtime.interpreter import RuntimeOpError
from shapevm.serve.batcher import BatcherStats, Overloaded, Pending
from shapevm.serve.metrics import CONTENT_TYPE, ServerMetrics
from shapevm.serve.model import Prepared, ServedModel, ServeOptions, load_model
from shapevm.serve.protocol import (
    InferRequest,
    V2Error,
    bad_request,
    encode_infer_response,
    parse_infer_request,
)
from shapevm.serve.runners import Outputs
from shapevm.shapes import ShapeError

EXTENSIONS = ["binary_tensor_data"]
_OFF_LOOP_BYTES = 1 << 20
_T = TypeVar("_T")
# What a model raises on an input it cannot run (a data-dependent check, a shape): a 400.
_INPUT_ERRORS = (ShapeError, RuntimeOpError)


class _ModelFailure(Exception):
    """Anything else a model raised: a 500."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")


ModelSource = str | Exported | ServedModel


class ModelServer:
    """The models of one server, its options, metrics and readiness."""

    def __init__(self, models: Sequence[ServedModel], options: ServeOptions) -> None:
        self.options = options
        self.models: dict[str, ServedModel] = {}
        for m in models:
            if m.name in self.models:
                raise ValueError(f"two models are named {m.name!r}; give them names (--name)")
            self.models[m.name] = m
        self.metrics = ServerMetrics()
        self.metrics.watch(self._depths)
        self.ready = False

    def start(self) -> None:
        for m in self.models.values():
            m.start(self._on_call)
        self.ready = True

    def stop(self) -> None:
        self.ready = False
        for m in self.models.values():
            m.stop(self.options.graceful_timeout_s)

    def model(self, name: str, version: str | None = None) -> ServedModel:
        model = self.models.get(name)
        if model is None:
            raise bad_request(
                f"unknown model {name!r}",
                expected=", ".join(sorted(self.models)) or "no models are served",
            )
        if version not in (None, "", model.version):
            raise bad_request(
                f"model {name!r} has no version {version!r}", expected=f"'{model.version}'"
            )
        return model

    def _depths(self) -> dict[str, int]:
        return {n: m.batcher.depth if m.batcher else 0 for n, m in self.models.items()}

    def _on_call(self, name: str, stats: BatcherStats) -> None:
        m = self.metrics
        if stats.fallback:
            m.fallbacks.labels(name, stats.fallback).inc()
            return
        series = m.model(name)
        series.batch_requests.observe(stats.requests)
        series.batch_rows.observe(stats.rows)


def create_app(
    models: ModelServer | Sequence[ModelSource] | Mapping[str, ModelSource],
    options: ServeOptions | None = None,
) -> Starlette:
    """The ASGI application serving ``models``: paths of ``.svbc``/``.onnx`` files,
    `Exported` functions or `ServedModel`s (a mapping gives their names), or a
    `ModelServer`. Serve it with any ASGI server, e.g. ``uvicorn.run(app)``; its lifespan
    starts and stops the models' workers.

    >>> import numpy as np, shapevm as sv
    >>> b, = sv.symbolic_shape("b")
    >>> exp = sv.export(sv.jit(lambda x: x * 2.0))(sv.ShapeDtypeStruct((b, 8), np.float32))
    >>> app = create_app({"double": exp}, ServeOptions(jit=False))
    >>> [route.path for route in app.routes][:5]
    ['/v2', '/v2/health/live', '/v2/health/ready', '/metrics', '/v2/models/{name}']
    >>> app.state.server.models["double"].plan
    BatchPlan(variable='b', max_rows=32, reason='')
    """
    server = models if isinstance(models, ModelServer) else build_server(models, options)
    handlers = _Handlers(server)
    routes = [
        Route("/v2", handlers.server_metadata),
        Route("/v2/health/live", handlers.live),
        Route("/v2/health/ready", handlers.ready),
        Route("/metrics", handlers.metrics),
    ]
    for suffix in ("", "/versions/{version}"):
        base = "/v2/models/{name}" + suffix
        routes += [
            Route(base, handlers.model_metadata),
            Route(base + "/ready", handlers.model_ready),
            Route(base + "/infer", handlers.infer, methods=["POST"]),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server.start()
        try:
            yield
        finally:
            server.stop()

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},  # type: ignore[dict-item]
    )
    app.state.server = server
    return app


def build_server(
    models: Sequence[ModelSource] | Mapping[str, ModelSource], options: ServeOptions | None
) -> ModelServer:
    """Load every model (and run its batching check) into a `ModelServer`."""
    options = options or ServeOptions()
    named = models.items() if isinstance(models, Mapping) else [(None, m) for m in models]
    loaded = [
        m if isinstance(m, ServedModel) else load_model(m, name, options) for name, m in named
    ]
    return ModelServer(loaded, options)


def _json(obj: Any, status: int = 200) -> Response:
    return Response(json.dumps(obj), status, media_type="application/json")


def _error(err: V2Error, headers: Mapping[str, str] | None = None) -> Response:
    return Response(err.body(), err.status, headers=headers, media_type="application/json")


async def _http_error(request: Request, exc: HTTPException) -> Response:
    if exc.status_code == 404:
        message = (
            f"no route {request.method} {request.url.path}: the routes are /v2, "
            "/v2/health/live, /v2/health/ready, /v2/models/{name}[/versions/1][/ready], "
            "POST /v2/models/{name}[/versions/1]/infer and /metrics"
        )
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return _error(V2Error(message, exc.status_code), exc.headers)


class _Handlers:
    def __init__(self, server: ModelServer) -> None:
        self.server = server
        self.limit = int(server.options.max_body_mb * 2**20)

    async def server_metadata(self, request: Request) -> Response:
        return _json({"name": "shapevm", "version": __version__, "extensions": EXTENSIONS})

    async def live(self, request: Request) -> Response:
        return _json({"live": True})

    async def ready(self, request: Request) -> Response:
        ok = self.server.ready and all(m.ready for m in self.server.models.values())
        return _json({"ready": ok}, 200 if ok else 503)

    async def metrics(self, request: Request) -> Response:
        return Response(self.server.metrics.render(), media_type=CONTENT_TYPE)

    async def model_metadata(self, request: Request) -> Response:
        try:
            model = self._model(request)
        except V2Error as err:
            return _error(err)
        return _json(model.metadata())

    async def model_ready(self, request: Request) -> Response:
        try:
            model = self._model(request)
        except V2Error as err:
            return _error(err)
        ok = self.server.ready and model.ready
        return _json({"name": model.name, "ready": ok}, 200 if ok else 503)

    def _model(self, request: Request) -> ServedModel:
        params = request.path_params
        return self.server.model(params["name"], params.get("version"))

    async def infer(self, request: Request) -> Response:
        t0 = time.perf_counter()
        metrics = self.server.metrics
        name = ""
        try:
            model = self._model(request)
            name = model.name
            metrics.model(name).requests.inc()
            raw = await self._body(request)
            req, prepared = await _off_loop(len(raw), self._decode, raw, request, model)
            outs = await self._run(model, prepared, request)
        except V2Error as err:
            reason = "overloaded" if err.status == 503 else "bad_request"
            metrics.failures.labels(name, reason).inc()
            headers = {"retry-after": "1"} if err.status == 503 else None
            return _error(err, headers)
        except ClientDisconnect:
            metrics.failures.labels(name, "disconnected").inc()
            return Response(status_code=499)
        except _INPUT_ERRORS as exc:  # the model refused this input while it ran
            metrics.failures.labels(name, "bad_request").inc()
            return _error(bad_request(f"model {name!r} refused the input: {exc}"))
        except Exception as exc:
            metrics.failures.labels(name, "error").inc()
            what = str(exc) if isinstance(exc, _ModelFailure) else f"{type(exc).__name__}: {exc}"
            return _error(V2Error(f"model {name!r} failed: {what}", 500))
        tensors = [(n, outs[i], binary) for i, n, binary in prepared.outputs]
        size = sum(outs[i].nbytes for i, _, _ in prepared.outputs)
        accept = request.headers.get("accept-encoding", "")
        payload, headers = await _off_loop(size, _response, model, req.id, tensors, accept)
        metrics.model(name).latency.observe(time.perf_counter() - t0)
        return Response(payload, headers=headers)

    def _decode(
        self, raw: bytes, request: Request, model: ServedModel
    ) -> tuple[InferRequest, Prepared]:
        body = _decoded(raw, request.headers.get("content-encoding"), self.limit)
        req = parse_infer_request(body, request.headers.get("inference-header-content-length"))
        return req, model.prepare(req)

    async def _body(self, request: Request) -> bytes:
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > self.limit:
            raise _too_large(int(length), self.limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.limit:
                raise _too_large(size, self.limit)
            chunks.append(chunk)
        return b"".join(chunks)

    async def _run(self, model: ServedModel, prepared: Prepared, request: Request) -> Outputs:
        assert model.batcher is not None
        loop = asyncio.get_running_loop()
        pending = Pending(prepared.arrays, prepared.rows, prepared.key, loop, loop.create_future())
        try:
            model.batcher.submit(pending)
        except Overloaded as exc:
            raise V2Error(
                f"model {model.name!r} is overloaded: {exc}; retry later "
                f"(the server queues at most {model.options.max_queue} requests per model, "
                "--max-queue)",
                503,
            ) from None
        watch: asyncio.Future[Any] = asyncio.ensure_future(request.receive())
        waited: set[asyncio.Future[Any]] = {pending.future, watch}
        try:
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not pending.future.done():
                pending.cancelled = True  # the client is gone: skip it if not started
                pending.future.cancel()
            watch.cancel()
        if pending.future.cancelled():
            raise ClientDisconnect()
        self.server.metrics.model(model.name).queue_time.observe(
            max(0.0, pending.started - pending.enqueued)
        )
        error = pending.future.exception()
        if error is not None and not isinstance(error, _INPUT_ERRORS):
            raise _ModelFailure(error)
        return pending.future.result()


async def _off_loop(size: int, fun: Callable[..., _T], *args: Any) -> _T:
    """``fun(*args)``, in a worker thread when ``size`` bytes make it long enough to hold
    up the other requests (decoding or encoding megabytes of JSON)."""
    if size < _OFF_LOOP_BYTES:
        return fun(*args)
    return await run_in_threadpool(fun, *args)


def _response(
    model: ServedModel,
    request_id: str | None,
    tensors: list[tuple[str, Any, bool]],
    accept: str,
) -> tuple[bytes, dict[str, str]]:
    payload, headers = encode_infer_response(model.name, model.version, request_id, tensors)
    return _encoded(payload, headers, accept), headers


def _too_large(size: int, limit: int) -> V2Error:
    return bad_request(
        "the request body is too large",
        expected=f"at most {limit} bytes (--max-body-mb)",
        found=f"{size} bytes",
        fix="send fewer rows per request, or raise --max-body-mb",
    )


def _decoded(body: bytes, encoding: str | None, limit: int) -> bytes:
    if not encoding or encoding == "identity":
        return body
    wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}.get(encoding.strip().lower())
    if wbits is None:
        raise bad_request(
            "unsupported Content-Encoding", expected="gzip, deflate or identity", found=encoding
        )
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise bad_request(f"the {encoding} body cannot be decompressed: {exc}") from None
    if len(out) > limit:
        raise _too_large(len(out), limit)
    if not inflater.eof:
        raise bad_request(f"the {encoding} body is truncated")
    return out


def _encoded(payload: bytes, headers: dict[str, str], accept: str) -> bytes:
    accepted = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    for name, wbits in (("gzip", 16 + zlib.MAX_WBITS), ("deflate", zlib.MAX_WBITS)):
        if name in accepted:
            deflater = zlib.compressobj(1, zlib.DEFLATED, wbits)
            headers["content-encoding"] = name
            return deflater.compress(payload) + deflater.flush()
    return payload
