"""Public entry points of the binary format: `serialize`, `deserialize`, `save`, `load`."""

from __future__ import annotations

import os

from shapevm.bytecode.binary_reader import decode, map_file
from shapevm.bytecode.binary_writer import save, serialize
from shapevm.bytecode.program import Program
from shapevm.bytecode.verify import verify as _verify

Source = bytes | bytearray | memoryview | str | os.PathLike[str]


def deserialize(data: Source, *, verify: bool = True, check_data: bool = False) -> Program:
    """Load a program from bytes or from a file path (memory-mapped, zero copy).

    Constants come back as read-only NumPy views of the buffer or mapping. The verifier
    runs unless ``verify=False``; ``check_data=True`` also checksums the constant data
    (time proportional to the weights). Raises `BytecodeFormatError` for bad bytes and
    `VerifyError` for a well-formed but invalid program.

    >>> from shapevm.bytecode import parse_program
    >>> p = parse_program('''
    ... func @id(t0: f32[b]) -> f32[b]
    ...   L0:
    ...     RETURN t0
    ... ''')
    >>> deserialize(serialize(p)) == p
    True
    """
    buffer = map_file(data) if isinstance(data, (str, os.PathLike)) else data
    program = decode(buffer, check_data=check_data).program
    if verify:
        _verify(program)
    return program


def load(path: str | os.PathLike[str], *, verify: bool = True) -> Program:
    """`deserialize` from a file path."""
    return deserialize(path, verify=verify)


__all__ = ["deserialize", "load", "save", "serialize"]
