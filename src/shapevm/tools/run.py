"""``shapevm run FILE --shape NAME=3,256 ...``: run an exported file on random inputs.

FILE is an exported function (``.svbc``) or an ONNX model (``.onnx``, imported first).

Each array argument whose shape has symbolic dimensions needs ``--shape NAME=d0,d1,...``
(NAME is the argument's name or its position); arguments with static shapes take them.
Dimension variables passed as integers need ``--dim NAME=VALUE``. Prints the shapes and
dtypes of the results, the first call's latency and the median of the following calls.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from shapevm.bytecode.errors import BytecodeFormatError, VerifyError
from shapevm.frontend.export import Exported, load
from shapevm.shapes import DimExpr, ShapeError


class UsageError(ValueError):
    """A command-line argument is missing or malformed."""


def _parse_pairs(items: Sequence[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"bad {what} {item!r}: expected NAME=VALUE, e.g. x=3,256")
        out[name.strip()] = value.strip()
    return out


def _parse_shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.replace("x", ",").split(",") if d.strip())
    except ValueError:
        raise UsageError(f"bad shape {text!r}: expected integers separated by commas") from None
    if any(d < 0 for d in dims):
        raise UsageError(f"bad shape {text!r}: dimensions must be >= 0")
    return dims


def random_inputs(
    exp: Exported, shapes: dict[str, str], seed: int = 0
) -> tuple[list[Any], list[str]]:
    """Random arguments (in call order) for ``exp``; also the names of the array arguments."""
    rng = np.random.default_rng(seed)
    names = list(exp._arg_names)
    array_names = [n for n, k in zip(names, exp.leaf_kinds, strict=True) if k.is_array]
    arrays: list[Any] = []
    for i, (name, aval) in enumerate(zip(array_names, exp.in_avals, strict=True)):
        given = shapes.get(name, shapes.get(str(i)))
        if given is None:
            if any(isinstance(d, DimExpr) for d in aval.shape):
                sig = ", ".join(str(d) for d in aval.shape)
                raise UsageError(
                    f"argument {name!r} has the symbolic shape ({sig}): give its shape with "
                    f"--shape {name}=..."
                )
            shape = tuple(int(d) for d in aval.shape)
        else:
            shape = _parse_shape(given)
        arrays.append(random_array(rng, shape, aval.dtype))
    return arrays, array_names


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """Random data of ``dtype``: normal floats, fair booleans, integers from 0 to 9."""
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0, 10, size=shape).astype(dtype)


def run_file(
    path: str,
    shape_args: Sequence[str],
    dim_args: Sequence[str],
    repeat: int = 10,
    file: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out = file or sys.stdout
    errors = err or sys.stderr
    try:
        t0 = time.perf_counter()
        exp = _load(path)
        load_ms = (time.perf_counter() - t0) * 1e3
        shapes = _parse_pairs(shape_args, "--shape")
        dims = {k: int(v) for k, v in _parse_pairs(dim_args, "--dim").items()}
        arrays, _ = random_inputs(exp, shapes)
    except OSError as exc:
        print(f"shapevm run: cannot read {path}: {exc.strerror or exc}", file=errors)
        return 2
    except (BytecodeFormatError, VerifyError, ImportError) as exc:
        print(f"{path}: {type(exc).__name__}: {exc}", file=errors)
        return 2
    except (UsageError, ValueError) as exc:
        print(f"shapevm run: {exc}", file=errors)
        return 2
    missing = [d for d in exp.dim_args if d not in dims]
    if missing:
        print(f"shapevm run: give the dimension arguments with --dim {missing[0]}=N", file=errors)
        return 2
    leaves = _call_leaves(exp, arrays, dims)
    times: list[float] = []
    try:
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            result = exp.executable(*leaves[0], dims=leaves[1])
            times.append(time.perf_counter() - t0)
    except (ShapeError, TypeError, ValueError) as exc:
        print(f"shapevm run: {type(exc).__name__}: {exc}", file=errors)
        return 1
    print(f"{exp!r}", file=out)
    print(f"loaded in {load_ms:.2f} ms", file=out)
    for i, r in enumerate(result):
        print(f"result {i}: {r.dtype}{list(r.shape)}", file=out)
    first = times[0] * 1e3
    rest = statistics.median(times[1:]) * 1e3 if len(times) > 1 else first
    print(f"first call {first:.3f} ms, median of {len(times) - 1} more {rest:.3f} ms", file=out)
    return 0


def _load(path: str) -> Exported:
    if path.endswith(".onnx"):
        from shapevm.tools.onnx_import import load_onnx

        out: Exported = load_onnx(path)
        return out
    return load(path)


def _call_leaves(
    exp: Exported, arrays: list[Any], dims: dict[str, int]
) -> tuple[list[Any], dict[str, int]]:
    return arrays, {k: v for k, v in dims.items() if k in exp.dim_args}
