"""Public entry points of the binary format: `serialize`, `deserialize`, `save`, `load`.

The reader and the writer load at their first use: ``import shapevm`` does not need them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from shapevm.bytecode.verify import verify as _verify

if TYPE_CHECKING:
    from shapevm.bytecode.program import Program

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
    from shapevm.bytecode.binary_reader import decode, map_file

    buffer = map_file(data) if isinstance(data, (str, os.PathLike)) else data
    program = decode(buffer, check_data=check_data).program
    if verify:
        _verify(program)
    return program


def serialize(program: Program) -> bytes:
    """The program in the binary format (`shapevm.bytecode.binary_writer.serialize`)."""
    from shapevm.bytecode import binary_writer

    return binary_writer.serialize(program)


def save(program: Program, path: str | os.PathLike[str]) -> None:
    """Write the program to ``path`` in the binary format."""
    from shapevm.bytecode import binary_writer

    binary_writer.save(program, path)


def load(path: str | os.PathLike[str], *, verify: bool = True) -> Program:
    """`deserialize` from a file path."""
    return deserialize(path, verify=verify)


__all__ = ["deserialize", "load", "save", "serialize"]
