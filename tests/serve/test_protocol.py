"""KServe V2 payloads: decoding requests and encoding responses, without a server.

Bodies are made by tritonclient's own request generator and responses are read back by its
own parser, so the two ends agree with the client users run.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from shapevm.serve.protocol import (
    V2Error,
    datatype_of,
    encode_infer_response,
    parse_infer_request,
)
from tests.tools.tooling import require

http = require("tritonclient.http")


def _triton_body(arrays: dict[str, np.ndarray], binary: bool, **kwargs):
    inputs = []
    for name, a in arrays.items():
        i = http.InferInput(name, list(a.shape), datatype_of(a.dtype))
        i.set_data_from_numpy(a, binary_data=binary)
        inputs.append(i)
    body, json_size = http.InferenceServerClient.generate_request_body(inputs, **kwargs)
    return body, None if json_size is None else str(json_size)


@pytest.mark.parametrize("binary", [False, True])
def test_every_datatype_round_trips_from_tritonclient(binary: bool) -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "f32": rng.standard_normal((2, 3)).astype(np.float32),
        "f64": rng.standard_normal((3,)),
        "f16": rng.standard_normal((1, 2)).astype(np.float16),
        "i8": np.array([[-128, 127]], np.int8),
        "i64": np.array([-(2**62), 2**62], np.int64),
        "u16": np.array([0, 65535], np.uint16),
        "b": np.array([[True, False, True]]),
    }
    body, header = _triton_body(arrays, binary, request_id="r1")
    req = parse_infer_request(body, header)
    assert req.id == "r1"
    for tensor in req.inputs:
        want = arrays[tensor.name]
        assert tensor.array.dtype == want.dtype.newbyteorder("<")
        assert tensor.array.tobytes() == want.tobytes()


def test_json_accepts_nested_data_and_integers_for_floats() -> None:
    body = json.dumps(
        {"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2], [3, 4.5]]}]}
    ).encode()
    (x,) = parse_infer_request(body, None).inputs
    assert x.array.tolist() == [[1.0, 2.0], [3.0, 4.5]]


@pytest.mark.parametrize("binary", [False, True])
def test_response_is_read_by_tritonclient(binary: bool) -> None:
    y = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    flags = np.array([True, False])
    body, headers = encode_infer_response(
        "m", "1", "abc", [("y", y, binary), ("flags", flags, False)]
    )
    length = headers.get("inference-header-content-length")
    result = http.InferenceServerClient.parse_response_body(
        body, header_length=None if length is None else int(length)
    )
    assert result.get_response()["id"] == "abc"
    assert result.as_numpy("y").tobytes() == y.tobytes()  # JSON numbers keep every bit
    assert result.as_numpy("flags").tolist() == [True, False]
    assert ("inference-header-content-length" in headers) == binary


def test_outputs_request_binary_per_output_or_for_all() -> None:
    x = np.zeros((1, 2), np.float32)
    outputs = [http.InferRequestedOutput("a", binary_data=False), http.InferRequestedOutput("b")]
    body, header = _triton_body({"x": x}, True, outputs=outputs)
    req = parse_infer_request(body, header)
    assert [(r.name, req.wants_binary(r)) for r in req.outputs or []] == [("a", False), ("b", True)]
    body, header = _triton_body({"x": x}, True)  # no outputs: binary_data_output for all
    req = parse_infer_request(body, header)
    assert req.outputs is None and req.wants_binary(None)


def _error(body: bytes | str, header: str | None = None) -> str:
    data = body.encode() if isinstance(body, str) else body
    with pytest.raises(V2Error) as info:
        parse_infer_request(data, header)
    assert info.value.status == 400
    assert json.loads(info.value.body()) == {"error": info.value.message}
    return info.value.message


def _one(**fields) -> str:
    tensor = {"name": "x", "shape": [2], "datatype": "FP32", "data": [1, 2]}
    tensor.update(fields)
    return json.dumps({"inputs": [tensor]})


def test_malformed_json_says_how_to_fix_it() -> None:
    msg = _error("{inputs: [")
    assert msg.startswith("the request body is not valid JSON")
    assert "fix:      send a JSON object" in msg
    assert "not a JSON object" in _error("[1, 2]")
    assert "found:    an array" in _error("[1, 2]")
    assert "needs a non-empty 'inputs' array" in _error("{}")
    assert "'id' must be a string" in _error('{"id": 5, "inputs": []}')


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"shape": [2, -1]}, "input 'x' has a bad 'shape'\n  expected: an array of non-negative"),
        ({"datatype": "FP8"}, "input 'x' has an unknown datatype\n  expected: BOOL, UINT8"),
        ({"datatype": "BYTES"}, "input 'x' has datatype BYTES; shapevm models take no strings"),
        (
            {"data": [1, 2, 3]},
            "'data' has the wrong number of elements\n  expected: 2 (the product",
        ),
        ({"data": [[1], [2, 3]]}, "input 'x': 'data' is a ragged nested array"),
        ({"data": "12"}, "input 'x': 'data' must be an array\n  found:    a string"),
        ({"data": ["a", "b"]}, "'data' holds strings or objects, which does not fit datatype FP32"),
        (
            {"datatype": "INT32", "data": [1.5, 2]},
            "holds numbers, which does not fit datatype INT32",
        ),
        ({"datatype": "INT8", "data": [1, 300]}, "a value is out of the range of INT8"),
        ({"datatype": "BOOL", "data": [1, 0]}, "holds integers, which does not fit datatype BOOL"),
        ({"name": 3}, "inputs[0] has no 'name' string"),
        ({"parameters": {"shared_memory_region": "r"}}, "uses the shared-memory extension"),
    ],
)
def test_bad_input_tensors(fields: dict, expected: str) -> None:
    assert expected in _error(_one(**fields))


def test_missing_data_and_both_data_kinds() -> None:
    tensor = {"name": "x", "shape": [2], "datatype": "FP32"}
    assert "input 'x' has no data" in _error(json.dumps({"inputs": [tensor]}))
    both = _one(parameters={"binary_data_size": 8})
    assert "has both 'data' and binary_data_size" in _error(both)


def test_bad_binary_bodies() -> None:
    x = np.ones((2, 2), np.float32)
    body, header = _triton_body({"x": x}, True)
    assert header is not None
    assert "bad Inference-Header-Content-Length" in _error(body, "abc")
    assert "bad Inference-Header-Content-Length" in _error(body, str(len(body) + 1))
    msg = _error(body[:-4], header)
    assert "the body ends before its binary data" in msg and "expected: 16 more bytes" in msg
    msg = _error(body + b"xx", header)
    assert "longer than the inputs declare" in msg and "found:    18 bytes" in msg
    wrong = json.loads(body[: int(header)])
    wrong["inputs"][0]["parameters"]["binary_data_size"] = 12
    text = json.dumps(wrong).encode()
    msg = _error(text + body[int(header) :], str(len(text)))
    assert "binary_data_size does not match its shape" in msg and "expected: 16 bytes" in msg
    tensor = {"name": "m", "shape": [2], "datatype": "BOOL"}
    tensor["parameters"] = {"binary_data_size": 2}
    bools = json.dumps({"inputs": [tensor]}).encode()
    assert "BOOL bytes must be 0 or 1" in _error(bools + b"\x01\x07", str(len(bools)))


def test_unsupported_extensions_are_refused_not_ignored() -> None:
    base = json.loads(_one())
    msg = _error(json.dumps({**base, "parameters": {"sequence_id": 4}}))
    assert "sequence_id 4, but the server has no sequence batching" in msg
    outputs = [{"name": "y", "parameters": {"classification": 3}}]
    assert "classification extension" in _error(json.dumps({**base, "outputs": outputs}))
    outputs = [{"name": "y", "parameters": {"binary_data": "yes"}}]
    assert "'binary_data' must be a boolean" in _error(json.dumps({**base, "outputs": outputs}))
    assert "'outputs' must be an array" in _error(json.dumps({**base, "outputs": {}}))
