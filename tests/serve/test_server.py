"""The server through ``tritonclient.http``, unchanged: health, metadata, inference in JSON
and binary, dynamic batching bit for bit, errors, compression, overload and metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from tests.serve import helpers
from tests.tools.tooling import require

require("starlette")
require("uvicorn")
httpclient = require("tritonclient.http")

from tritonclient.utils import InferenceServerException  # noqa: E402

from shapevm import RuntimeOpError  # noqa: E402
from shapevm.serve import ModelServer, ServeOptions, create_app, load_model  # noqa: E402
from shapevm.serve.model import ServedModel  # noqa: E402
from shapevm.serve.runners import ShapevmRunner  # noqa: E402
from tests.serve.test_batching import FakeRunner  # noqa: E402

EXPORTS = {
    "mlp": helpers.mlp(),
    "ew": helpers.elementwise(),
    "mixed": helpers.mixed(),
    "seq": helpers.sequence(),
    "scaled": helpers.scaled(),
    "mm": helpers.matmul(),
}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, ModelServer]]:
    jit = ServeOptions(max_batch_size=16, max_batch_delay_ms=20)
    interpreted = ServeOptions(max_batch_size=16, max_batch_delay_ms=20, jit=False)
    models = [
        load_model(exp, name, jit if name == "mlp" else interpreted)
        for name, exp in EXPORTS.items()
    ]
    model_server = ModelServer(models, ServeOptions(max_body_mb=2))
    with helpers.live_server(create_app(model_server)) as url:
        yield url, model_server


@pytest.fixture
def client(server: tuple[str, ModelServer]) -> Iterator[Any]:
    c = httpclient.InferenceServerClient(server[0], concurrency=16)
    yield c
    c.close()


def _input(name: str, array: np.ndarray, binary: bool = True) -> Any:
    dt = {"f": "FP", "i": "INT", "u": "UINT", "b": "BOOL"}[array.dtype.kind]
    datatype = "BOOL" if dt == "BOOL" else f"{dt}{array.dtype.itemsize * 8}"
    i = httpclient.InferInput(name, list(array.shape), datatype)
    i.set_data_from_numpy(array, binary_data=binary)
    return i


def test_health_and_metadata(client: Any) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("mlp") and client.is_model_ready("mlp", "1")
    assert client.get_server_metadata()["extensions"] == ["binary_tensor_data"]
    meta = client.get_model_metadata("mlp")
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
    assert meta["outputs"] == [{"name": "output_0", "datatype": "FP32", "shape": [-1, 8]}]
    ext = meta["shapevm"]
    assert ext["inputs"] == [{"name": "x", "shape": ["b", 16]}]
    assert ext["constraints"] == ["b <= 512"] and ext["dimension_variables"] == ["b"]
    assert ext["batching"]["dimension"] == "b" and ext["batching"]["max_batch_size"] == 16
    assert ext["batching"]["checked"][0]["shape"] == [[16]]
    assert client.get_model_metadata("scaled")["shapevm"]["dimension_arguments"] == ["n"]
    with pytest.raises(InferenceServerException, match="model 'mlp' has no version '2'"):
        client.get_model_metadata("mlp", "2")


@pytest.mark.parametrize("binary", [True, False])
def test_infer_json_and_binary(client: Any, binary: bool) -> None:
    x = np.random.default_rng(3).standard_normal((5, 16)).astype(np.float32)
    out = httpclient.InferRequestedOutput("output_0", binary_data=binary)
    result = client.infer("mlp", [_input("x", x, binary)], outputs=[out], request_id="r-1")
    assert result.get_response()["id"] == "r-1"
    y = result.as_numpy("output_0")
    ref = EXPORTS["mlp"].call(x)
    assert y.shape == (5, 8) and np.allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_several_inputs_dtypes_and_named_outputs(client: Any) -> None:
    a = np.array([[1, -2], [3, 4]], np.int32)
    m = np.array([[True, False], [False, False]])
    h = np.array([[0.5, 1.5], [2.0, -1.0]], np.float16)
    outputs = [httpclient.InferRequestedOutput("h2", binary_data=False)]
    result = client.infer("mixed", [_input("a", a), _input("m", m, False), _input("h", h)])
    assert result.as_numpy("a2").tolist() == [[2, -4], [6, 8]]
    assert result.as_numpy("not_m").tolist() == [[False, True], [True, True]]
    only = client.infer("mixed", [_input("a", a), _input("m", m), _input("h", h)], outputs=outputs)
    assert [o["name"] for o in only.get_response()["outputs"]] == ["h2"]
    assert only.as_numpy("h2").tobytes() == (h * np.float16(2)).tobytes()


def test_dimension_argument(client: Any) -> None:
    x = np.ones((2, 4), np.float32)
    result = client.infer("scaled", [_input("n", np.array([3], np.int64)), _input("x", x)])
    assert result.as_numpy("output_0").tolist() == [[3.0] * 4] * 2


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    """The model alone on ``x``, on the path the server checked (compiled for the JIT)."""
    if name == "mlp":
        probe = _PROBE.setdefault("mlp", ShapevmRunner(EXPORTS["mlp"]).prober())
        for _ in range(3):
            (y,), path = probe([x])
            if path == "compiled":
                return y
        raise AssertionError("the JIT did not compile the reference call")
    y: np.ndarray = EXPORTS[name].call(x)
    return y


_PROBE: dict[str, Any] = {}


@pytest.mark.parametrize("name", ["mlp", "ew", "seq", "mm"])
def test_dynamic_batching_changes_no_bit(
    client: Any, server: tuple[str, ModelServer], name: str
) -> None:
    rng = np.random.default_rng(7)
    features = {"mlp": (16,), "ew": (4,), "mm": (64,)}
    xs = []
    for _ in range(48):
        rest = features.get(name) or (int(rng.integers(2, 4)), 4)  # seq: s varies
        xs.append(rng.standard_normal((int(rng.integers(1, 6)), *rest)).astype(np.float32))
    before = _metrics(server[0])
    pending = [client.async_infer(name, [_input("x", x)]) for x in xs]
    results = [p.get_result().as_numpy("output_0") for p in pending]
    after = _metrics(server[0])
    for x, y in zip(xs, results, strict=True):
        assert y.tobytes() == _reference(name, x).tobytes()
    calls = _delta(before, after, "shapevm_batch_requests_count", model=name)
    requests = _delta(before, after, "shapevm_batch_requests_sum", model=name)
    assert requests == len(xs)
    model = server[1].models[name]
    checked = model.batching_info()["checked"]
    if all(c["bit_identical"] for c in checked):
        assert calls < requests  # requests were joined
    else:  # the check found a difference: never joined
        assert calls == requests
    assert checked, "the check ran"


def test_requests_with_different_other_dimensions_are_not_mixed(client: Any) -> None:
    xs = [np.full((2, s, 4), s, np.float32) for s in (2, 3, 2, 5, 3)]
    results = [client.async_infer("seq", [_input("x", x)]) for x in xs]
    for x, r in zip(xs, results, strict=True):
        assert r.get_result().as_numpy("output_0").tolist() == (x.sum(axis=1) * 2).tolist()


@pytest.mark.parametrize(
    ("name", "inputs", "message"),
    [
        ("nope", [("x", np.ones((1, 16), np.float32))], "unknown model 'nope'\n  expected: ew, "),
        ("mlp", [("y", np.ones((1, 16), np.float32))], "the inputs do not match model 'mlp'"),
        ("mlp", [("x", np.ones((1, 16)))],
         "has the wrong datatype\n  expected: FP32\n  found:    FP64"),
        ("mlp", [("x", np.ones((16,), np.float32))],
         "has the wrong rank\n  expected: 2 dimensions [b, 16]"),
        ("mlp", [("x", np.ones((2, 15), np.float32))],
         "Dimension x.shape[1] must be 16, found 15."),
        (
            "mlp",
            [("x", np.ones((513, 16), np.float32))],
            "Input shapes do not satisfy the constraint 'b <= 512'",
        ),
        (
            "mixed",
            [("a", np.ones((2, 2), np.int32)), ("m", np.ones((3, 2), bool)),
             ("h", np.ones((2, 2), np.float16))],
            "Found inconsistency",
        ),
    ],
)  # fmt: skip
def test_bad_requests_get_400_with_the_reason(client: Any, name: str, inputs, message: str) -> None:
    with pytest.raises(InferenceServerException) as info:
        client.infer(name, [_input(n, a) for n, a in inputs])
    assert info.value.status() == "400"
    assert message in info.value.message()


_raw = helpers.http_request


def test_malformed_and_oversized_bodies(server: tuple[str, ModelServer]) -> None:
    url = server[0]
    status, headers, body = _raw(url, "POST", "/v2/models/ew/infer", b"{not json")
    assert status == 400 and headers["content-type"] == "application/json"
    assert json.loads(body)["error"].startswith("the request body is not valid JSON")
    big = b" " * (2**21 + 1)
    status, _, body = _raw(url, "POST", "/v2/models/ew/infer", big)
    assert status == 400
    message = json.loads(body)["error"]
    assert "the request body is too large\n  expected: at most 2097152 bytes" in message
    status, _, body = _raw(url, "POST", "/v2/models/ew/infer", b"x", {"Content-Encoding": "br"})
    assert status == 400 and "unsupported Content-Encoding" in json.loads(body)["error"]
    status, _, body = _raw(url, "GET", "/v2/nothing")
    assert status == 404 and json.loads(body)["error"].startswith("no route GET /v2/nothing")
    status, _, body = _raw(url, "GET", "/v2/models/ew/infer")
    assert status == 405
    assert json.loads(body) == {"error": "GET is not allowed on /v2/models/ew/infer"}


def test_megabytes_are_decoded_and_encoded_off_the_event_loop(client: Any) -> None:
    x = np.random.default_rng(4).standard_normal((80_000, 4)).astype(np.float32)  # 1.2 MiB
    result = client.infer("ew", [_input("x", x)])
    assert result.as_numpy("output_0").tobytes() == (x * np.float32(2) + np.float32(1)).tobytes()


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests_and_responses(client: Any, algorithm: str) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    result = client.infer(
        "ew",
        [_input("x", x)],
        request_compression_algorithm=algorithm,
        response_compression_algorithm=algorithm,
    )
    assert result.as_numpy("output_0").tolist() == (x * 2 + 1).tolist()


def test_a_zip_bomb_is_refused(server: tuple[str, ModelServer]) -> None:
    import gzip

    bomb = gzip.compress(b"[" + b"0," * 2**21 + b"0]")  # 4 MiB of JSON from 4 KiB
    headers = {"Content-Encoding": "gzip"}
    status, _, body = _raw(server[0], "POST", "/v2/models/ew/infer", bomb, headers)
    assert status == 400 and "the request body is too large" in json.loads(body)["error"]


def _metrics(url: str) -> str:
    return _raw(url, "GET", "/metrics")[2].decode()


def _delta(before: str, after: str, name: str, **labels: str) -> float:
    return helpers.metric(after, name, **labels) - helpers.metric(before, name, **labels)


def test_metrics_count_requests_errors_latency_and_the_jit(client: Any, server: Any) -> None:
    before = _metrics(server[0])
    client.infer("ew", [_input("x", np.ones((1, 4), np.float32))])
    with pytest.raises(InferenceServerException):
        client.infer("ew", [_input("x", np.ones((1, 5), np.float32))])
    after = _metrics(server[0])
    assert _delta(before, after, "shapevm_inference_requests_total", model="ew") == 2
    failures = _delta(
        before, after, "shapevm_inference_failures_total", model="ew", reason="bad_request"
    )
    assert failures == 1
    assert (
        _delta(before, after, "shapevm_inference_request_duration_seconds_count", model="ew") == 1
    )
    assert _delta(before, after, "shapevm_batch_rows_sum", model="ew") == 1
    assert helpers.metric(after, "shapevm_jit_calls_total") > 0
    assert 0 < helpers.metric(after, "shapevm_jit_hit_rate") <= 1
    assert 'shapevm_queue_depth{model="mlp"} 0.0' in after


def test_overload_gets_503_at_once_and_the_rest_is_served() -> None:
    runner = FakeRunner()
    options = ServeOptions(max_batch_size=1, max_queue=1)
    model_server = ModelServer([ServedModel("slow", runner, options)], options)
    body = json.dumps(
        {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1, 1]}]}
    ).encode()
    with helpers.live_server(create_app(model_server)) as url:
        batcher = model_server.models["slow"].batcher
        assert batcher is not None
        runner.gate.clear()
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(_raw, url, "POST", "/v2/models/slow/infer", body)
            helpers.wait_for(lambda: runner.gate_waiters == 1, 10)  # the worker holds it
            second = pool.submit(_raw, url, "POST", "/v2/models/slow/infer", body)
            helpers.wait_for(lambda: batcher.depth == 1, 10)  # queued: the queue is full
            status, headers, text = _raw(url, "POST", "/v2/models/slow/infer", body)
            assert (status, headers["retry-after"]) == (503, "1")
            assert json.loads(text)["error"].startswith(
                "model 'slow' is overloaded: 1 requests are queued (the limit); retry later"
            )
            runner.gate.set()
            for done in (first, second):
                status, _, text = done.result(30)
                assert status == 200
                assert json.loads(text)["outputs"][0]["data"] == [10.0, 10.0]


_OUT_OF_BOUNDS = "instruction 3 (OP_CALL take): index 7 is out of bounds"


class _Picky(FakeRunner):
    """Refuses a 7 as the interpreter refuses bad data (400); breaks on a 9 (500)."""

    def run(self, arrays):
        if (arrays[0] == 7).any():
            raise RuntimeOpError(_OUT_OF_BOUNDS)
        if (arrays[0] == 9).any():
            raise ZeroDivisionError("a bug")
        return super().run(arrays)


def test_errors_raised_by_the_model_while_it_runs() -> None:
    options = ServeOptions(max_batch_size=1)
    model_server = ModelServer([ServedModel("picky", _Picky(), options)], options)
    with helpers.live_server(create_app(model_server)) as url:
        c = httpclient.InferenceServerClient(url)
        for value, status, message in [
            (7, "400", "model 'picky' refused the input: " + _OUT_OF_BOUNDS),
            (9, "500", "model 'picky' failed: ZeroDivisionError: a bug"),
        ]:
            with pytest.raises(InferenceServerException) as info:
                c.infer("picky", [_input("x", np.full((1, 2), value, np.float32))])
            assert (info.value.status(), info.value.message()) == (status, message)
        ok = c.infer("picky", [_input("x", np.ones((1, 2), np.float32))])
        assert ok.as_numpy("y").tolist() == [[10.0, 10.0]]
        c.close()
