"""``shapevm import MODEL.onnx -o MODEL.svbc``: an ONNX model to verified shapevm bytecode.

``--dims "x=b,3,h,w"`` gives an input's shape (symbolic dimensions by name, as
`shapevm.symbolic_args_specs` reads them), ``--constraint "h >= 32"`` adds a constraint.
Prints the imported signature; the written file runs with ``shapevm run``, disassembles
with ``shapevm dis`` and verifies with ``shapevm validate``. Exit status: 0 imported, 1 the
model uses something shapevm does not support (every such node is listed), 2 the file is
unreadable or corrupt or an argument is malformed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO


def parse_dims(items: Sequence[str]) -> dict[str, str]:
    """``["x=b,3,h,w"]`` -> ``{"x": "b,3,h,w"}``."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, spec = item.partition("=")
        if not sep or not name.strip() or not spec.strip():
            raise ValueError(f"bad --dims {item!r}: expected INPUT=D0,D1,... e.g. x=b,3,h,w")
        out[name.strip()] = spec.strip()
    return out


def load_onnx(
    path: str, dims: dict[str, str] | None = None, constraints: Sequence[str] = ()
) -> Any:
    from shapevm.onnx import load

    return load(path, dims=dims or None, constraints=constraints)


def run_import(
    path: str,
    output: str | None,
    dims: Sequence[str] = (),
    constraints: Sequence[str] = (),
    file: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out, errors = file or sys.stdout, err or sys.stderr
    from shapevm.onnx import ModelFileError, UnsupportedModelError

    try:
        exp = load_onnx(path, parse_dims(dims), constraints)
    except UnsupportedModelError as exc:
        print(f"shapevm import: {exc}", file=errors)
        return 1
    except (ModelFileError, ImportError, ValueError) as exc:
        print(f"shapevm import: {exc}", file=errors)
        return 2
    target = Path(output) if output else Path(path).with_suffix(".svbc")
    exp.save(target)
    print(f"{exp!r}", file=out)
    print(f"wrote {target} ({target.stat().st_size} bytes)", file=out)
    return 0
