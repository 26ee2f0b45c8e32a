"""Binary form: round trips, zero-copy constants, versions, corruption, the v1 sample."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from shapevm.bytecode import (
    BytecodeFormatError,
    Constant,
    Program,
    VerifyError,
    deserialize,
    format_program,
    load,
    parse_program,
    save,
    serialize,
)
from shapevm.bytecode import binary_format as F
from tests.bytecode.programs import big_program, programs

DATA = Path(__file__).parent.parent / "data"
SAMPLE_V1 = DATA / "sample_v1.svbc"


def sections(blob: bytes) -> dict[bytes, tuple[int, int]]:
    """Section kind -> (offset, length), from the section table."""
    (count,) = struct.unpack_from("<I", blob, 24)
    out = {}
    for i in range(min(count, (len(blob) - F.HEADER_SIZE) // F.SECTION.size)):
        kind, _, start, length, _ = F.SECTION.unpack_from(blob, F.HEADER_SIZE + i * 32)
        out[kind] = (start, length)
    return out


def fix_checksums(blob: bytes | bytearray) -> bytes:
    """Recompute every checksum, so a test reaches the decoder behind them."""
    out = bytearray(blob)
    for i, (kind, (start, length)) in enumerate(sections(bytes(out)).items()):
        at = F.HEADER_SIZE + i * F.SECTION.size
        crc = zlib.crc32(out[start : start + length])
        out[at : at + F.SECTION.size] = F.SECTION.pack(kind, 0, start, length, crc)
    out[28:32] = bytes(4)
    data_start = sections(bytes(out)).get(F.DATA, (len(out), 0))[0]
    out[28:32] = struct.pack("<I", zlib.crc32(out[: min(data_start, len(out))]))
    return bytes(out)


def with_header(blob: bytes, **fields: int) -> bytes:
    """``blob`` with header fields replaced and the checksums fixed."""
    names = ["magic", "major", "minor", "header_size", "file_size", "count", "crc"]
    values = dict(zip(names, F.HEADER.unpack_from(blob, 0), strict=True))
    values.update(fields)
    return fix_checksums(F.HEADER.pack(*values.values()) + blob[F.HEADER_SIZE :])


@pytest.mark.parametrize("name", sorted(programs()))
def test_round_trip(name: str) -> None:
    program = programs()[name]
    assert deserialize(serialize(program)) == program


def test_negative_axes_in_attribute_lists_round_trip() -> None:
    program = parse_program(
        """
func @f(t0: f32[b, 3]) -> f32[b]
  L0:
    t1: f32[b] = OP_CALL sum(t0, axis=[-1])
    RETURN t1
"""
    )
    assert deserialize(serialize(program)) == program


def test_serialize_is_deterministic() -> None:
    program = programs()["consts"]
    assert serialize(program) == serialize(deserialize(serialize(program)))


def test_constants_are_zero_copy_read_only_views() -> None:
    blob = serialize(programs()["consts"])
    loaded = deserialize(blob)
    whole = np.frombuffer(blob, dtype=np.uint8)
    for const in loaded.constants:
        assert np.shares_memory(const.array, whole)
        assert not const.array.flags.writeable
    assert loaded.constants[0].array.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_constants_are_64_byte_aligned_in_the_file() -> None:
    program = Program(
        (), tuple(Constant(f"c{i}", np.arange(i + 1, dtype=np.int8)) for i in range(5))
    )
    blob = serialize(program)
    base = np.frombuffer(blob, dtype=np.uint8).ctypes.data
    for const in deserialize(blob).constants:
        assert (const.array.ctypes.data - base) % F.ALIGN == 0


def test_load_from_path_maps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.svbc"
    save(programs()["consts"], path)
    loaded = load(path)
    assert loaded == programs()["consts"]
    array = loaded.constants[0].array
    assert not array.flags.writeable and not array.flags.owndata
    base = array.base
    while base is not None and not hasattr(base, "madvise"):
        base = getattr(base, "base", getattr(base, "obj", None))
    assert base is not None, "constant is not a view of the memory map"


def test_writable_input_still_gives_read_only_constants() -> None:
    loaded = deserialize(bytearray(serialize(programs()["consts"])))
    assert not loaded.constants[0].array.flags.writeable


def test_big_endian_and_noncontiguous_constants_round_trip() -> None:
    arr = np.arange(12, dtype=">f4").reshape(3, 4).T
    program = Program((), (Constant("w", arr),))
    loaded = deserialize(serialize(program))
    np.testing.assert_array_equal(loaded.constants[0].array, arr)


def test_newer_major_version_is_refused_naming_both() -> None:
    blob = with_header(serialize(programs()["mlp"]), major=2, minor=3)
    with pytest.raises(BytecodeFormatError) as info:
        deserialize(blob)
    assert str(info.value) == (
        "byte 8 (0x8): file format version 2.3 is newer than this shapevm reads (1.1)\n"
        "  expected: major version 1 or older\n"
        "  found:    2.3\n"
        "  fix:      upgrade shapevm to read this file"
    )


def test_newer_minor_version_loads() -> None:
    blob = with_header(serialize(programs()["mlp"]), minor=7)
    assert deserialize(blob) == programs()["mlp"]


def test_bad_magic() -> None:
    with pytest.raises(BytecodeFormatError) as info:
        deserialize(b"PK\x03\x04" + bytes(100))
    assert str(info.value).splitlines()[:3] == [
        "byte 0 (0x0): not a shapevm bytecode file",
        "  expected: magic b'SHAPEVM\\x00'",
        "  found:    b'PK\\x03\\x04\\x00\\x00\\x00\\x00'",
    ]


def test_truncated_file() -> None:
    blob = serialize(programs()["mlp"])
    with pytest.raises(BytecodeFormatError) as info:
        deserialize(blob[:-10])
    assert "file size does not match the header" in str(info.value)
    with pytest.raises(BytecodeFormatError, match="file too short for the header"):
        deserialize(blob[:10])


def test_corrupt_code_section_fails_its_checksum() -> None:
    blob = bytearray(serialize(programs()["mlp"]))
    start, length = sections(bytes(blob))[F.FUNC]
    blob[start + length // 2] ^= 0x10
    with pytest.raises(BytecodeFormatError) as info:
        deserialize(bytes(blob))
    assert str(info.value).startswith(
        f"byte {start} (0x{start:x}): checksum mismatch in section FUNC (the file is corrupt)"
    )


def test_corrupt_padding_fails_the_header_checksum() -> None:
    blob = bytearray(serialize(programs()["mlp"]))
    start, length = sections(bytes(blob))[F.FUNC]
    gap = start + length  # padding before the 64-byte aligned DATA section
    assert sections(bytes(blob))[F.DATA][0] > gap
    blob[gap] ^= 1
    with pytest.raises(BytecodeFormatError, match="header checksum mismatch"):
        deserialize(bytes(blob))


def test_decoder_behind_the_checksums_reports_offsets() -> None:
    blob = bytearray(serialize(programs()["mlp"]))
    start, _ = sections(bytes(blob))[F.FUNC]
    blob[start : start + 4] = struct.pack("<I", 10**6)  # absurd function count
    with pytest.raises(BytecodeFormatError) as info:
        deserialize(fix_checksums(blob))
    assert str(info.value).splitlines()[0] == (
        f"byte {start} (0x{start:x}): count of functions is too large"
    )


def test_corrupt_constant_data_is_found_on_request() -> None:
    blob = bytearray(serialize(programs()["consts"]))
    blob[-1] ^= 0xFF
    deserialize(bytes(blob))  # not read by default: loading must not touch the weights
    with pytest.raises(BytecodeFormatError, match="checksum mismatch in section DATA"):
        deserialize(bytes(blob), check_data=True)


def test_invalid_program_loads_as_verify_error() -> None:
    text = "func @f(t0: f32[b]) -> f32[b]\n  L0:\n    RETURN t9\n"
    blob = serialize(parse_program(text))
    with pytest.raises(VerifyError, match="t9 is used before it is defined"):
        deserialize(blob)
    assert deserialize(blob, verify=False) == parse_program(text)


def test_integers_beyond_64_bits_are_refused() -> None:
    text = "func @f(t0: f32[b]) -> f32[b]\n  L0:\n    s0 = SHAPE_COMPUTE 99999999999999999999\n"
    with pytest.raises(ValueError, match="does not fit"):
        serialize(parse_program(text + "    RETURN t0\n"))


def test_sample_v1_file_loads_and_prints_its_golden_text() -> None:
    program = load(SAMPLE_V1)
    golden = (DATA / "sample_v1.txt").read_text(encoding="utf-8")
    assert format_program(program) == golden
    assert parse_program(golden) == program


def test_sample_v1_header_is_version_1() -> None:
    head = SAMPLE_V1.read_bytes()[:12]
    assert head[:8] == F.MAGIC and struct.unpack("<HH", head[8:12]) == (1, 0)


def test_big_program_round_trips() -> None:
    program = big_program(1000, 1 << 20)
    assert deserialize(serialize(program)) == program


def test_scalar_constants_keep_rank_zero() -> None:
    import numpy as np

    from shapevm.bytecode import Constant, Program

    program = Program((), (Constant("s", np.asarray(1.5, np.float32)),))
    back = deserialize(serialize(program))
    assert back.constants[0].array.shape == () and float(back.constants[0].array) == 1.5
