"""Reading ONNX models safely: the protobuf, its tensors, and external data files.

A model is parsed with the ``onnx`` package (protobuf only: nothing in the file is
executed). Tensors become NumPy arrays without copying where the layout allows: ``raw_data``
is viewed in place, external data is memory-mapped. External data must lie inside the
model's directory: absolute paths, ``..`` and symbolic links that lead out are refused
before any file is opened, and offsets and lengths are checked against the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shapevm.onnx.errors import ModelFileError
from shapevm.ops import DType

if TYPE_CHECKING:
    import onnx

# Element types of ONNX tensors that shapevm computes with (TensorProto.DataType codes).
ONNX_DTYPES: dict[int, DType] = {
    1: DType.F32,
    2: DType.U8,
    3: DType.I8,
    4: DType.U16,
    5: DType.I16,
    6: DType.I32,
    7: DType.I64,
    9: DType.BOOL,
    10: DType.F16,
    11: DType.F64,
    12: DType.U32,
    13: DType.U64,
}
# The largest tensor the importer materializes: 2**34 bytes (16 GiB).
MAX_TENSOR_BYTES = 1 << 34


def onnx_module() -> Any:
    """The ``onnx`` package, or an ImportError that says how to install it."""
    try:
        import onnx
    except ImportError:
        raise ImportError(
            "shapevm.onnx needs the onnx package: pip install 'shapevm[onnx]' (or pip install onnx)"
        ) from None
    return onnx


def dtype_name(code: int) -> str:
    """The ONNX name of an element type code, e.g. ``FLOAT16``."""
    onnx = onnx_module()
    try:
        return str(onnx.TensorProto.DataType.Name(code))
    except ValueError:
        return f"data type {code}"


def read_model(model: Any) -> tuple[onnx.ModelProto, Path | None, str]:
    """The parsed model, the directory of its file (for external data) and a name for it."""
    onnx = onnx_module()
    if isinstance(model, onnx.ModelProto):
        return model, None, model.graph.name or "model"
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _parse(bytes(model), "the given bytes"), None, "model"
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(
            f"an ONNX model is a path, bytes or an onnx.ModelProto, found {type(model).__name__}"
        )
    path = Path(model)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFileError(
            f"cannot read the model file {str(path)!r}: {exc.strerror or exc}",
            expected="a readable .onnx file",
            fix="check the path",
        ) from None
    return _parse(data, repr(str(path))), path.resolve().parent, path.name


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    proto: onnx.ModelProto = onnx_module().ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf raises its own DecodeError (and sometimes others)
        raise ModelFileError(
            f"{what} is not a valid ONNX model: the protobuf does not parse ({exc})",
            expected="an ONNX ModelProto (a .onnx file)",
            found=f"{len(data)} bytes starting {data[:8]!r}",
            fix="the file may be truncated or not an ONNX model; export it again",
        ) from None
    if proto.ir_version <= 0 or not proto.HasField("graph") or not proto.opset_import:
        raise ModelFileError(
            f"{what} is not a valid ONNX model: it has no "
            + ("IR version" if proto.ir_version <= 0 else "graph or opset"),
            expected="a ModelProto with ir_version, opset_import and a graph",
            found=f"{len(data)} bytes starting {data[:8]!r}",
            fix="the file may be truncated or not an ONNX model; export it again",
        )
    return proto


def tensor_dtype(tensor: onnx.TensorProto, name: str) -> DType:
    dt = ONNX_DTYPES.get(tensor.data_type)
    if dt is None:
        raise ModelFileError(
            f"tensor {name!r} has element type {dtype_name(tensor.data_type)}",
            expected=", ".join(dtype_name(c) for c in ONNX_DTYPES),
            found=dtype_name(tensor.data_type),
            fix="convert the tensor to a supported type when exporting",
        )
    return dt


def tensor_array(tensor: onnx.TensorProto, base: Path | None, name: str = "") -> np.ndarray:
    """``tensor`` as an array (a view of ``raw_data`` or a memory map where possible)."""
    name = name or tensor.name
    dt = tensor_dtype(tensor, name)
    shape = _checked_shape(tuple(tensor.dims), dt, name)
    dtype = dt.numpy  # little-endian, as ONNX stores tensors
    if tensor.data_location == 1:  # EXTERNAL
        return _external(tensor, base, name, shape, dtype)
    if tensor.HasField("raw_data"):
        raw = tensor.raw_data
        _check_size(len(raw), shape, dtype, name, "raw_data")
        arr = np.frombuffer(raw, dtype=dtype).reshape(shape)
        return arr.astype(dtype.newbyteorder("="), copy=False)  # a view on little-endian
    numpy_helper = onnx_module().numpy_helper
    try:
        arr = np.asarray(numpy_helper.to_array(tensor))
    except (ValueError, TypeError) as exc:
        raise ModelFileError(
            f"tensor {name!r} cannot be read: {exc}",
            expected=f"{int(np.prod(shape))} values of type {dt}",
            fix="export the model again",
        ) from None
    if arr.shape != shape:
        raise ModelFileError(
            f"tensor {name!r} holds {arr.size} values for dims {list(shape)}",
            expected=f"{int(np.prod(shape))} values",
            found=f"{arr.size} values",
            fix="export the model again",
        )
    return arr.astype(dt.numpy.newbyteorder("="), copy=False)


def _checked_shape(dims: tuple[int, ...], dt: DType, name: str) -> tuple[int, ...]:
    if any(d < 0 for d in dims):
        raise ModelFileError(
            f"tensor {name!r} has a negative dimension: {list(dims)}",
            expected="dimensions >= 0",
            found=str(list(dims)),
            fix="the file is corrupt; export the model again",
        )
    nbytes = dt.itemsize
    for d in dims:
        nbytes *= d
        if nbytes > MAX_TENSOR_BYTES:
            raise ModelFileError(
                f"tensor {name!r} would take more than {MAX_TENSOR_BYTES >> 30} GiB: "
                f"dims {list(dims)}",
                expected=f"at most {MAX_TENSOR_BYTES} bytes",
                found=f"dims {list(dims)} of {dt}",
                fix="the file is corrupt, or the model too large for this machine",
            )
    return dims


def _check_size(n: int, shape: tuple[int, ...], dtype: np.dtype[Any], name: str, what: str) -> None:
    want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if n != want:
        raise ModelFileError(
            f"tensor {name!r}: {what} has {n} bytes for dims {list(shape)}",
            expected=f"{want} bytes",
            found=f"{n} bytes",
            fix="the file is truncated or corrupt; export the model again",
        )


def _external(
    tensor: onnx.TensorProto, base: Path | None, name: str, shape: tuple[int, ...], dtype: Any
) -> np.ndarray:
    info = {e.key: e.value for e in tensor.external_data}
    location = info.get("location", "")
    path = external_path(location, base, name)
    size = path.stat().st_size
    try:
        offset = int(info.get("offset", "0"))
        length = int(info["length"]) if "length" in info else size - offset
    except ValueError:
        raise ModelFileError(
            f"tensor {name!r}: external data offset or length is not a number",
            expected="integer offset and length",
            found=f"offset={info.get('offset')!r}, length={info.get('length')!r}",
        ) from None
    if offset < 0 or length < 0 or offset + length > size:
        raise ModelFileError(
            f"tensor {name!r}: external data lies outside its file",
            expected=f"0 <= offset and offset + length <= {size} (the size of {location!r})",
            found=f"offset={offset}, length={length}",
            fix="the external data file is truncated or does not belong to this model",
        )
    _check_size(length, shape, dtype, name, f"external data in {location!r}")
    if length == 0:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def external_path(location: str, base: Path | None, name: str) -> Path:
    """The file of external data ``location``, which must lie inside ``base``."""
    if base is None:
        raise ModelFileError(
            f"tensor {name!r} keeps its data in the external file {location!r}, but the "
            "model was not loaded from a file",
            expected="a model path, so that external data can be found next to it",
            found="bytes or a ModelProto",
            fix="pass the path of the .onnx file to load()",
        )
    rel = Path(location)
    if not location or rel.is_absolute() or ".." in rel.parts:
        raise ModelFileError(
            f"tensor {name!r}: external data location {location!r} is outside the model's "
            "directory",
            expected="a relative path inside the directory of the .onnx file",
            found=repr(location),
            fix="move the data next to the model and save it with a relative location",
        )
    path = (base / rel).resolve()
    if base not in path.parents:
        raise ModelFileError(
            f"tensor {name!r}: external data location {location!r} leads outside the "
            "model's directory (through a symbolic link)",
            expected=f"a file inside {str(base)!r}",
            found=str(path),
            fix="copy the data into the model's directory",
        )
    if not path.is_file():
        raise ModelFileError(
            f"tensor {name!r}: external data file {location!r} does not exist",
            expected=f"the file {str(path)!r}",
            found="no such file",
            fix="copy the data file next to the model",
        )
    return path
