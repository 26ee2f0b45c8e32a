"""The KServe V2 (Open Inference Protocol) REST payloads: requests in, responses out.

An inference request is a JSON object, optionally followed by the binary tensor data of the
*binary tensor data extension*: the ``Inference-Header-Content-Length`` header gives the
size of the JSON part, and each input whose ``parameters`` hold ``binary_data_size`` takes
that many bytes of the rest, in the order of the inputs (little-endian, row major, no
padding). Outputs come back as JSON numbers, or as binary data after the JSON when the
request asks for it (``binary_data`` on a requested output, or ``binary_data_output`` for
all of them), which is what ``tritonclient.http`` does by default.

Every malformed payload raises `V2Error`, whose message says what was expected, what was
found and how to fix it; the server sends it back as ``{"error": message}``.

>>> req = parse_infer_request(b'{"id": "7", "inputs": [{"name": "x", "shape": [1, 2], '
...                           b'"datatype": "FP32", "data": [1.5, 2]}]}', None)
>>> req.id, req.inputs[0].array
('7', array([[1.5, 2. ]], dtype=float32))
>>> body, headers = encode_infer_response("m", "1", "7", [("y", req.inputs[0].array, False)])
>>> body
b'{"model_name":"m","model_version":"1","id":"7","outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"data":[1.5,2.0]}]}'
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shapevm.bytecode.errors import format_message

# V2 datatype name -> little-endian NumPy dtype (BYTES and BF16 have no NumPy counterpart
# that a shapevm model takes; they are refused with a message).
DATATYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(code).newbyteorder("<")
    for name, code in (
        ("BOOL", "bool"),
        ("UINT8", "uint8"),
        ("UINT16", "uint16"),
        ("UINT32", "uint32"),
        ("UINT64", "uint64"),
        ("INT8", "int8"),
        ("INT16", "int16"),
        ("INT32", "int32"),
        ("INT64", "int64"),
        ("FP16", "float16"),
        ("FP32", "float32"),
        ("FP64", "float64"),
    )
}
_UNSUPPORTED = {"BYTES": "strings", "BF16": "bfloat16 numbers"}


class V2Error(Exception):
    """A request the server refuses: ``status`` (400, 503...) and a message for the client."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def body(self) -> bytes:
        """The V2 error object, ``{"error": message}``."""
        return json.dumps({"error": self.message}).encode()


def bad_request(what: str, *, expected: str = "", found: str = "", fix: str = "") -> V2Error:
    """A 400 `V2Error` whose message has the package's layout."""
    return V2Error(format_message(what, expected=expected, found=found, fix=fix))


def datatype_of(dtype: np.dtype[Any]) -> str:
    """The V2 datatype name of a NumPy dtype (``float32`` -> ``FP32``)."""
    for name, dt in DATATYPES.items():
        if dt.kind == dtype.kind and dt.itemsize == dtype.itemsize:
            return name
    raise ValueError(f"NumPy dtype {dtype} has no KServe V2 datatype")


@dataclass
class InputTensor:
    """One input of a request, decoded: its array has the declared shape and datatype."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    array: np.ndarray[Any, Any]


@dataclass
class RequestedOutput:
    name: str
    binary: bool | None  # None: the request's default


@dataclass
class InferRequest:
    """A decoded inference request."""

    id: str | None
    inputs: list[InputTensor]
    outputs: list[RequestedOutput] | None  # None: every output
    binary_default: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)

    def wants_binary(self, requested: RequestedOutput | None) -> bool:
        if requested is not None and requested.binary is not None:
            return requested.binary
        return self.binary_default


def parse_infer_request(body: bytes, header_length: str | None) -> InferRequest:
    """Decode an inference request body; ``header_length`` is the value of the
    ``Inference-Header-Content-Length`` header (``None`` when absent)."""
    header, binary = _split_body(body, header_length)
    obj = _load_json(header)
    if not isinstance(obj, dict):
        raise bad_request(
            "the inference request is not a JSON object",
            expected='{"inputs": [...]}',
            found=_kind(obj),
        )
    request_id = obj.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise bad_request("'id' must be a string", found=f"{_kind(request_id)} {request_id!r:.40}")
    params = _parameters(obj.get("parameters"), "the request")
    _refuse_parameters(params, "the request")
    inputs = _inputs(obj.get("inputs"), binary)
    outputs = _outputs(obj.get("outputs")) if "outputs" in obj else None
    binary_default = params.get("binary_data_output", False)
    if not isinstance(binary_default, bool):
        raise bad_request("the parameter 'binary_data_output' must be a boolean")
    return InferRequest(request_id, inputs, outputs, binary_default, params)


def _split_body(body: bytes, header_length: str | None) -> tuple[bytes, memoryview]:
    if header_length is None:
        return body, memoryview(b"")
    try:
        n = int(header_length)
    except ValueError:
        n = -1
    if not 0 <= n <= len(body):
        raise bad_request(
            "bad Inference-Header-Content-Length header",
            expected=f"the size of the JSON part of the body, 0 to {len(body)} bytes",
            found=repr(header_length[:40]),
        )
    return body[:n], memoryview(body)[n:]


def _load_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad_request(
            "the request body is not valid JSON",
            found=str(exc)[:200],
            fix="send a JSON object; binary tensor data goes after it, with the header "
            "Inference-Header-Content-Length giving the size of the JSON part",
        ) from None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _parameters(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(f"the parameters of {where} must be an object", found=_kind(value))
    return value


def _refuse_parameters(params: Mapping[str, Any], where: str) -> None:
    """Parameters of extensions this server does not implement are errors, not ignored."""
    for key in params:
        if key.startswith("shared_memory"):
            raise bad_request(
                f"{where} uses the shared-memory extension ({key!r}), which this server "
                "does not implement",
                fix="send the tensor data in the request body (JSON or binary)",
            )
    if params.get("classification"):
        raise bad_request(
            f"{where} asks for the classification extension, which this server does not implement",
            fix="request the output tensor itself and take the top classes on the client",
        )
    seq = params.get("sequence_id")
    if seq not in (None, 0, ""):
        raise bad_request(
            f"{where} has sequence_id {seq!r}, but the server has no sequence batching",
            fix="leave sequence_id out: every request is independent",
        )


def _inputs(value: Any, binary: memoryview) -> list[InputTensor]:
    if not isinstance(value, list) or not value:
        raise bad_request(
            "the request needs a non-empty 'inputs' array",
            found="no 'inputs'" if value is None else _kind(value),
        )
    out: list[InputTensor] = []
    offset = 0
    for i, item in enumerate(value):
        tensor, used = _input(item, i, binary[offset:])
        offset += used
        out.append(tensor)
    if offset != len(binary):
        raise bad_request(
            "the binary part of the body is longer than the inputs declare",
            expected=f"{offset} bytes (the sum of the inputs' binary_data_size)",
            found=f"{len(binary)} bytes",
            fix="check Inference-Header-Content-Length and each binary_data_size",
        )
    return out


def _input(item: Any, index: int, binary: memoryview) -> tuple[InputTensor, int]:
    if not isinstance(item, dict):
        raise bad_request(f"inputs[{index}] is not an object", found=_kind(item))
    name = item.get("name")
    if not isinstance(name, str):
        raise bad_request(f"inputs[{index}] has no 'name' string", found=_kind(name))
    where = f"input {name!r}"
    shape = _shape(item.get("shape"), where)
    datatype = item.get("datatype")
    dtype = _dtype(datatype, where)
    assert isinstance(datatype, str)
    params = _parameters(item.get("parameters"), where)
    _refuse_parameters(params, where)
    size = params.get("binary_data_size")
    if size is None:
        if "data" not in item:
            raise bad_request(
                f"{where} has no data",
                fix="give 'data' (a JSON array) or send it as binary data with the "
                "parameter 'binary_data_size'",
            )
        return InputTensor(name, datatype, shape, _json_array(item["data"], dtype, shape, where)), 0
    if "data" in item:
        raise bad_request(f"{where} has both 'data' and binary_data_size", fix="send one of them")
    array = _binary_array(binary, size, dtype, shape, where)
    return InputTensor(name, datatype, shape, array), int(size)


def _shape(value: Any, where: str) -> tuple[int, ...]:
    ok = isinstance(value, list) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    )
    if not ok:
        raise bad_request(
            f"{where} has a bad 'shape'",
            expected="an array of non-negative integers, e.g. [3, 256]",
            found=f"{value!r:.60}",
        )
    return tuple(value)


def _dtype(datatype: Any, where: str) -> np.dtype[Any]:
    if datatype in _UNSUPPORTED:
        raise bad_request(
            f"{where} has datatype {datatype}; shapevm models take no {_UNSUPPORTED[datatype]}",
            expected=", ".join(DATATYPES),
        )
    if datatype not in DATATYPES:
        raise bad_request(
            f"{where} has an unknown datatype", expected=", ".join(DATATYPES), found=repr(datatype)
        )
    return DATATYPES[datatype]


def _json_array(
    data: Any, dtype: np.dtype[Any], shape: tuple[int, ...], where: str
) -> np.ndarray[Any, Any]:
    count = math.prod(shape)
    if not isinstance(data, list):
        raise bad_request(f"{where}: 'data' must be an array", found=_kind(data))
    try:
        raw = np.array(data)
    except (ValueError, TypeError):
        raise bad_request(
            f"{where}: 'data' is a ragged nested array",
            fix="flatten it to one array in row-major order",
        ) from None
    if raw.size != count:
        raise bad_request(
            f"{where}: 'data' has the wrong number of elements",
            expected=f"{count} (the product of the shape {list(shape)})",
            found=str(raw.size),
        )
    if raw.size and not _json_kind_fits(raw.dtype, dtype):
        raise bad_request(
            f"{where}: 'data' holds {_json_kind(raw.dtype)}, which does not fit "
            f"datatype {datatype_of(dtype)}",
            fix=f"send {_json_kind(dtype)}",
        )
    with np.errstate(over="ignore", invalid="ignore"):
        out = raw.astype(dtype).reshape(shape)
    if dtype.kind in "iu" and raw.size and not np.array_equal(out.reshape(raw.shape), raw):
        info = np.iinfo(dtype)
        raise bad_request(
            f"{where}: a value is out of the range of {datatype_of(dtype)}",
            expected=f"integers from {info.min} to {info.max}",
        )
    return out


def _json_kind(dtype: np.dtype[Any]) -> str:
    return {"b": "booleans", "i": "integers", "u": "integers", "f": "numbers"}.get(
        dtype.kind, "strings or objects"
    )


def _json_kind_fits(found: np.dtype[Any], want: np.dtype[Any]) -> bool:
    if want.kind == "b":
        return found.kind == "b"
    if want.kind in "iu":
        return found.kind in "iu"
    return found.kind in "iuf"


def _binary_array(
    binary: memoryview, size: Any, dtype: np.dtype[Any], shape: tuple[int, ...], where: str
) -> np.ndarray[Any, Any]:
    expected = math.prod(shape) * dtype.itemsize
    if isinstance(size, bool) or not isinstance(size, int) or size != expected:
        raise bad_request(
            f"{where}: binary_data_size does not match its shape and datatype",
            expected=f"{expected} bytes ({list(shape)} x {dtype.itemsize} bytes)",
            found=f"{size!r:.40}",
        )
    if size > len(binary):
        raise bad_request(
            f"{where}: the body ends before its binary data",
            expected=f"{size} more bytes",
            found=f"{len(binary)}",
            fix="check Inference-Header-Content-Length and each binary_data_size",
        )
    array = np.frombuffer(binary[:size], dtype=dtype).reshape(shape)
    if dtype.kind == "b" and array.size and array.view(np.uint8).max() > 1:
        raise bad_request(f"{where}: BOOL bytes must be 0 or 1")
    return array


def _outputs(value: Any) -> list[RequestedOutput]:
    if not isinstance(value, list):
        raise bad_request("'outputs' must be an array of objects", found=_kind(value))
    out: list[RequestedOutput] = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise bad_request(f"outputs[{i}] must be an object with a 'name' string")
        params = _parameters(item.get("parameters"), f"output {item['name']!r}")
        _refuse_parameters(params, f"output {item['name']!r}")
        binary = params.get("binary_data")
        if binary is not None and not isinstance(binary, bool):
            raise bad_request(f"output {item['name']!r}: 'binary_data' must be a boolean")
        out.append(RequestedOutput(item["name"], binary))
    return out


def encode_infer_response(
    model_name: str,
    model_version: str,
    request_id: str | None,
    outputs: Sequence[tuple[str, np.ndarray[Any, Any], bool]],
) -> tuple[bytes, dict[str, str]]:
    """The response body and its headers; ``outputs`` are ``(name, array, binary)``."""
    response: dict[str, Any] = {"model_name": model_name, "model_version": model_version}
    if request_id is not None:
        response["id"] = request_id
    tensors: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for name, array, binary in outputs:
        tensor: dict[str, Any] = {
            "name": name,
            "datatype": datatype_of(array.dtype),
            "shape": list(array.shape),
        }
        if binary:
            data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
            tensor["parameters"] = {"binary_data_size": len(data)}
            chunks.append(data)
        else:
            tensor["data"] = array.ravel().tolist()
        tensors.append(tensor)
    response["outputs"] = tensors
    header = json.dumps(response, separators=(",", ":")).encode()
    if not chunks:
        return header, {"content-type": "application/json"}
    headers = {
        "content-type": "application/octet-stream",
        "inference-header-content-length": str(len(header)),
    }
    return b"".join([header, *chunks]), headers
