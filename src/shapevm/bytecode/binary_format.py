"""Layout of the binary bytecode format, shared by the writer and the reader.

All integers are little-endian. A file is::

    header          64 bytes: magic, version, sizes, CRC-32 of all bytes before DATA
    section table   32 bytes per section: kind, flags, offset, length, CRC-32 of the section
    sections        STRS (string table), CNST (constant table), FUNC (code), DATA (constants),
                    and since 1.1 the optional META (key/value string pairs)

``DATA`` starts on a 64-byte boundary, ends the file, and holds each constant's raw
little-endian bytes at a 64-byte aligned offset, so a loader maps the file and hands out
read-only NumPy views without copying. Every section has a checksum and the header's
covers every byte before ``DATA``; a loader checks all of them on every load, and ``DATA``
on request, since reading it costs time proportional to the weights. Nothing in the format
is executable: no pickle, no code.

Version 1.0 is the first format; 1.1 adds the optional META section, which 1.0 readers
skip. A reader accepts files of its own major version with any
minor version (it skips unknown section kinds) and refuses newer major versions.
"""

from __future__ import annotations

import struct
from typing import Final

MAGIC: Final = b"SHAPEVM\x00"
MAJOR: Final = 1
MINOR: Final = 1
HEADER = struct.Struct("<8sHHIQII32x")  # magic, major, minor, header size, file size,
HEADER_SIZE: Final = 64  # section count, header crc, reserved
SECTION = struct.Struct("<4sIQQI4x")  # kind, flags, offset, length, crc
ALIGN: Final = 64
NO_STRING: Final = 0xFFFFFFFF

STRS: Final = b"STRS"
CNST: Final = b"CNST"
FUNC: Final = b"FUNC"
DATA: Final = b"DATA"
META: Final = b"META"
REQUIRED_SECTIONS: Final = (STRS, CNST, FUNC, DATA)

MAX_RANK: Final = 64
MAX_STRING: Final = 1 << 20  # longest string the reader accepts (bytes)
MAX_DIM_TEXT: Final = 512  # longest symbolic dimension or constraint text

# register kinds
REG_TENSOR, REG_SHAPE = 0, 1
# dims in types: int, symbolic text, dynamic; spec dims add shape registers
DIM_INT, DIM_SYM, DIM_DYNAMIC, DIM_REG = 0, 1, 2, 3
# OP_CALL operands
ARG_REG, ARG_BOOL, ARG_INT, ARG_FLOAT = 0, 1, 2, 3
# attribute values; list elements are DIM_INT or DIM_SYM
ATTR_INT, ATTR_FLOAT, ATTR_BOOL, ATTR_STR, ATTR_LIST = 0, 1, 2, 3, 4
# shape expressions
EXPR_INT, EXPR_REG, EXPR_BIN = 0, 1, 2
BIN_OPS: Final = ("+", "-", "*", "//", "%")
CMP_OPS: Final = ("==", "!=", "<", "<=", ">", ">=")
# BRANCH_IF condition
COND_REG, COND_CMP = 0, 1

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def align(n: int, to: int = ALIGN) -> int:
    return -(-n // to) * to
